"""The ``aerolite`` command: ``standalone``, ``namesrv``, ``broker``, ``cluster up`` and
``ping``.

RocketMQ counterpart: ``NamesrvStartup`` and ``BrokerStartup`` (``mqnamesrv``,
``mqbroker -c broker.conf``), plus a standalone mode RocketMQ lacks: a name server and a
broker in one process.

Once every listener accepts connections the process prints exactly one line to stdout,
``ready namesrv=HOST:PORT broker=HOST:PORT`` (only the parts it runs), then
``metrics=HOST:PORT`` when it serves metrics, and flushes it. SIGTERM or SIGINT stops it
cleanly (exit 0); a second signal exits at once.

A start error (a bad config, a port that cannot be bound, a store another process holds)
is one line on stderr, ``aerolite COMMAND: what went wrong``, and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.metadata
import os
import platform
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Coroutine, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import structlog

import codec
from broker.broker import RECOVERING_REMARK, Broker
from broker.cluster import (
    DEFAULT_SUBNET,
    ComposeError,
    ServicePlan,
    load_compose,
    plan,
    print_plan,
    run_up,
)
from broker.config import (
    BrokerConfig,
    NamesrvConfig,
    client_ssl_context,
    load_config,
    parse_overrides,
    server_ssl_context,
    with_changes,
)
from broker.console_child import start_console
from broker.logs import configure_logging
from broker.metrics import NamesrvCollector
from broker.namesrv import NameServer
from remoting.bodies import KVTable
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.errors import ConfigError, RocketMQError
from remoting.tls import client_context
from store.errors import StoreLockedError

log = structlog.get_logger(__name__)

# A start refused before the ready line: a bad config (argparse too uses 2 for usage errors),
# a port that cannot be bound, a store another process holds.
EXIT_START = 2


def _version() -> str:
    """``aerolite 0.1.0 (CPython 3.11.7, speedups: compiled)``."""
    try:
        version = importlib.metadata.version("aerolite")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        version = "unknown"
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"aerolite {version} ({python}, speedups: {codec.SPEEDUPS})"


class _PrintVersion(argparse.Action):
    """``--version`` printed on one line (argparse's own action wraps it to the terminal)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        print(_version())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aerolite",
        description="Aerolite: Apache RocketMQ rebuilt in Python.",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument("--log-json", action="store_true", default=None, help="JSON log lines")
    parser.add_argument(
        "--version", nargs=0, action=_PrintVersion, help="version, Python, codec speedups"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_server_commands(sub)
    _add_cluster_command(sub)
    _add_tool_commands(sub)
    return parser


def _add_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", type=Path, help="broker.conf (.properties) or .toml")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (repeatable)",
    )


def _add_server_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``standalone``, ``namesrv``, ``broker``: the processes that serve."""
    sa = sub.add_parser("standalone", help="name server and broker in one process")
    sa.add_argument("--store", type=Path, help="store root (default ~/aerolite/store)")
    sa.add_argument("--host", help="address to bind and advertise (default 127.0.0.1)")
    sa.add_argument("--namesrv-port", type=int, default=9876)
    sa.add_argument("--listen-port", type=int, help="broker port (default 10911)")
    _add_config_options(sa)

    ns = sub.add_parser("namesrv", help="a name server")
    ns.add_argument("--host", help="address to bind (default 127.0.0.1)")
    ns.add_argument("--port", type=int, help="port (default 9876)")
    _add_config_options(ns)

    br = sub.add_parser("broker", help="a broker")
    br.add_argument("--namesrv", help='name server list, "h1:9876;h2:9876"')
    br.add_argument("--store", type=Path, help="store root (default ~/aerolite/store)")
    br.add_argument("--host", help="address to bind and advertise (default 127.0.0.1)")
    br.add_argument("--listen-port", type=int, help="broker port (default 10911)")
    _add_config_options(br)


def _add_cluster_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``cluster up``: a compose file's services as local processes (broker/cluster.py)."""
    cl = sub.add_parser("cluster", help="run a docker-compose cluster as local processes")
    cl_sub = cl.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    up = cl_sub.add_parser("up", help="start every service; Ctrl-C stops them all")
    up.add_argument("-f", "--file", type=Path, default=Path("docker/docker-compose.yml"))
    up.add_argument(
        "--data",
        type=Path,
        help="where named volumes, homes and logs live (default ~/aerolite/cluster/<name>)",
    )
    up.add_argument(
        "--subnet",
        default=DEFAULT_SUBNET,
        help="loopback base: service k gets its last octet k (default 127.0.10.0)",
    )
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config key for every broker (repeatable)",
    )
    up.add_argument("--dry-run", action="store_true", help="print the commands and exit")


