"""Remoting benchmark: Aerolite's RemotingServer against a raw uvloop echo server.

What is measured, all over loopback TCP, 1 KiB request bodies:

- **Servers, same client.** The raw echo baseline (``echo_server``), Aerolite on a loop lane
  and Aerolite on a threaded lane (``remoting_server``) each run in their own subprocess and
  are driven by one fixed load generator in this process (``loadgen``), with the same bytes:
  real ``RemotingCommand`` request frames (JSON header, code ``ECHO_CODE``, opaques unique
  within ``ring_frames`` consecutive requests). Pipelined throughput keeps ``window``
  requests in flight; the unpipelined round trip sends one at a time (p50/p99/p99.9), first
  across CPUs, then with the server moved onto the load generator's CPU.
- **End to end.** Our ``RemotingClient`` against the loop-lane server: pipelined as
  ``asyncio.gather`` over windows of ``window`` invokes, and one invoke at a time.
- **Codecs.** In-process encode and decode of a SEND_MESSAGE_V2-like command (ext_fields
  ``a`` .. ``n``, 1 KiB body) with the JSON, ROCKETMQ and MSGPACK headers, next to the bare
  ``json``/``msgpack`` calls on the same header.

Each server gets one connection, warmed up once. Then come ``rounds`` short rounds, each
taking every server in turn (in alternating order), so that foreign load on the machine hits
all servers alike: throughput is the median over rounds, latency percentiles are over the
pooled samples. Every loop is bounded by a request count and a time budget. Goals (from the
issue): Aerolite's pipelined throughput ≥ 60 % of the raw echo server's, and its
unpipelined p99 ≤ 2x the raw echo server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import msgpack

from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    decode_command,
)
from remoting.header_codec import encode_json
from tests.bench import loadgen
from tests.bench.common import can_pin, pinned
from tests.bench.processes import ServerProcess
from tests.bench.remoting_server import ECHO_CODE, THREADED_LANE_THREADS
from tests.bench.report import (
    Report,
    machine_info,
    machine_line,
    markdown_table,
    median,
    percentile,
    text_table,
)
from tests.bench.report import (
    fmt_num as _f,
)

NAME = "remoting"
THROUGHPUT_GOAL = 0.60  # Aerolite / raw, pipelined
P99_GOAL = 2.0  # Aerolite p99 / raw p99, unpipelined
LOADGEN_CPU = 0
SERVER_CPU = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class RemotingBenchConfig:
    """Counts and time budgets; every loop stops at whichever limit comes first.

    A round gives every server one pipelined run and ``unpipelined_requests`` round trips
    (servers taking turns every ``unpipelined_block``), then the ``RemotingClient`` its runs.
    """

    body_bytes: int = 1024
    window: int = 256
    ring_frames: int = 32_768  # distinct request frames (and opaques) per connection
    rounds: int = 9
    warmup_requests: int = 5_000
    pipelined_requests: int = 200_000  # per run
    pipelined_max_s: float = 0.6  # per run
    unpipelined_requests: int = 1_000  # per server and round
    unpipelined_block: int = 250
    unpipelined_max_s: float = 5.0  # per block
    client_pipelined_requests: int = 50_000  # per run
    client_max_s: float = 0.6  # per run
    client_unpipelined_requests: int = 500  # per round
    codec_iterations: int = 10_000
    codec_repeats: int = 5
    pin_cpus: bool = True  # load generator on CPU 0, servers on CPU 1 (when there are 2+)


FULL = RemotingBenchConfig()
QUICK = replace(
    FULL,
    window=64,
    ring_frames=512,
    rounds=1,
    warmup_requests=50,
    pipelined_requests=400,
    pipelined_max_s=2.0,
    unpipelined_requests=200,
    unpipelined_block=100,
    unpipelined_max_s=2.0,
    client_pipelined_requests=400,
    client_max_s=2.0,
    client_unpipelined_requests=200,
    codec_iterations=200,
    codec_repeats=2,
)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    key: str
    label: str
    module: str
    args: tuple[str, ...]


SERVERS = (
    ServerSpec("raw", "raw uvloop echo, batched (baseline)", "tests.bench.echo_server", ()),
    ServerSpec(
        "raw_per_frame",
        "raw uvloop echo, one write per frame",
        "tests.bench.echo_server",
        ("--per-frame",),
    ),
    ServerSpec("loop", "Aerolite, loop lane", "tests.bench.remoting_server", ("--lane", "loop")),
    ServerSpec(
        "threaded",
        f"Aerolite, threaded lane ({THREADED_LANE_THREADS} threads)",
        "tests.bench.remoting_server",
        ("--lane", "threaded"),
    ),
)
CLIENT_LABEL = "RemotingClient → Aerolite, loop lane"


# ----------------------------------------------------------------------------- samples


@dataclass(slots=True)
class Samples:
    """What one server (or the client) accumulated over the rounds."""

    requests_per_s: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)  # server CPU per request
    client_cpu_pct: list[float] = field(default_factory=list)  # load generator's CPU use
    latencies_ns: list[int] = field(default_factory=list)
    one_cpu_latencies_ns: list[int] = field(default_factory=list)

    def add_pipelined(self, m: Pipelined) -> None:
        self.requests_per_s.append(m.requests_per_s)
        if m.server_cpu_us is not None:
            self.server_cpu_us.append(m.server_cpu_us)
        self.client_cpu_pct.append(m.client_cpu_pct)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pipelined_requests_per_s": round(median(self.requests_per_s)),
            "pipelined_rounds": [round(x) for x in self.requests_per_s],
            "server_cpu_us_per_request": (
                round(median(self.server_cpu_us), 2) if self.server_cpu_us else None
            ),
            "client_cpu_pct": round(median(self.client_cpu_pct)),
            **_latency_summary(self.latencies_ns),
        }
        if self.one_cpu_latencies_ns:
            out["one_cpu"] = _latency_summary(self.one_cpu_latencies_ns)
        return out


def _latency_summary(latencies_ns: list[int]) -> dict[str, Any]:
    ordered = sorted(latencies_ns)
    return {
        "round_trips": len(ordered),
        "p50_us": round(percentile(ordered, 50) / 1e3, 1),
        "p99_us": round(percentile(ordered, 99) / 1e3, 1),
        "p999_us": round(percentile(ordered, 99.9) / 1e3, 1),
        "mean_us": round(sum(ordered) / len(ordered) / 1e3, 1),
    }


@dataclass(frozen=True, slots=True)
class Pipelined:
    """One pipelined run: rate, and where the CPU went."""

    requests_per_s: float
    server_cpu_us: float | None
    client_cpu_pct: float


class _CpuMeter:
    """CPU used by a server process and by this process between ``__init__`` and ``stop``."""

    def __init__(self, server: ServerProcess) -> None:
        self._server = server
        self._server_ns = server.cpu_ns()
        self._client_ns = time.process_time_ns()
        self._wall = time.perf_counter()

    def stop(self, requests_per_s: float, requests: int) -> Pipelined:
        server_ns = self._server.cpu_ns()
        client_ns = time.process_time_ns() - self._client_ns
        wall = time.perf_counter() - self._wall
        server_us = None
        if server_ns is not None and self._server_ns is not None and requests:
            server_us = (server_ns - self._server_ns) / requests / 1e3
        return Pipelined(requests_per_s, server_us, 100 * client_ns / 1e9 / wall)


# ------------------------------------------------------------------------ raw load gen


async def _probe(spec: ServerSpec, port: int, request: bytes, body: bytes) -> None:
    """One request, read back whole and checked, before any figure is taken."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        async with asyncio.timeout(5.0):
            length = int.from_bytes(await reader.readexactly(4), "big")
            response = await reader.readexactly(length)
    finally:
        writer.close()
        await writer.wait_closed()
    if spec.key.startswith("raw"):
        if len(response) + 4 != len(request) or response != request[4:]:
            raise RuntimeError(f"{spec.label}: the echo differs from the request")
        return
    cmd = decode_command(memoryview(response))
    sent = decode_command(memoryview(request)[4:])
    if not (
        cmd.is_response
        and cmd.code == ResponseCode.SUCCESS
        and cmd.opaque == sent.opaque
        and cmd.body_bytes == body
    ):
        raise RuntimeError(f"{spec.label}: unexpected answer {cmd!r}")


