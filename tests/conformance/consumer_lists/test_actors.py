"""The other actors of consumer lists (issue 16) at the conformance layer: the call-level view's
``delete_entry`` and ``reject`` calls and its settling of the owed steps, the driver's two delete
paths (management delete, housekeeping expiry), the reference conforming on the actor
configurations, the races engine, and the mutants of the new paths."""

from __future__ import annotations

from collections import deque

import pytest

from conq.conformance.adapters import InProcess
from conq.conformance.checker import Checker
from conq.conformance.consumer_lists import build_corpus, mutants, races
from conq.conformance.consumer_lists.calls import SETTLE_RANK, observation_of_view
from conq.conformance.consumer_lists.driver import ConsumerListsDriver
from conq.conformance.mutation import Budget
from conq.conformance.suite import run_suite
from conq.conformance.views import conformance_model
from conq.conformance import generate
from conq.model.engines.registry import load_model

NEW_MUTANTS = ("group-owner-ignored", "delete-no-notify", "acquire-deleted", "delete-steals-unsent",
               "unhold-drops-delete", "reject-redelivers", "shared-group-never-freed", "group-reset-skipped",
               "assigned-group-kept")


def _view_states(model):
    seen = set(model.init_states())
    todo = deque(seen)
    while todo:
        s = todo.popleft()
        for _, _, t in model.successors(s):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def _model_states(base):
    seen = set(base.init_states())
    todo = deque(seen)
    while todo:
        s = todo.popleft()
        for _, _, t in base.successors(s):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


# -- the call-level view ---------------------------------------------------------------------------
@pytest.mark.parametrize("config", ["expiry", "reject", "groups-shared", "groups-assigned"])
def test_every_view_state_is_a_settled_model_state(config):
    view = conformance_model("consumer-lists", config, {"env_budget": 1})
    states = _view_states(view)
    model = _model_states(view.base)
    assert states <= model, "a call-level state the model cannot reach"
    names = set()
    for s in states:
        # settled: no owed step is left enabled at the end of a call
        owed = [a for a, _, _ in view.base.successors(s) if a[0] in SETTLE_RANK]
        assert not owed, (owed, view.base.view(s))
        names |= {a[0] for a, _, _ in view.successors(s)}
    expected = {"expiry": "delete_entry", "reject": "reject", "groups-shared": "pull", "groups-assigned": "pull"}
    assert expected[config] in names
    assert not names & {"delayed_acquisition", "reset_sub_pointers_for_groups", "notify_consumers"}


def _after(view, calls):
    s = view.init_states()[0]
    obs = []
    for call in calls:
        [(o, s)] = view.step(s, call)
        obs.append(o)
    return s, obs


def test_delete_entry_observes_the_owner_none_or_held_and_completes_on_unhold():
    view = conformance_model("consumer-lists", "expiry", {"held": True, "env_budget": 2})
    # available: deleted, nobody else has anything to be told of
    s, obs = _after(view, [("enqueue", 0), ("delete_entry", 0)])
    assert obs == [(None, (0,)), (None, ())] and view.observe(s)["messages"][0] == "deleted"
    # sent acquisition: stolen from its consumer, whose id is the result
    s, obs = _after(view, [("enqueue", 0), ("pull", 0), ("delete_entry", 0)])
    assert obs[1][0] == 0 and obs[2][0] == 0 and view.observe(s)["messages"][0] == "deleted"
    # held: the delete waits, and the unhold completes it instead of offering the entry
    s, obs = _after(view, [("enqueue_held", 0), ("delete_entry", 0)])
    assert obs[1] == ("held", ()) and view.observe(s)["delete_waiting"] == [0]
    assert ("delete_entry", 0) not in view.actions(s)  # one delete at a time
    s, obs = _after(view, [("enqueue_held", 0), ("delete_entry", 0), ("unhold", 0)])
    assert obs[2] == (None, ()), "an entry a delete waited for is deleted, nobody is notified for it"
    assert view.observe(s)["messages"][0] == "deleted" and view.observe(s)["delete_waiting"] == []


