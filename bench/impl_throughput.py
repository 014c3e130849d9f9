"""End-to-end messages per second of the reference implementation on real threads.

Run:  /work/main/.venv/bin/python bench/impl_throughput.py [--repeats 3] [--messages 100000] [--no-million]

Each run goes through the whole chain of ``conq.impl.consumer_lists.delivery``: 2 publisher threads enqueue,
2 IO threads run the connections, every consumer has its own connection, and the sink settles each
message (``conq.impl.consumer_lists.workload``, with its correctness checks on).  Reported: the median over
``--repeats`` runs of messages / wall-clock second for 1, 4 and 16 consumers, then one run of
1,000,000 messages with 4 consumers (skip it with ``--no-million``).
"""

from __future__ import annotations

import argparse
import statistics

from conq.impl.consumer_lists.workload import ConsumerSpec, run_workload


def one_run(consumers: int, messages: int, seed: int) -> float:
    publishers = 2
    result = run_workload(
        publishers=publishers,
        messages_per_publisher=messages // publishers,
        connections=[[ConsumerSpec()] for _ in range(consumers)],
        io_threads=2,
        seed=seed,
        timeout=600,
        stall_timeout=30,
    )
    if sum(result.deliveries.values()) != result.messages:
        raise AssertionError("not every message was delivered")
    return result.rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--no-million", action="store_true", help="skip the 1,000,000-message run")
    args = ap.parse_args()
    print(f"end-to-end throughput, real threads (2 publishers, 2 IO threads), {args.messages} messages per run,"
          f" median of {args.repeats} runs")
    print(f"{'consumers':>10} {'msg/s':>10}   runs")
    for consumers in (1, 4, 16):
        rates = [one_run(consumers, args.messages, seed) for seed in range(args.repeats)]
        print(f"{consumers:>10} {statistics.median(rates):>10.0f}   {', '.join(f'{r:.0f}' for r in rates)}")
    if not args.no_million:
        rate = one_run(4, 1_000_000, 99)
        print(f"1,000,000 messages, 4 consumers: {rate:.0f} msg/s ({1_000_000 / rate:.1f} s)")


if __name__ == "__main__":
    main()
