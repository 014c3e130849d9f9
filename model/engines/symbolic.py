"""z3 engines over symbolic encodings of the models.

The explorer says what holds up to a bound; this module says what holds for
*every* size.  A model's :class:`Encoding` describes its state with z3 terms
over unbounded index sorts (arrays from consumer / message / task indices,
integers for counters, a symbolic size), its initial condition, one relation
per action, and its ``always`` properties as formulas.  On top of it:

* :func:`prove`: inductive invariant proof, ``Init => Inv`` and
  ``Inv /\\ Next => Inv'``, with the named auxiliary invariants the encoding
  declares as the property's strengthening.  A failed step yields a
  counterexample to induction: two readable states and the action between.
* :func:`bmc`: bounded model checking of a concrete configuration, unrolling
  ``k`` steps from Init and searching for a violation; the shortest
  counterexample length is comparable with the explorer's.
* :func:`cross_check`: faithfulness of the encoding (it is a second copy of
  the model, so it can drift): for a concrete state and action, the
  successors z3 allows must be exactly those the executable model computes.

Statuses: ``proved`` (inductive, unbounded), ``not-inductive`` (a CTI was
found: the invariant may still hold, but this proof does not show it),
``violated`` (a reachable counterexample, from BMC), ``bounded`` (declared
bounded-only by the encoding, with its reason), ``unknown`` (z3 gave up,
with the reason).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import z3

from conq.model.kernel import Model


@dataclass
class SymAction:
    """One disjunct of the transition relation.

    ``relation(s, t, *params)`` is a z3 formula over the pre-state ``s``, the
    post-state ``t`` and the action's parameters (z3 constants created fresh
    per use from ``params``, a list of ``(name, sort)``)."""

    name: str
    params: Sequence[tuple[str, z3.SortRef]]
    relation: Callable[..., z3.BoolRef]


@dataclass
class Aux:
    name: str
    claim: str
    formula: Callable[[Any], z3.BoolRef]


class Encoding:
    """Base class of a model's symbolic encoding (see the module docstring).

    Subclasses set ``model_name`` and implement :meth:`fresh`, :meth:`init`,
    :meth:`actions` and :meth:`invariants`; for BMC and the cross-check also
    :meth:`bounded`, :meth:`encode`, :meth:`decode` and :meth:`action_args`.
    """

    model_name: str = ""
    #: property name -> names of auxiliary invariants that make it inductive
    strengthening: dict[str, list[str]] = {}
    #: property name -> why it is checked only to a bound (no unbounded proof)
    bounded_only: dict[str, str] = {}

    #: index-sort name -> concrete size, while a concrete configuration is
    #: being checked (BMC, cross-check): quantifiers over that index are then
    #: expanded into finite conjunctions, which z3 decides without MBQI.
    bound: dict[str, int] | None = None

    def bounds(self, model: Model) -> dict[str, int]:
        """Index-sort name -> size in ``model``'s configuration."""
        return {}

    def each(self, index: str, size: z3.ArithRef, body: Callable[[Any], z3.BoolRef], name: str = "") -> z3.BoolRef:
        """``forall i in [0, size): body(i)``: a quantifier for unbounded
        proofs, a finite conjunction while a concrete bound is active."""
        if self.bound is not None and index in self.bound:
            return z3.And([body(z3.IntVal(k)) for k in range(self.bound[index])] or [z3.BoolVal(True)])
        i = z3.Int(name or f"{index}!q")
        return z3.ForAll([i], z3.Implies(z3.And(0 <= i, i < size), body(i)))

    def some(self, index: str, size: z3.ArithRef, body: Callable[[Any], z3.BoolRef], name: str = "") -> z3.BoolRef:
        """``exists i in [0, size): body(i)`` (finite disjunction when bounded)."""
        if self.bound is not None and index in self.bound:
            return z3.Or([body(z3.IntVal(k)) for k in range(self.bound[index])] or [z3.BoolVal(False)])
        i = z3.Int(name or f"{index}!e")
        return z3.Exists([i], z3.And(0 <= i, i < size, body(i)))

    def fresh(self, tag: str) -> Any:
        """A fresh symbolic state whose constants carry ``tag`` in their names."""
        raise NotImplementedError

    def init(self, s: Any) -> z3.BoolRef:
        raise NotImplementedError

    def actions(self) -> list[SymAction]:
        raise NotImplementedError

    def invariants(self) -> dict[str, Callable[[Any], z3.BoolRef]]:
        """``always`` property name -> formula over a state."""
        raise NotImplementedError

    def auxiliaries(self) -> list[Aux]:
        return []

    def properties_to_prove(self, model: Model) -> list[Any]:
        """The properties :func:`prove_all` looks at (it proves the ``always`` ones): the model's,
        by default.  An encoding whose switches are symbolic (one proof covering configurations
        with a feature on and off) may add the ``always`` properties those other configurations
        have."""
        return list(model.property_list())

    def well_formed(self, s: Any) -> z3.BoolRef:
        """Type constraints every state satisfies (ranges of encoded enums)."""
        return z3.BoolVal(True)

    # -- concrete instances (BMC, cross-check) ---------------------------------------
    def bounded(self, s: Any, model: Model) -> z3.BoolRef:
        """Restrict a symbolic state to the sizes of ``model``'s configuration."""
        raise NotImplementedError

    def encode(self, s: Any, state: Any, model: Model) -> z3.BoolRef:
        """``s`` equals the concrete model state ``state``."""
        raise NotImplementedError

    def decode(self, m: z3.ModelRef, s: Any, model: Model) -> Any:
        """The concrete model state that ``s`` has in the z3 model ``m``."""
        raise NotImplementedError

    def action_args(self, action: tuple, model: Model) -> tuple[str, list[Any]]:
        """Concrete action -> (SymAction name, z3 values of its parameters)."""
        raise NotImplementedError

    def concrete_actions(self, model: Model) -> list[tuple]:
        """Every concrete action of ``model``'s configuration, enabled or not
        (the cross-check asks z3 about the disabled ones too)."""
        raise NotImplementedError

    def readable(self, m: z3.ModelRef, s: Any) -> Any:
        """A readable view of a symbolic state in a z3 model (for CTIs)."""
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------------
    def next(self, s: Any, t: Any, tag: str = "") -> z3.BoolRef:
        return z3.Or([self._apply(a, s, t, tag) for a in self.actions()])

    def _apply(self, a: SymAction, s: Any, t: Any, tag: str) -> z3.BoolRef:
        args = [z3.Const(f"{a.name}.{p}{tag}", sort) for p, sort in a.params]
        return a.relation(s, t, *args)

    def aux_by_name(self) -> dict[str, Aux]:
        return {x.name: x for x in self.auxiliaries()}