async def _pipelined(
    server: ServerProcess,
    proto: loadgen.CountingProtocol,
    ring: loadgen.FrameRing,
    cfg: RemotingBenchConfig,
) -> Pipelined:
    meter = _CpuMeter(server)
    run = await loadgen.run_pipelined(
        proto,
        ring,
        max_requests=cfg.pipelined_requests,
        window=cfg.window,
        max_s=cfg.pipelined_max_s,
    )
    return meter.stop(run.requests_per_s, run.requests)


async def _unpipelined(
    protos: dict[str, loadgen.CountingProtocol],
    order: tuple[ServerSpec, ...],
    ring: loadgen.FrameRing,
    cfg: RemotingBenchConfig,
) -> dict[str, list[int]]:
    """Round trips to every server, interleaved in blocks of ``unpipelined_block``.

    Interleaving puts every server's samples in the same stretch of time, so a burst of
    foreign load (a build next door, a noisy neighbour of the VM) hits them all alike.
    """
    latencies: dict[str, list[int]] = {spec.key: [] for spec in order}
    for first in range(0, cfg.unpipelined_requests, cfg.unpipelined_block):
        block = min(cfg.unpipelined_block, cfg.unpipelined_requests - first)
        for spec in order:
            latencies[spec.key] += await loadgen.run_unpipelined(
                protos[spec.key], ring, requests=block, max_s=cfg.unpipelined_max_s
            )
    return latencies


