"""The task queues and their worker pool: N bounded FIFO queues, a pool of worker threads, at most
one worker per queue at a time.

Sources: seed 004 "Implementation" ("The ConcurrentOddsFeedListener wraps each event in a Runnable
task and these tasks are placed onto queues for processing.  An ExecutorService using a pool of
worker threads processes these task queues in parallel"; "all events for a specific match always
end up on the same queue, and this satisfies the requirement that all events per match are
processed in strict sequence"); "Configuration" (``queueSize``); upstream
``sdk-core/.../listener/concurrent/oddsfeed/task/TaskExecutor.java``,
``executor/WorkerExecutorServiceFactory.java``, ``executor/QueueFactory.java`` (one single-thread
executor with an ``ArrayBlockingQueue`` per queue).

Structure
---------
Upstream gives every queue its own thread.  Here any number of queues share a pool of ``threads``
workers through a *ready list*: a queue with work and no worker is on the ready list exactly once; a
worker takes the queue at the head of the ready list, runs **one** task of it, and puts the queue
back at the tail if it still has tasks (else clears its ``scheduled`` mark).  With ``queues ==
threads`` (the default) this behaves like upstream; with fewer workers than queues the queues are
served round-robin, one task per turn, so no queue starves another.

Full queue (spec/deviations.md DEV-001): ``"block"`` -- the feed thread waits on the queue's
``room`` condition until a worker has taken a task of that queue (back-pressure onto the broker;
nothing is lost, per-match order holds, and the feed thread still never runs customer code);
``"drop"`` -- upstream: the task is not placed and ``submit`` returns False (counted in ``dropped``);
``"raise"`` -- ``QueueFull``.  How often and how long feed threads blocked is counted
(``blocked``, ``blocked_seconds``) and ``blocked_now`` says how many are blocked at this moment,
so a stuck customer listener is visible.  No deadlock: only feed threads wait for room, workers
never submit, so a worker never waits for a worker.

Concurrency argument
--------------------
One lock (``_lock``) protects every queue's deque and ``scheduled`` mark, the ready list and the
counters; conditions on it: ``_work`` (workers wait for a ready queue), one ``room`` per queue (feed
threads wait for space), ``_idle`` (close waits for the drain).  The lock is never held while a task
runs, and no other lock is taken while it is held (it is a leaf; the tracker is called by the feed
listener and by the task itself, outside it).

*At most one worker per queue*: invariant ``scheduled(q) <=> q is on the ready list or a worker holds
it``, and a queue is on the ready list at most once.  ``submit`` appends ``q`` to the ready list only
when it sets ``scheduled`` from False; a worker pops ``q`` off the ready list (it now holds it) and
either re-appends it or clears ``scheduled`` when it releases it, both under the lock.  Only the
holder pops tasks from ``q``.

*Per-queue FIFO, so per-match order*: tasks are appended at the tail by ``submit`` and popped at the
head by the single holder; the holder finishes a task before releasing the queue, and the next
holder acquires the queue through the lock, so task *i*'s run happens-before task *i+1*'s.

*Nothing lost, nothing run twice*: a task is in exactly one deque until its holder pops it, and the
pop and the ``_queued``/``_running`` bookkeeping are one critical section.  A queue with tasks is
always scheduled (``submit`` schedules it; the releasing holder re-schedules it if non-empty), so
every queued task is eventually run while any worker is free.

Nothing relies on the GIL: every shared field is read and written under ``_lock``.

Manual mode (``manual=True``): a step-by-step driver
---------------------------------------------------
No worker thread is started.  ``run_one(index)`` performs exactly one worker turn (take the head task
of queue ``index``, run it, release the queue) on the calling thread, through the same code as a
worker (``_take_locked``, ``_turn``, ``_release_locked``), and only when a free worker of the pool
could take that queue now: at most ``threads`` turns at once, and a queue is taken only from the
first ``threads - running`` entries of the ready list (those the idle workers would pop).  A driver
that calls ``run_one`` from threads of its own -- e.g. one per task, blocking the customer's listener
until it decides the call returns -- decides every interleaving of the pool without changing what a
turn does.  ``snapshot()`` reads the queues' contents, the running task of each queue and the feed
threads waiting for room, atomically.  ``close`` drains the queues on the calling thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conq.impl.scheduling import REAL

__all__ = ["ListenerClosed", "NotRunnable", "PoolSnapshot", "PoolStats", "QueueFull", "ShutdownTimeout", "TaskPool"]

log = logging.getLogger(__name__)


class QueueFull(RuntimeError):
    """``on_queue_full = "raise"`` and the event's queue is full."""


class ListenerClosed(RuntimeError):
    """The listener is closed (or closed while the caller waited for room): the event was not taken."""


class NotRunnable(RuntimeError):
    """Manual mode: no free worker of the pool could take that queue now (it is empty, held by a
    worker, not among the queues the idle workers would pop, or every worker is busy)."""


