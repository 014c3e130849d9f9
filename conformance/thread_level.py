"""The thread level, for every system that has one: campaigns of checker-chosen interleavings.

A system's thread-step view (``conformance/<system>/thread_steps.py``: consumer lists, ordered
consumption, recovery deferral) is a :class:`~conq.model.kernel.Model` whose actions are the
environment's steps and the threads' ``("step", kind, n, ...)`` requests, every state a state of
the system's model.  This module runs an implementation against such a view, the same way for every system (issue 35):

* seeded random walks (walk ``k`` uses seed ``seed + k``; ``probe`` > 0 also sends steps and calls
  no consistent state enables, which the implementation must refuse with error 13,
  :meth:`Checker.walk`);
* exhaustive mode: every action sequence of exactly ``depth`` actions (or shorter, ending where
  nothing is enabled), counted first (:func:`count_sequences`), run in the view's order;
* a failure carries what a call-level one does: its seed, the delta-debugged shortest sequence that
  still diverges the same way, the command that replays it alone (with ``--impl``), and the step
  label the implementation reported (in the verdict: its observation).
"""

from __future__ import annotations

import random
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

from conq.model.kernel import Model

from .checker import Checker, Divergence
from .trace import short_json


def reference_model(model: str, config: str, known: dict[str, tuple[str, dict[str, Any]]],
                    overrides: dict[str, Any] | None, switches: dict[str, Any]) -> Model:
    """The model under a system's thread-level configuration ``config`` (``known``: name -> (the model's
    configuration, its overrides)), plus ``overrides``; ValueError when the name is unknown or a
    switch differs from the reference's (``switches``): the thread level drives the reference only."""
    from conq.model.engines.registry import load_model

    if config not in known:
        raise ValueError(f"no thread-level configuration {config!r} (known: {', '.join(known)})")
    named, own = known[config]
    base = load_model(model, named, {**own, **(overrides or {})})

    def value(k: str) -> Any:  # an enum switch compares by its value
        v = getattr(base.config, k)
        return getattr(v, "value", v)

    wrong = {k: getattr(base.config, k) for k, v in switches.items() if value(k) != v}
    if wrong:
        raise ValueError(f"thread level, {config}: only the reference switches {switches} (got {wrong})")
    return base


class ThreadLevelError(ValueError):
    """Bad thread-level input (an unknown configuration, an exhaustive run larger than ``--traces``)."""


@dataclass
class ThreadRun:
    """A thread-level campaign on one configuration: what ran and the first divergence (None: none)."""

    config: str
    model: str = ""
    impl: str = "reference"
    walks: int = 0
    #: exhaustive traces run
    exhaustive: int = 0
    #: exhaustive mode: every action sequence of the depth, counted before the run (None: random mode)
    exhaustive_total: int | None = None
    steps: int = 0
    divergence: Divergence | None = None
    #: the failing trace's actions
    actions: list = field(default_factory=list)
    #: the failing trace: its seed, and which trace it was (``random walk K (seed S)``, ``exhaustive trace I``)
    seed: int | None = None
    source: str = ""
    #: a shortest action sequence that still diverges with the same kind (None: not minimised)
    minimised: list | None = None
    #: the command that replays the failure alone
    replay: str = ""
    #: non-empty: the exhaustive run was cut short (more traces than the bound); not a verdict
    incomplete: str = ""
    #: False: observations only, no snapshot after each step (``--no-snapshots``)
    snapshots: bool = True

    @property
    def ok(self) -> bool:
        return self.divergence is None

    @property
    def traces(self) -> int:
        return self.walks + self.exhaustive

    def describe(self) -> str:
        head = (f"thread level, {self.config}: {self.walks} random walks + {self.exhaustive} exhaustive traces, "
                f"{self.steps} steps checked" + ("" if self.snapshots else " (observations only, no snapshots)"))
        if self.divergence is None:
            return head + (f": INCOMPLETE ({self.incomplete})" if self.incomplete else ": conforms")
        lines = [f"{head}: DIVERGES", f"  {self.source}: {self.divergence.describe()}",
                 f"  actions {short_json(self.actions, 4000)}"]
        if self.minimised is not None:
            lines.append(f"  minimised {short_json(self.minimised, 4000)}")
        if self.replay:
            lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """One entry of the ``configs`` of ``conq conformance --level thread --json``
        (spec/schemas/conformance.schema.json, ``thread``)."""
        d = self.divergence
        return {
            "config": self.config, "ok": self.ok, "traces": self.traces, "walks": self.walks,
            "exhaustive": (None if self.exhaustive_total is None else
                           {"traces": self.exhaustive_total, "complete": self.exhaustive >= self.exhaustive_total
                            or (d is not None and not self.incomplete)}),
            "steps": self.steps, "incomplete": self.incomplete,
            "source": self.source or None, "seed": self.seed,
            "step": None if d is None else d.step, "kind": None if d is None else d.kind,
            "failure": None if d is None else (d.failure or None),
            "actions": [list(a) for a in self.actions] if d is not None else [],
            "minimised": [list(a) for a in self.minimised] if self.minimised is not None else None,
            "divergence": None if d is None else d.describe(),
            "replay": self.replay or None,
        }


