"""TaskLifecycleTracker: the counts, a seeded hammer on real threads, and the whole pipeline under the
seeded deterministic scheduler -- where the reference order (count, then enqueue: DEV-009) keeps
every count right for every explored interleaving, and upstream's order (enqueue, then count) and
upstream's non-atomic poll-then-deliver (DEV-015) are caught (so the checks can fail).

Seed 004 "Deferring of ProducerUp": "TaskLifecycleTracker tracks ... task allocated to queue, task
started, task completed"; "defer the ProducerUp until all tasks for that RecoveryContext have
completed".
"""

from __future__ import annotations

import random
import threading

from conq.impl.recovery_deferral import (
    NONE_CONTEXT,
    ConcurrentListenerConfig,
    RecoveryContext,
    TaskLifecycleTracker,
)
from conq.impl.recovery_deferral.events import FeedEvent
from conq.impl.recovery_deferral.feed import (
    Event,
    FeedSimulator,
    Journal,
    RecordingFeedListener,
    RecordingGlobalListener,
    Recover,
    Scenario,
    Up,
    build_script,
    check_journal,
)
from conq.impl.recovery_deferral.feed_listener import ConcurrentFeedListener
from conq.impl.recovery_deferral.global_listener import (
    DEFERRED,
    DELIVERED,
    ConcurrentGlobalEventsListener,
)
from conq.impl.scheduling import DeterministicScheduler

CAP = 60.0
A, B = RecoveryContext(1, 1), RecoveryContext(2, 7)


def test_counts_per_context_and_unknown_contexts_read_zero():
    t = TaskLifecycleTracker()
    assert t.pending(A) == 0 and t.counts(A).allocated == 0
    t.task_allocated(A)
    t.task_allocated(A)
    t.task_allocated(B)
    t.task_started(A)
    assert (t.pending(A), t.pending(B)) == (2, 1)
    t.task_completed(A)
    assert t.counts(A) == (2, 0, 1, 1) and t.pending(A) == 1
    t.task_withdrawn(A)  # the second one was never placed
    assert t.pending(A) == 0 and t.pending(NONE_CONTEXT) == 0
    assert t.anomalies == []


def test_breaches_are_recorded_not_counted():
    t = TaskLifecycleTracker()
    t.task_completed(A)  # never started (upstream logs "completed but was never started!")
    t.task_started(B)  # never allocated
    t.task_allocated(A)
    t.task_started(A)
    t.task_withdrawn(A)  # started, so not withdrawable
    assert len(t.anomalies) == 3
    assert t.pending(A) == 1 and t.pending(B) == 0


def test_drained_observer_fires_on_each_drop_to_zero():
    t = TaskLifecycleTracker()
    seen = []
    t.add_drained_observer(seen.append)
    t.task_allocated(A)
    t.task_allocated(A)
    t.task_started(A)
    t.task_completed(A)
    assert seen == []
    t.task_withdrawn(A)
    assert seen == [A]
    t.task_allocated(A)
    t.task_started(A)
    t.task_completed(A)
    assert seen == [A, A]


def test_seeded_hammer_on_real_threads():
    """8 threads run seeded random lifecycles (allocate, then withdraw or start+complete) over 5
    contexts while an observer reads atomic snapshots: at every snapshot ``completed <= started <=
    allocated - withdrawn`` and pending >= 0; at the end every count is exactly what was done."""
    t = TaskLifecycleTracker()
    ctxs = [RecoveryContext(p, r) for p in (1, 2) for r in (1, 2)] + [NONE_CONTEXT]
    done = threading.Event()
    breaches: list = []
    plans = []
    for w in range(8):
        rng = random.Random(1000 + w)
        plans.append([(rng.choice(ctxs), rng.random() < 0.1) for _ in range(3000)])

    def worker(plan):
        for ctx, withdraw in plan:
            t.task_allocated(ctx)
            if withdraw:
                t.task_withdrawn(ctx)
            else:
                t.task_started(ctx)
                t.task_completed(ctx)

    def observe():
        while not done.is_set():
            for ctx, c in t.snapshot().items():
                if not (0 <= c.completed <= c.started <= c.allocated - c.withdrawn) or c.pending < 0:
                    breaches.append((ctx, c))

    obs = threading.Thread(target=observe)
    ws = [threading.Thread(target=worker, args=(p,)) for p in plans]
    obs.start()
    for th in ws:
        th.start()
    for th in ws:
        th.join(CAP)
    done.set()
    obs.join(CAP)
    assert not any(th.is_alive() for th in [*ws, obs])
    assert breaches == [] and t.anomalies == []
    for ctx in ctxs:
        ops = [op for plan in plans for op in plan if op[0] == ctx]
        withdrawn = sum(1 for _, w in ops if w)
        assert t.counts(ctx) == (len(ops), withdrawn, len(ops) - withdrawn, len(ops) - withdrawn)
        assert t.pending(ctx) == 0


