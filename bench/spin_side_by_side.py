"""conq's explorer beside SPIN on the same state space, in one run (issue 36).

SPIN (Debian's ``spin``) checks a Promela translation of the consumer-lists model
(bench/spin/gen_pml.py: the same states and transitions, the nine safety properties as assertions),
compiled as in issue 36's measurements (``spin -a``, ``gcc -O2 -DSAFETY -DNOREDUCE``, ``./pan -c0``:
exhaustive, no partial-order reduction, every error counted without stopping).  conq runs its
explorer on the same configuration, safety only (what ``conq check --no-liveness`` runs), in a
fresh process per run.  The rows, run in alternation (rep 1: every row, rep 2: every row, ...) so
that each sees the same spread of machine load:

* ``spin``: pan's CPU seconds (user + system of the pan process: its whole run) and peak resident
  memory; compiling (``spin -a`` and gcc) is measured once and printed apart;
* ``conq``: the default search (whole states kept, ids and the BFS tree; the reference packs into
  62 bits, one machine word), ``conq fp``: fingerprint mode (fingerprints and the parent map only;
  the search ``--big`` is run in); each with the CPU seconds of the search itself (the process
  clock around ``explore``: model loading and interpreter start-up excluded, as SPIN's compile is),
  the whole process's CPU seconds, and its peak resident memory;
* ``before``: the same search by the explorer before issue 36 (``model/`` at ``--baseline``, read
  from git history into a temporary folder), for "memory no worse than today's" (skipped for
  ``--big`` unless ``--before``: about ten minutes a run).

The bench first checks that SPIN stored as many states as conq found, made one more transition
(SPIN counts its initial state as one) and found errors exactly when conq found a violated safety
property; where they differ it says so and compares no time (exit 1).  Without ``spin`` or ``gcc``
on PATH the SPIN row is skipped, saying so.  It prints, per row, the median of ``--repeat`` runs
and the load average before each; the ratio conq / SPIN in states per CPU second is given as the
ratio of the medians and run by run (each conq run against the SPIN run of the same repetition).

    .venv/bin/python bench/spin_side_by_side.py [--config reference] [--set KEY=JSON ...]
        [--repeat 3] [--big] [--before] [--json]

``--big`` (opt-in, minutes a run: run it with ``nice`` when the machine is quiet) checks the
configuration of bench/explorer_throughput.py's ``--big``: the reference with an environment budget
of 2 and messages that may arrive held, 21,219,019 states, 66 bits a state.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: the last commit before issue 36's explorer (the ``before`` row)
BASELINE = "bff2ee8"
#: bench/explorer_throughput.py's --big configuration
BIG = ("reference", {"env_budget": 2, "held": True})

_CONQ_CHILD = r"""
import json, sys, time
mode, config, overrides, old = json.loads(sys.argv[1])
if old:  # the explorer of another revision: its model/ tree stands for conq.model
    import conq.model
    conq.model.__path__[:] = [old]
import numpy, scipy.sparse.csgraph  # (imports are not the search's cost)
from conq.model.engines.registry import load_model
from conq.model.engines.explorer import explore
m = load_model("consumer-lists", config, overrides)
m.property_list()
c0, w0 = time.process_time(), time.perf_counter()
ex = explore(m, liveness=False, fingerprints=(mode == "fp"))
c1, w1 = time.process_time(), time.perf_counter()
print(json.dumps(dict(states=ex.states, transitions=ex.transitions, depth=ex.depth, complete=ex.complete,
                      violated=sorted(v.prop.name for v in ex.verdicts if v.status == "violated"
                                      and v.prop.kind.value != "sometimes"),
                      search_cpu=c1 - c0, search_wall=w1 - w0)))
"""


def _run(cmd: list[str], cwd: Path | None = None) -> tuple[str, str, float, int, int]:
    """Run ``cmd`` to its end: ``(stdout, stderr, CPU seconds, peak resident bytes, exit code)`` of
    that very process (``os.wait4``'s resource usage, not the sum over this bench's children)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        _pid, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (out.read().decode(), err.read().decode(), ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024,
                p.returncode)


def conq_row(mode: str, config: str, overrides: dict, old: str | None) -> dict:
    arg = json.dumps([mode, config, overrides, old])
    out, err, cpu, rss, rc = _run([sys.executable, "-c", _CONQ_CHILD, arg], cwd=ROOT)
    if rc != 0:
        raise SystemExit(f"conq {mode} failed (exit {rc}):\n{err}")
    r = json.loads(out.strip().splitlines()[-1])
    r.update(process_cpu=cpu, peak_bytes=rss)
    return r


