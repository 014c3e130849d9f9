"""Pluggable scheduling: the same concurrent code on real threads or under a seeded, replayable scheduler.

What it is
----------
Every piece of concurrent code in ``conq.impl`` (node list, consumer manager, queue, delivery chain)
takes a *scheduler* and gets from it everything that can interleave:

* ``sched.point(label)`` -- an interleaving point.  Called before every lock acquire and before every
  step that would be a compare-and-set / atomic step in a lock-free port (e.g. reading a ``next``
  pointer during a traversal, the lazy unlink of a deleted entry).
* ``sched.lock(name)`` -- a mutual-exclusion lock (``acquire``/``release``/context manager,
  ``acquire(blocking=False)`` for try-lock).
* ``sched.condition(lock, name)`` -- a condition variable bound to such a lock (``wait(timeout)``,
  ``notify_all``).
* ``sched.spawn(fn, name)`` -- start a logical thread; returns a handle with ``join(timeout)`` and
  ``is_alive()``.

Two implementations:

``ThreadScheduler`` (``REAL``)
    Real ``threading`` primitives.  ``point`` is a module-level no-op function bound once by the
    callers, so the hot path pays one cheap call and nothing else.

``DeterministicScheduler(seed)``
    Logical threads are real OS threads, but exactly one of them runs at any time: the others wait
    for the baton on one private ``threading.Condition``.  At *every* interleaving point (each
    ``point``, each lock acquire, each wait, thread start and exit) a ``random.Random(seed)`` chooses
    which runnable logical thread proceeds (``strategy="random"``: uniformly; ``strategy="pct"``:
    probabilistic concurrency testing -- seeded random thread priorities with ``pct_depth - 1``
    seeded priority change points, which finds ordering bugs of small depth far more often than a
    uniform walk).  Because nothing else decides who runs, a run is a pure
    function of (program, seed): the same seed gives the identical event log (``sched.log``: a list
    of ``(step, thread name, label)``), so any failing run can be replayed exactly.  Blocking is
    modelled explicitly: a thread waiting for a held lock, a condition or a join is not runnable;
    if no thread is runnable the scheduler first fires the pending timed wait with the earliest
    virtual deadline (virtual time, never wall-clock time), and if there is none it reports a
    deadlock naming every thread and what it waits for.  ``max_steps`` bounds livelocks.

Single-caller stepping
    To drive the implementation one operation at a time from one thread (what the conformance checker
    does), use ``REAL`` (or any scheduler) and simply call the API from that thread without starting
    IO threads: every operation then runs to completion before the call returns, and
    ``delivery.Connection.process`` runs the IO-thread work synchronously when asked.

Concurrency argument (this module)
----------------------------------
``DeterministicScheduler`` keeps all of its own state (thread table, current thread, lock owners,
waiters, virtual clock, log, rng) under one ``threading.Condition`` (``_cv``); a logical thread only
touches program state while it holds the baton (``_current is me``), and hands the baton over only
inside ``_cv``, so program state is never accessed by two OS threads at once and every hand-over is a
happens-before edge (the ``_cv`` release/acquire).  Nothing relies on the GIL.

A logical thread that raises aborts the run: every other logical thread is unwound by an
``_Aborted`` exception at its next interleaving point, and ``run`` re-raises the first failure.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

__all__ = [
    "REAL",
    "DeadlockError",
    "DeterministicScheduler",
    "SchedulerError",
    "ThreadScheduler",
]


def _noop_point(label: str) -> None:  # noqa: ARG001 - the label is for the deterministic scheduler
    """Interleaving point on real threads: nothing to decide, the OS scheduler interleaves."""


class SchedulerError(RuntimeError):
    """Misuse of a scheduler, or a logical thread failed under the deterministic scheduler."""


class DeadlockError(SchedulerError):
    """Under the deterministic scheduler no logical thread can run and no timed wait is pending."""


class _Aborted(BaseException):
    """Unwinds the other logical threads after one failed (BaseException so ``except Exception`` in
    program code does not swallow it)."""


# --------------------------------------------------------------------------------------------------
# Real threads
# --------------------------------------------------------------------------------------------------


class _ThreadHandle:
    def __init__(self, thread: threading.Thread, box: dict[str, BaseException]) -> None:
        self._thread = thread
        self._box = box

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True if it finished.  Re-raises an exception it died of."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        if "error" in self._box:
            raise SchedulerError(f"thread {self._thread.name!r} failed") from self._box["error"]
        return True

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def name(self) -> str:
        return self._thread.name


class ThreadScheduler:
    """Real threads and real locks; ``point`` is a no-op."""

    deterministic = False
    point = staticmethod(_noop_point)

    def lock(self, name: str = "lock") -> Any:  # noqa: ARG002 - names matter only when deterministic
        return threading.Lock()

    def condition(self, lock: Any, name: str = "cond") -> Any:  # noqa: ARG002
        return threading.Condition(lock)

    def spawn(self, fn: Callable[[], Any], name: str) -> _ThreadHandle:
        box: dict[str, BaseException] = {}

        def body() -> None:
            try:
                fn()
            except BaseException as exc:  # recorded and re-raised by join(), never silently lost
                box["error"] = exc
                raise

        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        return _ThreadHandle(t, box)

    def run(self, main: Callable[[], Any]) -> Any:
        """Run ``main`` on the calling thread (symmetry with the deterministic scheduler)."""
        return main()


REAL = ThreadScheduler()


# --------------------------------------------------------------------------------------------------
# Deterministic, seeded scheduler
# --------------------------------------------------------------------------------------------------


class _LThread:
    __slots__ = ("blocked_on", "deadline", "done", "error", "index", "name", "os_thread", "timed_out")

    def __init__(self, index: int, name: str) -> None:
        self.index = index
        self.name = name
        self.blocked_on: object | None = None  # a _DetLock, _DetCondition, _LThread (join) or None
        self.deadline: int | None = None  # virtual deadline of a timed wait
        self.timed_out = False
        self.done = False
        self.error: BaseException | None = None
        self.os_thread: threading.Thread | None = None


class _DetLock:
    def __init__(self, sched: DeterministicScheduler, name: str) -> None:
        self._s = sched
        self.name = name
        self.owner: _LThread | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:  # noqa: ARG002
        s = self._s
        me = s._me()
        s.point("acquire " + self.name)
        with s._cv:
            while self.owner is not None:
                if self.owner is me:
                    raise SchedulerError(f"{me.name} re-acquires non-reentrant lock {self.name!r}")
                if not blocking:
                    return False
                me.blocked_on = self
                s._switch_locked(me, "blocked on " + self.name)
            self.owner = me
            return True

    def release(self) -> None:
        s = self._s
        with s._cv:
            me = s._me_locked()
            if self.owner is not me:
                raise SchedulerError(f"{me.name} releases lock {self.name!r} it does not hold")
            self.owner = None
            for t in s._threads:
                if t.blocked_on is self:
                    t.blocked_on = None

    def locked(self) -> bool:
        return self.owner is not None

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


class _DetCondition:
    def __init__(self, sched: DeterministicScheduler, lock: _DetLock, name: str) -> None:
        self._s = sched
        self._lock = lock
        self.name = name

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until notified (True) or until the virtual timeout fires (False)."""
        s = self._s
        with s._cv:
            me = s._me_locked()
            if self._lock.owner is not me:
                raise SchedulerError(f"{me.name} waits on {self.name!r} without holding its lock")
            self._lock.owner = None
            for t in s._threads:
                if t.blocked_on is self._lock:
                    t.blocked_on = None
            me.blocked_on = self
            me.timed_out = False
            me.deadline = None if timeout is None else s._clock + max(1, int(timeout * 1000))
            s._switch_locked(me, "wait " + self.name)
            notified = not me.timed_out
            me.deadline = None
        self._lock.acquire()
        return notified

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        result = predicate()
        while not result:
            if not self.wait(timeout) and timeout is not None:
                return predicate()
            result = predicate()
        return result

    def notify_all(self) -> None:
        s = self._s
        with s._cv:
            for t in s._threads:
                if t.blocked_on is self:
                    t.blocked_on = None

    notify = notify_all  # waking everyone is always correct for condition loops


