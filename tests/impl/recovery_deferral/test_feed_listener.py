"""The feed side with real threads: demultiplexing by event id, per-match order, parallelism across
matches, the feed thread never running customer code, the full-queue policies (DEV-001), error
routing (DEV-007, DEV-010), a throwing or blocking customer listener, shutdown, and the legacy
serial pipeline (seed 004 "Legacy SDK issue", "Solution", "Implementation", "Configuration").

Orderings are forced with gates and barriers, never with sleeps; ``CAP`` is a safety cap only.
"""

from __future__ import annotations

import threading
import time

import pytest
from conq.impl.recovery_deferral import (
    NONE_CONTEXT,
    ConcurrentListenerConfig,
    ErrorEvent,
    FeedEvent,
    ListenerClosed,
    QueueFull,
    RecoveryContext,
    ShutdownTimeout,
)
from conq.impl.recovery_deferral.feed import (
    Call,
    Error,
    Event,
    FeedSimulator,
    Journal,
    RecordingFeedListener,
    Work,
    check_journal,
)
from conq.impl.recovery_deferral.listener import ConcurrentListener

CAP = 60.0


def ev(match, producer=1, request=0, seq=0, work=None) -> FeedEvent:
    return FeedEvent(match, producer, request, "odds_change", seq, work)


def wait(pred, what: str) -> None:
    """Wait for a condition another thread brings about (a count or a state, never a duration);
    ``CAP`` is a safety cap that fails loudly."""
    deadline = time.monotonic() + CAP
    pause = threading.Event()
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"safety cap reached waiting for: {what}")
        pause.wait(0.001)


# -- allocation, order, parallelism ------------------------------------------------------------------


def test_events_of_different_matches_run_in_parallel(make_rig):
    """Two matches on two queues: both handlers must be inside the listener at the same time to pass
    the barrier (DEMUX-001/006/017).  A serial pipeline would hit the barrier's cap and fail."""
    barrier = threading.Barrier(2, timeout=CAP)
    rig = make_rig(ConcurrentListenerConfig(threads=2, poll_interval=None))
    rig.hold = lambda item: (barrier.wait(), None)[1]
    rig.feed.on_event(ev(0, seq=1))
    rig.feed.on_event(ev(1, seq=2))
    rig.close()
    assert rig.journal.count("end") == 2 and not barrier.broken


def test_per_match_order_one_worker_per_queue_and_never_the_feed_thread(make_rig):
    """20 matches over 4 queues (5 matches share each queue), 200 events from one feed thread: each
    match's events are handled in arrival order, never two of one queue at once, never more than
    ``threads`` at once, never on the feed thread (DEMUX-016/020/021/023; parallelism itself is the
    barrier test above, which needs no luck)."""
    lock = threading.Lock()
    running = [0] * 4
    worst = [0] * 4
    overlap = [0]

    def enter(item):
        q = item.event_id % 4
        with lock:
            running[q] += 1
            worst[q] = max(worst[q], running[q])
            overlap[0] = max(overlap[0], sum(running))

    def leave(item):  # called by the recording listener just before its handler returns
        with lock:
            running[item.event_id % 4] -= 1
        return False

    rig = make_rig(ConcurrentListenerConfig(threads=4, queue_size=16, poll_interval=None), fail=leave)
    rig.hold = enter
    script = [Event(ev(m, seq=i, work=Work(0.0005 * (i % 3)))) for i, m in enumerate([i % 20 for i in range(200)])]
    sim = FeedSimulator(script, rig.feed, rig.events, rig.journal).start()
    sim.join(CAP)
    rig.close()
    assert check_journal(rig.journal.entries(), feed_ident=sim.feed_ident) == []
    assert worst == [1, 1, 1, 1]
    assert overlap[0] <= 4, "more handlers at once than threads=4 (DEMUX-023)"
    threads = {e.thread for e in rig.journal.entries() if e.kind == "start"}
    assert sim.feed_ident not in threads and threads <= rig.feed.worker_idents() and len(rig.feed.worker_idents()) == 4


