"""The golden corpus of the recovery-deferral implementation: versioned traces with the verdict each
must get.

``conformance/recovery_deferral/corpus/`` holds:

* ``pass-<config>-<k>.ndjson``: random walks of the reference implementation, recorded with its
  observations, on every configuration the trace engines use; the model must accept the recorded
  observations, and the implementation must reproduce them when the actions are replayed;
* ``diverge-<mutant>.ndjson``: the minimal counterexample of each mutant that the conformance
  engines (explorer, random) kill through an *observation*, recorded from the mutated
  implementation: the model must reject it at its last step.  Mutants seen only in the snapshot
  (the implementation's state) or only by the real-thread engines have no file here.

Written once by ``build`` (``python -m conq.conformance.recovery_deferral.build_corpus``) and then
only read: a change in verdict is a regression to investigate, not a file to regenerate.
``build_thread_level`` (``--thread-level``) writes the thread level's golden traces (issue 35):
``pass-thread-<config>-<k>.ndjson``, random walks of the reference at thread level on every
thread-level configuration.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from conq.conformance.adapters import InProcess
from conq.conformance.checker import Checker
from conq.conformance.corpus import record_kills, record_walks

CORPUS = Path(__file__).resolve().parent / "corpus"
MODEL = "recovery-deferral"


def build(directory: Path = CORPUS, *, per_config: int = 2, length: int = 40, configs: Iterable[str] | None = None,
          kills: Iterable[str] | None = None) -> list[Path]:
    """Every golden trace, or (``configs``, ``kills``) those of the configurations and mutants named: a
    configuration or mutant added later gets its files without rewriting the others (each walk's seed
    comes from the configuration's place in ``TRACE_CONFIGS``)."""
    from . import mutants
    from .driver import RecoveryDeferralDriver
    from conq.conformance.generate import derive_seed
    from conq.conformance.views import conformance_model

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for n, cfg in enumerate(mutants.TRACE_CONFIGS):
        if configs is not None and cfg not in configs:
            continue
        model = conformance_model(MODEL, cfg)
        checker = Checker(model, InProcess(RecoveryDeferralDriver))
        try:
            seeds = [derive_seed(2026, n * 100 + k) for k in range(per_config)]
            written += record_walks(checker, model, directory, cfg, seeds, length)
        finally:
            checker.impl.close()

    def replay(name: str, det):
        model = conformance_model(MODEL, det.detail.split(":")[0].split(" ")[0])
        checker = Checker(model, InProcess(mutants.mutant_driver(name)), snapshots=False, check_properties=False)
        try:
            return model, checker.replay(det.evidence)
        finally:
            checker.impl.close()

    if kills is not None and not kills:
        return written
    matrix = mutants.run_catalog(None if kills is None else list(kills), engines=["explorer", "random"], first_kill=True)
    return written + record_kills(matrix, directory, replay, lambda name: mutants.MUTANTS[name].bug)


def build_thread_level(directory: Path = CORPUS, *, per_config: int = 2, length: int = 30,
                       configs: Iterable[str] | None = None) -> list[Path]:
    """The thread level's golden traces (module docstring), of every thread-level configuration or of
    ``configs``."""
    from conq.conformance.corpus import record_thread_walks
    from conq.conformance.generate import derive_seed

    from . import thread_steps

    directory.mkdir(parents=True, exist_ok=True)
    seeds = [derive_seed(2035, k) for k in range(per_config)]
    names = [c for c in thread_steps.THREAD_CONFIGS if configs is None or c in configs]
    return record_thread_walks(thread_steps, directory, names, seeds, length,
                               lambda: InProcess(thread_steps.ThreadStepsDriver))


if __name__ == "__main__":
    # --thread-level: the thread level's traces; --config NAME / --mutant NAME (repeatable): only those
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thread-level", action="store_true")
    ap.add_argument("--config", action="append", dest="configs")
    ap.add_argument("--mutant", action="append", dest="kills")
    args = ap.parse_args()
    if args.thread_level:
        paths = build_thread_level(configs=args.configs)
    else:
        paths = build(configs=args.configs, kills=args.kills if args.kills or args.configs is None else [])
    for p in paths:
        print(p)
    sys.exit(0)
