"""The named claims of the recovery-deferral model (seed 004): what must hold, each with a witness
so that no check passes vacuously.  ``build_properties`` reads the model's state tuple; what it
knows of the configuration's script (which event is an error, its match, its recovery context, its
queues) it reads off the configuration itself (:class:`_Script`), not off the model's own tables:
a slip in those tables is then a step that breaks a claim, not a claim that moves with the slip
(issue 31: model mutation coverage)."""

from __future__ import annotations

from conq.model.kernel import always, always_step, leads_to, sometimes
from .state import (
    CANCELLED,
    DELIVERED,
    DONE,
    DROPPED,
    DUE,
    ErrorRouting,
    FEEDRUN,
    LOST,
    NOT_SENT,
    OnQueueFull,
    PENDING,
    QUEUED,
    RUNNING,
    SCHED,
    STALE,
    UNFED,
    UP_KINDS,
    NOTES,
    REC,
    TOLD,
    UPCTX,
)


class _Script:
    """The claims' reading of a configuration's event script (seed 004, REFERENCE.md section 3): per
    event its producer, match, kind and recovery, the RecoveryContext it belongs to and the one the
    tracker counts it under, the queues the TaskAllocator may give it; per status callback whether
    it is an up signal.  Written from the configuration's documentation (state.py), apart from the
    model's ``__init__``."""

    def __init__(self, model):
        c = self.config = model.config
        self.ev = tuple(tuple(e) for e in c.events)
        self.n_events = len(self.ev)
        self.n_ctx = 1 + c.producers * c.recoveries
        self.script = tuple(tuple(e for e, (pr, _, _) in enumerate(self.ev) if pr == p) for p in range(c.producers))
        self.ev_match = tuple(m for _, m, _ in self.ev)
        # kind: 0 live, r >= 1 resent by recovery r, -1 an error with no context, -(r + 1) an error of recovery r
        self.ev_error = tuple(k <= -1 for _, _, k in self.ev)
        self.ev_rec = tuple(max(k, 0) if k >= 0 else max(-k - 1, 0) for _, _, k in self.ev)
        self.ev_ctx_full = tuple(self.ctx(pr, r) for (pr, _, _), r in zip(self.ev, self.ev_rec))
        # DEV-010: upstream queues error tasks untracked (-1: counted under no context)
        self.ev_ctx = tuple(x if not (err and not c.track_error_tasks) else -1
                            for x, err in zip(self.ev_ctx_full, self.ev_error))
        # queued errors about a match keep its order (DEV-007); an error handled on the feed thread by
        # configuration is outside the per-match order
        self.ev_ordered = tuple(m >= 0 and (not err or not c.enabled or c.handle_errors_async)
                                for (_, m, _), err in zip(self.ev, self.ev_error))
        self.is_up = tuple(k in UP_KINDS for k in c.callbacks)

    def newest(self, s, p: int) -> int:
        """Producer p's newest recovery: the one its last onRecoveryInitiated stored or, with a late
        initiation (DEV-032), a newer one some of whose resent events already arrived."""
        seen = max((self.ev_rec[e] for e in self.script[p][:s[0][p]]), default=0)
        return max(s[REC][p], seen) if self.config.late_initiation else s[REC][p]

    def known(self, s, p: int) -> int:
        """The recovery the listener ties producer p's up to: the newest (correlate_with_events, the
        reference) or the stored one (upstream, DEV-032)."""
        return self.newest(s, p) if self.config.correlate_with_events else s[REC][p]

    def ctx(self, p: int, r: int) -> int:
        """RecoveryContext (p, request id r) as a number: 0 is NONE (r = 0), then per producer its
        request ids 1..recoveries."""
        return 1 + p * self.config.recoveries + (r - 1) if r else 0

    def random_queue(self, e: int) -> bool:
        """The task id is random (TaskID.none()): an error about no event, or any error under the
        seed's literal random routing (DEV-007)."""
        return self.ev_match[e] < 0 or (self.ev_error[e] and self.config.error_routing is ErrorRouting.RANDOM)

    def queues(self, e: int) -> tuple[int, ...]:
        """TaskAllocator: hash(event id) mod queues, the event id being the match's; any queue for a
        random task id."""
        Q = self.config.queues
        return tuple(range(Q)) if self.random_queue(e) else (self.ev_match[e] % Q,)

    def allocated(self, s, x: int) -> int:
        return sum(1 for e in range(self.n_events) if self.ev_ctx[e] == x and s[3][e] in (QUEUED, RUNNING, DONE))

    def completed(self, s, x: int) -> int:
        return sum(1 for e in range(self.n_events) if self.ev_ctx[e] == x and s[3][e] == DONE)

    def _invoked(self, a, o):
        """The event a step hands to the customer's OddsFeedListener (a worker's run, or the feed
        thread running it itself), else None."""
        return o[1] if o.__class__ is tuple and len(o) == 2 and o[0] in ("listener", "feed-thread") else None

    def _up_key(self, s, a, o):
        """(p, r, k) of the up signal a step hands to the customer, r the request id of the context it
        was correlated with (not the producer's current one), else None."""
        if a[0] == "poll" and o == "delivered":
            return (a[1], s[UPCTX][a[1]][a[2]], a[2])
        if a[0] == "deliver":
            return s[SCHED]
        if a[0] == "status" and o == "forwarded" and self.is_up[a[2]]:
            return (a[1], self.known(s, a[1]), a[2])
        return None

    def _delivered_up(self, s, a, o, t):
        key = self._up_key(s, a, o)
        return None if key is None else key[:2]

    def describe_event(self, e: int) -> str:
        p, m, k = self.ev[e]
        kind = "live" if k == 0 else f"recovery {k}" if k > 0 else "error" + (f" of recovery {-k - 1}" if k < -1 else "")
        return f"producer {p}, " + (f"match {m}" if m >= 0 else "no event") + f", {kind}"


