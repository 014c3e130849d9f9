"""What every search mode of the explorer shares: the verdict and exploration records, the
property checks arranged for a hot loop, and rebuilding concrete paths.  (Its own module so
that the modes, :mod:`conq.model.engines.fpsearch`, :mod:`conq.model.engines.parallel` and
:mod:`conq.model.engines.liveness`, import it without an import circle through
:mod:`conq.model.engines.explorer`, which re-exports every name.)"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

from conq.model.engines.changes import explain, jsonable
from conq.model.kernel import CheckedAction, Kind, Model, Path, Property, StepContractError


@dataclass
class Verdict:
    """The outcome of one property on one run of the explorer."""

    prop: Property
    #: "holds" | "violated" | "vacuous" | "witnessed" | "unreached" | "skipped" | "unknown" (a
    #: witness or state not reached by a search that was cut short: no verdict) | "incomplete" (an
    #: invariant exercised and not violated by a search that was cut short: no verdict either, and
    #: never shown as "holds")
    status: str
    path: Path | None = None  # counterexample (violated) or witness (holds/witnessed)
    cycle: Path | None = None  # liveness: the repeated part of the lasso
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("holds", "witnessed")


@dataclass
class Exploration:
    """Everything an exhaustive run found."""

    model: Model
    states: int
    transitions: int
    depth: int
    search_seconds: float
    analysis_seconds: float
    complete: bool  # False when a state or time bound cut the search
    verdicts: list[Verdict]
    #: index -> canonical state; kept for graph analyses and coverage
    state_list: list[Any] = field(repr=False, default_factory=list)
    #: flat (src, dst, label id) triples
    edges: array = field(repr=False, default_factory=lambda: array("l"))
    labels: list[tuple] = field(repr=False, default_factory=list)
    stop_reason: str = ""
    #: BFS tree: index -> parent index (-1 for initial states) and the position of the edge
    #: from it in the parent's successor list (initial states: their position in init_states())
    parent: array = field(repr=False, default_factory=lambda: array("l"))
    via: array = field(repr=False, default_factory=lambda: array("l"))
    #: how states were stored: "states" (whole states, the graph kept), "fingerprints" (64-bit
    #: fingerprints and a parent map only) or "workers=N" (fingerprints over N processes)
    mode: str = "states"
    symmetry: bool = False
    #: the liveness analysis alone (a part of analysis_seconds)
    liveness_seconds: float = 0.0
    #: distinct states first found at each depth (breadth-first levels; empty when a mode does
    #: not count them)
    level_sizes: list[int] = field(default_factory=list)

    def path(self, idx: int) -> Path:
        """The shortest path (as found by the search) from an initial state to state ``idx``."""
        if not self.state_list:
            raise ValueError(f"no state list kept in {self.mode} mode: paths are in the verdicts only")
        chain = []
        while idx != -1:
            chain.append(idx)
            idx = self.parent[idx]
        chain.reverse()
        return _path_of_chain(self.model, self.state_list, chain, self.via, self.symmetry)

    def leaves(self) -> list[int]:
        """States that are no other state's BFS parent: their paths cover every state."""
        is_parent = bytearray(len(self.state_list))
        for p in self.parent:
            if p >= 0:
                is_parent[p] = 1
        return [i for i, b in enumerate(is_parent) if not b]

    @property
    def ok(self) -> bool:
        return self.complete and all(v.ok or v.status == "skipped" for v in self.verdicts)

    @property
    def violations(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "violated"]

    def verdict(self, name: str) -> Verdict:
        for v in self.verdicts:
            if v.prop.name == name:
                return v
        raise KeyError(name)

    def graph(self):
        """The reachable graph as a ``networkx.MultiDiGraph`` over state indices;
        edge attribute ``label`` is ``(action, observation)``."""
        import networkx as nx

        g = nx.MultiDiGraph()
        g.add_nodes_from(range(len(self.state_list)))
        e = self.edges
        labels = self.labels
        g.add_edges_from((e[i], e[i + 1], {"label": labels[e[i + 2]]}) for i in range(0, len(e), 3))
        return g

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.model.name,
            "states": self.states,
            "transitions": self.transitions,
            "depth": self.depth,
            "complete": self.complete,
            "stop_reason": self.stop_reason,
            "search_seconds": round(self.search_seconds, 4),
            "analysis_seconds": round(self.analysis_seconds, 4),
            "states_per_second": round(self.states / self.search_seconds) if self.search_seconds > 0 else None,
            "ok": self.ok,
            "mode": self.mode,
            "symmetry": self.symmetry,
            "states_per_depth": list(self.level_sizes),
            "properties": [
                {
                    "name": v.prop.name,
                    "kind": v.prop.kind.value,
                    "claim": v.prop.claim,
                    "status": v.status,
                    "detail": v.detail,
                    "path": _path_json(self.model, v.path) if v.path is not None else None,
                    "cycle": _path_json(self.model, v.cycle) if v.cycle is not None else None,
                    # the counterexample as every output shows it: per step who acted and what
                    # changed (model/engines/changes.py), the lasso's cycle after its prefix (the full
                    # states are in "path" and "cycle")
                    "trail": explain(self.model, v.path, v.cycle).to_json(states=False)
                    if v.path is not None and v.status == "violated" else None,
                }
                for v in self.verdicts
            ],
        }


