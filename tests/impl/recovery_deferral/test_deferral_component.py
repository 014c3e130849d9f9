"""Component tests of the deferred ProducerUp with real threads: every scenario of seed 004's
"Deferring of ProducerUp" section (and upstream's ``DeferredProducerUpComponentTest``, REFERENCE.md
§3): several workers, tens of events per recovery, handlers blocking for tens of milliseconds, the
"up" before / during / after the events, a new recovery while one is pending, several producers
recovering at once, a Down while the "up" is deferred.

Every test checks the journal (``feed.check_journal``): recovery initiated first, every event of the
recovery before its "up", each "up" exactly once (or never when superseded / cancelled), per-match
order, no customer code on the feed thread, nothing lost.  Where a scenario needs an ordering
("during": the up must not find the count at 0 half-way), a *gate* creates it -- handlers of the
recovery wait until the feed thread has handed everything off -- never a sleep: verdicts do not
depend on the clock.  ``CAP`` is only a safety cap that fails loudly.
"""

from __future__ import annotations

import itertools
import random
import threading

import pytest
from conq.impl.recovery_deferral import ConcurrentListener, ConcurrentListenerConfig, RecoveryContext
from conq.impl.recovery_deferral.events import ErrorEvent, FeedEvent
from conq.impl.recovery_deferral.feed import (
    Call,
    Down,
    Error,
    Event,
    FeedSimulator,
    Journal,
    RecordingFeedListener,
    RecordingGlobalListener,
    Recover,
    Scenario,
    Status,
    Up,
    Work,
    check_journal,
    run_scenario,
)
from conq.impl.recovery_deferral.global_listener import CANCELLED, DELIVERED, SUPERSEDED

CAP = 60.0
THREADS = 5  # upstream's component test: 5 workers; int match ids -> queue = id % 5
_seq = itertools.count(1)


def resent(p: int, r: int, matches: list[int], n: int, *, latency=(0.01, 0.03), seed: int = 0, errors: int = 0) -> list:
    """``n`` resent messages of recovery (p, r) over ``matches`` (round robin), each handler blocking
    10-30 ms; the last ``errors`` of them arrive unparsable (an error about the event, DEV-010)."""
    rng = random.Random(seed * 7919 + p * 31 + r)
    out = []
    for i in range(n):
        m, w = matches[i % len(matches)], Work(rng.uniform(*latency))
        if i >= n - errors:
            out.append(Error(ErrorEvent(p, r, m, "unparsable_message", next(_seq), w)))
        else:
            out.append(Event(FeedEvent(m, p, r, "odds_change", next(_seq), w)))
    return out


def on_queues(p: int, queues: list[int], per_queue: int = 2) -> list[int]:
    """Match ids of producer ``p`` that land on ``queues`` (int ids: queue = id % THREADS)."""
    return [p * 1000 + k * THREADS + q for q in queues for k in range(per_queue)]


def config(**kw) -> ConcurrentListenerConfig:
    kw.setdefault("threads", THREADS)
    kw.setdefault("queue_size", 200)  # room for every gated task: the feed never blocks in these scenarios
    kw.setdefault("poll_interval", 0.02)
    return ConcurrentListenerConfig(**kw)


def play(rig, script) -> FeedSimulator:
    """Run ``script`` on a fresh feed thread, then drain and close the listener (threads joined)."""
    sim = FeedSimulator(script, rig.feed, rig.events, rig.journal).start()
    try:
        sim.join(CAP)
    finally:
        rig.close()
    return sim


def verdict(rig, sim, *, strict_up: bool) -> list[str]:
    return check_journal(rig.journal.entries(), feed_ident=sim.feed_ident, strict_up=strict_up)


def ups(rig, producer: int) -> list:
    return [e for e in rig.journal.entries() if e.kind == "up" and e.data["producer"] == producer]


def wait_journal(rig, pred, what: str) -> None:
    assert rig.journal.wait_for(pred, CAP), f"safety cap reached waiting for: {what}"


def gate_context(rig, *contexts: RecoveryContext):
    g = rig.gate()
    rig.hold = lambda item: g if item.context in contexts else None
    return g


# -- "up" before / during / after the events ---------------------------------------------------------


