"""Model coverage of an upstream campaign (issue 19): the states and transitions of the validation
paths of accepted logs, counted against the explored call-level graph (``upstream/coverage.py``).

The logs here are hand-made, so the covered set is known: the path ``conq validate`` must find for
"A received, A's listener returns OK, A's ack answered OK" is the four steps receive_answer, the
hidden dispatch, listener_returns, ack_answer (configuration push-fifo-upstream: the seed's FIFO
consumer, spec/ordered-consumption.md "Actions"), five distinct states.  The expected keys are built
by stepping the model itself, independently of the validator's search.
"""

from __future__ import annotations

import json

from conq.conformance.ordered_consumption.upstream.coverage import (
    campaign_coverage,
    coverage_rows,
    graph_of,
    label_of,
    path_keys,
)
from conq.conformance.ordered_consumption.upstream.observed import HIDDEN
from conq.conformance.validate import validate_file
from conq.conformance.views import conformance_model
from conq.model.engines.fingerprint import fingerprint

CONFIG = "push-fifo-upstream"
HEADER = {"format": "conq-trace", "version": 1, "kind": "observed", "level": "call", "model": "ordered-consumption",
          "config_name": CONFIG, "hidden": HIDDEN}
A_ACKED = [{"action": ["receive_answer", 0, "ok"], "observation": [[0, 1]]},
           {"action": ["listener_returns", 0, "ok"]},
           {"action": ["ack_answer", 0, "ok"]}]


def _log(tmp_path, name, events):
    p = tmp_path / f"{name}.observed.ndjson"
    p.write_text("".join(json.dumps(x) + "\n" for x in [HEADER] + [dict(e, step=i) for i, e in enumerate(events, 1)]))
    return str(p)


def _walk(labels):
    """The model's own path through ``labels`` ((action, observation) pairs): states and transition keys."""
    model = conformance_model("ordered-consumption", CONFIG)
    (s,) = list(model.init_states())
    states, trans = [fingerprint(s)], []
    for want in labels:
        nxt = [(a, o, t) for a, o, t in model.successors(s) if (a, o) == want]
        assert len(nxt) == 1, (want, nxt)  # the hand-made path is deterministic
        a, o, t = nxt[0]
        trans.append((str(fingerprint((fingerprint(s), (a, o), fingerprint(t)))), label_of(a)))
        s = t
        states.append(fingerprint(s))
    return {str(h) for h in states}, sorted(trans)


def test_the_path_of_an_accepted_log_covers_its_hidden_steps_too(tmp_path):
    v = validate_file("ordered-consumption", _log(tmp_path, "a", A_ACKED))
    assert v.verdict == "accepted"
    # the path's states chain: each step starts where the previous one ended
    assert v.path[0].before is v.start and all(x.after is y.before for x, y in zip(v.path, v.path[1:]))
    keys = path_keys(v.path, v.start)
    states, trans = _walk([(("receive_answer", 0, "ok"), ((0, 1),)), (("dispatch", 0), (0,)),
                           (("listener_returns", 0, "ok"), ("ok", 1)), (("ack_answer", 0, "ok"), "ok")])
    assert set(keys["states"]) == states and len(states) == 5
    assert sorted(map(tuple, keys["transitions"])) == trans
    assert [t[1] for t in trans] != [] and {t[1] for t in trans} == {"receive_answer ok", "dispatch",
                                                                      "listener_returns ok", "ack_answer ok"}
    cov = campaign_coverage([{"seed": 0, "coverage": keys}], CONFIG, {})
    g = graph_of(CONFIG, {})
    assert cov["states"] == {"covered": 5, "total": len(g["states"])} and cov["outside_graph"] == {"states": 0, "transitions": 0}
    assert cov["transitions"] == {"covered": 4, "total": len(g["transitions"])}
    assert {a: r["covered"] for a, r in cov["by_action"].items() if r["covered"]} == \
        {"receive_answer": 1, "dispatch": 1, "listener_returns": 1, "ack_answer": 1}
    assert cov["by_kind"]["ack_answer ok"]["covered"] == 1 and cov["by_kind"]["ack_answer lost"]["covered"] == 0
    assert "expire" in cov["uncovered_actions"] and "listener_returns fail" in cov["uncovered_kinds"]
    assert sum(r["total"] for r in cov["by_action"].values()) == cov["transitions"]["total"]