def _add_tool_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``admin`` and ``ping``: clients of a running cluster."""
    # The admin tool is a client of the protocol and lives in the client package (the
    # broker never imports client code); `aerolite admin …` hands the process over to it.
    sub.add_parser(
        "admin", help="mqadmin: manage name servers and brokers", add_help=False
    ).add_argument("admin_args", nargs=argparse.REMAINDER)
    sub.add_parser(
        "dashboard",
        help="the web console for a cluster: aerolite dashboard -n NAMESRV [--port 8080]",
        add_help=False,
    ).add_argument("dashboard_args", nargs=argparse.REMAINDER)

    ping = sub.add_parser(
        "ping", help="is a name server, broker or web console answering? (healthcheck)"
    )
    ping.add_argument("address", help="HOST:PORT, or the console's http(s)://HOST:PORT/healthz")
    ping.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    ping.add_argument(
        "--tls",
        action="store_true",
        help="dial with TLS (for tlsServerMode=enforcing); the certificate is not checked "
        "unless --tls-ca is given",
    )
    ping.add_argument("--tls-ca", type=Path, metavar="PEM", help="check the server against it")


def _broker_config(args: argparse.Namespace) -> BrokerConfig:
    overrides = parse_overrides(args.set)
    if args.store is not None:
        overrides["storePathRootDir"] = str(args.store)
    if args.host is not None:
        overrides["bindAddress"] = args.host
    if args.listen_port is not None:
        overrides["listenPort"] = str(args.listen_port)
    if getattr(args, "namesrv", None):
        overrides["namesrvAddr"] = args.namesrv
    config = load_config(BrokerConfig, args.config, overrides)
    env_namesrv = os.environ.get("NAMESRV_ADDR")
    if args.command == "broker" and config.namesrv_addr is None and env_namesrv:
        # RocketMQ's convention: the environment names the name servers when nothing else does.
        config = with_changes(config, namesrv_addr=env_namesrv)
    return config


def _namesrv_config(args: argparse.Namespace) -> NamesrvConfig:
    overrides = parse_overrides(args.set)
    if args.host is not None:
        overrides["bindAddress"] = args.host
    port = getattr(args, "port", None)
    if port is not None:
        overrides["listenPort"] = str(port)
    config = load_config(NamesrvConfig, args.config, overrides)
    if config.kv_config_path is None:
        # RocketMQ keeps it in ~/namesrv/kvConfig.json; ours sits beside the default store.
        config = with_changes(
            config, kv_config_path=Path.home() / "aerolite" / "namesrv" / "kvConfig.json"
        )
    return config


def _stop_on_signals() -> asyncio.Event:
    """An event set by the first SIGTERM or SIGINT; a second one exits at once."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            log.warning("second_signal_exit", signal=signal.Signals(signum).name)
            os._exit(1)
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    return stop


def _metrics_part(address: str, metrics_port: int) -> list[str]:
    """``metrics=HOST:PORT`` on the host of the listener beside it, if metrics are served."""
    if not metrics_port:
        return []
    return [f"metrics={address.rpartition(':')[0]}:{metrics_port}"]


def _grpc_part(broker: Broker) -> list[str]:
    """``grpc=HOST:PORT``: where RocketMQ 5 clients connect, if the broker serves them."""
    if not broker.grpc.port:
        return []
    return [f"grpc={broker.address.rpartition(':')[0]}:{broker.grpc.port}"]


async def _start_standalone(
    args: argparse.Namespace, broker_config: BrokerConfig, stack: AsyncExitStack
) -> list[str]:
    """A name server, a broker registered with it and (unless disabled) the web console,
    entered into ``stack``: the ready line's parts."""
    namesrv_config = NamesrvConfig(
        bind_address=broker_config.bind_address,
        listen_port=args.namesrv_port,
        kv_config_path=broker_config.store.root_dir / "config" / "kvConfig.json",
        metrics_enable=False,  # its families go out on the broker's endpoint
        # The process's one TLS setting: a plain name server beside an enforcing
        # broker would be a listener that takes plaintext.
        tls_server_mode=broker_config.tls_server_mode,
        tls_server_cert_path=broker_config.tls_server_cert_path,
        tls_server_key_path=broker_config.tls_server_key_path,
        tls_server_trust_cert_path=broker_config.tls_server_trust_cert_path,
    )
    namesrv = await stack.enter_async_context(NameServer(namesrv_config))
    broker_config = with_changes(broker_config, namesrv_addr=namesrv.address)
    broker = Broker(broker_config)
    broker.extra_collectors.append(NamesrvCollector(namesrv))
    broker = await stack.enter_async_context(broker)
    namesrv.metrics_port = broker.metrics_port  # its families are on that endpoint
    parts = [f"namesrv={namesrv.address}", f"broker={broker.address}"]
    parts += _metrics_part(broker.address, broker.metrics_port)
    parts += _grpc_part(broker)
    if broker_config.dashboard_enable:
        console = await start_console(broker_config, namesrv.address)
        stack.push_async_callback(console.stop)
        parts.append(f"dashboard={console.url}")
    return parts


