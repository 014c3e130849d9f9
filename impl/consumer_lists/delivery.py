"""The consumer -> target -> session -> connection chain and the IO-thread scheduler.

What it is
----------
The 12-step flow of seed 000/002 ("Simple Example") and the threading model ("Threading Model":
the consuming part always runs on the consuming connection's IO thread; publishing may happen on any
thread).  Upstream: ``QueueConsumerImpl.notifyWork`` -> ``AbstractConsumerTarget.notifyWork`` ->
session -> connection ``notifyWork`` -> the IO network connection scheduler.

 1. a message arrives on the queue (``Queue.enqueue``, any thread);
 2. the queue notifies some interested consumers (``Queue`` notification rules);
 3. ``QueueConsumer.notify_work`` -> ``ConsumerTarget.notify_work(consumer)``;
 4. ``ConsumerTarget`` -> ``Session.notify_work(target)``;
 5. ``Session`` -> ``Connection.notify_work(session)``;
 6. the connection schedules itself on the ``IOThreadPool`` (the switch from the calling thread to an
    IO thread) -- unless it is already scheduled;
 7. an IO thread runs ``Connection.process``;
 8. the connection iterates over its sessions that want work;
 9. each session over its targets that want work;
10. each target over its consumers that want work;
11. the consumer pulls from its queue (``Queue.deliver_single_message``) until nothing is returned
    (or a fairness batch is used up, after which it re-queues itself behind the others);
12. each delivered message goes to the connection's IO buffer (``Connection.sink``; by default an
    in-memory ``outbox`` list).

Without an ``IOThreadPool`` (``pool=None``) step 6 only marks the connection scheduled and the caller
runs step 7 itself with ``Connection.process()``: the single-caller, step-by-step mode.

Failure policy
--------------
*A delivery callback that raises* -- the connection's ``sink(consumer, msg_id)`` (step 12: the IO
buffer / the client's callback) raising an ``Exception`` for message ``m`` pulled by consumer ``c``:

1. **the message goes back to the queue** if ``c`` still holds it (``Queue.delivery_failed``, one
   queue-lock section): ``m``'s failure count goes up and ``m`` is released (ACQUIRED by ``c`` ->
   AVAILABLE, consumers notified as for any release), so it is delivered again -- to any consumer,
   ``c`` included -- and only a later successful delivery settles it (at-least-once; ``outcome``
   ``"released"``).  When the count reaches the queue's ``max_delivery_failures`` (default
   ``queue.DEFAULT_MAX_DELIVERY_FAILURES`` = 10) ``m`` is dead-lettered instead: removed from the
   queue and handed to the hook with its payload (``"dead-lettered"``).  If ``c`` no longer holds
   ``m`` (the callback settled or released it before raising, or ``c`` was removed and the removal
   released it) nothing changes (``"not-held"``).  A browser's message is not shown again (browsers
   never see a message twice; ``"browsed"``).
2. **reported**, at once and on the IO thread: ``Connection.delivery_failures`` and
   ``IOThreadPool.delivery_failures`` count it, ``Connection.recent_failures`` keeps the last
   ``RECENT_FAILURES`` as ``DeliveryFailure(connection, consumer, msg_id, error, outcome, failures,
   payload)``, and the hook ``on_delivery_error(failure)`` of the connection (else of its pool) is
   called.  A hook that raises is recorded (``Connection.hook_errors``, and as an internal error of
   the pool, below); it never stops the IO thread.
3. **delivery goes on**: the failure uses one slot of ``c``'s fairness batch, then the IO thread
   carries on with ``c``, the other consumers, targets, sessions and connections; ``c`` stays
   subscribed and its connection in service.  ``IOThreadPool.stop`` does not raise for it.

A message pulled for a consumer that was closed meanwhile is not handed to the sink: it is released
if the consumer still holds it (the removal normally already released it).  The check is made once,
after the pull, and the sink is not called under any lock, so a close by *another* thread just after
the check still lets the sink receive a message its consumer no longer holds (a *stale send*: the
removal released it and another consumer may already hold it; the client's later settle is refused,
``QueueError`` / ``settle_owned`` False).  At-least-once, never acquired twice: the message is
redelivered, and the queue never counts it as held by both (the workload's checker allows exactly
that, ``workload``: "nothing acquired twice"; upstream's ``doSend`` likewise checks the link once,
before the send).

Upstream Broker-J releases a message whose send cannot happen and keeps the IO thread serving:
``ConsumerTarget_1_0.doSend`` calls ``entry.release(consumer)`` when the link is no longer attached
(also on an unknown transaction), ``AbstractConsumerTarget.close`` releases every message still
queued for sending, and ``NonBlockingConnection.doWork`` turns an ``IOException`` /
``ConnectionScopedRuntimeException`` into closing *that* connection (its sessions then release their
unacknowledged messages) while the selector thread goes on with the others.  A message delivered
more than the queue's ``maximumDeliveryAttempts`` times is routed to the alternate binding or
discarded (``QueueEntryImpl.getDeliveryCount``; 0, the default, means never).  Differences: the unit
of failure of a callback here is the single delivery, not the connection (one failing callback does
not take a connection's other consumers down), and the attempt bound is on by default -- with it
off, a message whose callback always fails is the oldest available message, which every pull
returns first, so a lone consumer would never get past it.

*An internal failure* -- any other ``Exception`` out of ``Connection.process`` on an IO thread (a
defect of this implementation, e.g. a ``QueueError`` from the queue) -- is recorded at once
(``IOThreadPool.errors``, the first ``RECENT_FAILURES``; ``error_count``; hook ``on_error(connection,
exc)``) and the connection is closed, as upstream closes a connection on a connection-scoped
exception (``Connection.close``: every consumer is removed from its queue, which releases what it
holds and hands its wake-up over), so nothing stays stranded behind it; the IO thread carries on, and
``IOThreadPool.stop`` re-raises the first one.

Concurrency argument
--------------------
Each of ``ConsumerTarget``, ``Session`` and ``Connection`` has one lock protecting its *pending* set
(an insertion-ordered dict used as a set of children that asked for work) and, for the connection,
the ``scheduled`` flag.  These locks are leaves: nothing is called while one is held except
``IOThreadPool.schedule`` (whose lock is also a leaf) -- in particular no queue operation.

No lost wake-up along the chain: ``notify_work`` adds the child to the parent's pending set under the
parent's lock and then always notifies upward; ``process`` takes the whole pending set under the same
lock (``swap``) before working on it, so a notification that arrives during processing lands in the
fresh set and is handled by the next round.  The connection clears ``scheduled`` only under its lock
and only when its pending set is empty, and ``notify_work`` sets ``scheduled`` under that lock, so a
connection with pending work is always either scheduled (in the pool's ready queue or being
processed) or about to be.  A connection is processed by at most one IO thread at a time (the
``scheduled`` flag is the ownership token), which is what makes ``deliver_single_message`` for a
consumer single-threaded, as upstream.

``IOThreadPool``: a ready deque, a ``busy`` count and the ``stopping``/``terminated`` flags under one
lock (a leaf) with a condition; workers pop and run connections.  Shutdown drains to quiescence
(issue 13, item 7): ``stop`` sets ``stopping``, and a worker exits only when ``stopping`` holds,
nothing is ready *and no worker is busy* -- the first to see that sets ``terminated``.  Only two
kinds of thread schedule: threads outside the pool, which the caller stops before ``stop`` (the
workload joins its publishers, toggler and fault threads first), and busy workers (a connection processed on an
IO thread notifies another one, e.g. a browser's credit running out hands a wake-up over).  While a
worker is busy no worker can exit, so a connection a busy worker schedules is accepted and processed
before the pool terminates; once terminated, no IO thread runs, and a ``schedule`` (necessarily from
outside) raises instead of being silently dropped.  Before this, ``stop`` refused every ``schedule``
from the moment it was called, so an IO thread still finishing a connection failed with "schedule
after stop" (seed 909 of the schedules engine).  ``stop(timeout)`` that runs out sets ``abandon``
(workers leave after their current connection) and raises ``TimeoutError``.

Failure reporting state (``delivery_failures``, ``recent_failures``, ``errors``, ``error_count``) is
written under the owning connection's or pool's lock; the hooks are called with no lock held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from conq.impl.consumer_lists.queue import Queue, QueueConsumer
from conq.impl.scheduling import REAL

__all__ = ["Connection", "ConsumerTarget", "DeliveryFailure", "IOThreadPool", "Session"]

DEFAULT_BATCH = 64  # messages one consumer may pull before yielding to the others (fairness)
RECENT_FAILURES = 100  # failures kept for inspection per connection / pool (all are counted)


@dataclass(frozen=True)
class DeliveryFailure:
    """A delivery callback (``Connection.sink``) raised: what failed and what the policy did."""

    connection: str
    consumer: QueueConsumer
    msg_id: int
    error: Exception
    #: what the policy did with the message: "released" (back in the queue), "dead-lettered" (its
    #: ``failures`` reached the queue's ``max_delivery_failures``: removed; ``payload`` is the message
    #: for the hook to route on), "not-held" (the consumer no longer held it), "browsed" (a browser's)
    outcome: str
    failures: int  # failed deliveries of this message so far, this one included (0: not counted)
    payload: Any = None

    @property
    def consumer_id(self) -> Hashable:
        return self.consumer.id

    @property
    def released(self) -> bool:
        return self.outcome == "released"

    def __str__(self) -> str:
        return (f"delivery of message {self.msg_id} to {self.consumer.id!r} on {self.connection!r} failed "
                f"({type(self.error).__name__}: {self.error}): {self.outcome}, failure {self.failures}")


class IOThreadPool:
    """Step 7: IO threads that run scheduled connections (failure reporting: module docstring)."""

    def __init__(self, sched: Any = REAL, threads: int = 2, name: str = "io", *,
                 on_delivery_error: Callable[[DeliveryFailure], None] | None = None,
                 on_error: Callable[[Connection, Exception], None] | None = None) -> None:
        if threads < 1:
            raise ValueError(f"IOThreadPool {name!r}: threads must be >= 1, got {threads}")
        self._sched = sched
        self.name = name
        self._n = threads
        self._lock = sched.lock(f"{name}.lock")
        self._cv = sched.condition(self._lock, f"{name}.ready")
        self._ready: deque[Connection] = deque()
        self._busy = 0  # workers inside Connection.process
        self._stopping = False
        self._terminated = False
        self._abandon = False
        self._handles: list[Any] = []
        self.on_delivery_error = on_delivery_error
        self.on_error = on_error
        self.errors: list[BaseException] = []  # internal failures (the first RECENT_FAILURES)
        self.error_count = 0
        self.delivery_failures = 0  # callback failures on the connections of this pool
        self.processed = 0

    def start(self) -> IOThreadPool:
        for i in range(self._n):
            self._handles.append(self._sched.spawn(self._worker, f"{self.name}-{i}"))
        return self

    def schedule(self, connection: Connection) -> None:
        with self._lock:
            if self._terminated:
                raise RuntimeError(f"IOThreadPool {self.name!r}: schedule({connection.name!r}) after the pool stopped "
                                   f"(stop() drains; only a thread outside the pool can get here)")
            self._ready.append(connection)
            self._cv.notify()

    def _drained_locked(self) -> bool:
        return self._stopping and self._busy == 0 and not self._ready

    def _worker(self) -> None:
        while True:
            with self._lock:
                while not self._ready and not self._abandon and not self._drained_locked():
                    self._cv.wait()
                if self._abandon or not self._ready:
                    self._terminated = True  # drained (or abandoned): no IO thread will run again
                    self._cv.notify_all()
                    return
                connection = self._ready.popleft()
                self._busy += 1
            try:
                connection.process()
            except Exception as exc:  # an internal failure: reported now, connection closed, thread goes on
                self._connection_failed(connection, exc)
            with self._lock:
                self._busy -= 1
                self.processed += 1
                if self._drained_locked():
                    self._cv.notify_all()  # the last busy worker: let the idle ones see the drain is over

    def _record_error(self, exc: BaseException) -> None:
        with self._lock:
            self.error_count += 1
            if len(self.errors) < RECENT_FAILURES:
                self.errors.append(exc)

    def _connection_failed(self, connection: Connection, exc: Exception) -> None:
        self._record_error(exc)
        try:
            connection.close()
        except Exception as close_exc:  # never let a failure take the IO thread down
            self._record_error(close_exc)
        if self.on_error is not None:
            try:
                self.on_error(connection, exc)
            except Exception as hook_exc:
                self._record_error(hook_exc)

    def _count_delivery_failure(self) -> None:
        with self._lock:
            self.delivery_failures += 1

    def stop(self, timeout: float = 10.0) -> None:
        """Drain: run every connection that is ready or gets scheduled by the connections being
        processed, until no IO thread is busy and nothing is ready; then the workers exit.  Raises
        ``TimeoutError`` if a worker is not done within ``timeout`` (the workers are then told to
        leave after their current connection), else the first internal failure, if any."""
        with self._lock:
            self._stopping = True
            self._cv.notify_all()
        for h in self._handles:
            if not h.join(timeout):
                with self._lock:
                    self._abandon = True
                    self._cv.notify_all()
                raise TimeoutError(f"IOThreadPool {self.name!r}: worker {h.name!r} did not stop in {timeout}s")
        if self.errors:
            raise RuntimeError(f"IOThreadPool {self.name!r}: {self.error_count} internal failure(s) in process()") \
                from self.errors[0]


class Connection:
    """Steps 5-8 and 12.  ``sink(consumer, msg_id)`` receives each delivered message on the IO thread;
    if it raises, the failure policy of the module docstring applies (``on_delivery_error`` hook)."""

    def __init__(self, name: str, *, pool: IOThreadPool | None = None, sched: Any = REAL,
                 sink: Callable[[QueueConsumer, int], None] | None = None,
                 on_delivery_error: Callable[[DeliveryFailure], None] | None = None) -> None:
        self.name = name
        self.pool = pool
        self._lock = sched.lock(f"conn[{name}].lock")
        self._sched = sched
        self._pending: dict[Session, None] = {}
        self.scheduled = False
        self.closed = False
        self.sessions: list[Session] = []
        self.outbox: list[tuple[Hashable, int]] = []
        self.sink = sink if sink is not None else self._to_outbox
        self.on_delivery_error = on_delivery_error
        self.delivery_failures = 0
        self.recent_failures: deque[DeliveryFailure] = deque(maxlen=RECENT_FAILURES)
        self.hook_errors: list[BaseException] = []  # hooks that raised (first RECENT_FAILURES)

    def _to_outbox(self, consumer: QueueConsumer, msg_id: int) -> None:
        self.outbox.append((consumer.id, msg_id))

    def create_session(self, name: str | None = None) -> Session:
        s = Session(self, name or f"{self.name}/s{len(self.sessions)}")
        self.sessions.append(s)
        return s

    def notify_work(self, session: Session) -> None:
        """Step 5/6: a session wants work; schedule this connection unless it already is (or is closed)."""
        with self._lock:
            if self.closed:
                return
            self._pending[session] = None
            if self.scheduled:
                return
            self.scheduled = True
        if self.pool is not None:
            self.pool.schedule(self)

    def process(self) -> int:
        """Steps 7-8 (on an IO thread, or the caller in step-by-step mode).  Returns how many
        messages went to the sink without failing."""
        sent = 0
        while True:
            with self._lock:
                sessions = self._pending
                if not sessions or self.closed:
                    self._pending = {}
                    self.scheduled = False
                    return sent
                self._pending = {}
            for session in sessions:
                sent += session.process()

    def has_pending_work(self) -> bool:
        return bool(self._pending)

    def close(self) -> None:
        """Close the connection: later notifications are ignored and every consumer of its sessions
        is removed from its queue (``Queue.remove_consumer``: what it holds is released and its
        wake-up handed over).  Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._pending = {}
        first: Exception | None = None
        for session in self.sessions:
            for target in session.targets:
                for consumer in list(target.consumers):
                    try:
                        consumer.queue.remove_consumer(consumer)
                    except Exception as exc:  # remove the others all the same
                        first = first or exc
        if first is not None:
            raise first

    def _delivery_failed(self, consumer: QueueConsumer, msg_id: int, exc: Exception) -> None:
        """The failure policy for a raising sink (module docstring): release, report, go on."""
        if consumer.acquires:
            outcome, failures, payload = consumer.queue.delivery_failed(msg_id, consumer)
        else:
            outcome, failures, payload = "browsed", 0, None
        failure = DeliveryFailure(self.name, consumer, msg_id, exc, outcome, failures, payload)
        with self._lock:
            self.delivery_failures += 1
            self.recent_failures.append(failure)
        pool = self.pool
        if pool is not None:
            pool._count_delivery_failure()
        hook = self.on_delivery_error or (pool.on_delivery_error if pool is not None else None)
        if hook is not None:
            try:
                hook(failure)
            except Exception as hook_exc:  # a broken hook is an internal error, never a stalled IO thread
                with self._lock:
                    if len(self.hook_errors) < RECENT_FAILURES:
                        self.hook_errors.append(hook_exc)
                if pool is not None:
                    pool._record_error(hook_exc)


