"""``aerolite dashboard``: the web console as a process of its own.

RocketMQ counterpart: rocketmq-dashboard's ``App`` (``java -jar rocketmq-dashboard.jar
--rocketmq.config.namesrvAddr=…``). Once it accepts connections it prints one line to stdout,
``ready dashboard=http://HOST:PORT``, as the broker commands print theirs.

Secrets never need the command line (where ``ps`` shows them): users also come from
``AEROLITE_DASHBOARD_USERS`` and the ACL secret key from ``AEROLITE_DASHBOARD_SECRET_KEY``,
which is how ``aerolite standalone`` hands them over.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import os
import signal
import ssl
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path

from client.dashboard.auth import hash_password, parse_users
from client.dashboard.server import ConsoleServer, ConsoleSettings
from client.errors import InvalidArgumentError
from remoting.acl import SessionCredentials
from remoting.tls import client_context

log = logging.getLogger("client.dashboard")

KEYS = {
    "dashboardUsers": "name:password;name:password (or name:scrypt$… hashes)",
    "dashboardUsersFile": "a file of name=hash lines",
    "dashboardAccessKey": "ACL accessKey the console signs admin requests with",
    "dashboardSecretKey": "its secretKey (better: AEROLITE_DASHBOARD_SECRET_KEY)",
    "dashboardSampleSeconds": "how often the live figures are sampled (default 5)",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="aerolite dashboard",
        description="The Aerolite web console for a RocketMQ cluster (Aerolite or Apache 4.x).",
    )
    p.add_argument("-n", "--namesrv", help='name server list, "h1:9876;h2:9876" (or NAMESRV_ADDR)')
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks one)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a console key: " + "; ".join(f"{k} ({v})" for k, v in KEYS.items()),
    )
    p.add_argument(
        "--hash-password",
        action="store_true",
        help="read a password (twice) and print its hash for dashboardUsers/dashboardUsersFile",
    )
    p.add_argument("--tls", action="store_true", help="reach the name server and brokers over TLS")
    p.add_argument("--tls-ca", type=Path, metavar="PEM", help="check their certificates with it")
    p.add_argument(
        "--tls-insecure", action="store_true", help="with --tls: check no certificate (tests)"
    )
    p.add_argument("--https-cert", type=Path, metavar="PEM", help="serve HTTPS with this chain")
    p.add_argument("--https-key", type=Path, metavar="PEM", help="and this key")
    # aerolite standalone runs the console as its child: stdin closing means it has gone
    p.add_argument("--exit-with-stdin", action="store_true", help=argparse.SUPPRESS)
    return p


def _settings(args: argparse.Namespace) -> ConsoleSettings:
    values: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgumentError(f"--set {item!r}: expected KEY=VALUE")
        if key not in KEYS:
            raise InvalidArgumentError(
                f"unknown console key {key!r} (known: {', '.join(sorted(KEYS))})"
            )
        values[key] = value
    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR")
    if not namesrv:
        raise InvalidArgumentError("no name server: pass -n HOST:PORT or set NAMESRV_ADDR")
    if not 0 <= args.port < 65536:
        raise InvalidArgumentError(f"--port {args.port}: not a port (0-65535)")
    inline = ";".join(
        filter(
            None, [values.get("dashboardUsers", ""), os.environ.get("AEROLITE_DASHBOARD_USERS", "")]
        )
    )
    file = values.get("dashboardUsersFile")
    users = parse_users(inline, Path(file) if file else None)
    access = values.get("dashboardAccessKey", "")
    secret = values.get("dashboardSecretKey") or os.environ.get("AEROLITE_DASHBOARD_SECRET_KEY", "")
    if bool(access) != bool(secret):
        raise InvalidArgumentError("dashboardAccessKey and dashboardSecretKey go together")
    try:
        interval = float(values.get("dashboardSampleSeconds", "5"))
    except ValueError:
        interval = -1.0
    if not 0.2 <= interval <= 600:
        raise InvalidArgumentError("dashboardSampleSeconds must be a number from 0.2 to 600")
    return ConsoleSettings(
        namesrv=namesrv,
        host=args.host,
        port=args.port,
        users=users,
        credentials=SessionCredentials(access, secret) if access else None,
        sample_interval_s=interval,
        tls=_tls(args),
        https=_https(args),
    )


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not (args.tls or args.tls_ca):
        return None
    try:
        return client_context(args.tls_ca, verify=not args.tls_insecure)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgumentError(f"--tls-ca {args.tls_ca}: cannot load: {exc}") from None


def _https(args: argparse.Namespace) -> ssl.SSLContext | None:
    if args.https_cert is None and args.https_key is None:
        return None
    if args.https_cert is None or args.https_key is None:
        raise InvalidArgumentError("--https-cert and --https-key go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(args.https_cert, args.https_key)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgumentError(f"--https-cert/--https-key: cannot load: {exc}") from None
    return context


async def _serve(settings: ConsoleSettings, *, exit_with_stdin: bool) -> None:
    server = ConsoleServer(settings)
    await server.start()
    print(f"ready dashboard={server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(_watch_stdin(stop)) if exit_with_stdin else None
    try:
        await stop.wait()
    finally:
        if watcher is not None:
            watcher.cancel()
        await server.shutdown()


async def _watch_stdin(stop: asyncio.Event) -> None:
    """Set ``stop`` when stdin reaches its end: the parent that started us has exited (even
    by ``kill -9``), and a console of a standalone broker that is gone has nothing to show."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    with contextlib.suppress(ConnectionError):
        while await reader.read(4096):
            pass
    stop.set()


def _hash_interactively() -> int:
    """Asked twice on a terminal; read as one line from a pipe (``echo … | …``)."""
    if not sys.stdin.isatty():
        line = sys.stdin.readline().rstrip("\n")
        print(hash_password(line))
        return 0
    first = getpass.getpass("password: ")
    if first != getpass.getpass("again: "):
        print("the two passwords differ", file=sys.stderr)
        return 1
    print(hash_password(first))
    return 0


def _run(main: Coroutine[None, None, None]) -> None:
    if os.environ.get("AEROLITE_LOOP") == "asyncio":
        asyncio.run(main)
        return
    try:
        import uvloop  # noqa: PLC0415 - absent on Windows, where the stdlib loop serves
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    if args.hash_password:
        try:
            return _hash_interactively()
        except (InvalidArgumentError, EOFError) as exc:
            print(f"aerolite dashboard: {exc or 'no password given'}", file=sys.stderr)
            return 1
    try:
        settings = _settings(args)
    except InvalidArgumentError as exc:
        print(f"aerolite dashboard: {exc}", file=sys.stderr)
        return 2
    try:
        _run(_serve(settings, exit_with_stdin=args.exit_with_stdin))
    except OSError as exc:
        print(
            f"aerolite dashboard: cannot listen on {settings.host}:{settings.port}: "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
