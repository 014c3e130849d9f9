"""The vocabulary shared by the broker and the thin client: status codes, errors, messages, routes.

What it is
----------
The request and answer types of the RocketMQ 5 messaging API as far as seed 001's flows use them,
independent of any transport (the broker core answers with these objects; a gRPC face would map them
to and from ``apache.rocketmq.v2`` protobufs).  Sources:

* ``Code``: the status codes of ``apache/rocketmq-apis`` ``apache/rocketmq/v2/definition.proto``
  (``enum Code``), with the numbers of that file.  ``UNAVAILABLE`` is the gRPC transport status (the
  server could not be reached); it has no ``Code`` number, so it is a ``Transport`` value.
* Retriable or not: the reference's classification, after upstream's
  ``python/rocketmq/v5/util/messaging_result_checker.py`` (which exception each code raises) and the
  FIFO ack loop of ``java/.../impl/consumer/ProcessQueueImpl.java`` ("invalid receipt handle, forgive
  to retry").  A *non-retriable* answer is one after which repeating the same request can never
  succeed: every 4xx code except ``REQUEST_TIMEOUT`` and ``TOO_MANY_REQUESTS``.  Timeouts, throttling,
  internal errors and transport unavailability are retriable.
* ``TOO_MANY_REQUESTS`` carries ``backoff``: the delay the *server* chose (seed 001 "Producer",
  特别地: "该退避间隔由服务端决定").  Upstream takes the delay from the retry policy the server pushes in
  its settings; the reference puts the server's choice on the answer itself, which is the same
  contract with one less moving part.
* Message types (``MessageType``) and the rules that derive a message's type from its properties are
  upstream's ``PublishingMessageImpl``: a message group makes it FIFO, a delivery timestamp makes it
  DELAY, sending it within a transaction makes it TRANSACTION, otherwise NORMAL; a group together
  with a delivery timestamp is rejected before any request.
* Retry policies (``RetryPolicy``): upstream ``retry/ExponentialBackoffRetryPolicy.java`` and
  ``retry/CustomizedBackoffRetryPolicy.java`` (REFERENCE.md section 2): exponential
  ``min(initial * multiplier ** (attempt - 1), max)`` or a list of durations whose last one repeats.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any

__all__ = [
    "NON_RETRIABLE",
    "Code",
    "ConsumeResult",
    "GroupSettings",
    "Message",
    "MessageQueue",
    "MessageType",
    "Permission",
    "ReceivedMessage",
    "RetryPolicy",
    "RpcError",
    "SendError",
    "SendReceipt",
    "Transport",
    "message_type_of",
]


class Code(IntEnum):
    """Status codes of ``apache.rocketmq.v2.Code`` (definition.proto), the subset the flows meet."""

    OK = 20000
    BAD_REQUEST = 40000
    ILLEGAL_TOPIC = 40002
    ILLEGAL_CONSUMER_GROUP = 40003
    ILLEGAL_MESSAGE_GROUP = 40006
    INVALID_TRANSACTION_ID = 40008
    ILLEGAL_INVISIBLE_TIME = 40011
    ILLEGAL_DELIVERY_TIME = 40012
    INVALID_RECEIPT_HANDLE = 40013
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014
    FORBIDDEN = 40300
    NOT_FOUND = 40400
    MESSAGE_NOT_FOUND = 40401
    TOPIC_NOT_FOUND = 40402
    CONSUMER_GROUP_NOT_FOUND = 40403
    REQUEST_TIMEOUT = 40800
    PRECONDITION_FAILED = 42800
    TOO_MANY_REQUESTS = 42900
    INTERNAL_ERROR = 50000
    INTERNAL_SERVER_ERROR = 50001
    PROXY_TIMEOUT = 50400


class Transport(Enum):
    """Failures below the messaging protocol (gRPC status): no ``Code`` from the server."""

    UNAVAILABLE = "UNAVAILABLE"


_RETRIABLE_4XX = frozenset({Code.REQUEST_TIMEOUT, Code.TOO_MANY_REQUESTS})
#: codes after which repeating the same request can never succeed
NON_RETRIABLE = frozenset(c for c in Code if 40000 <= c < 50000 and c not in _RETRIABLE_4XX)


class RpcError(Exception):
    """A request that did not return OK: a server status code, or a transport failure."""

    def __init__(self, code: Code | Transport, message: str = "", *, backoff: float | None = None) -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message
        #: for TOO_MANY_REQUESTS: the back-off (clock seconds) the server chose before a retry
        self.backoff = backoff

    @property
    def retriable(self) -> bool:
        return self.code not in NON_RETRIABLE

    @property
    def throttled(self) -> bool:
        return self.code is Code.TOO_MANY_REQUESTS


class SendError(Exception):
    """A producer send that failed; ``attempts`` is the number of send requests it made."""

    def __init__(self, reason: str, *, attempts: int, cause: BaseException | None = None) -> None:
        super().__init__(f"{reason} (after {attempts} send request(s))")
        self.reason = reason
        self.attempts = attempts
        self.cause = cause


class MessageType(Enum):
    NORMAL = "normal"
    FIFO = "fifo"
    DELAY = "delay"
    TRANSACTION = "transaction"


class Permission(Enum):
    NONE = "none"
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"

    @property
    def readable(self) -> bool:
        return self in (Permission.READ, Permission.READ_WRITE)

    @property
    def writable(self) -> bool:
        return self in (Permission.WRITE, Permission.READ_WRITE)


@dataclass(frozen=True)
class MessageQueue:
    """One entry of a topic's route: a queue, where it lives, what it accepts."""

    topic: str
    queue_id: int
    broker: str = "broker-0"
    permission: Permission = Permission.READ_WRITE
    accept_types: frozenset = frozenset({MessageType.NORMAL})

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker}/{self.queue_id}"


