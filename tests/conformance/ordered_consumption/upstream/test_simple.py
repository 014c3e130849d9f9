"""The simple consumer's wire mapped onto the model's simple consumer (``upstream/observed.py``, "the
simple consumer (SC)"; configuration ``simple``), on hand-made events so the logs and their verdicts
are fixed: the model's round-robin is kept (a receive of the wrong queue is rejected, and the
per-queue projection that checks every rule but the queue choice accepts it), an ack of a copy never
received and a receive beyond what the model allows are rejected with the longest accepted prefix;
and one real run of ``model-simple`` on a fault-free seed is accepted.
"""

from __future__ import annotations

import json

import pytest

from conq.conformance.ordered_consumption.upstream.observed import (SIMPLE_ANY_QUEUE, SIMPLE_PER_QUEUE, simple_log,
                                                                     validate_simple)
from conq.conformance.ordered_consumption.upstream.workloads import WORKLOADS

# unit SC of ``standard``: topic T with 2 queues, max attempts 3, no faults
STD = WORKLOADS["standard"]


def _send(i):
    return {"kind": "rpc", "name": "SendMessage", "client_id": "p",
            "request": {"messages": [{"topic": "T", "body": f"T-{i}"}]}, "answer": {"status": "OK"}}


def _recv(queue, copy=None, attempt=1, status=None):
    """A receive of queue ``queue``; ``copy`` (queue, offset) the message it brought."""
    msgs = []
    if copy is not None:
        q, off = copy
        msgs = [{"queue": q, "offset": off, "body": f"T-{q}{off}", "message_id": f"id-{q}{off}",
                 "handle": f"{q}{off}|{q}:{off}:{attempt}", "attempt": attempt}]
    return {"kind": "rpc", "name": "ReceiveMessage", "client_id": "s",
            "request": {"group": "SC", "queue": queue},
            "answer": {"status": status or ("OK" if msgs else "MESSAGE_NOT_FOUND"), "messages": msgs}}


def _ack(copy, status="OK", attempt=1):
    q, off = copy
    return {"kind": "rpc", "name": "AckMessage", "client_id": "s",
            "request": {"group": "SC", "entries": [{"message_id": f"id-{q}{off}", "handle": f"{q}{off}|{q}:{off}:{attempt}"}]},
            "answer": {"status": status}}


def _actions(lines):
    return [ev["action"] for ev in lines[1:]]


def test_round_robin_run_is_accepted_and_its_mapping_is_the_models(tmp_path):
    # the client's random start (queue 1) is the model's queue 0; every receive moves the round-robin
    events = [_send(0), _send(1), _recv(1, (1, 0)), _ack((1, 0)), _recv(0, (0, 0)), _ack((0, 0)),
              _recv(1), _recv(0, status="INTERNAL_SERVER_ERROR"), _recv(1)]
    lines, info = simple_log(STD, events, "SC")
    assert lines[0]["config_name"] == "simple" and lines[0]["config"]["queues"] == 2
    # copies in (model queue, offset) order: wire queue 1 is model queue 0
    assert lines[0]["config"]["msg_queue"] == [0, 1] and info["messages"] == 2
    assert _actions(lines) == [["simple_receive", "ok"], ["simple_ack", 0, "ok"], ["simple_receive", "ok"],
                               ["simple_ack", 1, "ok"], ["simple_receive", "ok"], ["simple_receive", "error"],
                               ["simple_receive", "ok"]]
    u = validate_simple(STD, events, tmp_path, "rr", "SC")
    assert u["status"] == "accepted" and u["accepted"] == 7, u


def test_a_receive_of_the_queue_the_round_robin_did_not_reach_is_rejected(tmp_path):
    # upstream Python 5.1.2 asks a random queue per receive (a fresh QueueSelector each time): two
    # receives of queue 0 in a row; the second brings the queue's next message, which the model's
    # receive of queue 1 cannot -- rejected there, accepted by the model's variant simple-any-queue
    events = [_send(0), _send(1), _recv(0, (0, 0)), _ack((0, 0)), _recv(0, (0, 1)), _ack((0, 1)), _recv(1, (1, 0)),
              _ack((1, 0))]
    u = validate_simple(STD, events, tmp_path, "random", "SC")
    assert u["status"] == "rejected" and u["accepted"] == 2, u
    assert json.loads(u["failed"]["event"])["action"] == ["simple_receive", "ok"]
    assert u["variant"]["name"] == SIMPLE_ANY_QUEUE[0] and u["variant"]["fields"] == {"simple_any_queue": True}, u
    assert u["variant"]["accepted"] == u["events"] == 6, u  # every event of the log (the sends are not events of SC)


