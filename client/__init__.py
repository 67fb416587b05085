"""The asyncio Python SDK: producers and consumers for RocketMQ 4.x brokers and Aerolite.

RocketMQ counterpart: ``rocketmq-client``. Imports ``remoting`` only; ``client.spark`` is the
optional PySpark connector.
"""
