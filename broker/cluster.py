"""``aerolite cluster up -f docker/docker-compose.yml``: a compose file's services as local
processes.

RocketMQ counterpart: none in the broker itself; RocketMQ ships docker-compose files
(rocketmq-docker) and the ``mqnamesrv`` / ``mqbroker`` scripts an operator runs per machine.
This launcher runs the exact topology a compose file describes on one machine without a
Docker engine: for development, for demos, and for the tests that prove the cluster works.

Each service gets its own loopback address (``127.0.10.1``, ``127.0.10.2``, … by default), so
every service keeps the ports its file gives it, as it would in its own container. What only
makes sense inside Docker is translated, and nothing else:

- ``0.0.0.0`` and every compose service name used as a host become that service's address;
- container paths under a volume's target become host paths (named volumes live under
  ``--data``; bind mounts are relative to the compose file), including paths in the
  ``-c`` config file, which is read and its host and path keys passed on as ``--set``;
- ``brokerIP1`` (what clients dial) and ``brokerIP2`` (what peers dial) are both the
  service's own address here: on one machine the two are the same;
- ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}`` and ``$$`` are interpolated as compose
  does, from the environment.

A ``dashboard`` service (the web console, ``aerolite dashboard -n …``) runs the same way: its
``-n`` list and ``--host`` translated, no broker settings added. The compose file puts it on
the host's network (``network_mode: host``), where ``127.0.0.1:9876`` is whichever service
publishes port 9876: here that address becomes the publishing service's own.

Services start in ``depends_on`` order; a service counts as up once it prints its ``ready``
line, the same signal the image's healthcheck stands for. Each child's output goes to
``<data>/logs/<service>.log``; ``<data>/cluster.json`` records every service's pid, address
and metrics endpoint, and so does a ``service NAME pid=… ROLE=HOST:PORT metrics=HOST:PORT``
line on stdout per service before the launcher's own ``ready`` line. SIGTERM or SIGINT stops
the services in reverse order, each drained and flushed; every stop is logged
(``cluster_service_stopped``, with its exit code) and a last line on stdout,
``stopped N services: NAME=CODE …``, sums them up. The launcher exits 0 when every service
exited 0, else 1.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import structlog
import yaml

from broker.config import read_config_file
from remoting.errors import ConfigError

log = structlog.get_logger(__name__)

ROLES = ("namesrv", "broker", "standalone", "dashboard")
DEFAULT_SUBNET = "127.0.10.0"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
# Keys of a broker config file whose values name hosts or container paths.
_HOST_KEYS = ("namesrvAddr", "haMasterAddress")
_PATH_KEYS = ("storePathRootDir", "kvConfigPath")
_DROPPED_KEYS = ("brokerIP1", "brokerIP2", "bindAddress")
_VALUED = frozenset({"-c", "--config", "--store", "--host", "--namesrv", "-n", "--set"})
_ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - recognised in compose commands, never bound here
_LOOPBACK_NAMES = ("127.0.0.1", "localhost")
_INTERPOLATION = re.compile(
    r"\$(?:\$"  # $$: a literal $
    r"|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}"  # ${VAR}, ${VAR:-x}, ${VAR?msg}
    r"|([A-Za-z_][A-Za-z0-9_]*))"  # $VAR
)


class ComposeError(ConfigError):
    """The compose file cannot be run: the message names the service and the problem."""


@dataclass(frozen=True, slots=True)
class Volume:
    source: Path  # on this machine
    target: PurePosixPath  # in the container


@dataclass(slots=True)
class ServicePlan:
    """One compose service, translated: ``argv`` follows ``aerolite``."""

    name: str
    host: str
    role: str
    argv: list[str]
    depends_on: tuple[str, ...]
    home: Path
    listen: str = ""  # HOST:PORT of its broker, or name server; known once it is ready
    namesrv: str = ""  # HOST:PORT of its name server (namesrv and standalone)
    metrics: str = ""  # HOST:PORT of its Prometheus endpoint, if it serves one
    pid: int = 0
    stop_requested: bool = False  # the launcher sent SIGTERM: its exit is no surprise
    process: asyncio.subprocess.Process | None = field(default=None, repr=False)


def interpolate(text: str, env: Mapping[str, str], where: str) -> str:
    """Compose's variable substitution.

    Raises:
        ComposeError: ``${VAR?message}`` / ``${VAR:?message}`` with VAR unset (or empty).
    """

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        value = env.get(name)
        if op is None:
            return value or ""
        empty_counts = op.startswith(":")
        missing = value is None or (empty_counts and value == "")
        if op.endswith("-"):
            return arg if missing else str(value)
        if missing:
            raise ComposeError(f"{where}: variable {name} is required: {arg or 'not set'}")
        return str(value)

    return _INTERPOLATION.sub(sub, text)


def load_compose(path: Path) -> dict[str, Any]:
    """The compose file as a mapping, with its basic shape checked.

    Raises:
        ComposeError: the file is missing, is not YAML, or has no services.
    """
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ComposeError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ComposeError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        raise ComposeError(f"{path}: no 'services' mapping")
    if not doc["services"]:
        raise ComposeError(f"{path}: 'services' is empty")
    return doc


def _command(name: str, svc: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    entrypoint = svc.get("entrypoint")
    if entrypoint is not None:
        first = entrypoint if isinstance(entrypoint, str) else (entrypoint or [""])[0]
        if PurePosixPath(str(first).split()[0] if first else "").name != "aerolite":
            raise ComposeError(f"service {name}: entrypoint {entrypoint!r} is not aerolite")
    raw = svc.get("command")
    if raw is None:
        raise ComposeError(f"service {name}: no command ({', '.join(ROLES)})")
    words = shlex.split(raw) if isinstance(raw, str) else [str(w) for w in raw]
    words = [interpolate(w, env, f"service {name}") for w in words]
    if not words or words[0] not in ROLES:
        raise ComposeError(f"service {name}: command must start with one of {', '.join(ROLES)}")
    return words


def _volumes(
    name: str, svc: Mapping[str, Any], base: Path, data: Path, declared: set[str]
) -> list[Volume]:
    out = []
    for item in svc.get("volumes") or []:
        if isinstance(item, str):
            parts = item.split(":")
            if len(parts) < 2:
                continue  # an anonymous volume: nothing to map
            source, target = parts[0], parts[1]
        elif isinstance(item, dict) and "target" in item:
            source, target = str(item.get("source", "")), str(item["target"])
        else:
            raise ComposeError(f"service {name}: volume {item!r} is not understood")
        if source.startswith((".", "/", "~")):
            host = (base / Path(source).expanduser()).resolve()
        else:
            if source not in declared:
                raise ComposeError(f"service {name}: volume {source!r} is not declared")
            host = data / "volumes" / source
        out.append(Volume(host, PurePosixPath(target)))
    # The longest target first: /var/lib/aerolite/store wins over /var/lib/aerolite.
    out.sort(key=lambda v: len(v.target.parts), reverse=True)
    return out


def _depends(name: str, svc: Mapping[str, Any], services: Mapping[str, Any]) -> tuple[str, ...]:
    raw = svc.get("depends_on") or []
    names = list(raw) if isinstance(raw, (list, dict)) else []
    for dep in names:
        if dep not in services:
            raise ComposeError(f"service {name}: depends on unknown service {dep!r}")
    return tuple(str(n) for n in names)


class _Translator:
    """A service's hosts and paths as this machine has them. ``published`` is set for a
    service on the host's network (``network_mode: host``), where ``127.0.0.1:P`` reaches
    the service that publishes port P: host port → (that service, its container port)."""

    def __init__(
        self,
        hosts: Mapping[str, str],
        volumes: list[Volume],
        name: str,
        published: Mapping[int, tuple[str, int]] | None = None,
    ) -> None:
        self.hosts = hosts
        self.volumes = volumes
        self.name = name
        self.published = published

    def host(self, text: str) -> str:
        """``0.0.0.0`` and service names (alone or in HOST:PORT lists) → loopback addresses;
        on the host's network, ``127.0.0.1`` too (its own), and ``127.0.0.1:P`` → the
        address of the service publishing P."""
        own = self.published is not None and text in _LOOPBACK_NAMES
        if text == _ALL_INTERFACES or own:
            return self.hosts[self.name]
        out = []
        for part in text.split(";"):
            h, sep, port = part.rpartition(":") if ":" in part else (part, "", "")
            target = None
            if self.published is not None and h in _LOOPBACK_NAMES and port.isdigit():
                target = self.published.get(int(port))
            if target is not None:
                out.append(f"{self.hosts[target[0]]}:{target[1]}")
            else:
                out.append(f"{self.hosts.get(h, h)}{sep}{port}")
        return ";".join(out)

    def path(self, text: str) -> str:
        p = PurePosixPath(text)
        for v in self.volumes:
            if p == v.target or v.target in p.parents:
                return str(v.source.joinpath(*p.relative_to(v.target).parts))
        if p.is_absolute():
            raise ComposeError(
                f"service {self.name}: {text} is on no volume; a container path needs one"
            )
        return text


def plan(
    compose_path: Path,
    *,
    data_dir: Path,
    subnet: str = DEFAULT_SUBNET,
    env: Mapping[str, str] | None = None,
    broker_overrides: Sequence[str] = (),
) -> list[ServicePlan]:
    """Translate every service of the compose file into a local command, in start order.

    Raises:
        ComposeError: anything in the file that cannot be run locally, named.
    """
    env = os.environ if env is None else env
    doc = load_compose(compose_path)
    services: dict[str, Any] = doc["services"]
    hosts = _hosts(services, subnet)
    published = _published_ports(services)
    declared = set((doc.get("volumes") or {}).keys())
    base = compose_path.resolve().parent
    plans: dict[str, ServicePlan] = {}
    for name, svc in services.items():
        if not isinstance(svc, dict):
            raise ComposeError(f"service {name}: not a mapping")
        words = _command(name, svc, env)
        host_network = svc.get("network_mode") == "host"
        tr = _Translator(
            hosts,
            _volumes(name, svc, base, data_dir, declared),
            name,
            published if host_network else None,
        )
        argv = _service_argv(
            name, words, tr, own_host=hosts[name], data_dir=data_dir, overrides=broker_overrides
        )
        plans[name] = ServicePlan(
            name=name,
            host=hosts[name],
            role=argv[0],
            argv=argv,
            depends_on=_depends(name, svc, services),
            home=data_dir / "home" / name,
        )
    return _start_order(plans)


def _published_ports(services: Mapping[str, Any]) -> dict[int, tuple[str, int]]:
    """Host port → (service, container port), from every service's ``ports``
    (``"H:C"``, ``"IP:H:C"``, or the long form with ``published`` and ``target``)."""
    out: dict[int, tuple[str, int]] = {}
    for name, svc in services.items():
        for item in (svc.get("ports") or []) if isinstance(svc, dict) else []:
            if isinstance(item, dict):
                pair = (str(item.get("published", "")), str(item.get("target", "")))
            else:
                parts = str(item).split(":")
                pair = (parts[-2], parts[-1]) if len(parts) >= 2 else ("", "")
            host_port, container_port = (x.partition("/")[0] for x in pair)
            if host_port.isdigit() and container_port.isdigit():
                out[int(host_port)] = (str(name), int(container_port))
    return out


def _hosts(services: Mapping[str, Any], subnet: str) -> dict[str, str]:
    """Each service's own loopback address: ``subnet``'s .1, .2, … in the file's order."""
    try:
        net = ipaddress.IPv4Address(subnet)
    except ValueError:
        raise ComposeError(f"--subnet {subnet!r} is not an IPv4 address") from None
    if not net.is_loopback:
        raise ComposeError(f"--subnet {subnet} is not a loopback address (127.x.y.z)")
    base_host = int(net) & ~0xFF
    if len(services) > 254:
        raise ComposeError("more than 254 services")
    return {
        str(n): str(ipaddress.IPv4Address(base_host + i)) for i, n in enumerate(services, start=1)
    }


