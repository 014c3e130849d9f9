"""Conformance checker speed: checked steps per second, the checker of a baseline revision and
the current one side by side, in one run (issue 17, "Checker speed").

Two measurements per configuration of consumer lists, each the median of --repeat runs, old and
new interleaved so that a noisy machine hurts both alike:

* ``reference``: in-process conformance of the reference implementation (what
  ``conq conformance consumer-lists`` does: seeded walks of --length steps, snapshots and
  invariants on); the implementation's own cost is in the figure;
* ``instant``: the same runs replayed against an implementation that answers every request at
  once from a recording of them (the in-process analogue of a port that answers instantly): the
  checker's own cost alone.

The baseline is the checker (conformance/checker.py) and the trace helpers (conformance/trace.py)
of a git revision (--baseline, default the commit before the memoised checker), loaded from git
beside the current ones; everything else (model, driver, implementation) is shared.  One core.

    /work/main/.venv/bin/python bench/checker_speed.py [--traces 300] [--repeat 5] [--baseline REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conq.conformance import adapters, checker as new_checker, trace as new_trace
from conq.conformance.adapters import InProcess
from conq.conformance.generate import derive_seed
from conq.conformance.views import conformance_model

ROOT = Path(__file__).resolve().parent.parent
#: the last commit before the checker's per-state memos and the faster hashable
BASELINE = "a27f5be"
CONFIGS = ("reference", "small")
DRIVER = "conq.conformance.consumer_lists.driver:ConsumerListsDriver"


def _from_git(rev: str, path: str, name: str) -> Any:
    """Module ``conq.conformance.<name>`` built from ``path`` at git revision ``rev``."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader(f"conq.conformance.{name}", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "conq.conformance"
    sys.modules[spec.name] = mod
    exec(compile(src, f"{rev}:{path}", "exec"), mod.__dict__)
    return mod


class Recorded:
    """Answers from a recording (one list of (observation, snapshot) per trace): no work at all."""

    name = "recorded"

    def __init__(self, runs: list[tuple[list, list]]):
        self.runs = runs
        self.k = -1

    def start(self, model, config, seed):
        self.k += 1
        self.obs, self.snaps = self.runs[self.k]
        self.i = 0
        self.j = 0

    def do(self, action):
        o = self.obs[self.i]
        self.i += 1
        return o

    def snapshot(self):
        s = self.snaps[self.j]
        self.j += 1
        return s

    def close(self):
        pass


class Recorder(InProcess):
    def __init__(self):
        super().__init__(DRIVER)
        self.runs: list[tuple[list, list]] = []

    def start(self, model, config, seed):
        super().start(model, config, seed)
        self.runs.append(([], []))

    def do(self, action):
        o = super().do(action)
        self.runs[-1][0].append(o)
        return o

    def snapshot(self):
        s = super().snapshot()
        self.runs[-1][1].append(s)
        return s


def _walks(mod, model, impl, traces: int, length: int) -> tuple[int, float]:
    ck = mod.Checker(model, impl)
    steps = 0
    t0 = time.process_time()  # CPU seconds of this process: the machine is shared, the figure is per core
    for i in range(traces):
        r = ck.walk(derive_seed(0, i), length)
        if r.divergence is not None:  # pragma: no cover - the reference conforms
            raise SystemExit(f"unexpected divergence: {r.divergence.describe()}")
        steps += r.steps
    return steps, time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=300)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the old checker")
    args = ap.parse_args(argv)
    versions = {}
    try:
        old_trace = _from_git(args.baseline, "conformance/trace.py", "_bench_old_trace")
        old_checker = _from_git(args.baseline, "conformance/checker.py", "_bench_old_checker")
        old_checker.hashable = old_trace.hashable
        versions["old"] = (old_checker, old_trace.hashable)
    except (subprocess.CalledProcessError, OSError) as e:  # no git, or a shallow clone: the new figures alone
        print(f"baseline {args.baseline} unavailable ({e}): new figures only", file=sys.stderr)
    versions["new"] = (new_checker, new_trace.hashable)
    print(f"# checker speed: consumer-lists, {args.traces} walks of {args.length} steps, median of {args.repeat}; "
          f"baseline {args.baseline}; python {platform.python_version()}, one core")
    print(f"{'configuration':<12} {'implementation':<10} {'steps':>7} {'old steps/s':>12} {'new steps/s':>12} {'new/old':>8}")
    for cfg in CONFIGS:
        model = conformance_model("consumer-lists", cfg)
        rec = Recorder()
        _walks(new_checker, model, rec, args.traces, args.length)
        for label in ("reference", "instant"):
            rates: dict[str, list[float]] = {v: [] for v in versions}
            steps = 0
            for _ in range(args.repeat):
                for v, (mod, hashable) in versions.items():
                    adapters.hashable = hashable  # InProcess.snapshot's conversion, as that revision had it
                    m = conformance_model("consumer-lists", cfg)  # a fresh model: no warm caches carried over
                    impl = InProcess(DRIVER) if label == "reference" else Recorded(rec.runs)
                    steps, secs = _walks(mod, m, impl, args.traces, args.length)
                    rates[v].append(steps / secs)
            adapters.hashable = new_trace.hashable
            new = statistics.median(rates["new"])
            if "old" in rates:
                old = statistics.median(rates["old"])
                print(f"{cfg:<12} {label:<10} {steps:>7,} {old:>12,.0f} {new:>12,.0f} {new / old:>7.2f}x")
            else:
                print(f"{cfg:<12} {label:<10} {steps:>7,} {'-':>12} {new:>12,.0f} {'-':>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
