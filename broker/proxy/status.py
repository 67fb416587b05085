"""Business outcomes as the v2 ``Status`` a 5.x client reads.

RocketMQ counterpart: ``proxy/grpc/v2/common/ResponseBuilder`` (``buildStatus`` from a
remoting response code or a ``ProxyException``) and ``ProxyExceptionCode``. A refusal is
never a gRPC failure: the RPC succeeds and its response's ``status.code`` says what went
wrong, in the numbers of ``apache.rocketmq.v2.Code``; the clients map those to their
exceptions (400xx bad request, 403 forbidden, 404xx not found, 5xxxx server side).
"""

from __future__ import annotations

from broker.proxy.apis import definition_pb2 as pb
from remoting.codes import POLLING_TIMEOUT, ResponseCode

Code = pb.Code


class ProxyError(Exception):
    """A request refused with a v2 ``Code`` and a message the client shows."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int = pb.OK, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


OK_STATUS = status()

# ResponseBuilder.buildStatus(int remotingResponseCode, String remark): the remoting codes
# a processor answers, as the v2 codes the proxy sends back.
_FROM_REMOTING: dict[int, int] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.NO_MESSAGE: pb.OK,  # the caller decides (a receive: MESSAGE_NOT_FOUND)
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SUBSCRIPTION_NOT_LATEST: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: pb.MESSAGE_CORRUPTED,
    ResponseCode.INVALID_PARAMETER: pb.BAD_REQUEST,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    ResponseCode.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
    POLLING_TIMEOUT: pb.MESSAGE_NOT_FOUND,
    ResponseCode.TRANSACTION_FAILED: pb.INVALID_TRANSACTION_ID,
    ResponseCode.SYSTEM_ERROR: pb.INTERNAL_SERVER_ERROR,
}


def from_remoting(code: int, remark: str | None) -> pb.Status:
    """The v2 status of a processor's response code and remark."""
    v2 = _FROM_REMOTING.get(code, pb.INTERNAL_SERVER_ERROR)
    return status(v2, remark or (Code.Name(v2) if v2 != pb.OK else "OK"))
