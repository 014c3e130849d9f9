"""The conformance checker: an implementation's run is accepted iff the model
can produce the same observations for the same actions.

The model may be nondeterministic (several outcomes of one action, internal
choices the implementation resolves its own way), so the checker tracks the
*set* of model states consistent with everything observed so far and fails
only when that set becomes empty.  It then reports the first divergent step:
the action, what the implementation did, what the model allowed, and a
delta-debugged (ddmin) minimal action sequence that still diverges the same
way.

Optionally (``snapshots=True``) the implementation's observable state is
compared after every step with the model's ``observe()`` view, which narrows
the consistent set and catches internal drift before it shows in an
observation.  Every ``always`` property of the model is checked on the
consistent states: a run that only a property-violating model run can explain
is reported as a property violation.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from conq.model.kernel import Kind, Model, config_dict

from . import protocol
from .adapters import REJECTED, Implementation, PortFailure
from .trace import Event, FrozenDict, Trace, hashable, jsonable, short_json


#: the bound on one echoed value in a verdict (see :func:`adapters.short_repr`)
ECHO = 1000

def definite_error(failure: PortFailure) -> tuple[str, int] | None:
    """``("error", code)`` when ``failure`` is a definite error answer (the operation certainly did
    not happen): the protocol makes it an observation, one the checker compares with what the model
    allows instead of a bare port failure.  None for every other failure (timeout, crash, a bad
    reply, an indefinite error).  Decided by the failure's ``code``, never by its text."""
    if getattr(failure, "code", None) != "definite-error":
        return None
    err = protocol.BY_CODE.get(getattr(failure, "error", None))  # type: ignore[arg-type]
    return ("error", err.code) if err is not None and err.definite else None


@dataclass
class Divergence:
    step: int  # 1-based
    action: tuple
    observed: Any
    allowed: list[Any]
    kind: str  # observation | not-enabled | snapshot | property | port
    detail: str = ""
    candidates: int = 0  # model states consistent before the step
    #: kind "port": the failure's code (protocol.FAILURES: timeout, crash, bad-reply, protocol, ...);
    #: kind "observation" from a definite error answer: "definite-error"
    failure: str = ""

    def describe(self) -> str:
        """The verdict in words; every value in it (the action, what the port observed, what the
        model allowed, states) is JSON text, cut to a bounded length (``short_json``): a huge
        observation never floods a report, a Parquet row or --json output."""
        if self.kind == "port":
            return f"step {self.step}: port failure ({self.failure}): {self.detail}" if self.failure else f"step {self.step}: {self.detail}"
        head = f"step {self.step}: action {short_json(self.action, ECHO)}"
        if self.kind == "observation" and self.failure == "definite-error":
            # a definite error is an observation (spec/port-protocol.md): what the port answered, and
            # what the model allowed at that step
            err = protocol.BY_CODE.get(self.observed[1])
            name = f" ({err.name}, definite)" if err is not None else ""
            return (f"{head}: the port answered error {self.observed[1]}{name}; the model allowed "
                    f"{short_json(list(self.allowed), 2 * ECHO)} (the port: {self.detail})")
        if self.kind == "observation":
            return (f"{head}: the implementation observed {short_json(self.observed, ECHO)}; the model allows "
                    f"{short_json(list(self.allowed), 2 * ECHO)}")
        if self.kind == "not-enabled":
            return (f"{head}: the implementation performed it (observed {short_json(self.observed, ECHO)}) but the "
                    "model has it disabled in every consistent state")
        if self.observed is not None and self.step:
            # what the step observed (at the thread level: the step label the port reported)
            head += f" (observed {short_json(self.observed, ECHO)})"
        if self.kind == "snapshot":
            return f"{head}: the implementation's state after the step matches no consistent model state: {self.detail}"
        return f"{head}: {self.detail}"


def shaped(value: Any, template: Any) -> Any:
    """``value`` (hashable: tuples) as JSON, with objects where the model's ``template`` (a view:
    dicts and lists) has them and their keys in the template's order, so a verdict's two states
    read side by side: an in-process driver's ``observed()`` builds plain tuples, which would
    otherwise print as arrays of pairs (a port's snapshot keeps its objects anyway:
    :class:`~.trace.FrozenDict`)."""
    if isinstance(template, dict) and type(value) in (tuple, FrozenDict) and all(
            type(x) is tuple and len(x) == 2 and type(x[0]) is str for x in value):
        pairs = dict(value)
        keys = [k for k in template if k in pairs] + sorted(k for k in pairs if k not in template)
        return {k: shaped(pairs[k], template.get(k)) for k in keys}
    if type(value) is FrozenDict:
        return jsonable(value)
    if isinstance(template, (list, tuple)) and type(value) is tuple:
        return [shaped(v, template[min(i, len(template) - 1)] if template else None) for i, v in enumerate(value)]
    return jsonable(value)


