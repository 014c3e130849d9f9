"""Allocation and configuration: the queue of an event is a non-negative, stable function of its
event id (seed 004 "Configuration": TaskAllocator, a hash of the Task ID, which wraps the event ID;
spec/deviations.md DEV-008), recovery contexts (NONE for ids not > 0), the "up" statuses, and the
configuration's validation."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conq.impl.recovery_deferral import (
    NONE_CONTEXT,
    UP_STATUSES,
    ConcurrentListener,
    ConcurrentListenerConfig,
    RecoveryContext,
    context_of,
    is_up_status,
    queue_index,
)
from conq.impl.recovery_deferral.events import stable_hash


def test_queue_index_is_in_range_for_every_id_including_negative_hashes():
    ids = [*range(-500, 500), *(f"sr:match:{i}" for i in range(500)), -(2**63), 2**63 - 1, b"raw"]
    negative_hashes = sum(1 for i in ids if stable_hash(i) < 0)
    assert negative_hashes > 500  # the case Java's % gets wrong is exercised
    for n in (1, 2, 3, 5, 10, 30):
        assert all(0 <= queue_index(i, n) < n for i in ids)


def test_one_event_id_always_one_queue_and_ids_spread():
    assert {queue_index("sr:match:42", 10) for _ in range(100)} == {queue_index("sr:match:42", 10)}
    # consecutive integer match ids go round robin (upstream's long ids hash to themselves)
    assert [queue_index(i, 5) for i in range(10)] == [0, 1, 2, 3, 4] * 2
    counts = [0] * 10
    for i in range(10_000):
        counts[queue_index(f"sr:match:{i}", 10)] += 1
    assert min(counts) > 800  # string ids spread too


def test_string_hash_is_stable_across_processes():
    """Not Python's hash(), which changes with PYTHONHASHSEED: the queue of a match must not depend
    on the process."""
    code = "from conq.impl.recovery_deferral.events import stable_hash; print(stable_hash('sr:match:77'))"
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(seed)}).stdout.strip()
        for seed in (1, 2)
    }
    assert outs == {str(stable_hash("sr:match:77"))}


def test_bad_ids_are_refused():
    for bad in (True, 1.5, None):
        with pytest.raises(TypeError):
            stable_hash(bad)


def test_recovery_context_and_none():
    assert context_of(3, 9) == RecoveryContext(3, 9) and RecoveryContext(3, 9).valid
    assert context_of(3, 0) == context_of(0, 9) == context_of(None, 2) == NONE_CONTEXT
    assert not NONE_CONTEXT.valid and str(NONE_CONTEXT) == "NONE" and str(RecoveryContext(3, 9)) == "p3/r9"


def test_up_statuses_are_the_seeds_three():
    assert UP_STATUSES == {"FirstRecoveryCompleted", "ProcessingQueDelayStabilized", "ReturnedFromInactivity"}
    assert not any(map(is_up_status, ("ProcessingQueueDelayViolation", "AliveIntervalViolation", "PermanentlyUnavailable")))


def test_configuration_defaults_and_validation():
    c = ConcurrentListenerConfig()
    assert (c.enabled, c.threads, c.queue_size, c.handle_errors_asynchronously) == (True, 10, 10_000, True)
    assert (c.on_queue_full, c.poll_interval, c.queue_count) == ("block", 0.2, 10)
    assert ConcurrentListenerConfig(threads=4, queues=7).queue_count == 7
    for bad in (dict(threads=0), dict(queue_size=0), dict(queues=0), dict(on_queue_full="caller-runs"),
                dict(poll_interval=0)):
        with pytest.raises(ValueError):
            ConcurrentListenerConfig(**bad)


def test_only_one_global_listener_per_set_up():
    cl = ConcurrentListener(ConcurrentListenerConfig(threads=1, poll_interval=None))
    try:
        cl.wrap_global_listener(object())
        with pytest.raises(RuntimeError):
            cl.wrap_global_listener(object())
    finally:
        cl.close()