def thread_impl(spec: str, model_name: str, thread_driver: Any, *, timeout: float = 10.0) -> Any:
    """The implementation ``--impl spec`` of ``model_name`` at thread level: ``reference`` /
    ``mutant:NAME`` / ``driver:...`` in process (the call-level driver class under
    ``thread_driver(cls)``), ``stdio:CMD`` a port asked for the thread level (``init``'s
    ``level``).  SuiteError for a bad spec."""
    from .adapters import InProcess, Stdio
    from .suite import make_impl

    impl = make_impl(spec, model_name, timeout=timeout)
    if isinstance(impl, Stdio):
        impl.level = "thread"
        return impl
    if isinstance(impl, InProcess):
        return InProcess(thread_driver(impl.driver_cls), name=f"{impl.name} (thread level)")
    raise ValueError(f"--impl {spec}: no thread level for {type(impl).__name__}")  # pragma: no cover


# -- exhaustive: every action sequence of a depth -----------------------------------------------------

def count_sequences(model: Model, depth: int) -> int:
    """How many traces :func:`sequences` yields at ``depth``: distinct action sequences (a sequence
    stands for all its outcomes), counted over sets of states, memoised."""
    memo: dict[tuple[frozenset, int], int] = {}

    def count(states: frozenset, left: int) -> int:
        if left == 0:
            return 1
        key = (states, left)
        found = memo.get(key)
        if found is None:
            by = _by_action(model, states)
            found = memo[key] = sum(count(t, left - 1) for t in by.values()) if by else 1
        return found

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * depth + 1000))
    try:
        return count(frozenset(model.init_states()), depth)
    finally:
        sys.setrecursionlimit(limit)


def _by_action(model: Model, states: frozenset) -> dict[tuple, frozenset]:
    """Each action some state enables -> the states it may lead to, in the model's order."""
    out: dict[tuple, set] = {}
    for s in sorted(states, key=repr) if len(states) > 1 else states:
        for a, _o, t in model.successors(s):
            out.setdefault(a, set()).add(t)
    return {a: frozenset(ts) for a, ts in out.items()}


def sequences(model: Model, depth: int) -> Iterator[list[tuple]]:
    """Every distinct action sequence of exactly ``depth`` actions from the initial states (or
    shorter, ending where nothing is enabled), depth first in the model's action order."""
    stack: list[tuple[list[tuple], frozenset]] = [([], frozenset(model.init_states()))]
    while stack:
        seq, states = stack.pop()
        by = _by_action(model, states) if len(seq) < depth else {}
        if not by:
            yield seq
            continue
        for a, ts in reversed(list(by.items())):
            stack.append((seq + [a], ts))


# -- the campaign ------------------------------------------------------------------------------------

def replay_command(model: str, config: str, impl_spec: str, *, length: int, seed: int | None = None,
                   exhaustive: int | None = None, snapshots: bool = True) -> str:
    """The command that replays one thread-level failure alone: a walk by its seed, an exhaustive
    trace by the whole exhaustive run (the trace's index is in the verdict)."""
    cmd = f"conq conformance {model} --level thread --config {config}"
    if impl_spec != "reference":
        cmd += f" --impl {shlex.quote(impl_spec)}"
    if exhaustive is not None:
        cmd += f" --mode exhaustive --length {length} --traces {exhaustive}"
    else:
        cmd += f" --traces 1 --seed {seed} --length {length}"
    return cmd + ("" if snapshots else " --no-snapshots")


