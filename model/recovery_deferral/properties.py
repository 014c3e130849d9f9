"""The named claims of the recovery-deferral model (seed 004): what must hold, each with a witness
so that no check passes vacuously.  ``build_properties`` reads the model's packed state through
the model instance it is given."""

from __future__ import annotations

from conq.model.kernel import always, always_step, leads_to, sometimes
from .state import (
    DELIVERED,
    DONE,
    DROPPED,
    DUE,
    FEEDRUN,
    LOST,
    PENDING,
    QUEUED,
    RUNNING,
    STALE,
    UNFED,
    NOTES,
    REC,
    TOLD,
    UPCTX,
)


def build_properties(self):
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
                        f"a deferred ProducerUp of producer {p} is eventually delivered once the tasks of its own recovery context "
                        f"have completed (or superseded by a new recovery, or cancelled by a Down)",
                        lambda s, p=p: any(v in (PENDING, DUE, STALE) for v in s[8][p]),
                        lambda s, p=p: all(v not in (PENDING, DUE, STALE) for v in s[8][p]) and not (s[9] and s[9][0] == p),
                        fairness=fair_words,
                    )
                )
    return props
