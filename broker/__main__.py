"""The ``aerolite`` command: ``standalone``, ``namesrv`` and ``broker``.

RocketMQ counterpart: ``NamesrvStartup`` and ``BrokerStartup`` (``mqnamesrv``,
``mqbroker -c broker.conf``), plus a standalone mode RocketMQ lacks: a name server and a
broker in one process.

Once every listener accepts connections the process prints exactly one line to stdout,
``ready namesrv=HOST:PORT broker=HOST:PORT`` (only the parts it runs), and flushes it.
SIGTERM or SIGINT stops it cleanly (exit 0); a second signal exits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import structlog

from broker.broker import Broker
from broker.config import (
    BrokerConfig,
    NamesrvConfig,
    load_config,
    parse_overrides,
    with_changes,
)
from broker.logs import configure_logging
from broker.namesrv import NameServer
from remoting.errors import ConfigError

log = structlog.get_logger(__name__)

EXIT_CONFIG = 2  # argparse uses 2 for usage errors; a bad config is one


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aerolite",
        description="Aerolite: Apache RocketMQ rebuilt in Python.",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument("--log-json", action="store_true", default=None, help="JSON log lines")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("-c", "--config", type=Path, help="broker.conf (.properties) or .toml")
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config key (repeatable)",
        )

    sa = sub.add_parser("standalone", help="name server and broker in one process")
    sa.add_argument("--store", type=Path, help="store root (default ~/aerolite/store)")
    sa.add_argument("--host", help="address to bind and advertise (default 127.0.0.1)")
    sa.add_argument("--namesrv-port", type=int, default=9876)
    sa.add_argument("--listen-port", type=int, help="broker port (default 10911)")
    common(sa)

    ns = sub.add_parser("namesrv", help="a name server")
    ns.add_argument("--host", help="address to bind (default 127.0.0.1)")
    ns.add_argument("--port", type=int, help="port (default 9876)")
    common(ns)

    br = sub.add_parser("broker", help="a broker")
    br.add_argument("--namesrv", help='name server list, "h1:9876;h2:9876"')
    br.add_argument("--store", type=Path, help="store root (default ~/aerolite/store)")
    br.add_argument("--host", help="address to bind and advertise (default 127.0.0.1)")
    br.add_argument("--listen-port", type=int, help="broker port (default 10911)")
    common(br)
    return parser


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


async def _serve(args: argparse.Namespace) -> int:
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

    async with AsyncExitStack() as stack:
        parts: list[str] = []
        if args.command == "standalone":
            broker_config = _broker_config(args)
            namesrv_config = NamesrvConfig(
                bind_address=broker_config.bind_address,
                listen_port=args.namesrv_port,
                kv_config_path=broker_config.store.root_dir / "config" / "kvConfig.json",
            )
            namesrv = await stack.enter_async_context(NameServer(namesrv_config))
            broker_config = with_changes(broker_config, namesrv_addr=namesrv.address)
            broker = await stack.enter_async_context(Broker(broker_config))
            parts = [f"namesrv={namesrv.address}", f"broker={broker.address}"]
        elif args.command == "namesrv":
            namesrv = await stack.enter_async_context(NameServer(_namesrv_config(args)))
            parts = [f"namesrv={namesrv.address}"]
        else:
            broker = await stack.enter_async_context(Broker(_broker_config(args)))
            parts = [f"broker={broker.address}"]
        sys.stdout.write("ready " + " ".join(parts) + "\n")
        sys.stdout.flush()
        await stop.wait()
    log.info("stopped")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(json=args.log_json, level=args.log_level)
    try:
        # Validate the whole configuration before any port opens.
        if args.command in ("standalone", "broker"):
            _broker_config(args)
        else:
            _namesrv_config(args)
    except ConfigError as exc:
        print(f"aerolite {args.command}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return _run(_serve(args))
    except OSError as exc:
        print(f"aerolite {args.command}: {exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
