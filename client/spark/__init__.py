"""The PySpark connector: ``format("rocketmq")`` for batch and streaming reads and writes.

RocketMQ counterpart: apache/rocketmq-externals ``rocketmq-spark`` (Spark 2.3, Scala, never
published); this one is pure Python on PySpark's Python Data Source API (PySpark >= 4.2),
installed with the ``spark`` extra (``pip install 'aerolite[spark]'``).

Spark finds the source by itself through the top-level module ``pyspark_aerolite``; in a
session where the package is not importable by that name, register it by hand::

    from client.spark.source import RocketMQDataSource
    spark.dataSource.register(RocketMQDataSource)

This package imports pyspark and pyarrow lazily: ``client.spark.offsets`` (options, offsets,
admission control) works without them.
"""
