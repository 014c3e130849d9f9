"""The z3 encoding of recovery-deferral (model/recovery_deferral/z3_encoding.py):
every always property proved inductive for unbounded sizes on the reference
switches; BMC agreeing with the explorer on each expected violation of the
single-switch variants (same property, same length); the encoding faithful to
the executable model (hypothesis: random reachable states, every concrete
action); the strengthening necessary (a CTI without it)."""

from __future__ import annotations

import random

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from conq import manifest
from conq.model.engines import symbolic
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind
from conq.model.recovery_deferral.z3_encoding import RecoveryDeferralEncoding
from conq.model.engines.registry import load_model

NAME = "recovery-deferral"


def model(cfg: str = "reference"):
    return load_model(NAME, cfg)


# -- (a) unbounded proofs ------------------------------------------------------------------
def test_every_always_property_is_proved_for_every_size():
    m = model()
    enc = symbolic.encoding_for(m)
    assert isinstance(enc, RecoveryDeferralEncoding)
    always = {p.name for p in m.property_list() if p.kind is Kind.ALWAYS}
    assert always == set(enc.invariants())  # every always property encoded, under its own name
    results = symbolic.prove_all(enc, m)
    assert {r.prop: r.status for r in results} == {p: "proved" for p in always}, [r.detail for r in results]
    for r in results:
        assert r.strengthened_with == enc.strengthening.get(r.prop, [])
    assert enc.bounded_only == {}


# -- (b) BMC agrees with the explorer on the variants ----------------------------------------
def _bmc_cases():
    return [(exp.config, prop) for exp, prop in manifest.bmc_cases(NAME, set(RecoveryDeferralEncoding().invariants()))]


BMC_CASES = sorted(set(_bmc_cases()))


def test_bmc_cases_cover_every_single_switch_state_violation():
    assert {c for c, _ in BMC_CASES} >= {
        "upstream-drop-when-full", "upstream-drop-without-context", "upstream-java-remainder",
        "upstream-count-after-enqueue", "upstream-replace-deferred",
    }


@pytest.mark.parametrize("cfg,prop", BMC_CASES)
def test_bmc_finds_the_explorers_counterexample_at_its_length(cfg, prop):
    m = model(cfg)
    path = explore(m, liveness=False).verdict(prop).path
    assert path is not None
    r = symbolic.bmc(symbolic.encoding_for(m), m, prop, len(path))
    assert r.status == "violated", r.detail
    assert len(r.trace) - 1 == len(path)
    # one step shorter finds nothing: the explorer's is the shortest
    if len(path) > 1:
        assert symbolic.bmc(symbolic.encoding_for(m), m, prop, len(path) - 1).status == "holds-to-bound"


def test_bmc_clean_on_the_reference():
    m = model()
    enc = symbolic.encoding_for(m)
    for prop in ("no-silent-loss", "pending-equals-allocated-minus-completed"):
        assert symbolic.bmc(enc, m, prop, 5).status == "holds-to-bound"


# -- (c) faithfulness ----------------------------------------------------------------------------
def walk(m, seed: int, steps: int):
    """A seeded random walk of the executable model (every outcome reachable)."""
    rng = random.Random(seed)
    s = m.init_states()[0]
    for _ in range(steps):
        succ = m.successors(s)
        if not succ:
            break
        s = succ[rng.randrange(len(succ))][2]
    return s


CROSS = ["reference", "upstream-drop-when-full", "upstream-count-after-enqueue", "seed-random-error-routing", "upstream"]


@pytest.mark.parametrize("cfg", CROSS)
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 100_000), steps=st.integers(0, 18))
def test_encoding_agrees_with_the_executable_model(cfg, seed, steps):
    m = model(cfg)
    enc = symbolic.encoding_for(m)
    assert symbolic.cross_check(enc, m, walk(m, seed, steps)) == []


def test_cross_check_catches_drift():
    # an encoding built for upstream's count-after-enqueue, checked against the reference model
    m = model()
    drifted = RecoveryDeferralEncoding(model("upstream-count-after-enqueue").config)
    s = m.init_states()[0]
    s = next(t for a, _, t in m.successors(s) if a == ("recover", 0))
    assert symbolic.cross_check(drifted, m, s, [("feed", 0)]) != []
    assert symbolic.cross_check(symbolic.encoding_for(m), m, s, [("feed", 0)]) == []


# -- (d) the strengthening is necessary ------------------------------------------------------------
class SmallSizes(RecoveryDeferralEncoding):
    """Sizes capped (still symbolic below the cap), so that z3's model-based
    quantifier instantiation can build the counterexample to induction."""

    def well_formed(self, s):
        sc = self.sc
        q = z3.Int("sm!q")
        return z3.And(super().well_formed(s), sc.N <= 3, sc.P <= 2, sc.Q <= 2, sc.C <= 2, sc.K <= 1,
                      z3.ForAll([q], z3.Implies(z3.And(0 <= q, q < sc.Q), z3.And(0 <= s.qh[q], s.qt[q] <= 3))))


def _without(prop: str, aux: str):
    enc = SmallSizes(model().config)
    enc.strengthening = {k: [x for x in v if x != aux] for k, v in enc.strengthening.items()}
    # z3's quantifier instantiation is sensitive to the order formulas were built in (which follows
    # this process's hash seed): a query that takes 3 s in one run may time out in another.  Try a
    # few solver seeds; the verdict asserted below must still be a definite one.
    r = None
    for seed in range(4):
        z3.set_param("smt.random_seed", seed)
        try:
            r = symbolic.prove(enc, prop, timeout_ms=30_000)
        finally:
            z3.set_param("smt.random_seed", 0)
        if r.status != "unknown":
            break
    return r


def test_pending_needs_the_bijection():
    r = _without("pending-non-negative", "pending-bijection")
    assert r.status == "not-inductive", r.detail
    # two outstanding tasks of one context, pending below their number: done drives it negative
    assert r.cti["action"] == "done"
    assert min(r.cti["after"]["pending"]) < 0


def test_exactly_once_needs_the_fed_prefix():
    r = _without("processed-exactly-once", "fed-prefix")
    assert r.status == "not-inductive", r.detail
    assert r.cti["action"] == "feed"


def test_small_sizes_still_prove_with_the_strengthening():
    enc = SmallSizes(model().config)
    assert symbolic.prove(enc, "processed-exactly-once").status == "proved"