def spin_missing() -> str:
    for tool, pkg in (("spin", "spin"), ("gcc", "gcc")):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (Debian: apt-get install -y {pkg})"
    return ""


def build_spin(work: Path, config: str, overrides: dict) -> dict:
    """Generate, translate and compile; the CPU seconds of ``spin -a`` and gcc."""
    work.mkdir(parents=True, exist_ok=True)
    sets = [x for k, v in overrides.items() for x in ("--set", f"{k}={json.dumps(v)}")]
    out, err, _cpu, _rss, rc = _run([sys.executable, str(HERE / "spin" / "gen_pml.py"), config, *sets], cwd=ROOT)
    if rc != 0:
        raise SystemExit(f"the Promela generator refused {config} {overrides}: {err.strip()}")
    (work / "model.pml").write_text(out)
    compile_cpu = 0.0
    for cmd in (["spin", "-a", "model.pml"], ["gcc", "-O2", "-DSAFETY", "-DNOREDUCE", "-o", "pan", "pan.c"]):
        _o, e, cpu, _r, rc = _run(cmd, cwd=work)
        if rc != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{e}")
        compile_cpu += cpu
    return {"compile_cpu": compile_cpu}


def spin_row(work: Path, wexp: int) -> dict:
    out, _err, cpu, rss, rc = _run(["./pan", "-m100000", "-c0", f"-w{wexp}"], cwd=work)

    def g(pat: str, conv=int):
        m = re.search(pat, out)
        return conv(m.group(1)) if m else None

    if "max search depth too small" in out:
        raise SystemExit("pan: max search depth too small (raise -m in spin_row)")
    return dict(states=g(r"(\d+) states, stored"), transitions=g(r"([\d.e+]+) transitions", str),
                errors=g(r"errors: (\d+)"), process_cpu=cpu, search_cpu=cpu, peak_bytes=rss, rc=rc)


def spin_count_is(printed: str, n: int) -> bool:
    """Whether pan's printed count is ``n``: pan prints large counts with ``%g`` (``1.1341464e+08``,
    8 significant digits), so ``n`` is compared at the precision printed."""
    if "e" not in printed:
        return int(printed) == n
    digits = len(printed.split("e")[0].replace(".", ""))
    return float(f"{n:.{digits - 1}e}") == float(printed)