# --------------------------------------------------------------------- RemotingClient


async def _client_pipelined(
    client: RemotingClient, addr: str, body: bytes, *, requests: int, window: int, max_s: float
) -> tuple[float, int]:
    done = 0
    t0 = time.perf_counter()
    deadline = t0 + max_s
    while done < requests and time.perf_counter() < deadline:
        n = min(window, requests - done)
        responses = await asyncio.gather(
            *(client.invoke(addr, RemotingCommand.request(ECHO_CODE, body=body)) for _ in range(n))
        )
        if any(r.code != ResponseCode.SUCCESS for r in responses):
            raise RuntimeError(f"RemotingClient: error response among {responses[:3]!r}")
        done += n
    return done / (time.perf_counter() - t0), done


async def _client_unpipelined(
    client: RemotingClient, addr: str, body: bytes, *, requests: int, max_s: float
) -> list[int]:
    latencies: list[int] = []
    clock = time.perf_counter_ns
    deadline = clock() + int(max_s * 1e9)
    for _ in range(requests):
        t0 = clock()
        response = await client.invoke(addr, RemotingCommand.request(ECHO_CODE, body=body))
        latencies.append(clock() - t0)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"RemotingClient: error response {response!r}")
        if t0 > deadline:
            break
    return latencies


async def _client_round(
    client: RemotingClient,
    server: ServerProcess,
    body: bytes,
    cfg: RemotingBenchConfig,
    samples: Samples,
) -> None:
    addr = f"127.0.0.1:{server.port}"
    meter = _CpuMeter(server)
    rps, done = await _client_pipelined(
        client,
        addr,
        body,
        requests=cfg.client_pipelined_requests,
        window=cfg.window,
        max_s=cfg.client_max_s,
    )
    samples.add_pipelined(meter.stop(rps, done))
    samples.latencies_ns += await _client_unpipelined(
        client, addr, body, requests=cfg.client_unpipelined_requests, max_s=cfg.unpipelined_max_s
    )


# ----------------------------------------------------------------------------- rounds


async def _warm_up(
    protos: dict[str, loadgen.CountingProtocol],
    ring: loadgen.FrameRing,
    *,
    client: RemotingClient,
    client_addr: str,
    body: bytes,
    cfg: RemotingBenchConfig,
) -> None:
    """Grow every connection's socket buffers and let each server reach a steady state."""
    for proto in protos.values():
        await loadgen.run_pipelined(
            proto, ring, max_requests=cfg.warmup_requests, window=cfg.window, max_s=5.0
        )
        await loadgen.run_unpipelined(
            proto, ring, requests=min(cfg.warmup_requests, 500), max_s=5.0
        )
    await _client_pipelined(
        client, client_addr, body, requests=cfg.warmup_requests, window=cfg.window, max_s=5.0
    )
    await _client_unpipelined(
        client, client_addr, body, requests=min(cfg.warmup_requests, 500), max_s=5.0
    )


