"""Time the feed thread spends in customer code (seed 004 "Legacy SDK issue": "By the time each event
gets to the customers OddsFeedListener, we are still using the RabbitMQ thread!  This is very
dangerous"; issue 15: must be zero with the concurrent listener).

Run:  /work/main/.venv/bin/python bench/recovery_deferral_feed_thread.py [--events 300] [--repeats 5]

How it is measured: the customer's listener records, for every call, the identity of the thread it
runs on and the call's start and end (``feed.RecordingFeedListener``); the feed thread is the one
thread that plays the script (``feed.FeedSimulator``).  Summed per run: customer calls on the feed
thread and their duration; the time the feed thread spent inside ``on_event`` (the hand-off,
per event); the time it waited for room on a full queue (DEV-001: back-pressure, not customer
code).  Workload: 2 producers x 1 recovery, ``--events`` messages over 40 matches each, a 2 ms
blocking handler, 4 workers; one row with queues large enough never to fill, one with queues of 4
(the feed thread blocks for room).  Medians of ``--repeats`` runs; ratios are of the run's wall time.
"""

from __future__ import annotations

import argparse
import statistics

from conq.impl.recovery_deferral import ConcurrentListenerConfig, FeedEvent
from conq.impl.recovery_deferral.feed import Event, Recover, Up, Work, run_scenario


def script(events: int) -> list:
    out = []
    for p in (1, 2):
        out.append(Recover(p, 1))
        out += [Event(FeedEvent(p * 1000 + i % 40, p, 1, "odds_change", i, Work(0.002))) for i in range(events // 2)]
        out.append(Up(p))
    return out


def one(config: ConcurrentListenerConfig, events: int) -> dict:
    r = run_scenario(script(events), config, cap=600, strict_up=True)
    if r.violations:
        raise AssertionError(r.violations[:3])
    begun, calls, seconds = {}, 0, 0.0
    for e in r.entries:
        if e.thread == r.feed_ident and e.kind == "start":
            begun[id(e.data["item"])] = e.t
            calls += 1
        elif e.thread == r.feed_ident and e.kind == "end":
            seconds += e.t - begun.pop(id(e.data["item"]))
    blocked = r.stats.pool.blocked_seconds if r.stats.pool else 0.0
    return {"calls": calls, "customer": seconds, "wall": r.elapsed, "handoff_us": r.handoff_seconds / events * 1e6,
            "blocked": blocked}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    modes = [
        ("legacy (serial)", ConcurrentListenerConfig(enabled=False)),
        ("concurrent, 4 workers", ConcurrentListenerConfig(threads=4, queue_size=10_000)),
        ("concurrent, 4 workers, queues of 4", ConcurrentListenerConfig(threads=4, queue_size=4)),
    ]
    print(f"feed thread vs customer code: {args.events} events, 2 ms handler, median of {args.repeats} runs")
    print(f"{'mode':<36} {'customer calls':>14} {'in customer code':>17} {'share of wall':>13} "
          f"{'hand-off/event':>15} {'waiting for room':>17}")
    for name, cfg in modes:
        runs = [one(cfg, args.events) for _ in range(args.repeats)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name:<36} {med['calls']:>14.0f} {med['customer']:>15.3f} s {med['customer'] / med['wall']:>12.1%} "
              f"{med['handoff_us']:>12.1f} us {med['blocked']:>15.3f} s")


if __name__ == "__main__":
    main()
