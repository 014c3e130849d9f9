"""Issue 14's stress at full scale: the thin client's FIFO push consumer on real threads, with seeded faults.

Run:  /work/main/.venv/bin/python bench/oc_stress.py [--repeats 3] [--messages 1000000] [--fault-scale 1.0]

Each run (``conq.impl.ordered_consumption.workload.run_stress``): 4 producer threads send
``--messages`` messages over 64 FIFO message groups (16 queues) while one push consumer with 16
consumption threads consumes them; seeded faults on every RPC (``workload.default_fault_plan``:
timeouts, unavailable, throttling with a server back-off, internal errors, lost answers, invalid
receipt handles, message not found).  A run *fails* (StressError) unless per-group order held,
nothing was lost, nothing was consumed more than max attempts (3), exactly the always-failing
messages were dead-lettered, and no process queue's cache exceeded its limits plus one batch.
Reported: per run and the median, wall time, messages per second, and what the run went through.
"""

from __future__ import annotations

import argparse
import statistics

from conq.impl.ordered_consumption.workload import default_fault_plan, run_stress


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=64)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--fault-scale", type=float, default=1.0, help="multiplies every fault rate")
    # limits low enough to be reached (4 messages / 160 bytes per queue), so the bound is exercised
    ap.add_argument("--cache-messages", type=int, default=64, help="maxCacheMessageCount over the 16 queues")
    ap.add_argument("--cache-bytes", type=int, default=16 * 160, help="maxCacheMessageSizeInBytes over the 16 queues")
    args = ap.parse_args()
    per_group = args.messages // args.groups
    print(f"FIFO stress: {per_group * args.groups:,} messages, {args.groups} groups, 16 queues, "
          f"{args.threads} consumption threads, 4 producers, faults x{args.fault_scale}; {args.repeats} run(s)")
    rates, times = [], []
    for seed in range(1, args.repeats + 1):
        r = run_stress(groups=args.groups, per_group=per_group, queues=16, producers=4,
                       consumption_threads=args.threads, max_attempts=3, seed=seed,
                       faults=default_fault_plan(seed, 3, args.fault_scale),
                       max_cache_messages=args.cache_messages, max_cache_bytes=args.cache_bytes, timeout=3000)
        rates.append(r.rate)
        times.append(r.elapsed)
        faults = sum(n for k, n in r.answers.items() if not k.endswith("/ok"))
        s = r.consumer_stats
        print(f"  seed {seed}: PASS  {r.elapsed:7.1f} s  {r.rate:8.0f} msg/s\n"
              f"    stored {r.stored:,} (+{r.stored - r.messages:,} duplicates of lost send answers), "
              f"consumptions {r.consumptions:,}, max consumptions of one message {r.max_consumptions}\n"
              f"    dead-lettered {r.dead_lettered:,} stored messages = the {r.always_fail:,} always-failing "
              f"payloads (+{r.dead_lettered - r.always_fail} duplicate copies)\n"
              f"    cache high-water {r.high_water[0]} msgs / {r.high_water[1]} B per queue; thresholds "
              f"{r.thresholds[0]} / {r.thresholds[1]} B, bound {r.thresholds[1]} B + batch {r.batch} x {r.max_body} B\n"
              f"    injected faults {faults:,}; settle retries {s['settle_retries']:,}, settles rejected "
              f"{s['settle_rejected']:,}, memo settles {s['memo_settles']:,}, listener exceptions "
              f"{s['listener_exceptions']:,}, receive errors {s['receive_errors']:,}, app resends {r.app_resends}")
    print(f"median: {statistics.median(times):.1f} s, {statistics.median(rates):.0f} msg/s "
          f"(runs: {', '.join(f'{x:.0f}' for x in rates)})")


if __name__ == "__main__":
    main()
