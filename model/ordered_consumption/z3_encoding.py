"""z3 encoding of the ordered-consumption model (model/ordered_consumption/model.py).

Sizes are symbolic: ``n`` messages, ``Q`` queues (process queues), ``T``
simple-consumer application threads; the message -> queue map ``mq`` and the
message sizes ``sz`` are arbitrary arrays; the numeric limits (max delivery
attempts, max send attempts, cache thresholds, server batch) are symbolic
integers >= 1 as well, so a proof covers every configuration with the same
switches.  The boolean switches of :class:`OCConfig` (upstream variants,
mutants) are read from the configuration and change the transition relation.

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
    C_DLQING,
    C_NONE,
    FIFO,
    FIFO_MSG,
    IN_CONSUMPTION,
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
    "role", "n", "Q", "T", "maxa", "maxs", "thr_c", "thr_b", "batch",
    # producer
    "phase", "mtype", "group", "sent", "queue", "backoff", "elapsed", "result", "cur",
    # simple consumer
    "rr",
)
INT_ARRAYS = (
    "mq", "sz",  # message -> queue, message -> size (constant)
    "srv", "dl", "cli", "inc", "cons",  # messages (push); srv, dl also simple
    "waiting", "notified", "locked", "worker",  # process queues
    "held",  # simple: held by the application
    "op", "cm", "reqs",  # simple: one call per thread
)
BOOL_ARRAYS = ("acc",)  # producer: queue accepts the message type
FIELDS = SCALARS + INT_ARRAYS + BOOL_ARRAYS
CONSTANT = ("n", "Q", "T", "maxa", "maxs", "thr_c", "thr_b", "batch", "mq", "sz")


#: index kind of each action parameter
PARAM_KIND = {"q": "queue", "p": "queue", "m": "msg", "last": "msg", "th": "thread"}

#: index kind of each array field
KIND = {f: "msg" for f in ("mq", "sz", "srv", "dl", "cli", "inc", "cons", "held")}
KIND.update({f: "queue" for f in ("waiting", "notified", "locked", "worker", "acc")})
KIND.update({f: "thread" for f in ("op", "cm", "reqs")})


PUSH = (STANDARD, FIFO)


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
        fifo_aux = ["fifo-no-change-invisible", "fifo-invisible-held"]
        if c.client_lock:
            one = ["fifo-lock-iff-worker", "fifo-consumer-holds-lock"]
        elif c.server_gate:
            one = ["held-is-invisible", "fifo-gate-one-invisible"]
        else:
            one = []
        self.strengthening = {
            "send-attempts-within-max": ["attempts-left-while-sending"],
            "txn-single-attempt": ["txn-unsent-until-done"],
            "fifo-one-in-consumption": one,
            "consumed-at-most-max": ["fifo-consuming-below-max", "fifo-cached-fresh", "fifo-ready-undelivered"] + fifo_aux,
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
                    rng(s.srv[m], S_READY, S_DLQ_CLI), rng(s.cli[m], C_NONE, C_DLQING), rng(s.inc[m], 0, 1),
                    s.dl[m] >= 0, s.cons[m] >= 0), name="msg!wf2"),
                self.each("queue", s.Q, lambda p: z3.And(
                    rng(s.waiting[p], 0, 1), rng(s.notified[p], 0, 1), rng(s.locked[p], 0, 1),
                    rng(s.worker[p], W_IDLE, W_UNLOCK)), name="queue!wf"))))
        if SIMPLE in self.roles:
            by_role.append(z3.Implies(s.role == SIMPLE, z3.And(
                0 <= s.rr, s.rr < s.Q,
                self.each("msg", s.n, lambda m: z3.And(rng(s.srv[m], S_READY, S_DLQ_CLI), rng(s.held[m], 0, 1),
                                                       s.dl[m] >= 0), name="msg!wf2"),
                self.each("thread", s.T, lambda x: z3.And(rng(s.op[x], OP_NONE, OP_CID), s.reqs[x] >= 0,
                                                          z3.Implies(s.op[x] != OP_NONE, z3.Implies(s.op[x] != OP_RECEIVE, self._msg(s, s.cm[x])))),
                          name="thread!wf"))))
        return z3.And(
            s.n >= 0, s.Q >= 1, s.T >= 0,
            s.maxa >= 1, s.maxs >= 1, s.thr_c >= 1, s.thr_b >= 1, s.batch >= 1,
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
                        ("waiting", 0), ("notified", 0), ("locked", 0), ("worker", W_IDLE))],
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
            for b in c.backoffs:
                outs.append(z3.If(exhausted, done_failed,
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
        def is_push(s):
            return z3.Or([s.role == r for r in PUSH if r in roles] or [z3.BoolVal(False)])

        def pq(s, p):
            return z3.And(0 <= p, p < s.Q)

        def released(s, m, role_fifo):
            """Process-queue fields after m is settled (ack / DLQ ok)."""
            p = s.mq[m]
            if c.client_lock:
                fifo = {"worker": z3.Store(s.worker, p, W_UNLOCK), "notified": s.notified}
            else:
                fifo = {"worker": s.worker, "notified": z3.Store(s.notified, p, 1)}
            return {k: z3.If(role_fifo, v, s[k]) for k, v in fifo.items()}

        def receive(s, t, p, last):
            in_cache = lambda x: z3.And(s.mq[x] == p, s.inc[x] != 0)
            cnt = self._card(s, in_cache)
            byts = self._weight(s, in_cache)
            full = z3.Or(cnt >= s.thr_c, z3.BoolVal(False) if c.ignore_bytes else byts >= s.thr_b)
            batch = z3.If(s.thr_c - cnt > 1, s.thr_c - cnt, 1)
            batch = z3.If(batch < s.batch, batch, s.batch)
            if c.server_gate:
                gated = s.role == FIFO
                blocked = z3.And(gated, self.some("msg", s.n, lambda x: z3.And(s.mq[x] == p, s.srv[x] == S_INVIS), name="msg!gate"))
                batch = z3.If(gated, 1, batch)
            else:
                blocked = z3.BoolVal(False)
            ready = lambda x: z3.And(s.mq[x] == p, s.srv[x] == S_READY)
            none_ready = z3.Or(blocked, z3.Not(self.some("msg", s.n, ready, name="msg!ready")))
            got = lambda x: z3.And(0 <= x, x <= last, ready(x))
            prefix = self._card(s, got)
            if c.server_gate:
                # a batch of one is exact without counting: `last` is the first ready message
                first = self.each("msg", s.n, lambda x: z3.Implies(z3.And(x < last, s.mq[x] == p), s.srv[x] != S_READY),
                                  name="msg!first")
                one = z3.Implies(s.role == FIFO, first)
            else:
                one = z3.BoolVal(True)
            take = z3.And(
                z3.Not(blocked), self._msg(s, last), ready(last), prefix <= batch, one,
                self._upd(
                    s, t,
                    srv=self._lam(s.srv, lambda x: z3.If(got(x), S_INVIS, s.srv[x])),
                    dl=self._lam(s.dl, lambda x: z3.If(got(x), s.dl[x] + 1, s.dl[x])),
                    cli=self._lam(s.cli, lambda x: z3.If(got(x), C_CACHED, s.cli[x])),
                    inc=self._lam(s.inc, lambda x: z3.If(got(x), 1, s.inc[x])),
                    cons=self._lam(s.cons, lambda x: z3.If(got(x), 0, s.cons[x])),
                    waiting=z3.Store(s.waiting, p, 0),
                    notified=z3.Store(s.notified, p, 1),
                ),
            )
            return z3.And(is_push(s), pq(s, p), z3.If(
                full,
                self._upd(s, t, waiting=z3.Store(s.waiting, p, 1)),
                z3.Or(z3.And(none_ready, self._upd(s, t, waiting=z3.Store(s.waiting, p, 0))), take),
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
            cons1 = s.cons[m] + 1
            attempt = s.dl[m] - 1 + cons1
            std = s.role == STANDARD
            erase = z3.If(std, 0, s.inc[m]) if not c.erase_after_settle else s.inc[m]
            if c.standard_client_dlq:
                std_fail = z3.If(attempt >= s.maxa, C_DLQING, C_CIDING)
            else:
                std_fail = z3.IntVal(C_CIDING)
            over = attempt > s.maxa if c.dlq_when_exceeds else attempt >= s.maxa
            fifo_fail = z3.If(over, C_DLQING, C_CONSUMING)
            fail_cli = z3.If(std, std_fail, fifo_fail)
            inc1, cons2 = z3.Store(s.inc, m, erase), z3.Store(s.cons, m, cons1)
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_CONSUMING, z3.Or(
                self._upd(s, t, cli=z3.Store(s.cli, m, C_ACKING), inc=inc1, cons=cons2),
                self._upd(s, t, cli=z3.Store(s.cli, m, fail_cli), inc=inc1, cons=cons2),
            ))

        def ack(s, t, m):
            ok = self._upd(s, t, srv=z3.Store(s.srv, m, S_ACKED), cli=z3.Store(s.cli, m, C_NONE),
                      inc=z3.Store(s.inc, m, 0), **released(s, m, s.role == FIFO))
            gone = self._upd(s, t, cli=z3.Store(s.cli, m, C_NONE), inc=z3.Store(s.inc, m, 0))
            retried = z3.BoolVal(True) if c.settle_retry else (s.role == FIFO)
            err = z3.If(retried, self._upd(s, t), gone)
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_ACKING, z3.Or(ok, err))

        def change_invisible(s, t, m):
            gone = self._upd(s, t, cli=z3.Store(s.cli, m, C_NONE), inc=z3.Store(s.inc, m, 0))
            err = self._upd(s, t) if c.settle_retry else gone
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_CIDING, z3.Or(gone, err))

        def forward_to_dlq(s, t, m):
            ok = self._upd(s, t, srv=z3.Store(s.srv, m, S_DLQ_CLI), cli=z3.Store(s.cli, m, C_NONE),
                      inc=z3.Store(s.inc, m, 0), **released(s, m, s.role == FIFO))
            return z3.And(is_push(s), self._msg(s, m), s.cli[m] == C_DLQING, z3.Or(ok, self._upd(s, t)))

        def expire(s, t, m):
            out = []
            if roles & set(PUSH):
                out.append(z3.And(is_push(s), s.cli[m] == C_NONE, s.srv[m] == S_INVIS, z3.If(
                    s.dl[m] >= s.maxa,
                    self._upd(s, t, srv=z3.Store(s.srv, m, S_DLQ_SRV), cli=z3.Store(s.cli, m, C_NONE), inc=z3.Store(s.inc, m, 0)),
                    self._upd(s, t, srv=z3.Store(s.srv, m, S_READY), cli=z3.Store(s.cli, m, C_NONE), inc=z3.Store(s.inc, m, 0),
                         cons=z3.Store(s.cons, m, 0)),
                )))
            if SIMPLE in roles:
                out.append(z3.And(s.role == SIMPLE, s.srv[m] == S_INVIS, s.held[m] == 0, z3.If(
                    s.dl[m] >= s.maxa,
                    self._upd(s, t, srv=z3.Store(s.srv, m, S_DLQ_SRV), held=z3.Store(s.held, m, 0)),
                    self._upd(s, t, srv=z3.Store(s.srv, m, S_READY), held=z3.Store(s.held, m, 0)),
                )))
            return z3.And(self._msg(s, m), z3.Or(out))

        if roles & set(PUSH):
            acts += [
                SymAction("receive", [("p", I), ("last", I)], receive),
                SymAction("dispatch", [("p", I), ("m", I)], dispatch),
                SymAction("take", [("p", I), ("m", I)], take),
                SymAction("unlock", [("p", I)], unlock),
                SymAction("consume", [("m", I)], consume),
                SymAction("ack", [("m", I)], ack),
                SymAction("change_invisible", [("m", I)], change_invisible),
                SymAction("forward_to_dlq", [("m", I)], forward_to_dlq),
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
            op, cm = s.op[th], s.cm[th]
            idle = dict(op=z3.Store(s.op, th, OP_NONE), cm=z3.Store(s.cm, th, -1), reqs=z3.Store(s.reqs, th, 0))
            rr1 = z3.If(s.rr + 1 == s.Q, 0, s.rr + 1)
            first = z3.And(self._msg(s, m), s.mq[m] == s.rr, s.srv[m] == S_READY,
                           self.each("msg", s.n, lambda x: z3.Implies(z3.And(x < m, s.mq[x] == s.rr), s.srv[x] != S_READY),
                                     name="msg!first"))
            received = z3.Or(
                z3.And(first, self._upd(s, t, srv=z3.Store(s.srv, m, S_INVIS), dl=z3.Store(s.dl, m, s.dl[m] + 1),
                                   held=z3.Store(s.held, m, 1), rr=rr1, **idle)),
                z3.And(self._none(s, s.rr, s.srv, S_READY), self._upd(s, t, rr=rr1, **idle)),
            )
            acked = self._upd(s, t, srv=z3.Store(s.srv, cm, S_ACKED), held=z3.Store(s.held, cm, 0), **idle)
            changed = self._upd(s, t, held=z3.Store(s.held, cm, 0), **idle)
            ok = z3.If(op == OP_RECEIVE, received, z3.If(op == OP_ACK, acked, changed))
            if c.simple_retry:
                err = self._upd(s, t, reqs=z3.Store(s.reqs, th, z3.If(s.reqs[th] + 1 < 2, s.reqs[th] + 1, 2)))
            else:
                err = self._upd(s, t, **idle)
            return z3.And(s.role == SIMPLE, thread(s, th), op != OP_NONE, z3.Or(ok, err))

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

        return {
            "send-attempts-within-max": for_role(PRODUCER, lambda s: s.sent <= s.maxs),
            "txn-single-attempt": for_role(PRODUCER, lambda s: z3.Implies(s.mtype == TXN, s.sent <= 1)),
            "fifo-one-in-consumption": for_role(FIFO, lambda s: pairwise(s, lambda m: self._in_consumption(s, m))),
            "consumed-at-most-max": for_role(FIFO, lambda s: self.each("msg", s.n, lambda m: z3.Implies(
                s.cons[m] != 0, s.dl[m] - 1 + s.cons[m] <= s.maxa))),
            "standard-no-client-dlq": for_role(STANDARD, lambda s: self.each("msg", s.n, lambda m: z3.And(
                s.srv[m] != S_DLQ_CLI, s.cli[m] != C_DLQING))),
        }

    def auxiliaries(self):
        def fifo_msgs(body):
            return lambda s: z3.Implies(s.role == FIFO, self.each("msg", s.n, lambda m: body(s, m), name="msg!aux"))

        def fifo_queues(body):
            return lambda s: z3.Implies(s.role == FIFO, self.each("queue", s.Q, lambda p: body(s, p), name="queue!aux"))

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
            Aux("fifo-consumer-holds-lock",
                "in FIFO mode a message in consumption has its process queue's worker busy (holding the lock)",
                fifo_msgs(lambda s, m: z3.Implies(self._in_consumption(s, m), s.worker[s.mq[m]] == W_BUSY))),
            Aux("held-is-invisible",
                "a message the push client holds (cached or in consumption) is invisible on the server",
                lambda s: z3.Implies(z3.Or([s.role == r for r in PUSH]), self.each(
                    "msg", s.n, lambda m: z3.Implies(s.cli[m] != C_NONE, s.srv[m] == S_INVIS), name="msg!aux"))),
            Aux("fifo-gate-one-invisible",
                "in FIFO mode with the server gate at most one message of a queue is invisible",
                lambda s: z3.Implies(s.role == FIFO, self.each("msg", s.n, lambda a: self.each("msg", s.n, lambda b: z3.Implies(
                    z3.And(a != b, s.mq[a] == s.mq[b], s.srv[a] == S_INVIS), s.srv[b] != S_INVIS), name="msg!b"), name="msg!a"))),
            Aux("fifo-consuming-below-max",
                "in FIFO mode a message being consumed has delivery attempt + local consumptions below the maximum",
                fifo_msgs(lambda s, m: z3.Implies(s.cli[m] == C_CONSUMING,
                                                  (s.dl[m] - 1 + s.cons[m] <= s.maxa) if self.config.dlq_when_exceeds
                                                  else (s.dl[m] - 1 + s.cons[m] < s.maxa)))),
            Aux("fifo-cached-fresh",
                "in FIFO mode a cached message was delivered once and not consumed yet",
                fifo_msgs(lambda s, m: z3.Implies(s.cli[m] == C_CACHED, z3.And(s.cons[m] == 0, s.dl[m] <= 1)))),
            Aux("fifo-ready-undelivered",
                "in FIFO mode a visible (ready) message was never delivered",
                fifo_msgs(lambda s, m: z3.Implies(s.srv[m] == S_READY, s.dl[m] == 0))),
            Aux("fifo-invisible-held",
                "in FIFO mode the client never lets go of an invisible message (so it never expires and is never redelivered)",
                fifo_msgs(lambda s, m: z3.Implies(s.srv[m] == S_INVIS, s.cli[m] != C_NONE))),
            Aux("fifo-no-change-invisible",
                "FIFO mode never changes a message's invisible duration",
                fifo_msgs(lambda s, m: s.cli[m] != C_CIDING)),
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
            s.thr_c == model.thr_count, s.thr_b == model.thr_bytes, s.batch == c.server_batch,
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
            _, msgs, pqs = state
            for k, (srv, d, cli, inc, cons) in enumerate(msgs):
                out += [s.srv[k] == srv, s.dl[k] == d, s.cli[k] == cli, s.inc[k] == inc, s.cons[k] == cons]
            for k, (w, nf, lk, wk) in enumerate(pqs):
                out += [s.waiting[k] == w, s.notified[k] == nf, s.locked[k] == lk, s.worker[k] == wk]
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
                tuple((ev(s.srv[k]), ev(s.dl[k]), ev(s.cli[k]), ev(s.inc[k]), ev(s.cons[k])) for k in range(n)),
                tuple((ev(s.waiting[k]), ev(s.notified[k]), ev(s.locked[k]), ev(s.worker[k])) for k in range(Q)))

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
                + [(a, m) for a in ("consume", "ack", "change_invisible", "forward_to_dlq", "expire") for m in range(n)])

    def concrete_actions(self, model):
        out: list[tuple] = []
        for r in model.roles:
            out += [a for a in self.concrete_actions_for(model, r) if a not in out]
        return out

    def readable(self, m, s):
        """A CTI state: sizes, limits, and the messages / queues / threads the
        z3 model singles out (the indices its array interpretations mention,
        else the first few), with enum names."""
        from .state import CLI_NAMES, MTYPES, OP_NAMES, P_PHASES, RESULTS, SRV_NAMES, WORKER_NAMES

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
                                      "client": name(CLI_NAMES, ev(s.cli[k])), "cached": ev(s.inc[k]), "consumed": ev(s.cons[k])}
                                  for k in shown(("srv", "dl", "cli", "inc", "cons"), n)},
                         "process_queues": {k: {"waiting": ev(s.waiting[k]), "notified": ev(s.notified[k]),
                                                "locked": ev(s.locked[k]), "worker": name(WORKER_NAMES, ev(s.worker[k]))}
                                            for k in shown(("waiting", "notified", "locked", "worker"), Q)}})
        return view
