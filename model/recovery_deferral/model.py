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
  supersedes (cancels) the producer's deferred callbacks.  Each callback
  records the context it was correlated with (``upctx``), and the properties
  about an up speak of that context, not of the producer's current one.

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
sched, backlog, told, upctx)``.
"""

from __future__ import annotations

from conq.model.kernel import Model, ModelError, int_range

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
    FIELDS,
    NOTES,
    REC,
    SCHED,
    TOLD,
    UPCTX,
    _set,
)
from .configs import descriptions, named_configs
from .properties import build_properties


def _put(s: tuple, **changes) -> tuple:
    """``s`` with the named fields replaced."""
    out = list(s)
    for f, v in changes.items():
        out[FIELDS.index(f)] = v
    return tuple(out)


class RecoveryDeferralModel(Model):
    name = "recovery-deferral"
    Config = RecoveryDeferralConfig
    #: a counterexample's changes per event (e0), worker queue (q0: its events and what it runs)
    #: and producer (p0: its recovery and callbacks); the rest (feed, tracker) is the SDK's
    #: (model/engines/changes.py)
    view_parts = {"events": "e", "queues": ("q", "events"), "running": ("q", "running"),
                  "recovery": ("p", "recovery"), "callbacks": ("p", "callbacks"),
                  "customer_told_recovery": ("p", "customer_told"), "callback_contexts": ("p", "contexts")}
    view_root = "sdk"

    # -- configurations ------------------------------------------------------
    @classmethod
    def configs(cls):
        return named_configs()

    @classmethod
    def describe_configs(cls):
        return descriptions()

    # -- derived tables ----------------------------------------------------------
    #: p a producer, q a task queue, k a status callback (index into ``callbacks``)
    ACTIONS = {
        "feed": ("p",), "track": (), "run": ("q",), "done": ("q",), "recover": ("p",),
        "status": ("p", "k"), "poll": ("p", "k"), "deliver": (), "announce": ("p",),
    }
    PARAM_TYPES = {"p": int, "q": int, "k": int}

    @classmethod
    def param_range(cls, config, action, param):
        return {"p": range(config.producers), "q": range(config.queues), "k": range(len(config.callbacks))}.get(param)

    @classmethod
    def validate_config(cls, config):
        problems = super().validate_config(config)
        bad = {p.partition(":")[0] for p in problems}
        c = config
        for f in ("producers", "matches", "queues", "workers", "queue_size"):
            int_range(problems, c, f, 1, why="producers, matches, queues, workers and queue_size must be >= 1")
        int_range(problems, c, "recoveries", 0)
        if "callbacks" not in bad:
            for k in c.callbacks:
                if k not in KNOWN_KINDS:
                    problems.append(f"callbacks: unknown status callback {k!r} (known: {sorted(KNOWN_KINDS)})")
                    break
            if len(set(c.callbacks)) != len(c.callbacks):
                problems.append(f"callbacks: each status callback at most once, got {list(c.callbacks)}")
        if "events" not in bad:
            ints_ok = not bad & {"producers", "matches", "recoveries"} and c.producers >= 1 and c.matches >= 1 and c.recoveries >= 0
            if not c.events:
                problems.append("events: the script must hold at least one event (producer, match, kind)")
            for e in c.events:
                if not (isinstance(e, tuple) and len(e) == 3 and all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
                    problems.append(f"events: an event is (producer, match, kind), got {e!r}")
                    break
                pr, m, k = e
                if ints_ok and (not (0 <= pr < c.producers and -1 <= m < c.matches and -1 - c.recoveries <= k <= c.recoveries)
                                or (m < 0 and k >= 0)):
                    problems.append(
                        f"events: event {list(e)} out of bounds (producer in 0..{c.producers - 1}, match in -1..{c.matches - 1}, "
                        f"kind in {-1 - c.recoveries}..{c.recoveries}; match -1 only for an error event)")
                    break
        return problems

    def __init__(self, config=None):
        c = config if config is not None else self.Config()
        # the policy switches may arrive as their values (a trace header, dataclasses.replace)
        for f, E in (("on_queue_full", OnQueueFull), ("no_context_producer_up", NoContextProducerUp), ("error_routing", ErrorRouting), ("index_mod", IndexMod)):
            v = getattr(c, f)
            if not isinstance(v, E):
                try:
                    object.__setattr__(c, f, E(v))
                except (ValueError, TypeError):
                    raise ModelError(f"{self.name}: {f} must be one of {[m.value for m in E]}, got {v!r}") from None
        super().__init__(c)
        c = self.config
        ev = [tuple(e) for e in c.events]  # validated by validate_config
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
        #: per producer, after its first i events arrived: the newest recovery they were resent by
        #: (the listener learns a recovery from its events: late_initiation)
        self.seen_rec = tuple(
            tuple(max((self.ev_rec[e] for e in self.script[p][:i]), default=0) for i in range(len(self.script[p]) + 1))
            for p in range(c.producers)
        )

    def ctx(self, p: int, r: int) -> int:
        return 0 if r == 0 else 1 + p * self.config.recoveries + r - 1

    def newest(self, s, p: int) -> int:
        """Producer p's newest recovery: the one its last onRecoveryInitiated stored, or
        (``late_initiation``) a newer one whose resent events already arrived.  Without late
        initiation, the stored one."""
        r = s[REC][p]
        return max(r, self.seen_rec[p][s[0][p]]) if self.config.late_initiation else r

    def known(self, s, p: int) -> int:
        """The recovery the listener ties producer p's up to: the newest one
        (``correlate_with_events``: the stored one, or a newer one seen on its events:
        ``TaskLifecycleTracker.newest_request``), or the stored one only (upstream, DEV-032)."""
        return self.newest(s, p) if self.config.correlate_with_events else s[REC][p]

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
                (0,) * P,  # told: the latest request id the customer's onRecoveryInitiated was called with
                # upctx: per producer, per status callback of the epoch, the request id of the
                # RecoveryContext it was correlated with when it arrived (0: none / not sent);
                # an up's deferred task polls (p, upctx)
                ((0,) * K,) * P,
            )
        ]

    def packed(self):
        """The packed view the explorer runs on (packed.py, issue 36), built once; None when the
        configuration's queues are too large to lay out."""
        if "_packed_view" not in self.__dict__:
            from .packed import packed_view

            self._packed_view = packed_view(self)
        return self._packed_view

    def actions(self, s):
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog, told, upctx = s
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
            if told[p] < rec[p]:  # forward_initiated_at_once=False only
                out.append(("announce", p))
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
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog = s[:11]
        tail = s[11:]  # told, upctx: only the global listener's steps change them
        c = self.config
        name = a[0]
        if name == "feed":
            got = self.receive(s, a[1])
            return [] if got is None else self.hand_off(got[1], got[0])
        if name == "track":
            if slot == -1:
                return []
            x = self.ev_ctx[slot]
            return [("tracked", (fed, queues, running, status, _set(pending, x, pending[x] + 1), entries | (1 << x), -1, rec, notes, sched, backlog) + tail)]
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
                (("listener", e), (fed, _set(queues, q, queues[q][1:]), _set(running, q, e), _set(status, e, RUNNING), pending, entries, slot, rec, notes, sched, bl2) + tail)
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
            return [("completed", (fed, queues, _set(running, q, -1), _set(status, e, DONE), p2, entries, slot, rec, notes, sched, backlog) + tail)]
        if name == "recover":
            p = a[1]
            if not (0 <= p < c.producers) or rec[p] >= c.recoveries:
                return []
            return self.on_recovery_initiated(s, p)
        if name == "announce":
            p = a[1]
            if not (0 <= p < c.producers) or s[TOLD][p] >= rec[p]:
                return []
            return self.forward_recovery_initiated(s, p)
        if name == "status":
            _, p, k = a
            if not (0 <= p < c.producers and 0 <= k < len(c.callbacks)) or notes[p][k] != NOT_SENT:
                return []
            return self.on_producer_status_change(s, p, k)
        if name == "poll":
            _, p, k = a
            if sched or not (0 <= p < c.producers and 0 <= k < len(c.callbacks)) or notes[p][k] not in (PENDING, STALE):
                return []
            return self.deferred_task_run(s, p, k)
        if name == "deliver":
            if not sched:
                return []
            p, r, k = sched
            n2 = notes
            if rec[p] == r and notes[p][k] == DUE:
                n2 = _set(notes, p, _set(notes[p], k, DELIVERED))
            return [(("delivered", p, r), (fed, queues, running, status, pending, entries, slot, rec, n2, (), backlog) + tail)]
        raise ModelError(f"{self.name}: unknown action {a!r}")

    # -- the feed thread: the SDK's delivery of an event, and the listener's hand-off ------------------
    # (one model step, ``feed``; two functions, because a call-level port's feed thread may wait for
    # room between them: conformance/recovery_deferral/calls.py composes that wait from these two)

    def receive(self, s, p):
        """The SDK's half of ``feed(p)``: producer p's next event ``e`` reaches the feed thread (the
        RabbitMQ consumer's ``handleDelivery``).  ``(e, state)`` with ``fed[p]`` counting it, or None when
        the environment does not send it now: the feed thread is still in upstream's second submit step
        (``slot``), p has no event left, or it is resent by a recovery not initiated yet -- with
        ``late_initiation``, by one the SDK has not started yet (it starts recovery r+1 only after it
        called r's onRecoveryInitiated; r+1's events may come before r+1's own call, DEV-032).

        With ``late_initiation``, the first resent event of p's next recovery puts the SDK in that
        recovery's epoch (its status callbacks may come again): the callbacks of the epoch before are
        not-sent again, except the deferred ones, which stay until a check or the initiation supersedes
        them.  The listener knows the recovery from here on (``newest``: it has received one of its events,
        whether or not its feed thread still waits for room to queue it)."""
        c = self.config
        fed = s[0]
        if s[6] != -1 or not (0 <= p < c.producers) or fed[p] >= len(self.script[p]):
            return None
        e = self.script[p][fed[p]]
        r = self.ev_rec[e]
        rec = s[REC]
        if r > rec[p] + (1 if c.late_initiation else 0):
            return None
        t = (_set(fed, p, fed[p] + 1),) + s[1:]
        if c.late_initiation and r > self.seen_rec[p][fed[p]] and r > rec[p]:
            notes, upctx = s[NOTES], s[UPCTX]
            keep = tuple(v in (PENDING, STALE, DUE) for v in notes[p])
            t = _put(t, notes=_set(notes, p, tuple(v if kp else NOT_SENT for v, kp in zip(notes[p], keep))),
                     upctx=_set(upctx, p, tuple(x if kp else 0 for x, kp in zip(upctx[p], keep))))
        return e, t

    def hand_off(self, s, e):
        """The listener's half of ``feed``: the feed thread hands received event ``e`` (``receive``) to
        its task queue (``ConcurrentOddsFeedListener`` -> ``TaskQueuer`` -> ``TaskAllocator``,
        ``TaskExecutor.submit``): counted and queued, or, on a full queue, dropped (upstream, DEV-001)
        or run on the feed thread (caller-runs); with the reference's ``block`` there is no outcome (the
        feed thread waits for room: the model has no step for that wait).  Legacy, or an error event
        handled synchronously: the customer's listener runs on the feed thread."""
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog = s[:11]
        tail = s[11:]
        c = self.config
        m = self.ev_match[e]
        ordered = self.ev_ordered[e]

        def out(obs, queues2, st_e, pending2=pending, entries2=entries, slot2=slot, keep=False):
            # keep: the event waits in its queue, so it joins its match's backlog
            bl = _set(backlog, m, backlog[m] + (e,)) if ordered and keep else backlog
            return (obs, (fed, queues2, running, _set(status, e, st_e), pending2, entries2, slot2, rec, notes, sched, bl) + tail)

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

    # -- the global listener: one function per upstream method ----------------------
    # (ConcurrentSDKGlobalEventsListener, PendingRecoveries, DeferredProducerUpTask;
    # the quotes are seed 004 "Deferring of ProducerUp")

    def on_recovery_initiated(self, s, p):
        """``ConcurrentSDKGlobalEventsListener.onRecoveryInitiated`` (with
        ``PendingRecoveries.recoveryInitiated``) for producer p's next recovery.

        "When ConcurrentSDKGlobalEventsListener is notified of onRecoveryInitiated(), we store that
        specific RecoveryContext so we can correlate the corresponding ProducerUp": the stored
        request id is ``rec[p]``.  A new recovery supersedes the producer's deferred ProducerUps
        (upstream cancels the deferred task; a run that already read 0, ``sched``, is not stopped
        by ``future.cancel(false)``: DEV-015); ``new_recovery_supersedes=False`` keeps them, with
        their own context, as the seed's text alone would.  "onRecoveryInitiated() - invoked when a
        recovery is initiated and contains the Request ID": the customer's call, on this thread
        (reference, upstream), or handed to the scheduler (``forward_initiated_at_once=False``).
        """
        c = self.config
        rec, notes, told, upctx = s[REC], s[NOTES], s[TOLD], s[UPCTX]
        r = rec[p] + 1
        K = len(c.callbacks)
        late = c.late_initiation and self.newest(s, p) >= r  # the recovery's events came first (DEV-032)
        if c.new_recovery_supersedes and c.late_initiation and c.correlate_with_events:
            # a new recovery supersedes the deferred ups of older ones; an up that came first and is
            # already tied to this recovery stays (its callback was sent in this recovery's epoch)
            keep = tuple(upctx[p][k] == r and notes[p][k] != NOT_SENT for k in range(K))
            row = tuple(v if kp else NOT_SENT for v, kp in zip(notes[p], keep))
            ctxs = tuple(x if kp else 0 for x, kp in zip(upctx[p], keep))
        elif c.new_recovery_supersedes:
            row, ctxs = (NOT_SENT,) * K, (0,) * K
        else:  # nothing cancels the old recovery's deferred ProducerUps: they keep their context
            keep = tuple(v in (PENDING, STALE) for v in notes[p])
            row = tuple(v if kp else NOT_SENT for v, kp in zip(notes[p], keep))
            ctxs = tuple(x if kp else 0 for x, kp in zip(upctx[p], keep))
        t = _put(s, rec=_set(rec, p, r), notes=_set(notes, p, row), upctx=_set(upctx, p, ctxs))
        if c.forward_initiated_at_once:
            return [("forwarded-late" if late else "forwarded", _put(t, told=_set(told, p, r)))]
        return [("stored", t)]

    def forward_recovery_initiated(self, s, p):
        """``forward_initiated_at_once=False`` only: the scheduler thread calls the customer's
        ``onRecoveryInitiated`` with producer p's next stored request id."""
        told = s[TOLD]
        r = told[p] + 1
        return [(("forwarded", r), _put(s, told=_set(told, p, r)))]

    def on_producer_status_change(self, s, p, k):
        """``ConcurrentSDKGlobalEventsListener.onProducerStatusChange`` (and the deprecated
        ``onProducerUp``: callback kind "ProducerUp") with status callback k of the epoch.

        "onProducerStatusChange() is considered to be a ProducerUp when the status parameter is one
        of ... FirstRecoveryCompleted, ProcessingQueDelayStabilized, ReturnedFromInactivity"; "When
        ConcurrentSDKGlobalEventsListener is notified of onProducerUp() or onProducerStatusChange()
        (with the correct status), then we schedule a DeferredProducerUpTask which polls the status
        of the pending tasks for that specific RecoveryContext": the callback is correlated with the
        producer's stored context, recorded as ``upctx[p][k]``.  Any other status is forwarded at
        once (and, reference, cancels the producer's deferred ProducerUp: DEV-011).
        """
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog, told, upctx = s
        c = self.config
        sdk = self.newest(s, p)  # the SDK's recovery (with late_initiation: possibly one not initiated yet)
        if sdk == 0 and not c.callbacks_without_recovery:
            return []
        up = self.is_up[k]
        if up and c.up_after_events and sdk > 0:
            # the SDK raises it on the feed thread after snapshot_complete,
            # so the feed thread has finished submitting the resent events
            if slot != -1:
                return []
            x = self.ctx(p, sdk)
            if any(self.ev_ctx_full[e] == x and status[e] == UNFED for e in self.script[p]):
                return []
        # the listener ties it to the stored context, or (late_initiation, the reference) to a newer one
        # seen on the producer's events
        r = self.known(s, p)
        np = notes[p]
        u2 = _set(upctx, p, _set(upctx[p], k, r))  # the context stored when it arrived
        if not up and c.enabled:
            # a Down: forwarded at once; it cancels the producer's deferred
            # ProducerUp (DEV-011), or upstream leaves it to fire later
            # (marked STALE, a ghost of "a Down was forwarded since")
            mark = CANCELLED if c.down_cancels_deferred_up else STALE
            np = tuple(mark if v in (PENDING, STALE) else v for v in np)
        if not up or not c.enabled:
            return [("forwarded", _put(s, notes=_set(notes, p, _set(np, k, DELIVERED)), upctx=u2))]
        if r == 0:
            if c.no_context_producer_up is NoContextProducerUp.DROP:
                return [("dropped", _put(s, notes=_set(notes, p, _set(np, k, LOST)), upctx=u2))]
            return [("forwarded", _put(s, notes=_set(notes, p, _set(np, k, DELIVERED)), upctx=u2))]
        if c.replace_deferred:
            np = tuple(LOST if v in (PENDING, STALE) else v for v in np)
        return [("deferred", _put(s, notes=_set(notes, p, _set(np, k, PENDING)), upctx=u2))]

    def deferred_task_run(self, s, p, k):
        """``DeferredProducerUpTask.run``: one poll of producer p's deferred callback k.

        "polls the status of the pending tasks for that specific RecoveryContext. When the count of
        the pending tasks for that RecoveryContext reaches zero, then we propagate the ProducerUp to
        the customers SDKGlobalEventsListener": the task's own context ``(p, upctx[p][k])``.  The
        reference reads, delivers and retires in one step (DEV-015); upstream
        (``poll_then_deliver``) only reads here and delivers in ``deliver``.
        """
        notes, upctx = s[NOTES], s[UPCTX]
        r = upctx[p][k]
        if self.config.late_initiation and self.config.correlate_with_events and self.known(s, p) > r:
            # a newer recovery's events arrived before its onRecoveryInitiated: superseded as by a new
            # recovery (ConcurrentGlobalEventsListener._check, DEV-032); the SDK may call it again in the
            # new epoch.  Each deferred task decides for itself: another deferred up of the producer is
            # superseded by its own check
            return [("superseded", _put(s, notes=_set(notes, p, _set(notes[p], k, NOT_SENT)),
                                        upctx=_set(upctx, p, _set(upctx[p], k, 0))))]
        n = s[4][self.ctx(p, r)]
        if n != 0:
            return [(n, s)]
        if self.config.late_initiation and self.config.correlate_with_events and s[REC][p] != r:
            # its tasks are done, its onRecoveryInitiated has not come yet (late_initiation): it waits for it
            return [("waits-initiation", s)]
        if self.config.poll_then_deliver:
            return [("due", _put(s, notes=_set(notes, p, _set(notes[p], k, DUE)), sched=(p, r, k)))]
        return [("delivered", _put(s, notes=_set(notes, p, _set(notes[p], k, DELIVERED))))]

    # -- symmetry (issue 18) ---------------------------------------------------------
    def _symmetries(self) -> tuple:
        """Every renaming of producers (sp), matches (sm) and task queues (sq) under which this
        configuration's model and properties are invariant, with the renamings they induce on events
        (pi: ``pi[e]`` is e's new id) and on recovery contexts (cp), identity left out.

        The script fixes most of it: producer p's i-th event becomes producer sp[p]'s i-th event (each
        producer's events arrive in script order), so two producers are interchangeable only if their
        scripts agree event by event in kind and, through sm, in match; matches are interchangeable
        only along with their events; a queue renaming must carry every event's possible queues
        (``hash(match) mod queues``, any queue for a random task id) onto the renamed event's, and every
        per-event table (error, recovery, tracked context, ordered, may-crash) must agree.  Callbacks
        are kinds, not parts (``callbacks`` names each kind once): never renamed.  Every property
        quantifies over all producers, events and contexts (properties.py), liveness aside (skipped
        under symmetry: its per-event and per-producer names are not renamed).

        The named configurations' scripts mostly tell the producers apart (reference: producer 1's
        second event is an error, producer 0's is not): which have a renaming is pinned in
        tests/model/recovery_deferral/test_symmetry.py."""
        found = getattr(self, "_sym", None)
        if found is not None:
            return found
        import itertools

        c = self.config
        P, M, Q, R, n = c.producers, c.matches, c.queues, c.recoveries, self.n_events
        ev = self.ev
        out = []
        for sp in itertools.permutations(range(P)):
            if any(len(self.script[p]) != len(self.script[sp[p]]) for p in range(P)):
                continue
            pi = [0] * n
            for p in range(P):
                for e, e2 in zip(self.script[p], self.script[sp[p]]):
                    pi[e] = e2
            cp = [0] + [1 + sp[x // R] * R + x % R for x in range(P * R)]

            def ctx_of(x):
                return x if x <= 0 else cp[x]

            if any(ev[pi[e]][2] != ev[e][2] or self.ev_error[pi[e]] != self.ev_error[e] or self.ev_rec[pi[e]] != self.ev_rec[e]
                   or self.ev_ordered[pi[e]] != self.ev_ordered[e] or self.ev_may_crash[pi[e]] != self.ev_may_crash[e]
                   or self.ev_ctx[pi[e]] != ctx_of(self.ev_ctx[e]) or (ev[e][1] < 0) != (ev[pi[e]][1] < 0) for e in range(n)):
                continue
            for sm in itertools.permutations(range(M)):
                if any(ev[e][1] >= 0 and sm[ev[e][1]] != ev[pi[e]][1] for e in range(n)):
                    continue
                for sq in itertools.permutations(range(Q)):
                    if any(sorted(sq[q] for q in self.ev_queues[e]) != sorted(self.ev_queues[pi[e]]) for e in range(n)):
                        continue
                    if sp == tuple(range(P)) and sm == tuple(range(M)) and sq == tuple(range(Q)):
                        continue
                    out.append((sp, sm, sq, tuple(pi), tuple(cp)))
        self._sym = tuple(out)
        return self._sym

    def permute(self, s, g) -> tuple:
        """``s`` renamed by ``g = (sp, sm, sq, pi, cp)`` (:meth:`_symmetries`) in every field that names
        a producer (fed, rec, notes, sched, told, upctx), a queue (queues, running), an event (the ids
        in queues, running, slot and backlog; the status positions), a match (backlog) or a recovery
        context (pending, entries)."""
        sp, sm, sq, pi, cp = g
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog, told, upctx = s

        def by(perm, xs):
            out = [None] * len(xs)
            for i, x in enumerate(xs):
                out[perm[i]] = x
            return tuple(out)

        ents = 0
        for x in range(len(pending)):
            if (entries >> x) & 1:
                ents |= 1 << cp[x]
        return (
            by(sp, fed),
            by(sq, tuple(tuple(pi[e] for e in q) for q in queues)),
            by(sq, tuple(pi[e] if e >= 0 else e for e in running)),
            by(pi, status),
            by(cp, pending),
            ents,
            pi[slot] if slot >= 0 else slot,
            by(sp, rec),
            by(sp, notes),
            (sp[sched[0]],) + tuple(sched[1:]) if sched else sched,
            by(sm, tuple(tuple(pi[e] for e in b) for b in backlog)),
            by(sp, told),
            by(sp, upctx),
        )

    def orbit(self, s):
        return list(dict.fromkeys([s] + [self.permute(s, g) for g in self._symmetries()]))

    @property
    def orbit_properties(self) -> frozenset[str]:
        """The per-queue witnesses "random-task-id-on-queue-Q" (properties.py, issue 31) name a queue, so
        a queue renaming swaps them: with symmetry the engines evaluate them on the representative's
        whole orbit (kernel.Model.orbit_properties)."""
        return frozenset(p.name for p in self.property_list() if p.name.startswith("random-task-id-on-queue-"))

    def canonical(self, s):
        """The least of ``s``'s renamings: one representative per class."""
        best = s
        for g in self._symmetries():
            t = self.permute(s, g)
            if t < best:
                best = t
        return best

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
        if name == "announce":
            return ("scheduler", "initiated", action[1])
        if name == "recover" and observation == "forwarded-late":
            # the SDK started this recovery (its events came): it calls onRecoveryInitiated once the
            # HTTP request is answered (late_initiation)
            return ("sdk", "initiated", action[1])
        return None  # arrivals, recoveries and status callbacks are the environment's choice

    # -- helpers for properties ------------------------------------------------------
    def allocated(self, s, x: int) -> int:
        status = s[3]
        return sum(1 for e in range(self.n_events) if self.ev_ctx[e] == x and status[e] in (QUEUED, RUNNING, DONE))

    def completed(self, s, x: int) -> int:
        status = s[3]
        return sum(1 for e in range(self.n_events) if self.ev_ctx[e] == x and status[e] == DONE)

    def _delivered_up(self, s, a, o, t):
        """(p, r) when this step hands an up callback to the customer, else None: p its producer
        and r the request id of *its* RecoveryContext (the one it was correlated with)."""
        key = self._up_key(s, a, o)
        return None if key is None else key[:2]

    def _up_key(self, s, a, o):
        """(p, r, k) of the up callback this step hands to the customer (r: the request id of its
        own RecoveryContext, not the producer's current one), else None."""
        if a[0] == "poll" and o == "delivered":
            return (a[1], s[UPCTX][a[1]][a[2]], a[2])
        if a[0] == "deliver":
            return s[SCHED]
        if a[0] == "status" and o == "forwarded" and self.is_up[a[2]]:
            return (a[1], self.known(s, a[1]), a[2])  # forwarded at once: correlated with the known context
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
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog, told, upctx = s
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
        # shown only where they say more than "recovery" (never in the reference configurations)
        if told != rec:
            v["customer_told_recovery"] = list(told)
        if any(upctx[p][k] != (rec[p] if st != NOT_SENT else 0) for p, np in enumerate(notes) for k, st in enumerate(np)):
            v["callback_contexts"] = [{c.callbacks[k]: x for k, x in enumerate(row)} for row in upctx]
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
        if name == "announce":
            return ("scheduler", "customer")
        return ("scheduler", "global-listener")