def test_up_after_the_events(make_rig):
    """The SDK's order (snapshot_complete follows the resent messages): every one of the 50 events
    and 3 errors of the recovery is processed before the up, which is delivered once."""
    rig = make_rig(config())
    script = [Recover(1, 1), *resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 50, errors=3), Up(1)]
    sim = play(rig, script)
    assert verdict(rig, sim, strict_up=True) == []
    assert len(ups(rig, 1)) == 1
    assert rig.events.stats().delivered == 1


def test_up_during_the_events(make_rig):
    """The up arrives half-way; the recovery's handlers wait until the feed thread has handed
    everything off, so its count cannot reach 0 early: the up comes after all 50 events."""
    rig = make_rig(config())
    gate = gate_context(rig, RecoveryContext(1, 1))
    ev = resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 50)
    sim = play(rig, [Recover(1, 1), *ev[:25], Up(1), *ev[25:], Call(gate.set)])
    assert verdict(rig, sim, strict_up=True) == []
    assert len(ups(rig, 1)) == 1
    d = rig.events.deferrals(1)
    assert [x.state for x in d] == [DELIVERED] and d[0].last_pending == 0


def test_up_before_the_events_is_delivered_when_they_are_done(make_rig):
    """The up arrives before any resent event.  With no clock tick (``poll_interval=None``) it is
    checked only when its recovery's count drops to 0, i.e. after the last of the gated events."""
    rig = make_rig(config(poll_interval=None))
    gate = gate_context(rig, RecoveryContext(1, 1))
    sim = play(rig, [Recover(1, 1), Up(1), *resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 50), Call(gate.set)])
    assert verdict(rig, sim, strict_up=True) == []
    assert len(ups(rig, 1)) == 1


@pytest.mark.parametrize("timing", ["before", "during", "after"])
def test_up_at_any_moment_with_polling_never_overtakes_an_accepted_event(make_rig, timing):
    """No gate, real poll ticks: the up may be delivered while the feed is still sending (the model's
    ``reference-up-any-time``: the count is 0 between two events).  Still: every event the
    listener had accepted before the delivery was processed before it, and the up comes once."""
    rig = make_rig(config(poll_interval=0.005))
    ev = resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 40, latency=(0.0, 0.01))
    at = {"before": 0, "during": 20, "after": 40}[timing]
    sim = play(rig, [Recover(1, 1), *ev[:at], Up(1), *ev[at:]])
    assert verdict(rig, sim, strict_up=False) == []
    assert len(ups(rig, 1)) == 1


# -- a new recovery while one is pending --------------------------------------------------------------


def test_new_recovery_while_the_up_is_deferred_supersedes_it(make_rig):
    """Recovery 1's up is deferred (its events held); recovery 2 starts: the first up is superseded
    and never delivered, recovery 2's up is delivered once after recovery 2's events -- without
    waiting for recovery 1's (on other queues; upstream: the context is (producer, request))."""
    rig = make_rig(config())
    gate = gate_context(rig, RecoveryContext(1, 1))

    def release_after_second_up():
        try:
            assert rig.journal.wait_for(lambda es: any(e.kind == "up" for e in es), CAP), "recovery 2's up never came"
        finally:
            gate.set()

    script = [
        Recover(1, 1), *resent(1, 1, on_queues(1, [0, 1]), 30), Up(1),
        Recover(1, 2), *resent(1, 2, on_queues(1, [2, 3, 4]), 30), Up(1),
        Call(release_after_second_up),
    ]
    sim = play(rig, script)
    assert verdict(rig, sim, strict_up=True) == []
    [up] = ups(rig, 1)
    recinit2 = next(e.i for e in rig.journal.entries() if e.kind == "rec-init" and e.data["request"] == 2)
    assert up.i > recinit2
    assert [d.state for d in rig.events.deferrals(1)] == [SUPERSEDED, DELIVERED]
    assert rig.events.stored_context(1) == RecoveryContext(1, 2)


