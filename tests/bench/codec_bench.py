"""Codec micro-benchmark: what one call of each hot codec function costs, compiled and pure.

``python -m tests.bench.codec_bench`` times the public functions of ``codec`` as the store,
the broker and the SDK call them, in this process (the compiled speedups when built) and in
a child process with ``AEROLITE_NO_EXTENSIONS=1`` (pure Python), with ``timeit`` (the best of
``REPEATS`` runs of ``NUMBER`` calls, µs per call), over the workloads of docs/benchmarks.md
"After M12": 1 KiB bodies, properties as the SDK sends them (TAGS, KEYS, UNIQ_KEY, WAIT),
32 records to a batch or a pull. Figures swing with the machine's load: compare the columns
of one run, not runs of different days.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import timeit
from collections.abc import Callable

import codec
from codec import encode_batch_entry, encode_properties, encode_record, patch_append_fields
from codec.units import pack_cq_units, put_index_entries
from codec.view import MessageExt

REPEATS = 7
NUMBER = 200
RECORDS = 32
HOST = (bytes([127, 0, 0, 1]), 10911)


def _props(i: int) -> bytes:
    uniq = f"7F0000010F2A{i:020X}"
    return encode_properties(
        {"TAGS": "TagA", "KEYS": f"order-{i}", "UNIQ_KEY": uniq, "WAIT": "true"}
    ).encode()


def _record(i: int, body: bytes) -> bytes:
    rec = bytearray(
        encode_record(
            topic=b"TopicTest",
            queue_id=0,
            body=body,
            flag=0,
            properties=_props(i),
            sys_flag=0,
            born_timestamp=1_700_000_000_000,
            born_host=HOST,
            store_host=HOST,
        )
    )
    patch_append_fields(rec, 0, queue_offset=i, commit_log_offset=0, store_timestamp=1, sys_flag=0)
    return bytes(rec)


def _cases() -> dict[str, Callable[[], object]]:
    """name → one call."""
    body = os.urandom(1024)
    props = [_props(i) for i in range(RECORDS)]
    batch = b"".join(encode_batch_entry(0, body, p) for p in props)
    record = _record(0, body)
    pull = b"".join(_record(i, body) for i in range(RECORDS))
    offsets = [i * len(record) for i in range(RECORDS)]
    cq = bytearray(256 * 20)
    index = bytearray(40 + 500_000 * 4 + 257 * 20)
    hashes = [codec.index_key_hash(f"TopicTest#{i:032X}") for i in range(256)]
    keys = [f"{i:032X}".encode() for i in range(RECORDS)]
    text = props[0].decode()

    def pull_and_read() -> None:
        for view in codec.decode_records(pull, "broker-a", MessageExt):
            _ = view.body, view.properties

    return {
        "encode_batch_records, 32 x 1 KiB": lambda: codec.encode_batch_records(
            bytearray(64 << 10),
            batch,
            b"CLUSTER\x01c",
            b"TopicTest",
            0,
            0,
            1,
            HOST,
            HOST,
            0,
            0,
            2,
        ),
        "encode_record, 1 KiB": lambda: encode_record(
            topic=b"TopicTest",
            queue_id=0,
            body=body,
            flag=0,
            properties=props[0],
            sys_flag=0,
            born_timestamp=1,
            born_host=HOST,
            store_host=HOST,
        ),
        "verify_record, no CRC": lambda: codec.verify_record(record, 0, 0, check_crc=False),
        "verify_record, CRC": lambda: codec.verify_record(record, 0, 0, check_crc=True),
        "decode_record": lambda: codec.decode_record(record, 0),
        "pack_cq_units, 256": lambda: pack_cq_units(cq, 0, list(range(256)), [1024] * 256, hashes),
        "put_index_entries, 256, 500,000 slots": lambda: put_index_entries(
            index, 500_000, 1, 0, hashes, list(range(256)), 0, 256, 0
        ),
        "java_hashes_ascii, 32 keys": lambda: codec.java_hashes_ascii(b"TopicTest#", keys),
        "index_hashes, 32 records": lambda: codec.index_hashes(b"TopicTest", props, offsets),
        "tags_codes, 32 records": lambda: codec.tags_codes(props),
        "decode_properties": lambda: codec.decode_properties(text),
        "decode_records, per pull of 32": lambda: codec.decode_records(
            pull, "broker-a", MessageExt
        ),
        "decode_records + body and properties read": pull_and_read,
    }


def measure() -> dict[str, float]:
    """µs per call of each case, in this process."""
    out = {}
    for name, call in _cases().items():
        best = min(timeit.repeat(call, number=NUMBER, repeat=REPEATS))
        out[name] = round(best / NUMBER * 1e6, 2)
    return out


def main() -> None:
    if "--child" in sys.argv:
        print(json.dumps({"speedups": codec.SPEEDUPS, "us": measure()}))
        return
    here = measure()
    env = {**os.environ, "AEROLITE_NO_EXTENSIONS": "1"}
    child = subprocess.run(
        [sys.executable, "-m", "tests.bench.codec_bench", "--child"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    pure = json.loads(child.stdout)
    print(f"this process: {codec.SPEEDUPS}; child: {pure['speedups']}")
    print(f"{'function (workload)':45} {'pure µs':>10} {'this µs':>10} {'ratio':>7}")
    for name, us in here.items():
        p = pure["us"][name]
        print(f"{name:45} {p:10.2f} {us:10.2f} {p / us if us else 0:6.1f}x")


if __name__ == "__main__":
    main()
