"""Benchmark driver for NATS JetStream with nats-py, on uvloop, in the SDK benchmark's shapes:
``python -m tests.bench.drivers.nats_async COMMAND`` (see ``common`` and ``async_shapes``).

Commands (arguments as JSON on stdin; ``port``, ``stream``, ``subject``, ``body_bytes``
always); the stream (file storage) is created when missing:

- ``produce``: ``warmup`` publishes awaited one by one, then the ``shape`` until ``count``
  or ``max_s``: ``one``, a ``js.publish`` awaited (its ``PubAck``) at a time; ``window``,
  ``window`` tasks each awaiting its own publish (one connection, which NATS multiplexes);
  ``batch``, ``batch`` concurrent publishes awaited together, one group at a time.
- ``preload``: as ``nats_client preload``.
- ``durable``: as ``nats_client durable``: a durable pull consumer, ``fetch(max_num)`` and an
  ack of each batch's last message (``AckPolicy.ALL``), one fetch at a time.
- ``paced``: ``groups`` durable push consumers (explicit acks, one per message, sent without
  waiting, as nats-py's ``msg.ack()`` does) read while ``rate`` publishes a second go out for
  ``seconds``, each millisecond's due ones gathered (``tests.bench.drivers.paced``). Push
  delivery is JetStream's lowest-latency way to consume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from tests.bench.drivers import nats_client
from tests.bench.drivers.async_shapes import run_shape, run_uvloop, summary
from tests.bench.drivers.common import body_of, emit, process_window, run_command, run_tasks
from tests.bench.drivers.paced import Paced, paced_role, read_paced, run_paced


async def _produce(args: dict[str, Any]) -> dict[str, Any]:
    nc, js = await nats_client._connect(args)
    subject: str = args["subject"]
    body = body_of(int(args["body_bytes"]))
    shape = str(args["shape"])
    window, batch = int(args.get("window", 256)), int(args.get("batch", 32))

    async def one(_i: int) -> str | None:
        await js.publish(subject, body)
        return None

    async def group(_i: int, n: int) -> int:
        acks = await asyncio.gather(*(js.publish(subject, body) for _ in range(n)))
        return len(acks)

    try:
        warmup = await run_tasks(1, int(args.get("warmup", 200)), 30.0, one)
        emit("warm", ok=warmup.ok, errors=sum(warmup.errors.values()))
        window_cpu = process_window(args.get("server_pid"))
        stats = await run_shape(
            shape,
            count=int(args["count"]),
            max_s=float(args["max_s"]),
            window=window,
            batch=batch,
            one=one,
            group=group,
        )
        cpu = window_cpu.stop()
    finally:
        await nc.close()
    size = {"one": 1, "window": window, "batch": batch}[shape]
    return {**summary(stats, shape, size, cpu), "warmup_ok": warmup.ok}


async def _paced(args: dict[str, Any]) -> dict[str, Any]:
    nc, js = await nats_client._connect(args)
    subject: str = args["subject"]
    role = paced_role(args)
    groups = 0 if role == "producer" else int(args.get("groups", 1))
    run = Paced(groups, int(args["body_bytes"]))
    subs = []
    try:
        for g in range(groups):

            def callback_of(group: int) -> Callable[[Msg], Awaitable[None]]:
                async def callback(msg: Msg) -> None:
                    run.received(group, msg.data)
                    await msg.ack()

                return callback

            subs.append(
                await js.subscribe(
                    subject,
                    stream=args["stream"],
                    durable=f"paced{g}",
                    cb=callback_of(g),
                    manual_ack=True,
                    config=ConsumerConfig(
                        ack_policy=AckPolicy.EXPLICIT,
                        deliver_policy=DeliverPolicy.NEW,
                        max_ack_pending=-1,
                    ),
                    pending_msgs_limit=-1,
                    pending_bytes_limit=-1,
                )
            )
        if role == "readers":
            return await read_paced(run, args)

        async def send(bodies: list[bytes]) -> int:
            acks = await asyncio.gather(*(js.publish(subject, body) for body in bodies))
            return len(acks)

        return await run_paced(run, send, args)
    finally:
        for sub in subs:
            await sub.unsubscribe()
        await nc.close()


def paced(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_paced(args))


def produce(args: dict[str, Any]) -> dict[str, Any]:
    return run_uvloop(_produce(args))


if __name__ == "__main__":
    run_command(
        {
            "produce": produce,
            "preload": nats_client.preload,
            "durable": nats_client.durable,
            "paced": paced,
        }
    )