class _DetHandle:
    def __init__(self, sched: DeterministicScheduler, t: _LThread) -> None:
        self._s = sched
        self._t = t

    @property
    def name(self) -> str:
        return self._t.name

    def is_alive(self) -> bool:
        return not self._t.done

    def join(self, timeout: float | None = None) -> bool:
        s = self._s
        me = s._me()
        s.point("join " + self._t.name)
        with s._cv:
            while not self._t.done:
                me.blocked_on = self._t
                me.timed_out = False
                me.deadline = None if timeout is None else s._clock + max(1, int(timeout * 1000))
                s._switch_locked(me, "join " + self._t.name)
                me.deadline = None
                if me.timed_out and not self._t.done:
                    return False
        if self._t.error is not None:
            raise SchedulerError(f"thread {self._t.name!r} failed") from self._t.error
        return True


class DeterministicScheduler:
    """Seeded scheduler deciding every interleaving point; see the module docstring."""

    deterministic = True

    def __init__(self, seed: int, *, strategy: str = "random", pct_depth: int = 3, pct_steps: int = 1000,
                 max_steps: int = 2_000_000, record: bool = True) -> None:
        if strategy not in ("random", "pct"):
            raise SchedulerError(f"unknown strategy {strategy!r}: use 'random' or 'pct'")
        self.seed = seed
        self.strategy = strategy
        self.max_steps = max_steps
        self.record = record
        self.log: list[tuple[int, str, str]] = []
        self.steps = 0
        self._rng = random.Random(seed)
        self._cv = threading.Condition(threading.Lock())
        self._threads: list[_LThread] = []
        self._by_os: dict[int, _LThread] = {}
        self._current: _LThread | None = None
        self._clock = 0  # virtual milliseconds; advances only when a timed wait fires
        self._running = False
        self._failure: BaseException | None = None
        self._aborting = False
        self._all_done = threading.Event()
        # PCT (Burckhardt et al., "A randomized scheduler with probabilistic guarantees of finding
        # bugs", ASPLOS 2010): random distinct thread priorities, the highest runnable thread runs,
        # and at pct_depth-1 random steps the running thread drops below every other thread.
        self._prio: dict[int, float] = {}
        self._change_points = (
            set(self._rng.sample(range(1, max(pct_steps, pct_depth) + 1), pct_depth - 1))
            if strategy == "pct" and pct_depth > 1 else set()
        )
        self._low = 0.0

    # -- primitives ------------------------------------------------------------------------------
    def lock(self, name: str = "lock") -> _DetLock:
        return _DetLock(self, name)

    def condition(self, lock: _DetLock, name: str = "cond") -> _DetCondition:
        if not isinstance(lock, _DetLock):
            raise SchedulerError(f"condition {name!r} needs a lock made by this scheduler")
        return _DetCondition(self, lock, name)

    def point(self, label: str) -> None:
        with self._cv:
            me = self._by_os.get(threading.get_ident())
            if me is None:
                if self._running:
                    raise SchedulerError(
                        f"interleaving point {label!r} reached on a thread the deterministic "
                        f"scheduler does not know (use sched.spawn for every thread)"
                    )
                return  # outside run(): plain single-threaded use
            self._switch_locked(me, label)

    def spawn(self, fn: Callable[[], Any], name: str) -> _DetHandle:
        with self._cv:
            t = self._new_thread(name)
        self._start_os_thread(t, fn)
        if self._running:
            self.point("spawn " + name)
        return _DetHandle(self, t)

    # -- running ---------------------------------------------------------------------------------
    def run(self, main: Callable[[], Any], *, wall_timeout: float = 120.0) -> Any:
        """Run ``main`` as logical thread ``main`` plus everything it spawns; return its result.

        ``wall_timeout`` is a safety net against bugs in the scheduler itself: a deterministic run
        never waits on wall-clock time.
        """
        if self._running:
            raise SchedulerError("DeterministicScheduler.run is not re-entrant")
        result: dict[str, Any] = {}

        def main_body() -> None:
            result["value"] = main()

        with self._cv:
            self._running = True
            self._all_done.clear()
            t = self._new_thread("main")
        self._start_os_thread(t, main_body)
        with self._cv:
            self._current = t
            self._cv.notify_all()
        if not self._all_done.wait(wall_timeout):
            with self._cv:
                state = self._describe_locked()
                self._aborting = True
                self._cv.notify_all()
            raise SchedulerError(f"deterministic run exceeded {wall_timeout}s of wall time: {state}")
        for th in list(self._threads):
            if th.os_thread is not None:
                th.os_thread.join(5)
        with self._cv:
            self._running = False
            failure = self._failure
        if failure is not None:
            raise SchedulerError(f"seed {self.seed}: a logical thread failed: {failure!r}") from failure
        return result.get("value")

    # -- internals (all *_locked methods run with self._cv held) ---------------------------------
    def _new_thread(self, name: str) -> _LThread:
        t = _LThread(len(self._threads), name)
        self._threads.append(t)
        if self.strategy == "pct":
            self._prio[t.index] = 1.0 + self._rng.random()
        return t

    def _start_os_thread(self, t: _LThread, fn: Callable[[], Any]) -> None:
        def body() -> None:
            with self._cv:
                self._by_os[threading.get_ident()] = t
                while self._current is not t and not self._aborting:
                    self._cv.wait()
                if self._aborting:
                    t.done = True
                    self._finish_locked(t)
                    return
            try:
                fn()
            except _Aborted:
                pass
            except BaseException as exc:
                t.error = exc
                with self._cv:
                    if self._failure is None:
                        self._failure = exc
                    self._aborting = True
                    self._cv.notify_all()
            with self._cv:
                t.done = True
                self._finish_locked(t)

        th = threading.Thread(target=body, name=f"det-{self.seed}-{t.name}", daemon=True)
        t.os_thread = th
        th.start()

    def _me(self) -> _LThread:
        with self._cv:
            return self._me_locked()

    def _me_locked(self) -> _LThread:
        me = self._by_os.get(threading.get_ident())
        if me is None:
            raise SchedulerError("deterministic primitive used outside a logical thread")
        return me

    def _runnable_locked(self) -> list[_LThread]:
        return [t for t in self._threads if not t.done and t.blocked_on is None and t.os_thread is not None]

    def _pick_locked(self) -> _LThread | None:
        runnable = self._runnable_locked()
        if not runnable:
            # Nothing can run: let virtual time pass to the earliest timed wait.
            timed = [t for t in self._threads if not t.done and t.deadline is not None]
            if not timed:
                return None
            first = min(timed, key=lambda t: (t.deadline, t.index))
            self._clock = max(self._clock, first.deadline or 0)
            first.blocked_on = None
            first.timed_out = True
            return first
        if len(runnable) == 1:
            return runnable[0]
        if self.strategy == "pct":
            return max(runnable, key=lambda t: self._prio[t.index])
        return self._rng.choice(runnable)

    def _switch_locked(self, me: _LThread, label: str) -> None:
        if self._aborting:
            raise _Aborted()
        self.steps += 1
        if self.record:
            self.log.append((self.steps, me.name, label))
        if self.steps > self.max_steps:
            self._failure = self._failure or SchedulerError(
                f"seed {self.seed}: more than {self.max_steps} scheduling steps (livelock?) at {label!r}"
            )
            self._aborting = True
            self._cv.notify_all()
            raise _Aborted()
        if self.steps in self._change_points:
            self._low -= 1.0
            self._prio[me.index] = self._low  # PCT priority change point: me drops below everyone
        nxt = self._pick_locked()
        if nxt is None:
            self._failure = self._failure or DeadlockError(f"seed {self.seed}: deadlock: {self._describe_locked()}")
            self._aborting = True
            self._cv.notify_all()
            raise _Aborted()
        if nxt is not me:
            self._current = nxt
            self._cv.notify_all()
            while self._current is not me and not self._aborting:
                self._cv.wait()
            if self._aborting:
                raise _Aborted()

    def _finish_locked(self, t: _LThread) -> None:
        for other in self._threads:
            if other.blocked_on is t:
                other.blocked_on = None
        if all(x.done for x in self._threads):
            self._current = None
            self._all_done.set()
            self._cv.notify_all()
            return
        if self._aborting:
            self._cv.notify_all()
            return
        if self._current is t:
            nxt = self._pick_locked()
            if nxt is None:
                self._failure = self._failure or DeadlockError(
                    f"seed {self.seed}: deadlock after {t.name} finished: {self._describe_locked()}"
                )
                self._aborting = True
            else:
                self._current = nxt
            self._cv.notify_all()

    def _describe_locked(self) -> str:
        parts = []
        for t in self._threads:
            if t.done:
                continue
            b = t.blocked_on
            what = "runnable" if b is None else f"blocked on {getattr(b, 'name', b)!s}"
            parts.append(f"{t.name}: {what}")
        return "; ".join(parts) or "no live threads"
