"""Unit tests of conq.impl.consumer_lists.queue, driven step by step from one thread (the conformance mode)."""

import json

import pytest

from conq.impl.consumer_lists.consumer_manager import NodeState
from conq.impl.consumer_lists.queue import DEFAULT_PRIORITY, MessageState, Queue, QueueError
from conq.impl.scheduling import DeterministicScheduler, SchedulerError


def st(q, cid):
    return q.consumer(cid).state


def drain(q, c):
    got = []
    while (m := q.deliver_single_message(c)) is not None:
        got.append(m)
    return got


def test_new_message_notifies_one_acquirer_and_every_browser():
    q = Queue()
    a, b = q.add_consumer("a"), q.add_consumer("b")
    br1 = q.add_consumer("br1", acquires=False)
    br2 = q.add_consumer("br2", acquires=False)
    q.notifications.clear()
    m1 = q.enqueue()
    assert q.notifications == ["br1", "br2", "a"]
    assert st(q, "a") == NodeState.NOTIFIED and st(q, "b") == NodeState.INTERESTED
    q.notifications.clear()
    q.enqueue()  # a is NOTIFIED (expected to pull): the walk finds b
    assert q.notifications == ["br1", "br2", "b"]
    assert q.deliver_single_message(a) == m1
    assert st(q, "a") == NodeState.NOTIFIED  # success: keep pulling
    assert q.deliver_single_message(a) == 2
    assert q.deliver_single_message(a) is None
    assert st(q, "a") == NodeState.INTERESTED  # nothing: back to Interested ...
    assert [x.id for x in q.qcm.interested()] == ["a"]  # ... at the back (b is NOTIFIED now)
    assert q.deliver_single_message(b) is None and st(q, "b") == NodeState.INTERESTED
    assert [x.id for x in q.qcm.interested()] == ["a", "b"]
    assert drain(q, br1) == [] and drain(q, br2) == []  # both messages were acquired before browsing


def test_no_notification_without_available_message_and_interest():
    q = Queue()
    a = q.add_consumer("a", flow_active=False)
    q.enqueue(held=True)
    assert q.notifications == []
    q.enqueue()
    assert q.notifications == []  # a does not want work
    a.set_flow(True)
    assert q.notifications == ["a"] and st(q, "a") == NodeState.NOTIFIED
    assert q.deliver_single_message(a) == 2
    assert q.deliver_single_message(a) is None  # 1 is held


def test_added_consumer_is_notified_when_work_is_waiting():
    q = Queue()
    m = q.enqueue()
    c = q.add_consumer("late")
    assert q.notifications == ["late"]
    assert q.deliver_single_message(c) == m


def test_priorities_strict_and_walk_stops_at_higher_priority():
    q = Queue()
    lo = q.add_consumer("lo", priority=1)
    hi = q.add_consumer("hi", priority=5)
    q.enqueue()
    assert q.notifications == ["hi"]
    q.enqueue()  # hi NOTIFIED and wants work: lo must not be woken for it
    assert q.notifications == ["hi"]
    assert q.deliver_single_message(lo) is None  # strict priority
    assert drain(q, hi) == [1, 2]
    q.enqueue()
    assert q.notifications == ["hi", "hi"] and st(q, "hi") == NodeState.NOTIFIED
    q.notifications.clear()
    hi.set_flow(False)  # hi loses interest: the lower-priority consumer is notified
    assert q.notifications == ["lo"] and st(q, "hi") == NodeState.NOT_INTERESTED
    assert drain(q, lo) == [3]


def test_loss_of_interest_notifies_one_lower_priority_consumer():
    q = Queue()
    lo1 = q.add_consumer("lo1", priority=1)
    q.add_consumer("lo2", priority=1)
    hi = q.add_consumer("hi", priority=5)
    q.enqueue()
    assert q.notifications == ["hi"]
    q.notifications.clear()
    hi.set_flow(False)  # NOTIFIED -> NOT_INTERESTED: the message would be stranded without this rule
    assert q.notifications == ["lo1"]
    assert q.deliver_single_message(lo1) == 1


def test_loss_of_interest_skips_when_higher_priority_is_notified():
    q = Queue()
    q.add_consumer("lo", priority=1)
    mid = q.add_consumer("mid", priority=5)
    q.add_consumer("hi", priority=9)
    q.enqueue()
    assert q.notifications == ["hi"]  # hi NOTIFIED
    q.notifications.clear()
    mid.set_flow(False)
    assert q.notifications == []  # a NOTIFIED consumer of higher priority than lo exists


def test_nothing_delivered_while_messages_remain_notifies_one_other(monkeypatch):
    q = Queue()
    a, b = q.add_consumer("a"), q.add_consumer("b")
    q.enqueue()
    assert st(q, "a") == NodeState.NOTIFIED
    q.notifications.clear()
    monkeypatch.setattr(q, "_attempt_delivery", lambda c: None)  # as if a lost every race
    assert q.deliver_single_message(a) is None
    assert q.notifications == ["b"] and st(q, "b") == NodeState.NOTIFIED
    monkeypatch.undo()
    assert q.deliver_single_message(b) == 1


