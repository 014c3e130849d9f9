"""The global-events side: ``ConcurrentGlobalEventsListener`` wraps the customer's
SDKGlobalEventsListener and defers every "up" until the tasks of its recovery have completed;
``PassThroughGlobalEventsListener`` is the legacy baseline.

Sources: seed 004 "Deferring of ProducerUp" (store the RecoveryContext on ``onRecoveryInitiated``;
on ``onProducerUp`` or ``onProducerStatusChange`` with FirstRecoveryCompleted /
ProcessingQueDelayStabilized / ReturnedFromInactivity schedule a ``DeferredProducerUpTask`` that
polls the pending tasks of *that* RecoveryContext and propagates the "up" when the count reaches
zero).  Upstream ``sdk-core/.../listener/concurrent/global/``: ``ConcurrentSDKGlobalEventsListener.java``,
``ProducerStatusQuery.java``, ``recovery/DeferredProducerUpOrchestrator.java``,
``recovery/DeferredProducerUpTask.java``, ``recovery/PendingRecoveries.java``.  The reference
decisions where upstream differs are spec/deviations.md DEV-002, DEV-011, DEV-014, DEV-015, and are
the recovery-deferral model's ``reference`` configuration.

The customer's listener is any object with ``on_recovery_initiated(producer_id, request_id)``,
``on_producer_up(producer_id, reason)``, ``on_producer_down(producer_id, reason)`` and
``on_producer_status_change(producer_id, status)`` (a missing method is skipped); any other ``on_*``
callback is forwarded at once.

Rules (per producer)
--------------------
The producer's *known* recovery is the newest one the listener has heard of: the request id its
last ``on_recovery_initiated`` stored, or a newer one whose resent events already reached the feed
listener (``tracker.newest_request``).  Upstream's SDK calls ``onRecoveryInitiated`` only once the
HTTP request ``/recovery/initiate_request`` has been answered (``RecoveryManagerImpl``,
``ProducerRecoveryRequester.run`` -> ``callOnRecoveryInitiated``), while the feed resends the
recovery's messages -- and its ``snapshot_complete``, which raises the "up" -- as soon as the request
reached the API: the "up" and the events can come first (issue 32, spec/deviations.md DEV-032).

* ``on_recovery_initiated(p, r)``: store context (p, r); every deferred "up" of p correlated with an
  *older* recovery is *superseded* (never delivered: it was about the previous recovery), one
  already correlated with r (an "up" that came first) stays; forward.
* an "up" (``on_producer_up``, or a status in ``UP_STATUSES``): *deferred* against p's known
  recovery.  Each "up" is its own deferred callback: a second "up" of the same recovery does not
  cancel the first (DEV-014); each is delivered exactly once, in arrival order, unless superseded
  or cancelled.  With no known recovery it is forwarded at once (DEV-002: there is nothing it could
  wait for; upstream drops it).
* any other status change, and ``on_producer_down``: every deferred "up" of p is *cancelled*
  (DEV-011: the producer is no longer up to date; its next recovery brings its own "up"); forward
  at once -- a non-up status is never deferred.
* delivery: a deferred "up" is delivered when a check reads ``tracker.pending(context) == 0`` and
  its recovery is the stored one (its ``onRecoveryInitiated`` reached the customer first, as seed
  004's "strict sequence" has it); a check that finds a newer recovery known supersedes it.

When a deferred "up" is checked
-------------------------------
A scheduler thread checks (1) every deferred "up" at each poll tick, every ``poll_interval``
seconds (upstream: every 200 ms, the first 200 ms after deferral), and (2) with ``wake_on_drain``,
the deferred "ups" of a context as soon as the tracker reports that context's pending count dropped
to 0 (an event-driven wake, so the delay after the last task is a thread hand-off, not a poll
interval).  ``poll_now()`` checks everything at once on the calling thread, ``poll_one(seq)`` one
deferred "up" (a step-by-step driver's single check: exactly what the scheduler does per candidate).
With ``manual=True`` no scheduler thread is started at all: only ``poll_now``/``poll_one`` check, and
``close`` makes the last check on the calling thread.  There is no check at
the moment of deferral: the first comes with the next tick or drain, as upstream's initial delay.
A timed-out wait of the scheduler thread always counts as a tick, so under the deterministic
scheduler (virtual time) ticks happen exactly when every other thread is blocked.  Liveness: an
"up" whose context is at 0 is delivered by the next tick at the latest; one whose context is above
0 is checked again when it drops to 0 (the tracker calls the observer on every drop to 0).

Concurrency argument (lock order: producer lock -> registry lock -> tracker lock)
-------------------------------------------------------------------------------
* Per producer, one lock (``_Producer.lock``, re-entrant for the thread holding it, so a customer
  callback may call back into this listener) serialises everything that reads or changes the
  producer's context and deferred list *and every call of the customer's listener for that
  producer*.  The check "pending == 0 -> deliver" runs entirely under it, so a new recovery (which
  takes the same lock to store its context and supersede) either happens before the check (the
  "up" is superseded, never delivered) or after the delivery returned (the customer saw the old "up"
  before the new ``on_recovery_initiated``): DEV-015, the model's ``no-stale-up``.  The same holds
  for a Down (DEV-011, ``no-up-after-down``).  State changes to ``delivered`` happen once, under the
  lock, so an "up" is delivered at most once (``up-at-most-once``) even when a tick, a drain wake and
  ``poll_now`` check it concurrently.
* The registry lock (``_reg_lock``, with condition ``_wake``) protects the set of deferred "ups",
  the contexts awaited, the drained contexts reported by the tracker, and the stop flag.  It is
  taken inside a producer lock (registering / retiring) or alone (the scheduler's wait, the
  tracker's observer), never the other way round.
* The tracker's lock is a leaf; ``pending`` is read under the producer lock.  Correctness of the
  read: pending(context) >= the context's tasks queued or running (tracker docstring), so reading 0
  means every task of the recovery handed off so far has completed.
* Different producers share only short-held leaf locks (registry, stats, tracker), never one held
  across a customer call, so one producer's deferred "up" never waits for another producer's tasks
  or callbacks -- except that the single scheduler thread delivers one "up" at a time (as
  upstream's single scheduled executor): a customer ``on_producer_up`` that blocks delays the other
  deliveries.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from conq.impl.recovery_deferral.demux import ShutdownTimeout
from conq.impl.recovery_deferral.events import RecoveryContext, context_of, is_up_status
from conq.impl.recovery_deferral.tracker import TaskLifecycleTracker
from conq.impl.scheduling import REAL

__all__ = [
    "CANCELLED",
    "DEFERRED",
    "DELIVERED",
    "SUPERSEDED",
    "ConcurrentGlobalEventsListener",
    "DeferredUp",
    "GlobalEventsListener",
    "GlobalListenerStats",
    "PassThroughGlobalEventsListener",
]

log = logging.getLogger(__name__)

DEFERRED, DELIVERED, SUPERSEDED, CANCELLED = "deferred", "delivered", "superseded", "cancelled-by-down"


class GlobalEventsListener(Protocol):
    def on_recovery_initiated(self, producer_id: int, request_id: int) -> None: ...

    def on_producer_up(self, producer_id: int, reason: Any) -> None: ...

    def on_producer_down(self, producer_id: int, reason: Any) -> None: ...

    def on_producer_status_change(self, producer_id: int, status: Any) -> None: ...


@dataclass(frozen=True)
class DeferredUp:
    """A snapshot of one deferred "up" (for observation)."""

    seq: int
    producer_id: int
    context: RecoveryContext
    method: str
    argument: Any
    state: str
    polls: int
    last_pending: int | None


@dataclass(frozen=True)
class GlobalListenerStats:
    deferred: int  # "ups" deferred so far
    delivered: int
    superseded: int
    cancelled: int
    forwarded_without_context: int  # DEV-002
    waiting: int  # deferred now
    checks: int  # pending reads by deferred "ups"
    customer_errors: int


class _Deferred:
    __slots__ = ("argument", "context", "last_pending", "method", "polls", "producer_id", "seq", "state")

    def __init__(self, seq: int, producer_id: int, context: RecoveryContext, method: str, argument: Any) -> None:
        self.seq = seq
        self.producer_id = producer_id
        self.context = context
        self.method = method
        self.argument = argument
        self.state = DEFERRED
        self.polls = 0
        self.last_pending: int | None = None

    def view(self) -> DeferredUp:
        return DeferredUp(self.seq, self.producer_id, self.context, self.method, self.argument, self.state,
                          self.polls, self.last_pending)


class _ReentrantLock:
    """A scheduler lock the holding thread may take again (a customer callback, run under its
    producer's lock, that calls back into the listener for the same producer)."""

    __slots__ = ("_depth", "_lock", "_owner")

    def __init__(self, sched: Any, name: str) -> None:
        self._lock = sched.lock(name)
        self._owner: int | None = None
        self._depth = 0

    def __enter__(self) -> None:
        me = threading.get_ident()
        if self._owner == me:  # only this thread ever stores its own ident here
            self._depth += 1
            return
        self._lock.acquire()
        self._owner = me
        self._depth = 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()


class _Producer:
    __slots__ = ("context", "deferred", "lock")

    def __init__(self, lock: _ReentrantLock) -> None:
        self.lock = lock
        self.context: RecoveryContext | None = None
        self.deferred: list[_Deferred] = []


def _call(customer: Any, method: str, args: tuple, on_error: Callable[[BaseException], None]) -> None:
    fn = getattr(customer, method, None)
    if fn is None:
        return
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - a customer failure never kills our threads
        on_error(exc)
        log.warning("customer global listener %s%r raised %r", method, args, exc)


class ConcurrentGlobalEventsListener:
    def __init__(
        self,
        customer: GlobalEventsListener,
        tracker: TaskLifecycleTracker,
        *,
        poll_interval: float | None = 0.2,
        wake_on_drain: bool = True,
        sched: Any = REAL,
        clock: Callable[[], float] = time.monotonic,
        name: str = "global",
        history: int = 10_000,
        manual: bool = False,
    ) -> None:
        self._customer = customer
        self._tracker = tracker
        self._poll_interval = poll_interval
        self._wake_on_drain = wake_on_drain
        self._sched = sched
        self._clock = clock
        self._name = name
        self._reg_lock = sched.lock(f"{name}.registry")
        self._wake = sched.condition(self._reg_lock, f"{name}.wake")
        self._stats_lock = sched.lock(f"{name}.stats")
        self._producers: dict[int, _Producer] = {}
        self._waiting: dict[int, _Deferred] = {}  # seq -> deferred "up" (registry)
        self._awaited: dict[RecoveryContext, int] = {}  # context -> how many deferred "ups" wait on it
        self._drained: set[RecoveryContext] = set()
        self._history: deque[_Deferred] = deque(maxlen=history)
        self._seq = itertools.count(1)
        self._stopping = False
        self._thread_ident: int | None = None
        self._n = dict.fromkeys(("deferred", "delivered", "superseded", "cancelled", "no_context", "checks", "errors"), 0)
        tracker.add_drained_observer(self._on_drained)
        self._manual = manual
        self._thread = None if manual else sched.spawn(self._scheduler_loop, f"{name}-deferred-up")

    # -- the SDK's callbacks ----------------------------------------------------------------------------
    def on_recovery_initiated(self, producer_id: int, request_id: int) -> None:
        st = self._producer(producer_id)
        with st.lock:
            ctx = st.context = context_of(producer_id, request_id)
            # the deferred "ups" of older recoveries are superseded; one that came before this
            # (late) onRecoveryInitiated and is already correlated with it stays (DEV-032)
            self._retire_locked(st, SUPERSEDED, older_than=ctx.request_id if ctx.valid else None)
            self._forward("on_recovery_initiated", producer_id, request_id)
            waiting = bool(st.deferred)
        if waiting:
            self._wake_for(ctx)  # one of them may have been waiting for this initiation only

    def on_producer_up(self, producer_id: int, reason: Any = None) -> None:
        self._defer(producer_id, "on_producer_up", reason)

    def on_producer_status_change(self, producer_id: int, status: Any) -> None:
        if is_up_status(status):
            self._defer(producer_id, "on_producer_status_change", status)
        else:
            self._down(producer_id, "on_producer_status_change", status)

    def on_producer_down(self, producer_id: int, reason: Any = None) -> None:
        self._down(producer_id, "on_producer_down", reason)

    def __getattr__(self, name: str) -> Any:
        # any other global callback (connection down, ...) is forwarded at once, as upstream's
        # DelegatingSDKGlobalEventsListener does
        if not name.startswith("on_") or "_customer" not in self.__dict__:
            raise AttributeError(name)
        target = getattr(self._customer, name)

        def forward(*args: Any) -> None:
            _call(self._customer, name, args, self._count_error)

        forward.__name__ = getattr(target, "__name__", name)
        return forward

    # -- rules ----------------------------------------------------------------------------------------
    def _known_locked(self, st: _Producer, producer_id: int) -> int:
        """The producer's known recovery (module docstring): the stored one, or a newer one whose
        resent events arrived first.  Under ``st.lock``."""
        stored = st.context.request_id if st.context is not None and st.context.valid else 0
        return max(stored, self._tracker.newest_request(producer_id))

    def _defer(self, producer_id: int, method: str, argument: Any) -> None:
        st = self._producer(producer_id)
        with st.lock:
            ctx = context_of(producer_id, self._known_locked(st, producer_id))
            if not ctx.valid:
                # DEV-002: no recovery to wait for; upstream logs "Cannot defer" and drops it
                log.warning("%s: producer %s %s(%r) with no recovery context: forwarded at once",
                            self._name, producer_id, method, argument)
                self._bump("no_context")
                self._forward(method, producer_id, argument)
                return
            d = _Deferred(next(self._seq), producer_id, ctx, method, argument)
            st.deferred.append(d)
            with self._reg_lock:
                self._waiting[d.seq] = d
                self._awaited[ctx] = self._awaited.get(ctx, 0) + 1
                self._history.append(d)
            self._bump("deferred")

    def _down(self, producer_id: int, method: str, argument: Any) -> None:
        st = self._producer(producer_id)
        with st.lock:
            self._retire_locked(st, CANCELLED)  # DEV-011
            self._forward(method, producer_id, argument)

    def _retire_locked(self, st: _Producer, state: str, older_than: int | None = None) -> None:
        """Retire the producer's deferred "ups" (all of them, or those of a recovery older than
        ``older_than``) as ``state``."""
        gone = [d for d in st.deferred if older_than is None or d.context.request_id < older_than]
        if not gone:
            return
        for d in gone:
            d.state = state
        self._unregister(gone)
        self._bump("superseded" if state == SUPERSEDED else "cancelled", len(gone))
        st.deferred = [d for d in st.deferred if d.state == DEFERRED]

    def _retire_one_locked(self, st: _Producer, d: _Deferred, state: str) -> None:
        """Retire deferred "up" ``d`` of ``st`` as ``state``."""
        d.state = state
        st.deferred.remove(d)
        self._unregister([d])
        self._bump("superseded" if state == SUPERSEDED else "cancelled")

    def _unregister(self, ds: list[_Deferred]) -> None:
        with self._reg_lock:
            for d in ds:
                if self._waiting.pop(d.seq, None) is not None:
                    left = self._awaited[d.context] - 1
                    if left:
                        self._awaited[d.context] = left
                    else:
                        del self._awaited[d.context]

    def _check(self, d: _Deferred) -> bool:
        """The DeferredProducerUpTask's run: read pending(context); at 0 deliver.  Under the
        producer's lock, so deciding and delivering are one step against a new recovery or a Down
        (DEV-015)."""
        st = self._producer(d.producer_id)
        with st.lock:
            if d.state != DEFERRED:
                return False
            if self._known_locked(st, d.producer_id) > d.context.request_id:
                # a newer recovery's events arrived before its onRecoveryInitiated: superseded, as by a new
                # recovery -- this deferred "up" (each check decides for its own, as each of upstream's
                # DeferredProducerUpTasks does; another one of the producer's goes at its own check)
                self._retire_one_locked(st, d, SUPERSEDED)
                return False
            n = self._tracker.pending(d.context)
            d.polls += 1
            d.last_pending = n
            self._bump("checks")
            if n or st.context != d.context:
                return False  # tasks outstanding, or its onRecoveryInitiated has not come yet
            d.state = DELIVERED
            st.deferred.remove(d)
            self._unregister([d])
            self._bump("delivered")
            self._forward(d.method, d.producer_id, d.argument)
            return True

    def poll_now(self) -> int:
        """Check every deferred "up" now, on the calling thread; how many were delivered."""
        with self._reg_lock:
            candidates = sorted(self._waiting.values(), key=lambda d: d.seq)
        return sum(self._check(d) for d in candidates)

    def poll_one(self, seq: int) -> bool:
        """Check deferred "up" number ``seq`` (``DeferredUp.seq``) now, on the calling thread: True
        when this check delivered it; False when its pending count was not 0 (``last_pending`` of
        its ``deferrals()`` entry says what was read) or it is not deferred any more."""
        with self._reg_lock:
            d = self._waiting.get(seq)
        return d is not None and self._check(d)

    # -- the scheduler thread ----------------------------------------------------------------------------
    def _on_drained(self, context: RecoveryContext) -> None:
        """Tracker observer: ``context``'s pending count just dropped to 0 (on a worker thread)."""
        if self._wake_on_drain:
            self._wake_for(context)

    def _wake_for(self, context: RecoveryContext) -> None:
        """Have the scheduler check the deferred "ups" of ``context`` now (its count drained, or its
        late onRecoveryInitiated came)."""
        with self._reg_lock:
            if context in self._awaited:
                self._drained.add(context)
                self._wake.notify()

    def _scheduler_loop(self) -> None:
        with self._reg_lock:
            self._thread_ident = threading.get_ident()
        interval = self._poll_interval
        next_tick = None if interval is None else self._clock() + interval
        while True:
            tick = False
            with self._reg_lock:
                while not self._stopping and not self._drained:
                    if next_tick is None:
                        self._wake.wait()
                        continue
                    remaining = next_tick - self._clock()
                    if remaining <= 0 or not self._wake.wait(remaining):
                        tick = True  # a timed-out wait is a tick (virtual time when deterministic)
                        break
                stopping = self._stopping
                drained, self._drained = self._drained, set()
                everything = tick or stopping
                candidates = sorted(
                    (d for d in self._waiting.values() if everything or d.context in drained), key=lambda d: d.seq
                )
            if tick:
                next_tick = self._clock() + interval
            for d in candidates:
                self._check(d)  # a final check on stop: an "up" whose tasks are all done is not lost
            if stopping:
                return

    # -- helpers ----------------------------------------------------------------------------------------
    def _producer(self, producer_id: int) -> _Producer:
        with self._reg_lock:
            st = self._producers.get(producer_id)
            if st is None:
                st = self._producers[producer_id] = _Producer(_ReentrantLock(self._sched, f"{self._name}.p{producer_id}"))
            return st

    def _forward(self, method: str, *args: Any) -> None:
        _call(self._customer, method, args, self._count_error)

    def _count_error(self, exc: BaseException) -> None:
        self._bump("errors")

    def _bump(self, key: str, n: int = 1) -> None:
        with self._stats_lock:
            self._n[key] += n

    # -- observation and shutdown -------------------------------------------------------------------------
    def stored_context(self, producer_id: int) -> RecoveryContext | None:
        st = self._producer(producer_id)
        with st.lock:
            return st.context

    def deferrals(self, producer_id: int | None = None) -> list[DeferredUp]:
        """Every deferred "up" still in the history (the last ``history``), oldest first."""
        with self._reg_lock:
            ds = list(self._history)
        return [d.view() for d in ds if producer_id is None or d.producer_id == producer_id]

    def stats(self) -> GlobalListenerStats:
        with self._reg_lock:
            waiting = len(self._waiting)
        with self._stats_lock:
            n = dict(self._n)
        return GlobalListenerStats(n["deferred"], n["delivered"], n["superseded"], n["cancelled"], n["no_context"],
                                   waiting, n["checks"], n["errors"])

    def thread_ident(self) -> int | None:
        """The scheduler thread's ident (None until it has started)."""
        with self._reg_lock:
            return self._thread_ident

    def alive_threads(self) -> list[str]:
        return [self._thread.name] if self._thread is not None and self._thread.is_alive() else []

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop the scheduler thread after one last check of every deferred "up" (one whose tasks all
        completed is delivered, the others are left undelivered) and join it.  Idempotent.  Manual
        mode: the last check runs on the calling thread."""
        with self._reg_lock:
            already = self._stopping
            self._stopping = True
            self._wake.notify_all()
        if self._thread is None:
            if not already:
                self.poll_now()
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise ShutdownTimeout(f"{self._name}: scheduler thread still alive", [self._thread.name])


class PassThroughGlobalEventsListener:
    """The legacy pipeline (``enabled = False``): every callback forwarded at once.  In the legacy
    SDK the feed thread has processed every resent event before it raises the "up" (seed 004: "this
    all happens quite naturally since events are always processed in serial"), so nothing needs
    deferring (REC-008)."""

    def __init__(self, customer: GlobalEventsListener, *, sched: Any = REAL, name: str = "global-legacy") -> None:
        self._customer = customer
        self._stats_lock = sched.lock(f"{name}.stats")
        self._errors = 0

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_") or "_customer" not in self.__dict__:
            raise AttributeError(name)

        def forward(*args: Any) -> None:
            _call(self._customer, name, args, self._count_error)

        return forward

    def _count_error(self, exc: BaseException) -> None:
        with self._stats_lock:
            self._errors += 1

    @property
    def customer_errors(self) -> int:
        with self._stats_lock:
            return self._errors

    def alive_threads(self) -> list[str]:
        return []

    def close(self, timeout: float | None = 30.0) -> None:
        return None
