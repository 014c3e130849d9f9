"""The in-process broker that seed 001's thin client talks to: a real server core, not a mock.

What it is
----------
Seed 001 describes the *client*; the server is implied by every step the client takes against it.
This core implements those server duties with the semantics of a RocketMQ 5 broker in "pop" mode
(REFERENCE.md section 2; the answers and codes of ``apache/rocketmq-apis`` ``definition.proto``):

* **Topics, message queues, routes.**  A topic has queues, each on a named broker, with a permission
  and the message types it accepts (``query_route``).  Messages are appended to a queue's log; the
  offset is the send order within the queue (seed 001 FIFO: "发送者往相同队列发送成功的前后两条消息").
* **Consumer groups.**  Each group has its own consumption state of every queue it touches (started
  lazily at offset 0) and the metadata the client must obey (``query_settings``): consumption mode
  (seed 001: "消费模式由具体的 consumer group 元数据决定"), retry policy / max delivery attempts,
  receive batch size.
* **Receive, receipt handles, invisible time.**  ``receive_message`` hands out up to ``batch_size``
  deliverable messages in offset order, makes each *invisible* for ``invisible_duration`` and gives
  the delivery a fresh receipt handle with delivery attempt = previous + 1.  It long-polls up to
  ``long_polling_timeout`` when nothing is deliverable.  A handle is valid only while its delivery is
  the current one and the message is still invisible: invisible time that **expires** makes the
  message deliverable again (it is redelivered with attempt + 1) and invalidates the old handle;
  ``change_invisible_duration`` issues a new handle and invalidates the old one; a settled message's
  handles are all invalid.  Ack / change-invisible / DLQ with an invalid handle answer
  ``INVALID_RECEIPT_HANDLE``; a handle naming no stored message answers ``MESSAGE_NOT_FOUND``.
* **Attempts and the dead-letter queue.**  When a delivery's invisible time expires and its attempt
  has reached the group's ``max_attempts``, the server dead-letters the message itself (standard
  mode: "the server, not the client, dead-letters", REFERENCE.md section 2).  ``forward_to_dlq`` is the
  client's dead-lettering (FIFO step 8).
* **FIFO per message group.**  For a FIFO consumer group (``fifo_gate``, the default), a message
  group's next message is not delivered while an earlier one of the group is unsettled: only the
  earliest unsettled message of each group is deliverable, and only while it is not in flight.  This
  is upstream's server side of FIFO (REFERENCE.md: "relies on the server not handing out the next
  FIFO batch until the previous one is settled"); the client adds the seed's process-queue lock on top.
  Messages without a group are each their own group.  ``fifo_gate=False`` hands a FIFO group's
  messages out in queue order with no gate (the server of the model's reference configuration).
* **Delay and transactional messages.**  A delay message becomes deliverable at its delivery
  timestamp; a transactional message is a half message until ``end_transaction`` commits it (a
  rollback discards it).
* **Throttling** with a back-off the broker chooses: a per-topic token bucket for sends; an empty
  bucket answers ``TOO_MANY_REQUESTS`` with ``backoff`` = the time until the next token.
* **Queue assignment** (``query_assignment``): ``"exclusive"`` splits the readable queues round-robin
  over the group's live clients (sorted by id; ``heartbeat`` / ``unregister``), ``"shared"`` gives every
  client every queue (RocketMQ 5 pop).  ``pin_assignment`` overrides it per client (tests, rebalance).
* **Start / stop.**  A stopped broker answers every request ``UNAVAILABLE`` (and releases long polls);
  its state survives a restart, and invisible timers keep running in clock time.

Time is the injected ``clock`` (``clock.RealClock`` or ``clock.ManualClock``); expiry and delays are
processed lazily, under the queue's lock, whenever a request touches the queue, and long-poll waiters
wake at the earliest of their deadline, the next expiry and the next delay.  Nothing here knows about
a transport: ``faults.InProcessChannel`` is the in-process transport (with seeded fault injection);
a gRPC servicer could call the same methods.

Observation (for tests and the stress, not part of the API): ``group_stats``, ``dead_letters``,
``message_state``, ``unsettled`` and an ``observer(event, group, message_id, attempt, body)`` callback
invoked inside the critical section of every delivery / settlement / expiry.

Concurrency argument
--------------------
* ``_meta`` (one per broker) protects the topic and group tables, clients, pins and the running flag.
* Each queue has one lock (``_Queue.lock``, with condition ``_Queue.cond``) protecting its log and the
  consumption state of every group on it (records, ready heap, expiry heap, delayed heap, FIFO group
  lists, counters, dead letters).  A request touches exactly one queue, so requests on different
  queues never contend; the send that appends a message and the receive that hands it out serialise on
  the same lock, so "B is delivered only after A was settled" is decided in one critical section
  (the FIFO gate is checked and changed under it).
* Lock order: queue lock -> ``_meta`` -> clock internals; the token bucket lock is a leaf.  ``_meta``
  is held for a few statements (a table lookup, the running flag), never across a wait and never while
  acquiring a queue lock (``stop`` and the observation helpers release it first), so it is a leaf
  below the queue locks.  The observer runs under the queue lock and must not call back into the
  broker.
* A long poll waits on its queue's condition, released while waiting; it is woken by every change
  that can make a message deliverable (send, settle of a FIFO head, commit, change-invisible to 0,
  stop), by the clock (expiry / delay deadline) and by its cancel token.
* Nothing relies on the GIL: every shared field is read and written under the lock named above.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from conq.impl.ordered_consumption.clock import Cancel, RealClock
from conq.impl.ordered_consumption.protocol import (
    Code,
    GroupSettings,
    Message,
    MessageQueue,
    MessageType,
    Permission,
    ReceivedMessage,
    RetryPolicy,
    RpcError,
    SendReceipt,
    Transport,
)
from conq.impl.scheduling import REAL

__all__ = ["Broker", "DeadLetter"]

# record states (per consumer group and message)
_READY, _INVISIBLE, _DELAYED = 0, 1, 2
_STATE_NAMES = ("ready", "invisible", "delayed")
# settled outcomes, kept per group and offset in a bytearray (0 = not settled)
_ACKED, _DLQ_CLIENT, _DLQ_SERVER = 1, 2, 3
_OUTCOME_NAMES = {_ACKED: "acked", _DLQ_CLIENT: "dead-lettered-by-client", _DLQ_SERVER: "dead-lettered-by-server"}

Observer = Callable[[str, str, str, int, bytes], None]


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    body: bytes
    group_key: str | None
    attempt: int
    by: str  # "client" (forward_to_dlq) or "server" (max attempts reached at expiry)


class _Msg:
    __slots__ = ("body", "deliver_at", "group", "keys", "message_id", "mtype", "offset", "properties", "tag",
                 "txn_id", "txn_state")

    def __init__(self, message_id: str, offset: int, m: Message, mtype: MessageType, txn_id: str | None) -> None:
        self.message_id = message_id
        self.offset = offset
        self.body = m.body
        self.tag = m.tag
        self.keys = m.keys
        self.group = m.group
        self.properties = m.properties
        self.mtype = mtype
        self.deliver_at = m.delivery_timestamp
        self.txn_id = txn_id
        self.txn_state = "half" if mtype is MessageType.TRANSACTION else None


class _Rec:
    """A group's view of one unsettled message."""

    __slots__ = ("attempt", "deadline", "msg", "seq", "state")

    def __init__(self, msg: _Msg, state: int) -> None:
        self.msg = msg
        self.state = state
        self.attempt = 0  # deliveries so far
        self.seq = 0  # receipt-handle sequence of the current delivery
        self.deadline = 0.0


