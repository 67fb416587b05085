"""The config loader: RocketMQ broker.conf names, precedence and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import (
    BrokerConfig,
    BrokerRole,
    NamesrvConfig,
    load_config,
    parse_overrides,
    read_config_file,
)
from remoting.errors import ConfigError
from store.config import FlushDiskType


def test_defaults_are_rocketmqs() -> None:
    cfg = load_config(BrokerConfig)
    assert cfg.listen_port == 10911
    assert cfg.broker_cluster_name == "DefaultCluster"
    assert cfg.broker_role is BrokerRole.ASYNC_MASTER
    assert cfg.store.commit_log_file_bytes == 1 << 30
    assert cfg.store.consume_queue_file_bytes == 300_000 * 20
    assert cfg.store.max_message_bytes == 4 * 1024 * 1024
    assert cfg.store.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert cfg.store.delay_levels_ms[0] == 1000
    assert cfg.store.delay_levels_ms[-1] == 2 * 3600 * 1000
    assert len(cfg.store.delay_levels_ms) == 18
    assert load_config(NamesrvConfig).listen_port == 9876


def test_properties_file_with_comments_and_both_separators(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# a comment\n"
        "! another\n"
        "brokerClusterName = ClusterX\n"
        "brokerName=broker-b\n"
        "brokerId: 1\n"
        "brokerRole=SLAVE\n"
        "flushDiskType=SYNC_FLUSH\n"
        "autoCreateTopicEnable=FALSE\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
        "mappedFileSizeCommitLog=65536\n"
        "maxMessageSize=65536\n"
        "namesrvAddr=127.0.0.1:9876;127.0.0.1:9877\n"
        "\n"
    )
    cfg = load_config(BrokerConfig, conf)
    assert cfg.broker_cluster_name == "ClusterX"
    assert cfg.broker_name == "broker-b"
    assert cfg.broker_id == 1
    assert cfg.broker_role is BrokerRole.SLAVE
    assert cfg.store.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert cfg.auto_create_topic_enable is False
    assert cfg.store.root_dir == tmp_path / "store"
    assert cfg.store.commit_log_file_bytes == 65536
    assert cfg.namesrv_addrs == ["127.0.0.1:9876", "127.0.0.1:9877"]


def test_toml_file_and_override_precedence(tmp_path: Path) -> None:
    conf = tmp_path / "broker.toml"
    conf.write_text('listenPort = 20911\nlongPollingEnable = false\nbrokerName = "b-toml"\n')
    cfg = load_config(BrokerConfig, conf, {"listenPort": "30911"})
    assert cfg.listen_port == 30911  # --set beats the file
    assert cfg.long_polling_enable is False
    assert cfg.broker_name == "b-toml"


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"listenPortt": "1"}, ["listenPortt", "did you mean listenPort"]),
        ({"listenPort": "abc"}, ["listenPort", "'abc' is not an integer"]),
        ({"listenPort": "70000"}, ["listenPort"]),
        ({"autoCreateTopicEnable": "yes"}, ["autoCreateTopicEnable", "true or false"]),
        ({"flushDiskType": "SOMETIMES"}, ["flushDiskType", "ASYNC_FLUSH|SYNC_FLUSH"]),
        ({"brokerRole": "SLAVE"}, ["brokerRole SLAVE"]),
        ({"mappedFileSizeConsumeQueue": "30"}, ["mappedFileSizeConsumeQueue"]),
        ({"messageDelayLevel": "1s 5x"}, ["'5x'"]),
        ({"deleteWhen": "25"}, ["deleteWhen"]),
        ({"namesrvAddr": "nohost"}, ["namesrvAddr"]),
        ({"maxMessageSize": "0"}, ["maxMessageSize"]),
    ],
)
def test_bad_keys_and_values_name_the_problem(overrides: dict[str, str], names: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(BrokerConfig, None, overrides)
    for name in names:
        assert name in str(info.value)


def test_namesrv_rejects_broker_keys() -> None:
    with pytest.raises(ConfigError, match="brokerName"):
        load_config(NamesrvConfig, None, {"brokerName": "x"})


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_config_file(tmp_path / "missing.conf")
    bad = tmp_path / "bad.conf"
    bad.write_text("justakey\n")
    with pytest.raises(ConfigError, match="line 1"):
        read_config_file(bad)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("listenPort = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_config_file(bad_toml)
    nested = tmp_path / "nested.toml"
    nested.write_text("[store]\nx = 1\n")
    with pytest.raises(ConfigError, match="plain value"):
        read_config_file(nested)


def test_parse_overrides() -> None:
    assert parse_overrides(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["novalue"])
