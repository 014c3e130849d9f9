"""The producer (seed 001 "Producer", steps 1-7 and 特别地): route cache and fetch, candidate rotation,
max attempts, the type check before any request, one attempt for transactional messages, the
server's back-off after throttling, FIFO messages pinned to their group's queue."""

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
    Permission,
    Producer,
    RpcError,
    SendError,
    Transport,
)
from conq.impl.ordered_consumption.producer import group_queue

ERR = RpcError(Code.INTERNAL_SERVER_ERROR, "scripted")


def _setup(scripted, script=None, *, queues=3, clock=None, **topic_kw):
    clock = clock or ManualClock()
    b = Broker(clock=clock).start()
    mqs = b.create_topic("T", queues, **topic_kw)
    b.create_consumer_group("G")
    ch = scripted(InProcessChannel(b), b, script)
    return b, mqs, ch, clock


def _send_queues(ch):
    return [args[0] for rpc, args in ch.calls if rpc == "send_message"]


def test_route_is_fetched_once_then_cached(scripted):
    b, mqs, ch, _ = _setup(scripted)
    p = Producer(ch)
    for i in range(5):
        p.send(Message("T", f"{i}".encode()))
    assert ch.requests["query_route"] == 1 and ch.requests["send_message"] == 5
    assert p.cached_route("T") == mqs
    # successive sends start at successive candidates: every queue gets used
    assert {q.queue_id for q in _send_queues(ch)} == {0, 1, 2}


def test_a_failed_route_fetch_fails_the_send_with_no_send_request(scripted):
    b, mqs, ch, _ = _setup(scripted, {"query_route": [RpcError(Transport.UNAVAILABLE, "down")]})
    p = Producer(ch)
    with pytest.raises(SendError) as e:
        p.send(Message("T", b"x"))
    assert e.value.attempts == 0 and ch.requests["send_message"] == 0
    assert p.cached_route("T") is None  # nothing cached: the next send fetches again
    p.send(Message("T", b"x"))
    assert ch.requests["query_route"] == 2 and ch.requests["send_message"] == 1


def test_failure_rotates_to_the_next_candidate_and_retries_at_once(scripted):
    b, mqs, ch, clock = _setup(scripted, {"send_message": [ERR, ERR]})
    receipt = Producer(ch, clock=clock).send(Message("T", b"x"))
    used = _send_queues(ch)
    assert len(used) == 3 and len({q.queue_id for q in used}) == 3  # candidates[(k-1) mod n]
    assert [(q.queue_id - used[0].queue_id) % 3 for q in used] == [0, 1, 2]
    assert receipt.queue == used[2]
    assert clock.waiters() == 0 and clock.now() == 0.0  # no back-off for a plain error


def test_at_most_max_attempts_requests_then_the_send_fails(scripted):
    b, mqs, ch, _ = _setup(scripted, {"send_message": [ERR] * 10})
    for max_attempts in (1, 3, 5):
        ch.requests.clear()
        with pytest.raises(SendError) as e:
            Producer(ch, max_attempts=max_attempts).send(Message("T", b"x"))
        assert e.value.attempts == max_attempts == ch.requests["send_message"]
        assert e.value.cause is ERR
    assert b.group_stats("G")["ready"] == 0


def test_transactional_message_gets_exactly_one_attempt(scripted):
    b, mqs, ch, _ = _setup(scripted, {"send_message": [ERR, ERR, ERR]}, message_type=MessageType.TRANSACTION)
    p = Producer(ch)
    with pytest.raises(SendError) as e:
        p.send(Message("T", b"x"), p.begin_transaction())
    assert e.value.attempts == 1 == ch.requests["send_message"]
    # throttling is no exception to the rule
    ch.script["send_message"] = [RpcError(Code.TOO_MANY_REQUESTS, "slow down", backoff=1.0)]
    ch.requests.clear()
    with pytest.raises(SendError):
        p.send(Message("T", b"x"), p.begin_transaction())
    assert ch.requests["send_message"] == 1
    # upstream since 2024 (DEV-003's switch): retried like the rest
    ch.script["send_message"] = [ERR, ERR]
    ch.requests.clear()
    tx = Producer(ch, transactional_retries=True).begin_transaction()
    tx._producer.send(Message("T", b"y"), tx)
    assert ch.requests["send_message"] == 3


def test_transaction_commit_makes_the_half_message_deliverable(scripted):
    b, mqs, ch, _ = _setup(scripted, message_type=MessageType.TRANSACTION, queues=1)
    p = Producer(ch)
    tx = p.begin_transaction()
    r = p.send(Message("T", b"x"), tx)
    assert b.message_state("G", r.message_id)["state"] == "half"
    tx.commit()
    assert b.message_state("G", r.message_id)["state"] == "ready"
    with pytest.raises(RuntimeError):
        tx.rollback()


def test_fifo_message_never_leaves_its_groups_queue(scripted):
    b, mqs, ch, _ = _setup(scripted, {"send_message": [ERR, ERR]}, message_type=MessageType.FIFO, queues=4)
    p = Producer(ch)
    r = p.send(Message("T", b"x", group="order-17"))
    used = _send_queues(ch)
    assert len(used) == 3 and set(used) == {group_queue("order-17", mqs)} == {r.queue}
    for _ in range(20):  # every later message of the group goes to the same queue
        assert p.send(Message("T", b"y", group="order-17")).queue == r.queue
    assert len({p.send(Message("T", b"z", group=f"g{i}")).queue for i in range(40)}) == 4
    # the switch of DEV-013 rotates them instead
    ch.script["send_message"] = [ERR, ERR]
    ch.calls.clear()
    Producer(ch, fifo_group_pinning=False).send(Message("T", b"x", group="order-17"))
    assert len(set(_send_queues(ch))) == 3


