"""The recovery-deferral model at the granularity of its threads' steps (issue 35): the thread level.

The model's actions are already the steps of the system's threads (model.py): the feed thread's
hand-off of an event (``feed``), each queue's worker entering and leaving the customer's listener
(``run``, ``done``), the deferred-ProducerUp scheduler's polls (``poll``), and the SDK's calls
(``recover``, ``status``).  The call level (calls.py) composes one pair of them: a ``run(q)`` that
makes room on the queue the feed thread waits for is answered together with the feed thread's
hand-off onto ``q`` (``["listener", e, ["queued", q]]``), since a call-level port runs every call to a
quiet point.  So nothing can happen between the worker's take and the feed thread's enqueue, and a
port that does the two in the wrong order -- or lets the worker complete the waiting hand-off
itself, before the feed thread has run again -- is invisible there.  Here the checker chooses:

* environment actions: ``["feed", p]`` (the broker hands producer ``p``'s next event to the feed
  thread, which runs its hand-off to its next scheduling point: done, or waiting for room on a full
  queue), ``["recover", p]`` and ``["status", p, k]`` (the SDK's calls, run to completion on the
  SDK's thread);
* ``["step", "worker", q]``: the worker serving task queue ``q`` runs its next step: ``run`` (it takes
  the head task and enters the customer's listener) when no task of ``q`` runs, else ``done`` (the
  listener returns, the task completes); a ``run`` that makes room wakes a waiting feed thread but
  does not run it;
* ``["step", "feed", 0]``: the feed thread, woken by room on the queue it waits for, finishes its
  hand-off (the model's ``feed`` of its event onto that queue);
* ``["step", "deferred", p, k]``: one run of producer ``p``'s deferred callback ``k`` (``poll``).

Each observation is ``[label, result]``: ``label`` the model step that ran (``["run", q]``,
``["done", q]``, ``["feed", p]``, ``["poll", p, k]``, an environment action itself), ``result`` the
model's observation of it (``["listener", e]``, ``"completed"``, ``["queued", q]``, ...).  The
snapshot is the call level's (calls.observation_of_state): while the feed thread waits, woken or not,
``feed_blocked`` names its queue.

The port side, :class:`ThreadStepsDriver`, is the call-level driver of the reference with one
scheduler of its own (``conq.impl.scheduling``'s interface): every lock and condition is a real one,
but a feed thread woken on a queue's ``room`` condition is held at that wake-up point -- the
scheduling point the call level runs through -- until the checker's ``["step", "feed", 0]``.  A
condition wait that returns later than its notification is a wait every condition variable may do
(the waiter re-checks its predicate), so the implementation runs unchanged.

Scope: the configurations with the reference switches (those the reference implements); the
upstream variants' own steps (``track``, ``deliver``, ``announce``) are not offered.
"""

from __future__ import annotations

import threading
from typing import Any

from conq.impl.scheduling import ThreadScheduler

from .. import thread_level
from ..adapters import ActionRejected
from ..thread_level import ThreadRun
from .calls import QUEUES, RecoveryDeferralCalls
from .driver import CAP, RecoveryDeferralDriver

#: the thread-level configurations: a named configuration of the model and overrides; each has full
#: queues (``queue_size`` 1, or one queue of 2 shared by every match), so the feed thread waits and a
#: worker's take wakes it, and the events, recoveries and callbacks of the named configuration
THREAD_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    # 2 producers, 2 queues of 1, 2 workers, an error event, an AliveIntervalViolation and a
    # FirstRecoveryCompleted per recovery
    "reference": ("reference", {}),
    # one queue of 2, one worker: every match on it (head-of-line blocking between producers)
    "one-queue": ("reference-one-queue", {}),
    # a second recovery of each producer may start while the first one's up is deferred
    "re-recovery": ("reference-re-recovery", {}),
    # the SDK's late onRecoveryInitiated (DEV-032): a recovery's resent events and up may come first,
    # and the feed thread may wait for room with such an event (issue 32)
    "late-initiation": ("reference-late-initiation", {}),
}
#: configurations on which the reference diverges at thread level, left for the lead (none)
FINDINGS: dict[str, tuple[str, dict[str, Any]]] = {}
#: the model steps of the upstream variants, which the thread level does not offer
UNSUPPORTED = frozenset({"track", "deliver", "announce"})


