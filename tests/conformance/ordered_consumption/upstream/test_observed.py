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
