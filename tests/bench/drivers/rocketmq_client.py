"""Benchmark driver for the official RocketMQ Python client (PyPI ``rocketmq`` 0.4.4, the C++
client 1.2.x): ``python -m tests.bench.drivers.rocketmq_client COMMAND`` (see ``common``).

Commands (arguments as JSON on stdin; ``namesrv``, ``topic``, ``body_bytes`` always):

- ``produce``: ``threads`` threads calling ``Producer.send_sync`` in a loop until ``count``
  messages or ``max_s``, after ``warmup`` sends on one thread (route lookup, connection).
- ``push``: a ``PushConsumer`` (new group ``group``) until ``expect`` messages or
  ``max_s``.
- ``pull``: a ``PullConsumer`` reading every queue of ``topic`` from offset 0 to its end,
  ``max_num`` messages per pull, one pull at a time, until ``expect`` or ``max_s``.

The C++ library cannot be unloaded and starts its own threads, so it only ever runs in a
driver process (``HOME`` set by the caller: the library logs to ``~/logs/rocketmq-cpp``).
"""

from __future__ import annotations

import ctypes
import time
import uuid
from typing import Any

from tests.bench.drivers.common import (
    ReceiveClock,
    body_of,
    emit,
    process_window,
    run_command,
    run_threads,
    take_stdout,
)

take_stdout()  # before the library loads: it may print on fd 1

from rocketmq.client import (  # type: ignore[import-untyped]  # noqa: E402
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    RecvMessage,
    SendStatus,
)
from rocketmq.ffi import (  # type: ignore[import-untyped]  # noqa: E402
    _CMessageQueue,
    _CPullStatus,
    dll,
)

PULL_STATUS = {0: "FOUND", 1: "NO_NEW_MSG", 2: "NO_MATCHED_MSG", 3: "OFFSET_ILLEGAL", 4: "TIMEOUT"}


def produce(args: dict[str, Any]) -> dict[str, Any]:
    topic: str = args["topic"]
    body = body_of(int(args["body_bytes"]))
    producer = Producer(
        args.get("group") or f"bench_producer_{uuid.uuid4().hex[:8]}",
        timeout=int(args.get("send_timeout_ms", 3000)),
    )
    producer.set_namesrv_addr(args["namesrv"])
    started = time.perf_counter()
    producer.start()

    def send(_i: int) -> str | None:
        msg = Message(topic)
        msg.set_body(body)
        result = producer.send_sync(msg)
        return None if result.status == SendStatus.OK else result.status.name

    warmup = run_threads(1, int(args.get("warmup", 200)), 30.0, send)
    emit("warm", ok=warmup.ok, errors=sum(warmup.errors.values()))
    window = process_window(args.get("server_pid"))
    stats = run_threads(int(args["threads"]), int(args["count"]), float(args["max_s"]), send)
    cpu = window.stop()
    producer.shutdown()
    return {
        **stats.summary(int(args["threads"])),
        **cpu,
        "warmup": warmup.summary(1),
        "startup_s": round(time.perf_counter() - started, 3),
    }


