"""The golden corpus: versioned traces with the verdict each must get.

``conformance/consumer_lists/corpus/`` holds, for the consumer-lists model:

* ``pass-*.ndjson``: runs of the reference implementation, recorded with its
  observations, over every configuration the conformance suite uses
  (``PASS_CONFIGS``, then ``ACTOR_CONFIGS``: the other actors of issue 16 on);
  the model must accept the recorded observations and the implementation must
  reproduce them when the actions are replayed;
* ``diverge-<mutant>.ndjson``: the minimal counterexample of each mutant of
  the catalog, recorded from the *mutated* implementation: the model must
  reject it, at the step the file's name and generator record.

The corpus is written once by ``build`` (``python -m conq.conformance.consumer_lists.build_corpus``)
and then only read: a change in verdict is a regression to investigate, not a
file to regenerate.  ``build(configs=..., mutant_names=...)`` adds the traces of
new configurations and mutants without touching the others
(``python -m conq.conformance.consumer_lists.build_corpus --actors`` added those
of issue 16).  ``build_thread_level`` writes the thread level's golden traces (issue 35:
``pass-thread-<config>-<k>.ndjson`` on every thread-level configuration, and
``diverge-thread-unnotify-after-scan.ndjson``, a bug only the thread level shows;
``--thread-level`` writes them alone).
"""

from __future__ import annotations

import sys
from pathlib import Path

from conq.conformance.adapters import InProcess
from conq.conformance.checker import Checker
from conq.conformance.corpus import record_kills, record_walks

from .suite_configs import ACTOR_CONFIGS, PASS_CONFIGS

CORPUS = Path(__file__).resolve().parent / "corpus"
#: the mutants of the other actors' paths (their diverge traces were added with ACTOR_CONFIGS)
ACTOR_MUTANTS = ("group-owner-ignored", "delete-no-notify", "acquire-deleted", "delete-steals-unsent",
                 "unhold-drops-delete", "reject-redelivers", "shared-group-never-freed", "group-reset-skipped",
                 "assigned-group-kept")


def build(directory: Path = CORPUS, *, per_config: int = 3, configs: tuple[str, ...] | None = None,
          mutant_names: list[str] | None = None) -> list[Path]:
    from . import mutants
    from .driver import ConsumerListsDriver
    from conq.conformance.generate import derive_seed
    from conq.conformance.views import conformance_model

    def model_of(cfg: str):
        model = conformance_model("consumer-lists", cfg, {"env_budget": mutants.ENV_BUDGET})
        model.config_name = cfg
        return model

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    every = PASS_CONFIGS + ACTOR_CONFIGS  # a configuration's seeds depend on its place here only
    for cfg in every if configs is None else configs:
        model = model_of(cfg)
        seeds = [derive_seed(2026, every.index(cfg) * 100 + k) for k in range(per_config)]
        written += record_walks(Checker(model, InProcess(ConsumerListsDriver)), model, directory, cfg, seeds, 40)

    def replay(name: str, det):
        model = model_of(det.detail.split(":")[0].split(" ")[0])
        with mutants.MUTANTS[name].applied():
            checker = Checker(model, InProcess(ConsumerListsDriver), snapshots=False, check_properties=False)
            return model, checker.replay(det.evidence)

    matrix = mutants.run_catalog(mutant_names, engines=["explorer", "random"], first_kill=True)
    return written + record_kills(matrix, directory, replay, lambda name: mutants.MUTANTS[name].bug)

def build_thread_level(directory: Path = CORPUS, *, per_config: int = 2, length: int = 30) -> list[Path]:
    """The thread level's golden traces (module docstring)."""
    from conq.conformance.corpus import record_thread_kill, record_thread_walks
    from conq.conformance.generate import derive_seed

    from . import mutants, thread_steps

    directory.mkdir(parents=True, exist_ok=True)
    seeds = [derive_seed(2035, k) for k in range(per_config)]
    written = record_thread_walks(thread_steps, directory, thread_steps.THREAD_CONFIGS, seeds, length,
                                  lambda: InProcess(thread_steps.ThreadStepsDriver))
    mutant = mutants.MUTANTS["unnotify-after-scan"]
    with mutant.applied():
        written.append(record_thread_kill(thread_steps, directory, "one-acquirer", "unnotify-after-scan",
                                          InProcess(thread_steps.ThreadStepsDriver), mutant.bug))
    return written


if __name__ == "__main__":
    if "--thread-level" in sys.argv[1:]:
        paths = build_thread_level()
    elif "--actors" in sys.argv[1:]:
        paths = build(configs=ACTOR_CONFIGS, mutant_names=list(ACTOR_MUTANTS))
    else:
        paths = build()
    for p in paths:
        print(p)
    sys.exit(0)
