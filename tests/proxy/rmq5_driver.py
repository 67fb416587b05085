"""Drive the official RocketMQ 5 Python client (PyPI ``rocketmq-python-client`` 5.1.2).

Run by the interpreter of ``.venv-rmq5`` (its package ``rocketmq`` is not the 4.x C++
client's of ``.venv``) as ``python rmq5_driver.py``, with one JSON line of arguments on
stdin: ``{"endpoint": "127.0.0.1:PORT", "deadline_s": 60, "steps": [...]}``. The steps run
in order, in this one process, on the clients the earlier steps made. Every line printed on
stdout is one JSON object; the last is ``{"event": "done"}``, with ``error`` when a step
raised what it does not report itself, or when ``deadline_s`` passed (the driver then leaves
at once). The client logs to ``~/logs/rocketmq_python``: run it with ``HOME`` in a temp dir.

Steps, by ``op``, each with an optional ``label`` that every line it prints carries (its
index and op by default). A message spec has ``body``, ``tag``, ``keys`` (a list),
``properties``, ``group`` (FIFO message group), ``delay_s`` (deliver that many seconds after
the next whole second: the client takes whole seconds). ``send`` and ``transaction`` take a
``topic``; ``simple`` and ``push`` a ``group`` and ``topic``.

- ``producer``: ``topics``, ``checker`` (``COMMIT`` / ``ROLLBACK``, optional): a Producer; each
  transaction check the broker sends is a ``checked`` line, answered with ``checker``.
- ``send``: ``messages`` → per message ``sent`` (message_id, offset, deliver_at_ms) or
  ``send_error`` (type, code, text).
- ``transaction``: ``message``, ``end`` (``commit`` / ``rollback`` / ``none``) → ``sent`` with
  the transaction id, then ``ended`` (or ``end_error``).
- ``wait_checks``: ``count``, ``within_s`` → ``checks`` (how many have come).
- ``simple``: ``expression``, ``expression_type`` (``TAG``, ``SQL92``), ``await_s`` (its
  long polling): a SimpleConsumer.
- ``receive``: ``max``, ``invisible_s``, ``until``, ``until_total``, ``within_s``, ``ack`` →
  ``msg`` per message (``index``: its place among all received), then ``received`` (count,
  calls). Receives until ``until`` messages came in this step and ``until_total`` in all, or
  ``within_s`` passed; at least once.
- ``ack``: ``indices`` (or ``"all"``: every message received so far) → ``acked`` or
  ``ack_error`` per message.
- ``change``: ``index``, ``invisible_s`` → ``changed`` (old and new receipt handle) or
  ``change_error``.
- ``sleep``: ``s``.
- ``wait_go``: ``within_s`` → ``waiting``, then waits for a ``go`` line on stdin (the test
  acts on the broker meanwhile) → ``went`` (``go``: whether it came).
- ``push``: ``expression``, ``expression_type``, ``fail_prefix`` (bodies starting with it
  are answered FAILURE, the rest SUCCESS), ``until_ok``, ``until_failed`` (deliveries of each
  kind), ``settle_s``, ``within_s`` → ``msg`` per delivery (with ``result``), then ``pushed``
  (``reason``: ``expected`` once both counts came and ``settle_s`` passed without another,
  else ``deadline``). The consumer is shut down at the end of the step.

What the client logs at ERROR (it swallows some failures, a refused QueryRoute among them,
and only logs them) is copied out as ``client_error`` lines.

The client's threads (a shared event loop, schedulers) are daemons of its own; the driver
shuts its clients down and leaves with ``os._exit``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
from typing import Any

_EMIT_LOCK = threading.Lock()
_OUT = sys.stdout
_STEP = {"label": ""}  # the running step's label, on every line it prints


def emit(event: str, **fields: Any) -> None:
    """One JSON line on stdout (listeners and checkers call this on the client's threads)."""
    record = {"event": event, "label": _STEP["label"], **fields}
    line = json.dumps(record, separators=(",", ":"), default=str)
    with _EMIT_LOCK:
        _OUT.write(line + "\n")
        _OUT.flush()


def error_fields(exc: BaseException) -> dict[str, Any]:
    code = getattr(exc, "code", None)
    return {"type": type(exc).__name__, "code": code, "text": str(exc)}


def type_name(value: Any) -> str | None:
    names = {1: "NORMAL", 2: "FIFO", 3: "DELAY", 4: "TRANSACTION", 5: "LITE", 6: "PRIORITY"}
    return None if value is None else names.get(int(value), str(value))


def describe(msg: Any, index: int) -> dict[str, Any]:
    """What a test compares of a received message."""
    return {
        "index": index,
        "topic": msg.topic,
        "body": bytes(msg.body).decode("utf-8", errors="replace"),
        "tag": msg.tag,
        "keys": sorted(msg.keys),
        "properties": dict(msg.properties),
        "message_id": msg.message_id,
        "message_group": msg.message_group,
        "message_type": type_name(msg.message_type),
        "delivery_attempt": msg.delivery_attempt,
        "delivery_timestamp": msg.delivery_timestamp,
        "born_timestamp": msg.born_timestamp,
        "corrupted": msg.corrupted,
        "receipt_handle": msg.receipt_handle,
        "at_ms": int(time.time() * 1000),
    }


class Session:
    """The clients the steps made, and what they received."""

    def __init__(self, endpoint: str) -> None:
        import rocketmq  # type: ignore[import-untyped]  # .venv has the 4.x package of that name

        self.rmq: Any = rocketmq
        self.config = rocketmq.ClientConfiguration(endpoint, rocketmq.Credentials())
        self.producer: Any = None
        self.consumer: Any = None
        self.received: list[Any] = []
        self.checks = 0
        self._checks_cond = threading.Condition()
        self._started: list[Any] = []

    # ------------------------------------------------------------------ producing

    def op_producer(self, step: dict[str, Any]) -> None:
        checker = None
        if step.get("checker"):
            checker = self._checker(str(step["checker"]))
        self.producer = self.rmq.Producer(self.config, list(step["topics"]), checker=checker)
        self.producer.startup()
        self._started.append(self.producer)
        emit("producer_started")

    def _checker(self, answer: str) -> Any:
        rmq, session = self.rmq, self
        resolution = getattr(rmq.TransactionResolution, answer)
        base: Any = rmq.TransactionChecker

        class Checker(base):  # type: ignore[misc]
            def check(self, message: Any) -> Any:
                emit("checked", **describe(message, -1), answer=answer)
                with session._checks_cond:
                    session.checks += 1
                    session._checks_cond.notify_all()
                return resolution

        return Checker()

    def message(self, topic: str, spec: dict[str, Any]) -> tuple[Any, int | None]:
        """A Message of ``spec``, and its delivery time in ms if it is delayed."""
        msg = self.rmq.Message()
        msg.topic = topic
        msg.body = str(spec["body"]).encode()
        if spec.get("tag"):
            msg.tag = spec["tag"]
        for key in spec.get("keys", []):
            msg.keys = key  # the client adds one key per assignment
        for name, value in spec.get("properties", {}).items():
            msg.add_property(name, value)
        if spec.get("group"):
            msg.message_group = spec["group"]
        deliver_at_ms = None
        if spec.get("delay_s"):
            seconds = math.ceil(time.time()) + int(spec["delay_s"])
            msg.delivery_timestamp = seconds  # the client sends it as Timestamp.seconds
            deliver_at_ms = seconds * 1000
        return msg, deliver_at_ms

    def op_send(self, step: dict[str, Any]) -> None:
        for i, spec in enumerate(step["messages"]):
            msg, deliver_at_ms = self.message(step["topic"], spec)
            try:
                receipt = self.producer.send(msg)
            except Exception as exc:
                emit("send_error", index=i, body=spec["body"], **error_fields(exc))
                continue
            emit(
                "sent",
                index=i,
                body=spec["body"],
                message_id=receipt.message_id,
                offset=receipt.offset,
                deliver_at_ms=deliver_at_ms,
                at_ms=int(time.time() * 1000),
            )

    def op_transaction(self, step: dict[str, Any]) -> None:
        msg, _ = self.message(step["topic"], step["message"])
        tx = self.producer.begin_transaction()
        receipt = self.producer.send(msg, tx)
        emit(
            "sent",
            body=step["message"]["body"],
            message_id=receipt.message_id,
            transaction_id=receipt.transaction_id,
            offset=receipt.offset,
        )
        end = step.get("end", "commit")
        try:
            if end == "commit":
                tx.commit()
            elif end == "rollback":
                tx.rollback()
        except Exception as exc:
            emit("end_error", end=end, **error_fields(exc))
            return
        emit("ended", end=end, body=step["message"]["body"])

    def op_wait_checks(self, step: dict[str, Any]) -> None:
        deadline = time.monotonic() + float(step["within_s"])
        with self._checks_cond:
            while self.checks < int(step["count"]) and time.monotonic() < deadline:
                self._checks_cond.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            emit("checks", count=self.checks)

    # ------------------------------------------------------------------ consuming

    def _expression(self, step: dict[str, Any]) -> Any:
        """The step's filter: ``expression`` (default ``*``) of ``expression_type``, ``TAG``
        (default) or ``SQL92``."""
        from rocketmq.grpc_protocol import FilterType  # type: ignore[import-untyped]

        kind = FilterType.SQL if step.get("expression_type") == "SQL92" else FilterType.TAG
        return self.rmq.FilterExpression(step.get("expression", "*"), kind)

    def op_simple(self, step: dict[str, Any]) -> None:
        expression = self._expression(step)
        self.consumer = self.rmq.SimpleConsumer(
            self.config,
            step["group"],
            {step["topic"]: expression},
            await_duration=int(step.get("await_s", 1)),
        )
        self.consumer.startup()
        self._started.append(self.consumer)
        emit("simple_started")

    def op_receive(self, step: dict[str, Any]) -> None:
        until = int(step.get("until", 0))
        until_total = int(step.get("until_total", 0))
        deadline = time.monotonic() + float(step.get("within_s", 0))
        got = calls = 0
        while True:
            calls += 1
            try:
                batch = self.consumer.receive(int(step.get("max", 16)), int(step["invisible_s"]))
            except Exception as exc:
                emit("receive_error", **error_fields(exc))
                batch = []
            for msg in batch:
                index = len(self.received)
                self.received.append(msg)
                got += 1
                emit("msg", **describe(msg, index))
                if step.get("ack"):
                    self._ack(index)
            enough = got >= until and len(self.received) >= until_total
            if enough or time.monotonic() >= deadline:
                break
        emit("received", count=got, calls=calls)

    def _ack(self, index: int) -> None:
        try:
            self.consumer.ack(self.received[index])
        except Exception as exc:
            emit("ack_error", index=index, **error_fields(exc))
            return
        emit("acked", index=index)

    def op_ack(self, step: dict[str, Any]) -> None:
        indices = step["indices"]
        for index in range(len(self.received)) if indices == "all" else indices:
            self._ack(int(index))

    def op_change(self, step: dict[str, Any]) -> None:
        msg = self.received[int(step["index"])]
        old = msg.receipt_handle
        try:
            self.consumer.change_invisible_duration(msg, int(step["invisible_s"]))
        except Exception as exc:
            emit("change_error", index=step["index"], **error_fields(exc))
            return
        emit("changed", index=step["index"], old=old, new=msg.receipt_handle)

    def op_sleep(self, step: dict[str, Any]) -> None:
        time.sleep(float(step["s"]))

    def op_push(self, step: dict[str, Any]) -> None:
        rmq = self.rmq
        fail_prefix = step.get("fail_prefix") or "\0"
        counts = {"ok": 0, "failed": 0, "last": time.monotonic()}
        cond = threading.Condition()

        base: Any = rmq.MessageListener

        class Listener(base):  # type: ignore[misc]
            def consume(self, message: Any) -> Any:
                info = describe(message, -1)
                failed = info["body"].startswith(fail_prefix)
                emit("msg", **info, result="FAILURE" if failed else "SUCCESS")
                with cond:
                    counts["failed" if failed else "ok"] += 1
                    counts["last"] = time.monotonic()
                    cond.notify_all()
                return rmq.ConsumeResult.FAILURE if failed else rmq.ConsumeResult.SUCCESS

        expression = self._expression(step)
        consumer = rmq.PushConsumer(
            self.config,
            step["group"],
            Listener(),
            {step["topic"]: expression},
            consumption_thread_count=2,
        )
        consumer.startup()
        emit("push_started")
        reason = self._wait_pushed(step, counts, cond)
        consumer.shutdown()
        emit("pushed", reason=reason, ok=counts["ok"], failed=counts["failed"])

    @staticmethod
    def _wait_pushed(
        step: dict[str, Any], counts: dict[str, Any], cond: threading.Condition
    ) -> str:
        deadline = time.monotonic() + float(step["within_s"])
        settle = float(step.get("settle_s", 1.0))
        with cond:
            while time.monotonic() < deadline:
                enough = counts["ok"] >= int(step.get("until_ok", 0)) and counts["failed"] >= int(
                    step.get("until_failed", 0)
                )
                if enough and time.monotonic() - counts["last"] >= settle:
                    return "expected"
                cond.wait(timeout=0.1)
        return "deadline"

    def close(self) -> None:
        for client in reversed(self._started):
            try:
                client.shutdown()
            except Exception as exc:
                emit("shutdown_error", **error_fields(exc))

    def op_wait_go(self, step: dict[str, Any]) -> None:
        came = threading.Event()

        def read() -> None:
            for line in sys.stdin:
                if line.strip() == "go":
                    came.set()
                    return

        threading.Thread(target=read, daemon=True).start()
        emit("waiting")
        emit("went", go=came.wait(float(step.get("within_s", 30))))


class ClientErrors(logging.Handler):
    """The client's ERROR log records as ``client_error`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        emit("client_error", text=record.getMessage())


def watchdog(deadline_s: float) -> None:
    """Leave at the deadline, whatever a step is waiting for."""
    time.sleep(deadline_s)
    emit("done", error=f"deadline of {deadline_s:g} s passed")
    os._exit(3)


def main() -> None:
    args = json.loads(sys.stdin.readline())
    threading.Thread(
        target=watchdog, args=(float(args.get("deadline_s", 60)),), daemon=True
    ).start()
    session = Session(args["endpoint"])
    errors = ClientErrors(logging.ERROR)
    logging.getLogger("rocketmq-python-client").addHandler(errors)
    try:
        for i, step in enumerate(args["steps"]):
            _STEP["label"] = str(step.get("label") or f"{i}-{step['op']}")
            emit("step", op=step["op"])
            getattr(session, f"op_{step['op']}")(step)
    except Exception as exc:
        emit("done", error=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    session.close()
    emit("done", received=len(session.received), checks=session.checks)
    os._exit(0)


if __name__ == "__main__":
    main()