def test_new_recovery_while_the_first_is_in_progress(make_rig):
    """Recovery 2 starts while recovery 1's events are still being processed (no up for recovery 1
    yet); recovery 2's up waits only for recovery 2's tasks: it is delivered while recovery 1's
    are still held."""
    rig = make_rig(config())
    gate = gate_context(rig, RecoveryContext(1, 1))
    seen = {}

    def release_after_up():
        try:
            assert rig.journal.wait_for(lambda es: any(e.kind == "up" for e in es), CAP), "recovery 2's up never came"
            seen["r1_ends_before_up"] = rig.journal.count("end", lambda d: d["item"].request_id == 1)
        finally:
            gate.set()

    script = [
        Recover(1, 1), *resent(1, 1, on_queues(1, [0, 1]), 30),
        Recover(1, 2), *resent(1, 2, on_queues(1, [2, 3, 4]), 30), Up(1),
        Call(release_after_up),
    ]
    sim = play(rig, script)
    assert verdict(rig, sim, strict_up=False) == []
    assert len(ups(rig, 1)) == 1
    assert seen["r1_ends_before_up"] == 0  # recovery 1 was still held: the up did not wait for it
    assert rig.journal.count("end", lambda d: d["item"].request_id == 1) == 30  # and nothing of it was lost


# -- a late onRecoveryInitiated (issue 32, DEV-032) -------------------------------------------------
# Upstream's SDK calls onRecoveryInitiated once /recovery/initiate_request has been answered
# (RecoveryManagerImpl.ProducerRecoveryRequester.run), while the feed already resends the recovery's
# messages and its snapshot_complete, which raises the up: the events and the up can come first.


def test_late_initiation_of_the_first_recovery_up_after_its_events_exactly_once(make_rig):
    """The events of recovery 1 and its up arrive before its onRecoveryInitiated.  The up is tied to
    recovery 1 (its events told the listener) and delivered once, after the events and after the
    initiation; it used to be forwarded at once (no stored context), before every event."""
    rig = make_rig(config())
    gate = gate_context(rig, RecoveryContext(1, 1))
    script = [*resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 30), Up(1, request=1), Recover(1, 1), Call(gate.set)]
    sim = play(rig, script)
    assert check_journal(rig.journal.entries(), feed_ident=sim.feed_ident, strict_up=True, late_initiation=True) == []
    [up] = ups(rig, 1)
    assert [d.state for d in rig.events.deferrals(1)] == [DELIVERED]
    assert rig.events.deferrals(1)[0].context == RecoveryContext(1, 1)


@pytest.mark.parametrize("initiation", ["before-the-first-check", "after-the-first-check"])
def test_late_initiation_of_a_second_recovery_up_after_its_events_exactly_once(make_rig, initiation):
    """Recovery 1 is over (its up delivered); recovery 2's events (held) and its up come before its
    onRecoveryInitiated.  The up was correlated with recovery 1: delivered at once by the first check
    (its count is 0), before recovery 2's events -- or, when the initiation came first, superseded by
    it and never delivered.  Now it waits for recovery 2's events and initiation, then comes once."""
    rig = make_rig(config(poll_interval=None))
    gate = gate_context(rig, RecoveryContext(1, 2))

    def first_up_delivered():
        assert rig.journal.wait_for(lambda es: any(e.kind == "up" for e in es), CAP), "recovery 1's up never came"

    late = [Recover(1, 2)] if initiation == "before-the-first-check" else []
    script = [
        Recover(1, 1), *resent(1, 1, on_queues(1, [0, 1]), 10), Up(1, request=1), Call(first_up_delivered),
        *resent(1, 2, on_queues(1, [2, 3, 4]), 20), Up(1, request=2), *late,
        Call(rig.events.poll_now, "check"), Recover(1, 2) if not late else Call(rig.events.poll_now, "check"),
        Call(gate.set),
    ]
    sim = play(rig, script)
    assert check_journal(rig.journal.entries(), feed_ident=sim.feed_ident, strict_up=True, late_initiation=True) == []
    assert len(ups(rig, 1)) == 2
    assert [d.state for d in rig.events.deferrals(1)] == [DELIVERED, DELIVERED]


