"""The name server on the wire: registration, routes, cluster info, topic lists, KV config,
liveness and write permission (protocol.md §5 "Name server", §7.9, §8.1-8.3)."""

from __future__ import annotations

import socket
import zlib
from pathlib import Path

from broker.namesrv.server import NameServer
from remoting.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigWrapper,
    TopicList,
)
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand
from remoting.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader
from remoting.route import TopicRouteData, loads
from tests.support import BrokerFactory, ClientFactory, NamesrvFactory, call, wait_until

MASTER_ADDR = "10.0.0.1:10911"
MASTER_HA = "10.0.0.1:10912"
SLAVE_ADDR = "10.0.0.2:10911"
SLAVE_HA = "10.0.0.2:10912"


def register_body(*topics: TopicConfig, counter: int = 1) -> RegisterBrokerBody:
    table = {tc.topic_name: tc for tc in topics}
    return RegisterBrokerBody(TopicConfigWrapper(table, DataVersion(1_700_000_000_000, counter)))


async def register(
    client: RemotingClient,
    ns: NameServer,
    *topics: TopicConfig,
    broker_addr: str = MASTER_ADDR,
    ha_addr: str = MASTER_HA,
    broker_name: str = "broker-a",
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    compressed: bool = False,
    crc: int | None = None,
    counter: int = 1,
    serialize_type: int = SerializeType.JSON,
) -> RemotingCommand:
    body = register_body(*topics, counter=counter).encode(compressed=compressed)
    header = RegisterBrokerRequestHeader(
        broker_name=broker_name,
        broker_addr=broker_addr,
        cluster_name=cluster,
        ha_server_addr=ha_addr,
        broker_id=broker_id,
        compressed=compressed,
        body_crc32=zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc,
    )
    return await call(
        client,
        ns.address,
        RequestCode.REGISTER_BROKER,
        header.to_ext_fields(),
        body,
        serialize_type=serialize_type,
    )


async def route(
    client: RemotingClient, ns: NameServer, topic: str, serialize_type: int = SerializeType.JSON
) -> RemotingCommand:
    return await call(
        client,
        ns.address,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": topic},
        serialize_type=serialize_type,
    )


async def route_data(client: RemotingClient, ns: NameServer, topic: str) -> TopicRouteData:
    response = await route(client, ns, topic)
    assert response.code == ResponseCode.SUCCESS, response
    return TopicRouteData.decode(response.body_bytes)


