"""Regenerate the checked-in message classes from the vendored apache/rocketmq-apis protos.

RocketMQ counterpart: the ``rocketmq-proto`` artifact the proxy depends on (generated from
the same ``apache/rocketmq/v2/{definition,service}.proto``). Run ``make protos`` (or
``python -m broker.proxy.apis.regenerate``) after replacing the files under ``protos/``; it
needs ``grpcio-tools`` (a dev dependency), the broker at run time only ``protobuf``.

protoc names a generated module after the proto's package path (``apache.rocketmq.v2``),
a top-level package we do not ship: the one cross-file import is rewritten to this package.
The descriptors keep their proto paths, so the wire and the reflection names are Apache's.
We write no ``_pb2_grpc`` service stubs: ``broker/proxy/server.py`` registers typed method
handlers itself.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTOS = HERE / "protos"
MODULES = ("definition", "service")
_IMPORT = re.compile(rb"^from apache\.rocketmq\.v2 import (\w+)", re.MULTILINE)


def regenerate() -> None:
    """Write ``definition_pb2.py``/``.pyi`` and ``service_pb2.py``/``.pyi`` beside this file.

    Raises:
        subprocess.CalledProcessError: protoc refused a proto (its message is on stderr).
    """
    import grpc_tools  # noqa: PLC0415 - a dev dependency, needed only here

    includes = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{PROTOS}",
                f"-I{includes}",
                f"--python_out={tmp}",
                f"--pyi_out={tmp}",
                *(f"apache/rocketmq/v2/{name}.proto" for name in MODULES),
            ],
            check=True,
        )
        out = Path(tmp) / "apache" / "rocketmq" / "v2"
        for name in MODULES:
            for suffix in (".py", ".pyi"):
                text = (out / f"{name}_pb2{suffix}").read_bytes()
                text = _IMPORT.sub(rb"from broker.proxy.apis import \1", text)
                (HERE / f"{name}_pb2{suffix}").write_bytes(text)


if __name__ == "__main__":
    regenerate()