class ShutdownTimeout(RuntimeError):
    """``close`` could not drain the queues or join every thread in time; ``threads`` names the ones
    still alive (typically a worker stuck in a customer listener that never returns)."""

    def __init__(self, message: str, threads: list[str]) -> None:
        super().__init__(message)
        self.threads = threads


@dataclass(frozen=True)
class PoolStats:
    submitted: int  # tasks placed on a queue
    dropped: int  # "drop": tasks not placed because their queue was full
    refused: int  # "raise": QueueFull raised
    blocked: int  # hand-offs that had to wait for room
    blocked_seconds: float  # total time feed threads waited for room
    blocked_now: int  # feed threads waiting for room right now
    completed: int  # tasks run to the end (the customer returned or raised)
    worker_errors: int  # a task runner itself raised (a bug; customer errors are the runner's)
    queued: int  # tasks waiting on the queues now
    running: int  # tasks being run now
    max_queued: int  # high-water mark of ``queued``
    high_water: tuple[int, ...]  # per queue, the most tasks it ever held at once


@dataclass(frozen=True)
class PoolSnapshot:
    """The pool's contents at one instant (one lock hold)."""

    queues: tuple[tuple[Any, ...], ...]  # per queue, the tasks waiting, head first
    running: tuple[Any, ...]  # per queue, the task its worker is running, or None
    waiting: tuple[int, ...]  # per queue, the feed threads waiting for room on it


class _TaskQueue:
    __slots__ = ("current", "high_water", "items", "room", "scheduled", "waiting")

    def __init__(self, room: Any) -> None:
        self.items: deque[Any] = deque()
        self.room = room
        self.scheduled = False
        self.high_water = 0
        self.current: Any = None  # the task its holder is running (None: not held)
        self.waiting = 0  # feed threads waiting for room


