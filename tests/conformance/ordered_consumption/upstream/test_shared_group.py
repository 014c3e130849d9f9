"""Two push consumers sharing one FIFO consumer group (unit PF2 of the ``fifo`` / ``faults``
workloads) mapped onto the model's group of consumers (``upstream/observed.py``, "larger workloads";
``push-fifo-upstream`` with ``consumers`` = 2, model.py "several push consumers"), on hand-made events
so the logs and their verdicts are fixed: the gate the broker keeps for the group couples the two
consumers (one's ack makes the next message deliverable to the other; a redelivery to the other after
an expiry leaves the first one a refused handle) and is accepted; a delivery the gate forbids is
rejected with the longest accepted prefix, although each consumer's own events alone would pass.
"""

from __future__ import annotations

import json

from conq.conformance.ordered_consumption.upstream.observed import group_log, group_units, validate_groups
from conq.conformance.ordered_consumption.upstream.workloads import GroupSpec, TopicSpec, Workload
from conq.conformance.validate import validate_file
from conq.conformance.ordered_consumption.upstream.observed import write_observed

BODIES = ("F-g0-0", "F-g1-0", "F-g0-1")  # offsets 0, 1, 2 of queue 0 (g0 and g1 hash to queue 0)
CID = {"c2a": "client-A", "c2b": "client-B"}


def _workload(**group):
    msgs = [{"topic": "F", "body": b, "group": b[2:4]} for b in BODIES]
    return Workload("shared", topics=(TopicSpec("F", 2, fifo=True),),
                    groups=(GroupSpec("PF2", fifo=True, max_attempts=2, **group),),
                    producers=({"name": "p", "topics": ["F"], "messages": msgs},),
                    push=({"name": "c2a", "group": "PF2", "topics": ["F"]}, {"name": "c2b", "group": "PF2", "topics": ["F"]}))


def _m(body, attempt=1):
    off = BODIES.index(body)
    return {"body": body, "attempt": attempt, "queue": 0, "offset": off, "handle": f"core{off}|0:{off}:{attempt}",
            "message_id": f"id-{body}", "message_group": body[2:4]}


def _startup(name):
    return {"event": "api", "call": "startup", "client": name, "client_id": CID[name], "result": "ok"}


def _assigned(name, *queues):
    return {"kind": "rpc", "name": "QueryAssignment", "client_id": CID[name], "request": {"group": "PF2", "topic": "F"},
            "answer": {"status": "OK", "queues": list(queues)}}


def _leave(name):
    return {"event": "api", "call": "leave", "client": name, "client_id": CID[name], "result": "ok"}


def _recv(name, *ms, status="OK"):
    return {"kind": "rpc", "name": "ReceiveMessage", "client_id": CID[name], "request": {"group": "PF2", "queue": 0},
            "answer": {"status": status, "messages": list(ms)}}


def _lis(name, m, ok=True):
    return {"event": "listener", "client": name, "group": "PF2", "body": m["body"], "handle": m["handle"],
            "result": "success" if ok else "failure", "message_group": m["message_group"]}


def _ack(name, m, status="OK"):
    return {"kind": "rpc", "name": "AckMessage", "client_id": CID[name], "answer": {"status": status},
            "request": {"group": "PF2", "entries": [{"message_id": m["message_id"], "handle": m["handle"]}]}}


def _actions(lines):
    return [ev["action"] for ev in lines[1:]]


def test_the_shared_group_is_a_unit_per_message_group():
    assert group_units(_workload()) == [("PF2/g0", "PF2", "g0", None), ("PF2/g1", "PF2", "g1", None)]
    # under exclusive assignment too (which client holds which queue: its assignment answers)
    assert group_units(_workload(assignment="exclusive")) == group_units(_workload())


def test_one_consumers_ack_opens_the_gate_for_the_other_and_is_accepted(tmp_path):
    a, c = _m("F-g0-0"), _m("F-g0-1")
    events = [_startup("c2a"), _startup("c2b"),
              _recv("c2a", a), _recv("c2b", _m("F-g1-0")),  # g1's head: another unit's copy (left out of g0)
              _recv("c2b", status="MESSAGE_NOT_FOUND"),  # a is invisible with c2a: nothing of g0 for c2b
              _lis("c2a", a), _ack("c2a", a),
              _recv("c2b", c), _lis("c2b", c), _ack("c2b", c)]
    w = _workload()
    lines, info = group_log(w, events, "PF2", "g0")
    assert lines[0]["config_name"] == "push-fifo-upstream" and lines[0]["config"]["consumers"] == 2
    assert lines[0]["config"]["msg_queue"] == [0, 0] and info["messages"] == 2
    # the group's process queues and copies numbered consumer by consumer (model.py group_param): c2b's
    # process queue of queue 0 is 1 * 2 + 0, its copy of message 1 is 1 * 2 + 1
    assert _actions(lines) == [["receive_answer", 0, "ok"], ["receive_answer", 2, "ok"],
                               ["listener_returns", 0, "ok"], ["ack_answer", 0, "ok"],
                               ["receive_answer", 2, "ok"], ["listener_returns", 3, "ok"], ["ack_answer", 3, "ok"]]
    assert lines[2]["observation"] == [] and lines[5]["observation"] == [[1, 1]]
    got = validate_groups(w, events, tmp_path, "run")
    u = got["units"]["PF2/g0"]
    assert (u["status"], u["accepted"], u["events"]) == ("accepted", 7, 7), u
    assert got["units"]["PF2/g1"]["status"] == "accepted" and got["status"] == "accepted", got