async def _measure(
    procs: dict[str, ServerProcess],
    ring: loadgen.FrameRing,
    body: bytes,
    cfg: RemotingBenchConfig,
    pin: bool,
) -> tuple[dict[str, Samples], Samples]:
    for spec in SERVERS:
        await _probe(spec, procs[spec.key].port, ring.frame(0), body)
    samples = {spec.key: Samples() for spec in SERVERS}
    client_samples = Samples()
    protos: dict[str, loadgen.CountingProtocol] = {}
    client = RemotingClient(ClientConfig(request_timeout_s=30.0))
    try:
        for spec in SERVERS:
            protos[spec.key] = await loadgen.connect(
                procs[spec.key].port, short_frame_bytes=cfg.body_bytes
            )
        await client.start()
        client_addr = f"127.0.0.1:{procs['loop'].port}"
        await _warm_up(protos, ring, client=client, client_addr=client_addr, body=body, cfg=cfg)
        for round_no in range(cfg.rounds):
            # Alternate the order so no server always runs first (or right after the client).
            order = SERVERS if round_no % 2 == 0 else tuple(reversed(SERVERS))
            for spec in order:
                run = await _pipelined(procs[spec.key], protos[spec.key], ring, cfg)
                samples[spec.key].add_pipelined(run)
            for key, lat in (await _unpipelined(protos, order, ring, cfg)).items():
                samples[key].latencies_ns += lat
            if pin:
                # The same round trips with the servers on the load generator's CPU: no
                # cross-CPU wake-ups (costly in a VM), so what remains is the CPU path.
                for proc in procs.values():
                    proc.pin(LOADGEN_CPU)
                try:
                    one_cpu = await _unpipelined(protos, order, ring, cfg)
                finally:
                    for proc in procs.values():
                        proc.pin(SERVER_CPU)
                for key, lat in one_cpu.items():
                    samples[key].one_cpu_latencies_ns += lat
            await _client_round(client, procs["loop"], body, cfg, client_samples)
    finally:
        await client.shutdown()
        for proto in protos.values():
            await loadgen.close(proto)
    for spec in SERVERS:
        if protos[spec.key].short_frames:
            raise RuntimeError(
                f"{spec.label}: {protos[spec.key].short_frames} responses came without the "
                "echo body (error responses would flatter the figures)"
            )
    return samples, client_samples


def _run_servers(
    ring: loadgen.FrameRing, body: bytes, cfg: RemotingBenchConfig, pin: bool
) -> tuple[dict[str, Samples], Samples]:
    import uvloop

    with contextlib.ExitStack() as stack:
        procs = {
            spec.key: stack.enter_context(
                ServerProcess(
                    spec.label, spec.module, list(spec.args), cpu=SERVER_CPU if pin else None
                )
            )
            for spec in SERVERS
        }
        for proc in procs.values():
            proc.wait_ready()
        with (
            pinned(LOADGEN_CPU if pin else None),
            asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
        ):
            return runner.run(_measure(procs, ring, body, cfg, pin))


# ------------------------------------------------------------------------------ codecs

SEND_V2_EXT_FIELDS: dict[str, str] = {
    "a": "please_rename_unique_group_name",  # producerGroup
    "b": "BenchmarkTopic",  # topic
    "c": "TBW102",  # defaultTopic
    "d": "4",  # defaultTopicQueueNums
    "e": "3",  # queueId
    "f": "0",  # sysFlag
    "g": "1718000000000",  # bornTimestamp
    "h": "0",  # flag
    "i": "UNIQ_KEY\x017F0000011B3E18B4AAC2A3D5E8A00000\x02WAIT\x01true\x02TAGS\x01TagA\x02",
    "j": "0",  # reconsumeTimes
    "k": "false",  # unitMode
    "l": "16",  # maxReconsumeTimes
    "m": "false",  # batch
    "n": "broker-a",  # brokerName
}


