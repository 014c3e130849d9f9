"""The broker core: receipt handles, invisible time that expires (injected clock, no sleeps), attempts,
dead-lettering, the FIFO group gate, delay and transactional messages, throttling, long polling,
start/stop and queue assignment."""

from __future__ import annotations

import threading

import pytest

from conq.impl.ordered_consumption import (
    Broker,
    Code,
    ManualClock,
    Message,
    MessageType,
    Permission,
    RetryPolicy,
    RpcError,
    Transport,
)


def _broker(*, queues=1, mtype=MessageType.NORMAL, fifo=False, max_attempts=3, **group_kw):
    clock = ManualClock()
    b = Broker(clock=clock).start()
    mqs = b.create_topic("T", queues, message_type=mtype)
    b.create_consumer_group("G", fifo=fifo, retry_policy=RetryPolicy.immediate(max_attempts), **group_kw)
    return b, clock, mqs


def _send(b, mq, body, mtype=MessageType.NORMAL, **kw):
    return b.send_message(mq, Message("T", body, **kw), mtype)


def _codes(fn):
    with pytest.raises(RpcError) as e:
        fn()
    return e.value.code


def test_receive_in_offset_order_with_attempt_one_and_a_handle_each():
    b, _, (mq,) = _broker()
    ids = [_send(b, mq, f"m{i}".encode()).message_id for i in range(5)]
    got = b.receive_message("G", mq, 3, 10.0)
    assert [m.message_id for m in got] == ids[:3]
    assert [m.offset for m in got] == [0, 1, 2]
    assert {m.delivery_attempt for m in got} == {1}
    assert len({m.receipt_handle for m in got}) == 3
    rest = b.receive_message("G", mq, 10, 10.0)
    assert [m.message_id for m in rest] == ids[3:]
    assert b.receive_message("G", mq, 10, 10.0) == []  # all invisible: the MESSAGE_NOT_FOUND answer


def test_invisible_time_expiry_redelivers_with_next_attempt_and_kills_the_old_handle():
    b, clock, (mq,) = _broker()
    _send(b, mq, b"a")
    (m1,) = b.receive_message("G", mq, 1, 10.0)
    clock.advance(9.999)
    assert b.receive_message("G", mq, 1, 10.0) == []  # still invisible
    assert b.message_state("G", m1.message_id) == {"state": "invisible", "attempt": 1}
    clock.advance(0.001)  # the invisible time is over
    assert b.message_state("G", m1.message_id) == {"state": "ready", "attempt": 1}
    assert _codes(lambda: b.ack_message("G", "T", m1.message_id, m1.receipt_handle)) is Code.INVALID_RECEIPT_HANDLE
    (m2,) = b.receive_message("G", mq, 1, 10.0)
    assert (m2.message_id, m2.delivery_attempt) == (m1.message_id, 2)
    assert m2.receipt_handle != m1.receipt_handle
    assert _codes(lambda: b.ack_message("G", "T", m1.message_id, m1.receipt_handle)) is Code.INVALID_RECEIPT_HANDLE
    b.ack_message("G", "T", m2.message_id, m2.receipt_handle)
    assert b.message_state("G", m1.message_id)["state"] == "acked"
    assert _codes(lambda: b.ack_message("G", "T", m2.message_id, m2.receipt_handle)) is Code.INVALID_RECEIPT_HANDLE


def test_change_invisible_duration_issues_a_new_handle_and_zero_means_now():
    b, clock, (mq,) = _broker()
    _send(b, mq, b"a")
    (m,) = b.receive_message("G", mq, 1, 10.0)
    h2 = b.change_invisible_duration("G", "T", m.message_id, m.receipt_handle, 5.0)
    assert h2 != m.receipt_handle
    assert _codes(lambda: b.ack_message("G", "T", m.message_id, m.receipt_handle)) is Code.INVALID_RECEIPT_HANDLE
    clock.advance(9.0)  # the original 10 s no longer matter: the new deadline is 5 s after the change
    assert b.message_state("G", m.message_id) == {"state": "ready", "attempt": 1}
    (m2,) = b.receive_message("G", mq, 1, 10.0)
    assert m2.delivery_attempt == 2
    h3 = b.change_invisible_duration("G", "T", m2.message_id, m2.receipt_handle, 0)
    assert b.message_state("G", m.message_id)["state"] == "ready"
    assert _codes(lambda: b.ack_message("G", "T", m2.message_id, h3)) is Code.INVALID_RECEIPT_HANDLE
    assert _codes(lambda: b.change_invisible_duration("G", "T", m2.message_id, h3, -1)) is Code.ILLEGAL_INVISIBLE_TIME


