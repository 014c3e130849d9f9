"""Building a system's golden corpus: the one loop behind every ``conformance/<system>/build_corpus.py``.

A golden corpus holds ``pass-*.ndjson`` traces (runs of the reference implementation, recorded with
its observations) and ``diverge-<mutant>.ndjson`` traces (the minimal counterexample of each mutant
the conformance engines kill through an observation, recorded from the mutated implementation).  A
system's ``build_corpus.py`` says which configurations, seeds and replays; the recording, the
verdict checks and the file names are here, once.

A corpus is written once and then only read: a change of verdict is a regression to investigate,
not a file to regenerate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from .checker import Checker, RunResult
from .mutation import Detection
from .trace import write


def record(run: RunResult, model: Any, path: Path, *, expect: str, note: str, mode: str = "recorded") -> Path:
    """Write one run as a corpus trace with the verdict it must get."""
    tr = run.trace(model, mode)
    tr.expect = expect
    tr.generator["note"] = note
    write(tr, path)
    return path


def record_walks(checker: Checker, model: Any, directory: Path, label: str, seeds: Iterable[int],
                 length: int) -> list[Path]:
    """``pass-<label>-<k>.ndjson``: one random walk of the reference per seed; the reference must pass."""
    written = []
    for k, seed in enumerate(seeds):
        run = checker.walk(seed, length)
        if not run.ok:
            raise RuntimeError(f"the reference diverges on {label} seed {seed}: {run.divergence.describe()}")
        written.append(record(run, model, directory / f"pass-{label}-{k}.ndjson", expect="pass",
                              note=f"reference implementation, random walk on {label}"))
    return written


def record_kills(matrix: dict[str, dict[str, Detection]], directory: Path,
                 replay: Callable[[str, Detection], tuple[Any, RunResult]], bug: Callable[[str], str]) -> list[Path]:
    """``diverge-<mutant>.ndjson`` for every mutant of ``matrix`` killed with evidence.

    ``replay(name, detection)`` re-runs the first killing engine's evidence against the mutated
    implementation and returns ``(model, run)``; a run that passes means the mutant shows only in
    the implementation's state (the snapshot), which a trace does not record: no file."""
    written = []
    for name, row in matrix.items():
        det = next((d for d in row.values() if d.killed and d.evidence), None)
        if name == "(reference)" or det is None:
            continue
        model, run = replay(name, det)
        if run.ok:
            continue
        written.append(record(run, model, directory / f"diverge-{name}.ndjson", expect="diverge",
                              note=f"mutant {name}: {bug(name)}", mode="minimised"))
    return written
