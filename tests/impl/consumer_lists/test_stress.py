"""Stress on real threads: publishers on several threads, many consumers across connections with
priorities, credit windows, browsers and flow-control toggling, >= 100k messages.

Checked by ``conq.impl.consumer_lists.workload``: nothing lost, nothing acquired twice, browsers saw every message of
the browse phase and never one twice or out of order, nothing left available after the run (no lost
wake-up: a stall of ``stall_timeout`` seconds with work pending fails), bounded completion time.
Every wait has a timeout; pytest-timeout is the last line of defence against a hang."""

import pytest

from conq.impl.scheduling import REAL
from conq.impl.consumer_lists.workload import ConsumerSpec, run_workload


def priorities_mix(n_connections, per_connection):
    prios = [10, 5, 1]
    conns = []
    k = 0
    for ci in range(n_connections):
        specs = []
        for _ in range(per_connection):
            window = None if k % 3 else 1 + k % 7
            specs.append(ConsumerSpec(priority=prios[k % len(prios)], credit_window=window))
            k += 1
        conns.append(specs)
    conns[0].append(ConsumerSpec(acquires=False))
    conns[-1].append(ConsumerSpec(acquires=False, credit_window=5))
    return conns


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_stress_100k_messages_real_threads():
    result = run_workload(
        sched=REAL,
        publishers=4,
        messages_per_publisher=25_000,
        connections=priorities_mix(6, 3),
        io_threads=2,
        flow_toggles=3000,
        browse_phase_messages=1000,
        seed=1,
        timeout=900,  # safety cap; the verdict is the checks below
        stall_timeout=60,  # no progress for a minute with work pending: a lost wake-up
    )
    assert result.messages == 101_000
    assert sum(result.deliveries.values()) == 101_000
    # flow toggling of the high-priority consumers lets lower priorities take messages too
    assert sum(1 for n in result.deliveries.values() if n) >= 2
    assert all(n >= 1000 for n in result.browsed.values())


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_stress_many_consumers_many_connections():
    result = run_workload(
        sched=REAL,
        publishers=3,
        messages_per_publisher=10_000,
        connections=priorities_mix(16, 5),
        io_threads=4,
        flow_toggles=2000,
        browse_phase_messages=200,
        seed=2,
        timeout=900,  # safety cap; the verdict is the checks below
        stall_timeout=60,  # no progress for a minute with work pending: a lost wake-up
        batch=8,
    )
    assert sum(result.deliveries.values()) == 30_200
    assert sum(1 for n in result.deliveries.values() if n) >= 3
