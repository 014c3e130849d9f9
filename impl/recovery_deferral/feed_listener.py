"""The feed side: ``ConcurrentFeedListener`` wraps the customer's OddsFeedListener; the legacy
``SerialFeedListener`` is the baseline it replaces.

Sources: seed 004 "Legacy SDK issue" (the RabbitMQ thread must only read messages and hand each
off; events of one match in strict sequence, other matches need not wait), "Implementation"
(``ConcurrentOddsFeedListener`` wraps each event in a task; a hash of the event ID picks the
queue), "Deferring of ProducerUp" (every task is tracked per RecoveryContext), "Configuration"
(``handleErrorsAsynchronously``).  Upstream ``sdk-core/.../listener/concurrent/oddsfeed/``:
``ConcurrentOddsFeedListener.java``, ``task/TaskQueuer.java``, ``task/TaskAllocator.java``,
``task/TaskExecutor.java``, ``task/TrackedTask.java``, ``errorhandler/AsynchronousErrorHandler.java``,
``errorhandler/SynchronousErrorHandler.java``.

The customer's listener is any object with ``on_event(event: FeedEvent)`` and
``on_error(error: ErrorEvent)``.

What the feed thread does (``on_event``/``on_error``, called by the SDK's feed thread(s))
---------------------------------------------------------------------------------------
1. pick the queue: ``queue_index(event_id, queues)`` (floor modulo, DEV-008);
2. ``tracker.task_allocated(context)`` -- *before* the task can be seen by a worker (DEV-009);
3. ``pool.submit(queue, task)``; if the task was not placed after all (``drop``, ``raise``, closed)
   ``tracker.task_withdrawn(context)`` undoes step 2.
It never calls the customer's listener -- except for an error event when
``handle_errors_asynchronously`` is False, which the seed's configuration puts on the feed thread.

Error events (DEV-007, DEV-010): with ``handle_errors_asynchronously`` an error about a sport event
goes to that event's queue (so it cannot overtake earlier messages of its match), an error about no
event goes to a queue chosen by a seeded random generator (the seed's "spread randomly"); both are
tracked, under the error's RecoveryContext when it has one (an unparsable *resent* message is part of
what its recovery's ProducerUp waits for) and under NONE otherwise.

What a worker does (``_run_task``): ``task_started``, the customer's listener, then ``task_completed``
in a ``finally``.  Whatever the listener raises (``BaseException`` included) is caught, counted and
logged: the worker and its queue go on with the next task (seed 004 "Solution": isolate the
customer's listener).  A listener that blocks holds its worker and its queue only; other queues are
served by the other workers -- until the feed thread needs room on the blocked queue (DEV-001: it
then waits, which is the price of losing nothing).

Concurrency argument: the listener's own state is the error counters under ``_stats_lock`` (a leaf)
and the random generator for error routing under ``_rng_lock`` (a leaf).  Ordering and exclusion are
the pool's (``demux``), counting is the tracker's (``tracker``); the order "count, then enqueue" on
the feed thread and "run, then complete" on the worker is the whole argument for the count (see the
tracker's docstring).  Several feed threads may call concurrently (one per producer session): each
hand-off is independent, and the order of two events of one match is the order in which their
hand-offs took the pool's lock.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Protocol

from conq.impl.recovery_deferral.config import ConcurrentListenerConfig
from conq.impl.recovery_deferral.demux import PoolSnapshot, PoolStats, TaskPool
from conq.impl.recovery_deferral.events import (
    ErrorEvent,
    FeedEvent,
    RecoveryContext,
    queue_index,
)
from conq.impl.recovery_deferral.tracker import TaskLifecycleTracker
from conq.impl.scheduling import REAL

__all__ = ["ConcurrentFeedListener", "FeedListenerStats", "OddsFeedListener", "SerialFeedListener"]

log = logging.getLogger(__name__)


class OddsFeedListener(Protocol):
    """The customer's listener (seed 004: ``OddsFeedListener``, one method per message type upstream;
    one entry point per kind of item here)."""

    def on_event(self, event: FeedEvent) -> None: ...

    def on_error(self, error: ErrorEvent) -> None: ...


@dataclass(frozen=True)
class FeedListenerStats:
    pool: PoolStats | None  # None in legacy mode
    listener_errors: int  # calls of the customer's listener that raised
    on_caller_thread: int  # customer calls made on the calling (feed) thread (legacy / sync errors)


class _Task:
    __slots__ = ("context", "error", "item")

    def __init__(self, item: Any, context: RecoveryContext, error: bool) -> None:
        self.item = item
        self.context = context
        self.error = error

    def __repr__(self) -> str:
        return f"<{'error' if self.error else 'event'} {self.item!r}>"


class ConcurrentFeedListener:
    def __init__(
        self,
        customer: OddsFeedListener,
        *,
        config: ConcurrentListenerConfig,
        tracker: TaskLifecycleTracker,
        sched: Any = REAL,
        name: str = "feed",
        seed: int = 0,
    ) -> None:
        self._customer = customer
        self._config = config
        self._tracker = tracker
        self._stats_lock = sched.lock(f"{name}.stats")
        self._rng_lock = sched.lock(f"{name}.rng")
        self._rng = random.Random(seed)
        self._listener_errors = 0
        self._on_caller = 0
        self.last_listener_error: BaseException | None = None
        self._queues = config.queue_count
        self._pool = TaskPool(
            queues=self._queues,
            threads=config.threads,
            capacity=config.queue_size,
            on_full=config.on_queue_full,
            run=self._run_task,
            sched=sched,
            name=name,
            manual=config.manual,
        )

    # -- called by the feed thread(s) -------------------------------------------------------------------
    def on_event(self, event: FeedEvent) -> bool:
        """Hand ``event`` off to its queue.  True when placed (False only under ``"drop"``)."""
        return self._hand_off(queue_index(event.event_id, self._queues), _Task(event, event.context, False))

    def on_error(self, error: ErrorEvent) -> bool:
        if not self._config.handle_errors_asynchronously:
            # seed 004 "Configuration": "whether error events are handled on the RabbitMQ thread"
            self._call_customer(self._customer.on_error, error, on_caller=True)
            return True
        if error.event_id is not None:
            index = queue_index(error.event_id, self._queues)  # DEV-007: behind its match's messages
        else:
            with self._rng_lock:
                index = self._rng.randrange(self._queues)  # no event: spread randomly (DEMUX-025)
        return self._hand_off(index, _Task(error, error.context, True))

    def _hand_off(self, index: int, task: _Task) -> bool:
        # DEV-009: counted before any worker can see the task, so pending(context) is never below the
        # number of the context's tasks that are queued or running.
        self._tracker.task_allocated(task.context)
        try:
            placed = self._pool.submit(index, task)
        except BaseException:
            self._tracker.task_withdrawn(task.context)  # not placed: QueueFull / ListenerClosed
            raise
        if not placed:
            self._tracker.task_withdrawn(task.context)  # "drop" (upstream): lost, and not waited for
        return placed

    # -- called by a worker -----------------------------------------------------------------------------
    def _run_task(self, task: _Task) -> None:
        self._tracker.task_started(task.context)
        try:
            self._call_customer(self._customer.on_error if task.error else self._customer.on_event, task.item)
        finally:
            self._tracker.task_completed(task.context)

    def _call_customer(self, method: Any, item: Any, *, on_caller: bool = False) -> None:
        if on_caller:
            with self._stats_lock:
                self._on_caller += 1
        try:
            method(item)
        except BaseException as exc:  # noqa: BLE001 - the customer's failure never reaches our threads
            with self._stats_lock:
                self._listener_errors += 1
                self.last_listener_error = exc
            log.warning("customer listener raised %r on %r", exc, item)

    # -- manual mode (``config.manual``: a step-by-step driver runs the worker turns) ---------------------
    def run_one(self, index: int) -> None:
        """One worker turn on queue ``index`` on the calling thread (``TaskPool.run_one``): the head
        task is started, the customer's listener called and the task completed, as a worker does."""
        self._pool.run_one(index)

    def pool_snapshot(self) -> PoolSnapshot:
        """The queues' tasks, each queue's running task and the feed threads waiting for room (each
        task has ``item``, the event or error, and ``context``)."""
        return self._pool.snapshot()

    # -- observation and shutdown ------------------------------------------------------------------------
    def stats(self) -> FeedListenerStats:
        with self._stats_lock:
            errors, on_caller = self._listener_errors, self._on_caller
        return FeedListenerStats(self._pool.stats(), errors, on_caller)

    def worker_idents(self) -> frozenset[int]:
        return self._pool.worker_idents()

    def alive_threads(self) -> list[str]:
        return self._pool.alive_threads()

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop taking events, run every queued task, join the workers (``demux.TaskPool.close``)."""
        self._pool.close(timeout)


class SerialFeedListener:
    """The legacy pipeline (``enabled = False``): the customer's listener runs on the calling (feed)
    thread, one event at a time for every producer (seed 004 "Legacy SDK issue": "Producers are
    operating in parallel, but all events are processed in serial").  One lock serialises callers
    from several feed threads, as the legacy SDK's locks do.  Customer exceptions are caught and
    counted, as in the concurrent listener, so both pipelines see the same failures."""

    def __init__(self, customer: OddsFeedListener, *, name: str = "feed-legacy", sched: Any = REAL) -> None:
        self._customer = customer
        self._lock = sched.lock(f"{name}.serial")
        self._stats_lock = sched.lock(f"{name}.stats")
        self._listener_errors = 0
        self._on_caller = 0
        self.last_listener_error: BaseException | None = None

    def on_event(self, event: FeedEvent) -> bool:
        self._call(self._customer.on_event, event)
        return True

    def on_error(self, error: ErrorEvent) -> bool:
        self._call(self._customer.on_error, error)
        return True

    def _call(self, method: Any, item: Any) -> None:
        with self._lock:
            try:
                method(item)
            except BaseException as exc:  # noqa: BLE001
                with self._stats_lock:
                    self._listener_errors += 1
                    self.last_listener_error = exc
                log.warning("customer listener raised %r on %r", exc, item)
            finally:
                with self._stats_lock:
                    self._on_caller += 1

    def stats(self) -> FeedListenerStats:
        with self._stats_lock:
            return FeedListenerStats(None, self._listener_errors, self._on_caller)

    def worker_idents(self) -> frozenset[int]:
        return frozenset()

    def alive_threads(self) -> list[str]:
        return []

    def close(self, timeout: float | None = 30.0) -> None:
        return None
