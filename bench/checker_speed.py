"""Conformance checker speed: checked steps per second of a baseline revision and of the current
tree side by side, as ratios, in one run (issue 17, "Checker speed").

Rows, per configuration of consumer lists, each the median of --repeat runs:

* ``reference``: in-process conformance of the reference implementation (what ``conq conformance
  consumer-lists`` does: seeded walks of --length steps, snapshots and invariants on); CPU seconds
  of the process, so the figure is per core;
* ``checker``: the same walks answered in-process from a recording of them (the in-process
  analogue of a port that answers instantly): the checker's own cost alone; CPU seconds;
* ``stdio-python``: the same walks through the port protocol with the Python reference port
  (``python -m conq.conformance.port``); wall-clock seconds (the port's time is in the figure);
* ``stdio-instant``: through the port protocol with a tiny port in this file that answers every
  request at once from a recording (``--instant-port``): the protocol's and the checker's cost
  alone; wall-clock seconds;
* ``stdio-java``: the Java port (conformance/consumer_lists/ports/java), only when ``javac`` and
  ``java`` are on PATH; wall-clock seconds.

The reference port and the instant port declare the optional protocol feature
``snapshot-in-reply`` (one round trip per step instead of two); a checker that knows it (new) uses
it, an older one ignores it.  The Java port does not declare it: its row shows the per-request
costs alone.

``old`` is the code of the hot path (conformance/ trace, protocol, adapters, checker, port, the
consumer-lists driver and call-level view) at git revision --baseline, read from git history into a temporary folder
and imported in place of the current files (by the checker's process and by the Python port's);
``new`` is the working tree.  Everything else (model, implementation, the instant and Java ports)
is shared.  Every run is a fresh process; old and new runs alternate, so a noisy machine hurts
both alike.  Each run starts its port and walks one untimed trace before the timed ones.

    /work/main/.venv/bin/python bench/checker_speed.py [--traces 300] [--length 40] [--repeat 5]
        [--baseline REV] [--configs reference,small] [--rows reference,checker,...] [--json]
"""

from __future__ import annotations

import argparse
import atexit
import importlib.abc
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
#: the commit before issue 17's checker-speed work (the ``old`` columns)
BASELINE = "1cf6ebd"
#: the files of the hot path that ``old`` takes from the baseline revision
HOT_PATH = (
    "conformance/trace.py",
    "conformance/protocol.py",
    "conformance/adapters.py",
    "conformance/checker.py",
    "conformance/port.py",
    "conformance/consumer_lists/driver.py",
    # the call-level view: since it composes from the model's readable successors (not its fast
    # path) it is part of what the checker-speed work changed
    "conformance/consumer_lists/calls.py",
)
CONFIGS = ("reference", "small")
ROWS = ("reference", "checker", "stdio-python", "stdio-instant", "stdio-java")
DRIVER = "conq.conformance.consumer_lists.driver:ConsumerListsDriver"
JAVA_SOURCE = ROOT / "conformance" / "consumer_lists" / "ports" / "java" / "ConsumerListsPort.java"


# -- the baseline: the hot path's files at a git revision, imported in place of the current ones ---

class _Baseline(importlib.abc.MetaPathFinder):
    """Imports ``conq.<path>`` from the baseline folder for every file of HOT_PATH it holds."""

    def __init__(self, folder: str):
        self.files = {}
        for rel in HOT_PATH:
            f = Path(folder) / rel
            if f.exists():
                self.files["conq." + rel[: -len(".py")].replace("/", ".")] = str(f)

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        f = self.files.get(name)
        return importlib.util.spec_from_file_location(name, f) if f is not None else None


def _use_baseline(folder: str | None) -> None:
    if folder:
        sys.meta_path.insert(0, _Baseline(folder))


def _extract_baseline(rev: str) -> str:
    """The HOT_PATH files at ``rev``, in a temporary folder removed at exit."""
    folder = tempfile.mkdtemp(prefix="conq-checker-baseline-")
    atexit.register(shutil.rmtree, folder, True)
    for rel in HOT_PATH:
        r = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{rel}"], capture_output=True)
        if r.returncode == 0:  # a file the revision does not have: the current one is used
            (Path(folder) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / rel).write_bytes(r.stdout)
    if not any(Path(folder, rel).exists() for rel in HOT_PATH):
        raise SystemExit(f"error: the 'old' columns need git history with revision {rev}; run from a git "
                         "checkout of conq, or pass --baseline REV")
    return folder


# -- implementations that answer from a recording -------------------------------------------------

