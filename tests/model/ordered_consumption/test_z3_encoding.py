"""The z3 encoding of ordered-consumption (model/ordered_consumption/z3_encoding.py):
(a) every always property proved inductive for unbounded sizes on the
reference configuration; (b) BMC finds each expected violation of the
variants at the explorer's depth; (c) the encoding agrees with the executable
model on random reachable states for every concrete action; (d) each
strengthening is necessary (without it: a counterexample to induction)."""

from __future__ import annotations

import random

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conq import manifest
from conq.model.ordered_consumption import state as oc
from conq.model.ordered_consumption import OrderedConsumptionModel
from conq.model.engines import symbolic
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind
from conq.model.ordered_consumption.z3_encoding import OrderedConsumptionEncoding
from conq.model.engines.registry import load_model

NAME = "ordered-consumption"


def model(config="reference"):
    return load_model(NAME, config)


def always_props(m):
    return [p.name for p in m.property_list() if p.kind is Kind.ALWAYS]


# -- (a) unbounded proofs ----------------------------------------------------------------


def test_registered_encoding():
    enc = symbolic.encoding_for(model())
    assert isinstance(enc, OrderedConsumptionEncoding)
    assert set(enc.invariants()) == set(always_props(model()))
    assert enc.bounded_only == {}


def test_every_always_property_is_proved_for_every_size():
    m = model()
    enc = symbolic.encoding_for(m)
    results = symbolic.prove_all(enc, m)
    assert {r.prop for r in results} == set(always_props(m))
    for r in results:
        assert r.status == "proved", (r.prop, r.detail, r.cti)
        assert r.strengthened_with == enc.strengthening.get(r.prop, [])


def test_several_consumers_in_one_group_are_out_of_the_encodings_scope():
    """``consumers`` > 1 (push-fifo-shared-group, the PF2 unit's model) is explored and validated, not
    proved: the encoding's state has one client's fields per message and process queue (module
    docstring), so it refuses the configuration instead of proving a one-client relation; the manifest
    expects no violation of it, so no BMC case asks for it either."""
    from conq.model.kernel import ModelError

    m = model("push-fifo-shared-group")
    assert m.config.consumers == 2
    with pytest.raises(ModelError, match="one push consumer per group"):
        symbolic.encoding_for(m)
    assert "push-fifo-shared-group" not in {c for c, _, _ in _bmc_cases(slow=True)}
    # the field changes nothing for the roles without a push consumer
    assert isinstance(symbolic.encoding_for(load_model(NAME, "simple", {"consumers": 2})), OrderedConsumptionEncoding)


def test_upstream_fifo_has_no_strengthening_for_one_in_consumption():
    """Upstream FIFO (no client lock, server gate) violates fifo-one-in-consumption once an answer
    can be lost (BMC finds it below): the proof has nothing to strengthen it with."""
    m = model("push-fifo-upstream")
    enc = symbolic.encoding_for(m)
    assert enc.strengthening["fifo-one-in-consumption"] == []
    assert ("push-fifo-upstream", {}, "fifo-one-in-consumption") in _bmc_cases()


# -- (b) BMC agrees with the explorer ------------------------------------------------------


def _bmc_cases(slow=False):
    enc_props = set(OrderedConsumptionEncoding().invariants())
    return [(e.config, e.overrides, p) for e, p in manifest.bmc_cases(NAME, enc_props, slow=slow)]


def test_bmc_cases_cover_the_violated_always_properties():
    # entries marked slow in the manifest (a long counterexample through a large transition relation)
    # are checked by `conq prove ordered-consumption --slow`
    assert {(c, p) for c, _, p in _bmc_cases(slow=True)} == {(c, p) for c, _, p in _bmc_cases()} | {
        ("push-fifo-memo-per-queue", "consumptions-within-max"),
    }
    assert {(c, p) for c, _, p in _bmc_cases()} == {
        ("producer-upstream", "txn-single-attempt"),
        ("producer-upstream-python", "txn-single-attempt"),
        ("push-fifo-dlq-exceeds", "consumed-at-most-max"),
        ("mutant-fifo-no-lock", "fifo-one-in-consumption"),
        ("mutant-standard-client-dlq", "standard-no-client-dlq"),
        ("push-fifo-upstream", "fifo-one-in-consumption"),
        ("push-fifo-no-memo", "consumptions-within-max"),
    }


