"""Apache RocketMQ 4.9.7 itself (name server + broker, from Maven Central) as a benchmark peer.

RocketMQ counterpart: it *is* RocketMQ: ``NamesrvStartup`` and ``BrokerStartup`` from the
``rocketmq-namesrv`` / ``rocketmq-broker`` jars that ``tests/interop/broker/pom.xml`` pins
(resolved once with ``mvn dependency:copy-dependencies``, reused while the pom is unchanged;
the interop suite shares the directory).

Each JVM runs with the options ``runbroker.sh`` / ``runserver.sh`` pass on JDK 9+ (the
``--add-opens`` RocketMQ needs to unmap segments), a fixed heap instead of their 8 GiB / 4 GiB
defaults (``BROKER_HEAP`` / ``NAMESRV_HEAP``, so both fit this machine beside the others),
and a ``broker.conf`` written next to its store (:func:`broker_conf`): the stock settings
but for the ports, the store path, ``brokerIP1=127.0.0.1`` and ``flushDiskType``. The broker
is the process pinned, timed and measured; the name server runs on the same CPU.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.bench.peers import Peer, Service, _stop_pid, free_port, pin_pid, scan_log, tail
from tests.bench.report import REPO_ROOT

POM_DIR = REPO_ROOT / "tests" / "interop" / "broker"
LIB = POM_DIR / "target" / "lib"
STAMP = POM_DIR / "target" / "lib.stamp"
VERSION = "4.9.7"
RESOLVE_TIMEOUT_S = 900.0
BOOT_TIMEOUT_S = 90.0
BROKER_HEAP = "1g"
NAMESRV_HEAP = "256m"
JVM_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
)


def rocketmq_jvm_options(home: Path) -> list[str]:
    """What a JVM running RocketMQ's name server or broker needs beside its heap: the opens
    its run scripts pass on JDK 9+, and ``home`` as its RocketMQ home, user home and temp
    dir (Netty writes the permissive TLS port's self-signed certificate to the temp dir and
    deletes it only on a clean exit; there it stays with the rest)."""
    return [
        *JVM_OPENS,
        f"-Drocketmq.home.dir={home}",
        f"-Duser.home={home}",
        f"-Djava.io.tmpdir={home}",
    ]


def missing_reason() -> str | None:
    """Why Apache RocketMQ cannot run here, or None when it can."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (Java 17 and Maven resolve RocketMQ from Maven Central)"
    return None


def java_peer(quick: bool) -> Peer:
    """The benchmarks' entry for Apache RocketMQ: available, or the reason it is not run."""
    label = f"Apache RocketMQ {VERSION}"
    if quick:
        # Two JVMs and a Maven resolution are not what a smoke test of the machinery is for.
        return Peer("rocketmq", label, False, "not run with --quick")
    reason = missing_reason()
    if reason is not None:
        return Peer("rocketmq", label, False, reason)
    return Peer(
        "rocketmq",
        label,
        True,
        version=f"name server + broker {VERSION} from Maven Central, JVM heap {BROKER_HEAP} "
        f"(broker) / {NAMESRV_HEAP} (name server), broker.conf in tests/bench/java_rocketmq.py",
    )


def resolve_jars() -> Path:
    """The directory of RocketMQ's jars, resolved from Maven Central when the pom changed."""
    return resolve_maven(POM_DIR / "pom.xml", LIB, STAMP)


