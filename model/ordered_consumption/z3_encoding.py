# One file: the symbolic twin of model.py, one relation per action in the model's order; split, the pairing with the model (checked action by action) is lost.
"""z3 encoding of the ordered-consumption model (model/ordered_consumption/model.py).

Sizes are symbolic: ``n`` messages, ``Q`` queues (process queues), ``T``
simple-consumer application threads; the message -> queue map ``mq`` and the
message sizes ``sz`` are arbitrary arrays; the numeric limits (max delivery
attempts, max send attempts, cache thresholds, server batch) are symbolic
integers >= 1 as well, so a proof covers every configuration with the same
switches.  The boolean switches of :class:`OCConfig` (upstream variants,
mutants) are read from the configuration and change the transition relation.

Out of scope: several push consumers in one group (``consumers`` > 1, configuration
``push-fifo-shared-group``; model.py "several push consumers").  The encoding's
state has one client's fields per message and process queue (``cli``, ``cd``,
``waiting``, ...); a group of clients would need a client index on every one of
them and on every action.  Such configurations are explored (the manifest pins
their counts) and validated against the upstream client (unit PF2), not proved:
:class:`OrderedConsumptionEncoding` refuses them (``ModelError``) rather than prove
claims about a one-client relation.

One state holds the fields of every role (the model is a disjoint union of
role models, ``role`` says which fields mean something); every action family
of the executable model is one :class:`SymAction`, a disjunction over the
roles it exists in and over its outcomes.

Two encoding devices:

* a ghost ``cur`` in the producer's state: the rotation cursor
  ``(base + sent) mod Q`` that the executable model recomputes from ``sent``;
  the encoding maintains it incrementally (``+1`` wrapping at ``Q``), which
  avoids a modulus by a symbolic ``Q``.  ``encode`` sets it from the concrete
  state, so the cross-check pins it.
* cardinalities (messages / bytes in a process queue's cache, the length of
  a received prefix) are exact finite sums while a concrete bound is active
  (BMC, cross-check) and *unconstrained* integers in the unbounded proofs:
  there the receive loop may find the cache full or not and take any
  non-empty prefix of the ready messages.  This over-approximates the
  transition relation, which is sound for invariant proofs; none of the
  ``always`` properties speaks about the thresholds (the always-step
  ``receive-below-thresholds`` is checked by the explorer only).
"""

from __future__ import annotations

from typing import Any

import z3

from .state import (
    C_ACKING,
    C_CACHED,
    C_CIDING,
    C_CONSUMING,
    C_DELAY,
    C_DLQING,
    C_NONE,
    FIFO,
    FIFO_MSG,
    H_NONE,
    H_STALE,
    H_VALID,
    IN_CONSUMPTION,
    M_ACK,
    M_DLQ,
    M_NONE,
    OP_ACK,
    OP_CID,
    OP_NONE,
    OP_RECEIVE,
    P_DONE,
    P_PICK,
    P_ROUTE,
    P_SEND,
    P_WAIT,
    PRODUCER,
    R_FAILED,
    R_NONE,
    R_OK,
    ROLE_NAMES,
    S_ACKED,
    S_DLQ_CLI,
    S_DLQ_SRV,
    S_INVIS,
    S_READY,
    SETTLED,
    SIMPLE,
    STANDARD,
    TXN,
    W_BUSY,
    W_IDLE,
    W_TAKE,
    W_UNLOCK,
    OCConfig,
)
from conq.model.engines.symbolic import Aux, Encoding, SymAction

I = z3.IntSort()
B = z3.BoolSort()

SCALARS = (
    "role", "n", "Q", "T", "maxa", "maxs", "cmsg", "cbytes", "batch",
    # producer
    "phase", "mtype", "group", "sent", "queue", "backoff", "elapsed", "result", "cur",
    # simple consumer
    "rr",
    # push: the assignment changes no more (model.py ``_assignment_stable``)
    "stable",
)
INT_ARRAYS = (
    "mq", "sz",  # message -> queue, message -> size (constant)
    "srv", "dl", "cli", "inc", "cons",  # messages (push); srv, dl also simple
    "cd", "pd", "memo", "old", "okd", "tot",  # push: the client's copies, remembered outcome, ghosts
    "waiting", "notified", "locked", "worker", "assigned",  # process queues
    "held",  # simple: held by the application
    "op", "cm", "reqs",  # simple: one call per thread
)
BOOL_ARRAYS = ("acc",)  # producer: queue accepts the message type
FIELDS = SCALARS + INT_ARRAYS + BOOL_ARRAYS
CONSTANT = ("n", "Q", "T", "maxa", "maxs", "cmsg", "cbytes", "batch", "mq", "sz")


#: index kind of each action parameter
PARAM_KIND = {"q": "queue", "p": "queue", "m": "msg", "last": "msg", "th": "thread"}

#: index kind of each array field
KIND = {f: "msg" for f in ("mq", "sz", "srv", "dl", "cli", "inc", "cons", "cd", "pd", "memo", "old", "okd", "tot", "held")}
KIND.update({f: "queue" for f in ("waiting", "notified", "locked", "worker", "assigned", "acc")})
KIND.update({f: "thread" for f in ("op", "cm", "reqs")})


PUSH = (STANDARD, FIFO)
#: the push message record and process-queue record, field by field (model state order)
MSG_FIELDS = ("srv", "dl", "cli", "inc", "cons", "cd", "pd", "memo", "old", "okd", "tot")
PQ_FIELDS = ("waiting", "notified", "locked", "worker", "assigned")


class St:
    """A symbolic state: one z3 term per field of :data:`FIELDS`.

    With ``bound`` (a concrete configuration: BMC, cross-check) each array is
    a chain of stores of one scalar constant per index in range over an
    unconstrained array: selects at literal indices then simplify to those
    scalars and the queries are essentially linear arithmetic."""

    def __init__(self, tag: str, bound: dict[str, int] | None = None):
        for f in SCALARS:
            setattr(self, f, z3.Int(f"{f}{tag}"))
        for f in INT_ARRAYS + BOOL_ARRAYS:
            sort = B if f in BOOL_ARRAYS else I
            arr = z3.Array(f"{f}{tag}", I, sort)
            if bound is not None and KIND[f] in bound:
                for k in range(bound[KIND[f]]):
                    arr = z3.Store(arr, k, z3.Const(f"{f}{tag}[{k}]", sort))
            setattr(self, f, arr)

    def __getitem__(self, f: str) -> Any:
        return getattr(self, f)