def test_an_ack_of_a_copy_never_received_is_rejected_with_the_longest_accepted_prefix(tmp_path):
    # the application cannot ack a message it does not hold (model.py _s_actions: call_ack needs it held)
    events = [_send(0), _send(1), _recv(0, (0, 0)), _ack((0, 0)), _ack((1, 0)), _recv(1, (1, 0))]
    u = validate_simple(STD, events, tmp_path, "ack", "SC")
    assert u["status"] == "rejected" and u["accepted"] == 2, u
    assert json.loads(u["failed"]["event"])["action"] == ["simple_ack", 1, "ok"]
    assert "variant" not in u  # no queue's projection accepts it either


def test_a_receive_beyond_what_the_model_allows_is_rejected(tmp_path):
    # the copy is invisible (received, not settled): a second delivery of it is no answer of the model
    events = [_send(0), _send(1), _recv(0, (0, 0)), _recv(1), _recv(0, (0, 0)), _ack((0, 0))]
    u = validate_simple(STD, events, tmp_path, "twice", "SC")
    assert u["status"] == "rejected" and u["accepted"] == 2, u
    assert "variant" not in u


def test_an_empty_answer_before_the_last_send_claims_nothing(tmp_path):
    # the model's messages are all stored from the start, the run's are sent while the consumer
    # already receives: an empty answer then is logged with the answer unknown (the round-robin moves)
    events = [_recv(0), _send(0), _send(1), _recv(1, (1, 0)), _ack((1, 0)), _recv(0, (0, 0)), _ack((0, 0))]
    lines, _ = simple_log(STD, events, "SC")
    assert _actions(lines)[0] == ["simple_receive"]
    assert validate_simple(STD, events, tmp_path, "early", "SC")["status"] == "accepted"


def test_a_receive_of_several_messages_is_not_mapped():
    ev = _recv(0, (0, 0))
    ev["answer"]["messages"].append(dict(ev["answer"]["messages"][0], offset=1, handle="01|0:1:1"))
    lines, info = simple_log(STD, [_send(0), ev], "SC")
    assert lines is None and "brings one" in info["why"]


@pytest.mark.slow
def test_model_simple_on_a_fault_free_seed_is_accepted(tmp_path):
    from conq.conformance.ordered_consumption.upstream.runner import run

    res = run(WORKLOADS["model-simple"], 0, out=tmp_path, cap=60.0)
    assert res.end == "settled" and res.divergences == [], [d.as_dict() for d in res.divergences]
    v = res.validation
    # A received and acked; B received, its invisible duration changed to 0, received again (attempt
    # 2) and acked; empty receives around them
    assert v["status"] == "accepted" and v["config"] == "simple" and v["overrides"]["msg_queue"] == [0, 0], v
    acts = [json.loads(x)["action"] for x in list(open(v["log"]))[1:]]
    assert acts.count(["simple_ack", 0, "ok"]) == 1 and acts.count(["simple_ack", 1, "ok"]) == 1
    assert acts.count(["simple_change_invisible", 1, "ok"]) == 1
    assert v["coverage"]["states"] and len(v["witness"]) >= len(acts)


def test_the_python_client_asks_a_fresh_random_queue_on_every_receive(monkeypatch):
    # The divergence's smallest reproduction, on the client's own code (no server): with the random
    # start fixed at 1, a kept selector would ask queues 1, 0, 1, 0 (its index moves on); 5.1.2's
    # __select_topic_queue builds a new QueueSelector on every receive and selects from that one, so
    # every receive asks queue 1 (the one stored with put_if_absent is never selected from)
    pytest.importorskip("rocketmq")
    from rocketmq.v5.client.balancer import queue_selector
    from rocketmq.v5.consumer.simple import simple_consumer

    class Queue:
        def __init__(self, i):
            self.id = i

        def is_readable(self):
            return True

        def is_master_broker(self):
            return True

    class Route:
        message_queues = [Queue(0), Queue(1)]

    class Fake:
        client_type = simple_consumer.ClientType.SIMPLE_CONSUMER
        _SimpleConsumer__receive_queue_selectors = simple_consumer.ConcurrentMap()

        def _retrieve_topic_route_data(self, topic):
            return Route()

    monkeypatch.setattr(queue_selector.random, "randint", lambda a, b: 1)
    select = simple_consumer.SimpleConsumer._SimpleConsumer__select_topic_queue
    fake = Fake()
    assert [select(fake, "T").id for _ in range(4)] == [1, 1, 1, 1]
    kept = fake._SimpleConsumer__receive_queue_selectors.get("T")
    # the stored one is the first receive's (put_if_absent), used once: kept, it would go on 0, 1, 0, 1
    assert [kept.select_next_queue().id for _ in range(4)] == [0, 1, 0, 1]
