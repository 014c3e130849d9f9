"""Model mutation coverage (issue 31), the full run: every mutant of every model's step code on every
suite configuration of its manifest (the counterpart of the small run ``conq run`` makes on each
model's smallest configuration).  Prints the score table (mutants, killed, count-only, argued,
equivalent, crashed, score) and writes each model's report to reports/model-mutation-<model>.json.

Budgets are counts (a mutant's search stops at four times the model's states on that configuration);
the wall clock only bounds it as a safety net.  Two worker processes by default.

Run:  .venv/bin/python bench/model_mutation.py [MODEL ...] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from conq.conformance.output_folder import OutputFolder, OutputRefused
from conq.model.engines.registry import MODELS
from conq.mutate import mutate_model, report_rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="reports")
    args = ap.parse_args()
    # the one way conq writes an output folder (conformance/output_folder.py): a foreign file there, or
    # another run writing there, is refused before any work; the reports join what conq wrote before
    folder = OutputFolder(args.out, command="bench/model_mutation.py", replace=False)
    try:
        folder.check()
        folder.open()
    except OutputRefused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = []
    with folder:
        for model in args.models:
            t0 = time.perf_counter()
            rep = mutate_model(model, workers=args.workers, progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
            name = f"model-mutation-{model}.json"
            folder.write(name, json.dumps(rep.to_json(), indent=1, default=str) + "\n")
            rows.append((model, rep, time.perf_counter() - t0, folder.final / name))
            for r in report_rows(rep):
                if r["verdict"] in ("count-only", "crashed", "timeout"):
                    print(f"  {r['verdict']:10s} {r['id']} {r['location']} {r['operator']}: {r['detail']}")
    print(f"load average {os.getloadavg()[0]:.1f} (1 min)")
    print(f"{'model':22s} {'configs':>7s} {'mutants':>7s} {'killed':>6s} {'count-only':>10s} {'argued':>6s} "
          f"{'equivalent':>10s} {'crashed':>7s} {'score':>6s} {'seconds':>8s}")
    for model, rep, secs, path in rows:
        j = rep.to_json()
        score = "-" if j["score"] is None else f"{100 * j['score']:.1f}%"
        print(f"{model:22s} {len(j['configs']):7d} {j['mutants']:7d} {j['killed']:6d} {j['count_only']:10d} "
              f"{j['argued']:6d} {j['equivalent']:10d} {j['crashed']:7d} {score:>6s} {secs:8.0f}  {path}")
    return 0 if all(rep.ok for _, rep, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