def test_a_newer_recoverys_events_supersede_a_deferred_up_before_its_initiation(make_rig):
    """Recovery 1's up waits (its events held); recovery 2's events arrive before recovery 2's
    onRecoveryInitiated: recovery 1's up is superseded as by a new recovery (it would claim "up to
    date" while recovery 2 is resending), and recovery 2's up comes once after its own events."""
    rig = make_rig(config(poll_interval=None))
    g1 = gate_context(rig, RecoveryContext(1, 1))
    script = [
        Recover(1, 1), *resent(1, 1, on_queues(1, [0, 1]), 10), Up(1, request=1),
        *resent(1, 2, on_queues(1, [2, 3, 4]), 10), Call(g1.set), Call(rig.events.poll_now, "check"),
        Up(1, request=2), Recover(1, 2),
    ]
    sim = play(rig, script)
    assert check_journal(rig.journal.entries(), feed_ident=sim.feed_ident, strict_up=False, late_initiation=True) == []
    assert [d.state for d in rig.events.deferrals(1)] == [SUPERSEDED, DELIVERED]
    [up] = ups(rig, 1)


# -- several producers ---------------------------------------------------------------------------------


def test_three_producers_recovering_at_once(make_rig):
    """Three producers' recoveries interleaved on one feed thread (upstream: 3 producers, 5 workers,
    50 events): each up after its own recovery's events, once each."""
    rig = make_rig(config())
    rng = random.Random(3)
    streams = [[Recover(p, 1), *resent(p, 1, on_queues(p, [0, 1, 2, 3, 4]), 50, errors=2), Up(p)] for p in (1, 2, 3)]
    script, pos = [], [0, 0, 0]
    while any(pos[i] < len(streams[i]) for i in range(3)):
        i = rng.choice([i for i in range(3) if pos[i] < len(streams[i])])
        script.append(streams[i][pos[i]])
        pos[i] += 1
    sim = play(rig, script)
    assert verdict(rig, sim, strict_up=True) == []
    assert [len(ups(rig, p)) for p in (1, 2, 3)] == [1, 1, 1]


def test_a_held_producer_does_not_delay_the_others_ups(make_rig):
    """Producer 1's handlers block (its matches on queue 0); producers 2 and 3 (queues 1-4) get their
    ups while producer 1's recovery is still held (the model's ``up-not-delayed-by-other-producer``)."""
    rig = make_rig(config())
    gate = gate_context(rig, RecoveryContext(1, 1))

    def release_after_other_ups():
        try:
            ok = rig.journal.wait_for(lambda es: {e.data["producer"] for e in es if e.kind == "up"} >= {2, 3}, CAP)
            assert ok, "producers 2 and 3 did not get their ups while producer 1 was held"
            assert rig.journal.count("end", lambda d: d["item"].producer_id == 1) == 0
        finally:
            gate.set()

    script = [Recover(1, 1), Recover(2, 1), Recover(3, 1)]
    script += resent(1, 1, on_queues(1, [0], 3), 20)
    script += resent(2, 1, on_queues(2, [1, 2], 2), 20) + resent(3, 1, on_queues(3, [3, 4], 2), 20)
    script += [Up(1), Up(2), Up(3), Call(release_after_other_ups)]
    sim = play(rig, script)
    assert verdict(rig, sim, strict_up=True) == []
    order = [e.data["producer"] for e in rig.journal.entries() if e.kind == "up"]
    assert sorted(order) == [1, 2, 3] and order[-1] == 1


# -- a Down (or any other non-up status) while the up is deferred: DEV-011 --------------------------------


@pytest.mark.parametrize("down", [Down(1), Status(1, "ProcessingQueueDelayViolation")], ids=["down", "status"])
def test_down_while_the_up_is_deferred_cancels_it(make_rig, down):
    rig = make_rig(config())
    gate = gate_context(rig, RecoveryContext(1, 1))
    kind = "down" if isinstance(down, Down) else "status"
    seen = {}

    def check_forwarded_at_once_then_release():
        # forwarded in the same call, while every task of the recovery is still held
        seen["forwarded"] = rig.journal.count(kind)
        seen["ended"] = rig.journal.count("end")
        gate.set()

    script = [
        Recover(1, 1), *resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 30), Up(1), down,
        Call(check_forwarded_at_once_then_release),
        Call(lambda: wait_journal(rig, lambda es: sum(e.kind == "end" for e in es) == 30, "recovery 1 drained")),
        Recover(1, 2), *resent(1, 2, on_queues(1, [0, 1, 2, 3, 4]), 10), Up(1),
    ]
    sim = play(rig, script)
    assert seen == {"forwarded": 1, "ended": 0}
    assert verdict(rig, sim, strict_up=True) == []
    [up] = ups(rig, 1)  # recovery 2's only
    assert up.i > next(e.i for e in rig.journal.entries() if e.kind == "rec-init" and e.data["request"] == 2)
    assert [d.state for d in rig.events.deferrals(1)] == [CANCELLED, DELIVERED]


