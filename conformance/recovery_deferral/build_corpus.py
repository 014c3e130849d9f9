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

import sys
from pathlib import Path

from conq.conformance.adapters import InProcess
from conq.conformance.checker import Checker
from conq.conformance.corpus import record_kills, record_walks

CORPUS = Path(__file__).resolve().parent / "corpus"
MODEL = "recovery-deferral"


def build(directory: Path = CORPUS, *, per_config: int = 2, length: int = 40) -> list[Path]:
    from . import mutants
    from .driver import RecoveryDeferralDriver
    from conq.conformance.generate import derive_seed
    from conq.conformance.views import conformance_model

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for n, cfg in enumerate(mutants.TRACE_CONFIGS):
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

    matrix = mutants.run_catalog(engines=["explorer", "random"], first_kill=True)
    return written + record_kills(matrix, directory, replay, lambda name: mutants.MUTANTS[name].bug)

def build_thread_level(directory: Path = CORPUS, *, per_config: int = 2, length: int = 30) -> list[Path]:
    """The thread level's golden traces (module docstring)."""
    from conq.conformance.corpus import record_thread_walks
    from conq.conformance.generate import derive_seed

    from . import thread_steps

    directory.mkdir(parents=True, exist_ok=True)
    seeds = [derive_seed(2035, k) for k in range(per_config)]
    return record_thread_walks(thread_steps, directory, thread_steps.THREAD_CONFIGS, seeds, length,
                               lambda: InProcess(thread_steps.ThreadStepsDriver))


if __name__ == "__main__":
    for p in build_thread_level() if "--thread-level" in sys.argv[1:] else build():
        print(p)
    sys.exit(0)
