"""Issue 14's stress at CI scale, on real threads with seeded faults: 16 consumption threads, 51,200
messages over 64 FIFO message groups in 16 queues, 4 producer threads, faults on every RPC
(``workload.default_fault_plan``).  ``run_stress`` raises ``StressError`` unless: per-group order held
(exactly, at every consumption start), nothing lost, nothing consumed more than max attempts,
dead-lettered exactly the messages that always fail, and no cache above its count threshold or above
its byte threshold plus one batch.  The full scale (1,000,000 messages) is ``bench/oc_stress.py``.

Verdicts are counts; the ``timeout`` is a safety cap that fails loudly."""

from __future__ import annotations

import pytest

from conq.impl.ordered_consumption import FaultPlan
from conq.impl.ordered_consumption.workload import StressError, run_stress


@pytest.mark.slow
def test_fifo_stress_with_faults_on_real_threads():
    r = run_stress(groups=64, per_group=800, queues=16, producers=4, consumption_threads=16, max_attempts=3,
                   seed=14, max_cache_messages=64, max_cache_bytes=16 * 160, timeout=240)
    assert r.messages == 51_200 and r.stored >= r.messages
    assert r.always_fail > 0 and r.dead_lettered >= r.always_fail
    # the faults did happen, of every kind the plan asks for, and were survived
    kinds = {k.split("/")[1] for k in r.answers}
    assert {"lost", "invalid-handle", "not-found", "throttled", "timeout", "unavailable", "internal"} <= kinds
    assert r.consumer_stats["settle_rejected"] > 0 and r.consumer_stats["memo_settles"] > 0
    assert r.consumer_stats["listener_exceptions"] > 0
    # the cache limits were reached (so the bound was exercised, not vacuous)
    assert r.high_water[0] == r.thresholds[0] == 4
    assert r.high_water[1] >= r.thresholds[1]


def test_without_the_fault_budget_the_stress_reports_good_messages_dead_lettered_by_the_server():
    # the checks are live: with unbounded invalid-handle answers a message the listener accepts can
    # lose every delivery attempt to injected expiries, and the server dead-letters it
    plan = FaultPlan(7, {"ack_message": {"invalid-handle": 0.6}})
    with pytest.raises(StressError, match="dead-lettered"):
        run_stress(groups=8, per_group=20, queues=2, producers=1, consumption_threads=2, max_attempts=2,
                   seed=7, faults=plan, always_fail=0.0, flaky=0.0, timeout=60)