#: model name -> "module:Class" of its encoding (listed when the module exists)
ENCODINGS: dict[str, str] = {
    "consumer-lists": "conq.model.consumer_lists.z3_encoding:ConsumerListsEncoding",
    "ordered-consumption": "conq.model.ordered_consumption.z3_encoding:OrderedConsumptionEncoding",
    "recovery-deferral": "conq.model.recovery_deferral.z3_encoding:RecoveryDeferralEncoding",
}


def encoded_models() -> list[str]:
    """Models whose encoding module is present."""
    import importlib.util

    return [n for n, t in ENCODINGS.items() if importlib.util.find_spec(t.partition(":")[0]) is not None]


def encoding_for(model: Model) -> Encoding:
    """The encoding of a registered model, built for its configuration."""
    import importlib
    import importlib.util

    from conq.model.kernel import ModelError

    target = ENCODINGS.get(model.name)
    if target is None or importlib.util.find_spec(target.partition(":")[0]) is None:
        raise ModelError(f"no z3 encoding for model '{model.name}' yet")
    mod, _, cls = target.partition(":")
    return getattr(importlib.import_module(mod), cls)(model.config)


@dataclass
class ProofResult:
    prop: str
    status: str  # proved | not-inductive | violated | bounded | unknown
    seconds: float
    strengthened_with: list[str] = field(default_factory=list)
    detail: str = ""
    cti: dict[str, Any] | None = None  # {"before": view, "action": name, "after": view, "failing": [names]}
    trace: list[Any] | None = None  # BMC: readable states

    def to_json(self) -> dict[str, Any]:
        return {
            "property": self.prop,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "strengthened_with": self.strengthened_with,
            "detail": self.detail,
            "cti": self.cti,
            "trace": self.trace,
        }


