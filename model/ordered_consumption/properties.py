"""Properties of the ordered-consumption model (split from ordered_consumption.py
to keep each file readable).  Every claim names the roles it speaks about; a
property is listed only when one of its roles is enabled, so no witness is
unreachable by construction of the configuration."""

from __future__ import annotations

from typing import Any

from conq.model.kernel import Model, always, always_step, leads_to, sometimes
from .state import (
    C_ACKING,
    C_CACHED,
    C_CONSUMING,
    C_DLQING,
    FIFO,
    FIFO_MSG,
    H_STALE,
    IN_CONSUMPTION,
    OP_NONE,
    OP_RECEIVE,
    P_DONE,
    P_PICK,
    PRODUCER,
    R_FAILED,
    R_NONE,
    R_OK,
    S_ACKED,
    S_DLQ_CLI,
    S_DLQ_SRV,
    S_INVIS,
    S_READY,
    C_NONE,
    SETTLED,
    SIMPLE,
    STANDARD,
    TXN,
)

def build_properties(self: Model) -> list:
    # ``self`` is the OrderedConsumptionModel (not imported: properties must not import the model)
    """The named claims of the model, filtered by the roles its configuration enables."""
    c = self.config
    roles = set(self.roles)
    n = c.queues
    maxa = c.max_attempts
    props: list[tuple[tuple[int, ...], Any]] = []

    def add(for_roles, prop):
        props.append((for_roles, prop))

    # ------------------------------------------------------------ producer
    P = (PRODUCER,)
    add(P, always(
        "send-attempts-within-max",
        "a send makes at most max_send_attempts requests",
        lambda s: s[0] != PRODUCER or s[5] <= c.max_send_attempts,
        witness=lambda s: s[0] == PRODUCER and s[5] == c.max_send_attempts,
    ))
    add(P, always(
        "txn-single-attempt",
        "a transactional message gets exactly one send request, never retried (seed rule)",
        lambda s: s[0] != PRODUCER or s[2] != TXN or s[5] <= 1,
        witness=lambda s: s[0] == PRODUCER and s[2] == TXN and s[9] == R_FAILED and s[5] == 1,
    ))
    add(P, always_step(
        "throttle-backoff-respected",
        "a send after a throttled attempt is made no sooner than the back-off the server asked for",
        lambda s, a, o, t: s[0] != PRODUCER or a[0] != "send" or s[8] >= s[7],
        witness=lambda s, a, o, t: s[0] == PRODUCER and a[0] == "send" and s[7] > 0,
    ))
    add(P, always_step(
        "type-mismatch-never-sends",
        "no request goes to a queue that does not accept the message type; a mismatch fails the send at once",
        lambda s, a, o, t: s[0] != PRODUCER
        or (a[0] != "send" or (s[3] >> a[1]) & 1)
        and (o != "type-mismatch" or (t[9] == R_FAILED and t[5] == s[5])),
        witness=lambda s, a, o, t: s[0] == PRODUCER and o == "type-mismatch" and s[5] > 0,
    ))
    add(P, always_step(
        "fifo-stays-on-group-queue",
        "every attempt to send a FIFO message goes to its message group's queue",
        lambda s, a, o, t: s[0] != PRODUCER or a[0] != "send" or s[2] != FIFO_MSG or a[1] == s[4],
        witness=lambda s, a, o, t: s[0] == PRODUCER and a[0] == "send" and s[2] == FIFO_MSG and s[5] > 0,
    ))
    add(P, always_step(
        "send-rotates-candidates",
        "attempt k of a non-FIFO message goes to candidate (k-1) mod n",
        lambda s, a, o, t: s[0] != PRODUCER or a[0] != "send" or s[2] == FIFO_MSG or a[1] == s[5] % n,
        witness=lambda s, a, o, t: s[0] == PRODUCER and a[0] == "send" and s[2] != FIFO_MSG and s[5] > 0,
    ))
    add(P, always_step(
        "plain-error-retries-at-once",
        "a failure other than throttling is retried at once (no waiting)",
        lambda s, a, o, t: s[0] != PRODUCER or o != "error" or t[1] in (P_PICK, P_DONE),
        witness=lambda s, a, o, t: s[0] == PRODUCER and o == "error" and t[1] == P_PICK,
    ))
    add(P, sometimes(
        "send-succeeds-after-throttle",
        "a send succeeds after a throttled attempt and its back-off",
        lambda s: s[0] == PRODUCER and s[9] == R_OK and s[5] >= 2 and s[2] != TXN,
    ))
    add(P, sometimes(
        "send-fails-without-request",
        "a send fails before any request (route fetch failed or type mismatch)",
        lambda s: s[0] == PRODUCER and s[9] == R_FAILED and s[5] == 0,
    ))
    add(P, leads_to(
        "send-completes",
        "every send completes, with success or failure, within max attempts",
        lambda s: s[0] == PRODUCER,
        lambda s: s[0] != PRODUCER or s[9] != R_NONE,
        fairness="weak fairness of every producer step and of the back-off clock; the server may answer anything",
    ))

    # ------------------------------------------------------- push consumer
    PUSH = (STANDARD, FIFO)

    def receive_ok(s, a, o, t):
        if s[0] not in PUSH or a[0] != "receive" or o == "full":
            return True
        thr_c, thr_b = self._thresholds(s[2])
        cnt, byts = self._cache_of(s[1], a[1])
        return cnt < thr_c and byts < thr_b

    add(PUSH, always_step(
        "receive-below-thresholds",
        "a receive is issued only while the process queue's cache is below both its count and byte thresholds",
        receive_ok,
        witness=lambda s, a, o, t: s[0] in PUSH and a[0] == "receive" and o != "full" and self._cache_of(s[1], a[1])[0] > 0,
    ))

    def first_start(s, t):
        """The message whose consumption starts on this step (cached -> consuming), or None."""
        for m in range(self.n_msgs):
            if s[1][m][2] == C_CACHED and t[1][m][2] == C_CONSUMING:
                return m
        return None

    def fifo_order(s, a, o, t):
        if s[0] != FIFO or a[0] not in ("take", "dispatch"):
            return True
        m = first_start(s, t)
        return m is None or all(s[1][e][0] in SETTLED for e in self.earlier[m])

    # claims about two messages of one queue are listed when a queue holds two
    PAIR_FIFO = (FIFO,) if any(len(q) >= 2 for q in self.by_queue) else ()
    PAIR_STANDARD = (STANDARD,) if PAIR_FIFO else ()

    add(PAIR_FIFO, always_step(
        "fifo-order",
        "for A then B sent to one queue, B's consumption starts only after A was consumed and the server accepted its ack or DLQ",
        fifo_order,
        witness=lambda s, a, o, t: s[0] == FIFO and a[0] in ("take", "dispatch")
        and (lambda m: m is not None and bool(self.earlier[m]))(first_start(s, t)),
    ))

    def one_in_consumption(s):
        if s[0] != FIFO:
            return True
        msgs = s[1]
        return all(sum(msgs[m][2] in IN_CONSUMPTION and not msgs[m][8] for m in qm) <= 1 for qm in self.by_queue)

    add(PAIR_FIFO, always(
        "fifo-one-in-consumption",
        "at most one message of a FIFO process queue is in consumption (consuming, waiting for its retry delay, "
        "being acked / dead-lettered); a copy still finishing on a process queue a rebalance dropped belongs to "
        "that one, not to the queue's new process queue",
        one_in_consumption,
        witness=lambda s: s[0] == FIFO and any(
            any(s[1][m][2] in IN_CONSUMPTION for m in qm) and any(s[1][m][0] in (S_READY, S_INVIS) and s[1][m][2] in (C_NONE, C_CACHED) for m in qm)
            for qm in self.by_queue
        ),
    ))
    add((FIFO,), always(
        "consumed-at-most-max",
        "a FIFO message is never consumed beyond max_attempts: the attempt the listener sees (the delivery attempt "
        "of the client's copy plus its local re-consumptions) never exceeds the maximum, across redeliveries",
        lambda s: s[0] != FIFO or all(r[5] - 1 + r[4] <= maxa for r in s[1] if r[4]),
        witness=lambda s: s[0] == FIFO and any(r[4] and r[5] - 1 + r[4] == maxa for r in s[1]),
    ))
    add((FIFO,), always_step(
        "dlq-only-after-max",
        "the client asks for a message's dead-lettering only once a consumption at the maximum attempt failed (a "
        "redelivery settled with the outcome remembered from an earlier delivery, never consumed itself, carries "
        "that earlier decision)",
        lambda s, a, o, t: s[0] != FIFO or a[0] != "forward_to_dlq"
        or s[1][a[1]][5] - 1 + s[1][a[1]][4] >= maxa or s[1][a[1]][4] == 0,
        witness=lambda s, a, o, t: s[0] == FIFO and a[0] == "forward_to_dlq" and o == "ok",
        actions=("forward_to_dlq",),
    ))

    def settled_final(s, a, o, t):
        if s[0] == PRODUCER:
            return True
        return all(sm[0] not in SETTLED or tm[0] == sm[0] for sm, tm in zip(s[1], t[1]))

    add((STANDARD, FIFO, SIMPLE), always_step(
        "settled-once",
        "a message is acked or dead-lettered at most once and never both: once settled it stays as it is",
        settled_final,
        witness=lambda s, a, o, t: s[0] != PRODUCER and any(
            sm[0] not in SETTLED and tm[0] in SETTLED for sm, tm in zip(s[1], t[1])
        ),
    ))
    add((STANDARD,), always(
        "standard-no-client-dlq",
        "standard mode never dead-letters on the client (only the server does, after max delivery attempts)",
        lambda s: s[0] != STANDARD or all(r[0] != S_DLQ_CLI and r[2] != C_DLQING for r in s[1]),
        witness=lambda s: s[0] == STANDARD and any(r[0] == S_DLQ_SRV for r in s[1]),
    ))

    def delivered(a, o):
        """The (message, attempt) pairs a receive step delivered (answered or lost)."""
        if a[0] not in ("receive", "rpc") or not isinstance(o, tuple) or not o:
            return ()
        if a[0] == "receive":
            return o[1] if o[0] == "lost" else o
        return (o[1],) if isinstance(o[1], tuple) and o[1] else ()

    def attempt_plus_one(s, a, o, t):
        if s[0] not in (STANDARD, SIMPLE):
            return True
        return all(d == s[1][m][1] + 1 == t[1][m][1] for m, d in delivered(a, o))

    add((STANDARD, SIMPLE), always_step(
        "redelivery-attempt-plus-one",
        "each delivery of a message carries the delivery attempt one above the previous delivery",
        attempt_plus_one,
        witness=lambda s, a, o, t: s[0] in (STANDARD, SIMPLE) and a[0] in ("receive", "rpc")
        and any(t[1][m][1] == 2 and s[1][m][1] == 1 for m in range(self.n_msgs)),
        actions=("receive", "rpc"),
    ))
    # FIFO redelivers only once the broker can take a message back from the client
    redelivers = (FIFO,) if (c.expiry_while_held or c.server_faults or c.rebalance) else ()
    add((STANDARD, SIMPLE) + redelivers, always(
        "delivered-at-most-max",
        "the server delivers a message at most max_attempts times, whatever it answered before (expired invisible "
        "time, lost answers, rebalance): then it dead-letters it",
        lambda s: s[0] == PRODUCER or all(r[1] <= maxa for r in s[1]),
        witness=lambda s: s[0] != PRODUCER and any(r[1] == maxa for r in s[1]),
    ))
    add(redelivers, always(
        "consumptions-within-max",
        "no consumption beyond max_attempts across redeliveries: the FIFO listener consumes a message at most "
        "max_attempts times in all, counting every delivery this consumer got",
        lambda s: s[0] != FIFO or all(r[10] <= maxa for r in s[1]),
        witness=lambda s: s[0] == FIFO and any(r[10] == maxa and r[1] >= 2 for r in s[1]),
    ))
    add(PUSH, always_step(
        "no-unexplained-duplicate",
        "a message is consumed again after its listener succeeded only on a later delivery by the server: the "
        "server's redelivery explains every duplicate consumption",
        lambda s, a, o, t: s[0] not in PUSH or a[0] != "consume" or not (isinstance(o, tuple) and o[0] in ("ok", "fail"))
        or s[1][a[1]][9] < s[1][a[1]][5],
        witness=lambda s, a, o, t: s[0] in PUSH and a[0] == "consume" and isinstance(o, tuple)
        and o[0] in ("ok", "fail") and (s[1][a[1]][4] > 0 or s[1][a[1]][5] >= 2),
        actions=("consume",),
    ))
    add(PAIR_STANDARD, sometimes(
        "standard-concurrent-consumption",
        "standard mode consumes two messages of one queue at the same time",
        lambda s: s[0] == STANDARD and any(sum(s[1][m][2] in IN_CONSUMPTION for m in qm) >= 2 for qm in self.by_queue),
    ))
    add((STANDARD,), sometimes(
        "standard-redelivered-then-acked",
        "a message that failed (changed invisible duration) is redelivered and then acked",
        lambda s: s[0] == STANDARD and any(r[0] == S_ACKED and r[1] >= 2 for r in s[1]),
    ))
    add((FIFO,), sometimes(
        "fifo-reconsumed-then-acked",
        "a FIFO message fails, is consumed again locally and then acked",
        lambda s: s[0] == FIFO and any(r[0] == S_ACKED and r[4] >= 2 for r in s[1]),
    ))
    add(PAIR_FIFO, sometimes(
        "fifo-dead-lettered-then-next",
        "a FIFO message is dead-lettered by the client and the next one of its queue is then acked",
        lambda s: s[0] == FIFO and any(
            s[1][m][0] == S_DLQ_CLI and any(s[1][x][0] == S_ACKED for x in self.by_queue[c.msg_queue[m]] if x > m)
            for m in range(self.n_msgs)
        ),
    ))
    if c.client_lock:
        add((FIFO,), sometimes(
            "fifo-lock-contended",
            "the dispatcher is signalled while the process queue is locked (its lock attempt will fail)",
            lambda s: s[0] == FIFO and any(pq[1] and pq[2] for pq in s[2]),
        ))
    add(PUSH, sometimes(
        "cache-full-waits",
        "a receive loop finds its cache full and waits",
        lambda s: s[0] in PUSH and any(pq[0] for pq in s[2]),
    ))
    if c.expiry_while_held:
        add(PUSH, sometimes(
            "redelivered-while-in-consumption",
            "the invisible time of a message in consumption runs out and the server's redelivery reaches the "
            "process queue while the old copy is still being consumed or settled",
            lambda s: s[0] in PUSH and any(r[6] for r in s[1]),
        ))
    if c.remember_outcome and not c.settle_until_success and (c.expiry_while_held or c.server_faults):
        add((FIFO,), sometimes(
            "fifo-settled-from-memo",
            "a FIFO redelivery is settled with the outcome decided on an earlier delivery, without consuming it again",
            lambda s: s[0] == FIFO and any(r[2] in (C_ACKING, C_DLQING) and r[4] == 0 for r in s[1]),
        ))
    if c.rebalance:
        add((FIFO,), sometimes(
            "given-back-while-in-flight",
            "a message queue is taken away while one of its messages is in consumption, and given back (a new "
            "process queue) before that consumption finished",
            lambda s: s[0] == FIFO and any(
                r[8] and r[2] in IN_CONSUMPTION and s[2][c.msg_queue[m]][4] for m, r in enumerate(s[1])),
        ))
    push_fair = (
        "weak fairness of every client step (receive loop, dispatcher, consumption, retry-policy delay, unlock), "
        "of a receive answered with messages or none, of the definitive answer to a settle (OK to a valid receipt "
        "handle, INVALID_RECEIPT_HANDLE / NOT_FOUND to a stale one) and of the server's invisible-time expiry; "
        "timeouts, throttling, lost answers and BAD_REQUEST are never forced, nor is a rebalance"
    )
    add(PUSH, leads_to(
        "received-eventually-settled",
        "once a message is received, every message (each received one in particular) is eventually acked or "
        "dead-lettered, unless its queue was taken away from this consumer",
        lambda s: s[0] in PUSH and any(r[1] >= 1 for r in s[1]),
        lambda s: s[0] not in PUSH or all(r[0] in SETTLED or not s[2][c.msg_queue[m]][4] for m, r in enumerate(s[1])),
        fairness=push_fair,
    ))
    add(PUSH, leads_to(
        "no-stall",
        "the consumer never stalls: every message it took (cached, in consumption, being settled) it eventually "
        "lets go of (settled, given up after a non-retriable answer, or discarded), so no process queue stays "
        "locked for ever",
        lambda s: s[0] in PUSH and any(r[2] != C_NONE or r[6] for r in s[1]),
        lambda s: s[0] not in PUSH or not any(r[2] != C_NONE or r[6] for r in s[1]),
        fairness=push_fair,
    ))
    add(PUSH, leads_to(
        "full-cache-resumes",
        "a receive loop that found its cache full eventually issues a receive again (the cache drains)",
        lambda s: s[0] in PUSH and any(pq[0] for pq in s[2]),
        lambda s: s[0] not in PUSH or not any(pq[0] for pq in s[2]),
        fairness=push_fair,
    ))

    # ----------------------------------------------------- simple consumer
    add((SIMPLE,), always_step(
        "simple-no-internal-retry",
        "every simple-consumer call makes exactly one request: a failure is returned, never retried inside",
        lambda s, a, o, t: s[0] != SIMPLE or a[0] != "rpc" or s[3][a[1]][2] == 0,
        witness=lambda s, a, o, t: s[0] == SIMPLE and a[0] == "rpc" and o == "error",
    ))
    add((SIMPLE,), sometimes(
        "simple-dead-lettered-by-server",
        "a message the user never acked is dead-lettered by the server after the maximum delivery attempts",
        lambda s: s[0] == SIMPLE and any(r[0] == S_DLQ_SRV for r in s[1]),
    ))
    add((SIMPLE,), sometimes(
        "simple-acked-after-redelivery",
        "a message is acked after being redelivered",
        lambda s: s[0] == SIMPLE and any(r[0] == S_ACKED and r[1] >= 2 for r in s[1]),
    ))
    if c.expiry_while_held or c.server_faults:
        add((SIMPLE,), sometimes(
            "simple-stale-handle",
            "the application holds a message whose receipt handle is no longer valid (its invisible time ran out, "
            "or a lost answer settled it): a settle call is answered INVALID_RECEIPT_HANDLE",
            lambda s: s[0] == SIMPLE and any(r[2] == H_STALE for r in s[1]),
        ))
    if c.simple_threads >= 2:
        add((SIMPLE,), sometimes(
            "simple-concurrent-receives",
            "two application threads have a receive call in flight at the same time",
            lambda s: s[0] == SIMPLE and sum(op == OP_RECEIVE for op, _, _ in s[3]) >= 2,
        ))
    add((SIMPLE,), leads_to(
        "simple-call-returns",
        "every simple-consumer call returns (a result or an error); stated for thread 0, the threads being alike",
        lambda s: s[0] == SIMPLE and s[3][0][0] != OP_NONE,
        lambda s: s[0] != SIMPLE or s[3][0][0] == OP_NONE,
        fairness="weak fairness of the request step answered with its definitive result; the server may also "
        "answer with an error, throttle or lose the answer",
    ))
    return [p for rs, p in props if roles.intersection(rs)]
