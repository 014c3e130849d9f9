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


def record(run: RunResult, model: Any, path: Path, *, expect: str, note: str, mode: str = "recorded",
           thread_config: str | None = None) -> Path:
    """Write one run as a corpus trace with the verdict it must get (``thread_config``: a run of the
    thread level on that configuration, its header says ``"level": "thread"``)."""
    tr = run.trace(model, mode)
    if thread_config is not None:
        tr.config_name, tr.level = thread_config, "thread"
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


def record_thread_walks(thread_level: Any, directory: Path, configs: Iterable[str], seeds: Iterable[int],
                        length: int, impl: Callable[[], Any]) -> list[Path]:
    """``pass-thread-<config>-<k>.ndjson``: golden traces of the thread level (issue 35), one random
    walk of the reference at thread level per configuration and seed, recorded with the steps'
    observations (labels and results) and ``"level": "thread"`` in the header; ``thread_level`` is
    the system's thread-level module, ``impl()`` the reference's thread-level implementation."""
    written = []
    seeds = list(seeds)
    for name in configs:
        model = thread_level.thread_model(name)
        checker = Checker(model, impl())
        try:
            for k, seed in enumerate(seeds):
                run = checker.walk(seed, length)
                if not run.ok:
                    raise RuntimeError(f"the reference diverges at thread level on {name} seed {seed}: "
                                       f"{run.divergence.describe()}")
                written.append(record(run, model, directory / f"pass-thread-{name}-{k}.ndjson", expect="pass",
                                      note=f"reference implementation, thread level, random walk on {name}",
                                      thread_config=name))
        finally:
            checker.impl.close()
    return written


def record_thread_kill(thread_level: Any, directory: Path, config: str, mutant: str, impl: Any, bug: str,
                       *, walks: int = 40, length: int = 30) -> Path:
    """``diverge-thread-<mutant>.ndjson``: the minimised counterexample of a mutant the thread level
    catches through an observation (snapshots off: a trace records observations only), recorded from
    the mutated implementation at thread level."""
    model = thread_level.thread_model(config)
    checker = Checker(model, impl, snapshots=False, check_properties=False)
    try:
        for seed in range(walks):
            run = checker.walk(seed, length)
            if not run.ok:
                run = checker.replay(checker.minimise(run), seed)
                return record(run, model, directory / f"diverge-thread-{mutant}.ndjson", expect="diverge",
                              note=f"mutant {mutant} at thread level: {bug}", mode="minimised", thread_config=config)
    finally:
        checker.impl.close()
    raise RuntimeError(f"no thread-level walk of {config} caught mutant {mutant} through an observation")

