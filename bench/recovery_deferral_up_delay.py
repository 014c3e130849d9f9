"""Delay from the last task of a recovery completing to the deferred "up" reaching the customer
(seed 004 "Deferring of ProducerUp": "When the count of the pending tasks for that RecoveryContext
reaches zero, then we propagate the ProducerUp"; issue 15: within one poll interval).

Run:  /work/main/.venv/bin/python bench/recovery_deferral_up_delay.py [--repeats 7] [--poll 0.2]

Two arrivals of the "up":
* *during*: the SDK sends the "up" right after the resent messages, while the workers are still
  busy (40 messages, 10 ms handler, 4 workers): the delay is from the end of the recovery's last
  handler to the delivery;
* *after*: the "up" arrives once every task has completed (nothing drops to 0 after it): the delay is
  from the "up"'s arrival to its delivery -- only a poll tick can deliver it.

Each with the event-driven wake (the reference: the tracker reports the drop to 0 and the scheduler
thread delivers at once) and poll-only (upstream: a check every ``--poll`` seconds).  Times are the
customer's own records (``end`` just before the handler returns, ``up`` when the callback runs);
medians and maxima of ``--repeats`` runs, and as a share of the poll interval.
"""

from __future__ import annotations

import argparse
import statistics
import threading

from conq.impl.recovery_deferral import (
    ConcurrentListener,
    ConcurrentListenerConfig,
    FeedEvent,
)
from conq.impl.recovery_deferral.feed import (
    Journal,
    RecordingFeedListener,
    RecordingGlobalListener,
    Work,
)


def one(poll: float, wake: bool, arrival: str, events: int = 40) -> float:
    journal = Journal()
    cl = ConcurrentListener(ConcurrentListenerConfig(threads=4, poll_interval=poll, wake_on_drain=wake))
    try:
        feed = cl.wrap_feed_listener(RecordingFeedListener(journal))
        g = cl.wrap_global_listener(RecordingGlobalListener(journal))
        g.on_recovery_initiated(1, 1)
        for i in range(events):
            feed.on_event(FeedEvent(1000 + i % 16, 1, 1, "odds_change", i, Work(0.010)))
        if arrival == "after":
            if not journal.wait_for(lambda es: sum(e.kind == "end" for e in es) == events, 60):
                raise AssertionError("safety cap: the recovery's tasks did not complete")
            # the pool counts a task done after its runner returned, i.e. after the drop to 0 was reported
            pause = threading.Event()
            while feed.stats().pool.completed < events:
                pause.wait(0.001)
        sent = journal.record("up-sent", producer=1, callback="FirstRecoveryCompleted")
        g.on_producer_status_change(1, "FirstRecoveryCompleted")
        if not journal.wait_for(lambda es: any(e.kind == "up" for e in es), 60):
            raise AssertionError("safety cap: the up was never delivered")
    finally:
        cl.close(60)
    es = journal.entries()
    up = next(e.t for e in es if e.kind == "up")
    last_end = max(e.t for e in es if e.kind == "end")
    start = max(last_end, es[sent].t)
    return up - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--poll", type=float, default=0.2)
    args = ap.parse_args()
    print(f"delay to the delivered up, poll interval {args.poll * 1000:.0f} ms, median / max of {args.repeats} runs")
    print(f"{'up arrives':<12} {'delivery':<26} {'median':>10} {'max':>10} {'median/poll':>12} {'max/poll':>9}")
    for arrival in ("during", "after"):
        for wake in (True, False):
            d = [one(args.poll, wake, arrival) for _ in range(args.repeats)]
            med, mx = statistics.median(d), max(d)
            name = "wake on drain + poll (ref)" if wake else "poll only (upstream)"
            print(f"{arrival:<12} {name:<26} {med * 1000:>8.2f}ms {mx * 1000:>8.2f}ms "
                  f"{med / args.poll:>11.1%} {mx / args.poll:>8.1%}")


if __name__ == "__main__":
    main()
