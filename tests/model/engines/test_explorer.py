"""The explorer on the toy model: pinned counts, shortest counterexamples,
witnesses, liveness under fairness."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from conq.model.engines.explorer import explore
from conq.model.kernel import Kind, ModelError, PropertyViolation, always

HERE = Path(__file__).parent
spec = importlib.util.spec_from_file_location("toy_counter", HERE / "toy_counter.py")
toy = importlib.util.module_from_spec(spec)
sys.modules["toy_counter"] = toy
spec.loader.exec_module(toy)


def model(name="racy", **kw):
    import dataclasses

    return toy.CounterModel(dataclasses.replace(toy.CounterModel.configs()[name], **kw))


def test_pinned_counts_racy():
    ex = explore(model())
    # Counted by hand, level by level: 1 + 2 + 3 + 4 + 3 states (the last level
    # holds the three end states: counter 2 twice, with different temps, and the
    # lost update, counter 1); 2 + 4 + 4 + 4 transitions.
    assert (ex.states, ex.transitions, ex.depth) == (13, 14, 4)
    assert ex.complete


def test_pinned_counts_three_clients_atomic():
    ex = explore(model("atomic", clients=3))
    # 2^3 done/idle combinations; each of the 12 (state, idle client) pairs is a step
    assert (ex.states, ex.transitions, ex.depth) == (8, 12, 3)
    assert ex.ok


def test_lost_update_found_with_shortest_trace():
    ex = explore(model())
    v = ex.verdict("no-lost-update")
    assert v.status == "violated"
    assert [a[0] for a in v.path.actions()] == ["read", "read", "write", "write"]
    assert v.path.last[2] == 1
    # the counterexample is replayable and re-raises the same property
    m = model()
    with pytest.raises(PropertyViolation, match="no-lost-update"):
        m.check_path(m.replay([(a, o) for a, o, _ in v.path.steps]))
    assert not ex.ok


def test_witnesses_reached_and_invariants_not_vacuous():
    ex = explore(model("atomic"))
    assert ex.verdict("no-lost-update").status == "holds"
    assert ex.verdict("counter-monotonic").status == "holds"
    assert ex.verdict("someone-done").status == "witnessed"
    assert ex.verdict("someone-done").path is not None


def test_vacuous_invariant_fails_the_run():
    m = model("atomic")
    extra = always("never-three", "the counter never reaches 3", lambda s: s[2] < 3, witness=lambda s: s[2] == 3)
    m._properties = tuple(m.property_list()) + (extra,)
    ex = explore(m)
    assert ex.verdict("never-three").status == "vacuous"
    assert not ex.ok


def test_liveness_holds_under_weak_fairness():
    assert explore(model("atomic")).verdict("all-finish").status == "holds"


def test_liveness_fair_cycle_found_with_lasso():
    ex = explore(model("aborting"))
    v = ex.verdict("all-finish")
    assert v.status == "violated"
    assert "fair cycle" in v.detail
    # the cycle repeats add/abort of some client, returning to where it started
    assert v.cycle is not None and len(v.cycle) >= 2
    assert v.cycle.last == v.cycle.init
    assert {a[0] for a in v.cycle.actions()} == {"add", "abort"}
    # the displayed cycle is itself fair: it does not starve either client
    assert {a[1] for a in v.cycle.actions()} == {0, 1}


def test_liveness_without_fairness_may_stop_anywhere():
    # With no fair step at all, nothing obliges the system to move: a run may stop in any
    # state, so "every client eventually finishes" fails even where a step is enabled.
    m = model("atomic")
    m.fair = lambda a, o: None
    v = explore(m).verdict("all-finish")
    assert v.status == "violated" and "no fair step is enabled" in v.detail


def test_liveness_holds_when_only_unfair_steps_remain_after_the_goal():
    # aborting is never forced: the fair cycle found above is the only way to fail
    v = explore(model("aborting")).verdict("all-finish")
    assert "fair cycle" in v.detail


def test_state_bound_reports_incomplete():
    ex = explore(model(clients=3), max_states=10)
    assert not ex.complete and "state bound" in ex.stop_reason and not ex.ok


def test_bad_override_is_a_clear_error():
    from conq.model.kernel import config_from_overrides

    with pytest.raises(ModelError, match="unknown config field 'nope'"):
        config_from_overrides(toy.CounterModel, toy.CounterConfig(), {"nope": "1"})
    with pytest.raises(ModelError, match="expected an integer"):
        config_from_overrides(toy.CounterModel, toy.CounterConfig(), {"clients": "two"})


def test_graph_has_every_transition():
    ex = explore(model())
    g = ex.graph()
    assert g.number_of_nodes() == ex.states
    assert g.number_of_edges() == ex.transitions
    assert all(k in (Kind.ALWAYS, Kind.ALWAYS_STEP, Kind.SOMETIMES, Kind.LEADS_TO) for k in (p.kind for p in ex.model.property_list()))
