"""The official C++ client (PyPI ``rocketmq`` 0.4.4) with the broker's retry and delay paths,
at RocketMQ's default delay levels (protocol.md §13.3, §13.6):

- a push consumer that answers RECONSUME_LATER gets the message again 10 s later (level 3,
  CONSUMER_SEND_MSG_BACK with delayLevel 0), with reconsume times 1 and its topic restored;
- a message sent with delay level 2 reaches a running consumer 5 s after the send, not
  before, while an undelayed one sent just after it arrives at once.

The package's ``PushConsumer.subscribe`` has no way to answer RECONSUME_LATER: its wrapper
returns that status only for a listener exception, and then re-raises the exception out of
the ctypes callback, where ctypes prints it and leaves the int handed to C++ unset (it read
as RECONSUME_LATER when tried, but by chance, not by contract). So this module is also its
own driver: run as ``__main__`` (see ``_driver_argv``) it registers a raw callback that
returns the status itself, and sends with ``Message.set_delay_time_level``. It speaks the
JSON-lines protocol of ``drivers/cpp_client.py`` and reuses its helpers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Clients, Sent, send
from tests.processes import DriverRun, unique

# Once: make test-asyncio leaves a third-party client's scenarios out (pyproject's marker).
pytestmark = [pytest.mark.e2e, pytest.mark.once]

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.e2e.test_cpp_retry_delay"
PROPERTY_KEYS = ["DELAY", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "REAL_TOPIC"]
LEVEL_2_S = 5.0  # "1s 5s 10s …": level 2
LEVEL_3_S = 10.0  # the first retry of a message (3 + reconsumeTimes 0)
# A due message is delivered within a schedule round (100 ms) and a long-poll wake-up; the
# C++ client then hands it to a consume thread. Generous: the machine may be busy.
LATE_S = 4.0
CONSUMER_DEADLINE_S = 25.0


def _driver_argv(command: str) -> list[str]:
    boot = (
        f"import runpy, sys; sys.path.insert(0, {str(ROOT)!r}); "
        f"runpy.run_module({MODULE!r}, run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-c", boot, command]


def start_driver(clients: Clients, command: str, **args: Any) -> DriverRun:
    """This module as a driver process (``push_retry`` or ``produce_delayed``)."""
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip("the rocketmq package is not installed: run `make install`")
    return clients._start(f"cpp-{command}", _driver_argv(command), args, clients.work)


def messages(run: DriverRun, body: str) -> list[dict[str, Any]]:
    return [e for e in run.of("msg") if e.get("body") == body]


# ----------------------------------------------------------------------------------- tests


def test_reconsume_later_comes_back_10_s_later(clients: Clients) -> None:
    topic = unique("e2e_retry")
    group = unique("e2e_retry_cg")
    send(clients, topic, [Sent(body="fail-once", tags="Retry", keys=("retry-key",))])
    run = start_driver(
        clients,
        "push_retry",
        group=group,
        topic=topic,
        fail_first=True,
        expect=2,
        settle_s=0.5,
        deadline_s=CONSUMER_DEADLINE_S,
    )
    done = run.finish(timeout_s=CONSUMER_DEADLINE_S + 20)
    got = messages(run, "fail-once")
    assert [e["reconsume_times"] for e in got] == [0, 1], (done, run.describe())
    first, second = got
    assert first["answer"] == "RECONSUME_LATER"
    assert second["answer"] == "CONSUME_SUCCESS"
    waited = second["at"] - first["at"]
    assert waited >= LEVEL_3_S, f"redelivered {waited:.2f} s after the failure"
    assert waited <= LEVEL_3_S + LATE_S, f"redelivered {waited:.2f} s after the failure"
    # The retried copy came through %RETRY%<group>; the client restored the topic.
    assert second["topic"] == topic
    assert second["properties"].get("RETRY_TOPIC") == topic
    assert second["properties"].get("ORIGIN_MESSAGE_ID")
    assert second["msg_id"] == first["msg_id"]  # the UNIQ_KEY travels with it
    assert (second["tags"], second["keys"]) == ("Retry", "retry-key")
    # On the broker's clock too: stored in the retry topic a level-3 delay after the original.
    assert second["store_timestamp"] - first["store_timestamp"] >= LEVEL_3_S * 1000
    assert done["reason"] == "expected", done


def test_delay_level_2_arrives_after_5_s_not_before(clients: Clients) -> None:
    topic = unique("e2e_delay")
    send(clients, topic, [Sent(body="seed", tags="Seed")])  # the topic exists, with a route
    consumer = start_driver(
        clients,
        "push_retry",
        group=unique("e2e_delay_cg"),
        topic=topic,
        fail_first=False,
        expect=3,
        settle_s=0.5,
        deadline_s=CONSUMER_DEADLINE_S,
    )
    # The consumer is pulling: it got the seed.
    if not consumer.wait_for(lambda r: bool(messages(r, "seed")), 15.0):
        pytest.fail(f"the consumer never got the seed\n{consumer.describe()}")
    producer = start_driver(
        clients,
        "produce_delayed",
        group=unique("e2e_delay_pg"),
        topic=topic,
        messages=[
            {"body": "delayed", "tags": "Late", "delay_level": 2},
            {"body": "prompt", "tags": "Now", "delay_level": 0},
        ],
    )
    producer.finish(timeout_s=30)
    sent = {e["index"]: e for e in producer.of("sent")}
    assert [sent[i].get("status") for i in (0, 1)] == ["OK", "OK"], producer.describe()
    consumer.finish(timeout_s=CONSUMER_DEADLINE_S + 20)
    [delayed] = messages(consumer, "delayed")
    [prompt] = messages(consumer, "prompt")
    # The consumer was receiving at once: the undelayed message came right away.
    assert prompt["at"] - sent[1]["at"] < LATE_S
    waited = delayed["at"] - sent[0]["at"]
    assert waited >= LEVEL_2_S, f"arrived {waited:.2f} s after the send"
    assert waited <= LEVEL_2_S + LATE_S, f"arrived {waited:.2f} s after the send"
    assert delayed["store_timestamp"] - delayed["born_timestamp"] >= LEVEL_2_S * 1000
    assert delayed["topic"] == topic
    assert delayed["tags"] == "Late"
    assert delayed["reconsume_times"] == 0
    assert delayed["properties"].get("DELAY") == "2"
    assert delayed["properties"].get("REAL_TOPIC") == topic


# ---------------------------------------------------------------------------------- driver


def _rocketmq() -> tuple[Any, Any]:
    """The package's ``client`` and ``ffi`` modules (loaded by ``drivers/cpp_client.py``
    after its fd swap)."""
    from rocketmq import client, ffi  # type: ignore[import-untyped]

    return client, ffi


def _push_retry(args: dict[str, Any]) -> dict[str, Any]:
    from tests.e2e.drivers import cpp_client

    rmq, ffi = _rocketmq()
    consumer = rmq.PushConsumer(args["group"])
    consumer.set_namesrv_addr(args["namesrv"])
    fail_first = bool(args.get("fail_first"))
    expect = int(args["expect"])
    settle_s = float(args.get("settle_s", 1.0))
    state = {"count": 0, "last": time.monotonic()}
    lock = threading.Lock()

    def on_message(_consumer: Any, handle: Any) -> int:
        # The raw C callback: 0 CONSUME_SUCCESS, 1 RECONSUME_LATER. Nothing may raise here.
        try:
            msg = rmq.RecvMessage(handle)
            fail = fail_first and msg.reconsume_times == 0
            info = cpp_client.describe(msg, PROPERTY_KEYS)
            info["at"] = time.time()
            info["store_timestamp"] = msg.store_timestamp
            info["born_timestamp"] = msg.born_timestamp
            info["answer"] = "RECONSUME_LATER" if fail else "CONSUME_SUCCESS"
            with lock:
                state["count"] += 1
                state["last"] = time.monotonic()
            cpp_client.emit("msg", **info)
        except Exception as exc:
            cpp_client.emit("callback_error", error=repr(exc))
            return 0
        return 1 if fail else 0

    status = ffi.dll.Subscribe(consumer._handle, args["topic"].encode(), b"*")
    if int(status) != 0:
        raise RuntimeError(f"Subscribe returned {int(status)}")
    consumer._register_callback(on_message)  # wraps it in MSG_CALLBACK_FUNC, keeps a ref
    consumer.start()
    cpp_client.emit("started", pid=os.getpid())
    reason = cpp_client.run_until_done(
        state,
        lock,
        expect=expect,
        settle_s=settle_s,
        deadline_s=float(args.get("deadline_s", 25)),
    )
    consumer.shutdown()
    return {"reason": reason, "count": state["count"]}


def _produce_delayed(args: dict[str, Any]) -> dict[str, Any]:
    from tests.e2e.drivers import cpp_client

    rmq, _ = _rocketmq()
    producer = rmq.Producer(args["group"], timeout=3000)
    producer.set_namesrv_addr(args["namesrv"])
    producer.start()
    ok = 0
    for index, spec in enumerate(args["messages"]):
        msg = rmq.Message(args["topic"])
        msg.set_body(spec["body"])
        msg.set_tags(spec["tags"])
        if spec.get("delay_level"):
            msg.set_delay_time_level(int(spec["delay_level"]))
        at = time.time()
        try:
            result = producer.send_sync(msg)
        except Exception as exc:
            cpp_client.emit("sent", index=index, at=at, error=f"{type(exc).__name__}: {exc}")
            continue
        ok += result.status.name == "OK"
        cpp_client.emit("sent", index=index, at=at, status=result.status.name)
    producer.shutdown()
    return {"ok": ok}


def _driver_main() -> None:
    from tests.e2e.drivers import cpp_client  # swaps fd 1 before the C++ library loads

    commands = {"push_retry": _push_retry, "produce_delayed": _produce_delayed}
    args = json.loads(sys.stdin.readline())
    try:
        result = commands[sys.argv[1]](args)
    except Exception as exc:
        cpp_client.emit("done", error=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    cpp_client.emit("done", **result)
    # As drivers/cpp_client.py: no interpreter teardown (the package's __del__ would shut
    # the client down a second time).
    os._exit(0)


if __name__ == "__main__":
    _driver_main()