def _path_json(model: Model, path: Path) -> dict[str, Any]:
    return {
        "init": jsonable(model.view(path.init)),
        "steps": [{"action": jsonable(list(a)), "observation": jsonable(o), "state": jsonable(model.view(t))}
                  for a, o, t in path.steps],
    }


@dataclass(frozen=True)
class SearchProgress:
    """What a progress callback is told, about twice a second, from the exploring thread."""

    states: int
    transitions: int
    depth: int
    seconds: float
    rss_bytes: int | None  # resident memory of this process (None: unknown on this platform)


class GuardInterrupt(BaseException):
    """Raised into the exploring thread when a limit was exceeded and the search did not
    stop at a state boundary within the grace period: one call into the model (its initial
    states, one state's successors, a property) or the liveness analysis ran on.  A
    BaseException, so that a model's ``except Exception`` cannot swallow it; it never
    leaves :func:`explore`."""


class _Checks:
    """The properties a search evaluates, arranged for its hot loop: state invariants and
    state witnesses (``sometimes``, invariant witnesses, liveness triggers) on every new
    state, transition invariants and their witnesses per action name.  A check leaves the
    loop once it is violated, a witness once it is reached: what is found first in
    breadth-first order is a shortest path."""

    def __init__(self, model: Model, symmetry: bool = False):
        props = model.property_list()
        self.props = props
        #: with symmetry: the properties evaluated on the whole orbit of each representative
        #: (Model.orbit_properties: not invariant under the renamings), and their paths rebuilt to
        #: end at the member that fired
        self.on_orbit = frozenset(model.orbit_properties) if symmetry else frozenset()
        #: orbit properties the reduced search cannot decide (reported skipped, see below)
        self.undecided: dict[str, str] = {}
        if self.on_orbit:
            steps = sorted(p.name for p in props if p.kind is Kind.ALWAYS_STEP and p.name in self.on_orbit)
            if steps:
                raise ValueError(f"{model.name}: orbit_properties must be state properties, not {steps}")
            # Evaluating on the orbit is exact only if the reachable states are closed under the
            # renamings, i.e. the initial states are: then every member of a reachable class is
            # reachable.  Otherwise (consumer-lists with preadded consumers: the initial Interested
            # lists are in index order) a member may satisfy the property without being reachable,
            # and the representative alone may miss one that is: no verdict either way.
            inits = model.init_states()
            known = set(inits)
            if not all(x in known for s in inits for x in model.orbit(s)):
                why = ("not invariant under the symmetry's renamings (Model.orbit_properties) and the initial "
                       "states are not closed under them: not decidable on the reduced graph; check without symmetry")
                self.undecided = {name: why for name in self.on_orbit}
                self.on_orbit = frozenset()
        orbit = model.orbit

        def every(name, f):  # an invariant holds on the class only if it holds on every member
            return (lambda s: all(f(x) for x in orbit(s))) if name in self.on_orbit else f

        def some(name, f):  # a witness fires on the class if it fires on one member
            return (lambda s: any(f(x) for x in orbit(s))) if name in self.on_orbit else f

        live = [p for p in props if p.name not in self.undecided]
        self.inv = [(p.name, every(p.name, p.check)) for p in live if p.kind is Kind.ALWAYS]
        self.state_w = [(p.name, some(p.name, p.witness)) for p in live if p.kind is Kind.ALWAYS] + [
            (p.name, some(p.name, p.check)) for p in live if p.kind is Kind.SOMETIMES
        ] + [(p.name, p.trigger) for p in live if p.kind is Kind.LEADS_TO]
        self.step = [p for p in props if p.kind is Kind.ALWAYS_STEP]
        self.violated: dict[str, Any] = {}
        self.witnessed: dict[str, Any] = {}
        self.violated_step: dict[str, Any] = {}
        self.witnessed_step: dict[str, Any] = {}
        #: action name -> ((name, check) pending, (name, witness) pending)
        self.for_action: dict[str, tuple[tuple, tuple]] = {}
        #: the label classes whose steps need no checks: CheckedAction, and each subclass of it once
        #: every witness of its ``maybe`` is witnessed (added by on_step; witnesses are never
        #: withdrawn).  An engine's hot loop tests ``a.__class__ not in skip`` before calling on_step.
        self.skip: set[type] = {CheckedAction}

    def use_packed(self, codec: Any) -> None:
        """Evaluate the state checks on packed states (a search over :meth:`Model.packed`): each
        predicate remembered by the fields it reads (:func:`conq.model.engines.packing.memoised_predicate`),
        and, on the hot path, all of them at once ("every invariant holds and no witness fires"),
        one look-up a new state; only a state where something fires takes the usual path (with
        the memoised predicates).  The names and order stay; the paths are rebuilt on decoded
        states."""
        from conq.model.engines.packing import memoised_predicate

        raw_inv, raw_wit = dict(self.inv), dict(self.state_w)  # (an invariant and its witness share a name)
        self.inv = [(name, memoised_predicate(codec, f)) for name, f in self.inv]
        self.state_w = [(name, memoised_predicate(codec, f)) for name, f in self.state_w]
        quiet: list = [None, None]
        #: the predicate "every invariant holds and no witness fires" now (``quiet[0]``, remade when one
        #: leaves the loop): a search over arrays of states evaluates it on a level at once
        self.quiet = quiet
        slow = self.on_state

        def remake() -> None:
            # remade whenever an invariant is violated or a witness reached (they leave the loop)
            inv = [raw_inv[name] for name, _ in self.inv]
            wit = [raw_wit[name] for name, _ in self.state_w]
            quiet[0] = memoised_predicate(codec, lambda s: all(f(s) for f in inv) and not any(w(s) for w in wit))
            quiet[1] = (len(inv), len(wit))

        def on_state(x: int, where: Any) -> None:
            if not quiet[0](x):
                slow(x, where)
                if quiet[1] != (len(self.inv), len(self.state_w)):
                    remake()

        remake()
        self.on_state = on_state  # type: ignore[method-assign]

    def step_table(self, name: str) -> tuple[tuple, tuple]:
        found = self.for_action.get(name)
        if found is None:
            ps = [p for p in self.step if p.applies_to(name)]
            found = self.for_action[name] = (
                tuple((p.name, p.check) for p in ps if p.name not in self.violated_step),
                tuple((p.name, p.witness) for p in ps if p.name not in self.witnessed_step),
            )
        return found

    def on_state(self, state: Any, where: Any) -> None:
        """Every state check on a new state (no allocation unless something fires)."""
        for item in self.inv:
            if not item[1](state):
                self._fire_inv(state, where)
                break
        for item in self.state_w:
            if item[1](state):
                self._fire_w(state, where)
                break

    def _fire_inv(self, state: Any, where: Any) -> None:
        """Slow path: record every invariant this state violates, drop them from the loop."""
        failed = [item for item in self.inv if not item[1](state)]
        for name, _ in failed:
            self.violated[name] = where
        self.inv = [item for item in self.inv if item not in failed]

    def _fire_w(self, state: Any, where: Any) -> None:
        """Slow path: record every witness this state reaches, drop them from the loop."""
        hit = [item for item in self.state_w if item[1](state)]
        for name, _ in hit:
            self.witnessed[name] = where
        self.state_w = [item for item in self.state_w if item not in hit]

    def on_step(self, s, a, o, t, where: Any) -> None:
        """Every transition check on the step ``s --a/o--> t`` (``where``: how the engine names
        the step in its records, e.g. ``(src, position, dst)``).  The one copy of this block for
        every search mode (explorer, fpsearch, parallel).

        An engine's hot loop tests ``a.__class__ not in self.skip`` before calling (a skipped step
        costs no call); this method handles the rest: a :class:`~conq.model.kernel.CheckedAction`
        subclass is skipped once every witness of its ``maybe`` is witnessed (the model evaluated
        the checks and the other witnesses on this very step: kernel.CheckedAction's contract; the
        class then joins ``skip``), any other label goes through the per-action tables."""
        cls = a.__class__
        if cls is not tuple and issubclass(cls, CheckedAction) and cls.maybe <= self.witnessed_step.keys():
            self.skip.add(cls)
            return
        tables = self.for_action.get(a[0])
        if tables is None:
            tables = self.step_table(a[0])
        checks, wits = tables
        for _name, fn in checks:
            if not fn(s, a, o, t):
                self.step_hit(checks, (), s, a, o, t, where)
                break
        for _name, fn in wits:
            if fn(s, a, o, t):
                self.step_hit((), wits, s, a, o, t, where)
                break

    def step_hit(self, table_checks: tuple, table_wits: tuple, s, a, o, t, where: Any) -> None:
        """The slow path of a transition: something in its tables fired."""
        changed = False
        for name, chk in table_checks:
            if name not in self.violated_step and not chk(s, a, o, t):
                self.violated_step[name] = where
                changed = True
        for name, wit in table_wits:
            if name not in self.witnessed_step and wit(s, a, o, t):
                self.witnessed_step[name] = where
                changed = True
        if changed:
            self.for_action.clear()

    def verdicts(self, complete: bool, stop_reason: str, state_path, step_path) -> list[Verdict]:
        """The verdicts of the safety properties and witnesses (liveness: by the caller).
        ``state_path(where)`` / ``step_path(where)`` rebuild the path recorded for an event."""

        def not_found(p: Property, status: str, detail: str) -> Verdict:
            if complete:
                return Verdict(p, status, detail=detail)
            # a search cut short proves nothing by what it did not reach
            return Verdict(p, "unknown", detail=f"not reached before the search was cut short ({stop_reason})")

        def held(p: Property, path: Any) -> Verdict:
            if complete:
                return Verdict(p, "holds", path)
            return Verdict(p, "incomplete", path, detail=f"no violation before the search was cut short ({stop_reason})")

        def path_to(p: Property, where: Any, goal) -> Any:
            # an orbit property fired on some member of the representative's class: the path is
            # rebuilt to end at a member where it fires (``goal``), not at any member
            return state_path(where, goal) if p.name in self.on_orbit else state_path(where)

        out: list[Verdict] = []
        for p in self.props:
            if p.name in self.undecided:
                out.append(Verdict(p, "skipped", detail=self.undecided[p.name]))
            elif p.kind is Kind.ALWAYS:
                if p.name in self.violated:
                    out.append(Verdict(p, "violated", path_to(p, self.violated[p.name], lambda s, f=p.check: not f(s))))
                elif p.name in self.witnessed:
                    out.append(held(p, path_to(p, self.witnessed[p.name], p.witness)))
                else:
                    out.append(not_found(p, "vacuous", "its witness was never reached"))
            elif p.kind is Kind.ALWAYS_STEP:
                if p.name in self.violated_step:
                    out.append(Verdict(p, "violated", step_path(self.violated_step[p.name])))
                elif p.name in self.witnessed_step:
                    out.append(held(p, step_path(self.witnessed_step[p.name])))
                else:
                    out.append(not_found(p, "vacuous", "its witness was never reached"))
            elif p.kind is Kind.SOMETIMES:
                if p.name in self.witnessed:
                    out.append(Verdict(p, "witnessed", path_to(p, self.witnessed[p.name], p.check)))
                else:
                    out.append(not_found(p, "unreached", "no reachable state satisfies it"))
        return out


