"""Stress of the consumer-lists reference with every actor of issue 16 on, on real threads.

Run:  /work/main/.venv/bin/python bench/cl_all_actors_stress.py [--messages 1000000] [--threads 16] [--seed 1]

The harness is ``conq.impl.consumer_lists.actors_workload.run_all_actors`` (its docstring lists the
actors and the checks): publishers, consumers of three priorities on an IO thread pool, one
housekeeping thread per queue expiring TTLs, management deletes and unholds, rejects and releases
by the sink, shared and assigned message groups (one queue each), consumers added and removed,
high priorities suspended and resumed.  It asserts (raises, exit 1) unless nothing was lost (every
message settled exactly once by a consumer, expired, or deleted: exactly one each), nothing was
acquired twice, no rejected message came back to its rejecter, group ownership was never violated
(``Queue.check_invariants``) and the run completed (no stall: ``--stall-timeout`` seconds without
progress fails loudly).  Prints the figures; the time is a measurement, never a verdict.
"""

from __future__ import annotations

import argparse
import sys

from conq.impl.consumer_lists.actors_workload import ActorsWorkloadError, run_all_actors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--groups", type=int, default=8, help="message groups per queue")
    ap.add_argument("--check-every", type=int, default=5000, help="deliveries between invariant checks")
    ap.add_argument("--stall-timeout", type=float, default=120.0, help="safety cap: seconds without progress")
    ap.add_argument("--timeout", type=float, default=7200.0, help="safety cap: seconds per phase")
    args = ap.parse_args()
    if args.messages < 1:
        print(f"--messages: must be >= 1, got {args.messages}", file=sys.stderr)
        return 2
    print(f"all actors, real threads: {args.messages:,} messages, {args.threads} threads, seed {args.seed}",
          flush=True)
    try:
        r = run_all_actors(args.messages, threads=args.threads, seed=args.seed, groups=args.groups,
                           check_every=args.check_every, stall_timeout=args.stall_timeout, timeout=args.timeout)
    except (ActorsWorkloadError, ValueError) as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1
    print(r.summary())
    print(f"nothing lost: settled {r.settled:,} + expired {r.expired:,} + deleted {r.deleted:,} = "
          f"{r.settled + r.expired + r.deleted:,} of {r.messages:,}, each exactly once")
    print(f"nothing acquired twice, no redelivery to a rejecter, group ownership never violated "
          f"({r.invariant_checks} invariant checks), no stall: completed in {r.seconds:.1f} s "
          f"({r.rate:,.0f} msg/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
