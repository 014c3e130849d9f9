"""The thin client's producer: seed 001 "Producer", the single-message send flow (steps 1-7).

What it is
----------
``Producer.send(message)`` follows seed 001 step by step:

1. is the topic's route already known?  (``_routes``, the route cache)
2. if so, take the candidate queues from it and go to 4;
3. otherwise fetch the route (``query_route``); **if the fetch fails the send fails** (no send request);
4. pick a queue from the candidates: attempt k uses ``candidates[(k - 1) mod n]`` (upstream
   ``ProducerImpl.send0``, REFERENCE.md section 2);
5. check that the queue accepts the message's type; **if not, the send fails at once**, with no request
   (upstream: the message-type check; ``validate_message_type=False`` turns it off as upstream's
   setting does);
6. send; success returns the receipt;
7. on failure: if the attempts are used up the send fails, otherwise rotate to the next candidate and
   go to 5.

Seed 001 "特别地": a **transactional** message has exactly one chance (no internal retry, whatever the
answer: DEV-003, switch ``transactional_retries`` for upstream since 2024); a retry is made **at
once**, except after ``TOO_MANY_REQUESTS``, when it waits for the back-off **the server chose**
(``RpcError.backoff``).  "Retry count exceeds the maximum" is read, as upstream does and as the model
(``max_send_attempts``) does, as at most ``max_attempts`` requests in all.

Candidates.  The writable queues of the route, rotated to start at a per-topic round-robin index that
advances on every send (upstream starts at a random index; a rotating start spreads sends the same way
and is deterministic).  A FIFO message (one with a message group) has a single candidate, the queue
chosen by a stable hash of its group over the writable queues, and keeps it on every attempt: its
order with the group's other messages is only defined within one queue (the model's
``fifo-stays-on-group-queue``; upstream ``takeMessageQueueByMessageGroup``).  Note that
spec/deviations.md DEV-013 still describes rotation for FIFO messages; the model's reference and
issue 14 pin them (``fifo_group_pinning=True``, the default here; ``False`` rotates them).

Delay messages carry a delivery timestamp in the broker clock's time; a message whose properties
contradict each other (a group and a delivery timestamp) fails before any request.

Transactions: ``begin_transaction()`` returns a ``Transaction``; ``send(message, transaction)`` sends a
half message (one attempt, per the seed); ``commit()`` / ``rollback()`` end it with one request each.

Concurrency argument
--------------------
``send`` may be called from any number of threads.  ``_lock`` (a leaf) protects the route cache and the
round-robin indices; it is never held across a request or a back-off, so concurrent sends overlap
their requests.  Two threads that both miss the cache may both fetch the route; the later result
wins, and either is a valid route.  A send's own state (attempt number, candidates, last error) is
local to the calling thread.

Interleaving point (``conq.impl.scheduling``): ``sched.point("send.pick", topic)`` before each attempt
picks its queue and checks the type (steps 4-5): the model's ``pick``, a thread step of its own at the
thread level (conformance/ordered_consumption/thread_steps.py).  A no-op on real threads.
"""

from __future__ import annotations

import zlib
from typing import Any

from conq.impl.ordered_consumption.clock import Cancel, RealClock
from conq.impl.ordered_consumption.protocol import (
    Message,
    MessageQueue,
    MessageType,
    RpcError,
    SendError,
    SendReceipt,
    message_type_of,
)
from conq.impl.scheduling import REAL

__all__ = ["Producer", "Transaction"]


def group_queue(group: str, writable: tuple[MessageQueue, ...]) -> MessageQueue:
    """The queue a message group is pinned to: a stable hash (CRC-32, not Python's salted ``hash``)
    of the group over the writable queues."""
    return writable[zlib.crc32(group.encode()) % len(writable)]


