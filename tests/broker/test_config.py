"""The config loader: RocketMQ broker.conf names, precedence and errors that name the key."""

from __future__ import annotations

import dataclasses
import json
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

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
from tests.broker import rocketmq_stock_confs as STOCK


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
        ({"msgTraceTopicName": "no spaces"}, ["msgTraceTopicName", "illegal characters"]),
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


# --- Apache RocketMQ's own config files and keys ----------------------------------------
#
# RocketMQ reads every key its config classes have a setter for (MixAll.properties2Object);
# broker/rocketmq_keys.py lists them. A stock file must start; a key we accept but do not use
# is named once in the log; a key in no list is still an error with a useful suggestion.

ROCKETMQ_49 = "4.9.8"
ROCKETMQ_5 = "5.3.3"


def _rewritten(conf: dict[str, str], root: Path) -> dict[str, str]:
    """A stock file's settings with its paths moved under ``root`` and its ports on 0."""
    out = dict(conf)
    if "storePathRootDir" in out or "storePathCommitLog" in out:
        out["storePathRootDir"] = str(root)
    if "storePathCommitLog" in out:
        out["storePathCommitLog"] = str(root / "commitlog")
    for key in ("listenPort", "haListenPort"):
        if key in out:
            out[key] = "0"
    return out


def _broker_keys(version: str) -> frozenset[str]:
    """The keys RocketMQ ``version``'s BrokerStartup reads (see broker/rocketmq_keys.py)."""
    from broker import rocketmq_keys

    if version.startswith("4.9"):
        return rocketmq_keys.BROKER_KEYS_49
    return rocketmq_keys.BROKER_KEYS_5


def _without_effect_fillers(keys: frozenset[str], cls: type[Any] = BrokerConfig) -> dict[str, str]:
    """Every key of ``keys`` we only accept, with a placeholder value: a file that sets all
    RocketMQ knows, as ``mqbroker -p`` prints it, looks like this to us."""
    from broker.config import applied_keys

    taken = applied_keys(cls)
    return {key: "true" for key in sorted(keys) if key not in taken}


@pytest.mark.parametrize("name", sorted(STOCK.BROKER_CONFS))
def test_every_stock_broker_file_is_accepted(name: str, tmp_path: Path) -> None:
    settings = _rewritten(STOCK.BROKER_CONFS[name], tmp_path / "store")
    if settings.get("brokerId") == "-1":
        # 5.x controller mode lets the controller pick the id; here ids are the operator's.
        with pytest.raises(ConfigError, match="brokerId must be >= 0"):
            load_config(BrokerConfig, None, settings)
        return
    cfg = load_config(BrokerConfig, None, settings)
    assert cfg.broker_name == settings.get("brokerName", "broker-a")
    assert cfg.broker_cluster_name == settings.get("brokerClusterName", "DefaultCluster")
    if "fileReservedTime" in settings:
        assert cfg.store.file_reserved_hours == 48
        assert cfg.store.delete_when == "04"


@pytest.mark.parametrize("name", sorted(STOCK.NAMESRV_CONFS))
def test_every_stock_namesrv_file_is_accepted(name: str) -> None:
    cfg = load_config(NamesrvConfig, None, STOCK.NAMESRV_CONFS[name])
    assert cfg.listen_port == int(STOCK.NAMESRV_CONFS[name].get("listenPort", "9876"))


def test_every_rocketmq_key_is_accepted() -> None:
    from broker import rocketmq_keys

    for version in (ROCKETMQ_49, ROCKETMQ_5):
        cfg = load_config(BrokerConfig, None, _without_effect_fillers(_broker_keys(version)))
        assert cfg == load_config(BrokerConfig)  # the placeholders change nothing
    fillers = _without_effect_fillers(rocketmq_keys.NAMESRV_KEYS, NamesrvConfig)
    assert load_config(NamesrvConfig, None, fillers) == load_config(NamesrvConfig)
    for key in (
        "sendMessageThreadPoolNums",
        "useReentrantLockWhenPutMessage",
        "enableDLegerCommitLog",
        "transientStorePoolEnable",
        "dLegerSelfId",
        "inBrokerContainer",  # BrokerIdentity (5.x), BrokerConfig's parent class
        "totalReplicas",
        "authenticationEnabled",  # AuthConfig (5.3)
        "tieredBackendServiceProvider",  # the tiered store plugin (5.x)
        "useTLS",
        "tls.enable",
        "tls.client.authServer",
    ):
        assert key in rocketmq_keys.BROKER_KEYS, key
        assert key in fillers or key not in rocketmq_keys.NAMESRV_KEYS


