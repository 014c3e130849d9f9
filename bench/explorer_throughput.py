"""Explorer throughput, old vs new, side by side in one run (issue 18).

Every measurement runs in a fresh subprocess (so its peak resident memory is its own) on one
configuration of a model (default: the consumer-lists reference) and reports distinct states,
transitions, search seconds, distinct states per second, and bytes per state (the peak
resident memory above the process's memory just before the search, divided by the states).
The rows:

* ``old``: the explorer before issue 18 (``model/engines/explorer.py`` at ``--baseline``, default
  ``a27f5be``, read from git history into a temporary file: needs a git checkout);
* ``tuples``: the default mode on the model's states as tuples (``CONQ_CL_PACKED=0``: no packed
  view), its successor function the consumer-lists tuple fast path (model/consumer_lists/fast.py);
* ``new``: the default mode (whole states, the compact graph) on the model's packed view where it
  has one (:meth:`Model.packed`, model/engines/packing.py: states as integers, successors and checks
  memoised on the fields they read);
* ``symmetry``: the default mode with symmetry reduction (``Model.canonical``: one state per class
  of renamings of interchangeable parts; the reference has no two consumers alike, so its counts
  are unchanged: try ``--config same-priority``); it searches tuples (canonical forms have no
  packed view);
* ``fingerprints``: 64-bit fingerprints and a parent map (on the packed view: a packing of at most
  64 bits is its own exact fingerprint);
* ``workers=1`` / ``workers=2``: the partitioned search over 1 and 2 worker processes (the ratio
  of the two is the parallel speed-up, printed with the ratio of two workers to ``new``; the two
  rows run in alternation and the ratio of each pair is printed too; both run on this machine's cores, shared with whatever else runs on it; their bytes/state is only
  indicative: the largest worker's peak less the coordinator's memory before the search);

then, unless --no-liveness, the whole check with liveness, old and new: search seconds beside
liveness-analysis seconds.  With --repeat N each row is the median of N runs.

``--big`` (opt-in, never in CI: about ten million states, many minutes) runs only the fingerprint
mode on :data:`BIG` and prints its peak resident memory and bytes per state (peak over states, and
above the memory before the search), the issue-18 goal being a 10,000,000-state run within 4 GB.

    /work/main/.venv/bin/python bench/explorer_throughput.py [--model consumer-lists] [--config reference]
        [--set KEY=VALUE ...] [--repeat 3] [--no-liveness] [--quick] [--json]

--quick uses the ``small`` configuration (seconds, for a smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the commit whose explorer is the ``old`` row (the last one before issue 18's changes)
BASELINE = "a27f5be"
#: the configuration of ``--big``: the consumer-lists reference with an environment budget of 2
#: (5,535,959 states, depth 44, with budget 2 alone) and messages that may arrive held: 21,219,019
#: states, 113,414,644 transitions, depth 48, no violation.  Fingerprint mode on the packed view
#: (66 bits a state, integers kept two levels at a time, no pickling): peak resident 801 MB = 40
#: bytes a state, search 837.6 s at load 2-5 (2026-12-02).  Before the packed view: 1,431 MB = 71
#: bytes a state, 1,115 CPU seconds (2026-12-01); before the levels were pickled, a run was at
#: 2.56 GB when stopped unfinished.
BIG = ("consumer-lists", "reference", {"env_budget": 2, "held": True})
_BASELINE_FILE: list = []


def _baseline_file() -> Path:
    """The baseline explorer, read from git history once per run into a temporary file (removed at
    exit): the bench compares against history instead of a copy of the old code kept in the tree."""
    if not _BASELINE_FILE:
        import atexit
        import subprocess
        import tempfile

        try:
            src = subprocess.run(["git", "-C", str(HERE.parent), "show", f"{BASELINE}:model/engines/explorer.py"],
                                 capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"error: the 'old' row needs git history with commit {BASELINE} ({e}); "
                     "run from a git checkout of conq, or pass --baseline REV")
        fd, name = tempfile.mkstemp(prefix="conq-explorer-baseline-", suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(src)
        atexit.register(os.unlink, name)
        _BASELINE_FILE.append(Path(name))
    return _BASELINE_FILE[0]

_CHILD = r"""
import json, os, resource, sys, time, importlib.util
sys.path.insert(0, {here!r})
mode, model, config, overrides, liveness = {args!r}
if mode == "tuples":  # the default mode without the packed view (model/engines/packing.py)
    os.environ["CONQ_CL_PACKED"] = "0"
    mode = "new"
