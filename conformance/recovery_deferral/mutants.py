"""The recovery-deferral mutant catalogue: plausible bugs of the reference concurrent listener
(``conq.impl.recovery_deferral``), one per rule of seed 004's demultiplexing and deferral sections,
and the engines that must catch each of them.

The generic machinery (applying a mutant with ``unittest.mock`` patches, count budgets with a safety
cap, the kill matrix) is :mod:`conq.conformance.mutation`; ``conq mutants recovery-deferral`` prints
the matrix.  Each mutant patches methods that the manual (step-by-step) mode and the threaded mode
share (``TaskPool._place_locked`` / ``_enqueue_locked`` / ``_take_locked`` / ``_release_locked``, the
feed listener's hand-off, the global listener's rules), so every engine runs the same bug.

Engines (each spends a *count*, scaled by ``Budget.scale``; seconds only cap):

* ``explorer``  : every action sequence of up to ``EXPLORER_DEPTH`` steps on each configuration,
                  shortest first (generate.action_sequences), then the shortest model paths to the
                  ``EXPLORER_LEAVES`` deepest leaves of the bounded call-level graph of each
                  configuration, replayed against the implementation (driver.py);
* ``random``    : seeded random walks from the consistent model states (``Checker.walk``);
* ``hypothesis``: a hypothesis state machine driving implementation and model side by side
                  (side_by_side.py; shrinks to a minimal failing run);
* ``schedules`` : feed-simulator scripts under the implementation's ``DeterministicScheduler``, one
                  seeded interleaving after another (uniformly random, one round in four PCT), every
                  wait in virtual time: the journal checks, the tracker's anomalies, no count left
                  over;
* ``journal``   : bigger feed-simulator scenarios (three producers, small queues, handlers that
                  throw, re-recoveries, downs, errors, several "up" callbacks) under PCT
                  (``PCTSearch``: every thread under the deterministic scheduler), checked by
                  ``feed.check_journal``; replayable from its seed (issue 32: it ran on real
                  threads, and two runs with the same seeds reported different details).
"""

from __future__ import annotations

import threading

from conq.conformance.mutation import Budget, Catalogue, Clock, Detection, Mutant, replay_until_killed, walk_until_killed
from conq.impl.recovery_deferral import events as _events
from conq.impl.recovery_deferral.demux import TaskPool
from conq.impl.recovery_deferral.feed_listener import ConcurrentFeedListener, _Task
from conq.impl.recovery_deferral.global_listener import (
    CANCELLED,
    DEFERRED,
    DELIVERED,
    ConcurrentGlobalEventsListener,
)
from conq.impl.recovery_deferral.listener import ConcurrentListener
from conq.impl.recovery_deferral.tracker import TaskLifecycleTracker

CFL = ConcurrentFeedListener
CGL = ConcurrentGlobalEventsListener

# -- the bugs: demultiplexing ------------------------------------------------------------------------

from conq.impl.recovery_deferral import feed_listener as _feed_listener  # noqa: E402 - next to its mutants


def _java_remainder_index(event_id, queues):
    """Upstream ``TaskAllocator.calculatePartition``: Java's ``%``, negative for a negative hash (DEV-008)."""
    h = _events.stable_hash(event_id)
    r = abs(h) % queues
    return -r if h < 0 else r


def _int_hash_index(event_id, queues):
    """An integer id hashed as Java's ``Long.hashCode`` (``(int)(id ^ id >>> 32)``) before the modulo:
    the same queue for every id below 2^31, another one for many larger ids."""
    if isinstance(event_id, int) and not isinstance(event_id, bool):
        x = event_id & 0xFFFFFFFFFFFFFFFF
        h = (x ^ (x >> 32)) & 0xFFFFFFFF
        return (h - (1 << 32) if h >= 1 << 31 else h) % queues
    return _events.queue_index(event_id, queues)


_orig_hand_off = CFL._hand_off
_orig_place = TaskPool._place_locked
_orig_on_error = CFL.on_error


def _caller_runs_when_full(self, index, task):
    """ThreadPoolExecutor.CallerRunsPolicy: a full queue makes the feed thread run the task itself."""
    pool = self._pool
    with pool._lock:
        full = pool._capacity is not None and len(pool._queues[index].items) >= pool._capacity
    if not full:
        return _orig_hand_off(self, index, task)
    self._tracker.task_allocated(task.context)
    self._run_task(task)
    return True


def _drop_when_full(self, index, task):
    """Upstream TaskExecutor: a task rejected by a full queue is logged and lost."""
    q = self._queues[index]
    if not self._closed and self._capacity is not None and len(q.items) >= self._capacity:
        self._dropped += 1
        return False
    return _orig_place(self, index, task)


