"""Results judged against the manifest and the known divergence classes (conq/expectations.py)."""

from __future__ import annotations

from conq.expectations import Judgement, closing_line, judge_divergences, judge_exploration
from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model


def test_a_violation_the_manifest_expects_is_as_expected():
    ex = explore(load_model("consumer-lists", "upstream-flag-order", {}))
    j = judge_exploration(ex, "upstream-flag-order")
    assert j.as_expected and not j.problems and "by design" in j.expectation
    # the same search without liveness: the manifest's liveness violations are not asked for
    safe = explore(load_model("consumer-lists", "upstream-flag-order", {}), liveness=False)
    assert judge_exploration(safe, "upstream-flag-order", liveness=False).as_expected


def test_a_configuration_the_manifest_does_not_know_must_hold_everything():
    ex = explore(load_model("consumer-lists", "upstream-flag-order", {"messages": "1"}), liveness=False)
    j = judge_exploration(ex, "upstream-flag-order", liveness=False)
    assert "no manifest entry" in j.expectation and j.as_expected == (not ex.violations)


def test_a_cut_search_is_not_as_expected_and_says_incomplete():
    ex = explore(load_model("consumer-lists", "upstream-flag-order", {}), max_states=10, liveness=False)
    j = judge_exploration(ex, "upstream-flag-order", liveness=False)
    assert not j.as_expected and j.problems[0].startswith("incomplete")


def test_closing_line_says_which():
    ok = Judgement("m/a", True, expectation="violates p by design (manifest)")
    assert closing_line([ok, Judgement("m/b", True, expectation="every property holds (manifest)")]) == (
        0, "2 configurations: all as expected (1 violate by design, as the manifest expects)")
    bad = Judgement("m/c", False, ["violated: expected [], found ['p']"])
    code, line = closing_line([ok, bad])
    assert code == 1 and line == "1 of 2 configurations not as expected: m/c (violated: expected [], found ['p'])"
    assert closing_line([ok, Judgement("m/d", False, ["incomplete: state bound"], incomplete=True)])[0] == 4


def test_divergences_of_known_classes_are_as_expected():
    known = {"txn-single-attempt": {"smallest": {"classification": "upstream variant (model config producer-upstream)"}}}
    assert judge_divergences(known)[0] == 0 and judge_divergences({})[0] == 0
    unknown = {**known, "x": {"smallest": {"classification": "unclassified: to be investigated"}}}
    code, line = judge_divergences(unknown)
    assert code == 1 and line == "1 of 2 divergences not of a known class: x [unclassified: to be investigated]"