def test_one_match_always_lands_on_one_queue(make_rig):
    """Negative and string ids included: the events of id -7 wait behind each other on one queue."""
    rig = make_rig(ConcurrentListenerConfig(threads=3, queue_size=100, poll_interval=None))
    gate = rig.gate()
    rig.hold = lambda item: gate
    for i, m in enumerate([-7, "sr:match:1", -7, "sr:match:1", 10**12 + 5, -7]):
        rig.feed.on_event(ev(m, seq=i))
    gate.set()
    rig.close()
    for m, seqs in ((-7, [0, 2, 5]), ("sr:match:1", [1, 3])):
        started = [e for e in rig.journal.entries() if e.kind == "start" and e.data["item"].event_id == m]
        assert [e.data["item"].seq for e in started] == seqs
    assert check_journal(rig.journal.entries()) == []


# -- full queue: DEV-001 -----------------------------------------------------------------------------------


def _fill_one_queue(rig, n):
    """threads=1, queue_size=2: the first event runs (held), the next two wait, the fourth finds the
    queue full.  Returns the feed simulator (running)."""
    gate = rig.gate()
    rig.hold = lambda item: gate
    script = [Event(ev(5, producer=1, request=1, seq=i)) for i in range(n)]
    # the worker takes the first event before the feed sends the others: then exactly queue_size fit
    script.insert(1, Call(lambda: wait(lambda: rig.feed.stats().pool.running == 1, "the first task running")))
    rig.events.on_recovery_initiated(1, 1)
    return gate, FeedSimulator(script, rig.feed, rig.events, rig.journal).start()


def test_full_queue_blocks_the_feed_thread_until_there_is_room(make_rig):
    """The reference: the feed thread waits (visible as ``blocked_now``), nothing is lost, order
    holds, and the up still waits for every event (DEMUX-024, DEV-001)."""
    rig = make_rig(ConcurrentListenerConfig(threads=1, queue_size=2, poll_interval=None))
    gate, sim = _fill_one_queue(rig, 4)
    wait(lambda: rig.feed.stats().pool.blocked_now == 1, "the feed thread blocking on the full queue")
    assert rig.journal.count("accepted") == 3  # the fourth is not taken yet
    assert rig.cl.tracker.pending(RecoveryContext(1, 1)) == 4  # counted before the hand-off (DEV-009)
    rig.up(1, "ProducerUp")
    gate.set()
    sim.join(CAP)
    rig.close()
    stats = rig.feed.stats().pool
    assert stats.blocked == 1 and stats.dropped == 0 and stats.high_water == (2,)
    assert check_journal(rig.journal.entries(), feed_ident=sim.feed_ident, strict_up=True) == []
    assert rig.journal.count("up") == 1


def test_upstream_drop_policy_loses_the_event_and_falsifies_the_up(make_rig):
    """``on_queue_full="drop"`` (upstream TaskExecutor): the fourth event is lost, the tracker never
    counts it, and the up is delivered although one resent event was never processed -- the checks
    that hold for the reference report both (the model's ``upstream-drop-when-full``)."""
    rig = make_rig(ConcurrentListenerConfig(threads=1, queue_size=2, poll_interval=None, on_queue_full="drop"))
    gate, sim = _fill_one_queue(rig, 4)
    sim.join(CAP)  # never blocks
    rig.up(1, "ProducerUp")
    gate.set()
    rig.close()
    assert rig.feed.stats().pool.dropped == 1
    assert rig.cl.tracker.counts(RecoveryContext(1, 1)).withdrawn == 1
    bad = check_journal(rig.journal.entries(), feed_ident=sim.feed_ident)
    assert any("started 0x" in b for b in bad), bad
    assert any("delivered before" in b for b in bad), bad


def test_raise_policy_refuses_and_uncounts(make_rig):
    rig = make_rig(ConcurrentListenerConfig(threads=1, queue_size=1, poll_interval=None, on_queue_full="raise"))
    gate = rig.gate()
    rig.hold = lambda item: gate
    rig.feed.on_event(ev(5, producer=1, request=1, seq=0))
    wait(lambda: rig.feed.stats().pool.running == 1, "the first task running")
    rig.feed.on_event(ev(5, producer=1, request=1, seq=1))
    with pytest.raises(QueueFull):
        rig.feed.on_event(ev(5, producer=1, request=1, seq=2))
    assert rig.cl.tracker.pending(RecoveryContext(1, 1)) == 2
    gate.set()


