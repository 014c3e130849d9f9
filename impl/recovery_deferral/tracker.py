"""TaskLifecycleTracker: per RecoveryContext, how many tasks were allocated, started and completed.

Sources: seed 004 "Deferring of ProducerUp" ("TaskLifecycleTracker tracks the following for each
event task: task allocated to queue, task started, task completed"; "we must defer the ProducerUp
until all tasks for that RecoveryContext have completed"); upstream
``sdk-core/.../listener/concurrent/TaskLifecycleTracker.java`` and ``PendingTasks.java``.

What is counted
---------------
Per context four counters, all under one lock: ``allocated`` (a task was counted for a queue),
``withdrawn`` (a counted task was *not* placed after all: dropped by the ``drop`` policy, refused by
``raise``, or the listener closed while the feed thread waited for room), ``started`` (a worker took
it), ``completed`` (the customer's listener returned or raised).  ``pending = allocated - withdrawn -
completed``.  A context never seen reads 0 (upstream: ``getOrDefault(NO_PENDING_TASKS)``).

Why the count is right under every thread ordering (spec/deviations.md DEV-009)
-------------------------------------------------------------------------------
The feed listener calls ``task_allocated`` *before* it puts the task on a queue, and the worker calls
``task_completed`` in a ``finally`` after the customer's listener returned.  The queue hand-off
(pool lock release by the feed thread, acquire by the worker) orders the increment before the
worker's ``task_started``, so for every context at every instant::

    tasks of the context queued or running  <=  pending

with equality except while a feed thread is between its increment and its enqueue (or between a
failed enqueue and ``task_withdrawn``), where pending is one higher per such feed thread.  So
``pending == 0`` implies that no task of the context is queued or running: a deferred ProducerUp
that reads 0 is never early.  Upstream counts *after* ``executor.submit`` returned; a worker can
then complete the task first, ``taskCompleted`` finds no entry and ignores it, and the late
``taskAllocated`` leaves the count at 1 for ever (the model's ``upstream-count-after-enqueue``
variant; the deterministic hammer in tests/impl/recovery_deferral shows the same on this code).

Pending never goes negative: ``completed`` is only incremented for a task that was started, and
``started`` only for a task that was allocated and not withdrawn; the tracker checks both and
records any breach in ``anomalies`` (a bug, never expected) instead of raising on a worker thread.

The lock is a leaf: no other lock is taken while it is held, and the drained observers (the
deferred-ProducerUp scheduler's wake-up) are called after it is released.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from conq.impl.recovery_deferral.events import RecoveryContext
from conq.impl.scheduling import REAL

__all__ = ["ContextCounts", "TaskLifecycleTracker"]

_ALLOCATED, _WITHDRAWN, _STARTED, _COMPLETED = range(4)


class ContextCounts(NamedTuple):
    allocated: int
    withdrawn: int
    started: int
    completed: int

    @property
    def pending(self) -> int:
        return self.allocated - self.withdrawn - self.completed


class TaskLifecycleTracker:
    def __init__(self, sched: Any = REAL) -> None:
        self._lock = sched.lock("tracker")
        self._counts: dict[RecoveryContext, list[int]] = {}
        #: per producer, the newest request id of a task counted so far (a recovery whose resent
        #: events arrived, whether or not its onRecoveryInitiated did)
        self._newest: dict[int, int] = {}
        #: copy-on-write tuple: read under the lock, called after it is released
        self._observers: tuple[Callable[[RecoveryContext], None], ...] = ()
        #: invariant breaches (a task completed that was never started, ...); always empty
        self.anomalies: list[str] = []

    def add_drained_observer(self, fn: Callable[[RecoveryContext], None]) -> None:
        """``fn(context)`` is called, on the thread that made it so and after the tracker's lock is
        released, each time a context's pending count drops to 0."""
        with self._lock:
            self._observers = (*self._observers, fn)

    # -- the three lifecycle points (and the undo of the first) -------------------------------------
    def task_allocated(self, context: RecoveryContext) -> None:
        with self._lock:
            c = self._counts.get(context)
            if c is None:
                c = self._counts[context] = [0, 0, 0, 0]
                if context.valid and context.request_id > self._newest.get(context.producer_id, 0):
                    self._newest[context.producer_id] = context.request_id
            c[_ALLOCATED] += 1

    def task_withdrawn(self, context: RecoveryContext) -> None:
        with self._lock:
            c = self._counts.get(context)
            if c is None or c[_ALLOCATED] - c[_WITHDRAWN] - c[_STARTED] <= 0:
                self.anomalies.append(f"{context}: withdrawn but no allocated task is waiting")
                return
            c[_WITHDRAWN] += 1
            drained = c[_ALLOCATED] - c[_WITHDRAWN] - c[_COMPLETED] == 0
            observers = self._observers if drained else ()
        for fn in observers:
            fn(context)

    def task_started(self, context: RecoveryContext) -> None:
        with self._lock:
            c = self._counts.get(context)
            if c is None or c[_STARTED] >= c[_ALLOCATED] - c[_WITHDRAWN]:
                self.anomalies.append(f"{context}: started but never allocated")
                return
            c[_STARTED] += 1

    def task_completed(self, context: RecoveryContext) -> None:
        with self._lock:
            c = self._counts.get(context)
            if c is None or c[_COMPLETED] >= c[_STARTED]:
                self.anomalies.append(f"{context}: completed but never started")
                return
            c[_COMPLETED] += 1
            drained = c[_ALLOCATED] - c[_WITHDRAWN] - c[_COMPLETED] == 0
            observers = self._observers if drained else ()
        for fn in observers:
            fn(context)

    # -- reading --------------------------------------------------------------------------------------
    def newest_request(self, producer_id: int) -> int:
        """The newest request id of ``producer_id`` a task was counted under (0: none): the SDK resends
        a recovery's events as soon as it asked for them, so they can arrive before its
        ``onRecoveryInitiated`` (the global listener reads this: ``ConcurrentGlobalEventsListener``)."""
        with self._lock:
            return self._newest.get(producer_id, 0)

    def pending(self, context: RecoveryContext) -> int:
        with self._lock:
            c = self._counts.get(context)
            return 0 if c is None else c[_ALLOCATED] - c[_WITHDRAWN] - c[_COMPLETED]

    def counts(self, context: RecoveryContext) -> ContextCounts:
        with self._lock:
            c = self._counts.get(context)
            return ContextCounts(0, 0, 0, 0) if c is None else ContextCounts(*c)

    def snapshot(self) -> dict[RecoveryContext, ContextCounts]:
        """Every context's counts, read atomically (one lock hold)."""
        with self._lock:
            return {ctx: ContextCounts(*c) for ctx, c in self._counts.items()}