async def _serve(args: argparse.Namespace, config: BrokerConfig | NamesrvConfig) -> int:
    """Run the command's servers with ``config`` (the broker's for standalone) until a
    signal; print the ready line once every listener accepts."""
    if isinstance(config, BrokerConfig):
        # Every line this process logs names its broker: one grep over a fleet's logs.
        # Bound before anything else runs, so callbacks (signals too) inherit it.
        structlog.contextvars.bind_contextvars(
            cluster=config.broker_cluster_name,
            broker=config.broker_name,
            broker_id=config.broker_id,
        )
    else:
        structlog.contextvars.bind_contextvars(role="namesrv")
    stop = _stop_on_signals()
    async with AsyncExitStack() as stack:
        parts: list[str] = []
        if args.command == "standalone":
            assert isinstance(config, BrokerConfig)
            parts = await _start_standalone(args, config, stack)
        elif isinstance(config, NamesrvConfig):
            namesrv = await stack.enter_async_context(NameServer(config))
            parts = [f"namesrv={namesrv.address}"]
            parts += _metrics_part(namesrv.address, namesrv.metrics_port)
        else:
            broker = await stack.enter_async_context(Broker(config))
            parts = [f"broker={broker.address}"]
            parts += _metrics_part(broker.address, broker.metrics_port)
            parts += _grpc_part(broker)
        # What start-up made (modules, configs, the recovered tables) lives as long as the
        # process: frozen, it is left out of every later full collection, whose pause on the
        # loop would otherwise grow with it (and hold sends in their lanes).
        gc.collect()
        gc.freeze()
        sys.stdout.write("ready " + " ".join(parts) + "\n")
        sys.stdout.flush()
        await stop.wait()
    log.info("stopped")
    return 0


def _cluster_data(args: argparse.Namespace, compose: Path) -> Path:
    if args.data is not None:
        return Path(args.data).resolve()
    try:
        name = str(load_compose(compose).get("name") or compose.resolve().parent.name)
    except ComposeError:
        name = "cluster"
    return Path.home() / "aerolite" / "cluster" / name


def _cluster_plans(args: argparse.Namespace) -> list[ServicePlan]:
    for item in args.set:
        if "=" not in item:
            raise ConfigError(f"--set {item!r} is not key=value")
    return plan(
        args.file,
        data_dir=_cluster_data(args, args.file),
        subnet=args.subnet,
        broker_overrides=args.set,
    )


async def _cluster_up(args: argparse.Namespace, plans: list[ServicePlan]) -> int:
    stop = _stop_on_signals()
    return await run_up(plans, _cluster_data(args, args.file), stop)


async def _ping(args: argparse.Namespace) -> int:
    """Any well-formed reply counts: a name server answers this broker code with
    REQUEST_CODE_NOT_SUPPORTED, and that proves its reactor is serving. A broker whose
    store dispatch has failed (its consume queues stopped growing) is unhealthy: exit 1,
    so a container healthcheck says so rather than a queue silently standing still. So is
    a broker still recovering its store (it answers, serving nothing yet): exit 1 with how
    far the recovery got."""
    if args.address.startswith(("http://", "https://")):
        return await asyncio.to_thread(_ping_http, args)
    started = time.perf_counter()
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    try:
        ssl_context = None
        if args.tls or args.tls_ca is not None:
            # A healthcheck asks "is it serving?", not "is it who it says": without a CA
            # to check against, an encrypted unchecked connection is the useful default.
            ssl_context = client_context(args.tls_ca, verify=args.tls_ca is not None)
        config = ClientConfig(connect_timeout_s=args.timeout, ssl_context=ssl_context)
        async with RemotingClient(config) as client:
            response = await client.invoke(args.address, request, args.timeout)
    except (RocketMQError, OSError, ValueError, ssl.SSLError) as exc:
        print(f"aerolite ping: {args.address}: {exc}", file=sys.stderr)
        return 1
    ms = (time.perf_counter() - started) * 1000
    remark = response.remark or ""
    if remark.startswith(RECOVERING_REMARK):
        # Up, but not serving yet: not healthy, and the line says how far it got.
        print(
            f"aerolite ping: {args.address}: {remark.removeprefix(RECOVERING_REMARK)}",
            file=sys.stderr,
        )
        return 1
    if response.code == 0 and response.body:
        with contextlib.suppress(ValueError, AttributeError):
            status = KVTable.decode(response.body).table.get("dispatchStatus", "OK")
            if status != "OK":
                print(
                    f"aerolite ping: {args.address}: unhealthy: dispatch {status}", file=sys.stderr
                )
                return 1
    print(f"ok {args.address} code={response.code} {ms:.1f} ms")
    return 0


