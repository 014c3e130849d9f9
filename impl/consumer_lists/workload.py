# One file: the workload and its end-of-run checks are one argument (what a run did, and why that is correct); every caller (stress, exploration, faults, benchmarks) uses both.
"""A publish/consume workload over the whole chain, with its correctness checks and fault injection.

What it is
----------
One driver used by the stress test (real threads), by the seeded exploration test (deterministic
scheduler), by the fault tests and by the benchmarks: publisher threads enqueue, connections with
sessions, targets and consumers (acquiring consumers of several priorities, browsers, credit windows)
pull through the 12-step chain on an ``IOThreadPool``, an optional thread toggles flow control, and
the run is checked:

* nothing lost and nothing acquired twice (every message settled exactly once, by its owner);
* every browser saw messages at most once and in queue order (with faults that release messages:
  at most once -- a released message it had passed is offered to it later), and saw *every* message of the
  browse phase (published while all acquiring consumers were suspended);
* no lost wake-up: once publishing and toggling are over every message is consumed.  Under the
  deterministic scheduler a timed wait only fires when no logical thread can run (virtual time), so
  "the main thread's wait timed out before everything was consumed" *is* "the system went quiescent
  with a message available while an interested consumer with credit idled"; on real threads the
  same condition is detected as "no progress for ``stall_timeout`` seconds";
* bounded completion: every wait has a timeout and a hang becomes a ``WorkloadError``.

Fault injection (``faults=Faults(...)``)
----------------------------------------
Seeded faults on top of the flow toggling (``flow_toggles``):

* **callback exceptions** -- the client callback (the connection's sink) raises ``InjectedFault``
  for a delivery with probability ``callback_error_rate``, and always for the ``poison`` message
  ids (after the client granted credit, before it settles);
* **consumer close mid-delivery** -- with probability ``close_rate`` the callback closes its own
  consumer while holding the message, before settling (``Queue.remove_consumer`` on the IO thread);
  and a churn thread closes ``closes`` acquiring consumers while deliveries run; each closed consumer
  is replaced by a new one with the same spec on the same target;
* **credit storms** -- a storm thread, ``credit_storms`` times, takes a consumer with a credit window
  and does ``set_credit(0)`` then ``storm_size`` x ``add_credit(1)`` (racing with its deliveries and
  the client's own re-grants).

Which deliveries fail or close is a pure function of (``seed``, message id, the message's delivery
attempt): the same seed injects the same faults on every scheduler and every run.  The churn and
storm threads pace themselves by consumption progress on real threads (their k-th action waits for
k/(n+1) of the messages to be settled), so their faults land while deliveries run.  The checks, on
top of the ones above:

* nothing lost: every message is settled exactly once or dead-lettered (a ``poison`` message, after
  the queue's ``max_delivery_failures``; no other message may be) -- never both;
* nothing acquired twice: a message is delivered to an acquiring consumer only while no other
  consumer holds it -- the previous holder settled it, its delivery failed (the policy released it),
  or it was being closed (removal released it); a settle by a consumer that is not closing never
  fails; after the run no consumer, closed or not, holds a message.  One send is not an acquisition:
  a *stale send* to a consumer another thread closed after its pull passed the delivery chain's
  ``closed`` check (``ConsumerTarget.process``) but before its sink ran -- the removal released the
  message, which another consumer may already hold.  It is allowed exactly when the queue no longer
  has the message held by the closed consumer (``acquired_ids``), and it does not make the closed
  consumer the holder (before this rule the checker reported it as "acquired twice" in about 1 run in
  4 to 12 of the churn test; ``tests/impl/consumer_lists/test_faults.py`` forces it);
* no stall: as above (every injected fault must leave delivery going);
* every failure reported: each injected exception reaches the pool's ``on_delivery_error`` hook
  exactly once, with the outcome the policy promises ("released"/"dead-lettered", or "not-held" for
  a consumer being closed, "browsed" for a browser), and no other failure (delivery or internal) is
  reported at all.  A violation fails the run as soon as it is seen, not only at the end.

The schedules engine (issue 17)
-------------------------------
``explore_schedules(systematic, pct)`` is the conformance ``schedules`` engine: the workload under the
deterministic scheduler with every lock release and every model thread step (``pull.unnotify``,
``pull.find``, ``pull.acquire``, ``pull.deliver``/``pull.none``, ``desired.queue``, ``publish.notify``)
as interleaving points (``SCHEDULE_OPTIONS``).  Systematic first: every schedule with 0, then 1, then 2
deviations from the default non-preemptive schedule over the small ``SYSTEMATIC_SHAPES``
(``scheduling.BoundedExploration``: deviations at the model's steps before those at lock points, latest
first); then PCT seeds over the larger ``schedule_shape`` shapes.  Both counts are budgets (schedules,
never seconds).  The first failure is minimised (delta debugging over its deviations) and
``ScheduleFailure.report()`` prints it: the deviations, a ``replay_schedule``/``replay_pct`` call that
replays it, and the interleaving -- step, thread, switch point and the lists (``state_line``).

Concurrency argument: this module only uses the public operations of ``queue`` and ``delivery`` plus
its own state under ``_lock`` (a leaf lock): counters, the holder map, the registry of consumers.
The per-consumer client records (``_Client``) are written only by the IO thread currently processing
that consumer's connection (the ``scheduled`` token of ``delivery``) and read by the main thread after
the IO pool is stopped (join = happens-before).  ``_clients`` gains entries (a replacement consumer)
while IO threads look up others: each dict operation is atomic in CPython, with or without the GIL
(free-threaded builds lock a dict per operation), and an entry is inserted before its consumer is
subscribed, so no delivery can look it up before it exists.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conq.impl.consumer_lists.delivery import Connection, ConsumerTarget, DeliveryFailure, IOThreadPool
from conq.impl.consumer_lists.queue import DEFAULT_PRIORITY, MessageState, Queue, QueueConsumer, QueueError
from conq.impl.scheduling import (
    REAL,
    BoundedExploration,
    DeterministicScheduler,
    Deviation,
    Minimised,
    deviations_of,
    minimise_schedule,
    render_interleaving,
)

__all__ = ["SCHEDULE_OPTIONS", "SYSTEMATIC_SHAPES", "ConsumerSpec", "Faults", "InjectedFault", "ScheduleExploration",
           "ScheduleFailure", "WorkloadError", "WorkloadResult", "explore_schedules", "pct_scheduler", "replay_pct",
           "replay_schedule", "run_schedule", "run_shape", "run_workload", "schedule_shape"]


class WorkloadError(AssertionError):
    """A correctness check of the workload failed (the message says which, with evidence)."""


class InjectedFault(Exception):
    """Raised on purpose by the workload's client callback (fault injection)."""