# -- a throwing or blocking customer listener ------------------------------------------------------------------


def test_a_throwing_listener_never_kills_a_worker_nor_stalls_its_queue(make_rig):
    rig = make_rig(ConcurrentListenerConfig(threads=2, queue_size=50, poll_interval=None))
    rig.events.on_recovery_initiated(1, 1)
    for i in range(40):
        rig.feed.on_event(ev(i % 4, producer=1, request=1, seq=i, work=Work(fail=(i % 4 == 0))))
    rig.up(1, "ProducerUp")
    wait(lambda: rig.journal.count("up") == 1, "the up after every (partly failing) event")
    assert rig.feed.alive_threads() == ["uof-feed0-worker-01", "uof-feed0-worker-02"]
    rig.close()
    assert rig.feed.stats().listener_errors == 10
    assert check_journal(rig.journal.entries(), strict_up=True) == []


def test_a_blocking_listener_holds_only_its_own_queue(make_rig):
    """Match 0's handler blocks; every event of other queues -- of this producer and of another one --
    is handled meanwhile, and the other producer's up is delivered (DEMUX-008, DEMUX-011)."""
    rig = make_rig(ConcurrentListenerConfig(threads=3, queue_size=50, poll_interval=None))
    gate = rig.gate()
    rig.hold = lambda item: gate if item.event_id == 0 else None
    rig.events.on_recovery_initiated(1, 1)
    rig.events.on_recovery_initiated(2, 1)
    for i in range(30):
        rig.feed.on_event(ev([0, 1, 2][i % 3], producer=1, request=1, seq=i))
        rig.feed.on_event(ev([4, 5][i % 2], producer=2, request=1, seq=i))
    rig.up(1, "ProducerUp")
    rig.up(2, "ProducerUp")
    wait(lambda: rig.journal.count("end") == 50, "every event not on match 0's queue")
    wait(lambda: rig.journal.count("up") == 1, "producer 2's up")
    assert [e.data["producer"] for e in rig.journal.entries() if e.kind == "up"] == [2]
    assert rig.journal.count("start", lambda d: d["item"].event_id == 0) == 1  # held, its queue waits
    gate.set()
    rig.close()
    assert check_journal(rig.journal.entries(), strict_up=True) == []


# -- error events: DEV-007, DEV-010, DEMUX-025 ---------------------------------------------------------------------


def test_async_errors_follow_their_event_and_are_tracked(make_rig):
    rig = make_rig(ConcurrentListenerConfig(threads=3, queue_size=50, poll_interval=None))
    gate = rig.gate()
    rig.hold = lambda item: gate if getattr(item, "seq", None) == 0 else None
    rig.events.on_recovery_initiated(1, 1)
    script = [
        Event(ev(7, producer=1, request=1, seq=0)),  # held
        Event(ev(7, producer=1, request=1, seq=1)),
        Error(ErrorEvent(1, 1, 7, "unparsable_message", 2)),  # about match 7: behind seq 0 and 1
        Error(ErrorEvent(1, 1, None, "unparsable_message", 3)),  # about no event, of the recovery
        Error(ErrorEvent(1, 0, None, "user_exception", 4)),  # no context: NONE
    ]
    sim = FeedSimulator(script, rig.feed, rig.events, rig.journal).start()
    sim.join(CAP)
    assert rig.cl.tracker.counts(RecoveryContext(1, 1)).allocated == 4
    assert rig.cl.tracker.counts(NONE_CONTEXT).allocated == 1
    rig.up(1, "ProducerUp")
    gate.set()
    rig.close()
    starts = [e.data["item"].seq for e in rig.journal.entries() if e.kind == "start" and getattr(e.data["item"], "event_id", None) == 7]
    assert starts == [0, 1, 2]
    assert check_journal(rig.journal.entries(), feed_ident=sim.feed_ident, strict_up=True) == []