def test_server_dead_letters_when_the_last_attempt_expires():
    b, clock, (mq,) = _broker(max_attempts=3)
    _send(b, mq, b"a")
    for attempt in (1, 2, 3):
        (m,) = b.receive_message("G", mq, 1, 10.0)
        assert m.delivery_attempt == attempt
        clock.advance(10.0)
    assert b.receive_message("G", mq, 1, 10.0) == []
    assert b.message_state("G", m.message_id) == {"state": "dead-lettered-by-server", "attempt": 3}
    (dl,) = b.dead_letters("G")
    assert (dl.message_id, dl.attempt, dl.by) == (m.message_id, 3, "server")
    stats = b.group_stats("G")
    assert (stats["dead_lettered_by_server"], stats["dead_lettered_by_client"], stats["unsettled"]) == (1, 0, 0)


def test_client_forward_to_dlq_settles_the_message():
    b, _, (mq,) = _broker()
    _send(b, mq, b"a")
    (m,) = b.receive_message("G", mq, 1, 10.0)
    b.forward_to_dlq("G", "T", m.message_id, m.receipt_handle, 3, 3)
    (dl,) = b.dead_letters("G")
    assert (dl.by, dl.attempt) == ("client", 3)
    again = _codes(lambda: b.forward_to_dlq("G", "T", m.message_id, m.receipt_handle, 3, 3))
    assert again is Code.INVALID_RECEIPT_HANDLE


def test_fifo_gate_holds_a_groups_next_message_while_an_earlier_one_is_unsettled():
    b, clock, (mq,) = _broker(mtype=MessageType.FIFO, fifo=True)
    a1, a2, b1, a3 = (_send(b, mq, x.encode(), MessageType.FIFO, group=x[0]) for x in ("a1", "a2", "b1", "a3"))
    got = b.receive_message("G", mq, 10, 10.0)
    assert [m.message_id for m in got] == [a1.message_id, b1.message_id]  # one per group, in queue order
    assert b.receive_message("G", mq, 10, 10.0) == []  # a2 waits for a1
    clock.advance(10.0)  # a1 expires: it is a1 again (attempt 2), never a2, that comes next
    again = b.receive_message("G", mq, 10, 10.0)
    assert [(m.message_id, m.delivery_attempt) for m in again] == [(a1.message_id, 2), (b1.message_id, 2)]
    b.ack_message("G", "T", again[0].message_id, again[0].receipt_handle)
    (nxt,) = b.receive_message("G", mq, 10, 10.0)
    assert nxt.message_id == a2.message_id
    b.forward_to_dlq("G", "T", nxt.message_id, nxt.receipt_handle)
    (last,) = b.receive_message("G", mq, 10, 10.0)
    assert last.message_id == a3.message_id


def test_fifo_without_gate_hands_out_queue_order():
    b, _, (mq,) = _broker(mtype=MessageType.FIFO, fifo=True, fifo_gate=False)
    ids = [_send(b, mq, f"a{i}".encode(), MessageType.FIFO, group="a").message_id for i in range(3)]
    assert [m.message_id for m in b.receive_message("G", mq, 10, 10.0)] == ids


def test_receipt_handles_of_other_messages_topics_and_garbage_are_refused():
    b, _, (mq,) = _broker()
    b.create_topic("U", 1)
    _send(b, mq, b"a")
    (m,) = b.receive_message("G", mq, 1, 10.0)
    assert _codes(lambda: b.ack_message("G", "T", m.message_id, "garbage")) is Code.INVALID_RECEIPT_HANDLE
    assert _codes(lambda: b.ack_message("G", "U", m.message_id, m.receipt_handle)) is Code.INVALID_RECEIPT_HANDLE
    uid, _, seq = m.receipt_handle.split(":")
    assert _codes(lambda: b.ack_message("G", "T", None, f"{uid}:99:{seq}")) is Code.MESSAGE_NOT_FOUND
    assert _codes(lambda: b.ack_message("G", "X", m.message_id, m.receipt_handle)) is Code.TOPIC_NOT_FOUND
    assert _codes(lambda: b.receive_message("nope", mq, 1, 10.0)) is Code.CONSUMER_GROUP_NOT_FOUND
    b.ack_message("G", "T", m.message_id, m.receipt_handle)


