"""ACL 1.0 signatures: ours are the ones the official C++ client computes (every signed
frame in the recorded vectors verifies), and the client hook signs what the broker checks."""

from __future__ import annotations

import json

from remoting.acl import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    AclClientHook,
    SessionCredentials,
    signature,
    signed_content,
)
from remoting.command import RemotingCommand, decode_command
from remoting.frame import FrameDecoder
from tests.remoting.test_vectors import _vectors_dir

VECTORS = _vectors_dir() / "cpp_client_frames.json"


def test_every_signed_cpp_frame_verifies() -> None:
    # The recorded client ran without credentials: AccessKey "" and secret "".
    frames = json.loads(VECTORS.read_text())
    checked = 0
    for f in frames:
        if f["direction"] != "client->server":
            continue
        for raw in FrameDecoder().feed(bytes.fromhex(f["hex"])):
            cmd = decode_command(raw)
            if SIGNATURE not in cmd.ext_fields:
                continue
            content = signed_content(cmd.ext_fields, cmd.body)
            assert signature(content, "") == cmd.ext_fields[SIGNATURE], cmd
            checked += 1
    assert checked >= 50  # heartbeats, routes, sends with bodies, pulls …


def test_the_hook_signs_fields_and_body_and_skips_the_query_flag() -> None:
    creds = SessionCredentials("AK123456", "SK123456")
    request = RemotingCommand.request(10, {"topic": "T", "b": "x"}, b"body")
    AclClientHook(creds).before_request("127.0.0.1:1", request)
    ext = request.ext_fields
    assert ext[ACCESS_KEY] == "AK123456"
    assert ext[SIGNATURE] == signature(b"AK123456xT" + b"body", "SK123456")
    # A field outside the signed header changes nothing.
    ext[UNIQUE_MSG_QUERY_FLAG] = "true"
    assert signature(signed_content(ext, request.body), "SK123456") == ext[SIGNATURE]
    # Signing again (a retry) replaces the signature rather than signing it.
    AclClientHook(creds).before_request("127.0.0.1:1", request)
    assert ext[SIGNATURE] == signature(b"AK123456xT" + b"body", "SK123456")
    assert "SK123456" not in repr(creds)