def _path_of_chain(model: Model, states: list, chain: list[int], via, symmetry: bool, last: int | None = None,
                   goal=None) -> Path:
    """The concrete path along a chain of BFS-tree indices (``chain[0]`` an initial state),
    plus the ``last``-th successor of the chain's end when given.

    Without symmetry each step re-runs the parent's successors and takes the recorded
    position (no label matching needed: the model is deterministic).  With symmetry each
    stored state is a class representative: walk from the initial state and take, at each
    step, a concrete successor whose class is the next stored state."""
    init = states[chain[0]]
    if not symmetry:
        steps = []
        state = init
        ks = [via[c] for c in chain[1:]] + ([last] if last is not None else [])
        for k in ks:
            a, o, t = _successor(model, state, k)
            steps.append((a, o, t))
            state = t
        return Path(init, tuple(steps))
    targets = [states[c] for c in chain[1:]]
    labs = []
    rep = init
    for c in chain[1:]:
        a, o, t = model.successors(rep)[via[c]]
        labs.append((a, o))
        rep = states[c]
    if last is not None:
        a, o, t = model.successors(rep)[last]
        labs.append((a, o))
        targets.append(model.canonical(t))
    return _concretise(model, init, labs, model.canonical, targets, goal)


def _successor(model: Model, state: Any, k: int) -> tuple:
    """The ``k``-th successor of ``state``, as the search numbered it.  A search that ran ``step``
    for every action (the packed view) numbers more successors than ``successors`` gives only when
    the model's step acts for an action ``actions`` does not list: the kernel's contract broken."""
    succ = model.successors(state)
    if k >= len(succ):
        raise StepContractError(
            f"{type(model).__name__}: the search took successor {k} of a state where successors() gives "
            f"{len(succ)}: the model's step() acts for an action its actions() does not list there "
            f"(the kernel's contract {StepContractError.CONTRACT}: a step is empty when its action is "
            f"not enabled); state {state!r}"[:2000])
    return succ[k]