def check_threads(model: Model, impl: Any, config: str, *, model_name: str | None = None, impl_spec: str = "reference",
                  walks: int = 20, length: int = 30, seed: int = 0, depth: int = 0, snapshots: bool = True,
                  probe: float = 0.0, max_traces: int | None = None, minimise: bool = True) -> ThreadRun:
    """Seeded random walks over the enabled thread steps and environment actions (``walks`` of
    ``length`` steps, seeds ``seed``, ``seed + 1``, ...), then, with ``depth`` > 0, every action
    sequence of exactly ``depth`` actions; stops at the first divergence and minimises it.  An
    exhaustive run of more than ``max_traces`` sequences runs none of them and is ``incomplete``
    (a caller refusing it up front counts with :func:`count_sequences`).  ``impl`` is closed at the
    end."""
    name = model_name or model.name
    checker = Checker(model, impl, snapshots=snapshots)
    out = ThreadRun(config, model=name, impl=impl_spec, snapshots=snapshots)

    def failed(r: Any, source: str, replay: str) -> ThreadRun:
        out.divergence, out.actions, out.seed, out.source, out.replay = r.divergence, list(r.actions), r.seed, source, replay
        if minimise and r.divergence.kind != "port":
            out.minimised = list(checker.minimise(r))
        return out

    try:
        for k in range(walks):
            s = seed + k
            r = checker.walk(s, length, probe)
            out.walks += 1
            if not r.ok:
                return failed(r, f"random walk {k} (seed {s})",
                              replay_command(name, config, impl_spec, length=length, seed=s, snapshots=snapshots))
        if depth > 0:
            total = out.exhaustive_total = count_sequences(model, depth)
            if max_traces is not None and total > max_traces:
                out.incomplete = f"more than {max_traces:,} traces ({total:,} of {depth} actions): lower the depth"
                return out
            rng = random.Random(seed)
            for i, seq in enumerate(sequences(model, depth)):
                r = checker.replay(seq, rng.randrange(1 << 30))
                out.exhaustive += 1
                if not r.ok:
                    return failed(r, f"exhaustive trace {i} (seed {r.seed})",
                                  replay_command(name, config, impl_spec, length=depth, exhaustive=total,
                                                 snapshots=snapshots))
    finally:
        out.steps = checker.steps_checked
        close = getattr(impl, "close", None)
        if close is not None:
            close()
    return out


# -- the mutant catalogues' engine ------------------------------------------------------------------------

def mutant_engine(thread_steps: Any, budget: Any, walks: int, length: int) -> Any:
    """A system's ``thread-steps`` engine of its mutant catalogue (conformance/mutation.py): the
    reference's thread-level driver (``thread_steps.ThreadStepsDriver``, running whatever mutant is
    applied), ``budget.count(walks)`` seeded walks of ``length`` per thread-level configuration, in
    their order; killed at the first divergence, with its minimised actions as the evidence."""
    from .adapters import InProcess
    from .mutation import Clock

    clock = Clock(budget)
    walks = budget.count(walks)
    steps = 0
    for cfg in thread_steps.THREAD_CONFIGS:
        r = thread_steps.check_threads(InProcess(thread_steps.ThreadStepsDriver), cfg, walks=walks, length=length)
        steps += r.steps
        if not r.ok:
            # the evidence: the delta-debugged sequence that still diverges the same way (the CLI prints it
            # as the mutant's minimal counterexample), else the whole walk
            evidence = r.minimised if r.minimised is not None else r.actions
            return clock.killed(f"{cfg}: {r.divergence.describe()}", [list(a) for a in evidence], f"{steps} thread steps")
        if clock.over():
            return clock.capped(f"{steps} thread steps")
    return clock.survived(f"{walks} walks of {length} on {len(thread_steps.THREAD_CONFIGS)} configurations conform",
                          f"{steps} thread steps")


# -- the generated port references' "Thread level" sections (conformance/port_reference.py) ----------------

def results_seen(thread_model: Any, configs: Any, cap: int) -> tuple[dict[tuple[str, str], set], list[str]]:
    """Per (request kind, label name) -- the kind ``step KIND`` for ``["step", KIND, ...]`` -- the
    result shapes (:func:`result_shape`, as JSON) seen over the reachable states of each
    configuration's thread-step view ``thread_model(name)`` (at most ``cap`` states each, depth
    first); and each configuration as ``init`` sends it (``name: {config}``)."""
    import json

    from conq.model.kernel import config_dict

    results: dict[tuple[str, str], set] = {}
    lines = []
    for name in configs:
        model = thread_model(name)
        lines.append(f"{name}: {json.dumps(config_dict(model.config), separators=(',', ':'), default=str)}")
        seen = set(model.init_states())
        todo = sorted(seen, key=repr)
        while todo and len(seen) < cap:
            s = todo.pop()
            for a, (label, result), t in model.successors(s):
                kind = f"step {a[1]}" if a[0] == "step" else a[0]
                results.setdefault((kind, label[0]), set()).add(json.dumps(result_shape(result)).replace('"<n>"', "n"))
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
    return results, lines


def result_shape(v: Any) -> Any:
    """A result with its numbers replaced by their kind (the tables show shapes, not values)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return "<n>"
    if isinstance(v, tuple):
        return [result_shape(x) for x in v]
    return v