# -- a second "up", an "up" with no recovery, the poll tick -------------------------------------------------


def test_two_up_callbacks_of_one_recovery_are_both_delivered_in_order(make_rig):
    """DEV-014: onProducerUp and onProducerStatusChange(FirstRecoveryCompleted) for one recovery are
    both deferred and both delivered once, in the order they came (upstream loses the first)."""
    rig = make_rig(config())
    gate = gate_context(rig, RecoveryContext(1, 1))
    script = [
        Recover(1, 1), *resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 30),
        Up(1, "ProducerUp"), Up(1, "FirstRecoveryCompleted"), Call(gate.set),
    ]
    sim = play(rig, script)
    assert verdict(rig, sim, strict_up=True) == []
    assert [e.data["callback"] for e in ups(rig, 1)] == ["ProducerUp", "FirstRecoveryCompleted"]


def test_up_with_no_recovery_is_forwarded_at_once(make_rig):
    """DEV-002: nothing to wait for; upstream drops it ("Cannot defer ... as no recovery initiated")."""
    rig = make_rig(config(poll_interval=None))
    rig.events.on_producer_status_change(7, "ProcessingQueDelayStabilized")
    assert [e.data for e in rig.journal.entries() if e.kind == "up"] == [{"producer": 7, "callback": "ProcessingQueDelayStabilized"}]
    assert rig.events.stats().forwarded_without_context == 1


def test_other_statuses_and_callbacks_pass_through_at_once():
    """A non-up status is forwarded in the call (REC-017/018, the model's ``non-up-never-deferred``);
    so is any other global callback (upstream DelegatingSDKGlobalEventsListener)."""
    journal = Journal()
    calls = []

    class Customer(RecordingGlobalListener):
        def on_connection_down(self, *args):
            calls.append(args)

    cl = ConcurrentListener(config(poll_interval=None))
    try:
        g = cl.wrap_global_listener(Customer(journal))
        g.on_recovery_initiated(1, 1)
        g.on_producer_status_change(1, "AliveIntervalViolation")
        assert [e.kind for e in journal.entries()] == ["rec-init", "status"]
        g.on_connection_down("broker gone")
        assert calls == [("broker gone",)]
    finally:
        cl.close(CAP)


def test_poll_tick_delivers_an_up_whose_tasks_already_completed(make_rig):
    """The up comes after every task of the recovery has completed: no drop to 0 follows, only the
    poll tick (a real scheduler thread) can deliver it."""
    rig = make_rig(config(poll_interval=0.01))
    rig.events.on_recovery_initiated(1, 1)
    for step in resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 20, latency=(0.0, 0.002)):
        rig.feed.on_event(step.event)
    assert rig.journal.wait_for(lambda es: sum(e.kind == "end" for e in es) == 20, CAP)
    rig.up(1)
    assert rig.journal.wait_for(lambda es: any(e.kind == "up" for e in es), CAP), "the poll tick never delivered it"
    assert rig.events.deferrals(1)[0].polls >= 1


def test_without_poll_ticks_an_already_drained_up_waits_for_poll_now(make_rig):
    """``poll_interval=None``: nothing but a drop to 0 or ``poll_now`` checks a deferred up -- so an up
    that arrives after its recovery drained is delivered exactly by ``poll_now``."""
    rig = make_rig(config(poll_interval=None))
    rig.events.on_recovery_initiated(1, 1)
    for step in resent(1, 1, on_queues(1, [0, 1, 2, 3, 4]), 20, latency=(0.0, 0.002)):
        rig.feed.on_event(step.event)
    # the pool counts a task done after its runner returned, i.e. after the tracker's observer ran
    assert rig.journal.wait_for(lambda es: rig.feed.stats().pool.completed == 20, CAP)
    rig.up(1)
    assert rig.journal.count("up") == 0
    assert rig.events.poll_now() == 1
    assert rig.journal.count("up") == 1
    assert rig.events.poll_now() == 0  # at most once


