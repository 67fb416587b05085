"""RocketMQ 5 clients: the gRPC messaging protocol (apache/rocketmq-apis v2) in the broker.

RocketMQ counterpart: the ``proxy`` module in its "local" mode, where it runs inside the
broker process and calls the broker's processors directly. ``service`` is the front end
(its RPCs, its listener), ``clients`` the 5.x clients and their Telemetry streams,
``route`` / ``produce`` / ``consume`` the RPCs by kind, ``convert`` the message mapping,
``context`` the caller and its ACL check, ``local`` the in-process channel to the
processors, ``apis`` the generated protobuf classes.
"""

import os

# gRPC's C core logs each failed TLS handshake (a plaintext client on a TLS port) to stderr
# at INFO; the broker logs what matters itself. Set before grpc is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
# grpcio >= 1.81's fork handlers restart its poller in a forked child, where the poller can
# die on a closed epoll fd before exec (grpc/grpc#43055): a subprocess started with
# preexec_fn (pyspark's JVM gateway, among others) then exits at once, about 1 fork in 30
# here once a channel or server has run. The broker never needs gRPC in a forked child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