def test_credit_exhaustion_and_replenish():
    q = Queue()
    a = q.add_consumer("a", credit=2)
    for _ in range(3):
        q.enqueue()
    assert drain(q, a) == [1, 2]
    assert a.credit == 0 and st(q, "a") == NodeState.NOT_INTERESTED and not a.desired
    q.notifications.clear()
    a.add_credit(5)
    assert q.notifications == ["a"] and st(q, "a") == NodeState.NOTIFIED
    assert drain(q, a) == [3] and a.credit == 4
    with pytest.raises(ValueError):
        a.add_credit(-1)
    u = q.add_consumer("u")
    with pytest.raises(QueueError, match="unlimited credit"):
        u.add_credit(1)


def test_release_goes_back_in_queue_order_and_notifies():
    q = Queue()
    a = q.add_consumer("a")
    for _ in range(4):
        q.enqueue()
    assert drain(q, a) == [1, 2, 3, 4]
    q.notifications.clear()
    q.release(3, a)
    q.release(1, a)
    assert q.notifications == ["a"]  # one notification; a was INTERESTED
    assert q.snapshot()["messages"]["1"] == {"state": "available", "owner": None}
    m5 = q.enqueue()
    assert drain(q, a) == [1, 3, m5]
    assert a.acquired_ids() == [1, 2, 3, 4, 5]
    for m in (1, 2, 3, 4, 5):
        q.settle(m, a)
    assert q.message_state(1) is MessageState.DELETED
    with pytest.raises(QueueError, match="DELETED, not ACQUIRED"):
        q.release(1)


def test_ownership_and_state_errors_are_explicit():
    q = Queue(retain_deleted=False)
    a, b = q.add_consumer("a"), q.add_consumer("b")
    q.enqueue()
    assert q.deliver_single_message(a) == 1
    with pytest.raises(QueueError, match="owned by 'a'"):
        q.settle(1, b)
    with pytest.raises(QueueError, match="no message 7"):
        q.release(7)
    with pytest.raises(QueueError, match="not HELD"):
        q.unhold(1)
    q.settle(1, a)
    with pytest.raises(QueueError, match="was deleted"):
        q.release(1)
    with pytest.raises(QueueError, match="already in use"):
        q.add_consumer("a")


def test_hold_unhold():
    q = Queue()
    a = q.add_consumer("a")
    m = q.enqueue(held=True)
    assert q.available_count == 0 and drain(q, a) == []
    q.unhold(m)
    assert q.available_count == 1 and st(q, "a") == NodeState.NOTIFIED
    assert drain(q, a) == [m]
    m2 = q.enqueue()
    a.set_flow(False)
    q.hold(m2)
    a.set_flow(True)
    assert drain(q, a) == []


def test_browsers_see_available_once_in_order_and_held_after_unhold():
    q = Queue()
    br = q.add_consumer("br", acquires=False, credit=10)
    m1 = q.enqueue()
    m2 = q.enqueue(held=True)
    m3 = q.enqueue()
    assert drain(q, br) == [m1, m3]  # m2 held: skipped for now
    assert q.available_count == 2  # browsing acquires nothing
    q.unhold(m2)
    assert drain(q, br) == [m2]  # never seen before: shown once it is available
    a = q.add_consumer("a")
    assert drain(q, a) == [m1, m2, m3]
    q.release(m1)
    assert drain(q, br) == []  # released messages are not shown to browsers again
    assert br.credit == 7
    late = q.add_consumer("late", acquires=False)
    assert drain(q, late) == [m1]  # a new browser sees what is available now


def test_remove_consumer_releases_and_notifies():
    q = Queue()
    a, b = q.add_consumer("a"), q.add_consumer("b")
    q.enqueue()
    assert q.deliver_single_message(a) == 1
    q.notifications.clear()
    assert q.remove_consumer(a) == "NOTIFIED"
    assert q.snapshot()["messages"]["1"] == {"state": "available", "owner": None}
    assert q.notifications == ["b"]
    assert drain(q, b) == [1]


def test_removing_a_notified_consumer_hands_its_work_over():
    q = Queue()
    a, lo = q.add_consumer("a"), q.add_consumer("lo", priority=1)
    q.enqueue()
    q.enqueue()
    assert q.deliver_single_message(a) == 1
    assert st(q, "a") == NodeState.NOTIFIED and st(q, "lo") == NodeState.INTERESTED
    q.notifications.clear()
    # a was expected to pull message 2: removing it must not strand that message
    assert q.remove_consumer(a, release_acquired=False) == "NOTIFIED"
    assert q.notifications == ["lo"]
    assert drain(q, lo) == [2]
    assert q.remove_consumer(a) is None
    assert q.deliver_single_message(a) is None  # removed consumers get nothing
    stranger = Queue().add_consumer("x")
    with pytest.raises(QueueError, match="not on queue"):
        q.deliver_single_message(stranger)