from conq.model.engines.registry import load_model
from conq.model.engines.explorer import rss_bytes
m = load_model(model, config, overrides)
if mode == "old":
    spec = importlib.util.spec_from_file_location("explorer_v0", {baseline!r})
    mod = importlib.util.module_from_spec(spec); sys.modules["explorer_v0"] = mod; spec.loader.exec_module(mod)
    run = lambda: mod.explore(m, liveness=liveness)
else:
    from conq.model.engines.explorer import explore
    kw = dict(new={{}}, fingerprints=dict(fingerprints=True), symmetry=dict(symmetry=True))[mode] if not mode.startswith("workers") else {{}}
    if mode.startswith("workers"):
        from conq.model.engines.parallel import explore_parallel
        run = lambda: explore_parallel(m, int(mode.split("=")[1]), None, False, None, [], None)
    else:
        run = lambda: explore(m, liveness=liveness, **kw)
m.property_list()
import numpy, scipy.sparse.csgraph, conq.model.engines.fpsearch, conq.model.engines.parallel, conq.model.engines.liveness  # imports are not the search's cost
before = rss_bytes()
t0 = time.perf_counter()
ex = run()
wall = time.perf_counter() - t0
peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024  # workers: the largest one
live = [v.status for v in ex.verdicts if v.prop.kind.value == "leads-to"]
print(json.dumps(dict(states=ex.states, transitions=ex.transitions, depth=ex.depth, complete=ex.complete,
                      search_s=ex.search_seconds, analysis_s=ex.analysis_seconds, wall_s=wall,
                      bytes_per_state=(peak - before) / max(ex.states, 1), peak_bytes=peak,
                      violated=sorted(v.prop.name for v in ex.verdicts if v.status == "violated"),
                      liveness=live)))
