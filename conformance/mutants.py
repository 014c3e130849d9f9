"""The mutation catalog: plausible bugs of the consumer-lists implementation,
and the engines that must catch each of them.

Every mutant is applied without editing the reference source: it patches one
method of ``conq.impl`` for the duration of a run (``unittest.mock.patch``),
the way such a bug would sit in a port.  ``conq mutants`` runs every engine
against every mutant and prints the kill matrix with the time each engine
took to detect it; a mutant no engine kills is a hole in the suite.

Engines:

* ``explorer``  : the shortest model path to every reachable state of a bounded
                  configuration, replayed against the implementation;
* ``random``    : seeded random walks from the consistent model states;
* ``hypothesis``: a hypothesis state machine driving implementation and model
                  side by side (shrinks to a minimal failing run);
* ``stress``    : the real-thread workload (publishers, connections, priorities,
                  browsers, flow toggling): nothing lost, nothing acquired twice,
                  browsers saw everything, no stall;
* ``schedules`` : the same workload under the deterministic scheduler, one
                  seeded interleaving after another (random and PCT);
* ``linearizability``: concurrent node-list histories on real threads checked
                  against the sequential specification.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from unittest import mock

from conq.impl import node_list as _nl
from conq.impl import queue as _q
from conq.impl.consumer_manager import QueueConsumerManager

Q = _q.Queue


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    kind: str
    patches: tuple[tuple[Any, str, Callable[..., Any]], ...]
    #: non-empty: why no run of this implementation can tell the mutant apart
    #: (an equivalent mutant is reported, not counted as a survivor)
    equivalent: str = ""

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for owner, attr, fn in self.patches:
                stack.enter_context(mock.patch.object(owner, attr, fn))
            yield


# -- the bugs -------------------------------------------------------------------------------------


def _notify_every_acquirer(self, entry, *, browsers=True):
    if browsers:
        for b in self.qcm.non_acquiring_consumers():
            self._notify_consumer(b)
    for c in list(self.qcm.interested()):
        if entry.state is not _q._AVAILABLE:
            break
        self._try_notify(c)


def _notify_no_acquirer(self, entry, *, browsers=True):
    if browsers:
        for b in self.qcm.non_acquiring_consumers():
            self._notify_consumer(b)


def _notify_no_browser(self, entry, *, browsers=True):
    for c in self.qcm.interested():
        if entry.state is not _q._AVAILABLE:
            break
        if self._try_notify(c) is not False:
            break


_original_deliver = Q.deliver_single_message


def _look_then_unnotify(self, c):
    """Looks for a message first and moves NOTIFIED -> INTERESTED only when it found none."""
    if c.closed:
        return None
    if not c.desired:
        self.qcm.set_notified(c, False)
        return None
    entry = self._attempt_delivery(c) if c.acquires else self._attempt_browse(c)
    if entry is None:
        self.qcm.set_notified(c, False)
        if c.acquires and self._available > 0:
            self._notify_other_consumers(c)
        return None
    c.delivered += 1
    return entry.id


def _never_unnotify(self, c):
    """Never leaves NOTIFIED: the move back to Interested is forgotten."""
    if c.closed or not c.desired:
        return None
    entry = self._attempt_delivery(c) if c.acquires else self._attempt_browse(c)
    if entry is None:
        if c.acquires and self._available > 0:
            self._notify_other_consumers(c)
        return None
    c.delivered += 1
    self.qcm.set_notified(c, True)
    return entry.id


def _has_work_ignoring_priority(self, c):
    if not c.acquires:
        return True
    with self._lock:
        return self._peek_acquirable_locked() is not None


def _attempt_delivery_ignoring_priority(self, c):
    with self._lock:
        entry = self._peek_acquirable_locked()
    if entry is None or not c._allocate_credit():
        return None
    with self._lock:
        lost = entry.state is not _q._AVAILABLE
        if not lost:
            entry.state = _q._ACQUIRED
            entry.owner = c.id
            self._available -= 1
            c._acquired.add(entry.id)
    if lost:
        c._restore_credit()
        return None
    c._settle_credit()
    return entry


def _peek_acquired_too(self):
    """The read position does not skip entries another consumer acquired."""
    cur = self._cursor
    nxt = cur.next
    while nxt is not None and nxt.state not in (_q._AVAILABLE, _q._ACQUIRED):
        cur = nxt
        nxt = nxt.next
    return nxt


def _acquire_without_check(self, c):
    with self._lock:
        entry = _peek_acquired_too(self)
    if entry is None:
        return None
    if c.priority != _q.DEFAULT_PRIORITY and self.qcm.desired_at_higher_priority(c.priority):
        return None
    if not c._allocate_credit():
        return None
    with self._lock:
        if entry.state is _q._AVAILABLE:
            self._available -= 1
        entry.state = _q._ACQUIRED
        entry.owner = c.id
        c._acquired.add(entry.id)
    c._settle_credit()
    return entry


def _no_notify_others(self, excluded):
    return None


def _set_desired_no_handover(self, c, desired):
    if c.node is None:
        raise _q.QueueError("not on this queue")
    if not self.qcm.set_interest(c, desired):
        return False
    if desired:
        self._notify_consumer(c)
    return True


_original_remove = Q.remove_consumer


def _remove_no_handover(self, consumer, *, release_acquired=True):
    with mock.patch.object(Q, "_notify_after_loss_of_interest", lambda self: None):
        return _original_remove(self, consumer, release_acquired=release_acquired)


_original_release = Q.release


def _release_no_notify(self, msg_id, consumer=None):
    with mock.patch.object(Q, "_notify_consumers", lambda self, entry, browsers=True: None):
        return _original_release(self, msg_id, consumer)


_original_unhold = Q.unhold


def _unhold_no_notify(self, msg_id):
    with mock.patch.object(Q, "_notify_consumers", lambda self, entry, browsers=True: None):
        return _original_unhold(self, msg_id)


_original_add = Q.add_consumer


def _add_no_notify(self, consumer_id, **kw):
    with mock.patch.object(Q, "_notify_consumer", lambda self, c: False):
        return _original_add(self, consumer_id, **kw)


def _browse_acquires(self, b):
    return _attempt_delivery_ignoring_priority(self, b)


_original_set_interest = QueueConsumerManager.set_interest


def _browser_goes_interested(self, consumer, interested):
    node = consumer.node
    if interested:
        return node.move_from_to(_cm_mask("NOT_INTERESTED"), _cm_state("INTERESTED"))
    return _original_set_interest(self, consumer, interested)


def _cm_state(name):
    from conq.impl.consumer_manager import NodeState

    return NodeState[name]


def _cm_mask(name):
    return 1 << _cm_state(name)


_original_set_notified = QueueConsumerManager.set_notified


def _requeue_to_front(self, consumer, notified):
    """Back to the *front* of Interested instead of the back."""
    moved = _original_set_notified(self, consumer, notified)
    if moved and not notified and consumer.acquires:
        level = consumer.node.level
        others = [n for n in level.interested if n is not consumer.node]
        for n in [consumer.node] + others:
            n.entry.owner.remove(n.entry)
            n.entry = level.interested.append(n)
    return moved


def _allocate_credit_free(self):
    """Credit is never charged (a credit window that is never enforced)."""
    return True


def _restore_credit_lost(self):
    """A failed acquisition does not give the credit back."""
    return None


def _unlink_tail(self, prev):
    """Unlinks deleted entries including the physical tail: a concurrent append after it is lost."""
    n = prev.next
    while n is not None and n.deleted:
        prev.next = n.next  # also when n is the tail, which appends still link after
        n = prev.next
    return n


def _remove_counts_twice(self, entry):
    """Decrements the size even when the entry was already deleted."""
    with self._lock:
        was = entry.deleted
        entry.deleted = True
        self.size -= 1
    return not was


_QCM = QueueConsumerManager
_QC = _q.QueueConsumer
_NL = _nl.NodeList

MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in [
        Mutant("notify-every-acquirer", "a new message notifies every interested acquiring consumer (spurious wake-ups)", "notification choice",
               ((Q, "_notify_consumers", _notify_every_acquirer),)),
        Mutant("notify-no-acquirer", "a new message notifies browsers only: acquiring consumers are never woken (lost wake-up)", "lost wake-up",
               ((Q, "_notify_consumers", _notify_no_acquirer),)),
        Mutant("browsers-missed", "a new message does not notify the browsers", "browsers",
               ((Q, "_notify_consumers", _notify_no_browser),)),
        Mutant("look-then-unnotify", "deliverSingleMessage looks before moving NOTIFIED -> INTERESTED (lost wake-up window)", "lost wake-up",
               ((Q, "deliver_single_message", _look_then_unnotify),)),
        Mutant("never-unnotify", "a notified consumer is never moved back to Interested", "list moves",
               ((Q, "deliver_single_message", _never_unnotify),)),
        Mutant("priority-ignored", "no noHigherPriorityWithCredit check: a lower priority consumer takes work a higher one wants", "priority inversion",
               ((Q, "_has_work_for", _has_work_ignoring_priority), (Q, "_attempt_delivery", _attempt_delivery_ignoring_priority))),
        Mutant("double-acquire", "acquisition neither skips nor re-checks entries other consumers acquired", "double acquisition",
               ((Q, "_attempt_delivery", _acquire_without_check),)),
        Mutant("no-notify-others", "a consumer that found nothing while messages remain does not pass the wake-up on", "lost wake-up",
               ((Q, "_notify_other_consumers", _no_notify_others),),
               equivalent="in this implementation an acquiring consumer finds nothing while messages remain only "
                          "when a higher-priority consumer wants work, and that consumer was notified when it "
                          "became desired (set_notify_work_desired, add_credit); a consumer removed mid-pull is "
                          "handed over by remove_consumer itself.  The model shows the rule is needed where removal "
                          "hands over only NOTIFIED consumers (spec/consumer-lists.md)."),
        Mutant("notify-without-work", "notifyConsumer does not check that the consumer has a message it may take "
               "(spurious wake-ups on resume, credit and hand-over)", "notification choice",
               ((Q, "_has_work_for", lambda self, c: True),)),
        Mutant("uninterest-no-handover", "a consumer losing interest does not let a lower-priority one take its work", "priority / lost wake-up",
               ((Q, "set_notify_work_desired", _set_desired_no_handover),)),
        Mutant("remove-no-handover", "removing a notified consumer drops its wake-up (upstream behaviour)", "lost wake-up",
               ((Q, "remove_consumer", _remove_no_handover),)),
        Mutant("release-no-notify", "a released message does not notify anyone", "lost wake-up",
               ((Q, "release", _release_no_notify),)),
        Mutant("unhold-no-notify", "a message that stops being held does not notify anyone", "lost wake-up",
               ((Q, "unhold", _unhold_no_notify),)),
        Mutant("add-no-notify", "a consumer added while messages wait is not notified (upstream behaviour)", "lost wake-up",
               ((Q, "add_consumer", _add_no_notify),)),
        Mutant("browser-acquires", "a browser acquires the messages it browses", "browsers",
               ((Q, "_attempt_browse", _browse_acquires),)),
        Mutant("browser-interested", "a browser that wants work again is moved to Interested, not NonAcquiring", "list moves",
               ((_QCM, "set_interest", _browser_goes_interested),)),
        Mutant("requeue-to-front", "a consumer that found nothing goes to the front of Interested, not the back", "fairness",
               ((_QCM, "set_notified", _requeue_to_front),)),
        Mutant("credit-ignored", "delivery never charges credit", "credit",
               ((_QC, "_allocate_credit", _allocate_credit_free),)),
        Mutant("node-list-unlinks-tail", "the node list unlinks its physical tail, losing a concurrent append", "node-list race",
               ((_NL, "_find_next", _unlink_tail),)),
        Mutant("node-list-size-twice", "removing an already removed entry decrements the size again", "node-list race",
               ((_NL, "remove", _remove_counts_twice),)),
    ]
}


def mutant_driver(name: str) -> type:
    """The reference driver with mutant ``name`` applied while a driver is open
    (``--impl mutant:NAME``: how a mutant reaches Spark executors)."""
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
            self._mutant.__exit__(None, None, None)

    MutantDriver.__name__ = f"MutantDriver[{name}]"
    return MutantDriver


# -- engines ------------------------------------------------------------------------------------------


@dataclass
class Detection:
    killed: bool
    seconds: float
    detail: str = ""
    evidence: list[Any] = field(default_factory=list)  # minimal failing actions, when an engine has them


def _driver_cls():
    from .consumer_lists_driver import ConsumerListsDriver

    return ConsumerListsDriver


def _checker(config: str, *, record: bool = False):
    from .adapters import InProcess
    from .checker import Checker
    from .views import conformance_model

    model = conformance_model("consumer-lists", config, {"env_budget": ENV_BUDGET})
    return Checker(model, InProcess(_driver_cls()), record=record), model


#: configurations the trace engines run on: together they enable every action
#: (held messages, consumers joining, both suspension reasons, equal priorities)
TRACE_CONFIGS = ("small", "reference", "held", "dynamic", "reasons", "same-priority")
#: environment steps (credit, suspend/resume, release, removal) per run
ENV_BUDGET = 2


_LEAF_PATHS: dict[str, list[list[tuple]]] = {}


def _leaf_paths(cfg: str, budget: float) -> list[list[tuple]]:
    """The BFS-tree paths to every leaf state (they pass through every reachable
    state) of the call-level model; the model does not depend on the mutant, so
    they are computed once per configuration."""
    from conq.model.explorer import explore

    if cfg not in _LEAF_PATHS:
        _, model = _checker(cfg)
        ex = explore(model, liveness=False, max_seconds=budget)
        _LEAF_PATHS[cfg] = [ex.path(i).actions() for i in ex.leaves()]
    return _LEAF_PATHS[cfg]


def engine_explorer(budget: float) -> Detection:
    t0 = time.perf_counter()
    replayed = 0
    for cfg in TRACE_CONFIGS:
        checker, _ = _checker(cfg)
        for actions in _leaf_paths(cfg, budget):
            run = checker.replay(actions)
            replayed += 1
            if not run.ok:
                return Detection(True, time.perf_counter() - t0, f"{cfg}: {run.divergence.describe()}", checker.minimise(run))
            if time.perf_counter() - t0 > budget:
                return Detection(False, time.perf_counter() - t0, f"time budget spent after {replayed} paths")
    return Detection(False, time.perf_counter() - t0, f"{replayed} paths through every reachable state conform")


def engine_random(budget: float, traces: int = 400) -> Detection:
    t0 = time.perf_counter()
    from .generate import derive_seed

    for i in range(traces):
        cfg = TRACE_CONFIGS[i % len(TRACE_CONFIGS)]
        checker, _ = _checker(cfg)
        run = checker.walk(derive_seed(0, i), 40)
        if not run.ok:
            return Detection(True, time.perf_counter() - t0, f"{cfg} trace {i}: {run.divergence.describe()}", checker.minimise(run))
        if time.perf_counter() - t0 > budget:
            break
    return Detection(False, time.perf_counter() - t0, f"{i + 1} random traces conform")


#: examples per configuration for the hypothesis engine (the CI test lowers it)
HYPOTHESIS_EXAMPLES = 150


def engine_hypothesis(budget: float) -> Detection:
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from .side_by_side import machine_for

    t0 = time.perf_counter()
    for cfg in TRACE_CONFIGS:
        _, model = _checker(cfg)
        try:
            run_state_machine_as_test(
                machine_for(model, _driver_cls()),
                settings=settings(max_examples=HYPOTHESIS_EXAMPLES, stateful_step_count=30, deadline=None, database=None,
                                  suppress_health_check=list(HealthCheck)),
            )
        except AssertionError as e:
            return Detection(True, time.perf_counter() - t0, f"{cfg}: {str(e).splitlines()[0]}", getattr(e, "actions", []))
        if time.perf_counter() - t0 > budget:
            break
    return Detection(False, time.perf_counter() - t0, "no failing example")


def engine_stress(budget: float) -> Detection:
    import threading

    from conq.impl.workload import ConsumerSpec, WorkloadError, run_workload

    t0 = time.perf_counter()
    conns = [
        [ConsumerSpec(priority=10, credit_window=4), ConsumerSpec(priority=5)],
        [ConsumerSpec(priority=5, credit_window=2), ConsumerSpec(acquires=False)],
        [ConsumerSpec(priority=1), ConsumerSpec(priority=1, credit_window=1)],
    ]
    outcome: list[Detection] = []

    def run() -> None:
        try:
            run_workload(publishers=3, messages_per_publisher=3000, connections=conns, io_threads=2, flow_toggles=300,
                         browse_phase_messages=50, seed=1, timeout=min(budget, 60.0), stall_timeout=5.0)
            outcome.append(Detection(False, time.perf_counter() - t0, "9,000 messages, all checks pass"))
        except WorkloadError as e:
            outcome.append(Detection(True, time.perf_counter() - t0, str(e).splitlines()[0]))
        except Exception as e:  # a crash inside the implementation also kills the mutant
            outcome.append(Detection(True, time.perf_counter() - t0, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))

    # The workload bounds its own waits, but a deadlocked implementation can hold the very lock its
    # failure report needs: the run is watched from outside too, and a hang is a detection.
    watcher = threading.Thread(target=run, name="stress-engine", daemon=True)
    watcher.start()
    watcher.join(timeout=min(budget, 60.0) + 30.0)
    if watcher.is_alive():
        return Detection(True, time.perf_counter() - t0, "the implementation hung (deadlock or livelock): the run never ended")
    return outcome[0]


def engine_schedules(budget: float, seeds: int = 300) -> Detection:
    """Seeded interleavings of the whole chain under the implementation's
    deterministic scheduler (random and PCT strategies alternating): the
    same workload checks as ``stress``, but every interleaving point is
    decided by the seed, so races the GIL hides on real threads show up, and
    a failing seed replays exactly."""
    from conq.impl.scheduling import DeterministicScheduler
    from conq.impl.workload import ConsumerSpec, run_workload

    mixed = [
        [ConsumerSpec(priority=10, credit_window=2), ConsumerSpec(priority=5)],
        [ConsumerSpec(acquires=False), ConsumerSpec(priority=5, credit_window=1)],
        [ConsumerSpec(priority=1), ConsumerSpec(acquires=False, credit_window=3)],
    ]
    shapes = [
        (mixed, dict(publishers=2, messages_per_publisher=6, io_threads=2, flow_toggles=4, browse_phase_messages=2)),
        ([[ConsumerSpec()]], dict(publishers=1, messages_per_publisher=6, io_threads=1, flow_toggles=0, browse_phase_messages=0)),
        ([[ConsumerSpec(priority=5), ConsumerSpec(priority=5)], [ConsumerSpec(priority=1, credit_window=1)]],
         dict(publishers=2, messages_per_publisher=4, io_threads=2, flow_toggles=2, browse_phase_messages=0)),
    ]
    t0 = time.perf_counter()
    for seed in range(seeds):
        strategy = "pct" if seed % 2 else "random"
        conns, kw = shapes[seed % len(shapes)]
        sched = DeterministicScheduler(seed, strategy=strategy, pct_steps=400)
        try:
            run_workload(sched=sched, connections=conns, seed=seed, batch=2, **kw)
        except Exception as e:
            cause = e.__cause__ or e
            return Detection(True, time.perf_counter() - t0,
                             f"seed {seed} ({strategy}): {type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}")
        if time.perf_counter() - t0 > budget:
            return Detection(False, time.perf_counter() - t0, f"time budget spent after {seed + 1} schedules")
    return Detection(False, time.perf_counter() - t0, f"{seeds} schedules pass every check")


def engine_linearizability(budget: float) -> Detection:
    """Concurrent histories on real threads, checked against sequential
    specifications: the node list (append/remove/size, iteration's weak
    consistency) and the queue's message operations (enqueue/pull/release)."""
    from .linearizability import check_node_list, check_queue

    t0 = time.perf_counter()
    problem = check_node_list(lambda: _nl.NodeList(scavenge_threshold=1), rounds=150, seed=3) or check_queue(
        lambda: _q.Queue(record_events=False), rounds=60, seed=5)
    if problem:
        return Detection(True, time.perf_counter() - t0, problem.splitlines()[0])
    return Detection(False, time.perf_counter() - t0, "150 node-list and 60 queue rounds linearizable")


