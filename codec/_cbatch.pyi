"""Typed stub of the compiled batch and record hot paths (codec/_cbatch.pyx): the signatures
of the pure functions of codec/batch.py and codec/record.py they stand in for."""

from codec.batch import EncodedBatch
from codec.record import Host, RecordInfo

def encode_batch_entry(flag: int, body: bytes, properties: bytes) -> bytes: ...
def split_batch(body: bytes | memoryview) -> list[tuple[int, memoryview, bytes]]: ...
def encode_batch_records(
    buf: bytearray,
    body: bytes | memoryview,
    batch_properties: bytes,
    topic: bytes,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: Host,
    store_host: Host,
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp: int,
) -> EncodedBatch: ...
def encode_record(
    *,
    topic: bytes,
    queue_id: int,
    body: bytes | memoryview,
    flag: int,
    properties: bytes,
    sys_flag: int,
    born_timestamp: int,
    born_host: Host,
    store_host: Host,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes: ...
def patch_append_fields(
    buf: bytearray | memoryview,
    pos: int,
    *,
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp: int,
    sys_flag: int,
) -> None: ...
def decode_record(
    buf: bytes | bytearray | memoryview, pos: int, *, check_crc: bool = False
) -> RecordInfo: ...
def verify_record(
    buf: bytes | bytearray | memoryview, pos: int, commit_log_offset: int, *, check_crc: bool
) -> int: ...