def thread_model(config: str = "reference", overrides: dict[str, Any] | None = None) -> "RecoveryDeferralThreads":
    """The thread-level view of ``THREAD_CONFIGS[config]`` (plus ``overrides``); ValueError names
    what is out of scope."""
    from ..thread_level import reference_model
    from .driver import REFERENCE_SWITCHES

    return RecoveryDeferralThreads(reference_model("recovery-deferral", config, {**THREAD_CONFIGS, **FINDINGS},
                                                   overrides, REFERENCE_SWITCHES))


def _request(a: tuple) -> tuple:
    """The thread-level request that makes model step ``a`` happen."""
    name = a[0]
    if name in ("run", "done"):
        return ("step", "worker", a[1])
    if name == "poll":
        return ("step", "deferred", a[1], a[2])
    if name in UNSUPPORTED:
        raise ValueError(f"the thread level does not offer model step {a!r} (thread_steps.py, 'Scope')")
    return tuple(a)


class RecoveryDeferralThreads(RecoveryDeferralCalls):
    """Thread-level view of a :class:`~conq.model.recovery_deferral.RecoveryDeferralModel`: the
    call-level view's states (model state, the waiting feed thread), its composed ``run`` undone
    (the worker's take alone; the feed thread's hand-off its own step), every action renamed to the
    thread that takes it, every observation ``(label, result)``."""

    def _compose(self, vs):
        s, blk = vs
        b = self.base
        out = []
        for a, o, t in super()._compose(vs):
            if blk is not None and a[0] == "run" and a[1] == blk[2]:
                # the call level completed the waiting hand-off in this call; here the worker's
                # take alone: the feed thread is woken, and waits for its own step
                for o1, t1 in b.step(s, a):
                    out.append((("step", "worker", a[1]), (tuple(a), o1), (t1, blk)))
                continue
            out.append((_request(a), (tuple(a), o), t))
        if blk is not None:
            p, _e, q, _counted = blk
            if len(s[QUEUES][q]) < self.config.queue_size:
                for o2, t2 in self._release(s, blk):
                    out.append((("step", "feed", 0), (("feed", p), o2), (t2, None)))
        return out

    def actors(self, action, observation):
        if action[0] == "step":
            return (f"{action[1]}{''.join(str(x) for x in action[2:])}", "listener")
        return self.base.actors(action, observation)


# -- the checker ---------------------------------------------------------------------------------------

def check_threads(impl: Any, config: str = "reference", *, walks: int = 20, length: int = 30, seed: int = 0,
                  depth: int = 0, snapshots: bool = True, probe: float = 0.0, impl_spec: str = "reference",
                  max_traces: int | None = None, minimise: bool = True) -> ThreadRun:
    """The thread-level campaign on one configuration (conformance/thread_level.py)."""
    return thread_level.check_threads(
        thread_model(config), impl, config, model_name="recovery-deferral", impl_spec=impl_spec, walks=walks,
        length=length, seed=seed, depth=depth, snapshots=snapshots, probe=probe, max_traces=max_traces,
        minimise=minimise)


def thread_impl(spec: str, *, timeout: float = 10.0) -> Any:
    """The implementation ``--impl spec`` at thread level (:func:`conq.conformance.thread_level.thread_impl`)."""
    return thread_level.thread_impl(spec, "recovery-deferral", thread_driver, timeout=timeout)


def thread_driver(base: type | None = None) -> type:
    """The thread-level driver over call-level driver class ``base`` (None: the reference): a
    mutant's driver class is a subclass of the reference's, so the thread level runs it as it is."""
    if base is None or base is RecoveryDeferralDriver:
        return ThreadStepsDriver
    return type(f"ThreadSteps[{base.__name__}]", (ThreadStepsMixin, base), {})


# -- the port side ---------------------------------------------------------------------------------------

