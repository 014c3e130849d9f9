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
``build_thread_level`` (``--thread-level``) writes the thread level's golden traces (issue 35,
header ``"level": "thread"``): ``pass-thread-<config>-<k>.ndjson``, random walks of the reference at
thread level on every thread-level configuration; ``pass-thread-<config>-<thread>-<step>.ndjson``, the
shortest sequence ending with each thread step (``["step", thread, n]`` running model step ``step``);
and ``diverge-thread-fifo-unlock-before-let-go.ndjson``, the planted interleaving bug no call-level
trace shows, caught by an observation at thread level (snapshots off) on ``push-fifo-one-cached``: the
receive loop waiting for room is not woken by a settle answer whose worker has not erased its message yet.
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


def seed_for(model: Any, init: Any, *, tries: int = 5000, driver: type | None = None) -> int:
    """A seed with which the driver (default: the call level's) starts in the initial state ``init`` of the view."""
    from conq.model.kernel import config_dict

    from .driver import OrderedConsumptionDriver

    want = hashable(model.observe(init))
    cfg = config_dict(model.config)
    for seed in range(tries):
        d = (driver or OrderedConsumptionDriver)(cfg, seed)
        try:
            if hashable(d.snapshot()) == want:
                return seed
        finally:
            d.close()
    raise RuntimeError(f"no seed below {tries} starts the driver in {want}")


def shortest_per_call(model: Any, cap: int = 20_000, key: Any = None) -> dict[str, tuple[Any, list[tuple]]]:
    """For every call kind of the view (``key(action, observation)``, default the action's name), the
    initial state and the shortest call sequence ending with it."""
    key = key or (lambda a, _o: a[0])
    found: dict[str, tuple[Any, list[tuple]]] = {}
    seen = set()
    queue: deque = deque()
    for s in model.init_states():
        if s not in seen:
            seen.add(s)
            queue.append((s, s, []))
    while queue and len(seen) < cap:
        s, init, path = queue.popleft()
        for a, o, t in model.successors(s):
            k = key(a, o)
            if k not in found:
                found[k] = (init, path + [a])
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


def _thread_step(a: tuple, o: Any) -> str:
    """A thread-level action's kind: ``<thread>-<model step>`` for a thread's step, else its name."""
    return f"{a[1]}-{o[0][0]}" if a[0] == "step" else a[0]


def build_thread_level(directory: Path = CORPUS, *, per_config: int = 2, length: int = 30) -> list[Path]:
    """The thread level's golden traces (module docstring)."""
    from conq.conformance.corpus import record_thread_kill, record_thread_walks
    from conq.conformance.generate import derive_seed

    from . import mutants, thread_steps

    directory.mkdir(parents=True, exist_ok=True)
    seeds = [derive_seed(2035, k) for k in range(per_config)]
    written = record_thread_walks(thread_steps, directory, thread_steps.THREAD_CONFIGS, seeds, length,
                                  lambda: InProcess(thread_steps.ThreadStepsDriver))
    for name in thread_steps.THREAD_CONFIGS:
        model = thread_steps.thread_model(name)
        checker = Checker(model, InProcess(thread_steps.ThreadStepsDriver))
        try:
            for kind, (init, actions) in sorted(shortest_per_call(model, key=_thread_step).items()):
                if kind.split("-", 1)[0] not in thread_steps.STEP_KINDS:
                    continue  # the environment's calls have their call-level traces
                run = checker.replay(actions, seed_for(model, init, driver=thread_steps.ThreadStepsDriver))
                if not run.ok:
                    raise RuntimeError(f"the reference diverges at thread level on {name}, shortest {kind}: "
                                       f"{run.divergence.describe()}")
                if run.observations[-1] == REJECTED:
                    continue  # the implementation took another branch (a server's choice): not this step
                written.append(record(run, model, directory / f"pass-thread-{name}-{kind}.ndjson", expect="pass",
                                      note=f"reference implementation, thread level, shortest sequence ending with "
                                           f"{kind} on {name}", thread_config=name))
        finally:
            checker.impl.close()
    bug = mutants.MUTANTS["fifo-unlock-before-let-go"]
    with bug.applied():
        written.append(record_thread_kill(thread_steps, directory, "push-fifo-one-cached", bug.name,
                                          InProcess(thread_steps.ThreadStepsDriver), bug.bug))
    return written


if __name__ == "__main__":
    for p in build_thread_level() if "--thread-level" in sys.argv[1:] else build():
        print(p)
    sys.exit(0)