def _recording(traces: int, length: int, cfg: str) -> list[dict[str, list]]:
    """Per walk (the untimed one first), what the reference answered: observations (None for a
    rejection) and snapshots, as JSON values."""
    from conq.conformance.adapters import REJECTED, InProcess
    from conq.conformance.checker import Checker
    from conq.conformance.generate import derive_seed
    from conq.conformance.trace import jsonable
    from conq.conformance.views import conformance_model

    runs: list[dict[str, list]] = []

    class Recorder(InProcess):
        def start(self, model, config, seed):
            super().start(model, config, seed)
            runs.append({"obs": [], "snaps": []})

        def do(self, action):
            o = super().do(action)
            runs[-1]["obs"].append(None if o == REJECTED else jsonable(o))
            return o

        def snapshot(self):
            s = super().snapshot()
            runs[-1]["snaps"].append(jsonable(s))
            return s

    ck = Checker(conformance_model("consumer-lists", cfg), Recorder(DRIVER))
    for i in range(traces + 1):
        ck.walk(derive_seed(0, i), length)
    return runs


class Recorded:
    """Answers in-process from a recording: no work at all."""

    name = "recorded"

    def __init__(self, runs: list[dict[str, list]]):
        from conq.conformance.adapters import REJECTED
        from conq.conformance.trace import hashable

        self.runs = [([REJECTED if o is None else hashable(o) for o in r["obs"]], [hashable(s) for s in r["snaps"]])
                     for r in runs]
        self.k = -1

    def start(self, model, config, seed):
        self.k += 1
        self.obs, self.snaps = self.runs[self.k]
        self.i = self.j = 0

    def do(self, action):
        self.i += 1
        return self.obs[self.i - 1]

    def snapshot(self):
        self.j += 1
        return self.snaps[self.j - 1]

    def close(self):
        pass


def instant_port(path: str) -> int:
    """A port that answers every request at once from a recording (``--instant-port FILE``): it
    checks nothing and computes nothing, so a stdio row with it measures the checker and the
    protocol alone.  Traces are answered in order: ``init`` and ``reset`` start the next one.
    Bytes in, one ``os.write`` per reply out (no text layer, no flush of a buffered stream): what a
    port that answers instantly costs is then the pipe's round trip, not this port's own I/O."""
    import re

    runs = json.loads(Path(path).read_text())
    traces = []
    for r in runs:
        obs = [f',"observation":{json.dumps(o)}}}\n'.encode() if o is not None else None for o in r["obs"]]
        snaps = [f',"state":{json.dumps(s)}}}\n'.encode() for s in r["snaps"]]
        traces.append((obs, snaps))
    # the checker writes the head of every request the same way (adapters.Stdio._request); anything
    # else is read with json.loads
    head = re.compile(rb'\{"type": "(\w+)", "id": (\d+)')

    def write(fd: int, data: bytes) -> None:
        while data:  # a pipe takes a small reply whole; a large one may go in parts
            data = data[os.write(fd, data):]

    k = -1
    obs: list = []
    snaps: list = []
    i = j = 0
    for line in sys.stdin.buffer:
        m = head.match(line)
        if m is not None:
            kind, rid = m.group(1).decode(), m.group(2)
        else:
            msg = json.loads(line)
            kind, rid = msg["type"], str(msg["id"]).encode()
        snap = b'"snapshot": true' in line
        if kind == "action":
            o = obs[i]
            i += 1
            if o is None:
                write(1, b'{"type":"error","id":' + rid + b',"code":13,"text":"not enabled","definite":true}\n')
            elif snap:  # snapshot-in-reply
                write(1, b'{"type":"action_ok","id":' + rid + o[:-2] + snaps[j])
                j += 1
            else:
                write(1, b'{"type":"action_ok","id":' + rid + o)
        elif kind == "snapshot":
            write(1, b'{"type":"snapshot_ok","id":' + rid + snaps[j])
            j += 1
        elif kind in ("init", "reset"):
            k += 1
            obs, snaps = traces[k]
            i = j = 0
            if kind == "init":
                write(1, b'{"type":"init_ok","id":' + rid + b',"implementation":"instant","features":["snapshot-in-reply"]}\n')
            elif snap:  # snapshot-in-reply
                write(1, b'{"type":"reset_ok","id":' + rid + snaps[0])
                j = 1
            else:
                write(1, b'{"type":"reset_ok","id":' + rid + b'}\n')
        elif kind == "shutdown":
            write(1, b'{"type":"shutdown_ok","id":' + rid + b'}\n')
            return 0
        else:
            write(1, b'{"type":"error","id":' + rid + b',"code":11,"text":"not supported","definite":true}\n')
    return 0


# -- one measurement (a child process) ---------------------------------------------------------------