def test_a_redelivery_to_the_other_consumer_leaves_the_first_a_refused_handle(tmp_path):
    # a's invisible time runs out while c2a consumes it (hidden: the face does not renew); the server
    # delivers it again, to c2b (attempt 2); c2a's ack meets an invalid handle, c2b's is accepted, and
    # only then is the group's next message of g0 delivered
    a, a2, c = _m("F-g0-0"), _m("F-g0-0", attempt=2), _m("F-g0-1")
    events = [_startup("c2a"), _startup("c2b"), _recv("c2a", a), _recv("c2b", a2), _lis("c2a", a),
              _ack("c2a", a, status="INVALID_RECEIPT_HANDLE"), _lis("c2b", a2), _ack("c2b", a2),
              _recv("c2a", c), _lis("c2a", c), _ack("c2a", c)]
    got = validate_groups(_workload(), events, tmp_path, "expiry")
    u = got["units"]["PF2/g0"]
    assert (u["status"], u["accepted"], u["events"]) == ("accepted", 9, 9), u
    # the witness explains the second delivery by the server's expiry between the two receives
    lines = [json.loads(x) for x in open(u["log"])]
    assert _actions(lines)[:2] == [["receive_answer", 0, "ok"], ["receive_answer", 2, "ok"]]
    assert lines[2]["observation"] == [[0, 2]]


def test_a_delivery_the_groups_gate_forbids_is_rejected_with_the_longest_accepted_prefix(tmp_path):
    # c2b is handed g0's next message while a is still invisible with c2a: each consumer's own events
    # are a run of one client, but the group's gate (broker.py "FIFO per message group") forbids it
    a, c = _m("F-g0-0"), _m("F-g0-1")
    events = [_startup("c2a"), _startup("c2b"), _recv("c2a", a), _lis("c2a", a), _recv("c2b", c), _lis("c2b", c),
              _ack("c2a", a), _ack("c2b", c)]
    got = validate_groups(_workload(), events, tmp_path, "gate")
    u = got["units"]["PF2/g0"]
    assert u["status"] == "rejected" and u["accepted"] == 2 and u["events"] == 6, u
    assert json.loads(u["failed"]["event"])["action"] == ["receive_answer", 2, "ok"]
    assert got["status"] == "rejected"
    # c2b's part alone (as the model's one client) is accepted: the rejection is the group's coupling
    lines, _ = group_log(_workload(), events, "PF2", "g0")
    one = [dict(lines[0], config={**lines[0]["config"], "consumers": 1, "msg_queue": [0], "msg_size": [6]})]
    one += [{"action": [ev["action"][0], ev["action"][1] - 2 if ev["action"][0] == "receive_answer" else 0]
             + ev["action"][2:], **({"observation": [[0, 1]]} if "observation" in ev else {}), "step": i}
            for i, ev in enumerate((ev for ev in lines[1:] if ev["action"][1] in (2, 3)), 1)]
    p = tmp_path / "c2b-alone.observed.ndjson"
    write_observed(p, one)
    assert validate_file("ordered-consumption", str(p)).verdict == "accepted"


# ------------------------------------------------------------------ reassignment, exclusive assignment
def test_a_redelivery_to_the_other_consumer_after_its_queue_was_taken_from_the_holder(tmp_path):
    # the fifo-handoff script on hand-made events: c2a holds a; queue 0 is taken from it (dropped after
    # its last receive of queue 0); the runner expires a (logged: the script's server event); c2b gets
    # it again with attempt 2; c2a's ack is refused; queue 0 is given back to c2a.  One copy in the
    # unit: c2b's copy of it is 1 * 1 + 0, its process queue of queue 0 is 1 * 2 + 0
    a, a2 = _m("F-g0-0"), _m("F-g0-0", attempt=2)
    events = [_startup("c2a"), _startup("c2b"), _assigned("c2a", 0, 1), _assigned("c2b", 0, 1),
              _recv("c2a", a), _assigned("c2a", 1), _recv("c2a", status="MESSAGE_NOT_FOUND"),
              {"event": "server", "call": "expire", "group": "PF2", "body": a["body"], "core": "core0",
               "applied": True, "result": "visible"},
              _recv("c2b", a2), _lis("c2b", a2), _ack("c2b", a2), _lis("c2a", a),
              _ack("c2a", a, status="INVALID_RECEIPT_HANDLE"), _assigned("c2a", 0, 1)]
    lines, info = group_log(_workload(), events, "PF2", "g0")
    assert _actions(lines) == [["receive_answer", 0, "ok"], ["receive_answer", 0, "ok"], ["drop_process_queue", 0],
                               ["expire", 0], ["receive_answer", 2, "ok"], ["listener_returns", 1, "ok"],
                               ["ack_answer", 1, "ok"], ["listener_returns", 0, "ok"],
                               ["ack_answer", 0, "invalid-handle"], ["create_process_queue", 0]]
    assert lines[0]["config"]["rebalance"] is True and "exclusive_assignment" not in lines[0]["config"]
    assert "drop_process_queue" not in lines[0]["hidden"] and "expire" in lines[0]["hidden"]
    assert (info["reassignments"], info["handoffs"], info["cross_redeliveries"]) == (2, 1, 1)
    u = validate_groups(_workload(), events, tmp_path, "handoff")["units"]["PF2/g0"]
    assert (u["status"], u["accepted"], u["events"]) == ("accepted", 10, 10), u


