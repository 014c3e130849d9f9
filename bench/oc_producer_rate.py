"""Producer sends per second of the thin client, broker in-process.

Run:  /work/main/.venv/bin/python bench/oc_producer_rate.py [--repeats 5] [--messages 50000]

Each run (``conq.impl.ordered_consumption.workload.run_producer_rate``) has 1 or 4 threads share one
``Producer`` sending ``--messages`` messages to a 16-queue topic through the in-process channel:
normal messages (rotating candidates) and FIFO messages (64 message groups, each pinned to its
queue), without faults and with 5 % of sends answered by a retriable fault (half of them throttled
with a 0.5-2 ms server back-off).  Reported: the median sends / second of ``--repeats`` runs per
configuration, every run, and the ratios to the 1-thread normal, fault-free rate.
"""

from __future__ import annotations

import argparse
import statistics

from conq.impl.ordered_consumption import FaultPlan
from conq.impl.ordered_consumption.workload import run_producer_rate

FAULTS = FaultPlan(1, {"send_message": {"throttled": 0.025, "unavailable": 0.0125, "timeout": 0.0125}},
                   backoffs=(0.0005, 0.001, 0.002))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--messages", type=int, default=50_000)
    args = ap.parse_args()
    configs = [(t, fifo, faulty) for faulty in (False, True) for fifo in (False, True) for t in (1, 4)]
    rates: dict[tuple, list[float]] = {c: [] for c in configs}
    for _ in range(args.repeats):
        for t, fifo, faulty in configs:
            rates[(t, fifo, faulty)].append(run_producer_rate(messages=args.messages, threads=t, fifo=fifo,
                                                              faults=FAULTS if faulty else None))
    base = statistics.median(rates[(1, False, False)])
    print(f"producer, 16 queues, {args.messages:,} sends per run, median of {args.repeats} runs")
    print(f"{'threads':>7} {'messages':>9} {'faults':>7} {'sends/s':>9} {'ratio':>6}   runs")
    for (t, fifo, faulty), rs in rates.items():
        med = statistics.median(rs)
        print(f"{t:>7} {'FIFO' if fifo else 'normal':>9} {'5%' if faulty else 'none':>7} {med:>9.0f} "
              f"{med / base:>6.2f}   {', '.join(f'{r:.0f}' for r in rs)}")


if __name__ == "__main__":
    main()
