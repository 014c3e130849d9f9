"""Push-consumer throughput of the thin client: FIFO vs standard consumption, broker in-process.

Run:  /work/main/.venv/bin/python bench/oc_consume_throughput.py [--repeats 5] [--messages 100000] [--tcp]

Each run (``conq.impl.ordered_consumption.workload.run_throughput``) fills a 16-queue topic with
``--messages`` messages, then one push consumer with 16 consumption threads consumes and acks them
all (no faults, a listener that accepts everything); the rate is messages / wall-clock second from
the consumer's start to the last ack.  FIFO: a FIFO consumer group, messages over 64 message groups
(the broker hands out one message per group at a time; the client's process-queue lock consumes one
message per queue at a time).  Standard: a standard group, no groups.  Reported: the median of
``--repeats`` runs per mode, every run, and the FIFO / standard ratio.  ``--tcp`` adds the same two
modes with the consumer talking to the broker through its TCP server (``server.TcpChannel`` to
``server.BrokerServer`` on 127.0.0.1) instead of calling it in-process, and the TCP / in-process
ratios (the cost of the network face), all in the same interleaved runs.
"""

from __future__ import annotations

import argparse
import statistics

from conq.impl.ordered_consumption.workload import run_throughput


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--tcp", action="store_true", help="also measure through the TCP server")
    args = ap.parse_args()
    transports = ("inproc", "tcp") if args.tcp else ("inproc",)
    print(f"push consumer, 16 queues, 16 consumption threads, {args.messages:,} messages per run, "
          f"median of {args.repeats} runs (runs interleaved FIFO/standard{'/in-process/TCP' if args.tcp else ''})")
    rates: dict[tuple[str, str], list[float]] = {(m, t): [] for t in transports for m in ("fifo", "standard")}
    for _ in range(args.repeats):
        for mode, transport in rates:
            rates[(mode, transport)].append(run_throughput(mode, messages=args.messages, transport=transport))
    med = {k: statistics.median(r) for k, r in rates.items()}
    print(f"{'mode':>10} {'transport':>10} {'msg/s':>10}   runs")
    for transport in transports:
        for mode in ("standard", "fifo"):
            rs = rates[(mode, transport)]
            print(f"{mode:>10} {transport:>10} {med[(mode, transport)]:>10.0f}   {', '.join(f'{r:.0f}' for r in rs)}")
    for transport in transports:
        print(f"FIFO / standard ({transport}) = {med[('fifo', transport)] / med[('standard', transport)]:.2f}")
    if args.tcp:
        for mode in ("standard", "fifo"):
            print(f"TCP / in-process ({mode}) = {med[(mode, 'tcp')] / med[(mode, 'inproc')]:.2f}")


if __name__ == "__main__":
    main()