def _ping_http(args: argparse.Namespace) -> int:
    """``aerolite ping http(s)://…``: the web console (``/healthz``) or any page answers 2xx.
    Under https the certificate is checked only against ``--tls-ca``, as for the broker."""
    started = time.perf_counter()
    ssl_context = None
    if args.address.startswith("https://"):
        ssl_context = client_context(args.tls_ca, verify=args.tls_ca is not None)
    try:
        # The scheme is http or https (checked above): no file:// or custom opener here.
        with urllib.request.urlopen(  # noqa: S310
            args.address, timeout=args.timeout, context=ssl_context
        ) as answer:
            status = int(answer.status)
            first = answer.readline(200).decode("utf-8", "replace").strip()
    except urllib.error.HTTPError as exc:
        print(f"aerolite ping: {args.address}: HTTP {exc.code} {exc.reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError, ValueError, ssl.SSLError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        print(f"aerolite ping: {args.address}: {reason}", file=sys.stderr)
        return 1
    ms = (time.perf_counter() - started) * 1000
    print(f"ok {args.address} status={status} {ms:.1f} ms" + (f": {first}" if first else ""))
    return 0


def _run(main: Coroutine[None, None, int]) -> int:
    # AEROLITE_LOOP=asyncio runs on the stdlib loop (CI runs the suite once that way).
    if os.environ.get("AEROLITE_LOOP") == "asyncio":
        return asyncio.run(main)
    try:
        import uvloop  # noqa: PLC0415 - absent on Windows, where the stdlib loop serves
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def _exec_client(module: str, args: Sequence[str]) -> int:
    """``aerolite admin …`` is ``mqadmin …`` and ``aerolite dashboard …`` the web console:
    clients of the cluster, so this process is replaced with the client's module."""
    argv = [sys.executable, "-m", module, *args]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)  # noqa: S606 - our own module, by design a new program


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["admin"]:
        return _exec_client("client.admin_cli", raw[1:])
    if raw[:1] == ["dashboard"]:
        return _exec_client("client.dashboard", raw[1:])
    args = _parser().parse_args(argv)
    configure_logging(json=args.log_json, level=args.log_level)
    if args.command == "ping":
        return _run(_ping(args))
    if args.command == "cluster":
        try:
            plans = _cluster_plans(args)
        except ConfigError as exc:
            print(f"aerolite cluster: {exc}", file=sys.stderr)
            return EXIT_START
        if args.dry_run:
            print_plan(plans)
            return 0
        try:
            return _run(_cluster_up(args, plans))
        except ComposeError as exc:
            print(f"aerolite cluster: {exc}", file=sys.stderr)
            return 1
    config: BrokerConfig | NamesrvConfig
    try:
        # The whole configuration, loaded once and checked before any port opens.
        if args.command in ("standalone", "broker"):
            config = _broker_config(args)
        else:
            config = _namesrv_config(args)
        server_ssl_context(config)  # certificates are read before binding
        if isinstance(config, BrokerConfig):
            client_ssl_context(config)
    except ConfigError as exc:
        print(f"aerolite {args.command}: {exc}", file=sys.stderr)
        return EXIT_START
    try:
        return _run(_serve(args, config))
    except ConfigError as exc:  # a part that would not start (the web console's port taken)
        print(f"aerolite {args.command}: {exc}", file=sys.stderr)
        return EXIT_START
    except OSError as exc:
        # A listener that cannot bind: the message names the address (and the key, where
        # the server knows it).
        print(f"aerolite {args.command}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_START
    except StoreLockedError:
        assert isinstance(config, BrokerConfig)  # only a broker has a store
        print(
            f"aerolite {args.command}: store {config.store.root_dir} is locked: another "
            "process holds it (a broker already running on it?)",
            file=sys.stderr,
        )
        return EXIT_START


if __name__ == "__main__":
    sys.exit(main())
