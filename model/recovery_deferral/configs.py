"""The named configurations of the recovery-deferral model: what each one switches and why
(the manifest in spec/manifest/ pins the expected result of each)."""

from __future__ import annotations

from .state import (
    ErrorRouting,
    IndexMod,
    NoContextProducerUp,
    OnQueueFull,
    RecoveryDeferralConfig,
)


def named_configs():
    C = RecoveryDeferralConfig
    rerec = dict(
        events=((0, 0, 1), (0, 1, 2), (1, 0, 1), (1, 1, 0)),
        recoveries=2,
        callbacks=("FirstRecoveryCompleted",),
    )
    two = dict(callbacks=("ProducerUp", "FirstRecoveryCompleted"), events=((0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 0, 0)))
    noctx = dict(callbacks=("ProcessingQueDelayStabilized",), callbacks_without_recovery=True)
    noevent = dict(events=((0, 0, 1), (0, 1, 1), (1, -1, -1), (1, 1, 0)))
    return {
        "reference": C(),
        "reference-re-recovery": C(**rerec),
        "reference-two-callbacks": C(**two),
        "reference-no-context": C(**noctx),
        "reference-sync-errors": C(handle_errors_async=False, events=((0, 0, 1), (0, 0, -2), (1, 0, 1), (1, 1, 1))),
        "reference-up-any-time": C(up_after_events=False),
        "reference-one-queue": C(queues=1, workers=1, queue_size=2, callbacks=("FirstRecoveryCompleted",)),
        "reference-error-without-event": C(**noevent),
        "reference-late-initiation": C(late_initiation=True, **rerec),
        "legacy": C(enabled=False),
        "upstream-drop-when-full": C(on_queue_full=OnQueueFull.DROP),
        "caller-runs-when-full": C(on_queue_full=OnQueueFull.CALLER_RUNS),
        "upstream-drop-without-context": C(no_context_producer_up=NoContextProducerUp.DROP, **noctx),
        "seed-random-error-routing": C(error_routing=ErrorRouting.RANDOM, events=((0, 0, 1), (0, 0, -2), (1, 1, 1), (1, 1, 0))),
        "upstream-java-remainder": C(index_mod=IndexMod.JAVA_REMAINDER, **noevent),
        "upstream-count-after-enqueue": C(count_before_enqueue=False),
        "upstream-count-after-enqueue-up-any-time": C(count_before_enqueue=False, up_after_events=False),
        "upstream-untracked-errors": C(track_error_tasks=False),
        "upstream-up-after-down": C(down_cancels_deferred_up=False),
        "upstream-replace-deferred": C(replace_deferred=True, **two),
        "upstream-poll-then-deliver": C(poll_then_deliver=True, **rerec),
        "upstream-late-initiation": C(late_initiation=True, correlate_with_events=False, **rerec),
        "seed-initiated-off-feed-thread": C(forward_initiated_at_once=False, callbacks=("FirstRecoveryCompleted",)),
        "seed-new-recovery-keeps-deferred-up": C(new_recovery_supersedes=False, **rerec),
        "upstream": C(
            on_queue_full=OnQueueFull.DROP,
            no_context_producer_up=NoContextProducerUp.DROP,
            index_mod=IndexMod.JAVA_REMAINDER,
            count_before_enqueue=False,
            track_error_tasks=False,
            down_cancels_deferred_up=False,
            replace_deferred=True,
            poll_then_deliver=True,
            correlate_with_events=False,
            recoveries=2,
            events=((0, 0, 1), (0, 1, 2), (1, 0, 1), (1, -1, -1)),
        ),
    }


def descriptions():
    return {
        "reference": "2 producers, 2 matches, 2 queues of 1, 2 workers, 4 events (one an error), one recovery each",
        "reference-re-recovery": "a second recovery of each producer may start while the first one's ProducerUp is deferred",
        "reference-two-callbacks": "the SDK calls both onProducerUp and onProducerStatusChange(FirstRecoveryCompleted) per recovery",
        "reference-no-context": "a ProducerUp (ProcessingQueDelayStabilized) may come before any recovery: forwarded at once",
        "reference-sync-errors": "handleErrorsAsynchronously=false: error events handled on the feed thread",
        "reference-up-any-time": "the up callback may come before, during or after the recovery's events (as upstream's component tests do)",
        "reference-one-queue": "threads=1: every match on one queue of 2 (head-of-line blocking between producers)",
        "reference-error-without-event": "an error about no event (random task id) goes to any queue",
        "legacy": "enabled=false: every event handled on the feed thread, callbacks forwarded at once",
        "reference-late-initiation": "the SDK calls onRecoveryInitiated late (after the HTTP answer, DEV-032): a recovery's resent "
                                     "events and its up may come first; two recoveries per producer (the customer sees those events "
                                     "before the initiation: recovery-initiated-first fails by the SDK's order, no listener can change it)",
        "upstream-drop-when-full": "DEV-001 upstream: a task rejected by a full queue is logged and dropped",
        "caller-runs-when-full": "DEV-001 alternative: the feed thread runs a task its queue cannot take",
        "upstream-drop-without-context": "DEV-002 upstream: a ProducerUp with no recovery context is dropped",
        "seed-random-error-routing": "DEV-007 the seed's literal reading: an error about a match goes to a random queue",
        "upstream-java-remainder": "DEV-008 upstream: hashCode % n of a random task id may be negative: exception, error lost",
        "upstream-count-after-enqueue": "DEV-009 upstream: taskAllocated is counted after the executor accepted the task",
        "upstream-count-after-enqueue-up-any-time": "DEV-009 upstream, with the up callback at any moment: ProducerUp before its tasks ran",
        "upstream-untracked-errors": "DEV-010 upstream: error tasks are not counted, ProducerUp may overtake a resent error",
        "upstream-up-after-down": "DEV-011 upstream: a Down does not cancel the deferred ProducerUp, which fires after it",
        "upstream-replace-deferred": "DEV-014 upstream: deferring a callback cancels the producer's other deferred callback",
        "upstream-poll-then-deliver": "DEV-015 upstream: a new recovery's cancel does not stop a deferred task that already read 0",
        "upstream-late-initiation": "DEV-032 upstream, with the SDK's late onRecoveryInitiated: the up tied to the stored context is "
                                    "delivered against the previous recovery before the new one's events (or lost to the late initiation)",
        "seed-initiated-off-feed-thread": "seed reading: the customer's onRecoveryInitiated is handed to the scheduler thread, so a resent event or the ProducerUp may reach the customer first (one up callback)",
        "seed-new-recovery-keeps-deferred-up": "seed reading: nothing cancels a deferred ProducerUp when its producer starts a new recovery; it fires when its own context drains",
        "upstream": "every upstream choice at once, with two recoveries per producer and an error about no event",
    }
