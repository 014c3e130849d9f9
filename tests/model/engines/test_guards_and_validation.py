"""The kernel's configuration hook, the models' action vocabularies, and the explorer's
time and memory guards (issue 13, items 8, 10 and 13).  No assertion depends on the clock:
a guard test asserts that the limit fired and the run ended, never how fast."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import time
from pathlib import Path

import pytest

from conq.model.engines.explorer import SearchProgress, explore, rss_bytes
from conq.model.kernel import ConfigError, ModelError, config_from_overrides, config_type_problems

HERE = Path(__file__).parent
spec = importlib.util.spec_from_file_location("toy_counter", HERE / "toy_counter.py")
toy = importlib.util.module_from_spec(spec)
sys.modules["toy_counter"] = toy
spec.loader.exec_module(toy)


def model(name="racy", **kw):
    return toy.CounterModel(dataclasses.replace(toy.CounterModel.configs()[name], **kw))


# ---------------------------------------------------------------- configuration hook
def test_model_init_validates_through_the_hook():
    with pytest.raises(ConfigError, match="toy-counter: bad configuration: clients: must be at least 1, got 0") as info:
        model(clients=0)
    assert info.value.problems == [("clients", "must be at least 1, got 0 (with no client nothing happens)")]
    with pytest.raises(ConfigError, match="clients: must be an integer, got 'two'"):
        model(clients="two")
    with pytest.raises(ConfigError, match="atomic: must be a boolean, got 1"):
        model(atomic=1)


def test_overrides_are_validated_and_name_the_field():
    base = toy.CounterModel.configs()["racy"]
    assert config_from_overrides(toy.CounterModel, base, {"clients": "3"}).clients == 3
    with pytest.raises(ConfigError) as info:
        config_from_overrides(toy.CounterModel, base, {"clients": -4})
    assert info.value.problems[0][0] == "clients" and isinstance(info.value, ModelError)
    with pytest.raises(ConfigError, match="nope: unknown config field 'nope'"):
        config_from_overrides(toy.CounterModel, base, {"nope": 1})


def test_type_problems_are_judged_against_the_defaults():
    from conq.model.consumer_lists.state import ConsumerListsConfig

    bad = dataclasses.replace(ConsumerListsConfig(), messages=True, consumers=[[1, True]], held="yes", pull_rule="never")
    fields = [p.partition(":")[0] for p in config_type_problems(bad)]
    assert fields == ["consumers", "messages", "held", "pull_rule"]
    assert config_type_problems(dataclasses.replace(ConsumerListsConfig(), pull_rule="once")) == []  # a value of the enum


# ---------------------------------------------------------------- action vocabularies
def test_every_action_the_models_take_is_declared():
    """ACTIONS (what a trace may name) covers every action of every shipped configuration,
    at the model's granularity and at its call-level view's."""
    from conq.conformance.views import call_view
    from conq.model.engines.registry import load_model, model_class, model_names

    for name in model_names():
        cls = model_class(name)
        assert cls.ACTIONS, name
        for cname in cls.configs():
            m = load_model(name, cname)
            for view in {id(m): m, id(v := call_view(m)): v}.values():
                ex = explore(view, max_states=250, liveness=False, keep_edges=True)
                for a, _ in ex.labels:
                    assert cls.action_problem(a) is None, (name, cname, a, cls.action_problem(a))
    assert "unknown action 'nope'" in model_class("consumer-lists").action_problem(("nope", 1))
    assert "takes 2 parameters (p, k), got 1" in model_class("recovery-deferral").action_problem(("poll", 0))


# ---------------------------------------------------------------- guards
class Hanging(toy.CounterModel):
    """Hangs in one place: its initial states, one state's successors, or a fairness query of
    the liveness analysis."""

    hang_in = ""

    def init_states(self):
        if self.hang_in == "init":
            while True:
                pass
        return super().init_states()

    def successors(self, s):
        if self.hang_in == "successors" and s[2] == 1:
            while True:
                pass
        return super().successors(s)

    def fair(self, action, observation):
        if self.hang_in == "analysis":
            while True:
                pass
        return super().fair(action, observation)


@pytest.mark.parametrize("where", ["init", "successors", "analysis"])
def test_time_guard_interrupts_a_call_that_never_returns(where):
    m = Hanging(toy.CounterModel.configs()["atomic"])
    m.hang_in = where
    ex = explore(m, max_seconds=0.2)
    assert not ex.complete and ex.stop_reason.startswith("time bound 0.2s reached"), ex.stop_reason
    assert not ex.ok and not ex.violations
    if where == "init":
        assert ex.states == 0
    if where == "analysis":
        assert ex.stop_reason.endswith("(in the liveness analysis)")
        assert ex.verdict("all-finish").status == "skipped"
    # the interpreter is left as it was: the next run is complete and counts the same
    again = explore(model("atomic", clients=3), max_seconds=600)
    assert again.complete and (again.states, again.transitions) == (8, 12)


def test_a_cut_search_gives_no_verdict_on_what_it_did_not_reach():
    ex = explore(model("atomic", clients=3), max_states=2)
    assert not ex.complete and "state bound 2 reached" in ex.stop_reason
    assert ex.verdict("no-lost-update").status == "unknown"
    assert not any(v.status in ("vacuous", "unreached") for v in ex.verdicts)


class BigStates(toy.CounterModel):
    """A chain of states, each holding a fresh block of memory."""

    def init_states(self):
        return [(0, b"")]

    def successors(self, s):
        return [(("grow",), None, t) for _, t in self.step(s, ("grow",))]

    def step(self, s, action):
        n = s[0] + 1
        return [(None, (n, b"x" * (8 << 20) + bytes([n % 256])))]

    def properties(self):
        from conq.model.kernel import always

        return [always("bounded", "the chain stays below a million", lambda s: s[0] < 10**6, witness=lambda s: s[0] > 0)]


def test_memory_guard_stops_the_search():
    limit = rss_bytes() / 2**20 + 100
    ex = explore(BigStates(), max_memory_mb=limit)
    assert not ex.complete and ex.stop_reason.startswith(f"memory bound {limit:g} MB reached"), ex.stop_reason
    assert 1 < ex.states < 10**6


def test_progress_is_reported_from_the_search():
    seen: list[SearchProgress] = []

    class Slow(toy.CounterModel):
        def successors(self, s):
            time.sleep(0.02)
            return super().successors(s)

    ex = explore(Slow(dataclasses.replace(toy.CounterModel.configs()["atomic"], clients=5)),
                 progress=seen.append, progress_interval=0.05)
    assert ex.complete and (ex.states, ex.depth) == (32, 5)
    assert seen and all(isinstance(p, SearchProgress) and 0 < p.states <= 32 for p in seen)
    assert seen[-1].rss_bytes is None or seen[-1].rss_bytes > 0
