"""The recovery-deferral mutant catalogue: every mutant (one per rule of seed 004's demultiplexing and
deferral sections) is killed by some engine, the unmutated reference passes every engine, and the
engines behave as documented (shortest counterexamples first, races found by the seeded schedules,
a hit safety cap reported, never taken for a verdict).

Budgets are counts (paths, traces, examples, schedules, scenarios): the verdicts do not depend on
the machine's load.  The matrix runs in first-kill mode with the cheapest killer first;
``conq mutants recovery-deferral`` runs the whole matrix at the catalogue's full counts.
"""

from __future__ import annotations

import re

import pytest

from conq.conformance.mutation import Budget, capped_cells
from conq.conformance.recovery_deferral import mutants

#: cheapest killers first: the seeded schedules kill most mutants in a few runs
ORDER = ["schedules", "explorer", "random", "hypothesis", "journal"]


@pytest.fixture(scope="module")
def matrix():
    with pytest.MonkeyPatch.context() as mp:
        # the reference row spends every engine's whole count: smaller counts keep CI time down
        mp.setattr(mutants, "EXPLORER_DEPTH", 3)
        mp.setattr(mutants, "EXPLORER_LEAVES", 40)
        mp.setattr(mutants, "RANDOM_TRACES", 90)
        mp.setattr(mutants, "HYPOTHESIS_EXAMPLES", 4)
        mp.setattr(mutants, "SCHEDULE_SEEDS", 200)
        mp.setattr(mutants, "JOURNAL_SCENARIOS", 4)  # the fourth initiates late (DEV-032)
        mp.setattr(mutants, "JOURNAL_RUNS", 30)
        m = mutants.run_catalog(engines=ORDER, budget=Budget(max_seconds=900), first_kill=True)
    assert not capped_cells(m), f"the safety cap was hit (the machine is far too slow, or an engine hangs): {capped_cells(m)}"
    return m


def test_the_reference_passes_every_engine(matrix):
    ref = matrix["(reference)"]
    assert list(ref) == ORDER
    assert not [e for e, d in ref.items() if d.killed], {e: d.detail for e, d in ref.items() if d.killed}


def test_every_mutant_is_killed(matrix):
    assert len(mutants.MUTANTS) >= 10
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


@pytest.mark.parametrize("name", ["deliver-without-waiting", "drop-when-full", "caller-runs-when-full",
                                  "no-context-up-dropped", "event-to-random-queue", "tracker-per-feed-listener"])
def test_the_explorer_kills_short_counterexamples_in_its_shortest_first_phase(name):
    """Every action sequence up to EXPLORER_DEPTH is replayed before anything longer: a mutant with a
    short counterexample is killed by a short sequence, whatever the machine's speed."""
    with mutants.MUTANTS[name].applied():
        det = mutants.engine_explorer(Budget())
    assert det.killed and not det.capped, det.detail
    assert len(det.evidence) <= mutants.EXPLORER_DEPTH, det.evidence


@pytest.mark.parametrize("name", ["count-after-enqueue", "poll-then-deliver"])
def test_races_no_single_step_shows_are_found_by_the_seeded_schedules(name):
    """Counting after the enqueue and delivering after an unlocked read are races inside a step:
    the step-by-step conformance engines cannot see them, the deterministic schedules find them,
    and the seed replays the failing interleaving exactly."""
    with mutants.MUTANTS[name].applied():
        assert not mutants.engine_random(Budget(scale=0.2)).killed
        det = mutants.engine_schedules(Budget())
        assert det.killed and not det.capped, det.detail
        seed, strategy, label = re.match(r"seed (\d+) \((\w+), ([\w-]+) script\)", det.detail).groups()
        again = mutants.schedule_run(int(seed), dict(mutants._scripts())[label], strategy)
        assert again and again[0] in det.detail


def test_a_hit_safety_cap_is_reported_not_a_verdict():
    det = mutants.engine_random(Budget(max_seconds=1e-9))
    assert det.capped and not det.killed and "safety cap" in det.detail
    assert capped_cells({"x": {"random": det}})


def test_the_catalogue_is_registered_for_the_generic_command():
    from conq.conformance.mutation import catalogue

    cat = catalogue("recovery-deferral")
    assert cat.mutants is mutants.MUTANTS and list(cat.engines) == ["explorer", "random", "hypothesis", "schedules", "journal"]


def test_each_mutant_is_linked_from_the_requirements_it_breaks():
    from conq import catalog

    checks = {r.id: set(r.checks) for a in catalog.load() for r in a.requirements}
    missing = [(m, r) for m, reqs in mutants.REQUIREMENTS.items() for r in reqs
               if f"tests/conformance/recovery_deferral/test_mutants.py::test_mutant_is_killed[{m}]" not in checks[r]]
    assert not missing, missing


@pytest.mark.parametrize("name", ["complete-only-on-success", "tracker-per-feed-listener", "second-up-cancels-first"])
def test_the_journal_engine_kills_the_same_way_twice_and_its_run_replays(name):
    """Issue 32: on real threads two runs with the same seeds reported different details ("sent at
    #335" / "#337"); under PCT a kill is a pure function of the seeds, and the run it names fails
    again from its seed alone."""
    with mutants.MUTANTS[name].applied():
        first = mutants.engine_journal(Budget(scale=0.2))
        second = mutants.engine_journal(Budget(scale=0.2))
        assert first.killed and not first.capped, first.detail
        assert (first.detail, first.spent) == (second.detail, second.spent)
        k, run = (int(x) for x in re.match(r"scenario (\d+), pct run (-?\d+)", first.detail).groups())
        error = mutants.journal_replay(k, run)
        assert error is not None and str(error.__cause__ or error) in first.detail
    assert mutants.journal_replay(k, run) is None  # ... and only with the bug


def test_the_seeded_schedules_and_the_journal_run_a_late_initiation():
    """Issue 32, DEV-032: one feed-simulator script has a second recovery whose events and up come before its
    onRecoveryInitiated, and one journal scenario in four initiates half its recoveries late (journals checked
    with ``late_initiation``); the reference passes every interleaving tried, upstream's rule
    (``up-tied-to-stored-recovery``) loses an up to the late initiation or delivers it before it."""
    from conq.impl.recovery_deferral.feed import build_script

    scripts = dict(mutants._scripts())
    late = scripts["late-initiation"]
    assert mutants._initiates_late(late) and not any(mutants._initiates_late(s) for k, s in scripts.items() if k != "late-initiation")
    assert not [r for seed in range(20) for st in ("random", "pct") for r in [mutants.schedule_run(seed, late, st)] if r]
    with mutants.MUTANTS["up-tied-to-stored-recovery"].applied():
        found = mutants.schedule_run(0, late, "random")
        det = mutants.engine_schedules(Budget())
    assert found and "was never delivered" in found[0]
    assert det.killed and "late-initiation script" in det.detail, det.detail
    assert mutants._initiates_late(build_script(mutants.journal_scenario(3)[0]))
    assert not any(mutants._initiates_late(build_script(mutants.journal_scenario(k)[0])) for k in (0, 1, 2))
    assert [mutants.journal_replay(3, run) for run in range(8)] == [None] * 8
    with mutants.MUTANTS["up-tied-to-stored-recovery"].applied():
        killed = mutants.journal_replay(3, 0)
    assert killed is not None and "ProducerUp of producer 2" in str(killed), killed