ENGINES: dict[str, Callable[[float], Detection]] = {
    "explorer": engine_explorer,
    "random": engine_random,
    "hypothesis": engine_hypothesis,
    "stress": engine_stress,
    "schedules": engine_schedules,
    "linearizability": engine_linearizability,
}


def run_catalog(names: list[str] | None = None, engines: list[str] | None = None, *, budget: float = 60.0,
                first_kill: bool = False,
                on_cell: Callable[[str, str, Detection], None] | None = None) -> dict[str, dict[str, Detection]]:
    """The kill matrix: mutant -> engine -> detection.  Row ``(reference)``
    runs every engine on the unmutated implementation: it must pass them all,
    or a kill proves nothing.  ``first_kill``: stop at a mutant's first killing
    engine (engines run in the order given: cheapest first by default)."""
    matrix: dict[str, dict[str, Detection]] = {}
    rows: list[tuple[str, Mutant | None]] = [("(reference)", None)] + [(n, MUTANTS[n]) for n in (names or MUTANTS)]
    for name, mutant in rows:
        matrix[name] = {}
        for ename in engines or ENGINES:
            ctx = mutant.applied() if mutant else contextlib.nullcontext()
            with ctx:
                try:
                    det = ENGINES[ename](budget)
                except Exception as e:  # an engine crashing on a mutant is a detection with evidence
                    det = Detection(True, 0.0, f"engine crashed: {type(e).__name__}: {e}")
            matrix[name][ename] = det
            if on_cell:
                on_cell(name, ename, det)
            if first_kill and mutant is not None and det.killed:
                break
    return matrix