@pytest.mark.parametrize("config,overrides,prop", _bmc_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_bmc_finds_the_explorers_counterexample(config, overrides, prop):
    m = load_model(NAME, config, overrides)
    v = explore(m, liveness=False).verdict(prop)
    assert v.path is not None
    k = len(v.path)
    r = symbolic.bmc(symbolic.encoding_for(m), m, prop, k)
    assert r.status == "violated", r.detail
    # the same length; bmc checks every depth up to k in turn, so none shorter exists
    assert len(r.trace) - 1 == k
    assert r.trace[0] in [m.view(x) for x in m.init_states()]


def test_bmc_clean_on_the_reference_roles():
    m = model("push-fifo")
    r = symbolic.bmc(symbolic.encoding_for(m), m, "fifo-one-in-consumption", 4)
    assert r.status == "holds-to-bound"


# -- (c) faithfulness: z3 successors == executable successors ------------------------------


def _walk(m, seed, steps, role=None):
    rng = random.Random(seed)
    inits = m.init_states()
    roles = sorted({s[0] for s in inits})
    role = roles[rng.randrange(len(roles))] if role is None else role
    state = rng.choice([s for s in inits if s[0] == role])
    for _ in range(steps):
        succ = m.successors(state)
        if not succ:
            break
        state = succ[rng.randrange(len(succ))][2]
    return state


_REF = model()
_ENC = symbolic.encoding_for(_REF)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), steps=st.integers(0, 30))
def test_encoding_agrees_with_the_executable_model_reference(seed, steps):
    state = _walk(_REF, seed, steps)
    # the reference is a disjoint union of roles: every action of the state's role
    # (the executable model raises IndexError on another role's parameterless action)
    assert symbolic.cross_check(_ENC, _REF, state, _ENC.concrete_actions_for(_REF, state[0])) == []


VARIANTS = ["push-fifo-upstream", "push-standard-upstream", "push-fifo-dlq-exceeds", "mutant-fifo-no-lock",
            "mutant-standard-client-dlq", "mutant-simple-retry", "mutant-push-ignore-bytes",
            "mutant-fifo-unlock-no-signal", "producer-upstream", "producer-upstream-python", "mutant-producer-ignore-backoff",
            "mutant-producer-fifo-rotates", "mutant-producer-skip-type-check", "push-fifo-settle-until-success",
            "push-fifo-lock-only", "push-fifo-no-memo", "push-fifo-memo-per-queue"]
_VAR = {c: model(c) for c in VARIANTS}
_VENC = {c: symbolic.encoding_for(m) for c, m in _VAR.items()}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(VARIANTS), seed=st.integers(0, 100_000), steps=st.integers(0, 30))
def test_encoding_agrees_with_the_executable_model_variants(config, seed, steps):
    m = _VAR[config]
    state = _walk(m, seed, steps)
    assert symbolic.cross_check(_VENC[config], m, state) == []  # single-role: every concrete action


def test_cross_check_catches_drift():
    class Drifted(OrderedConsumptionEncoding):
        def actions(self):
            acts = super().actions()
            def consume(s, t, m):  # forgets that FIFO dead-letters at the maximum
                return z3.And(s.role == oc.FIFO, self._msg(s, m), s.cli[m] == oc.C_CONSUMING,
                              self._upd(s, t, cli=z3.Store(s.cli, m, oc.C_ACKING), cons=z3.Store(s.cons, m, s.cons[m] + 1)))
            return [symbolic.SymAction("consume", a.params, self._concretize(symbolic.SymAction("consume", a.params, consume)))
                    if a.name == "consume" else a for a in acts]

    m = model("push-fifo")
    state = m.replay([("receive", 0), ("dispatch", 0), ("take", 0)]).last
    problems = symbolic.cross_check(Drifted(m.config), m, state, [("consume", 0)])
    assert problems and problems[0].startswith("('consume', 0)")


# -- (d) the strengthening is necessary ------------------------------------------------------