class _Group:
    __slots__ = ("assignment", "clients", "fifo_gate", "name", "pins", "settings")

    def __init__(self, name: str, settings: GroupSettings, fifo_gate: bool, assignment: str) -> None:
        self.name = name
        self.settings = settings
        self.fifo_gate = fifo_gate
        self.assignment = assignment
        self.clients: set[str] = set()
        self.pins: dict[str, tuple[MessageQueue, ...]] = {}


class _GQ:
    """One consumer group's consumption state of one queue (guarded by the queue's lock)."""

    __slots__ = ("acked", "dead", "delayed", "delivered", "dlq_client", "dlq_server", "expiry", "gated", "gpend",
                 "group", "max_attempts", "outcome", "ready", "recs")

    def __init__(self, group: _Group) -> None:
        self.group = group.name
        self.max_attempts = group.settings.max_attempts
        self.gated = group.settings.fifo and group.fifo_gate
        self.recs: dict[int, _Rec] = {}
        self.ready: list[int] = []  # heap of deliverable offsets (FIFO gated: group heads only)
        self.expiry: list[tuple[float, int, int]] = []  # heap of (deadline, offset, seq)
        self.delayed: list[tuple[float, int]] = []  # heap of (deliver_at, offset)
        self.gpend: dict[Any, deque] = {}  # FIFO gate: group key -> unsettled offsets in order
        self.outcome = bytearray()  # per offset: 0 or a settled outcome
        self.dead: list[DeadLetter] = []
        self.acked = self.dlq_client = self.dlq_server = self.delivered = 0


