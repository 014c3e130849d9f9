"""Push-consumer throughput of the thin client: FIFO vs standard consumption, broker in-process.

Run:  /work/main/.venv/bin/python bench/oc_consume_throughput.py [--repeats 5] [--messages 100000]

Each run (``conq.impl.ordered_consumption.workload.run_throughput``) fills a 16-queue topic with
``--messages`` messages, then one push consumer with 16 consumption threads consumes and acks them
all (no faults, a listener that accepts everything); the rate is messages / wall-clock second from
the consumer's start to the last ack.  FIFO: a FIFO consumer group, messages over 64 message groups
(the broker hands out one message per group at a time; the client's process-queue lock consumes one
message per queue at a time).  Standard: a standard group, no groups.  Reported: the median of
``--repeats`` runs per mode, every run, and the FIFO / standard ratio.
"""

from __future__ import annotations

import argparse
import statistics

from conq.impl.ordered_consumption.workload import run_throughput


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--messages", type=int, default=100_000)
    args = ap.parse_args()
    print(f"push consumer, 16 queues, 16 consumption threads, {args.messages:,} messages per run, "
          f"median of {args.repeats} runs (runs interleaved FIFO/standard)")
    rates: dict[str, list[float]] = {"fifo": [], "standard": []}
    for _ in range(args.repeats):
        for mode in ("fifo", "standard"):
            rates[mode].append(run_throughput(mode, messages=args.messages))
    med = {m: statistics.median(r) for m, r in rates.items()}
    print(f"{'mode':>10} {'msg/s':>10}   runs")
    for mode in ("standard", "fifo"):
        print(f"{mode:>10} {med[mode]:>10.0f}   {', '.join(f'{r:.0f}' for r in rates[mode])}")
    print(f"FIFO / standard = {med['fifo'] / med['standard']:.2f}")


if __name__ == "__main__":
    main()
