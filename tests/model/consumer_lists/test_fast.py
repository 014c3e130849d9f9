"""The memoised successor function (model/consumer_lists/fast.py) against the readable one it replays.

``fast.py`` records each step section once per footprint and replays the recorded writes; if a
footprint left out a field that a step reads, two states with the same footprint would share a
wrong successor list.  These tests compare the two functions state by state: breadth-first over the
first states of every named configuration (the memos are shared across the states, so a wrong
replay shows as soon as a second state with the same footprint differs), and along random walks deep
into the largest ones.  A footprint that is too small is also caught while recording (a poisoned
read raises ``FootprintError``); ``test_a_read_outside_the_footprint_fails_loudly`` shows it does.
"""

from __future__ import annotations

import random
from collections import deque

import pytest

from conq.model.consumer_lists import fast
from conq.model.consumer_lists.model import ConsumerListsModel
from conq.model.engines.registry import load_model

#: states compared per configuration, breadth-first (a count, never a duration)
STATES_PER_CONFIG = 8_000


def _pair(config: str):
    m = load_model("consumer-lists", config, {})
    assert m._fast is not None, "the fast path is on by default"
    return m


@pytest.mark.parametrize("config", list(ConsumerListsModel.configs()))
def test_fast_successors_equal_the_readable_ones_breadth_first(config):
    m = _pair(config)
    seen, todo, compared = set(), deque(m.init_states()), 0
    while todo and compared < STATES_PER_CONFIG:
        s = todo.popleft()
        if s in seen:
            continue
        seen.add(s)
        want = m.spec_successors(s)
        got = m.successors(s)
        assert got == want, f"{config}: state {s} has different successors through fast.py"
        compared += 1
        todo.extend(t for _a, _o, t in want if t not in seen)
    assert compared == STATES_PER_CONFIG or not todo  # the budget was spent, or the graph ended
    assert sum(m._fast.memo_sizes()) > 0


@pytest.mark.parametrize("config", ["reference", "dynamic", "all-actors"])
def test_fast_successors_equal_the_readable_ones_on_deep_random_walks(config):
    m = _pair(config)
    rng = random.Random(18)
    compared = 0
    for _walk in range(40):
        s = m.init_states()[0]
        for _step in range(60):
            want = m.spec_successors(s)
            assert m.successors(s) == want, f"{config}: state {s} has different successors through fast.py"
            compared += 1
            s = rng.choice(want)[2]
    assert compared == 40 * 60


def test_a_read_outside_the_footprint_fails_loudly():
    # a section that reads a field its footprint leaves out must raise, never be memoised
    m = _pair("small")
    s = m.init_states()[0]
    width = len(s)

    def reads_everything(t, out):
        return sum(t[i] for i in range(width))

    key_of, memo, miss = fast._memo([0], width, reads_everything, lambda steps, r: (steps, r))
    with pytest.raises(fast.FootprintError):
        miss(s, key_of(s))
    assert memo == {}


def test_the_fast_path_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("CONQ_CL_FAST", "0")
    m = load_model("consumer-lists", "small", {})
    assert m._fast is None
    s = m.init_states()[0]
    assert m.successors(s) == m.spec_successors(s)


@pytest.mark.parametrize("config", ["reference", "all-actors", "look-then-unnotify", "notify-all", "upstream-flag-order"])
def test_a_checked_action_is_what_its_properties_say_on_the_real_states(config):
    # soundness of the explorer's skip (kernel.CheckedAction): on the real transition every
    # applicable step check holds, and a witness fires only if the action's class names it
    from conq.model.kernel import CheckedAction, Kind

    m = _pair(config)
    props = [p for p in m.property_list() if p.kind is Kind.ALWAYS_STEP]
    seen, todo, checked = set(), deque(m.init_states()), 0
    while todo and len(seen) < 4000:
        s = todo.popleft()
        if s in seen:
            continue
        seen.add(s)
        for a, o, t in m.successors(s):
            todo.append(t)
            if not isinstance(a, CheckedAction):
                continue
            checked += 1
            for p in props:
                if p.applies_to(a[0]):
                    assert p.check(s, a, o, t), f"{config}: {p.name} fails on a step marked checked: {a} from {s}"
                    assert not p.witness(s, a, o, t) or p.name in type(a).maybe, (config, p.name, a)
    assert checked > 1000


@pytest.mark.parametrize("config", ["notify-all", "no-priority-check", "acquire-no-cas"])
def test_the_explorer_finds_the_same_counterexamples_with_and_without_the_fast_path(monkeypatch, config):
    # configurations that violate a step property: the skip must not hide it or lengthen its path
    from conq.model.engines.explorer import explore

    runs = []
    for flag in ("1", "0"):
        monkeypatch.setenv("CONQ_CL_FAST", flag)
        r = explore(load_model("consumer-lists", config, {}), liveness=False)
        runs.append((r.states, r.transitions,
                     sorted((v.prop.name, v.status, v.path.steps if v.path else None) for v in r.verdicts)))
    assert runs[0] == runs[1]
    assert any(status == "violated" for _n, status, _p in runs[0][2])
