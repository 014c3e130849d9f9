"""Explorer throughput on the consumer-lists model.

Runs a ladder of ever larger configurations of the reference behaviour and reports, for each, the
distinct states, transitions, search time, graph-analysis (liveness) time and distinct states per
second of the search; then names the largest configuration whose whole check (search + analysis)
finished within the time limit.  One core, no symmetry reduction unless --symmetry.

    /work/main/.venv/bin/python bench/explorer_throughput.py [--limit 60] [--no-liveness] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model

# smallest first; every rung is the reference behaviour with larger bounds
LADDER = [
    ("small", {}),
    ("reference", {"messages": 1}),
    ("reference", {"messages": 2, "env_budget": 0}),
    ("reference", {"messages": 2}),
    ("reference", {"env_budget": 0}),
    ("reference", {}),
    ("reference", {"env_budget": 2}),
]


def run(limit: float, liveness: bool, symmetry: bool, quick: bool) -> int:
    rows = []
    best = None
    ladder = LADDER[:3] if quick else LADDER
    for cname, ov in ladder:
        m = load_model("consumer-lists", cname, ov)
        t0 = time.perf_counter()
        ex = explore(m, max_seconds=limit, liveness=liveness, symmetry=symmetry)
        wall = time.perf_counter() - t0
        row = {
            "config": cname,
            "overrides": ov,
            "states": ex.states,
            "transitions": ex.transitions,
            "complete": ex.complete,
            "search_s": round(ex.search_seconds, 2),
            "analysis_s": round(ex.analysis_seconds, 2),
            "total_s": round(wall, 2),
            "states_per_s": round(ex.states / ex.search_seconds) if ex.search_seconds else None,
            "ok": ex.ok,
        }
        rows.append(row)
        print(
            f"{cname:10} {json.dumps(ov):32} states={ex.states:>9,} transitions={ex.transitions:>10,} "
            f"search={ex.search_seconds:7.2f}s analysis={ex.analysis_seconds:7.2f}s "
            f"rate={row['states_per_s'] or 0:>8,}/s complete={ex.complete} ok={ex.ok}",
            flush=True,
        )
        if ex.complete and wall <= limit:
            best = row
        else:
            break
    print()
    print(f"python {platform.python_version()} on {platform.machine()}, liveness={'on' if liveness else 'off'}, "
          f"symmetry={'on' if symmetry else 'off'}, limit {limit:.0f}s")
    if best:
        print(
            f"largest configuration within {limit:.0f}s: {best['config']} {json.dumps(best['overrides'])}: "
            f"{best['states']:,} states in {best['total_s']}s (search {best['search_s']}s, analysis {best['analysis_s']}s), "
            f"{best['states_per_s']:,} distinct states/s in the search"
        )
    print(json.dumps(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=60.0, help="seconds a whole check may take")
    ap.add_argument("--no-liveness", action="store_true", help="safety properties only")
    ap.add_argument("--symmetry", action="store_true", help="symmetry reduction (liveness is then skipped)")
    ap.add_argument("--quick", action="store_true", help="only the three smallest rungs")
    a = ap.parse_args(argv)
    return run(a.limit, not a.no_liveness, a.symmetry, a.quick)


if __name__ == "__main__":
    sys.exit(main())
