"""The z3 encoding of consumer-lists (model/consumer_lists/z3_encoding.py): every always
property proved inductive for unbounded sizes on the reference switches; BMC
agreeing with the explorer on the variant's state-encodable violation (same
property, same length); the encoding faithful to the executable model
(hypothesis: random reachable states, every concrete action)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conq import manifest
from conq.conformance.generate import random_walk
from conq.model.engines import symbolic
from conq.model.consumer_lists.z3_encoding import ConsumerListsEncoding
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind
from conq.model.engines.registry import load_model

NAME = "consumer-lists"


def model(cfg: str = "reference"):
    return load_model(NAME, cfg)


# -- (a) unbounded proofs ------------------------------------------------------------------
def test_every_always_property_is_proved_for_every_size():
    m = model()
    enc = symbolic.encoding_for(m)
    assert isinstance(enc, ConsumerListsEncoding)
    always = {p.name for p in m.property_list() if p.kind is Kind.ALWAYS}
    assert always <= set(enc.invariants())  # every always property encoded, under its own name
    results = symbolic.prove_all(enc, m)
    assert {r.prop: r.status for r in results} == {p: "proved" for p in always}, [r.detail for r in results]
    for r in results:
        assert r.strengthened_with == enc.strengthening.get(r.prop, [])
    assert enc.bounded_only == {}


def test_acquire_cas_proves_acquired_at_most_once_for_every_size():
    """The always-step property, as the state invariant over the history ghost."""
    assert symbolic.prove(ConsumerListsEncoding(model().config), "acquired-at-most-once").status == "proved"
    bad = ConsumerListsEncoding(model("acquire-no-cas").config)
    assert symbolic.prove(bad, "acquired-at-most-once").status == "not-inductive"


def test_the_declared_auxiliary_is_inductive_and_no_strengthening_is_needed():
    """Both always properties are inductive on their own (strengthening empty);
    the one auxiliary (the Interested ranks are below the clock, so the lists'
    order is strict) is checked inductive here, as the encoding relies on it
    for the walks to name one consumer."""
    enc = ConsumerListsEncoding(model().config)
    assert enc.strengthening == {}
    aux = enc.aux_by_name()["ranks-below-clock"]

    class WithAux(ConsumerListsEncoding):
        def invariants(self):
            return {**super().invariants(), aux.name: aux.formula}

    assert symbolic.prove(WithAux(model().config), aux.name).status == "proved"


# -- (b) BMC agrees with the explorer on the variants ----------------------------------------
def _bmc_cases():
    return [(exp.config, prop) for exp, prop in manifest.bmc_cases(NAME, set(ConsumerListsEncoding().invariants()))]


BMC_CASES = sorted(set(_bmc_cases()))


def test_bmc_cases_cover_the_state_encodable_violations():
    # the other expected violations of the variants are liveness (leads-to) or
    # always-step properties without a state encoding: BMC does not cover them
    assert BMC_CASES == [("acquire-no-cas", "acquired-at-most-once")]


@pytest.mark.parametrize("cfg,prop", BMC_CASES)
def test_bmc_finds_the_explorers_counterexample_at_its_length(cfg, prop):
    m = model(cfg)
    path = explore(m, liveness=False).verdict(prop).path
    assert path is not None
    r = symbolic.bmc(symbolic.encoding_for(m), m, prop, len(path))
    # BMC checks every depth from 0: the first violated depth is the shortest
    assert r.status == "violated", r.detail
    assert len(r.trace) - 1 == len(path)
    # the trace is a real run of the executable model ending in a bad acquire
    assert r.trace[-1] is not None


# -- (c) faithfulness: the encoding against the executable model ------------------------------
def _reachable(m, seed: int, length: int):
    tr = random_walk(m, seed, length)
    return m.replay([e.action for e in tr.events]).states()[-1]


@pytest.mark.parametrize("cfg,examples", [("reference", 6), ("acquire-no-cas", 4), ("notify-all", 4), ("upstream-flag-order", 3)])
def test_cross_check_on_random_reachable_states(cfg, examples):
    m = model(cfg)
    enc = symbolic.encoding_for(m)

    @settings(max_examples=examples, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 10_000), length=st.integers(0, 40))
    def check(seed, length):
        state = _reachable(m, seed, length)
        assert symbolic.cross_check(enc, m, state) == []

    check()


def test_cross_check_sees_a_drift():
    """A deliberately wrong executable model (acquire without the CAS) against
    the reference encoding: the cross-check must report the acquire."""
    ref, bad = model(), model("acquire-no-cas")
    enc = symbolic.encoding_for(ref)
    path = explore(bad, liveness=False).verdict("acquired-at-most-once").path
    before = path.states()[-2]
    act = path.actions()[-1]
    assert symbolic.cross_check(enc, bad, before, [act]) != []
