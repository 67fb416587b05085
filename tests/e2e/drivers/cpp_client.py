"""Drive the official RocketMQ Python client (PyPI ``rocketmq`` 0.4.4, the C++ client 1.2.x).

Run as ``python cpp_client.py COMMAND`` with one JSON line of arguments on stdin. Every line this
prints on stdout is one JSON object; the last has ``"event": "done"``. The C++ library may print
on its own, so file descriptor 1 is pointed at stderr before the library loads and the JSON goes
out on a private copy of the original stdout.

Commands:

- ``produce``: send ``messages`` with ``mode`` ``sync`` | ``oneway`` | ``orderly``; one
  ``{"event": "sent", ...}`` line per message, in order, flushed at once so a test can act
  (kill the broker) while sends go on. Stops after ``max_consecutive_errors`` failures.
- ``push``: a PushConsumer (``orderly``, ``model`` clustering | broadcasting); one
  ``{"event": "msg", ...}`` line per delivered message. Stops once ``expect`` messages arrived and
  ``settle_s`` passed without another, on a ``stop`` line or EOF on stdin, or at the deadline;
  then shuts the consumer down, which persists its offsets.
- ``pull``: a PullConsumer reading every queue of ``topic`` from offset 0 to the end.

The client's threads cannot be unloaded, so each run is its own process and leaves with
``os._exit`` after an explicit shutdown (the package's ``__del__`` would shut down twice).
``produce`` and ``push`` print ``{"event": "stopping", ...}`` with their result just before
``shutdown()``, which the C++ client sometimes does not survive (``DriverRun.finish``).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import time
from typing import IO, Any

# The JSON channel: a copy of stdout taken before anything can write on fd 1.
_OUT: IO[str] = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
os.dup2(2, 1)

from rocketmq.client import (  # type: ignore[import-untyped]  # noqa: E402  (after the fd swap)
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    RecvMessage,
)
from rocketmq.ffi import (  # type: ignore[import-untyped]  # noqa: E402
    MessageModel,
    _CMessageQueue,
    _CPullStatus,
    dll,
)

_EMIT_LOCK = threading.Lock()
PULL_STATUS = {0: "FOUND", 1: "NO_NEW_MSG", 2: "NO_MATCHED_MSG", 3: "OFFSET_ILLEGAL", 4: "TIMEOUT"}


def emit(event: str, **fields: Any) -> None:
    """Print one JSON line on the private stdout (callbacks run on the client's threads)."""
    line = json.dumps({"event": event, **fields}, separators=(",", ":"))
    with _EMIT_LOCK:
        _OUT.write(line + "\n")
        _OUT.flush()


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def describe(msg: RecvMessage, property_keys: list[str]) -> dict[str, Any]:
    """What a test compares: body, tags, keys, chosen properties, and where it was stored."""
    properties = {key: _text(msg.get_property(key)) for key in property_keys}
    return {
        "topic": msg.topic,
        "body": _text(msg.body),
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
        "properties": {k: v for k, v in properties.items() if v},
        "msg_id": msg.id,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        "store_timestamp": msg.store_timestamp,
    }


def produce(args: dict[str, Any]) -> dict[str, Any]:
    producer = Producer(args["group"], timeout=int(args.get("send_timeout_ms", 3000)))
    producer.set_namesrv_addr(args["namesrv"])
    if args.get("access_key"):
        # ACL: the client signs every request (AccessKey, Signature, OnsChannel).
        producer.set_session_credentials(
            args["access_key"], args["secret_key"], args.get("channel", "ALIYUN")
        )
    producer.start()
    mode = args.get("mode", "sync")
    if mode not in ("sync", "orderly", "oneway"):
        raise ValueError(f"unknown mode {mode!r}")
    if args.get("warmup_topic"):
        _warm_up(producer, str(args["warmup_topic"]), int(args.get("warmup_sends", 8)))
    deadline = time.monotonic() + float(args.get("deadline_s", 60))
    max_errors = int(args.get("max_consecutive_errors", 5))
    ok = errors = consecutive = 0
    started = time.monotonic()
    for index, spec in enumerate(args["messages"]):
        if time.monotonic() > deadline:
            emit("deadline", index=index)
            break
        msg = Message(args["topic"])
        msg.set_body(spec["body"])
        if spec.get("tags"):
            msg.set_tags(spec["tags"])
        if spec.get("keys"):
            msg.set_keys(spec["keys"])
        for key, value in spec.get("properties", {}).items():
            msg.set_property(key, value)
        try:
            if mode == "oneway":
                producer.send_oneway(msg)
                fields: dict[str, Any] = {"status": "OK"}
            else:
                if mode == "sync":
                    result = producer.send_sync(msg)
                else:
                    # The package's hashing selector: queue = shard % queue count.
                    result = producer.send_orderly(msg, int(spec["shard"]))
                # offset is the queue offset; status OK under SYNC_FLUSH means flushed.
                fields = {"status": result.status.name, "msg_id": result.msg_id}
                fields["offset"] = result.offset
        except Exception as exc:
            errors += 1
            consecutive += 1
            emit("sent", index=index, error=f"{type(exc).__name__}: {exc}")
            if consecutive >= max_errors:
                break
            continue
        consecutive = 0
        ok += fields["status"] == "OK"
        emit("sent", index=index, **fields)
    elapsed = time.monotonic() - started
    # Oneway sends are queued in the client; give them a moment on the wire before shutdown.
    if mode == "oneway":
        time.sleep(1.0)
    result = {"ok": ok, "errors": errors, "elapsed_s": round(elapsed, 3)}
    emit("stopping", **result)
    producer.shutdown()
    return result


def _warm_up(producer: Any, topic: str, sends: int, max_s: float = 20.0) -> None:
    """Send ``sends`` messages to ``topic`` (retrying failures) before the counted ones.

    The C++ client (1.2.x, in PyPI ``rocketmq`` 0.4.4) connects to brokers on demand under one
    lock that a send waits for only briefly: while its heartbeat thread opens the connection
    to a second broker, a send to the first fails in the client ("GetTransport ... get
    timed_mutex timeout" in its log, "No route info of this topic" to the caller), before
    any byte reaches a broker. A round of warm-up sends over every queue of the route has
    the connections open before the sends a test counts."""
    deadline = time.monotonic() + max_s
    ok = failed = 0
    while ok < sends and time.monotonic() < deadline:
        msg = Message(topic)
        msg.set_body(f"warm-up-{ok}")
        try:
            result = producer.send_sync(msg)
        except Exception as exc:
            failed += 1
            emit("warmup_failed", error=f"{type(exc).__name__}: {exc}")
            time.sleep(0.1)
            continue
        ok += result.status.name == "OK"
    emit("warm", ok=ok, failed=failed)


def run_until_done(
    state: dict[str, Any],
    lock: threading.Lock,
    *,
    expect: int | None,
    settle_s: float,
    deadline_s: float,
    poll_s: float = 0.05,
) -> str:
    """Wait while a consumer receives: until ``expect`` messages have come and nothing more
    for ``settle_s`` ("expected"), a "stop" line or EOF on stdin — the test went away —
    ("stopped"), or ``deadline_s`` ("deadline"). ``state`` holds ``count`` and ``last``
    (monotonic time of the last message), updated under ``lock`` by the callback."""
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if stop.wait(poll_s):
            return "stopped"
        with lock:
            count, last = state["count"], state["last"]
        if expect is not None and count >= expect and time.monotonic() - last >= settle_s:
            return "expected"
    return "deadline"


def push(args: dict[str, Any]) -> dict[str, Any]:
    model = (
        MessageModel.BROADCASTING
        if args.get("model") == "broadcasting"
        else MessageModel.CLUSTERING
    )
    orderly = bool(args.get("orderly", False))
    consumer = PushConsumer(args["group"], orderly=orderly, message_model=model)
    consumer.set_namesrv_addr(args["namesrv"])
    if args.get("access_key"):
        consumer.set_session_credentials(
            args["access_key"], args["secret_key"], args.get("channel", "ALIYUN")
        )
    if args.get("instance_name"):
        consumer.set_instance_name(args["instance_name"])
    if args.get("thread_count"):
        consumer.set_thread_count(int(args["thread_count"]))
    property_keys: list[str] = list(args.get("property_keys", []))
    probe_prefix: str = args.get("probe_prefix", "\0")
    expect = args.get("expect")
    settle_s = float(args.get("settle_s", 3.0))
    state = {"count": 0, "last": time.monotonic()}
    lock = threading.Lock()

    def on_message(msg: RecvMessage) -> None:
        # Runs on the client's consume threads; an exception here would turn into
        # RECONSUME_LATER, so everything is reported and nothing raises.
        try:
            info = describe(msg, property_keys)
            info["thread"] = threading.get_ident()
            probe = (info["body"] or "").startswith(probe_prefix)
            with lock:
                if not probe:
                    state["count"] += 1
                    state["last"] = time.monotonic()
            emit("probe" if probe else "msg", **info)
        except Exception as exc:
            emit("callback_error", error=repr(exc))

    consumer.subscribe(args["topic"], on_message, args.get("expression", "*"))
    consumer.start()
    emit("started", pid=os.getpid())
    reason = run_until_done(
        state,
        lock,
        expect=None if expect is None else int(expect),
        settle_s=settle_s,
        deadline_s=float(args.get("deadline_s", 60)),
    )
    emit("stopping", reason=reason, count=state["count"])
    started = time.monotonic()
    consumer.shutdown()
    return {"reason": reason, "count": state["count"], "shutdown_s": time.monotonic() - started}


def pull(args: dict[str, Any]) -> dict[str, Any]:
    consumer = PullConsumer(args["group"])
    consumer.set_namesrv_addr(args["namesrv"])
    consumer.start()
    property_keys: list[str] = list(args.get("property_keys", []))
    expression = args.get("expression", "*").encode()
    max_num = int(args.get("max_num", 32))
    deadline = time.monotonic() + float(args.get("deadline_s", 60))
    # The same calls as PullConsumer.pull(), which would retry an error status forever; here
    # each queue is read from 0 until NO_NEW_MSG, and every status is reported.
    queues = ctypes.POINTER(_CMessageQueue)()
    size = ctypes.c_int()
    status = dll.FetchSubscriptionMessageQueues(
        consumer._handle, args["topic"].encode(), ctypes.pointer(queues), ctypes.pointer(size)
    )
    if status != 0:
        consumer.shutdown()
        return {"error": f"FetchSubscriptionMessageQueues returned {int(status)}", "found": 0}
    found = 0
    summary: list[dict[str, Any]] = []
    for i in range(int(size.value)):
        mq = queues[i]
        offset = 0
        statuses: dict[str, int] = {}
        last_status = ""
        while time.monotonic() < deadline:
            result = dll.Pull(
                consumer._handle, ctypes.pointer(mq), expression, ctypes.c_longlong(offset), max_num
            )
            last_status = PULL_STATUS.get(int(result.pullStatus), str(result.pullStatus))
            statuses[last_status] = statuses.get(last_status, 0) + 1
            if result.pullStatus == _CPullStatus.FOUND:
                for j in range(int(result.size)):
                    info = describe(RecvMessage(result.msgFoundList[j]), property_keys)
                    emit("msg", **info)
                    found += 1
            next_offset = int(result.nextBeginOffset)
            dll.ReleasePullResult(result)
            if last_status == "TIMEOUT":
                # No answer: nextBeginOffset is meaningless; retry the same offset a few times.
                if statuses[last_status] >= 3:
                    break
                continue
            if last_status == "NO_NEW_MSG" or (last_status != "FOUND" and next_offset == offset):
                break
            offset = next_offset
        summary.append({"queue_id": int(mq.queueId), "end_offset": offset, "statuses": statuses})
    dll.ReleaseSubscriptionMessageQueue(queues)
    consumer.shutdown()
    return {"found": found, "queues": summary}


COMMANDS = {"produce": produce, "push": push, "pull": pull}


def main() -> None:
    command = sys.argv[1]
    args = json.loads(sys.stdin.readline())
    try:
        result = COMMANDS[command](args)
    except Exception as exc:
        emit("done", error=f"{type(exc).__name__}: {exc}")
        _OUT.flush()
        os._exit(1)
    emit("done", **result)
    _OUT.flush()
    # Skip interpreter teardown: the package's __del__ methods would shut the client down a
    # second time, and the C++ threads do not always survive that.
    os._exit(0)


if __name__ == "__main__":
    main()