class OrderedConsumptionEncoding(Encoding):
    model_name = "ordered-consumption"
    bounded_only: dict[str, str] = {}

    def __init__(self, config: OCConfig | None = None):
        self.config = config or OCConfig()
        self.roles = self.config.roles()
        c = self.config
        if c.consumers != 1 and (STANDARD in self.roles or FIFO in self.roles):
            from conq.model.kernel import ModelError

            raise ModelError(f"the z3 encoding of ordered-consumption holds one push consumer per group, not "
                             f"consumers = {c.consumers} (module docstring: out of scope)")
        one = ["fifo-lock-iff-worker", "fifo-dropped-idle", "fifo-consumer-holds-lock"] if c.client_lock else []
        attempts = ["deliveries-within-max", "ready-below-max", "copy-within-deliveries", "fifo-consuming-below-max",
                    "fifo-cached-fresh"]
        self.strengthening = {
            "send-attempts-within-max": ["attempts-left-while-sending"],
            "txn-single-attempt": ["txn-unsent-until-done"],
            "fifo-one-in-consumption": one,
            "consumed-at-most-max": attempts,
            "delivered-at-most-max": ["ready-below-max"],
            "standard-no-client-dlq": ["standard-no-memo"],
            "consumptions-within-max": attempts + ["fifo-no-change-invisible", "fifo-delay-after-failure",
                                                   "fifo-one-consumed-copy", "fifo-outcome-remembered"],
            "cache-counts-what-it-holds": ["old-only-in-consumption", "standard-no-memo"],
        }

    # ------------------------------------------------------------------ helpers
    def fresh(self, tag):
        return St(tag, self.bound)

    def _eq(self, f: str, a: Any, b: Any) -> z3.BoolRef:
        """``a == b`` for field ``f``; arrays compared pointwise on [0, size)
        while a concrete bound is active (no array extensionality in BMC)."""
        is_arr = lambda x: isinstance(x, z3.ExprRef) and x.sort().kind() == z3.Z3_ARRAY_SORT
        if f in KIND and self.bound is not None and KIND[f] in self.bound:
            return z3.And([a[k] == (b[k] if is_arr(b) else b) for k in range(self.bound[KIND[f]])])
        if f in KIND and not is_arr(b):
            return a == z3.K(I, b)
        return a == b

    def _upd(self, s: St, t: St, **ch: Any) -> z3.BoolRef:
        """``t`` is ``s`` with the fields in ``ch`` replaced."""
        bad = set(ch) - set(FIELDS)
        assert not bad, bad
        key = (id(s), None if self.bound is None else tuple(sorted(self.bound.items())))
        cache = t.__dict__.setdefault("_frame", {})
        out = []
        for f in FIELDS:
            if f in ch:
                out.append(self._eq(f, t[f], ch[f]))
            else:  # unchanged: built once per (pre-state, post-state, bound)
                if (key, f) not in cache:
                    cache[(key, f)] = (s, self._eq(f, t[f], s[f]))  # s kept alive with its id
                out.append(cache[(key, f)][1])
        return z3.And(out)

    def _lam(self, arr, body) -> z3.ArrayRef:
        """The array ``x -> body(x)`` over messages, which agrees with ``arr``
        outside [0, n): a lambda when unbounded, a chain of stores (quantifier
        free) while a concrete bound is active."""
        if self.bound is not None and "msg" in self.bound:
            for k in range(self.bound["msg"]):
                arr = z3.Store(arr, k, body(z3.IntVal(k)))
            return arr
        x = z3.Int("x!lam")
        return z3.Lambda([x], body(x))

    def _msg(self, s, m):
        return z3.And(0 <= m, m < s.n)

    def _card(self, s, pred) -> z3.ArithRef:
        """|{m in [0, n) : pred(m)}|: exact while bounded, free when unbounded."""
        if self.bound is not None and "msg" in self.bound:
            return z3.Sum([z3.If(pred(z3.IntVal(k)), 1, 0) for k in range(self.bound["msg"])] or [z3.IntVal(0)])
        return z3.FreshInt("card")

    def _weight(self, s, pred) -> z3.ArithRef:
        """Sum of the sizes of {m : pred(m)} (exact while bounded, free when unbounded)."""
        if self.bound is not None and "msg" in self.bound:
            return z3.Sum([z3.If(pred(z3.IntVal(k)), s.sz[k], 0) for k in range(self.bound["msg"])] or [z3.IntVal(0)])
        return z3.FreshInt("bytes")

    def _earliest(self, s, p, m, status):
        """m is the earliest message of queue p whose client status is ``status``."""
        return z3.And(
            self._msg(s, m), s.mq[m] == p, s.cli[m] == status,
            self.each("msg", s.n, lambda x: z3.Implies(z3.And(x < m, s.mq[x] == p), s.cli[x] != status), name="msg!early"),
        )

    def _none(self, s, p, arr, status):
        return z3.Not(self.some("msg", s.n, lambda x: z3.And(s.mq[x] == p, arr[x] == status), name="msg!none"))

    def _in_consumption(self, s, m):
        return z3.Or([s.cli[m] == v for v in IN_CONSUMPTION])

    # ------------------------------------------------------------------ state space
    def well_formed(self, s):
        """Sizes and limits, the role, and the ranges of the encoded enums and
        counters (a test checks that this is itself inductive)."""
        rng = lambda x, lo, hi: z3.And(lo <= x, x <= hi)
        by_role = []
        if PRODUCER in self.roles:
            by_role.append(z3.Implies(s.role == PRODUCER, z3.And(
                rng(s.phase, P_ROUTE, P_DONE), rng(s.mtype, 0, TXN), rng(s.result, R_NONE, R_FAILED),
                s.sent >= 0, s.elapsed >= 0, s.backoff >= 0, 0 <= s.cur, s.cur < s.Q)))
        if set(self.roles) & set(PUSH):
            by_role.append(z3.Implies(z3.Or(s.role == STANDARD, s.role == FIFO), z3.And(
                self.each("msg", s.n, lambda m: z3.And(
                    rng(s.srv[m], S_READY, S_DLQ_CLI), rng(s.cli[m], C_NONE, C_DELAY), rng(s.inc[m], 0, 1),
                    s.dl[m] >= 0, s.cons[m] >= 0, s.cd[m] >= 0, s.pd[m] >= 0, rng(s.memo[m], M_NONE, M_DLQ),
                    rng(s.old[m], 0, 1), s.okd[m] >= 0, s.tot[m] >= 0), name="msg!wf2"),
                self.each("queue", s.Q, lambda p: z3.And(
                    rng(s.waiting[p], 0, 1), rng(s.notified[p], 0, 1), rng(s.locked[p], 0, 1),
                    rng(s.worker[p], W_IDLE, W_UNLOCK), rng(s.assigned[p], 0, 1)), name="queue!wf"),
                rng(s.stable, 0, 1))))
        if SIMPLE in self.roles:
            by_role.append(z3.Implies(s.role == SIMPLE, z3.And(
                0 <= s.rr, s.rr < s.Q,
                self.each("msg", s.n, lambda m: z3.And(rng(s.srv[m], S_READY, S_DLQ_CLI), rng(s.held[m], H_NONE, H_STALE),
                                                       s.dl[m] >= 0), name="msg!wf2"),
                self.each("thread", s.T, lambda x: z3.And(rng(s.op[x], OP_NONE, OP_CID), s.reqs[x] >= 0,
                                                          z3.Implies(s.op[x] != OP_NONE, z3.Implies(s.op[x] != OP_RECEIVE, self._msg(s, s.cm[x])))),
                          name="thread!wf"))))
        return z3.And(
            s.n >= 0, s.Q >= 1, s.T >= 0,
            s.maxa >= 1, s.maxs >= 1, s.cmsg >= 1, s.cbytes >= 1, s.batch >= 1,
            z3.Or([s.role == r for r in self.roles]),
            self.each("msg", s.n, lambda m: z3.And(0 <= s.mq[m], s.mq[m] < s.Q), name="msg!wf"),
            *by_role,
        )

    def init(self, s):
        c = self.config
        out = []
        if PRODUCER in self.roles:
            out.append(z3.And(
                s.role == PRODUCER,
                z3.Or(s.phase == P_PICK, s.phase == P_ROUTE),
                0 <= s.mtype, s.mtype <= TXN,
                z3.If(s.mtype == FIFO_MSG, z3.And(0 <= s.group, s.group < s.Q), s.group == 0),
                s.sent == 0, s.queue == -1, s.backoff == 0, s.elapsed == 0, s.result == R_NONE,
                s.cur == z3.If(s.mtype == FIFO_MSG, s.group, 0),
            ))
        for r in (STANDARD, FIFO):
            if r in self.roles:
                out.append(z3.And(
                    s.role == r,
                    *[self._eq(f, s[f], z3.IntVal(v)) for f, v in (
                        ("srv", S_READY), ("dl", 0), ("cli", C_NONE), ("inc", 0), ("cons", 0),
                        ("cd", 0), ("pd", 0), ("memo", M_NONE), ("old", 0), ("okd", 0), ("tot", 0),
                        ("waiting", 0), ("notified", 0), ("locked", 0), ("worker", W_IDLE), ("assigned", 1))],
                    s.stable == (0 if c.rebalance else 1),
                ))
        if SIMPLE in self.roles:
            out.append(z3.And(
                s.role == SIMPLE,
                s.rr == 0,
                *[self._eq(f, s[f], z3.IntVal(v)) for f, v in (
                    ("srv", S_READY), ("dl", 0), ("held", 0), ("op", OP_NONE), ("cm", -1), ("reqs", 0))],
            ))
        del c
        return z3.Or(out)

    # ------------------------------------------------------------------ actions
    def actions(self):
        c = self.config
        acts: list[SymAction] = []
        roles = set(self.roles)

        # ---------------------------------------------------------- producer
        def fetch_route(s, t):
            return z3.And(s.role == PRODUCER, s.phase == P_ROUTE, z3.Or(
                self._upd(s, t, phase=P_PICK),
                self._upd(s, t, phase=P_DONE, result=R_FAILED),
            ))

        def pick(s, t):
            fifo_fixed = z3.BoolVal(False) if c.fifo_rotates else (s.mtype == FIFO_MSG)
            q = z3.If(fifo_fixed, s.group, s.cur)
            mismatch = z3.BoolVal(False) if c.skip_type_check else z3.Not(s.acc[q])
            return z3.And(s.role == PRODUCER, s.phase == P_PICK, z3.If(
                mismatch,
                self._upd(s, t, phase=P_DONE, queue=q, result=R_FAILED),
                self._upd(s, t, phase=P_SEND, queue=q),
            ))

        def send(s, t, qa):
            sent1 = s.sent + 1
            cur1 = z3.If(s.cur + 1 == s.Q, 0, s.cur + 1)
            txn_once = z3.BoolVal(False) if c.txn_retries else (s.mtype == TXN)
            exhausted = z3.Or(sent1 >= s.maxs, txn_once)
            done_failed = self._upd(s, t, phase=P_DONE, sent=sent1, cur=cur1, backoff=0, elapsed=0, result=R_FAILED)
            outs = [
                self._upd(s, t, phase=P_DONE, sent=sent1, cur=cur1, backoff=0, elapsed=0, result=R_OK),
                z3.If(exhausted, done_failed,
                      self._upd(s, t, phase=P_PICK, sent=sent1, cur=cur1, backoff=0, elapsed=0, result=R_NONE)),
            ]
            ends = z3.BoolVal(True) if c.throttle_ends_send else exhausted  # model._p_step: throttle_ends_send
            for b in c.backoffs:
                outs.append(z3.If(ends, done_failed,
                                  self._upd(s, t, phase=P_WAIT, sent=sent1, cur=cur1, backoff=b, elapsed=0, result=R_NONE)))
            return z3.And(s.role == PRODUCER, s.phase == P_SEND, qa == s.queue, z3.Or(outs))

        def tick(s, t):
            return z3.And(s.role == PRODUCER, s.phase == P_WAIT, s.elapsed < s.backoff, self._upd(s, t, elapsed=s.elapsed + 1))

        def retry(s, t):
            ready = z3.BoolVal(True) if c.ignore_backoff else (s.elapsed >= s.backoff)
            return z3.And(s.role == PRODUCER, s.phase == P_WAIT, ready, self._upd(s, t, phase=P_PICK))

        if PRODUCER in roles:
            acts += [
                SymAction("fetch_route", [], fetch_route),
                SymAction("pick", [], pick),
                SymAction("send", [("q", I)], send),
                SymAction("tick", [], tick),
                SymAction("retry", [], retry),
            ]

        # ---------------------------------------------------------- push consumer
        # model._receive ... model._create_process_queue, field for field
        def is_push(s):
            return z3.Or([s.role == r for r in PUSH if r in roles] or [z3.BoolVal(False)])

        def pq(s, p):
            return z3.And(0 <= p, p < s.Q)

        def has_msgs(s, p):
            return self.some("msg", s.n, lambda x: s.mq[x] == p, name="msg!has")

        def settled(v):
            return z3.Or([v == x for x in SETTLED])

        def let_go(s, m, s0=None, mm=None):
            """Field updates when the client is done with its copy of m (model._let_go)."""
            s0 = s.srv[m] if s0 is None else s0
            mm = s.memo[m] if mm is None else mm
            pend = s.pd[m] != 0
            normed = z3.And(z3.Not(pend), settled(s0))
            p = s.mq[m]
            upd = dict(
                srv=z3.Store(s.srv, m, s0),
                cli=z3.Store(s.cli, m, z3.If(pend, C_CACHED, C_NONE)),
                inc=z3.Store(s.inc, m, z3.If(pend, 1, 0)),
                cons=z3.Store(s.cons, m, z3.If(pend, 0, s.cons[m])),
                cd=z3.Store(s.cd, m, z3.If(pend, s.pd[m], z3.If(normed, 0, s.cd[m]))),
                pd=z3.Store(s.pd, m, 0),
                memo=z3.Store(s.memo, m, z3.If(normed, M_NONE, mm)),
                old=z3.Store(s.old, m, 0),
                okd=z3.Store(s.okd, m, 0),
                tot=z3.Store(s.tot, m, z3.If(normed, 0, s.tot[m])),
            )
            mine = z3.And(s.role == FIFO, s.old[m] == 0)
            promoted = z3.And(pend, s.assigned[p] != 0)
            if c.client_lock:
                upd["worker"] = z3.If(mine, z3.Store(s.worker, p, W_UNLOCK), s.worker)
                upd["notified"] = z3.If(z3.And(z3.Not(mine), promoted), z3.Store(s.notified, p, 1), s.notified)
            else:
                upd["notified"] = z3.If(z3.Or(mine, promoted), z3.Store(s.notified, p, 1), s.notified)
            return upd

        def give_up(s, m, outcome):
            """C1 (+ C2: FIFO remembers the outcome) -- model._give_up."""
            mm = None
            if outcome != M_NONE and c.remember_outcome:
                keep = z3.BoolVal(True) if c.memo_survives_drop else (s.old[m] == 0)
                mm = z3.If(z3.And(s.role == FIFO, keep), outcome, s.memo[m])
            return let_go(s, m, mm=mm)

        def settle(s, t, m, applied, repeat, outcome, lost_cd=None):
            """Every answer to one settle request (model._settle_answers); ``applied``: srv once applied."""
            valid = z3.And(s.srv[m] == S_INVIS, s.cd[m] == s.dl[m])
            stay = self._upd(s, t)
            up = self._upd(s, t, **give_up(s, m, outcome))
            gave_up = z3.If(repeat, stay, up) if c.settle_until_success else up
            again = z3.If(repeat, stay, self._upd(s, t, **let_go(s, m)))
            outs = [z3.And(valid, self._upd(s, t, **let_go(s, m, s0=applied))), again,
                    z3.And(z3.Not(valid), gave_up)]
            if c.server_faults:
                kept = dict(srv=z3.Store(s.srv, m, applied))
                if lost_cd is not None:
                    kept["cd"] = z3.Store(s.cd, m, lost_cd)
                outs.append(z3.And(valid, z3.If(repeat, self._upd(s, t, **kept), self._upd(s, t, **let_go(s, m, s0=applied)))))
                outs.append(z3.And(valid, gave_up))  # BAD_REQUEST: non-retriable, not applied
            return z3.Or(outs)

        def thresholds(s):
            """(count, bytes) per process queue: max(1, total / assigned process queues); exact while
            bounded, free in the unbounded proofs (no always property speaks of them)."""
            if self.bound is None or "queue" not in self.bound:
                return z3.FreshInt("thr_c"), z3.FreshInt("thr_b")
            nq = self.bound["queue"]
            n = z3.Sum([z3.If(s.assigned[k] != 0, 1, 0) for k in range(nq)])
            out = []
            for total in (s.cmsg, s.cbytes):
                v = z3.If(total > 1, total, 1)  # n == 0: max(1, total / 1)
                for k in range(nq, 0, -1):
                    q = total / k
                    v = z3.If(n == k, z3.If(q > 1, q, 1), v)
                out.append(v)
            return out[0], out[1]

        def cache_check(st, p):
            """(messages in p's cache, count threshold, the cache is full) in state st (model._full)."""
            in_cache = lambda x: z3.And(st.mq[x] == p, st.inc[x] != 0)
            behind = lambda x: z3.And(st.mq[x] == p, st.pd[x] != 0)
            cnt = self._card(st, in_cache) + self._card(st, behind)
            byts = self._weight(st, in_cache) + self._weight(st, behind)
            thr_c, thr_b = thresholds(st)
            return cnt, thr_c, z3.Or(cnt >= thr_c, z3.BoolVal(False) if c.ignore_bytes else byts >= thr_b)

        def receive(s, t, p, last):
            # waiting for room: check again (model._receive); in flight: the answer, then the next check
            cnt, thr_c, full = cache_check(s, p)
            after = z3.Store(s.waiting, p, z3.If(cache_check(t, p)[2], 1, 0))  # model._checked
            batch = z3.If(thr_c - cnt > 1, thr_c - cnt, 1)
            batch = z3.If(batch < s.batch, batch, s.batch)
            if c.server_gate:
                gated = s.role == FIFO
                blocked = z3.And(gated, self.some("msg", s.n, lambda x: z3.And(s.mq[x] == p, s.srv[x] == S_INVIS), name="msg!gate"))
                batch = z3.If(gated, 1, batch)
            else:
                blocked = z3.BoolVal(False)
            ready = lambda x: z3.And(s.mq[x] == p, s.srv[x] == S_READY)
            none_ready = z3.Or(blocked, z3.Not(self.some("msg", s.n, ready, name="msg!ready")))
            first = z3.And(self._msg(s, last), ready(last),
                           self.each("msg", s.n, lambda x: z3.Implies(z3.And(x < last, s.mq[x] == p), s.srv[x] != S_READY),
                                     name="msg!first"))
            got = lambda x: z3.And(0 <= x, x <= last, ready(x))
            prefix = self._card(s, got)
            # a batch of one is exact without counting: `last` is the first ready message
            one = z3.Implies(s.role == FIFO, first) if c.server_gate else z3.BoolVal(True)
            fresh = lambda x: z3.And(got(x), s.cli[x] == C_NONE)
            cached = lambda x: z3.And(got(x), s.cli[x] == C_CACHED)
            behind_new = lambda x: z3.And(got(x), s.cli[x] != C_NONE, s.cli[x] != C_CACHED)
            issued = self._upd(s, t, waiting=after)
            take = z3.And(
                z3.Not(blocked), self._msg(s, last), ready(last), prefix <= batch, one,
                self._upd(
                    s, t,
                    srv=self._lam(s.srv, lambda x: z3.If(got(x), S_INVIS, s.srv[x])),
                    dl=self._lam(s.dl, lambda x: z3.If(got(x), s.dl[x] + 1, s.dl[x])),
                    cli=self._lam(s.cli, lambda x: z3.If(fresh(x), C_CACHED, s.cli[x])),
                    inc=self._lam(s.inc, lambda x: z3.If(fresh(x), 1, s.inc[x])),
                    cons=self._lam(s.cons, lambda x: z3.If(fresh(x), 0, s.cons[x])),
                    cd=self._lam(s.cd, lambda x: z3.If(z3.Or(fresh(x), cached(x)), s.dl[x] + 1, s.cd[x])),
                    pd=self._lam(s.pd, lambda x: z3.If(fresh(x), 0, z3.If(behind_new(x), s.dl[x] + 1, s.pd[x]))),
                    old=self._lam(s.old, lambda x: z3.If(fresh(x), 0, s.old[x])),
                    waiting=after,
                    notified=z3.Store(s.notified, p, 1),
                ),
            )
            answers = [z3.And(none_ready, issued), take]
            if c.server_faults:
                answers.append(issued)  # timeout / unavailable / throttled
                answers.append(z3.And(z3.Not(blocked), first, self._upd(
                    s, t, srv=z3.Store(s.srv, last, S_INVIS), dl=z3.Store(s.dl, last, s.dl[last] + 1),
                    waiting=after)))  # delivered, the answer lost
            return z3.And(is_push(s), pq(s, p), s.assigned[p] != 0, has_msgs(s, p), z3.If(
                s.waiting[p] != 0,
                z3.If(full, self._upd(s, t), self._upd(s, t, waiting=z3.Store(s.waiting, p, 0))),
                z3.Or(answers),
            ))

        def dispatch(s, t, p, m):
            stop = self._upd(s, t, notified=z3.Store(s.notified, p, 0))
            plain = z3.Or(
                z3.And(self._earliest(s, p, m, C_CACHED), self._upd(s, t, cli=z3.Store(s.cli, m, C_CONSUMING))),
                z3.And(self._none(s, p, s.cli, C_CACHED), stop),
            )
            if c.client_lock:
                lock = z3.If(
                    s.locked[p] != 0, stop,
                    self._upd(s, t, notified=z3.Store(s.notified, p, 0), locked=z3.Store(s.locked, p, 1),
                         worker=z3.Store(s.worker, p, W_TAKE)),
                )
                body = z3.If(s.role == FIFO, lock, plain)
            else:
                body = plain
            return z3.And(is_push(s), pq(s, p), s.notified[p] != 0, body)

        def take(s, t, p, m):
            return z3.And(is_push(s), pq(s, p), s.worker[p] == W_TAKE, z3.Or(
                z3.And(self._earliest(s, p, m, C_CACHED),
                       self._upd(s, t, cli=z3.Store(s.cli, m, C_CONSUMING), worker=z3.Store(s.worker, p, W_BUSY))),
                z3.And(self._none(s, p, s.cli, C_CACHED),
                       self._upd(s, t, locked=z3.Store(s.locked, p, 0), worker=z3.Store(s.worker, p, W_IDLE))),
            ))

        def unlock(s, t, p):
            notified = z3.Store(s.notified, p, 1) if c.unlock_signals else s.notified
            return z3.And(is_push(s), pq(s, p), s.worker[p] == W_UNLOCK,
                          self._upd(s, t, locked=z3.Store(s.locked, p, 0), worker=z3.Store(s.worker, p, W_IDLE), notified=notified))

        def consume(s, t, m):
            remembered = self._upd(s, t, cli=z3.Store(s.cli, m, z3.If(s.memo[m] == M_ACK, C_ACKING, C_DLQING)),
                                   memo=z3.Store(s.memo, m, M_NONE))
            cons1 = s.cons[m] + 1
            attempt = s.cd[m] - 1 + cons1
            std = s.role == STANDARD
            erase = z3.If(std, 0, s.inc[m]) if not c.erase_after_settle else s.inc[m]
            if c.standard_client_dlq:
                std_fail = z3.If(attempt >= s.maxa, C_DLQING, C_CIDING)
            else:
                std_fail = z3.IntVal(C_CIDING)
            over = attempt > s.maxa if c.dlq_when_exceeds else attempt >= s.maxa
            fifo_fail = z3.If(over, C_DLQING, C_DELAY if c.retry_delay else C_CONSUMING)
            fail_cli = z3.If(std, std_fail, fifo_fail)
            tot1 = z3.If(s.role == FIFO, z3.If(s.tot[m] + 1 < s.maxa + 1, s.tot[m] + 1, s.maxa + 1), 0)
            ch = dict(inc=z3.Store(s.inc, m, erase), cons=z3.Store(s.cons, m, cons1), tot=z3.Store(s.tot, m, tot1))
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_CONSUMING, z3.If(
                s.memo[m] != M_NONE, remembered, z3.Or(
                    self._upd(s, t, cli=z3.Store(s.cli, m, C_ACKING), okd=z3.Store(s.okd, m, s.cd[m]), **ch),
                    self._upd(s, t, cli=z3.Store(s.cli, m, fail_cli), **ch),
                )))

        def next_attempt_delay(s, t, m):
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_DELAY,
                          self._upd(s, t, cli=z3.Store(s.cli, m, C_CONSUMING)))

        def ack(s, t, m):
            repeat = z3.BoolVal(True) if c.settle_retry else (s.role == FIFO)
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_ACKING, settle(s, t, m, S_ACKED, repeat, M_ACK))

        def change_invisible(s, t, m):
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_CIDING,
                          settle(s, t, m, s.srv[m], z3.BoolVal(c.settle_retry), M_NONE, lost_cd=0))

        def forward_to_dlq(s, t, m):
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_DLQING,
                          settle(s, t, m, S_DLQ_CLI, z3.BoolVal(True), M_DLQ))

        def drop_process_queue(s, t, p):
            mine = lambda x: s.mq[x] == p
            cached = lambda x: z3.And(mine(x), s.cli[x] == C_CACHED)
            busy = lambda x: z3.And(mine(x), s.cli[x] != C_NONE, s.cli[x] != C_CACHED)
            gone = lambda x: z3.And(cached(x), settled(s.srv[x]))  # discarded and normalised
            memo = (lambda x: s.memo[x]) if c.memo_survives_drop else (lambda x: z3.If(mine(x), M_NONE, s.memo[x]))
            return z3.And(is_push(s), pq(s, p), s.stable == 0, s.assigned[p] != 0, has_msgs(s, p), self._upd(
                s, t,
                cli=self._lam(s.cli, lambda x: z3.If(cached(x), C_NONE, s.cli[x])),
                inc=self._lam(s.inc, lambda x: z3.If(z3.Or(cached(x), busy(x)), 0, s.inc[x])),
                pd=self._lam(s.pd, lambda x: z3.If(z3.Or(cached(x), busy(x)), 0, s.pd[x])),
                old=self._lam(s.old, lambda x: z3.If(cached(x), 0, z3.If(busy(x), z3.If(s.role == FIFO, 1, 0), s.old[x]))),
                memo=self._lam(s.memo, lambda x: z3.If(gone(x), M_NONE, memo(x))),
                cd=self._lam(s.cd, lambda x: z3.If(gone(x), 0, s.cd[x])),
                okd=self._lam(s.okd, lambda x: z3.If(gone(x), 0, s.okd[x])),
                tot=self._lam(s.tot, lambda x: z3.If(gone(x), 0, s.tot[x])),
                waiting=z3.Store(s.waiting, p, 0), notified=z3.Store(s.notified, p, 0),
                locked=z3.Store(s.locked, p, 0), worker=z3.Store(s.worker, p, W_IDLE),
                assigned=z3.Store(s.assigned, p, 0),
            ))

        def create_process_queue(s, t, p):
            return z3.And(is_push(s), pq(s, p), s.stable == 0, s.assigned[p] == 0, has_msgs(s, p), self._upd(
                s, t, waiting=z3.Store(s.waiting, p, 0), notified=z3.Store(s.notified, p, 0),
                locked=z3.Store(s.locked, p, 0), worker=z3.Store(s.worker, p, W_IDLE),
                assigned=z3.Store(s.assigned, p, 1)))

        def assignment_stable(s, t):
            return z3.And(is_push(s), s.stable == 0, self._upd(s, t, stable=1))

        def expire(s, t, m):
            out = []
            if roles & set(PUSH):
                held = z3.BoolVal(True) if c.expiry_while_held else z3.And(s.cli[m] == C_NONE, s.pd[m] == 0)
                normed = z3.And(s.cli[m] == C_NONE, s.pd[m] == 0)
                dead = self._upd(
                    s, t, srv=z3.Store(s.srv, m, S_DLQ_SRV),
                    inc=z3.Store(s.inc, m, z3.If(normed, 0, s.inc[m])),
                    cd=z3.Store(s.cd, m, z3.If(normed, 0, s.cd[m])),
                    memo=z3.Store(s.memo, m, z3.If(normed, M_NONE, s.memo[m])),
                    old=z3.Store(s.old, m, z3.If(normed, 0, s.old[m])),
                    okd=z3.Store(s.okd, m, z3.If(normed, 0, s.okd[m])),
                    tot=z3.Store(s.tot, m, z3.If(normed, 0, s.tot[m])))
                let = s.cli[m] == C_NONE
                visible = self._upd(s, t, srv=z3.Store(s.srv, m, S_READY),
                                    cons=z3.Store(s.cons, m, z3.If(let, 0, s.cons[m])),
                                    cd=z3.Store(s.cd, m, z3.If(let, 0, s.cd[m])))
                out.append(z3.And(is_push(s), s.srv[m] == S_INVIS, held, z3.If(s.dl[m] >= s.maxa, dead, visible)))
            if SIMPLE in roles:
                enabled = z3.BoolVal(True) if c.expiry_while_held else (s.held[m] != H_VALID)
                stale = z3.Store(s.held, m, z3.If(s.held[m] != H_NONE, H_STALE, H_NONE))
                out.append(z3.And(s.role == SIMPLE, s.srv[m] == S_INVIS, enabled, z3.If(
                    s.dl[m] >= s.maxa,
                    self._upd(s, t, srv=z3.Store(s.srv, m, S_DLQ_SRV), held=stale),
                    self._upd(s, t, srv=z3.Store(s.srv, m, S_READY), held=stale),
                )))
            return z3.And(self._msg(s, m), z3.Or(out))

        if roles & set(PUSH):
            acts += [
                SymAction("receive", [("p", I), ("last", I)], receive),
                SymAction("dispatch", [("p", I), ("m", I)], dispatch),
                SymAction("take", [("p", I), ("m", I)], take),
                SymAction("unlock", [("p", I)], unlock),
                SymAction("consume", [("m", I)], consume),
                SymAction("next_attempt_delay", [("m", I)], next_attempt_delay),
                SymAction("ack", [("m", I)], ack),
                SymAction("change_invisible", [("m", I)], change_invisible),
                SymAction("forward_to_dlq", [("m", I)], forward_to_dlq),
            ]
            if c.rebalance:
                acts += [
                    SymAction("drop_process_queue", [("p", I)], drop_process_queue),
                    SymAction("create_process_queue", [("p", I)], create_process_queue),
                    SymAction("assignment_stable", [], assignment_stable),
                ]
        if roles & {STANDARD, FIFO, SIMPLE}:
            acts.append(SymAction("expire", [("m", I)], expire))

        # ---------------------------------------------------------- simple consumer
        def thread(s, th):
            return z3.And(0 <= th, th < s.T)

        def busy(s, m):
            return self.some("thread", s.T, lambda x: z3.And(z3.Or(s.op[x] == OP_ACK, s.op[x] == OP_CID), s.cm[x] == m),
                             name="thread!busy")

        def call_receive(s, t, th):
            return z3.And(s.role == SIMPLE, thread(s, th), s.op[th] == OP_NONE,
                          self._upd(s, t, op=z3.Store(s.op, th, OP_RECEIVE), cm=z3.Store(s.cm, th, -1), reqs=z3.Store(s.reqs, th, 0)))

        def call_settle(op):
            def rel(s, t, th, m):
                return z3.And(s.role == SIMPLE, thread(s, th), s.op[th] == OP_NONE, self._msg(s, m),
                              s.held[m] != 0, z3.Not(busy(s, m)),
                              self._upd(s, t, op=z3.Store(s.op, th, op), cm=z3.Store(s.cm, th, m), reqs=z3.Store(s.reqs, th, 0)))
            return rel

        def rpc(s, t, th, m):
            """model._s_rpc: the one request of a call and every answer to it."""
            op, cm = s.op[th], s.cm[th]
            idle = dict(op=z3.Store(s.op, th, OP_NONE), cm=z3.Store(s.cm, th, -1), reqs=z3.Store(s.reqs, th, 0))
            # the round-robin (model._take_message_queue), or any queue and no index kept (the Python
            # client's variant, model._select_topic_queue): m is the first ready message of its own queue
            rr1 = s.rr if c.simple_any_queue else z3.If(s.rr + 1 == s.Q, 0, s.rr + 1)
            asked = s.mq[m] if c.simple_any_queue else s.rr

            def returned(rr=None, **ch):
                # a failure is returned to the application as is (the mutant retries instead)
                if c.simple_retry:
                    return self._upd(s, t, reqs=z3.Store(s.reqs, th, z3.If(s.reqs[th] + 1 < 2, s.reqs[th] + 1, 2)), **ch)
                return self._upd(s, t, rr=s.rr if rr is None else rr, **idle, **ch)

            first = z3.And(self._msg(s, m), s.mq[m] == asked, s.srv[m] == S_READY,
                           self.each("msg", s.n, lambda x: z3.Implies(z3.And(x < m, s.mq[x] == asked), s.srv[x] != S_READY),
                                     name="msg!first"))
            if c.simple_any_queue:
                empty = self.some("queue", s.Q, lambda q: self._none(s, q, s.srv, S_READY), name="queue!empty")
            else:
                empty = self._none(s, s.rr, s.srv, S_READY)
            delivered = dict(srv=z3.Store(s.srv, m, S_INVIS), dl=z3.Store(s.dl, m, s.dl[m] + 1))
            received = z3.Or(
                z3.And(first, self._upd(s, t, held=z3.Store(s.held, m, H_VALID), rr=rr1, **delivered, **idle)),
                z3.And(empty, self._upd(s, t, rr=rr1, **idle)),
            )
            valid = s.held[cm] == H_VALID
            acked = z3.And(valid, self._upd(s, t, srv=z3.Store(s.srv, cm, S_ACKED), held=z3.Store(s.held, cm, H_NONE), **idle))
            changed = z3.And(valid, self._upd(s, t, held=z3.Store(s.held, cm, H_NONE), **idle))
            ok = z3.If(op == OP_RECEIVE, received, z3.If(op == OP_ACK, acked, changed))
            # OK; a retriable error (or, for a settle, a non-retriable answer); a failed receive moves the
            # round-robin on like a delivered one (model._s_rpc)
            outs = [ok, returned(rr=z3.If(op == OP_RECEIVE, rr1, s.rr))]
            if c.server_faults:
                lost_settle = z3.And(valid, z3.If(
                    op == OP_ACK,
                    returned(srv=z3.Store(s.srv, cm, S_ACKED), held=z3.Store(s.held, cm, H_STALE)),
                    returned(held=z3.Store(s.held, cm, H_STALE))))
                outs.append(z3.If(op == OP_RECEIVE, z3.And(first, returned(rr=rr1, **delivered)), lost_settle))
            return z3.And(s.role == SIMPLE, thread(s, th), op != OP_NONE, z3.Or(outs))

        def abandon(s, t, m):
            return z3.And(s.role == SIMPLE, self._msg(s, m), s.held[m] != 0, z3.Not(busy(s, m)),
                          self._upd(s, t, held=z3.Store(s.held, m, 0)))

        if SIMPLE in roles:
            acts += [
                SymAction("call_receive", [("th", I)], call_receive),
                SymAction("call_ack", [("th", I), ("m", I)], call_settle(OP_ACK)),
                SymAction("call_change_invisible", [("th", I), ("m", I)], call_settle(OP_CID)),
                SymAction("rpc", [("th", I), ("m", I)], rpc),
                SymAction("abandon", [("m", I)], abandon),
            ]
        return [SymAction(a.name, a.params, self._concretize(a)) for a in acts]

    def _concretize(self, a: SymAction):
        """While a concrete bound is active, a relation is the disjunction of
        its instances at every concrete parameter value (index parameters
        range over their sort's size): every store and select then has a
        literal index and simplifies away, which keeps BMC quantifier- and
        array-free in effect.  Unbounded: the relation as written."""
        import itertools

        def rel(s, t, *args):
            if self.bound is None:
                return a.relation(s, t, *args)
            # a literal argument (the cross-check's concrete action) is its own only instance
            ranges = [[x.as_long()] if z3.is_int_value(x) else range(self.bound[PARAM_KIND[p]])
                      for (p, _), x in zip(a.params, args)]
            out = []
            for ks in itertools.product(*ranges):
                body = a.relation(s, t, *[z3.IntVal(k) for k in ks])
                out.append(z3.And([x == k for x, k in zip(args, ks)] + [body]))
            return z3.simplify(z3.Or(out) if out else z3.BoolVal(False), expand_select_store=True)

        return rel

    # ------------------------------------------------------------------ properties
    def invariants(self):
        def pairwise(s, bad):
            return self.each("msg", s.n, lambda a: self.each("msg", s.n, lambda b: z3.Implies(
                z3.And(a != b, s.mq[a] == s.mq[b]), z3.Not(z3.And(bad(a), bad(b)))), name="msg!b"), name="msg!a")

        def for_role(role, body):
            return lambda s: z3.Implies(s.role == role, body(s))

        consumers = (STANDARD, FIFO, SIMPLE)
        return {
            "send-attempts-within-max": for_role(PRODUCER, lambda s: s.sent <= s.maxs),
            "txn-single-attempt": for_role(PRODUCER, lambda s: z3.Implies(s.mtype == TXN, s.sent <= 1)),
            "group-only-for-fifo": for_role(PRODUCER, lambda s: z3.Or(s.mtype == FIFO_MSG, s.group == 0)),
            "fifo-one-in-consumption": for_role(FIFO, lambda s: pairwise(
                s, lambda m: z3.And(self._in_consumption(s, m), s.old[m] == 0))),
            "consumed-at-most-max": for_role(FIFO, lambda s: self.each("msg", s.n, lambda m: z3.Implies(
                s.cons[m] != 0, s.cd[m] - 1 + s.cons[m] <= s.maxa))),
            "standard-no-client-dlq": for_role(STANDARD, lambda s: self.each("msg", s.n, lambda m: z3.And(
                s.srv[m] != S_DLQ_CLI, s.cli[m] != C_DLQING))),
            "delivered-at-most-max": lambda s: z3.Implies(z3.Or([s.role == r for r in consumers]), self.each(
                "msg", s.n, lambda m: s.dl[m] <= s.maxa)),
            "consumptions-within-max": for_role(FIFO, lambda s: self.each("msg", s.n, lambda m: s.tot[m] <= s.maxa)),
            # issue 31: standard mode has no lock and no FIFO worker
            "standard-never-locks": for_role(STANDARD, lambda s: self.each("queue", s.Q, lambda p: z3.And(
                s.locked[p] == 0, s.worker[p] == W_IDLE), name="queue!std")),
            # issue 31: the cache's count and bytes are sums of each message's entries (exact sums when
            # bounded, the cardinalities of the module docstring); what the claim pins is that each
            # message's entries are what the client holds
            "cache-counts-what-it-holds": lambda s: z3.Implies(z3.Or(s.role == STANDARD, s.role == FIFO), self.each(
                "msg", s.n, lambda m: self._holds_in_cache(s, m), name="msg!cc")),
        }

    def _holds_in_cache(self, s, m):
        """Message m's entries in its process queue's cache are what the client holds (properties.py,
        cache-counts-what-it-holds): a cached copy counts, nothing counts without a copy, a newer delivery
        waits only behind a copy in consumption; FIFO: a copy in consumption counts unless its process
        queue was dropped; standard: a consumed copy no longer counts (seed 001 普通 step 3)."""
        busy = self._in_consumption(s, m)
        cached = s.cli[m] == C_CACHED
        common = [z3.Implies(cached, s.inc[m] == 1), z3.Implies(z3.And(z3.Not(busy), z3.Not(cached)), s.inc[m] == 0),
                  z3.Implies(s.pd[m] != 0, busy)]
        fifo = z3.Implies(busy, s.inc[m] == z3.If(s.old[m] == 0, 1, 0))
        if not self.config.erase_after_settle:
            std = z3.Implies(z3.And(busy, s.cli[m] != C_CONSUMING), s.inc[m] == 0)
        elif not self.config.rebalance:  # upstream: counted until settled, and no rebalance drops it
            std = z3.Implies(busy, s.inc[m] == 1)
        else:
            std = z3.BoolVal(True)
        return z3.And(common + [z3.If(s.role == FIFO, fifo, std)])

    def auxiliaries(self):
        def fifo_msgs(body):
            return lambda s: z3.Implies(s.role == FIFO, self.each("msg", s.n, lambda m: body(s, m), name="msg!aux"))

        def fifo_queues(body):
            return lambda s: z3.Implies(s.role == FIFO, self.each("queue", s.Q, lambda p: body(s, p), name="queue!aux"))

        def consumer_msgs(body):
            consumers = (STANDARD, FIFO, SIMPLE)
            return lambda s: z3.Implies(z3.Or([s.role == r for r in consumers]),
                                        self.each("msg", s.n, lambda m: body(s, m), name="msg!aux"))

        def is_(s, m, *statuses):
            return z3.Or([s.cli[m] == x for x in statuses])

        below = (lambda a, b: a <= b) if self.config.dlq_when_exceeds else (lambda a, b: a < b)
        return [
            Aux("attempts-left-while-sending",
                "a producer that has not finished has made fewer than max_send_attempts requests",
                lambda s: z3.Implies(z3.And(s.role == PRODUCER, s.phase != P_DONE), s.sent < s.maxs)),
            Aux("txn-unsent-until-done",
                "an unfinished transactional send has made no request yet (its one request finishes it)",
                lambda s: z3.Implies(z3.And(s.role == PRODUCER, s.mtype == TXN, s.phase != P_DONE), s.sent == 0)),
            Aux("fifo-lock-iff-worker",
                "in FIFO mode a process queue is locked exactly while its worker is not idle",
                fifo_queues(lambda s, p: (s.locked[p] != 0) == (s.worker[p] != W_IDLE))),
            Aux("fifo-dropped-idle",
                "in FIFO mode a process queue that a rebalance dropped (and that was not given back) is unlocked, "
                "its worker idle, its dispatcher not signalled",
                fifo_queues(lambda s, p: z3.Implies(s.assigned[p] == 0, z3.And(
                    s.locked[p] == 0, s.worker[p] == W_IDLE, s.notified[p] == 0)))),
            Aux("standard-no-memo",
                "standard mode never remembers an outcome (only FIFO settles a redelivery from a remembered outcome)",
                lambda s: z3.Implies(s.role == STANDARD, self.each("msg", s.n, lambda m: s.memo[m] == M_NONE, name="msg!aux"))),
            Aux("fifo-consumer-holds-lock",
                "in FIFO mode a message in consumption on its queue's current process queue has that process "
                "queue's worker busy (holding the lock)",
                fifo_msgs(lambda s, m: z3.Implies(z3.And(self._in_consumption(s, m), s.old[m] == 0),
                                                  s.worker[s.mq[m]] == W_BUSY))),
            Aux("deliveries-within-max",
                "the server delivered a message at most max_attempts times (the property delivered-at-most-max, as "
                "a strengthening of others)",
                lambda s: self.invariants()["delivered-at-most-max"](s)),
            Aux("ready-below-max",
                "a visible (ready) message has been delivered fewer than max_attempts times (at the maximum the "
                "server dead-letters it instead)",
                consumer_msgs(lambda s, m: z3.Implies(s.srv[m] == S_READY, s.dl[m] < s.maxa))),
            Aux("copy-within-deliveries",
                "in FIFO mode the client's copy of a message came with a delivery the server made (1 <= attempt <= "
                "delivery count); a newer delivery cached behind it is later still, and waits only behind a copy in "
                "consumption",
                fifo_msgs(lambda s, m: z3.And(
                    z3.Implies(s.cli[m] != C_NONE, z3.And(1 <= s.cd[m], s.cd[m] <= s.dl[m])),
                    z3.Implies(s.pd[m] != 0, z3.And(s.cd[m] < s.pd[m], s.pd[m] <= s.dl[m], self._in_consumption(s, m)))))),
            Aux("fifo-consuming-below-max",
                "in FIFO mode a message being consumed or waiting for its retry delay has delivery attempt + local "
                "consumptions below the maximum",
                fifo_msgs(lambda s, m: z3.Implies(is_(s, m, C_CONSUMING, C_DELAY), below(s.cd[m] - 1 + s.cons[m], s.maxa)))),
            Aux("fifo-delay-after-failure",
                "in FIFO mode a copy waits for the retry policy's delay only after a failed consumption",
                fifo_msgs(lambda s, m: z3.Implies(s.cli[m] == C_DELAY, s.cons[m] >= 1))),
            Aux("fifo-cached-fresh",
                "in FIFO mode a cached copy was not consumed yet",
                fifo_msgs(lambda s, m: z3.Implies(s.cli[m] == C_CACHED, s.cons[m] == 0))),
            Aux("fifo-no-change-invisible",
                "FIFO mode never changes a message's invisible duration",
                fifo_msgs(lambda s, m: s.cli[m] != C_CIDING)),
            Aux("fifo-one-consumed-copy",
                "in FIFO mode a copy consumed (and not finished) is the only copy the listener ever consumed: the "
                "total equals its local consumptions",
                fifo_msgs(lambda s, m: z3.Implies(z3.And(s.cons[m] != 0, is_(s, m, C_CONSUMING, C_DELAY, C_ACKING, C_DLQING)),
                                                  s.tot[m] == s.cons[m]))),
            Aux("fifo-outcome-remembered",
                "in FIFO mode once the listener consumed a message, a copy that is not being consumed or settled "
                "has the outcome remembered (so it is settled, never consumed again)",
                fifo_msgs(lambda s, m: z3.Implies(
                    z3.And(s.tot[m] != 0, z3.Or(is_(s, m, C_NONE, C_CACHED), z3.And(s.cli[m] == C_CONSUMING, s.cons[m] == 0))),
                    s.memo[m] != M_NONE))),
            Aux("old-only-in-consumption",
                "a copy is marked as belonging to a dropped process queue only while it is in consumption (a drop "
                "discards cached copies; letting a copy go clears the mark)",
                lambda s: z3.Implies(z3.Or(s.role == STANDARD, s.role == FIFO), self.each(
                    "msg", s.n, lambda m: z3.Implies(s.old[m] != 0, self._in_consumption(s, m)), name="msg!aux"))),
        ]

    # ------------------------------------------------------------------ concrete instances
    def bounds(self, model):
        c = model.config
        return {"msg": len(c.msg_queue), "queue": c.queues, "thread": c.simple_threads}

    def _pins(self, s, model) -> list:
        c = model.config
        return [
            s.n == len(c.msg_queue), s.Q == c.queues, s.T == c.simple_threads,
            s.maxa == c.max_attempts, s.maxs == c.max_send_attempts,
            s.cmsg == c.cache_messages, s.cbytes == c.cache_bytes, s.batch == c.server_batch,
        ] + [s.mq[k] == q for k, q in enumerate(c.msg_queue)] + [s.sz[k] == v for k, v in enumerate(c.msg_size)]

    def bounded(self, s, model):
        return z3.And(self._pins(s, model) + [z3.Or([s.role == r for r in model.roles])])

    def encode(self, s, state, model):
        c = model.config
        role = state[0]
        out = self._pins(s, model) + [s.role == role]
        if role == PRODUCER:
            _, phase, mtype, mask, group, sent, queue, backoff, elapsed, result = state
            base = group if mtype == FIFO_MSG else 0
            out += [s.phase == phase, s.mtype == mtype, s.group == group, s.sent == sent, s.queue == queue,
                    s.backoff == backoff, s.elapsed == elapsed, s.result == result, s.cur == (base + sent) % c.queues]
            out += [s.acc[q] == bool((mask >> q) & 1) for q in range(c.queues)]
        elif role == SIMPLE:
            _, msgs, rr, calls = state
            for k, (srv, d, held) in enumerate(msgs):
                out += [s.srv[k] == srv, s.dl[k] == d, s.held[k] == held]
            out.append(s.rr == rr)
            for k, (op, cm, reqs) in enumerate(calls):
                out += [s.op[k] == op, s.cm[k] == cm, s.reqs[k] == reqs]
        else:
            _, msgs, pqs, stable = state
            for k, r in enumerate(msgs):
                out += [s[f][k] == v for f, v in zip(MSG_FIELDS, r)]
            for k, pq in enumerate(pqs):
                out += [s[f][k] == v for f, v in zip(PQ_FIELDS, pq)]
            out.append(s.stable == stable)
        return z3.And(out)

    def decode(self, m, s, model):
        c = model.config
        ev = lambda e: m.eval(e, model_completion=True).as_long()
        role = ev(s.role)
        n, Q, T = len(c.msg_queue), c.queues, c.simple_threads
        if role == PRODUCER:
            mask = sum(1 << q for q in range(Q) if z3.is_true(m.eval(s.acc[q], model_completion=True)))
            return (PRODUCER, ev(s.phase), ev(s.mtype), mask, ev(s.group), ev(s.sent), ev(s.queue),
                    ev(s.backoff), ev(s.elapsed), ev(s.result))
        if role == SIMPLE:
            return (SIMPLE, tuple((ev(s.srv[k]), ev(s.dl[k]), ev(s.held[k])) for k in range(n)), ev(s.rr),
                    tuple((ev(s.op[k]), ev(s.cm[k]), ev(s.reqs[k])) for k in range(T)))
        return (role,
                tuple(tuple(ev(s[f][k]) for f in MSG_FIELDS) for k in range(n)),
                tuple(tuple(ev(s[f][k]) for f in PQ_FIELDS) for k in range(Q)),
                ev(s.stable))

    def action_args(self, action, model):
        name, *args = action
        vals = [z3.IntVal(a) for a in args]
        free = lambda p: z3.Int(f"{name}.{p}!chosen")
        if name == "receive":
            return name, vals + [free("last")]
        if name in ("dispatch", "take"):
            return name, vals + [free("m")]
        if name == "rpc":
            return name, vals + [free("m")]
        return name, vals

    def concrete_actions_for(self, model, role):
        """The concrete actions of one role in ``model``'s configuration."""
        c = model.config
        n, Q, T = len(c.msg_queue), c.queues, c.simple_threads
        if role == PRODUCER:
            return [("fetch_route",), ("pick",)] + [("send", q) for q in range(Q)] + [("tick",), ("retry",)]
        if role == SIMPLE:
            return ([("call_receive", th) for th in range(T)]
                    + [(a, th, m) for a in ("call_ack", "call_change_invisible") for th in range(T) for m in range(n)]
                    + [("rpc", th) for th in range(T)] + [("abandon", m) for m in range(n)] + [("expire", m) for m in range(n)])
        return ([(a, p) for a in ("receive", "dispatch", "take", "unlock") for p in range(Q)]
                + ([(a, p) for a in ("drop_process_queue", "create_process_queue") for p in range(Q)] + [("assignment_stable",)]
                   if c.rebalance else [])
                + [(a, m) for a in ("consume", "next_attempt_delay", "ack", "change_invisible", "forward_to_dlq", "expire")
                   for m in range(n)])

    def concrete_actions(self, model):
        out: list[tuple] = []
        for r in model.roles:
            out += [a for a in self.concrete_actions_for(model, r) if a not in out]
        return out

    def readable(self, m, s):
        """A CTI state: sizes, limits, and the messages / queues / threads the
        z3 model singles out (the indices its array interpretations mention,
        else the first few), with enum names."""
        from .state import CLI_NAMES, MEMO_NAMES, MTYPES, OP_NAMES, P_PHASES, RESULTS, SRV_NAMES, WORKER_NAMES

        ev = lambda e: m.eval(e, model_completion=True).as_long()
        name = lambda names, v: names[v] if 0 <= v < len(names) else v
        role = ev(s.role)
        n, Q, T = ev(s.n), ev(s.Q), ev(s.T)

        def shown(fields, size):
            idx: set[int] = set()
            for f in fields:
                val = m.eval(s[f], model_completion=True)
                while z3.is_store(val):
                    k = val.arg(1)
                    if z3.is_int_value(k):
                        idx.add(k.as_long())
                    val = val.arg(0)
                interp = m[val.decl()] if z3.is_app(val) and val.num_args() == 0 and val.decl() in m.decls() else None
                if isinstance(interp, z3.FuncInterp):
                    idx.update(e[0].as_long() for e in interp.as_list()[:-1] if z3.is_int_value(e[0]))
            picked = sorted(k for k in idx if 0 <= k < size)[:8]
            return picked or list(range(min(size, 3)))

        view: dict[str, Any] = {"role": name(ROLE_NAMES, role), "max_attempts": ev(s.maxa)}
        if role == PRODUCER:
            view.update({"max_send_attempts": ev(s.maxs), "queues": Q, "phase": name(P_PHASES, ev(s.phase)),
                         "type": name(MTYPES, ev(s.mtype)), "group": ev(s.group), "requests": ev(s.sent),
                         "queue": ev(s.queue), "backoff": ev(s.backoff), "waited": ev(s.elapsed),
                         "result": name(RESULTS, ev(s.result)), "cursor": ev(s.cur)})
        elif role == SIMPLE:
            view.update({"messages": n, "queues": Q, "threads": T, "next_queue": ev(s.rr),
                         "msgs": {k: {"queue": ev(s.mq[k]), "server": name(SRV_NAMES, ev(s.srv[k])), "attempt": ev(s.dl[k]),
                                      "held": ev(s.held[k])} for k in shown(("srv", "dl", "held"), n)},
                         "calls": {k: {"op": name(OP_NAMES, ev(s.op[k])), "message": ev(s.cm[k]), "requests": ev(s.reqs[k])}
                                   for k in shown(("op", "cm", "reqs"), T)}})
        else:
            view.update({"messages": n, "queues": Q,
                         "msgs": {k: {"queue": ev(s.mq[k]), "server": name(SRV_NAMES, ev(s.srv[k])), "attempt": ev(s.dl[k]),
                                      "client": name(CLI_NAMES, ev(s.cli[k])), "cached": ev(s.inc[k]), "consumed": ev(s.cons[k]),
                                      "copy_attempt": ev(s.cd[k]), "pending_attempt": ev(s.pd[k]),
                                      "memo": name(MEMO_NAMES, ev(s.memo[k])), "on_dropped_queue": ev(s.old[k]),
                                      "ok_on_delivery": ev(s.okd[k]), "consumed_total": ev(s.tot[k])}
                                  for k in shown(MSG_FIELDS, n)},
                         "process_queues": {k: {"waiting": ev(s.waiting[k]), "notified": ev(s.notified[k]),
                                                "locked": ev(s.locked[k]), "worker": name(WORKER_NAMES, ev(s.worker[k])),
                                                "assigned": ev(s.assigned[k])}
                                            for k in shown(PQ_FIELDS, Q)},
                         "assignment": "stable" if ev(s.stable) else "may change"})
        return view
