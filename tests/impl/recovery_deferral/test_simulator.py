"""The feed simulator and the journal checks: scripts are a pure function of the seed and keep each
producer's stream in order, and every check rejects the journal of a run that breaks it (a check
that cannot fail is no check)."""

from __future__ import annotations

from conq.impl.recovery_deferral import ErrorEvent, FeedEvent
from conq.impl.recovery_deferral.feed import (
    Entry,
    Error,
    Event,
    Recover,
    Scenario,
    Up,
    build_script,
    check_journal,
)


def test_scripts_are_seeded_and_keep_each_producers_order():
    s = Scenario(producers=3, recoveries=2, events_per_recovery=10, up_timing="random", error_rate=0.2,
                 errors_without_event=1, down_after_up_rate=0.5, latency=(0.0, 0.01), failure_rate=0.1, seed=4)
    a, b = build_script(s), build_script(s)
    assert a == b and a != build_script(Scenario(**{**s.__dict__, "seed": 5}))
    for p in (1, 2, 3):
        mine = [x for x in a if getattr(x, "producer_id", None) == p or
                getattr(getattr(x, "event", getattr(x, "error", None)), "producer_id", None) == p]
        seqs = [x.event.seq if isinstance(x, Event) else x.error.seq for x in mine if isinstance(x, (Event, Error))]
        assert seqs == sorted(seqs)  # the producer's stream order survives the merge
        epoch = 0
        for x in mine:
            if isinstance(x, Recover):
                epoch = x.request_id
            item = x.event if isinstance(x, Event) else x.error if isinstance(x, Error) else None
            if item is not None:
                assert item.request_id in (0, epoch)  # resent after its Recover, live before any
        assert sum(isinstance(x, Up) for x in mine) == 2


def test_up_timing_places_the_up():
    for timing, index in (("before", 1), ("after", 11)):
        script = build_script(Scenario(producers=1, live_events=0, events_per_recovery=10, up_timing=timing))
        assert isinstance(script[0], Recover) and isinstance(script[index], Up)


# -- the checks reject broken runs ---------------------------------------------------------------------------

FEED, W1, W2 = 1, 2, 3


def journal(*rows) -> list[Entry]:
    return [Entry(i, kind, thread, 0.0, data) for i, (kind, thread, data) in enumerate(rows)]


E1 = FeedEvent(10, 1, 1, "odds_change", 1)
E2 = FeedEvent(10, 1, 1, "odds_change", 2)


def good_run() -> list[tuple]:
    return [
        ("rec-init", FEED, {"producer": 1, "request": 1}),
        ("handoff", FEED, {"item": E1}), ("accepted", FEED, {"item": E1}),
        ("handoff", FEED, {"item": E2}), ("accepted", FEED, {"item": E2}),
        ("up-sent", FEED, {"producer": 1, "callback": "FirstRecoveryCompleted"}),
        ("start", W1, {"item": E1}), ("end", W1, {"item": E1}),
        ("start", W2, {"item": E2}), ("end", W2, {"item": E2}),
        ("up", W1, {"producer": 1, "callback": "FirstRecoveryCompleted"}),
    ]


def test_a_good_run_passes():
    assert check_journal(journal(*good_run()), feed_ident=FEED, strict_up=True) == []


def test_up_before_an_accepted_event_is_processed_is_rejected():
    rows = good_run()
    rows.insert(8, rows.pop(10))  # the up right after E1 ended, before E2 started
    assert any("delivered before" in v for v in check_journal(journal(*rows), feed_ident=FEED))


def test_overtaking_within_a_match_is_rejected():
    rows = good_run()
    rows[6:10] = [rows[8], rows[9], rows[6], rows[7]]  # E2 handled before E1
    assert any("match 10" in v for v in check_journal(journal(*rows), feed_ident=FEED))


def test_two_events_of_a_match_at_once_are_rejected():
    rows = good_run()
    rows[6:10] = [rows[6], rows[8], rows[7], rows[9]]  # E2 starts before E1 ended
    assert any("match 10" in v for v in check_journal(journal(*rows), feed_ident=FEED))


def test_a_duplicate_or_stale_or_missing_up_is_rejected():
    dup = [*good_run(), ("up", W1, {"producer": 1, "callback": "FirstRecoveryCompleted"})]
    assert any("duplicate" in v for v in check_journal(journal(*dup), feed_ident=FEED))
    after_down = good_run()
    after_down.insert(10, ("down", FEED, {"producer": 1, "reason": "x"}))
    assert any("cancelled" in v for v in check_journal(journal(*after_down), feed_ident=FEED))
    missing = good_run()[:-1]
    assert any("never delivered" in v for v in check_journal(journal(*missing), feed_ident=FEED))
    assert check_journal(journal(*missing), feed_ident=FEED, complete=False) == []


def test_customer_code_on_the_feed_thread_lost_events_and_early_handling_are_rejected():
    on_feed = good_run()
    on_feed[6] = ("start", FEED, {"item": E1})
    assert any("feed thread" in v for v in check_journal(journal(*on_feed), feed_ident=FEED))
    lost = [r for r in good_run() if r[2].get("item") is not E2 or r[0] in ("handoff", "accepted")]
    assert any("started 0x" in v for v in check_journal(journal(*lost), feed_ident=FEED))
    early = good_run()
    early.insert(0, early.pop(6))  # handled before the customer saw the recovery initiated
    assert any("before the customer saw recovery" in v for v in check_journal(journal(*early), feed_ident=FEED))


def test_error_events_count_under_their_recovery():
    err = ErrorEvent(1, 1, 10, "unparsable_message", 3)
    rows = good_run()
    rows[5:5] = [("handoff", FEED, {"item": err}), ("accepted", FEED, {"item": err})]
    rows += [("start", W2, {"item": err}), ("end", W2, {"item": err})]  # after the up: DEV-010 says wrong
    assert any("delivered before ErrorEvent" in v for v in check_journal(journal(*rows), feed_ident=FEED))

