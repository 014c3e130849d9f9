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
"""

from __future__ import annotations

import sys
from pathlib import Path

from conq.conformance.adapters import InProcess
from conq.conformance.checker import Checker
from conq.conformance.trace import write

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
            for k in range(per_config):
                seed = derive_seed(2026, n * 100 + k)
                run = checker.walk(seed, length)
                if not run.ok:
                    raise RuntimeError(f"the reference diverges on {cfg} seed {seed}: {run.divergence.describe()}")
                tr = run.trace(model, "recorded")
                tr.expect = "pass"
                tr.generator["note"] = f"reference implementation, random walk on {cfg}"
                path = directory / f"pass-{cfg}-{k}.ndjson"
                write(tr, path)
                written.append(path)
        finally:
            checker.impl.close()
    matrix = mutants.run_catalog(engines=["explorer", "random"], first_kill=True)
    for name, row in matrix.items():
        det = next((d for d in row.values() if d.killed and d.evidence), None)
        if name == "(reference)" or det is None:
            continue
        cfg = det.detail.split(":")[0].split(" ")[0]
        model = conformance_model(MODEL, cfg)
        checker = Checker(model, InProcess(mutants.mutant_driver(name)), snapshots=False, check_properties=False)
        try:
            run = checker.replay(det.evidence)
        finally:
            checker.impl.close()
        if run.ok:
            continue  # the mutant shows only in the implementation's state, which a trace does not record
        tr = run.trace(model, "minimised")
        tr.expect = "diverge"
        tr.generator["note"] = f"mutant {name}: {mutants.MUTANTS[name].bug}"
        path = directory / f"diverge-{name}.ndjson"
        write(tr, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in build():
        print(p)
    sys.exit(0)
