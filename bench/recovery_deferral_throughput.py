"""Throughput of the concurrent listener against the legacy serial pipeline (seed 004 "Solution":
"increase throughput of events by processing in parallel"; issue 15: 8 workers >= 7x).

Run:  /work/main/.venv/bin/python bench/recovery_deferral_throughput.py [--events 320] [--repeats 3] [--latency 0.010]

Workload: 2 producers, each a recovery (request id 1) of ``events/2`` resent messages over 40
matches each (match of message i = i mod 40, so consecutive match ids spread evenly over the
queues, as upstream's long ids do), then its "up".  The customer's handler blocks ``--latency``
seconds (time.sleep: an API call, not CPU).  One feed thread plays the script; a run ends when
every queue is drained and every thread joined (``ConcurrentListener.close``).  Each run is checked
(per-match order, every up after its events, nothing lost): a wrong run aborts the benchmark.

Printed per mode: the median events/s over ``--repeats`` runs, the runs, the ratio to the legacy
median, and the time the feed thread spent inside the customer's listener (median).
"""

from __future__ import annotations

import argparse
import statistics

from conq.impl.recovery_deferral import ConcurrentListenerConfig, FeedEvent
from conq.impl.recovery_deferral.feed import Event, Recover, Up, Work, run_scenario


def script(events: int, latency: float) -> list:
    out = []
    per = events // 2
    for p in (1, 2):
        out.append(Recover(p, 1))
        out += [Event(FeedEvent(p * 1000 + i % 40, p, 1, "odds_change", i, Work(latency))) for i in range(per)]
        out.append(Up(p))
    return out


def feed_thread_customer_seconds(r) -> float:
    begun = {}
    total = 0.0
    for e in r.entries:
        if e.thread != r.feed_ident:
            continue
        if e.kind == "start":
            begun[id(e.data["item"])] = e.t
        elif e.kind == "end":
            total += e.t - begun.pop(id(e.data["item"]))
    return total


def one(config: ConcurrentListenerConfig, events: int, latency: float) -> tuple[float, float]:
    r = run_scenario(script(events, latency), config, cap=600, strict_up=True)
    if r.violations:
        raise AssertionError(f"{config}: {r.violations[:3]}")
    return events / r.elapsed, feed_thread_customer_seconds(r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=320)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.010)
    args = ap.parse_args()
    modes = [("legacy (serial)", ConcurrentListenerConfig(enabled=False))]
    modes += [(f"concurrent, {t} workers", ConcurrentListenerConfig(threads=t, queue_size=10_000, poll_interval=0.2))
              for t in (1, 2, 4, 8)]
    print(f"throughput with a {args.latency * 1000:.0f} ms blocking handler, {args.events} events, "
          f"median of {args.repeats} runs")
    print(f"{'mode':<26} {'events/s':>9} {'x legacy':>9} {'feed thread in customer code':>29}   runs (events/s)")
    base = None
    for name, cfg in modes:
        runs = [one(cfg, args.events, args.latency) for _ in range(args.repeats)]
        rate = statistics.median(r for r, _ in runs)
        on_feed = statistics.median(s for _, s in runs)
        base = base or rate
        print(f"{name:<26} {rate:>9.1f} {rate / base:>8.2f}x {on_feed:>27.3f} s   "
              f"{', '.join(f'{r:.1f}' for r, _ in runs)}")


if __name__ == "__main__":
    main()
