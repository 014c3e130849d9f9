"""The golden corpus of the ordered-consumption implementation: versioned traces with the verdict each
must get.

``conformance/ordered_consumption/corpus/`` holds:

* ``pass-<config>-<k>.ndjson``: random walks of the reference implementation, recorded with its
  observations, on every configuration the mutation engines use (``mutants.TRACE_CONFIGS``);
* ``pass-<config>-<call>.ndjson``: for every call kind of the call-level view on that configuration,
  the shortest call sequence that ends with it (breadth-first over the view), recorded from the
  reference with the seed that makes the driver start in the sequence's initial state;
* ``diverge-<mutant>.ndjson``: the minimal counterexample of each mutant that the conformance
  engines kill through an *observation*, recorded from the mutated implementation: the model must
  reject it.  Mutants seen only in the snapshot have no file here.

Written once by ``build`` (``python -m conq.conformance.ordered_consumption.build_corpus``) and then
only read: a change in verdict is a regression to investigate, not a file to regenerate.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from pathlib import Path
from typing import Any

from conq.conformance.adapters import REJECTED, InProcess
from conq.conformance.checker import Checker
from conq.conformance.corpus import record, record_kills, record_walks
from conq.conformance.trace import hashable

CORPUS = Path(__file__).resolve().parent / "corpus"
MODEL = "ordered-consumption"


#: file names of the configurations of ``mutants.TRACE_CONFIGS``, in order
SLUGS = ("producer", "push-standard-full", "push-standard-count-limit-full", "push-fifo-full", "simple-one-queue")
#: the push slugs of the engines' configurations before issue 32, when invisible time never ran out while
#: the client held a message (``expiry_while_held=false``): their traces stay in the corpus
EARLIER_SLUGS = ("push-standard-no-expiry", "push-standard-count-limit", "push-fifo-no-expiry")


def slug(k: int) -> str:
    return SLUGS[k]


def seed_for(model: Any, init: Any, *, tries: int = 5000) -> int:
    """A seed with which the driver starts in the initial state ``init`` of the view."""
    from conq.model.kernel import config_dict

    from .driver import OrderedConsumptionDriver

    want = hashable(model.observe(init))
    cfg = config_dict(model.config)
    for seed in range(tries):
        d = OrderedConsumptionDriver(cfg, seed)
        try:
            if hashable(d.snapshot()) == want:
                return seed
        finally:
            d.close()
    raise RuntimeError(f"no seed below {tries} starts the driver in {want}")


def shortest_per_call(model: Any, cap: int = 20_000) -> dict[str, tuple[Any, list[tuple]]]:
    """For every call kind of the view, the initial state and the shortest call sequence ending with it."""
    found: dict[str, tuple[Any, list[tuple]]] = {}
    seen = set()
    queue: deque = deque()
    for s in model.init_states():
        if s not in seen:
            seen.add(s)
            queue.append((s, s, []))
    while queue and len(seen) < cap:
        s, init, path = queue.popleft()
        for a, _o, t in model.successors(s):
            if a[0] not in found:
                found[a[0]] = (init, path + [a])
            if t not in seen:
                seen.add(t)
                queue.append((t, init, path + [a]))
    return found


def build(directory: Path = CORPUS, *, per_config: int = 2, length: int = 40, configs: tuple[int, ...] | None = None,
          kills: bool = True) -> list[Path]:
    """Record the corpus: for the configurations ``configs`` (indices of ``mutants.TRACE_CONFIGS``; all by
    default) the walks and the shortest sequence per call, then (``kills``) each mutant's counterexample."""
    from . import mutants
    from .driver import OrderedConsumptionDriver
    from conq.conformance.generate import derive_seed

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for n, (cfg, ov) in enumerate(mutants.TRACE_CONFIGS):
        if configs is not None and n not in configs:
            continue
        model = mutants._model(n)
        checker = Checker(model, InProcess(OrderedConsumptionDriver))
        name = slug(n)
        try:
            seeds = [derive_seed(2026, n * 100 + k) for k in range(per_config)]
            written += record_walks(checker, model, directory, name, seeds, length)
            for call, (init, actions) in sorted(shortest_per_call(model).items()):
                run = checker.replay(actions, seed_for(model, init))
                if not run.ok:
                    raise RuntimeError(f"the reference diverges on {name}, shortest {call}: {run.divergence.describe()}")
                if run.observations[-1] == REJECTED:
                    continue  # the implementation took another branch (a server's choice): not this call
                written.append(record(run, model, directory / f"pass-{name}-{call}.ndjson", expect="pass",
                                      note=f"reference implementation, shortest sequence ending with {call} on {name}"))
        finally:
            checker.impl.close()

    def replay(mname: str, det):
        m = re.match(r"(.*?) \(seed (\d+)\)", det.detail)
        k = next(i for i in range(len(mutants.TRACE_CONFIGS)) if mutants._label(i) == m.group(1))
        model = mutants._model(k)
        checker = Checker(model, InProcess(mutants.mutant_driver(mname)), snapshots=False, check_properties=False)
        try:
            return model, checker.replay(det.evidence, int(m.group(2)))
        finally:
            checker.impl.close()

    if not kills:
        return written
    matrix = mutants.run_catalog(engines=["explorer", "random"], first_kill=True)
    return written + record_kills(matrix, directory, replay, lambda name: mutants.MUTANTS[name].bug)

if __name__ == "__main__":
    for p in build():
        print(p)
    sys.exit(0)