def _enqueue_every_task(self, index, q, task):
    """Every task is its own unit of work on the shared pool (no per-queue serialisation)."""
    q.items.append(task)
    self._submitted += 1
    self._queued += 1
    q.high_water = max(q.high_water, len(q.items))
    self._max_queued = max(self._max_queued, self._queued)
    q.scheduled = True
    self._ready.append(index)
    self._work.notify()


def _release_without_requeue(self, index, q):
    self._running -= 1
    self._completed += 1
    q.current = None
    if not q.items:
        q.scheduled = False
    if self._queued == 0 and self._running == 0:
        self._idle.notify_all()


def _event_to_random_queue(self, event):
    with self._rng_lock:
        index = self._rng.randrange(self._queues)
    return self._hand_off(index, _Task(event, event.context, False))


def _error_to_random_queue(self, error):
    if not self._config.handle_errors_asynchronously:
        return _orig_on_error(self, error)
    with self._rng_lock:
        index = self._rng.randrange(self._queues)
    return self._hand_off(index, _Task(error, error.context, True))


def _take_newest(self, index):
    q = self._queues[index]
    task = q.items.pop()
    q.current = task
    self._queued -= 1
    self._running += 1
    q.room.notify()
    return q, task


# -- the bugs: the tracker and the deferred ProducerUp --------------------------------------------------


def _count_after_enqueue(self, index, task):
    """Upstream TaskExecutor.submit: hand the task over first, count it afterwards (DEV-009)."""
    placed = self._pool.submit(index, task)
    if placed:
        self._tracker.task_allocated(task.context)
    return placed


def _complete_only_on_success(self, task):
    """No ``finally``: a customer listener that throws leaves its task pending for ever."""
    self._tracker.task_started(task.context)
    method = self._customer.on_error if task.error else self._customer.on_event
    try:
        method(task.item)
    except BaseException as exc:  # noqa: BLE001
        with self._stats_lock:
            self._listener_errors += 1
            self.last_listener_error = exc
        return
    self._tracker.task_completed(task.context)


def _errors_untracked(self, error):
    """Upstream TaskFactory: error tasks are queued under no recovery context (DEV-010)."""
    if not self._config.handle_errors_asynchronously:
        return _orig_on_error(self, error)
    if error.event_id is not None:
        index = _events.queue_index(error.event_id, self._queues)
    else:
        with self._rng_lock:
            index = self._rng.randrange(self._queues)
    return self._hand_off(index, _Task(error, _events.NONE_CONTEXT, True))


def _own_tracker(self, customer):
    """Each wrapped feed listener counts in a tracker of its own, which the global listener never reads."""
    if self._closed:
        raise RuntimeError("closed")
    i = len(self.feed_listeners)
    wrapped = ConcurrentFeedListener(customer, config=self.config, tracker=TaskLifecycleTracker(self._sched),
                                     sched=self._sched, name=f"{self._name}-feed{i}", seed=self._seed + i)
    self.feed_listeners.append(wrapped)
    return wrapped


def _recover_keeps_deferred(self, producer_id, request_id):
    """A new recovery stores its context but leaves the previous recovery's deferred ups waiting."""
    st = self._producer(producer_id)
    with st.lock:
        st.context = _events.context_of(producer_id, request_id)
        self._forward("on_recovery_initiated", producer_id, request_id)


def _down_keeps_deferred(self, producer_id, method, argument):
    """Upstream: a Down is forwarded and the deferred ProducerUp still fires later (DEV-011)."""
    st = self._producer(producer_id)
    with st.lock:
        self._forward(method, producer_id, argument)


def _forward_at_once(self, producer_id, method, argument):
    """The up is forwarded when the SDK raises it, while its recovery's tasks may still be queued."""
    self._forward(method, producer_id, argument)


_orig_defer = CGL._defer


def _defer_replacing(self, producer_id, method, argument):
    """Upstream PendingRecoveries.save: deferring a callback cancels the producer's other one (DEV-014)."""
    st = self._producer(producer_id)
    with st.lock:
        if st.context is not None and st.context.valid:
            self._retire_locked(st, CANCELLED)
        _orig_defer(self, producer_id, method, argument)


def _drop_without_context(self, producer_id, method, argument):
    """Upstream DeferredProducerUpOrchestrator: "Cannot defer ... as no recovery initiated!" (DEV-002)."""
    st = self._producer(producer_id)
    with st.lock:
        if st.context is None or not st.context.valid:
            return
        _orig_defer(self, producer_id, method, argument)


