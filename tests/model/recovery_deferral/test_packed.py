"""The recovery-deferral model packed for the explorer (model/recovery_deferral/packed.py, issue 36)
against the readable model it runs: successors and predicates on every reachable state of small
configurations that use every field (DEV-009's slot and negative counts, DEV-015's scheduled
delivery), and whole searches on every manifest configuration under 10,000 states (model/engines/action_view.py says why the one-section-per-action successors are the
model's)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from conq.model.engines.registry import load_model

_spec = importlib.util.spec_from_file_location("packed_checks", Path(__file__).parents[1] / "packed_checks.py")
chk = importlib.util.module_from_spec(_spec)
sys.modules["packed_checks"] = chk
_spec.loader.exec_module(chk)

MODEL = "recovery-deferral"


@pytest.mark.parametrize("config", ["reference", "upstream-count-after-enqueue", "upstream-poll-then-deliver"])
def test_packed_successors_and_predicates_are_the_models_on_every_reachable_state(config):
    n = chk.same_successors_on_every_state(load_model(MODEL, config, {}), load_model(MODEL, config, {}))
    assert n > 100


@pytest.mark.parametrize("config,overrides", chk.manifest_configs(MODEL, 10_000))
def test_packed_searches_give_the_tuple_searches_counts_verdicts_and_paths(config, overrides):
    chk.same_searches(lambda: load_model(MODEL, config, overrides))


def test_the_reference_packs_into_one_machine_word():
    assert load_model(MODEL, "reference", {}).packed().codec.total_bits <= 64