def _service_argv(
    name: str,
    words: list[str],
    tr: _Translator,
    *,
    own_host: str,
    data_dir: Path,
    overrides: Sequence[str],
) -> list[str]:
    """One service's command line: its role, its options with hosts and paths translated,
    then every ``--set`` (a ``-c`` file's host and path keys first, then the command's)."""
    role = words[0]
    argv, sets, config_file = _options(name, words, tr, own_host)
    if config_file is not None:
        try:
            values = read_config_file(config_file)
        except (OSError, ConfigError) as exc:
            raise ComposeError(f"service {name}: config {config_file}: {exc}") from None
        argv += ["-c", str(config_file)]
        sets = [f"{k}={v}" for k, v in values.items() if k in _HOST_KEYS + _PATH_KEYS] + sets
    translated = _translate_sets(name, sets, tr)
    # The console (dashboard) takes only its own settings (dashboardUsers …).
    if role in ("broker", "standalone"):
        translated.append(f"brokerIP1={own_host}")
        translated += list(overrides)
    elif role == "namesrv" and not any(t.startswith("kvConfigPath=") for t in translated):
        translated.append(f"kvConfigPath={data_dir / 'home' / name / 'kvConfig.json'}")
    for item in translated:
        argv += ["--set", item]
    return argv


def _options(
    name: str, words: list[str], tr: _Translator, own_host: str
) -> tuple[list[str], list[str], Path | None]:
    """The role and options of a service's command with hosts and paths translated
    (``--host`` its own address unless given), the values of its ``--set`` options, and
    its ``-c`` file."""
    argv = [words[0]]
    sets: list[str] = []
    config_file: Path | None = None
    has_host = False
    words_iter = iter(words[1:])
    for word in words_iter:
        if word not in _VALUED:
            argv.append(word)
            continue
        value = next(words_iter, None)
        if value is None:
            raise ComposeError(f"service {name}: {word} needs a value")
        if word in ("-c", "--config"):
            config_file = Path(tr.path(value))
        elif word == "--store":
            argv += [word, tr.path(value)]
        elif word in ("--host", "--namesrv", "-n"):
            argv += [word, tr.host(value)]
            has_host = has_host or word == "--host"
        else:
            sets.append(value)
    if not has_host:
        argv += ["--host", own_host]
    return argv, sets, config_file