class _Queue:
    __slots__ = ("cond", "gqs", "lock", "log", "mq", "polls", "qid", "seq", "topic", "uid")

    def __init__(self, topic: str, qid: int, uid: int, mq: MessageQueue, sched: Any) -> None:
        self.topic = topic
        self.qid = qid
        self.uid = uid
        self.mq = mq
        self.lock = sched.lock(f"queue {mq}")
        self.cond = sched.condition(self.lock, f"queue {mq}")
        self.log: list[_Msg] = []
        self.gqs: dict[str, _GQ] = {}
        self.seq = 0
        self.polls = 0  # long polls waiting on cond (a notification with none waiting is skipped)

    def wake(self) -> None:
        """Something may have become deliverable (caller holds lock)."""
        if self.polls:
            self.cond.notify_all()


class _Bucket:
    """Token bucket (send throttling); the back-off it answers is the time to the next token."""

    __slots__ = ("burst", "last", "lock", "rate", "tokens")

    def __init__(self, rate: float, burst: float, now: float, sched: Any) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = float(burst)
        self.last = now
        self.lock = sched.lock("throttle")

    def take(self, now: float) -> float | None:
        with self.lock:
            if now > self.last:
                self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
                self.last = now
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return None
            return (1.0 - self.tokens) / self.rate


class _Topic:
    __slots__ = ("bucket", "name", "queues")

    def __init__(self, name: str, queues: list[_Queue], bucket: _Bucket | None) -> None:
        self.name = name
        self.queues = queues
        self.bucket = bucket


def _gkey(msg: _Msg) -> Any:
    # messages without a group are each their own FIFO group
    return msg.group if msg.group is not None else ("", msg.offset)