@dataclass
class RunResult:
    seed: int
    actions: list[tuple]
    observations: list[Any]
    divergence: Divergence | None = None
    minimised: list[tuple] | None = None
    seconds: float = 0.0
    #: model states consistent at some step (for coverage), when recorded
    visited: set[Any] = field(default_factory=set)
    #: (state, (action, observation), next state) edges taken, when recorded
    transitions: set[Any] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return self.divergence is None

    @property
    def steps(self) -> int:
        return len(self.observations)

    def trace(self, model: Model, mode: str = "recorded") -> Trace:
        tr = Trace(
            model=model.name,
            config=config_dict(model.config),
            config_name=getattr(model, "config_name", None),
            seed=self.seed,
            generator={"mode": mode, "length": len(self.actions)},
        )
        tr.events = [Event(i + 1, a, o) for i, (a, o) in enumerate(zip(self.actions, self.observations))]
        return tr


class Checker:
    def __init__(
        self,
        model: Model,
        impl: Implementation,
        *,
        snapshots: bool = True,
        check_properties: bool = True,
        record: bool = False,
    ):
        self.model = model
        self.impl = impl
        self.snapshots = snapshots
        self.record = record
        self.config = config_dict(model.config)
        self.invariants = [p for p in model.property_list() if p.kind is Kind.ALWAYS] if check_properties else []
        self.steps_checked = 0
        # Per-state memos: states are frozen and the model deterministic, so what is computed of a
        # state once holds for ever; runs revisit the same few states over and over (every trace
        # starts in the same initial states), and these were the checker's own largest costs
        # (bench/checker_speed.py).  Each is cleared when it grows past MEMO_LIMIT.
        self._observed: dict[Any, Any] = {}  # model state -> its observed view
        self._enabled: dict[Any, tuple] = {}  # model state -> its actions
        self._failing: dict[Any, tuple] = {}  # model state -> indexes of the invariants it breaks
        self._by_action: dict[Any, dict] = {}  # model state -> action -> its outcomes
        self._inits: list[Any] | None = None  # the model's initial states

    #: the most states one memo holds before it is cleared
    MEMO_LIMIT = 200_000

    # -- one step of the consistent-set tracking ----------------------------------
    def _advance(self, current: list[Any], action: tuple, observed: Any, result: RunResult) -> tuple[list[Any], list[Any], bool]:
        nxt: list[Any] = []
        seen: set[Any] = set()
        allowed: list[Any] = []
        enabled = False
        step = self._outcomes
        for s in current:
            outs = step(s, action)
            if not outs:
                if observed == REJECTED and s not in seen:
                    seen.add(s)
                    nxt.append(s)
                continue
            enabled = True
            for o, t in outs:
                if o not in allowed:
                    allowed.append(o)
                if o == observed and t not in seen:
                    seen.add(t)
                    nxt.append(t)
                    if self.record:
                        result.transitions.add((s, (action, o), t))
        if not enabled and REJECTED not in allowed:
            allowed.append(REJECTED)
        return nxt, allowed, enabled

    def _outcomes(self, s: Any, action: tuple) -> list | tuple:
        """``model.step(s, action)``, from the state's successors grouped by action (memoised per
        state: the kernel has ``successors`` yield exactly the outcomes of ``step``, in the same
        order).  An action the successors do not list is asked of ``step`` itself."""
        memo = self._by_action
        by = memo.get(s)
        if by is None:
            if len(memo) >= self.MEMO_LIMIT:
                memo.clear()
            by = memo[s] = {}
            for a, o, t in self.model.successors(s):
                outs = by.get(a)
                if outs is None:
                    by[a] = [(o, t)]
                else:
                    outs.append((o, t))
        outs = by.get(action)
        return outs if outs is not None else self.model.step(s, action)

    def _filter_snapshot(self, states: list[Any]) -> tuple[list[Any], Any]:
        snap = self.impl.snapshot()
        if snap is None:
            return states, None
        cache = self._observed
        kept = []
        for t in states:
            seen = cache.get(t)
            if seen is None:
                if len(cache) >= self.MEMO_LIMIT:
                    cache.clear()
                seen = cache[t] = hashable(self.model.observe(t))
            if seen == snap:
                kept.append(t)
        return kept, snap

    def _initial(self, result: RunResult) -> list[Any] | None:
        if self._inits is None:
            self._inits = list(self.model.init_states())
        current = list(self._inits)
        if self.snapshots:
            try:
                kept, snap = self._filter_snapshot(current)
            except PortFailure as e:
                result.divergence = Divergence(0, ("init",), None, [], "port", str(e), len(current), failure=e.code)
                return None
            if not kept:
                views = [self.model.observe(t) for t in current[:3]]
                result.divergence = Divergence(
                    0, ("init",), None, [], "snapshot",
                    f"the port's initial state {short_json(shaped(snap, views[0] if views else None), ECHO)} is not an "
                    f"initial state of the model, which allows {short_json(views, 2 * ECHO)}"
                    + (" ..." if len(current) > 3 else ""))
                return None
            current = kept
        return current

    def _failing_of(self, t: Any) -> tuple:
        memo = self._failing
        found = memo.get(t)
        if found is None:
            if len(memo) >= self.MEMO_LIMIT:
                memo.clear()
            found = memo[t] = tuple(i for i, p in enumerate(self.invariants) if not p.check(t))
        return found

    def _check_invariants(self, states: list[Any]) -> str | None:
        """The first invariant that every state breaks (the model cannot explain the run without
        breaking it), or None."""
        broken = set(self._failing_of(states[0]))
        for t in states[1:]:
            if not broken:
                return None
            broken.intersection_update(self._failing_of(t))
        if not broken:
            return None
        p = self.invariants[min(broken)]
        return f"property '{p.name}' violated: {p.claim}"

    def enabled_actions(self, current: list[Any]) -> list[tuple]:
        """Every action some state of ``current`` enables, in the model's order (memoised per state)."""
        memo = self._enabled
        actions = self.model.actions
        out: dict[tuple, None] = {}
        for s in current:
            acts = memo.get(s)
            if acts is None:
                if len(memo) >= self.MEMO_LIMIT:
                    memo.clear()
                acts = memo[s] = tuple(dict.fromkeys(actions(s)))
            if len(current) == 1:
                return list(acts)
            out.update(dict.fromkeys(acts))
        return list(out)

    def _run(self, seed: int, choose: Callable[[list[Any], int], tuple | None], limit: int) -> RunResult:
        t0 = time.perf_counter()
        result = RunResult(seed=seed, actions=[], observations=[])
        try:
            try:
                self.impl.start(self.model.name, self.config, seed)
            except PortFailure as e:  # init or reset failed: a verdict at step 0, not a traceback
                result.divergence = Divergence(0, ("init",), None, [], "port", str(e), failure=e.code)
                return result
            current = self._initial(result)
            if current is None:
                return result
            if self.record:
                result.visited.update(current)
            for n in range(1, limit + 1):
                action = choose(current, n)
                if action is None:
                    break
                result.actions.append(action)
                try:
                    observed = self.impl.do(action)
                except PortFailure as e:
                    err = definite_error(e)
                    if err is None:
                        result.divergence = Divergence(n, action, None, [], "port", str(e), len(current), failure=e.code)
                        return result
                    # a definite error is an observation (spec/port-protocol.md): the model never
                    # allows one but 13, so the verdict says what it allowed instead
                    observed = err
                    result.observations.append(observed)
                    self.steps_checked += 1
                    _nxt, allowed, _enabled = self._advance(current, action, observed, result)
                    result.divergence = Divergence(n, action, observed, allowed, "observation", e.problem,
                                                   len(current), failure="definite-error")
                    return result
                result.observations.append(observed)
                self.steps_checked += 1
                nxt, allowed, enabled = self._advance(current, action, observed, result)
                if not nxt:
                    kind = "observation" if enabled else "not-enabled"
                    result.divergence = Divergence(n, action, observed, allowed, kind, candidates=len(current))
                    return result
                if self.snapshots:
                    try:
                        kept, snap = self._filter_snapshot(nxt)
                    except PortFailure as e:
                        result.divergence = Divergence(n, action, observed, allowed, "port", str(e), len(current), failure=e.code)
                        return result
                    if not kept:
                        views = [self.model.observe(t) for t in nxt[:3]]
                        result.divergence = Divergence(
                            n, action, observed, allowed, "snapshot",
                            f"implementation {short_json(shaped(snap, views[0]), ECHO)}; model allows "
                            f"{short_json(views, 2 * ECHO)}" + (" ..." if len(nxt) > 3 else ""),
                            len(current),
                        )
                        return result
                    nxt = kept
                if self.invariants:
                    problem = self._check_invariants(nxt)
                    if problem:
                        result.divergence = Divergence(n, action, observed, allowed, "property", problem, len(current))
                        return result
                if self.record:
                    result.visited.update(nxt)
                current = nxt
            return result
        finally:
            result.seconds = time.perf_counter() - t0

    # -- public entry points ------------------------------------------------------------
    def replay(self, actions: Iterable[tuple], seed: int = 0) -> RunResult:
        """Replay a fixed action sequence (a trace) against the implementation."""
        acts = list(actions)

        def choose(_current: list[Any], n: int) -> tuple | None:
            return acts[n - 1]

        return self._run(seed, choose, len(acts))

    def walk(self, seed: int, length: int, probe: float = 0.0) -> RunResult:
        """Generate actions online from the consistent model states (seeded),
        so nondeterminism resolved by the implementation never strands the walk.

        ``probe`` > 0: at each step, with that probability, the walk sends instead a call that no
        consistent state enables (one of the calls this walk saw enabled earlier: a function of the
        seed and the run alone, so ``--traces 1 --seed S`` replays it), which the implementation must
        refuse with error 13 (issue 35: a port whose preconditions are too weak is caught by generated
        traces, not only by the corpus).  0 keeps the walks of every seed as they were."""
        rng = random.Random(seed)
        enabled_actions = self.enabled_actions
        seen: dict[tuple, None] = {}  # every call this walk saw enabled, in the order seen

        def choose(current: list[Any], _n: int) -> tuple | None:
            # Any action some consistent state enables: where the implementation's state
            # has it disabled, a definite rejection keeps the states that agree.
            enabled = enabled_actions(current)
            if probe:
                seen.update(dict.fromkeys(enabled))
                if rng.random() < probe:
                    now = set(enabled)
                    disabled = [a for a in seen if a not in now]
                    if disabled:
                        return disabled[rng.randrange(len(disabled))]
            return enabled[rng.randrange(len(enabled))] if enabled else None

        return self._run(seed, choose, length)

    def check_trace(self, trace: Trace) -> RunResult:
        return self.replay(trace.actions(), trace.seed)

    def minimise(self, result: RunResult) -> list[tuple]:
        """ddmin (Zeller & Hildebrandt) over the actions of a diverging run: the
        smallest sequence found that still diverges with the same kind."""
        assert result.divergence is not None
        kind = result.divergence.kind
        seed = result.seed
        cache: dict[tuple, bool] = {}

        def fails(seq: list[tuple]) -> bool:
            key = tuple(seq)
            if key not in cache:
                r = self.replay(seq, seed)
                cache[key] = r.divergence is not None and r.divergence.kind == kind
            return cache[key]

        seq = result.actions[: result.divergence.step] if result.divergence.step else list(result.actions)
        n = 2
        while len(seq) >= 2:
            chunk = max(1, len(seq) // n)
            parts = [seq[i : i + chunk] for i in range(0, len(seq), chunk)]
            reduced = False
            for i, part in enumerate(parts):
                if fails(part):
                    seq, n, reduced = part, 2, True
                    break
            if not reduced:
                for i in range(len(parts)):
                    complement = [a for j, p in enumerate(parts) if j != i for a in p]
                    if complement and fails(complement):
                        seq, n, reduced = complement, max(n - 1, 2), True
                        break
            if not reduced:
                if n >= len(seq):
                    break
                n = min(len(seq), 2 * n)
        result.minimised = seq
        return seq


def check_recorded(model: Model, events: Iterable[Any]) -> Divergence | None:
    """Offline verdict on a recorded trace: can the model produce these
    observations for these actions?  (No implementation is run.)  None when it
    can; else the first step where no consistent model state allows what was
    recorded."""
    current = list(dict.fromkeys(model.init_states()))
    for n, e in enumerate(events, 1):
        nxt: dict[Any, None] = {}
        allowed: list[Any] = []
        enabled = False
        for s in current:
            outs = model.step(s, e.action)
            if not outs and e.observation == REJECTED:
                nxt[s] = None
            for o, t in outs:
                enabled = True
                if o not in allowed:
                    allowed.append(o)
                if o == e.observation:
                    nxt[t] = None
        if not nxt:
            return Divergence(n, e.action, e.observation, allowed, "observation" if enabled else "not-enabled", candidates=len(current))
        current = list(nxt)
    return None