"""


def measure(mode: str, model: str, config: str, overrides: dict, liveness: bool) -> dict:
    code = _CHILD.format(here=str(HERE), baseline=str(_baseline_file()), args=(mode, model, config, overrides, liveness))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{mode}: failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def median_of(runs: list[dict]) -> dict:
    out = dict(runs[0])
    for key in ("search_s", "analysis_s", "wall_s", "bytes_per_state"):
        out[key] = statistics.median(r[key] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="consumer-lists")
    ap.add_argument("--config", default="reference")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE configuration override (JSON value)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row (the median is shown; 1 for a quick look)")
    ap.add_argument("--no-liveness", action="store_true", help="safety rows only (no liveness comparison)")
    ap.add_argument("--quick", action="store_true", help="the small configuration")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--baseline", default=None, help=f"git revision whose explorer is the 'old' row (default {BASELINE})")
    ap.add_argument("--modes", default=None, help="comma-separated subset of the rows (default all); 'old' is the ratio base when present")
    ap.add_argument("--big", action="store_true", help="only the ~10M-state fingerprint row on BIG (opt-in: many minutes)")
    a = ap.parse_args(argv)
    if a.big:
        model, config, overrides = BIG
        print(f"{model} / {config} {json.dumps(overrides)}  fingerprints  (python {platform.python_version()}, "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})", flush=True)
        r = measure("fingerprints", model, config, overrides, False)
        print(f"{r['states']:,} states, {r['transitions']:,} transitions, complete {r['complete']}, search {r['search_s']:.1f} s "
              f"({r['states'] / r['search_s']:,.0f} states/s); peak resident {r['peak_bytes'] / 2**20:,.0f} MB = "
              f"{r['peak_bytes'] / r['states']:.0f} bytes/state ({r['bytes_per_state']:.0f} above the memory before the "
              f"search); within 4 GB: {r['peak_bytes'] <= 4 * 2**30}")
        if a.json:
            print(json.dumps(r))
        return 0
    if a.baseline:
        globals()["BASELINE"] = a.baseline
    config = "small" if a.quick else a.config
    overrides = {k: json.loads(v) for k, v in (s.split("=", 1) for s in a.set)}
    rows: dict[str, dict] = {}
    modes = ["old", "tuples", "new", "symmetry", "fingerprints", "workers=1", "workers=2"]
    if a.modes:
        unknown = sorted(set(a.modes.split(",")) - set(modes))
        if unknown:
            ap.error(f"--modes: unknown row(s) {', '.join(unknown)}; the rows are {', '.join(modes)}")
        modes = [m for m in modes if m in a.modes.split(",")]
    print(f"{a.model} / {config} {json.dumps(overrides) if overrides else ''}  "
          f"(python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, median of {a.repeat})")
    print(f"{'mode':14} {'states':>10} {'transitions':>12} {'search s':>9} {'states/s':>10} {'bytes/state':>12}  vs old")
    # The two worker rows are measured in alternation (1, 2, 1, 2, ...): on a noisy machine the
    # speed drifts over a minute, and the ratio of runs taken side by side is the one to trust.
    paired: dict[str, list] = {"workers=1": [], "workers=2": []}
    for mode in modes:
        if mode in paired:
            if not paired[mode]:
                for _ in range(a.repeat):
                    for m in paired:
                        if m in modes:
                            paired[m].append(measure(m, a.model, config, overrides, False))
            r = median_of(paired[mode])
        else:
            r = median_of([measure(mode, a.model, config, overrides, False) for _ in range(a.repeat)])
        r["states_per_s"] = r["states"] / r["search_s"] if r["search_s"] else 0.0
        rows[mode] = r
        base = rows.get("old", rows[modes[0]])
        ratio = r["states_per_s"] / base["states_per_s"] if base["states_per_s"] else 0.0
        print(f"{mode:14} {r['states']:>10,} {r['transitions']:>12,} {r['search_s']:>9.2f} {r['states_per_s']:>10,.0f} "
              f"{r['bytes_per_state']:>12,.0f}  {ratio:.2f}x", flush=True)
    same = {(r["states"], r["transitions"], tuple(r["violated"])) for k, r in rows.items() if k != "symmetry"}
    print(f"counts and safety verdicts identical in every mode (symmetry aside): {len(same) == 1}")
    if {"symmetry", "new"} <= rows.keys():
        print(f"symmetry: {rows['symmetry']['states']:,} of {rows['new']['states']:,} states, "
              f"same safety verdicts: {rows['symmetry']['violated'] == rows['new']['violated']}")
    if {"workers=1", "workers=2"} <= rows.keys():
        w1, w2 = rows["workers=1"]["search_s"], rows["workers=2"]["search_s"]
        pairs = sorted(x["search_s"] / y["search_s"] for x, y in zip(paired["workers=1"], paired["workers=2"]))
        vs_new = f"; 2 workers vs new (one process): {rows['new']['search_s'] / w2:.2f}x" if "new" in rows else ""
        print(f"2 workers vs 1 worker: {w1 / w2:.2f}x (medians); run by run {', '.join(f'{p:.2f}x' for p in pairs)}{vs_new}")
    if not a.no_liveness and not a.modes:
        print(f"\n{'with liveness':14} {'search s':>9} {'liveness s':>11} {'liveness/search':>16}  verdicts")
        for mode in ("old", "tuples", "new"):
            r = median_of([measure(mode, a.model, config, overrides, True) for _ in range(a.repeat)])
            rows[f"{mode}+liveness"] = r
            print(f"{mode:14} {r['search_s']:>9.2f} {r['analysis_s']:>11.2f} {r['analysis_s'] / r['search_s']:>16.2f}  "
                  f"{r['liveness']}", flush=True)
        print("liveness verdicts identical: "
              f"{rows['old+liveness']['liveness'] == rows['new+liveness']['liveness'] and rows['old+liveness']['violated'] == rows['new+liveness']['violated']}")
    if a.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