# -- issue 13, item 6: removal is atomic with respect to concurrent settles and acquisitions -------


def _interleavings(seeds, body):
    """Run ``body(sched)`` under ``seeds`` seeded interleavings; return the failing seeds' errors."""
    failed = {}
    for seed in seeds:
        sched = DeterministicScheduler(seed, strategy="pct" if seed % 2 else "random", pct_steps=200)
        try:
            sched.run(lambda: body(sched))
        except SchedulerError as exc:
            failed[seed] = exc.__cause__
    return failed


def test_remove_consumer_is_atomic_with_concurrent_settles():
    """The consumer's client settles its messages while the consumer is removed.  Before the fix
    removal read the acquired set, then released one message at a time, and a settle in between
    made it raise ``message N was deleted`` (14 of these 100 interleavings), skipping the rest of
    its releases and the hand-over."""

    def body(sched):
        q = Queue(sched, record_events=False, retain_deleted=False)
        a, b = q.add_consumer("a"), q.add_consumer("b", priority=1)
        for _ in range(4):
            q.enqueue()
        got = [q.deliver_single_message(a) for _ in range(4)]
        settled, refused = [], []

        def client():
            for m in got:
                try:
                    q.settle(m, a)
                    settled.append(m)
                except QueueError:
                    refused.append(m)  # removal handed it back first: a late settle is refused

        h = sched.spawn(client, "client")
        assert q.remove_consumer(a) == "NOTIFIED"
        assert h.join(10)
        assert a.acquired_ids() == [] and sorted(settled + refused) == got
        # everything not settled is available again, and the hand-over reached b
        assert q.available_count == len(refused)
        assert drain(q, b) == sorted(refused)

    assert _interleavings(range(100), body) == {}


def test_no_message_stays_acquired_by_a_removed_consumer():
    """The consumer's IO thread pulls while the consumer is removed.  Before the fix an
    acquisition that passed the closed check before removal but acquired after removal's release
    left the message ACQUIRED by the removed consumer for good (12 of these 200 interleavings)."""

    def body(sched):
        q = Queue(sched, record_events=False)
        a = q.add_consumer("a")
        for _ in range(3):
            q.enqueue()

        def io_thread():
            while q.deliver_single_message(a) is not None:
                pass

        h = sched.spawn(io_thread, "io")
        q.remove_consumer(a)
        assert h.join(10)
        assert a.acquired_ids() == []
        assert q.available_count == 3  # what it had acquired went back, nothing acquired after

    assert _interleavings(range(200), body) == {}


def test_release_owned_and_delivery_failed_change_nothing_for_a_non_holder():
    q = Queue()
    a, b = q.add_consumer("a"), q.add_consumer("b")
    m = q.enqueue()
    assert q.deliver_single_message(a) == m
    assert q.release_owned(m, b) is False and q.delivery_failed(m, b) == ("not-held", 0, None)
    assert q.delivery_failed(m, a)[0] == "released" and q.message_state(m) == MessageState.AVAILABLE
    assert q.release_owned(m, a) is False  # no longer held
    assert q.deliver_single_message(b) == m
    q.settle(m, b)
    assert q.release_owned(m, b) is False and q.delivery_failed(m, b)[0] == "not-held"


def test_deliver_concurrently_with_itself_is_an_error():
    q = Queue()
    a = q.add_consumer("a")
    a._deliver_guard.acquire()
    try:
        with pytest.raises(QueueError, match="concurrently with itself"):
            q.deliver_single_message(a)
    finally:
        a._deliver_guard.release()


def test_snapshot_is_json_and_complete():
    q = Queue()
    a = q.add_consumer("a", priority=3, credit=1)
    q.add_consumer(7, acquires=False, flow_active=False)
    q.enqueue()
    q.enqueue(held=True)
    q.deliver_single_message(a)
    snap = json.loads(json.dumps(q.snapshot()))
    assert snap["consumers"]["a"] == {
        "state": "NOT_INTERESTED", "priority": 3, "acquiring": True, "credit": 0, "flow_active": True,
        "notify_work_desired": False, "closed": False, "acquired": [1],
    }
    assert snap["consumers"]["7"]["state"] == "NOT_INTERESTED" and snap["consumers"]["7"]["acquiring"] is False
    assert snap["messages"] == {"1": {"state": "acquired", "owner": "a"}, "2": {"state": "held", "owner": None}}
    assert snap["interested"] == [[DEFAULT_PRIORITY, []], [3, []]] and snap["not_interested"] == [7, "a"]
    assert snap["all"] == [[DEFAULT_PRIORITY, [7]], [3, ["a"]]]
    assert snap["available_count"] == 0 and snap["notifications"] == ["a"]
