"""Spark's automatic registration hook for Aerolite's ``rocketmq`` data source.

PySpark imports every top-level module named ``pyspark_*`` at the first data-source lookup
and registers its ``DefaultSource`` under ``DefaultSource.name()`` ("rocketmq"), so
``spark.read.format("rocketmq")`` works with no ``spark.dataSource.register`` call. No
RocketMQ counterpart (rocketmq-spark is a JVM jar found through ``--packages``).
"""

from client.spark.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