class Session:
    """Steps 4 and 9."""

    def __init__(self, connection: Connection, name: str) -> None:
        self.connection = connection
        self.name = name
        self._lock = connection._sched.lock(f"session[{name}].lock")
        self._pending: dict[ConsumerTarget, None] = {}
        self.targets: list[ConsumerTarget] = []

    def create_target(self, name: str | None = None, batch: int = DEFAULT_BATCH) -> ConsumerTarget:
        t = ConsumerTarget(self, name or f"{self.name}/t{len(self.targets)}", batch)
        self.targets.append(t)
        return t

    def notify_work(self, target: ConsumerTarget) -> None:
        with self._lock:
            self._pending[target] = None
        self.connection.notify_work(self)

    def process(self) -> int:
        with self._lock:
            targets = self._pending
            self._pending = {}
        sent = 0
        for target in targets:
            sent += target.process()
        return sent


class ConsumerTarget:
    """Steps 3, 10-12: the broker-side representation of a consuming client link; one consumer per
    queue it consumes from (multi-queue consumers)."""

    def __init__(self, session: Session, name: str, batch: int) -> None:
        if batch < 1:
            raise ValueError(f"ConsumerTarget {name!r}: batch must be >= 1, got {batch}")
        self.session = session
        self.name = name
        self.batch = batch
        self._lock = session.connection._sched.lock(f"target[{name}].lock")
        self._pending: dict[QueueConsumer, None] = {}
        self.consumers: list[QueueConsumer] = []

    def subscribe(self, queue: Queue, consumer_id: Hashable, **kwargs: Any) -> QueueConsumer:
        """Create this target's consumer on ``queue`` (keyword arguments as ``Queue.add_consumer``)."""
        c = queue.add_consumer(consumer_id, listener=self.notify_work, **kwargs)
        self.consumers.append(c)
        return c

    def notify_work(self, consumer: QueueConsumer) -> None:
        """Step 3/4: a consumer of this target was notified of work."""
        with self._lock:
            self._pending[consumer] = None
        self.session.notify_work(self)

    def process(self) -> int:
        with self._lock:
            consumers = self._pending
            self._pending = {}
        sent = 0
        connection = self.session.connection
        sink = connection.sink
        for consumer in consumers:
            if consumer.closed:
                continue
            queue = consumer.queue
            for _ in range(self.batch):
                msg_id = queue.deliver_single_message(consumer)  # step 11
                if msg_id is None:
                    break
                if consumer.closed:
                    # closed while pulling: the link is gone (upstream doSend: entry.release(consumer));
                    # remove_consumer has normally released it already
                    if consumer.acquires:
                        queue.release_owned(msg_id, consumer)
                    break
                try:
                    sink(consumer, msg_id)  # step 12
                except Exception as exc:
                    connection._delivery_failed(consumer, msg_id, exc)
                else:
                    sent += 1
            else:
                self.notify_work(consumer)  # batch used up: come back after the others
        return sent
