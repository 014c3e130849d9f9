"""The hypothesis adapter on the toy model: it walks the model, checks the
same properties, and a failure shrinks to the shortest readable path with a
runnable reproducer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from conq.model.kernel import PropertyViolation
from conq.model.engines.stateful import state_machine

spec = importlib.util.spec_from_file_location("toy_counter_sm", Path(__file__).parent / "toy_counter.py")
toy = importlib.util.module_from_spec(spec)
sys.modules["toy_counter_sm"] = toy
spec.loader.exec_module(toy)

TestAtomicCounter = state_machine(toy.CounterModel(toy.CounterModel.configs()["atomic"])).TestCase


def test_racy_counter_failure_is_shrunk_and_readable():
    machine = state_machine(toy.CounterModel(toy.CounterModel.configs()["racy"]))
    with pytest.raises(PropertyViolation) as info:
        run_state_machine_as_test(machine, settings=settings(max_examples=500, deadline=None, database=None))
    err = info.value
    assert err.prop.name == "no-lost-update"
    # shrunk to the minimal lost update: two reads, then two writes
    assert [a[0] for a in err.path.actions()] == ["read", "read", "write", "write"]
    text = str(err)
    assert "read(0)" in text and "reproducer:" in text and "model.check_path" in text
