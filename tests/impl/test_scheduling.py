"""The deterministic scheduler: replay from a seed, deadlock/failure reporting, and seeded exploration
of the whole implementation (no lost wake-up at quiescence, nothing lost or acquired twice)."""

import pytest

from conq.impl.consumer_lists.queue import Queue
from conq.impl.scheduling import REAL, DeadlockError, DeterministicScheduler, SchedulerError
from conq.impl.consumer_lists.workload import ConsumerSpec, WorkloadError, run_schedule, run_workload

MIXED = [
    [ConsumerSpec(priority=10, credit_window=2), ConsumerSpec(priority=5)],
    [ConsumerSpec(acquires=False), ConsumerSpec(priority=5, credit_window=1)],
    [ConsumerSpec(priority=1), ConsumerSpec(acquires=False, credit_window=3)],
]


def small_run(seed, connections=MIXED, strategy="random", **kw):
    sched = DeterministicScheduler(seed, strategy=strategy, pct_steps=400)
    params = dict(publishers=2, messages_per_publisher=6, io_threads=2, flow_toggles=4,
                  browse_phase_messages=2, seed=seed, batch=2)
    params.update(kw)
    result = run_workload(sched=sched, connections=connections, **params)
    return sched, result


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_same_seed_replays_identically(strategy):
    s1, r1 = small_run(1234, strategy=strategy)
    s2, r2 = small_run(1234, strategy=strategy)
    assert len(s1.log) > 200
    assert s1.log == s2.log
    assert r1.deliveries == r2.deliveries and r1.browsed == r2.browsed


def test_different_seeds_explore_different_interleavings():
    logs = {tuple(small_run(seed)[0].log) for seed in range(6)}
    assert len(logs) >= 5


@pytest.mark.slow
def test_seeded_exploration_finds_no_violation():
    # 150 different interleavings of the full chain with priorities, credit windows, browsers and
    # flow toggling; each run checks exactly-once delivery, browser order/completeness and that the
    # system never goes quiescent with a message available while an interested consumer idles.
    for seed in range(160):
        strategy = "pct" if seed % 2 else "random"
        try:
            small_run(seed, strategy=strategy)
        except Exception as exc:
            raise AssertionError(f"seed {seed} failed (replay: DeterministicScheduler({seed}, "
                                 f"strategy={strategy!r}, pct_steps=400))") from exc


def test_seeded_exploration_single_consumer_pct():
    # the configuration in which the mutant below is caught: the real code must pass it
    for seed in range(100):
        small_run(seed, connections=[[ConsumerSpec()]], strategy="pct", publishers=1, messages_per_publisher=6,
                  flow_toggles=0, browse_phase_messages=0, io_threads=1)


def test_exploration_detects_a_lost_wake_up_bug(monkeypatch):
    """The checks can fail: deliver_single_message that looks *before* moving NOTIFIED -> INTERESTED
    (the order the seed warns against) must be caught by some seed."""

    def looks_first(self, c):
        entry = self._attempt_delivery(c) if c.desired else None
        self.qcm.set_notified(c, False)
        if entry is None:
            return None
        self.qcm.set_notified(c, True)
        return entry.id

    monkeypatch.setattr(Queue, "deliver_single_message", looks_first)
    one = [[ConsumerSpec()]]
    failures = []
    for seed in range(300):
        try:
            small_run(seed, connections=one, strategy="pct", publishers=1, messages_per_publisher=6,
                      flow_toggles=0, browse_phase_messages=0, io_threads=1)
        except SchedulerError as exc:
            assert isinstance(exc.__cause__, WorkloadError) and "lost wake-up" in str(exc.__cause__)
            failures.append(seed)
            if len(failures) >= 1:
                break
    assert failures, "no seed exposed the lost wake-up"


