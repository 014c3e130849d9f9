"""PCT against the real-thread stress engines on the consumer-lists mutant catalogue (issue 32).

One command:  .venv/bin/python bench/cl_pct_vs_stress.py [--scale S] [--mutant NAME ...] [--json]

Runs the kill matrix of the engines ``pct`` (probabilistic concurrency testing over
``impl/scheduling.py``: conformance/consumer_lists/pct.py), ``stress`` and ``stress-actors`` (real
threads, random timing: ``mutants.SOAK_ENGINES``) on every mutant of the catalogue at the same
budget scale (each engine's own count times ``--scale``: PCT runs, stress messages), and prints them
side by side with what each engine spent, the kills per engine, and the kills among the catalogue's
interleaving bugs (``INTERLEAVING``: the mutants whose bug needs a particular order of two threads'
steps).  The stress engines' verdicts depend on the machine's timing (that is the point); PCT's do not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conq.conformance.consumer_lists import mutants  # noqa: E402
from conq.conformance.mutation import Budget  # noqa: E402

ENGINES = ["pct", "stress", "stress-actors"]
#: the catalogue's bugs that need two threads' steps in a particular order to show
INTERLEAVING = ("look-then-unnotify", "unnotify-after-scan", "desire-queue-before-flag", "priority-reads-lists",
                "double-acquire", "node-list-unlinks-tail", "node-list-size-twice", "unschedule-after-release",
                "acquire-deleted", "delete-steals-unsent", "unhold-drops-delete", "delete-no-notify")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--mutant", action="append", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    matrix = mutants.SOAK_CATALOGUE.run(args.mutant, ENGINES, budget=Budget(scale=args.scale))
    secs = time.perf_counter() - t0
    rows = {m: {e: {"killed": d.killed, "spent": d.spent, "capped": d.capped} for e, d in row.items()}
            for m, row in matrix.items()}
    kills = {e: sum(1 for m, r in matrix.items() if m != "(reference)" and r[e].killed) for e in ENGINES}
    inter = {e: sum(1 for m in INTERLEAVING if m in matrix and matrix[m][e].killed) for e in ENGINES}
    n_inter = sum(1 for m in INTERLEAVING if m in matrix)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"scale": args.scale, "matrix": rows, "kills": kills, "interleaving_kills": inter,
                          "interleaving": n_inter, "mutants": len(matrix) - 1, "seconds": round(secs, 1),
                          "load": load}, indent=1))
        return 0
    print(f"consumer-lists kill matrix, scale {args.scale} (load average {load:.1f}, {secs:.0f} s)")
    print(f"{'mutant':32} " + " ".join(f"{e:>16}" for e in ENGINES))
    for m, row in matrix.items():
        cells = [("passes" if m == "(reference)" and not d.killed else d.spent if d.killed else "-") for d in row.values()]
        print(f"{m + (' *' if m in INTERLEAVING else ''):32} " + " ".join(f"{c:>16}" for c in cells))
    print(f"{'killed':32} " + " ".join(f"{kills[e]:>16}" for e in ENGINES) + f"   of {len(matrix) - 1}")
    print(f"{'killed, interleaving bugs (*)':32} " + " ".join(f"{inter[e]:>16}" for e in ENGINES) + f"   of {n_inter}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