def _ns_per_call(fn: Callable[[], object], iterations: int, repeats: int) -> float:
    """Best of ``repeats`` timings of ``iterations`` calls, per call (timeit's convention)."""
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        best = min(best, time.perf_counter_ns() - t0)
    return best / iterations


def codec_bench(body: bytes, iterations: int, repeats: int) -> dict[str, dict[str, Any]]:
    """Encode (``RemotingCommand.encode``) and decode (``decode_command``) per header codec."""
    out: dict[str, dict[str, Any]] = {}
    for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK):
        cmd = RemotingCommand(
            code=RequestCode.SEND_MESSAGE_V2,
            opaque=123_456,
            ext_fields=dict(SEND_V2_EXT_FIELDS),
            body=body,
            serialize_type=serialize_type,
        )
        frame = cmd.to_bytes()
        view = memoryview(frame)[4:]  # as FrameDecoder.feed hands it to decode_command
        header = cmd.encode()[1]
        if decode_command(view).ext_fields != SEND_V2_EXT_FIELDS:
            raise RuntimeError(f"{serialize_type.name}: ext_fields do not round-trip")
        encode_ns = _ns_per_call(cmd.encode, iterations, repeats)
        decode_ns = _ns_per_call(functools.partial(decode_command, view), iterations, repeats)
        floor_ns = _library_floor_ns(serialize_type, cmd, iterations, repeats)
        out[serialize_type.name] = {
            "header_bytes": len(header),
            "encode_us": round(encode_ns / 1e3, 2),
            "decode_us": round(decode_ns / 1e3, 2),
            "total_us": round((encode_ns + decode_ns) / 1e3, 2),
            "library_floor_us": None if floor_ns is None else round(floor_ns / 1e3, 2),
        }
    json_total = out["JSON"]["total_us"]
    for row in out.values():
        row["vs_json"] = round(row["total_us"] / json_total, 2)
        floor = row["library_floor_us"]
        row["vs_library_floor"] = None if floor is None else round(row["total_us"] / floor, 2)
    return out


def _library_floor_ns(
    serialize_type: int, cmd: RemotingCommand, iterations: int, repeats: int
) -> float | None:
    """The bare serializer on the same header: dumps+loads (JSON), packb+unpackb (MSGPACK)."""
    if serialize_type == SerializeType.JSON:
        doc = json.loads(encode_json(cmd))
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

        def json_round_trip() -> object:
            return json.loads(dumps(doc).encode())

        return _ns_per_call(json_round_trip, iterations, repeats)
    if serialize_type == SerializeType.MSGPACK:
        fields = (
            cmd.code,
            cmd.language,
            cmd.version,
            cmd.opaque,
            cmd.flag,
            cmd.remark,
            cmd.ext_fields,
        )

        def msgpack_round_trip() -> object:
            return msgpack.unpackb(msgpack.packb(fields), raw=False)

        return _ns_per_call(msgpack_round_trip, iterations, repeats)
    return None


# ----------------------------------------------------------------------------- report


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 2)


def _ratios(x: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "throughput": _ratio(x["pipelined_requests_per_s"], base["pipelined_requests_per_s"]),
        "server_cpu": _ratio(x["server_cpu_us_per_request"], base["server_cpu_us_per_request"]),
        "p50": _ratio(x["p50_us"], base["p50_us"]),
        "p99": _ratio(x["p99_us"], base["p99_us"]),
        "p999": _ratio(x["p999_us"], base["p999_us"]),
    }
    if "one_cpu" in x and "one_cpu" in base:
        out["one_cpu"] = {
            k: _ratio(x["one_cpu"][f"{k}_us"], base["one_cpu"][f"{k}_us"])
            for k in ("p50", "p99", "p999")
        }
    return out


