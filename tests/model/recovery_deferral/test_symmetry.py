"""Symmetry reduction of the recovery-deferral model (issue 18): ``canonical`` renames producers,
matches and task queues together with the events and recovery contexts they carry
(RecoveryDeferralModel._symmetries says when such a renaming exists).

No named configuration has one: their scripts tell the producers apart (the reference's producer 1
sends an error event where producer 0 sends a resent one, and so on), so the reduction is pinned on
scripts that are alike up to renaming, here and in spec/manifest/recovery-deferral.toml."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model
from conq.model.recovery_deferral.configs import named_configs
from conq.model.recovery_deferral.model import RecoveryDeferralModel

_spec = importlib.util.spec_from_file_location("symmetry_soundness", Path(__file__).parents[1] / "symmetry_soundness.py")
sym = importlib.util.module_from_spec(_spec)
sys.modules["symmetry_soundness"] = sym
_spec.loader.exec_module(sym)

#: producer 0: resent on match 0, live on match 1; producer 1 the same with the matches swapped:
#: producers, matches and queues are renamed together
CROSSED = ((0, 0, 1), (0, 1, 0), (1, 1, 1), (1, 0, 0))

# small configurations where canonical renames something; every field that names a producer, a
# match, a queue, an event or a context is exercised (fed, queues, running, status, pending, entries,
# slot, rec, notes, sched, backlog, told, upctx)
SMALL = {
    # producers only: both send resent events on matches 0 and 1
    "producers": ("reference", {"events": ((0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 1, 1))}),
    "crossed": ("reference", {"events": CROSSED}),
    # two recoveries (contexts 1..4 renamed in pairs), the deferred task's sched (DEV-015)
    "re-recovery-poll-then-deliver": ("upstream-poll-then-deliver", {"events": ((0, 0, 1), (0, 1, 2), (1, 1, 1), (1, 0, 2))}),
    # the feed thread's slot (DEV-009) and the told field (seed reading)
    "count-after-enqueue": ("upstream-count-after-enqueue", {"events": ((0, 0, 1), (1, 1, 1))}),
    "initiated-off-feed-thread": ("seed-initiated-off-feed-thread", {"events": CROSSED}),
    # untracked error tasks (DEV-010), errors about no event on any queue (DEV-008)
    "untracked-errors": ("upstream-untracked-errors", {"events": ((0, 0, 1), (0, 1, -2), (1, 1, 1), (1, 0, -2))}),
    "errors-without-event": ("upstream-java-remainder", {"events": ((0, 0, 1), (0, -1, -1), (1, 1, 1), (1, -1, -1)),
                                                         "callbacks": ("FirstRecoveryCompleted",)}),
}


def _model(name):
    config, overrides = SMALL[name]
    return load_model("recovery-deferral", config, overrides)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_canonical_is_a_sound_reduction(name):
    m = _model(name)
    assert m._symmetries()
    assert sym.check_reduction(m), "no reachable state was renamed: the test exercised nothing"


def test_no_named_configuration_has_interchangeable_parts():
    assert [n for n, c in named_configs().items() if RecoveryDeferralModel(c)._symmetries()] == []


def test_crossed_renames_producers_matches_and_queues_together():
    (g,) = _model("crossed")._symmetries()
    sp, sm, sq, pi, _cp = g
    assert (sp, sm, sq, pi) == ((1, 0), (1, 0), (1, 0), (2, 3, 0, 1))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_same_verdicts_with_and_without_symmetry(name):
    m = _model(name)
    full, red = explore(m, liveness=False), explore(m, symmetry=True, liveness=False)
    assert red.complete and red.states < full.states and red.transitions < full.transitions
    assert sym.outcome(red) == sym.outcome(full)
    sym.check_paths_replay(m, red, full)