class Transaction:
    """A local transaction: the half messages sent within it, committed or rolled back together."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self.transaction_id = f"txn-{producer.client_id}-{producer._next_txn()}"
        self.receipts: list[SendReceipt] = []
        self.state = "open"

    def _end(self, commit: bool) -> None:
        if self.state != "open":
            raise RuntimeError(f"transaction {self.transaction_id} is {self.state}")
        for r in self.receipts:
            self._producer.channel.end_transaction(r.queue.topic, r.message_id, self.transaction_id, commit)
        self.state = "committed" if commit else "rolled-back"

    def commit(self) -> None:
        self._end(True)

    def rollback(self) -> None:
        self._end(False)


class Producer:
    """See the module docstring."""

    def __init__(self, channel: Any, *, client_id: str = "producer", max_attempts: int = 3, clock: Any = None,
                 sched: Any = REAL, validate_message_type: bool = True, transactional_retries: bool = False,
                 fifo_group_pinning: bool = True) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts counts requests and must be at least 1")
        self.channel = channel
        self.client_id = client_id
        self.max_attempts = max_attempts
        self.clock = clock if clock is not None else RealClock(sched)
        self.validate_message_type = validate_message_type
        self.transactional_retries = transactional_retries
        self.fifo_group_pinning = fifo_group_pinning
        self._lock = sched.lock("producer")
        self._point = sched.point  # the model's thread step ``pick`` (module docstring); a no-op on real threads
        self._routes: dict[str, tuple[MessageQueue, ...]] = {}
        self._writable: dict[str, tuple[MessageQueue, ...]] = {}
        self._rr: dict[str, int] = {}
        self._closed = Cancel("producer")
        self._txns = 0

    def _next_txn(self) -> int:
        with self._lock:
            self._txns += 1
            return self._txns

    def close(self) -> None:
        """Interrupt back-off waits of sends in progress (they fail) and refuse new sends."""
        self._closed.cancel()

    # ------------------------------------------------------------------ route cache (seed steps 1-3)
    def _route(self, topic: str) -> tuple[MessageQueue, ...]:
        with self._lock:
            route = self._routes.get(topic)
        if route is not None:
            return route
        route = self.channel.query_route(topic)  # may raise: the caller turns it into a failed send
        with self._lock:
            self._routes[topic] = route
            self._writable[topic] = tuple(mq for mq in route if mq.permission.writable)
        return route

    def fetch_route(self, topic: str) -> tuple[MessageQueue, ...]:
        """The route of ``topic``, fetched and cached now unless it is cached already (seed steps 1-3;
        upstream fetches the routes of the topics given to ``ProducerBuilder.setTopics`` at start-up,
        ``ProducerImpl.startUp``).  Raises the channel's ``RpcError`` if the query fails."""
        return self._route(topic)

    def refresh_route(self, topic: str) -> None:
        """Forget the cached route; the next send fetches it again."""
        with self._lock:
            self._routes.pop(topic, None)
            self._writable.pop(topic, None)

    def cached_route(self, topic: str) -> tuple[MessageQueue, ...] | None:
        with self._lock:
            return self._routes.get(topic)

    def _candidates(self, topic: str, route: tuple[MessageQueue, ...], message: Message,
                    mtype: MessageType) -> tuple[MessageQueue, ...]:
        with self._lock:
            writable = self._writable.get(topic)
            if writable is None:  # the route was refreshed meanwhile: use the one we hold
                writable = tuple(mq for mq in route if mq.permission.writable)
            start = self._rr.get(topic, 0)
            self._rr[topic] = start + 1
        if not writable:
            return ()
        if mtype is MessageType.FIFO and self.fifo_group_pinning:
            return (group_queue(message.group, writable),)
        start %= len(writable)
        if mtype is MessageType.FIFO:  # rotation switch: start at the group's queue, then rotate
            start = writable.index(group_queue(message.group, writable))
        return writable[start:] + writable[:start]

    # ------------------------------------------------------------------ send (seed steps 1-7)
    def begin_transaction(self) -> Transaction:
        return Transaction(self)

    def send(self, message: Message, transaction: Transaction | None = None) -> SendReceipt:
        if self._closed.cancelled:
            raise SendError("producer is closed", attempts=0)
        try:
            mtype = message_type_of(message, transactional=transaction is not None)
        except ValueError as e:
            raise SendError(f"invalid message: {e}", attempts=0) from e
        try:
            route = self._route(message.topic)  # steps 1-3
        except RpcError as e:
            raise SendError(f"route of {message.topic} could not be fetched", attempts=0, cause=e) from e
        candidates = self._candidates(message.topic, route, message, mtype)
        if not candidates:
            raise SendError(f"{message.topic} has no writable queue", attempts=0)
        # seed 特别地: a transactional message has exactly one chance
        limit = 1 if mtype is MessageType.TRANSACTION and not self.transactional_retries else self.max_attempts
        last: RpcError | None = None
        sent = 0
        for attempt in range(1, limit + 1):
            self._point("send.pick", message.topic)
            queue = candidates[(attempt - 1) % len(candidates)]  # step 4 / step 7's rotation
            if self.validate_message_type and mtype not in queue.accept_types:  # step 5
                raise SendError(f"{queue} does not accept {mtype.value} messages", attempts=sent, cause=last)
            sent += 1
            try:
                receipt = self.channel.send_message(queue, message, mtype,
                                                    transaction.transaction_id if transaction else None)  # step 6
            except RpcError as e:
                last = e
                if attempt >= limit:
                    break
                # 特别地: an immediate retry, except that a throttled one waits for the server's back-off
                if e.throttled and e.backoff and not self.clock.sleep(e.backoff, self._closed):
                    raise SendError("producer closed during a back-off", attempts=sent, cause=e) from e
                continue
            if transaction is not None:
                transaction.receipts.append(receipt)
            return receipt
        why = "transactional message: one attempt only" if limit == 1 and mtype is MessageType.TRANSACTION \
            else f"all {limit} attempts failed"
        raise SendError(why, attempts=sent, cause=last) from last