def test_deadlock_is_reported_with_the_threads():
    found = False
    for seed in range(30):
        sched = DeterministicScheduler(seed)
        a, b = sched.lock("A"), sched.lock("B")

        def one(x=a, y=b):
            with x:
                sched.point("between")
                with y:
                    pass

        def main():
            h1 = sched.spawn(one, "t1")
            h2 = sched.spawn(lambda: one(b, a), "t2")
            h1.join()
            h2.join()

        try:
            sched.run(main)
        except SchedulerError as exc:
            assert isinstance(exc.__cause__, DeadlockError)
            assert "t1: blocked on" in str(exc.__cause__) and "t2: blocked on" in str(exc.__cause__)
            found = True
            break
    assert found


def test_failure_in_a_logical_thread_fails_the_run():
    sched = DeterministicScheduler(0)

    def main():
        sched.spawn(lambda: 1 / 0, "bad").join()

    with pytest.raises(SchedulerError) as info:
        sched.run(main)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_deterministic_locks_exclude():
    sched = DeterministicScheduler(7)
    lock = sched.lock("l")
    box = {"n": 0}

    def inc():
        for _ in range(20):
            with lock:
                v = box["n"]
                sched.point("read")
                box["n"] = v + 1

    def main():
        hs = [sched.spawn(inc, f"t{i}") for i in range(3)]
        for h in hs:
            h.join()

    sched.run(main)
    assert box["n"] == 60


def test_point_outside_a_run_is_harmless_but_unknown_threads_inside_are_errors():
    sched = DeterministicScheduler(0)
    sched.point("outside")  # single-caller use
    import threading

    def main():
        errors = []
        t = threading.Thread(target=lambda: errors.append(pytest.raises(SchedulerError, sched.point, "x")))
        t.start()
        t.join()
        assert errors

    sched.run(main)
    assert REAL.point("anything") is None


# -- issue 13, item 7: the schedules engine's seeds pass on the reference ------------------------

#: seeds of the schedules engine that failed the unmutated reference before the fix, all with
#: "schedule after stop" (an IO thread still finishing a connection while the workload stopped the
#: pool); found by running 10,000 seeds (`python bench/impl_faults.py --schedules 10000`)
SHUTDOWN_RACE_SEEDS = [909, 1347, 1857, 2289, 4833, 5439, 7167, 7485, 7611]
#: the CI count; the bench runs >= 10,000
CI_SCHEDULE_SEEDS = 300


def test_schedules_engine_seeds_pass_on_the_reference():
    """Seeds 0..299 of the conformance schedules engine plus every seed below 10,000 that failed
    before the fix (a count, not a time budget)."""
    failed = {}
    for seed in [*range(CI_SCHEDULE_SEEDS), *SHUTDOWN_RACE_SEEDS]:
        try:
            result = run_schedule(seed)
        except Exception as exc:
            failed[seed] = repr(exc.__cause__ or exc)
            continue
        assert result.settled == result.messages
    assert not failed, f"{len(failed)} seeds failed (replay: workload.run_schedule(seed)): {failed}"


def test_schedule_shapes_are_the_engines(monkeypatch):
    """workload.schedule_shape / run_schedule reproduce conformance engine_schedules exactly: the
    engine's first seeds are recorded and compared (shape, keyword arguments, scheduler)."""
    from conq.conformance.consumer_lists import mutants
    from conq.conformance.mutation import Budget
    from conq.impl.consumer_lists import workload

    calls = []

    def record(*, sched, connections, **kw):
        calls.append((sched.seed, sched.strategy, sorted(sched._change_points), connections, kw))
        return None

    monkeypatch.setattr(workload, "run_workload", record)
    det = mutants.engine_schedules(Budget(scale=6 / mutants.SCHEDULE_SEEDS))
    assert not det.killed and len(calls) == 6
    for seed, strategy, change_points, connections, kw in calls:
        conns, expected_kw = workload.schedule_shape(seed)
        assert (connections, kw) == (conns, expected_kw)
        ours = DeterministicScheduler(seed, strategy="pct" if seed % 2 else "random", pct_steps=400)
        assert (strategy, change_points) == (ours.strategy, sorted(ours._change_points))
