"""The simple consumer (seed 001 "Simple consumer"): receive / ack / change invisible duration, each one
request with no internal retry, concurrent callers, and no life-cycle action of the client's own."""

from __future__ import annotations

import threading

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
    SimpleConsumer,
    Transport,
)


def _setup(plan=None, *, queues=4, max_attempts=3):
    clock = ManualClock()
    b = Broker(clock=clock).start()
    mqs = b.create_topic("T", queues)
    b.create_consumer_group("G", retry_policy=RetryPolicy.immediate(max_attempts))
    return b, clock, mqs, InProcessChannel(b, plan)


def test_concurrent_receives_get_distinct_messages_and_each_call_is_one_request():
    b, clock, mqs, ch = _setup()
    for i in range(400):
        b.send_message(mqs[i % 4], Message("T", b"%d" % i), MessageType.NORMAL)
    sc = SimpleConsumer(ch, "G", "T").start()
    ch.requests.clear()
    got: list = []
    calls = [0]
    lock = threading.Lock()

    def app():
        while True:
            msgs = sc.receive(7, 60.0)
            with lock:
                calls[0] += 1
                got.extend(msgs)
            for m in msgs:
                sc.ack(m)
            if not msgs:
                with lock:
                    if len(got) == 400:
                        return

    threads = [threading.Thread(target=app) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert sorted(int(m.body) for m in got) == list(range(400))  # each message delivered once
    assert ch.requests["receive_message"] == calls[0] and ch.requests["ack_message"] == 400
    assert b.group_stats("G")["acked"] == 400


def test_receive_takes_the_queues_round_robin():
    b, clock, mqs, ch = _setup()
    for i in range(8):
        b.send_message(mqs[i % 4], Message("T", b"%d" % i), MessageType.NORMAL)
    sc = SimpleConsumer(ch, "G", "T").start()
    assert [m.queue.queue_id for _ in range(8) for m in sc.receive(1, 60.0)] == [0, 1, 2, 3] * 2


def test_a_failed_receive_moves_the_round_robin_on_like_upstream(scripted):
    """The next queue is taken before the request (upstream ``SubscriptionLoadBalancer.takeMessageQueue``),
    so a failed receive moves the round-robin on, as a successful one does: a request that timed out
    before the server took it and one whose answer was lost after the server delivered are the same
    ``REQUEST_TIMEOUT`` to the client, and staying on a failing queue would starve the others."""
    b, clock, mqs, ch = _setup(queues=2)
    sent = [b.send_message(mqs[i % 2], Message("T", b"%d" % i), MessageType.NORMAL) for i in range(4)]
    sch = scripted(ch, b, {"receive_message": [RpcError(Code.REQUEST_TIMEOUT, "not delivered"), "lost"]})
    sc = SimpleConsumer(sch, "G", "T").start()
    codes = []
    for _ in range(2):
        with pytest.raises(RpcError) as e:
            sc.receive(1, 60.0)
        codes.append(e.value.code)
    assert codes == [Code.REQUEST_TIMEOUT, Code.REQUEST_TIMEOUT]  # alike to the client
    assert b.message_state("G", sent[0].message_id)["state"] == "ready"  # not delivered
    assert b.message_state("G", sent[1].message_id) == {"state": "invisible", "attempt": 1}  # delivered, lost
    assert [m.queue.queue_id for _ in range(2) for m in sc.receive(1, 60.0)] == [0, 1]
    assert [args[1].queue_id for rpc, args in sch.calls if rpc == "receive_message"] == [0, 1, 0, 1]


def test_failed_calls_are_returned_after_one_request_without_retry():
    plan = FaultPlan(0, {"receive_message": {"unavailable": 1.0}, "ack_message": {"timeout": 1.0},
                         "change_invisible_duration": {"internal": 1.0}})
    b, clock, mqs, ch = _setup(plan, queues=1)
    b.send_message(mqs[0], Message("T", b"x"), MessageType.NORMAL)
    sc = SimpleConsumer(ch, "G", "T").start()
    with pytest.raises(RpcError) as e:
        sc.receive(1, 60.0)
    assert e.value.code is Transport.UNAVAILABLE and ch.requests["receive_message"] == 1
    (m,) = b.receive_message("G", mqs[0], 1, 60.0)
    with pytest.raises(RpcError) as e:
        sc.ack(m)
    assert e.value.code is Code.REQUEST_TIMEOUT and ch.requests["ack_message"] == 1
    with pytest.raises(RpcError) as e:
        sc.change_invisible_duration(m, 1.0)
    assert e.value.code is Code.INTERNAL_SERVER_ERROR and ch.requests["change_invisible_duration"] == 1
    assert b.message_state("G", m.message_id) == {"state": "invisible", "attempt": 1}


def test_change_invisible_duration_returns_the_new_handle_and_the_message_comes_back():
    b, clock, mqs, ch = _setup(queues=1)
    b.send_message(mqs[0], Message("T", b"x"), MessageType.NORMAL)
    sc = SimpleConsumer(ch, "G", "T").start()
    (m,) = sc.receive(1, 60.0)
    m2 = sc.change_invisible_duration(m, 5.0)
    assert m2.receipt_handle != m.receipt_handle and m2.message_id == m.message_id
    with pytest.raises(RpcError) as e:
        sc.ack(m)
    assert e.value.code is Code.INVALID_RECEIPT_HANDLE
    clock.advance(5.0)
    (m3,) = sc.receive(1, 60.0)
    assert m3.delivery_attempt == 2
    sc.ack(m3)
    assert b.group_stats("G")["acked"] == 1


def test_the_client_takes_no_lifecycle_action_the_server_redelivers_and_dead_letters():
    b, clock, mqs, ch = _setup(queues=1, max_attempts=3)
    sent = b.send_message(mqs[0], Message("T", b"x"), MessageType.NORMAL)
    sc = SimpleConsumer(ch, "G", "T").start()
    attempts = []
    for _ in range(3):
        (m,) = sc.receive(1, 10.0)
        attempts.append(m.delivery_attempt)
        clock.advance(10.0)  # the application neither acks nor changes anything
    assert sc.receive(1, 10.0) == []
    assert attempts == [1, 2, 3]
    assert ch.requests["ack_message"] == ch.requests["change_invisible_duration"] == 0
    assert [(d.message_id, d.by) for d in b.dead_letters("G")] == [(sent.message_id, "server")]


def test_close_releases_a_long_polling_receive(wait_until):
    b, clock, mqs, ch = _setup(queues=1)
    sc = SimpleConsumer(ch, "G", "T", await_duration=60.0).start()
    out = []
    t = threading.Thread(target=lambda: out.append(sc.receive(1, 10.0)))
    t.start()
    wait_until(lambda: clock.waiters() == 1, "the receive long-polling")
    sc.close()
    t.join(10)
    assert out == [[]]