def median_row(runs: list[dict]) -> dict:
    out = dict(runs[0])
    for k in ("search_cpu", "process_cpu", "peak_bytes", "search_wall"):
        if k in out:
            out[k] = statistics.median(r[k] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="reference")
    ap.add_argument("--set", action="append", default=[], help="KEY=JSON configuration override")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row (medians are shown)")
    ap.add_argument("--big", action="store_true", help="the 21M-state --big configuration (minutes a run)")
    ap.add_argument("--before", action="store_true", help="with --big: the 'before' row too (about ten minutes a run)")
    ap.add_argument("--baseline", default=BASELINE, help=f"git revision of the 'before' row (default {BASELINE})")
    ap.add_argument("--rows", default=None, help="comma-separated subset of spin,conq,conq-fp,before")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat: at least 1")
    config, overrides = BIG if a.big else (a.config, {k: json.loads(v) for k, v in (s.split("=", 1) for s in a.set)})
    rows = ["spin", "conq", "conq-fp", "before"] if not a.big else ["spin", "conq-fp"] + (["before"] if a.before else [])
    if a.rows:
        unknown = set(a.rows.split(",")) - {"spin", "conq", "conq-fp", "before"}
        if unknown:
            ap.error(f"--rows: unknown {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r in a.rows.split(",")]
    skipped = spin_missing() if "spin" in rows else ""
    if skipped:
        rows.remove("spin")
    work = Path(tempfile.mkdtemp(prefix="conq-spin-"))
    old = None
    try:
        built = build_spin(work, config, overrides) if "spin" in rows else {}
        if "before" in rows:
            tree = work / "before"
            tree.mkdir()
            try:
                tar = subprocess.run(["git", "-C", str(ROOT), "archive", a.baseline, "model"], capture_output=True, check=True)
            except (OSError, subprocess.CalledProcessError) as e:
                raise SystemExit(f"the 'before' row needs git history with {a.baseline} ({e}); pass --rows without it")
            subprocess.run(["tar", "-x", "-C", str(tree)], input=tar.stdout, check=True)
            old = str(tree / "model")
        print(f"consumer-lists / {config} {json.dumps(overrides) if overrides else ''}  (python {platform.python_version()}, "
              f"{os.cpu_count()} cores, median of {a.repeat}; SPIN: "
              f"{'pan -c0, gcc -O2 -DSAFETY -DNOREDUCE' if not skipped else 'skipped: ' + skipped})", flush=True)
        wexp = 24 if a.big else 20
        runs: dict[str, list] = {r: [] for r in rows}
        loads: list[str] = []
        for rep in range(a.repeat):
            for r in rows:
                la = os.getloadavg()[0]
                if r == "spin":
                    res = spin_row(work, wexp)
                else:
                    res = conq_row("fp" if r == "conq-fp" or (r == "before" and a.big) else "default", config, overrides,
                                   old if r == "before" else None)
                res["load"] = la
                runs[r].append(res)
                loads.append(f"{la:.1f}")
                print(f"  rep {rep + 1} {r:8} states {res['states']:,} search CPU {res['search_cpu']:.2f} s "
                      f"peak {res['peak_bytes'] / 2**20:,.0f} MB (load {la:.1f})", file=sys.stderr, flush=True)
        conq_like = [r for r in rows if r != "spin"]
        ref = runs[conq_like[0]][0] if conq_like else None
        agree = True
        for r in conq_like:
            x = runs[r][0]
            if (x["states"], x["transitions"], x["violated"]) != (ref["states"], ref["transitions"], ref["violated"]):
                print(f"counts differ: {r} {x['states']:,}/{x['transitions']:,} {x['violated']} vs {conq_like[0]} "
                      f"{ref['states']:,}/{ref['transitions']:,} {ref['violated']}")
                agree = False
        if "spin" in rows and ref is not None:
            s = runs["spin"][0]
            same = (s["states"] == ref["states"] and spin_count_is(s["transitions"], ref["transitions"] + 1)
                    and (s["errors"] > 0) == bool(ref["violated"]))
            print(f"SPIN {s['states']:,} states stored, {s['transitions']} transitions (its initial state counted), "
                  f"{s['errors']} errors; conq {ref['states']:,} states, {ref['transitions']:,} transitions, violated "
                  f"{ref['violated'] or 'none'}: {'counts equal' if same else 'COUNTS DIFFER: no time compared'}")
            agree = agree and same
        if not agree:
            return 1
        med = {r: median_row(v) for r, v in runs.items()}
        n_states = ref["states"] if ref else med["spin"]["states"]
        print(f"\n{'row':10} {'search CPU s':>13} {'states/CPU s':>13} {'process CPU s':>14} {'peak MB':>9}  vs SPIN (states per CPU s)")
        for r in rows:
            m = med[r]
            rate = n_states / m["search_cpu"] if m["search_cpu"] else 0.0
            vs = ""
            if "spin" in rows and r != "spin":
                per = sorted(s["search_cpu"] / c["search_cpu"] for s, c in zip(runs["spin"], runs[r]))
                vs = (f"{med['spin']['search_cpu'] / m['search_cpu']:.2f}x (run by run "
                      f"{', '.join(f'{p:.2f}x' for p in per)})")
            m["states_per_cpu_s"] = rate
            label = f"before ({a.baseline})" if r == "before" else r
            print(f"{label[:10]:10} {m['search_cpu']:>13.2f} {rate:>13,.0f} {m['process_cpu']:>14.2f} "
                  f"{m['peak_bytes'] / 2**20:>9,.0f}  {vs}")
        if "spin" in rows:
            print(f"SPIN's translation and compilation (spin -a, gcc -O2), once: {built['compile_cpu']:.2f} CPU s, not "
                  "counted above")
        if "before" in rows:
            for r in ("conq", "conq-fp"):
                if r in med:
                    print(f"{r} against before: {med['before']['search_cpu'] / med[r]['search_cpu']:.2f}x the speed, "
                          f"{med[r]['peak_bytes'] / med['before']['peak_bytes']:.2f}x the peak memory")
        print(f"load average before each run (1 min): {' '.join(loads)}")
        if a.json:
            print(json.dumps({"config": config, "overrides": overrides, "runs": runs, "medians": med,
                              "spin_skipped": skipped, "spin_compile_cpu": built.get("compile_cpu")}))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
