"""The broker and the name server.

RocketMQ counterpart: the ``rocketmq-broker`` and ``rocketmq-namesrv`` modules. The broker
sits on ``remoting`` and ``store``; the name server (``broker.namesrv``) on ``remoting`` only.
"""