@dataclass(frozen=True)
class ConsumerSpec:
    priority: int = DEFAULT_PRIORITY
    acquires: bool = True
    credit_window: int | None = None  # None: unlimited credit; else re-granted when it runs out


@dataclass(frozen=True)
class Faults:
    """Seeded faults injected by the workload (module docstring); all off by default."""

    callback_error_rate: float = 0.0  # P(the client callback raises InjectedFault) per delivery
    close_rate: float = 0.0  # P(the callback closes its own acquiring consumer mid-delivery)
    closes: int = 0  # acquiring consumers closed (and replaced) by a churn thread
    credit_storms: int = 0  # storm bursts on consumers with a credit window
    storm_size: int = 16  # add_credit(1) calls per burst
    poison: tuple[int, ...] = ()  # message ids whose callback always fails (must be dead-lettered)

    def __post_init__(self) -> None:
        for name in ("callback_error_rate", "close_rate"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise ValueError(f"Faults.{name} must be in [0, 1), got {v}")
        if self.closes < 0 or self.credit_storms < 0 or self.storm_size < 1:
            raise ValueError("Faults: closes and credit_storms must be >= 0, storm_size >= 1")

    @property
    def redelivers(self) -> bool:
        """Whether a message may legitimately reach more than one acquiring consumer."""
        return bool(self.callback_error_rate or self.close_rate or self.closes or self.poison)


@dataclass
class WorkloadResult:
    messages: int
    elapsed: float
    deliveries: dict[Any, int] = field(default_factory=dict)  # consumer id -> acquired count
    browsed: dict[Any, int] = field(default_factory=dict)  # browser id -> messages seen
    notifications: int = 0
    steps: int = 0  # deterministic scheduler steps (0 on real threads)
    settled: int = 0  # messages settled by a consumer
    dead_lettered: list[int] = field(default_factory=list)  # message ids dead-lettered
    injected: int = 0  # callback exceptions injected
    reported: int = 0  # delivery failures reported by the pool's hook
    closes: int = 0  # consumers closed mid-run (churn thread and callbacks)
    storms: int = 0  # credit-storm bursts
    redeliveries: int = 0  # deliveries to acquiring consumers beyond the first of each message

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else float("inf")


def run_workload(
    *,
    sched: Any = REAL,
    publishers: int = 2,
    messages_per_publisher: int = 1000,
    connections: list[list[ConsumerSpec]] | None = None,
    io_threads: int = 2,
    flow_toggles: int = 0,
    browse_phase_messages: int = 0,
    seed: int = 0,
    timeout: float = 60.0,
    stall_timeout: float = 10.0,
    batch: int = 64,
    check: bool = True,
    faults: Faults | None = None,
) -> WorkloadResult:
    """Run the workload (see module docstring) and return what happened; raise ``WorkloadError``."""
    if connections is None:
        connections = [[ConsumerSpec()]]
    box: dict[str, Any] = {}

    def main() -> None:
        box["result"] = _Run(sched, publishers, messages_per_publisher, connections, io_threads, flow_toggles,
                             browse_phase_messages, seed, timeout, stall_timeout, batch, check, faults).run()

    sched.run(main)
    result: WorkloadResult = box["result"]
    result.steps = getattr(sched, "steps", 0)
    return result


# ==================================================================================================
# The schedules engine's exploration (conformance/consumer_lists/mutants.py: engine_schedules)
# ==================================================================================================

#: scheduler options of every schedule explored: lock releases are interleaving points too (a
#: window between a release and a later lock-free read or write is interleaved), and a bound on
#: steps that turns a livelock into a failure (the longest shape needs about 3,000)
SCHEDULE_OPTIONS: dict[str, Any] = {"release_points": True, "max_steps": 20_000}

#: the systematic phase's small workloads (name -> connections, keyword arguments of
#: ``run_workload``): small enough that every schedule with one deviation is explored
SYSTEMATIC_SHAPES: dict[str, tuple[list[list[ConsumerSpec]], dict[str, Any]]] = {
    # one consumer, two publishers: a pull can find the queue empty while a publisher still has a
    # message to enqueue (the lost wake-up windows of a pull and of the delivery chain)
    "1c-2p": ([[ConsumerSpec()]], dict(publishers=2, messages_per_publisher=1, io_threads=1)),
    # two connections on two IO threads, equal priority, one with a credit window of one (two
    # pulls racing for the same entry, hand-over of the wake-up, credit running out mid-pull);
    # priorities are left to the PCT shapes (a lower priority consumer rarely pulls)
    "2c-credit": ([[ConsumerSpec(priority=5)], [ConsumerSpec(priority=5, credit_window=1)]],
                  dict(publishers=1, messages_per_publisher=2, io_threads=2)),
    # a browser next to an acquiring consumer, and one flow-control toggle
    "browser-flow": ([[ConsumerSpec(), ConsumerSpec(acquires=False)]],
                     dict(publishers=1, messages_per_publisher=2, io_threads=1, flow_toggles=1)),
}
#: deviations per schedule in the systematic phase (levels 0, 1, 2 in that order)
SYSTEMATIC_BOUND = 2

#: PCT phase: scheduling points of each ``schedule_shape`` (the range PCT draws its change points from)
PCT_STEPS = (2500, 330, 600)


def schedule_shape(seed: int) -> tuple[list[list[ConsumerSpec]], dict[str, Any]]:
    """The workload shape of seed ``seed`` of the schedules engine's PCT phase: three shapes in
    rotation, batch 2."""
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
    conns, kw = shapes[seed % len(shapes)]
    return conns, dict(kw, seed=seed, batch=2)


def pct_scheduler(seed: int, **kwargs: Any) -> DeterministicScheduler:
    """The scheduler of PCT seed ``seed``: depth 2, 3, 4 in rotation (bugs that need one, two or
    three ordering constraints), change points drawn over the shape's length; every point
    (node-list reads included) is a decision."""
    return DeterministicScheduler(seed, strategy="pct", pct_depth=2 + (seed // 3) % 3,
                                  pct_steps=PCT_STEPS[seed % 3], **(SCHEDULE_OPTIONS | kwargs))


def run_schedule(seed: int, *, sched: DeterministicScheduler | None = None, **overrides: Any) -> WorkloadResult:
    """PCT seed ``seed`` of the schedules engine: ``schedule_shape(seed)`` under
    ``pct_scheduler(seed)`` (or ``sched``).  Raises ``SchedulerError`` (cause: the
    ``WorkloadError``) on a failure."""
    conns, kw = schedule_shape(seed)
    return run_workload(sched=sched or pct_scheduler(seed), connections=conns, **(kw | overrides))


def run_shape(shape: str, sched: DeterministicScheduler, **overrides: Any) -> WorkloadResult:
    """Systematic workload ``shape`` (``SYSTEMATIC_SHAPES``) under ``sched``."""
    conns, kw = SYSTEMATIC_SHAPES[shape]
    return run_workload(sched=sched, connections=conns, **(dict(kw, batch=2) | overrides))


def replay_schedule(shape: str, schedule: Any = (), *, observe: bool = True) -> tuple[DeterministicScheduler, BaseException | None]:
    """Run the systematic workload ``shape`` under the fixed schedule ``schedule`` (Deviations, or
    ``(thread, at, to)`` triples as printed by a failure report); returns the scheduler (``log``,
    ``states``, ``decisions``) and the failure, or None if the run passes."""
    devs = tuple(d if isinstance(d, Deviation) else Deviation(*d) for d in schedule)
    sched = DeterministicScheduler(0, strategy="fixed", schedule=devs, observe_state=observe, **SCHEDULE_OPTIONS)
    try:
        run_shape(shape, sched)
    except Exception as exc:
        return sched, exc
    return sched, None


@dataclass
class ScheduleFailure:
    """A failing schedule of the exploration, minimised, with its readable interleaving."""

    number: int  # schedules explored up to and including this one
    phase: str  # "systematic" or "pct"
    workload: str  # systematic shape name, or "shape k" of the PCT phase
    found: str  # the schedule as found: "schedule [...]" or "seed s (pct, depth d)"
    error: BaseException
    minimised: Minimised | None = None
    number_seed: int = -1  # the PCT seed (PCT phase)

    @property
    def cause(self) -> BaseException:
        return self.error.__cause__ or self.error

    @property
    def schedule(self) -> tuple[Deviation, ...]:
        """The minimised schedule (a fixed-strategy schedule that replays the failure)."""
        return self.minimised.schedule if self.minimised is not None else ()

    def summary(self) -> str:
        first = (str(self.cause).splitlines() or [""])[0]
        return f"{self.phase} schedule {self.number} ({self.workload}, {self.found}): {type(self.cause).__name__}: {first}"

    def replay_call(self) -> str:
        triples = [(d.thread, d.at, d.to) for d in self.schedule]
        if self.phase == "systematic":
            return f"conq.impl.consumer_lists.workload.replay_schedule({self.workload!r}, {triples!r})"
        return f"conq.impl.consumer_lists.workload.replay_pct({self.number_seed}, {triples!r})"

    def replay(self, observe: bool = True) -> tuple[DeterministicScheduler, BaseException | None]:
        triples = [(d.thread, d.at, d.to) for d in self.schedule]
        if self.phase == "systematic":
            return replay_schedule(self.workload, triples, observe=observe)
        return replay_pct(self.number_seed, triples, observe=observe)

    def report(self) -> str:
        lines = [self.summary()]
        m = self.minimised
        if m is not None:
            devs = ", ".join(map(str, m.schedule)) or "none: the default schedule fails"
            lines.append(f"minimised to {len(m.schedule)} deviation(s) from the default schedule in {m.runs} replays"
                         f"{'' if m.complete else ' (replay budget spent: not 1-minimal)'}: {devs}")
            lines.append(f"replay: {self.replay_call()}")
            lines.append("interleaving (step, thread, switch point | lists, messages, connections: * scheduled, "
                         "+ pending; at that point):")
            lines += ["  " + line for line in render_interleaving(m.sched)]
            lines.append(f"  failure: {type(m.error.__cause__ or m.error).__name__}: "
                         f"{(str(m.error.__cause__ or m.error).splitlines() or [''])[0]}")
        return "\n".join(lines)


def replay_pct(seed: int, schedule: Any = (), *, observe: bool = True) -> tuple[DeterministicScheduler, BaseException | None]:
    """``schedule_shape(seed)`` under the fixed schedule ``schedule`` (a minimised PCT failure)."""
    devs = tuple(d if isinstance(d, Deviation) else Deviation(*d) for d in schedule)
    sched = DeterministicScheduler(0, strategy="fixed", schedule=devs, observe_state=observe, **SCHEDULE_OPTIONS)
    try:
        run_schedule(seed, sched=sched)
    except Exception as exc:
        return sched, exc
    return sched, None


@dataclass
class ScheduleExploration:
    """What ``explore_schedules`` did: schedules run per phase, how far the systematic phase got,
    and the first failure (minimised), if any."""

    explored: int = 0
    systematic: int = 0
    pct: int = 0
    #: shape -> level -> schedules run of that level, and whether the level was run to its end
    levels: dict[str, dict[int, tuple[int, bool]]] = field(default_factory=dict)
    failure: ScheduleFailure | None = None
    stopped: bool = False  # ``stop()`` said so before the counts were spent (a safety cap: no verdict)

    def exhaustive_upto(self) -> int:
        """The largest d such that every schedule with <= d deviations of every shape was run (-1: none)."""
        d = -1
        while all(self.levels.get(s, {}).get(d + 1, (0, False))[1] for s in SYSTEMATIC_SHAPES):
            d += 1
        return d

    def describe(self) -> str:
        parts = []
        for shape, lv in self.levels.items():
            parts.append(f"{shape}: " + ", ".join(f"{n}{'' if done else '+'} with {d} deviation(s)" for d, (n, done) in sorted(lv.items())))
        upto = self.exhaustive_upto()
        ex = f"every schedule with <= {upto} deviation(s)" if upto >= 0 else "not one level complete"
        return (f"{self.explored} schedules: {self.systematic} systematic ({ex} over {len(SYSTEMATIC_SHAPES)} "
                f"workloads; {'; '.join(parts)}), {self.pct} PCT")


def explore_schedules(systematic: int, pct: int, *, minimise: bool = True, max_replays: int = 300,
                      stop: Callable[[], bool] | None = None) -> ScheduleExploration:
    """The schedules engine: first ``systematic`` schedules of the bounded exploration of the
    ``SYSTEMATIC_SHAPES`` (every schedule with 0 deviations of every shape, then every one with 1,
    then with 2: ``BoundedExploration``), then ``pct`` PCT seeds over ``schedule_shape``.  Stops at
    the first failure, which is minimised (delta debugging over its deviations, at most
    ``max_replays`` replays) and rendered (``ScheduleFailure.report``).  Pure function of the
    implementation: no clock, no randomness outside the seeds -- except ``stop``, a safety cap
    asked after every schedule: if it says stop, the result is ``stopped`` (no verdict)."""
    out = ScheduleExploration()
    explorations = {name: BoundedExploration(lambda s, name=name: run_shape(name, s), bound=SYSTEMATIC_BOUND,
                                             **SCHEDULE_OPTIONS) for name in SYSTEMATIC_SHAPES}
    for depth in range(SYSTEMATIC_BOUND + 1):
        for name, ex in explorations.items():
            if out.systematic >= systematic:
                break
            run, done = 0, True
            for trial in ex.level(depth):
                out.systematic += 1
                out.explored += 1
                run += 1
                if trial.failed:
                    out.levels.setdefault(name, {})[depth] = (run, False)
                    out.failure = ScheduleFailure(out.explored, "systematic", name, trial.sched.describe(), trial.error)
                    if minimise:
                        out.failure.minimised = minimise_schedule(lambda s, name=name: run_shape(name, s), trial.schedule,
                                                                  max_runs=max_replays, **SCHEDULE_OPTIONS)
                    return out
                if out.systematic >= systematic:
                    done = False
                    break
                if stop is not None and stop():
                    out.levels.setdefault(name, {})[depth] = (run, False)
                    out.stopped = True
                    return out
            out.levels.setdefault(name, {})[depth] = (run, done)
    for seed in range(pct):
        sched = pct_scheduler(seed)
        out.pct += 1
        out.explored += 1
        try:
            run_schedule(seed, sched=sched)
        except Exception as exc:
            found = f"seed {seed} (pct, depth {2 + (seed // 3) % 3})"
            out.failure = ScheduleFailure(out.explored, "pct", f"shape {seed % 3}", found, exc, number_seed=seed)
            if minimise:
                out.failure.minimised = minimise_schedule(lambda s, seed=seed: run_schedule(seed, sched=s), deviations_of(sched),
                                                          max_runs=max_replays, **SCHEDULE_OPTIONS)
            return out
        if stop is not None and stop() and seed + 1 < pct:
            out.stopped = True
            return out
    return out


_M64 = (1 << 64) - 1


def _draw(seed: int, msg_id: int, attempt: int, salt: int) -> float:
    """A uniform number in [0, 1) that depends only on its arguments (splitmix64 finaliser)."""
    x = (seed * 0x9E3779B97F4A7C15 + msg_id * 0xBF58476D1CE4E5B9 + attempt * 0x94D049BB133111EB + salt) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return (x ^ (x >> 31)) / 2.0**64


class _Client:
    """The client side of one consumer: its spec, target and what it received."""

    __slots__ = ("records", "spec", "target")

    def __init__(self, spec: ConsumerSpec, target: ConsumerTarget) -> None:
        self.spec = spec
        self.target = target
        self.records: list[int] = []


class _Run:
    def __init__(self, sched: Any, publishers: int, per_publisher: int, connections: list[list[ConsumerSpec]],
                 io_threads: int, flow_toggles: int, browse_phase: int, seed: int, timeout: float,
                 stall_timeout: float, batch: int, check: bool, faults: Faults | None) -> None:
        self.sched = sched
        self.det = bool(getattr(sched, "deterministic", False))
        self.publishers = publishers
        self.per_publisher = per_publisher
        self.flow_toggles = flow_toggles
        self.browse_phase = browse_phase
        self.seed = seed
        self.rng = random.Random(seed)
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.check = check
        self.faults = faults if faults is not None else Faults()
        self.faulty = faults is not None and faults != Faults()
        self.track = self.faults.redelivers  # holder tracking (redelivery is legitimate)
        self.poison = frozenset(self.faults.poison)
        self.total = publishers * per_publisher + browse_phase
        if any(not 1 <= m <= self.total for m in self.poison):
            raise ValueError(f"poison message ids must be in 1..{self.total}")
        self.queue = Queue(sched, "q", record_events=False, retain_deleted=False)
        self.pool = IOThreadPool(sched, io_threads, on_delivery_error=self._on_delivery_failure,
                                 on_error=self._on_internal_error)
        self._lock = sched.lock("workload")
        self._cv = sched.condition(self._lock, "workload.progress")
        self.settled = 0
        self.settle_counts = bytearray(self.total + 1)  # message id -> successful settles (capped)
        self.dead: set[int] = set()
        self.holder: dict[int, Any] = {}  # message id -> acquiring consumer that holds it (track mode)
        self.attempts: dict[int, int] = {}  # message id -> deliveries to acquiring consumers (track mode)
        self.closing: set[Any] = set()  # consumer ids being closed (or closed) by the run
        self.injected = 0
        self.reported = 0
        self.closes = 0
        self.storms = 0
        self.violations: list[str] = []
        self._pacing = True
        self.acquirers: list[QueueConsumer] = []
        self.browsers: list[QueueConsumer] = []
        self._clients: dict[Any, _Client] = {}
        self.connections: list[Connection] = []
        for ci, specs in enumerate(connections):
            conn = Connection(f"c{ci}", pool=self.pool, sched=sched, sink=self._sink)
            session = conn.create_session()
            for ti, spec in enumerate(specs):
                target = session.create_target(batch=batch)
                cid = f"c{ci}.{ti}" + ("" if spec.acquires else "b")
                self._clients[cid] = _Client(spec, target)
                c = target.subscribe(self.queue, cid, priority=spec.priority, acquires=spec.acquires,
                                     credit=spec.credit_window)
                (self.acquirers if spec.acquires else self.browsers).append(c)
            self.connections.append(conn)
        if not self.acquirers:
            raise ValueError("the workload needs at least one acquiring consumer")
        if getattr(sched, "observe_state", False):
            sched.state_probe = self.state_line  # a rendered interleaving shows the lists at each step

    def state_line(self) -> str:
        """The lists and messages in one line, for a rendered interleaving.  Called by the
        deterministic scheduler at its points (one logical thread runs at a time): reads plain
        fields only -- no lock, no node-list iterator (both are interleaving points)."""

        def ids(nl: Any) -> list[Any]:
            out, n = [], nl.head.next
            while n is not None:
                if not n.deleted:
                    out.append(n.value.consumer.id)
                n = n.next
            return out

        q = self.queue
        parts = []
        for name in ("interested", "notified"):
            members = [cid for lv in q.qcm._levels for cid in ids(getattr(lv, name))]
            parts.append(f"{name} {members}")
        for name in ("not_interested", "non_acquiring"):
            members = ids(getattr(q.qcm, name))
            if members:
                parts.append(f"{name} {members}")
        entries = list(q._entries.values())
        parts.append(f"available {[e.id for e in entries if e.state is MessageState.AVAILABLE]}")
        acquired = {e.id: e.owner for e in entries if e.state is MessageState.ACQUIRED}
        if acquired:
            parts.append(f"acquired {acquired}")
        conns = [f"{c.name}{'*' if c.scheduled else ''}{'+' if c._pending else ''}" for c in self.connections]
        parts.append(f"connections {' '.join(conns)}")
        parts.append(f"settled {self.settled}/{self.total}")
        return "; ".join(parts)

    # -- IO thread side ----------------------------------------------------------------------------
    def _sink(self, consumer: QueueConsumer, msg_id: int) -> None:
        """Step 12 plus the client's reaction: grant more credit, (faults,) settle what was acquired."""
        cid = consumer.id
        client = self._clients[cid]
        client.records.append(msg_id)
        window = client.spec.credit_window
        if window is not None and consumer.credit == 0:
            consumer.add_credit(window)
        if not self.faulty:
            if consumer.acquires:
                self.queue.settle(msg_id, consumer)
                with self._lock:
                    self.settled += 1
                    if self.settled >= self.total:
                        self._cv.notify_all()
            return
        self._faulty_sink(consumer, msg_id)

    def _faulty_sink(self, consumer: QueueConsumer, msg_id: int) -> None:
        cid = consumer.id
        f = self.faults
        attempt = 0
        if consumer.acquires and self.track:
            stale_while = None
            with self._lock:
                holder = self.holder.get(msg_id)
                if holder is not None and holder not in self.closing and holder != cid and cid in self.closing:
                    # A stale send: ``ConsumerTarget.process`` checked ``closed`` after the pull, then
                    # another thread closed this consumer before this sink ran; the removal released
                    # the message and ``holder`` took it meanwhile.  Not a double acquisition if the
                    # queue no longer has it held by this consumer (checked below); ``holder`` keeps it.
                    stale_while = holder
                else:
                    if holder is not None and holder not in self.closing:
                        self._violation_locked(f"message {msg_id} delivered to {cid!r} while {holder!r} holds it "
                                               f"(acquired twice)")
                    self.holder[msg_id] = cid
                attempt = self.attempts[msg_id] = self.attempts.get(msg_id, 0) + 1
            # outside the leaf lock (acquired_ids takes the queue's lock).  ``stale_while`` was
            # delivered the message after this consumer's removal released it, and a removed consumer
            # acquires nothing more: if the queue still counts it as this consumer's, both hold it.
            if stale_while is not None and msg_id in consumer.acquired_ids():
                with self._lock:
                    self._violation_locked(f"message {msg_id} delivered to {cid!r} (being closed), which the queue "
                                           f"still has holding it, while {stale_while!r} holds it (acquired twice)")
        if msg_id in self.poison or (f.callback_error_rate and _draw(self.seed, msg_id, attempt, 1) < f.callback_error_rate):
            with self._lock:
                self.injected += 1
                if self.holder.get(msg_id) == cid:
                    del self.holder[msg_id]  # the failure policy releases it (or dead-letters it)
            raise InjectedFault(f"injected: message {msg_id} to {cid!r} (attempt {attempt})")
        if not consumer.acquires:
            return
        if f.close_rate and _draw(self.seed, msg_id, attempt, 2) < f.close_rate:
            # the client goes away while holding the message: no settle; removal releases it
            self._close_and_replace(consumer)
            with self._lock:
                if self.holder.get(msg_id) == cid:
                    del self.holder[msg_id]
            return
        try:
            self.queue.settle(msg_id, consumer)
        except QueueError as exc:
            with self._lock:
                if cid in self.closing:  # closed meanwhile: removal released it, a late settle is refused
                    if self.holder.get(msg_id) == cid:
                        del self.holder[msg_id]
                    return
                self._violation_locked(f"settle of message {msg_id} by {cid!r}, which holds it, failed: {exc}")
            return
        with self._lock:
            if self.holder.get(msg_id) == cid:
                del self.holder[msg_id]
            self.settled += 1
            if self.settle_counts[msg_id] < 255:
                self.settle_counts[msg_id] += 1
            if self.settle_counts[msg_id] > 1 or msg_id in self.dead:
                self._violation_locked(f"message {msg_id} settled after it was settled or dead-lettered")
            if self.settled + len(self.dead) >= self.total:
                self._cv.notify_all()

    def _on_delivery_failure(self, failure: DeliveryFailure) -> None:
        """The pool's ``on_delivery_error`` hook (IO thread): every failure must be an injected one."""
        with self._lock:
            self.reported += 1
            cid = failure.consumer.id
            if not isinstance(failure.error, InjectedFault):
                self._violation_locked(f"unexpected delivery failure: {failure}")
                return
            expected = ({"browsed"} if not failure.consumer.acquires
                        else {"released", "dead-lettered"} | ({"not-held"} if cid in self.closing else set()))
            if failure.outcome not in expected:
                self._violation_locked(f"failure policy: {failure} (expected {sorted(expected)})")
            if failure.outcome == "dead-lettered":
                m = failure.msg_id
                if m not in self.poison:
                    self._violation_locked(f"message {m} dead-lettered but it is not a poison message: {failure}")
                if m in self.dead or self.settle_counts[m]:
                    self._violation_locked(f"message {m} dead-lettered after it was settled or dead-lettered")
                self.dead.add(m)
                if self.settled + len(self.dead) >= self.total:
                    self._cv.notify_all()

    def _on_internal_error(self, connection: Connection, exc: Exception) -> None:
        with self._lock:
            self._violation_locked(f"internal failure on connection {connection.name!r}: {type(exc).__name__}: {exc}")

    def _violation_locked(self, text: str) -> None:
        self.violations.append(text)
        self._cv.notify_all()  # the main thread fails the run now, not at the end

    # -- consumer churn (IO threads and the churn thread) ---------------------------------------------
    def _close_and_replace(self, victim: QueueConsumer) -> None:
        with self._lock:
            if victim.id in self.closing:
                return
            self.closing.add(victim.id)
            k = self.closes
            self.closes += 1
        self.queue.remove_consumer(victim)
        old = self._clients[victim.id]
        new_id = f"{victim.id}~{k}"
        self._clients[new_id] = _Client(old.spec, old.target)  # registered before it can receive anything
        c = old.target.subscribe(self.queue, new_id, priority=old.spec.priority, acquires=True,
                                 credit=old.spec.credit_window)
        with self._lock:
            self.acquirers.append(c)

    def _pace(self, k: int, n: int) -> None:
        """Real threads: wait until k/(n+1) of the messages are consumed (or the run is over)."""
        if self.det:
            return
        target = self.total * (k + 1) // (n + 1)
        deadline = time.monotonic() + self.timeout
        while self._pacing and self.settled + len(self.dead) < target and time.monotonic() < deadline:
            time.sleep(0.0005)

    def _closer(self) -> None:
        rng = random.Random(_draw(self.seed, 0, 0, 3))
        n = self.faults.closes
        for k in range(n):
            self._pace(k, n)
            with self._lock:
                live = [c for c in self.acquirers if c.id not in self.closing]
            if live:
                self._close_and_replace(rng.choice(live))

    def _storm_candidates(self) -> list:
        with self._lock:
            return [c for c in self.acquirers + self.browsers
                    if c.id not in self.closing and self._clients[c.id].spec.credit_window is not None]

    def _stormer(self) -> None:
        rng = random.Random(_draw(self.seed, 0, 0, 4))
        n = self.faults.credit_storms
        for k in range(n):
            self._pace(k, n)
            cands = self._storm_candidates()
            if not cands and not self.det:
                # the churn thread may be replacing the only consumer with a credit window: its
                # replacement is subscribed at once, so wait for it rather than skip the storm
                # (a skipped storm made the count of storms depend on thread timing)
                deadline = time.monotonic() + self.timeout
                while not cands and time.monotonic() < deadline:
                    time.sleep(0.0005)
                    cands = self._storm_candidates()
            if not cands:
                continue
            c = rng.choice(cands)
            c.set_credit(0)
            for _ in range(self.faults.storm_size):
                c.add_credit(1)
            with self._lock:
                self.storms += 1

    # -- other threads -------------------------------------------------------------------------------
    def _publisher(self, n: int) -> None:
        for i in range(self.per_publisher):
            self.queue.enqueue((n, i))

    def _toggler(self) -> None:
        rng = random.Random(self.rng.random())
        for _ in range(self.flow_toggles):
            with self._lock:
                candidates = self.acquirers + self.browsers
            c = rng.choice(candidates)
            c.set_flow(False)
            if not self.det:
                time.sleep(0.0005 * rng.random())
            c.set_flow(True)

    # -- main ----------------------------------------------------------------------------------------
    def _consumed(self) -> int:
        return self.settled + len(self.dead)

    def _wait(self, done: Any, what: str, progress: Any) -> None:
        """Wait until ``done()``; fail on a violation, on quiescence (deterministic) / stall or
        deadline (real)."""
        deadline = time.monotonic() + self.timeout
        last, last_change = progress(), time.monotonic()
        with self._cv:
            while not done():
                if self.violations:
                    raise self._failure(f"{what}: {self.violations[0]}")
                notified = self._cv.wait(1.0 if self.det else 0.05)
                if self.violations:
                    raise self._failure(f"{what}: {self.violations[0]}")
                if self.det:
                    if not notified and not done():
                        raise self._failure(f"{what}: went quiescent before completion (lost wake-up)")
                    continue
                now = time.monotonic()
                p = progress()
                if p != last:
                    last, last_change = p, now
                elif now - last_change > self.stall_timeout:
                    raise self._failure(f"{what}: no progress for {self.stall_timeout}s (lost wake-up or hang)")
                if now > deadline:
                    raise self._failure(f"{what}: not done within {self.timeout}s")

    def _failure(self, text: str) -> WorkloadError:
        snap = self.queue.snapshot()
        available = [m for m, v in snap["messages"].items() if v["state"] == "available"]
        idle = [cid for cid, v in snap["consumers"].items()
                if v["acquiring"] and v["notify_work_desired"] and v["state"] in ("INTERESTED", "NOTIFIED")]
        more = f" (+{len(self.violations) - 1} more violations)" if len(self.violations) > 1 else ""
        return WorkloadError(
            f"{text}{more}; settled {self.settled}/{self.total}, dead-lettered {len(self.dead)}; available messages "
            f"{available[:10]} (count {snap['available_count']}); acquiring consumers wanting work {idle}; "
            f"lists: interested={snap['interested']} notified={snap['notified']} "
            f"not_interested={snap['not_interested']}; pending connections "
            f"{[c.name for c in self.connections if c.has_pending_work() or c.scheduled]}"
        )

    def run(self) -> WorkloadResult:
        start = time.perf_counter()
        self.pool.start()
        try:
            if self.browse_phase:
                self._run_browse_phase()
            handles = [self.sched.spawn(lambda n=n: self._publisher(n), f"pub{n}") for n in range(self.publishers)]
            if self.flow_toggles:
                handles.append(self.sched.spawn(self._toggler, "toggler"))
            # the fault threads pace themselves by consumption: joined once it is over
            late = []
            if self.faults.closes:
                late.append(self.sched.spawn(self._closer, "closer"))
            if self.faults.credit_storms:
                late.append(self.sched.spawn(self._stormer, "stormer"))
            try:
                for h in handles:
                    if not h.join(self.timeout):
                        raise self._failure(f"thread {h.name} did not finish in {self.timeout}s")
                self._wait(lambda: self._consumed() >= self.total, "consumption", self._consumed)
            finally:
                self._pacing = False
                for h in late:
                    if not h.join(self.timeout):
                        raise self._failure(f"thread {h.name} did not finish in {self.timeout}s")
        finally:
            self.pool.stop(timeout=self.timeout)
        elapsed = time.perf_counter() - start
        if self.check:
            self._check()
        return WorkloadResult(
            messages=self.total,
            elapsed=elapsed,
            deliveries={c.id: len(self._clients[c.id].records) for c in self.acquirers},
            browsed={b.id: len(self._clients[b.id].records) for b in self.browsers},
            notifications=sum(c.notified_count for c in self.acquirers + self.browsers),
            settled=self.settled,
            dead_lettered=sorted(self.dead),
            injected=self.injected,
            reported=self.reported,
            closes=self.closes,
            storms=self.storms,
            redeliveries=sum(self.attempts.values()) - len(self.attempts),
        )

    def _run_browse_phase(self) -> None:
        """All acquirers suspended: every browser must see every message of this phase."""
        for c in self.acquirers:
            c.set_flow(False)
        for i in range(self.browse_phase):
            self.queue.enqueue(("browse", i))
        expected = set(range(1, self.browse_phase + 1))

        def seen_all() -> bool:
            return all(expected.issubset(self._clients[b.id].records) for b in self.browsers)

        # browsers are driven by IO threads; progress is visible through their records
        self._wait_poll(seen_all, "browse phase",
                        lambda: sum(len(self._clients[b.id].records) for b in self.browsers))
        for c in self.acquirers:
            c.set_flow(True)

    def _wait_poll(self, done: Any, what: str, progress: Any) -> None:
        if not self.browsers:
            return
        # the sink only signals settlements, so poll: on the deterministic scheduler a timed wait
        # fires at quiescence, which is exactly when the browsers can make no more progress
        self._wait(done, what, progress)

    def _check(self) -> None:
        q = self.queue
        if self.violations:
            raise WorkloadError(f"{len(self.violations)} violation(s), first: {self.violations[0]}")
        if self.track:
            self._check_settled_once()
        else:
            self._check_acquired_once()
        for b in self.browsers:
            seen = self._clients[b.id].records
            if len(seen) != len(set(seen)):
                raise WorkloadError(f"browser {b.id!r} saw a message twice")
            if seen != sorted(seen) and not self.track:
                # (with releases a browser is also offered, later, what it passed while acquired)
                raise WorkloadError(f"browser {b.id!r} saw messages out of queue order")
            if self.browse_phase and not set(range(1, self.browse_phase + 1)).issubset(seen):
                raise WorkloadError(f"browser {b.id!r} missed browse-phase messages")
        if q.available_count != 0:
            raise WorkloadError(f"{q.available_count} messages still available after the run")
        held = {c.id: c.acquired_ids() for c in q.consumers() if c.acquires}
        held = {cid: ids for cid, ids in held.items() if ids}
        if held:
            raise WorkloadError(f"messages still held after the run (closed consumers included): {held}")
        if self.faulty:
            if self.reported != self.injected:
                raise WorkloadError(f"{self.injected} callback failures injected, {self.reported} reported")
            if self.pool.delivery_failures != self.injected:
                raise WorkloadError(f"pool counted {self.pool.delivery_failures} delivery failures, "
                                    f"{self.injected} injected")
            if self.dead != set(self.poison):
                raise WorkloadError(f"dead-lettered {sorted(self.dead)}, poison messages {sorted(self.poison)}")
            if q.dead_lettered != len(self.dead):
                raise WorkloadError(f"queue dead-lettered {q.dead_lettered}, hook saw {len(self.dead)}")

    def _check_acquired_once(self) -> None:
        acquired: dict[int, Any] = {}
        for c in self.acquirers:
            for m in self._clients[c.id].records:
                if m in acquired:
                    raise WorkloadError(f"message {m} acquired twice: by {acquired[m]!r} and by {c.id!r}")
                acquired[m] = c.id
        missing = set(range(1, self.total + 1)) - acquired.keys()
        if missing:
            raise WorkloadError(f"{len(missing)} messages never delivered, e.g. {sorted(missing)[:10]}")
        if len(acquired) != self.total:
            raise WorkloadError(f"{len(acquired)} messages acquired, {self.total} published")

    def _check_settled_once(self) -> None:
        counts = self.settle_counts
        lost = [m for m in range(1, self.total + 1) if counts[m] == 0 and m not in self.dead]
        if lost:
            raise WorkloadError(f"{len(lost)} messages neither settled nor dead-lettered, e.g. {lost[:10]}")
        twice = [m for m in range(1, self.total + 1) if counts[m] > 1]
        if twice:
            raise WorkloadError(f"{len(twice)} messages settled more than once, e.g. {twice[:10]}")
        if self.holder:
            raise WorkloadError(f"the client side still holds messages after the run: {dict(list(self.holder.items())[:10])}")
