# One file: the real-thread scheduler and the deterministic one implement the same points side by side, so each concurrency argument in impl/ reads against both.
"""Pluggable scheduling: the same concurrent code on real threads or under a seeded, replayable scheduler.

What it is
----------
Every piece of concurrent code in ``conq.impl`` (node list, consumer manager, queue, delivery chain)
takes a *scheduler* and gets from it everything that can interleave:

* ``sched.point(label, subject=None)`` -- an interleaving point.  Called before every step that would
  be a compare-and-set / atomic step in a lock-free port (e.g. reading a ``next`` pointer during a
  traversal, the lazy unlink of a deleted entry) and at the thread steps of the system's model (for
  consumer lists: un-notify, find, acquire, deliver / none of a pull, the set-desired halves, the
  publisher's notification).  ``subject`` (e.g. a consumer id) only goes into the label of the
  deterministic scheduler's log.  Code on a hot path may skip the call when the scheduler is not
  ``deterministic``.  Lock acquires (and, with ``release_points``, releases) are points by themselves.
* ``sched.lock(name)`` -- a mutual-exclusion lock (``acquire``/``release``/context manager,
  ``acquire(blocking=False)`` for try-lock).
* ``sched.condition(lock, name)`` -- a condition variable bound to such a lock (``wait(timeout)``,
  ``notify_all``).
* ``sched.spawn(fn, name)`` -- start a logical thread; returns a handle with ``join(timeout)`` and
  ``is_alive()``.

Two implementations:

``ThreadScheduler`` (``REAL``)
    Real ``threading`` primitives.  ``point`` is a module-level no-op function bound once by the
    callers, so the hot path pays one cheap call (or one flag test) and nothing else.

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

    ``release_points=True`` makes every lock release an interleaving point too.  Without it a
    window between a release and the thread's next lock-free read or write is never interleaved
    (the write is glued to the critical section), so a bug that moves a write out of a critical
    section -- or reads shared state just after one -- cannot show.  Off by default so that the seeds
    recorded by existing tests keep their interleavings; the consumer-lists schedules engine turns
    it on.

    ``strategy="fixed"`` has no randomness: the running thread goes on until it blocks or exits,
    then the runnable thread created first runs -- except at the points named by ``schedule``, a
    list of ``Deviation(thread, at, to)`` ("at ``thread``'s ``at``-th point, run ``to``").  Every
    run records its ``decisions`` (the points where more than one thread could run), so any run, of
    any strategy, converts to such a schedule (``deviations_of``) and replays exactly.

Probabilistic concurrency testing with its bound
    ``PCTSearch`` runs a program again and again under ``strategy="pct"`` the way Coyote's PCT
    strategy and Lincheck do: it first measures the program (``pct_calibrate``: how many logical
    threads ``n`` and scheduling steps ``k`` one run has), then draws, per run, the thread priorities
    and ``d - 1`` change points over those ``k`` steps, cycling through the depths asked for.  Each
    run finds a given bug of depth ``d`` with probability at least ``1 / (n k^(d-1))`` (Burckhardt,
    Kothari, Musuvathi and Nagarakatte, "A Randomized Scheduler with Probabilistic Guarantees of
    Finding Bugs", ASPLOS 2010, Theorem 9); ``PCTBound`` states it for the runs made (``k`` is the most
    steps any run took, so the bound stays a lower bound when a run is longer than the calibration).
    A failing run replays from its seed alone (``PCTSearch.scheduler(i)``).
Systematic exploration, minimisation, rendering
    ``BoundedExploration`` runs every schedule with 0, 1, 2, ... deviations from the fixed
    strategy's default (preemption / delay bounding as in CHESS), fewest first, each exactly once;
    ``minimise_schedule`` shrinks a failing schedule by delta debugging over its deviations; and
    ``render_interleaving`` prints a run as step, thread, switch point and the program's state
    (``observe_state`` with a ``state_probe`` the program installs).
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
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "BUILTIN_LABELS",
    "REAL",
    "BoundedExploration",
    "PCTBound",
    "PCTRun",
    "PCTSearch",
    "pct_calibrate",
    "DeadlockError",
    "Decision",
    "DeterministicScheduler",
    "Deviation",
    "Minimised",
    "SchedulerError",
    "ThreadScheduler",
    "Trial",
    "default_preemptible",
    "deviations_of",
    "failure_signature",
    "minimise_schedule",
    "render_interleaving",
    "steps_first",
]


def _noop_point(label: str, subject: object = None) -> None:  # noqa: ARG001 - for the deterministic scheduler
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
    __slots__ = ("blocked_on", "deadline", "done", "error", "index", "name", "os_thread", "points", "timed_out")

    def __init__(self, index: int, name: str) -> None:
        self.index = index
        self.name = name
        self.points = 0  # scheduling points this thread reached (a Deviation names one by this count)
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
            if s.release_points and not s._aborting:
                # the window between a release and whatever the thread does next (a lock-free read
                # or write) is an interleaving point too
                s._switch_locked(me, "release " + self.name)

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


class Deviation(NamedTuple):
    """One choice of a schedule that differs from the default policy of ``strategy="fixed"``.

    At ``thread``'s ``at``-th scheduling point (counted from 1, every ``point``, lock acquire and
    release, wait, join, spawn and its exit) the scheduler runs ``to`` instead of its default choice:
    ``thread`` itself if it can go on (the deviation is then a *preemption*), else the runnable thread
    created first.  Naming the point by (thread, count) rather than by a global step keeps a deviation
    meaningful when other deviations are removed (delta debugging).  ``label`` is informative only."""

    thread: str
    at: int
    to: str
    label: str = ""

    def __str__(self) -> str:
        return f"{self.thread}#{self.at} [{self.label}] -> {self.to}"


class Decision(NamedTuple):
    """A scheduling point at which more than one thread could run (recorded when ``record``)."""

    seq: int  # order of the decisions in the run
    step: int  # the step of the log entry (a thread's exit shares the step of the last point)
    thread: str  # the thread that reached the point (running, blocked or exiting)
    at: int  # its point count (see Deviation)
    label: str
    options: tuple[str, ...]  # the runnable threads, in creation order
    chosen: str
    preemptive: bool  # ``thread`` itself could have gone on (choosing another one preempts it)

    @property
    def default(self) -> str:
        """What ``strategy="fixed"`` runs here without a deviation."""
        return self.thread if self.preemptive else self.options[0]


STRATEGIES = ("random", "pct", "fixed")


class DeterministicScheduler:
    """Seeded scheduler deciding every interleaving point; see the module docstring.

    ``strategy``: ``"random"`` (uniform choice), ``"pct"`` (probabilistic concurrency testing), or
    ``"fixed"`` (no randomness: the running thread goes on until it blocks or exits, then the runnable
    thread created first runs -- except at the points named by ``schedule``, a sequence of
    :class:`Deviation`; the systematic exploration, ``BoundedExploration``, enumerates these).
    ``release_points``: every lock release is an interleaving point too (off by default so that the
    recorded seeds of existing users keep their interleavings).  ``observe_state``: the program may
    install ``state_probe`` (a function returning a short text) and the scheduler stores its value
    at every point in ``states`` (step -> text), for ``render_interleaving``.
    """

    deterministic = True

    def __init__(self, seed: int = 0, *, strategy: str = "random", pct_depth: int = 3, pct_steps: int = 1000,
                 max_steps: int = 2_000_000, record: bool = True, schedule: Iterable[Deviation] = (),
                 release_points: bool = False, observe_state: bool = False) -> None:
        if strategy not in STRATEGIES:
            raise SchedulerError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
        self.seed = seed
        self.strategy = strategy
        self.max_steps = max_steps
        self.record = record
        self.release_points = release_points
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
        # fixed strategy: the deviations by (thread, point count); those that took effect
        self.schedule: tuple[Deviation, ...] = tuple(schedule)
        if self.schedule and strategy != "fixed":
            raise SchedulerError("a schedule of deviations needs strategy='fixed'")
        self._deviations: dict[tuple[str, int], Deviation] = {(d.thread, d.at): d for d in self.schedule}
        self.applied: list[tuple[int, Deviation]] = []  # (step, deviation) in the order they took effect
        self.decisions: list[Decision] = []
        self._seq = 0
        self.observe_state = observe_state
        self.state_probe: Callable[[], str] | None = None
        self.states: dict[int, str] = {}

    # -- primitives ------------------------------------------------------------------------------
    def lock(self, name: str = "lock") -> _DetLock:
        return _DetLock(self, name)

    def condition(self, lock: _DetLock, name: str = "cond") -> _DetCondition:
        if not isinstance(lock, _DetLock):
            raise SchedulerError(f"condition {name!r} needs a lock made by this scheduler")
        return _DetCondition(self, lock, name)

    def point(self, label: str, subject: object = None) -> None:
        with self._cv:
            me = self._by_os.get(threading.get_ident())
            if me is None:
                if self._running:
                    raise SchedulerError(
                        f"interleaving point {label!r} reached on a thread the deterministic "
                        f"scheduler does not know (use sched.spawn for every thread)"
                    )
                return  # outside run(): plain single-threaded use
            self._switch_locked(me, label if subject is None else f"{label} {subject}")

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
            raise SchedulerError(f"{self.describe()}: a logical thread failed: {failure!r}") from failure
        return result.get("value")

    def describe(self) -> str:
        """How to name this run: the seed and strategy, or the schedule of deviations."""
        if self.strategy == "fixed":
            return f"schedule [{', '.join(map(str, self.schedule))}]" if self.schedule else "schedule [] (default policy)"
        return f"seed {self.seed} ({self.strategy})"

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

    def _pick_locked(self, me: _LThread, label: str) -> _LThread | None:
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
            nxt = max(runnable, key=lambda t: self._prio[t.index])
        elif self.strategy == "random":
            nxt = self._rng.choice(runnable)
        else:
            nxt = me if me in runnable else runnable[0]
            dev = self._deviations.get((me.name, me.points))
            if dev is not None:
                target = next((t for t in runnable if t.name == dev.to), None)
                if target is not None and target is not nxt:
                    nxt = target
                    self.applied.append((self.steps, dev))
        if self.record:
            self._seq += 1
            self.decisions.append(Decision(self._seq, self.steps, me.name, me.points, label,
                                           tuple(t.name for t in runnable), nxt.name, me in runnable))
        return nxt

    def _switch_locked(self, me: _LThread, label: str) -> None:
        if self._aborting:
            raise _Aborted()
        self.steps += 1
        me.points += 1
        if self.record:
            self.log.append((self.steps, me.name, label))
        if self.state_probe is not None:
            try:
                self.states[self.steps] = self.state_probe()
            except Exception as exc:  # observation only: never fails the run
                self.states[self.steps] = f"<state probe failed: {exc!r}>"
        if self.steps > self.max_steps:
            self._failure = self._failure or SchedulerError(
                f"more than {self.max_steps} scheduling steps (livelock?); the last: {me.name} at {label!r}"
            )
            self._aborting = True
            self._cv.notify_all()
            raise _Aborted()
        if self.steps in self._change_points:
            self._low -= 1.0
            self._prio[me.index] = self._low  # PCT priority change point: me drops below everyone
        nxt = self._pick_locked(me, label)
        if nxt is None:
            self._failure = self._failure or DeadlockError(f"deadlock: {self._describe_locked()}")
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
            t.points += 1  # the exit is the thread's last point (a deviation may name it)
            nxt = self._pick_locked(t, "exit")
            if nxt is None:
                self._failure = self._failure or DeadlockError(
                    f"deadlock after {t.name} finished: {self._describe_locked()}"
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


# --------------------------------------------------------------------------------------------------
# Systematic exploration, minimisation, rendering
# --------------------------------------------------------------------------------------------------


#: labels of the scheduler's own points (locks, threads); every other label is a program step
#: (``sched.point(label)`` in the program: for conq.impl, the model's thread steps)
BUILTIN_LABELS = ("acquire ", "release ", "spawn ", "join ", "wait ", "blocked on ", "exit", "nodelist.")


def steps_first(d: Decision) -> tuple[bool, int]:
    """The default order of ``BoundedExploration`` among the new deviations of one schedule:
    deviations at the program's own steps (the model's granularity) before those at lock and
    thread points (the finer granularity), and within each, the latest point first -- the order in
    which a depth-first search (CHESS) backtracks."""
    return (d.label.startswith(BUILTIN_LABELS), -d.seq)


def default_preemptible(label: str) -> bool:
    """The points at which the systematic exploration may deviate: every labelled step of the
    program, every lock release, spawn, wait, join, block and exit -- not the lock acquires nor the
    node list's traversal reads, which PCT covers.  Leaving acquires out keeps the count of
    schedules small at little cost: with release points and the program's step points, a preemption
    just before an acquire differs from one at the thread's previous point only by the lock-free
    reads in between."""
    return not label.startswith(("acquire ", "nodelist."))


@dataclass(frozen=True)
class PCTBound:
    """The guarantee of PCT (Burckhardt et al., ASPLOS 2010, Theorem 9): a run of a program with at
    most ``threads`` threads and ``steps`` scheduling steps, with ``depth - 1`` change points drawn
    over those steps, hits any given bug of depth ``depth`` (``depth`` ordering constraints between
    steps of different threads) with probability at least ``1 / (threads * steps^(depth-1))``."""

    threads: int
    steps: int
    depth: int

    @property
    def per_run(self) -> float:
        return 1.0 / (max(self.threads, 1) * max(self.steps, 1) ** (self.depth - 1))

    def after(self, runs: int) -> float:
        """The probability that ``runs`` independent runs of this depth hit the bug at least once."""
        return 1.0 - (1.0 - self.per_run) ** runs

    def __str__(self) -> str:
        return (f"depth {self.depth}: >= 1/({self.threads} x {self.steps}^{self.depth - 1}) = {self.per_run:.3g} per run")


def pct_calibrate(run: Callable[[DeterministicScheduler], Any], **sched_kwargs: Any) -> tuple[int, int]:
    """(logical threads, scheduling steps) of one run of ``run`` under the fixed default schedule:
    the ``n`` and ``k`` of PCT.  A failing calibration run raises (the program fails without any
    interleaving to speak of)."""
    sched = DeterministicScheduler(0, strategy="fixed", record=False, **sched_kwargs)
    run(sched)
    return len(sched._threads), sched.steps


@dataclass
class PCTRun:
    """One run of a ``PCTSearch``: its number, seed and depth, the scheduler (``log``, ``decisions``:
    ``deviations_of`` turns it into a fixed schedule) and the failure, if any."""

    number: int
    seed: int
    depth: int
    sched: DeterministicScheduler
    error: BaseException | None

    @property
    def failed(self) -> bool:
        return self.error is not None


class PCTSearch:
    """Probabilistic concurrency testing of one program (module docstring): ``run(sched)`` runs it
    under ``sched`` and raises on a failure.  ``depths`` are cycled run by run (depth 1: random
    priorities and no change point); run ``i`` uses seed ``seed + i``, so a run is a pure function of
    (program, seed, depth, k) and ``scheduler(i)`` rebuilds it.  ``k`` is measured by
    ``pct_calibrate`` once, on first use; ``bound(depth)`` is the guarantee for the runs made so
    far (with the most threads and steps any run had)."""

    def __init__(self, run: Callable[[DeterministicScheduler], Any], *, depths: tuple[int, ...] = (1, 2, 3),
                 seed: int = 0, **sched_kwargs: Any) -> None:
        if not depths or min(depths) < 1:
            raise SchedulerError(f"PCT depths must be >= 1, got {depths!r}")
        self.program = run
        self.depths = tuple(depths)
        self.seed = seed
        self.sched_kwargs = sched_kwargs
        self.k = 0  # the steps of the calibration run: the range of every run's change points
        self.threads = 0  # the most threads / steps of any run so far (the bound's n and k)
        self.steps = 0
        self.runs = 0
        self.runs_at: dict[int, int] = {}

    def calibrate(self) -> tuple[int, int]:
        if not self.k:
            n, self.k = pct_calibrate(self.program, **self.sched_kwargs)
            self.threads, self.steps = max(self.threads, n), max(self.steps, self.k)
        return self.threads, self.k

    def scheduler(self, i: int) -> DeterministicScheduler:
        """The scheduler of run ``i`` (calibrates first: the change points are drawn over k)."""
        k = self.calibrate()[1]
        depth = self.depths[i % len(self.depths)]
        return DeterministicScheduler(self.seed + i, strategy="pct", pct_depth=depth, pct_steps=max(k, depth),
                                      **self.sched_kwargs)

    def run(self, i: int) -> PCTRun:
        sched = self.scheduler(i)
        depth = self.depths[i % len(self.depths)]
        error: BaseException | None = None
        try:
            self.program(sched)
        except Exception as exc:  # the program's own verdict (or a deadlock, a livelock bound)
            error = exc
        self.runs += 1
        self.runs_at[depth] = self.runs_at.get(depth, 0) + 1
        self.threads = max(self.threads, len(sched._threads))
        self.steps = max(self.steps, sched.steps)
        return PCTRun(i, self.seed + i, depth, sched, error)

    def bound(self, depth: int) -> PCTBound:
        return PCTBound(self.threads, self.steps, depth)

    def describe(self) -> str:
        per = ", ".join(f"{self.runs_at[d]} at depth {d} ({self.bound(d).after(self.runs_at[d]):.3g} for a "
                        f"depth-{d} bug)" for d in sorted(self.runs_at))
        return f"{self.runs} PCT runs, n = {self.threads} threads, k = {self.steps} steps: {per}"


@dataclass
class Trial:
    """One explored schedule and how it ended."""

    number: int  # 1-based, within its exploration
    depth: int  # deviations in the schedule
    schedule: tuple[Deviation, ...]
    sched: DeterministicScheduler
    error: BaseException | None

    @property
    def failed(self) -> bool:
        return self.error is not None


class BoundedExploration:
    """Every schedule with at most ``bound`` deviations from the default policy of
    ``strategy="fixed"``, fewest deviations first (CHESS-style iterative preemption bounding;
    because a deviation at a blocking point also counts, this is delay bounding -- Emmi, Qadeer and
    Rakamaric, POPL 2011 -- over the non-preemptive, first-created-first policy).

    ``run(sched)`` runs the program under ``sched`` and raises on a failure.  Level 0 is the
    default schedule; the schedules of level d+1 extend each schedule of level d by one deviation
    at a decision point (``preemptible`` label) *after* its last deviation, to every other runnable
    thread (in the ``order`` of their decision points, ``steps_first`` by default): each schedule
    is produced exactly once, since runs are deterministic.  ``level(d)`` runs
    level d (call it for d = 0, 1, ... in order); ``counts`` says how many schedules each level had
    and ``complete`` which levels were run to the end.  Scheduler options (``release_points``,
    ``max_steps``) go in ``sched_kwargs``."""

    def __init__(self, run: Callable[[DeterministicScheduler], Any], *, bound: int = 2,
                 preemptible: Callable[[str], bool] = default_preemptible,
                 order: Callable[[Decision], Any] | None = steps_first, **sched_kwargs: Any) -> None:
        self.run = run
        self.bound = bound
        self.preemptible = preemptible
        self.order = order
        self.sched_kwargs = sched_kwargs
        self._frontier: list[tuple[Deviation, ...]] = [()]
        self._level = 0
        self.ran = 0
        self.counts: dict[int, int] = {}
        self.complete: set[int] = set()

    def trial(self, schedule: tuple[Deviation, ...]) -> tuple[DeterministicScheduler, BaseException | None]:
        sched = DeterministicScheduler(0, strategy="fixed", schedule=schedule, **self.sched_kwargs)
        try:
            self.run(sched)
        except Exception as exc:
            return sched, exc
        return sched, None

    def level(self, depth: int) -> Iterator[Trial]:
        if depth != self._level:
            raise SchedulerError(f"levels run in order: level {self._level} is next, not {depth}")
        frontier, children = self._frontier, []
        self.counts[depth] = len(frontier)
        for schedule in frontier:
            sched, error = self.trial(schedule)
            self.ran += 1
            if depth < self.bound and error is None:
                children.extend(self.extensions(sched, schedule))
            yield Trial(self.ran, depth, schedule, sched, error)
        self.complete.add(depth)
        self._frontier = children
        self._level += 1

    def extensions(self, sched: DeterministicScheduler, schedule: tuple[Deviation, ...]) -> list[tuple[Deviation, ...]]:
        last = max((seq for seq, _ in _applied_seqs(sched)), default=0)
        out = []
        decisions = [d for d in sched.decisions if d.seq > last and self.preemptible(d.label)]
        if self.order is not None:
            decisions.sort(key=self.order)
        for d in decisions:
            for t in d.options:
                if t != d.chosen:
                    out.append((*schedule, Deviation(d.thread, d.at, t, d.label)))
        return out


def _applied_seqs(sched: DeterministicScheduler) -> list[tuple[int, Deviation]]:
    """(decision seq, deviation) of the deviations that took effect in ``sched``."""
    out = []
    for d in sched.decisions:
        if d.chosen != d.default:
            out.append((d.seq, Deviation(d.thread, d.at, d.chosen, d.label)))
    return out


def deviations_of(sched: DeterministicScheduler) -> tuple[Deviation, ...]:
    """The run of any strategy as a schedule of ``strategy="fixed"``: every decision that differs
    from the default policy (replaying it reproduces the run exactly; it needs ``record``)."""
    return tuple(dev for _, dev in _applied_seqs(sched))


def failure_signature(exc: BaseException) -> str:
    """What kind of failure: the root cause's type and first line, numbers blanked (delta debugging
    keeps a smaller schedule only if it fails the same way)."""
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    first = (str(root).splitlines() or [""])[0].split(";")[0]
    return f"{type(root).__name__}: {re.sub(r'[0-9]+', '#', first)[:120]}"


@dataclass
class Minimised:
    schedule: tuple[Deviation, ...]
    sched: DeterministicScheduler  # the replay of ``schedule`` (with the state probe when asked)
    error: BaseException
    runs: int  # replays spent
    complete: bool  # False: the run budget ended before ddmin did (still a failing schedule)


def minimise_schedule(run: Callable[[DeterministicScheduler], Any], schedule: Iterable[Deviation], *,
                      signature: str | None = None, max_runs: int = 300, **sched_kwargs: Any) -> Minimised:
    """Delta debugging (Zeller's ddmin) over the deviations of a failing ``schedule``: a smallest
    subset that still fails with the same ``failure_signature`` (1-minimal: removing any single
    deviation makes it pass or fail differently), spending at most ``max_runs`` replays.  The result
    is replayed once more with ``observe_state`` for ``render_interleaving``."""
    runs = 0

    def attempt(devs: tuple[Deviation, ...], observe: bool = False) -> tuple[DeterministicScheduler, BaseException | None]:
        nonlocal runs
        runs += 1
        sched = DeterministicScheduler(0, strategy="fixed", schedule=devs, observe_state=observe, **sched_kwargs)
        try:
            run(sched)
        except Exception as exc:
            return sched, exc
        return sched, None

    current = tuple(schedule)
    _, err = attempt(current)
    if err is None:
        raise SchedulerError(f"schedule [{', '.join(map(str, current))}] does not fail: nothing to minimise")
    want = signature or failure_signature(err)

    def fails(devs: tuple[Deviation, ...]) -> bool:
        _, e = attempt(devs)
        return e is not None and failure_signature(e) == want

    complete = True
    if current and fails(()):
        current = ()
    n = 2
    while len(current) >= 2:
        if runs >= max_runs:
            complete = False
            break
        size = len(current)
        chunks = [current[i * size // n:(i + 1) * size // n] for i in range(n)]
        reduced = False
        for i, chunk in enumerate(chunks):
            if runs >= max_runs:
                break
            if fails(chunk):
                current, n, reduced = chunk, 2, True
                break
            complement = tuple(x for j, c in enumerate(chunks) if j != i for x in c)
            if n > 2 and fails(complement):
                current, n, reduced = complement, max(n - 1, 2), True
                break
        if not reduced:
            if runs >= max_runs:
                complete = False
                break
            if n >= len(current):
                break
            n = min(2 * n, len(current))
    if len(current) == 1 and runs < max_runs and fails(()):
        current = ()
    sched, err = attempt(current, observe=True)
    if err is None or failure_signature(err) != want:
        raise SchedulerError(f"the minimised schedule [{', '.join(map(str, current))}] does not replay the failure")
    return Minimised(current, sched, err, runs, complete)


#: lock points, hidden from a rendered interleaving unless something happens there
_QUIET = ("acquire ", "release ", "nodelist.")


def render_interleaving(sched: DeterministicScheduler, *, quiet: tuple[str, ...] = _QUIET, limit: int = 400) -> list[str]:
    """The run of ``sched`` as readable lines: step, thread, switch point, and the program state
    (``states``, when the run had ``observe_state``) whenever it changed.  Shown: every labelled
    step, spawn, wait, join, block; a lock point only where the thread changes or a deviation took
    effect; each deviation as its own line.  At most ``limit`` lines (the end is kept)."""
    applied = {}
    for d in sched.decisions:
        if d.chosen != d.default:
            applied.setdefault(d.step, []).append(d)
    lines: list[str] = []
    last_state = None
    prev_thread = None
    width = max((len(t) for _, t, _ in sched.log), default=4)
    for step, thread, label in sched.log:
        devs = applied.get(step, [])
        state = sched.states.get(step)
        show = (not label.startswith(quiet)) or devs or thread != prev_thread
        if show:
            text = f"{step:>6}  {thread:<{width}}  {label}"
            if state is not None and state != last_state:
                text = f"{text:<{width + 52}}  | {state}"
                last_state = state
            lines.append(text)
        for d in devs:
            kind = "preempted" if d.preemptive else "exited" if d.label == "exit" else "blocked"
            lines.append(f"{'':>6}  >>> {d.thread} {kind} here: {d.chosen} runs instead of {d.default}"
                         f"  (deviation {d.thread}#{d.at} -> {d.chosen})")
        prev_thread = thread
    if len(lines) > limit:
        lines = [f"  ... {len(lines) - limit} earlier lines not shown"] + lines[-limit:]
    return lines
