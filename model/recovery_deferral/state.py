"""The recovery-deferral model's vocabulary: event and callback status codes, the callback
kinds, the policy switches and the configuration record.  Shared by the model, its properties
and its z3 encoding (one module all three import, so none imports another in a circle).
"""

from __future__ import annotations


import enum
from dataclasses import dataclass


# -- event status (per event of the script) ---------------------------------
UNFED, QUEUED, RUNNING, DONE, DROPPED, FEEDRUN = range(6)
STATUS_NAMES = ("unfed", "queued", "running", "done", "dropped", "done-on-feed-thread")

# -- status callback status (per producer, per callback kind, current epoch) --
#: CANCELLED: superseded by a Down status (DEV-011); STALE: still deferred
#: although a Down was forwarded after it (a ghost mark: behaves as PENDING)
NOT_SENT, PENDING, DUE, DELIVERED, LOST, CANCELLED, STALE = range(7)
NOTE_NAMES = ("not-sent", "deferred", "due", "delivered", "lost", "cancelled-by-down", "deferred-after-down")

#: event kinds in the script: 0 = live (request id 0: the NONE context),
#: k >= 1 = resent by recovery k of its producer, -1 = an error event with no
#: recovery context, -(r+1) = an error event (unparsable resent message) of
#: recovery r.  Match -1 (errors only) = an error about no event, whose task id
#: is random (``TaskID.none()``).
LIVE = 0

#: ``ProducerStatusQuery``: the statuses that mean "up to date again".  The
#: deprecated ``onProducerUp`` callback is always deferred too
#: (``ConcurrentSDKGlobalEventsListener.onProducerUp``).
UP_KINDS = frozenset({"ProducerUp", "FirstRecoveryCompleted", "ProcessingQueDelayStabilized", "ReturnedFromInactivity"})
KNOWN_KINDS = UP_KINDS | {"ProcessingQueueDelayViolation", "AliveIntervalViolation", "PermanentlyUnavailable"}


class OnQueueFull(str, enum.Enum):
    """spec/deviations.md DEV-001."""

    BLOCK = "block"  # reference: the feed thread waits for room
    DROP = "drop"  # upstream TaskExecutor: RejectedExecutionException logged, task dropped
    CALLER_RUNS = "caller-runs"  # a common alternative (ThreadPoolExecutor.CallerRunsPolicy), rejected


class NoContextProducerUp(str, enum.Enum):
    """DEV-002."""

    FORWARD = "forward"  # reference: nothing to wait for, forward at once
    DROP = "drop"  # upstream DeferredProducerUpOrchestrator: "Cannot defer ... as no recovery initiated!"


class ErrorRouting(str, enum.Enum):
    """DEV-007."""

    BY_EVENT = "by_event"  # reference and upstream: an error about an event goes to the event's queue
    RANDOM = "random"  # the seed's literal "spread randomly over the task queues"


class IndexMod(str, enum.Enum):
    """DEV-008."""

    FLOOR = "floor"  # reference: 0 <= index < queues
    JAVA_REMAINDER = "java_remainder"  # upstream: hashCode % n, negative for half the random task ids


