"""RocketMQ 5 clients against the broker's gRPC front end (broker/proxy)."""