#: z3's deterministic work budget for one attempt at one query (its "rlimit count", not seconds),
#: so that a verdict never depends on the clock or the machine's load.  Every proof of the three
#: models needs under 2.5e7 (measured over prove_all of each); an attempt that runs out takes
#: about 5 s here, and the wall-clock timeout (120 s by default) stays a safety net only.
DEFAULT_RLIMIT = 100_000_000

#: Solver seeds tried in turn when an attempt exhausts its budget.  z3's search is sensitive to
#: the order terms were created in (their ids), that is to whatever else ran in the process
#: before: the consumer-lists CTI for group ownership is found in 0.1 s in one process and not in
#: 600 s in another (the clean-clone CI run of 2026-12-05).  One seed in three misses it at 6e7;
#: eight seeds make a lost verdict unlikely, and every attempt is bounded by the budget.
DEFAULT_SEEDS: tuple[int, ...] = tuple(range(8))


def _solver(timeout_ms: int, rlimit: int | None = None, seed: int | None = None) -> z3.Solver:
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    if rlimit is not None:
        s.set("rlimit", rlimit)
    if seed is not None:
        s.set("random_seed", seed)
    return s


def _decide(
    build: Callable[[z3.Solver], None], *, timeout_ms: int, rlimit: int | None, seeds: Sequence[int]
) -> tuple[Any, z3.Solver]:
    """Check the query ``build`` adds to a fresh solver, seed after seed until one attempt gives
    a definite answer (sat or unsat) within the budget; ``unknown`` only when every seed gave up."""
    solver = None
    for seed in seeds or (0,):
        solver = _solver(timeout_ms, rlimit, seed)
        build(solver)
        r = solver.check()
        if r != z3.unknown:
            return r, solver
    assert solver is not None
    return z3.unknown, solver