def _known_is_stored(self, st, producer_id):
    """Upstream ``PendingRecoveries.contextFor``: an up is tied to the stored recovery only, never to a
    newer one whose resent events came before its late onRecoveryInitiated (DEV-032)."""
    return st.context.request_id if st.context is not None and st.context.valid else 0


def _check_every_context(self, d):
    """The deferred up reads the pending tasks of every context, not of its own recovery."""
    st = self._producer(d.producer_id)
    with st.lock:
        if d.state != DEFERRED:
            return False
        n = sum(c.pending for c in self._tracker.snapshot().values())
        d.polls += 1
        d.last_pending = n
        if n:
            return False
        d.state = DELIVERED
        st.deferred.remove(d)
        self._unregister([d])
        self._forward(d.method, d.producer_id, d.argument)
        return True


def _poll_then_deliver(self, d):
    """Upstream DeferredProducerUpTask.run: read the count, then deliver; a new recovery in between
    does not stop it (DEV-015)."""
    st = self._producer(d.producer_id)
    with st.lock:
        if d.state != DEFERRED:
            return False
        n = self._tracker.pending(d.context)
        d.polls += 1
        d.last_pending = n
    if n:
        return False
    self._sched.point("read 0, about to deliver")
    with st.lock:
        st.deferred = [x for x in st.deferred if x is not d]
        d.state = DELIVERED
        self._unregister([d])
        self._forward(d.method, d.producer_id, d.argument)
        return True


def _deliver_and_keep(self, d):
    """A delivered up is not retired: every later check delivers it again."""
    st = self._producer(d.producer_id)
    with st.lock:
        if d.state != DEFERRED:
            return False
        n = self._tracker.pending(d.context)
        d.polls += 1
        d.last_pending = n
        if n:
            return False
        self._forward(d.method, d.producer_id, d.argument)
        return True


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in [
        # Implementation / Legacy SDK issue / Configuration (DEMUX)
        Mutant("caller-runs-when-full", "a full queue makes the feed thread run the customer's listener itself "
               "(CallerRunsPolicy)", "customer code on the feed thread",
               ((CFL, "_hand_off", _caller_runs_when_full),)),
        Mutant("drop-when-full", "a task that finds its queue full is dropped (upstream TaskExecutor, DEV-001)", "silent loss",
               ((TaskPool, "_place_locked", _drop_when_full),)),
        Mutant("two-workers-per-queue", "every task is scheduled on the pool by itself: two workers may run one "
               "queue (one match) at once", "per-match order",
               ((TaskPool, "_enqueue_locked", _enqueue_every_task), (TaskPool, "_release_locked", _release_without_requeue))),
        Mutant("event-to-random-queue", "an event goes to a random queue instead of hash(event id) mod queues",
               "per-match order", ((CFL, "on_event", _event_to_random_queue),)),
        Mutant("error-to-random-queue", "an error about a match goes to a random queue (the seed's literal reading, DEV-007)",
               "per-match order", ((CFL, "on_error", _error_to_random_queue),)),
        Mutant("lifo-queue", "a worker takes the newest task of its queue instead of the oldest", "per-match order",
               ((TaskPool, "_take_locked", _take_newest),)),
        # seen only on ids of the SDK's real value space (issue 32: the driver's ID_SPACES)
        Mutant("index-java-remainder", "the queue index is Java's hash % queues, negative for an id whose hash is "
               "negative (upstream, DEV-008)", "allocation", ((_feed_listener, "queue_index", _java_remainder_index),)),
        Mutant("index-int-hash", "an integer id is hashed to 32 bits (Java's Long.hashCode) before the modulo: "
               "large ids land on another queue", "allocation", ((_feed_listener, "queue_index", _int_hash_index),)),
        # Deferring of ProducerUp (REC)
        Mutant("count-after-enqueue", "the tracker counts a task after the queue accepted it (upstream, DEV-009): "
               "a worker may complete it first", "tracker race",
               ((CFL, "_hand_off", _count_after_enqueue),)),
        Mutant("complete-only-on-success", "a task whose customer listener throws is never marked completed",
               "tracker", ((CFL, "_run_task", _complete_only_on_success),)),
        Mutant("errors-untracked", "error tasks are counted under no recovery context (upstream, DEV-010)", "tracker",
               ((CFL, "on_error", _errors_untracked),)),
        Mutant("tracker-per-feed-listener", "each wrapped feed listener counts in a tracker of its own, which the "
               "deferred up never reads", "tracker", ((ConcurrentListener, "wrap_feed_listener", _own_tracker),)),
        Mutant("deliver-without-waiting", "an up is forwarded at once instead of deferred", "deferral",
               ((CGL, "_defer", _forward_at_once),)),
        Mutant("up-waits-for-every-context", "a deferred up waits for the tasks of every context, not of its own "
               "recovery (wrong context)", "deferral", ((CGL, "_check", _check_every_context),)),
        Mutant("no-supersede-on-recovery", "a new recovery leaves the previous recovery's deferred ups waiting",
               "stale up", ((CGL, "on_recovery_initiated", _recover_keeps_deferred),)),
        Mutant("down-does-not-cancel", "a Down does not cancel the deferred up (upstream, DEV-011)", "stale up",
               ((CGL, "_down", _down_keeps_deferred),)),
        Mutant("poll-then-deliver", "the check reads 0, then delivers without holding the producer's lock: a new "
               "recovery in between does not stop it (upstream, DEV-015)", "stale up",
               ((CGL, "_check", _poll_then_deliver),)),
        Mutant("up-tied-to-stored-recovery", "an up is correlated with the stored recovery only, not with a newer one "
               "whose resent events came before its late onRecoveryInitiated (upstream, DEV-032): delivered before "
               "that recovery's events, or lost to the late initiation", "stale up",
               ((CGL, "_known_locked", _known_is_stored),)),
        Mutant("second-up-cancels-first", "deferring an up cancels the producer's other deferred up (upstream, DEV-014)",
               "lost up", ((CGL, "_defer", _defer_replacing),)),
        Mutant("no-context-up-dropped", "an up with no recovery context is dropped (upstream, DEV-002)", "lost up",
               ((CGL, "_defer", _drop_without_context),)),
        Mutant("up-delivered-twice", "a delivered up stays deferred and is delivered again by the next check",
               "duplicate up", ((CGL, "_check", _deliver_and_keep),)),
    ]
}

