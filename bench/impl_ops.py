"""Per-operation cost of the reference implementation at 10, 100, 1,000 and 10,000 consumers.

Run:  /work/main/.venv/bin/python bench/impl_ops.py [--repeats 5] [--ops 2000]

Operations (each timed one call at a time with perf_counter_ns on a queue that already has N
acquiring consumers, all Interested, default priority).  Two tables, each the median over
``--repeats`` runs, with the ratio against N = 10 (the design promise is O(1), goal <= 1.2x):
the typical call (median of the per-call times: robust against preemption on a shared machine)
and the amortised cost (mean of the per-call times: includes the occasional scavenge walk and GC).

  add       Queue.add_consumer of one more consumer
  remove    Queue.remove_consumer of one consumer
  interest  QueueConsumer.set_flow(False) then set_flow(True) (two set_notify_work_desired calls)
  notify    Queue.enqueue of one message, which notifies one Interested consumer
  deliver   Queue.deliver_single_message by the notified consumer (acquires the message)
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from conq.impl.consumer_lists.queue import Queue

SIZES = (10, 100, 1_000, 10_000)
OPS = ("add", "remove", "interest", "notify", "deliver")


def build(n: int) -> tuple[Queue, list]:
    q = Queue(record_events=False, retain_deleted=False)
    consumers = [q.add_consumer(f"c{i}") for i in range(n)]
    return q, consumers


def bench_add(n: int, ops: int) -> float:
    q, _ = build(n)
    clock = time.perf_counter_ns
    samples = []
    added = []
    for i in range(ops):
        t0 = clock()
        c = q.add_consumer(f"x{i}")
        samples.append(clock() - t0)
        added.append(c)
        if len(added) >= 50:  # keep the population at about n
            for a in added:
                q.remove_consumer(a)
            added.clear()
    return samples


def bench_remove(n: int, ops: int) -> float:
    q, _ = build(n)
    clock = time.perf_counter_ns
    samples = []
    k = 0
    while len(samples) < ops:
        batch = [q.add_consumer(f"x{k}-{j}") for j in range(50)]
        k += 1
        for c in batch:
            t0 = clock()
            q.remove_consumer(c)
            samples.append(clock() - t0)
    return samples


def bench_interest(n: int, ops: int) -> float:
    q, consumers = build(n)
    clock = time.perf_counter_ns
    samples = []
    for i in range(ops):
        c = consumers[(i * 7919) % n]
        t0 = clock()
        c.set_flow(False)
        c.set_flow(True)
        samples.append(clock() - t0)
    return samples


def bench_notify_deliver(n: int, ops: int) -> tuple[float, float]:
    q, consumers = build(n)
    by_id = {c.id: c for c in consumers}
    notified = []
    for c in consumers:
        c.listener = notified.append  # the notified consumer, as the chain would schedule it
    clock = time.perf_counter_ns
    t_notify = []
    t_deliver = []
    for _ in range(ops):
        notified.clear()
        t0 = clock()
        q.enqueue()
        t1 = clock()
        if len(notified) != 1:
            raise AssertionError(f"enqueue notified {len(notified)} consumers, expected exactly one")
        c = by_id[notified[0].id]
        t2 = clock()
        msg = q.deliver_single_message(c)
        t3 = clock()
        if msg is None:
            raise AssertionError("the notified consumer got no message")
        t_notify.append(t1 - t0)
        t_deliver.append(t3 - t2)
        q.settle(msg, c)
        q.deliver_single_message(c)  # nothing left: back to Interested (at the back of the list)
    return t_notify, t_deliver


def run_once(n: int, ops: int) -> dict[str, list[int]]:
    gc.collect()
    out = {"add": bench_add(n, ops), "remove": bench_remove(n, ops), "interest": bench_interest(n, ops)}
    out["notify"], out["deliver"] = bench_notify_deliver(n, ops)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ops", type=int, default=2000)
    args = ap.parse_args()
    typical: dict[int, dict[str, float]] = {}
    amortised: dict[int, dict[str, float]] = {}
    # sizes interleaved round-robin so that load from other processes hits every size alike
    runs: dict[int, list[dict[str, list[int]]]] = {n: [] for n in SIZES}
    for _ in range(args.repeats):
        for n in SIZES:
            runs[n].append(run_once(n, args.ops))
    for n in SIZES:
        typical[n] = {op: statistics.median(statistics.median(r[op]) for r in runs[n]) for op in OPS}
        amortised[n] = {op: statistics.median(statistics.fmean(r[op]) for r in runs[n]) for op in OPS}
    for title, table in (
        ("typical call: median per-call time", typical),
        ("amortised: mean per-call time (includes scavenges, GC and preemption by other processes)", amortised),
    ):
        print(f"{title}; median over {args.repeats} runs x {args.ops} calls; microseconds (ratio vs 10 consumers)")
        print(f"{'consumers':>10} " + " ".join(f"{op:>17}" for op in OPS))
        for n in SIZES:
            cells = [f"{table[n][op] / 1000:8.2f} ({table[n][op] / table[SIZES[0]][op]:4.2f}x)" for op in OPS]
            print(f"{n:>10} " + " ".join(f"{c:>17}" for c in cells))
        worst = max(table[SIZES[-1]][op] / table[SIZES[0]][op] for op in OPS)
        print(f"worst ratio at {SIZES[-1]} consumers: {worst:.2f}x (goal <= 1.20x)")
        print()


if __name__ == "__main__":
    main()
