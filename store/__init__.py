"""The message store: mmap'd CommitLog, ConsumeQueue and IndexFile in RocketMQ's formats.

RocketMQ counterpart: the ``rocketmq-store`` module (``DefaultMessageStore``). This package
imports nothing else of Aerolite's: bytes and files, no sockets.
"""