class TaskPool:
    """``queues`` FIFO queues of ``capacity`` tasks (None = unbounded) served by ``threads`` workers;
    ``run(task)`` is called on a worker for each task and must not raise (the pool still survives
    it if it does)."""

    def __init__(
        self,
        *,
        queues: int,
        threads: int,
        capacity: int | None,
        on_full: str,
        run: Callable[[Any], None],
        sched: Any = REAL,
        name: str = "demux",
        manual: bool = False,
    ) -> None:
        if queues < 1 or threads < 1:
            raise ValueError("queues and threads must be >= 1")
        if on_full not in ("block", "drop", "raise"):
            raise ValueError(f"on_full must be 'block', 'drop' or 'raise', got {on_full!r}")
        self._sched = sched
        self._lock = sched.lock(f"{name}.pool")
        self._work = sched.condition(self._lock, f"{name}.work")
        self._idle = sched.condition(self._lock, f"{name}.idle")
        self._queues = [_TaskQueue(sched.condition(self._lock, f"{name}.room{i}")) for i in range(queues)]
        self._ready: deque[int] = deque()
        self._capacity = capacity
        self._on_full = on_full
        self._run = run
        self._name = name
        self._closed = False
        self._stopping = False
        # counters (under _lock)
        self._submitted = self._dropped = self._refused = 0
        self._blocked = self._blocked_now = 0
        self._blocked_seconds = 0.0
        self._completed = self._worker_errors = 0
        self._queued = self._running = self._max_queued = 0
        self._worker_idents: set[int] = set()
        self._threads = threads
        self._manual = manual
        self._handles = [] if manual else [sched.spawn(self._worker, f"{name}-worker-{i + 1:02d}") for i in range(threads)]

    @property
    def queue_count(self) -> int:
        return len(self._queues)

    # -- the feed side --------------------------------------------------------------------------------
    def submit(self, index: int, task: Any) -> bool:
        """Place ``task`` at the tail of queue ``index``.  True when placed; False when dropped
        (``"drop"`` and the queue is full).  Raises ``QueueFull`` (``"raise"``) or
        ``ListenerClosed``.  With ``"block"`` a full queue makes the caller wait for room."""
        with self._lock:
            placed = self._place_locked(index, task)
        if not placed:
            log.error("%s: queue %d full, task %r dropped (on_queue_full='drop')", self._name, index, task)
        return placed

    def _place_locked(self, index: int, task: Any) -> bool:
        if self._closed:
            raise ListenerClosed(f"{self._name} is closed")
        q = self._queues[index]
        cap = self._capacity
        if cap is not None and len(q.items) >= cap:
            if self._on_full == "drop":
                self._dropped += 1
                return False
            if self._on_full == "raise":
                self._refused += 1
                raise QueueFull(f"{self._name}: queue {index} is full ({cap} tasks)")
            self._blocked_now += 1
            q.waiting += 1
            t0 = time.perf_counter()  # a metric only: no decision depends on it
            try:
                while len(q.items) >= cap and not self._closed:
                    q.room.wait()
            finally:
                self._blocked_now -= 1
                q.waiting -= 1
                self._blocked += 1
                self._blocked_seconds += time.perf_counter() - t0
            if self._closed:
                raise ListenerClosed(f"{self._name} was closed while the feed thread waited for room")
        self._enqueue_locked(index, q, task)
        return True

    def _enqueue_locked(self, index: int, q: _TaskQueue, task: Any) -> None:
        """Append ``task`` at the tail of queue ``index`` and make the queue ready if it is not."""
        q.items.append(task)
        self._submitted += 1
        self._queued += 1
        q.high_water = max(q.high_water, len(q.items))
        self._max_queued = max(self._max_queued, self._queued)
        if not q.scheduled:
            q.scheduled = True
            self._ready.append(index)
            self._work.notify()

    # -- the workers ------------------------------------------------------------------------------------
    def _worker(self) -> None:
        lock = self._lock
        with lock:
            self._worker_idents.add(threading.get_ident())
        while True:
            with lock:
                while not self._ready and not self._stopping:
                    self._work.wait()
                if not self._ready:
                    return  # stopping, and no queue has work left
                index = self._ready.popleft()  # this worker now holds the queue
                q, task = self._take_locked(index)
            self._turn(index, q, task)

    def _take_locked(self, index: int) -> tuple[_TaskQueue, Any]:
        """The holder of queue ``index`` (just taken off the ready list) takes its head task."""
        q = self._queues[index]
        task = q.items.popleft()
        q.current = task
        self._queued -= 1
        self._running += 1
        q.room.notify()
        return q, task

    def _turn(self, index: int, q: _TaskQueue, task: Any) -> None:
        """Run ``task`` (outside the lock), then release queue ``index``."""
        try:
            self._run(task)
        except BaseException:
            log.exception("%s: task runner failed on %r", self._name, task)
            with self._lock:
                self._worker_errors += 1
        finally:
            with self._lock:
                self._release_locked(index, q)

    def _release_locked(self, index: int, q: _TaskQueue) -> None:
        self._running -= 1
        self._completed += 1
        q.current = None
        if q.items:
            self._ready.append(index)  # back at the tail: one task per turn
            self._work.notify()
        else:
            q.scheduled = False
        if self._queued == 0 and self._running == 0:
            self._idle.notify_all()

    # -- manual mode -------------------------------------------------------------------------------------
    def run_one(self, index: int) -> None:
        """Manual mode: one worker turn on queue ``index``, on the calling thread (see the module
        docstring).  Raises ``NotRunnable`` when no free worker could take that queue now."""
        if not self._manual:
            raise RuntimeError(f"{self._name}: run_one is for a pool made with manual=True")
        with self._lock:
            free = self._threads - self._running
            if not 0 <= index < len(self._queues) or free <= 0 or index not in list(self._ready)[:free]:
                raise NotRunnable(f"{self._name}: no free worker can take queue {index} now")
            self._ready.remove(index)
            q, task = self._take_locked(index)
        self._turn(index, q, task)

    def snapshot(self) -> PoolSnapshot:
        with self._lock:
            return PoolSnapshot(
                queues=tuple(tuple(q.items) for q in self._queues),
                running=tuple(q.current for q in self._queues),
                waiting=tuple(q.waiting for q in self._queues),
            )

    # -- observation and shutdown ----------------------------------------------------------------------
    def stats(self) -> PoolStats:
        with self._lock:
            return PoolStats(
                submitted=self._submitted,
                dropped=self._dropped,
                refused=self._refused,
                blocked=self._blocked,
                blocked_seconds=self._blocked_seconds,
                blocked_now=self._blocked_now,
                completed=self._completed,
                worker_errors=self._worker_errors,
                queued=self._queued,
                running=self._running,
                max_queued=self._max_queued,
                high_water=tuple(q.high_water for q in self._queues),
            )

    def worker_idents(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._worker_idents)

    def alive_threads(self) -> list[str]:
        return [h.name for h in self._handles if h.is_alive()]

    def close(self, timeout: float | None = 30.0) -> None:
        """Refuse new tasks, let the workers finish every queued task, stop them and join them.

        A feed thread waiting for room gets ``ListenerClosed``.  ``timeout`` bounds the drain and the
        joins together (None = wait for ever); if it runs out -- a customer listener that never
        returns -- ``ShutdownTimeout`` names the threads still alive (the remaining workers still
        drain what they can and exit).  Idempotent."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._closed = True
            for q in self._queues:
                q.room.notify_all()
        while self._manual:  # no workers: the caller drains what is ready, one turn at a time
            with self._lock:
                if not self._ready:
                    break
                index = self._ready.popleft()
                q, task = self._take_locked(index)
            self._turn(index, q, task)
        with self._lock:
            drained = self._idle.wait_for(lambda: self._queued == 0 and self._running == 0, timeout)
            self._stopping = True
            self._work.notify_all()
        for h in self._handles:
            h.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        alive = self.alive_threads()
        if alive or not drained:
            raise ShutdownTimeout(
                f"{self._name}: {'queues not drained; ' if not drained else ''}threads still alive: {alive}", alive
            )