def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the rows of ``spec`` for one version and one configuration; steps and seconds per row."""
    _use_baseline(spec["baseline_dir"])
    from conq.conformance.adapters import InProcess, Stdio
    from conq.conformance.checker import Checker
    from conq.conformance.generate import derive_seed
    from conq.conformance.views import conformance_model

    cfg, traces, length = spec["config"], spec["traces"], spec["length"]
    port = [sys.executable, str(HERE)]
    out: dict[str, Any] = {}
    for row in spec["rows"]:
        if row == "reference":
            impl: Any = InProcess(DRIVER)
        elif row == "checker":
            impl = Recorded(json.loads(Path(spec["recording"]).read_text()))
        elif row == "stdio-python":
            impl = Stdio(port + (["--serve-port", spec["baseline_dir"]] if spec["baseline_dir"] else ["--serve-port", ""]),
                         timeout=30)
        elif row == "stdio-instant":
            impl = Stdio(port + ["--instant-port", spec["recording"]], timeout=30)
        elif row == "stdio-java":
            impl = Stdio(["java", "-Xshare:auto", "-cp", spec["java_build"], "ConsumerListsPort"], timeout=30)
        else:
            raise SystemExit(f"unknown row {row!r}")
        ck = Checker(conformance_model("consumer-lists", cfg), impl)
        try:
            first = ck.walk(derive_seed(0, 0), length)  # untimed: starts the port, loads what it loads
            if first.divergence is not None:
                raise SystemExit(f"{row}: unexpected divergence: {first.divergence.describe()}")
            steps = 0
            w0, c0 = time.perf_counter(), time.process_time()
            for i in range(1, traces + 1):
                r = ck.walk(derive_seed(0, i), length)
                if r.divergence is not None:
                    raise SystemExit(f"{row}: unexpected divergence: {r.divergence.describe()}")
                steps += r.steps
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        finally:
            impl.close()
        out[row] = {"steps": steps, "wall": wall, "cpu": cpu}
    return out


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    r = subprocess.run([sys.executable, str(HERE), "--child", json.dumps(spec)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"a measurement failed ({'old' if spec['baseline_dir'] else 'new'}, {spec['config']}):\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _java_build() -> str | None:
    if shutil.which("javac") is None or shutil.which("java") is None or not JAVA_SOURCE.exists():
        return None
    build = tempfile.mkdtemp(prefix="conq-java-port-")
    atexit.register(shutil.rmtree, build, True)
    subprocess.run(["javac", "-d", build, str(JAVA_SOURCE)], check=True, capture_output=True, timeout=300)
    return build


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(json.loads(argv[1]))))
        return 0
    if argv[:1] == ["--instant-port"]:
        return instant_port(argv[1])
    if argv[:1] == ["--serve-port"]:
        _use_baseline(argv[1])
        from conq.conformance import port

        return port.main([])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=300, help="timed walks per run (after one untimed)")
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the old hot path")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--json", action="store_true", help="also print every run's figures as JSON")
    args = ap.parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    unknown = set(rows) - set(ROWS)
    if unknown:
        ap.error(f"unknown rows {sorted(unknown)} (rows: {', '.join(ROWS)})")
    java = _java_build() if "stdio-java" in rows else None
    if "stdio-java" in rows and java is None:
        print("# stdio-java left out: javac/java not on PATH", file=sys.stderr)
        rows.remove("stdio-java")
    versions = {"old": _extract_baseline(args.baseline), "new": ""}
    print(f"# checker speed: consumer-lists, {args.traces} walks of {args.length} steps per run (after one "
          f"untimed), median of {args.repeat} runs; old = {args.baseline}, new = working tree; python "
          f"{platform.python_version()}, {os.cpu_count()} cores")
    print("# in-process rows: steps per CPU second of the checker's process (per core); stdio rows: steps per "
          "wall-clock second (the port's time included)")
    print(f"{'configuration':<13} {'row':<14} {'steps':>7} {'old steps/s':>12} {'new steps/s':>12} {'new/old':>8}")
    everything: dict[str, Any] = {}
    for cfg in args.configs.split(","):
        with tempfile.NamedTemporaryFile("w", prefix="conq-recording-", suffix=".json", delete=False) as f:
            json.dump(_recording(args.traces, args.length, cfg), f)
        atexit.register(os.unlink, f.name)
        rates: dict[str, dict[str, list[float]]] = {r: {"old": [], "new": []} for r in rows}
        steps: dict[str, int] = {}
        runs = everything[cfg] = []
        for _ in range(args.repeat):
            for v, folder in versions.items():
                spec = dict(baseline_dir=folder, config=cfg, traces=args.traces, length=args.length, rows=rows,
                            recording=f.name, java_build=java)
                got = _run_child(spec)
                runs.append({"version": v, **got})
                for r, m in got.items():
                    secs = m["cpu"] if r in ("reference", "checker") else m["wall"]
                    rates[r][v].append(m["steps"] / secs)
                    steps[r] = m["steps"]
        for r in rows:
            old, new = statistics.median(rates[r]["old"]), statistics.median(rates[r]["new"])
            print(f"{cfg:<13} {r:<14} {steps[r]:>7,} {old:>12,.0f} {new:>12,.0f} {new / old:>7.2f}x", flush=True)
    if args.json:
        print(json.dumps(everything))
    return 0


if __name__ == "__main__":
    sys.exit(main())
