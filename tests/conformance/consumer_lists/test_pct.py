"""The PCT engine (issue 32): probabilistic concurrency testing of the consumer-lists reference over
``impl/scheduling.py`` (``conformance/consumer_lists/pct.py``): the reference passes, interleaving
bugs die in a few runs, and a kill is a pure function of the seeds -- the same detail twice, and
the reported run replays the failure.  Counts, never times."""

from __future__ import annotations

import pytest

from conq.conformance.consumer_lists import mutants, pct
from conq.conformance.mutation import Budget


def test_the_reference_passes_and_the_bound_is_reported():
    det = mutants.engine_pct(Budget(scale=0.05))  # 85 runs: five of each program
    assert not det.killed and not det.capped, det.detail
    assert det.spent == "85 runs" and "depth 2 >= " in det.detail and "n <= " in det.detail


@pytest.mark.parametrize("name", ["node-list-size-twice", "look-then-unnotify", "double-acquire"])
def test_an_interleaving_bug_is_killed_the_same_way_twice_and_its_run_replays(name):
    with mutants.MUTANTS[name].applied():
        first = mutants.engine_pct(Budget(scale=0.1))
        second = mutants.engine_pct(Budget(scale=0.1))
        assert first.killed and not first.capped, first.detail
        assert (first.detail, first.evidence, first.spent) == (second.detail, second.evidence, second.spent)
        program, run = first.detail.split(" of ", 1)[1].split(" (")[0], int(first.detail.split()[2])
        _, error = pct.replay(program, run)
        assert error is not None  # the run named by the detail fails again from its seed
    assert pct.replay(program, run)[1] is None  # ... and only with the bug