class Broker:
    """See the module docstring."""

    def __init__(self, *, clock: Any = None, sched: Any = REAL, name: str = "broker",
                 observer: Observer | None = None, max_invisible_duration: float = 12 * 3600.0,
                 max_messages: int = 1_000_000, max_stored_bytes: int = 1 << 30, max_clients: int = 10_000) -> None:
        self.name = name
        self.clock = clock if clock is not None else RealClock(sched)
        self._sched = sched
        self._meta = sched.lock("broker.meta")
        self._topics: dict[str, _Topic] = {}
        self._groups: dict[str, _Group] = {}
        self._by_uid: list[_Queue] = []
        self._running = False
        self._observer = observer
        self._max_invisible = max_invisible_duration
        self._txn_seq = 0
        # what the store may hold (issue 33: a served broker survives any client); the log is never
        # truncated, so a full store answers every later send INTERNAL_SERVER_ERROR "store full"
        self._max_messages, self._max_bytes, self._max_clients = max_messages, max_stored_bytes, max_clients
        self._stored_messages = self._stored_bytes = 0  # under _meta

    # ================================================================== lifecycle
    def start(self) -> Broker:
        with self._meta:
            self._running = True
        return self

    def stop(self) -> None:
        """Stop answering (every request: UNAVAILABLE) and release every long poll; state is kept."""
        with self._meta:
            self._running = False
            queues = list(self._by_uid)
        for q in queues:
            with q.cond:
                q.cond.notify_all()

    @property
    def running(self) -> bool:
        with self._meta:
            return self._running

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _check_running(self) -> None:
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")

    # ================================================================== admin
    def create_topic(self, name: str, queues: int = 4, *, message_type: MessageType = MessageType.NORMAL,
                     accept_types: list | None = None, brokers: tuple = ("broker-0",),
                     permissions: list | None = None, send_rate: float | None = None,
                     send_burst: float | None = None) -> tuple[MessageQueue, ...]:
        """Create a topic.  ``accept_types`` (one frozenset per queue) overrides ``message_type``;
        ``permissions`` (one ``Permission`` per queue) defaults to read-write; ``send_rate`` (sends per
        clock second, bucket ``send_burst``) turns on send throttling."""
        if queues < 1:
            raise ValueError("a topic needs at least one queue")
        with self._meta:
            if name in self._topics:
                raise ValueError(f"topic {name!r} exists")
            qs = []
            for i in range(queues):
                acc = frozenset(accept_types[i]) if accept_types is not None else frozenset({message_type})
                perm = permissions[i] if permissions is not None else Permission.READ_WRITE
                mq = MessageQueue(name, i, brokers[i % len(brokers)], perm, acc)
                q = _Queue(name, i, len(self._by_uid), mq, self._sched)
                self._by_uid.append(q)
                qs.append(q)
            bucket = None
            if send_rate is not None:
                bucket = _Bucket(send_rate, send_burst if send_burst is not None else max(1.0, send_rate),
                                 self.clock.now(), self._sched)
            self._topics[name] = _Topic(name, qs, bucket)
            return tuple(q.mq for q in qs)

    def create_consumer_group(self, name: str, *, fifo: bool = False, retry_policy: RetryPolicy | None = None,
                              max_attempts: int | None = None, receive_batch_size: int = 32,
                              fifo_gate: bool = True, assignment: str = "exclusive") -> GroupSettings:
        if assignment not in ("exclusive", "shared"):
            raise ValueError("assignment is 'exclusive' or 'shared'")
        policy = retry_policy or RetryPolicy()
        if max_attempts is not None:
            policy = RetryPolicy(max_attempts, policy.initial, policy.maximum, policy.multiplier, policy.durations)
        settings = GroupSettings(name, fifo, policy, receive_batch_size)
        with self._meta:
            if name in self._groups:
                raise ValueError(f"consumer group {name!r} exists")
            self._groups[name] = _Group(name, settings, fifo_gate, assignment)
        return settings

    def pin_assignment(self, group: str, client_id: str, queues: tuple | list | None) -> None:
        """Force the queues assigned to one client (None: back to the group's strategy)."""
        with self._meta:
            g = self._group(group)
            if queues is None:
                g.pins.pop(client_id, None)
            else:
                g.pins[client_id] = tuple(queues)

    def expire_now(self, group: str, message_id: str) -> bool:
        """Make the current delivery of a message time out now, as if its invisible time had run out
        (a stalled client, a clock jump).  True if the message was in flight.  Used by fault injection
        to make a non-retriable answer true, and by tests."""
        q, off = self._locate(message_id)
        with q.cond:
            gq = self._gq(q, group)
            rec = gq.recs.get(off)
            if rec is None or rec.state != _INVISIBLE:
                return False
            self._expire(q, gq, off, rec)
            return True

    # ================================================================== helpers (callers hold locks)
    def _group(self, name: str) -> _Group:
        g = self._groups.get(name)
        if g is None:
            raise RpcError(Code.CONSUMER_GROUP_NOT_FOUND, name)
        return g

    def _topic(self, name: str) -> _Topic:
        t = self._topics.get(name)
        if t is None:
            raise RpcError(Code.TOPIC_NOT_FOUND, name)
        return t

    def _queue(self, topic: str, queue_id: int) -> _Queue:
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")
            t = self._topic(topic)
            if not 0 <= queue_id < len(t.queues):
                raise RpcError(Code.BAD_REQUEST, f"{topic} has no queue {queue_id}")
            return t.queues[queue_id]

    def _locate(self, message_id: str) -> tuple[_Queue, int]:
        try:
            uid, off = int(message_id[:4], 16), int(message_id[4:], 16)
        except ValueError:
            raise RpcError(Code.MESSAGE_NOT_FOUND, f"no message {message_id!r}") from None
        with self._meta:
            if not 0 <= uid < len(self._by_uid):
                raise RpcError(Code.MESSAGE_NOT_FOUND, f"no message {message_id!r}")
            return self._by_uid[uid], off

    def _gq(self, q: _Queue, group: str) -> _GQ:
        """The group's state of queue q, created (from offset 0) on first use.  Caller holds q.lock."""
        gq = q.gqs.get(group)
        if gq is None:
            with self._meta:
                g = self._group(group)
            gq = _GQ(g)
            q.gqs[group] = gq
            now = self.clock.now()
            for msg in q.log:
                gq.outcome.append(0)
                if msg.txn_state in (None, "committed"):
                    self._admit(gq, msg, now)
        return gq

    def _admit(self, gq: _GQ, msg: _Msg, now: float) -> None:
        """A message becomes part of the group's backlog (sent, or committed)."""
        off = msg.offset
        if msg.deliver_at is not None and msg.deliver_at > now:
            gq.recs[off] = _Rec(msg, _DELAYED)
            heapq.heappush(gq.delayed, (msg.deliver_at, off))
            return
        gq.recs[off] = _Rec(msg, _READY)
        if gq.gated:
            k = _gkey(msg)
            dq = gq.gpend.get(k)
            if dq is None:
                gq.gpend[k] = deque((off,))
                heapq.heappush(gq.ready, off)
            else:
                dq.append(off)
        else:
            heapq.heappush(gq.ready, off)

    def _make_ready(self, gq: _GQ, off: int, rec: _Rec) -> None:
        rec.state = _READY
        if gq.gated:
            dq = gq.gpend.get(_gkey(rec.msg))
            if dq is None:  # a delayed message in a FIFO group: it joins its group's list now
                gq.gpend[_gkey(rec.msg)] = deque((off,))
            elif dq[0] != off:
                if off not in dq:
                    dq.append(off)
                return
        heapq.heappush(gq.ready, off)

    def _expire(self, q: _Queue, gq: _GQ, off: int, rec: _Rec) -> None:
        """The current delivery's invisible time is over (caller holds q.lock)."""
        if rec.attempt >= gq.max_attempts:
            self._settle(q, gq, off, rec, _DLQ_SERVER)
            return
        self._make_ready(gq, off, rec)
        if self._observer is not None:
            self._observer("expired", gq.group, rec.msg.message_id, rec.attempt, rec.msg.body)
        q.wake()

    def _advance(self, q: _Queue, gq: _GQ, now: float) -> None:
        """Process due delays and expiries (caller holds q.lock)."""
        delayed = gq.delayed
        while delayed and delayed[0][0] <= now:
            _, off = heapq.heappop(delayed)
            rec = gq.recs.get(off)
            if rec is not None and rec.state == _DELAYED:
                self._make_ready(gq, off, rec)
        expiry = gq.expiry
        while expiry and expiry[0][0] <= now:
            _, off, seq = heapq.heappop(expiry)
            rec = gq.recs.get(off)
            if rec is not None and rec.state == _INVISIBLE and rec.seq == seq:
                self._expire(q, gq, off, rec)

    def _settle(self, q: _Queue, gq: _GQ, off: int, rec: _Rec, outcome: int) -> None:
        del gq.recs[off]
        gq.outcome[off] = outcome
        msg = rec.msg
        if gq.gated:
            k = _gkey(msg)
            dq = gq.gpend[k]
            dq.remove(off)  # the head, except for a delayed/odd member settled out of turn
            if dq:
                nxt = dq[0]
                nrec = gq.recs[nxt]
                if nrec.state == _READY:
                    heapq.heappush(gq.ready, nxt)
                    q.wake()
            else:
                del gq.gpend[k]
        if outcome == _ACKED:
            gq.acked += 1
            event = "acked"
        else:
            by = "client" if outcome == _DLQ_CLIENT else "server"
            if outcome == _DLQ_CLIENT:
                gq.dlq_client += 1
            else:
                gq.dlq_server += 1
            gq.dead.append(DeadLetter(msg.message_id, msg.body, msg.group, rec.attempt, by))
            event = "dlq-" + by
        if self._observer is not None:
            self._observer(event, gq.group, msg.message_id, rec.attempt, msg.body)

    def _take(self, q: _Queue, gq: _GQ, batch: int, invisible: float, now: float) -> list[ReceivedMessage]:
        out: list[ReceivedMessage] = []
        ready = gq.ready
        recs = gq.recs
        mq = q.mq
        while ready and len(out) < batch:
            off = heapq.heappop(ready)
            rec = recs.get(off)
            if rec is None or rec.state != _READY:
                continue  # stale heap entry
            if gq.gated:
                dq = gq.gpend.get(_gkey(rec.msg))
                if dq is None or dq[0] != off:
                    continue  # not its group's head (stale entry)
            q.seq += 1
            rec.state = _INVISIBLE
            rec.attempt += 1
            rec.seq = q.seq
            rec.deadline = now + invisible
            heapq.heappush(gq.expiry, (rec.deadline, off, rec.seq))
            gq.delivered += 1
            msg = rec.msg
            out.append(ReceivedMessage(msg.message_id, q.topic, msg.body, mq, off, rec.attempt,
                                       f"{q.uid:x}:{off:x}:{rec.seq:x}", msg.tag, msg.keys, msg.group,
                                       msg.properties))
            if self._observer is not None:
                self._observer("delivered", gq.group, msg.message_id, rec.attempt, msg.body)
        return out

    def _handle(self, topic: str, handle: str) -> tuple[_Queue, int, int]:
        try:
            uid_s, off_s, seq_s = handle.split(":")
            uid, off, seq = int(uid_s, 16), int(off_s, 16), int(seq_s, 16)
        except (ValueError, AttributeError):
            raise RpcError(Code.INVALID_RECEIPT_HANDLE, f"malformed receipt handle {handle!r}") from None
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")
            self._topic(topic)
            if not 0 <= uid < len(self._by_uid) or self._by_uid[uid].topic != topic:
                raise RpcError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle {handle!r} is not of topic {topic}")
            return self._by_uid[uid], off, seq

    def _current(self, q: _Queue, group: str, off: int, seq: int, message_id: str | None) -> tuple[_GQ, _Rec]:
        """The record a handle names, if the handle is the current one (caller holds q.lock)."""
        if off >= len(q.log) or (message_id is not None and q.log[off].message_id != message_id):
            raise RpcError(Code.MESSAGE_NOT_FOUND, f"no message at {q.mq} offset {off}")
        gq = self._gq(q, group)
        self._advance(q, gq, self.clock.now())
        rec = gq.recs.get(off)
        if rec is None or rec.state != _INVISIBLE or rec.seq != seq:
            why = "settled" if rec is None else ("expired" if rec.state != _INVISIBLE else "superseded")
            raise RpcError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle of {q.log[off].message_id} is {why}")
        return gq, rec

    # ================================================================== RPCs: producer side
    def query_route(self, topic: str) -> tuple[MessageQueue, ...]:
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")
            return tuple(q.mq for q in self._topic(topic).queues)

    def send_message(self, queue: MessageQueue, message: Message, message_type: MessageType,
                     transaction_id: str | None = None) -> SendReceipt:
        if message.topic != queue.topic:
            raise RpcError(Code.BAD_REQUEST, "message topic and queue topic differ")
        q = self._queue(queue.topic, queue.queue_id)
        if not q.mq.permission.writable:
            raise RpcError(Code.FORBIDDEN, f"{q.mq} is not writable")
        if message_type not in q.mq.accept_types:
            raise RpcError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"{q.mq} does not accept {message_type.value}")
        if message_type is MessageType.FIFO and not message.group:
            raise RpcError(Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
        if message_type is MessageType.DELAY and message.delivery_timestamp is None:
            raise RpcError(Code.ILLEGAL_DELIVERY_TIME, "a delay message needs a delivery timestamp")
        if message_type is not MessageType.DELAY and message.delivery_timestamp is not None:
            raise RpcError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "delivery timestamp on a non-delay message")
        if message_type is MessageType.TRANSACTION and not transaction_id:
            raise RpcError(Code.INVALID_TRANSACTION_ID, "a transactional message needs a transaction id")
        with self._meta:
            bucket = self._topics[queue.topic].bucket
        if bucket is not None:
            wait = bucket.take(self.clock.now())
            if wait is not None:
                raise RpcError(Code.TOO_MANY_REQUESTS, f"{queue.topic} is throttled", backoff=wait)
        with self._meta:
            if (self._stored_messages >= self._max_messages
                    or self._stored_bytes + len(message.body) > self._max_bytes):
                raise RpcError(Code.INTERNAL_SERVER_ERROR,
                               f"store full: {self.name} holds {self._stored_messages} messages of "
                               f"{self._stored_bytes} bytes (bounds {self._max_messages} and {self._max_bytes})")
            self._stored_messages += 1
            self._stored_bytes += len(message.body)
        with q.cond:
            off = len(q.log)
            msg = _Msg(f"{q.uid:04X}{off:012X}", off, message, message_type, transaction_id)
            q.log.append(msg)
            now = self.clock.now()
            for gq in q.gqs.values():
                gq.outcome.append(0)
                if msg.txn_state is None:
                    self._admit(gq, msg, now)
            q.wake()
            return SendReceipt(msg.message_id, q.mq, off, transaction_id)

    def end_transaction(self, topic: str, message_id: str, transaction_id: str, commit: bool) -> None:
        q, off = self._locate(message_id)
        if q.topic != topic:
            raise RpcError(Code.MESSAGE_NOT_FOUND, f"{message_id} is not of topic {topic}")
        self._check_running()
        with q.cond:
            if off >= len(q.log):
                raise RpcError(Code.MESSAGE_NOT_FOUND, message_id)
            msg = q.log[off]
            if msg.txn_id != transaction_id or msg.txn_state is None:
                raise RpcError(Code.INVALID_TRANSACTION_ID, f"{message_id} is not in transaction {transaction_id}")
            target = "committed" if commit else "rolled-back"
            if msg.txn_state == target:
                return  # a repeated resolution is idempotent
            if msg.txn_state != "half":
                raise RpcError(Code.INVALID_TRANSACTION_ID, f"transaction {transaction_id} is {msg.txn_state}")
            msg.txn_state = target
            if commit:
                now = self.clock.now()
                for gq in q.gqs.values():
                    self._admit(gq, msg, now)
                q.wake()

    # ================================================================== RPCs: consumer side
    def heartbeat(self, group: str, client_id: str) -> None:
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")
            clients = self._group(group).clients
            if client_id not in clients and len(clients) >= self._max_clients:
                raise RpcError(Code.FORBIDDEN, f"consumer group {group} has {len(clients)} clients (the bound)")
            clients.add(client_id)

    def unregister(self, group: str, client_id: str) -> None:
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")
            self._group(group).clients.discard(client_id)

    def query_settings(self, group: str) -> GroupSettings:
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")
            return self._group(group).settings

    def query_assignment(self, topic: str, group: str, client_id: str) -> tuple[MessageQueue, ...]:
        with self._meta:
            if not self._running:
                raise RpcError(Transport.UNAVAILABLE, f"{self.name} is stopped")
            g = self._group(group)
            t = self._topic(topic)
            if client_id in g.pins:
                return tuple(mq for mq in g.pins[client_id] if mq.topic == topic)
            readable = [q.mq for q in t.queues if q.mq.permission.readable]
            if g.assignment == "shared":
                return tuple(readable)
            clients = sorted(c for c in g.clients if c not in g.pins)
            if client_id not in clients:
                return ()
            i, n = clients.index(client_id), len(clients)
            return tuple(mq for k, mq in enumerate(readable) if k % n == i)

    def receive_message(self, group: str, queue: MessageQueue, batch_size: int, invisible_duration: float,
                        long_polling_timeout: float = 0.0, cancel: Cancel | None = None) -> list[ReceivedMessage]:
        """Up to ``batch_size`` deliverable messages of ``queue``; waits up to ``long_polling_timeout``
        (clock seconds) for one when none is deliverable; ``[]`` when none came (the protocol's
        MESSAGE_NOT_FOUND answer) or the call was cancelled."""
        if batch_size < 1:
            raise RpcError(Code.BAD_REQUEST, "batch size must be positive")
        if not 0 < invisible_duration <= self._max_invisible:
            raise RpcError(Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {invisible_duration}")
        q = self._queue(queue.topic, queue.queue_id)
        if not q.mq.permission.readable:
            raise RpcError(Code.FORBIDDEN, f"{q.mq} is not readable")
        clock = self.clock
        with q.cond:
            gq = self._gq(q, group)
            deadline = clock.now() + max(0.0, long_polling_timeout)
            while True:
                if cancel is not None and cancel.cancelled:
                    return []  # a cancelled call takes nothing (checked under the lock, before taking)
                now = clock.now()
                self._advance(q, gq, now)
                out = self._take(q, gq, batch_size, invisible_duration, now)
                if out or now >= deadline:
                    return out
                wake = deadline
                if gq.expiry and gq.expiry[0][0] < wake:
                    wake = gq.expiry[0][0]
                if gq.delayed and gq.delayed[0][0] < wake:
                    wake = gq.delayed[0][0]
                q.polls += 1
                try:
                    clock.wait(q.cond, wake, cancel)
                finally:
                    q.polls -= 1
                with self._meta:
                    if not self._running:
                        raise RpcError(Transport.UNAVAILABLE, f"{self.name} stopped during a long poll")

    def ack_message(self, group: str, topic: str, message_id: str | None, receipt_handle: str) -> None:
        q, off, seq = self._handle(topic, receipt_handle)
        with q.cond:
            gq, rec = self._current(q, group, off, seq, message_id)
            self._settle(q, gq, off, rec, _ACKED)

    def change_invisible_duration(self, group: str, topic: str, message_id: str | None, receipt_handle: str,
                                  invisible_duration: float) -> str:
        """Give the current delivery a new invisible time from now; returns the new receipt handle
        (the old one becomes invalid).  0 makes the message deliverable at once."""
        if not 0 <= invisible_duration <= self._max_invisible:
            raise RpcError(Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {invisible_duration}")
        q, off, seq = self._handle(topic, receipt_handle)
        with q.cond:
            gq, rec = self._current(q, group, off, seq, message_id)
            q.seq += 1
            rec.seq = q.seq
            rec.deadline = self.clock.now() + invisible_duration
            heapq.heappush(gq.expiry, (rec.deadline, off, rec.seq))
            if invisible_duration == 0:
                self._advance(q, gq, self.clock.now())
            return f"{q.uid:x}:{off:x}:{rec.seq:x}"

    def forward_to_dlq(self, group: str, topic: str, message_id: str | None, receipt_handle: str,
                       delivery_attempt: int = 0, max_delivery_attempts: int = 0) -> None:
        """The client's dead-lettering of the current delivery (seed 001 FIFO step 8)."""
        q, off, seq = self._handle(topic, receipt_handle)
        with q.cond:
            gq, rec = self._current(q, group, off, seq, message_id)
            if delivery_attempt > rec.attempt:
                rec.attempt = delivery_attempt  # the client's count includes its local re-consumptions
            self._settle(q, gq, off, rec, _DLQ_CLIENT)

    # ================================================================== observation
    def _each_gq(self, group: str, topic: str | None = None):
        with self._meta:
            queues = [q for q in self._by_uid if topic is None or q.topic == topic]
        for q in queues:
            with q.cond:
                gq = self._gq(q, group)  # a group sees a topic from offset 0, observed or not
                self._advance(q, gq, self.clock.now())
                yield q, gq

    def group_stats(self, group: str, topic: str | None = None) -> dict[str, int]:
        s = dict.fromkeys(("acked", "dead_lettered_by_client", "dead_lettered_by_server", "deliveries",
                           "ready", "invisible", "delayed"), 0)
        for _, gq in self._each_gq(group, topic):
            s["acked"] += gq.acked
            s["dead_lettered_by_client"] += gq.dlq_client
            s["dead_lettered_by_server"] += gq.dlq_server
            s["deliveries"] += gq.delivered
            for rec in gq.recs.values():
                s[_STATE_NAMES[rec.state]] += 1
        s["unsettled"] = s["ready"] + s["invisible"] + s["delayed"]
        return s

    def unsettled(self, group: str, topic: str | None = None) -> int:
        return self.group_stats(group, topic)["unsettled"]

    def dead_letters(self, group: str, topic: str | None = None) -> list[DeadLetter]:
        out: list[DeadLetter] = []
        for _, gq in self._each_gq(group, topic):
            out.extend(gq.dead)
        return out

    def message_state(self, group: str, message_id: str) -> dict[str, Any]:
        """``{"state": ..., "attempt": ...}`` of one message for one group."""
        q, off = self._locate(message_id)
        with q.cond:
            if off >= len(q.log):
                raise RpcError(Code.MESSAGE_NOT_FOUND, message_id)
            msg = q.log[off]
            if msg.txn_state in ("half", "rolled-back"):
                return {"state": msg.txn_state, "attempt": 0}
            gq = self._gq(q, group)
            self._advance(q, gq, self.clock.now())
            rec = gq.recs.get(off)
            if rec is not None:
                return {"state": _STATE_NAMES[rec.state], "attempt": rec.attempt}
            attempt = next((d.attempt for d in gq.dead if d.message_id == message_id), None)
            return {"state": _OUTCOME_NAMES[gq.outcome[off]], "attempt": attempt}