def test_a_throwing_global_listener_does_not_stop_the_scheduler(make_rig):
    rig = make_rig(config(), global_fail=lambda what, p: what == "up" and p == 1)
    script = [Recover(1, 1), Recover(2, 1), *resent(1, 1, on_queues(1, [0, 1]), 10), Up(1),
              *resent(2, 1, on_queues(2, [2, 3]), 10), Up(2)]
    sim = play(rig, script)
    assert verdict(rig, sim, strict_up=True) == []
    assert sorted(e.data["producer"] for e in rig.journal.entries() if e.kind == "up") == [1, 2]
    assert rig.events.stats().customer_errors == 1


# -- seeded random scenarios and the legacy pipeline ---------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_seeded_random_scenarios(seed):
    """Random producers' streams (2 recoveries each, ups at random moments, unparsable resent
    messages, errors about no event, throwing handlers, Downs): every guarantee holds."""
    s = Scenario(producers=3, matches_per_producer=6, live_events=5, recoveries=2, events_per_recovery=15,
                 up_timing="random", up_callbacks=("FirstRecoveryCompleted", "ProducerUp"), error_rate=0.1,
                 errors_without_event=1, failure_rate=0.1, latency=(0.0, 0.004), down_after_up_rate=0.3, seed=seed)
    r = run_scenario(s, ConcurrentListenerConfig(threads=4, queue_size=8, poll_interval=0.005), cap=CAP)
    assert r.violations == []
    assert r.stats.listener_errors > 0 and r.stats.pool.completed == r.stats.pool.submitted


def test_legacy_pipeline_is_serial_on_the_feed_thread_and_forwards_ups_at_once():
    """enabled=False: the baseline.  Every handler on the feed thread, one at a time; the up is
    forwarded at once and is still after its events because they were processed synchronously
    (REC-008)."""
    s = Scenario(producers=2, matches_per_producer=4, live_events=5, events_per_recovery=20, up_timing="after",
                 latency=(0.0, 0.002), seed=5)
    r = run_scenario(s, ConcurrentListenerConfig(enabled=False), cap=CAP, strict_up=True)
    assert r.violations == []
    starts = [e for e in r.entries if e.kind == "start"]
    assert starts and all(e.thread == r.feed_ident for e in starts)
    kinds = [e.kind for e in r.entries if e.kind in ("start", "end")]
    assert kinds == ["start", "end"] * (len(kinds) // 2)  # never two handlers at once
    for e in r.entries:
        if e.kind == "up-sent":
            assert r.entries[e.i + 1].kind == "up"  # forwarded in the same call


def test_up_waits_for_its_recovery_in_every_wrapped_feed_listener():
    """Two customer listeners registered (one per message interest), each wrapped with its own worker
    pool; one tracker: the recovery's up waits for its tasks in both.  ``poll_now`` right after the
    first listener's tasks completed must not deliver it while the second's are held."""
    journal = Journal()
    cl = ConcurrentListener(config(threads=3, poll_interval=None))
    gate = threading.Event()
    try:
        odds = cl.wrap_feed_listener(RecordingFeedListener(journal))
        settle = cl.wrap_feed_listener(RecordingFeedListener(journal, hold=lambda item: gate, hold_cap=CAP))
        g = cl.wrap_global_listener(RecordingGlobalListener(journal))
        assert not odds.worker_idents() & settle.worker_idents()  # a pool each (DEMUX-028)
        g.on_recovery_initiated(1, 1)
        for i in range(12):
            (odds if i % 2 else settle).on_event(FeedEvent(1000 + i % 6, 1, 1, "odds_change", i, Work(0.002)))
        journal.record("up-sent", producer=1, callback="FirstRecoveryCompleted")
        g.on_producer_status_change(1, "FirstRecoveryCompleted")
        deadline = threading.Event()
        for _ in range(int(CAP / 0.001)):
            if odds.stats().pool.completed == 6:
                break
            deadline.wait(0.001)
        assert odds.stats().pool.completed == 6, "safety cap: the first listener's tasks did not complete"
        assert g.poll_now() == 0  # the second listener still holds tasks of the recovery
        gate.set()
    finally:
        gate.set()
        cl.close(CAP)
    assert check_journal(journal.entries(), strict_up=True) == []
    assert journal.count("up") == 1
    assert {e.thread for e in journal.entries() if e.kind == "start"} <= odds.worker_idents() | settle.worker_idents()