def test_reject_offers_the_entry_to_the_others_only():
    view = conformance_model("consumer-lists", "reject", {"env_budget": 2})
    s, obs = _after(view, [("enqueue", 0), ("pull", 0), ("reject", 0, 0)])
    assert obs[2][0] is None
    o = view.observe(s)
    assert o["rejected_by"][0] == [0] and o["messages"][0] == "available"
    # consumer 0 never takes it again: every pull of consumer 0 from here delivers nothing
    for a, (result, _), _ in view.successors(s):
        if a == ("pull", 0):
            assert result is None


def test_observation_of_view_carries_the_actor_keys_only_when_on():
    plain = conformance_model("consumer-lists", "small")
    assert set(plain.observe(plain.init_states()[0])) == {"consumers", "messages", "interested"}
    every = conformance_model("consumer-lists", "all-actors")
    o = every.observe(every.init_states()[0])
    assert set(o) == {"consumers", "messages", "interested", "rejected_by", "delete_waiting", "groups",
                      "group_reset_owed"}
    assert o["groups"] == [None] and o["group_reset_owed"] is False
    assert observation_of_view(every.view(every.init_states()[0])) == o


# -- the driver and the reference ------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_driver_deletes_by_expiry_or_management_with_the_same_observations(seed):
    model = conformance_model("consumer-lists", "all-actors", {"env_budget": 2})
    calls = [("enqueue_held", 0), ("enqueue", 1), ("pull", 0), ("credit", 0), ("unhold", 0), ("reject", 0, 1),
             ("delete_entry", 0)]
    run = Checker(model, InProcess(ConsumerListsDriver)).replay(calls, seed)
    assert run.ok, run.divergence.describe()
    # DEV-016: the delete hands the way to consumer 1 (rejected m1 is only its to take)
    assert run.observations[-1] == (None, (1,))
    d = ConsumerListsDriver({**model.base.config.__dict__, "groups": [0, 0], "group_policy": "shared",
                             "consumers": [[2, True], [1, True]]}, seed)
    assert d.delete_by_expiry is (seed % 2 == 0)


@pytest.mark.parametrize("config", build_corpus.ACTOR_CONFIGS)
@pytest.mark.parametrize("mode", ["random", "coverage"])
def test_reference_conforms_with_the_other_actors(config, mode):
    res, model = run_suite("consumer-lists", config_name=config, overrides={"env_budget": 2}, traces=40, seed=11,
                           length=40, mode=mode)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    assert res.steps > 150


@pytest.mark.parametrize("seed", [0, 1])
def test_reference_conforms_on_every_short_trace_with_deletes(seed):
    model = conformance_model("consumer-lists", "expiry", {"env_budget": 2})
    total = generate.count_exhaustive(model, 4)
    res, model = run_suite("consumer-lists", config_name="expiry", overrides={"env_budget": 2}, traces=total,
                           length=4, mode="exhaustive", seed=seed)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    assert res.traces == total > 200


def test_actor_configurations_exist_and_switch_their_actor_on():
    names = load_model("consumer-lists").configs()
    for cfg in build_corpus.ACTOR_CONFIGS:
        c = names[cfg]
        assert c.expiry or c.reject or c.groups, cfg
    assert set(mutants.ACTOR_CONFIGS) == set(build_corpus.ACTOR_CONFIGS)


# -- the races engine and the mutants of the new paths ----------------------------------------------
def test_races_first_levels_pass_on_the_reference():
    res = races.explore_races(400)
    assert res.failure is None, res.failure
    assert res.explored == 400 and set(res.per_scenario) == set(races.SCENARIOS)


@pytest.mark.slow
def test_races_engine_passes_the_reference_on_its_whole_budget():
    det = mutants.engine_races(Budget())
    assert not det.killed and not det.capped, det.detail
    assert det.spent == f"{mutants.RACE_SCHEDULES} schedules"


@pytest.mark.parametrize("name", [m for m in NEW_MUTANTS if m != "delete-no-notify"])
def test_races_engine_kills_the_new_mutants(name):
    with mutants.MUTANTS[name].applied():
        det = mutants.engine_races(Budget())
    assert det.killed and not det.capped, det.detail
    assert int(det.spent.split()[0]) <= 300, det.spent  # in the first levels: 0 or 1 deviation