def _translate_sets(name: str, sets: list[str], tr: _Translator) -> list[str]:
    """``key=value`` settings with their hosts and paths translated; brokerIP1, brokerIP2
    and bindAddress dropped (the service's own address stands for all three locally)."""
    translated = []
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq:
            raise ComposeError(f"service {name}: --set {item!r} is not key=value")
        if key in _DROPPED_KEYS:
            continue
        if key in _HOST_KEYS:
            value = tr.host(value)
        elif key in _PATH_KEYS:
            value = tr.path(value)
        translated.append(f"{key}={value}")
    return translated


def _start_order(plans: dict[str, ServicePlan]) -> list[ServicePlan]:
    order: list[ServicePlan] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise ComposeError(f"depends_on cycle: {' -> '.join((*path, name))}")
        state[name] = 1
        for dep in plans[name].depends_on:
            visit(dep, (*path, name))
        state[name] = 2
        order.append(plans[name])

    for name in plans:
        visit(name, ())
    return order


# ------------------------------------------------------------------------ running


class Cluster:
    """The running services of one compose file."""

    def __init__(self, plans: list[ServicePlan], data_dir: Path) -> None:
        self.plans = plans
        self.data_dir = data_dir
        self._watchers: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        started: dict[str, asyncio.Task[None]] = {}
        for p in self.plans:
            waits = [started[d] for d in p.depends_on]
            started[p.name] = asyncio.create_task(self._start_one(p, waits), name=p.name)
        try:
            await asyncio.gather(*started.values())
        except BaseException:
            for task in started.values():
                task.cancel()
            await self.stop()
            raise
        self._write_state()

    async def _start_one(self, p: ServicePlan, waits: list[asyncio.Task[None]]) -> None:
        if waits:
            await asyncio.gather(*waits)
        p.home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HOME": str(p.home)}
        env.pop("NAMESRV_ADDR", None)  # the compose file names the name servers
        logfile = (self.data_dir / "logs" / f"{p.name}.log").open("ab")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "broker",
                *p.argv,
                stdout=asyncio.subprocess.PIPE,
                stderr=logfile,
                env=env,
                start_new_session=True,  # a Ctrl-C reaches the launcher, which stops them in order
            )
        finally:
            logfile.close()
        p.process, p.pid = proc, proc.pid
        log.info("cluster_service_starting", service=p.name, pid=proc.pid, host=p.host)
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                line = await proc.stdout.readline()
        except TimeoutError:
            raise ComposeError(
                f"service {p.name} not ready within {READY_TIMEOUT_S:.0f} s; "
                f"see {self.data_dir / 'logs' / (p.name + '.log')}"
            ) from None
        text = line.decode(errors="replace").strip()
        if not text.startswith("ready "):
            code = await proc.wait()
            raise ComposeError(
                f"service {p.name} exited with {code} before it was ready; "
                f"see {self.data_dir / 'logs' / (p.name + '.log')}"
            )
        fields = dict(part.split("=", 1) for part in text.split()[1:] if "=" in part)
        # The console says dashboard=http://HOST:PORT; the others say HOST:PORT.
        console = fields.get("dashboard", "").partition("://")[2]
        p.listen = fields.get("broker") or fields.get("namesrv") or console
        p.namesrv = fields.get("namesrv", "")
        p.metrics = fields.get("metrics", "")
        self._watchers.append(asyncio.create_task(self._watch(p), name=f"watch-{p.name}"))
        log.info(
            "cluster_service_ready", service=p.name, pid=p.pid, listen=p.listen, metrics=p.metrics
        )

    async def _watch(self, p: ServicePlan) -> None:
        assert p.process is not None and p.process.stdout is not None
        # Keep the pipe drained; the child writes nothing after its ready line.
        while await p.process.stdout.read(4096):
            pass
        code = await p.process.wait()
        # A stop the launcher asked for is logged by stop(), once the exit is seen there;
        # deciding per service (not "the cluster is stopping") leaves no exit unlogged.
        if not p.stop_requested:
            # Left running: the rest of the cluster goes on without it, as in compose.
            log.warning("cluster_service_exited", service=p.name, pid=p.pid, code=code)

    def _write_state(self) -> None:
        state = {
            "namesrv": self.namesrv_addr,
            "services": {
                p.name: {
                    "role": p.role,
                    "pid": p.pid,
                    "address": p.listen,
                    "host": p.host,
                    "metrics": p.metrics,
                }
                for p in self.plans
            },
        }
        tmp = self.data_dir / "cluster.json.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.data_dir / "cluster.json")

    @property
    def namesrv_addr(self) -> str:
        return ";".join(p.namesrv for p in self.plans if p.namesrv)

    @property
    def broker_addrs(self) -> str:
        return ";".join(
            p.listen for p in self.plans if p.role in ("broker", "standalone") and p.listen
        )

    async def stop(self) -> dict[str, int]:
        """SIGTERM each running service, dependents first, and wait for it to exit.

        Returns:
            Every started service's exit code, in stop order (one that had exited on its
            own keeps the code it exited with).
        """
        codes: dict[str, int] = {}
        for p in reversed(self.plans):
            proc = p.process
            if proc is None:
                continue  # never started
            if proc.returncode is not None:
                codes[p.name] = proc.returncode  # its watcher logged the exit
                continue
            p.stop_requested = True
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    code = await proc.wait()
            except TimeoutError:
                log.warning("cluster_service_killed", service=p.name, pid=p.pid)
                proc.kill()
                code = await proc.wait()
            codes[p.name] = code
            log.info("cluster_service_stopped", service=p.name, pid=p.pid, code=code)
        for task in self._watchers:
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        return codes


def print_plan(plans: list[ServicePlan]) -> None:
    for p in plans:
        deps = f"  (after {', '.join(p.depends_on)})" if p.depends_on else ""
        print(f"{p.name} [{p.host}]{deps}\n  aerolite {shlex.join(p.argv)}")


async def run_up(plans: list[ServicePlan], data_dir: Path, stop: asyncio.Event) -> int:
    cluster = Cluster(plans, data_dir)
    started = time.monotonic()
    await cluster.start()
    for p in plans:
        metrics = f" metrics={p.metrics}" if p.metrics else ""
        print(f"service {p.name} pid={p.pid} {p.role}={p.listen}{metrics}")
    print(f"ready namesrv={cluster.namesrv_addr} broker={cluster.broker_addrs}", flush=True)
    log.info("cluster_ready", services=len(plans), seconds=round(time.monotonic() - started, 2))
    await stop.wait()
    codes = await cluster.stop()
    summary = " ".join(f"{name}={code}" for name, code in codes.items())
    print(f"stopped {len(codes)} services: {summary}", flush=True)
    clean = all(code == 0 for code in codes.values())
    log.info("cluster_stopped", services=len(codes), clean=clean)
    return 0 if clean else 1
