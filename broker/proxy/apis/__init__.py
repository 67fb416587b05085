"""The RocketMQ 5 gRPC messaging API (apache/rocketmq-apis ``apache.rocketmq.v2``), generated.

RocketMQ counterpart: the ``rocketmq-proto`` artifact. ``definition_pb2`` and ``service_pb2``
are protoc's output for the vendored ``protos/`` (Apache License 2.0, see their headers);
``regenerate.py`` writes them again. Do not edit them by hand.
"""
