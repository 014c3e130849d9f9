"""The RocketMQ 5 gRPC API in front of the in-process broker: what a real, unmodified client talks to.

What it is
----------
``GrpcFront`` serves ``apache.rocketmq.v2.MessagingService`` on a loopback port (grpcio, port 0 =
the kernel picks) and answers every RPC by calling the broker core (``broker.Broker``), or the same
core behind the seeded fault plan (``faults.InProcessChannel``).  The protobuf messages and the
servicer base are the generated stubs shipped by ``rocketmq-python-client`` (``rocketmq.grpc_protocol``,
generated from ``apache/rocketmq-apis`` ``apache/rocketmq/v2/service.proto``); nothing here writes
protobuf by hand.  Issue 14 kept the broker core transport-independent for exactly this face.

RPCs and how each maps onto the core (the Python client's calls, read from
``rocketmq/v5/client/connection/rpc_client.py`` of the pinned client):

==============================  =================================================================
RPC                             broker core
==============================  =================================================================
QueryRoute                      ``query_route(topic)``; every queue's broker endpoint is this face
Heartbeat                       ``heartbeat(group, client_id)`` (consumers; a producer's has no group)
Telemetry (bidi stream)         a client's ``settings`` command is answered with the server's
                                settings: the group's FIFO flag, batch size, retry policy (as a
                                customized back-off) and long-polling time; a consumer is registered
                                in its group here, as the RocketMQ proxy does (``ClientActivity``)
SendMessage                     ``send_message(queue, message, type, transaction id)``
QueryAssignment                 ``query_assignment(topic, group, client_id)``
ReceiveMessage (server stream)  ``receive_message(...)`` with a cancel token tied to the call
AckMessage                      ``ack_message`` per entry
ChangeInvisibleDuration         ``change_invisible_duration``; answers the new receipt handle
ForwardMessageToDeadLetterQueue ``forward_to_dlq``
EndTransaction                  ``end_transaction``
NotifyClientTermination         ``unregister(group, client_id)``
RecallMessage, SyncLiteSubscription  answered ``UNSUPPORTED``: the core has no recall and no lite topics
==============================  =================================================================

Adapters (what the core does not do and the proxy in front of a real broker does):

* **Queue choice on send.**  The Python client names no queue in ``SendMessageRequest`` (it uses its
  selected queue only for the endpoint), so the face picks one as the RocketMQ proxy does
  (``SendMessageQueueSelector``): a FIFO message goes to ``hash(message group) mod n`` of the topic's
  writable queues that accept FIFO, any other message round-robin over those accepting its type.
* **Message ids.**  The client sets the message id itself (``MessageIdCodec``); the core assigns its
  own.  The face answers and delivers the client's id (a real broker keeps it as the unique key), so a
  producer's retry after a lost answer stores a second copy under the same id, as a real broker
  does; the receipt handle it gives out is ``"<core id>|<core handle>"``, opaque to the client.
* **Auto-renew.**  A push consumer's receive asks ``auto_renew`` with no invisible time; the proxy
  then picks one and renews it in the background (the client itself never renews: the pinned Python
  client only sets ``auto_renew = true`` on a push receive, ``consumer.py`` ``_receive_req``).  The
  face gives ``auto_renew_invisible`` seconds.  With ``renew=False`` (the default) it does **not**
  renew, so a consumption that outlives that time meets an expired handle (the "invisible time runs
  out mid-consumption" event of issue 19).  With ``renew=True`` it renews as the RocketMQ proxy does
  (apache/rocketmq ``proxy/.../receipt/DefaultReceiptHandleManager.java``, read, not copied): every
  handle handed out by an ``auto_renew`` receive is kept per client; a scan every ``renew_period``
  seconds renews (a change of invisible duration by ``auto_renew_invisible``, straight to the core,
  never a fault of the plan: it is the proxy's own traffic) each handle whose invisible time ends
  within ``renew_ahead``; the client keeps the handle it was given and the face settles with the
  latest one (the proxy's ``removeReceiptHandle`` on ack / change-invisible / DLQ forward); a renewal
  the core refuses (the message was settled or its delivery is over) ends that handle's renewal; after
  ``renew_max`` seconds the proxy stops renewing and hands the message back with the retry policy's
  delay (``STOP_RENEW``); a client that terminates gets its held messages back after
  ``invisible_when_clear`` seconds (``clearGroup``).  The proxy's defaults are 10 s ahead, a 5 s scan
  and 3 h at most; the face's are scaled to the seconds a test can afford.
* **Answers.**  A core status code becomes the response's ``status`` (the numbers are the same,
  ``protocol.Code``); ``UNAVAILABLE`` (transport) aborts the call with gRPC ``UNAVAILABLE``;
  ``REQUEST_TIMEOUT`` (an injected timeout or lost answer) aborts with gRPC ``DEADLINE_EXCEEDED`` at
  once, which is what the client sees when its deadline passes; an empty receive answers
  ``MESSAGE_NOT_FOUND``.  The server's throttling back-off travels in the settings' retry policy in
  this API, not on the answer, so the ``backoff`` of a core ``TOO_MANY_REQUESTS`` is not transmitted.
* **Durations.**  The client reads only whole seconds of the durations the server sends
  (``CustomizedBackoffRetryPolicy``: ``item.seconds``; ``long_polling_timeout.seconds``), so the face
  sends whole seconds.

Not supported (missing in the core; the face answers ``UNSUPPORTED`` or never sends it): recall of
delay messages, lite topics, the server's orphaned-transaction check (``recover_orphaned_transaction_
command`` on the telemetry stream), message tracing and metrics settings, TLS and authentication
(``authorization`` metadata is ignored).

Hostile clients (issue 33)
--------------------------
Every handler runs under a catch-all (``_guarded``): a request the face cannot take (an unknown enum
value, a field out of range) is answered ``BAD_REQUEST`` naming the field, a bug of the face's
``INTERNAL_SERVER_ERROR`` (logged), and the face serves on; ``refused`` counts both.  A call holds a
worker of the pool for as long as it lasts, so receives (long polls) and telemetry streams are
bounded (``max_long_polls``, ``max_streams``; by default half and a quarter of ``max_workers``): one
more is answered ``TOO_MANY_REQUESTS`` at once, and a quarter of the pool is always free for the
unary RPCs.  RPCs waiting for a worker are bounded by grpcio (``maximum_concurrent_rpcs``: beyond it,
``RESOURCE_EXHAUSTED``), a request's size by grpcio's 4 MiB default, and the stored messages by the
broker core.  An AckMessage with no entry is ``BAD_REQUEST`` (upstream's proxy answers
``INTERNAL_SERVER_ERROR``).

Lifecycle and concurrency
-------------------------
``start()`` binds ``127.0.0.1:0`` and starts a grpcio server on a thread pool of its own;
``stop()`` stops the server (cancelling every call: a long poll's cancel token wakes the broker's
wait, a telemetry stream's request iterator ends), waits for it and shuts the pool down, so no
thread of the face is left; with ``renew=True`` it also ends the renewal thread first.  The broker
is not stopped (its owner does that).  ``_lock`` (a leaf) protects the id maps, the round-robin
counters and the route cache; it is never held while calling the core.  ``_renew_lock`` protects the
renewal records; it *is* held across the renewer's core calls (so that a settle never takes a handle
that a renewal is replacing), the core never calls back into the face, and ``_lock`` is never taken
under it: the order is ``_renew_lock`` then the core's locks.  A call's handler runs on a pool thread;
the core's own locks serialise the rest.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

from conq.impl.ordered_consumption.clock import Cancel
from conq.impl.ordered_consumption.faults import FaultPlan, InProcessChannel
from conq.impl.ordered_consumption.protocol import (
    Code,
    Message,
    MessageQueue,
    MessageType,
    Permission,
    ReceivedMessage,
    RpcError,
    Transport,
)

__all__ = ["CLIENT_ID_HEADER", "GrpcFront", "FrontServicer"]

#: the metadata header carrying the client id (upstream ``rocketmq/v5/util/signature.py``)
CLIENT_ID_HEADER = "x-mq-client-id"

_TYPE_TO_PB = {MessageType.NORMAL: pb.NORMAL, MessageType.FIFO: pb.FIFO, MessageType.DELAY: pb.DELAY,
               MessageType.TRANSACTION: pb.TRANSACTION}
_PB_TO_TYPE = {v: k for k, v in _TYPE_TO_PB.items()}
_PERM_TO_PB = {Permission.NONE: pb.NONE, Permission.READ: pb.READ, Permission.WRITE: pb.WRITE,
               Permission.READ_WRITE: pb.READ_WRITE}
_HANDLE_SEP = "|"
_log = logging.getLogger("conq.broker.grpc")


class _Status(Exception):
    """An answer with a non-OK messaging status (carried in the response's ``status``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _status(code: int = Code.OK, message: str = "OK") -> pb.Status:
    return pb.Status(code=int(code), message=message)


def _seconds(d: Any) -> float:
    return d.seconds + d.nanos / 1e9


class _Abort(Exception):
    """End the call with a gRPC status (raised inside a handler; the guard calls ``context.abort``)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _refusal(front: GrpcFront, e: Exception, rpc: str) -> pb.Status:
    """The status of a request that raised: a value the face or the core cannot take is the client's
    BAD_REQUEST (the message names the field where the face knows it); anything else is a bug of
    the face's, answered INTERNAL_SERVER_ERROR and logged.  Either way the face serves on."""
    if isinstance(e, (ValueError, TypeError, OverflowError, KeyError, IndexError)):
        front.count_refusal("bad-request")
        return _status(Code.BAD_REQUEST, f"{rpc}: {e}")
    front.count_refusal("internal")
    _log.exception("%s failed", rpc)
    return _status(Code.INTERNAL_SERVER_ERROR, f"{rpc}: {e!r:.200}")


def _guarded(response: Any) -> Any:
    """A unary handler under a catch-all: every request gets an answer (issue 33)."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def handler(self: FrontServicer, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                return fn(self, request, context)
            except _Abort as a:
                context.abort(a.code, a.details)
            except grpc.RpcError:
                raise  # the call itself ended: nobody to answer
            except Exception as e:  # noqa: BLE001 - see _refusal
                return response(status=_refusal(self._f, e, fn.__name__))

        return handler

    return wrap


def _guarded_stream(response: Any) -> Any:
    """A streaming handler under a catch-all (see ``_guarded``)."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def handler(self: FrontServicer, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                yield from fn(self, request, context)
            except _Abort as a:
                context.abort(a.code, a.details)
            except grpc.RpcError:
                raise  # the call itself ended (the client cancelled a stream): nobody to answer
            except Exception as e:  # noqa: BLE001 - see _refusal
                yield response(status=_refusal(self._f, e, fn.__name__))

        return handler

    return wrap


def _client_id(context: grpc.ServicerContext) -> str:
    for k, v in context.invocation_metadata() or ():
        if k == CLIENT_ID_HEADER:
            return v
    return ""


class FrontServicer(sgrpc.MessagingServiceServicer):
    """The MessagingService answered by the broker core; see the module docstring."""

    def __init__(self, front: GrpcFront) -> None:
        self._f = front

    # ------------------------------------------------------------------ helpers
    def _call(self, context: grpc.ServicerContext, fn: Any, *args: Any, **kw: Any) -> Any:
        """Call the core; a transport failure aborts the RPC, a status code raises ``_Status``."""
        try:
            return fn(*args, **kw)
        except RpcError as e:
            if e.code is Transport.UNAVAILABLE:
                raise _Abort(grpc.StatusCode.UNAVAILABLE, e.message or "unavailable") from None
            if e.code is Code.REQUEST_TIMEOUT:
                raise _Abort(grpc.StatusCode.DEADLINE_EXCEEDED, e.message or "deadline exceeded") from None
            raise _Status(int(e.code), str(e)) from None

    # ------------------------------------------------------------------ routes and membership
    @_guarded(spb.QueryRouteResponse)
    def QueryRoute(self, request: spb.QueryRouteRequest, context: grpc.ServicerContext) -> spb.QueryRouteResponse:
        try:
            queues = self._call(context, self._f.core.query_route, request.topic.name)
        except _Status as s:
            return spb.QueryRouteResponse(status=_status(s.code, s.message))
        return spb.QueryRouteResponse(status=_status(), message_queues=[self._f.mq_pb(q) for q in queues])

    @_guarded(spb.HeartbeatResponse)
    def Heartbeat(self, request: spb.HeartbeatRequest, context: grpc.ServicerContext) -> spb.HeartbeatResponse:
        if request.group.name:
            try:
                self._call(context, self._f.core.heartbeat, request.group.name, _client_id(context))
            except _Status as s:
                return spb.HeartbeatResponse(status=_status(s.code, s.message))
        return spb.HeartbeatResponse(status=_status())

    @_guarded(spb.NotifyClientTerminationResponse)
    def NotifyClientTermination(self, request: spb.NotifyClientTerminationRequest,
                                context: grpc.ServicerContext) -> spb.NotifyClientTerminationResponse:
        if request.group.name:
            self._f.clear_renewals(request.group.name, _client_id(context))
            try:
                self._call(context, self._f.core.unregister, request.group.name, _client_id(context))
            except _Status as s:
                return spb.NotifyClientTerminationResponse(status=_status(s.code, s.message))
        return spb.NotifyClientTerminationResponse(status=_status())

    @_guarded_stream(spb.TelemetryCommand)
    def Telemetry(self, request_iterator: Iterator[spb.TelemetryCommand],
                  context: grpc.ServicerContext) -> Iterator[spb.TelemetryCommand]:
        if not self._f.take_slot("streams"):
            yield spb.TelemetryCommand(status=_status(
                Code.TOO_MANY_REQUESTS, f"{self._f.max_streams} telemetry streams are open (the face's bound)"))
            return
        try:
            yield from self._telemetry(request_iterator, context)
        finally:
            self._f.give_slot("streams")

    def _telemetry(self, request_iterator: Iterator[spb.TelemetryCommand],
                   context: grpc.ServicerContext) -> Iterator[spb.TelemetryCommand]:
        cid = _client_id(context)
        for cmd in request_iterator:
            if not cmd.HasField("settings"):
                continue  # thread stack traces, verification results: nothing to answer
            try:
                settings = self._f.server_settings(cmd.settings, cid)
            except RpcError as e:
                code = int(e.code) if isinstance(e.code, Code) else Code.INTERNAL_ERROR
                yield spb.TelemetryCommand(status=_status(code, str(e)))
                continue
            yield spb.TelemetryCommand(status=_status(), settings=settings)

    @_guarded(spb.QueryAssignmentResponse)
    def QueryAssignment(self, request: spb.QueryAssignmentRequest,
                        context: grpc.ServicerContext) -> spb.QueryAssignmentResponse:
        try:
            queues = self._call(context, self._f.core.query_assignment, request.topic.name, request.group.name,
                                _client_id(context))
        except _Status as s:
            return spb.QueryAssignmentResponse(status=_status(s.code, s.message))
        return spb.QueryAssignmentResponse(
            status=_status(), assignments=[pb.Assignment(message_queue=self._f.mq_pb(q)) for q in queues])

    # ------------------------------------------------------------------ producer
    @_guarded(spb.SendMessageResponse)
    def SendMessage(self, request: spb.SendMessageRequest, context: grpc.ServicerContext) -> spb.SendMessageResponse:
        entries = []
        for m in request.messages:
            try:
                entries.append(self._f.send_one(m, context, self._call))
            except _Status as s:
                entries.append(spb.SendResultEntry(status=_status(s.code, s.message),
                                                   message_id=m.system_properties.message_id))
        if not entries:
            return spb.SendMessageResponse(status=_status(Code.BAD_REQUEST, "no message"))
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            top = entries[0].status
        else:
            top = _status(pb.MULTIPLE_RESULTS, "multiple results")
        return spb.SendMessageResponse(status=top, entries=entries)

    @_guarded(spb.EndTransactionResponse)
    def EndTransaction(self, request: spb.EndTransactionRequest,
                       context: grpc.ServicerContext) -> spb.EndTransactionResponse:
        mid = self._f.transaction_message(request.transaction_id)
        if mid is None:
            return spb.EndTransactionResponse(status=_status(Code.INVALID_TRANSACTION_ID, request.transaction_id))
        try:
            self._call(context, self._f.core.end_transaction, request.topic.name, mid, request.transaction_id,
                       request.resolution == pb.COMMIT)
        except _Status as s:
            return spb.EndTransactionResponse(status=_status(s.code, s.message))
        return spb.EndTransactionResponse(status=_status())

    @_guarded(spb.RecallMessageResponse)
    def RecallMessage(self, request: Any, context: grpc.ServicerContext) -> Any:
        return spb.RecallMessageResponse(status=_status(pb.UNSUPPORTED, "the broker core has no recall"))

    @_guarded(spb.SyncLiteSubscriptionResponse)
    def SyncLiteSubscription(self, request: Any, context: grpc.ServicerContext) -> Any:
        return spb.SyncLiteSubscriptionResponse(status=_status(pb.UNSUPPORTED, "the broker core has no lite topics"))

    # ------------------------------------------------------------------ consumer
    @_guarded_stream(spb.ReceiveMessageResponse)
    def ReceiveMessage(self, request: spb.ReceiveMessageRequest,
                       context: grpc.ServicerContext) -> Iterator[spb.ReceiveMessageResponse]:
        # a receive holds a worker of the pool while it long-polls: at most max_long_polls of them, so
        # the rest of the pool always answers the other RPCs (issue 33)
        if not self._f.take_slot("long-polls"):
            yield spb.ReceiveMessageResponse(status=_status(
                Code.TOO_MANY_REQUESTS, f"{self._f.max_long_polls} receives are in flight (the face's bound)"))
            return
        try:
            yield from self._receive(request, context)
        finally:
            self._f.give_slot("long-polls")

    def _receive(self, request: spb.ReceiveMessageRequest,
                 context: grpc.ServicerContext) -> Iterator[spb.ReceiveMessageResponse]:
        f = self._f
        try:
            mq = f.queue_of(request.message_queue.topic.name, request.message_queue.id)
            if request.HasField("invisible_duration"):
                invisible = _seconds(request.invisible_duration)
            elif request.auto_renew:
                invisible = f.auto_renew_invisible
            else:
                raise _Status(Code.ILLEGAL_INVISIBLE_TIME, "no invisible duration and no auto-renew")
            poll = _seconds(request.long_polling_timeout) if request.HasField("long_polling_timeout") else 0.0
            poll = min(poll, f.max_long_polling)
            cancel = Cancel("grpc receive")
            context.add_callback(cancel.cancel)
            got = self._call(context, f.core.receive_message, request.group.name, mq, max(1, request.batch_size),
                             invisible, poll, cancel)
        except _Status as s:
            yield spb.ReceiveMessageResponse(status=_status(s.code, s.message))
            return
        if not got:
            yield spb.ReceiveMessageResponse(status=_status(Code.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield spb.ReceiveMessageResponse(status=_status())
        ts = Timestamp()
        ts.FromNanoseconds(time.time_ns())
        yield spb.ReceiveMessageResponse(delivery_timestamp=ts)
        if request.auto_renew and not request.HasField("invisible_duration"):
            f.start_renewals(request.group.name, _client_id(context), got, invisible)
        for m in got:
            yield spb.ReceiveMessageResponse(message=f.message_pb(m, invisible))

    def _settle_args(self, handle: str, message_id: str) -> tuple[str | None, str]:
        mid, sep, core_handle = handle.partition(_HANDLE_SEP)
        if not sep:
            return None, handle  # not one of ours (e.g. empty): the core answers INVALID_RECEIPT_HANDLE
        # a renewed delivery is settled with its latest handle, and its renewal ends (the proxy's
        # removeReceiptHandle); the client always sends the handle it was given
        current = self._f.end_renewal(handle)
        return mid, current if current is not None else core_handle

    @_guarded(spb.AckMessageResponse)
    def AckMessage(self, request: spb.AckMessageRequest, context: grpc.ServicerContext) -> spb.AckMessageResponse:
        if not request.entries:
            # upstream's proxy (AckMessageActivity) answers INTERNAL_SERVER_ERROR "ack message result is
            # empty"; an ack of nothing is the client's malformed request, as SendMessage of nothing is
            return spb.AckMessageResponse(status=_status(Code.BAD_REQUEST, "entries: no entry to acknowledge"))
        entries = []
        for e in request.entries:
            mid, h = self._settle_args(e.receipt_handle, e.message_id)
            try:
                self._call(context, self._f.core.ack_message, request.group.name, request.topic.name, mid, h)
                st = _status()
            except _Status as s:
                st = _status(s.code, s.message)
            entries.append(spb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle,
                                                     status=st))
        codes = {e.status.code for e in entries}
        top = entries[0].status if len(codes) == 1 else _status(pb.MULTIPLE_RESULTS, "multiple results")
        return spb.AckMessageResponse(status=top, entries=entries)

    @_guarded(spb.ChangeInvisibleDurationResponse)
    def ChangeInvisibleDuration(self, request: spb.ChangeInvisibleDurationRequest,
                                context: grpc.ServicerContext) -> spb.ChangeInvisibleDurationResponse:
        mid, h = self._settle_args(request.receipt_handle, request.message_id)
        try:
            new = self._call(context, self._f.core.change_invisible_duration, request.group.name, request.topic.name,
                             mid, h, _seconds(request.invisible_duration))
        except _Status as s:
            return spb.ChangeInvisibleDurationResponse(status=_status(s.code, s.message))
        return spb.ChangeInvisibleDurationResponse(status=_status(), receipt_handle=f"{mid}{_HANDLE_SEP}{new}")

    @_guarded(spb.ForwardMessageToDeadLetterQueueResponse)
    def ForwardMessageToDeadLetterQueue(self, request: spb.ForwardMessageToDeadLetterQueueRequest,
                                        context: grpc.ServicerContext) -> spb.ForwardMessageToDeadLetterQueueResponse:
        mid, h = self._settle_args(request.receipt_handle, request.message_id)
        try:
            self._call(context, self._f.core.forward_to_dlq, request.group.name, request.topic.name, mid, h,
                       request.delivery_attempt, request.max_delivery_attempts)
        except _Status as s:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=_status(s.code, s.message))
        return spb.ForwardMessageToDeadLetterQueueResponse(status=_status())


class _Renewal:
    """One delivery the face renews (module docstring, "Auto-renew")."""

    __slots__ = ("attempt", "client_id", "deadline", "group", "handle", "message_id", "since", "topic")

    def __init__(self, group: str, client_id: str, topic: str, message_id: str, handle: str, deadline: float,
                 since: float, attempt: int) -> None:
        self.group, self.client_id, self.topic, self.message_id = group, client_id, topic, message_id
        self.handle, self.deadline, self.since, self.attempt = handle, deadline, since, attempt


class GrpcFront:
    """A gRPC MessagingService on ``127.0.0.1:<port>`` in front of ``broker``; see the module docstring.

    ``plan``: a ``FaultPlan`` (every RPC then goes through ``InProcessChannel``, whose counters are
    ``front.channel``); ``servicer_wrapper``: called with the servicer, returns the servicer to serve
    (the conformance recorder wraps it).  Settings sent to clients: ``long_polling`` (whole seconds)
    and ``auto_renew_invisible`` (seconds, see the module docstring); ``producer_max_attempts``;
    ``renew``, ``renew_period``, ``renew_ahead``, ``renew_max``, ``invisible_when_clear``: the proxy's
    auto-renew (module docstring; counts of what it did in ``renewal_counts``)."""

    def __init__(self, broker: Any, *, plan: FaultPlan | None = None, host: str = "127.0.0.1", port: int = 0,
                 max_workers: int = 64, max_long_polls: int | None = None, max_streams: int | None = None,
                 long_polling: int = 1, max_long_polling: float = 5.0,
                 auto_renew_invisible: float = 5.0, producer_max_attempts: int = 3,
                 servicer_wrapper: Any = None, renew: bool = False, renew_period: float = 0.5,
                 renew_ahead: float = 1.0, renew_max: float = 60.0, invisible_when_clear: float = 1.0) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the face listens on the loopback interface only")
        self.broker = broker
        self.channel = InProcessChannel(broker, plan) if plan is not None else None
        self.core = self.channel if self.channel is not None else broker
        self.host = host
        self._port_asked = port
        self.port: int | None = None
        self.long_polling = int(long_polling)
        self.max_long_polling = float(max_long_polling)
        self.auto_renew_invisible = float(auto_renew_invisible)
        self.producer_max_attempts = int(producer_max_attempts)
        self._max_workers = max_workers
        # a long poll and a telemetry stream each hold a worker for as long as they last: bounded so that
        # a quarter of the pool is always left for the unary RPCs (issue 33: 100 long polls delayed
        # another client's QueryRoute by 4 s)
        self.max_long_polls = max_long_polls if max_long_polls is not None else max(1, max_workers // 2)
        self.max_streams = max_streams if max_streams is not None else max(1, max_workers // 4)
        if self.max_long_polls + self.max_streams >= max_workers:
            raise ValueError(f"max_long_polls + max_streams must leave workers for the other RPCs "
                             f"(max_workers {max_workers})")
        self._slots: Counter = Counter()  # held: "long-polls", "streams" (under _lock)
        #: requests refused: "long-polls", "streams" (a bound was hit), "bad-request", "internal"
        self.refused: Counter = Counter()
        self._wrapper = servicer_wrapper
        self._server: grpc.Server | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._routes: dict[str, tuple[MessageQueue, ...]] = {}
        self._rr: dict[tuple[str, MessageType], itertools.count] = {}
        self._client_ids: dict[str, str] = {}  # core message id -> client message id
        self._sent: dict[str, tuple[Any, Any, int]] = {}  # core id -> (born timestamp, born host, pb type)
        self._txn: dict[str, str] = {}  # transaction id -> core message id
        self._txn_seq = itertools.count(1)
        self.renew = bool(renew)
        self.renew_period, self.renew_ahead, self.renew_max = float(renew_period), float(renew_ahead), float(renew_max)
        self.invisible_when_clear = float(invisible_when_clear)
        if self.renew and not 0 < self.renew_ahead < self.auto_renew_invisible:
            raise ValueError("renew_ahead must be positive and below auto_renew_invisible")
        self._renew_lock = threading.Lock()
        self._renewals: dict[str, _Renewal] = {}  # the client's handle -> its renewal
        self._renewer: threading.Thread | None = None
        self._renew_stop = threading.Event()
        self.renewal_counts: dict[str, int] = dict.fromkeys(("renewed", "refused", "stopped", "cleared"), 0)

    # ------------------------------------------------------------------ lifecycle
    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError("the face is not started")
        return f"{self.host}:{self.port}"

    def start(self) -> GrpcFront:
        if self._server is not None:
            raise RuntimeError("already started")
        self._pool = ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="conq-grpc-front")
        # RPCs waiting for a worker are bounded too: beyond, grpcio answers RESOURCE_EXHAUSTED at once
        server = grpc.server(self._pool, options=[("grpc.so_reuseport", 0)],
                             maximum_concurrent_rpcs=4 * self._max_workers)
        servicer = FrontServicer(self)
        if self._wrapper is not None:
            servicer = self._wrapper(servicer)
        sgrpc.add_MessagingServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port(f"{self.host}:{self._port_asked}")
        if not port:
            self._pool.shutdown(wait=False)
            self._pool = None
            raise RuntimeError(f"cannot bind {self.host}:{self._port_asked}")
        server.start()
        self._server, self.port = server, port
        if self.renew:
            self._renew_stop.clear()
            self._renewer = threading.Thread(target=self._renew_loop, name="conq-grpc-front-renewer")
            self._renewer.start()
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop serving: every call in progress is cancelled; returns once the server and its pool are done."""
        server, pool = self._server, self._pool
        self._server = self._pool = None
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            self._renew_stop.set()
            renewer.join()
        if server is not None:
            server.stop(grace).wait()
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self) -> GrpcFront:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ bounds
    def take_slot(self, kind: str) -> bool:
        """Take one of the bounded slots (``long-polls``, ``streams``); False (counted) when all are held."""
        bound = self.max_long_polls if kind == "long-polls" else self.max_streams
        with self._lock:
            if self._slots[kind] >= bound:
                self.refused[kind] += 1
                return False
            self._slots[kind] += 1
            return True

    def give_slot(self, kind: str) -> None:
        with self._lock:
            self._slots[kind] -= 1

    def count_refusal(self, kind: str) -> None:
        with self._lock:
            self.refused[kind] += 1

    @property
    def long_polls(self) -> int:
        """Receives in flight now."""
        with self._lock:
            return self._slots["long-polls"]

    # ------------------------------------------------------------------ translation
    def endpoints_pb(self) -> pb.Endpoints:
        scheme = pb.IPv6 if ":" in self.host else pb.IPv4
        host = "127.0.0.1" if self.host == "localhost" else self.host
        return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=self.port or 0)])

    def mq_pb(self, q: MessageQueue) -> pb.MessageQueue:
        return pb.MessageQueue(
            topic=pb.Resource(name=q.topic), id=q.queue_id, permission=_PERM_TO_PB[q.permission],
            broker=pb.Broker(name=q.broker, id=0, endpoints=self.endpoints_pb()),
            accept_message_types=sorted(_TYPE_TO_PB[t] for t in q.accept_types))

    def _route(self, topic: str) -> tuple[MessageQueue, ...]:
        with self._lock:
            r = self._routes.get(topic)
        if r is None:
            r = self.broker.query_route(topic)  # the face's own lookup: never a fault
            with self._lock:
                self._routes[topic] = r
        return r

    def queue_of(self, topic: str, queue_id: int) -> MessageQueue:
        try:
            route = self._route(topic)
        except RpcError as e:
            raise _Status(int(e.code) if isinstance(e.code, Code) else Code.INTERNAL_ERROR, str(e)) from None
        for q in route:
            if q.queue_id == queue_id:
                return q
        raise _Status(Code.BAD_REQUEST, f"{topic} has no queue {queue_id}")

    def _pick_queue(self, topic: str, mtype: MessageType, group: str | None) -> MessageQueue:
        """The proxy's queue choice (module docstring): FIFO by group hash, else round-robin."""
        try:
            route = self._route(topic)
        except RpcError as e:
            raise _Status(int(e.code) if isinstance(e.code, Code) else Code.INTERNAL_ERROR, str(e)) from None
        writable = [q for q in route if q.permission.writable]
        if not writable:
            raise _Status(Code.FORBIDDEN, f"{topic} has no writable queue")
        fitting = [q for q in writable if mtype in q.accept_types] or writable  # the core rejects a misfit
        if mtype is MessageType.FIFO and group:
            h = int.from_bytes(hashlib.sha256(group.encode()).digest()[:8], "big")
            return fitting[h % len(fitting)]
        with self._lock:
            n = next(self._rr.setdefault((topic, mtype), itertools.count()))
        return fitting[n % len(fitting)]

    def send_one(self, m: pb.Message, context: grpc.ServicerContext, call: Any) -> spb.SendResultEntry:
        sp = m.system_properties
        mtype = _PB_TO_TYPE.get(sp.message_type)
        if mtype is None:
            if sp.message_type not in pb.MessageType.values():
                raise _Status(Code.BAD_REQUEST, f"system_properties.message_type: unknown value {sp.message_type}")
            raise _Status(pb.UNSUPPORTED, f"message type {pb.MessageType.Name(sp.message_type)} is not supported")
        deliver_at = None
        if sp.HasField("delivery_timestamp"):
            wall = sp.delivery_timestamp.seconds + sp.delivery_timestamp.nanos / 1e9
            deliver_at = self.broker.clock.now() + (wall - time.time())
        group = sp.message_group if sp.HasField("message_group") else None
        msg = Message(m.topic.name, bytes(m.body), sp.tag if sp.HasField("tag") else None, tuple(sp.keys), group,
                      deliver_at, tuple(sorted(m.user_properties.items())))
        txn = f"txn-{next(self._txn_seq)}" if mtype is MessageType.TRANSACTION else None
        queue = self._pick_queue(m.topic.name, mtype, group)
        receipt = call(context, self.core.send_message, queue, msg, mtype, txn)
        with self._lock:
            self._client_ids[receipt.message_id] = sp.message_id or receipt.message_id
            self._sent[receipt.message_id] = (sp.born_timestamp, sp.born_host, sp.message_type)
            if txn is not None:
                self._txn[txn] = receipt.message_id
        return spb.SendResultEntry(status=_status(), message_id=sp.message_id or receipt.message_id,
                                   transaction_id=txn or "", offset=receipt.offset)

    def transaction_message(self, transaction_id: str) -> str | None:
        with self._lock:
            return self._txn.get(transaction_id)

    def client_message_id(self, core_id: str) -> str:
        with self._lock:
            return self._client_ids.get(core_id, core_id)

    def message_pb(self, m: ReceivedMessage, invisible: float) -> pb.Message:
        with self._lock:
            client_id = self._client_ids.get(m.message_id, m.message_id)
            born_ts, born_host, ptype = self._sent.get(m.message_id, (None, "", None))
        sp = pb.SystemProperties(
            message_id=client_id, body_encoding=pb.IDENTITY,
            message_type=ptype if ptype is not None else (pb.FIFO if m.group else pb.NORMAL),
            born_host=born_host, queue_id=m.queue.queue_id, queue_offset=m.offset,
            receipt_handle=f"{m.message_id}{_HANDLE_SEP}{m.receipt_handle}", delivery_attempt=m.delivery_attempt,
            keys=list(m.keys))
        if born_ts is not None:
            sp.born_timestamp.CopyFrom(born_ts)
        sp.store_timestamp.FromNanoseconds(time.time_ns())
        sp.invisible_duration.FromNanoseconds(int(invisible * 1e9))
        if m.tag is not None:
            sp.tag = m.tag
        if m.group is not None:
            sp.message_group = m.group
        return pb.Message(topic=pb.Resource(name=m.topic), user_properties=dict(m.properties),
                          system_properties=sp, body=m.body)

    # ------------------------------------------------------------------ auto-renew (module docstring)
    def start_renewals(self, group: str, client_id: str, got: list, invisible: float) -> None:
        if not self.renew:
            return
        now = self.broker.clock.now()
        with self._renew_lock:
            for m in got:
                self._renewals[f"{m.message_id}{_HANDLE_SEP}{m.receipt_handle}"] = _Renewal(
                    group, client_id, m.topic, m.message_id, m.receipt_handle, now + invisible, now, m.delivery_attempt)

    def end_renewal(self, client_handle: str) -> str | None:
        """The latest core handle of a renewed delivery (its renewal ends), or None."""
        if not self.renew:
            return None
        with self._renew_lock:
            r = self._renewals.pop(client_handle, None)
        return None if r is None else r.handle

    def clear_renewals(self, group: str, client_id: str) -> None:
        """A terminating client's held messages come back after ``invisible_when_clear`` (clearGroup)."""
        if not self.renew:
            return
        with self._renew_lock:
            mine = [k for k, r in self._renewals.items() if r.group == group and r.client_id == client_id]
            for k in mine:
                r = self._renewals.pop(k)
                self._change(r, self.invisible_when_clear)
                self.renewal_counts["cleared"] += 1

    def _change(self, r: _Renewal, seconds: float) -> str | None:
        try:
            return self.broker.change_invisible_duration(r.group, r.topic, r.message_id, r.handle, seconds)
        except RpcError:
            return None  # settled meanwhile, or its delivery is over: nothing left to renew

    def _renew_loop(self) -> None:
        while not self._renew_stop.wait(self.renew_period):
            self.renew_due()

    def renew_due(self) -> int:
        """One scan: renew every handle whose invisible time ends within ``renew_ahead``; returns how many."""
        n = 0
        with self._renew_lock:
            now = self.broker.clock.now()
            for key in [k for k, r in self._renewals.items() if r.deadline - now <= self.renew_ahead]:
                r = self._renewals[key]
                if now - r.since >= self.renew_max:
                    # STOP_RENEW: handed back with the retry policy's delay for this attempt
                    delay = self.broker.query_settings(r.group).retry_policy.delay(max(1, r.attempt))
                    self._change(r, delay)
                    del self._renewals[key]
                    self.renewal_counts["stopped"] += 1
                    continue
                new = self._change(r, self.auto_renew_invisible)
                if new is None:
                    del self._renewals[key]
                    self.renewal_counts["refused"] += 1
                    continue
                r.handle, r.deadline = new, now + self.auto_renew_invisible
                self.renewal_counts["renewed"] += 1
                n += 1
        return n

    def server_settings(self, client: pb.Settings, client_id: str) -> pb.Settings:
        """The settings the server answers a client's settings with (module docstring)."""
        out = pb.Settings()
        out.CopyFrom(client)
        out.ClearField("metric")
        if client.client_type == pb.PRODUCER:
            out.backoff_policy.max_attempts = self.producer_max_attempts
            out.backoff_policy.exponential_backoff.initial.FromMilliseconds(10)
            out.backoff_policy.exponential_backoff.max.FromMilliseconds(100)
            out.backoff_policy.exponential_backoff.multiplier = 2.0
            out.publishing.validate_message_type = True
            out.publishing.max_body_size = 4 * 1024 * 1024
            return out
        group = client.subscription.group.name
        gs = self.broker.query_settings(group)  # the face's own lookup: never a fault
        if client_id:
            self.broker.heartbeat(group, client_id)  # the proxy registers a consumer on its settings
        out.subscription.fifo = gs.fifo
        out.subscription.receive_batch_size = gs.receive_batch_size
        if client.client_type == pb.PUSH_CONSUMER:
            out.subscription.long_polling_timeout.seconds = self.long_polling
        rp = gs.retry_policy
        out.backoff_policy.max_attempts = rp.max_attempts
        for attempt in range(1, max(1, len(rp.durations) or rp.max_attempts) + 1):
            out.backoff_policy.customized_backoff.next.add().seconds = int(rp.delay(attempt))
        return out