def test_type_mismatch_fails_before_any_request(scripted):
    b, mqs, ch, _ = _setup(scripted, message_type=MessageType.FIFO)
    p = Producer(ch)
    p.send(Message("T", b"warm the route cache", group="g"))
    ch.requests.clear()
    with pytest.raises(SendError) as e:
        p.send(Message("T", b"x"))  # a NORMAL message to a FIFO-only topic
    assert e.value.attempts == 0 and ch.requests["send_message"] == 0
    # a contradictory message fails even before the route is looked at
    with pytest.raises(SendError):
        Producer(ch).send(Message("T", b"x", group="g", delivery_timestamp=5.0))
    assert sum(ch.requests.values()) == 0
    # upstream's switch turns the check off: the server then refuses it
    with pytest.raises(SendError) as e:
        Producer(ch, validate_message_type=False, max_attempts=1).send(Message("T", b"x"))
    assert e.value.cause.code is Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_type_mismatch_on_a_retry_fails_at_once(scripted):
    b, mqs, ch, _ = _setup(scripted, {"send_message": [ERR]}, queues=2,
                           accept_types=[{MessageType.NORMAL}, {MessageType.FIFO}])
    p = Producer(ch)
    outcomes = []
    for _ in range(2):  # the rotation starts at queue 0, then at queue 1
        ch.script["send_message"] = [ERR]
        ch.requests.clear()
        try:
            p.send(Message("T", b"x"))
            outcomes.append("sent")
        except SendError as e:
            outcomes.append(e.attempts)
        outcomes.append(ch.requests["send_message"])
    # starting at queue 0: one request fails, the next candidate (queue 1) does not accept NORMAL
    # starting at queue 1: mismatch before any request
    assert outcomes == [1, 1, 0, 0]


def test_unwritable_queues_are_not_candidates(scripted):
    b, mqs, ch, _ = _setup(scripted, permissions=[Permission.READ, Permission.READ_WRITE, Permission.READ])
    p = Producer(ch)
    assert {p.send(Message("T", f"{i}".encode())).queue.queue_id for i in range(6)} == {1}


def test_throttled_retry_waits_for_the_servers_backoff(scripted, wait_until):
    clock = ManualClock()
    b, mqs, ch, _ = _setup(scripted, {"send_message": [RpcError(Code.TOO_MANY_REQUESTS, "slow", backoff=2.0)]},
                           clock=clock)
    p = Producer(ch, clock=clock)
    out = []
    t = threading.Thread(target=lambda: out.append(p.send(Message("T", b"x"))))
    t.start()
    wait_until(lambda: clock.waiters() == 1, "the producer backing off")
    assert ch.requests["send_message"] == 1
    clock.advance(1.999)
    wait_until(lambda: clock.waiters() == 1, "the producer still backing off")
    assert ch.requests["send_message"] == 1 and t.is_alive()
    clock.advance(0.001)
    t.join(10)
    assert not t.is_alive() and len(out) == 1 and ch.requests["send_message"] == 2
    used = _send_queues(ch)
    assert used[0] != used[1]  # the retry after the back-off also rotates


def test_close_interrupts_a_backoff(scripted, wait_until):
    clock = ManualClock()
    b, mqs, ch, _ = _setup(scripted, {"send_message": [RpcError(Code.TOO_MANY_REQUESTS, "slow", backoff=60.0)]},
                           clock=clock)
    p = Producer(ch, clock=clock)
    errors = []

    def send():
        try:
            p.send(Message("T", b"x"))
        except SendError as e:
            errors.append(e)

    t = threading.Thread(target=send)
    t.start()
    wait_until(lambda: clock.waiters() == 1, "the producer backing off")
    p.close()
    t.join(10)
    assert len(errors) == 1 and errors[0].attempts == 1


def test_concurrent_sends_with_faults_store_every_message():
    clock = ManualClock()
    b = Broker(clock=clock).start()
    mqs = b.create_topic("T", 4, message_type=MessageType.FIFO)
    b.create_consumer_group("G", fifo=True, fifo_gate=False)
    ch = InProcessChannel(b, FaultPlan(9, {"send_message": {"timeout": 0.2, "unavailable": 0.1}}))
    p = Producer(ch, clock=clock, max_attempts=10)
    receipts: list = []
    lock = threading.Lock()

    def run(k):
        for i in range(150):
            r = p.send(Message("T", f"{k}:{i}".encode(), group=f"g{k}"))
            with lock:
                receipts.append(r)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(receipts) == 1200 and len({r.message_id for r in receipts}) == 1200
    assert ch.requests["send_message"] > 1200  # faults were met and retried
    # each group's messages are in its one queue, in send order
    stored = {mq: b.receive_message("G", mq, 10_000, 10.0) for mq in mqs}
    for k in range(8):
        home = group_queue(f"g{k}", mqs)
        assert [m.body for m in stored[home] if m.group == f"g{k}"] == [f"{k}:{i}".encode() for i in range(150)]
        assert sum(m.group == f"g{k}" for mq in mqs for m in stored[mq]) == 150  # none elsewhere
