"""The operator codes read and answer their headers through the typed classes
(``CreateAccessConfigRequestHeader``, ``GetBrokerConfigResponseHeader``, …): an account
update changes only the fields it carries, and the answers carry exactly Java's fields.

Real broker on 127.0.0.1:0, requests signed by an admin account; nothing mocked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.broker import Broker
from remoting.acl import AclClientHook, SessionCredentials
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.route import loads
from tests.support import BrokerFactory, call

ACL_FILE = """\
accounts:
  - accessKey: adminKey
    secretKey: adminSecret
    admin: true
  - accessKey: userKey1
    secretKey: userSecret1
    admin: false
    defaultTopicPerm: SUB
    whiteRemoteAddress: 127.0.0.1
    topicPerms: [topicA=PUB]
"""


@pytest.fixture
async def acl_broker(start_broker: BrokerFactory, tmp_path: Path) -> Broker:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    return await start_broker(acl_enable=True, acl_file_path=path)


async def test_an_account_update_changes_only_what_it_carries(acl_broker: Broker) -> None:
    async with RemotingClient(
        hooks=[AclClientHook(SessionCredentials("adminKey", "adminSecret"))]
    ) as admin:
        # Empty secretKey keeps the secret; topicPerms present but empty clears the list;
        # admin given in any case is a boolean; what is left out stays.
        fields = {"accessKey": "userKey1", "secretKey": "", "topicPerms": "", "admin": "TRUE"}
        done = await call(
            admin, acl_broker.address, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields
        )
        assert done.code == ResponseCode.SUCCESS, done
        assert acl_broker.acl is not None
        account = acl_broker.acl.rules.accounts["userKey1"].to_yaml()
        assert account["secretKey"] == "userSecret1"
        assert account["admin"] is True
        assert account.get("topicPerms", []) == []
        assert account["defaultTopicPerm"] == "SUB"
        assert account["whiteRemoteAddress"] == "127.0.0.1"

        info = await call(admin, acl_broker.address, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        assert list(info.ext_fields) == [
            "version",
            "brokerName",
            "brokerAddr",
            "clusterName",
            "allAclFileVersion",
            "accounts",
        ]
        assert info.ext_fields["accounts"] == "2"
        assert info.ext_fields["brokerAddr"] == acl_broker.address

        config = await call(admin, acl_broker.address, RequestCode.GET_BROKER_CONFIG)
        assert config.code == ResponseCode.SUCCESS
        assert list(config.ext_fields) == ["version"]
        assert loads(config.ext_fields["version"].encode()) == (
            acl_broker.topics.data_version.to_json()
        )
