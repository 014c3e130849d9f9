"""Issue 17, "The deterministic scheduler": the schedules engine explores systematically (every
schedule with <= 1, then 2, deviations from the default schedule over small workloads, then PCT),
at switch points that include every lock release and the model's thread steps; budgets are counts
of schedules; a failure is minimised and printed as a readable interleaving that replays.

(The kill-matrix test in tests/conformance/consumer_lists runs the engine over the whole catalogue.)"""

from __future__ import annotations

import conq.impl.consumer_lists.workload  # binds ``conq``: the printed replay call names it through it
from conq.conformance.consumer_lists import mutants
from conq.conformance.mutation import Budget
from conq.impl.consumer_lists import workload
from conq.impl.consumer_lists.queue import Queue
from conq.impl.scheduling import BoundedExploration, failure_signature


def _schedules(det) -> int:
    assert det.spent.endswith(" schedules"), det.spent
    return int(det.spent.split()[0])


def test_look_then_unnotify_is_found_within_50_schedules_deterministically():
    with mutants.MUTANTS["look-then-unnotify"].applied():
        first = workload.explore_schedules(50, 0)
        again = workload.explore_schedules(50, 0)
        det = mutants.engine_schedules(Budget())
    f = first.failure
    assert f is not None and f.phase == "systematic" and f.number <= 50, first.describe()
    assert "lost wake-up" in str(f.cause)
    # a pure function of the implementation: the same schedule, found at the same count
    assert (again.failure.number, again.failure.found, again.failure.schedule) == (f.number, f.found, f.schedule)
    assert det.killed and not det.capped and _schedules(det) == f.number


def test_look_then_unnotify_variants_are_found_within_50_schedules(monkeypatch):
    """Not tuned to one spelling of the bug: the reference's deliver_single_message with the
    un-notify moved after the look -- carrying the reference's step label along, and without it
    (then only the generic lock points are left in the window) -- is found within 50 too."""

    def swapped(labelled):
        def deliver(self, c):
            if c.closed:
                return None
            if not c._deliver_guard.acquire(False):
                raise RuntimeError(f"deliver_single_message for {c.id!r} called concurrently with itself")
            try:
                entry = None
                if c.desired:
                    entry = self._attempt_delivery(c) if c.acquires else self._attempt_browse(c)
                if labelled and self._det:
                    self._point("pull.unnotify", c.id)
                self.qcm.set_notified(c, False)  # the swap: NOTIFIED -> INTERESTED after the look
                if not c.desired:
                    return None
                if entry is None:
                    if c.acquires and self._available > 0:
                        self._notify_other_consumers(c)
                    return None
                c.delivered += 1
                self.qcm.set_notified(c, True)
                return entry.id
            finally:
                c._deliver_guard.release()
        return deliver

    found = {}
    for labelled in (True, False):
        monkeypatch.setattr(Queue, "deliver_single_message", swapped(labelled))
        res = workload.explore_schedules(50, 0, minimise=False)
        assert res.failure is not None and res.failure.number <= 50, (labelled, res.describe())
        assert "lost wake-up" in str(res.failure.cause) and res.failure.number > 1  # needs a deviation
        found[labelled] = res.failure.number
    assert found[True] <= found[False]  # model-step points are explored first


def test_the_lock_release_window_mutant_is_killed_only_with_release_points():
    mutant = mutants.MUTANTS["unschedule-after-release"]
    with mutant.applied():
        det = mutants.engine_schedules(Budget())
        # switch points only at lock acquires (the scheduler before issue 17): the window between
        # the connection lock's release and the write of ``scheduled`` is never interleaved, and
        # every schedule with <= 1 deviation of the workload that exposes it passes
        closed = BoundedExploration(lambda s: workload.run_shape("1c-2p", s), bound=1, max_steps=20_000)
        trials = list(closed.level(0)) + list(closed.level(1))
    assert det.killed and not det.capped, det.detail
    assert _schedules(det) <= 50, det.spent
    (thread, _at, _to, label), = det.evidence
    assert label == "release conn[c0].lock" and thread.startswith("io-")
    assert len(trials) > 20 and not any(t.failed for t in trials)


def test_the_reference_passes_the_schedules_engine_count():
    """Zero false alarms: the engine's systematic count (every schedule with <= 1 deviation of every
    small workload, and the first ones with 2) and 100 PCT seeds all pass on the reference."""
    res = workload.explore_schedules(mutants.SYSTEMATIC_SCHEDULES, 100)
    assert res.failure is None, res.failure.report()
    assert not res.stopped
    assert res.explored == mutants.SYSTEMATIC_SCHEDULES + 100 and res.pct == 100
    assert res.exhaustive_upto() >= 1, res.describe()


def test_a_failing_schedule_prints_a_minimised_interleaving_that_replays():
    with mutants.MUTANTS["unschedule-after-release"].applied():
        res = workload.explore_schedules(100, 0)
        f = res.failure
        assert f is not None
        report = f.report()
        # minimised to the one preemption in the window, and rendered: thread, step, lists
        assert len(f.schedule) == 1 and f.schedule[0].label == "release conn[c0].lock"
        for text in ("minimised to 1 deviation(s)",
                     "replay: conq.impl.consumer_lists.workload.replay_schedule('1c-2p', [(",
                     "io-0 preempted here: pub1 runs instead of io-0",
                     "pull.none c0.0", "publish.notify 2",
                     "notified ['c0.0']",  # the consumer is NOTIFIED ...
                     "connections c0+",  # ... its connection has pending work but is not scheduled
                     "failure: WorkloadError: consumption: went quiescent before completion (lost wake-up)"):
            assert text in report, (text, report)
        # the printed replay call replays it: the same failure and the same interleaving
        call = next(line for line in report.splitlines() if line.startswith("replay: "))[len("replay: "):]
        sched, error = eval(call, {"conq": conq})  # our own printed call
        assert error is not None and failure_signature(error) == failure_signature(f.error)
        assert sched.log == f.minimised.sched.log and sched.states == f.minimised.sched.states
    # the same schedule on the reference passes
    sched, error = workload.replay_schedule(f.workload, f.schedule)
    assert error is None


def test_a_pct_failure_is_minimised_to_a_fixed_schedule_that_replays():
    with mutants.MUTANTS["browsers-missed"].applied():
        res = workload.explore_schedules(0, 30)
        f = res.failure
        assert f is not None and f.phase == "pct" and f.minimised.complete
        assert len(f.schedule) <= 2
        assert f"replay_pct({f.number_seed}, " in f.report()
        sched, error = f.replay()
        assert error is not None and failure_signature(error) == failure_signature(f.error)
        assert sched.log == f.minimised.sched.log
