"""The ordered-consumption mutant catalogue: every mutant (one per rule of seed 001: the producer's
rotation, transactional single attempt, FIFO group pinning and server back-off; the receive loop's
count and byte thresholds; standard mode's change of invisible duration; FIFO's lock, repeated
settles, maximum attempts, dead-lettering and unlock signal; rebalance; the simple consumer's single
request) is killed by some engine, and the unmutated reference passes every engine.

Budgets are counts (sequences, traces): the verdicts do not depend on the machine's load.  The
matrix runs in first-kill mode with the cheapest killer first and smaller counts than the
catalogue's; ``conq mutants ordered-consumption`` runs the whole matrix at the full counts.
"""

from __future__ import annotations

import pytest

from conq.conformance.mutation import Budget, capped_cells
from conq.conformance.ordered_consumption import mutants

pytestmark = pytest.mark.slow

#: cheapest killers first: random walks kill most mutants in a few traces; the thread level last (issue
#: 35), so that a mutant it kills has survived both call-level engines first
ORDER = ["random", "explorer", "thread-steps"]
#: the interleaving bugs only the thread level shows: every step of another thread between the worker's
#: let-go and its unlock (conformance/ordered_consumption/thread_steps.py)
THREAD_ONLY = ["fifo-signal-before-unlock", "fifo-unlock-before-let-go"]


@pytest.fixture(scope="module")
def matrix():
    with pytest.MonkeyPatch.context() as mp:
        # the reference row spends every engine's whole count: smaller counts keep CI time down
        mp.setattr(mutants, "EXPLORER_SEQUENCES", 300)
        mp.setattr(mutants, "RANDOM_TRACES", 200)
        mp.setattr(mutants, "THREAD_WALKS", 20)
        m = mutants.run_catalog(engines=ORDER, budget=Budget(max_seconds=600), first_kill=True)
    assert not capped_cells(m), f"the safety cap was hit (the machine is far too slow, or an engine hangs): {capped_cells(m)}"
    return m


def test_the_reference_passes_every_engine(matrix):
    ref = matrix["(reference)"]
    assert list(ref) == ORDER
    assert not [e for e, d in ref.items() if d.killed], {e: d.detail for e, d in ref.items() if d.killed}


@pytest.mark.parametrize("name", THREAD_ONLY)
def test_an_interleaving_bug_survives_the_call_level_and_is_killed_at_thread_level(matrix, name):
    row = matrix[name]
    assert not row["random"].killed and not row["explorer"].killed, {e: d.detail for e, d in row.items()}
    assert row["thread-steps"].killed and "push-fifo" in row["thread-steps"].detail, row["thread-steps"].detail
    assert [m for m, r in matrix.items() if m != "(reference)" and not r["random"].killed
            and not r["explorer"].killed] == [m for m in mutants.MUTANTS if m in THREAD_ONLY]


def test_every_mutant_is_killed(matrix):
    assert len(mutants.MUTANTS) >= 12
    survivors = [m for m, row in matrix.items() if m != "(reference)" and not any(d.killed for d in row.values())]
    assert not survivors, survivors
    assert set(mutants.REQUIREMENTS) == set(mutants.MUTANTS)


@pytest.mark.parametrize("name", sorted(mutants.MUTANTS))
def test_mutant_is_killed(matrix, name):
    """One test per mutant, so a requirement can name the check of the rule its mutant breaks."""
    row = matrix[name]
    killer = next((e for e, d in row.items() if d.killed), None)
    assert killer is not None, {e: d.detail for e, d in row.items()}
    assert not mutants.MUTANTS[name].equivalent
    assert "engine crashed" not in row[killer].detail, row[killer].detail


@pytest.mark.parametrize("name", ["producer-no-rotation", "producer-txn-retries", "producer-ignores-backoff",
                                  "rebalance-keeps-stale-queue"])
def test_the_explorer_kills_short_counterexamples_in_its_shortest_first_phase(name):
    with mutants.MUTANTS[name].applied():
        det = mutants.engine_explorer(Budget(scale=0.2))
    assert det.killed and not det.capped, det.detail
    assert len(det.evidence) <= mutants.EXPLORER_DEPTH, det.evidence


def test_a_hit_safety_cap_is_reported_not_a_verdict():
    det = mutants.engine_random(Budget(max_seconds=1e-9))
    assert det.capped and not det.killed and "safety cap" in det.detail
    assert capped_cells({"x": {"random": det}})


def test_the_catalogue_is_registered_for_the_generic_command():
    from conq.conformance.mutation import catalogue

    cat = catalogue("ordered-consumption")
    assert cat.mutants is mutants.MUTANTS and list(cat.engines) == ["explorer", "random", "thread-steps"]


def test_each_mutant_is_linked_from_the_requirements_it_breaks():
    from conq import catalog

    checks = {r.id: set(r.checks) for a in catalog.load() for r in a.requirements}
    missing = [(m, r) for m, reqs in mutants.REQUIREMENTS.items() for r in reqs
               if f"tests/conformance/ordered_consumption/test_mutants.py::test_mutant_is_killed[{m}]" not in checks[r]]
    assert not missing, missing