def run(quick: bool = False, config: RemotingBenchConfig | None = None) -> Report:
    """Run the whole remoting benchmark and return its report."""
    cfg = config or (QUICK if quick else FULL)
    started = time.perf_counter()
    machine = machine_info()  # before our own load shows in the load average
    pin = cfg.pin_cpus and can_pin(LOADGEN_CPU, SERVER_CPU)
    body = os.urandom(cfg.body_bytes)
    codecs = codec_bench(body, cfg.codec_iterations, cfg.codec_repeats)
    ring = loadgen.FrameRing.echo_requests(ECHO_CODE, body, cfg.ring_frames)
    samples, client = _run_servers(ring, body, cfg, pin)

    servers = {key: s.summary() for key, s in samples.items()}
    client_summary = client.summary()
    raw, loop = servers["raw"], servers["loop"]
    ratios = {
        **{f"{key}_vs_raw": _ratios(s, raw) for key, s in servers.items() if key != "raw"},
        "loop_vs_raw_per_frame": _ratios(loop, servers["raw_per_frame"]),
        "threaded_vs_loop": _ratios(servers["threaded"], loop),
        "client_vs_raw": _ratios(client_summary, raw),
        "client_vs_loop": _ratios(client_summary, loop),
    }
    tp, p99 = ratios["loop_vs_raw"]["throughput"], ratios["loop_vs_raw"]["p99"]
    goals = {
        "throughput_ratio_min": THROUGHPUT_GOAL,
        "p99_ratio_max": P99_GOAL,
        "throughput_met": tp is not None and tp >= THROUGHPUT_GOAL,
        "p99_met": p99 is not None and p99 <= P99_GOAL,
    }
    results: dict[str, Any] = {
        "benchmark": NAME,
        "quick": quick,
        "machine": machine,
        "config": {
            **asdict(cfg),
            "pinned": pin,
            "request_frame_bytes": len(ring.frame(0)),
            "request_code": ECHO_CODE,
            "header": "JSON",
        },
        "servers": servers,
        "client_e2e": client_summary,
        "ratios": ratios,
        "goals": goals,
        "codecs": codecs,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return Report(NAME, results, render_console(results), render_markdown(results))


# ---------------------------------------------------------------------------- render


def _rows(results: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(label, summary, ratios to raw) for each server and the client."""
    servers, ratios = results["servers"], results["ratios"]
    base = _ratios(servers["raw"], servers["raw"])
    rows = [
        (spec.label, servers[spec.key], ratios.get(f"{spec.key}_vs_raw", base)) for spec in SERVERS
    ]
    rows.append((CLIENT_LABEL, results["client_e2e"], ratios["client_vs_raw"]))
    return rows


_SERVER_HEADERS = (
    "server",
    "pipelined req/s",
    "vs raw",
    "server CPU µs/req",
    "client CPU %",
    "p50 µs",
    "p99 µs",
    "p99.9 µs",
    "p99 vs raw",
)


def _server_rows(results: dict[str, Any]) -> list[list[str]]:
    return [
        [
            label,
            f"{s['pipelined_requests_per_s']:,}",
            _f(r["throughput"], ".2f"),
            _f(s["server_cpu_us_per_request"], ".1f"),
            f"{s['client_cpu_pct']}",
            f"{s['p50_us']:.0f}",
            f"{s['p99_us']:.0f}",
            f"{s['p999_us']:.0f}",
            _f(r["p99"], ".2f"),
        ]
        for label, s, r in _rows(results)
    ]


_ONE_CPU_HEADERS = ("server", "p50 µs", "p99 µs", "p99.9 µs", "p50 vs raw", "p99 vs raw")


def _one_cpu_rows(results: dict[str, Any]) -> list[list[str]]:
    return [
        [
            label,
            f"{s['one_cpu']['p50_us']:.0f}",
            f"{s['one_cpu']['p99_us']:.0f}",
            f"{s['one_cpu']['p999_us']:.0f}",
            _f(r["one_cpu"]["p50"], ".2f"),
            _f(r["one_cpu"]["p99"], ".2f"),
        ]
        for label, s, r in _rows(results)
        if "one_cpu" in s
    ]


_CODEC_HEADERS = (
    "header",
    "header B",
    "encode µs",
    "decode µs",
    "enc+dec µs",
    "vs JSON",
    "bare lib µs",
    "vs bare lib",
)


def _codec_rows(results: dict[str, Any]) -> list[list[str]]:
    return [
        [
            name,
            str(c["header_bytes"]),
            f"{c['encode_us']:.2f}",
            f"{c['decode_us']:.2f}",
            f"{c['total_us']:.2f}",
            f"{c['vs_json']:.2f}",
            _f(c["library_floor_us"], ".2f"),
            _f(c["vs_library_floor"], ".2f"),
        ]
        for name, c in results["codecs"].items()
    ]


def _goal_text(results: dict[str, Any]) -> str:
    g, r = results["goals"], results["ratios"]["loop_vs_raw"]
    pf = results["ratios"]["loop_vs_raw_per_frame"]
    raw = results["servers"]["raw"]
    tp = "met" if g["throughput_met"] else "**not met**"
    p99 = "met" if g["p99_met"] else "**not met**"
    text = (
        "Goal, loop lane against the batched raw echo server: pipelined throughput ≥ "
        f"{g['throughput_ratio_min']:.2f}x raw ({_f(r['throughput'], '.2f')}: {tp}); "
        f"round-trip p99 ≤ {g['p99_ratio_max']:.1f}x raw ({_f(r['p99'], '.2f')}: {p99}). "
        "Against the one-write-per-frame echo: throughput "
        f"{_f(pf['throughput'], '.2f')}x, p99 {_f(pf['p99'], '.2f')}x."
    )
    if raw["client_cpu_pct"] >= 90:
        text += (
            f" The batched echo kept the load generator at {raw['client_cpu_pct']} % of a "
            "CPU, so its rate is the client's limit and the true floor lies higher still; "
            "server CPU per request is the fairer comparison there."
        )
    return text


def _lane_note(results: dict[str, Any]) -> str:
    t = results["ratios"]["threaded_vs_loop"]
    loop, threaded = results["servers"]["loop"], results["servers"]["threaded"]
    slower = t["throughput"] is not None and t["throughput"] < 1
    verdict = (
        "The threaded lane is the slower one for in-memory work"
        if slower
        else "Here the threaded lane kept up with the loop lane"
    )
    loop_cpu, threaded_cpu = (
        loop["server_cpu_us_per_request"],
        threaded["server_cpu_us_per_request"],
    )
    extra = (
        f"about {threaded_cpu - loop_cpu:.0f} µs of CPU per request here"
        if loop_cpu is not None and threaded_cpu is not None
        else "the difference measured here"
    )
    return (
        f"**Which lane for which processor.** On the same echo processor the threaded lane "
        f"({THREADED_LANE_THREADS} threads, plain function) served "
        f"{threaded['pipelined_requests_per_s']:,} req/s against "
        f"{loop['pipelined_requests_per_s']:,} on the loop lane "
        f"({_f(t['throughput'], '.2f')}x), at {_f(threaded_cpu, '.1f')} against "
        f"{_f(loop_cpu, '.1f')} µs of server CPU per request, with a round-trip p50 of "
        f"{threaded['p50_us']:.0f} µs against {loop['p50_us']:.0f} µs. "
        f"{verdict}: every request pays a hand-off to a pool thread (a queue put and a thread "
        "wake-up), a cross-thread wake-up of the loop to resume the lane worker, and the GIL "
        "changing hands, while Python code on a pool thread holds the GIL anyway, so the "
        f"threads add no CPU; and only {THREADED_LANE_THREADS} requests are in a threaded "
        "lane's hands at a time. Put processors that only touch memory (heartbeats, "
        "routes, offsets, consumer lists, the send path's encode and append, pulls served "
        "from the page cache) on loop lanes with `async def` handlers. Keep threaded lanes "
        "for processors that block in the kernel with the GIL released (a synchronous "
        "flush's fsync, reads of cold pages, file deletion), where the blocking call would "
        "otherwise stall every connection on the loop; the hand-off pays for itself only "
        f"when the blocking part costs more than that overhead ({extra})."
    )


def render_console(results: dict[str, Any]) -> str:
    cfg = results["config"]
    lines = [
        f"remoting: 1 connection, {cfg['body_bytes']} B bodies, "
        f"{cfg['request_frame_bytes']} B request frames, window {cfg['window']}, "
        f"{cfg['rounds']} round(s){', quick' if results['quick'] else ''}, "
        f"{'pinned' if cfg['pinned'] else 'not pinned'}; {machine_line(results['machine'])}",
        "",
        text_table(_SERVER_HEADERS, _server_rows(results)),
        "",
        _goal_text(results),
    ]
    one_cpu = _one_cpu_rows(results)
    if one_cpu:
        lines += ["", "round trip with client and server on one CPU:"]
        lines.append(text_table(_ONE_CPU_HEADERS, one_cpu))
    lines += [
        "",
        text_table(_CODEC_HEADERS, _codec_rows(results)),
        "",
        f"({results['seconds']} s)",
    ]
    return "\n".join(lines)


def render_markdown(results: dict[str, Any]) -> str:
    cfg = results["config"]
    raw = results["servers"]["raw"]
    pinned = (
        f"load generator pinned to CPU {LOADGEN_CPU}, each server process to CPU {SERVER_CPU}"
        if cfg["pinned"]
        else "no CPU pinning"
    )
    parts = [
        "## Remoting: request/response over one connection",
        "",
        f"Measured {machine_line(results['machine'])}; {pinned}; "
        f"the run took {results['seconds']} s.",
        "",
        f"Each request is a JSON-header `RemotingCommand` (code {cfg['request_code']}) with "
        f"a {cfg['body_bytes']} B body, {cfg['request_frame_bytes']} B on the wire; the "
        "answer echoes the body. The first "
        f"{len(SERVERS)} rows are driven by the same raw load generator with the same "
        "bytes, over one warmed-up connection per server; the raw echo servers write each "
        "frame back as it came. The servers take turns in "
        f"{cfg['rounds']} short rounds, so that foreign load hits them alike. Pipelined: "
        f"{cfg['window']} requests in flight, {cfg['pipelined_max_s']:g} s per run, median "
        "over the rounds. "
        "Server CPU is the server process's on-CPU time per request during that run, client "
        "CPU the share of a CPU the client used (near 100 %, the client is the limit). Round "
        f"trip: one request at a time, {cfg['unpipelined_requests']:,} per server and round, "
        f"the servers taking turns every {cfg['unpipelined_block']} so that they share the "
        f"same moments of the run; percentiles over all {cfg['rounds']} rounds. The last row "
        "is our `RemotingClient` "
        "against the loop-lane server, pipelined as `asyncio.gather` over windows of "
        f"{cfg['window']} invokes ({cfg['client_max_s']:g} s per run), then one invoke at "
        "a time.",
        "",
        markdown_table(_SERVER_HEADERS, _server_rows(results)),
        "",
        _goal_text(results),
    ]
    one_cpu = _one_cpu_rows(results)
    if one_cpu:
        parts += [
            "",
            "The same round trips with the server moved onto the load generator's CPU. Across "
            "CPUs most of a round trip is the wake-up of the other, idle, CPU (costly in a "
            f"VM: the raw echo's p50 is {raw['p50_us']:.0f} µs across CPUs and "
            f"{raw['one_cpu']['p50_us']:.0f} µs on one), paid alike by every server; on one "
            "CPU what is left is the CPU path of client and server:",
            "",
            markdown_table(_ONE_CPU_HEADERS, one_cpu),
        ]
    parts += [
        "",
        "Header codecs, in process, on a SEND_MESSAGE_V2-like command (ext_fields `a`..`n`, "
        f"{cfg['body_bytes']} B body): `RemotingCommand.encode()` and `decode_command()` per "
        f'call, best of {cfg["codec_repeats"]} x {cfg["codec_iterations"]:,}. "bare lib" '
        "is stdlib `json` (dumps + loads) or `msgpack` (packb + unpackb) on the same header "
        "fields, without our checks.",
        "",
        markdown_table(_CODEC_HEADERS, _codec_rows(results)),
        "",
        _lane_note(results),
    ]
    return "\n".join(parts)
