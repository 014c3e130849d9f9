"""The unseen-state estimate of a replay campaign (conformance/coverage_estimate.py): Chao2's
arithmetic and edge cases, its interval's calibration on synthetic incidence data where its
assumptions hold (and its lower-bound behaviour where they do not), and its validation against a
configuration whose exhaustive count is known (consumer-lists/reference: 351 call-level states).
Budgets are counts (replicates, traces, seeds); nothing depends on the clock."""

from __future__ import annotations

import random

import pytest

from conq.conformance.coverage_estimate import (
    chao2,
    frequency_counts,
    growth_at_powers_of_two,
    rare_classes,
    sample_unit,
    unit_of,
    units_in,
)
from conq.conformance.spark_replay import incidence_in_process


def test_chao2_bias_corrected_point_estimate_and_interval():
    # 20 items: 10 met in one unit, 5 in two, 5 in three; 20 units
    e = chao2({1: 10, 2: 5, 3: 5}, units=20)
    assert (e.observed, e.q1, e.q2, e.units) == (20, 10, 5, 20)
    # S_obs + (m-1)/m * Q1 (Q1-1) / (2 (Q2+1)) = 20 + 0.95 * 90 / 12
    assert e.estimate == pytest.approx(20 + 0.95 * 90 / 12)
    assert e.observed < e.low < e.estimate < e.high  # log-normal: the interval never dips below what was seen
    assert e.completeness == pytest.approx(20 / e.estimate) and e.completeness_low < e.completeness
    # sample coverage: 1 - Q1/U * (m-1)Q1 / ((m-1)Q1 + 2Q2), U = 10 + 2*5 + 3*5 incidences
    assert e.sample_coverage == pytest.approx(1 - 10 / 35 * (19 * 10 / (19 * 10 + 2 * 5)))
    assert not e.far_from_saturation and chao2({1: 8, 2: 1}, units=5).far_from_saturation
    wider = chao2({1: 10, 2: 5, 3: 5}, units=20, conf=0.99)
    assert wider.low < e.low and wider.high > e.high and wider.estimate == e.estimate


def test_chao2_without_uniques_estimates_nothing_unseen():
    e = chao2({2: 4, 5: 10}, units=8)
    assert e.estimate == e.observed == 14 and e.low == 14 and e.high >= 14 and e.sample_coverage == 1.0
    one = chao2({1: 1, 3: 4}, units=8)  # a single unique: Q1 (Q1-1) = 0
    assert one.estimate == 5 and one.low == 5
    assert chao2({}, units=3).estimate == 0
    assert chao2({1: 7}, units=1).estimate == 7  # one unit: (m-1)/m = 0, no extrapolation possible


def test_chao2_rejects_impossible_input():
    with pytest.raises(ValueError, match="units"):
        chao2({1: 3}, units=0)
    with pytest.raises(ValueError, match="1..4"):
        chao2({5: 1}, units=4)  # met in more units than there are
    with pytest.raises(ValueError, match="conf"):
        chao2({1: 3}, units=4, conf=1.0)


def _simulate(truth: int, units: int, probs: list[float], replicates: int, seed: int) -> tuple[float, float]:
    rng = random.Random(seed)
    covered, total = 0, 0.0
    for _ in range(replicates):
        incid = [sum(rng.random() < p for _ in range(units)) for p in probs]
        e = chao2(frequency_counts(incid), units)
        covered += e.brackets(truth)
        total += e.estimate
    return covered / replicates, total / replicates


def test_chao2_interval_is_calibrated_when_detection_is_homogeneous():
    """200 items, each met by a unit with probability 0.05, 30 units (about 4 in 5 items seen):
    the estimate is unbiased and its 95% interval holds the truth in most replicates."""
    coverage, mean = _simulate(200, 30, [0.05] * 200, replicates=120, seed=1)
    assert mean == pytest.approx(200, rel=0.03)
    assert coverage >= 0.85, coverage


def test_chao2_is_a_lower_bound_under_heterogeneous_detection():
    """Items of very unequal detectability (as the states of uniform random walks are): Chao2
    underestimates -- it is a lower bound (Chao 1987), and the report says so."""
    rng = random.Random(3)
    probs = [rng.choice([0.005, 0.02, 0.2]) for _ in range(200)]
    _coverage, mean = _simulate(200, 30, probs, replicates=60, seed=4)
    assert mean < 200 * 0.95


