"""The web console: what rocketmq-dashboard gives RocketMQ operators, served by Aerolite.

RocketMQ counterpart: apache/rocketmq-dashboard, a separate Spring Boot application. This
one runs as ``aerolite dashboard -n NAMESRV`` or inside ``aerolite standalone`` (on
``dashboardPort``), learns everything through ``client.admin.Admin`` (so Apache RocketMQ 4.x
brokers work too), and renders its pages on the server.

- ``server``: the application and its runner; ``__main__``: the command.
- ``app``: what every page shares (rendering, login and CSRF checks, error pages).
- ``auth``: users, password hashes, sessions. ``sampler``: the live figures and their hour.
- ``pages_core`` (overview, login, live events, metrics), ``pages_topics``,
  ``pages_groups``, ``pages_messages`` (search, detail, resend, dead letters),
  ``pages_acl`` (producers and ACL accounts).
"""
