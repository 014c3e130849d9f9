"""Time and cancellation for the broker and the thin client: an injectable clock and cancel tokens.

What it is
----------
Everything in ``conq.impl.ordered_consumption`` that depends on time -- the broker's invisible-time
expiry, delay messages, long polling and throttling, the clients' back-off sleeps and retry-policy
delays -- reads one *clock* object and never the wall clock directly:

``RealClock``
    ``time.monotonic``; waits are real ``Condition.wait`` calls (benchmarks, real-time runs).
``ManualClock``
    Time moves only when ``advance`` is called.  A thread that waits for a clock deadline is woken
    by ``advance`` (or by a notification of the condition it waits on), never by the wall clock, so a
    test can step invisible-time expiry deterministically with no sleeps.  ``waiters()`` tells a test
    how many threads are currently blocked on the clock (e.g. "the producer is in its back-off").

``Cancel`` is a cancellation token (a gRPC call's cancellation, a consumer's shutdown): ``cancel()``
wakes every wait that watches the token.  Tokens form a tree (``child()``): cancelling a parent (the
consumer shutting down) cancels every child (each process queue's receive loop), and a child can be
cancelled alone (a process queue dropped by a rebalance).

Waiting protocol
----------------
A blocking wait is always ``clock.wait(cond, deadline, cancel)`` called with ``cond`` held, inside
the caller's own ``while not predicate`` loop.  It returns when ``cond`` was notified, when the clock
reached ``deadline`` or when ``cancel`` was cancelled; spurious returns are allowed (the caller
re-checks its predicate), lost wake-ups are not.

Concurrency argument
--------------------
* ``ManualClock._lock`` protects the time and the set of registered conditions.  A waiter, while
  holding its ``cond``, registers ``cond`` *and* reads the time in one ``_lock`` section; ``advance``
  updates the time and snapshots the registered conditions in one ``_lock`` section, then (with
  ``_lock`` released) notifies each of them while holding it.  So either the waiter read the new time
  (and does not wait) or it was registered before the snapshot and is notified; the notification
  cannot slip in between its check and its wait because notifying needs ``cond``, which the waiter
  holds until ``cond.wait`` releases it.  ``Cancel`` uses the same protocol with its flag.
* Lock order: ``cond`` (any caller's lock) -> ``ManualClock._lock`` / ``Cancel._lock``; these two are
  leaves, and ``advance``/``cancel`` never hold them while taking a ``cond``.  They are plain
  ``threading.Lock`` objects held for a few statements with no interleaving point inside, which is
  also what keeps them safe under ``conq.impl.scheduling.DeterministicScheduler``.
* ``Cancel.cancelled`` is also read without the lock, as a hint (a single load: stale, never torn).
  A stale ``False`` costs at most one more wait, and that wait cannot miss the cancellation: it
  registers through ``_watch``, which re-reads the flag under the lock.
* Nothing relies on the GIL.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from conq.impl.scheduling import REAL

__all__ = ["Cancel", "ManualClock", "RealClock"]


class Cancel:
    """A cancellation token; ``cancel()`` wakes every wait watching it (and every child's)."""

    __slots__ = ("_children", "_conds", "_lock", "cancelled", "name")

    def __init__(self, name: str = "cancel") -> None:
        self.name = name
        self.cancelled = False
        self._lock = threading.Lock()
        self._conds: dict[int, Any] = {}
        self._children: list[Cancel] = []

    def child(self, name: str) -> Cancel:
        """A token cancelled when this one is (or on its own)."""
        c = Cancel(name)
        with self._lock:
            if not self.cancelled:
                self._children.append(c)
                return c
        c.cancel()
        return c

    def cancel(self) -> None:
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            conds = list(self._conds.values())
            children = list(self._children)
            self._children.clear()
        for c in conds:
            with c:
                c.notify_all()
        for ch in children:
            ch.cancel()

    # -- used by clocks while the caller holds ``cond`` ------------------------------------------------
    def _watch(self, cond: Any) -> bool:
        """Register ``cond``; returns True if already cancelled (then nothing is registered)."""
        with self._lock:
            if self.cancelled:
                return True
            self._conds[id(cond)] = cond
            return False

    def _unwatch(self, cond: Any) -> None:
        with self._lock:
            self._conds.pop(id(cond), None)


class RealClock:
    """Monotonic wall-clock time; waits are real timed waits."""

    def __init__(self, sched: Any = REAL) -> None:
        self._sched = sched

    def now(self) -> float:
        return time.monotonic()

    def wait(self, cond: Any, deadline: float | None, cancel: Cancel | None = None) -> None:
        """With ``cond`` held: block until notified, ``deadline`` (clock time) passed, or cancelled."""
        if cancel is not None and cancel._watch(cond):
            return
        try:
            if deadline is None:
                cond.wait()
            else:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    cond.wait(remaining)
        finally:
            if cancel is not None:
                cancel._unwatch(cond)

    def sleep(self, seconds: float, cancel: Cancel | None = None) -> bool:
        """Sleep ``seconds``; False if cancelled first."""
        if seconds <= 0:
            return not (cancel is not None and cancel.cancelled)
        cond = self._sched.condition(self._sched.lock("clock.sleep"), "clock.sleep")
        deadline = time.monotonic() + seconds
        with cond:
            while time.monotonic() < deadline:
                if cancel is not None and cancel.cancelled:
                    return False
                self.wait(cond, deadline, cancel)
        return not (cancel is not None and cancel.cancelled)


class ManualClock:
    """Time that moves only by ``advance``; waits for a deadline are woken by ``advance``."""

    def __init__(self, start: float = 0.0, sched: Any = REAL) -> None:
        self._sched = sched
        self._t = float(start)
        self._lock = threading.Lock()
        self._conds: dict[int, list[Any]] = {}  # id(cond) -> [cond, number of waits on it]
        self._waiting = 0

    def now(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> float:
        """Move time forward and wake every wait registered on the clock; returns the new time."""
        if seconds < 0:
            raise ValueError("a clock never goes back")
        with self._lock:
            self._t += seconds
            t = self._t
            conds = [entry[0] for entry in self._conds.values()]
        for c in conds:
            with c:
                c.notify_all()
        return t

    def waiters(self) -> int:
        """Number of threads currently blocked in ``wait``/``sleep`` of this clock."""
        with self._lock:
            return self._waiting

    def wait(self, cond: Any, deadline: float | None, cancel: Cancel | None = None) -> None:
        if cancel is not None and cancel._watch(cond):
            return
        try:
            with self._lock:
                if deadline is not None and self._t >= deadline:
                    return
                entry = self._conds.setdefault(id(cond), [cond, 0])
                entry[1] += 1
                self._waiting += 1
            try:
                cond.wait()
            finally:
                with self._lock:
                    self._waiting -= 1
                    entry[1] -= 1
                    if entry[1] == 0:
                        self._conds.pop(id(cond), None)
        finally:
            if cancel is not None:
                cancel._unwatch(cond)

    def sleep(self, seconds: float, cancel: Cancel | None = None) -> bool:
        if seconds <= 0:
            return not (cancel is not None and cancel.cancelled)
        cond = self._sched.condition(self._sched.lock("clock.sleep"), "clock.sleep")
        with cond:
            deadline = self.now() + seconds
            while self.now() < deadline:
                if cancel is not None and cancel.cancelled:
                    return False
                self.wait(cond, deadline, cancel)
        return not (cancel is not None and cancel.cancelled)