def _exclusive(order=("c2a", "c2b")):
    """The group under exclusive assignment; ``order``: the consumers in the sorted order of their ids."""
    w = _workload(assignment="exclusive")
    ids = {n: f"host@1@{i}@x" for i, n in enumerate(order)}
    return w, ids


def test_under_exclusive_assignment_the_consumers_are_numbered_in_the_order_of_their_client_ids():
    # the broker splits the queues over the sorted client ids (broker.py query_assignment; upstream
    # QueryAssignmentProcessor sorts cidAll): c2b's id sorts first, so c2b is the model's consumer 0
    w, _ = _exclusive()
    a = _m("F-g0-0")
    CID.update({"c2a": "host@1@7@x", "c2b": "host@1@3@x"})
    try:
        events = [_startup("c2a"), _startup("c2b"), _assigned("c2b", 0), _recv("c2b", a), _lis("c2b", a),
                  _ack("c2b", a)]
        lines, _ = group_log(w, events, "PF2", "g0")
    finally:
        CID.update({"c2a": "client-A", "c2b": "client-B"})
    assert lines[0]["config"]["exclusive_assignment"] is True
    # consumer 0 holds queue 0 from the start (the model's split): no reassignment, c2b's parameters are 0
    assert _actions(lines) == [["receive_answer", 0, "ok"], ["listener_returns", 0, "ok"], ["ack_answer", 0, "ok"]]


def test_a_consumer_joining_and_one_leaving_hand_a_queue_over_and_are_accepted(tmp_path):
    # c2a alone holds both queues and consumes a; c2b joins (answered queue 1: the broker's split over
    # both ids); c2a leaves while a's ack is pending (its process queues dropped first), and c2b is
    # answered queue 0 too and receives the next message of the group
    w, _ = _exclusive()
    a, c = _m("F-g0-0"), _m("F-g0-1")
    events = [_startup("c2a"), _assigned("c2a", 0, 1), _recv("c2a", a), _startup("c2b"), _assigned("c2b", 1),
              _leave("c2a"), _lis("c2a", a), _ack("c2a", a), _assigned("c2b", 0, 1), _recv("c2b", c),
              _lis("c2b", c), _ack("c2b", c)]
    lines, info = group_log(w, events, "PF2", "g0")
    assert _actions(lines) == [["receive_answer", 0, "ok"], ["drop_process_queue", 0], ["listener_returns", 0, "ok"],
                               ["ack_answer", 0, "ok"], ["create_process_queue", 2], ["receive_answer", 2, "ok"],
                               ["listener_returns", 3, "ok"], ["ack_answer", 3, "ok"]]
    assert lines[0]["config"]["exclusive_assignment"] is True and lines[0]["config"]["rebalance"] is True
    assert (info["reassignments"], info["handoffs"]) == (2, 1)
    u = validate_groups(w, events, tmp_path, "join-leave")["units"]["PF2/g0"]
    assert (u["status"], u["accepted"], u["events"]) == ("accepted", 8, 8), u


def test_a_receive_of_a_queue_the_consumer_was_never_assigned_is_rejected(tmp_path):
    # under exclusive assignment the model's consumer 1 holds only queue 1 until it is answered queue 0;
    # a receive of queue 0 before that answer (which the broker would serve: it does not check the
    # assignment) is a step of no consumer's process queue
    w, _ = _exclusive()
    a = _m("F-g0-0")
    events = [_startup("c2a"), _startup("c2b"), _assigned("c2a", 0), _assigned("c2b", 1), _recv("c2b", a),
              _lis("c2b", a), _ack("c2b", a)]
    u = validate_groups(w, events, tmp_path, "unassigned")["units"]["PF2/g0"]
    assert u["status"] == "rejected" and u["accepted"] == 0, u
    assert json.loads(u["failed"]["event"])["action"] == ["receive_answer", 2, "ok"]
