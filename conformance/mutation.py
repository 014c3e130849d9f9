"""The mutation engine: plausible bugs of a reference implementation, and the engines that must
catch each of them.  Generic over systems: a system's package (``conformance/<system>/mutants.py``)
declares its :class:`Catalogue` (its mutants and its engines); this module applies a mutant, runs
the engines and builds the kill matrix.

A mutant is applied without editing the reference source: it patches methods of ``conq.impl`` for
the duration of a run (``unittest.mock.patch``), the way such a bug would sit in a port.

Budgets are **counts** (paths, traces, examples, seeds, rounds, messages), never seconds: the
verdict of an engine on a mutant must not depend on how loaded the machine is.  Seconds survive only
as a safety cap (``Budget.max_seconds``): an engine that hits it stops and reports the cell as
*capped*, which the kill matrix and the tests treat as a failure of the run (a loud "the budget was
not spent", never a silent "not killed").
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator
from unittest import mock


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


@dataclass(frozen=True)
class Budget:
    """What each engine may spend on one mutant: counts decide, seconds only cap.

    ``scale`` multiplies every count (``conq mutants --scale 4`` for a deeper campaign); the
    per-engine counts are the catalogue's defaults times ``scale``."""

    scale: float = 1.0
    #: safety cap per engine and mutant; hitting it marks the cell capped (a failure of the run)
    max_seconds: float = 600.0

    def count(self, default: int) -> int:
        return max(1, int(round(default * self.scale)))


@dataclass
class Detection:
    killed: bool
    seconds: float
    detail: str = ""
    evidence: list[Any] = field(default_factory=list)  # minimal failing actions, when an engine has them
    #: what was spent: "12 paths", "400 traces" (the count that decided the verdict)
    spent: str = ""
    #: non-empty: the safety cap stopped the engine before its count was spent (not a verdict)
    capped: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "evidence"} | {
            "evidence": [list(a) if isinstance(a, tuple) else a for a in self.evidence]}


class Clock:
    """The safety cap of one engine run: ``over()`` says the cap is hit (never decides a verdict
    by itself: the engine reports the cell as capped)."""

    def __init__(self, budget: Budget):
        self.t0 = time.perf_counter()
        self.cap = budget.max_seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def over(self) -> bool:
        return self.elapsed() > self.cap

    def killed(self, detail: str, evidence: list[Any] | None = None, spent: str = "") -> Detection:
        return Detection(True, self.elapsed(), detail, evidence or [], spent)

    def survived(self, detail: str, spent: str = "") -> Detection:
        return Detection(False, self.elapsed(), detail, [], spent)

    def capped(self, spent: str) -> Detection:
        return Detection(False, self.elapsed(), f"safety cap of {self.cap:g} s hit after {spent}", [], spent,
                         capped=f"after {spent} (raise --max-seconds, or lower --scale)")



# -- the two trace engines every system's catalogue runs (its configurations and counts are its own) --
def replay_until_killed(clock: Clock, phases: Iterable[tuple[str, Callable[[], Any], Callable[[], Iterable[list]]]],
                        *, unit: str = "paths", seed_per_sequence: bool = False) -> tuple[Detection | None, int]:
    """The explorer engine's loop: replay every action sequence of every phase ``(label, make_checker,
    sequences)`` in order (shortest first is the caller's order) until one diverges.  Returns the kill
    or the hit cap, else ``None``, and how many sequences were replayed.  ``seed_per_sequence``: the
    i-th sequence of a phase replays with seed i (the seed picks what the driver itself chooses)."""
    replayed = 0
    for label, make_checker, sequences in phases:
        checker = make_checker()
        try:
            for i, actions in enumerate(sequences()):
                run = checker.replay(actions, i) if seed_per_sequence else checker.replay(actions)
                replayed += 1
                if not run.ok:
                    where = f"{label} (seed {run.seed})" if seed_per_sequence else label
                    return clock.killed(f"{where}: {run.divergence.describe()}", checker.minimise(run),
                                        f"{replayed} {unit}"), replayed
                if clock.over():
                    return clock.capped(f"{replayed} {unit}"), replayed
        finally:
            checker.impl.close()
    return None, replayed


