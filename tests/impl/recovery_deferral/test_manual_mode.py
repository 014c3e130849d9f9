"""Manual mode (``ConcurrentListenerConfig.manual``, ``TaskPool(manual=True)``): the hooks a
step-by-step driver (the conformance driver) uses.  No thread is started; ``run_one`` is exactly one
worker turn -- through the code the workers run -- and refuses what no free worker could do;
``poll_one`` is one check of one deferred up; ``snapshot`` reads the pool atomically.
"""

from __future__ import annotations

import threading

import pytest
from conq.impl.recovery_deferral import ConcurrentListener, ConcurrentListenerConfig, FeedEvent
from conq.impl.recovery_deferral.demux import NotRunnable, TaskPool
from conq.impl.recovery_deferral.feed import Journal, RecordingFeedListener, RecordingGlobalListener

CAP = 60.0


def pool(ran: list, *, queues=2, threads=2, capacity=2, run=None) -> TaskPool:
    return TaskPool(queues=queues, threads=threads, capacity=capacity, on_full="block",
                    run=run or (lambda task: ran.append((task, threading.get_ident()))), manual=True, name="manual")


def test_manual_pool_starts_no_thread_and_runs_one_turn_on_the_caller():
    before = threading.active_count()
    ran: list = []
    p = pool(ran)
    assert threading.active_count() == before and p.alive_threads() == []
    p.submit(0, "a")
    p.submit(0, "b")
    p.submit(1, "c")
    snap = p.snapshot()
    assert snap.queues == (("a", "b"), ("c",)) and snap.running == (None, None) and snap.waiting == (0, 0)
    p.run_one(0)
    assert ran == [("a", threading.get_ident())]
    assert p.snapshot().queues == (("b",), ("c",))
    st = p.stats()
    assert (st.submitted, st.completed, st.queued, st.running) == (3, 1, 2, 0)
    p.close(CAP)  # drains the rest on this thread
    assert [t for t, _ in ran] == ["a", "b", "c"] or [t for t, _ in ran] == ["a", "c", "b"]
    threaded = TaskPool(queues=1, threads=1, capacity=1, on_full="block", run=lambda t: None)
    try:
        with pytest.raises(RuntimeError):
            threaded.run_one(0)  # only a manual pool is driven by hand
    finally:
        threaded.close(CAP)


def test_run_one_refuses_what_no_free_worker_could_take():
    ran: list = []
    p = pool(ran, threads=1)
    with pytest.raises(NotRunnable):
        p.run_one(0)  # empty
    p.submit(1, "x")
    p.submit(0, "y")
    with pytest.raises(NotRunnable):
        p.run_one(0)  # the one idle worker pops the queue that became ready first
    p.run_one(1)
    p.run_one(0)
    assert [t for t, _ in ran] == ["x", "y"]
    p.close(CAP)


def test_a_held_queue_and_the_worker_limit_refuse_a_second_turn_and_the_snapshot_shows_the_running_task():
    gate, entered = threading.Event(), threading.Event()

    def run(task):
        entered.set()
        assert gate.wait(CAP)

    p = pool([], threads=1, run=run)
    p.submit(0, "a")
    p.submit(0, "b")
    p.submit(1, "c")
    t = threading.Thread(target=p.run_one, args=(0,))
    t.start()
    assert entered.wait(CAP)
    snap = p.snapshot()
    assert snap.running == ("a", None) and snap.queues == (("b",), ("c",))
    with pytest.raises(NotRunnable):
        p.run_one(0)  # held by the turn in progress: one worker per queue
    with pytest.raises(NotRunnable):
        p.run_one(1)  # the only worker is busy
    gate.set()
    t.join(CAP)
    assert p.snapshot().running == (None, None)
    p.close(CAP)


def test_a_feed_thread_waiting_for_room_shows_in_the_snapshot_and_a_turn_releases_it():
    ran: list = []
    p = pool(ran, capacity=1)
    p.submit(0, "a")
    feeder = threading.Thread(target=p.submit, args=(0, "b"))
    feeder.start()
    deadline = threading.Event()
    for _ in range(int(CAP * 1000)):
        if p.snapshot().waiting == (1, 0):
            break
        deadline.wait(0.001)
    assert p.snapshot().waiting == (1, 0) and p.stats().blocked_now == 1
    p.run_one(0)  # takes "a": room for "b"
    feeder.join(CAP)
    assert not feeder.is_alive()
    assert p.snapshot().queues == (("b",), ()) and p.snapshot().waiting == (0, 0)
    p.close(CAP)


def test_manual_listener_set_up_starts_no_thread_and_poll_one_checks_one_deferred_up():
    before = set(threading.enumerate())
    journal = Journal()
    cl = ConcurrentListener(ConcurrentListenerConfig(threads=2, queue_size=2, poll_interval=None, manual=True))
    feed = cl.wrap_feed_listener(RecordingFeedListener(journal))
    g = cl.wrap_global_listener(RecordingGlobalListener(journal))
    assert set(threading.enumerate()) == before and cl.alive_threads() == []
    g.on_recovery_initiated(1, 1)
    feed.on_event(FeedEvent(0, 1, 1, "odds_change", 1))
    feed.on_event(FeedEvent(1, 1, 1, "odds_change", 2))
    g.on_producer_status_change(1, "FirstRecoveryCompleted")
    (d,) = g.deferrals(1)
    assert g.poll_one(d.seq) is False and g.deferrals(1)[0].last_pending == 2
    assert [t.item.seq for t in feed.pool_snapshot().queues[0]] == [1]
    feed.run_one(0)
    feed.run_one(1)
    assert journal.count("up") == 0  # nothing checks by itself: no scheduler thread
    assert g.poll_one(d.seq) is True and journal.count("up") == 1
    assert g.poll_one(d.seq) is False and journal.count("up") == 1  # at most once
    cl.close(CAP)
    assert set(threading.enumerate()) == before