def build_properties(model):
    self = _Script(model)
    c = self.config
    K = len(c.callbacks)
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
            x = self.ctx(a[1], s[UPCTX][a[1]][a[2]])  # the up's own context (producer, request id)
            return any(self.ev_ctx[e] == x and s[3][e] in (QUEUED, RUNNING) for e in range(n))

        props.append(
            always_step(
                "up-waits-only-for-own-tasks",
                "a deferred ProducerUp waits only while tasks of its own recovery context (its producer and request id) are outstanding "
                "(another producer's or another recovery's tasks never delay it)",
                own_tasks_only,
                witness=lambda s, a, o, t: a[0] == "poll" and isinstance(o, int),
            )
        )
        if P > 1 and any(self.is_up):
            props.append(
                sometimes(
                    "up-not-delayed-by-other-producer",
                    "a ProducerUp of a recovery context has reached the customer while another producer still has recovery tasks outstanding",
                    lambda s: any(
                        any(v == DELIVERED and self.is_up[k] and s[UPCTX][p][k] > 0 for k, v in enumerate(s[NOTES][p]))
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
            "the customer gets a ProducerUp only when every event of its own recovery context (the producer and request id it was correlated with) "
            "received so far (error events included) has been processed by its listener",
            up_after_tasks,
            witness=up_after_tasks_w,
        )
    )

    # issue 32, DEV-032: the up is tied to the recovery it completes even when onRecoveryInitiated comes
    # late -- the producer's newest recovery the listener knows (stored, or seen on its resent events)
    def up_after_latest(s, a, o, t):
        d = self._delivered_up(s, a, o, t)
        if d is None:
            return True
        p = d[0]
        x = self.ctx(p, self.newest(s, p))
        return x == 0 or all(s[3][e] in (DONE, FEEDRUN) for e in range(n)
                             if self.ev_ctx_full[e] == x and s[3][e] != UNFED)

    props.append(
        always_step(
            "up-after-latest-recovery-events",
            "the customer gets a ProducerUp of a producer only when every resent event received so far of the producer's newest "
            "recovery -- the one its last onRecoveryInitiated stored, or a newer one whose events came first -- has been processed "
            "(an up is never delivered against an older recovery while the newer one's events are outstanding)",
            up_after_latest,
            witness=lambda s, a, o, t: (d := self._delivered_up(s, a, o, t)) is not None and self.newest(s, d[0]) > 0,
        )
    )

    def at_most_once(s, a, o, t):
        key = self._up_key(s, a, o)
        if key is None:
            return True
        p, r, k = key
        return s[UPCTX][p][k] != r or s[NOTES][p][k] != DELIVERED

    props.append(
        always_step(
            "up-at-most-once",
            "each up callback of a recovery context reaches the customer at most once",
            at_most_once,
            witness=lambda s, a, o, t: self._up_key(s, a, o) is not None,
        )
    )

    def not_stale(s, a, o, t):
        d = self._delivered_up(s, a, o, t)  # the up's own context, not the producer's current one
        return d is None or s[REC][d[0]] == d[1]

    props.append(
        always_step(
            "no-stale-up",
            "no ProducerUp reaches the customer for a recovery context other than its producer's latest recovery "
            "(a superseded recovery's up is never delivered after a newer recovery of the producer was announced)",
            not_stale,
            witness=lambda s, a, o, t: (d := self._delivered_up(s, a, o, t)) is not None and d[1] > 0,
        )
    )

    # -- seed 004 "Deferring of ProducerUp": the strict sequence (recovery initiated,
    # missed messages resent, ProducerUp) as the customer sees it.  Checked in legacy
    # mode too.
    resent = [e for e in range(n) if self.ev_rec[e] > 0]
    up_kinds = [k for k in range(K) if self.is_up[k]]

    def initiated_first(s):
        told, status, notes, upctx = s[TOLD], s[3], s[NOTES], s[UPCTX]
        # with late_initiation the SDK itself calls onRecoveryInitiated after the recovery's events were
        # resent (DEV-032): no listener can put it first; the up still comes after it
        if not c.late_initiation and any(status[e] in (RUNNING, DONE, FEEDRUN) and told[self.ev[e][0]] < self.ev_rec[e]
                                         for e in resent):
            return False
        return all(notes[p][k] != DELIVERED or upctx[p][k] <= told[p] for p in range(P) for k in up_kinds)

    def initiated_first_w(s):
        if up_kinds:  # a ProducerUp of a recovery has reached the customer
            return any(s[NOTES][p][k] == DELIVERED and s[UPCTX][p][k] > 0 for p in range(P) for k in up_kinds)
        return any(s[3][e] in (DONE, FEEDRUN) for e in resent)

    props.append(
        always(
            "recovery-initiated-first",
            "the customer's onRecoveryInitiated for a recovery context (producer, request id) comes before any resent event "
            "of that recovery reaches its OddsFeedListener (unless the SDK calls it late: late_initiation) and before any "
            "ProducerUp of that recovery context",
            initiated_first,
            witness=initiated_first_w,
        )
    )

    if c.enabled and up_kinds:
        # "we store that specific RecoveryContext so we can correlate the corresponding
        # ProducerUp": a deferred up belongs to its producer's latest recovery, and a new
        # recovery supersedes the deferred ups of the one before
        def of_latest(s):
            # a task past its read (upstream's sched, DEV-015) is no longer deferred: no-stale-up speaks of it
            # (with late_initiation an up may be tied to the next recovery, seen on its events before its
            # onRecoveryInitiated: never to an older one; without it, >= is ==: an up is tied to the stored one)
            rec, notes, upctx = s[REC], s[NOTES], s[UPCTX]
            return all(upctx[p][k] >= rec[p] for p in range(P) for k in up_kinds if notes[p][k] in (PENDING, STALE, DUE))

        second = 2 if c.recoveries >= 2 else 1  # with re-recoveries: a deferred up of a later recovery

        props.append(
            always(
                "deferred-up-of-latest-recovery",
                "every deferred ProducerUp is correlated with the recovery context its producer's latest onRecoveryInitiated stored "
                "(or, when that call comes late, the next one, seen on its resent events): a new recovery supersedes the deferred "
                "ProducerUps of the one before",
                of_latest,
                witness=lambda s: any(
                    s[NOTES][p][k] == PENDING and s[UPCTX][p][k] == s[REC][p] >= second for p in range(P) for k in up_kinds
                ),
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
        return s[UPCTX][p][k] != r or s[NOTES][p][k] != STALE

    if nonup_kinds := [k for k in range(len(c.callbacks)) if not self.is_up[k]]:
        if defers:
            props.append(
                always_step(
                    "no-up-after-down",
                    "no deferred ProducerUp of a recovery context reaches the customer after a Down status of its producer was forwarded since the up was received",
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
                "an up callback is deferred while tasks of its own recovery context are outstanding",
                lambda s: any(
                    v == PENDING and s[4][self.ctx(p, s[UPCTX][p][k])] > 0 for p, np in enumerate(s[NOTES]) for k, v in enumerate(np)
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
                    and any(len(s[1][q]) >= c.queue_size for q in self.queues(self.script[p][s[0][p]]))
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

    props += _issue31_claims(self, c, n, P, K)

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
                        f"a deferred ProducerUp of producer {p} is eventually delivered once the tasks of its own recovery context "
                        f"have completed (or superseded by a new recovery, or cancelled by a Down)",
                        lambda s, p=p: any(v in (PENDING, DUE, STALE) for v in s[8][p]),
                        lambda s, p=p: all(v not in (PENDING, DUE, STALE) for v in s[8][p]) and not (s[9] and s[9][0] == p),
                        fairness=fair_words,
                    )
                )
    if not c.forward_initiated_at_once:
        for p in range(P):
            props.append(
                leads_to(
                    f"recovery-initiated-reaches-customer-{p}",
                    f"every recovery producer {p}'s SDK initiated is eventually announced to the customer's "
                    "onRecoveryInitiated (seed 004: \"onRecoveryInitiated() - invoked when a recovery is initiated\")",
                    lambda s, p=p: s[TOLD][p] < s[REC][p],
                    lambda s, p=p: s[TOLD][p] == s[REC][p],
                    fairness=fair_words + "; the scheduler's call of the customer's onRecoveryInitiated",
                )
            )
    return props


def _issue31_claims(self: _Script, c, n: int, P: int, K: int) -> list:
    """Rules the model had that no claim pinned down (issue 31, found by ``conq mutate-model
    recovery-deferral``): where an event is queued, what the feed thread runs itself, what the customer
    is told of a recovery, and the listener's record of each status callback."""
    props = []
    by_event = [e for e in range(n) if not self.random_queue(e)]

    # REFERENCE.md section 3 "Allocation: queue index = hash(event id) mod number of queues"; seed 004
    # "Configuration": "each task is allocated to a queue based on a hash of it's Task ID"
    def on_match_queue(s):
        queues, running = s[1], s[2]
        for q in range(c.queues):
            for e in queues[q] + ((running[q],) if running[q] >= 0 else ()):
                if not self.random_queue(e) and q != self.ev_match[e] % c.queues:
                    return False
        return True

    def two_matches_waiting(s):
        placed = [(q, e) for q in range(c.queues) for e in s[1][q] + ((s[2][q],) if s[2][q] >= 0 else ())]
        return len({self.ev_match[e] for _, e in placed if not self.random_queue(e)}) >= min(2, c.matches)

    if c.enabled and by_event:
        props.append(always(
            "event-on-its-match-queue",
            "a queued or running event whose task id is its match's (every sport event, and an error about a match "
            "routed by event) is on queue hash(match) mod queues, so one match's events share a queue",
            on_match_queue,
            witness=two_matches_waiting,
        ))
    # an error about no event has a random task id (TaskID.none()): any queue may get it
    anywhere = [e for e in range(n) if self.random_queue(e)]
    if c.enabled and c.handle_errors_async and anywhere and c.queues > 1:
        for q in range(c.queues):
            props.append(sometimes(
                f"random-task-id-on-queue-{q}",
                f"an event with a random task id (an error about no event, or any error routed at random) is queued on "
                f"queue {q}: TaskID.none() may hash to any queue",
                lambda s, q=q: any(self.random_queue(e) for e in s[1][q]) or (s[2][q] >= 0 and self.random_queue(s[2][q])),
            ))

    # seed 004 "Configuration": "handleErrorsAsynchronously - whether error events are handled on the
    # RabbitMQ thread, or if they should be spread ... over the task queues"; "enabled"
    def feed_runs_what_it_must(s, a, o, t):
        if a[0] != "feed" or s[6] != -1:
            return True
        e = self.script[a[1]][s[0][a[1]]]
        here = not c.enabled or (self.ev_error[e] and not c.handle_errors_async)
        if here:
            return o == ("feed-thread", e)
        if o.__class__ is tuple and o[0] == "feed-thread":
            return c.on_queue_full is OnQueueFull.CALLER_RUNS  # a full queue, the caller-runs variant
        return True

    feed_here_seen = not c.enabled or (not c.handle_errors_async and any(self.ev_error))
    props.append(always_step(
        "feed-thread-runs-only-its-own",
        "the feed thread runs the customer's listener itself exactly for what the configuration gives it: every event "
        "with the concurrent listener disabled, error events with handleErrorsAsynchronously=false; anything else it "
        "hands to a queue (or, the caller-runs variant, runs when the queue is full)",
        feed_runs_what_it_must,
        witness=lambda s, a, o, t: a[0] == "feed" and (o.__class__ is tuple and o[0] == "feed-thread" if feed_here_seen
                                                       else o.__class__ is tuple and o[0] == "queued"),
        actions=("feed",),
    ))

    # an event's status says where it is: queued <-> in a queue, running <-> on a worker
    def status_matches_place(s):
        queues, running, status = s[1], s[2], s[3]
        queued = {e for q in queues for e in q}
        busy = {e for e in running if e >= 0}
        return all((e in queued) == (status[e] == QUEUED) and (e in busy) == (status[e] == RUNNING) for e in range(n))

    if c.enabled:
        props.append(always(
            "event-status-matches-its-place",
            "an event is queued exactly while it sits in a task queue and running exactly while a worker runs it",
            status_matches_place,
            witness=lambda s: any(v == RUNNING for v in s[3]) and any(v == QUEUED for v in s[3]),
        ))

    # what the customer is told of a recovery: never one the SDK did not initiate
    props.append(always(
        "customer-told-only-initiated-recoveries",
        "the customer's onRecoveryInitiated is called only with a request id of a recovery the SDK initiated "
        "(never ahead of the SDK)",
        lambda s: all(s[TOLD][p] <= s[REC][p] for p in range(P)),
        witness=lambda s: any(s[TOLD][p] == s[REC][p] >= 1 for p in range(P)),
    ))

    # status callbacks come from the SDK's recovery manager: after a recovery, unless configured otherwise
    props.append(always_step(
        "status-callbacks-follow-a-recovery",
        "the SDK makes a status callback only once a recovery of its producer was initiated -- by its onRecoveryInitiated, "
        "or (late_initiation, DEV-032) by the resent events that came first (callbacks_without_recovery: also before)",
        lambda s, a, o, t: a[0] != "status" or c.callbacks_without_recovery or self.newest(s, a[1]) > 0,
        witness=lambda s, a, o, t: a[0] == "status" and self.newest(s, a[1]) > 0,
        actions=("status",),
    ))
    nonup = [k for k in range(K) if not self.is_up[k]]
    resent = [e for e in range(n) if self.ev_rec[e] > 0]
    if nonup and resent and c.up_after_events:
        props.append(sometimes(
            "down-while-recovery-resends",
            "a status callback other than an up signal reaches the customer while its recovery's events are still "
            "arriving (only up signals wait for the resent events: snapshot_complete)",
            lambda s: any(s[NOTES][p][k] == DELIVERED for p in range(P) for k in nonup if s[REC][p] > 0
                          and any(s[3][e] == UNFED and self.ev[e][0] == p and self.ev_rec[e] == s[REC][p] for e in resent)),
        ))
    props.append(always_step(
        "only-ups-deferred",
        "a status callback reaches the customer in its own step unless it is an up signal and the concurrent listener "
        "is enabled (seed 004: the listener defers ProducerUp; the legacy SDK forwards every callback)",
        lambda s, a, o, t: a[0] != "status" or o == "forwarded" or (c.enabled and self.is_up[a[2]] and o in ("deferred", "dropped")),
        # where the configuration has one: a callback that is not deferred; else an up that is
        witness=(lambda s, a, o, t: a[0] == "status" and o == "forwarded" and (not c.enabled or not self.is_up[a[2]]))
        if nonup or not c.enabled else (lambda s, a, o, t: a[0] == "status" and o == "deferred"),
        actions=("status",),
    ))

    # the listener's record of each status callback (notes, upctx): what the at-most-once and the
    # own-context claims read, so it must say what happened
    def record_follows_fate(s, a, o, t):
        name = a[0]
        if name == "status":
            p, k = a[1], a[2]
            want = {"forwarded": DELIVERED, "deferred": PENDING, "dropped": LOST}.get(o)
            return want is not None and t[NOTES][p][k] == want
        if name == "poll":
            p, k = a[1], a[2]
            if o == "delivered":
                return t[NOTES][p][k] == DELIVERED
            if o == "due":
                return t[NOTES][p][k] == DUE and t[SCHED] == (p, s[UPCTX][p][k], k)
            if o == "superseded":  # a newer recovery's events came first (late_initiation, DEV-032)
                return t[NOTES][p][k] == NOT_SENT and t[UPCTX][p][k] == 0
            return t[NOTES] == s[NOTES]
        if name == "deliver":
            p, r, k = s[SCHED]
            return t[SCHED] == () and (t[NOTES][p][k] == DELIVERED if s[REC][p] == r and s[NOTES][p][k] == DUE
                                       else t[NOTES] == s[NOTES])
        return True

    props.append(always_step(
        "callback-record-follows-its-fate",
        "the listener records what became of each status callback in the step that decides it: forwarded or delivered "
        "to the customer, deferred, dropped, read 0 and due, or superseded by a newer recovery seen first on its events",
        record_follows_fate,
        witness=lambda s, a, o, t: a[0] == "status" and o in ("forwarded", "deferred"),
        actions=("status", "poll", "deliver"),
    ))

    def opens_epoch(s, a) -> bool:
        """The step puts producer a[1]'s SDK in a new recovery epoch: its onRecoveryInitiated, or (late
        initiation, DEV-032) the first resent event of a recovery newer than any the listener knows."""
        if a[0] == "recover":
            return True
        if a[0] != "feed" or not c.late_initiation or s[0][a[1]] >= len(self.script[a[1]]):
            return False
        return self.ev_rec[self.script[a[1]][s[0][a[1]]]] > self.newest(s, a[1])

    def moves_allowed(s, a, o, t):
        name = a[0]
        epoch = name in ("recover", "feed") and opens_epoch(s, a)
        for p in range(P):
            if epoch and a[1] == p:
                # a new epoch: every callback not kept is unsent again, with no context; a kept one keeps its
                # record and context.  Kept: a deferred up when a new recovery does not supersede it; with late
                # initiation, a deferred up when the next recovery's first event arrives, and an up already
                # tied to the recovery being initiated
                r = s[REC][p] + 1
                for k, v in enumerate(s[NOTES][p]):
                    kept = ((name == "recover" and not c.new_recovery_supersedes and v in (PENDING, STALE))
                            or (name == "feed" and v in (PENDING, STALE, DUE))
                            or (name == "recover" and c.late_initiation and c.correlate_with_events
                                and c.new_recovery_supersedes and s[UPCTX][p][k] == r and v != NOT_SENT))
                    want = (v, s[UPCTX][p][k]) if kept else (NOT_SENT, 0)
                    if (t[NOTES][p][k], t[UPCTX][p][k]) != want:
                        return False
                continue
            for k in range(K):
                x, y = s[NOTES][p][k], t[NOTES][p][k]
                if x == y:
                    continue
                mine = len(a) > 1 and a[1] == p
                if name == "status" and mine and a[2] == k:
                    ok = x == NOT_SENT
                elif name == "status" and mine:  # another callback of the producer: a Down, or a replacing up
                    ok = x in (PENDING, STALE) and y in (CANCELLED, STALE, LOST)
                elif name == "poll" and mine and a[2] == k:
                    ok = x in (PENDING, STALE) and (y in (DELIVERED, DUE) or (y == NOT_SENT and c.late_initiation))
                elif name == "deliver" and s[SCHED][0] == p and s[SCHED][2] == k:
                    ok = x == DUE and y == DELIVERED
                else:  # a feed step that opens no epoch, or another producer's step, leaves the record alone
                    ok = False
                if not ok:
                    return False
        return True

    props.append(always_step(
        "callback-records-move-as-allowed",
        "a callback's record changes only as the listener's steps allow: sent (once per recovery epoch), cancelled or "
        "replaced while deferred, delivered, due or superseded after a poll, and every callback not kept unsent again, "
        "with no context, when its producer's SDK enters a new recovery (its initiation, or its first resent event "
        "with a late initiation)",
        moves_allowed,
        witness=(lambda s, a, o, t: a[0] == "recover" and any(v != NOT_SENT for v in s[NOTES][a[1]])) if c.recoveries > 1
        else (lambda s, a, o, t: s[NOTES] != t[NOTES] and a[0] != "status") if c.enabled and any(self.is_up)
        else (lambda s, a, o, t: s[NOTES] != t[NOTES]),
        actions=("recover", "status", "poll", "deliver", "feed"),
    ))
    if c.forward_initiated_at_once:
        # DEV-032: the port reports a late onRecoveryInitiated as such (conformance/recovery_deferral/driver.py,
        # the port protocol's "forwarded-late"); the scheduler's fairness hangs on it (model.fair)
        props.append(always_step(
            "initiation-late-exactly-after-its-events",
            "onRecoveryInitiated reaches the customer marked late exactly when some of that recovery's resent events "
            "reached the listener first (late_initiation, DEV-032: RecoveryManagerImpl.ProducerRecoveryRequester.run "
            "calls it only once /recovery/initiate_request answered)",
            lambda s, a, o, t: a[0] != "recover" or o == ("forwarded-late" if c.late_initiation
                                                          and self.newest(s, a[1]) > s[REC][a[1]] else "forwarded"),
            witness=lambda s, a, o, t: a[0] == "recover" and o == ("forwarded-late" if c.late_initiation else "forwarded"),
            actions=("recover",),
        ))
    props.append(always(
        "unsent-callback-has-no-context",
        "a status callback not sent in its producer's current epoch is correlated with no recovery context",
        lambda s: all(s[UPCTX][p][k] == 0 for p in range(P) for k in range(K) if s[NOTES][p][k] == NOT_SENT),
        witness=lambda s: any(s[UPCTX][p][k] > 0 and s[NOTES][p][k] != NOT_SENT for p in range(P) for k in range(K)),
    ))
    return props
