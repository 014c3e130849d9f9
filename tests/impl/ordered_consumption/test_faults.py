"""Seeded fault injection: deterministic per request, every answer kind, and each non-retriable answer
made true on the broker before it is given."""

from __future__ import annotations

import pytest

from conq.impl.ordered_consumption import (
    Broker,
    Code,
    FaultPlan,
    InProcessChannel,
    ManualClock,
    Message,
    MessageType,
    RetryPolicy,
    RpcError,
    Transport,
)
from conq.impl.ordered_consumption.faults import KINDS


def _setup(plan, *, max_attempts=3):
    clock = ManualClock()
    b = Broker(clock=clock).start()
    (mq,) = b.create_topic("T", 1)
    b.create_consumer_group("G", retry_policy=RetryPolicy.immediate(max_attempts))
    return b, clock, mq, InProcessChannel(b, plan)


def _outcome(fn):
    try:
        fn()
        return "ok"
    except RpcError as e:
        return e.code


def test_same_seed_same_answers_other_seed_other_answers():
    rates = {"*": {"unavailable": 0.2, "timeout": 0.2, "internal": 0.1}}
    runs = {}
    for seed in (1, 1, 2):
        b, _, mq, ch = _setup(FaultPlan(seed, rates))
        runs.setdefault(seed, []).append([_outcome(lambda: ch.query_route("T")) for _ in range(200)])
    assert runs[1][0] == runs[1][1]
    assert runs[1][0] != runs[2][0]
    answers = runs[1][0]
    # about half fail, with each kind present (a count, from the seeded hash: no flakiness)
    assert 60 <= sum(a != "ok" for a in answers) <= 140
    assert {Transport.UNAVAILABLE, Code.REQUEST_TIMEOUT, Code.INTERNAL_SERVER_ERROR} <= set(answers)


def test_a_plan_refuses_answers_an_rpc_cannot_give():
    with pytest.raises(ValueError):
        FaultPlan(0, {"query_route": {"lost": 0.1}})
    with pytest.raises(ValueError):
        FaultPlan(0, {"nope": {"timeout": 0.1}})
    assert "invalid-handle" in KINDS["ack_message"] and "invalid-handle" not in KINDS["send_message"]


def test_lost_send_stores_the_message_and_the_retry_stores_a_second_copy():
    b, _, mq, ch = _setup(FaultPlan(0, {"send_message": {"lost": 1.0}}))
    with pytest.raises(RpcError) as e:
        ch.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
    assert e.value.code is Code.REQUEST_TIMEOUT and e.value.retriable
    with pytest.raises(RpcError):
        ch.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
    assert b.group_stats("G")["ready"] == 2


def test_answers_before_the_server_apply_nothing():
    for kind, code in (("unavailable", Transport.UNAVAILABLE), ("timeout", Code.REQUEST_TIMEOUT),
                       ("internal", Code.INTERNAL_SERVER_ERROR), ("proxy-timeout", Code.PROXY_TIMEOUT),
                       ("bad-request", Code.BAD_REQUEST)):
        b, _, mq, ch = _setup(FaultPlan(0, {"send_message": {kind: 1.0}}))
        assert _outcome(lambda: ch.send_message(mq, Message("T", b"x"), MessageType.NORMAL)) is code
        assert b.group_stats("G")["ready"] == 0, kind
        assert ch.answers[("send_message", kind)] == 1


def test_throttled_answer_carries_a_backoff_from_the_servers_list():
    b, _, mq, ch = _setup(FaultPlan(3, {"receive_message": {"throttled": 1.0}}, backoffs=(0.25, 0.5)))
    backoffs = set()
    for _ in range(50):
        with pytest.raises(RpcError) as e:
            ch.receive_message("G", mq, 1, 10.0)
        assert e.value.throttled
        backoffs.add(e.value.backoff)
    assert backoffs == {0.25, 0.5}


def test_lost_ack_settles_and_the_retry_meets_a_genuinely_invalid_handle():
    b, _, mq, ch = _setup(FaultPlan(0, {"ack_message": {"lost": 1.0}}))
    b.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
    (m,) = ch.receive_message("G", mq, 1, 10.0)
    assert _outcome(lambda: ch.ack_message("G", "T", m.message_id, m.receipt_handle)) is Code.REQUEST_TIMEOUT
    assert b.message_state("G", m.message_id)["state"] == "acked"
    assert _outcome(lambda: b.ack_message("G", "T", m.message_id, m.receipt_handle)) is Code.INVALID_RECEIPT_HANDLE


def test_invalid_handle_and_not_found_are_made_true_before_they_are_answered():
    for kind, code in (("invalid-handle", Code.INVALID_RECEIPT_HANDLE), ("not-found", Code.MESSAGE_NOT_FOUND)):
        b, _, mq, ch = _setup(FaultPlan(0, {"ack_message": {kind: 1.0}}))
        b.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
        (m,) = ch.receive_message("G", mq, 1, 10.0)
        assert _outcome(lambda: ch.ack_message("G", "T", m.message_id, m.receipt_handle)) is code
        # the delivery did expire: the message is deliverable again, with the next attempt, at once
        (m2,) = ch.receive_message("G", mq, 1, 10.0)
        assert (m2.message_id, m2.delivery_attempt) == (m.message_id, 2)
        assert _outcome(lambda: b.ack_message("G", "T", m.message_id, m.receipt_handle)) is Code.INVALID_RECEIPT_HANDLE


def test_delivery_costing_faults_respect_the_per_message_budget():
    b, _, mq, ch = _setup(FaultPlan(0, {"ack_message": {"invalid-handle": 1.0}}, max_delivery_faults=2),
                          max_attempts=5)
    b.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
    answers = []
    for _ in range(3):
        (m,) = ch.receive_message("G", mq, 1, 10.0)
        answers.append(_outcome(lambda: ch.ack_message("G", "T", m.message_id, m.receipt_handle)))
    assert answers == [Code.INVALID_RECEIPT_HANDLE, Code.INVALID_RECEIPT_HANDLE, "ok"]
    assert b.message_state("G", m.message_id) == {"state": "acked", "attempt": None}


def test_receive_not_found_is_empty_and_lost_receive_waits_for_the_invisible_time():
    b, clock, mq, ch = _setup(FaultPlan(0, {"receive_message": {"not-found": 1.0}}))
    b.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
    assert ch.receive_message("G", mq, 1, 10.0) == []
    assert b.group_stats("G")["ready"] == 1
    b2, clock2, mq2, ch2 = _setup(FaultPlan(0, {"receive_message": {"lost": 1.0}}))
    sent = b2.send_message(mq2, Message("T", b"x"), MessageType.NORMAL)
    assert _outcome(lambda: ch2.receive_message("G", mq2, 1, 10.0)) is Code.REQUEST_TIMEOUT
    assert b2.message_state("G", sent.message_id) == {"state": "invisible", "attempt": 1}
    clock2.advance(10.0)
    (m,) = b2.receive_message("G", mq2, 1, 10.0)
    assert m.delivery_attempt == 2


def test_requests_are_counted_per_rpc_and_answer():
    b, _, mq, ch = _setup(FaultPlan(5, {"query_route": {"timeout": 0.5}}))
    outcomes = [_outcome(lambda: ch.query_route("T")) for _ in range(40)]
    assert ch.requests["query_route"] == 40
    assert ch.answers[("query_route", "timeout")] == outcomes.count(Code.REQUEST_TIMEOUT)
    assert ch.answers[("query_route", "ok")] == outcomes.count("ok")
