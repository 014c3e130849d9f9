"""Recovery deferral: the odds-feed SDK's concurrent listener (seed 004).

What is modelled (seed 004 "Implementation", "Deferring of ProducerUp",
"Configuration"; upstream sportradar/UnifiedOddsSdkJava pull request 28,
``sdk-core/.../listener/concurrent/``, summarised in REFERENCE.md §3):

* the **feed thread** (the RabbitMQ consumer thread) receiving the events of
  several producers, each producer's stream in its own order, the producers
  interleaved;
* the **task allocator**: an event goes to queue ``hash(event id) mod queues``
  (``TaskAllocator``), so every event of one match lands on the same queue;
* bounded **task queues** (``queueSize``) served by a pool of **workers**
  (``threads``); a queue is served by at most one worker at a time (upstream:
  one single-thread executor per queue), which is what keeps a match in order;
* the customer's ``OddsFeedListener`` invoked per task;
* **error events** (unparsable messages): queued untracked on their event's
  queue (``handleErrorsAsynchronously``) or handled on the feed thread;
* the **TaskLifecycleTracker**: one pending counter per RecoveryContext
  (producer, request id), +1 when a task is accepted, -1 when it completes;
  live events carry no request id and go under the shared NONE context;
* the **global listener**: ``onRecoveryInitiated`` stores the producer's
  context and is forwarded; ``onProducerUp`` and ``onProducerStatusChange``
  with FirstRecoveryCompleted / ProcessingQueDelayStabilized /
  ReturnedFromInactivity schedule a **deferred task** that polls
  pending(context) and delivers the callback to the customer when it reads 0;
  any other status passes through at once; a new recovery of the producer
  supersedes (cancels) the producer's deferred callbacks.

The environment (which event arrives next, when a recovery starts, which
status callback the SDK makes) is a set of unfair actions; the feed thread's
internal steps, the workers and the deferred-task scheduler are fair.

A full queue (the seed is silent; upstream rejects and drops the task): the
reference **blocks the feed thread until the queue has room** (back-pressure
onto the broker; nothing lost, per-match order kept, the feed thread still
never runs the customer's listener).  See spec/recovery-deferral.md
"Full queue" and spec/deviations.md.  Dropping (upstream) and running the task
on the feed thread (a caller-runs policy) are configuration variants.

State: a tuple of small ints and tuples (see :meth:`RecoveryDeferralModel.view`):
``(fed, queues, running, status, pending, entries, feed_slot, rec, notes,
sched, backlog)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from conq.model.kernel import Model, ModelError, always, always_step, leads_to, sometimes

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


def _set(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1 :]


class RecoveryDeferralModel(Model):
    name = "recovery-deferral"
    Config = RecoveryDeferralConfig

    # -- configurations ------------------------------------------------------
    @classmethod
    def configs(cls):
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
            "upstream": C(
                on_queue_full=OnQueueFull.DROP,
                no_context_producer_up=NoContextProducerUp.DROP,
                index_mod=IndexMod.JAVA_REMAINDER,
                count_before_enqueue=False,
                track_error_tasks=False,
                down_cancels_deferred_up=False,
                replace_deferred=True,
                poll_then_deliver=True,
                recoveries=2,
                events=((0, 0, 1), (0, 1, 2), (1, 0, 1), (1, -1, -1)),
            ),
        }

    @classmethod
    def describe_configs(cls):
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
            "upstream": "every upstream choice at once, with two recoveries per producer and an error about no event",
        }

    # -- derived tables ----------------------------------------------------------
    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        for f, E in (("on_queue_full", OnQueueFull), ("no_context_producer_up", NoContextProducerUp), ("error_routing", ErrorRouting), ("index_mod", IndexMod)):
            v = getattr(c, f)
            if not isinstance(v, E):
                try:
                    object.__setattr__(c, f, E(v))
                except ValueError:
                    raise ModelError(f"{self.name}: {f} must be one of {[m.value for m in E]}, got {v!r}") from None
        if c.producers < 1 or c.matches < 1 or c.queues < 1 or c.workers < 1 or c.queue_size < 1:
            raise ModelError(f"{self.name}: producers, matches, queues, workers and queue_size must be >= 1")
        for k in c.callbacks:
            if k not in KNOWN_KINDS:
                raise ModelError(f"{self.name}: unknown status callback {k!r} (known: {sorted(KNOWN_KINDS)})")
        ev = []
        for e in c.events:
            if len(e) != 3:
                raise ModelError(f"{self.name}: an event is (producer, match, kind), got {e!r}")
            p, m, k = (int(x) for x in e)
            if not (0 <= p < c.producers and -1 <= m < c.matches and -1 - c.recoveries <= k <= c.recoveries) or (m < 0 and k >= 0):
                raise ModelError(f"{self.name}: event {e!r} out of bounds")
            ev.append((p, m, k))
        self.ev = tuple(ev)
        n = len(ev)
        R = c.recoveries
        self.n_ctx = 1 + c.producers * R
        #: per producer, its event ids in script order
        self.script = tuple(tuple(i for i, e in enumerate(ev) if e[0] == p) for p in range(c.producers))
        self.ev_match = tuple(e[1] for e in ev)
        self.ev_error = tuple(e[2] < 0 for e in ev)
        #: the recovery whose initiation precedes the event (0: none)
        self.ev_rec = tuple(k if k > 0 else (-k - 1 if k < -1 else 0) for _, _, k in ev)
        #: the recovery context the event belongs to: 0 = NONE, 1 + p*R + (r-1)
        self.ev_ctx_full = tuple(0 if r == 0 else 1 + p * R + r - 1 for (p, _, _), r in zip(ev, self.ev_rec))
        #: the context the tracker counts it under, -1 = untracked (DEV-010)
        self.ev_ctx = tuple(
            -1 if (self.ev_error[i] and not c.track_error_tasks) else self.ev_ctx_full[i] for i in range(n)
        )
        # TaskAllocator: queue = hash(task id) mod queues; the task id is the
        # event (match) id, so all of one match share a queue.  An error about
        # no event, or any error under the seed's literal random routing, may go
        # to any queue (TaskID.none() is random).
        self.ev_queues = tuple(
            tuple(range(c.queues))
            if m < 0 or (self.ev_error[i] and c.error_routing is ErrorRouting.RANDOM)
            else (m % c.queues,)
            for i, (_, m, _) in enumerate(ev)
        )
        #: DEV-008: a random task id's Java hashCode % n is negative half the time
        self.ev_may_crash = tuple(
            c.index_mod is IndexMod.JAVA_REMAINDER and (m < 0 or (self.ev_error[i] and c.error_routing is ErrorRouting.RANDOM))
            for i, (_, m, _) in enumerate(ev)
        )
        #: events under the per-match order claim: sport events, and error events
        #: about a match that are queued (DEV-007); errors handled on the feed
        #: thread by configuration are outside it
        self.ev_ordered = tuple(
            m >= 0 and (not self.ev_error[i] or c.handle_errors_async or not c.enabled) for i, (_, m, _) in enumerate(ev)
        )
        self.is_up = tuple(k in UP_KINDS for k in c.callbacks)
        self.n_events = n

    def ctx(self, p: int, r: int) -> int:
        return 0 if r == 0 else 1 + p * self.config.recoveries + r - 1

    # -- the state machine -------------------------------------------------------
    def init_states(self):
        c = self.config
        P, K = c.producers, len(c.callbacks)
        return [
            (
                (0,) * P,  # fed: how many of each producer's events arrived
                ((),) * c.queues,  # queues: event ids, head first
                (-1,) * c.queues,  # running: the event a worker runs for each queue
                (UNFED,) * self.n_events,  # status per event
                (0,) * self.n_ctx,  # pending per context (the tracker)
                0,  # entries: bitmask of contexts the tracker has an entry for
                -1,  # feed_slot: event submitted but not yet counted (count_before_enqueue=False)
                (0,) * P,  # rec: the stored recovery (request id) per producer, 0 = none
                ((NOT_SENT,) * K,) * P,  # notes: status callbacks of the current epoch
                (),  # sched: (p, r, k) a deferred task read 0 and will deliver (poll_then_deliver)
                ((),) * c.matches,  # backlog (ghost): per match, sport events received, not yet given to the listener
            )
        ]

    def actions(self, s):
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog = s
        c = self.config
        out = []
        # feed thread: the next event of a producer arrives
        if slot == -1:
            for p in range(c.producers):
                if fed[p] < len(self.script[p]):
                    out.append(("feed", p))
        else:
            out.append(("track",))
        # workers
        for q in range(c.queues):
            if running[q] == -1:
                if queues[q]:
                    out.append(("run", q))
            else:
                out.append(("done", q))
        # the SDK's recovery manager / producer manager (global listener)
        for p in range(c.producers):
            if rec[p] < c.recoveries:
                out.append(("recover", p))
            for k in range(len(c.callbacks)):
                out.append(("status", p, k))
        # the deferred-task scheduler
        if sched:
            out.append(("deliver",))
        else:
            for p in range(c.producers):
                for k, st in enumerate(notes[p]):
                    if st in (PENDING, STALE):
                        out.append(("poll", p, k))
        return out

    def step(self, s, a):
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog = s
        c = self.config
        name = a[0]
        if name == "feed":
            p = a[1]
            if slot != -1 or not (0 <= p < c.producers) or fed[p] >= len(self.script[p]):
                return []
            e = self.script[p][fed[p]]
            r = self.ev_rec[e]
            if r > rec[p]:
                return []  # resent events of a recovery come after it was initiated
            fed2 = _set(fed, p, fed[p] + 1)
            m = self.ev_match[e]
            ordered = self.ev_ordered[e]
            st = status

            def out(obs, queues2, st_e, pending2=pending, entries2=entries, slot2=slot, keep=False):
                # keep: the event waits in its queue, so it joins its match's backlog
                bl = _set(backlog, m, backlog[m] + (e,)) if ordered and keep else backlog
                return (obs, (fed2, queues2, running, _set(st, e, st_e), pending2, entries2, slot2, rec, notes, sched, bl))

            if not c.enabled or (self.ev_error[e] and not c.handle_errors_async):
                # legacy / synchronous error handling: the feed thread calls the listener
                return [out(("feed-thread", e), queues, FEEDRUN)]
            outcomes = []
            for q in self.ev_queues[e]:
                if len(queues[q]) >= c.queue_size:
                    if c.on_queue_full is OnQueueFull.BLOCK:
                        continue  # the feed thread waits for room: no step until a worker takes a task
                    if c.on_queue_full is OnQueueFull.DROP:
                        outcomes.append(out(("dropped", q), queues, DROPPED))
                    else:  # caller runs: the feed thread invokes the listener itself
                        outcomes.append(out(("feed-thread", e), queues, FEEDRUN))
                    continue
                q2 = _set(queues, q, queues[q] + (e,))
                x = self.ev_ctx[e]
                if x < 0:  # untracked error task (DEV-010 upstream)
                    outcomes.append(out(("queued", q), q2, QUEUED, keep=True))
                elif not c.count_before_enqueue:  # DEV-009 upstream: counted by a second step
                    outcomes.append(out(("queued", q), q2, QUEUED, slot2=e, keep=True))
                else:  # reference: count the task, then hand it over, in one feed-thread step
                    outcomes.append(out(("queued", q), q2, QUEUED, _set(pending, x, pending[x] + 1), entries | (1 << x), keep=True))
            if self.ev_may_crash[e]:
                # DEV-008 upstream: a negative index, IndexOutOfBoundsException on the feed thread
                outcomes.append(out("index-out-of-bounds", queues, DROPPED))
            return outcomes
        if name == "track":
            if slot == -1:
                return []
            x = self.ev_ctx[slot]
            return [("tracked", (fed, queues, running, status, _set(pending, x, pending[x] + 1), entries | (1 << x), -1, rec, notes, sched, backlog))]
        if name == "run":
            q = a[1]
            if not (0 <= q < c.queues) or running[q] != -1 or not queues[q]:
                return []
            if sum(1 for r in running if r != -1) >= c.workers:
                return []
            e = queues[q][0]
            m = self.ev_match[e]
            bl2 = _set(backlog, m, tuple(x for x in backlog[m] if x != e)) if self.ev_ordered[e] else backlog
            return [
                (("listener", e), (fed, _set(queues, q, queues[q][1:]), _set(running, q, e), _set(status, e, RUNNING), pending, entries, slot, rec, notes, sched, bl2))
            ]
        if name == "done":
            q = a[1]
            if not (0 <= q < c.queues) or running[q] == -1:
                return []
            e = running[q]
            x = self.ev_ctx[e]
            p2 = pending
            if x >= 0 and entries & (1 << x):  # TaskLifecycleTracker.taskCompleted: unknown context -> logged only
                p2 = _set(pending, x, pending[x] - 1)
            return [("completed", (fed, queues, _set(running, q, -1), _set(status, e, DONE), p2, entries, slot, rec, notes, sched, backlog))]
        if name == "recover":
            p = a[1]
            if not (0 <= p < c.producers) or rec[p] >= c.recoveries:
                return []
            # onRecoveryInitiated: store the context, supersede the producer's
            # deferred callbacks (PendingRecoveries.recoveryInitiated), forward.
            # A deferred task that already read 0 (sched) is not stopped by
            # future.cancel(false): poll_then_deliver keeps it.
            fresh = (NOT_SENT,) * len(c.callbacks)
            return [("forwarded", (fed, queues, running, status, pending, entries, slot, _set(rec, p, rec[p] + 1), _set(notes, p, fresh), sched, backlog))]
        if name == "status":
            _, p, k = a
            if not (0 <= p < c.producers and 0 <= k < len(c.callbacks)) or notes[p][k] != NOT_SENT:
                return []
            r = rec[p]
            if r == 0 and not c.callbacks_without_recovery:
                return []
            up = self.is_up[k]
            if up and c.up_after_events and r > 0:
                # the SDK raises it on the feed thread after snapshot_complete,
                # so the feed thread has finished submitting the resent events
                if slot != -1:
                    return []
                x = self.ctx(p, r)
                if any(self.ev_ctx_full[e] == x and status[e] == UNFED for e in self.script[p]):
                    return []
            np = notes[p]
            if not up and c.enabled:
                # a Down: forwarded at once; it cancels the producer's deferred
                # ProducerUp (DEV-011), or upstream leaves it to fire later
                # (marked STALE, a ghost of "a Down was forwarded since")
                mark = CANCELLED if c.down_cancels_deferred_up else STALE
                np = tuple(mark if v in (PENDING, STALE) else v for v in np)
            if not up or not c.enabled:
                return [("forwarded", (fed, queues, running, status, pending, entries, slot, rec, _set(notes, p, _set(np, k, DELIVERED)), sched, backlog))]
            if r == 0:
                if c.no_context_producer_up is NoContextProducerUp.DROP:
                    return [("dropped", (fed, queues, running, status, pending, entries, slot, rec, _set(notes, p, _set(np, k, LOST)), sched, backlog))]
                return [("forwarded", (fed, queues, running, status, pending, entries, slot, rec, _set(notes, p, _set(np, k, DELIVERED)), sched, backlog))]
            if c.replace_deferred:
                np = tuple(LOST if v in (PENDING, STALE) else v for v in np)
            return [("deferred", (fed, queues, running, status, pending, entries, slot, rec, _set(notes, p, _set(np, k, PENDING)), sched, backlog))]
        if name == "poll":
            _, p, k = a
            if sched or not (0 <= p < c.producers and 0 <= k < len(c.callbacks)) or notes[p][k] not in (PENDING, STALE):
                return []
            x = self.ctx(p, rec[p])
            n = pending[x]
            if n != 0:
                return [(n, s)]
            if c.poll_then_deliver:
                return [("due", (fed, queues, running, status, pending, entries, slot, rec, _set(notes, p, _set(notes[p], k, DUE)), (p, rec[p], k), backlog))]
            return [("delivered", (fed, queues, running, status, pending, entries, slot, rec, _set(notes, p, _set(notes[p], k, DELIVERED)), sched, backlog))]
        if name == "deliver":
            if not sched:
                return []
            p, r, k = sched
            n2 = notes
            if rec[p] == r and notes[p][k] == DUE:
                n2 = _set(notes, p, _set(notes[p], k, DELIVERED))
            return [(("delivered", p, r), (fed, queues, running, status, pending, entries, slot, rec, n2, (), backlog))]
        raise ModelError(f"{self.name}: unknown action {a!r}")

    # -- fairness ----------------------------------------------------------------
    def fair(self, action, observation):
        name = action[0]
        if name in ("run", "done"):
            return ("worker", action[1])  # each queue's executor keeps going
        if name == "track":
            return ("feed",)  # the feed thread finishes the submit it started
        if name == "poll":
            return ("scheduler", action[1], action[2])  # scheduleWithFixedDelay keeps polling
        if name == "deliver":
            return ("scheduler",)
        return None  # arrivals, recoveries and status callbacks are the environment's choice

    # -- helpers for properties ------------------------------------------------------
    def allocated(self, s, x: int) -> int:
        status = s[3]
        return sum(1 for e in range(self.n_events) if self.ev_ctx[e] == x and status[e] in (QUEUED, RUNNING, DONE))

    def completed(self, s, x: int) -> int:
        status = s[3]
        return sum(1 for e in range(self.n_events) if self.ev_ctx[e] == x and status[e] == DONE)

    def _delivered_up(self, s, a, o, t):
        """(p, r) when this step hands an up callback to the customer, else None."""
        name = a[0]
        if name == "poll" and o == "delivered":
            return (a[1], s[7][a[1]])
        if name == "deliver":
            p, r, _ = s[9]
            return (p, r)
        if name == "status" and o == "forwarded" and self.is_up[a[2]]:
            return (a[1], s[7][a[1]])
        return None

    def _up_key(self, s, a, o):
        if a[0] == "poll" and o == "delivered":
            return (a[1], s[7][a[1]], a[2])
        if a[0] == "deliver":
            return s[9]
        if a[0] == "status" and o == "forwarded" and self.is_up[a[2]]:
            return (a[1], s[7][a[1]], a[2])
        return None

    def _invoked(self, a, o):
        """The event this step hands to the customer's OddsFeedListener, or None."""
        if isinstance(o, tuple) and o and o[0] in ("listener", "feed-thread"):
            return o[1]
        return None

    def properties(self):
        c = self.config
        P = c.producers
        n = self.n_events
        ctxs = range(self.n_ctx)
        props = []
        sport = [e for e in range(n) if not self.ev_error[e]]

        # -- per-match order (seed 004 "Implementation": all events for a match
        # end up on the same queue, processed in strict sequence)
        def in_order(s, a, o, t):
            e = self._invoked(a, o)
            if e is None or not self.ev_ordered[e]:
                return True
            bl = s[10][self.ev_match[e]]
            if a[0] == "feed":  # run on the feed thread as it arrives: nothing of its match may be waiting
                return not bl
            return bool(bl) and bl[0] == e

        def same_match_two(s, a, o, t):
            e = self._invoked(a, o)
            if e is None or not self.ev_ordered[e]:
                return False
            m = self.ev_match[e]
            return any(x != e and self.ev_match[x] == m and self.ev_ordered[x] and s[3][x] != UNFED for x in range(n))

        props.append(
            always_step(
                "match-order",
                "the events of one match (sport events, and error events about it when queued) reach the customer's listener in the order they arrived",
                in_order,
                witness=same_match_two,
            )
        )

        # events of different matches may overtake (within one producer's stream the arrival order is the script order)
        pairs = [
            (e1, e2)
            for p in range(P)
            for i, e1 in enumerate(self.script[p])
            for e2 in self.script[p][i + 1 :]
            if self.ev_match[e1] != self.ev_match[e2] and not self.ev_error[e1] and not self.ev_error[e2]
        ]
        if c.enabled and c.queues > 1 and c.workers > 1 and pairs:
            props.append(
                sometimes(
                    "matches-overtake",
                    "an event of one match reaches the customer before an earlier-arrived event of another match",
                    lambda s: any(s[3][e2] in (RUNNING, DONE) and s[3][e1] == QUEUED for e1, e2 in pairs),
                )
            )
            props.append(
                sometimes(
                    "workers-in-parallel",
                    "two workers run the customer's listener at the same time",
                    lambda s: sum(1 for r in s[2] if r != -1) >= 2,
                )
            )

        if c.enabled:
            def feed_no_listener(s, a, o, t):
                if a[0] != "feed":
                    return True
                e = self._invoked(a, o)
                return e is None or self.ev_error[e]

            props.append(
                always_step(
                    "feed-thread-never-runs-listener",
                    "with the concurrent listener enabled, the feed thread never runs the customer's listener for a sport event",
                    feed_no_listener,
                    witness=lambda s, a, o, t: a[0] == "feed" and not self.ev_error[self.script[a[1]][s[0][a[1]]]]
                    and sum(1 for r in s[2] if r != -1) >= min(c.workers, c.queues),
                )
            )

            props.append(
                always(
                    "pending-non-negative",
                    "the tracker's pending count of every recovery context is never negative",
                    lambda s: all(v >= 0 for v in s[4]),
                    witness=lambda s: any(s[4][x] > 0 for x in ctxs),
                )
            )
            props.append(
                always(
                    "pending-equals-allocated-minus-completed",
                    "pending(context) equals the context's tasks accepted on a queue minus those completed",
                    lambda s: all(s[4][x] == self.allocated(s, x) - self.completed(s, x) for x in ctxs),
                    witness=lambda s: any(self.completed(s, x) > 0 for x in ctxs),
                )
            )

            def own_tasks_only(s, a, o, t):
                if a[0] != "poll" or not isinstance(o, int):
                    return True
                x = self.ctx(a[1], s[7][a[1]])
                return any(self.ev_ctx[e] == x and s[3][e] in (QUEUED, RUNNING) for e in range(n))

            props.append(
                always_step(
                    "up-waits-only-for-own-tasks",
                    "a deferred ProducerUp waits only while tasks of its own recovery context are outstanding (another producer's tasks never delay it)",
                    own_tasks_only,
                    witness=lambda s, a, o, t: a[0] == "poll" and isinstance(o, int),
                )
            )
            if P > 1 and any(self.is_up):
                props.append(
                    sometimes(
                        "up-not-delayed-by-other-producer",
                        "a producer's ProducerUp has reached the customer while another producer still has recovery tasks outstanding",
                        lambda s: any(
                            s[7][p] > 0
                            and any(v == DELIVERED and self.is_up[k] for k, v in enumerate(s[8][p]))
                            and any(self.ev[e][0] != p and self.ev_ctx[e] > 0 and s[3][e] in (QUEUED, RUNNING) for e in range(n))
                            for p in range(P)
                        ),
                    )
                )

        # checked in legacy mode too: there the feed thread processes the resent
        # events before it raises the up callback (REC-008)
        def up_after_tasks(s, a, o, t):
            d = self._delivered_up(s, a, o, t)
            if d is None or d[1] == 0:
                return True
            x = self.ctx(*d)
            return all(s[3][e] in (DONE, FEEDRUN) for e in range(n) if self.ev_ctx_full[e] == x and s[3][e] != UNFED)

        def up_after_tasks_w(s, a, o, t):
            d = self._delivered_up(s, a, o, t)
            return d is not None and d[1] > 0 and any(
                self.ev_ctx_full[e] == self.ctx(*d) and s[3][e] in (DONE, FEEDRUN) for e in range(n)
            )

        props.append(
            always_step(
                "up-after-recovery-tasks",
                "the customer gets a ProducerUp for a recovery context only when every event of that context received so far (error events included) has been processed by its listener",
                up_after_tasks,
                witness=up_after_tasks_w,
            )
        )

        def at_most_once(s, a, o, t):
            key = self._up_key(s, a, o)
            if key is None:
                return True
            p, r, k = key
            return s[7][p] != r or s[8][p][k] != DELIVERED

        props.append(
            always_step(
                "up-at-most-once",
                "each up callback of a recovery reaches the customer at most once",
                at_most_once,
                witness=lambda s, a, o, t: self._up_key(s, a, o) is not None,
            )
        )

        def not_stale(s, a, o, t):
            d = self._delivered_up(s, a, o, t)
            return d is None or s[7][d[0]] == d[1]

        props.append(
            always_step(
                "no-stale-up",
                "no ProducerUp of a superseded recovery reaches the customer after a newer recovery of the producer was announced",
                not_stale,
                witness=lambda s, a, o, t: (d := self._delivered_up(s, a, o, t)) is not None and d[1] > 0,
            )
        )

        props.append(
            always(
                "up-never-lost",
                "every status callback of the producer's current recovery epoch is delivered, or deferred, never dropped",
                lambda s: all(v != LOST for np in s[8] for v in np),
                witness=lambda s: any(v == DELIVERED and self.is_up[k] for np in s[8] for k, v in enumerate(np)),
            )
        )

        defers = c.enabled and any(self.is_up)

        def after_down(s, a, o, t):
            key = self._up_key(s, a, o)
            if key is None:
                return True
            p, r, k = key
            return s[7][p] != r or s[8][p][k] != STALE

        if nonup_kinds := [k for k in range(len(c.callbacks)) if not self.is_up[k]]:
            if defers:
                props.append(
                    always_step(
                        "no-up-after-down",
                        "no deferred ProducerUp reaches the customer after a Down status of its producer was forwarded since the up was received",
                        after_down,
                        witness=lambda s, a, o, t: a[0] == "status" and not self.is_up[a[2]]
                        and any(v == PENDING for v in s[8][a[1]]),
                    )
                )
        nonup = [k for k in range(len(c.callbacks)) if not self.is_up[k]]
        if nonup:
            props.append(
                always_step(
                    "non-up-never-deferred",
                    "a status callback other than FirstRecoveryCompleted / ProcessingQueDelayStabilized / ReturnedFromInactivity is forwarded in the same step",
                    lambda s, a, o, t: a[0] != "status" or self.is_up[a[2]] or o == "forwarded",
                    # exercised where it matters: while an up callback is deferred
                    witness=lambda s, a, o, t: a[0] == "status" and not self.is_up[a[2]]
                    and (not defers or any(v == PENDING for np in s[8] for v in np)),
                )
            )
        if c.enabled and any(self.is_up):
            props.append(
                sometimes(
                    "up-deferred",
                    "an up callback is deferred while tasks of its recovery are outstanding",
                    lambda s: any(
                        v == PENDING and s[4][self.ctx(p, s[7][p])] > 0 for p, np in enumerate(s[8]) for v in np
                    ),
                )
            )
            props.append(
                sometimes(
                    "feed-blocked-or-full",
                    "a queue is full when the next event of some producer is for it",
                    lambda s: s[6] == -1
                    and any(
                        s[0][p] < len(self.script[p])
                        and any(len(s[1][q]) >= c.queue_size for q in self.ev_queues[self.script[p][s[0][p]]])
                        for p in range(P)
                    ),
                )
            )

        props.append(
            always(
                "no-silent-loss",
                "no received event is ever dropped: each is queued, running or processed",
                lambda s: DROPPED not in s[3],
                witness=lambda s: all(v in (DONE, FEEDRUN) for v in s[3]),
            )
        )
        def placed_once(s):
            queues, running, status = s[1], s[2], s[3]
            for e in range(n):
                where = sum(q.count(e) for q in queues) + running.count(e)
                if where != (1 if status[e] in (QUEUED, RUNNING) else 0):
                    return False
            return True

        props.append(
            always(
                "processed-exactly-once",
                "every accepted event is in exactly one place until the listener has processed it, and nowhere after: "
                "it is handed to the listener exactly once",
                placed_once,
                witness=lambda s: any(v in (DONE, FEEDRUN) for v in s[3]) and (not c.enabled or QUEUED in s[3]),
            )
        )

        # -- liveness ------------------------------------------------------------
        fair_words = (
            "weak fairness per queue's worker (run, complete), per deferred task (poll), of the feed thread's "
            "second submit step and of the scheduler's delivery; event arrivals, recoveries and status "
            "callbacks are never forced"
        )
        if c.enabled:
            for e in range(n):
                if self.ev_error[e] and not c.handle_errors_async:
                    continue  # handled on the feed thread, never queued
                props.append(
                    leads_to(
                        f"queued-task-runs-{e}",
                        f"event {e} ({self.describe_event(e)}), once queued, is eventually handed to the listener",
                        lambda s, e=e: s[3][e] == QUEUED,
                        lambda s, e=e: s[3][e] in (RUNNING, DONE),
                        fairness=fair_words,
                    )
                )
            if any(self.is_up):
                for p in range(P):
                    props.append(
                        leads_to(
                            f"deferred-up-delivered-{p}",
                            f"a deferred ProducerUp of producer {p} is eventually delivered (or superseded by a new recovery)",
                            lambda s, p=p: any(v in (PENDING, DUE, STALE) for v in s[8][p]),
                            lambda s, p=p: all(v not in (PENDING, DUE, STALE) for v in s[8][p]) and not (s[9] and s[9][0] == p),
                            fairness=fair_words,
                        )
                    )
        return props

    def describe_event(self, e: int) -> str:
        p, m, k = self.ev[e]
        if k == LIVE:
            kind = "live"
        elif k > 0:
            kind = f"recovery {k}"
        else:
            kind = "error" + (f" of recovery {-k - 1}" if k < -1 else "")
        return f"producer {p}, " + (f"match {m}" if m >= 0 else "no event") + f", {kind}"

    # -- views ---------------------------------------------------------------------
    def view(self, s):
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog = s
        c = self.config
        ctx_names = ["NONE"] + [f"p{p}/r{r}" for p in range(c.producers) for r in range(1, c.recoveries + 1)]
        v = {
            "fed": list(fed),
            "queues": [list(q) for q in queues],
            "running": [None if r == -1 else r for r in running],
            "events": [STATUS_NAMES[x] for x in status],
            "pending": {ctx_names[x]: (pending[x] if entries & (1 << x) else None) for x in range(self.n_ctx) if entries & (1 << x) or pending[x]},
            "recovery": list(rec),
            "callbacks": [{c.callbacks[k]: NOTE_NAMES[st] for k, st in enumerate(np)} for np in notes],
        }
        if slot != -1:
            v["feed_submitted_uncounted"] = slot
        if sched:
            v["scheduler_due"] = list(sched)
        return v

    def actors(self, action, observation):
        name = action[0]
        if name == "feed":
            return (f"producer{action[1]}", "feed-thread")
        if name == "track":
            return ("feed-thread", "tracker")
        if name in ("run", "done"):
            return (f"worker-q{action[1]}", "listener" if name == "run" else "tracker")
        if name in ("recover", "status"):
            return ("sdk", "global-listener")
        return ("scheduler", "global-listener")
