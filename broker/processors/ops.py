"""The operator's broker codes, the ones mqadmin's commands stand on.

RocketMQ counterpart: the rest of ``AdminBrokerProcessor`` (the topic, group, offset and
lookup codes are in ``broker/processors/admin.py``):

- GET_CONSUMER_CONNECTION_LIST (203) / GET_PRODUCER_CONNECTION_LIST (204): a group's client
  connections (mqadmin consumerConnection / producerConnection); GET_ALL_PRODUCER_INFO (328,
  RocketMQ 4.9.4's ``ProducerTableInfo``): every producer group's instances, which
  rocketmq-exporter counts for ``rocketmq_producer_count``;
- GET_BROKER_CONFIG (26) / UPDATE_BROKER_CONFIG (25): the configuration as broker.conf text,
  and live changes to the keys every request reads afresh (``LIVE_BROKER_KEYS``);
- INVOKE_BROKER_TO_RESET_OFFSET (222): a group's offsets moved to a time. The broker looks
  the offsets up, stores them, and tells every online consumer of the group with
  RESET_CONSUMER_CLIENT_OFFSET (220), so clients drop what they hold and pull from there;
- GET_CONSUMER_RUNNING_INFO (307): passed on to the named client, whose answer comes back
  (mqadmin consumerStatus);
- the ACL codes: UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51),
  GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) and
  GET_BROKER_CLUSTER_ACL_CONFIG (54, RocketMQ 4.9's, for mqadmin getAclConfig);
- CLONE_GROUP_OFFSET (314), CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316) and
  DELETE_EXPIRED_COMMITLOG (329).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Protocol

import structlog

from broker.acl import Account, AclRules, PlainAcl, perm_text
from broker.clients import ClientChannel
from broker.config import (
    LIVE_BROKER_KEYS,
    config_properties,
    parse_properties_text,
)
from broker.facets import BrokerFacts, Clients, HasStore, HasTopics
from broker.subscriptions import group_refusal
from codec import decode_offset_msg_id
from remoting.bodies import AclConfigBody, PlainAccessConfig, encode_reset_offset_body
from remoting.codes import LanguageCode, RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.errors import ConfigError, RemotingError
from remoting.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerGroupRequestHeader,
    ConsumerRunningInfoRequestHeader,
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetBrokerConfigResponseHeader,
    ProducerGroupRequestHeader,
    ResetOffsetRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from remoting.route import MessageQueue, dumps

log = structlog.get_logger(__name__)

RUNNING_INFO_TIMEOUT_S = 5.0


def _connection_json(channel: ClientChannel) -> dict[str, object]:
    try:
        language = LanguageCode(channel.language).name
    except ValueError:
        language = "OTHER"
    return {
        "clientAddr": channel.peer,
        "clientId": channel.client_id,
        "language": language,
        "version": channel.version,
    }


def _producer_info_json(channel: ClientChannel) -> dict[str, object]:
    """RocketMQ's ``ProducerInfo`` (its fields in fastjson's order)."""
    doc = _connection_json(channel)
    return {
        "clientId": doc["clientId"],
        "language": doc["language"],
        "lastUpdateTimestamp": channel.last_update_ms,
        "remoteIP": channel.peer,
        "version": channel.version,
    }


def _ok(request: RemotingCommand, body: bytes | None = None) -> RemotingCommand:
    return response_to(request, ResponseCode.SUCCESS, None, None, body)


class Listening(Protocol):
    """The main listener, for the port it serves."""

    @property
    def port(self) -> int: ...


class OpsBroker(BrokerFacts, Clients, HasTopics, HasStore, Protocol):
    """What the operator's codes touch: the client tables and offsets, the configuration
    (read, and changed live), the ports served, the store and the ACL."""

    @property
    def server(self) -> Listening: ...

    @property
    def ha_port(self) -> int: ...

    @property
    def metrics_port(self) -> int: ...

    @property
    def acl(self) -> PlainAcl | None: ...

    def apply_config(self, changes: Mapping[str, str], live: frozenset[str]) -> None: ...


class OpsProcessor:
    def __init__(self, broker: OpsBroker) -> None:
        self.broker = broker

    # -------------------------------------------------------------------- connections

    async def consumer_connections(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = ConsumerGroupRequestHeader.from_ext_fields(request.ext_fields)
        info = self.broker.consumers.get(h.consumer_group)
        if info is None or not info.channels:
            return response_to(
                request,
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{h.consumer_group}] not online",
            )
        body = {
            "connectionSet": [
                _connection_json(c)
                for c in sorted(info.channels.values(), key=lambda c: c.client_id)
            ],
            "consumeFromWhere": info.consume_from_where.name,
            "consumeType": info.consume_type.name,
            "messageModel": info.message_model.name,
            "subscriptionTable": {t: s.to_json() for t, s in sorted(info.subscriptions.items())},
        }
        return _ok(request, dumps(body))

    async def producer_connections(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = ProducerGroupRequestHeader.from_ext_fields(request.ext_fields)
        channels = self.broker.producers.groups.get(h.producer_group)
        if not channels:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"the producer group[{h.producer_group}] not exist",
            )
        body = {
            "connectionSet": [
                _connection_json(c) for c in sorted(channels.values(), key=lambda c: c.client_id)
            ]
        }
        return _ok(request, dumps(body))

    async def all_producer_info(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO: ``{"data": {group: [ProducerInfo, ...]}}``."""
        data = {
            group: [
                _producer_info_json(c) for c in sorted(channels.values(), key=lambda c: c.client_id)
            ]
            for group, channels in sorted(self.broker.producers.groups.items())
        }
        return _ok(request, dumps({"data": data}))

    async def consumer_running_info(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (307): ask one online consumer for its state and pass
        its answer on (mqadmin consumerStatus)."""
        h = ConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        # Passed on with every field as it came, known to us or not, as Java's callConsumer
        # passes the admin's request on.
        return await self._call_consumer(request, h.consumer_group, h.client_id, None)

    async def consume_message_directly(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (309): hand one stored message (by its offset message
        id) to one online consumer to consume now, and pass its result on (mqadmin
        consumeMessage; ``AdminBrokerProcessor.consumeMessageDirectly``)."""
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        try:
            _host, offset = decode_offset_msg_id(h.msg_id)
        except ValueError:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"msgId {h.msg_id!r} is no offset message id"
            )
        record = self.broker.store.look_message_by_offset(offset)
        if record is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"no message at the offset of {h.msg_id}"
            )
        # Passed on as it came, with this broker's name put in (callConsumer's request).
        ext = {
            **request.ext_fields,
            **ConsumeMessageDirectlyResultRequestHeader(
                consumer_group=h.consumer_group,
                client_id=h.client_id,
                msg_id=h.msg_id,
                broker_name=self.broker.config.broker_name,
                topic=h.topic,
            ).to_ext_fields(),
        }
        return await self._call_consumer(request, h.consumer_group, h.client_id or "", record, ext)

    async def _call_consumer(
        self,
        request: RemotingCommand,
        group: str,
        client_id: str,
        body: bytes | None,
        ext: dict[str, str] | None = None,
    ) -> RemotingCommand:
        """``callConsumer``: the same request to the client ``client_id`` of ``group``, its
        answer passed back."""
        info = self.broker.consumers.get(group)
        target = None
        if info is not None:
            target = next((c for c, ch in info.channels.items() if ch.client_id == client_id), None)
        if target is None:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{group}> <{client_id}> not online",
            )
        ask = RemotingCommand.request(
            request.code, dict(ext if ext is not None else request.ext_fields), body
        )
        try:
            answer = await target.invoke(ask, RUNNING_INFO_TIMEOUT_S)
        except (RemotingError, TimeoutError) as exc:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"consumer {client_id} did not answer: {exc}",
            )
        return response_to(request, answer.code, answer.remark, None, answer.body)

    # ------------------------------------------------------------------------- config

    async def broker_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        props = config_properties(broker.config)
        # A port asked for as 0 reads as the one served: that is what an operator looks up.
        props["listenPort"] = str(broker.server.port)
        if broker.ha_port:
            props["haListenPort"] = str(broker.ha_port)
        if broker.metrics_port:
            props["metricsPort"] = str(broker.metrics_port)
        text = "".join(f"{k}={v}\n" for k, v in props.items())
        version = dumps(broker.topics.data_version.to_json()).decode()
        ext = GetBrokerConfigResponseHeader(version=version).to_ext_fields()
        return response_to(request, ResponseCode.SUCCESS, None, ext, text.encode())

    async def update_broker_config(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        try:
            changes = parse_properties_text(request.body_bytes.decode("utf-8"))
            if changes:
                self.broker.apply_config(changes, LIVE_BROKER_KEYS)
        except (ConfigError, UnicodeDecodeError) as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if not changes:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "no key=value lines in the request body"
            )
        log.info("broker_config_updated", peer=conn.peer, changes=changes)
        return _ok(request)

    # ------------------------------------------------------------------------ offsets

    async def reset_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Offsets of ``group`` on ``topic`` moved to the first message stored at or after
        ``timestamp`` (the end where none is; -1: the end), as RocketMQ 5 resets
        (``BoundaryType.LOWER``; 4.9 took the nearest message, so a time after the last
        message moved a queue back over it). Without ``isForce`` a queue is only moved back,
        never forward past what the group has consumed, as RocketMQ does."""
        h = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        refusal = group_refusal(request, h.group)
        if refusal is not None:
            return refusal
        broker = self.broker
        tc = broker.topics.get(h.topic)
        if tc is None:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] topic does not exist: {h.topic}",
            )
        store = broker.store
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            mq = MessageQueue(h.topic, broker.config.broker_name, qid)
            current = broker.offsets.query(h.group, h.topic, qid)
            if h.timestamp < 0:
                target = store.get_max_offset(h.topic, qid)
            else:
                target = store.get_offset_by_time(h.topic, qid, h.timestamp, nearest=False)
            if not h.is_force and current >= 0 and target > current:
                target = current
            table[mq] = target
            broker.offsets.commit(h.group, h.topic, qid, target)
        body = encode_reset_offset_body(table)
        info = broker.consumers.get(h.group)
        if info is not None and info.channels:
            notice = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                ResetOffsetRequestHeader(
                    topic=h.topic, group=h.group, timestamp=h.timestamp, is_force=h.is_force
                ).to_ext_fields(),
                body,
            )
            # One way, as Broker2Client sends it: clients act on it and answer nothing.
            for client in list(info.channels):
                client.invoke_oneway(notice)
        log.info(
            "consumer_offset_reset",
            group=h.group,
            topic=h.topic,
            timestamp=h.timestamp,
            clients=len(info.channels) if info else 0,
        )
        return _ok(request, body)

    async def clone_group_offset(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = CloneGroupOffsetRequestHeader.from_ext_fields(request.ext_fields)
        refusal = group_refusal(request, h.dest_group)
        if refusal is not None:
            return refusal
        offsets = self.broker.offsets
        topics = [h.topic] if h.topic else sorted(offsets.topics_of_group(h.src_group))
        copied = 0
        for topic in topics:
            for qid, offset in offsets.queues_of(h.src_group, topic).items():
                offsets.commit(h.dest_group, topic, qid, offset)
                copied += 1
        log.info("consumer_offset_cloned", src=h.src_group, dest=h.dest_group, queues=copied)
        return _ok(request)

    # -------------------------------------------------------------------------- ACL

    def _acl_or_refuse(self, request: RemotingCommand) -> PlainAcl | RemotingCommand:
        acl = self.broker.acl
        if acl is None:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                "ACL is not enabled on this broker (aclEnable=false)",
            )
        return acl

    def _change_acl(
        self,
        request: RemotingCommand,
        change: Callable[[AclRules], str | None],
        failed: ResponseCode,
    ) -> RemotingCommand:
        """Apply ``change`` to a copy of the rules (it may name a problem instead), check the
        result as a loaded file would be, write it and put it in force."""
        acl = self._acl_or_refuse(request)
        if isinstance(acl, RemotingCommand):
            return acl
        rules = AclRules.parse(acl.rules.to_yaml())
        try:
            problem = change(rules)
            if problem is None:
                acl.save(AclRules.parse(rules.to_yaml()))
        except (ConfigError, OSError) as exc:
            problem = str(exc)
        if problem is not None:
            return response_to(request, failed, problem)
        return _ok(request)

    async def update_acl_config(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_ACL_CONFIG (50): add or replace one account in plain_acl.yml."""
        h = CreateAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        ak = h.access_key

        def change(rules: AclRules) -> None:
            old = rules.accounts.get(ak)
            # The account as plain_acl.yml spells it; the header's fields set override it.
            doc: dict[str, object] = old.to_yaml() if old is not None else {"accessKey": ak}
            set_fields = (
                ("secretKey", h.secret_key),
                ("whiteRemoteAddress", h.white_remote_address),
                ("defaultTopicPerm", h.default_topic_perm),
                ("defaultGroupPerm", h.default_group_perm),
            )
            doc.update({key: value for key, value in set_fields if value})
            if h.admin is not None:
                doc["admin"] = h.admin
            for key, value in (("topicPerms", h.topic_perms), ("groupPerms", h.group_perms)):
                if value is not None:
                    doc[key] = [p.strip() for p in value.split(",") if p.strip()]
            rules.accounts[ak] = Account.from_yaml(doc)

        response = self._change_acl(
            request, change, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        )
        if response.code == ResponseCode.SUCCESS:
            log.info("acl_account_updated", access_key=ak, peer=conn.peer)
        return response

    async def delete_acl_config(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        ak = DeleteAccessConfigRequestHeader.from_ext_fields(request.ext_fields).access_key

        def change(rules: AclRules) -> str | None:
            return None if rules.accounts.pop(ak, None) else f"No acl config for {ak}"

        response = self._change_acl(request, change, ResponseCode.DELETE_ACL_CONFIG_FAILED)
        if response.code == ResponseCode.SUCCESS:
            log.info("acl_account_deleted", access_key=ak, peer=conn.peer)
        return response

    async def update_global_white_addrs(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        h = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(request.ext_fields)
        text = h.global_white_addrs
        white = [a.strip() for a in text.split(",") if a.strip()]

        def change(rules: AclRules) -> None:
            rules.global_white = white

        response = self._change_acl(
            request, change, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        )
        if response.code == ResponseCode.SUCCESS:
            log.info("acl_global_white_updated", addresses=white, peer=conn.peer)
        return response

    async def acl_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_INFO (52): the ACL file's version on this broker."""
        acl = self._acl_or_refuse(request)
        if isinstance(acl, RemotingCommand):
            return acl
        broker = self.broker
        version = json.dumps({"counter": acl.version, "timestamp": acl.loaded_ms})
        ext = GetBrokerAclConfigResponseHeader(
            version=version,
            broker_name=broker.config.broker_name,
            broker_addr=broker.address,
            cluster_name=broker.config.broker_cluster_name,
            all_acl_file_version=f"{{{json.dumps(str(acl.path))}:{version}}}",
            accounts=len(acl.rules.accounts),
        ).to_ext_fields()
        return response_to(request, ResponseCode.SUCCESS, None, ext)

    async def acl_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54): the accounts and global white list, as the
        ACL file has them (mqadmin getAclConfig; an admin's read, as in RocketMQ 4.9)."""
        acl = self._acl_or_refuse(request)
        if isinstance(acl, RemotingCommand):
            return acl
        rules = acl.rules
        body = AclConfigBody(
            list(rules.global_white),
            [
                PlainAccessConfig(
                    access_key=a.access_key,
                    secret_key=a.secret_key,
                    white_remote_address=a.white_remote_address,
                    admin=a.admin,
                    default_topic_perm=perm_text(a.default_topic_perm),
                    default_group_perm=perm_text(a.default_group_perm),
                    topic_perms=list(a.topic_perms),
                    group_perms=list(a.group_perms),
                )
                for a in rules.accounts.values()
            ],
        )
        return _ok(request, body.encode())

    # ------------------------------------------------------------------------ store

    def _unused_topics(self) -> list[str]:
        """Topics with consume queues in the store but no longer in the topic table. The
        broker's internal topics keep theirs (RocketMQ spares the schedule and op-half
        topics; ours also have the timer's, the pops' and the transactions')."""
        broker = self.broker
        topics = broker.topics
        return sorted(
            t
            for t in {cq.topic for cq in broker.store.queues} - set(topics.table)
            if not topics.is_system_topic(t) and not t.upper().startswith("RMQ_SYS_")
        )

    async def clean_unused_topic(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC (316): drop the consume queues of topics the broker no longer
        has (``cleanUnusedTopic``)."""
        gone = self._unused_topics()
        for topic in gone:
            self.broker.store.delete_topic(topic)
        log.info("unused_topics_cleaned", topics=gone, peer=conn.peer)
        return _ok(request)

    async def clean_expired_consume_queue(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Consume queues of topics this broker no longer has, and entries below the commit
        log's start (``cleanExpiredConsumerQueue``)."""
        broker = self.broker
        store = broker.store
        gone = self._unused_topics()
        for topic in gone:
            store.delete_topic(topic)
        low = store.commit_log.min_offset
        segments = sum(cq.delete_expired(low) for cq in store.queues)
        log.info("expired_consume_queues_cleaned", topics=gone, segments=segments)
        return _ok(request)

    async def delete_expired_commit_log(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        report = self.broker.store.delete_expired_files()
        log.info("expired_commit_log_deleted", report=str(report))
        return _ok(request)