def test_keys_with_other_spellings_are_applied(tmp_path: Path) -> None:
    cfg = load_config(
        BrokerConfig,
        None,
        {
            "mapedFileSizeCommitLog": "65536",  # RocketMQ <= 4.4
            "mapedFileSizeConsumeQueue": "6000",
            "maxMessageSize": "4096",
            "metricsPromExporterPort": "0",  # RocketMQ 5's Prometheus exporter
            "diskSpaceWarningLevelRatio": "80",  # percent in RocketMQ 5
            "diskSpaceCleanForciblyRatio": "70",
        },
    )
    assert cfg.store.commit_log_file_bytes == 65536
    assert cfg.store.consume_queue_file_bytes == 6000
    assert cfg.metrics_port == 0
    assert cfg.store.disk_space_warning_level_ratio == pytest.approx(0.80)
    assert cfg.store.disk_space_clean_forcibly_ratio == pytest.approx(0.70)
    # They survive a live update, which rebuilds the config from its properties.
    from broker.config import LIVE_BROKER_KEYS, config_properties, updated_config

    assert config_properties(cfg)["diskSpaceWarningLevelRatio"] == "80"
    updated = updated_config(cfg, {"traceOn": "false"}, LIVE_BROKER_KEYS)
    assert updated.store.disk_space_warning_level_ratio == pytest.approx(0.80)
    assert updated.store.commit_log_file_bytes == 65536
    with pytest.raises(ConfigError, match="diskSpaceWarningLevelRatio"):
        load_config(BrokerConfig, None, {"diskSpaceWarningLevelRatio": "180"})
    # The newer spelling wins over an older one given on the command line... and a file
    # that says both, differently, is an error naming both.
    conf = tmp_path / "broker.conf"
    conf.write_text("mapedFileSizeCommitLog=65536\nmappedFileSizeCommitLog=131072\n")
    with pytest.raises(ConfigError, match=r"mapedFileSizeCommitLog.*mappedFileSizeCommitLog"):
        load_config(BrokerConfig, conf)
    conf.write_text("mapedFileSizeCommitLog=65536\nmaxMessageSize=4096\n")
    cfg = load_config(BrokerConfig, conf, {"mappedFileSizeCommitLog": "131072"})
    assert cfg.store.commit_log_file_bytes == 131072


def test_tls_system_properties_are_applied(tmp_path: Path) -> None:
    for cls in (BrokerConfig, NamesrvConfig):
        cfg = load_config(
            cls,
            None,
            {
                "tls.server.mode": "permissive",
                "tls.server.certPath": str(tmp_path / "cert.pem"),
                "tls.server.keyPath": str(tmp_path / "key.pem"),
                "tls.server.trustCertPath": str(tmp_path / "ca.pem"),
            },
        )
        assert cfg.tls_server_mode.value == "permissive"
        assert cfg.tls_server_cert_path == tmp_path / "cert.pem"
        assert cfg.tls_server_key_path == tmp_path / "key.pem"
        # RocketMQ asks for client certificates only with need.client.auth=require.
        assert cfg.tls_server_trust_cert_path is None
        cfg = load_config(
            cls,
            None,
            {
                "tls.server.need.client.auth": "require",
                "tls.server.trustCertPath": str(tmp_path / "ca.pem"),
            },
        )
        assert cfg.tls_server_trust_cert_path == tmp_path / "ca.pem"
        with pytest.raises(ConfigError, match=r"tls\.server\.need\.client\.auth"):
            load_config(cls, None, {"tls.server.need.client.auth": "require"})
        with pytest.raises(ConfigError, match=r"tls\.server\.need\.client\.auth"):
            load_config(cls, None, {"tls.server.need.client.auth": "always"})
        with pytest.raises(ConfigError, match=r"tls\.server\.mode"):
            load_config(cls, None, {"tls.server.mode": "sometimes"})


