"""The reference implementation under injected faults, and the schedules engine's seeds at scale.

Run (one command each):

  /work/main/.venv/bin/python bench/impl_faults.py                      # 1,000,000 messages with faults
  /work/main/.venv/bin/python bench/impl_faults.py --messages 200000 --compare
  /work/main/.venv/bin/python bench/impl_faults.py --schedules 10000 --jobs 2

Fault run: real threads, ``--publishers`` publisher threads, ``--connections`` connections (one
acquiring consumer each: priorities 10/5/1, every third with a credit window; two browsers), as
many IO threads (``--io-threads``, default 16), flow toggling, and every fault of
``conq.impl.consumer_lists.workload.Faults``: callback exceptions (``--error-rate``), consumers
closed mid-delivery by their callback (``--close-rate``) and by a churn thread (``--closes``), credit
storms (``--storms``), and three poison messages.  The workload checks everything (nothing lost:
settled once or, for a poison message, dead-lettered; nothing acquired twice; no stall; every
failure reported with the policy's outcome; nothing left held).  Printed: the counts and the
throughput; ``--compare`` also runs the same shape without faults.  Seconds are safety caps only.

Schedules run: PCT seeds ``--start`` .. ``--start + --schedules - 1`` (``workload.run_schedule``: the
schedules engine's three shapes, PCT with lock-release switch points) on the unmutated
reference, split over ``--jobs`` processes; prints every failing seed and the wall time.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time

from conq.impl.consumer_lists.workload import ConsumerSpec, Faults, run_schedule, run_workload


def fault_connections(n: int) -> list[list[ConsumerSpec]]:
    prios = [10, 5, 1]
    conns = [[ConsumerSpec(priority=prios[i % 3], credit_window=None if i % 3 else 8 + i)] for i in range(n)]
    conns[0].append(ConsumerSpec(acquires=False))
    conns[-1].append(ConsumerSpec(acquires=False, credit_window=16))
    return conns


def fault_run(args: argparse.Namespace, faults: Faults | None) -> None:
    per_publisher = args.messages // args.publishers
    total = per_publisher * args.publishers + args.browse
    label = "with faults" if faults else "no faults  "
    r = run_workload(publishers=args.publishers, messages_per_publisher=per_publisher,
                     connections=fault_connections(args.connections), io_threads=args.io_threads,
                     flow_toggles=args.toggles, browse_phase_messages=args.browse, seed=args.seed, batch=64,
                     timeout=args.cap, stall_timeout=60, faults=faults)
    assert r.messages == total and r.settled + len(r.dead_lettered) == total
    print(f"{label}: {total:,} messages, {args.connections} connections, {args.io_threads} IO threads: "
          f"settled {r.settled:,}, dead-lettered {r.dead_lettered}, lost 0, acquired twice 0; "
          f"{r.elapsed:.1f} s, {r.rate:,.0f} msg/s")
    if faults:
        print(f"  injected callback failures {r.injected:,}, reported {r.reported:,}; redeliveries {r.redeliveries:,}; "
              f"consumers closed mid-run {r.closes}; credit storms {r.storms}; flow toggles {args.toggles}; "
              f"browsed {sum(r.browsed.values()):,}")


def _schedule_slice(bounds: tuple[int, int]) -> list[tuple[int, str]]:
    failed = []
    for seed in range(*bounds):
        try:
            run_schedule(seed)
        except Exception as exc:  # a failing seed is a finding: report it, go on
            cause = exc.__cause__ or exc
            failed.append((seed, f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"))
    return failed


def schedules_run(args: argparse.Namespace) -> int:
    start, n, jobs = args.start, args.schedules, max(1, args.jobs)
    step = -(-n // jobs)
    slices = [(start + k * step, min(start + n, start + (k + 1) * step)) for k in range(jobs)]
    t0 = time.perf_counter()
    if jobs == 1:
        results = [_schedule_slice(slices[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            results = pool.map(_schedule_slice, slices)
    elapsed = time.perf_counter() - t0
    failed = sorted(f for part in results for f in part)
    for seed, why in failed:
        print(f"seed {seed}: {why}")
    print(f"schedules engine seeds {start}..{start + n - 1} on the reference: {n:,} seeds, {len(failed)} failures, "
          f"{elapsed:.1f} s wall ({jobs} process{'es' if jobs > 1 else ''}, {n / elapsed:.0f} seeds/s)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--publishers", type=int, default=4)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--io-threads", type=int, default=16)
    ap.add_argument("--error-rate", type=float, default=1e-3, help="P(callback raises) per delivery")
    ap.add_argument("--close-rate", type=float, default=1e-5, help="P(callback closes its consumer) per delivery")
    ap.add_argument("--closes", type=int, default=100, help="consumers closed by the churn thread")
    ap.add_argument("--storms", type=int, default=200, help="credit storms")
    ap.add_argument("--toggles", type=int, default=2000, help="flow toggles")
    ap.add_argument("--browse", type=int, default=1000, help="browse-phase messages")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--cap", type=float, default=1800.0, help="safety cap in seconds (fails loudly)")
    ap.add_argument("--compare", action="store_true", help="also run the same shape without faults")
    ap.add_argument("--schedules", type=int, default=0, help="run this many schedules-engine seeds instead")
    ap.add_argument("--start", type=int, default=0, help="first seed of --schedules")
    ap.add_argument("--jobs", type=int, default=1, help="processes for --schedules")
    args = ap.parse_args(argv)
    if args.schedules:
        return schedules_run(args)
    total = args.messages // args.publishers * args.publishers
    poison = (1 + args.browse, args.browse + total // 2, args.browse + total)
    faults = Faults(callback_error_rate=args.error_rate, close_rate=args.close_rate, closes=args.closes,
                    credit_storms=args.storms, storm_size=32, poison=poison)
    fault_run(args, faults)
    if args.compare:
        fault_run(args, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
