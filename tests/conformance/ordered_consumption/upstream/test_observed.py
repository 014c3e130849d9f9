"""From recorded wire events to the model's observed log (``upstream/observed.py``), on hand-made
events (no client run, so the log and its verdict are fixed): receives that bring nothing are logged
(issue 19: a receive answered with an error or with nothing is an event the client sees, so the
witness must take it), and the mapping keeps the model's claims sharp (an empty answer while a
message is deliverable is rejected) without rejecting what the wire cannot tell apart.
"""

from __future__ import annotations

from conq.conformance.ordered_consumption.upstream.coverage import path_keys
from conq.conformance.ordered_consumption.upstream.observed import observed_log, write_observed
from conq.conformance.validate import validate_file

CONFIG = "push-fifo-upstream"  # messages A and B of one group on queue 0, max attempts 2, server faults
BODIES = ["A", "BB"]


def _send(body):
    return {"event": "api", "call": "send", "result": "ok", "message_id": f"id-{body}", "body": body}


def _receive(status, *bodies, cid="c1", attempt=1):
    msgs = [{"body": b, "attempt": attempt, "queue": 0, "offset": BODIES.index(b), "handle": f"h{b}|1"} for b in bodies]
    return {"kind": "rpc", "name": "ReceiveMessage", "client_id": cid, "request": {"group": "MF", "queue": 0},
            "answer": {"status": status, "messages": msgs}}


def _listener(body, ok=True):
    return {"event": "listener", "group": "MF", "body": body, "result": "success" if ok else "failure"}


def _ack(body, status="OK"):
    return {"kind": "rpc", "name": "AckMessage", "client_id": "c1",
            "request": {"group": "MF", "entries": [{"message_id": f"id-{body}"}]}, "answer": {"status": status}}


def _validate(tmp_path, name, events, **kw):
    lines = observed_log(events, CONFIG, BODIES, "MF", **kw)
    p = tmp_path / f"{name}.observed.ndjson"
    write_observed(p, lines)
    return lines[1:], validate_file("ordered-consumption", str(p))


def test_failed_and_empty_receives_are_logged_and_the_witness_takes_them(tmp_path):
    events = [_send("A"), _send("BB"),
              _receive("INTERNAL_SERVER_ERROR"), _receive("TOO_MANY_REQUESTS"),  # not applied: the model's error
              _receive("OK", "A"), _listener("A"),
              _receive("MESSAGE_NOT_FOUND"),  # A is invisible: the server gate withholds B (model: empty)
              _ack("A"), _receive("OK", "BB"), _listener("BB"), _ack("BB")]
    logged, v = _validate(tmp_path, "errors", events)
    assert [e["action"] for e in logged[:2]] == [["receive_answer", 0, "error"]] * 2
    assert logged[4] == {"action": ["receive_answer", 0, "ok"], "observation": [], "step": 5}
    assert v.verdict == "accepted" and v.accepted == len(logged) == 9
    kinds = {a for _, a in path_keys(v.path, v.start)["transitions"]}
    assert "receive_answer error" in kinds  # hidden before: the shortest witness never took it


def test_an_empty_answer_while_a_message_is_deliverable_is_rejected(tmp_path):
    # after A's ack, B is deliverable: the model answers a receive of queue 0 with B (or an error), never
    # with nothing -- the mapping keeps that claim (a false "nothing" would be a lost message)
    events = [_send("A"), _send("BB"), _receive("OK", "A"), _listener("A"), _ack("A"), _receive("MESSAGE_NOT_FOUND")]
    logged, v = _validate(tmp_path, "empty", events)
    assert v.verdict == "rejected" and v.accepted == 3 and v.failed["index"] == 4, v.failed


def test_what_the_wire_cannot_tell_apart_is_left_unknown_or_out(tmp_path):
    events = [_send("A"), _send("BB"),
              _receive("REQUEST_TIMEOUT"),  # lost (delivered) or a timeout before anything was applied
              _receive("OK", "A", attempt=2), _listener("A"), _ack("A"), _receive("OK", "BB"), _listener("BB"),
              _ack("BB"),
              {"kind": "rpc", "name": "NotifyClientTermination", "client_id": "c1", "request": {}, "answer": {"status": "OK"}},
              _receive("MESSAGE_NOT_FOUND")]  # cancelled at shutdown: takes nothing whatever is deliverable
    logged, v = _validate(tmp_path, "unknown", events)
    assert logged[0] == {"action": ["receive_answer", 0], "step": 1}
    assert len(logged) == 7 and v.verdict == "accepted", v.failed
    # the witness explains attempt 2 by the unknown answer: a lost receive (delivered, answer lost)
    assert v.path[0].action == ("receive_answer", 0, "lost")
    # a fault plan that answers receives not-found without asking the core: empty answers say nothing
    logged, v = _validate(tmp_path, "not-found", [_send("A"), _send("BB"), _receive("OK", "A"), _listener("A"),
                                                  _ack("A"), _receive("MESSAGE_NOT_FOUND")], empty_known=False)
    assert len(logged) == 3 and v.verdict == "accepted"


