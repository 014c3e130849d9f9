"""The consumer-lists model: pinned exhaustive runs, hypothesis walks, focused steps, replayable
counterexamples (spec/consumer-lists.md)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from conq import manifest
from conq.model.consumer_lists import ConsumerListsModel
from conq.model.consumer_lists.state import CF, INTERESTED, NOT_INTERESTED, NOTIFIED
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind, PropertyViolation
from conq.model.engines.registry import load_model
from conq.model.engines.stateful import state_machine

ENTRIES = [e for e in manifest.load() if e.model == "consumer-lists"]
_CACHE: dict = {}


def _explore(exp):
    key = exp.label
    if key not in _CACHE:
        m = load_model(exp.model, exp.config, exp.overrides)
        _CACHE[key] = explore(m, symmetry=exp.symmetry, liveness=exp.liveness)
    return _CACHE[key]


def test_manifest_has_entries():
    assert len(ENTRIES) >= 10
    assert {"small", "seed003-current", "seed003-earlier"} <= {e.config for e in ENTRIES}


@pytest.mark.parametrize(
    "exp", [pytest.param(e, marks=pytest.mark.slow) if e.slow else e for e in ENTRIES], ids=lambda e: e.label
)
def test_manifest_entry(exp):
    ex = _explore(exp)
    assert manifest.mismatches(exp, ex) == []


@pytest.mark.parametrize("exp", [e for e in ENTRIES if e.violated and not e.slow], ids=lambda e: e.label)
def test_counterexamples_replay(exp):
    ex = _explore(exp)
    m = ex.model
    for v in ex.violations:
        path = m.replay([(a, o) for a, o, _ in v.path.steps])
        assert path.last == v.path.last
        if v.prop.kind in (Kind.ALWAYS, Kind.ALWAYS_STEP):
            with pytest.raises(PropertyViolation) as info:
                m.check_path(path)
            assert info.value.prop.name == v.prop.name
        else:
            assert v.prop.trigger is not None
            assert any(v.prop.trigger(s) for s in path.states())
            assert not v.prop.check(path.last)
            if v.cycle is not None:
                cyc = m.replay([(a, o) for a, o, _ in v.cycle.steps], init=v.cycle.init)
                assert cyc.last == v.cycle.init  # the lasso closes
                assert all(not v.prop.check(s) for s in cyc.states())


# ---------------------------------------------------------------- hypothesis
TestReferenceSmall = state_machine(ConsumerListsModel(ConsumerListsModel.configs()["small"]), max_examples=60).TestCase
TestReference = state_machine(ConsumerListsModel(ConsumerListsModel.configs()["reference"]), max_examples=40).TestCase


@pytest.mark.parametrize(
    "config,prop",
    [("notify-all", "arrival-notifies-one-acquirer-and-every-browser"), ("no-priority-check", "priority-respected")],
)
def test_hypothesis_finds_variant_violation(config, prop):
    machine = state_machine(ConsumerListsModel(ConsumerListsModel.configs()[config]))
    with pytest.raises(PropertyViolation) as info:
        run_state_machine_as_test(machine, settings=settings(max_examples=1000, deadline=None, database=None))
    assert info.value.prop.name == prop


# ---------------------------------------------------------------- focused steps
def _model(name="small", **ov):
    return load_model("consumer-lists", name, ov)


def _node(m, s, c):
    return s[c * CF]


def test_arrival_notifies_the_higher_priority_consumer_only():
    m = _model()
    p = m.replay([("enqueue", 0), ("notify_consumers", 0)])
    assert p.steps[-1][1] == (0,)
    assert _node(m, p.last, 0) == NOTIFIED and _node(m, p.last, 1) == INTERESTED


def test_pull_unnotifies_before_looking_and_renotifies_on_success():
    m = _model()
    p = m.replay([("enqueue", 0), ("enqueue", 1), ("notify_consumers", 0), ("deliver_single_message", 0)])
    assert _node(m, p.last, 0) == INTERESTED  # moved back before the look
    p = m.replay([(a, o) for a, o, _ in p.steps] + [("find_next_available", 0), ("acquire", 0, 0), ("deliver", 0)])
    assert p.steps[-1][1] == 0
    assert _node(m, p.last, 0) == NOTIFIED  # more work: stays notified and pulls again


def test_lost_race_sends_consumer_to_back_of_interested():
    m = _model("same-priority")
    # c0 notified for m0, c1 (also interested) is notified when c0's pull finds nothing? No:
    # c0 is un-notified (back of Interested, behind c1) before it looks.
    p = m.replay([("enqueue", 0), ("notify_consumers", 0), ("deliver_single_message", 0)])
    assert p.last[m.IB] == (1, 0)


def test_suspension_of_higher_priority_hands_work_to_lower():
    m = _model()
    p = m.replay(
        [("enqueue", 0), ("notify_consumers", 0), ("suspend", 0, "flow"), ("target_flag", 0, False),
         ("set_notify_work_desired", 0, False)]
    )
    assert p.steps[-1][1] == (1,)
    assert _node(m, p.last, 0) == NOT_INTERESTED and _node(m, p.last, 1) == NOTIFIED


def test_upstream_flag_order_strands_the_message():
    m = _model("upstream-flag-order")
    p = m.replay(
        [("enqueue", 0), ("notify_consumers", 0), ("suspend", 0, "flow"), ("set_notify_work_desired", 0, False),
         ("target_flag", 0, False)]
    )
    # the queue asked the lower consumer while the higher one's flag still said "wants work"
    assert p.steps[-2][1] == ()
    assert _node(m, p.last, 1) == INTERESTED and not p.last[1 * CF + 2]


def test_steps_not_enabled_are_empty():
    m = _model()
    s = m.init_states()[0]
    assert list(m.step(s, ("acquire", 0, 0))) == []
    assert list(m.step(s, ("notify_consumers", 0))) == []


def test_idle_only_when_no_fair_step():
    m = _model()
    s = m.init_states()[0]
    acts = [a for a, _, _ in m.successors(s)]
    assert ("idle",) in acts and all(m.fair(a, None) is None for a in acts)
    t = m.replay([("enqueue", 0)]).last
    assert ("idle",) not in [a for a, _, _ in m.successors(t)]


def test_becoming_interested_notifies_the_consumer():
    m = _model()
    p = m.replay(
        [("suspend", 0, "flow"), ("target_flag", 0, False), ("set_notify_work_desired", 0, False),
         ("enqueue", 0), ("notify_consumers", 0)]
    )
    assert p.steps[-1][1] == (1,)  # the lower-priority consumer got it while c0 was suspended
    m2 = _model("reasons", env_budget=2)
    q = m2.replay([("suspend", 0, "tcp"), ("target_flag", 0, False), ("set_notify_work_desired", 0, False),
                   ("enqueue", 0), ("resume", 0, "tcp"), ("target_flag", 0, True)])
    q = m2.replay([(a, o) for a, o, _ in q.steps] + [("set_notify_work_desired", 0, True)])
    assert q.steps[-1][1] == (0,)
    assert _node(m2, q.last, 0) == NOTIFIED


def test_seed003_earlier_rule_strands_a_message():
    """Seed 003: with one pull per notification a consumer left Notified never pulls again."""
    cur = explore(_model("seed003-current"))
    old = explore(_model("seed003-earlier"))
    assert cur.ok
    v = old.verdict("no-lost-wakeup")
    assert v.status == "violated"
    assert old.verdict("keeps-pulling-while-messages").status == "violated"


def test_credit_exhaustion_makes_consumer_not_interested():
    m = _model()
    p = m.replay([("enqueue", 0), ("notify_consumers", 0), ("deliver_single_message", 0), ("find_next_available", 0),
                  ("acquire", 0, 0), ("deliver", 0), ("target_flag", 0, False), ("set_notify_work_desired", 0, False)])
    assert _node(m, p.last, 0) == NOT_INTERESTED and p.last[0 * CF + 4] == 0