def test_growth_points_and_units():
    first = [(0, 3), (1, 2), (5, 4), (9, 1)]  # (first trace index, states first seen there)
    assert growth_at_powers_of_two(first, 10) == [(1, 3), (2, 5), (4, 5), (8, 9), (10, 10)]
    assert growth_at_powers_of_two([], 1) == [(1, 0)]
    assert sample_unit("coverage", 64) == "block of 64 traces" and sample_unit("random", 64) == "trace"
    assert unit_of("coverage", 130, 64) == 2 and unit_of("random", 130, 64) == 130
    assert units_in("coverage", 130, 64) == 3 and units_in("random", 130, 64) == 130


def test_rare_classes_rank_by_visits_per_state():
    rows = [("a", 1, 3), ("a", 5, 1), ("b", 2, 2), ("c", 10, 1)]  # (kind, incidence, states)
    out = rare_classes(rows)
    assert [r["class"] for r in out] == ["b", "a", "c"]
    assert out[1] == {"class": "a", "states": 4, "seen_once": 3, "unit_visits": 8}


def test_known_targets_beyond_the_explorer_skip_the_graph():
    from conq.conformance.spark_replay import BEYOND_EXPLORER, ReplayParams, graph_out_of_reach
    from conq.conformance.views import conformance_model

    four = [[2, True], [1, True], [1, False], [1, True]]
    big = ReplayParams(model="consumer-lists", config_name="reference", overrides={"consumers": four, "env_budget": -1})
    assert "unbounded environment" in graph_out_of_reach(big)
    # from the command line every --set value is a string: the resolved configuration is compared
    assert graph_out_of_reach(ReplayParams(model="consumer-lists", config_name="reference",
                                           overrides={"env_budget": "-1", "consumers": "[[2,true],[1,true],[1,false],[1,true]]"}))
    assert graph_out_of_reach(ReplayParams(model="consumer-lists", config_name="reference", overrides={"env_budget": -1})) is None
    assert graph_out_of_reach(ReplayParams(model="consumer-lists", config_name="reference")) is None
    for model, config, overrides in BEYOND_EXPLORER:  # every listed target loads
        import json

        conformance_model(model, config, json.loads(overrides))


@pytest.mark.slow
def test_estimate_from_a_partial_replay_approaches_the_known_count():
    """consumer-lists/reference has 351 call-level states, all within 30 steps (the explorer's count).
    A coverage-guided replay of 1,024 traces (16 sampling units of one block each) sees most of
    them; for each seed the Chao2 estimate lies within 3% of 351 and the interval's upper bound is not below it (so seen / upper bound is a safe lower
    bound of the completeness).  Measured over seeds 0-7 (spec/replay-coverage.md): estimates
    346-364, upper bounds 356-384; the interval itself brackets 351 in 3 of 8 seeds -- with 16
    units it is narrower than the true uncertainty, so the report shows both ratios."""
    from conq.conformance.spark_replay import ReplayParams

    truth = 351
    for seed in (0, 1):
        p = ReplayParams(model="consumer-lists", config_name="reference", traces=1024, seed=seed, length=30,
                         mode="coverage", minimise=False)
        freqs, units, growth = incidence_in_process(p)
        e = chao2(freqs["state"], units)
        assert units == 16 and growth[-1] == (1024, e.observed)
        assert e.observed < truth
        assert abs(e.estimate - truth) <= 0.03 * truth, e.describe()
        assert e.high >= truth, e.describe()


def test_chao2_interval_holds_its_estimate_when_nothing_is_seen_once():
    """No item met in exactly one unit: nothing is estimated unseen, and the interval starts at the
    estimate (it once gave 57.0 with the interval 65.9-65.9, which excludes it)."""
    for freq, units in (({2: 57}, 2), ({3: 10, 1: 1}, 4), ({2: 5, 4: 7}, 4)):
        e = chao2(freq, units)
        assert e.low <= e.estimate <= e.high, (freq, e)
        assert e.low == e.observed
    assert chao2({2: 57}, 2).estimate == 57.0


def test_the_replay_report_states_a_missed_interval_as_missed():
    """The interval against the graph's count within the trace length: a miss is said to be one,
    with by how much (it was stated as a neutral 'does not contain it')."""
    from types import SimpleNamespace

    from conq.conformance.spark_replay.report import _closeness_lines

    est = chao2({1: 40, 2: 30, 3: 20}, units=16).as_dict()
    s = SimpleNamespace(state_estimate=est, transition_estimate=None, graph_states=400, graph_states_within_length=400,
                        params={"length": 24, "mode": "coverage"}, unit="block", units=16, graph="explored",
                        growth_points=[], rare_classes=[])
    text = "\n".join(_closeness_lines(s))
    assert f"**missed: the true count 400 is {400 / est['high']:.1f}x the interval's upper bound**" in text
    s.graph_states_within_length = round(est["estimate"])
    assert "the interval holds the true count" in "\n".join(_closeness_lines(s))