def preload(args: dict[str, Any]) -> dict[str, Any]:
    """``count`` messages through ``send_batch`` (``batch`` at a time, ``threads`` threads);
    not a figure, just the fastest way in."""
    topic: str = args["topic"]
    body = body_of(int(args["body_bytes"]))
    batch = int(args.get("batch", 32))
    producer = Producer(f"bench_preload_{uuid.uuid4().hex[:8]}", timeout=10_000)
    producer.set_namesrv_addr(args["namesrv"])
    producer.start()

    def send(_i: int) -> str | None:
        msgs = []
        for _ in range(batch):
            msg = Message(topic)
            msg.set_body(body)
            msgs.append(msg)
        result = producer.send_batch(msgs)
        return None if result.status == SendStatus.OK else result.status.name

    count = int(args["count"])
    batches = -(-count // batch)
    threads = int(args.get("threads", 4))
    deadline = time.monotonic() + float(args["max_s"])
    # One thread first: concurrent first sends of a fresh producer trip over the client's
    # connection lock (rocketmq-client-cpp #224) and fail.
    stats = run_threads(1, min(4, batches), float(args["max_s"]), send)
    failed = sum(stats.errors.values()) + sum(stats.not_ok.values())
    for _attempt in range(5):
        left = batches - stats.ok
        if left <= 0 or time.monotonic() > deadline:
            break
        more = run_threads(threads, left, deadline - time.monotonic(), send)
        failed += sum(more.errors.values()) + sum(more.not_ok.values())
        stats.ok += more.ok
    producer.shutdown()
    return {"ok": stats.ok * batch, "batches": stats.ok, "failed_batches": failed}


def push(args: dict[str, Any]) -> dict[str, Any]:
    consumer = PushConsumer(args["group"])
    consumer.set_namesrv_addr(args["namesrv"])
    if args.get("thread_count"):
        consumer.set_thread_count(int(args["thread_count"]))
    clock = ReceiveClock(int(args["expect"]))

    def on_message(msg: RecvMessage) -> None:
        # Runs on the client's consume threads; raising would mean RECONSUME_LATER.
        clock.add(1, len(msg.body or b""))

    consumer.subscribe(args["topic"], on_message, "*")
    window = process_window(args.get("server_pid"))
    clock.started_ns = time.perf_counter_ns()
    consumer.start()
    clock.done.wait(float(args["max_s"]))
    cpu = window.stop()
    result = clock.summary()
    consumer.shutdown()
    return {**result, **cpu}


def pull(args: dict[str, Any]) -> dict[str, Any]:
    consumer = PullConsumer(args.get("group") or f"bench_pull_{uuid.uuid4().hex[:8]}")
    consumer.set_namesrv_addr(args["namesrv"])
    consumer.start()
    expression = b"*"
    max_num = int(args.get("max_num", 32))
    expect = int(args["expect"])
    # The calls PullConsumer.pull() makes, which would retry an error status forever; here
    # each queue is read from 0 until NO_NEW_MSG, and every status is counted.
    queues = ctypes.POINTER(_CMessageQueue)()
    size = ctypes.c_int()
    status = dll.FetchSubscriptionMessageQueues(
        consumer._handle, args["topic"].encode(), ctypes.pointer(queues), ctypes.pointer(size)
    )
    if status != 0:
        consumer.shutdown()
        return {"error": f"FetchSubscriptionMessageQueues returned {int(status)}"}
    clock = ReceiveClock(expect)
    window = process_window(args.get("server_pid"))
    deadline = time.monotonic() + float(args["max_s"])
    statuses: dict[str, int] = {}
    pulls = 0
    for i in range(int(size.value)):
        mq = queues[i]
        offset = 0
        timeouts = 0
        while time.monotonic() < deadline and clock.count < expect:
            t0 = time.perf_counter_ns()
            result = dll.Pull(
                consumer._handle, ctypes.pointer(mq), expression, ctypes.c_longlong(offset), max_num
            )
            clock.request(time.perf_counter_ns() - t0)
            pulls += 1
            name = PULL_STATUS.get(int(result.pullStatus), str(result.pullStatus))
            statuses[name] = statuses.get(name, 0) + 1
            if result.pullStatus == _CPullStatus.FOUND:
                n = int(result.size)
                nbytes = sum(len(RecvMessage(result.msgFoundList[j]).body or b"") for j in range(n))
                clock.add(n, nbytes)
            next_offset = int(result.nextBeginOffset)
            dll.ReleasePullResult(result)
            if name == "TIMEOUT":
                timeouts += 1
                if timeouts >= 3:
                    break
                continue
            if name == "NO_NEW_MSG" or (name != "FOUND" and next_offset == offset):
                break
            offset = next_offset
    cpu = window.stop()
    dll.ReleaseSubscriptionMessageQueue(queues)
    result_summary = clock.summary()
    consumer.shutdown()
    return {
        **result_summary,
        **cpu,
        "queues": int(size.value),
        "pulls": pulls,
        "statuses": statuses,
    }


if __name__ == "__main__":
    run_command({"produce": produce, "preload": preload, "push": push, "pull": pull})
