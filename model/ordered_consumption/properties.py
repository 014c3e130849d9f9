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
    C_CIDING,
    C_CONSUMING,
    C_DELAY,
    C_DLQING,
    FIFO,
    FIFO_MSG,
    H_STALE,
    IN_CONSUMPTION,
    OP_NONE,
    OP_RECEIVE,
    P_DONE,
    P_PICK,
    P_WAIT,
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
    # (a client that gives up at a throttled answer, throttle_ends_send, never retries one: the claim
    # has nothing to judge there and its witness cannot be reached; throttled-send-retried fails)
    if not c.throttle_ends_send:
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
    # seed 001 顺序消息: a FIFO message is sent with its message group, which picks its queue (any queue
    # may be a group's); a normal or transactional message has no group (issue 31: the producer's initial
    # states were pinned by no claim)
    add(P, always(
        "group-only-for-fifo",
        "only a FIFO message carries a message group; every queue may be a FIFO message's group queue",
        lambda s: s[0] != PRODUCER or s[2] == FIFO_MSG or s[4] == 0,
        witness=lambda s: s[0] == PRODUCER and s[2] == FIFO_MSG and s[4] == n - 1,
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
    add(P, always_step(
        "throttled-send-retried",
        "a throttled attempt is followed by a wait for the back-off and a retry, unless it was the last "
        "attempt allowed (seed 001 特别地: throttled -> retry after the server's back-off)",
        lambda s, a, o, t: s[0] != PRODUCER or o.__class__ is not tuple or o[0] != "throttled"
        or t[1] == P_WAIT or t[5] >= c.max_send_attempts or (s[2] == TXN and not c.txn_retries),
        witness=lambda s, a, o, t: s[0] == PRODUCER and o.__class__ is tuple and o[0] == "throttled" and t[1] == P_WAIT,
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
    # Several push consumers in one group (``consumers`` > 1, model.py "several push consumers"): a
    # client's claims are made of every client's view (its copies joined to the group's server
    # fields, its process queues); ``s[1][m][0]`` / ``s[1][m][1]`` are the message's server status and
    # delivery count in either shape, so the claims about the server read them directly.
    multi = self.multi
    views = self.consumer_views

    def at(s, a):
        """(msgs, pqs, process queue or message) of the client whose step ``a`` is (with several clients
        its parameter names the client too: model.py ``split_param``)."""
        if not multi:
            return s[1], s[2], a[1]
        i, y = self.split_param(a[0], a[1])
        v = self.consumer_view(s, i)
        return v[1], v[2], y

    def issued(t, a):
        """The receive step ``a`` leaves its loop with a request in flight (the loop's check found room):
        (msgs, pqs, p) of that loop in t, else None."""
        msgs, pqs, p = at(t, a)
        return None if pqs[p][0] else (msgs, pqs, p)

    def receive_ok(s, a, o, t):
        if s[0] not in PUSH or a[0] != "receive":
            return True
        got = issued(t, a)
        if got is None:
            return True
        msgs, pqs, p = got
        thr_c, thr_b = self._thresholds(pqs)
        cnt, byts = self._cache_of(msgs, p)
        return cnt < thr_c and byts < thr_b

    add(PUSH, always_step(
        "receive-below-thresholds",
        "a receive is issued only while the process queue's cache is below both its count and byte thresholds "
        "(checked when the request is issued: right after the previous answer, or when a loop waiting for room "
        "finds it; an answer is cached whatever the thresholds are by the time it comes)",
        receive_ok,
        witness=lambda s, a, o, t: s[0] in PUSH and a[0] == "receive"
        and (lambda v: v is not None and self._cache_of(v[0], v[2])[0] > 0)(issued(t, a)),
    ))

    def first_start(s, a, t):
        """The message whose consumption starts on this step of the client ``a`` names (cached ->
        consuming), or None."""
        sm, tm = at(s, a)[0], at(t, a)[0]
        for m in range(self.n_msgs):
            if sm[m][2] == C_CACHED and tm[m][2] == C_CONSUMING:
                return m
        return None

    def fifo_order(s, a, o, t):
        if s[0] != FIFO or a[0] not in ("take", "dispatch"):
            return True
        m = first_start(s, a, t)
        # the earlier messages' server status: the group's, whichever client consumed them
        return m is None or all(s[1][e][0] in SETTLED for e in self.earlier[m])

    def fifo_order_witness(s, a, o, t):
        if s[0] != FIFO or a[0] not in ("take", "dispatch"):
            return False
        m = first_start(s, a, t)
        if m is None or not self.earlier[m]:
            return False
        if not multi:
            return True
        # with several clients: B starts on one client after another client consumed A
        return any(j != self.split_param(a[0], a[1])[0] and msgs[e][4] > 0 for j, (msgs, _) in enumerate(views(s)) for e in self.earlier[m])

    # claims about two messages of one queue are listed when a queue holds two
    PAIR_FIFO = (FIFO,) if any(len(q) >= 2 for q in self.by_queue) else ()
    PAIR_STANDARD = (STANDARD,) if PAIR_FIFO else ()

    add(PAIR_FIFO, always_step(
        "fifo-order",
        "for A then B sent to one queue, B's consumption starts only after A was consumed and the server accepted its ack or DLQ"
        + (" (by whichever consumer of the group: the witness starts B on another consumer than A's)" if multi else ""),
        fifo_order,
        witness=fifo_order_witness,
    ))

    def one_in_consumption(s):
        if s[0] != FIFO:
            return True
        return all(all(sum(msgs[m][2] in IN_CONSUMPTION and not msgs[m][8] for m in qm) <= 1 for qm in self.by_queue)
                   for msgs, _ in views(s))

    add(PAIR_FIFO, always(
        "fifo-one-in-consumption",
        "at most one message of a FIFO process queue is in consumption (consuming, waiting for its retry delay, "
        "being acked / dead-lettered); a copy still finishing on a process queue a rebalance dropped belongs to "
        "that one, not to the queue's new process queue",
        one_in_consumption,
        witness=lambda s: s[0] == FIFO and any(
            any(msgs[m][2] in IN_CONSUMPTION for m in qm) and any(msgs[m][0] in (S_READY, S_INVIS) and msgs[m][2] in (C_NONE, C_CACHED) for m in qm)
            for msgs, _ in views(s) for qm in self.by_queue
        ),
    ))
    add((FIFO,), always(
        "consumed-at-most-max",
        "a FIFO message is never consumed beyond max_attempts: the attempt the listener sees (the delivery attempt "
        "of the client's copy plus its local re-consumptions) never exceeds the maximum, across redeliveries",
        lambda s: s[0] != FIFO or all(r[5] - 1 + r[4] <= maxa for msgs, _ in views(s) for r in msgs if r[4]),
        witness=lambda s: s[0] == FIFO and any(r[4] and r[5] - 1 + r[4] == maxa for msgs, _ in views(s) for r in msgs),
    ))

    def dlq_after_max(s, a, o, t):
        if s[0] != FIFO or a[0] != "forward_to_dlq":
            return True
        msgs, _, m = at(s, a)
        return msgs[m][5] - 1 + msgs[m][4] >= maxa or msgs[m][4] == 0

    add((FIFO,), always_step(
        "dlq-only-after-max",
        "the client asks for a message's dead-lettering only once a consumption at the maximum attempt failed (a "
        "redelivery settled with the outcome remembered from an earlier delivery, never consumed itself, carries "
        "that earlier decision)",
        dlq_after_max,
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
        lambda s: s[0] != STANDARD or all(r[0] != S_DLQ_CLI and r[2] != C_DLQING for msgs, _ in views(s) for r in msgs),
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
        lambda s: s[0] != FIFO or all(r[10] <= maxa for msgs, _ in views(s) for r in msgs),
        witness=lambda s: s[0] == FIFO and any(r[10] == maxa and r[1] >= 2 for msgs, _ in views(s) for r in msgs),
    ))

    def consumed_on_later_delivery(s, a, o, t):
        if s[0] not in PUSH or a[0] != "consume" or not (isinstance(o, tuple) and o[0] in ("ok", "fail")):
            return True
        msgs, _, m = at(s, a)
        return msgs[m][9] < msgs[m][5]

    def duplicate_witness(s, a, o, t):
        if not (s[0] in PUSH and a[0] == "consume" and isinstance(o, tuple) and o[0] in ("ok", "fail")):
            return False
        msgs, _, m = at(s, a)
        return msgs[m][4] > 0 or msgs[m][5] >= 2

    add(PUSH, always_step(
        "no-unexplained-duplicate",
        "a message is consumed again after its listener succeeded only on a later delivery by the server: the "
        "server's redelivery explains every duplicate consumption",
        consumed_on_later_delivery,
        witness=duplicate_witness,
        actions=("consume",),
    ))
    if multi:
        def holds(r):
            return r[2] != C_NONE or bool(r[6])

        def holds_current(r):
            """The client holds the message's current delivery: a copy of it, or it cached behind one."""
            return r[0] == S_INVIS and ((r[2] != C_NONE and r[5] == r[1]) or r[6] == r[1])

        add(PUSH, always(
            "one-consumer-per-delivery",
            "at most one consumer of the group holds a message's current delivery (a copy whose receipt handle is "
            "the server's current one, or that delivery cached behind a copy in consumption): the server hands an "
            "invisible message to no other consumer, and a copy another consumer still holds is of an earlier "
            "delivery, whose handle the server refuses",
            lambda s: s[0] not in PUSH or all(sum(holds_current(msgs[m]) for msgs, _ in views(s)) <= 1
                                              for m in range(self.n_msgs)),
            witness=lambda s: s[0] in PUSH and any(
                s[1][m][0] == S_INVIS and sum(holds(msgs[m]) for msgs, _ in views(s)) >= 2 for m in range(self.n_msgs)),
        ))

        def two_held_across(s):
            """Two messages of one queue held at once by two different consumers."""
            vs = views(s)
            return any(holds(vs[i][0][m1]) and holds(vs[j][0][m2])
                       for qm in self.by_queue for m1 in qm for m2 in qm if m1 != m2
                       for i in range(len(vs)) for j in range(len(vs)) if i != j)

        add(PAIR_FIFO, always(
            "fifo-group-one-delivered",
            "the server hands out a FIFO queue's messages to the group one at a time: at most one message of a "
            "queue is invisible (delivered and not settled, whichever consumer holds it), so no consumer gets B "
            "while another holds A's current delivery",
            lambda s: s[0] != FIFO or all(sum(s[1][m][0] == S_INVIS for m in qm) <= 1 for qm in self.by_queue),
            witness=lambda s: s[0] == FIFO and two_held_across(s),
        ))
    # ---- issue 31 (model mutation coverage): the rules of the cache and of the listener's result
    size = c.msg_size

    def held_entries(role, r):
        """How many entries the client's record of a message holds in its process queue's cache, read off
        the seed's rules: a cached copy; a FIFO copy until it is settled (unless its process queue was
        dropped: the copy is then marked old); a standard copy until the listener has consumed it (seed
        001 普通 step 3: "消费上一步取出的消息，然后将其从本地缓存中擦除"), or until settled upstream
        (erase_after_settle); the newer delivery cached behind a copy in consumption.  Standard mode keeps
        no mark of a process queue dropped under a copy in consumption: there the record's bit says it."""
        cli = r[2]
        if cli == C_CACHED:
            copy = 1
        elif cli not in IN_CONSUMPTION:
            copy = 0
        elif role == FIFO:
            copy = 0 if r[8] else 1
        elif cli == C_CONSUMING or c.erase_after_settle:
            copy = r[3]
        else:
            copy = 0  # consumed: erased from the cache
        return copy + (1 if r[6] else 0)

    def cache_counts(s):
        if s[0] not in PUSH:
            return True
        for msgs, pqs in views(s):
            for p in range(n):
                held = [(held_entries(s[0], msgs[m]), size[m]) for m in self.by_queue[p]]
                if self._cache_of(msgs, p) != (sum(k for k, _ in held), sum(k * z for k, z in held)):
                    return False
            for r in msgs:
                if r[6] and r[2] not in IN_CONSUMPTION:
                    return False  # a newer delivery waits only behind a copy in consumption
        return True

    add(PUSH, always(
        "cache-counts-what-it-holds",
        "each process queue's cache count and bytes are the number and total size of what it holds: the copies cached "
        "or in consumption (FIFO and upstream standard: until settled), and the newer deliveries waiting behind one; a "
        "copy leaves the count when the standard listener has consumed it (seed 001 普通 step 3), when it is settled, or "
        "when its process queue is dropped (REFERENCE.md section 2: the thresholds are per process queue)",
        cache_counts,
        witness=lambda s: s[0] in PUSH and any(self._cache_of(msgs, p)[1] >= 2 and self._cache_of(msgs, p)[0] >= 2
                                              for msgs, _ in views(s) for p in range(n)),
    ))

    def outcome(s, a, o, t, role):
        msgs_t, _, m = at(t, a)
        cli = msgs_t[m][2]
        if o[0] == "remembered":
            return cli == (C_ACKING if o[1] == "ack" else C_DLQING)
        if o[0] == "ok":
            return cli == C_ACKING
        if role == STANDARD:
            return cli == C_CIDING
        return cli == C_DLQING if o[1] >= maxa else cli in (C_CONSUMING, C_DELAY)

    def fifo_outcome(s, a, o, t):
        return s[0] != FIFO or a[0] != "consume" or o.__class__ is not tuple or outcome(s, a, o, t, FIFO)

    add((FIFO,), always_step(
        "fifo-exhausted-dead-lettered",
        "a FIFO consumption that succeeds is acked; one that fails is consumed again (after the retry policy's delay) "
        "while the attempt the listener saw is below max_attempts, and once it reached the maximum the message is "
        "forwarded to the dead-letter queue, never acked and never consumed again (seed 001 顺序 steps 5, 7, 8; a "
        "redelivery settled from a remembered outcome takes that outcome)",
        fifo_outcome,
        witness=lambda s, a, o, t: s[0] == FIFO and a[0] == "consume" and o.__class__ is tuple and o[0] == "fail"
        and o[1] >= maxa,
        actions=("consume",),
    ))

    def standard_outcome(s, a, o, t):
        return s[0] != STANDARD or a[0] != "consume" or o.__class__ is not tuple or outcome(s, a, o, t, STANDARD)

    add((STANDARD,), always_step(
        "standard-failure-changes-invisible-duration",
        "a standard consumption that succeeds is acked, one that fails changes the message's invisible duration (seed "
        "001 普通 step 4): standard mode never dead-letters on the client nor consumes again locally",
        standard_outcome,
        witness=lambda s, a, o, t: s[0] == STANDARD and a[0] == "consume" and o.__class__ is tuple and o[0] == "fail",
        actions=("consume",),
    ))
    add(PAIR_STANDARD, sometimes(
        "standard-concurrent-consumption",
        "standard mode consumes two messages of one queue at the same time",
        lambda s: s[0] == STANDARD and any(sum(msgs[m][2] in IN_CONSUMPTION for m in qm) >= 2
                                           for msgs, _ in views(s) for qm in self.by_queue),
    ))
    add((STANDARD,), sometimes(
        "standard-redelivered-then-acked",
        "a message that failed (changed invisible duration) is redelivered and then acked",
        lambda s: s[0] == STANDARD and any(r[0] == S_ACKED and r[1] >= 2 for r in s[1]),
    ))
    add((FIFO,), sometimes(
        "fifo-reconsumed-then-acked",
        "a FIFO message fails, is consumed again locally and then acked",
        lambda s: s[0] == FIFO and any(r[0] == S_ACKED and r[4] >= 2 for msgs, _ in views(s) for r in msgs),
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
            lambda s: s[0] == FIFO and any(pq[1] and pq[2] for _, pqs in views(s) for pq in pqs),
        ))
    add(PUSH, sometimes(
        "cache-full-waits",
        "a receive loop finds its cache full and waits",
        lambda s: s[0] in PUSH and any(pq[0] for _, pqs in views(s) for pq in pqs),
    ))
    if c.expiry_while_held:
        add(PUSH, sometimes(
            "redelivered-while-in-consumption",
            "the invisible time of a message in consumption runs out and the server's redelivery reaches the "
            "process queue while the old copy is still being consumed or settled",
            lambda s: s[0] in PUSH and any(r[6] for msgs, _ in views(s) for r in msgs),
        ))
    if c.remember_outcome and not c.settle_until_success and (c.expiry_while_held or c.server_faults):
        add((FIFO,), sometimes(
            "fifo-settled-from-memo",
            "a FIFO redelivery is settled with the outcome decided on an earlier delivery, without consuming it again",
            lambda s: s[0] == FIFO and any(r[2] in (C_ACKING, C_DLQING) and r[4] == 0 for msgs, _ in views(s) for r in msgs),
        ))
    if c.rebalance:
        add((FIFO,), sometimes(
            "given-back-while-in-flight",
            "a message queue is taken away while one of its messages is in consumption, and given back (a new "
            "process queue) before that consumption finished",
            lambda s: s[0] == FIFO and any(
                r[8] and r[2] in IN_CONSUMPTION and pqs[c.msg_queue[m]][4] for msgs, pqs in views(s) for m, r in enumerate(msgs)),
        ))
    push_fair = (
        "weak fairness of every client step (receive loop, dispatcher, consumption, retry-policy delay, unlock), "
        "of a receive answered with messages or none, of the definitive answer to a settle (OK to a valid receipt "
        "handle, INVALID_RECEIPT_HANDLE / NOT_FOUND to a stale one) and of the server's invisible-time expiry; "
        "timeouts, throttling, lost answers and BAD_REQUEST are never forced, nor is any one rebalance"
        + ("; the assignment eventually changes no more (rebalancing ends, after any number of steps: the "
           "environment's one weakly fair step, assignment_stable)" if c.rebalance else "")
    )

    def taken_away_for_good(s, q):
        """Queue q is assigned to no consumer of the group (its process queue dropped everywhere), and the
        assignment changes no more (``s[3]``, model.py ``_assignment_stable``; without rebalance it never
        changes).  A queue taken away and given back is not excused: while the assignment may change, a
        drop is a moment, not an exception (spec/ordered-consumption.md, "Rebalancing that never ends")."""
        return s[3] and not any(pqs[q][4] for _, pqs in views(s))

    add(PUSH, leads_to(
        "received-eventually-settled",
        "once a message is received, every message (each received one in particular) is eventually acked or "
        "dead-lettered, unless its queue was taken away from this consumer for good"
        + (" (from every consumer of the group)" if multi else "")
        + (" (the assignment changes no more and gives it to no consumer)" if c.rebalance else ""),
        lambda s: s[0] in PUSH and any(r[1] >= 1 for r in s[1]),
        lambda s: s[0] not in PUSH or all(r[0] in SETTLED or taken_away_for_good(s, c.msg_queue[m])
                                          for m, r in enumerate(s[1])),
        fairness=push_fair,
    ))
    add(PUSH, leads_to(
        "no-stall",
        "the consumer never stalls: every message it took (cached, in consumption, being settled) it eventually "
        "lets go of (settled, given up after a non-retriable answer, or discarded), so no process queue stays "
        "locked for ever",
        lambda s: s[0] in PUSH and any(r[2] != C_NONE or r[6] for msgs, _ in views(s) for r in msgs),
        lambda s: s[0] not in PUSH or not any(r[2] != C_NONE or r[6] for msgs, _ in views(s) for r in msgs),
        fairness=push_fair,
    ))
    add(PUSH, leads_to(
        "full-cache-resumes",
        "a receive loop that found its cache full eventually issues a receive again (the cache drains)",
        lambda s: s[0] in PUSH and any(pq[0] for _, pqs in views(s) for pq in pqs),
        lambda s: s[0] not in PUSH or not any(pq[0] for _, pqs in views(s) for pq in pqs),
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
