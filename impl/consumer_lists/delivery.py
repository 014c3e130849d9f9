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

``IOThreadPool``: a ready deque under one lock with a condition; workers pop and run connections.
A failure in ``process`` is recorded in ``errors`` (never swallowed) and re-raised by ``stop``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from conq.impl.consumer_lists.queue import Queue, QueueConsumer
from conq.impl.scheduling import REAL

__all__ = ["Connection", "ConsumerTarget", "IOThreadPool", "Session"]

DEFAULT_BATCH = 64  # messages one consumer may pull before yielding to the others (fairness)


class IOThreadPool:
    """Step 7: IO threads that run scheduled connections."""

    def __init__(self, sched: Any = REAL, threads: int = 2, name: str = "io") -> None:
        if threads < 1:
            raise ValueError(f"IOThreadPool {name!r}: threads must be >= 1, got {threads}")
        self._sched = sched
        self.name = name
        self._n = threads
        self._lock = sched.lock(f"{name}.lock")
        self._cv = sched.condition(self._lock, f"{name}.ready")
        self._ready: deque[Connection] = deque()
        self._stopping = False
        self._handles: list[Any] = []
        self.errors: list[BaseException] = []
        self.processed = 0

    def start(self) -> IOThreadPool:
        for i in range(self._n):
            self._handles.append(self._sched.spawn(self._worker, f"{self.name}-{i}"))
        return self

    def schedule(self, connection: Connection) -> None:
        with self._lock:
            if self._stopping:
                raise RuntimeError(f"IOThreadPool {self.name!r}: schedule({connection.name!r}) after stop")
            self._ready.append(connection)
            self._cv.notify()

    def _worker(self) -> None:
        while True:
            with self._lock:
                while not self._ready and not self._stopping:
                    self._cv.wait()
                if not self._ready:
                    return  # stopping and nothing left
                connection = self._ready.popleft()
            try:
                connection.process()
            except Exception as exc:  # recorded; stop() re-raises
                with self._lock:
                    self.errors.append(exc)
            with self._lock:
                self.processed += 1

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the ready queue, stop the workers, and raise the first worker failure if any."""
        with self._lock:
            self._stopping = True
            self._cv.notify_all()
        for h in self._handles:
            if not h.join(timeout):
                raise TimeoutError(f"IOThreadPool {self.name!r}: worker {h.name!r} did not stop in {timeout}s")
        if self.errors:
            raise RuntimeError(f"IOThreadPool {self.name!r}: {len(self.errors)} failure(s) in process()") from self.errors[0]


class Connection:
    """Steps 5-8 and 12.  ``sink(consumer, msg_id)`` receives each delivered message on the IO thread."""

    def __init__(self, name: str, *, pool: IOThreadPool | None = None, sched: Any = REAL,
                 sink: Callable[[QueueConsumer, int], None] | None = None) -> None:
        self.name = name
        self.pool = pool
        self._lock = sched.lock(f"conn[{name}].lock")
        self._sched = sched
        self._pending: dict[Session, None] = {}
        self.scheduled = False
        self.sessions: list[Session] = []
        self.outbox: list[tuple[Hashable, int]] = []
        self.sink = sink if sink is not None else self._to_outbox

    def _to_outbox(self, consumer: QueueConsumer, msg_id: int) -> None:
        self.outbox.append((consumer.id, msg_id))

    def create_session(self, name: str | None = None) -> Session:
        s = Session(self, name or f"{self.name}/s{len(self.sessions)}")
        self.sessions.append(s)
        return s

    def notify_work(self, session: Session) -> None:
        """Step 5/6: a session wants work; schedule this connection unless it already is."""
        with self._lock:
            self._pending[session] = None
            if self.scheduled:
                return
            self.scheduled = True
        if self.pool is not None:
            self.pool.schedule(self)

    def process(self) -> int:
        """Steps 7-8 (on an IO thread, or the caller in step-by-step mode).  Returns how many
        messages went to the sink."""
        sent = 0
        while True:
            with self._lock:
                sessions = self._pending
                if not sessions:
                    self.scheduled = False
                    return sent
                self._pending = {}
            for session in sessions:
                sent += session.process()

    def has_pending_work(self) -> bool:
        return bool(self._pending)


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
        sink = self.session.connection.sink
        for consumer in consumers:
            if consumer.closed:
                continue
            queue = consumer.queue
            for _ in range(self.batch):
                msg_id = queue.deliver_single_message(consumer)  # step 11
                if msg_id is None:
                    break
                sink(consumer, msg_id)  # step 12
                sent += 1
            else:
                self.notify_work(consumer)  # batch used up: come back after the others
        return sent
