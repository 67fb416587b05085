"""The typed headers' shortcuts for the broker's hot paths, and the headers the broker's
processors read that Java keeps beside its header classes.

``SendMessageResponseHeader.ext_fields_of`` and ``PullMessageResponseHeader.ext_fields_of``
write a reply's fields without building the header (once per send and per pull): they must
give exactly what ``to_ext_fields`` gives, keys in the same order (the JSON header is
written in that order). ``SendMessageRequestHeader.batch_flag`` reads the batch flag as the
broker takes it, "1" included, while the header's own ``batch`` parses as Java does.
"""

from __future__ import annotations

import pytest

from remoting.headers import (
    CreateAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    PullMessageResponseHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from tests.support import send_header


@pytest.mark.parametrize(
    ("msg_id", "queue_id", "queue_offset", "region", "trace_on"),
    [
        ("7F00000100002A9F0000000000000000", 0, 0, "DefaultRegion", "true"),
        ("AC11000100002A9F00000000000F4240", 15, (1 << 63) - 1, "", "false"),
        ("x", -1, -5, "région", "TRUE"),
    ],
)
def test_send_reply_fields_are_the_headers(
    msg_id: str, queue_id: int, queue_offset: int, region: str, trace_on: str
) -> None:
    fast = SendMessageResponseHeader.ext_fields_of(msg_id, queue_id, queue_offset, region, trace_on)
    typed = SendMessageResponseHeader(
        msg_id=msg_id,
        queue_id=queue_id,
        queue_offset=queue_offset,
        msg_region=region,
        trace_on=trace_on,
    ).to_ext_fields()
    assert list(fast.items()) == list(typed.items())
    parsed = SendMessageResponseHeader.from_ext_fields(fast)
    assert (parsed.queue_id, parsed.queue_offset, parsed.msg_region) == (
        queue_id,
        queue_offset,
        region,
    )


@pytest.mark.parametrize(
    ("suggest", "next_begin", "min_offset", "max_offset"),
    [(0, 0, 0, 0), (1, 32, 0, 100), (0, -1, 7, (1 << 63) - 1)],
)
def test_pull_reply_fields_are_the_headers(
    suggest: int, next_begin: int, min_offset: int, max_offset: int
) -> None:
    fast = PullMessageResponseHeader.ext_fields_of(suggest, next_begin, min_offset, max_offset)
    typed = PullMessageResponseHeader(
        suggest_which_broker_id=suggest,
        next_begin_offset=next_begin,
        min_offset=min_offset,
        max_offset=max_offset,
    ).to_ext_fields()
    assert list(fast.items()) == list(typed.items())


@pytest.mark.parametrize(
    ("raw", "batch"),
    [("true", True), ("TRUE", True), (" true ", True), ("1", True), ("0", False), ("", False)],
)
def test_batch_flag_takes_the_cpp_clients_one(raw: str, batch: bool) -> None:
    assert SendMessageRequestHeader.batch_flag({"m": raw}, v2=True) is batch
    assert SendMessageRequestHeader.batch_flag({"batch": raw}, v2=False) is batch
    # Each code reads its own name only.
    assert SendMessageRequestHeader.batch_flag({"batch": raw}, v2=True) is False
    assert SendMessageRequestHeader.batch_flag({"m": raw}, v2=False) is False


def test_batch_field_itself_parses_as_java_does() -> None:
    ext = send_header("T").to_v2()
    ext["m"] = "1"
    assert SendMessageRequestHeader.from_v2(ext).batch is False
    assert SendMessageRequestHeader.batch_flag(ext, v2=True) is True


def test_unique_key_query_flag_is_left_out_unless_set() -> None:
    header = QueryMessageRequestHeader(
        topic="T", key="k", max_num=64, begin_timestamp=0, end_timestamp=1
    )
    assert "_UNIQUE_KEY_QUERY" not in header.to_ext_fields()
    ext = {**header.to_ext_fields(), "_UNIQUE_KEY_QUERY": "True"}
    assert QueryMessageRequestHeader.from_ext_fields(ext).unique_key_query is True
    ext["_UNIQUE_KEY_QUERY"] = "false"
    assert QueryMessageRequestHeader.from_ext_fields(ext).unique_key_query is False


def test_acl_headers_keep_what_is_left_out_unset() -> None:
    h = CreateAccessConfigRequestHeader.from_ext_fields({"accessKey": "RocketMQ", "admin": "TRUE"})
    assert (h.access_key, h.admin, h.secret_key, h.topic_perms) == ("RocketMQ", True, None, None)
    assert CreateAccessConfigRequestHeader.from_ext_fields({}).access_key == ""
    assert CreateAccessConfigRequestHeader.from_ext_fields({"topicPerms": ""}).topic_perms == ""
    version = '{"counter":3,"timestamp":1}'
    reply = GetBrokerAclConfigResponseHeader(
        version=version,
        broker_name="b",
        broker_addr="127.0.0.1:1",
        cluster_name="c",
        all_acl_file_version=f'{{"/acl.yml":{version}}}',
        accounts=2,
    ).to_ext_fields()
    assert list(reply) == [
        "version", "brokerName", "brokerAddr", "clusterName", "allAclFileVersion", "accounts",
    ]  # fmt: skip
    assert reply["allAclFileVersion"] == '{"/acl.yml":{"counter":3,"timestamp":1}}'
    assert reply["accounts"] == "2"
