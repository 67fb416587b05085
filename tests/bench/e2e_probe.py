"""Where an end-to-end latency comes from: one paced run, each message's time split by its
born and store timestamps.

``python -m tests.bench.e2e_probe [--rate 2000] [--seconds 12] [--body-bytes 1024]`` starts a
standalone broker (``tests.bench.peers.AeroliteBroker``, on CPU 1 where there are two),
makes a topic of 8 queues, and in this process (on CPU 0) runs a ``Producer`` at ``--rate``
messages a second (each millisecond's due messages handed over at once, as the
side-by-side benchmark's end-to-end run does) while a ``PushConsumer`` group reads them.
Per message it prints the percentiles of

- *due → born*: from the moment the message was due to the producer's BORNTIMESTAMP (its
  request built: a send waiting behind the producer's requests in flight shows here),
- *born → stored*: to the broker's STORETIMESTAMP,
- *stored → listener*: to the listener's call,

the whole, how late a 1 ms timer in the client's event loop fired, and the broker's
answers to a ping every 20 ms over a connection of its own (``StallProbe``: a slow answer
means the broker's loop did not run for that long). The timestamps are milliseconds, so the
parts are to a millisecond. Not part of ``make bench``: a probe to read beside its
end-to-end row. It stops the broker by PID and removes its directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import struct
import time
from typing import Any

import uvloop

from tests.bench.broker_bench import _admin as create_topic
from tests.bench.common import bench_work_dir, can_pin, pinned
from tests.bench.peers import AeroliteBroker, StallProbe

DUE = struct.Struct("<d")  # the due time, epoch milliseconds, at the head of each body
TOPIC = "E2eProbe"


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


async def _run(namesrv: str, rate: float, seconds: float, body_bytes: int) -> dict[str, Any]:
    from client import ConsumeFromWhere, ConsumeResult, Message, MessageView, Producer, PushConsumer

    padding = b"x" * max(0, body_bytes - DUE.size)
    rows: list[tuple[float, int, int, float]] = []  # due, born, stored, received (ms)
    expect = [0]  # how many were sent, once the producer is done
    all_in = asyncio.Event()
    consumer = PushConsumer(
        "cg_e2e_probe",
        namesrv=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )

    @consumer.subscribe(TOPIC)
    async def on(msg: MessageView) -> ConsumeResult:
        received = time.time() * 1000
        (due,) = DUE.unpack_from(msg.body)
        if due > 0:  # the warm-up's are negative
            rows.append((due, msg.born_timestamp, msg.store_timestamp, received))
            if expect[0] and len(rows) >= expect[0]:
                all_in.set()
        return ConsumeResult.SUCCESS

    lags: list[float] = []

    async def watch_loop() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - t - 0.001) * 1000)

    await consumer.start()
    watcher = asyncio.create_task(watch_loop())
    sent = 0
    try:
        async with Producer("pg_e2e_probe", namesrv=namesrv) as producer:
            for _ in range(50):
                await producer.send(Message(TOPIC, DUE.pack(-1.0) + padding))
            await asyncio.sleep(3.0)  # the consumer's rebalance has its queues
            pending: set[asyncio.Task[Any]] = set()
            start = time.time()
            period = 1.0 / rate
            while time.time() - start < seconds:
                due_now = int((time.time() - start) / period) + 1
                while sent < due_now:
                    body = DUE.pack((start + sent * period) * 1000) + padding
                    task = asyncio.create_task(producer.send(Message(TOPIC, body)))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    sent += 1
                await asyncio.sleep(0.001)
            if pending:
                await asyncio.gather(*pending)
            expect[0] = sent
            if len(rows) < sent:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_in.wait(), 10.0)
    finally:
        watcher.cancel()
        await consumer.shutdown()
    parts = {
        "due → born": [born - due for due, born, _s, _r in rows],
        "born → stored": [float(stored - born) for _d, born, stored, _r in rows],
        "stored → listener": [received - stored for _d, _b, stored, received in rows],
        "whole": [received - due for due, _b, _s, received in rows],
    }
    return {"sent": sent, "received": len(rows), "parts": parts, "lags": lags}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.e2e_probe")
    parser.add_argument("--rate", type=float, default=2_000.0, help="messages a second")
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--body-bytes", type=int, default=1024)
    args = parser.parse_args()
    pin = can_pin(0, 1)
    work = bench_work_dir("e2e-probe-")
    try:
        with AeroliteBroker(work / "broker", 1 if pin else None) as broker:
            asyncio.run(create_topic(broker, TOPIC, 8))
            with pinned(0 if pin else None), StallProbe(broker) as probe:
                out = uvloop.run(_run(broker.namesrv, args.rate, args.seconds, args.body_bytes))
            stalls = probe.summary()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{args.rate:,.0f} msg/s of {args.body_bytes} B for {args.seconds:g} s: "
        f"received {out['received']:,} of {out['sent']:,}"
    )
    for name, values in out["parts"].items():
        if values:
            print(
                f"  {name:18} p50 {_pct(values, 50):6.1f}  p99 {_pct(values, 99):6.1f}  "
                f"max {max(values):6.1f} ms"
            )
    lags = out["lags"]
    print(
        f"  client loop, 1 ms timer late by: p99 {_pct(lags, 99):.2f}, "
        f"p99.9 {_pct(lags, 99.9):.2f}, max {max(lags):.2f} ms"
    )
    print(
        f"  broker ping every 20 ms: p50 {stalls.get('p50_ms')}, p99 {stalls.get('p99_ms')}, "
        f"max {stalls.get('max_ms')} ms ({stalls.get('probes')} pings)"
    )


if __name__ == "__main__":
    main()
