"""The consumer-lists model: pinned exhaustive runs, hypothesis walks, focused steps, replayable
counterexamples (spec/consumer-lists.md)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from conq import manifest
from conq.model.consumer_lists import ConsumerListsModel
from conq.conformance.consumer_lists.calls import ConsumerListsCalls
from conq.model.consumer_lists.state import ACQ, AVAILABLE, CF, DELETED, F_WAKE, INTERESTED, NOT_INTERESTED, NOTIFIED
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


def _breaks(prop, path) -> bool:
    """``prop`` (an always or always-step claim) fails somewhere along ``path``."""
    if prop.kind is Kind.ALWAYS:
        return not prop.check(path.init) or any(not prop.check(t) for _a, _o, t in path.steps)
    prev = path.init
    for a, o, t in path.steps:
        if not prop.check(prev, a, o, t):
            return True
        prev = t
    return False


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
            # the first claim the path breaks is one the manifest expects broken (an upstream variant's
            # counterexample may break another of its expected claims first), and the path breaks this one
            assert info.value.prop.name in exp.violated
            assert _breaks(v.prop, path)
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


# ---------------------------------------------------------------- the other actors (issue 16)
NEW_ACTIONS = {"delete_entry", "delayed_acquisition", "reject", "reset_sub_pointers_for_groups"}
#: the configurations the conformance suite drives (tests/conformance/consumer_lists)
CONFORMANCE_CONFIGS = ("small", "reference", "held", "dynamic", "reasons", "same-priority")


def _status(m, s, j):
    return s[m.MB + 2 * j]


def test_new_actors_are_off_where_the_conformance_suite_drives():
    for name in CONFORMANCE_CONFIGS:
        cfg = ConsumerListsModel.configs()[name]
        assert not (cfg.expiry or cfg.reject or cfg.groups), name
    m = _model("small", env_budget=2)
    seen = set()
    todo = [m.init_states()[0]]
    visited = set(todo)
    while todo:
        s = todo.pop()
        for a, _, t in m.successors(s):
            seen.add(a[0])
            if t not in visited:
                visited.add(t)
                todo.append(t)
    assert not seen & NEW_ACTIONS


def _call_graph(model):
    view = ConsumerListsCalls(model)
    init = view.init_states()[0]
    seen, todo, edges = {init}, [init], set()
    while todo:
        s = todo.pop()
        for a, o, t in view.successors(s):
            edges.add((s, a, o, t))
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return edges


@pytest.mark.parametrize("config", ["small", "same-priority", "held", "reasons"])
def test_the_removal_rule_change_is_invisible_to_the_call_level_view(config):
    """Issue 16 changed removeConsumer to hand a wake-up over whatever the removed consumer's state;
    the call-level view (one call at a time, every call run to quiescence) cannot tell the two rules
    apart, so the implementation's conformance is unaffected."""
    new = _call_graph(_model(config, env_budget=2))
    old = _call_graph(_model(config, env_budget=2, handover_only_if_notified=True))
    assert new == old


def test_upstream_delete_strands_the_consumer_that_lost_the_race():
    steps = [("enqueue", 0), ("notify_consumers", 0), ("enqueue", 1), ("notify_consumers", 1),
             ("deliver_single_message", 0), ("find_next_available", 0), ("delete_entry", 0), ("acquire", 0, 0),
             ("no_message", 0)]
    up = _model("upstream-delete")
    p = up.replay(steps)
    s = p.last
    # c0 lost its acquire to the delete and handed over to others only: c1 is kept back by c0's
    # priority, c0 is told nothing; m1 waits with two consumers that want it
    assert _status(up, s, 0) == DELETED and _status(up, s, 1) == AVAILABLE
    assert p.steps[6][1] == () and p.steps[-1][1] == ()
    assert not s[0 * CF + F_WAKE] and not s[1 * CF + F_WAKE]
    assert _node(up, s, 0) == INTERESTED and _node(up, s, 1) == INTERESTED
    # reference: the deleting thread notifies one interested consumer (here the loser, c0)
    ref = _model("expiry")
    q = ref.replay(steps[:7])
    assert q.steps[-1][1] == (0,)
    q = ref.replay([(a, o) for a, o, _ in q.steps] + [("acquire", 0, 0), ("no_message", 0), ("deliver_single_message", 0),
                                                     ("find_next_available", 0)])
    assert q.steps[-1][1] == 1  # c0 pulls again and finds m1