class _HeldCondition:
    """A queue's ``room`` condition whose woken waiter stops at its wake-up, outside the lock, until
    the scheduler lets it go (see :class:`HoldingScheduler`)."""

    def __init__(self, lock: Any, sched: "HoldingScheduler"):
        self._lock = lock
        self._cond = threading.Condition(lock)
        self._sched = sched

    def wait(self, timeout: float | None = None) -> bool:
        woke = self._cond.wait(timeout)
        if woke:
            self._lock.release()
            try:
                self._sched.hold()
            finally:
                self._lock.acquire()
        return woke

    def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
        return self._cond.wait_for(predicate, timeout)

    def notify(self, n: int = 1) -> None:
        self._cond.notify(n)

    def notify_all(self) -> None:
        self._cond.notify_all()


class HoldingScheduler(ThreadScheduler):
    """Real threads and locks (``conq.impl.scheduling.REAL``), except that a feed thread woken on a
    queue's ``room`` condition is held at that scheduling point until :meth:`let_go`: the thread
    level's ``["step", "feed", 0]``.  Closing lets every held thread go for good."""

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self.held = 0  # threads held now
        self._go = 0  # let_go calls not yet taken
        self._closed = False

    def condition(self, lock: Any, name: str = "cond") -> Any:
        return _HeldCondition(lock, self) if ".room" in name else threading.Condition(lock)

    def hold(self) -> None:
        with self._cv:
            self.held += 1
            self._cv.notify_all()
            try:
                if not self._cv.wait_for(lambda: self._go or self._closed, CAP):
                    raise RuntimeError(f"a woken feed thread was not let go within {CAP:g} s")
                if self._go:
                    self._go -= 1
            finally:
                self.held -= 1
                self._cv.notify_all()

    def let_go(self) -> None:
        with self._cv:
            self._go += 1
            self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()


class ThreadStepsMixin:
    """The thread level over a call-level recovery-deferral driver (the reference's or a mutant's)."""

    #: what the port (``port.serve``) asks to know it must ``close`` the driver on ``reset``
    level = "thread"

    def scheduler(self) -> Any:
        self.holding = HoldingScheduler()
        return self.holding

    def _held(self) -> bool:
        with self.holding._cv:
            return self.holding.held > 0

    def _settle_blocked(self) -> None:
        """A waiting feed thread is quiet when it still has no room, or is held at its wake-up."""
        h = self.blocked
        if h is None:
            return

        def quiet() -> bool:
            if h.finished or self._held():
                return True
            snap = self.feed.pool_snapshot()
            return any(n and len(snap.queues[q]) >= self.queue_size for q, n in enumerate(snap.waiting))

        self._wait(quiet, "a feed thread that waited for room")

    def do(self, action: tuple) -> Any:
        if not action or action[0] != "step":
            if action and action[0] in ("run", "done", "poll"):
                raise KeyError(f"{action[0]!r} is a thread's step at thread level: [\"step\", ...]")
            return (tuple(action), super().do(action))
        kind = action[1] if len(action) > 1 else None
        args = action[2:]
        if kind == "worker" and len(args) == 1 and type(args[0]) is int:
            q = args[0]
            if not 0 <= q < self.queues:
                raise KeyError(f"no queue {q}")
            step = ("done", q) if self.workers.get(q) else ("run", q)
            return (step, super().do(step))
        if kind == "deferred" and len(args) == 2 and all(type(x) is int for x in args):
            return (("poll", *args), super().do(("poll", *args)))
        if kind == "feed" and args == (0,):
            return self._step_feed()
        raise ValueError(f"a step is [\"step\", \"worker\", q], [\"step\", \"feed\", 0] or "
                         f"[\"step\", \"deferred\", p, k], got {list(action)!r}")

    def _step_feed(self) -> Any:
        h = self.blocked
        if h is None:
            raise ActionRejected("the feed thread is not waiting for room")
        if not self._held():
            raise ActionRejected("the feed thread waits for room that no worker has made yet")
        e = self.blocked_event
        p = self.events[e][0]
        mark = len(self.calls)
        self.holding.let_go()
        self._wait(lambda: h.finished, f"the end of the hand-off of event {e}")
        self.blocked = None
        return (("feed", p), self._feed_outcome(h, e, self.calls[mark:]))

    def close(self) -> None:
        holding = getattr(self, "holding", None)
        if holding is not None:
            holding.close()
        super().close()