def prove(
    enc: Encoding,
    prop: str,
    *,
    timeout_ms: int = 120_000,
    rlimit: int | None = DEFAULT_RLIMIT,
    seeds: Sequence[int] = DEFAULT_SEEDS,
) -> ProofResult:
    """Prove ``prop`` inductive (with its declared strengthening) for every size.

    Each query (the initial condition, then one per action) gets ``rlimit`` of z3 work per
    attempt and is retried with the next of ``seeds`` when an attempt gives up.  A counterexample
    to induction from any action is a definite answer, so an action z3 gave up on does not hide
    one that a later action has: ``unknown`` only when no action has a CTI and some gave up."""
    t0 = time.perf_counter()
    invs = enc.invariants()
    if prop not in invs:
        if prop in enc.bounded_only:
            return ProofResult(prop, "bounded", 0.0, detail=enc.bounded_only[prop])
        raise KeyError(f"{enc.model_name}: no encoding of property '{prop}'")
    aux = enc.aux_by_name()
    names = enc.strengthening.get(prop, [])
    missing = [n for n in names if n not in aux]
    if missing:
        raise KeyError(f"{enc.model_name}: strengthening of '{prop}' names unknown auxiliaries {missing}")
    conj: list[tuple[str, Callable[[Any], z3.BoolRef]]] = [(prop, invs[prop])] + [(n, aux[n].formula) for n in names]

    def whole(s: Any) -> z3.BoolRef:
        return z3.And([f(s) for _, f in conj])

    budget = {"timeout_ms": timeout_ms, "rlimit": rlimit, "seeds": seeds}
    s0 = enc.fresh("0")
    r, solver = _decide(lambda sv: sv.add(enc.well_formed(s0), enc.init(s0), z3.Not(whole(s0))), **budget)
    if r == z3.sat:
        m = solver.model()
        failing = [n for n, f in conj if z3.is_false(m.eval(f(s0), model_completion=True))]
        return ProofResult(prop, "not-inductive", time.perf_counter() - t0, names,
                           detail=f"an initial state violates {failing}", cti={"before": None, "action": "init", "after": enc.readable(m, s0), "failing": failing})
    gave_up = [] if r == z3.unsat else [f"init: {solver.reason_unknown()}"]
    s, t = enc.fresh("s"), enc.fresh("t")
    for a in enc.actions():
        r, solver = _decide(lambda sv: sv.add(enc.well_formed(s), whole(s), enc._apply(a, s, t, ""), z3.Not(whole(t))), **budget)
        if r == z3.sat:
            m = solver.model()
            failing = [n for n, f in conj if z3.is_false(m.eval(f(t), model_completion=True))]
            params = {p: str(m.eval(z3.Const(f"{a.name}.{p}", sort), model_completion=True)) for p, sort in a.params}
            return ProofResult(
                prop, "not-inductive", time.perf_counter() - t0, names,
                detail=f"action {a.name}{params or ''} breaks {failing}",
                cti={"before": enc.readable(m, s), "action": a.name, "params": params, "after": enc.readable(m, t), "failing": failing},
            )
        if r == z3.unknown:
            gave_up.append(f"action {a.name}: {solver.reason_unknown()}")
    if gave_up:
        return ProofResult(prop, "unknown", time.perf_counter() - t0, names, detail="; ".join(gave_up))
    return ProofResult(prop, "proved", time.perf_counter() - t0, names)


def prove_all(
    enc: Encoding,
    model: Model,
    *,
    only: str | None = None,
    timeout_ms: int = 120_000,
    rlimit: int | None = DEFAULT_RLIMIT,
    seeds: Sequence[int] = DEFAULT_SEEDS,
) -> list[ProofResult]:
    """Every ``always`` property of ``model`` (or just ``only``)."""
    from conq.model.kernel import Kind

    results = []
    for p in enc.properties_to_prove(model):
        if p.kind is not Kind.ALWAYS or (only is not None and p.name != only):
            continue
        if p.name in enc.bounded_only and p.name not in enc.invariants():
            results.append(ProofResult(p.name, "bounded", 0.0, detail=enc.bounded_only[p.name]))
            continue
        if p.name not in enc.invariants():
            results.append(ProofResult(p.name, "unknown", 0.0, detail="no symbolic encoding of this property"))
            continue
        results.append(prove(enc, p.name, timeout_ms=timeout_ms, rlimit=rlimit, seeds=seeds))
    if only is not None and not results:
        raise KeyError(f"{model.name}: no always property named '{only}'")
    return results


def bmc(enc: Encoding, model: Model, prop: str, k: int, *, timeout_ms: int = 180_000,
        rlimit: int | None = DEFAULT_RLIMIT) -> ProofResult:
    """Search for a violation of ``prop`` within ``k`` steps of an initial
    state of ``model``'s concrete configuration; the first depth that fails
    gives the shortest counterexample.  Each depth's query gets ``rlimit`` of z3 work (as an
    induction query does; the clock, ``timeout_ms``, is a safety net only): every BMC case of the
    manifest needs under 2e7 for all its depths together (measured on 6 December 2026, the
    differences of z3's "rlimit count" around each case), so the verdict never depends on the
    machine's load.  The solver is incremental (one per case, a depth pushed at a time), so there is
    no retry with another seed: a depth that runs out is ``unknown``, saying so."""
    with _bounded(enc, model):
        return _bmc(enc, model, prop, k, timeout_ms, rlimit)