def test_a_delete_waits_for_an_unsent_acquisition_and_for_a_held_entry():
    m = _model("all-actors")
    p = m.replay([("enqueue", 0), ("notify_consumers", 0), ("deliver_single_message", 0), ("find_next_available", 0),
                  ("acquire", 0, 0), ("delete_entry", 0)])
    s = p.last
    assert _status(m, s, 0) == ACQ + 0 and (s[m.DP] >> 0) & 1  # acquired, not yet sent: not stealable
    assert ("delayed_acquisition", 0) not in m.actions(s)
    p = m.replay([(a, o) for a, o, _ in p.steps] + [("deliver", 0), ("delayed_acquisition", 0)])
    assert p.steps[-2][1] == 0  # sent while still held by c0 ...
    assert _status(m, p.last, 0) == DELETED and not p.last[m.DP]  # ... then stolen and deleted
    q = m.replay([("enqueue_held", 0), ("delete_entry", 0), ("unhold", 0)])
    assert _status(m, q.last, 0) == AVAILABLE and ("delayed_acquisition", 0) in m.actions(q.last)


def test_a_rejected_entry_goes_to_another_consumer_never_back():
    m = _model("reject")
    p = m.replay([("enqueue", 0), ("notify_consumers", 0), ("deliver_single_message", 0), ("find_next_available", 0),
                  ("acquire", 0, 0), ("deliver", 0), ("reject", 0, 0), ("notify_consumers", 0)])
    s = p.last
    assert s[m.REJ + 0] == 1 and _status(m, s, 0) == AVAILABLE
    assert p.steps[-1][1] == (1,)  # the walk passes over c0, which rejected it
    p = m.replay([(a, o) for a, o, _ in p.steps] + [("deliver_single_message", 0), ("find_next_available", 0)])
    assert p.steps[-1][1] is None  # c0 (still pulling) does not see it again
    p = m.replay([(a, o) for a, o, _ in p.steps] + [("deliver_single_message", 1), ("find_next_available", 1),
                                                   ("acquire", 1, 0)])
    assert _status(m, p.last, 0) == ACQ + 1


def test_groups_keep_an_entry_for_its_owner_and_the_policies_part_on_release():
    for name, freed in (("groups-shared", True), ("groups-assigned", False)):
        m = _model(name)
        p = m.replay([("enqueue", 0), ("enqueue", 1), ("notify_consumers", 0), ("deliver_single_message", 0),
                      ("find_next_available", 0), ("acquire", 0, 0), ("deliver", 0)])
        s = p.last
        assert s[m.GOWN] == 1  # the group is c0's
        assert m._next_for(list(s), 1) is None  # m1 is kept from c1
        p = m.replay([(a, o) for a, o, _ in p.steps] + [("release", 0)])
        # shared groups are given up with the last entry held; a standard group stays assigned
        assert (p.last[m.GOWN] == 0) == freed, name
        assert (m._next_for(list(p.last), 1) == 0) == freed, name


def test_upstream_shared_group_stays_with_a_consumer_whose_acquire_failed():
    steps = [("enqueue", 0), ("notify_consumers", 0), ("deliver_single_message", 0), ("find_next_available", 0),
             ("suspend", 0, "flow"), ("enqueue", 1), ("notify_consumers", 1), ("delete_entry", 0), ("acquire", 0, 0)]
    up = _model("upstream-group-acquire")
    s = up.replay(steps).last
    assert s[up.GOWN] == 1 and not s[up.GCNT]  # c0 owns the group and holds none of its entries
    assert up._next_for(list(s), 1) is None  # so m1 is kept from c1
    ref = _model("upstream-group-acquire", group_assign_with_acquire=True)
    s = ref.replay(steps).last
    assert s[ref.GOWN] == 0 and ref._next_for(list(s), 1) == 1


def test_a_consumer_closed_while_it_pulls_takes_no_group():
    steps = [("enqueue", 0), ("notify_consumers", 0), ("deliver_single_message", 0), ("find_next_available", 0),
             ("remove_consumer", 0), ("acquire", 0, 0)]
    ref = _model("groups-assigned")
    p = ref.replay(steps)
    assert p.steps[-1][1] is False and p.last[ref.GOWN] == 0
    up = _model("upstream-assigned-group-closed")
    p = up.replay(steps + [("deliver", 0)])
    assert p.steps[-2][1] is True and p.last[up.GOWN] == 1  # the group stays with the closed c0 for ever
    assert _status(up, p.last, 0) == AVAILABLE and up._next_for(list(p.last), 1) is None


TestAllActors = state_machine(ConsumerListsModel(ConsumerListsModel.configs()["all-actors"]), max_examples=25).TestCase
TestAllActorsAssigned = state_machine(
    ConsumerListsModel(ConsumerListsModel.configs()["all-actors-assigned"]), max_examples=15
).TestCase
