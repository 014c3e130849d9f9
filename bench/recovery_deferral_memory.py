"""Memory under a producer that outruns the workers: bounded by ``queue_size`` x queues (seed 004
"Configuration": ``queueSize``; spec/deviations.md DEV-001: a full queue blocks the feed thread).

Run:  /work/main/.venv/bin/python bench/recovery_deferral_memory.py [--events 20000] [--repeats 3]

The feed thread creates ``--events`` messages one by one (nothing pre-built, so only the messages the
listener holds are alive) as fast as it can; the customer's handler blocks 0.2 ms on 4 workers, so
the feed is far faster than the workers.  Measured per run: the most tasks ever queued at once
(the pool's high-water mark, a count) and the peak of traced Python memory (``tracemalloc``) during
the run, for bounded queues (the reference, ``queue_size=100``) and unbounded ones (upstream's
``withUnboundedQueues``; ``queue_size=None``).  Medians of ``--repeats`` runs, and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from conq.impl.recovery_deferral import (
    ConcurrentListener,
    ConcurrentListenerConfig,
    FeedEvent,
)


class SlowCounter:
    def __init__(self) -> None:
        self.n = 0

    def on_event(self, event: FeedEvent) -> None:
        time.sleep(0.0002)
        self.n += 1  # one worker per queue, and only read after close (join = happens-before)

    def on_error(self, error) -> None:
        pass


def one(queue_size: int | None, events: int, threads: int) -> tuple[int, float, int, float]:
    customer = SlowCounter()
    tracemalloc.start()
    t0 = time.perf_counter()
    cl = ConcurrentListener(ConcurrentListenerConfig(threads=threads, queue_size=queue_size, poll_interval=None))
    feed = cl.wrap_feed_listener(customer)
    for i in range(events):
        feed.on_event(FeedEvent(i % 400, 1, 0, "odds_change", i, None))
    cl.close(600)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    stats = feed.stats().pool
    assert stats.completed == events and stats.dropped == 0
    return stats.max_queued, peak / 1024, stats.blocked, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--queue-size", type=int, default=100)
    args = ap.parse_args()
    bound = args.queue_size * args.threads
    print(f"memory with a producer that outruns {args.threads} workers (0.2 ms handler), {args.events} events, "
          f"median of {args.repeats} runs; bound queue_size x queues = {args.queue_size} x {args.threads} = {bound}")
    print(f"{'queues':<22} {'max queued':>10} {'/ bound':>8} {'peak traced':>12} {'feed waits':>10} {'wall':>7}")
    rows = {}
    for name, qs in ((f"bounded ({args.queue_size})", args.queue_size), ("unbounded (upstream)", None)):
        runs = [one(qs, args.events, args.threads) for _ in range(args.repeats)]
        q, kib, blocked, wall = (statistics.median(r[i] for r in runs) for i in range(4))
        rows[name] = (q, kib)
        print(f"{name:<22} {q:>10.0f} {q / bound:>7.2f}x {kib:>9.0f} KiB {blocked:>10.0f} {wall:>6.2f}s")
    (bq, bk), (uq, uk) = rows.values()
    print(f"bounded / unbounded: queued {bq / uq:.3f}x, peak memory {bk / uk:.3f}x")


if __name__ == "__main__":
    main()