@dataclass(frozen=True)
class RecoveryDeferralConfig:
    # -- bounds of the environment ------------------------------------------
    producers: int = 2
    matches: int = 2
    #: the script of events: (producer, match, kind) with kind 0 = live,
    #: k >= 1 = resent by recovery k of the producer, -1 = error event with no
    #: context, -(r+1) = error event of recovery r; match -1 = an error about
    #: no event.  Each producer's events arrive in script order; producers
    #: interleave freely.
    events: tuple = ((0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 1, -2))
    #: recoveries per producer (request ids 1..recoveries)
    recoveries: int = 1
    #: the status callbacks the SDK may make per producer per recovery epoch
    #: (each at most once per epoch, in any order)
    callbacks: tuple = ("AliveIntervalViolation", "FirstRecoveryCompleted")
    #: the SDK makes an up callback of a recovery only after every resent event
    #: of that recovery was received and submitted (snapshot_complete follows
    #: the resent messages on the same feed and is handled on the feed thread);
    #: False also allows "before / during", at any moment (the upstream
    #: component tests send ProducerUp before, during and after the events)
    up_after_events: bool = True
    #: the SDK may make status callbacks before any recovery was initiated
    #: (a ProducerUp with no recovery context)
    callbacks_without_recovery: bool = False
    #: the SDK calls onRecoveryInitiated only once /recovery/initiate_request was answered, while the
    #: feed resends the recovery's messages (and its snapshot_complete: the up) at once
    #: (RecoveryManagerImpl.ProducerRecoveryRequester.run; spec/deviations.md DEV-032): the resent
    #: events of the producer's next recovery, and its up, may come before its onRecoveryInitiated.
    #: The listener then ties an up to the newest recovery it knows (stored, or seen on an event),
    #: delivers it once that recovery's tasks completed and its initiation came, and a late initiation
    #: supersedes only the ups of older recoveries (the reference's rules; without this switch they are
    #: the earlier ones: every recovery's initiation comes first)
    late_initiation: bool = False
    #: DEV-032.  True = reference: an up is tied to the producer's newest recovery (stored, or seen on
    #: its resent events), waits for that recovery's initiation too, and a late initiation supersedes
    #: only the ups of older recoveries.  False = upstream (DeferredProducerUpOrchestrator,
    #: PendingRecoveries): tied to the stored context only, delivered when it reads 0, superseded by
    #: every new initiation.  The two agree unless ``late_initiation``
    correlate_with_events: bool = True
    # -- the concurrent listener's settings (ConcurrentListenerConfig) --------
    enabled: bool = True
    queues: int = 2
    workers: int = 2
    queue_size: int = 1
    handle_errors_async: bool = True
    # -- behaviour switches (reference first; upstream's choices as variants;
    # names and values as in spec/deviations.md) ------------------------------
    on_queue_full: OnQueueFull = OnQueueFull.BLOCK  # DEV-001
    no_context_producer_up: NoContextProducerUp = NoContextProducerUp.FORWARD  # DEV-002
    error_routing: ErrorRouting = ErrorRouting.BY_EVENT  # DEV-007
    index_mod: IndexMod = IndexMod.FLOOR  # DEV-008
    #: DEV-009.  False = upstream TaskExecutor.submit: submit to the executor
    #: first, count the task (taskAllocated) afterwards, so a worker may
    #: complete it before it is counted (and TaskLifecycleTracker.taskCompleted
    #: ignores an unknown context)
    count_before_enqueue: bool = True
    #: DEV-010.  False = upstream TaskFactory: error tasks are queued untracked
    track_error_tasks: bool = True
    #: DEV-011.  False = upstream: a Down status is forwarded and the deferred
    #: ProducerUp still fires later
    down_cancels_deferred_up: bool = True
    #: DEV-014.  True = upstream PendingRecoveries.save: deferring a callback
    #: cancels any other deferred callback of the same producer
    replace_deferred: bool = False
    #: DEV-015.  True = upstream DeferredProducerUpTask.run: read pending, then
    #: deliver; a cancellation (future.cancel(false)) in between does not stop it
    poll_then_deliver: bool = False
    # -- seed readings (reference = upstream; the variant is a literal reading
    # of the seed text, spec/recovery-deferral.md "Seed 004 deferral section") --
    #: True = reference and upstream ConcurrentSDKGlobalEventsListener.onRecoveryInitiated:
    #: the customer's onRecoveryInitiated is called on the calling thread, before
    #: the SDK resends anything.  False = handed to the scheduler thread, which
    #: calls the customer later (the seed's "the RabbitMQ thread should only ever
    #: read messages ... and hand each message off" applied to global callbacks):
    #: a resent event or the ProducerUp may reach the customer first
    forward_initiated_at_once: bool = True
    #: True = reference and upstream PendingRecoveries.recoveryInitiated: a new
    #: recovery cancels its producer's deferred ProducerUp.  False = the seed's text
    #: alone ("When the count of the pending tasks for that RecoveryContext reaches
    #: zero, then we propagate the ProducerUp"): nothing cancels it, it fires when
    #: its own (superseded) context drains
    new_recovery_supersedes: bool = True


def _set(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1 :]


#: the fields of a state, in order (model.py builds them, properties.py and
#: z3_encoding.py read them): told = the latest request id the customer's
#: onRecoveryInitiated was called with, upctx = per producer, per status callback,
#: the request id of the RecoveryContext the callback was correlated with
FIELDS = ("fed", "queues", "running", "status", "pending", "entries", "slot", "rec", "notes", "sched", "backlog", "told", "upctx")
REC, NOTES, SCHED, TOLD, UPCTX = (FIELDS.index(f) for f in ("rec", "notes", "sched", "told", "upctx"))