def walk_until_killed(clock: Clock, traces: int, pick: Callable[[int], tuple[str, Any]],
                      make_checker: Callable[[Any], Any], *, length: int = 40) -> Detection:
    """The random engine: trace ``i`` is a seeded random walk (seed ``derive_seed(0, i)``) of ``length``
    calls on the configuration ``pick(i) -> (label, key)``, one checker per key (``make_checker(key)``),
    until one diverges.  The detail names the label, the seed and the trace."""
    from .generate import derive_seed

    checkers: dict[Any, Any] = {}
    try:
        for i in range(traces):
            label, key = pick(i)
            if key not in checkers:
                checkers[key] = make_checker(key)
            checker = checkers[key]
            run = checker.walk(derive_seed(0, i), length)
            if not run.ok:
                return clock.killed(f"{label} (seed {run.seed}) trace {i}: {run.divergence.describe()}",
                                    checker.minimise(run), f"{i + 1} traces")
            if clock.over():
                return clock.capped(f"{i + 1} of {traces} traces")
    finally:
        for c in checkers.values():
            c.impl.close()
    return clock.survived(f"{traces} random traces conform", f"{traces} traces")


Engine = Callable[[Budget], Detection]


@dataclass
class Catalogue:
    """One system's mutants and the engines that hunt them (cheapest first)."""

    system: str
    mutants: dict[str, Mutant]
    engines: dict[str, Engine]

    def run(self, names: list[str] | None = None, engines: list[str] | None = None, *, budget: Budget = Budget(),
            first_kill: bool = False, on_cell: Callable[[str, str, Detection], None] | None = None,
            ) -> dict[str, dict[str, Detection]]:
        """This catalogue's kill matrix (:func:`run_catalog`)."""
        return run_catalog(self, names, engines, budget=budget, first_kill=first_kill, on_cell=on_cell)


def catalogue_names() -> list[str]:
    """The systems with a mutant catalogue (conformance/systems.py), in registration order."""
    from . import systems

    return systems.names("mutants")


def catalogue(system: str) -> Catalogue:
    """The mutant catalogue of ``system`` (its ``mutants``; imported on first use: a catalogue
    imports its implementation)."""
    from . import systems

    found = systems.find(system)
    if found is None or found.mutants is None:
        raise ValueError(f"no mutant catalogue for {system!r} (known: {', '.join(catalogue_names())})")
    return found.load("mutants")


def mutant_driver(system: str, name: str) -> type:
    """The reference driver of ``system`` with its mutant ``name`` applied (``--impl mutant:NAME``);
    ValueError for an unknown mutant or a system that offers none."""
    from . import systems

    found = systems.find(system)
    make = found.load("mutant_driver") if found is not None else None
    if make is None:
        raise ValueError(f"no mutant catalogue for {system!r} (known: {', '.join(catalogue_names())})")
    return make(name)


def run_catalog(cat: Catalogue, names: list[str] | None = None, engines: list[str] | None = None, *,
                budget: Budget = Budget(), first_kill: bool = False,
                on_cell: Callable[[str, str, Detection], None] | None = None) -> dict[str, dict[str, Detection]]:
    """The kill matrix: mutant -> engine -> detection.  Row ``(reference)`` runs every engine on
    the unmutated implementation: it must pass them all, or a kill proves nothing.  ``first_kill``:
    stop at a mutant's first killing engine (engines run in the order given)."""
    matrix: dict[str, dict[str, Detection]] = {}
    rows: list[tuple[str, Mutant | None]] = [("(reference)", None)] + [(n, cat.mutants[n]) for n in (names or cat.mutants)]
    for name, mutant in rows:
        matrix[name] = {}
        for ename in engines or cat.engines:
            ctx = mutant.applied() if mutant else contextlib.nullcontext()
            with ctx:
                try:
                    det = cat.engines[ename](budget)
                except Exception as e:  # an engine crashing on a mutant is a detection with evidence
                    det = Detection(True, 0.0, f"engine crashed: {type(e).__name__}: {e}")
            matrix[name][ename] = det
            if on_cell:
                on_cell(name, ename, det)
            if first_kill and mutant is not None and det.killed:
                break
    return matrix


def capped_cells(matrix: dict[str, dict[str, Detection]]) -> list[str]:
    """Cells whose engine hit the safety cap before spending its count: the run is incomplete."""
    return [f"{m} / {e}: {d.capped}" for m, row in matrix.items() for e, d in row.items() if d.capped]