def test_sync_errors_are_handled_on_the_feed_thread(make_rig):
    rig = make_rig(ConcurrentListenerConfig(threads=2, poll_interval=None, handle_errors_asynchronously=False))
    script = [Event(ev(1, seq=0)), Error(ErrorEvent(1, 0, 1, "unparsable_message", 1)), Event(ev(2, seq=2))]
    sim = FeedSimulator(script, rig.feed, rig.events, rig.journal).start()
    sim.join(CAP)
    rig.close()
    on_feed = [e.data["item"] for e in rig.journal.entries() if e.kind == "start" and e.thread == sim.feed_ident]
    assert [type(x).__name__ for x in on_feed] == ["ErrorEvent"]
    assert rig.feed.stats().on_caller_thread == 1
    assert rig.feed.stats().pool.submitted == 2


# -- shutdown -----------------------------------------------------------------------------------------------------


def test_close_drains_joins_and_refuses(make_rig):
    rig = make_rig(ConcurrentListenerConfig(threads=4, queue_size=100, poll_interval=0.01))
    for i in range(100):
        rig.feed.on_event(ev(i % 10, seq=i, work=Work(0.0005)))
    rig.close()
    assert rig.journal.count("end") == 100
    assert rig.cl.alive_threads() == []
    with pytest.raises(ListenerClosed):
        rig.feed.on_event(ev(1, seq=101))


def test_close_reports_a_stuck_listener_then_finishes_once_it_returns(make_rig):
    rig = make_rig(ConcurrentListenerConfig(threads=2, poll_interval=None))
    gate = rig.gate()
    rig.hold = lambda item: gate if item.event_id == 0 else None
    rig.feed.on_event(ev(0, seq=0))
    rig.feed.on_event(ev(1, seq=1))
    wait(lambda: rig.journal.count("end") == 1, "the free worker's event")
    with pytest.raises(ShutdownTimeout) as exc:
        rig.feed.close(timeout=0.05)  # the lower bound of a safety cap: only the stuck worker is reported
    assert exc.value.threads and all("worker" in t for t in exc.value.threads)
    gate.set()
    rig.close()
    assert rig.cl.alive_threads() == []


def test_a_feed_thread_waiting_for_room_is_released_by_close(make_rig):
    rig = make_rig(ConcurrentListenerConfig(threads=1, queue_size=1, poll_interval=None))
    gate = rig.gate()
    rig.hold = lambda item: gate
    rig.events.on_recovery_initiated(1, 1)
    rig.feed.on_event(ev(3, producer=1, request=1, seq=0))
    rig.feed.on_event(ev(3, producer=1, request=1, seq=1))
    sim = FeedSimulator([Event(ev(3, producer=1, request=1, seq=2))], rig.feed, rig.events, rig.journal).start()
    wait(lambda: rig.feed.stats().pool.blocked_now == 1, "the feed thread blocked")
    closer = threading.Thread(target=rig.close)
    closer.start()
    with pytest.raises(ListenerClosed):
        sim.join(CAP)
    assert rig.cl.tracker.counts(RecoveryContext(1, 1)).withdrawn == 1
    gate.set()
    closer.join(CAP)
    assert not closer.is_alive()
    assert rig.cl.tracker.pending(RecoveryContext(1, 1)) == 0


# -- legacy ----------------------------------------------------------------------------------------------------------


def test_legacy_runs_the_listener_on_the_calling_thread():
    j = Journal()
    cl = ConcurrentListener(ConcurrentListenerConfig(enabled=False))
    feed = cl.wrap_feed_listener(RecordingFeedListener(j, fail=lambda item: item.seq == 1))
    for i in range(3):
        feed.on_event(ev(i, seq=i))
    cl.close()
    assert {e.thread for e in j.entries()} == {threading.get_ident()}
    assert feed.stats().listener_errors == 1 and feed.stats().on_caller_thread == 3
    assert cl.alive_threads() == []