class ThreadStepsDriver(ThreadStepsMixin, RecoveryDeferralDriver):
    """The in-process thread-level driver of the reference: see the module docstring."""


# -- the generated port reference's section (conformance/port_reference.py) -------------------------

_STEPS = (
    ('`["feed", p]`', '`["feed", p]`', "environment: the broker hands producer `p`'s next event to the feed thread, "
     "which runs its hand-off (the call level's `feed`); when the event's queue is full the feed thread waits for "
     "room: `[\"blocked\", q, counted]`, and no other `feed` is enabled until it finished"),
    ('`["recover", p]`', '`["recover", p]`', "environment: the SDK's `onRecoveryInitiated` (the call level's)"),
    ('`["status", p, k]`', '`["status", p, k]`', "environment: the SDK's status callback (the call level's)"),
    ('`["step", "worker", q]`', '`["run", q]`', "the worker of queue `q` takes the head task and enters the "
     "customer's listener (the call level's `run`, **without** finishing a waiting hand-off: the room it makes "
     "wakes the feed thread, whose hand-off is the step `[\"step\", \"feed\", 0]`)"),
    ('`["step", "worker", q]`', '`["done", q]`', "while a task of `q` runs: the listener returns and the task "
     "completes (the call level's `done`)"),
    ('`["step", "feed", 0]`', '`["feed", p]`', "the feed thread, waiting on queue `q` and woken by room there, "
     "appends its event (producer `p`'s) to `q` (and counts it, if it did not before it waited): `[\"queued\", q]`. "
     "Enabled only while it waits and `q` has room"),
    ('`["step", "deferred", p, k]`', '`["poll", p, k]`', "one run of `p`'s deferred callback `k` (the call "
     "level's `poll`)"),
)


def reference_section(cap: int = 20_000) -> list[str]:
    """The "Thread level" section of spec/ports/recovery-deferral.md, from the thread-level view:
    every configuration it runs on and, per step, the results seen over its reachable states."""
    results, configs = thread_level.results_seen(thread_model, THREAD_CONFIGS, cap)
    out = ["## Thread level", "",
           ("A port may also be driven at the thread level (`conq conformance recovery-deferral --level thread`; "
            "`init` carries `\"level\": \"thread\"` and the port confirms with the feature `thread-steps` in "
            "`init_ok`, see [../port-protocol.md](../port-protocol.md)). The port keeps its threads -- the feed "
            "thread, one worker per task queue, the deferred callbacks' scheduler -- stopped at their scheduling "
            "points, and the checker chooses which one runs next. What differs from the call level: the worker's "
            "take that makes room on the queue the feed thread waits for does **not** finish the hand-off; the "
            "feed thread, woken, finishes it in a step of its own, and anything may happen in between (other "
            "workers, polls, the SDK's calls). Every observation is `[label, result]`: `label` the model step "
            "that ran, `result` what the call level would observe of it. The snapshot has the call level's "
            "shape; while the feed thread waits, woken or not, `feed_blocked` names its queue (and `pending` "
            "counts its event if it counted it before waiting)."), "",
           "| request | label | results seen | what runs |", "|---|---|---|---|"]
    for req, label, meaning in _STEPS:
        parts = req.split('"')
        key = (f"step {parts[3]}" if parts[1] == "step" else parts[1], label.split('"')[1])
        seen_results = ", ".join(f"`{r}`" for r in sorted(results.get(key, ()))) or "(never reached)"
        out.append(f"| {req} | {label} | {seen_results} | {meaning} |")
    out += ["", ("A request whose thread has no step now answers error 13: a worker whose queue is empty and runs "
                 "nothing (or all `config.workers` workers busy), the feed thread when it does not wait or its queue "
                 "has no room yet, a callback that is not deferred; so does an environment action the model does "
                 "not enable (as at call level). The configurations the thread level runs on, as `init` sends them "
                 "(see conformance/recovery_deferral/thread_steps.py):"), "", "```"]
    out += configs + ["```", ""]
    return out

