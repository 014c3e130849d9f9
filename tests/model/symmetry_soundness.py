"""Soundness checks of a model's symmetry reduction (issue 18), shared by the models' test_symmetry
files (loaded by path: the tests run with --import-mode=importlib).

``canonical`` is sound only if the model and every property are invariant under the renamings it
quotients by.  Checked on every reachable state ``s`` of a configuration:

(a) canonical is idempotent, ``canonical(s)`` is in the orbit of ``s`` (``Model.orbit``) and every
    member of the orbit has the same representative;
(b) s and canonical(s) have the same successors up to renaming: equal multisets of canonical
    targets, each with the verdicts of every step property on that transition;
(c) every state invariant, its witness and every ``sometimes`` has the same verdict on every member
    of the orbit, except the model's ``orbit_properties`` (which the engines evaluate on the whole
    orbit instead)."""

from __future__ import annotations

from collections import Counter

from conq.model.engines.explorer import explore
from conq.model.kernel import Kind


def _step_signature(model, s, step_props) -> Counter:
    canon = model.canonical
    out: Counter = Counter()
    for a, o, t in model.successors(s):
        verdicts = tuple((p.check(s, a, o, t), p.witness(s, a, o, t) if p.witness else None)
                         for p in step_props if p.applies_to(a[0]))
        out[(canon(t), verdicts)] += 1
    return out


def check_reduction(model, *, max_orbit_checks: int | None = None) -> int:
    """Run (a)-(c) on every reachable state of ``model``; returns how many states canonical moved
    (a test asserts it is not 0: otherwise it exercised nothing)."""
    ex = explore(model, liveness=False)
    assert ex.complete
    props = model.property_list()
    skip = model.orbit_properties
    state_props = [p for p in props if p.kind in (Kind.ALWAYS, Kind.SOMETIMES) and p.name not in skip]
    step_props = [p for p in props if p.kind is Kind.ALWAYS_STEP]
    canon = model.canonical
    moved = 0
    for s in ex.state_list:
        c = canon(s)
        orbit = list(model.orbit(s))
        assert s in orbit and canon(c) == c  # (a) idempotent
        assert c in orbit  # (a) one of the renamings of s
        assert all(canon(x) == c for x in orbit)  # (a) one representative per class
        moved += c != s
        assert _step_signature(model, s, step_props) == _step_signature(model, c, step_props)  # (b)
        for p in state_props:  # (c)
            v = p.check(s)
            w = p.witness(s) if p.witness is not None else None
            for x in orbit:
                assert p.check(x) == v, (p.name, s, x)
                if p.witness is not None:
                    assert p.witness(x) == w, (p.name, s, x)
    return moved


def outcome(ex) -> dict:
    """Every safety verdict and witness, by name (liveness is skipped under symmetry)."""
    return {v.prop.name: v.status for v in ex.verdicts if v.prop.kind is not Kind.LEADS_TO}


def check_paths_replay(model, reduced, full) -> None:
    """Every path of the reduced search is as short as the full search's and replays step by step
    on the real (unreduced) model from one of its initial states."""
    by_name = {v.prop.name: v for v in full.verdicts}
    for v in reduced.verdicts:
        if v.path is None or v.prop.kind is Kind.LEADS_TO:
            continue
        assert len(v.path.steps) == len(by_name[v.prop.name].path.steps), v.prop.name
        state = v.path.init
        assert state in model.init_states()
        for a, o, t in v.path.steps:
            assert (a, o, t) in model.successors(state), v.prop.name
            state = t
        if v.prop.kind is Kind.SOMETIMES:
            assert v.prop.check(state), v.prop.name
        elif v.prop.kind is Kind.ALWAYS:
            assert (not v.prop.check(state)) if v.status == "violated" else v.prop.witness(state), v.prop.name