#: mutant -> the requirements (spec/requirements/{demux,rec}.toml) whose rule it breaks
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "caller-runs-when-full": ("DEMUX-005", "DEMUX-009", "DEMUX-016"),
    "drop-when-full": ("DEMUX-024",),
    "two-workers-per-queue": ("DEMUX-017", "DEMUX-021"),
    "event-to-random-queue": ("DEMUX-019", "DEMUX-020", "DEMUX-027"),
    "error-to-random-queue": ("DEMUX-021", "DEMUX-025"),
    "lifo-queue": ("DEMUX-021",),
    "index-java-remainder": ("DEMUX-019", "DEMUX-027"),
    "index-int-hash": ("DEMUX-019", "DEMUX-027"),
    "count-after-enqueue": ("REC-011", "REC-013"),
    "complete-only-on-success": ("REC-013", "DEMUX-009"),
    "errors-untracked": ("REC-019",),
    "tracker-per-feed-listener": ("REC-012", "DEMUX-004"),
    "deliver-without-waiting": ("REC-005", "REC-010", "REC-021"),
    "up-waits-for-every-context": ("REC-012", "REC-022", "DEMUX-008"),
    "no-supersede-on-recovery": ("REC-006", "REC-015"),
    "down-does-not-cancel": ("REC-009", "REC-014"),
    "poll-then-deliver": ("REC-009",),
    "up-tied-to-stored-recovery": ("REC-009", "REC-023"),
    "second-up-cancels-first": ("REC-016", "REC-023"),
    "no-context-up-dropped": ("REC-020",),
    "up-delivered-twice": ("REC-023",),
}


def _driver_cls() -> type:
    from .driver import RecoveryDeferralDriver

    return RecoveryDeferralDriver


def mutant_driver(name: str) -> type:
    """The reference driver with mutant ``name`` applied while a driver is open (for a port or an
    in-process run of one mutant)."""
    if name not in MUTANTS:
        raise ValueError(f"no mutant {name!r} (known: {', '.join(MUTANTS)})")
    base = _driver_cls()
    mutant = MUTANTS[name]

    class MutantDriver(base):  # type: ignore[misc, valid-type]
        def __init__(self, config: dict, seed: int):
            self._mutant = mutant.applied()
            self._mutant.__enter__()
            super().__init__(config, seed)

        def close(self) -> None:
            try:
                super().close()
            finally:
                self._mutant.__exit__(None, None, None)

    MutantDriver.__name__ = f"MutantDriver[{name}]"
    return MutantDriver


# -- engines ------------------------------------------------------------------------------------------