@dataclass(frozen=True)
class Message:
    """A message to send.  ``group`` is the message group (FIFO); ``delivery_timestamp`` is in the
    broker clock's time (DELAY)."""

    topic: str
    body: bytes
    tag: str | None = None
    keys: tuple = ()
    group: str | None = None
    delivery_timestamp: float | None = None
    properties: tuple = ()


def message_type_of(message: Message, transactional: bool = False) -> MessageType:
    """Upstream's derivation of a message's type; raises ValueError on a contradictory message."""
    if message.group is not None and message.delivery_timestamp is not None:
        raise ValueError("a message cannot have both a message group and a delivery timestamp")
    if transactional:
        if message.group is not None or message.delivery_timestamp is not None:
            raise ValueError("a transactional message cannot have a message group or a delivery timestamp")
        return MessageType.TRANSACTION
    if message.group is not None:
        return MessageType.FIFO
    if message.delivery_timestamp is not None:
        return MessageType.DELAY
    return MessageType.NORMAL


@dataclass(frozen=True)
class SendReceipt:
    message_id: str
    queue: MessageQueue
    offset: int
    transaction_id: str | None = None


@dataclass(frozen=True)
class ReceivedMessage:
    """A message as a consumer sees it (upstream ``MessageView``): body and properties, where it comes
    from, its delivery attempt and the receipt handle of *this* delivery."""

    message_id: str
    topic: str
    body: bytes
    queue: MessageQueue
    offset: int
    delivery_attempt: int
    receipt_handle: str
    tag: str | None = None
    keys: tuple = ()
    group: str | None = None
    properties: tuple = ()

    def with_attempt(self, attempt: int) -> ReceivedMessage:
        return dataclasses.replace(self, delivery_attempt=attempt)

    def with_handle(self, handle: str) -> ReceivedMessage:
        return dataclasses.replace(self, receipt_handle=handle)


class ConsumeResult(Enum):
    SUCCESS = "success"
    FAILURE = "failure"


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before the next delivery attempt; ``max_attempts`` counts deliveries/consumptions."""

    max_attempts: int = 16
    initial: float = 1.0
    maximum: float = 60.0
    multiplier: float = 2.0
    durations: tuple = ()  # customized back-off: these delays, the last one repeating

    def delay(self, attempt: int) -> float:
        """The delay after failed attempt ``attempt`` (1-based)."""
        if attempt < 1:
            raise ValueError("attempts are numbered from 1")
        if self.durations:
            return float(self.durations[min(attempt, len(self.durations)) - 1])
        return float(min(self.initial * self.multiplier ** (attempt - 1), self.maximum))

    @classmethod
    def immediate(cls, max_attempts: int) -> RetryPolicy:
        return cls(max_attempts=max_attempts, durations=(0.0,))


@dataclass(frozen=True)
class GroupSettings:
    """What a consumer learns from the server about its consumer group (seed 001: "消费模式由具体的
    consumer group 元数据决定" -- the consumption mode is the group's metadata, not the client's)."""

    group: str
    fifo: bool = False
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    receive_batch_size: int = 32

    @property
    def max_attempts(self) -> int:
        return self.retry_policy.max_attempts


def describe(obj: Any) -> str:
    """Short form of a request argument for traces and error messages."""
    if isinstance(obj, MessageQueue):
        return str(obj)
    if isinstance(obj, Message):
        return f"Message({obj.topic}, group={obj.group})"
    return repr(obj)
