"""Groups of several push consumers with the real client (issue 19): a message of the shared FIFO
group PF2 redelivered to the *other* consumer (``fifo-handoff``), and a FIFO group under exclusive
assignment whose second consumer joins and whose first one leaves mid-run (``fifo-join-leave``).

Both workloads are scripted by state (``runner._Script``: a held listener call, the assignment
answer a client got, no receive in flight) and inject no fault, so what they exercise does not
depend on timing: one seed each.  Verdicts are counts; seconds are the runner's safety cap only.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rocketmq")

from conq.conformance.ordered_consumption.upstream.campaign import revalidate  # noqa: E402
from conq.conformance.ordered_consumption.upstream.observed import group_log, recorded_events  # noqa: E402
from conq.conformance.ordered_consumption.upstream.runner import run  # noqa: E402
from conq.conformance.ordered_consumption.upstream.workloads import WORKLOADS  # noqa: E402

CAP = 120.0  # seconds, safety cap per run only


def _log(u):
    return [json.loads(x) for x in open(u["log"])]


@pytest.mark.slow
def test_a_shared_fifo_message_is_redelivered_to_the_other_consumer_and_accepted(tmp_path):
    res = run(WORKLOADS["fifo-handoff"], 0, out=tmp_path / "traces", cap=CAP)
    assert res.end == "settled", (res.end, res.notes)
    assert not res.divergences, [d.as_dict() for d in res.divergences]
    units = res.validation["units"]
    assert {n: u["status"] for n, u in units.items()} == {"PF2/g0": "accepted", "PF2/g1": "accepted"}, units
    u = units["PF2/g0"]
    assert u["cross_redeliveries"] == 1 and u["reassignments"] == 2, u
    acts = [ev["action"] for ev in _log(u)[1:]]
    recv = [ev for ev in _log(u)[1:] if ev["action"][0] == "receive_answer" and ev.get("observation")]
    # F-g0-1 (copy 1) delivered twice: attempt 1 to one consumer, attempt 2 to the other, after the
    # runner's expiry and the holder's drop of queue 0
    first, second = [(ev["action"][1] // 2, ev["observation"]) for ev in recv if ev["observation"][0][0] == 1]
    assert first[1] == [[1, 1]] and second[1] == [[1, 2]] and first[0] != second[0]
    holder = first[0]
    assert acts.index(["drop_process_queue", holder * 2]) < acts.index(["expire", 1])
    # the holder's ack carries the first delivery's handle: refused, and not repeated (DEV-020)
    assert acts.count(["ack_answer", holder * 4 + 1, "invalid-handle"]) == 1
    # and queue 0 is given back to the holder afterwards
    assert ["create_process_queue", holder * 2] in acts[acts.index(["expire", 1]):]
    # the written wire trace read back gives the same unit log (re-validation of earlier campaigns)
    again, _ = group_log(WORKLOADS["fifo-handoff"], recorded_events(res.trace_path), "PF2", "g0")
    assert again == _log(u)
    (tmp_path / "summary.json").write_text(json.dumps({"per_seed": [
        {"workload": "fifo-handoff", "seed": 0, "validation": res.validation}]}, default=str))
    re = revalidate(tmp_path, tmp_path / "again")
    assert (re["same"], re["different"]) == (2, []) and re["shared_groups"]["cross_redeliveries"] == 1, re


@pytest.mark.slow
def test_a_consumer_joining_and_one_leaving_under_exclusive_assignment_are_accepted(tmp_path):
    res = run(WORKLOADS["fifo-join-leave"], 0, out=tmp_path, cap=CAP)
    assert res.end == "settled", (res.end, res.notes)
    assert not res.divergences, [d.as_dict() for d in res.divergences]
    units = res.validation["units"]
    assert sorted(u["status"] for u in units.values()) == ["accepted", "accepted"], units
    for name, u in units.items():
        assert u["overrides"]["exclusive_assignment"] is True and u["overrides"]["rebalance"] is True
        # each message group's queue handed over once from c-x1 (consumer 0) to c-x2 (consumer 1)
        assert u["handoffs"] == 1, (name, u)
    events = res.recorder.events()
    ids = {e["client"]: e["client_id"] for e in events if e.get("call") == "startup" and e.get("client_id")}
    assert ids["c-x1"] < ids["c-x2"]  # the broker's order: c-x1 holds queue 0 with both live
    # c-x1 left: its termination reached the broker, and c-x2 was answered both queues afterwards
    term = next(e for e in events if e.get("kind") == "rpc" and e["name"] == "NotifyClientTermination"
                and e["client_id"] == ids["c-x1"] and e["request"]["group"] == "PX")
    assert any(e.get("kind") == "rpc" and e["name"] == "QueryAssignment" and e["client_id"] == ids["c-x2"]
               and e["t_ns"] > term["t_ns"] and sorted(e["answer"]["queues"]) == [0, 1] for e in events)