# -- the whole pipeline under the deterministic scheduler ------------------------------------------------------


class CountAfterEnqueue(ConcurrentFeedListener):
    """Upstream ``TaskExecutor.submit``: hand the task to the executor, count it afterwards."""

    def _hand_off(self, index, task):
        placed = self._pool.submit(index, task)
        if placed:
            self._tracker.task_allocated(task.context)
        return placed


class PollThenDeliver(ConcurrentGlobalEventsListener):
    """Upstream ``DeferredProducerUpTask.run``: read the count, then deliver -- a new recovery in
    between does not stop the delivery (``future.cancel(false)``)."""

    def _check(self, d):
        st = self._producer(d.producer_id)
        with st.lock:
            if d.state != DEFERRED:
                return False
            n = self._tracker.pending(d.context)
        if n:
            return False
        self._sched.point("read 0, about to deliver")
        with st.lock:
            st.deferred = [x for x in st.deferred if x is not d]
            d.state = DELIVERED
            self._unregister([d])
            self._forward(d.method, d.producer_id, d.argument)
            return True


SCRIPT = build_script(Scenario(producers=2, matches_per_producer=3, live_events=2, recoveries=2, events_per_recovery=4,
                               up_timing="random", up_callbacks=("FirstRecoveryCompleted",), error_rate=0.2,
                               errors_without_event=1, seed=11))


#: the upstream component test's re-recovery: the second recovery starts right after the first's up
RE_RECOVERY = [
    Recover(1, 1), Event(FeedEvent(1, 1, 1, "odds_change", 1)), Event(FeedEvent(2, 1, 1, "odds_change", 2)), Up(1),
    Recover(1, 2), Event(FeedEvent(1, 1, 2, "odds_change", 3)), Up(1),
]


def det_run(seed: int, feed_cls=ConcurrentFeedListener, global_cls=ConcurrentGlobalEventsListener, script=SCRIPT,
            strategy: str = "pct") -> list[str]:
    """One run of ``script`` on 2 workers x 2 queues of 2 under ``DeterministicScheduler(seed)``;
    returns every violation found (journal checks, in-handler count checks, tracker anomalies)."""
    sched = DeterministicScheduler(seed, strategy=strategy, pct_depth=3, pct_steps=600)
    found: list[str] = []

    def main():
        journal = Journal()
        tracker = TaskLifecycleTracker(sched)

        class Customer(RecordingFeedListener):
            def _handle(self, item):
                # the worker has recorded task_started: its own task must be counted and pending
                c = tracker.counts(item.context)
                if not (c.pending >= 1 and c.completed < c.started <= c.allocated - c.withdrawn):
                    found.append(f"in the handler of {item!r}: counts {c}")
                sched.point("customer")
                super()._handle(item)

        cfg = ConcurrentListenerConfig(threads=2, queue_size=2, poll_interval=0.2)
        feed = feed_cls(Customer(journal), config=cfg, tracker=tracker, sched=sched, name="det")
        events = global_cls(RecordingGlobalListener(journal), tracker, poll_interval=cfg.poll_interval, sched=sched,
                            name="det-global")
        sim = FeedSimulator(script, feed, events, journal)
        sim.run()
        feed.close(CAP)
        events.close(CAP)
        found.extend(check_journal(journal.entries(), feed_ident=sim.feed_ident))
        found.extend(tracker.anomalies)
        found.extend(f"{ctx} left at {c.pending}" for ctx, c in tracker.snapshot().items() if c.pending)

    sched.run(main, wall_timeout=CAP)
    return found


def test_reference_counts_are_right_in_every_explored_interleaving():
    for seed in range(60):
        assert det_run(seed) == [], f"seed {seed}"
    for seed in range(60):
        assert det_run(seed, script=RE_RECOVERY, strategy="random") == [], f"re-recovery, seed {seed}"


def test_upstream_count_after_enqueue_is_caught():
    """DEV-009: a worker completes the task before it is counted; the count sticks at 1 and the up
    is never delivered (the model's ``upstream-count-after-enqueue``)."""
    hits = [s for s in range(60) if det_run(s, feed_cls=CountAfterEnqueue)]
    assert hits, "no explored interleaving exposed counting after the enqueue"


def test_upstream_poll_then_deliver_is_caught():
    """DEV-015: an up that read 0 is delivered after the next recovery was announced (``no-stale-up``)."""
    bad = {}
    for s in range(200):
        v = det_run(s, global_cls=PollThenDeliver, script=RE_RECOVERY, strategy="random")
        if v:
            bad[s] = v
            break
    assert bad, "no explored interleaving exposed a stale up"
    assert any("stale" in x or "never delivered" in x for x in next(iter(bad.values())))