def test_send_is_throttled_with_a_backoff_the_broker_chooses():
    clock = ManualClock()
    b = Broker(clock=clock).start()
    (mq,) = b.create_topic("T", 1, send_rate=2.0, send_burst=1)
    _send(b, mq, b"1")
    with pytest.raises(RpcError) as e:
        _send(b, mq, b"2")
    assert e.value.code is Code.TOO_MANY_REQUESTS and e.value.retriable
    assert e.value.backoff == pytest.approx(0.5)  # one token every 0.5 s
    clock.advance(0.25)
    with pytest.raises(RpcError) as e:
        _send(b, mq, b"2")
    assert e.value.backoff == pytest.approx(0.25)
    clock.advance(0.25)
    _send(b, mq, b"2")


def test_send_validates_queue_type_permission_and_topic():
    b = Broker(clock=ManualClock()).start()
    mqs = b.create_topic("T", 2, accept_types=[{MessageType.NORMAL}, {MessageType.FIFO}],
                         permissions=[Permission.READ_WRITE, Permission.READ])
    assert _codes(lambda: b.send_message(mqs[0], Message("T", b"x", group="g"), MessageType.FIFO)) \
        is Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert _codes(lambda: b.send_message(mqs[1], Message("T", b"x", group="g"), MessageType.FIFO)) is Code.FORBIDDEN
    assert _codes(lambda: b.query_route("nope")) is Code.TOPIC_NOT_FOUND
    assert b.query_route("T") == mqs
    assert mqs[0].accept_types == frozenset({MessageType.NORMAL})


def test_delay_message_is_deliverable_at_its_timestamp():
    b = Broker(clock=(clock := ManualClock(100.0))).start()
    (mq,) = b.create_topic("T", 1, accept_types=[{MessageType.DELAY, MessageType.NORMAL}])
    b.create_consumer_group("G")
    d = b.send_message(mq, Message("T", b"later", delivery_timestamp=105.0), MessageType.DELAY)
    n = b.send_message(mq, Message("T", b"now"), MessageType.NORMAL)
    assert [m.message_id for m in b.receive_message("G", mq, 10, 60.0)] == [n.message_id]
    clock.advance(4.9)
    assert b.receive_message("G", mq, 10, 60.0) == []
    clock.advance(0.1)
    assert [m.message_id for m in b.receive_message("G", mq, 10, 60.0)] == [d.message_id]


def test_transactional_message_is_invisible_until_commit_and_gone_after_rollback():
    b = Broker(clock=ManualClock()).start()
    (mq,) = b.create_topic("T", 1, message_type=MessageType.TRANSACTION)
    b.create_consumer_group("G")
    t1 = b.send_message(mq, Message("T", b"t1"), MessageType.TRANSACTION, "tx1")
    t2 = b.send_message(mq, Message("T", b"t2"), MessageType.TRANSACTION, "tx2")
    assert b.receive_message("G", mq, 10, 60.0) == []
    assert b.message_state("G", t1.message_id)["state"] == "half"
    b.end_transaction("T", t1.message_id, "tx1", True)
    b.end_transaction("T", t1.message_id, "tx1", True)  # repeating the same resolution is harmless
    b.end_transaction("T", t2.message_id, "tx2", False)
    assert [m.message_id for m in b.receive_message("G", mq, 10, 60.0)] == [t1.message_id]
    assert b.message_state("G", t2.message_id)["state"] == "rolled-back"
    assert _codes(lambda: b.end_transaction("T", t2.message_id, "tx2", True)) is Code.INVALID_TRANSACTION_ID
    assert _codes(lambda: b.end_transaction("T", t2.message_id, "other", True)) is Code.INVALID_TRANSACTION_ID