def test_a_commit_log_elsewhere_than_the_store_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    for same in (str(root / "commitlog"), f"{root}/commitlog/", f"{root}/x/../commitlog"):
        cfg = load_config(
            BrokerConfig, None, {"storePathRootDir": str(root), "storePathCommitLog": same}
        )
        assert cfg.store.root_dir == root
    with pytest.raises(ConfigError) as info:
        load_config(
            BrokerConfig,
            None,
            {"storePathRootDir": str(root), "storePathCommitLog": str(tmp_path / "fast/commitlog")},
        )
    assert "storePathCommitLog" in str(info.value)
    assert str(root / "commitlog") in str(info.value)
    # --store moves the root: a file's commit log left at the old place no longer matches.
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={root}\nstorePathCommitLog={root}/commitlog\n")
    with pytest.raises(ConfigError, match="storePathCommitLog"):
        load_config(BrokerConfig, conf, {"storePathRootDir": str(tmp_path / "other")})


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("transientStorePoolEnabled", "transientStorePoolEnable"),
        ("sendMessageThreadPoolNum", "sendMessageThreadPoolNums"),
        ("brokerip1", "brokerIP1"),
        ("listenPortt", "listenPort"),
        ("flushDiskTypes", "flushDiskType"),
        ("mappedFileSizeComitLog", "mappedFileSizeCommitLog"),
        ("qqqqzzzz", None),  # like nothing: no suggestion
    ],
)
def test_unknown_keys_suggest_the_nearest_accepted_key(key: str, suggestion: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(BrokerConfig, None, {key: "1"})
    hint = f" (did you mean {suggestion}?)" if suggestion else ""
    assert str(info.value) == f"unknown config key {key!r}{hint}"


def test_a_key_without_effect_cannot_be_updated_live() -> None:
    from broker.config import LIVE_BROKER_KEYS, updated_config

    cfg = load_config(BrokerConfig)
    with pytest.raises(ConfigError, match="sendMessageThreadPoolNums") as info:
        updated_config(cfg, {"sendMessageThreadPoolNums": "32"}, LIVE_BROKER_KEYS)
    assert "no effect" in str(info.value)
    with pytest.raises(ConfigError, match="did you mean sendMessageThreadPoolNums"):
        updated_config(cfg, {"sendMessageThreadPoolNum": "32"}, LIVE_BROKER_KEYS)


# --- the same files in real processes ---------------------------------------------------

READY_TIMEOUT_S = 120.0  # two busy cores, several interpreters starting at once


def _write_conf(path: Path, settings: dict[str, str]) -> Path:
    # RocketMQ's own layout: a comment, then "key = value" lines.
    lines = ["# written by the test from RocketMQ's sample file (see rocketmq_stock_confs.py)"]
    lines += [f"{key} = {value}" for key, value in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclasses.dataclass
class _Proc:
    proc: subprocess.Popen[str]
    log: Path

    def ready(self) -> dict[str, str]:
        """The ready line's fields; fails (with the log) if none comes in time."""
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        line = self.proc.stdout.readline() if readable else ""
        assert line.startswith("ready "), f"{line!r}\n{self.log.read_text()[-3000:]}"
        return dict(w.split("=", 1) for w in line.split()[1:])

    def kill(self) -> None:
        """End our own child, if still running, and close its pipe."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def stop(self) -> list[dict[str, Any]]:
        """SIGTERM, a clean exit, and the JSON lines it logged."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            assert self.proc.wait(timeout=60) == 0, self.log.read_text()[-3000:]
        finally:
            self.kill()
        return [json.loads(x) for x in self.log.read_text().splitlines() if x.startswith("{")]


def _spawn(log: Path, *args: str) -> _Proc:
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "--log-json", *args, "--set", "metricsPort=0"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    return _Proc(proc, log)


def _without_effect_lines(lines: list[dict[str, Any]]) -> list[list[str]]:
    return [line["keys"] for line in lines if line["event"] == "config_keys_without_effect"]


def _run_stock_cluster(
    tmp_path: Path, version: str, names: list[str], extra: dict[str, dict[str, str]]
) -> dict[str, list[dict[str, Any]]]:
    """A name server and one broker per stock file (``extra`` adds settings to a file), all
    at once; returns each broker's log lines after a clean stop."""
    namesrv = _spawn(
        tmp_path / "namesrv.log",
        "namesrv",
        "--port",
        "0",
        "--set",
        f"kvConfigPath={tmp_path / 'kv.json'}",
    )
    brokers: dict[str, _Proc] = {}
    try:
        ns_addr = namesrv.ready()["namesrv"]
        for name in names:
            settings = {
                **_rewritten(STOCK.broker_conf(version, name), tmp_path / name),
                **extra.get(name, {}),
            }
            settings["namesrvAddr"] = ns_addr
            settings["storePathRootDir"] = str(tmp_path / name / "store")
            if "storePathCommitLog" in settings:
                settings["storePathCommitLog"] = str(tmp_path / name / "store" / "commitlog")
            conf = _write_conf(tmp_path / f"{name.replace('/', '_')}.conf", settings)
            brokers[name] = _spawn(
                tmp_path / f"{name.replace('/', '_')}.log",
                "broker",
                "-c",
                str(conf),
                "--listen-port",
                "0",
            )
        for broker in brokers.values():
            broker.ready()
        return {name: broker.stop() for name, broker in brokers.items()}
    finally:
        for broker in brokers.values():
            broker.kill()
        namesrv.kill()


def test_rocketmq_49_sample_files_start_a_cluster(tmp_path: Path) -> None:
    """4.9's broker.conf (with every other key 4.9 reads), the 2m-2s-sync group and a
    DLedger node, against a real name server: each reaches ready, and each names the keys
    it ignores in one log line."""
    every = _without_effect_fillers(_broker_keys(ROCKETMQ_49))
    names = [
        "broker.conf",
        "2m-2s-sync/broker-a.properties",
        "2m-2s-sync/broker-a-s.properties",
        "2m-2s-sync/broker-b.properties",
        "2m-2s-sync/broker-b-s.properties",
        "dledger/broker-n0.conf",
    ]
    logs = _run_stock_cluster(tmp_path, ROCKETMQ_49, names, {"broker.conf": every})
    ignored = _without_effect_lines(logs["broker.conf"])
    assert len(ignored) == 1, ignored
    assert set(ignored[0]) == set(every)
    assert {"sendMessageThreadPoolNums", "transientStorePoolEnable"} <= set(ignored[0])
    for name in names[1:5]:
        assert _without_effect_lines(logs[name]) == [], name  # every key applied
    assert _without_effect_lines(logs["dledger/broker-n0.conf"]) == [
        [
            "dLegerGroup",
            "dLegerPeers",
            "dLegerSelfId",
            "enableDLegerCommitLog",
            "sendMessageThreadPoolNums",
        ]
    ]


def test_rocketmq_5_sample_files_start(tmp_path: Path) -> None:
    every = _without_effect_fillers(_broker_keys(ROCKETMQ_5))
    names = [
        "broker.conf",
        "dledger/broker-n0.conf",
        "container/2container-2m-2s/broker-a-in-container1.conf",
    ]
    logs = _run_stock_cluster(tmp_path, ROCKETMQ_5, names, {"broker.conf": every})
    assert [set(k) for k in _without_effect_lines(logs["broker.conf"])] == [set(every)]
    container = _without_effect_lines(logs[names[2]])
    assert len(container) == 1
    assert "totalReplicas" in container[0]
    assert "storePathCommitLog" not in container[0]  # honoured: it is <root>/commitlog


def test_rocketmq_5_namesrv_file_starts(tmp_path: Path) -> None:
    settings = {
        **STOCK.NAMESRV_CONFS[f"{ROCKETMQ_5}:container/2container-2m-2s/nameserver.conf"],
        **STOCK.NAMESRV_CONFS[f"{ROCKETMQ_5}:controller/quick-start/namesrv.conf"],
        "kvConfigPath": str(tmp_path / "kv.json"),
    }
    conf = _write_conf(tmp_path / "namesrv.conf", settings)
    namesrv = _spawn(tmp_path / "namesrv.log", "namesrv", "-c", str(conf), "--port", "0")
    try:
        namesrv.ready()
        lines = namesrv.stop()
    finally:
        namesrv.kill()
    assert _without_effect_lines(lines) == [
        [
            "controllerDLegerGroup",
            "controllerDLegerPeers",
            "controllerDLegerSelfId",
            "enableControllerInNamesrv",
            "supportActingMaster",
        ]
    ]


def test_an_unknown_key_in_a_stock_file_stops_the_start(tmp_path: Path) -> None:
    settings = {
        **STOCK.BROKER_CONFS[f"{ROCKETMQ_49}:broker.conf"],
        "transientStorePoolEnabled": "true",
    }
    conf = _write_conf(tmp_path / "broker.conf", settings)
    done = subprocess.run(
        [sys.executable, "-m", "broker", "broker", "-c", str(conf), "--store", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "ready" not in done.stdout
    assert (
        "unknown config key 'transientStorePoolEnabled' (did you mean transientStorePoolEnable?)"
        in done.stderr
    )


def test_an_xml_comment_block_in_a_properties_file_is_skipped(tmp_path: Path) -> None:
    """RocketMQ 5's controller/cluster-3n-namesrv-plugin/namesrv-n*.conf open with their
    licence as an XML comment; java.util.Properties reads those lines as junk keys that
    nothing uses. Skip the block instead, and still reject a stray line after it."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "<!--\n  A licence header, written as XML: no key=value here.\n"
        "  See the licence at http://example.invalid for more\n  -->\n"
        "listenPort = 9886\nenableControllerInNamesrv = true\n"
    )
    assert load_config(NamesrvConfig, conf).listen_port == 9886
    conf.write_text("<!-- one line -->\nlistenPort = 9886\n")
    assert load_config(NamesrvConfig, conf).listen_port == 9886
    conf.write_text("<!--\nlistenPort = 9886\n")
    with pytest.raises(ConfigError, match="line 1: an XML comment that never ends"):
        read_config_file(conf)
    conf.write_text("<!-- x -->\njust words\n")
    with pytest.raises(ConfigError, match="line 2: expected key=value"):
        read_config_file(conf)
