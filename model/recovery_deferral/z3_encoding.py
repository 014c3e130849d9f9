"""z3 encoding of the recovery-deferral model (model/recovery_deferral/model.py).

Sizes are symbolic: producers ``P``, events ``N``, queues ``Q``, matches
``M``, recovery contexts ``C``, status callbacks ``K``, recoveries ``R``,
workers ``W`` and the queue capacity ``QS``; so is the **script** of events:
per event its producer, position in the producer's stream, match, kind
(error or not, recovery), context, queue and flags, with ``script(p, i)`` the
``i``-th event of producer ``p``.  These are shared constants (every state of
a query sees the same script); an unbounded proof assumes only their
well-formedness axioms (:meth:`RecoveryDeferralEncoding.well_formed`), so it
holds for every script; a concrete configuration pins them
(:meth:`RecoveryDeferralEncoding.bounded`).

The behaviour switches of :class:`RecoveryDeferralConfig` (the reference's and
upstream's choices, ``enabled``, ``handle_errors_async``, ...) are Python-level:
the encoding follows the configuration it is built for, so BMC runs on the
variants.  ``late_initiation`` (the SDK's onRecoveryInitiated after the
recovery's resent events, DEV-032) adds the script function ``seen(p, i)``, the
newest recovery among p's first i events, defined by its recursion in
:meth:`well_formed`: the producer's *newest* recovery is ``max(rec[p],
seen(p, fed[p]))``, its *known* one the newest (``correlate_with_events``, the
reference) or the stored one (upstream).

State (per tag): the executable model's fields, with queues as head / tail
indices into an array of buffers, the tracker's entry bitmask as a Bool array,
the per-match ghost backlog as membership plus an arrival stamp, and the
number of busy workers as a counter (``nbusy``; :meth:`encode` pins it to the
count of running slots).  ``told`` (the customer's latest onRecoveryInitiated)
and ``upctx`` (per producer and callback, the request id of the context the
callback was correlated with; a deferred task polls it) are real state; the
``announce`` action exists only for ``forward_initiated_at_once = False``.  Proof-only ghosts, never read by a guard and left
free by :meth:`encode`:

* ``where[e]`` / ``at[e]``: the queue and buffer index of a queued event (and
  the queue of a running one): the unique place of the event, which turns
  ``processed-exactly-once`` (a count of occurrences) into a quantified
  statement;
* ``gslot[e]`` / ``owner[x][k]``: a bijection between the outstanding tracked
  tasks of context ``x`` and ``[0, pending[x])``, which turns
  ``pending-equals-allocated-minus-completed`` (a cardinality) into a
  quantified statement (a bijection onto ``[0, n)`` witnesses a set of size
  ``n``).

With a concrete bound active (BMC, cross-check) those two properties are the
literal counts of the executable model instead.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import z3

from .state import (
    DELIVERED,
    DONE,
    DROPPED,
    DUE,
    FEEDRUN,
    LOST,
    NOT_SENT,
    PENDING,
    QUEUED,
    RUNNING,
    STALE,
    CANCELLED,
    UNFED,
    ErrorRouting,
    IndexMod,
    NoContextProducerUp,
    OnQueueFull,
    RecoveryDeferralConfig,
    STATUS_NAMES,
    NOTE_NAMES,
)
from conq.model.engines.symbolic import Aux, Encoding, SymAction

I = z3.IntSort()
B = z3.BoolSort()
AI = z3.ArraySort(I, I)


class _Script:
    """The shared, constant part: sizes and the event script."""

    def __init__(self) -> None:
        for n in ("P", "N", "Q", "M", "C", "K", "R", "W", "QS"):
            setattr(self, n, z3.Int(f"rd.{n}"))
        self.slen = z3.Array("rd.slen", I, I)  # per producer, its number of events
        self.script = z3.Function("rd.script", I, I, I)  # (p, i) -> event
        self.prod = z3.Array("rd.prod", I, I)
        self.pos = z3.Array("rd.pos", I, I)
        self.match = z3.Array("rd.match", I, I)
        self.err = z3.Array("rd.err", I, B)
        self.rec = z3.Array("rd.rec", I, I)  # the recovery whose initiation precedes the event
        self.ctxf = z3.Array("rd.ctxf", I, I)  # its full recovery context
        self.ord = z3.Array("rd.ord", I, B)  # under the per-match order claim
        self.queue = z3.Array("rd.queue", I, I)  # hash(event id) mod queues
        self.any = z3.Array("rd.any", I, B)  # may go to any queue (random task id)
        self.isup = z3.Array("rd.isup", I, B)  # per callback kind: an up kind
        self.ctx = z3.Function("rd.ctx", I, I, I)  # (p, request id) -> context
        #: (p, i) -> the newest recovery among producer p's first i events (the model's ``seen_rec``:
        #: late_initiation, the listener learns a recovery from its resent events)
        self.seen = z3.Function("rd.seen", I, I, I)


@dataclass
class S:
    sc: Any
    fed: Any
    qh: Any
    qt: Any
    qbuf: Any
    running: Any
    status: Any
    pending: Any
    entries: Any
    slot: Any
    rec: Any
    notes: Any
    shas: Any
    sp: Any
    sr: Any
    sk: Any
    inbl: Any
    arr: Any
    clock: Any
    nbusy: Any
    told: Any
    upctx: Any
    # proof-only ghosts
    where: Any
    at: Any
    gslot: Any
    owner: Any


FIELDS = [f.name for f in fields(S) if f.name != "sc"]
GHOSTS = ("where", "at", "gslot", "owner")
#: the fields concrete mode constrains (the proof-only ghosts are left free there)
REAL = [f for f in FIELDS if f not in GHOSTS]


class RecoveryDeferralEncoding(Encoding):
    model_name = "recovery-deferral"

    def __init__(self, config: RecoveryDeferralConfig | None = None):
        from .model import RecoveryDeferralModel

        self.model = RecoveryDeferralModel(config)  # normalises the enum switches
        self.c = self.model.config
        self.sc = _Script()
        self.bound = None
        self._m = self.model
        c = self.c
        # strengthening that holds for the reference switches (an upstream
        # switch that breaks a property breaks its proof, as it should)
        base = ["queue-shape", "fed-prefix"]
        track = ["placement", *base, "tracked-entries", "no-uncounted-submit"]
        self.strengthening = {
            "processed-exactly-once": base,
            "pending-equals-allocated-minus-completed": track,
            "pending-non-negative": ["pending-bijection", *track],
            "recovery-initiated-first": ["told-is-latest", "handed-over-after-initiated", "callback-contexts", "fed-in-range"],
            "event-status-matches-its-place": base,
        }
        if c.late_initiation:
            # the claim's events half does not apply (the SDK itself calls late).  Its up half: the customer is
            # told of the stored recovery, and an up is delivered once its recovery is the stored one (the
            # reference: its poll waits for the initiation; no delivery pending in a step of its own) or is only
            # ever tied to the stored one (upstream)
            self.strengthening["recovery-initiated-first"] = (
                ["told-is-latest", "nothing-due"] if c.correlate_with_events else ["told-is-latest", "callback-contexts"])
        self.bounded_only = {}
        del c

    # -- sizes -------------------------------------------------------------------------
    def bounds(self, model):
        m = model
        self._m = model  # concrete mode reads the script's tables from it
        return {
            "producer": m.config.producers,
            "event": m.n_events,
            "queue": m.config.queues,
            "match": m.config.matches,
            "ctx": m.n_ctx,
            "callback": len(m.config.callbacks),
        }

    def fresh(self, tag):
        A = lambda n, r=I: z3.Array(f"rd.{n}{tag}", I, r)
        return S(
            self.sc,
            fed=A("fed"), qh=A("qh"), qt=A("qt"), qbuf=A("qbuf", AI), running=A("running"), status=A("status"),
            pending=A("pending"), entries=A("entries", B), slot=z3.Int(f"rd.slot{tag}"), rec=A("rec"),
            notes=A("notes", AI), shas=z3.Bool(f"rd.shas{tag}"), sp=z3.Int(f"rd.sp{tag}"), sr=z3.Int(f"rd.sr{tag}"),
            sk=z3.Int(f"rd.sk{tag}"), inbl=A("inbl", B), arr=A("arr"), clock=z3.Int(f"rd.clock{tag}"),
            nbusy=z3.Int(f"rd.nbusy{tag}"), told=A("told"), upctx=A("upctx", AI), where=A("where"), at=A("at"), gslot=A("gslot"), owner=A("owner", AI),
        )

    # -- helpers ---------------------------------------------------------------------------
    def _upd(self, s, t, **ch):
        fs = FIELDS if self._ghosts else REAL
        return z3.And([getattr(t, f) == ch.get(f, getattr(s, f)) for f in fs])

    def _ectx(self, e):
        """The context the tracker counts event e under (-1: untracked, DEV-010)."""
        sc = self.sc
        if self.c.track_error_tasks:
            return sc.ctxf[e]
        return z3.If(sc.err[e], -1, sc.ctxf[e])

    def _fa(self, names, guard, body):
        vs = [z3.Int(n) for n in names]
        return z3.ForAll(vs, z3.Implies(guard(*vs), body(*vs)))

    @staticmethod
    def _out(s, e):
        return z3.Or(s.status[e] == QUEUED, s.status[e] == RUNNING)

    # -- well-formedness of the script (unbounded) -----------------------------------------
    def well_formed(self, s):
        sc = self.sc
        base = [sc.P >= 1, sc.N >= 0, sc.Q >= 1, sc.M >= 1, sc.C >= 1, sc.K >= 0, sc.R >= 0, sc.W >= 1, sc.QS >= 1]
        if self.bound is not None:
            return z3.And(base)
        ev = lambda e: z3.And(0 <= e, e < sc.N)
        return z3.And(
            base
            + [
                self._fa(["wf!e"], ev, lambda e: z3.And(
                    0 <= sc.prod[e], sc.prod[e] < sc.P, 0 <= sc.pos[e], sc.pos[e] < sc.slen[sc.prod[e]],
                    sc.script(sc.prod[e], sc.pos[e]) == e,
                    0 <= sc.ctxf[e], sc.ctxf[e] < sc.C, 0 <= sc.queue[e], sc.queue[e] < sc.Q,
                    -1 <= sc.match[e], sc.match[e] < sc.M)),
                self._fa(["wf!q"], lambda p: z3.And(0 <= p, p < sc.P), lambda p: sc.slen[p] >= 0),
                self._fa(["wf!p", "wf!i"], lambda p, i: z3.And(0 <= p, p < sc.P, 0 <= i, i < sc.slen[p]),
                         lambda p, i: z3.And(0 <= sc.script(p, i), sc.script(p, i) < sc.N,
                                             sc.prod[sc.script(p, i)] == p, sc.pos[sc.script(p, i)] == i)),
            ]
            + (self._seen_axioms() if self.c.late_initiation else [])
        )

    def _seen_axioms(self):
        """``seen(p, i)``: 0 before any event, then the running maximum of the events' recoveries."""
        sc = self.sc
        return [
            self._fa(["sn!p"], lambda p: z3.And(0 <= p, p < sc.P), lambda p: sc.seen(p, 0) == 0),
            self._fa(["sn!p", "sn!i"], lambda p, i: z3.And(0 <= p, p < sc.P, 0 <= i, i < sc.slen[p]),
                     lambda p, i: sc.seen(p, i + 1) == self._max(sc.seen(p, i), sc.rec[sc.script(p, i)])),
        ]

    @staticmethod
    def _max(a, b):
        return z3.If(a >= b, a, b)

    def _seen(self, s, p):
        """The newest recovery among p's events received so far (concrete: the model's table)."""
        if self.bound is not None and isinstance(p, int):
            row = self._m.seen_rec[p]
            out = z3.IntVal(row[-1])
            for i in range(len(row) - 2, -1, -1):
                out = z3.If(s.fed[p] == i, row[i], out)
            return out
        return self.sc.seen(p, s.fed[p])

    def _newest(self, s, p):
        """The model's ``newest``: the stored recovery, or (late_initiation) a newer one seen on p's events."""
        if not self.c.late_initiation:
            return s.rec[p]
        return self._max(s.rec[p], self._seen(s, p))

    def _known(self, s, p):
        """The model's ``known``: the recovery an up is tied to (upstream: the stored one, DEV-032)."""
        return self._newest(s, p) if self.c.correlate_with_events else s.rec[p]

    # -- init -------------------------------------------------------------------------------
    def init(self, s):
        K0 = lambda v: z3.K(I, z3.IntVal(v))
        return z3.And(
            s.fed == K0(0), s.qh == K0(0), s.qt == K0(0), s.running == K0(-1), s.status == K0(UNFED),
            s.pending == K0(0), s.entries == z3.K(I, z3.BoolVal(False)), s.slot == -1, s.rec == K0(0),
            s.notes == z3.K(I, K0(NOT_SENT)), z3.Not(s.shas), s.inbl == z3.K(I, z3.BoolVal(False)),
            s.clock == 0, s.nbusy == 0, s.told == K0(0), s.upctx == z3.K(I, K0(0)),
        )

    # -- actions ----------------------------------------------------------------------------
    # In concrete mode (a bound is active: BMC, cross-check) every index a
    # relation uses (producer, queue, event, context, callback, request id) is
    # case-split into concrete values and the script's tables are read from the
    # model: array selects at constant indices are what z3 decides fastest.
    # The ghosts are left unchanged there (only the unbounded proofs read them).

    def _case(self, term, rng, body):
        if self.bound is None:
            return body(term)
        return z3.Or([z3.And(term == v, body(v)) for v in rng] or [z3.BoolVal(False)])

    def _tab(self, name, e):
        """A script table at event (or callback) ``e``."""
        if isinstance(e, int):
            m = self._m
            v = {"prod": lambda: m.ev[e][0], "pos": lambda: m.script[m.ev[e][0]].index(e), "match": lambda: m.ev_match[e],
                 "err": lambda: m.ev_error[e], "rec": lambda: m.ev_rec[e], "ctxf": lambda: m.ev_ctx_full[e],
                 "ord": lambda: m.ev_ordered[e], "queue": lambda: m.ev_queues[e][0], "any": lambda: self._any(m, e),
                 "isup": lambda: m.is_up[e], "ectx": lambda: m.ev_ctx[e]}[name]()
            return z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)
        if name == "ectx":
            return self._ectx(e)
        return getattr(self.sc, name)[e]

    def _ctxof(self, p, r):
        if isinstance(p, int) and isinstance(r, int):
            return z3.IntVal(self._m.ctx(p, r))
        return self.sc.ctx(p, r)

    @property
    def _ghosts(self):
        return self.bound is None

    def _count(self, s, e):
        """Count event e's task now (tracker +1, entry, ghost bijection)."""
        x = self._tab("ectx", e)
        n = s.pending[x]
        out = dict(pending=z3.Store(s.pending, x, n + 1), entries=z3.Store(s.entries, x, True))
        if self._ghosts:
            out.update(gslot=z3.Store(s.gslot, e, n), owner=z3.Store(s.owner, x, z3.Store(s.owner[x], n, e)))
        return out

    def _ifd(self, cond, a: dict, b: dict, s):
        """Field-wise If of two change sets."""
        keys = set(a) | set(b)
        return {k: z3.If(cond, a.get(k, getattr(s, k)), b.get(k, getattr(s, k))) for k in keys}

    def _sizes(self):
        b = self.bound or {}
        R = self._m.config.recoveries if self.bound is not None else 0
        return (range(b.get("producer", 0)), range(b.get("queue", 0)), range(b.get("event", 0)),
                range(b.get("callback", 0)), range(R + 1))

    def actions(self):
        c, sc = self.c, self.sc
        Ps, Qs, Es, Ks, Rs = self._sizes()
        T = self._tab

        def feed(s, t, p, q):
            def at_p(p):
                return z3.And(s.slot == -1, 0 <= p, p < sc.P, s.fed[p] < sc.slen[p],
                              self._case(sc.script(p, s.fed[p]), Es, lambda e: feed_e(p, e)))

            def feed_e(p, e):
                # resent by an initiated recovery, or (late_initiation) by the next one
                pre = T("rec", e) <= s.rec[p] + (1 if c.late_initiation else 0)
                common = dict(fed=z3.Store(s.fed, p, s.fed[p] + 1))
                if c.late_initiation:
                    # the first resent event of the next recovery: the SDK's epoch of it begins (the model's
                    # ``receive``): every callback of p not deferred is not-sent again
                    first = z3.And(T("rec", e) > self._seen(s, p), T("rec", e) > s.rec[p])
                    keep = lambda k: z3.Or(s.notes[p][k] == PENDING, s.notes[p][k] == STALE, s.notes[p][k] == DUE)
                    row = rowmap(z3.K(I, z3.IntVal(NOT_SENT)), lambda k: z3.If(keep(k), s.notes[p][k], NOT_SENT))
                    crow = rowmap(z3.K(I, z3.IntVal(0)), lambda k: z3.If(keep(k), s.upctx[p][k], 0))
                    common.update(notes=z3.If(first, z3.Store(s.notes, p, row), s.notes),
                                  upctx=z3.If(first, z3.Store(s.upctx, p, crow), s.upctx))
                if self._ghosts:
                    common.update(arr=z3.Store(s.arr, e, s.clock), clock=s.clock + 1)
                else:
                    common.update(arr=z3.If(T("ord", e), z3.Store(s.arr, e, s.clock), s.arr), clock=s.clock + 1)

                def outcome(st, **more):
                    return self._upd(s, t, status=z3.Store(s.status, e, st), **common, **more)

                feedrun = outcome(FEEDRUN)
                if not c.enabled:
                    return z3.And(pre, feedrun)
                sync = T("err", e) if not c.handle_errors_async else z3.BoolVal(False)

                def at_q(q):
                    valid_q = z3.And(0 <= q, q < sc.Q, z3.Or(T("any", e), q == T("queue", e)))
                    full = s.qt[q] - s.qh[q] >= sc.QS
                    enq = dict(
                        qbuf=z3.Store(s.qbuf, q, z3.Store(s.qbuf[q], s.qt[q], e)),
                        qt=z3.Store(s.qt, q, s.qt[q] + 1),
                        inbl=z3.If(T("ord", e), z3.Store(s.inbl, e, True), s.inbl),
                    )
                    if self._ghosts:
                        enq.update(where=z3.Store(s.where, e, q), at=z3.Store(s.at, e, s.qt[q]))
                    counted = self._count(s, e) if c.count_before_enqueue else dict(slot=z3.IntVal(e) if isinstance(e, int) else e)
                    if c.track_error_tasks:
                        enq.update(counted)
                    else:
                        enq.update(self._ifd(T("err", e), {}, counted, s))
                    alts = [z3.And(z3.Not(full), outcome(QUEUED, **enq))]
                    if c.on_queue_full is OnQueueFull.DROP:
                        alts.append(z3.And(full, outcome(DROPPED)))
                    elif c.on_queue_full is OnQueueFull.CALLER_RUNS:
                        alts.append(z3.And(full, outcome(FEEDRUN)))
                    return z3.And(valid_q, z3.Or(alts))

                alts = [self._case(q, Qs, at_q)]
                if c.index_mod is IndexMod.JAVA_REMAINDER:
                    alts.append(z3.And(T("any", e), q == -1, outcome(DROPPED)))
                return z3.And(pre, z3.Or(z3.And(sync, feedrun), z3.And(z3.Not(sync), z3.Or(alts))))

            return self._case(p, Ps, at_p)

        def track(s, t):
            return z3.And(s.slot != -1, self._case(s.slot, Es, lambda e: self._upd(s, t, slot=z3.IntVal(-1), **self._count(s, e))))

        def run(s, t, q):
            def at_q(q):
                def with_e(e):
                    return self._upd(s, t, qh=z3.Store(s.qh, q, s.qh[q] + 1), running=z3.Store(s.running, q, e),
                                     status=z3.Store(s.status, e, RUNNING), nbusy=s.nbusy + 1,
                                     inbl=z3.If(T("ord", e), z3.Store(s.inbl, e, False), s.inbl))

                return z3.And(0 <= q, q < sc.Q, s.running[q] == -1, s.qt[q] > s.qh[q], s.nbusy < sc.W,
                              self._case(s.qbuf[q][s.qh[q]], Es, with_e))

            return self._case(q, Qs, at_q)

        def done(s, t, q):
            def at_q(q):
                def with_e(e):
                    x = T("ectx", e)
                    dec = z3.And(x >= 0, s.entries[x])
                    n = s.pending[x]
                    ch = dict(running=z3.Store(s.running, q, -1), status=z3.Store(s.status, e, DONE), nbusy=s.nbusy - 1,
                              pending=z3.If(dec, z3.Store(s.pending, x, n - 1), s.pending))
                    if self._ghosts:
                        last, j = s.owner[x][n - 1], s.gslot[e]
                        ch.update(owner=z3.If(dec, z3.Store(s.owner, x, z3.Store(s.owner[x], j, last)), s.owner),
                                  gslot=z3.If(dec, z3.Store(s.gslot, last, j), s.gslot))
                    return self._upd(s, t, **ch)

                return z3.And(0 <= q, q < sc.Q, s.running[q] != -1, self._case(s.running[q], Es, with_e))

            return self._case(q, Qs, at_q)

        def rowmap(base, f):
            """The row k -> f(k) (concrete: stores over the callbacks into ``base``)."""
            if self.bound is not None:  # concrete: no lambda (a quantifier to z3)
                for k in Ks:
                    base = z3.Store(base, k, f(z3.IntVal(k)))
                return base
            k = z3.Int("rd!k")
            return z3.Lambda([k], f(k))

        def recover(s, t, p):
            def at_p(p):
                r = s.rec[p] + 1
                if c.new_recovery_supersedes and c.late_initiation and c.correlate_with_events:
                    # an up that came before this (late) initiation and is tied to it stays (DEV-032)
                    keep = lambda k: z3.And(s.upctx[p][k] == r, s.notes[p][k] != NOT_SENT)
                    row = rowmap(z3.K(I, z3.IntVal(NOT_SENT)), lambda k: z3.If(keep(k), s.notes[p][k], NOT_SENT))
                    crow = rowmap(z3.K(I, z3.IntVal(0)), lambda k: z3.If(keep(k), s.upctx[p][k], 0))
                elif c.new_recovery_supersedes:
                    row, crow = z3.K(I, z3.IntVal(NOT_SENT)), z3.K(I, z3.IntVal(0))
                else:  # the old recovery's deferred ups keep their context
                    keep = lambda k: z3.Or(s.notes[p][k] == PENDING, s.notes[p][k] == STALE)
                    row = rowmap(z3.K(I, z3.IntVal(NOT_SENT)), lambda k: z3.If(keep(k), s.notes[p][k], NOT_SENT))
                    crow = rowmap(z3.K(I, z3.IntVal(0)), lambda k: z3.If(keep(k), s.upctx[p][k], 0))
                ch = dict(rec=z3.Store(s.rec, p, r), notes=z3.Store(s.notes, p, row), upctx=z3.Store(s.upctx, p, crow))
                if c.forward_initiated_at_once:
                    ch["told"] = z3.Store(s.told, p, r)
                return z3.And(0 <= p, p < sc.P, s.rec[p] < sc.R, self._upd(s, t, **ch))

            return self._case(p, Ps, at_p)

        def announce(s, t, p):
            if c.forward_initiated_at_once:
                return z3.BoolVal(False)
            return self._case(p, Ps, lambda p: z3.And(
                0 <= p, p < sc.P, s.told[p] < s.rec[p], self._upd(s, t, told=z3.Store(s.told, p, s.told[p] + 1))))

        def remap(row, frm, to):
            return rowmap(row, lambda k: z3.If(z3.Or([row[k] == v for v in frm]), to, row[k]))

        def status(s, t, p, k):
            # sdk: the SDK's recovery (newest); r: the one the listener ties the callback to (known)
            def at(p, k):
                if c.late_initiation and not c.correlate_with_events:
                    return self._case(self._newest(s, p), Rs, lambda sdk: self._case(
                        s.rec[p], Rs, lambda r: status_at(s, t, p, k, sdk, r)))
                return self._case(self._newest(s, p), Rs, lambda r: status_at(s, t, p, k, r, r))

            return self._case(p, Ps, lambda p: self._case(k, Ks, lambda k: at(p, k)))

        def status_at(s, t, p, k, sdk, r):
            up = T("isup", k)
            pre = [0 <= p, p < sc.P, 0 <= k, k < sc.K, s.notes[p][k] == NOT_SENT]
            if not c.callbacks_without_recovery:
                pre.append(sdk != 0)
            if c.up_after_events:
                x = self._ctxof(p, sdk)
                if self.bound is None:
                    unfed = self.some("event", sc.N, lambda e: z3.And(sc.prod[e] == p, sc.ctxf[e] == x, s.status[e] == UNFED), name="st!e")
                else:
                    m = self._m
                    unfed = z3.Or([z3.And(x == m.ev_ctx_full[e], s.status[e] == UNFED) for e in m.script[p]] or [z3.BoolVal(False)])
                pre.append(z3.Implies(z3.And(up, sdk > 0), z3.And(s.slot == -1, z3.Not(unfed))))
            row = s.notes[p]
            setrow = lambda nr: z3.Store(s.notes, p, nr)
            u2 = z3.Store(s.upctx, p, z3.Store(s.upctx[p], k, r))  # correlated with the known recovery
            if not c.enabled:
                return z3.And(pre + [self._upd(s, t, notes=setrow(z3.Store(row, k, DELIVERED)), upctx=u2)])
            mark = CANCELLED if c.down_cancels_deferred_up else STALE
            down = self._upd(s, t, notes=setrow(z3.Store(remap(row, (PENDING, STALE), mark), k, DELIVERED)), upctx=u2)
            noctx_v = LOST if c.no_context_producer_up is NoContextProducerUp.DROP else DELIVERED
            noctx = self._upd(s, t, notes=setrow(z3.Store(row, k, noctx_v)), upctx=u2)
            drow = remap(row, (PENDING, STALE), LOST) if c.replace_deferred else row
            deferred = self._upd(s, t, notes=setrow(z3.Store(drow, k, PENDING)), upctx=u2)
            return z3.And(pre + [z3.If(z3.Not(up), down, z3.If(r == 0, noctx, deferred))])

        def poll(s, t, p, k):
            # DeferredProducerUpTask.run polls its own context (p, upctx[p][k])
            return self._case(p, Ps, lambda p: self._case(k, Ks, lambda k: self._case(s.upctx[p][k], Rs, lambda r: poll_at(s, t, p, k, r))))

        def poll_at(s, t, p, k, r):
            x = self._ctxof(p, r)
            v = s.notes[p][k]
            pre = z3.And(z3.Not(s.shas), 0 <= p, p < sc.P, 0 <= k, k < sc.K, z3.Or(v == PENDING, v == STALE))
            setk = lambda val: z3.Store(s.notes, p, z3.Store(s.notes[p], k, val))
            if c.poll_then_deliver:
                zero = self._upd(s, t, notes=setk(DUE), shas=z3.BoolVal(True), sp=z3.IntVal(p) if isinstance(p, int) else p,
                                 sr=z3.IntVal(r) if isinstance(r, int) else r, sk=z3.IntVal(k) if isinstance(k, int) else k)
            else:
                zero = self._upd(s, t, notes=setk(DELIVERED))
            if c.late_initiation and c.correlate_with_events:
                # superseded by a newer recovery seen on its events; at 0, it waits for its own initiation
                superseded = self._upd(s, t, notes=setk(NOT_SENT), upctx=z3.Store(s.upctx, p, z3.Store(s.upctx[p], k, 0)))
                zero = z3.If(s.rec[p] != r, self._upd(s, t), zero)
                return z3.And(pre, z3.If(self._known(s, p) > r, superseded, z3.If(s.pending[x] != 0, self._upd(s, t), zero)))
            return z3.And(pre, z3.If(s.pending[x] != 0, self._upd(s, t), zero))

        def deliver(s, t):
            def at(p, r, k):
                ok = z3.And(s.rec[p] == r, s.notes[p][k] == DUE)
                n2 = z3.If(ok, z3.Store(s.notes, p, z3.Store(s.notes[p], k, DELIVERED)), s.notes)
                return self._upd(s, t, notes=n2, shas=z3.BoolVal(False))

            return z3.And(s.shas, self._case(s.sp, Ps, lambda p: self._case(s.sr, Rs, lambda r: self._case(s.sk, Ks, lambda k: at(p, r, k)))))

        return [
            SymAction("feed", [("p", I), ("q", I)], feed),
            SymAction("track", [], track),
            SymAction("run", [("q", I)], run),
            SymAction("done", [("q", I)], done),
            SymAction("recover", [("p", I)], recover),
            SymAction("status", [("p", I), ("k", I)], status),
            SymAction("poll", [("p", I), ("k", I)], poll),
            SymAction("deliver", [], deliver),
            SymAction("announce", [("p", I)], announce),
        ]

    # -- properties -------------------------------------------------------------------------
    def _placement(self, s):
        """Every queued or running event has exactly one place (ghost where/at)."""
        sc = self.sc
        inq = lambda q: z3.And(0 <= q, q < sc.Q)
        ine = lambda e: z3.And(0 <= e, e < sc.N)
        return z3.And(
            self._fa(["pl!q", "pl!k"], lambda q, k: z3.And(inq(q), s.qh[q] <= k, k < s.qt[q]),
                     lambda q, k: z3.And(ine(s.qbuf[q][k]), s.status[s.qbuf[q][k]] == QUEUED,
                                         s.where[s.qbuf[q][k]] == q, s.at[s.qbuf[q][k]] == k)),
            self._fa(["pl!r"], lambda q: z3.And(inq(q), s.running[q] != -1),
                     lambda q: z3.And(ine(s.running[q]), s.status[s.running[q]] == RUNNING, s.where[s.running[q]] == q)),
            self._fa(["pl!e"], lambda e: z3.And(ine(e), s.status[e] == QUEUED),
                     lambda e: z3.And(inq(s.where[e]), s.qh[s.where[e]] <= s.at[e], s.at[e] < s.qt[s.where[e]],
                                      s.qbuf[s.where[e]][s.at[e]] == e)),
            self._fa(["pl!f"], lambda e: z3.And(ine(e), s.status[e] == RUNNING),
                     lambda e: z3.And(inq(s.where[e]), s.running[s.where[e]] == e)),
        )

    def _bijection(self, s):
        """pending[x] >= 0 and the outstanding tracked tasks of x are in
        bijection with [0, pending[x]) (ghost gslot / owner)."""
        sc = self.sc
        ine = lambda e: z3.And(0 <= e, e < sc.N)
        return z3.And(
            self._fa(["bj!x"], lambda x: z3.And(0 <= x, x < sc.C), lambda x: s.pending[x] >= 0),
            self._fa(["bj!e"], lambda e: z3.And(ine(e), self._out(s, e), self._ectx(e) >= 0),
                     lambda e: z3.And(0 <= s.gslot[e], s.gslot[e] < s.pending[self._ectx(e)],
                                      s.owner[self._ectx(e)][s.gslot[e]] == e)),
            self._fa(["bj!x", "bj!k"], lambda x, k: z3.And(0 <= x, x < sc.C, 0 <= k, k < s.pending[x]),
                     lambda x, k: z3.And(ine(s.owner[x][k]), self._out(s, s.owner[x][k]),
                                         self._ectx(s.owner[x][k]) == x, s.gslot[s.owner[x][k]] == k)),
        )

    def _literal_exactly_once(self, s):
        n, Q, QS = self.bound["event"], self.bound["queue"], self.c.queue_size
        parts = []
        for e in range(n):
            where = [z3.If(z3.And(i < s.qt[q] - s.qh[q], s.qbuf[q][s.qh[q] + i] == e), 1, 0) for q in range(Q) for i in range(QS)]
            where += [z3.If(s.running[q] == e, 1, 0) for q in range(Q)]
            parts.append(z3.Sum(where) == z3.If(self._out(s, e), 1, 0))
        parts += [s.qt[q] - s.qh[q] <= QS for q in range(Q)]
        return z3.And(parts)

    def _literal_pending(self, s):
        n = self.bound["event"]
        return z3.And([
            s.pending[x] == z3.Sum([z3.If(z3.And(self._ectx(z3.IntVal(e)) == x, self._out(s, e)), 1, 0) for e in range(n)] + [z3.IntVal(0)])
            for x in range(self.bound["ctx"])
        ])

    def invariants(self):
        sc = self.sc
        return {
            "no-silent-loss": lambda s: self.each("event", sc.N, lambda e: s.status[e] != DROPPED, name="nsl!e"),
            "up-never-lost": lambda s: self.each(
                "producer", sc.P, lambda p: self.each("callback", sc.K, lambda k: s.notes[p][k] != LOST, name="unl!k"), name="unl!p"),
            "pending-non-negative": lambda s: self.each("ctx", sc.C, lambda x: s.pending[x] >= 0, name="pnn!x"),
            "pending-equals-allocated-minus-completed": lambda s: self._literal_pending(s) if self.bound else self._bijection(s),
            "processed-exactly-once": lambda s: self._literal_exactly_once(s) if self.bound else self._placement(s),
            "recovery-initiated-first": self._initiated_first,
            "deferred-up-of-latest-recovery": self._of_latest,
            # issue 31 (model mutation coverage)
            "event-status-matches-its-place": lambda s: self._literal_status_place(s) if self.bound else self._placement(s),
            "event-on-its-match-queue": self._on_match_queue,
            "customer-told-only-initiated-recoveries": lambda s: self.each(
                "producer", sc.P, lambda p: s.told[p] <= s.rec[p], name="tor!p"),
            "unsent-callback-has-no-context": lambda s: self.each("producer", sc.P, lambda p: self.each(
                "callback", sc.K, lambda k: z3.Implies(s.notes[p][k] == NOT_SENT, s.upctx[p][k] == 0), name="unc!k"),
                name="unc!p"),
        }

    def _literal_status_place(self, s):
        """Bounded: each event is in a queue's live slots iff queued, in a worker's slot iff running."""
        n, Q, QS = self.bound["event"], self.bound["queue"], self.c.queue_size
        parts = []
        for e in range(n):
            inq = z3.Or([z3.And(i < s.qt[q] - s.qh[q], s.qbuf[q][s.qh[q] + i] == e) for q in range(Q) for i in range(QS)]
                        or [z3.BoolVal(False)])
            run = z3.Or([s.running[q] == e for q in range(Q)] or [z3.BoolVal(False)])
            parts += [inq == (s.status[e] == QUEUED), run == (s.status[e] == RUNNING)]
        return z3.And(parts + [s.qt[q] - s.qh[q] <= QS for q in range(Q)])

    def _on_match_queue(self, s):
        """Every queued or running event with its match's task id is on its queue: the script's table
        ``queue`` (hash(match) mod queues, read from the configuration when bounded; a modulo with a
        symbolic divisor would make the unbounded queries non-linear)."""
        sc = self.sc
        ok = lambda e, q: z3.Or(sc.any[e], sc.queue[e] == q)
        if self.bound is not None:
            Q, QS = self.bound["queue"], self.c.queue_size
            return z3.And([z3.Implies(i < s.qt[q] - s.qh[q], ok(s.qbuf[q][s.qh[q] + i], q)) for q in range(Q) for i in range(QS)]
                          + [z3.Implies(s.running[q] != -1, ok(s.running[q], q)) for q in range(Q)])
        inq = lambda q: z3.And(0 <= q, q < sc.Q)
        return z3.And(
            self._fa(["mq!q", "mq!k"], lambda q, k: z3.And(inq(q), s.qh[q] <= k, k < s.qt[q]), lambda q, k: ok(s.qbuf[q][k], q)),
            self._fa(["mq!r"], lambda q: z3.And(inq(q), s.running[q] != -1), lambda q: ok(s.running[q], q)))

    def _initiated_first(self, s):
        sc, T = self.sc, self._tab
        seen = lambda e: z3.Or(s.status[e] == RUNNING, s.status[e] == DONE, s.status[e] == FEEDRUN)
        # with late_initiation the SDK itself calls onRecoveryInitiated after the recovery's events: the
        # claim keeps its up half only (properties.py)
        events_first = z3.BoolVal(True) if self.c.late_initiation else self.each(
            "event", sc.N, lambda e: z3.Implies(z3.And(T("rec", e) > 0, seen(e)), s.told[T("prod", e)] >= T("rec", e)), name="rif!e")
        return z3.And(
            events_first,
            self.each("producer", sc.P, lambda p: self.each(
                "callback", sc.K, lambda k: z3.Implies(z3.And(T("isup", k), s.notes[p][k] == DELIVERED), s.upctx[p][k] <= s.told[p]),
                name="rif!k"), name="rif!p"),
        )

    def _of_latest(self, s):
        sc, T = self.sc, self._tab
        deferred = lambda v: z3.Or(v == PENDING, v == STALE, v == DUE)
        # with late_initiation an up may be tied to the next recovery, seen on its events (never an older one)
        latest = (lambda p, k: s.upctx[p][k] >= s.rec[p]) if self.c.late_initiation else (lambda p, k: s.upctx[p][k] == s.rec[p])
        return self.each("producer", sc.P, lambda p: self.each(
            "callback", sc.K, lambda k: z3.Implies(z3.And(T("isup", k), deferred(s.notes[p][k])), latest(p, k)),
            name="dul!k"), name="dul!p")

    def auxiliaries(self):
        sc = self.sc
        ine = lambda e: z3.And(0 <= e, e < sc.N)
        return [
            Aux("queue-shape", "every queue's head index is at most its tail index",
                lambda s: self._fa(["qs!q"], lambda q: z3.And(0 <= q, q < sc.Q), lambda q: s.qh[q] <= s.qt[q])),
            Aux("fed-prefix",
                "each producer's received events are a prefix of its script: an event is unfed iff its position is at or "
                "after the producer's fed count, and 0 <= fed <= script length",
                lambda s: z3.And(
                    self._fa(["fp!e"], ine, lambda e: (s.status[e] == UNFED) == (sc.pos[e] >= s.fed[sc.prod[e]])),
                    self._fa(["fp!p"], lambda p: z3.And(0 <= p, p < sc.P), lambda p: z3.And(0 <= s.fed[p], s.fed[p] <= sc.slen[p])),
                )),
            Aux("placement",
                "every queued event sits at exactly one slot of one queue and every running event in exactly one worker slot "
                "(ghost where/at); every slot holds a queued (buffer) or running (worker) event",
                self._placement),
            Aux("pending-bijection",
                "the outstanding (queued or running) tracked tasks of each context are in bijection with [0, pending) "
                "(ghost gslot/owner), so pending counts them",
                self._bijection),
            Aux("tracked-entries", "the tracker has an entry for the context of every outstanding tracked task",
                lambda s: self._fa(["te!e"], lambda e: z3.And(ine(e), self._out(s, e), self._ectx(e) >= 0),
                                   lambda e: s.entries[self._ectx(e)])),
            Aux("no-uncounted-submit",
                "no task is submitted but not yet counted (the reference counts before it enqueues, DEV-009)",
                lambda s: s.slot == -1),
            Aux("fed-in-range", "each producer's fed count is between 0 and its script length (the half of fed-prefix that needs no placement)",
                lambda s: self._fa(["fr!p"], lambda p: z3.And(0 <= p, p < sc.P), lambda p: z3.And(0 <= s.fed[p], s.fed[p] <= sc.slen[p]))),
            Aux("told-is-latest",
                "the customer has been told of every producer's latest recovery: told = the stored request id "
                "(the reference forwards onRecoveryInitiated in the step that stores the context)",
                lambda s: s.told == s.rec),  # as whole arrays: no quantifier (both start all 0, recover stores both)
            Aux("handed-over-after-initiated",
                "every event in a task queue or a worker slot belongs to a recovery already initiated (its request id is at "
                "most its producer's stored one)",
                lambda s: z3.And(
                    self._fa(["ho!q", "ho!k"], lambda q, k: z3.And(0 <= q, q < sc.Q, s.qh[q] <= k, k < s.qt[q], ine(s.qbuf[q][k])),
                             lambda q, k: sc.rec[s.qbuf[q][k]] <= s.rec[sc.prod[s.qbuf[q][k]]]),
                    self._fa(["ho!r"], lambda q: z3.And(0 <= q, q < sc.Q, ine(s.running[q])),
                             lambda q: sc.rec[s.running[q]] <= s.rec[sc.prod[s.running[q]]]),
                )),
            Aux("nothing-due",
                "no deferred task has read 0 and waits to deliver in a step of its own (the reference reads, delivers and "
                "retires in one step under the producer's lock, DEV-015)",
                lambda s: z3.Not(s.shas)),
            Aux("callback-contexts",
                "every status callback the listener received in its producer's current recovery epoch is correlated with the "
                "producer's stored context (upctx = the stored request id)",
                lambda s: self._fa(["cc!p", "cc!k"], lambda p, k: z3.And(0 <= p, p < sc.P, 0 <= k, k < sc.K, s.notes[p][k] != NOT_SENT),
                                   lambda p, k: s.upctx[p][k] == s.rec[p])),
        ]

    # -- concrete instances -------------------------------------------------------------------
    def bounded(self, s, model):
        sc, c, m = self.sc, model.config, model
        n = m.n_events
        cs = [sc.P == c.producers, sc.N == n, sc.Q == c.queues, sc.M == c.matches, sc.C == m.n_ctx,
              sc.K == len(c.callbacks), sc.R == c.recoveries, sc.W == c.workers, sc.QS == c.queue_size]
        for p in range(c.producers):
            cs.append(sc.slen[p] == len(m.script[p]))
            for i, e in enumerate(m.script[p]):
                cs.append(sc.script(p, i) == e)
            for r in range(c.recoveries + 1):
                cs.append(sc.ctx(p, r) == m.ctx(p, r))
            cs += [sc.seen(p, i) == v for i, v in enumerate(m.seen_rec[p])]
        for e in range(n):
            p, mt, _ = m.ev[e]
            cs += [sc.prod[e] == p, sc.pos[e] == m.script[p].index(e), sc.match[e] == mt, sc.err[e] == m.ev_error[e],
                   sc.rec[e] == m.ev_rec[e], sc.ctxf[e] == m.ev_ctx_full[e], sc.ord[e] == m.ev_ordered[e],
                   sc.queue[e] == m.ev_queues[e][0], sc.any[e] == self._any(m, e)]
        for k in range(len(c.callbacks)):
            cs.append(sc.isup[k] == m.is_up[k])
        return z3.And(cs)

    @staticmethod
    def _any(m, e):
        """The event's task id is random: any queue (and DEV-008's crash)."""
        return m.ev_match[e] < 0 or (m.ev_error[e] and m.config.error_routing is ErrorRouting.RANDOM)

    def encode(self, s, state, model):
        fed, queues, running, status, pending, entries, slot, rec, notes, sched, backlog, told, upctx = state
        cs = []
        cs += [s.fed[p] == v for p, v in enumerate(fed)]
        for q, qu in enumerate(queues):
            cs.append(s.qt[q] - s.qh[q] == len(qu))
            cs += [s.qbuf[q][s.qh[q] + i] == e for i, e in enumerate(qu)]
        cs += [s.running[q] == v for q, v in enumerate(running)]
        cs.append(s.nbusy == sum(1 for v in running if v != -1))
        cs += [s.status[e] == v for e, v in enumerate(status)]
        cs += [s.pending[x] == v for x, v in enumerate(pending)]
        cs += [s.entries[x] == bool(entries & (1 << x)) for x in range(len(pending))]
        cs.append(s.slot == slot)
        cs += [s.rec[p] == v for p, v in enumerate(rec)]
        cs += [s.notes[p][k] == v for p, row in enumerate(notes) for k, v in enumerate(row)]
        cs += [s.told[p] == v for p, v in enumerate(told)]
        cs += [s.upctx[p][k] == v for p, row in enumerate(upctx) for k, v in enumerate(row)]
        if sched:
            cs += [s.shas, s.sp == sched[0], s.sr == sched[1], s.sk == sched[2]]
        else:
            cs.append(z3.Not(s.shas))
        members = {e for bl in backlog for e in bl}
        cs += [s.inbl[e] == (e in members) for e in range(len(status))]
        for bl in backlog:
            cs += [s.arr[a] < s.arr[b] for a, b in zip(bl, bl[1:])]
            if bl:
                cs.append(s.arr[bl[-1]] < s.clock)
        return z3.And(cs)

    def decode(self, mdl, s, model):
        c, m = model.config, model
        ev = lambda x: mdl.eval(x, model_completion=True)
        iv = lambda x: ev(x).as_long()
        P, Q, n = c.producers, c.queues, m.n_events
        queues = []
        for q in range(Q):
            h, t = iv(s.qh[q]), iv(s.qt[q])
            queues.append(tuple(iv(s.qbuf[q][k]) for k in range(h, max(h, t))))
        inbl = [z3.is_true(ev(s.inbl[e])) for e in range(n)]
        backlog = tuple(
            tuple(sorted((e for e in range(n) if inbl[e] and m.ev_match[e] == mt), key=lambda e: iv(s.arr[e])))
            for mt in range(c.matches)
        )
        shas = z3.is_true(ev(s.shas))
        return (
            tuple(iv(s.fed[p]) for p in range(P)),
            tuple(queues),
            tuple(iv(s.running[q]) for q in range(Q)),
            tuple(iv(s.status[e]) for e in range(n)),
            tuple(iv(s.pending[x]) for x in range(m.n_ctx)),
            sum(1 << x for x in range(m.n_ctx) if z3.is_true(ev(s.entries[x]))),
            iv(s.slot),
            tuple(iv(s.rec[p]) for p in range(P)),
            tuple(tuple(iv(s.notes[p][k]) for k in range(len(c.callbacks))) for p in range(P)),
            (iv(s.sp), iv(s.sr), iv(s.sk)) if shas else (),
            backlog,
            tuple(iv(s.told[p]) for p in range(P)),
            tuple(tuple(iv(s.upctx[p][k]) for k in range(len(c.callbacks))) for p in range(P)),
        )

    def action_args(self, action, model):
        name = action[0]
        if name == "feed":
            return name, [z3.IntVal(action[1]), z3.Int("feed.q!cc")]
        return name, [z3.IntVal(v) for v in action[1:]]

    def concrete_actions(self, model):
        c = model.config
        P, Q, K = c.producers, c.queues, len(c.callbacks)
        out = [("feed", p) for p in range(P)] + [("track",)]
        out += [("run", q) for q in range(Q)] + [("done", q) for q in range(Q)]
        out += [("recover", p) for p in range(P)] + [("announce", p) for p in range(P)]
        out += [(a, p, k) for a in ("status", "poll") for p in range(P) for k in range(K)]
        return out + [("deliver",)]

    def readable(self, mdl, s):
        sc = self.sc
        ev = lambda x: mdl.eval(x, model_completion=True)
        iv = lambda x: ev(x).as_long()
        cap = lambda v: max(0, min(iv(v), 4))
        P, N, Q, C, K = (cap(x) for x in (sc.P, sc.N, sc.Q, sc.C, sc.K))
        queues = []
        for q in range(Q):
            h, t = iv(s.qh[q]), iv(s.qt[q])
            queues.append({"head": h, "tail": t, "items": [iv(s.qbuf[q][k]) for k in range(h, min(t, h + 4))]})
        st = lambda v: STATUS_NAMES[v] if 0 <= v < len(STATUS_NAMES) else v
        nt = lambda v: NOTE_NAMES[v] if 0 <= v < len(NOTE_NAMES) else v
        return {
            "sizes": {k: iv(getattr(sc, k)) for k in ("P", "N", "Q", "C", "K", "R", "W", "QS")},
            "events": [{"producer": iv(sc.prod[e]), "pos": iv(sc.pos[e]), "ctx": iv(sc.ctxf[e]), "status": st(iv(s.status[e])),
                        "where": iv(s.where[e]), "at": iv(s.at[e]), "gslot": iv(s.gslot[e])} for e in range(N)],
            "fed": [iv(s.fed[p]) for p in range(P)],
            "queues": queues,
            "running": [iv(s.running[q]) for q in range(Q)],
            "pending": [iv(s.pending[x]) for x in range(C)],
            "entries": [z3.is_true(ev(s.entries[x])) for x in range(C)],
            "slot": iv(s.slot),
            "rec": [iv(s.rec[p]) for p in range(P)],
            "notes": [[nt(iv(s.notes[p][k])) for k in range(K)] for p in range(P)],
            "sched": [iv(s.sp), iv(s.sr), iv(s.sk)] if z3.is_true(ev(s.shas)) else [],
            "told": [iv(s.told[p]) for p in range(P)],
            "upctx": [[iv(s.upctx[p][k]) for k in range(K)] for p in range(P)],
        }