# ---------------------------------------------------------------- larger workloads: units
def _fifo_workload():
    from conq.conformance.ordered_consumption.upstream.workloads import GroupSpec, TopicSpec, Workload

    msgs = [{"topic": "F", "body": b, "group": b[2:4]} for b in ("F-g0-0", "F-g1-0", "F-g0-1")]
    return Workload("units", topics=(TopicSpec("F", 2, fifo=True),), groups=(GroupSpec("PF", fifo=True, max_attempts=2),
                                                                              GroupSpec("PF2", fifo=True)),
                    producers=({"name": "p", "topics": ["F"], "messages": msgs},),
                    push=({"name": "c", "group": "PF", "topics": ["F"]}, {"name": "c2a", "group": "PF2", "topics": ["F"]},
                          {"name": "c2b", "group": "PF2", "topics": ["F"]}))


def _m(body, offset):
    return {"body": body, "attempt": 1, "queue": 0, "offset": offset, "handle": f"core{offset}|1", "message_id": f"id-{body}",
            "message_group": body[2:4]}


def _fifo_events():
    def rcv(*ms):
        return {"kind": "rpc", "name": "ReceiveMessage", "client_id": "c", "request": {"group": "PF", "queue": 0},
                "answer": {"status": "OK", "messages": list(ms)}}

    def lis(m):
        return {"event": "listener", "group": "PF", "body": m["body"], "handle": m["handle"], "result": "success",
                "message_group": m["message_group"]}

    def ack(m):
        return {"kind": "rpc", "name": "AckMessage", "client_id": "c", "answer": {"status": "OK"},
                "request": {"group": "PF", "entries": [{"message_id": m["message_id"], "handle": m["handle"]}]}}

    a, b, c = _m("F-g0-0", 0), _m("F-g1-0", 1), _m("F-g0-1", 2)
    # g0 and g1 hash to queue 0; the broker gates per message group, so one answer brings the head of
    # each (broker.py "FIFO per message group"); g1's is consumed first
    return [rcv(a, b), lis(b), ack(b), lis(a), ack(a), rcv(c), lis(c), ack(c)]


def test_a_fifo_group_is_validated_per_message_group(tmp_path):
    from conq.conformance.ordered_consumption.upstream.observed import group_log, group_units, validate_groups

    w = _fifo_workload()
    units = group_units(w)
    # PF2 (two consumers sharing the group) is a unit per message group too (test_shared_group.py); this
    # run has none of its events, so its units say so
    assert [(u[0], u[3] is None) for u in units] == [("PF/g0", True), ("PF/g1", True), ("PF2/g0", True),
                                                     ("PF2/g1", True)]
    got = validate_groups(w, _fifo_events(), tmp_path, "run")
    assert got["status"] == "partial"
    assert got["units"]["PF2/g0"] == {"status": "not validated", "messages": 0, "why": "no copy of the unit was received"}
    g0, g1 = got["units"]["PF/g0"], got["units"]["PF/g1"]
    assert (g0["status"], g0["messages"], g0["events"]) == ("accepted", 2, 6), g0
    assert (g1["status"], g1["messages"], g1["events"]) == ("accepted", 1, 3), g1
    # the same run as one unit is what the model's per-queue gate cannot hold (one message group per
    # queue): that is why the projection is per message group, not a model defect found by the run
    lines, _ = group_log(w, _fifo_events(), "PF", None)
    p = tmp_path / "whole.observed.ndjson"
    write_observed(p, lines)
    assert validate_file("ordered-consumption", str(p)).verdict == "rejected"


def test_a_campaign_names_several_workloads():
    import pytest

    from conq.conformance.ordered_consumption.upstream.workloads import WORKLOADS, workload_list

    model = sorted(n for n, w in WORKLOADS.items() if w.model_size is not None)
    assert [w.name for w in workload_list("all-model,faults")] == model + ["faults"] and len(model) >= 7
    assert [w.name for w in workload_list("fifo, standard")] == ["fifo", "standard"]
    for bad in ("fifo,nope", "fifo,,all", "fifo,fifo"):
        with pytest.raises(ValueError):
            workload_list(bad)