class _bounded:
    """Activate an encoding's concrete bounds for the duration of a check."""

    def __init__(self, enc: Encoding, model: Model):
        self.enc, self.model = enc, model

    def __enter__(self) -> None:
        self.saved = self.enc.bound
        self.enc.bound = self.enc.bounds(self.model)

    def __exit__(self, *exc: Any) -> None:
        self.enc.bound = self.saved


def _bmc(enc: Encoding, model: Model, prop: str, k: int, timeout_ms: int, rlimit: int | None) -> ProofResult:
    t0 = time.perf_counter()
    inv = enc.invariants()[prop]
    states = [enc.fresh("@0")]
    solver = _solver(timeout_ms, rlimit)
    solver.add(enc.well_formed(states[0]), enc.bounded(states[0], model), enc.init(states[0]))
    for depth in range(0, k + 1):
        if depth > 0:
            nxt = enc.fresh(f"@{depth}")
            solver.add(enc.well_formed(nxt), enc.bounded(nxt, model), enc.next(states[-1], nxt, f"@{depth}"))
            states.append(nxt)
        solver.push()
        solver.add(z3.Not(inv(states[-1])))
        r = solver.check()
        if r == z3.sat:
            m = solver.model()
            trace = [enc.decode(m, st, model) for st in states]
            return ProofResult(prop, "violated", time.perf_counter() - t0, detail=f"violated after {depth} steps",
                               trace=[model.view(x) for x in trace])
        if r == z3.unknown:
            return ProofResult(prop, "unknown", time.perf_counter() - t0,
                               detail=f"depth {depth}: z3 gave up ({solver.reason_unknown()}) within its work budget "
                                      f"(rlimit {rlimit}) or its safety-net timeout ({timeout_ms} ms)")
        solver.pop()
    return ProofResult(prop, "holds-to-bound", time.perf_counter() - t0, detail=f"no violation within {k} steps")


def successors(enc: Encoding, model: Model, state: Any, action: tuple, *, limit: int = 64) -> set[Any]:
    """Every post-state z3 allows for a concrete ``state`` and ``action``."""
    with _bounded(enc, model):
        return _successors(enc, model, state, action, limit)


def _successors(enc: Encoding, model: Model, state: Any, action: tuple, limit: int) -> set[Any]:
    name, args = enc.action_args(action, model)
    a = next(x for x in enc.actions() if x.name == name)
    s, t = enc.fresh("x"), enc.fresh("y")
    solver = _solver(300_000, DEFAULT_RLIMIT)  # (the work budget decides; the clock is a safety net)
    solver.add(enc.encode(s, state, model), enc.bounded(t, model), enc.well_formed(t), a.relation(s, t, *args))
    found: set[Any] = set()
    while len(found) < limit:
        r = solver.check()
        if r != z3.sat:
            if r == z3.unknown:
                raise RuntimeError(f"z3 gave up enumerating successors of {action}: {solver.reason_unknown()}")
            break
        m = solver.model()
        nxt = enc.decode(m, t, model)
        found.add(nxt)
        solver.add(z3.Not(enc.encode(t, nxt, model)))
    return found


def cross_check(enc: Encoding, model: Model, state: Any, actions: Iterable[tuple] | None = None) -> list[str]:
    """Drift between the encoding and the executable model at ``state``:
    one line per action whose successor sets differ (empty: faithful)."""
    problems = []
    for action in actions if actions is not None else enc.concrete_actions(model):
        want = {t for _, t in model.step(state, action)}
        got = successors(enc, model, state, action)
        if want != got:
            problems.append(
                f"{action}: executable model {sorted(map(repr, want))} vs z3 {sorted(map(repr, got))}"
            )
    return problems