def test_acquire_deleted_loses_the_race_with_expiry_in_a_readable_schedule():
    with mutants.MUTANTS["acquire-deleted"].applied():
        res = races.explore_races(200)
        assert res.failure and "delete took while it was available" in res.failure
        name = res.failure.split(",")[0]
        assert races.replay(name, res.schedule) is not None  # the schedule replays the failure
    assert races.replay(name, res.schedule) is None  # ... and only with the bug


@pytest.mark.parametrize("name, config, calls", [
    # DEV-016 visible at call level: c0 rejected m1, c0 is notified for m0, c1 is held back by c0;
    # deleting m0 must tell c1 (upstream, and the mutant, tell nobody)
    ("delete-no-notify", "all-actors", [("enqueue_held", 0), ("enqueue", 1), ("pull", 0), ("credit", 0),
                                        ("unhold", 0), ("reject", 0, 1), ("delete_entry", 0)]),
    # c0 owns the standard group, released m0 and is removed: the reset tells c1 of m0
    ("group-reset-skipped", "groups-assigned", [("enqueue", 0), ("pull", 0), ("release", 0), ("remove_consumer", 0)]),
    # c0 holds m0 of the shared group: m1 of that group is for nobody else
    ("group-owner-ignored", "groups-shared", [("enqueue", 0), ("pull", 0), ("enqueue", 1)]),
    ("reject-redelivers", "reject", [("enqueue", 0), ("pull", 0), ("reject", 0, 0)]),
    ("unhold-drops-delete", "expiry", [("enqueue_held", 0), ("delete_entry", 0), ("unhold", 0)]),
])
def test_call_level_counterexamples_of_the_new_mutants(name, config, calls):
    model = conformance_model("consumer-lists", config, {"env_budget": 2, "held": True} if config == "expiry"
                              else {"env_budget": 2})
    ok = Checker(model, InProcess(ConsumerListsDriver)).replay(calls, 1)
    assert ok.ok, ok.divergence.describe()
    with mutants.MUTANTS[name].applied():
        run = Checker(model, InProcess(ConsumerListsDriver)).replay(calls, 1)
    assert not run.ok and run.divergence.step == len(calls), run.divergence and run.divergence.describe()


def test_the_catalogue_has_the_new_mutants_and_engines():
    assert set(NEW_MUTANTS) == set(build_corpus.ACTOR_MUTANTS) <= set(mutants.MUTANTS)
    assert {"races", "pct"} <= set(mutants.ENGINES) and "stress-actors" in mutants.SOAK_ENGINES


def test_the_port_reference_describes_the_new_calls():
    from conq.catalog import repo_root

    text = (repo_root() / "spec" / "ports" / "consumer-lists.md").read_text()
    assert '### `["delete_entry", j]`' in text and '### `["reject", c, j]`' in text
    for word in ("delete_waiting", "rejected_by", "reset-groups", "accept(c, j)", "`\"held\"`"):
        assert word in text, word


@pytest.mark.parametrize("name", ["pull-vs-delete-message", "two-consumers-vs-delete-message"])
def test_an_administrative_delete_is_a_delete_entry_every_schedule_with_one_deviation(name):
    """Issue 32: ``Queue.delete_message`` took the entry at once in any state and notified nobody: the
    consumer that had just found the entry was left Interested with the next message waiting (a lost
    wake-up), or was sent an entry it no longer held (the delete met its acquisition unsent).  It is
    upstream's ``deleteEntry`` now (REFERENCE.md section 4), checked like ``delete_entry`` on every
    schedule with at most one deviation (the races engine goes on to two)."""
    from conq.impl.scheduling import BoundedExploration

    ex = BoundedExploration(races.SCENARIOS[name], bound=1, **races.OPTIONS)
    for depth in (0, 1):
        for trial in ex.level(depth):
            assert not trial.failed, f"{[str(d) for d in trial.schedule]}: {trial.error.__cause__ or trial.error}"
    assert ex.counts[1] > 10 and ex.complete == {0, 1}