def _concretise(model: Model, init: Any, labels: list[tuple], canon, canon_states: list[Any], goal=None) -> Path:
    """Turn a path of (action, observation) labels into a concrete Path.

    Without symmetry the labels replay directly.  With symmetry each stored
    state is a class representative, so the labels may name processes of
    different representatives: walk from the initial state and at each step
    take a concrete successor whose class is the next stored state.
    """
    if goal is not None and canon is not None:
        return _concretise_to(model, init, canon, canon_states, goal)
    steps = []
    state = init
    for k, (a, o) in enumerate(labels):
        nxt = None
        if canon is None:
            for o2, t in model.step(state, a):
                if o2 == o:
                    nxt = (a, o, t)
                    break
        else:
            target = canon_states[k]
            for a2, o2, t in model.successors(state):
                if canon(t) == target:
                    nxt = (a2, o2, t)
                    break
        if nxt is None:  # pragma: no cover - would be a nondeterministic step function
            raise RuntimeError(f"{model.name}: could not replay step {k + 1} {a!r}: is step() deterministic?")
        steps.append(nxt)
        state = nxt[2]
    return Path(init, tuple(steps))


def _concretise_to(model: Model, init: Any, canon, canon_states: list[Any], goal) -> Path:
    """A concrete path through the classes ``canon_states`` that ends at a state satisfying ``goal``
    (an orbit property: it holds on some member of the last class, not necessarily on the one a
    greedy walk reaches).  Breadth first over the concrete members of each class in turn, from the
    initial states in ``init``'s orbit: at most one class's members a step (a few states)."""
    inits = set(model.init_states())
    start = [x for x in dict.fromkeys([init, *model.orbit(init)]) if x in inits]
    layers: list[dict] = [dict.fromkeys(start)]
    for target in canon_states:
        nxt: dict = {}
        for st in layers[-1]:
            for a, o, t in model.successors(st):
                if t not in nxt and canon(t) == target:
                    nxt[t] = (st, (a, o, t))
        layers.append(nxt)
    end = next((t for t in layers[-1] if goal(t)), None)
    if end is None:  # pragma: no cover - would be an orbit() that misses members, or an unsound canonical()
        raise RuntimeError(f"{model.name}: no member of the last class satisfies the property: is orbit() complete?")
    steps = []
    for layer in reversed(layers[1:]):
        prev, step = layer[end]
        steps.append(step)
        end = prev
    return Path(end, tuple(reversed(steps)))