#: configurations the trace engines (and the conformance suite, ``--all-configs``) run on: together they
#: enable every action and every outcome (blocking feeds, re-recoveries, two ups per recovery, ups with no
#: context, errors on the feed thread, one shared queue, errors about no event, ups at any moment, the
#: legacy pipeline, the SDK's late onRecoveryInitiated: DEV-032, issue 32)
TRACE_CONFIGS = ("reference", "reference-re-recovery", "reference-two-callbacks", "reference-no-context",
                 "reference-sync-errors", "reference-one-queue", "reference-error-without-event",
                 "reference-up-any-time", "legacy", "reference-late-initiation")
#: steps per sequence of the explorer engine's shortest-first phase (every sequence up to it)
EXPLORER_DEPTH = 4
#: leaves of each configuration's call-level graph whose shortest paths the explorer replays
EXPLORER_LEAVES = 300
#: seeded random walks of 40 steps (random engine)
RANDOM_TRACES = 270
#: examples per configuration for the hypothesis engine
HYPOTHESIS_EXAMPLES = 20
#: seeded interleavings of the deterministic-schedule engine (each script of ``_scripts`` in turn)
SCHEDULE_SEEDS = 400
#: real-thread scenarios of the journal engine
JOURNAL_SCENARIOS = 8
#: PCT runs of the journal engine, over its scenarios in rotation
JOURNAL_RUNS = 160

_SHORT: dict[tuple[str, int], list[list[tuple]]] = {}
_LEAF_PATHS: dict[str, list[list[tuple]]] = {}


def _model(config: str):
    from conq.conformance.views import conformance_model

    return conformance_model("recovery-deferral", config)


def _checker(config: str, *, record: bool = False):
    from conq.conformance.adapters import InProcess
    from conq.conformance.checker import Checker

    model = _model(config)
    return Checker(model, InProcess(_driver_cls()), record=record), model


def _short_sequences(cfg: str, depth: int) -> list[list[tuple]]:
    from conq.conformance.generate import action_sequences

    if (cfg, depth) not in _SHORT:
        _SHORT[cfg, depth] = list(action_sequences(_model(cfg), depth))
    return _SHORT[cfg, depth]


def _leaf_paths(cfg: str) -> list[list[tuple]]:
    """The BFS-tree paths to the leaves of the call-level graph, longest first (they pass through the
    most states); the model does not depend on the mutant, so they are computed once."""
    from conq.model.engines.explorer import explore

    if cfg not in _LEAF_PATHS:
        ex = explore(_model(cfg), liveness=False)
        paths = [ex.path(i).actions() for i in ex.leaves()]
        _LEAF_PATHS[cfg] = sorted(paths, key=lambda p: (-len(p), repr(p)))
    return _LEAF_PATHS[cfg]


def engine_explorer(budget: Budget) -> Detection:
    """Shortest first: every sequence of up to ``EXPLORER_DEPTH`` steps (one more per doubling of
    the scale) on every configuration, then the paths to ``EXPLORER_LEAVES`` leaves of each."""
    clock = Clock(budget)
    depth = EXPLORER_DEPTH + max(0, int(budget.scale).bit_length() - 1)
    leaves = budget.count(EXPLORER_LEAVES)
    phases = [(cfg, lambda cfg=cfg: _checker(cfg)[0], lambda cfg=cfg: _short_sequences(cfg, depth)) for cfg in TRACE_CONFIGS]
    phases += [(cfg, lambda cfg=cfg: _checker(cfg)[0], lambda cfg=cfg: _leaf_paths(cfg)[:leaves]) for cfg in TRACE_CONFIGS]
    # sequence i replays with seed i: the seed picks the driver's event ids (driver.ID_SPACES), so the
    # sequences run on URN strings, large and negative ids, and small ones in turn
    det, replayed = replay_until_killed(clock, phases, seed_per_sequence=True)
    return det or clock.survived(f"{replayed} paths (every sequence of <= {depth} steps, then {leaves} leaves per "
                                 "configuration) conform", f"{replayed} paths")


def engine_random(budget: Budget) -> Detection:
    n = len(TRACE_CONFIGS)
    return walk_until_killed(Clock(budget), budget.count(RANDOM_TRACES),
                             lambda i: (TRACE_CONFIGS[i % n], TRACE_CONFIGS[i % n]), lambda cfg: _checker(cfg)[0])


