"""Black-box trace validation (issue 17, "Recorded traces from a black box"): `conq validate MODEL
TRACE` accepts a log whose internal steps are hidden and whose states are observed in part when
some model behaviour produces it; a rejection names the longest accepted prefix, what the model
allowed next and a shortest path there; a bad log is exit 2 (file:line:field); a closure over the
--max-states bound that ends in no explanation is exit 4, never a rejection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conq.cli import app
from conq.conformance import trace
from conq.conformance.trace import TraceError
from conq.conformance.validate import validate_file
from conq.model.engines.registry import load_model

runner = CliRunner()


def log(tmp_path: Path, name: str, header: dict, *events: dict) -> Path:
    head = {"format": "conq-trace", "version": 1, "kind": "observed", **header}
    lines = [json.dumps(head)] + [json.dumps({"step": i, **e}) for i, e in enumerate(events, 1)]
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


CL = {"model": "consumer-lists", "config_name": "small"}
RD = {"model": "recovery-deferral", "config_name": "reference"}


def test_consumer_lists_log_with_hidden_steps_is_accepted(tmp_path):
    # the IO thread's find/acquire and the publisher's notify are never logged: the search supplies them
    p = log(tmp_path, "cl.ndjson", CL,
            {"action": ["enqueue", 0]},
            {"action": ["deliver", 0], "observation": 0},
            {"observe": {"messages": ["acquired by c0", "unarrived"], "consumers/0/credit": 0}})
    res = validate_file("consumer-lists", str(p))
    assert res.verdict == "accepted" and res.exit_code == 0 and res.accepted == 3
    names = [s.action[0] for s in res.path]
    assert names[0] == "enqueue" and names[-1] == "deliver"
    assert {"notify_consumers", "acquire"} <= set(names)  # hidden steps in the witness
    assert [s.event for s in res.path if s.event is not None] == [1, 2]
    # the witness is a real model path: replaying it reaches a state the last observation holds in
    model = load_model("consumer-lists", "small")
    end = model.replay([(s.action, s.observation) for s in res.path]).last
    assert model.view(end)["messages"] == ["acquired by c0", "unarrived"]


def test_recovery_deferral_log_of_listener_calls_is_accepted_at_both_levels(tmp_path):
    # what a customer's listener sees (events in per-match order, the deferred up delivered after them),
    # queues and producer left out; the feed thread, the tracker and the recoveries are hidden
    p = log(tmp_path, "rd.ndjson", RD,
            {"action": ["run"], "observation": ["listener", 0]},
            {"action": ["run"], "observation": ["listener", 2]},
            {"action": ["run"], "observation": ["listener", 1]},
            {"action": ["poll", 0, 1], "observation": "delivered", "observe": {"pending/p0~1r1": 0}},
            {"action": ["run"], "observation": ["listener", 3]},
            {"action": ["poll"], "params": {"p": 1}, "observation": "delivered"})
    for level in ("thread", "call"):
        res = validate_file("recovery-deferral", str(p), level=level)
        assert res.verdict == "accepted", res.describe()
        assert sum(1 for s in res.path if s.event is None) >= 6  # feeds, dones, recoveries, statuses


def test_rejection_shows_the_longest_prefix_what_was_allowed_and_a_path(tmp_path):
    # only message 0 ever arrives (enqueue is named, hence logged): a second delivery is impossible
    p = log(tmp_path, "bad.ndjson", CL,
            {"action": ["enqueue", 0]},
            {"action": ["deliver", 0], "observation": 0},
            {"action": ["deliver", 0], "observation": 1})
    res = validate_file("consumer-lists", str(p))
    assert res.verdict == "rejected" and res.exit_code == 1
    assert res.accepted == 2 and res.last_line == 3
    assert res.failed["index"] == 3 and res.failed["line"] == 4
    allowed = {(tuple(a["action"]), a["observation"]) for a in res.allowed}
    assert (("enqueue", 1), None) in allowed  # what could be logged next
    assert [s.action for s in res.path if s.event is not None] == [("enqueue", 0), ("deliver", 0)]
    r = runner.invoke(app, ["validate", "consumer-lists", str(p), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "rejected" and doc["accepted_events"] == 2 and doc["last_accepted_line"] == 3
    assert doc["failed_event"]["line"] == 4 and doc["path_to_frontier"][-1]["event"] == 2


def test_a_partial_state_observation_rules_out_a_branch(tmp_path):
    events = [{"action": ["enqueue", 0]}, {"action": ["deliver", 0], "observation": 0}]
    plain = log(tmp_path, "plain.ndjson", CL, *events)
    assert validate_file("consumer-lists", str(plain)).verdict == "accepted"
    # without an observation a hidden removal of c0 is one branch among many; observed, it is the only
    # one left, and in it c0 can deliver nothing
    gone = log(tmp_path, "gone.ndjson", CL, events[0], {"observe": {"consumers/0/node": "removed"}}, events[1])
    res = validate_file("consumer-lists", str(gone))
    assert res.verdict == "rejected" and res.accepted == 2 and res.failed["index"] == 3
    # ... and c1 seen Notified after the arrival (c0, the higher priority, did not want work then:
    # hidden suspend or removal) keeps the branches in which c1 takes the message
    kept = log(tmp_path, "kept.ndjson", CL, events[0], {"observe": {"lists/notified": [1]}},
               {"action": ["deliver"], "observation": 0})
    res = validate_file("consumer-lists", str(kept))
    assert res.verdict == "accepted"
    assert res.path[-1].action == ("deliver", 1)  # the observation ruled c0 out


def test_an_observation_matched_against_the_logged_state_after_the_step(tmp_path):
    p = log(tmp_path, "x.ndjson", CL, {"action": ["enqueue", 0], "observe": {"messages/0": "acquired by c0"}})
    res = validate_file("consumer-lists", str(p))
    assert res.verdict == "rejected"  # right after enqueue the message is available, not acquired
    assert res.near and res.near[0]["differs"] == {"messages/0": "available (notify owed)"}


@pytest.mark.parametrize("events, where", [
    ([{"action": ["deliver"], "params": {"x": 1}}], ":2: field 'params/x'"),
    ([{"action": ["no_such_step"]}], ":2: field 'action': unknown action 'no_such_step'"),
    ([{"action": ["acquire", 0, 1, 2]}], ":2: field 'action': action 'acquire' takes 2"),
    ([{"observe": {"nope": 1}}], ":2: field 'observe/nope'"),
    ([{"action": ["deliver", 0], "params": {"c": 1}}], ":2: field 'params/c': 1 contradicts"),
    ([{"observation": 1}], ":2: bad event"),
])
def test_bad_log_is_exit_2_with_file_line_field(tmp_path, events, where):
    p = log(tmp_path, "bad.ndjson", CL, *events)
    r = runner.invoke(app, ["validate", "consumer-lists", str(p), "--json"])
    assert r.exit_code == 2, r.stdout
    doc = json.loads(r.stdout)
    assert doc["error"]["kind"] == "usage" and f"{p}{where}" in doc["error"]["message"]


def test_bad_header_and_model_mismatch_are_exit_2(tmp_path):
    p = log(tmp_path, "h.ndjson", {**CL, "hidden": ["no_such"]})
    with pytest.raises(TraceError, match=r":1: field 'hidden/0': unknown action 'no_such'"):
        validate_file("consumer-lists", str(p))
    with pytest.raises(TraceError, match=r":1: field 'model': the log is of model 'consumer-lists'"):
        validate_file("recovery-deferral", str(log(tmp_path, "m.ndjson", CL, {"action": ["enqueue", 0]})))
    # a recorded trace never names hidden actions; an observed log is not replayed by the checker
    rec = tmp_path / "r.ndjson"
    rec.write_text(json.dumps({"format": "conq-trace", "version": 1, "model": "consumer-lists", "config": {},
                               "seed": 0, "generator": {"mode": "recorded"}, "hidden": ["idle"]}) + "\n")
    with pytest.raises(TraceError, match=r":1: bad header: field 'hidden': only an observed log"):
        trace.read(rec)
    with pytest.raises(TraceError, match=r":1: field 'kind': an observed log .* `conq validate"):
        trace.read(p)


def test_bound_hit_without_an_explanation_is_incomplete_exit_4(tmp_path):
    p = log(tmp_path, "b.ndjson", CL,
            {"action": ["enqueue", 0]},
            {"action": ["deliver", 0], "observation": 0},
            {"action": ["deliver", 0], "observation": 1})
    r = runner.invoke(app, ["validate", "consumer-lists", str(p), "--max-states", "5", "--json"])
    assert r.exit_code == 4, r.stdout
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "incomplete" and doc["truncated_at_events"] and doc["largest_closure"] == 5
    # an acceptance is exact whatever the bound: its witness is a model path
    ok = log(tmp_path, "ok.ndjson", CL, {"action": ["enqueue", 0]}, {"action": ["deliver", 0], "observation": 0})
    res = validate_file("consumer-lists", str(ok), max_states=60)  # the full closure after event 1 has 169 states
    assert res.verdict == "accepted" and res.truncated
    load_model("consumer-lists", "small").replay([(s.action, s.observation) for s in res.path])


def test_a_recorded_conformance_trace_validates_at_call_level():
    corpus = Path(__file__).resolve().parents[2] / "conformance" / "consumer_lists" / "corpus"
    path = sorted(corpus.glob("pass-*.ndjson"))[0]
    tr = trace.read(path)
    res = validate_file(tr.model, str(path))
    assert res.level == "call" and res.verdict == "accepted" and res.accepted == len(tr.events)
    # a recorded trace hides nothing: its steps are the whole path
    assert [s.action for s in res.path] == tr.actions()


def test_validate_is_generic_over_models(tmp_path):
    # a user's model given as FILE.py:Class: no call-level view, a view that is no object
    target = str(Path(__file__).resolve().parents[1] / "model" / "engines" / "toy_counter.py") + ":CounterModel"
    head = {"model": "toy-counter", "config_name": "racy"}
    lost = log(tmp_path, "lost.ndjson", head, {"action": ["write"], "observation": 1}, {"action": ["write"], "observation": 1})
    res = validate_file(target, str(lost))  # the reads are hidden: both read 0, the lost update
    assert res.verdict == "accepted" and [s.action[0] for s in res.path].count("read") == 2
    bad = log(tmp_path, "bad.ndjson", head, {"action": ["write"], "observation": 1}, {"action": ["write"], "observation": 3})
    res = validate_file(target, str(bad))
    assert res.verdict == "rejected" and res.accepted == 1
    assert {a["observation"] for a in res.near} == {1, 2}  # what the second write could have seen
    # its view's fields are observable as any model's
    writes = ({"action": ["write", 0], "observation": 1}, {"action": ["write", 1], "observation": 1})
    assert validate_file(target, str(log(tmp_path, "c1.ndjson", head, *writes, {"observe": {"counter": 1}}))).verdict == "accepted"
    assert validate_file(target, str(log(tmp_path, "c2.ndjson", head, *writes, {"observe": {"counter": 2}}))).verdict == "rejected"
    with pytest.raises(TraceError, match=r"obs.ndjson:2: field 'observe/x': 'x' is no field of the model's view"):
        validate_file(target, str(log(tmp_path, "obs.ndjson", head, {"observe": {"x": 1}})))
