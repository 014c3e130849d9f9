"""Symmetry reduction of the ordered-consumption model (issue 18): ``canonical`` renames the simple
consumer's application threads (a call record names no thread) and the message queues with the
messages they carry where two queues hold messages of the same sizes in the same offset order (the
simple consumer: only rotations, it asks the queues round-robin).  The producer has no
interchangeable part (OrderedConsumptionModel._symmetries says why).

The named configurations all put every message on queue 0 (``msg_queue=(0, 0)``), so queues are
never interchangeable in them: only the threads of the simple consumer are (``reference``,
``simple``).  The queue renaming is pinned on small configurations with one message on each of two
queues (``msg_queue=(0, 1)``, equal sizes), here and in spec/manifest/ordered-consumption.toml."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model
from conq.model.ordered_consumption.configs import named_configs
from conq.model.ordered_consumption.model import OrderedConsumptionModel
from conq.model.ordered_consumption.state import SIMPLE

_spec = importlib.util.spec_from_file_location("symmetry_soundness", Path(__file__).parents[1] / "symmetry_soundness.py")
sym = importlib.util.module_from_spec(_spec)
sys.modules["symmetry_soundness"] = sym
_spec.loader.exec_module(sym)

TWO_QUEUES = {"msg_queue": (0, 1), "msg_size": (1, 1)}

# small configurations where canonical renames something; every field that names a message, a
# queue or a thread is exercised: message records, process-queue records (push), the round-robin
# pointer and the call records' message (simple)
SMALL = {
    "simple": ("simple", {}),  # threads only
    "simple-two-queues": ("simple", {**TWO_QUEUES, "server_faults": False}),  # threads and a queue rotation
    "simple-retry-two-queues": ("mutant-simple-retry", {**TWO_QUEUES, "simple_threads": 2}),
    "standard-two-queues": ("mutant-standard-client-dlq", TWO_QUEUES),  # push standard, seed broker
    "fifo-two-queues": ("push-fifo-dlq-exceeds", TWO_QUEUES),  # push FIFO, seed broker
}


def _model(name):
    config, overrides = SMALL[name]
    return load_model("ordered-consumption", config, overrides)


def _reduces(m: OrderedConsumptionModel) -> bool:
    push, simple = m._symmetries()
    return bool(push) or bool(simple) or (SIMPLE in m.roles and m.config.simple_threads >= 2)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_canonical_is_a_sound_reduction(name):
    m = _model(name)
    assert _reduces(m)
    assert sym.check_reduction(m), "no reachable state was renamed: the test exercised nothing"


def test_which_named_configurations_have_interchangeable_parts():
    # the simple consumer's two application threads; no named configuration has two queues alike
    with_parts = {n for n, c in named_configs().items() if _reduces(OrderedConsumptionModel(c))}
    assert with_parts == {"reference", "simple", "simple-any-queue"}
    assert all(OrderedConsumptionModel(c)._symmetries() == ((), ()) for c in named_configs().values())


@pytest.mark.parametrize("name", ["reference", "simple", "simple-any-queue"])
def test_same_verdicts_with_and_without_symmetry_on_the_named_configurations(name):
    m = load_model("ordered-consumption", name)
    full, red = explore(m, liveness=False), explore(m, symmetry=True, liveness=False)
    assert red.complete and red.states < full.states and red.transitions < full.transitions
    assert sym.outcome(red) == sym.outcome(full)
    sym.check_paths_replay(m, red, full)


@pytest.mark.parametrize("name", ["simple-retry-two-queues", "standard-two-queues", "fifo-two-queues"])
def test_symmetry_finds_the_same_violations_with_replayable_counterexamples(name):
    m = _model(name)
    full, red = explore(m, liveness=False), explore(m, symmetry=True, liveness=False)
    assert red.states < full.states
    assert sym.outcome(red) == sym.outcome(full)
    assert red.violations
    sym.check_paths_replay(m, red, full)
