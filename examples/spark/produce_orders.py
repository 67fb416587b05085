"""Send JSON orders to a topic, for the Spark examples (examples/spark/README.md).

Each order is ``{"orderId": n, "customer": "c7", "amount": 12.5, "ts": <epoch ms>}`` with
the customer as the tag and the order id as the key; ``--minutes`` spreads the event times
over that many minutes ending now, so the per-minute job has several windows to fill.

    python examples/spark/produce_orders.py --namesrv 127.0.0.1:9876 --topic orders --count 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from client import Message, Producer


def order(n: int, ts: int, rng: random.Random) -> dict[str, object]:
    return {
        "orderId": n,
        "customer": f"c{rng.randrange(10)}",
        "amount": round(rng.uniform(1, 100), 2),
        "ts": ts,
    }


async def produce(
    namesrv: str, topic: str, count: int, minutes: int, seed: int
) -> list[dict[str, object]]:
    """Send ``count`` orders (in batches of 100) and return them."""
    rng = random.Random(seed)  # noqa: S311 - sample data, not secrets
    now_ms = int(time.time() * 1000)
    # Orders arrive in the order they happen, as from a real shop; a stream's watermark
    # then drops none of them as late.
    stamps = sorted(now_ms - rng.randrange(minutes * 60_000) for _ in range(count))
    orders = [order(n, ts, rng) for n, ts in enumerate(stamps)]
    async with Producer("spark-example-orders", namesrv) as producer:
        for i in range(0, count, 100):
            chunk = orders[i : i + 100]
            await producer.send_batch(
                [
                    Message(
                        topic,
                        json.dumps(o).encode(),
                        tags=str(o["customer"]),
                        keys=str(o["orderId"]),
                    )
                    for o in chunk
                ]
            )
    return orders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=10, help="spread of the event times")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    orders = asyncio.run(produce(args.namesrv, args.topic, args.count, args.minutes, args.seed))
    print(f"sent {len(orders)} orders to {args.topic}")


if __name__ == "__main__":
    main()
