"""Regenerate ``broker/rocketmq_keys.py``: every key Apache RocketMQ reads from broker.conf
and namesrv.conf, per Java class and release line.

RocketMQ fills its config objects with ``MixAll.properties2Object``, which walks the
object's public ``setXxx`` methods (inherited ones too) and reads the property named by the
setter: ``setBrokerIP1`` reads ``brokerIP1``, ``setdLegerSelfId`` reads ``dLegerSelfId``.
So the keys are the setter names, not the field names, and this script reads setters.

Usage, with a git directory of apache/rocketmq (a clone, or the search tool's ``fetch``)::

    .venv/bin/python -m tests.broker.gen_rocketmq_keys ROCKETMQ_GIT_DIR > broker/rocketmq_keys.py
    .venv/bin/ruff format broker/rocketmq_keys.py
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

# Release line -> the tags whose keys are united: a key any release of the line reads stays
# accepted, so a file written for 5.1 still starts after 5.3 renamed something.
LINES: dict[str, tuple[str, ...]] = {
    "4.9": tuple(f"rocketmq-all-4.9.{n}" for n in range(9)),
    "5": (
        "rocketmq-all-5.0.0",
        "rocketmq-all-5.1.0",
        "rocketmq-all-5.1.1",
        "rocketmq-all-5.1.2",
        "rocketmq-all-5.1.3",
        "rocketmq-all-5.1.4",
        "rocketmq-all-5.2.0",
        "rocketmq-all-5.3.0",
        "rocketmq-all-5.3.1",
        "rocketmq-all-5.3.2",
        "rocketmq-all-5.3.3",
    ),
}

# Python name -> Java source path. Which startup fills which class (BrokerStartup,
# NamesrvStartup, the 5.x store plugin context and broker container) is in ``ROLES``.
_JAVA = "src/main/java/org/apache/rocketmq"
CLASSES: dict[str, str] = {
    "BROKER_CONFIG": f"common/{_JAVA}/common/BrokerConfig.java",
    "MESSAGE_STORE_CONFIG": f"store/{_JAVA}/store/config/MessageStoreConfig.java",
    "NETTY_SERVER_CONFIG": f"remoting/{_JAVA}/remoting/netty/NettyServerConfig.java",
    "NETTY_CLIENT_CONFIG": f"remoting/{_JAVA}/remoting/netty/NettyClientConfig.java",
    "NAMESRV_CONFIG": f"common/{_JAVA}/common/namesrv/NamesrvConfig.java",
    "AUTH_CONFIG": f"auth/{_JAVA}/auth/config/AuthConfig.java",
    "CONTROLLER_CONFIG": f"common/{_JAVA}/common/ControllerConfig.java",
    "JRAFT_CONFIG": f"common/{_JAVA}/common/JraftConfig.java",
    "TIERED_STORE_CONFIG": f"tieredstore/{_JAVA}/tieredstore/MessageStoreConfig.java",
    "BROKER_CONTAINER_CONFIG": f"container/{_JAVA}/container/BrokerContainerConfig.java",
}

_BROKER_4 = ("BROKER_CONFIG", "MESSAGE_STORE_CONFIG", "NETTY_SERVER_CONFIG", "NETTY_CLIENT_CONFIG")
ROLES: dict[str, dict[str, tuple[str, ...]]] = {
    # BrokerStartup: brokerConfig, nettyServerConfig, nettyClientConfig, messageStoreConfig,
    # and authConfig (5.3). In 5.x a store plugin (the tiered store) fills its own config
    # from the same properties, and a broker container reads BrokerContainerConfig.
    "BROKER": {
        "4.9": _BROKER_4,
        "5": (*_BROKER_4, "AUTH_CONFIG", "TIERED_STORE_CONFIG", "BROKER_CONTAINER_CONFIG"),
    },
    # NamesrvStartup: namesrvConfig and nettyServerConfig; 5.x adds nettyClientConfig, and
    # controllerConfig + jraftConfig when enableControllerInNamesrv.
    "NAMESRV": {
        "4.9": ("NAMESRV_CONFIG", "NETTY_SERVER_CONFIG"),
        "5": (
            "NAMESRV_CONFIG",
            "NETTY_SERVER_CONFIG",
            "NETTY_CLIENT_CONFIG",
            "CONTROLLER_CONFIG",
            "JRAFT_CONFIG",
        ),
    },
}

# TlsSystemConfig reads these as system properties (-Dtls.server.mode=...); operators put
# them in tls.properties (tls.config.file) and sometimes in broker.conf.
TLS_SOURCE = f"remoting/{_JAVA}/remoting/netty/TlsSystemConfig.java"

# A public setter of one parameter: ``public [final|synchronized] void setX(Type x)``.
_SETTER = re.compile(
    r"public\s+(?:(?:final|synchronized|static)\s+)*void\s+set(\w+)"
    r"\s*\(\s*[\w.<>\[\], ]+?\s+\w+\s*\)"
)
_EXTENDS = re.compile(r"\bclass\s+\w+\s+extends\s+(\w+)")
_TLS_KEY = re.compile(r'String\s+TLS_\w+\s*=\s*"(tls\.[\w.]+)"')


def _show(git_dir: Path, tag: str, path: str) -> str | None:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{tag}:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def _setter_keys(git_dir: Path, tag: str, path: str) -> set[str]:
    source = _show(git_dir, tag, path)
    if source is None:
        return set()
    keys = {name[0].lower() + name[1:] for name in _SETTER.findall(source) if name}
    parent = _EXTENDS.search(source)
    if parent is not None:
        # 5.x: BrokerConfig extends BrokerIdentity, in the same package.
        parent_path = str(Path(path).with_name(parent.group(1) + ".java"))
        keys |= _setter_keys(git_dir, tag, parent_path)
    return keys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    git_dir = Path(argv[0])
    out = [
        '"""Every key Apache RocketMQ reads from broker.conf and namesrv.conf, per Java class.',
        "",
        "RocketMQ counterpart: ``MixAll.properties2Object`` over the config classes that",
        "``BrokerStartup`` and ``NamesrvStartup`` fill (key = setter name without ``set``, first",
        "letter lowered), plus ``TlsSystemConfig``'s ``tls.*`` properties. Generated from",
        "github.com/apache/rocketmq by tests/broker/gen_rocketmq_keys.py; do not edit by hand.",
        "Each set unites the tags of its release line:",
        "",
    ]
    for line, tags in LINES.items():
        out += textwrap.wrap(
            ", ".join(tags), 90, initial_indent=f"- {line}: ", subsequent_indent="  "
        )
    out += [
        "",
        "Regenerate::",
        "",
        "    .venv/bin/python -m tests.broker.gen_rocketmq_keys ROCKETMQ_GIT_DIR \\",
        "        > broker/rocketmq_keys.py",
        "    .venv/bin/ruff format broker/rocketmq_keys.py",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    # Each class's keys per line; a 5.x set is written as its 4.9 set plus and minus what
    # changed (most of it did not), so the module lists every key once.
    sets: dict[str, set[str]] = {}
    for line, tags in LINES.items():
        suffix = line.replace(".", "")
        for name, path in CLASSES.items():
            keys: set[str] = set()
            for tag in tags:
                keys |= _setter_keys(git_dir, tag, path)
            if keys:  # 4.9 has no AuthConfig, controller, tiered store or container
                sets[f"{name}_{suffix}"] = keys
        tls: set[str] = set()
        for tag in tags:
            tls |= set(_TLS_KEY.findall(_show(git_dir, tag, TLS_SOURCE) or ""))
        sets[f"TLS_SYSTEM_CONFIG_{suffix}"] = tls
    for name, keys in sets.items():
        base_name = name.removesuffix("_5") + "_49" if name.endswith("_5") else None
        base = sets.get(base_name) if base_name else None
        if base is None:
            out.append(f"{name}: frozenset[str] = frozenset({sorted(keys)!r})")
            continue
        expr = base_name or ""
        if base - keys:
            expr += f" - frozenset({sorted(base - keys)!r})"
        if keys - base:
            expr += f" | frozenset({sorted(keys - base)!r})"
        out.append(f"{name}: frozenset[str] = {expr}")
    out.append("")
    for role, lines in ROLES.items():
        per_line = []
        for line, names in lines.items():
            suffix = line.replace(".", "")
            parts = [f"{n}_{suffix}" for n in names if f"{n}_{suffix}" in sets]
            parts.append(f"TLS_SYSTEM_CONFIG_{suffix}")
            per_line.append(f"{role}_KEYS_{suffix}")
            out.append(f"# Every key RocketMQ {line}'s {role.lower()} startup reads.")
            out.append(
                f"{role}_KEYS_{suffix}: frozenset[str] = frozenset().union({', '.join(parts)})"
            )
        out.append(f"{role}_KEYS: frozenset[str] = {' | '.join(per_line)}")
    out.append("")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
