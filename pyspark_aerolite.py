"""Spark's automatic registration hook for Aerolite's ``rocketmq`` data source.

PySpark imports every top-level module named ``pyspark_*`` at the first data-source lookup
and registers its ``DefaultSource`` under ``DefaultSource.name()`` ("rocketmq"), so
``spark.read.format("rocketmq")`` works with no ``spark.dataSource.register`` call. No
RocketMQ counterpart (rocketmq-spark is a JVM jar found through ``--packages``).

That lookup runs in a Spark Python worker, started with ``PYSPARK_PYTHON`` as the JVM got it
from the driver's environment, else with whatever ``python3`` is first on PATH (Spark 4.3
does not apply ``spark.pyspark.python`` to these workers), which need not be the driver's
interpreter. When the connector cannot be imported there (the system Python lacks its
dependencies), Spark drops the module with the cause deep in a Java trace and the user sees
only DATA_SOURCE_NOT_FOUND. So a stand-in named "rocketmq" is registered instead, and its
first use fails saying which interpreter lacks which module and what to set.
"""

from __future__ import annotations

import sys
from typing import Any

try:
    from client.spark.source import RocketMQDataSource as DefaultSource
except ImportError as exc:
    from pyspark.sql.datasource import DataSource

    # "No module named 'x'" names the missing module; "cannot import name ..." (another
    # version installed) says what is wrong in its own words.
    _WHY = (
        f"has no module named {exc.name!r}"
        if isinstance(exc, ModuleNotFoundError) and exc.name
        else f"cannot import it ({exc})"
    )
    _PROBLEM = (
        f"Aerolite's rocketmq data source cannot be loaded by Spark's Python workers: "
        f"{sys.executable} {_WHY}. Spark starts the workers that "
        "load data sources with $PYSPARK_PYTHON, else with 'python3' on PATH (the "
        "spark.pyspark.python setting does not reach them). Set PYSPARK_PYTHON to the "
        "interpreter that has the aerolite package and its spark extra before the "
        "SparkSession starts: `export PYSPARK_PYTHON=$(which python)` in the shell that "
        'runs the job, or `os.environ["PYSPARK_PYTHON"] = sys.executable` before '
        "`SparkSession.builder...getOrCreate()` for a local session."
    )

    class DefaultSource(DataSource):  # type: ignore[no-redef]
        """Stands in for the connector where it cannot be imported; every use fails with
        the reason."""

        @classmethod
        def name(cls) -> str:
            return "rocketmq"

        def __init__(self, options: dict[str, str]) -> None:
            raise RuntimeError(_PROBLEM)

        def schema(self) -> Any:
            raise RuntimeError(_PROBLEM)


__all__ = ["DefaultSource"]