def engine_hypothesis(budget: Budget) -> Detection:
    """Hypothesis generates the runs (no shrinking: every example starts the listener and its
    threads, which makes hypothesis' shrinker take minutes); the failing run is then minimised by
    the checker's ddmin, which replays far fewer candidates."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    from conq.conformance.side_by_side import machine_for

    clock = Clock(budget)
    examples = budget.count(HYPOTHESIS_EXAMPLES)
    for k, cfg in enumerate(TRACE_CONFIGS):
        model = _model(cfg)
        try:
            run_state_machine_as_test(
                machine_for(model, _driver_cls()),
                settings=settings(max_examples=examples, stateful_step_count=30, deadline=None, database=None,
                                  derandomize=True, suppress_health_check=list(HealthCheck), print_blob=False,
                                  phases=(Phase.explicit, Phase.generate)),
            )
        except AssertionError as e:
            actions = list(getattr(e, "actions", []))
            if actions:
                checker, _ = _checker(cfg)
                try:
                    run = checker.replay(actions)
                    if not run.ok:
                        actions = checker.minimise(run)
                finally:
                    checker.impl.close()
            return clock.killed(f"{cfg}: {str(e).splitlines()[0]}", actions, f"{k + 1} configurations")
        if clock.over():
            return clock.capped(f"{k + 1} of {len(TRACE_CONFIGS)} configurations")
    return clock.survived("no failing example", f"{examples} examples x {len(TRACE_CONFIGS)} configurations")


# -- the feed simulator's scripts ----------------------------------------------------------------------------


def _scripts() -> list[tuple[str, list]]:
    """The scripts the schedule engine cycles through: seeded random scenarios of seed 004's
    deferral section, upstream's re-recovery component test, two ups per recovery, an up before any
    recovery (and one of a producer that never recovers), a Down right after an up, and a second
    recovery whose events and up come before its onRecoveryInitiated (the SDK's late call, DEV-032)."""
    from conq.impl.recovery_deferral.events import FeedEvent
    from conq.impl.recovery_deferral.feed import Down, Event, Recover, Scenario, Up, build_script

    mixed = build_script(Scenario(producers=2, matches_per_producer=3, live_events=2, recoveries=2, events_per_recovery=4,
                                  up_timing="after", error_rate=0.25, errors_without_event=1, failure_rate=0.3,
                                  down_after_up_rate=0.4, seed=11))
    two_ups = build_script(Scenario(producers=2, matches_per_producer=2, live_events=1, recoveries=1, events_per_recovery=4,
                                    up_timing="after", up_callbacks=("ProducerUp", "FirstRecoveryCompleted"),
                                    failure_rate=0.3, seed=5))
    re_recovery = [
        Recover(1, 1), Event(FeedEvent(1, 1, 1, "odds_change", 1)), Event(FeedEvent(2, 1, 1, "odds_change", 2)), Up(1),
        Recover(1, 2), Event(FeedEvent(1, 1, 2, "odds_change", 3)), Up(1),
    ]
    no_context = [
        Up(2, "ProcessingQueDelayStabilized"), Recover(1, 1), Event(FeedEvent(1, 1, 1, "odds_change", 1)),
        Event(FeedEvent(1, 1, 1, "bet_stop", 2)), Up(1, "ProcessingQueDelayStabilized"),
    ]
    down = [
        Recover(1, 1), Event(FeedEvent(1, 1, 1, "odds_change", 1)), Event(FeedEvent(2, 1, 1, "odds_change", 2)), Up(1),
        Down(1), Recover(1, 2), Event(FeedEvent(1, 1, 2, "odds_change", 3)), Up(1),
    ]
    late = [
        Recover(1, 1), Event(FeedEvent(1, 1, 1, "odds_change", 1)), Event(FeedEvent(2, 1, 1, "odds_change", 2)),
        Up(1, request=1), Event(FeedEvent(1, 1, 2, "odds_change", 3)), Event(FeedEvent(2, 1, 2, "odds_change", 4)),
        Up(1, request=2), Recover(1, 2),
    ]
    return [("mixed", mixed), ("re-recovery", re_recovery), ("two-ups", two_ups), ("no-context", no_context),
            ("down", down), ("late-initiation", late)]


def _initiates_late(script: list) -> bool:
    """Some recovery's resent event comes before its ``Recover`` (the SDK's late onRecoveryInitiated)."""
    from conq.impl.recovery_deferral.feed import Event, Recover

    started: set[tuple[int, int]] = set()
    for step in script:
        if isinstance(step, Recover):
            started.add((step.producer_id, step.request_id))
        elif isinstance(step, Event) and step.event.request_id > 0 and (step.event.producer_id, step.event.request_id) not in started:
            return True
    return False


def schedule_run(seed: int, script: list, strategy: str) -> list[str]:
    """One run of ``script`` on 2 workers x 2 queues of 2 under ``DeterministicScheduler(seed)``:
    the violations found (journal checks, tracker anomalies, counts left over).  Time is virtual: the
    listener's clock is constant, so a poll tick happens exactly when every other thread waits."""
    from conq.impl.recovery_deferral import ConcurrentListenerConfig
    from conq.impl.scheduling import DeterministicScheduler

    sched = DeterministicScheduler(seed, strategy=strategy, pct_depth=3, pct_steps=600)
    return run_script(sched, script, ConcurrentListenerConfig(threads=2, queue_size=2, poll_interval=0.2))


def _virtual_sleep(sched):
    """A handler's latency in the scheduler's virtual time: a timed wait nobody notifies, so it ends
    when every other thread waits and its deadline is the earliest (a poll tick due first fires first)."""
    lock = sched.lock("handler-latency")
    cond = sched.condition(lock, "handler-latency")

    def sleep(seconds: float) -> None:
        with cond:
            cond.wait(seconds)

    return sleep


def run_script(sched, script: list, config) -> list[str]:
    """Play ``script`` through a ``ConcurrentListener(config)`` whose every thread runs under the
    deterministic ``sched``, in virtual time (the listener's clock is constant: a poll tick happens
    when every other thread waits and its deadline is the earliest; a handler's latency is a sleep in
    virtual time, ``_virtual_sleep``): the violations found -- the journal checks, the tracker's
    anomalies, counts left over."""
    from conq.impl.recovery_deferral.feed import FeedSimulator, Journal, RecordingFeedListener, RecordingGlobalListener, check_journal

    found: list[str] = []

    def main() -> None:
        journal = Journal()
        cl = ConcurrentListener(config, sched=sched, clock=lambda: 0.0, name="det")
        feed = cl.wrap_feed_listener(RecordingFeedListener(journal, sleep=_virtual_sleep(sched)))
        events = cl.wrap_global_listener(RecordingGlobalListener(journal))
        sim = FeedSimulator(script, feed, events, journal)
        sim.run()
        cl.close(60.0)
        found.extend(check_journal(journal.entries(), feed_ident=sim.feed_ident, late_initiation=_initiates_late(script)))
        found.extend(cl.tracker.anomalies)
        found.extend(f"{ctx} left at {c.pending}" for ctx, c in cl.tracker.snapshot().items() if c.pending)

    sched.run(main, wall_timeout=120.0)
    return found


def engine_schedules(budget: Budget) -> Detection:
    """Seeded interleavings of the whole listener under the deterministic scheduler (PCT and random
    alternating, the scripts of :func:`_scripts` in turn): races the GIL hides on real threads show
    up, and a failing seed replays exactly."""
    clock = Clock(budget)
    runs = budget.count(SCHEDULE_SEEDS)
    scripts = _scripts()
    for i in range(runs):
        # round r runs every script with seed r; one round in four is PCT, the others uniformly random
        # (the races here -- a stale up, a count after the enqueue -- need a thread preempted right
        # after a read, which a uniform walk does more often than PCT's few priority changes)
        seed, (label, script) = i // len(scripts), scripts[i % len(scripts)]
        strategy = "pct" if seed % 4 == 3 else "random"
        try:
            found = schedule_run(seed, script, strategy)
        except Exception as e:  # a deadlock, a crash or an abort is a finding too
            cause = e.__cause__ or e
            found = [f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"]
        if found:
            return clock.killed(f"seed {seed} ({strategy}, {label} script): {found[0]}", spent=f"{i + 1} schedules")
        if clock.over():
            return clock.capped(f"{i + 1} of {runs} schedules")
    return clock.survived(f"{runs} schedules pass every check", f"{runs} schedules")


def journal_scenario(k: int):
    """Scenario ``k`` of the journal engine and its listener configuration."""
    from conq.impl.recovery_deferral import ConcurrentListenerConfig
    from conq.impl.recovery_deferral.feed import Scenario

    ups = (("FirstRecoveryCompleted",), ("ProducerUp", "FirstRecoveryCompleted"))[k % 2]
    # one scenario in four has the SDK's late onRecoveryInitiated (DEV-032): half its recoveries are
    # initiated after some of their events, maybe after their up (the journal is checked accordingly)
    scenario = Scenario(producers=3, matches_per_producer=4, live_events=4, recoveries=2, events_per_recovery=12,
                        up_timing="after", up_callbacks=ups, error_rate=0.2, errors_without_event=1,
                        failure_rate=0.15, latency=(0.0, 0.002), down_after_up_rate=0.3,
                        late_initiation_rate=0.5 if k % 4 == 3 else 0.0, seed=100 + k)
    config = ConcurrentListenerConfig(threads=3, queue_size=2, poll_interval=0.005)
    return scenario, config


class _JournalProgram:
    """Scenario ``k`` of the journal engine as a program of the deterministic scheduler (for
    ``PCTSearch``): raises ``AssertionError`` with the violations found."""

    def __init__(self, k: int) -> None:
        from conq.impl.recovery_deferral.feed import build_script

        self.k = k
        scenario, self.config = journal_scenario(k)
        self.script = build_script(scenario)

    def __call__(self, sched) -> None:
        found = run_script(sched, self.script, self.config)
        if found:
            raise AssertionError(found[0])


def journal_search(k: int):
    """The ``PCTSearch`` of journal scenario ``k`` (run ``i`` is its seed ``i``)."""
    from conq.impl.scheduling import PCTSearch

    return PCTSearch(_JournalProgram(k), depths=(1, 2, 3), max_steps=400_000)


def journal_replay(k: int, run: int) -> BaseException | None:
    """Run ``run`` of journal scenario ``k`` again from its seed (-1: the calibration run, the default
    schedule): the failure, or None."""
    from conq.impl.scheduling import DeterministicScheduler

    search = journal_search(k)
    try:
        sched = (DeterministicScheduler(0, strategy="fixed", **search.sched_kwargs) if run < 0  # type: ignore[attr-defined]
                 else search.scheduler(run))  # type: ignore[attr-defined]
        search.program(sched)  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001 - the program's verdict
        return e
    return None


def engine_journal(budget: Budget) -> Detection:
    """The feed-simulator scenarios of ``journal_scenario`` (three producers, re-recoveries, downs,
    errors, handlers that throw, several "up" callbacks, queues of two), checked by
    ``feed.check_journal``, each under probabilistic concurrency testing: every thread of the
    listener under the deterministic scheduler (``PCTSearch``: random priorities and d - 1 change
    points over the run's k steps, depths 1-3), the scenarios in rotation.  Issue 32: it ran them on
    real threads, whose timing made two runs with the same seeds report different details (journal
    positions); now a kill names the scenario, the PCT run (its seed) and depth, and the violation,
    the same on every machine, and ``journal_replay(k, run)`` replays it."""
    clock = Clock(budget)
    n = budget.count(JOURNAL_RUNS)
    searches: dict[int, object] = {}
    for i in range(n):
        k, run = i % JOURNAL_SCENARIOS, i // JOURNAL_SCENARIOS
        search = searches.get(k) or searches.setdefault(k, journal_search(k))
        try:
            r = search.run(run)  # type: ignore[attr-defined]
            error = r.error
            where = f"scenario {k}, pct run {run} (seed {run}, depth {r.depth})"
        except Exception as e:  # noqa: BLE001 - the calibration run (the default schedule) fails
            error, where = e, f"scenario {k}, pct run -1 (its calibration: the default schedule)"
        if error is not None:
            cause = error.__cause__ or error
            text = str(cause).splitlines()[0] if str(cause) else ""
            return clock.killed(f"{where}: {text if isinstance(cause, AssertionError) else f'{type(cause).__name__}: {text}'}",
                                spent=f"{i + 1} runs")
        if clock.over():
            return clock.capped(f"{i + 1} of {n} runs")
    done = [s for s in searches.values() if s.runs]  # type: ignore[attr-defined]
    least = {d: min(s.bound(d).after(s.runs_at.get(d, 0)) for s in done) for d in (1, 2, 3)}  # type: ignore[attr-defined]
    return clock.survived(f"{n} PCT runs of {len(done)} scenarios pass every journal check (the least chance of hitting a "
                          f"given bug: depth 1 >= {least[1]:.3g}, depth 2 >= {least[2]:.3g}, depth 3 >= {least[3]:.3g})",
                          f"{n} runs")


ENGINES = {
    "explorer": engine_explorer,
    "random": engine_random,
    "hypothesis": engine_hypothesis,
    "schedules": engine_schedules,
    "journal": engine_journal,
}

CATALOGUE = Catalogue("recovery-deferral", MUTANTS, ENGINES)


#: the recovery-deferral kill matrix (see :func:`conq.conformance.mutation.run_catalog`)
run_catalog = CATALOGUE.run


__all__ = ["CATALOGUE", "ENGINES", "MUTANTS", "REQUIREMENTS", "Budget", "Detection", "Mutant", "mutant_driver",
           "run_catalog", "schedule_run"]
