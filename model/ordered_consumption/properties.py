# One file: the model's claims as one list, in the order of spec/ordered-consumption.md's property table, built by one function whose readers of the state layout every claim shares (each role's claims a section of it).
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
    OP_ACK,
    OP_CID,
    H_VALID,
    H_NONE,
    W_IDLE,
    W_UNLOCK,
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
    # seed 001 Producer step 4 (从备选队列中选取一个队列); REFERENCE.md section 2: "FIFO messages go to the one queue
    # chosen by the message group's hash" -- even a client that rotates a FIFO message (the fault fifo_rotates)
    # starts at its group's queue
    add(P, always_step(
        "first-attempt-to-first-candidate",
        "a message's first send request goes to its first candidate: the message group's queue for a FIFO message, "
        "the first of the candidates otherwise",
        lambda s, a, o, t: s[0] != PRODUCER or a[0] != "send" or s[5] != 0
        or a[1] == (s[4] if s[2] == FIFO_MSG else 0),
        witness=lambda s, a, o, t: s[0] == PRODUCER and a[0] == "send" and s[5] == 0 and s[2] == FIFO_MSG
        and a[1] == n - 1 != 0,
        actions=("send",),
    ))
    if not c.throttle_ends_send:
        # seed 001 Producer 特别地: the retry after a throttled answer follows the back-off the server decided
        add(P, always_step(
            "backoff-clock-only-while-waiting",
            "the back-off clock ticks only while a throttled send waits for its back-off, and never past it",
            lambda s, a, o, t: s[0] != PRODUCER or a[0] != "tick" or (s[1] == P_WAIT and t[1] == P_WAIT and t[8] <= s[7]),
            witness=lambda s, a, o, t: s[0] == PRODUCER and a[0] == "tick" and t[8] == s[7] >= 2,
            actions=("tick",),
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
        if s[0] not in PUSH or a[0] != "forward_to_dlq":
            return True
        msgs, _, m = at(s, a)
        return msgs[m][5] - 1 + msgs[m][4] >= maxa or msgs[m][4] == 0

    # (standard mode asks for no dead-lettering at all, standard-no-client-dlq; the fault that makes it dead-letter
    # on the client, standard_client_dlq, is judged by this claim too: at the maximum attempt, never before)
    add((FIFO,) + ((STANDARD,) if c.standard_client_dlq else ()), always_step(
        "dlq-only-after-max",
        "the client asks for a message's dead-lettering only once a consumption at the maximum attempt failed (a "
        "redelivery settled with the outcome remembered from an earlier delivery, never consumed itself, carries "
        "that earlier decision)",
        dlq_after_max,
        witness=lambda s, a, o, t: s[0] in PUSH and a[0] == "forward_to_dlq" and o == "ok",
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
        elif c.erase_after_settle and not c.rebalance:
            copy = 1  # upstream: erased only once its settle call completed (REFERENCE.md section 2)
        elif cli == C_CONSUMING or c.erase_after_settle:
            copy = r[3]  # counted unless a rebalance dropped its process queue (no other mark of that)
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
        # below the maximum: consumed again, after the retry policy's delay where there is one (upstream
        # RetryPolicy.getNextAttemptDelay; the seed's step 7 goes back to step 4 at once: retry_delay off)
        return cli == C_DLQING if o[1] >= maxa else cli == (C_DELAY if c.retry_delay else C_CONSUMING)

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
        "standard mode consumes two messages of one queue at the same time, both still invisible on the server: "
        "the server does not withhold a queue's next message while an earlier one is in consumption (only FIFO "
        "keeps the order, seed 001 Push consumer: 同队列的消息消费模式是否与发送保持相同的顺序)",
        lambda s: s[0] == STANDARD and any(sum(msgs[m][2] in IN_CONSUMPTION and msgs[m][0] == S_INVIS for m in qm) >= 2
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
    # ---- issue 31 (model mutation coverage): what the server's answers mean, what wakes the dispatcher
    CONSUMERS = (STANDARD, FIFO, SIMPLE)
    SETTLES = ("ack", "change_invisible", "forward_to_dlq")

    def deliveries_as_answered(s, a, o, t):
        if s[0] == PRODUCER:
            return True
        named = delivered(a, o)
        ms = [m for m, _ in named]
        if len(set(ms)) != len(ms):
            return False  # a message named twice in one answer
        rose = {m for m in range(self.n_msgs) if t[1][m][1] != s[1][m][1]}
        if rose != set(ms):
            return False
        for m, d in named:
            if not (d == s[1][m][1] + 1 == t[1][m][1] and t[1][m][0] == S_INVIS):
                return False
            # offset order: an earlier message of the queue still ready was handed out in the same answer
            if any(s[1][e][0] == S_READY and e not in ms for e in self.earlier[m]):
                return False
        return True

    # seed 001 消息的接收与缓存 step 1 (the client receives messages from the server); REFERENCE.md section 2:
    # a batch of up to the batch size, delivery attempts counted by the server; broker.py hands a queue's
    # messages out in offset order
    add(CONSUMERS, always_step(
        "deliveries-as-answered",
        "only a receive delivers: a message's delivery count goes up exactly when a receive answer (or an answer "
        "that was lost) names it, once, with the new delivery attempt, and it is then invisible; a queue's ready "
        "messages are handed out in offset order (a batch is a prefix of them)",
        deliveries_as_answered,
        witness=lambda s, a, o, t: s[0] != PRODUCER and bool(delivered(a, o)),
    ))

    def is_lost(o):
        return o == "lost" or (o.__class__ is tuple and len(o) == 2 and o[0] == "lost")

    def lost_receive(s, a, o, t):
        if s[0] == PRODUCER or a[0] not in ("receive", "rpc") or not is_lost(o):
            return True
        for m, d in delivered(a, o):
            if s[0] == SIMPLE:
                if t[1][m][2] == H_VALID:
                    return False
            else:
                r = at(t, a)[0][m]
                if d in (r[5], r[6]):
                    return False  # the client would hold the delivery it never got
        return True

    def lost_settle(s, a, o, t):
        if s[0] == SIMPLE and a[0] == "rpc" and is_lost(o) and o[1] in ("acked", "changed"):
            m = s[3][a[1]][1]
            srv = S_ACKED if o[1] == "acked" else s[1][m][0]
            return t[1][m][0] == srv and t[1][m][2] == H_STALE
        if s[0] not in PUSH or a[0] not in SETTLES or o != "lost":
            return True
        msgs_s, _, m = at(s, a)
        r = at(t, a)[0][m]
        srv = {"ack": S_ACKED, "forward_to_dlq": S_DLQ_CLI}.get(a[0], msgs_s[m][0])
        return r[0] == srv and (r[2] == C_NONE or not self._valid(r))

    def lost_settle_witness(s, a, o, t):
        return (s[0] in PUSH and a[0] in SETTLES and o == "lost") or (
            s[0] == SIMPLE and a[0] == "rpc" and is_lost(o) and o[1] in ("acked", "changed"))

    if c.server_faults:
        # a REQUEST_TIMEOUT after the server acted (impl/ordered_consumption/faults.py "lost"): the client cannot
        # tell it from an error, but the server's state moved on (REFERENCE.md section 2: an invalid receipt handle
        # ends the standard mode's settle retry)
        add(CONSUMERS, always_step(
            "lost-receive-delivered",
            "a receive whose answer was lost delivered the message all the same (invisible, attempt + 1: "
            "deliveries-as-answered) and the client holds no copy of that delivery: nobody has it until its "
            "invisible time runs out",
            lost_receive,
            witness=lambda s, a, o, t: s[0] != PRODUCER and is_lost(o) and bool(delivered(a, o)),
            actions=("receive", "rpc"),
        ))
        add(CONSUMERS, always_step(
            "lost-settle-applied",
            "a settle request whose answer was lost was applied all the same: an ack acked the message, a forward "
            "dead-lettered it, a change of invisible duration issued a new receipt handle; a copy the client still "
            "holds carries a handle the server no longer accepts (repeated, it is answered INVALID_RECEIPT_HANDLE)",
            lost_settle,
            witness=lost_settle_witness,
            actions=SETTLES + ("rpc",),
        ))

        def failed_receive(s, a, o, t):
            if s[0] not in PUSH or a[0] != "receive" or o not in ("error", "throttled"):
                return True
            return all(x[:2] == y[:2] for x, y in zip(s[1], t[1])) and at(s, a)[0] == at(t, a)[0]

        add(PUSH, always_step(
            "failed-receive-delivers-nothing",
            "a receive answered with an error (timeout, unavailable, internal error, throttled) delivers nothing and "
            "caches nothing: the receive loop only sends its request again (seed 001 消息的接收与缓存 step 1 "
            "succeeds only with messages; upstream receive_retry_delay or the server's back-off)",
            failed_receive,
            witness=lambda s, a, o, t: s[0] in PUSH and a[0] == "receive" and o in ("error", "throttled"),
            actions=("receive",),
        ))

    def bad_request(s, a, o, t):
        if o != "bad-request":
            return True
        if s[0] == SIMPLE and a[0] == "rpc":
            op, m, _ = s[3][a[1]]
            # returned to the application as is (or, by the simple_retry fault, sent again)
            return op in (OP_ACK, OP_CID) and t[1][m] == s[1][m]
        if s[0] not in PUSH or a[0] not in SETTLES:
            return True
        msgs_s, _, m = at(s, a)
        msgs_t = at(t, a)[0]
        if s[1][m][:2] != t[1][m][:2]:
            return False
        if settle_repeated(s[0], a[0]) and c.settle_until_success:
            return msgs_t[m] == msgs_s[m]  # the seed read literally: repeated whatever the answer
        return msgs_t[m][2] in (C_NONE, C_CACHED)  # given up: the server's redelivery decides (C1)

    if c.server_faults:
        # issue 32: the proxy checks the request (topic, group: AckMessageActivity.validateTopicAndConsumerGroup)
        # before it decodes the receipt handle, so BAD_REQUEST may answer any settle; it is not retriable
        add(CONSUMERS, always_step(
            "bad-request-not-applied",
            "a settle request answered BAD_REQUEST was not applied: the message stays as it is on the server; the "
            "push consumer gives up its copy (no repetition can succeed) and the simple consumer returns the "
            "failure to the application, which still holds the message",
            bad_request,
            witness=lambda s, a, o, t: s[0] != PRODUCER and o == "bad-request",
            actions=SETTLES + ("rpc",),
        ))

    def settle_repeated(role, name):
        # seed 001 顺序 steps 6 and 8: ack / DLQ repeated until it succeeds; seed 普通 step 4: one call;
        # upstream standard mode: ack and change-invisible retried every second (settle_retry)
        return name == "forward_to_dlq" or (name == "ack" and role == FIFO) or c.settle_retry

    def failed_settle(s, a, o, t):
        if s[0] not in PUSH or a[0] not in SETTLES or o not in ("error", "throttled"):
            return True
        msgs_s, _, m = at(s, a)
        msgs_t = at(t, a)[0]
        if s[1][m][:2] != t[1][m][:2]:
            return False  # not applied
        if settle_repeated(s[0], a[0]):
            return msgs_t[m] == msgs_s[m]  # kept as it was, to be sent again
        return msgs_t[m][2] in (C_NONE, C_CACHED)  # the one call made: the client lets go of its copy

    add(PUSH, always_step(
        "failed-settle-not-applied",
        "a settle request answered with a retriable error is not applied (the message stays as it is on the "
        "server); FIFO sends its ack or forward again (seed 001 顺序 steps 6, 8: 重复本步骤直到执行成功), as upstream "
        "standard mode does with ack and change invisible duration, while the seed's standard mode made its one "
        "call (普通 step 4) and lets the server redeliver",
        failed_settle,
        witness=lambda s, a, o, t: s[0] in PUSH and a[0] in SETTLES and o == "error",
        actions=SETTLES,
    ))

    def idle_dispatch(s, a, o, t):
        if s[0] not in PUSH or o not in ("empty", "lock-busy"):
            return True
        pq = at(t, a)[1][at(t, a)[2]]
        if a[0] == "dispatch":
            return pq[1] == 0
        if a[0] == "take":
            return pq[2] == 0 and pq[3] == W_IDLE
        return True

    # seed 001 普通 step 2 (本地缓存中没有消息，则终止当前流程), 顺序 step 2 (锁定失败，则终止当前流程) and step 3
    # (没有消息，则对 process queue 进行解锁，并终止当前流程)
    add(PUSH, always_step(
        "idle-dispatcher-stops",
        "a dispatcher that finds nothing to do stops until it is signalled again: a failed lock or an empty cache "
        "ends the dispatch (the signal is used up), and a FIFO worker that finds no cached message unlocks the "
        "process queue and stops",
        idle_dispatch,
        witness=lambda s, a, o, t: s[0] in PUSH and a[0] in ("dispatch", "take") and o in ("empty", "lock-busy"),
        actions=("dispatch", "take"),
    ))

    def unlocked(s):
        return s[0] != STANDARD or all(pq[2] == 0 and pq[3] == W_IDLE for _, pqs in views(s) for pq in pqs)

    # seed 001 普通消费模式 has no lock (only 顺序消费模式 "会涉及到锁定与解锁 process queue 的过程")
    add((STANDARD,), always(
        "standard-never-locks",
        "standard mode never locks a process queue: no FIFO worker runs on it, whatever is consumed or settled",
        unlocked,
        witness=lambda s: s[0] == STANDARD and any(r[2] in IN_CONSUMPTION for msgs, _ in views(s) for r in msgs),
    ))

    def standard_signal(s, a, o, t):
        if s[0] != STANDARD:
            return True
        for (ms, ps), (mt, pt) in zip(views(s), views(t)):
            for p in range(n):
                if pt[p][1] and not ps[p][1] and not any(
                        mt[m][2] == C_CACHED or mt[m][6] for m in self.by_queue[p]):
                    return False
        return True

    # seed 001 普通 step 1: 接受到消息并缓存后，通知 dispatcher
    add((STANDARD,), always_step(
        "standard-dispatcher-woken-by-cache",
        "the standard dispatcher is signalled only when its process queue has something for it: a received message "
        "cached, or a newer delivery waiting behind a copy in consumption (taken once that copy is let go of)",
        standard_signal,
        witness=lambda s, a, o, t: s[0] == STANDARD and a[0] == "receive" and any(
            pt[p][1] and not ps[p][1] for (_, ps), (_, pt) in zip(views(s), views(t)) for p in range(n)),
    ))

    def fifo_release(s, a, o, t):
        if s[0] != FIFO:
            return True
        for (ms, _), (mt, pt) in zip(views(s), views(t)):
            for m in range(self.n_msgs):
                if ms[m][2] in IN_CONSUMPTION and not ms[m][8] and mt[m][2] not in IN_CONSUMPTION:
                    pq = pt[c.msg_queue[m]]
                    if not (pq[3] == W_UNLOCK if c.client_lock else pq[1]):
                        return False
        return True

    # seed 001 顺序 step 9: 解锁 process queue 并给 dispatcher 发送通知信号，表示可以进行下一条消息的消费
    add((FIFO,), always_step(
        "fifo-settled-releases-queue",
        "when a FIFO message's consumption on its process queue ends (settled, or given up after a non-retriable "
        "answer), the process queue is released for the next message: the worker goes on to unlock it and signal "
        "the dispatcher, or, without the lock (upstream), the dispatcher is signalled",
        fifo_release,
        witness=lambda s, a, o, t: s[0] == FIFO and a[0] in SETTLES and o == "ok",
        actions=SETTLES,
    ))

    def expiry_frame(s, a, o, t):
        if s[0] == PRODUCER or a[0] != "expire":
            return True
        m = a[1]
        if any(x != y for k, (x, y) in enumerate(zip(s[1], t[1])) if k != m):
            return False  # another message's server record
        if s[0] == SIMPLE:
            return s[2:] == t[2:]
        for (ms, ps), (mt, pt) in zip(views(s), views(t)):
            if ps != pt or any(ms[k] != mt[k] for k in range(self.n_msgs) if k != m):
                return False
        return len(views(s)) == len(views(t)) and (not multi or len(s[2]) == len(t[2]))

    # REFERENCE.md section 2 / broker._expire: the invisible time is one message's delivery's (a receipt handle's);
    # the seed's FIFO flow never lets a message go unsettled, so there only a broker that can take it back expires one
    add((STANDARD, SIMPLE) + redelivers, always_step(
        "expiry-touches-only-its-message",
        "the end of a message's invisible time changes that message only: no other message, no process queue, no "
        "call in flight, in any consumer",
        expiry_frame,
        witness=lambda s, a, o, t: s[0] != PRODUCER and a[0] == "expire",
        actions=("expire",),
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
    # ---- issue 31 (model mutation coverage): the simple consumer's calls, its queues, its messages' timers
    def simple_call(s, a, o, t):
        if s[0] != SIMPLE:
            return True
        name = a[0]
        if name in ("call_receive", "call_ack", "call_change_invisible"):
            op = {"call_receive": OP_RECEIVE, "call_ack": OP_ACK, "call_change_invisible": OP_CID}[name]
            return t[3][a[1]] == (op, a[2] if op != OP_RECEIVE else -1, 0)
        if name == "abandon":
            return t[1][a[1]][2] == H_NONE
        if name == "rpc" and o.__class__ is tuple and o[0] == "ok" and o[1] in ("acked", "changed"):
            op, m, _ = s[3][a[1]]
            if o[1] == "acked":
                return op == OP_ACK and t[1][m][0] == S_ACKED and t[1][m][2] == H_NONE
            return op == OP_CID and t[1][m][0] == s[1][m][0] == S_INVIS and t[1][m][2] == H_NONE
        return True

    # seed 001 Simple consumer: 直接暴露了 receive/acknowledgement/change invisible time 等原子类接口 ... 所有暴露给客户的
    # 接口都只是远程过程调用的简单封装
    add((SIMPLE,), always_step(
        "simple-calls-do-what-they-say",
        "each application call sends the one request it names, for the message it names (receive; ack of m; change "
        "of m's invisible duration), and an OK answer means that request was applied: an ack leaves the message "
        "acked, a change of invisible duration leaves it invisible with a new receipt handle the application does "
        "not hold; an application that gives up on a message holds no copy of it",
        simple_call,
        witness=lambda s, a, o, t: s[0] == SIMPLE and a[0] == "rpc" and o == ("ok", "changed"),
    ))

    def simple_queue(s, a, o, t):
        if s[0] != SIMPLE or a[0] != "rpc" or s[3][a[1]][0] != OP_RECEIVE:
            return True
        rr = s[2]
        if c.simple_any_queue:
            return t[2] == rr  # no index is kept
        if o.__class__ is tuple and o[0] == "ok":
            got = o[1]
            if got and c.msg_queue[got[0]] != rr:
                return False  # a message of another queue than the one asked
            if not got and any(s[1][m][0] == S_READY for m in self.by_queue[rr]):
                return False  # "none" while the queue asked has a ready message
        return t[3][a[1]][0] != OP_NONE or t[2] == (rr + 1) % n  # the index moves on after every answer

    # REFERENCE.md section 2: "receive (round-robin topic and queue ...)" (Java SimpleConsumerImpl.receive0 ->
    # takeMessageQueue); section 5: the Python client 5.1.2 asks a random queue each time (__select_topic_queue)
    add((SIMPLE,), always_step(
        "simple-receive-queue",
        "a simple-consumer receive asks one queue and is answered with that queue's earliest ready message or none: "
        + ("the Python client asks any queue and keeps no index" if c.simple_any_queue else
           "the Java client asks the queues round-robin, its index moving on after every answer, a failure "
           "included"),
        simple_queue,
        witness=lambda s, a, o, t: s[0] == SIMPLE and a[0] == "rpc" and o == ("ok", ())
        and any(r[0] == S_READY for r in s[1]),
        actions=("rpc",),
    ))
    if c.simple_threads >= 2:
        add((SIMPLE,), sometimes(
            "simple-concurrent-settles",
            "two application threads settle two different messages at the same time (a settle waits only for "
            "another one of the same message)",
            lambda s: s[0] == SIMPLE and len({cm for op, cm, _ in s[3] if op in (OP_ACK, OP_CID)}) >= 2,
        ))
    add((SIMPLE,), sometimes(
        "simple-every-message-acked",
        "the happy path: the application receives and acks every message",
        lambda s: s[0] == SIMPLE and all(r[0] == S_ACKED for r in s[1]),
    ))
    if c.expiry_while_held:
        def simple_expiry(s, a, o, t):
            if s[0] != SIMPLE or a[0] != "expire":
                return True
            r, r1 = s[1][a[1]], t[1][a[1]]
            srv = S_DLQ_SRV if r[1] >= maxa else S_READY
            return r1[:2] == (srv, r[1]) and r1[2] == (H_STALE if r[2] else H_NONE)

        # REFERENCE.md section 2 (the server dead-letters after the maximum delivery attempts); the invisible time is
        # the server's (seed 001 Simple consumer: the application owns the message's whole lifecycle)
        add((SIMPLE,), always_step(
            "simple-expiry-stales-handle",
            "when a message's invisible time runs out it becomes visible again, or is dead-lettered by the server "
            "once its delivery attempts are used up, and a copy the application still holds carries a receipt "
            "handle the server no longer accepts",
            simple_expiry,
            witness=lambda s, a, o, t: s[0] == SIMPLE and a[0] == "expire" and s[1][a[1]][2] == H_VALID,
            actions=("expire",),
        ))
    add((SIMPLE,), leads_to(
        "simple-let-go-redelivered",
        "a delivered message no application thread validly holds (given up, its invisible duration changed, or its "
        "answer lost) is eventually visible again or dead-lettered: the server's invisible timer always runs out",
        lambda s: s[0] == SIMPLE and any(r[0] == S_INVIS and r[2] != H_VALID for r in s[1]),
        lambda s: s[0] != SIMPLE or not any(r[0] == S_INVIS and r[2] != H_VALID for r in s[1]),
        fairness="weak fairness of the server's invisible-time expiry; the application's calls are never forced",
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