# (property, auxiliary dropped (None: all of them), the action whose step then has a CTI).
# prove() stops at the first action z3 cannot decide, so the CTI is asked of that action.
NECESSARY = [
    ("send-attempts-within-max", "attempts-left-while-sending", "send"),
    ("txn-single-attempt", "txn-unsent-until-done", "send"),
    ("fifo-one-in-consumption", None, "take"),
    ("fifo-one-in-consumption", "fifo-consumer-holds-lock", "take"),
    ("fifo-one-in-consumption", "fifo-lock-iff-worker", "dispatch"),
    ("fifo-one-in-consumption", "fifo-dropped-idle", "create_process_queue"),
    ("consumed-at-most-max", "deliveries-within-max", "take"),
    ("consumed-at-most-max", "ready-below-max", "receive"),
    ("consumed-at-most-max", "copy-within-deliveries", "take"),
    ("consumed-at-most-max", "fifo-consuming-below-max", "consume"),
    ("consumed-at-most-max", "fifo-cached-fresh", "take"),
    ("delivered-at-most-max", "ready-below-max", "receive"),
    ("standard-no-client-dlq", "standard-no-memo", "consume"),
    ("consumptions-within-max", "deliveries-within-max", "take"),
    ("consumptions-within-max", "ready-below-max", "receive"),
    ("consumptions-within-max", "copy-within-deliveries", "take"),
    ("consumptions-within-max", "fifo-consuming-below-max", "consume"),
    ("consumptions-within-max", "fifo-cached-fresh", "take"),
    ("consumptions-within-max", "fifo-no-change-invisible", "change_invisible"),
    ("consumptions-within-max", "fifo-delay-after-failure", "next_attempt_delay"),
    ("consumptions-within-max", "fifo-one-consumed-copy", "consume"),
    ("consumptions-within-max", "fifo-outcome-remembered", "consume"),
    # issue 31: a cached copy marked old would be taken and counted; a remembered outcome in standard
    # mode would settle a consumed copy that is still counted
    ("cache-counts-what-it-holds", "old-only-in-consumption", "take"),
    ("cache-counts-what-it-holds", "standard-no-memo", "consume"),
]


class _Only(OrderedConsumptionEncoding):
    """Only one action, and sizes fixed at 3 messages, 2 queues, 2 threads: the
    CTI search is then quantifier-free (decided reliably); a CTI of that size is
    a CTI of the unbounded claim too."""

    only = ""
    bound = {"msg": 3, "queue": 2, "thread": 2}

    def actions(self):
        return [a for a in super().actions() if a.name == self.only]

    def well_formed(self, s):
        return z3.And(super().well_formed(s), s.n == 3, s.Q == 2, s.T == 2)


@pytest.mark.parametrize("prop,aux,action", NECESSARY, ids=lambda x: str(x))
def test_without_a_strengthening_invariant_the_property_is_not_inductive(prop, aux, action):
    enc = _Only(model().config)
    enc.only = action
    assert aux is None or aux in enc.strengthening[prop]
    enc.strengthening = {prop: [x for x in enc.strengthening[prop] if aux is not None and x != aux]}
    r = symbolic.prove(enc, prop)  # z3's work budget per attempt, seeds retried: no clock in the verdict
    assert r.status == "not-inductive", r.detail
    assert r.cti["action"] == action and r.cti["before"] is not None and r.cti["after"] is not None


def test_the_cti_is_readable():
    enc = OrderedConsumptionEncoding(model().config)
    enc.strengthening = {}
    r = symbolic.prove(enc, "send-attempts-within-max")
    assert r.cti["action"] == "send" and r.cti["failing"] == ["send-attempts-within-max"]
    before, after = r.cti["before"], r.cti["after"]
    assert before["phase"] == "send" and before["requests"] == before["max_send_attempts"]
    assert after["requests"] == before["requests"] + 1


def test_well_formedness_is_itself_inductive():
    """prove() assumes well_formed in the pre-state: it must hold initially and be preserved."""
    enc = OrderedConsumptionEncoding(model().config)
    s, t = enc.fresh("s"), enc.fresh("t")
    sol = z3.Solver()
    sol.set("timeout", 20_000)
    sol.add(enc.init(s), z3.Not(enc.well_formed(s)), s.n >= 0, s.Q >= 1, s.T >= 0, s.maxa >= 1, s.maxs >= 1,
            s.cmsg >= 1, s.cbytes >= 1, s.batch >= 1,
            enc.each("msg", s.n, lambda m: z3.And(0 <= s.mq[m], s.mq[m] < s.Q), name="msg!wf"))
    assert sol.check() == z3.unsat
    for a in enc.actions():
        sol = z3.Solver()
        sol.set("timeout", 20_000)
        sol.add(enc.well_formed(s), enc._apply(a, s, t, ""), z3.Not(enc.well_formed(t)))
        assert sol.check() == z3.unsat, a.name


def test_standard_no_client_dlq_needs_only_that_standard_mode_remembers_nothing():
    enc = OrderedConsumptionEncoding(model().config)
    assert enc.strengthening["standard-no-client-dlq"] == ["standard-no-memo"]


def test_every_strengthening_is_necessary_for_its_property():
    """Each listed auxiliary has a test above that finds the counterexample to induction without it."""
    enc = OrderedConsumptionEncoding(model().config)
    named = {(p, a) for p, a, _ in NECESSARY if a is not None}
    assert named == {(prop, aux) for prop, auxs in enc.strengthening.items() for aux in auxs}
