"""docker/: the compose file, the image and the launcher's translation, checked without
Docker: the files parse and describe the cluster the docs promise, every service's command
is one the real CLI accepts with a configuration that validates, and the launcher refuses
what it cannot run with a message that names the problem."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.__main__ import _broker_config, _cluster_plans, _namesrv_config, _parser
from broker.cluster import ComposeError, ServicePlan, interpolate, load_compose, plan
from broker.config import BrokerConfig, BrokerRole, load_config
from client.dashboard.__main__ import _parser as dashboard_parser
from remoting.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "docker-compose.yml"
DOCKERFILE = REPO / "docker" / "Dockerfile"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return load_compose(COMPOSE)


def broker_conf(name: str) -> BrokerConfig:
    return load_config(BrokerConfig, REPO / "docker" / "conf" / f"{name}.properties")


def test_the_compose_file_describes_two_name_servers_and_two_groups(doc: dict[str, Any]) -> None:
    services = doc["services"]
    assert set(services) == {
        "namesrv1",
        "namesrv2",
        "broker-a-0",
        "broker-a-1",
        "broker-b-0",
        "broker-b-1",
        "dashboard",
    }
    roles = {n: broker_conf(n) for n in services if n.startswith("broker")}
    assert roles["broker-a-0"].broker_role is BrokerRole.SYNC_MASTER
    assert roles["broker-b-0"].broker_role is BrokerRole.ASYNC_MASTER
    for group in ("a", "b"):
        master, slave = roles[f"broker-{group}-0"], roles[f"broker-{group}-1"]
        assert slave.broker_role is BrokerRole.SLAVE and slave.broker_id == 1
        assert master.broker_id == 0
        assert master.broker_name == slave.broker_name == f"broker-{group}"
    assert {c.broker_cluster_name for c in roles.values()} == {"AeroliteCluster"}
    for conf in roles.values():
        assert conf.namesrv_addr == "namesrv1:9876;namesrv2:9876"
    # Every broker publishes its own port as itself, so brokerIP1:port is what clients dial.
    published: list[str] = []
    for name, svc in services.items():
        for mapping in svc.get("ports", []):
            host_port, _, container_port = str(mapping).partition(":")
            published.append(host_port)
            if name in roles:
                assert host_port == container_port == str(roles[name].listen_port)
    assert len(published) == len(set(published)), "two services publish one host port"


def test_every_service_has_a_healthcheck_on_its_own_port(doc: dict[str, Any]) -> None:
    for name, svc in doc["services"].items():
        test = svc["healthcheck"]["test"]
        assert test[:3] == ["CMD", "aerolite", "ping"], name
        if name == "dashboard":
            command = svc["command"]
            port = command[command.index("--port") + 1]
            assert test[3] == f"http://127.0.0.1:{port}/healthz"
        else:
            port = broker_conf(name).listen_port if name.startswith("broker") else 9876
            assert test[3] == f"127.0.0.1:{port}", name
        assert svc["environment"]["AEROLITE_HEALTH_ADDR"] == test[3]


def test_the_console_shares_the_hosts_network_and_binds_its_loopback(
    doc: dict[str, Any],
) -> None:
    """The console dials what the brokers advertise (this host's addresses), so it runs on
    the host's network; that leaves it nothing to publish and its bind is the host's."""
    svc = doc["services"]["dashboard"]
    assert svc["network_mode"] == "host" and "ports" not in svc
    command = svc["command"]
    assert command[0] == "dashboard"
    assert command[command.index("--host") + 1] == "127.0.0.1"
    # The name servers at the host ports they publish.
    published = {
        str(m).split(":")[0] for n in ("namesrv1", "namesrv2") for m in doc["services"][n]["ports"]
    }
    assert {a.rpartition(":")[2] for a in command[command.index("-n") + 1].split(";")} == (
        published
    )
    assert set(svc["depends_on"]) == {"namesrv1", "namesrv2"}


def test_stores_live_on_declared_volumes(doc: dict[str, Any]) -> None:
    declared = set(doc["volumes"])
    for name, svc in doc["services"].items():
        named = [v.split(":")[0] for v in svc.get("volumes", []) if not v.startswith(".")]
        assert named == ([] if name == "dashboard" else [name]), name  # the console keeps none
        assert set(named) <= declared
    for name in doc["services"]:
        if name.startswith("broker"):
            assert str(broker_conf(name).store.root_dir).startswith("/var/lib/aerolite/")


def test_slaves_start_after_their_master_and_brokers_after_the_name_servers(
    tmp_path: Path,
) -> None:
    order = [p.name for p in plan(COMPOSE, data_dir=tmp_path)]
    assert order.index("broker-a-1") > order.index("broker-a-0")
    assert order.index("broker-b-1") > order.index("broker-b-0")
    for broker in ("broker-a-0", "broker-b-0"):
        assert order.index(broker) > max(order.index("namesrv1"), order.index("namesrv2"))


def test_the_image_is_slim_non_root_and_healthchecked() -> None:
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    # The image that runs is the last stage: slim, without a compiler.
    assert stages and re.fullmatch(r"python:3\.1[1-9]-slim", stages[-1])
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\n?.*CMD aerolite ping", text, re.M)
    assert 'ENTRYPOINT ["aerolite"]' in text


def test_the_image_is_built_with_the_compiled_codec() -> None:
    """A full Python image builds the wheel (gcc and headers are there) and refuses one
    without the speedups; the slim stage installs that wheel and reports them."""
    text = DOCKERFILE.read_text()
    build, run = text.split("\nFROM python:3.11-slim", 1)
    assert re.search(r"^FROM python:3\.1[1-9] AS build$", build, re.M)
    assert "COPY codec ./codec" in build and "setup.py" in build
    assert "pip wheel" in build and "the codec speedups were not built" in build
    assert "COPY --from=build /wheels /wheels" in run
    assert "pip install /wheels/*.whl" in run and "aerolite --version" in run


def test_each_planned_command_is_accepted_by_the_cli(tmp_path: Path) -> None:
    plans = plan(
        COMPOSE, data_dir=tmp_path, subnet="127.0.20.0", broker_overrides=["maxMessageSize=65536"]
    )
    hosts = {p.name: p.host for p in plans}
    assert sorted(hosts.values()) == [f"127.0.20.{i}" for i in range(1, 8)]
    for p in plans:
        if p.role == "dashboard":
            # The host network's 127.0.0.1:9876/9877 are the services publishing them.
            console = dashboard_parser().parse_args(p.argv[1:])
            assert console.namesrv == f"{hosts['namesrv1']}:9876;{hosts['namesrv2']}:9876"
            assert (console.host, console.port) == (p.host, 8080)
            assert p.depends_on == ("namesrv1", "namesrv2")
            continue
        args = _parser().parse_args(p.argv)
        if p.role == "namesrv":
            ns = _namesrv_config(args)
            assert ns.bind_address == p.host and ns.listen_port == 9876
            assert ns.kv_config_path == tmp_path / "home" / p.name / "kvConfig.json"
            continue
        config = _broker_config(args)
        # Service names became loopback addresses, container paths host paths.
        assert config.namesrv_addr == f"{hosts['namesrv1']}:9876;{hosts['namesrv2']}:9876"
        assert config.bind_address == config.broker_ip1 == p.host
        assert config.broker_ip2 is None
        assert config.store.root_dir == tmp_path / "volumes" / p.name / "store"
        assert config.store.max_message_bytes == 65536


def test_interpolation_follows_compose() -> None:
    env = {"SET": "value", "EMPTY": ""}
    assert interpolate("${SET}-$SET", env, "t") == "value-value"
    assert interpolate("${UNSET:-dflt} ${EMPTY:-dflt} ${EMPTY-dflt}", env, "t") == "dflt dflt "
    assert interpolate("$$HOME ${SET-x}", env, "t") == "$HOME value"
    with pytest.raises(ComposeError, match="variable UNSET is required: say it"):
        interpolate("${UNSET?say it}", env, "t")
    with pytest.raises(ComposeError, match="EMPTY is required"):
        interpolate("${EMPTY:?}", env, "t")


def write_compose(tmp_path: Path, services: dict[str, Any], **top: Any) -> Path:
    path = tmp_path / "compose.yml"
    path.write_text(yaml.safe_dump({"services": services, **top}))
    return path


@pytest.mark.parametrize(
    ("services", "top", "message"),
    [
        ({"x": {"command": ["mqbroker"]}}, {}, "service x: command must start with one of"),
        ({"x": {}}, {}, "service x: no command"),
        (
            {"x": {"command": ["namesrv"], "entrypoint": ["sh", "-c"]}},
            {},
            "service x: entrypoint",
        ),
        (
            {"x": {"command": ["namesrv"], "volumes": ["data:/var/lib/aerolite"]}},
            {},
            "service x: volume 'data' is not declared",
        ),
        (
            {"x": {"command": ["namesrv"], "depends_on": ["nobody"]}},
            {},
            "service x: depends on unknown service 'nobody'",
        ),
        (
            {
                "x": {"command": ["namesrv"], "depends_on": ["y"]},
                "y": {"command": ["namesrv"], "depends_on": ["x"]},
            },
            {},
            "depends_on cycle: x -> y -> x",
        ),
        (
            {"x": {"command": ["broker", "--store", "/data/store"]}},
            {},
            "service x: /data/store is on no volume",
        ),
        ({"x": {"command": ["broker", "--set"]}}, {}, "service x: --set needs a value"),
    ],
)
def test_what_cannot_run_locally_is_named(
    tmp_path: Path, services: dict[str, Any], top: dict[str, Any], message: str
) -> None:
    path = write_compose(tmp_path, services, **top)
    with pytest.raises(ConfigError) as err:
        plans_for(["-f", str(path), "--data", str(tmp_path / "d")])
    assert message in str(err.value)


def plans_for(argv: list[str]) -> list[ServicePlan]:
    """What ``aerolite cluster up ARGV`` would start (main() itself configures the process's
    logging, so the CLI runs in a subprocess where that matters)."""
    return _cluster_plans(_parser().parse_args(["cluster", "up", *argv]))


def test_bad_files_and_subnets_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    with pytest.raises(ConfigError, match=str(missing)):
        plans_for(["-f", str(missing)])
    broken = tmp_path / "broken.yml"
    broken.write_text("services: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        plans_for(["-f", str(broken)])
    with pytest.raises(ConfigError, match="not a loopback address"):
        plans_for(["-f", str(COMPOSE), "--subnet", "10.0.0.0"])
    with pytest.raises(ConfigError, match="--set 'oops' is not key=value"):
        plans_for(["-f", str(COMPOSE), "--set", "oops"])


def aerolite(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # our own CLI, fixed arguments
        [sys.executable, "-m", "broker", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cli_dry_run_prints_every_command_and_names_errors(tmp_path: Path) -> None:
    done = aerolite("cluster", "up", "-f", str(COMPOSE), "--data", str(tmp_path), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("aerolite namesrv ") == 2
    assert done.stdout.count("aerolite broker ") == 4
    assert done.stdout.count("aerolite dashboard ") == 1
    assert "broker-a-1 [127.0.10.4]  (after broker-a-0)" in done.stdout
    bad = write_compose(tmp_path, {"x": {"command": ["mqbroker"]}})
    done = aerolite("cluster", "up", "-f", str(bad), "--dry-run")
    assert done.returncode == 2
    assert done.stderr.startswith("aerolite cluster: service x: command must start with")


def test_ping_says_what_failed() -> None:
    done = aerolite("ping", "127.0.0.1:1", "--timeout", "1")
    assert done.returncode == 1
    assert "aerolite ping: 127.0.0.1:1:" in done.stderr
    done = aerolite("ping", "http://127.0.0.1:1/healthz", "--timeout", "1")
    assert done.returncode == 1
    assert done.stderr.startswith("aerolite ping: http://127.0.0.1:1/healthz: ")
    assert "Connection refused" in done.stderr


def test_a_host_network_service_finds_127_0_0_1_ports_at_the_publishing_service(
    tmp_path: Path,
) -> None:
    path = write_compose(
        tmp_path,
        {
            "ns": {"command": ["namesrv", "--port", "9876"], "ports": ["19876:9876"]},
            "other": {"command": ["namesrv"], "ports": [{"published": 19877, "target": 9876}]},
            "console": {
                "command": ["dashboard", "-n", "127.0.0.1:19876;localhost:19877;127.0.0.1:5"],
                "network_mode": "host",
            },
            "bridged": {"command": ["dashboard", "-n", "127.0.0.1:19876"]},
        },
    )
    plans = {p.name: p for p in plan(path, data_dir=tmp_path / "d", subnet="127.0.30.0")}
    console = plans["console"].argv
    ns, other = plans["ns"].host, plans["other"].host
    # Published ports lead to their service; an unpublished one stays as written.
    assert console[console.index("-n") + 1] == f"{ns}:9876;{other}:9876;127.0.0.1:5"
    assert console[console.index("--host") + 1] == plans["console"].host
    # Off the host's network, 127.0.0.1 is the container itself: left alone.
    bridged = plans["bridged"].argv
    assert bridged[bridged.index("-n") + 1] == "127.0.0.1:19876"
