"""What the broker asks a 5.x client goes out on its Telemetry stream, and the answer comes
back to the asker (RocketMQ 5 proxy's ``GrpcClientChannel``): GET_CONSUMER_RUNNING_INFO
(mqadmin consumerStatus) answered from the client's settings, with ``jstackEnable`` a
PrintThreadStackTraceCommand whose answer is the info's ``jstack``; CONSUME_MESSAGE_DIRECTLY
(mqadmin consumeMessage) as a VerifyMessageCommand whose answer is the consume result."""

from __future__ import annotations

import asyncio
import json
import uuid

from broker.broker import Broker
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.apis import service_pb2 as rpc
from client.admin import Admin
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerRunningInfoRequestHeader,
)
from tests.proxy.grpc_raw import LANGUAGE, RawClient, consumer_settings
from tests.support import call, send_ok, wait_dispatched


def push_settings(group: str, topic: str, expression: str = "*") -> pb.Settings:
    settings = consumer_settings(group, topic)
    settings.client_type = pb.PUSH_CONSUMER
    settings.subscription.subscriptions[0].expression.expression = expression
    return settings


async def test_consumer_status_of_a_5x_consumer_comes_through_its_telemetry_stream(
    broker: Broker, client: RemotingClient
) -> None:
    group, topic = f"g5_{uuid.uuid4().hex[:6]}", f"t5_{uuid.uuid4().hex[:6]}"
    broker.topics.create_internal(topic, 2, 6)
    async with (
        RawClient(broker.grpc.port) as five,
        five.telemetry(push_settings(group, topic, "TagA")) as stream,
    ):
        assert stream.reply.status.code == pb.OK

        # Without jstack: answered from the settings at once.
        async with Admin(broker.config.namesrv_addr or "") as admin:
            info = await admin.consumer_running_info(group, five.client_id)
        assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert info["properties"]["language"] == LANGUAGE
        assert [s["topic"] for s in info["subscriptionSet"]] == [topic]
        assert info["subscriptionSet"][0]["subString"] == "TagA"

        # With jstack: the client is asked for its stacks, by nonce, and its answer is kept.
        async def answer_stack_trace() -> None:
            command = await stream.read(10)
            assert command is not None
            nonce = command.print_thread_stack_trace_command.nonce
            assert nonce
            await stream.call.write(
                rpc.TelemetryCommand(
                    status=pb.Status(code=pb.OK),
                    thread_stack_trace=rpc.ThreadStackTrace(
                        nonce=nonce, thread_stack_trace="main: at Foo.bar()"
                    ),
                )
            )

        helper = asyncio.create_task(answer_stack_trace())
        ext = ConsumerRunningInfoRequestHeader(
            consumer_group=group, client_id=five.client_id, jstack_enable=True
        ).to_ext_fields()
        response = await call(
            client, broker.address, RequestCode.GET_CONSUMER_RUNNING_INFO, ext, timeout_s=15
        )
        await helper
        assert response.code == ResponseCode.SUCCESS, response
        assert json.loads(bytes(response.body_bytes))["jstack"] == "main: at Foo.bar()"


async def test_consume_message_directly_reaches_a_5x_consumer_as_a_verify_command(
    broker: Broker, client: RemotingClient
) -> None:
    """CONSUME_MESSAGE_DIRECTLY (mqadmin consumeMessage): the stored message goes to the
    client as a VerifyMessageCommand; its answer's status becomes the consume result."""
    group, topic = f"gv_{uuid.uuid4().hex[:6]}", f"tv_{uuid.uuid4().hex[:6]}"
    broker.topics.create_internal(topic, 1, 6)
    sent = await send_ok(client, broker.address, topic, b"verify me", tags="TagV")
    await wait_dispatched(broker)
    offset_id = sent.ext_fields["msgId"]
    async with (
        RawClient(broker.grpc.port) as five,
        five.telemetry(push_settings(group, topic)) as stream,
    ):
        seen: list[pb.Message] = []

        async def consume_it() -> None:
            command = await stream.read(10)
            assert command is not None
            verify = command.verify_message_command
            seen.append(verify.message)
            await stream.call.write(
                rpc.TelemetryCommand(
                    status=pb.Status(code=pb.FAILED_TO_CONSUME_MESSAGE, message="busy"),
                    verify_message_result=rpc.VerifyMessageResult(nonce=verify.nonce),
                )
            )

        helper = asyncio.create_task(consume_it())
        ext = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=five.client_id, msg_id=offset_id
        ).to_ext_fields()
        response = await call(
            client, broker.address, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, timeout_s=15
        )
        await helper
        assert response.code == ResponseCode.SUCCESS, response
        result = json.loads(bytes(response.body_bytes))
        assert result["consumeResult"] == "CR_LATER" and result["remark"] == "busy"
        assert [(m.body, m.system_properties.tag) for m in seen] == [(b"verify me", "TagV")]

        unknown = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id="nobody", msg_id=offset_id
        ).to_ext_fields()
        refused = await call(client, broker.address, RequestCode.CONSUME_MESSAGE_DIRECTLY, unknown)
        assert refused.code == ResponseCode.SYSTEM_ERROR and "not online" in (refused.remark or "")