async def cluster_info(client: RemotingClient, ns: NameServer) -> dict[str, object]:
    response = await call(client, ns.address, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert response.code == ResponseCode.SUCCESS, response
    doc = loads(response.body_bytes)
    assert isinstance(doc, dict)
    return doc


# ------------------------------------------------------------------------ registration


async def test_register_with_json_body_makes_a_compact_route(
    namesrv: NameServer, client: RemotingClient
) -> None:
    response = await register(client, namesrv, TopicConfig("TopicA", 4, 4, 6))
    assert response.code == ResponseCode.SUCCESS, response
    assert response.serialize_type == SerializeType.JSON
    # A master gets no master address back.
    assert "masterAddr" not in response.ext_fields

    response = await route(client, namesrv, "TopicA")
    assert response.code == ResponseCode.SUCCESS, response
    body = response.body_bytes
    # Compact standard JSON with quoted broker-id keys (pitfalls 3 and 4).
    assert b" " not in body and b"\n" not in body
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911"}' in body
    doc = loads(body)
    assert doc["brokerDatas"] == [
        {"brokerAddrs": {"0": MASTER_ADDR}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
    ]
    (qd,) = doc["queueDatas"]
    assert qd["brokerName"] == "broker-a"
    assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (4, 4, 6)
    assert qd["topicSysFlag"] == 0


async def test_register_with_compressed_body(namesrv: NameServer, client: RemotingClient) -> None:
    topics = [TopicConfig("TopicZ", 3, 2, 4), TopicConfig("TopicY", 8, 8, 6)]
    response = await register(client, namesrv, *topics, compressed=True)
    assert response.code == ResponseCode.SUCCESS, response
    z = await route_data(client, namesrv, "TopicZ")
    (qd,) = z.queue_datas
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (3, 2, 4)
    y = await route_data(client, namesrv, "TopicY")
    assert y.queue_datas[0].write_queue_nums == 8
    assert y.broker_datas[0].broker_addrs == {0: MASTER_ADDR}


async def test_register_crc_mismatch_is_refused(
    namesrv: NameServer, client: RemotingClient
) -> None:
    body = register_body(TopicConfig("TopicCrc")).encode()
    good = zlib.crc32(body) & 0x7FFFFFFF
    response = await register(client, namesrv, TopicConfig("TopicCrc"), crc=good ^ 1)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "crc32 not match"
    # Nothing was registered.
    missing = await route(client, namesrv, "TopicCrc")
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    # bodyCrc32 = 0 means "not checked".
    response = await register(client, namesrv, TopicConfig("TopicCrc"), crc=0)
    assert response.code == ResponseCode.SUCCESS, response
    await route_data(client, namesrv, "TopicCrc")


async def test_route_of_unknown_topic_is_topic_not_exist(
    namesrv: NameServer, client: RemotingClient
) -> None:
    response = await route(client, namesrv, "NoSuchTopic")
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark and "NoSuchTopic" in response.remark
    assert not response.body_bytes


async def test_slave_gets_master_address_and_does_not_change_queue_data(
    namesrv: NameServer, client: RemotingClient
) -> None:
    master = await register(client, namesrv, TopicConfig("Shared", 4, 4, 6))
    assert master.code == ResponseCode.SUCCESS, master
    # The slave reports different queue counts for Shared and a topic only it has.
    slave = await register(
        client,
        namesrv,
        TopicConfig("Shared", 1, 1, 4),
        TopicConfig("SlaveOnly", 2, 2, 6),
        broker_addr=SLAVE_ADDR,
        ha_addr=SLAVE_HA,
        broker_id=1,
        counter=7,
    )
    assert slave.code == ResponseCode.SUCCESS, slave
    assert slave.ext_fields.get("masterAddr") == MASTER_ADDR
    assert slave.ext_fields.get("haServerAddr") == MASTER_HA

    shared = await route_data(client, namesrv, "Shared")
    (qd,) = shared.queue_datas
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (4, 4, 6)
    assert shared.broker_datas[0].broker_addrs == {0: MASTER_ADDR, 1: SLAVE_ADDR}
    assert (await route(client, namesrv, "SlaveOnly")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_slave_before_its_master_gets_no_master_address(
    namesrv: NameServer, client: RemotingClient
) -> None:
    slave = await register(
        client, namesrv, TopicConfig("T"), broker_addr=SLAVE_ADDR, ha_addr=SLAVE_HA, broker_id=1
    )
    assert slave.code == ResponseCode.SUCCESS, slave
    assert not slave.ext_fields.get("masterAddr")


async def test_master_reregistration_with_new_version_updates_queue_data(
    namesrv: NameServer, client: RemotingClient
) -> None:
    await register(client, namesrv, TopicConfig("Grow", 2, 2, 6), counter=1)
    await register(client, namesrv, TopicConfig("Grow", 8, 8, 6), counter=2)
    (qd,) = (await route_data(client, namesrv, "Grow")).queue_datas
    assert (qd.read_queue_nums, qd.write_queue_nums) == (8, 8)


async def test_unregister_broker_removes_it(namesrv: NameServer, client: RemotingClient) -> None:
    await register(client, namesrv, TopicConfig("Gone"))
    header = UnregisterBrokerRequestHeader(
        broker_name="broker-a", broker_addr=MASTER_ADDR, cluster_name="DefaultCluster", broker_id=0
    )
    response = await call(
        client, namesrv.address, RequestCode.UNREGISTER_BROKER, header.to_ext_fields()
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert (await route(client, namesrv, "Gone")).code == ResponseCode.TOPIC_NOT_EXIST
    info = await cluster_info(client, namesrv)
    assert info["brokerAddrTable"] == {}
    assert info["clusterAddrTable"] == {}


async def test_requests_in_binary_headers_are_answered_in_binary(
    namesrv: NameServer, client: RemotingClient
) -> None:
    response = await register(
        client, namesrv, TopicConfig("Bin"), serialize_type=SerializeType.ROCKETMQ
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.serialize_type == SerializeType.ROCKETMQ
    found = await route(client, namesrv, "Bin", SerializeType.ROCKETMQ)
    assert found.code == ResponseCode.SUCCESS
    assert found.serialize_type == SerializeType.ROCKETMQ
    assert TopicRouteData.decode(found.body_bytes).queue_datas[0].broker_name == "broker-a"
    missing = await route(client, namesrv, "Nope", SerializeType.ROCKETMQ)
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.serialize_type == SerializeType.ROCKETMQ


async def test_unknown_request_code_is_not_supported(
    namesrv: NameServer, client: RemotingClient
) -> None:
    response = await call(client, namesrv.address, RequestCode.PULL_MESSAGE)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == f" request type {int(RequestCode.PULL_MESSAGE)} not supported"


# ----------------------------------------------------------------- cluster and topics


async def test_cluster_info_and_topic_lists(namesrv: NameServer, client: RemotingClient) -> None:
    await register(client, namesrv, TopicConfig("A1"), TopicConfig("A2"))
    await register(
        client,
        namesrv,
        TopicConfig("B1"),
        broker_addr="10.0.0.9:10911",
        broker_name="broker-b",
        cluster="OtherCluster",
    )
    info = await cluster_info(client, namesrv)
    assert info["clusterAddrTable"] == {
        "DefaultCluster": ["broker-a"],
        "OtherCluster": ["broker-b"],
    }
    table = info["brokerAddrTable"]
    assert isinstance(table, dict)
    assert table["broker-a"] == {
        "brokerAddrs": {"0": MASTER_ADDR},
        "brokerName": "broker-a",
        "cluster": "DefaultCluster",
    }

    response = await call(client, namesrv.address, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert response.code == ResponseCode.SUCCESS, response
    assert sorted(TopicList.decode(response.body_bytes).topic_list) == ["A1", "A2", "B1"]

    response = await call(
        client, namesrv.address, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert sorted(TopicList.decode(response.body_bytes).topic_list) == ["A1", "A2"]


async def test_delete_topic_in_namesrv(namesrv: NameServer, client: RemotingClient) -> None:
    await register(client, namesrv, TopicConfig("Doomed"), TopicConfig("Kept"))
    response = await call(
        client, namesrv.address, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Doomed"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert (await route(client, namesrv, "Doomed")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await route(client, namesrv, "Kept")).code == ResponseCode.SUCCESS


async def test_wipe_and_add_write_perm_of_broker(
    namesrv: NameServer, client: RemotingClient
) -> None:
    await register(client, namesrv, TopicConfig("W1", perm=6), TopicConfig("W2", perm=6))
    response = await call(
        client, namesrv.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["wipeTopicCount"] == "2"
    assert (await route_data(client, namesrv, "W1")).queue_datas[0].perm == 4

    response = await call(
        client, namesrv.address, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["addTopicCount"] == "2"
    assert (await route_data(client, namesrv, "W2")).queue_datas[0].perm == 6


# -------------------------------------------------------------------------------- KV


async def test_kv_config_put_get_delete_and_list(
    namesrv: NameServer, client: RemotingClient
) -> None:
    addr = namesrv.address
    for key, value in (("k1", "v1"), ("k2", "v2")):
        response = await call(
            client,
            addr,
            RequestCode.PUT_KV_CONFIG,
            {"namespace": "ns", "key": key, "value": value},
        )
        assert response.code == ResponseCode.SUCCESS, response

    response = await call(client, addr, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k1"})
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["value"] == "v1"

    response = await call(client, addr, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
    assert response.code == ResponseCode.SUCCESS, response
    assert KVTable.decode(response.body_bytes).table == {"k1": "v1", "k2": "v2"}

    response = await call(
        client, addr, RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k1"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await call(client, addr, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k1"})
    assert response.code == ResponseCode.QUERY_NOT_FOUND

    response = await call(
        client, addr, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "missing"}
    )
    assert response.code == ResponseCode.QUERY_NOT_FOUND


# -------------------------------------------------------------------------- liveness


async def test_broker_whose_connection_closes_is_removed_at_once(
    namesrv: NameServer, client: RemotingClient, start_client: ClientFactory
) -> None:
    brokers_client = await start_client()
    await register(brokers_client, namesrv, TopicConfig("Live"))
    assert (await route(client, namesrv, "Live")).code == ResponseCode.SUCCESS
    await brokers_client.shutdown()
    await wait_until(lambda: not namesrv.routes.broker_live_table, "the broker to be removed")
    assert (await route(client, namesrv, "Live")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await cluster_info(client, namesrv))["brokerAddrTable"] == {}


async def test_silent_broker_is_removed_by_the_scan(
    start_namesrv: NamesrvFactory, client: RemotingClient, start_client: ClientFactory
) -> None:
    ns = await start_namesrv(broker_channel_expired_ms=300, scan_not_active_broker_interval_ms=50)
    brokers_client = await start_client()  # stays connected but sends nothing more
    await register(brokers_client, ns, TopicConfig("Quiet"))
    assert (await route(client, ns, "Quiet")).code == ResponseCode.SUCCESS
    await wait_until(
        lambda: not ns.routes.broker_live_table, "the silent broker to expire", timeout_s=3.0
    )
    assert (await route(client, ns, "Quiet")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await cluster_info(client, ns))["clusterAddrTable"] == {}


async def test_order_topic_conf_from_kv_config(
    start_namesrv: NamesrvFactory, client: RemotingClient
) -> None:
    ns = await start_namesrv(order_message_enable=True)
    response = await call(
        client,
        ns.address,
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": "Ordered", "value": "broker-a:4"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    response = await register(client, ns, TopicConfig("Ordered"), TopicConfig("Plain"))
    assert response.code == ResponseCode.SUCCESS, response
    # The registration reply carries the ORDER_TOPIC_CONFIG namespace.
    assert KVTable.decode(response.body_bytes).table == {"Ordered": "broker-a:4"}
    assert (await route_data(client, ns, "Ordered")).order_topic_conf == "broker-a:4"
    plain = await route(client, ns, "Plain")
    assert b"orderTopicConf" not in plain.body_bytes


async def test_address_registered_under_a_new_id_loses_the_old_one(
    namesrv: NameServer, client: RemotingClient
) -> None:
    await register(client, namesrv, TopicConfig("Promo"), counter=1)
    await register(
        client,
        namesrv,
        TopicConfig("Promo"),
        broker_addr=SLAVE_ADDR,
        ha_addr=SLAVE_HA,
        broker_id=1,
    )
    # The master goes away; the slave is promoted and registers as id 0.
    header = UnregisterBrokerRequestHeader(
        broker_name="broker-a", broker_addr=MASTER_ADDR, cluster_name="DefaultCluster", broker_id=0
    )
    await call(client, namesrv.address, RequestCode.UNREGISTER_BROKER, header.to_ext_fields())
    route_after = await route_data(client, namesrv, "Promo")  # the slave still serves reads
    assert route_after.broker_datas[0].broker_addrs == {1: SLAVE_ADDR}
    await register(
        client,
        namesrv,
        TopicConfig("Promo"),
        broker_addr=SLAVE_ADDR,
        ha_addr=SLAVE_HA,
        broker_id=0,
        counter=2,
    )
    assert (await route_data(client, namesrv, "Promo")).broker_datas[0].broker_addrs == {
        0: SLAVE_ADDR
    }


async def test_kv_config_persists_across_a_restart(
    start_namesrv: NamesrvFactory, client: RemotingClient, tmp_path: Path
) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    first = await start_namesrv(kv_config_path=path)
    response = await call(
        client,
        first.address,
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ns", "key": "k", "value": "v"},
    )
    assert response.code == ResponseCode.SUCCESS, response
    await first.shutdown()
    assert loads(path.read_bytes()) == {"configTable": {"ns": {"k": "v"}}}
    second = await start_namesrv(kv_config_path=path)
    response = await call(
        client, second.address, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}
    )
    assert response.code == ResponseCode.SUCCESS, response
    assert response.ext_fields["value"] == "v"


async def test_broker_registers_with_every_name_server(
    start_namesrv: NamesrvFactory, start_broker: BrokerFactory, client: RemotingClient
) -> None:
    ns1, ns2 = await start_namesrv(), await start_namesrv()
    with socket.socket() as s:  # an address where nothing listens
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    broker = await start_broker(namesrv_addr=f"{ns1.address};{dead};{ns2.address}")
    for ns in (ns1, ns2):
        found = await route_data(client, ns, "TBW102")
        assert found.broker_datas[0].broker_addrs == {0: broker.address}
    await broker.shutdown()
    for ns in (ns1, ns2):
        assert (await route(client, ns, "TBW102")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_malformed_register_body_is_system_error(
    namesrv: NameServer, client: RemotingClient
) -> None:
    header = RegisterBrokerRequestHeader(
        broker_name="broker-a",
        broker_addr=MASTER_ADDR,
        cluster_name="DefaultCluster",
        ha_server_addr=MASTER_HA,
        broker_id=0,
    ).to_ext_fields()
    for body, compressed in ((b"not json", "false"), (b"\x78\x9c garbage", "true")):
        response = await call(
            client,
            namesrv.address,
            RequestCode.REGISTER_BROKER,
            {**header, "compressed": compressed},
            body,
        )
        assert response.code == ResponseCode.SYSTEM_ERROR, response
    assert (await register(client, namesrv, TopicConfig("After"))).code == ResponseCode.SUCCESS