def resolve_maven(pom: Path, lib: Path, stamp: Path) -> Path:
    """``lib``: the runtime jars of ``pom`` (``mvn dependency:copy-dependencies``), resolved
    again only when the pom's bytes changed since ``stamp`` was written.

    Raises:
        RuntimeError: no mvn, or Maven could not resolve them (its output's tail).
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn is not on PATH")
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text() == digest and lib.is_dir():
        return lib
    shutil.rmtree(lib, ignore_errors=True)
    proc = subprocess.run(  # Maven with fixed arguments, resolving from Maven Central
        [
            mvn,
            "-q",
            "-B",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={lib}",
            "-DincludeScope=runtime",
        ],
        cwd=pom.parent,
        capture_output=True,
        text=True,
        timeout=RESOLVE_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        last = " / ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        raise RuntimeError(f"mvn could not resolve {pom}: {last}")
    stamp.write_text(digest)
    return lib


def start_jvm(
    main: str, heap: str, args: list[str], *, lib: Path, home: Path, log: Path, cwd: Path
) -> subprocess.Popen[bytes]:
    """One of RocketMQ's entry points on the jars in ``lib``, with the options its run
    scripts pass on JDK 9+ and a fixed heap; its output to ``log``.

    Raises:
        RuntimeError: no java on PATH.
    """
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH")
    with log.open("wb") as out:
        return subprocess.Popen(  # RocketMQ's own entry points, fixed arguments
            [
                java,
                f"-Xms{heap}",
                f"-Xmx{heap}",
                *rocketmq_jvm_options(home),
                "-cp",
                f"{lib}/*",
                main,
                *args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
        )


def wait_for_line(proc: subprocess.Popen[bytes], log: Path, text: str) -> None:
    """Until ``text`` is in the last 20 kB of ``log`` (``BOOT_TIMEOUT_S`` at most).

    Raises:
        RuntimeError: the process exited first, or the time ran out (the log's tail).
    """
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if text in tail(log, 20_000):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"exited ({proc.returncode}):\n{tail(log)}")
        time.sleep(0.2)
    raise RuntimeError(f"no {text!r} within {BOOT_TIMEOUT_S:g} s:\n{tail(log)}")


def _port_with_neighbours() -> int:
    """A port p with p-2 (the broker's VIP channel) and p+1 (HA) free as well."""
    for _ in range(50):
        port = free_port()
        if port < 1026:
            continue
        try:
            for other in (port - 2, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", other))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port with free neighbours for the Java broker")


def broker_conf(store: Path, namesrv: str, port: int, flush: str) -> str:
    """The broker.conf the benchmark runs Apache RocketMQ with."""
    values = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": flush,
        "namesrvAddr": namesrv,
        "brokerIP1": "127.0.0.1",
        "listenPort": str(port),
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "autoCreateTopicEnable": "true",
        "deleteWhen": "04",
        "fileReservedTime": "48",
        "diskMaxUsedSpaceRatio": "95",
    }
    return "".join(f"{k}={v}\n" for k, v in values.items())


class RocketMQJavaBroker(Service):
    """Apache RocketMQ's name server and broker, two JVMs; ``pid`` is the broker's."""

    label = "Apache RocketMQ"

    def __init__(
        self, work: Path, cpu: int | None = None, settings: dict[str, str] | None = None
    ) -> None:
        super().__init__(work, cpu)
        settings = settings or {}
        self.flush = settings.get("flushDiskType", "ASYNC_FLUSH")
        self.namesrv = ""
        self.address = ""
        self.namesrv_proc: subprocess.Popen[bytes] | None = None
        self.namesrv_log = work / "java-namesrv.log"

    def _jvm(self, main: str, heap: str, conf: Path, log: Path) -> subprocess.Popen[bytes]:
        home = self.work / f"home-{log.stem}"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        for name in ("logback_namesrv.xml", "logback_broker.xml"):
            # RocketMQ insists on these files; its own logs go next to the store.
            (home / "conf" / name).write_text(
                "<configuration><appender name='F' class='ch.qos.logback.core.FileAppender'>"
                f"<file>{home}/{name}.log</file><encoder><pattern>%d %-5p [%t] %c{{0}} - "
                "%m%n</pattern></encoder></appender><root level='WARN'><appender-ref ref='F'/>"
                "</root></configuration>"
            )
        return start_jvm(
            main, heap, ["-c", str(conf)], lib=resolve_jars(), home=home, log=log, cwd=self.work
        )

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        ns_port = free_port()
        ns_conf = self.work / "namesrv.conf"
        ns_conf.write_text(f"listenPort={ns_port}\n")
        self.namesrv_proc = self._jvm(
            "org.apache.rocketmq.namesrv.NamesrvStartup", NAMESRV_HEAP, ns_conf, self.namesrv_log
        )
        wait_for_line(self.namesrv_proc, self.namesrv_log, "boot success")
        pin_pid(self.namesrv_proc.pid, self.cpu)
        self.namesrv = f"127.0.0.1:{ns_port}"
        port = _port_with_neighbours()
        conf = self.work / "broker.conf"
        conf.write_text(broker_conf(self.work / "store", self.namesrv, port, self.flush))
        self.proc = self._jvm(
            "org.apache.rocketmq.broker.BrokerStartup", BROKER_HEAP, conf, self.log
        )
        wait_for_line(self.proc, self.log, "boot success")
        self.address = f"127.0.0.1:{port}"

    def stop(self) -> None:
        super().stop()
        # A JVM ends on SIGTERM with 143 (128 + 15) once its shutdown hooks ran: a clean stop.
        if self.exit_code == 143:
            self.exit_code = 0
        proc, self.namesrv_proc = self.namesrv_proc, None
        if proc is not None:
            _stop_pid(proc)

    def warnings(self) -> dict[str, Any]:
        return scan_log(self.log, r"\b(WARN|ERROR|Exception)\b")


def rss_kb(pid: int, keys: tuple[str, ...] = ("VmRSS", "VmHWM")) -> dict[str, int]:
    """Memory lines of a process's ``/proc/<pid>/status`` in KiB: by default its resident
    set now and at its peak; {} once the process is gone."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in keys:
            out[key] = int(value.split()[0])
    return out
