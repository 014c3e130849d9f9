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

from conq.model.kernel import Model, ModelError

from .state import (
    CANCELLED,
    DELIVERED,
    DONE,
    DROPPED,
    DUE,
    ErrorRouting,
    FEEDRUN,
    IndexMod,
    KNOWN_KINDS,
    LIVE,
    LOST,
    NOTE_NAMES,
    NOT_SENT,
    NoContextProducerUp,
    OnQueueFull,
    PENDING,
    QUEUED,
    RUNNING,
    RecoveryDeferralConfig,
    STALE,
    STATUS_NAMES,
    UNFED,
    UP_KINDS,
    _set,
)
from .configs import descriptions, named_configs
from .properties import build_properties


class RecoveryDeferralModel(Model):
    name = "recovery-deferral"
    Config = RecoveryDeferralConfig

    # -- configurations ------------------------------------------------------
    @classmethod
    def configs(cls):
        return named_configs()

    @classmethod
    def describe_configs(cls):
        return descriptions()

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
        return build_properties(self)

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
