"""Symmetry reduction of the consumer-lists model (issue 18): ``canonical`` renames consumers of
the same priority and kind.  It is sound only if the model and every property are invariant
under those renamings; checked here on every reachable state of small configurations:

(a) canonical is idempotent and stays in the state's class (it is one of the renamings);
(b) s and canonical(s) have the same successors up to renaming: equal multisets of canonical
    targets, each with the verdicts of every step property on that transition;
(c) every state invariant and witness has the same verdict on s and canonical(s);

and exploring with symmetry finds the same violated properties and witnesses as without, with
counterexamples as short, which replay step by step on the real (unreduced) model."""

from __future__ import annotations

from collections import Counter

import pytest

from conq.model.consumer_lists.model import ConsumerListsModel
from conq.model.consumer_lists.state import ConsumerListsConfig as C, GroupPolicy
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind

# small configurations with interchangeable consumers; every field that names a consumer is
# exercised: blocks, masks, Interested lists, holders (ACQ + c), rejecters, group owners
CONFIGS = {
    # two acquiring consumers of one priority (the named "same-priority" configuration)
    "same-priority": C(consumers=((1, True), (1, True)), messages=2),
    # three of one kind: renamings are the 6 permutations, not only a swap
    "three-same": C(consumers=((1, True), (1, True), (1, True)), messages=1),
    # every other actor: held, expiry / delete, reject, a standard group (owner field)
    "actors": C(consumers=((1, True), (1, True)), messages=1, held=True, expiry=True, reject=True,
                groups=(0,), group_policy=GroupPolicy.ASSIGNED),
    # a priority above two interchangeable browsers: only the browsers are swapped
    "browsers": C(consumers=((2, True), (1, False), (1, False)), messages=1, env_budget=0),
}


#: witnesses that name consumers by index, so are NOT invariant under renaming: "Interested in the
#: reverse of their registration order" reads registration order as index order.  The model names
#: them (ConsumerListsModel.orbit_properties); under symmetry the engines evaluate them on the
#: representative's whole orbit when the initial states are closed under the renamings (consumers
#: added by the run), and report them skipped when not (preadded consumers: the initial Interested
#: lists are in index order, so a renamed member need not be reachable).  Tests at the end.
ASYMMETRIC = ConsumerListsModel.orbit_properties


def _reachable(model) -> list:
    ex = explore(model, liveness=False)
    assert ex.complete
    return ex.state_list


def _step_signature(model, s, step_props) -> Counter:
    canon = model.canonical
    out = Counter()
    for a, o, t in model.successors(s):
        verdicts = tuple((p.check(s, a, o, t), p.witness(s, a, o, t) if p.witness else None)
                         for p in step_props if p.applies_to(a[0]))
        out[(canon(t), verdicts)] += 1
    return out


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_canonical_is_a_sound_reduction(name):
    m = ConsumerListsModel(CONFIGS[name])
    perms = m._symmetry_perms()
    assert perms, "the configuration must have interchangeable consumers"
    props = m.property_list()
    state_props = [p for p in props if p.kind in (Kind.ALWAYS, Kind.SOMETIMES)]
    step_props = [p for p in props if p.kind is Kind.ALWAYS_STEP]
    moved = 0
    for s in _reachable(m):
        c = m.canonical(s)
        assert m.canonical(c) == c  # (a) idempotent
        assert c == s or c in {m.permute(s, p) for p in perms}  # (a) in the class of s
        for p in perms:  # every member of the class has the same representative
            assert m.canonical(m.permute(s, p)) == c
        moved += c != s
        assert _step_signature(m, s, step_props) == _step_signature(m, c, step_props)  # (b)
        for p in state_props:  # (c)
            if p.name in ASYMMETRIC:
                continue
            assert p.check(s) == p.check(c), p.name
            if p.witness is not None:
                assert p.witness(s) == p.witness(c), p.name
    assert moved, "no reachable state was renamed: the test exercised nothing"


def _outcome(ex):
    return {v.prop.name: v.status for v in ex.verdicts if v.prop.kind is not Kind.LEADS_TO}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_verdicts_with_and_without_symmetry(name):
    m = ConsumerListsModel(CONFIGS[name])
    full, red = explore(m, liveness=False), explore(m, symmetry=True, liveness=False)
    assert red.states < full.states and red.transitions < full.transitions
    assert _without(_outcome(red)) == _without(_outcome(full))


# upstream variants with two interchangeable consumers, each violating something
VIOLATING = {
    "notify-all": C(consumers=((1, True), (1, True)), messages=2, notify_one=False),
    "acquire-no-cas": C(consumers=((1, True), (1, True)), messages=2, acquire_cas=False),
}


@pytest.mark.parametrize("name", sorted(VIOLATING))
def test_symmetry_finds_the_same_violations_with_replayable_counterexamples(name):
    m = ConsumerListsModel(VIOLATING[name])
    full = explore(m, liveness=False)
    red = explore(m, symmetry=True, liveness=False)
    assert red.states < full.states
    assert _without(_outcome(red)) == _without(_outcome(full))
    violated = [v for v in red.verdicts if v.status == "violated"]
    assert violated
    by_name = {v.prop.name: v for v in full.verdicts}
    for v in violated:
        path = v.path
        assert len(path.steps) == len(by_name[v.prop.name].path.steps)  # as short
        state = path.init
        assert state in m.init_states()
        for a, o, t in path.steps:  # replays on the real model
            assert (a, o, t) in m.successors(state)
            state = t


def _without(outcome: dict) -> dict:
    return {k: v for k, v in outcome.items() if k not in ASYMMETRIC}


def test_an_orbit_property_is_witnessed_on_its_orbit():
    # consumers added by the run: the initial states are closed under renaming, so every member of a
    # reachable class is reachable; the representative of a class whose members include a rotated
    # Interested list may itself be sorted: the engines evaluate interested-rotates on the orbit and
    # rebuild its path to end at the member that is rotated (results._concretise_to)
    m = ConsumerListsModel(C(consumers=((1, True), (1, True)), messages=1, preadded=False))
    (p,) = [p for p in m.property_list() if p.name == "interested-rotates"]
    full = explore(m, liveness=False)
    red = explore(m, symmetry=True, liveness=False)
    assert red.states < full.states and _outcome(red) == _outcome(full)
    assert not all(p.check(s) == any(p.check(x) for x in m.orbit(s)) for s in red.state_list), \
        "no representative differs from its orbit: the test exercised nothing"
    for mode in (dict(), dict(fingerprints=True), dict(workers=2)):
        v = explore(m, symmetry=True, liveness=False, **mode).verdict("interested-rotates")
        assert v.status == "witnessed", mode
        assert len(v.path.steps) == len(full.verdict("interested-rotates").path.steps), mode  # as short
        state = v.path.init
        assert state in m.init_states()
        for a, o, t in v.path.steps:  # replays on the real model, and ends where it fires
            assert (a, o, t) in m.successors(state)
            state = t
        assert p.check(state), mode


@pytest.mark.parametrize("mode", [dict(), dict(fingerprints=True), dict(workers=2)])
def test_an_orbit_property_is_skipped_when_the_initial_states_fix_an_order(mode):
    m = ConsumerListsModel(CONFIGS["same-priority"])
    assert not set(m.orbit(m.init_states()[0])) <= set(m.init_states())
    v = explore(m, symmetry=True, liveness=False, **mode).verdict("interested-rotates")
    assert v.status == "skipped" and "not closed" in v.detail