def test_long_poll_returns_when_a_message_arrives_or_the_clock_reaches_its_deadline(wait_until):
    b, clock, (mq,) = _broker()
    out = []
    t = threading.Thread(target=lambda: out.append(b.receive_message("G", mq, 5, 10.0, long_polling_timeout=30.0)))
    t.start()
    wait_until(lambda: clock.waiters() == 1, "the long poll waiting")
    sent = _send(b, mq, b"a")
    t.join(10)
    assert not t.is_alive() and [m.message_id for m in out[0]] == [sent.message_id]
    out.clear()
    t = threading.Thread(target=lambda: out.append(b.receive_message("G", mq, 5, 10.0, long_polling_timeout=30.0)))
    t.start()
    wait_until(lambda: clock.waiters() == 1, "the long poll waiting")
    clock.advance(29.0)
    wait_until(lambda: clock.waiters() == 1, "the long poll waiting again")
    assert t.is_alive()
    clock.advance(1.0)  # deadline, and the first message's invisible time (10 s) is long over
    t.join(10)
    assert not t.is_alive() and [(m.message_id, m.delivery_attempt) for m in out[0]] == [(sent.message_id, 2)]


def test_stop_answers_unavailable_releases_long_polls_and_keeps_state(wait_until):
    b, clock, (mq,) = _broker()
    a = _send(b, mq, b"a")
    errors = []

    def poll():
        try:
            b.receive_message("G", mq, 5, 10.0, long_polling_timeout=60.0)
        except RpcError as e:
            errors.append(e.code)

    # first take the only message, so the next poll has to wait
    (m,) = b.receive_message("G", mq, 5, 10.0)
    t = threading.Thread(target=poll)
    t.start()
    wait_until(lambda: clock.waiters() == 1, "the long poll waiting")
    b.stop()
    t.join(10)
    assert errors == [Transport.UNAVAILABLE]
    assert _codes(lambda: _send(b, mq, b"b")) is Transport.UNAVAILABLE
    assert _codes(lambda: b.ack_message("G", "T", m.message_id, m.receipt_handle)) is Transport.UNAVAILABLE
    b.start()
    b.ack_message("G", "T", m.message_id, m.receipt_handle)  # the handle survived the restart
    assert b.message_state("G", a.message_id)["state"] == "acked"


def test_queue_assignment_exclusive_split_pins_and_shared():
    b = Broker(clock=ManualClock()).start()
    mqs = b.create_topic("T", 5)
    b.create_consumer_group("G")
    b.create_consumer_group("S", assignment="shared")
    assert b.query_assignment("T", "G", "c1") == ()  # unknown client: nothing
    for c in ("c2", "c1", "c3"):
        b.heartbeat("G", c)
        b.heartbeat("S", c)
    split = {c: b.query_assignment("T", "G", c) for c in ("c1", "c2", "c3")}
    assert split == {"c1": (mqs[0], mqs[3]), "c2": (mqs[1], mqs[4]), "c3": (mqs[2],)}
    assert all(b.query_assignment("T", "S", c) == mqs for c in ("c1", "c2", "c3"))
    b.pin_assignment("G", "c1", mqs[:4])
    assert b.query_assignment("T", "G", "c1") == mqs[:4]
    assert b.query_assignment("T", "G", "c2") == (mqs[0], mqs[2], mqs[4])  # the rest share without c1
    b.unregister("G", "c3")
    b.pin_assignment("G", "c1", None)
    assert b.query_assignment("T", "G", "c3") == ()


def test_a_group_sees_a_topic_from_its_first_message_and_groups_are_independent():
    b, _, (mq,) = _broker()
    ids = [_send(b, mq, f"{i}".encode()).message_id for i in range(3)]
    b.create_consumer_group("H")
    assert [m.message_id for m in b.receive_message("H", mq, 10, 10.0)] == ids
    got = b.receive_message("G", mq, 10, 10.0)
    assert [m.message_id for m in got] == ids  # G's deliveries are its own
    for m in got:
        b.ack_message("G", "T", m.message_id, m.receipt_handle)
    assert b.group_stats("G")["acked"] == 3 and b.group_stats("H")["invisible"] == 3
