"""ACL 1.0 with the official C++ client (PyPI rocketmq 0.4.4): with the right access key
and secret its signed requests pass, so messages go out and come back; with a wrong secret
every send is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Clients, Sent, assert_same_messages, consume
from tests.processes import Broker, unique

# Once: make test-asyncio leaves a third-party client's scenarios out (pyproject's marker).
pytestmark = [pytest.mark.e2e, pytest.mark.once]

ACL_FILE = """\
accounts:
  - accessKey: cppUser1
    secretKey: cppSecret1
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
KEYS = {"access_key": "cppUser1", "secret_key": "cppSecret1"}


def test_the_cpp_client_signs_its_way_through_the_acl(
    launch: Callable[..., Broker],
    client_factory: Callable[[Broker], Clients],
    tmp_path: Path,
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_FILE)
    broker = launch(tmp_path / "store", {"aclEnable": "true", "aclFilePath": str(acl)})
    clients = client_factory(broker)
    topic = unique("AclCpp")
    messages = [Sent(body=f"acl-{i}", tags="T") for i in range(30)]
    run = clients.cpp(
        "produce",
        group=unique("acl_producer"),
        topic=topic,
        messages=[m.cpp_spec() for m in messages],
        deadline_s=60,
        **KEYS,
    )
    done = run.finish(timeout_s=90)
    assert done["ok"] == len(messages), done
    got = consume(
        clients,
        topic,
        unique("acl_group"),
        len(messages),
        deadline_s=60,
        access_key=KEYS["access_key"],
        secret_key=KEYS["secret_key"],
    )
    assert_same_messages(got, messages)

    refused = clients.cpp(
        "produce",
        group=unique("acl_wrong"),
        topic=topic,
        messages=[m.cpp_spec() for m in messages[:3]],
        deadline_s=30,
        **{**KEYS, "secret_key": "not-the-secret"},
    )
    done = refused.finish(timeout_s=60)
    assert done["ok"] == 0 and done["errors"] >= 1, done