def test_a_campaign_counts_the_union_and_leaves_rejected_logs_out(tmp_path):
    a = validate_file("ordered-consumption", _log(tmp_path, "a", A_ACKED))
    # A fails once, is consumed again at once (max attempts 2) and acked: two more transitions
    # (listener_returns fail, then listener_returns ok from another state) and their states
    b = validate_file("ordered-consumption", _log(tmp_path, "b", [
        A_ACKED[0], {"action": ["listener_returns", 0, "fail"]}, A_ACKED[1], A_ACKED[2]]))
    bad = validate_file("ordered-consumption", _log(tmp_path, "bad", [A_ACKED[0], {"action": ["ack_answer", 1, "ok"]}]))
    assert (a.verdict, b.verdict, bad.verdict) == ("accepted", "accepted", "rejected")
    ka, kb = path_keys(a.path, a.start), path_keys(b.path, b.start)
    records = [{"seed": 0, "coverage": ka}, {"seed": 1, "coverage": kb}, {"seed": 2, "coverage": ka},
               {"seed": 3, "coverage": None}]
    cov = campaign_coverage(records, CONFIG, {})
    assert cov["accepted_logs"] == 3 and cov["logs"] == 4
    assert cov["states"]["covered"] == len(set(ka["states"]) | set(kb["states"])) > 5
    assert cov["transitions"]["covered"] == len({k for k, _ in ka["transitions"]} | {k for k, _ in kb["transitions"]}) > 4
    assert cov["by_kind"]["listener_returns fail"]["covered"] == 1
    rows = coverage_rows(records, CONFIG, {})
    g = graph_of(CONFIG, {})
    assert len(rows) == len(g["states"]) + len(g["transitions"]) and all(r["in_graph"] for r in rows)
    by_key = {r["key"]: r for r in rows}
    assert by_key[ka["states"][0]]["seeds"] >= 2 and by_key[ka["states"][0]]["first_seed"] == 0
    fail = next(k for k, lab in kb["transitions"] if lab == "listener_returns fail")
    assert (by_key[fail]["seeds"], by_key[fail]["first_seed"], by_key[fail]["action"]) == (1, 1, "listener_returns")
    assert sum(1 for r in rows if r["kind"] == "state" and r["seeds"]) == cov["states"]["covered"]
    assert campaign_coverage(records, None, None) is None and coverage_rows(records, None, None) == []


def test_coverage_is_reported_per_configuration_across_workloads(tmp_path):
    from conq.conformance.ordered_consumption.upstream.coverage import coverage_by_config

    a = validate_file("ordered-consumption", _log(tmp_path, "a", A_ACKED))
    three = {"msg_queue": [0, 0, 0], "msg_size": [1, 1, 1]}  # a unit of a larger workload: 3 copies
    p = tmp_path / "u.observed.ndjson"
    p.write_text("".join(json.dumps(x) + "\n" for x in [dict(HEADER, config=three)]
                         + [dict(e, step=i) for i, e in enumerate(A_ACKED, 1)]))
    u = validate_file("ordered-consumption", str(p))
    assert (a.verdict, u.verdict) == ("accepted", "accepted")
    ka, ku = path_keys(a.path, a.start), path_keys(u.path, u.start)
    records = [{"seed": 0, "workload": "model-push-fifo", "coverages": [{"unit": "MF", "config": CONFIG, "overrides": {}, "keys": ka}]},
               {"seed": 1, "workload": "model-push-fifo", "coverages": [{"unit": "MF", "config": CONFIG, "overrides": {}, "keys": ka}]},
               {"seed": 0, "workload": "fifo", "coverages": [{"unit": "PF/g0", "config": CONFIG, "overrides": three, "keys": ku}]},
               {"seed": 0, "workload": "standard", "coverages": []}]
    by = {json.dumps(c["overrides"], sort_keys=True): c for c in coverage_by_config(records)}
    assert set(by) == {"{}", json.dumps(three, sort_keys=True)}
    named, unit = by["{}"], by[json.dumps(three, sort_keys=True)]
    # the model-sized configuration is explored: covered / total, as for one workload
    assert (named["accepted_logs"], named["units"], named["workloads"]) == (2, ["MF"], ["model-push-fifo"])
    assert named["states"] == {"covered": 5, "total": len(graph_of(CONFIG, {})["states"])}
    # a unit's configuration (more messages) is not explored: covered counts only, no totals
    assert (unit["units"], unit["workloads"], unit["graph_complete"]) == (["PF/g0"], ["fifo"], None)
    assert unit["states"] == {"covered": len(ku["states"]), "total": None}
    assert unit["transitions"]["covered"] == 4 and unit["by_kind"]["ack_answer ok"] == {"covered": 1, "total": None}
