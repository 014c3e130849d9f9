"""The PCT engine's programs: the consumer-lists reference under probabilistic concurrency testing.

``conq mutants consumer-lists -e pct`` runs :func:`explore_pct`: the programs below, one run after
another in rotation, each under :class:`~conq.impl.scheduling.PCTSearch` (Burckhardt et al., ASPLOS
2010: random thread priorities and ``d - 1`` priority change points over the ``k`` steps of a run;
a run finds a given bug of depth ``d`` with probability at least ``1 / (n k^(d-1))``), depths 1, 2, 3
in turn.  It replaces the real-thread, random-timing ``stress`` and ``stress-actors`` engines as a
bug finder (those stay as throughput and soak runs): a schedule is a pure function of its seed, so a
failure replays exactly (``replay(program, run)``) and is minimised to a few deviations from the
default schedule and printed as a readable interleaving.

The programs (every thread of the reference under one ``DeterministicScheduler``; lock releases are
interleaving points too):

* ``stress``: the ``stress`` engine's workload in small -- three connections, consumers of three
  priorities, credit windows, a browser, flow toggling, a browse phase -- with 3 x 2 messages, every
  check of the workload (nothing lost, nothing acquired twice, browsers saw everything, no stall);
* ``shape-0`` .. ``shape-2``: the ``schedules`` engine's PCT shapes (``workload.schedule_shape``), and
  ``small-*``: its small systematic workloads (``workload.SYSTEMATIC_SHAPES``: few steps, so a
  strong bound);
* ``node-list``: the node list alone, removals racing removals, an append and a read;
* every scenario of ``races.py``: the other actors (deletes, expiry, un-hold, reject, groups)
  against the consumers' pulls, checked against the model's claims for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conq.impl.consumer_lists.node_list import NodeList
from conq.impl.consumer_lists.workload import (
    SCHEDULE_OPTIONS,
    SYSTEMATIC_SHAPES,
    ConsumerSpec,
    run_shape,
    run_workload,
    schedule_shape,
)
from conq.impl.scheduling import (
    DeterministicScheduler,
    Minimised,
    PCTSearch,
    deviations_of,
    minimise_schedule,
    render_interleaving,
)

from . import races

#: the stress engine's connections (mutants.engine_stress), three publishers of two messages each
STRESS_CONNECTIONS = [
    [ConsumerSpec(priority=10, credit_window=4), ConsumerSpec(priority=5)],
    [ConsumerSpec(priority=5, credit_window=2), ConsumerSpec(acquires=False)],
    [ConsumerSpec(priority=1), ConsumerSpec(priority=1, credit_window=1)],
]


def _stress(sched: DeterministicScheduler) -> Any:
    return run_workload(sched=sched, publishers=3, messages_per_publisher=2, connections=STRESS_CONNECTIONS,
                        io_threads=2, flow_toggles=4, browse_phase_messages=2, seed=1, batch=2)


def _shape(k: int) -> Callable[[DeterministicScheduler], Any]:
    def run(sched: DeterministicScheduler) -> Any:
        conns, kw = schedule_shape(k)
        return run_workload(sched=sched, connections=conns, **kw)

    return run


def _systematic(name: str) -> Callable[[DeterministicScheduler], Any]:
    return lambda sched: run_shape(name, sched)


def _node_list(sched: DeterministicScheduler) -> None:
    """The node list on its own: two threads remove the same entries (a delete racing a delete: only
    one of them takes each), a third appends and a fourth reads; then the size must be the live
    entries, every live value must be listed once, and each entry removed exactly once."""
    def main() -> None:
        nl = NodeList(sched, "pct", scavenge_threshold=1)
        a, b = nl.append("a"), nl.append("b")
        nl.append("c")
        took: list[str] = []

        def remover() -> None:
            for e in (a, b):
                if nl.remove(e):
                    took.append(e.value)

        def appender() -> None:
            nl.append("d")
            nl.append("e")

        def reader() -> None:
            list(nl)

        handles = [sched.spawn(fn, name) for name, fn in
                   (("remove-1", remover), ("remove-2", remover), ("append", appender), ("read", reader))]
        for h in handles:
            h.join()
        live = list(nl)
        if sorted(took) != ["a", "b"]:
            raise AssertionError(f"node list: the removals took {sorted(took)}, not each of a, b once")
        if sorted(live) != ["c", "d", "e"] or len(nl) != len(live):
            raise AssertionError(f"node list: size {len(nl)}, live values {live} (expected c, d, e)")

    sched.run(main)


#: program name -> (run(sched), scheduler options)
PROGRAMS: dict[str, tuple[Callable[[DeterministicScheduler], Any], dict[str, Any]]] = {
    "stress": (_stress, SCHEDULE_OPTIONS),
    **{f"shape-{k}": (_shape(k), SCHEDULE_OPTIONS) for k in range(3)},
    **{f"small-{name}": (_systematic(name), SCHEDULE_OPTIONS) for name in SYSTEMATIC_SHAPES},
    "node-list": (_node_list, SCHEDULE_OPTIONS),
    **{name: (fn, races.OPTIONS) for name, fn in races.SCENARIOS.items()},
}
#: the depths every program cycles through (bugs of one, two or three ordering constraints)
DEPTHS = (1, 2, 3)
#: replays spent minimising a failure to a fixed schedule
MINIMISE_REPLAYS = 200


def searches() -> dict[str, PCTSearch]:
    return {name: PCTSearch(run, depths=DEPTHS, **opts) for name, (run, opts) in PROGRAMS.items()}


@dataclass
class PCTFailure:
    program: str
    run: int  # the program's run number (its seed is the run number: PCTSearch(seed=0))
    depth: int
    error: BaseException
    minimised: Minimised | None = None

    @property
    def cause(self) -> BaseException:
        return self.error.__cause__ or self.error

    def report(self) -> str:
        first = (str(self.cause).splitlines() or [""])[0]
        which = (f"pct run {self.run} of {self.program} (seed {self.run}, depth {self.depth})" if self.run >= 0
                 else f"pct run -1 of {self.program} (its calibration: the default schedule)")
        lines = [f"{which}: {type(self.cause).__name__}: {first}"]
        m = self.minimised
        if m is not None:
            devs = ", ".join(map(str, m.schedule)) or "none: the default schedule fails"
            lines.append(f"minimised to {len(m.schedule)} deviation(s) from the default schedule in {m.runs} replays"
                         f"{'' if m.complete else ' (replay budget spent: not 1-minimal)'}: {devs}")
            lines.append(f"replay: conq.conformance.consumer_lists.pct.replay({self.program!r}, {self.run})")
            lines += ["  " + line for line in render_interleaving(m.sched, limit=120)]
        return "\n".join(lines)


@dataclass
class PCTResult:
    runs: int = 0
    per_program: dict[str, int] = field(default_factory=dict)
    bounds: dict[str, str] = field(default_factory=dict)
    failure: PCTFailure | None = None
    stopped: bool = False

    searched: dict[str, PCTSearch] = field(default_factory=dict)

    def describe(self) -> str:
        """The runs and the least guarantee over the programs, per depth."""
        done = [s for s in self.searched.values() if s.runs]
        parts = []
        for d in DEPTHS:
            got = [s.bound(d).after(s.runs_at[d]) for s in done if s.runs_at.get(d)]
            if got:
                parts.append(f"depth {d} >= {min(got):.3g}")
        n = max((s.threads for s in done), default=0)
        k = max((s.steps for s in done), default=0)
        return (f"{self.runs} PCT runs over {len(self.per_program)} programs (n <= {n} threads, k <= {k:,} steps); "
                f"the least chance, over the programs, that these runs hit a given bug: {', '.join(parts)}")


def explore_pct(runs: int, *, minimise: bool = True, stop: Callable[[], bool] | None = None) -> PCTResult:
    """``runs`` PCT runs, the programs in rotation (run ``i`` is program ``i mod P``'s run ``i div
    P``); stops at the first failure, minimised to a fixed schedule (delta debugging) unless not
    ``minimise``.  A pure function of the implementation (``stop``: the safety cap, asked after
    every run; if it says stop, the result is ``stopped``, no verdict)."""
    out = PCTResult()
    progs = searches()
    names = list(progs)
    for i in range(runs):
        name = names[i % len(names)]
        search = progs[name]
        try:
            r = search.run(i // len(names))
        except Exception as exc:  # the calibration run itself failed: the default schedule fails
            out.runs += 1
            out.per_program[name] = out.per_program.get(name, 0) + 1
            out.failure = PCTFailure(name, -1, 0, exc)
            return out
        out.runs += 1
        out.per_program[name] = out.per_program.get(name, 0) + 1
        if r.failed:
            out.failure = PCTFailure(name, r.number, r.depth, r.error)
            if minimise:
                fn, opts = PROGRAMS[name]
                try:
                    out.failure.minimised = minimise_schedule(fn, deviations_of(r.sched), max_runs=MINIMISE_REPLAYS, **opts)
                except Exception:  # noqa: BLE001 - the seed itself still replays the failure
                    out.failure.minimised = None
            return out
        if stop is not None and stop() and i + 1 < runs:
            out.stopped = True
            break
    out.bounds = {name: s.describe() for name, s in progs.items() if s.runs}
    out.searched = progs
    return out


def replay(program: str, run: int) -> tuple[DeterministicScheduler, BaseException | None]:
    """Run ``run`` of ``program`` again (its seed, depth and k; -1: the calibration run, the default
    schedule): the scheduler and the failure, if any."""
    fn, opts = PROGRAMS[program]
    search = PCTSearch(fn, depths=DEPTHS, **opts)
    if run < 0:
        sched = DeterministicScheduler(0, strategy="fixed", **opts)
    else:
        try:
            sched = search.scheduler(run)
        except Exception as exc:  # the calibration run fails: k is unknown, the default schedule fails
            return DeterministicScheduler(0, strategy="fixed", **opts), exc
    try:
        fn(sched)
    except Exception as exc:
        return sched, exc
    return sched, None
