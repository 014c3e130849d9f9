# One file: the symbolic twin of model.py, one relation per action in the model's order; split, the pairing with the model (checked action by action) is lost.
"""z3 encoding of the consumer-lists model (model/consumer_lists/model.py).

Sizes are symbolic: ``N`` consumers and ``M`` messages (Int indices), and so
are each consumer's priority ``prio[c]``, whether it acquires ``acq[c]``, its
priority level ``lvl[c]`` (the index of its Interested list), the credit a
consumer starts with and may hold, the number of suspension reasons the
environment toggles and the environment's budget: an unbounded proof covers
every configuration with the same behaviour switches.  The switches of
:class:`ConsumerListsConfig` (``flag_before_queue``, ``unnotify_first``,
``notify_one``, ``acquire_cas``, ...) are Python-level: the encoding follows
the configuration it is built for, so BMC runs on the upstream variants.

State (per tag), one array per field of the executable model's flat tuple:
per consumer ``node``, ``pc``, ``wake``, ``flag``, ``credit``, ``susp`` and
``seen[c][j]`` (the browser's seen set); per message ``status`` and ``pend``;
the lists All, NotInterested, NonAcquiring and Notified as Boolean membership
arrays.  The Interested lists (one ordered tuple per priority level) are
membership ``intr[c]``, the level list the consumer is in ``ilvl[c]`` and a
rank ``pos[c]``: appending to the tail gives the consumer the rank ``clock``
and increments ``clock``, so a list's order is the order of the ranks of its
members and the iteration order of every notification walk is
``(ilvl, pos)`` lexicographic.  A list is a set with ranks, so "appears at
most once" is structural; ``lists-match-states`` still says that a consumer
is in the Interested list *of its own level*.

Notification walks (``notifyConsumers``, ``notifyOtherConsumers``, the walk
after a consumer becomes uninterested) notify at most one consumer under the
reference switches: the relation takes that consumer as a parameter ``x``
(-1: nobody) and says it is the first consumer of the walk that stops it, or
that no consumer does.  ``notify_one = False`` (all interested consumers) is
an array map over consumers.

The other actors (issue 16, model/consumer_lists/actors.py): a per-message
``dp`` (a delete waits for the entry), ``gcnt`` (a shared group counted the
entry's acquisition), a per consumer and message ``rej`` (the consumer rejected
the entry, like ``seen``), a per group ``gown`` (its consumer + 1, 0: none) and
the scalar ``grs`` (a group pointer reset is owed); a message's status may be
``DELETED`` (-1).  Whether the housekeeping thread deletes, consumers reject,
messages arrive held, the queue has groups, and which group policy it has are
symbolic switches (``held``, ``expiry``, ``reject``, ``groups``, ``shared``)
with the group of each message ``grp[j]`` (-1: none) and the number of groups
``NG`` symbolic too: one unbounded proof covers every actor on or off and both
group policies.  The rule switches of the new actors (``delete_notifies``,
``group_assign_with_acquire``, ``group_refuses_closed``,
``handover_only_if_notified``) are Python-level like the others.

Proof-only ghost: ``bad``, set by an acquire that takes a message that was not
available; ``acquired-at-most-once`` (an always-step property of the model) is
encoded as the state invariant ``not bad``, so BMC can look for its
violation (the ``acquire-no-cas`` variant) and agree on the length.  ``clock``
and the ranks of consumers not in Interested are auxiliary too: ``encode``
constrains only the order of the members.

With a concrete bound active (BMC, cross-check) every array is a chain of
stores of scalar constants, every consumer / message parameter is case-split
into literals and the configuration's tables (priorities, acquiring) are read
from the model: quantifier-free queries.
"""

from __future__ import annotations

import itertools
from typing import Any

import z3

from .state import (
    ABSENT,
    AVAILABLE,
    CF,
    DELETED,
    DES,
    F_CREDIT,
    F_FLAG,
    F_PC,
    F_SEEN,
    F_SUSP,
    F_WAKE,
    FIND,
    HELD,
    IDLE,
    INTERESTED,
    NODE_NAMES,
    NON_ACQUIRING,
    NONE,
    NOT_INTERESTED,
    NOTIFIED,
    REASONS,
    REMOVED,
    START,
    TAKE,
    UNARRIVED,
    ConsumerListsConfig,
    GroupPolicy,
    PullRule,
)
from conq.model.engines.symbolic import Aux, Encoding, SymAction

I = z3.IntSort()
B = z3.BoolSort()

CONS_INT = ("node", "pc", "credit", "susp", "ilvl", "pos")
CONS_BOOL = ("wake", "flag", "all", "ni", "na", "nt", "intr")
MATRIX = ("seen", "rej")  # per consumer, per message
MSG_INT = ("status",)
MSG_BOOL = ("pend", "dp", "gcnt")
GRP_INT = ("gown",)
SCALARS = ("budget", "clock")
SBOOL = ("grs", "bad")
FIELDS = CONS_INT + CONS_BOOL + MATRIX + MSG_INT + MSG_BOOL + GRP_INT + SCALARS + SBOOL
KIND = {f: "cons" for f in CONS_INT + CONS_BOOL + MATRIX}
KIND.update({f: "msg" for f in MSG_INT + MSG_BOOL})
KIND.update({f: "grp" for f in GRP_INT})
BOOLS = frozenset(CONS_BOOL + MSG_BOOL)
ACQ = 3  # status 3 + c: acquired by consumer c
LISTS = (("ni", NOT_INTERESTED), ("na", NON_ACQUIRING), ("nt", NOTIFIED))


class _Consts:
    """The shared constant part: sizes, per-consumer tables, numeric limits."""

    def __init__(self) -> None:
        self.N = z3.Int("cl.N")
        self.M = z3.Int("cl.M")
        self.prio = z3.Array("cl.prio", I, I)
        self.acq = z3.Array("cl.acq", I, B)
        self.lvl = z3.Array("cl.lvl", I, I)
        self.initc = z3.Int("cl.initc")
        self.maxc = z3.Int("cl.maxc")
        self.nreas = z3.Int("cl.nreas")
        self.eb = z3.Int("cl.eb")
        # the other actors' switches, the groups
        self.held = z3.Bool("cl.held")
        self.expiry = z3.Bool("cl.expiry")
        self.reject = z3.Bool("cl.reject")
        self.groups = z3.Bool("cl.groups")
        self.shared = z3.Bool("cl.shared")
        self.NG = z3.Int("cl.NG")
        self.grp = z3.Array("cl.grp", I, I)


class St(dict):
    """A symbolic state (or an intermediate view): field name -> z3 term."""

    def __getattr__(self, f: str) -> Any:
        try:
            return self[f]
        except KeyError:
            raise AttributeError(f) from None


def _lit(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if z3.is_int_value(x):
        return x.as_long()
    return None


def _ite(c: Any, a: Any, b: Any) -> Any:
    if isinstance(c, bool):
        return a if c else b
    if z3.is_true(c):
        return a
    if z3.is_false(c):
        return b
    return z3.If(c, a, b)


class Vec:
    """A concrete-size array while a bound is active: a Python list of z3
    terms, read and written at literal indices (no select/store terms)."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = list(items)

    def __getitem__(self, k):
        i = _lit(k)
        if i is None:  # a symbolic index: an if-chain (not expected on the hot path)
            out = self.items[-1] if self.items else z3.IntVal(0)
            for n in range(len(self.items) - 2, -1, -1):
                out = z3.If(k == n, self.items[n], out)
            return out
        return self.items[i]

    def store(self, k, val):
        i = _lit(k)
        assert i is not None, "a store at a symbolic index while bounded"
        items = list(self.items)
        if isinstance(val, bool):
            val = z3.BoolVal(val)
        elif isinstance(val, int):
            val = z3.IntVal(val)
        if 0 <= i < len(items):
            items[i] = val
        return Vec(items)


def _store(arr, k, val):
    return arr.store(k, val) if isinstance(arr, Vec) else z3.Store(arr, k, val)


class ConsumerListsEncoding(Encoding):
    model_name = "consumer-lists"

    def __init__(self, config: ConsumerListsConfig | None = None):
        from .model import ConsumerListsModel

        self._m = ConsumerListsModel(config)  # normalises the enum switch
        self.c = self._m.config
        self.k = _Consts()
        self.bound = None
        self._n = itertools.count()
        self._cache: dict = {}
        # lists-match-states and the kinds are inductive on their own; see auxiliaries()
        self.strengthening = {
            "group-held-by-one-consumer": ["grouped-entry-held-by-its-owner", "shared-group-counts-its-held-entries"],
            "credit-never-negative": ["found-with-credit"],
        }
        self.bounded_only = {}

    # -- sizes and tables ------------------------------------------------------------------
    def bounds(self, model):
        self._m = model
        return {"cons": model.n, "msg": model.m, "grp": model.G}

    def _size(self, kind):
        return {"cons": self.k.N, "msg": self.k.M, "grp": self.k.NG}[kind]

    # -- the other actors' switches: the configuration's values while bounded, symbolic otherwise --
    def sw(self, name):
        if self.bound is not None:
            c = self.c
            val = {"held": c.held, "expiry": c.expiry, "reject": c.reject, "groups": bool(c.groups),
                   "shared": bool(c.groups) and c.group_policy is GroupPolicy.SHARED}[name]
            return z3.BoolVal(val)
        return getattr(self.k, name)

    def grp(self, j):
        """The group of message ``j`` (-1: none)."""
        k = _lit(j)
        if self.bound is not None and k is not None:
            return z3.IntVal(self._m.grp[k]) if 0 <= k < self._m.m else z3.IntVal(-1)
        return self.k.grp[j]

    def _N(self):
        return z3.IntVal(self.bound["cons"]) if self.bound else self.k.N

    def _M(self):
        return z3.IntVal(self.bound["msg"]) if self.bound else self.k.M

    def acq(self, c):
        k = _lit(c)
        if self.bound is not None and k is not None:
            return z3.BoolVal(self._m.acq[k])
        return self.k.acq[c]

    def prio(self, c):
        k = _lit(c)
        if self.bound is not None and k is not None:
            return z3.IntVal(self._m.prio[k])
        return self.k.prio[c]

    def lvl(self, c):
        k = _lit(c)
        if self.bound is not None and k is not None:
            return z3.IntVal(self._m.lvl[k])
        return self.k.lvl[c]

    def E(self, kind, body):
        return self.each(kind, self._size(kind), body, name=f"{kind}!{next(self._n)}")

    def S(self, kind, body):
        return self.some(kind, self._size(kind), body, name=f"{kind}!{next(self._n)}")

    def _case(self, term, kind, body):
        """``body(term)`` with ``term`` an index of ``kind``: case-split into
        literals while a bound is active, a range guard otherwise."""
        if self.bound is None:
            return z3.And(0 <= term, term < self._size(kind), body(term))
        if _lit(term) is not None:
            k = _lit(term)
            return body(k) if 0 <= k < self.bound[kind] else z3.BoolVal(False)
        return z3.Or([z3.And(term == k, body(k)) for k in range(self.bound[kind])] or [z3.BoolVal(False)])

    def _map(self, kind, arr, body):
        """The array ``i -> body(i)`` over ``kind`` (a :class:`Vec` when bounded)."""
        if self.bound is not None:
            return Vec(body(k) for k in range(self.bound[kind]))
        i = z3.Int(f"{kind}!lam{next(self._n)}")
        return z3.Lambda([i], body(i))

    def _split_acq(self, c, f_acq, f_browser):
        a = self.acq(c)
        if z3.is_true(a):
            return f_acq()
        if z3.is_false(a):
            return f_browser()
        return z3.Or(z3.And(a, f_acq()), z3.And(z3.Not(a), f_browser()))

    # -- states ----------------------------------------------------------------------------
    def _unused(self, f):
        """While bounded: a field the configuration never changes from its initial value (an actor
        switched off) is that constant, so it adds no variables to BMC."""
        c = self.c
        off = {"rej": not c.reject, "dp": not c.expiry,
               "gcnt": not (c.groups and c.group_policy is GroupPolicy.SHARED), "grs": not c.groups}
        return self.bound is not None and off.get(f, False)

    def fresh(self, tag):
        s = St()
        b = self.bound
        for f in FIELDS:
            kind = KIND.get(f)
            if self._unused(f):
                false = z3.BoolVal(False)
                if f in MATRIX:
                    s[f] = Vec(Vec(false for _ in range(b["msg"])) for _ in range(b["cons"]))
                elif kind is not None:
                    s[f] = Vec(false for _ in range(b[kind]))
                else:
                    s[f] = false
            elif f in MATRIX:
                if b is not None:
                    s[f] = Vec(Vec(z3.Bool(f"cl.{f}{tag}[{c}][{j}]") for j in range(b["msg"])) for c in range(b["cons"]))
                else:
                    s[f] = z3.Array(f"cl.{f}{tag}", I, z3.ArraySort(I, B))
            elif kind is not None:
                sort = B if f in BOOLS else I
                if b is not None:
                    s[f] = Vec(z3.Const(f"cl.{f}{tag}[{k}]", sort) for k in range(b[kind]))
                else:
                    s[f] = z3.Array(f"cl.{f}{tag}", I, sort)
            elif f in SBOOL:
                s[f] = z3.Bool(f"cl.{f}{tag}")
            else:
                s[f] = z3.Int(f"cl.{f}{tag}")
        return s

    def _eq(self, f, a, b):
        if isinstance(a, Vec):
            out = []
            for x, y in zip(a.items, b.items):
                if isinstance(x, Vec):
                    out += [p == q for p, q in zip(x.items, y.items) if not p.eq(q)]
                elif not x.eq(y):
                    out.append(x == y)
            return z3.And(out) if out else z3.BoolVal(True)
        return a == b

    def _upd(self, t, w):
        return z3.And([self._eq(f, t[f], w[f]) for f in FIELDS])

    @staticmethod
    def _w(v, **ch):
        w = St(v)
        w.update(ch)
        return w

    @staticmethod
    def _set(v, f, i, val):
        return _store(v[f], i, val)

    # -- the queue's helpers -----------------------------------------------------------------
    def can(self, v, c, j):
        """``c`` may take entry ``j`` now (``getNextAvailableEntry``'s test): available, not seen (a
        browser), not rejected by ``c`` (``hasInterest``) and not kept by a group (``mightAssign``)."""
        out = [v.status[j] == AVAILABLE, z3.Not(v.seen[c][j])]
        if not z3.is_false(self.sw("reject")):
            out.append(z3.Not(z3.And(self.sw("reject"), v.rej[c][j])))
        if not z3.is_false(self.sw("groups")):
            out.append(self.might_assign(v, c, j))
        return z3.And(out)

    # -- message groups -------------------------------------------------------------------------
    def _grouped(self, j):
        """(``j`` has a group, its group): the group is -1 (and nothing is grouped) with groups off."""
        g = self.grp(j)
        if z3.is_false(self.sw("groups")) or (_lit(g) is not None and _lit(g) < 0):
            return z3.BoolVal(False), None
        return z3.And(self.sw("groups"), g >= 0), g

    def counted(self, v, g):
        """A shared group counted some entry's acquisition (``Group._activeCount > 0``)."""
        if self.bound is not None and _lit(g) is not None:
            k = _lit(g)
            js = [j for j in range(self._m.m) if self._m.grp[j] == k]
            return z3.Or([v.gcnt[j] for j in js] or [z3.BoolVal(False)])
        return self.S("msg", lambda j: z3.And(self.grp(j) == g, v.gcnt[j]))

    def valid(self, v, g):
        """``Group.isValid`` (shared: a consumer that is open or still holds a counted entry);
        a standard (assigned) group: assigned."""
        own = v.gown[g]
        reg = v.all[own - 1]
        return z3.And(own >= 1, z3.Or(z3.Not(self.sw("shared")), reg, self.counted(v, g)))

    def might_assign(self, v, c, j):
        """``mightAssign``: always for a browser and an entry without a group; else the group has no
        valid owner or is ``c``'s."""
        has, g = self._grouped(j)
        if g is None:
            return z3.BoolVal(True)
        return z3.Or(z3.Not(self.acq(c)), z3.Not(has), v.gown[g] == c + 1, z3.Not(self.valid(v, g)))

    def _memo(self, tag, v, c, build):
        """Bounded mode: one term per (predicate, view, literal index) within an action's relation."""
        k = _lit(c)
        if self.bound is None or k is None:
            return build()
        key = (tag, id(v), k)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = (v, build())  # v kept alive with its id
        return hit[1]

    def has_next(self, v, c):
        """``getNextAvailableEntry`` finds something."""
        return self._memo("has_next", v, c, lambda: self._has_next(v, c))

    def _has_next(self, v, c):
        return z3.And(v.all[c], self.S("msg", lambda j: self.can(v, c, j)))

    def next_is(self, v, c, j):
        """``getNextAvailableEntry`` returns ``j``: the lowest message ``c`` may take."""
        return z3.And(v.all[c], self.can(v, c, j),
                      self.E("msg", lambda i: z3.Implies(i < j, z3.Not(self.can(v, c, i)))))

    def any_avail(self, v):
        return self.S("msg", lambda j: v.status[j] == AVAILABLE)

    def no_higher(self, v, c, j=None):
        """``noHigherPriorityWithCredit(c, entry j)``: no higher acquiring consumer that wants work,
        has not rejected ``j`` and has an available entry (``j`` None: any entry)."""
        if j is not None and z3.is_false(self.sw("reject")):
            j = None  # interest in the entry only differs when consumers reject
        kj = _lit(j) if j is not None else -1
        if j is not None and kj is None:
            return self._no_higher(v, c, j)
        return self._memo(f"no_higher@{kj}", v, c, lambda: self._no_higher(v, c, j))

    def _no_higher(self, v, c, j=None):
        if not self.c.priority_check:
            return z3.BoolVal(True)
        interested = (lambda h: z3.BoolVal(True)) if j is None else (
            lambda h: z3.Not(z3.And(self.sw("reject"), v.rej[h][j])))
        k = _lit(c)
        if self.bound is not None and k is not None:
            m = self._m
            hs = [h for h in range(m.n) if m.prio[h] > m.prio[k] and m.acq[h]]
            return z3.And([z3.Not(z3.And(v.all[h], v.flag[h], self.has_next(v, h), interested(h))) for h in hs]
                          or [z3.BoolVal(True)])
        return self.E("cons", lambda h: z3.Not(z3.And(
            self.prio(h) > self.prio(c), v.all[h], self.acq(h), v.flag[h], self.has_next(v, h), interested(h))))

    def nh_next(self, v, c):
        """``consumerHasAvailableMessages``' priority check: ``noHigherPriorityWithCredit`` at the
        entry ``c`` would take next (given that there is one)."""
        if z3.is_false(self.sw("reject")):
            return self.no_higher(v, c)
        return self._memo("nh_next", v, c, lambda: self.E("msg", lambda j: z3.Implies(
            self.next_is(v, c, j), self.no_higher(v, c, j))))

    def desired(self, v, c):
        return z3.And(v.susp[c] == 0, v.credit[c] > 0)

    def before(self, v, y, x):
        """``y`` is in an Interested list and precedes ``x`` in the walk order."""
        return z3.And(v.intr[y], z3.Or(v.ilvl[y] < v.ilvl[x], z3.And(v.ilvl[y] == v.ilvl[x], v.pos[y] < v.pos[x])))

    def move(self, v, c, frm, to, cond=True):
        """``moveFromTo``: leave the list the old state names, enter the new one at its tail."""
        node = v.node[c]
        moved = z3.And(cond, z3.Or([node == f for f in frm]))
        w = St(v)
        w["node"] = _store(v.node, c, z3.If(moved, to, node))
        for f, st in LISTS:
            old = v[f][c]
            new = z3.BoolVal(True) if to == st else z3.And(old, node != st)
            w[f] = _store(v[f], c, z3.If(moved, new, old))
        if to == INTERESTED:
            w["intr"] = _store(v.intr, c, z3.Or(moved, v.intr[c]))
            w["ilvl"] = _store(v.ilvl, c, z3.If(moved, self.lvl(c), v.ilvl[c]))
            w["pos"] = _store(v.pos, c, z3.If(moved, v.clock, v.pos[c]))
            w["clock"] = z3.If(moved, v.clock + 1, v.clock)
        else:
            w["intr"] = _store(v.intr, c, z3.If(moved, z3.And(v.intr[c], node != INTERESTED), v.intr[c]))
        return w, moved

    def succ(self, v, y):
        """``notifyConsumer(y)`` succeeds (a browser always does)."""
        return self._memo("succ", v, y, lambda: self._succ(v, y))

    def _succ(self, v, y):
        return z3.Or(z3.Not(self.acq(y)),
                     z3.And(self.has_next(v, y), self.nh_next(v, y), v.node[y] == INTERESTED))

    def notify1(self, v, c, known=False):
        """``AbstractQueue.notifyConsumer``; ``known``: it is known to succeed."""
        a = self.acq(c)
        ok_acq = z3.BoolVal(True) if known else z3.And(self.has_next(v, c), self.nh_next(v, c))
        w, moved = self.move(v, c, (INTERESTED,), NOTIFIED, cond=z3.And(a, ok_acq))
        ok = z3.Or(z3.Not(a), moved)
        w["wake"] = _store(v.wake, c, z3.Or(v.wake[c], ok))
        return w

    def walk(self, t, v, x, cand, finish=lambda w: w):
        """A walk that notifies at most one consumer: ``x`` (-1 nobody) is the
        one with ``cand(x)`` (the first that stops the walk with success)."""
        alts = [z3.And(x == -1, self.E("cons", lambda c: z3.Not(cand(c))), self._upd(t, finish(v)))]
        alts.append(self._case(x, "cons", lambda k: z3.And(cand(k), self._upd(t, finish(self.notify1(v, k, known=True))))))
        return z3.Or(alts)

    def cand_others(self, v, excl):
        """``notifyOtherConsumers(excl)`` (``excl`` -1: ``notifyOtherConsumers(null)``)."""
        avail = self.any_avail(v)
        ok = lambda y: z3.And(y != excl, self.succ(v, y))
        return lambda x: z3.And(avail, v.intr[x], ok(x),
                                self.E("cons", lambda y: z3.Implies(self.before(v, y, x), z3.Not(ok(y)))))

    # -- entries leaving a consumer (actors.py) ------------------------------------------------
    def group_available(self, v, g):
        if self.bound is not None and _lit(g) is not None:
            js = [j for j in range(self._m.m) if self._m.grp[j] == _lit(g)]
            return z3.Or([v.status[j] == AVAILABLE for j in js] or [z3.BoolVal(False)])
        return self.S("msg", lambda k: z3.And(self.grp(k) == g, v.status[k] == AVAILABLE))

    def group_left(self, w, j, cond=True):
        """``Group.subtract``: a counted entry of a shared group leaves its consumer (``cond``: it was
        acquired); the group's last counted entry frees the group, and a reset is owed if an entry of
        the group is available (``w``: the statuses already updated)."""
        has, g = self._grouped(j)
        if g is None or z3.is_false(self.sw("shared")):
            return w
        fire = z3.And(self.sw("shared"), has, w.gcnt[j], cond)
        w2 = self._w(w, gcnt=_store(w.gcnt, j, z3.And(w.gcnt[j], z3.Not(fire))))
        freed = z3.And(fire, z3.Not(self.counted(w2, g)))
        w2["gown"] = _store(w.gown, g, z3.If(freed, 0, w.gown[g]))
        w2["grs"] = z3.Or(w.grs, z3.And(freed, self.group_available(w2, g)))
        return w2

    def requeue(self, w, j, cond=True):
        """``QueueEntryImpl.release`` -> ``postRelease`` (if ``cond``): available, a notification
        owed, the group listener's subtract."""
        w2 = self._w(w, status=_store(w.status, j, z3.If(cond, AVAILABLE, w.status[j])),
                     pend=_store(w.pend, j, z3.Or(w.pend[j], cond)))
        return self.group_left(w2, j, cond)

    def stealable(self, v, j):
        """A consumer's acquisition of ``j`` that was sent (its IO thread is not between the acquire
        and the send)."""
        st = v.status[j]
        return z3.And(st >= ACQ, v.pc[st - ACQ] != TAKE + self._M() + j)

    # -- init ---------------------------------------------------------------------------------
    def init(self, s):
        k = self.k
        f0 = k.initc > 0 if self.bound is None else z3.BoolVal(self.c.initial_credit > 0)
        initc = k.initc if self.bound is None else z3.IntVal(self.c.initial_credit)
        eb = k.eb if self.bound is None else z3.IntVal(self.c.env_budget)
        pre = self.c.preadded

        def cons(c):
            a = self.acq(c)
            node = z3.If(f0, z3.If(a, INTERESTED, NON_ACQUIRING), NOT_INTERESTED) if pre else z3.IntVal(ABSENT)
            cs = [
                s.node[c] == node, s.pc[c] == IDLE, s.credit[c] == initc, s.susp[c] == 0, s.flag[c] == f0,
                s.wake[c] == (z3.And(z3.Not(a), f0) if pre else False), s.all[c] == pre,
                s.ni[c] == (node == NOT_INTERESTED), s.na[c] == (node == NON_ACQUIRING), s.nt[c] == False,
                s.intr[c] == (node == INTERESTED),
                self.E("msg", lambda j: z3.And(z3.Not(s.seen[c][j]), z3.Not(s.rej[c][j]))),
            ]
            if pre:
                cs += [s.ilvl[c] == self.lvl(c), s.pos[c] == c]
            return z3.And(cs)

        return z3.And(
            self.E("cons", cons),
            self.E("msg", lambda j: z3.And(s.status[j] == UNARRIVED, z3.Not(s.pend[j]), z3.Not(s.dp[j]),
                                           z3.Not(s.gcnt[j]))),
            self.E("grp", lambda g: s.gown[g] == 0),
            s.clock == (self._N() if pre else 0), s.budget == eb, z3.Not(s.bad), z3.Not(s.grs),
        )

    # -- actions ------------------------------------------------------------------------------
    def actions(self):
        cfg = self.c
        K = self.k
        M = self._M

        def registered_env(s, c):
            return z3.And(s.node[c] != ABSENT, s.node[c] != REMOVED, s.budget != 0)

        def spend(s):
            return z3.If(s.budget > 0, s.budget - 1, s.budget)

        def first_pre(s, c):
            differs = s.flag[c] != self.desired(s, c)
            return z3.Or(z3.And(s.pc[c] == IDLE, s.all[c], differs), z3.And(s.pc[c] == START, differs))

        def qsd(t, v, c, d, x):
            """``AbstractQueue.setNotifyWorkDesired(c, d)``."""
            def on():
                def go(to):
                    w1, moved = self.move(v, c, (NOT_INTERESTED,), to)
                    return z3.Or(z3.And(moved, self._upd(t, self.notify1(w1, c))), z3.And(z3.Not(moved), self._upd(t, w1)))
                return self._split_acq(c, lambda: go(INTERESTED), lambda: go(NON_ACQUIRING))

            def off():
                def go(frm):
                    w1, moved = self.move(v, c, frm, NOT_INTERESTED)
                    def hp(y):
                        k = _lit(y)
                        if self.bound is not None and k is not None:
                            m = self._m
                            return z3.Or([w1.nt[z] for z in range(m.n) if m.prio[z] > m.prio[k]] or [z3.BoolVal(False)])
                        return self.S("cons", lambda z: z3.And(w1.nt[z], self.prio(z) > self.prio(y)))
                    cand = lambda xx: z3.And(
                        w1.intr[xx], z3.Not(hp(xx)), self.succ(w1, xx),
                        self.E("cons", lambda y: z3.Implies(self.before(w1, y, xx), z3.And(z3.Not(hp(y)), z3.Not(self.succ(w1, y))))))
                    return z3.Or(z3.And(z3.Not(moved), self._upd(t, w1)), z3.And(moved, self.walk(t, w1, x, cand)))
                return self._split_acq(c, lambda: go((INTERESTED, NOTIFIED)), lambda: go((NON_ACQUIRING,)))

            return z3.Or(z3.And(d, on()), z3.And(z3.Not(d), off()))

        def target_flag(s, t, c, d):
            def body(c):
                if cfg.flag_before_queue:
                    w = self._w(s, flag=self._set(s, "flag", c, d), pc=self._set(s, "pc", c, DES))
                    return z3.And(first_pre(s, c), d == self.desired(s, c), self._upd(t, w))
                w = self._w(s, flag=self._set(s, "flag", c, d), pc=self._set(s, "pc", c, IDLE))
                return z3.And(s.pc[c] == DES, d == z3.Not(s.flag[c]), self._upd(t, w))
            return self._case(c, "cons", body)

        def set_desired(s, t, c, d, x):
            def body(c):
                if cfg.flag_before_queue:
                    w0 = self._w(s, pc=self._set(s, "pc", c, IDLE))
                    return z3.And(s.pc[c] == DES, d == s.flag[c],
                                  z3.Or(z3.And(s.all[c], qsd(t, w0, c, d, x)), z3.And(z3.Not(s.all[c]), self._upd(t, w0))))
                w0 = self._w(s, pc=self._set(s, "pc", c, DES))
                return z3.And(first_pre(s, c), d == self.desired(s, c), qsd(t, w0, c, d, x))
            return self._case(c, "cons", body)

        def deliver_single(s, t, c):
            def body(c):
                w = St(s)
                if cfg.clear_wake_first:
                    w["wake"] = self._set(w, "wake", c, False)
                if cfg.unnotify_first:
                    w, _ = self.move(w, c, (NOTIFIED,), INTERESTED)
                susp = self._w(w, pc=self._set(w, "pc", c, IDLE))
                if not cfg.clear_wake_first:
                    susp["wake"] = self._set(susp, "wake", c, False)
                go = self._w(w, pc=self._set(w, "pc", c, FIND))
                pre = z3.Or(z3.And(s.pc[c] == IDLE, s.all[c], s.wake[c]), s.pc[c] == START)
                return z3.And(pre, z3.Or(z3.And(z3.Not(s.flag[c]), self._upd(t, susp)), z3.And(s.flag[c], self._upd(t, go))))
            return self._case(c, "cons", body)

        def find_next(s, t, c, j):
            def body(c):
                # noHigherPriorityWithCredit at the entry found
                nb = lambda i: z3.Not(z3.And(z3.Or(self.acq(c), cfg.priority_blocks_browsers),
                                             z3.Not(self.no_higher(s, c, i))))
                if z3.is_false(self.sw("reject")):
                    ok = z3.And(self.has_next(s, c), nb(None), s.credit[c] > 0)
                else:
                    ok = z3.And(s.credit[c] > 0, self.S("msg", lambda i: z3.And(self.next_is(s, c, i), nb(i))))
                found = self._case(j, "msg", lambda j: z3.And(
                    self.next_is(s, c, j), self._upd(t, self._w(s, pc=self._set(s, "pc", c, TAKE + j)))))
                return z3.And(s.pc[c] == FIND, z3.Or(z3.And(ok, found),
                                                       z3.And(z3.Not(ok), self._upd(t, self._w(s, pc=self._set(s, "pc", c, NONE))))))
            return self._case(c, "cons", body)

        def acquire(s, t, c, j):
            def body(c, j):
                a = self.acq(c)
                st = s.status[j]
                ok_acq = z3.Or(st == AVAILABLE, z3.And(z3.BoolVal(not cfg.acquire_cas), st >= ACQ))
                got = self._w(
                    s,
                    status=_ite(a, self._set(s, "status", j, ACQ + c), s.status),
                    seen=_ite(a, s.seen, _store(s.seen, c, _store(s.seen[c], j, True))),
                    credit=self._set(s, "credit", c, s.credit[c] - 1),
                    pc=self._set(s, "pc", c, TAKE + M() + j),
                    bad=z3.Or(s.bad, z3.And(a, st != AVAILABLE)),
                )
                fail = self._w(s, pc=self._set(s, "pc", c, NONE))
                if not z3.is_false(self.sw("groups")):
                    # MessageGroupManager.acceptMessage: a closed consumer is refused (reference), a
                    # group with no valid owner is given to c, one owned by another refuses
                    groups = self.sw("groups")
                    closed = z3.And(groups, z3.BoolVal(cfg.group_refuses_closed), z3.Not(s.all[c]))
                    has, g = self._grouped(j)
                    if g is None:
                        ok_acq = z3.And(z3.Not(closed), ok_acq)
                    else:
                        own_c = s.gown[g] == c + 1
                        val = self.valid(s, g)
                        new = z3.And(has, z3.Not(closed), z3.Not(own_c), z3.Not(val))
                        refused = z3.And(has, z3.Not(own_c), val)
                        ok_acq = z3.And(z3.Not(closed), z3.Not(refused), ok_acq)
                        counts = z3.And(self.sw("shared"), has, z3.Or(s.all[c], self.counted(s, g)))
                        got["gown"] = _ite(a, _store(s.gown, g, z3.If(new, c + 1, s.gown[g])), s.gown)
                        got["gcnt"] = _ite(a, _store(s.gcnt, j, z3.Or(s.gcnt[j], counts)), s.gcnt)
                        if not cfg.group_assign_with_acquire:
                            fail["gown"] = _ite(a, _store(s.gown, g, z3.If(new, c + 1, s.gown[g])), s.gown)
                ok = _ite(a, ok_acq, st != DELETED)
                return z3.And(s.pc[c] == TAKE + j, z3.Or(z3.And(ok, self._upd(t, got)), z3.And(z3.Not(ok), self._upd(t, fail))))
            return self._case(c, "cons", lambda c: self._case(j, "msg", lambda j: body(c, j)))

        def deliver(s, t, c):
            def body(c, j):
                a = self.acq(c)
                # QueueEntryImpl.release(consumer): only while c still holds it
                gone = self.requeue(s, j, z3.And(a, s.status[j] == ACQ + c))
                gone = self._w(gone, pc=self._set(s, "pc", c, IDLE), wake=self._set(s, "wake", c, False))
                w, _ = self.move(s, c, (INTERESTED,), NOTIFIED, cond=a)
                if cfg.pull_rule is PullRule.UNTIL_EMPTY:
                    w["pc"] = self._set(w, "pc", c, START)
                else:
                    w["pc"] = self._set(w, "pc", c, IDLE)
                    if not cfg.clear_wake_first:
                        w["wake"] = self._set(w, "wake", c, False)
                return z3.And(s.pc[c] == TAKE + M() + j,
                              z3.Or(z3.And(z3.Not(s.all[c]), self._upd(t, gone)), z3.And(s.all[c], self._upd(t, w))))
            return self._case(c, "cons", lambda c: self._case(s.pc[c] - TAKE - M(), "msg", lambda j: body(c, j)))

        def no_message(s, t, c, x):
            def body(c):
                w = St(s)
                if not cfg.unnotify_first:
                    w, _ = self.move(w, c, (NOTIFIED,), INTERESTED)

                def finish(v):
                    v = self._w(v, pc=self._set(v, "pc", c, IDLE))
                    if not cfg.clear_wake_first:
                        v["wake"] = self._set(v, "wake", c, False)
                    return v

                walk = lambda: self.walk(t, w, x, self.cand_others(w, c), finish)
                plain = lambda: self._upd(t, finish(w))
                return z3.And(s.pc[c] == NONE, self._split_acq(c, walk, plain))
            return self._case(c, "cons", body)

        def notify_consumers(s, t, j, x):
            def body(j):
                w = self._w(s, pend=self._set(s, "pend", j, False))
                avail = s.status[j] == AVAILABLE
                w1 = self._w(w, wake=self._map("cons", w.wake, lambda c: z3.Or(
                    w.wake[c], z3.And(w.na[c], z3.Not(self.acq(c)), z3.Not(w.seen[c][j])))))
                # consumer.hasInterest(entry): a consumer that rejected the entry is passed over
                if z3.is_false(self.sw("reject")):
                    interest = lambda y: z3.BoolVal(True)
                else:
                    interest = lambda y: z3.Not(z3.And(self.sw("reject"), w1.rej[y][j]))
                if cfg.notify_one:
                    blocker = lambda y: z3.And(interest(y), z3.Or(self.succ(w1, y), z3.Not(self.no_higher(w1, y, j))))
                else:
                    blocker = lambda y: z3.And(interest(y), z3.Not(self.succ(w1, y)), z3.Not(self.no_higher(w1, y, j)))
                cand = lambda xx: z3.And(w1.intr[xx], interest(xx), self.succ(w1, xx), self.E(
                    "cons", lambda y: z3.Implies(self.before(w1, y, xx), z3.Not(blocker(y)))))
                if cfg.notify_one:
                    walked = self.walk(t, w1, x, cand)
                else:
                    hit = lambda c: z3.And(cand(c), self.acq(c))
                    w2 = self._w(
                        w1,
                        node=self._map("cons", w1.node, lambda c: z3.If(hit(c), NOTIFIED, w1.node[c])),
                        intr=self._map("cons", w1.intr, lambda c: z3.And(w1.intr[c], z3.Not(hit(c)))),
                        nt=self._map("cons", w1.nt, lambda c: z3.Or(w1.nt[c], hit(c))),
                        ni=self._map("cons", w1.ni, lambda c: z3.And(w1.ni[c], z3.Not(hit(c)))),
                        wake=self._map("cons", w1.wake, lambda c: z3.Or(w1.wake[c], cand(c))),
                    )
                    walked = z3.And(x == -1, self._upd(t, w2))
                return z3.And(s.pend[j], z3.Or(z3.And(z3.Not(avail), self._upd(t, w)), z3.And(avail, walked)))
            return self._case(j, "msg", body)

        def add_consumer(s, t, c):
            def body(c):
                w = self._w(s, all=self._set(s, "all", c, True))

                def go(to):
                    w1, _ = self.move(w, c, (ABSENT,), to)
                    return self._upd(t, self.notify1(w1, c))

                on = lambda: self._split_acq(c, lambda: go(INTERESTED), lambda: go(NON_ACQUIRING))
                off = self._upd(t, self.move(w, c, (ABSENT,), NOT_INTERESTED)[0])
                return z3.And(s.node[c] == ABSENT, z3.Or(z3.And(s.flag[c], on()), z3.And(z3.Not(s.flag[c]), off)))
            return self._case(c, "cons", body)

        def remove_consumer(s, t, c, x):
            if not cfg.removal:
                return z3.BoolVal(False)

            def body(c):
                was = s.node[c] == NOTIFIED
                w = self._w(s, all=self._set(s, "all", c, False))
                w, _ = self.move(w, c, (NOT_INTERESTED, INTERESTED, NOTIFIED, NON_ACQUIRING), REMOVED)
                mine = lambda j: s.status[j] == ACQ + c
                released = z3.BoolVal(True)
                groups, shared = self.sw("groups"), self.sw("shared")
                assigned = z3.And(groups, z3.Not(shared))
                # the session's release of c's entries, each leaving its shared group (Group.subtract)
                left = lambda j: z3.And(shared, self.grp(j) >= 0, s.gcnt[j], mine(j))

                def freed(g, gcnt_after):
                    return z3.And(self.S("msg", lambda j: z3.And(self.grp(j) == g, left(j))),
                                  z3.Not(self.S("msg", lambda j: z3.And(self.grp(j) == g, gcnt_after[j]))))

                if self.bound is not None:
                    w["status"] = self._map("msg", s.status, lambda j: z3.If(mine(j), AVAILABLE, s.status[j]))
                    w["pend"] = self._map("msg", s.pend, lambda j: z3.Or(s.pend[j], mine(j)))
                    if self._m.G:
                        m = self._m
                        w["gcnt"] = self._map("msg", s.gcnt, lambda j: z3.And(s.gcnt[j], z3.Not(left(j))))
                        fr = [freed(g, w.gcnt) for g in range(m.G)]
                        own1 = [z3.If(fr[g], 0, s.gown[g]) for g in range(m.G)]
                        avail = lambda g: z3.Or([w.status[j] == AVAILABLE for j in range(m.m) if m.grp[j] == g] or [z3.BoolVal(False)])
                        found = z3.Or([z3.And(w.status[j] == AVAILABLE, own1[m.grp[j]] == c + 1)
                                       for j in range(m.m) if m.grp[j] >= 0] or [z3.BoolVal(False)])
                        w["gown"] = Vec(z3.If(z3.And(assigned, own1[g] == c + 1), 0, own1[g]) for g in range(m.G))
                        w["grs"] = z3.Or([s.grs, found] + [z3.And(fr[g], avail(g)) for g in range(m.G)])
                else:
                    # pointwise on the post-state's arrays (a lambda here, read inside the walk's
                    # quantifiers, leaves z3 without an answer)
                    w["status"], w["pend"], w["gcnt"], w["gown"], w["grs"] = t.status, t.pend, t.gcnt, t.gown, t.grs
                    own1 = lambda g: z3.If(freed(g, t.gcnt), 0, s.gown[g])
                    found = z3.And(groups, self.S("msg", lambda j: z3.And(
                        t.status[j] == AVAILABLE, self.grp(j) >= 0, own1(self.grp(j)) == c + 1)))
                    reset = self.S("grp", lambda g: z3.And(freed(g, t.gcnt), self.S("msg", lambda k: z3.And(
                        self.grp(k) == g, t.status[k] == AVAILABLE))))
                    released = z3.And(
                        self.E("msg", lambda j: z3.And(t.status[j] == z3.If(mine(j), AVAILABLE, s.status[j]),
                                                       t.pend[j] == z3.Or(s.pend[j], mine(j)),
                                                       t.gcnt[j] == z3.And(s.gcnt[j], z3.Not(left(j))))),
                        self.E("grp", lambda g: t.gown[g] == z3.If(z3.And(assigned, own1(g) == c + 1), 0, own1(g))),
                        t.grs == z3.Or(s.grs, found, reset),
                    )
                pc = s.pc[c]
                w["pc"] = self._set(s, "pc", c, z3.If(z3.Or(pc == IDLE, pc == START), IDLE, pc))
                w["wake"] = self._set(w, "wake", c, False)
                w["budget"] = spend(s)
                if cfg.remove_hands_over:
                    # reference: whatever the removed consumer's state; before issue 16 only if Notified
                    hand = was if cfg.handover_only_if_notified else z3.BoolVal(True)
                    rest = z3.Or(z3.And(hand, self.walk(t, w, x, self.cand_others(w, c))), z3.And(z3.Not(hand), self._upd(t, w)))
                else:
                    rest = self._upd(t, w)
                return z3.And(registered_env(s, c), released, rest)
            return self._case(c, "cons", body)

        def credit(s, t, c):
            def body(c):
                maxc = K.maxc if self.bound is None else z3.IntVal(cfg.max_credit)
                w = self._w(s, credit=self._set(s, "credit", c, s.credit[c] + 1), budget=spend(s),
                            wake=self._set(s, "wake", c, True))
                return z3.And(registered_env(s, c), s.credit[c] < maxc, self._upd(t, w))
            return self._case(c, "cons", body)

        def toggle(bit_now):
            def rel(s, t, c, r):
                def body(c, r):
                    susp = s.susp[c]
                    pw = z3.If(r == 0, 1, 2) if _lit(r) is None else z3.IntVal(1 << _lit(r))
                    bit = z3.If(r == 0, susp % 2, (susp / 2) % 2) if _lit(r) is None else (susp / (1 << _lit(r))) % 2
                    new = susp - pw if bit_now else susp + pw
                    nre = K.nreas if self.bound is None else z3.IntVal(cfg.reasons)
                    w = self._w(s, susp=self._set(s, "susp", c, new), budget=spend(s))
                    return z3.And(registered_env(s, c), 0 <= r, r < nre, bit == int(bit_now), self._upd(t, w))
                if self.bound is not None:
                    return self._case(c, "cons", lambda c: z3.Or([z3.And(r == q, body(c, q)) for q in range(len(REASONS))]))
                return self._case(c, "cons", lambda c: z3.And(r < len(REASONS), body(c, r)))
            return rel

        def enqueue(held):
            def rel(s, t, j):
                if held and z3.is_false(self.sw("held")):
                    return z3.BoolVal(False)
                guard = self.sw("held") if held else z3.BoolVal(True)

                def body(j):
                    prev = z3.BoolVal(True) if _lit(j) == 0 else z3.Or(j == 0, s.status[j - 1] != UNARRIVED)
                    if held:
                        w = self._w(s, status=self._set(s, "status", j, HELD))
                    else:
                        w = self._w(s, status=self._set(s, "status", j, AVAILABLE), pend=self._set(s, "pend", j, True))
                    return z3.And(guard, s.status[j] == UNARRIVED, prev, self._upd(t, w))
                return self._case(j, "msg", body)
            return rel

        def unhold(s, t, j):
            def body(j):
                w = self._w(s, status=self._set(s, "status", j, AVAILABLE), pend=self._set(s, "pend", j, True))
                return z3.And(s.status[j] == HELD, self._upd(t, w))
            return self._case(j, "msg", body)

        def release(s, t, j):
            if not cfg.release:
                return z3.BoolVal(False)

            def body(j):
                # only what was sent: the acquisition between the acquire and the send is the IO thread's
                w = self._w(self.requeue(s, j), budget=spend(s))
                return z3.And(s.status[j] >= ACQ, s.budget != 0, self.stealable(s, j), self._upd(t, w))
            return self._case(j, "msg", body)

        def idle(s, t):
            quiet = self.E("cons", lambda c: z3.And(
                s.pc[c] == IDLE, z3.Not(z3.And(s.all[c], z3.Or(s.flag[c] != self.desired(s, c), s.wake[c])))))
            owed = lambda j: z3.Or(s.pend[j], z3.And(s.dp[j], z3.Or(s.status[j] == AVAILABLE, self.stealable(s, j))))
            return z3.And(quiet, z3.Not(s.grs), self.E("msg", lambda j: z3.Not(owed(j))), self._upd(t, s))

        # -- the other actors (actors.py) --------------------------------------------------------
        def dequeue(s, t, w, j, x):
            """Taken by a non-consumer, dequeued, deleted; reference: notifyOtherConsumers(null)."""
            was = s.status[j] >= ACQ
            w = self.group_left(self._w(w, status=_store(w.status, j, DELETED)), j, was)
            if cfg.delete_notifies:
                return self.walk(t, w, x, self.cand_others(w, -1))
            return self._upd(t, w)

        def delete_entry(s, t, j, x):
            if z3.is_false(self.sw("expiry")):
                return z3.BoolVal(False)

            def body(j):
                st = s.status[j]
                take = z3.Or(st == AVAILABLE, self.stealable(s, j))
                wait = self._w(s, dp=self._set(s, "dp", j, True))
                pre = z3.And(self.sw("expiry"), z3.Not(s.dp[j]), z3.Or(st == AVAILABLE, st == HELD, st >= ACQ))
                return z3.And(pre, z3.Or(z3.And(take, dequeue(s, t, s, j, x)), z3.And(z3.Not(take), self._upd(t, wait))))
            return self._case(j, "msg", body)

        def delayed_acquisition(s, t, j, x):
            if z3.is_false(self.sw("expiry")):
                return z3.BoolVal(False)

            def body(j):
                pre = z3.And(s.dp[j], z3.Or(s.status[j] == AVAILABLE, self.stealable(s, j)))
                return z3.And(pre, dequeue(s, t, self._w(s, dp=self._set(s, "dp", j, False)), j, x))
            return self._case(j, "msg", body)

        def reject(s, t, c, j):
            if z3.is_false(self.sw("reject")):
                return z3.BoolVal(False)

            def body(c, j):
                pre = z3.And(self.sw("reject"), s.budget != 0, s.status[j] == ACQ + c, s.all[c],
                             z3.Or(s.pc[c] == IDLE, s.pc[c] == START))
                w = self._w(s, rej=_store(s.rej, c, _store(s.rej[c], j, True)), budget=spend(s))
                return z3.And(pre, self._upd(t, self.requeue(w, j)))
            return self._case(c, "cons", lambda c: self._case(j, "msg", lambda j: body(c, j)))

        def reset_groups(s, t):
            """resetSubPointersForGroups: notifyConsumer on every registered acquiring consumer."""
            if z3.is_false(self.sw("groups")):
                return z3.BoolVal(False)
            hit = lambda c: z3.And(self.acq(c), s.all[c], self.succ(s, c))
            w = self._w(
                s, grs=z3.BoolVal(False),
                node=self._map("cons", s.node, lambda c: z3.If(hit(c), NOTIFIED, s.node[c])),
                intr=self._map("cons", s.intr, lambda c: z3.And(s.intr[c], z3.Not(hit(c)))),
                nt=self._map("cons", s.nt, lambda c: z3.Or(s.nt[c], hit(c))),
                ni=self._map("cons", s.ni, lambda c: z3.And(s.ni[c], z3.Not(hit(c)))),
                wake=self._map("cons", s.wake, lambda c: z3.Or(s.wake[c], hit(c))),
            )
            return z3.And(s.grs, self._upd(t, w))

        c_, d_, j_, x_, r_ = ("c", I), ("d", B), ("j", I), ("x", I), ("r", I)

        def fresh_cache(rel):
            def run(*args):
                self._cache = {}
                try:
                    return rel(*args)
                finally:
                    self._cache = {}
            return run

        return [
            SymAction("target_flag", [c_, d_], fresh_cache(target_flag)),
            SymAction("set_notify_work_desired", [c_, d_, x_], fresh_cache(set_desired)),
            SymAction("deliver_single_message", [c_], fresh_cache(deliver_single)),
            SymAction("find_next_available", [c_, j_], fresh_cache(find_next)),
            SymAction("acquire", [c_, j_], fresh_cache(acquire)),
            SymAction("deliver", [c_], fresh_cache(deliver)),
            SymAction("no_message", [c_, x_], fresh_cache(no_message)),
            SymAction("notify_consumers", [j_, x_], fresh_cache(notify_consumers)),
            SymAction("add_consumer", [c_], fresh_cache(add_consumer)),
            SymAction("remove_consumer", [c_, x_], fresh_cache(remove_consumer)),
            SymAction("credit", [c_], fresh_cache(credit)),
            SymAction("suspend", [c_, r_], fresh_cache(toggle(False))),
            SymAction("resume", [c_, r_], fresh_cache(toggle(True))),
            SymAction("enqueue", [j_], fresh_cache(enqueue(False))),
            SymAction("enqueue_held", [j_], fresh_cache(enqueue(True))),
            SymAction("unhold", [j_], fresh_cache(unhold)),
            SymAction("release", [j_], fresh_cache(release)),
            SymAction("idle", [], fresh_cache(idle)),
            SymAction("delete_entry", [j_, x_], fresh_cache(delete_entry)),
            SymAction("delayed_acquisition", [j_, x_], fresh_cache(delayed_acquisition)),
            SymAction("reject", [c_, j_], fresh_cache(reject)),
            SymAction("reset_sub_pointers_for_groups", [], fresh_cache(reset_groups)),
        ]

    # -- properties ---------------------------------------------------------------------------
    def _lists_match(self, s):
        def cons(c):
            node = s.node[c]
            return z3.And(
                s.all[c] == z3.And(node != ABSENT, node != REMOVED),
                s.ni[c] == (node == NOT_INTERESTED),
                s.na[c] == (node == NON_ACQUIRING),
                s.nt[c] == (node == NOTIFIED),
                s.intr[c] == (node == INTERESTED),
                z3.Implies(s.intr[c], s.ilvl[c] == self.lvl(c)),
            )
        return self.E("cons", cons)

    def _kinds(self, s):
        return self.E("cons", lambda c: z3.And(
            z3.Implies(self.acq(c), s.node[c] != NON_ACQUIRING),
            z3.Implies(z3.Not(self.acq(c)), z3.And(s.node[c] != INTERESTED, s.node[c] != NOTIFIED))))

    def _held_grouped(self, s, j):
        """Entry ``j`` has a group and a consumer holds it."""
        has, g = self._grouped(j)
        return z3.And(has, s.status[j] >= ACQ), g

    def _one_holder(self, s):
        def pair(i, j):
            hi, gi = self._held_grouped(s, i)
            hj, gj = self._held_grouped(s, j)
            if gi is None or gj is None:
                return z3.BoolVal(True)
            return z3.Implies(z3.And(hi, hj, gi == gj), s.status[i] == s.status[j])
        return self.E("msg", lambda i: self.E("msg", lambda j: pair(i, j)))

    def invariants(self):
        return {
            "lists-match-states": self._lists_match,
            "browsers-and-acquirers-keep-their-lists": self._kinds,
            "group-held-by-one-consumer": self._one_holder,
            "credit-never-negative": self._credit_in_range,
            # an always-step property, as a state invariant over the history ghost (for BMC)
            "acquired-at-most-once": lambda s: z3.Not(s.bad),
        }

    def properties_to_prove(self, model):
        """Every ``always`` property of the model, and the ones the other actors' configurations add
        (the switches are symbolic in the proof: one proof covers the actors on and off)."""
        from conq.model.kernel import Kind
        from .model import ConsumerListsModel

        names = {p.name for p in model.property_list() if p.kind is Kind.ALWAYS}
        extra = ConsumerListsModel(ConsumerListsModel.configs()["all-actors"]).property_list()
        return list(model.property_list()) + [p for p in extra if p.kind is Kind.ALWAYS and p.name not in names]

    def _credit_in_range(self, s):
        return self.E("cons", lambda c: z3.And(0 <= s.credit[c], s.credit[c] <= self.k.maxc))

    def _found_with_credit(self, s):
        """A consumer whose IO thread found an entry and is about to acquire it (pc TAKE + j) has credit:
        the find looked at it (attemptDelivery's credit check), and only the acquire spends it."""
        return self.E("cons", lambda c: z3.Implies(z3.And(s.pc[c] >= TAKE, s.pc[c] < TAKE + self._M()), s.credit[c] > 0))

    def _grouped_held_by_owner(self, s):
        def one(j):
            held, g = self._held_grouped(s, j)
            if g is None:
                return z3.BoolVal(True)
            return z3.Implies(held, z3.And(s.gown[g] == s.status[j] - ACQ + 1, s.all[s.status[j] - ACQ]))
        return self.E("msg", one)

    def _shared_held_counted(self, s):
        def one(j):
            held, g = self._held_grouped(s, j)
            if g is None:
                return z3.BoolVal(True)
            return z3.Implies(z3.And(self.sw("shared"), held), s.gcnt[j])
        return self.E("msg", one)

    def auxiliaries(self):
        return [
            Aux("found-with-credit",
                "a consumer about to acquire the entry it found has credit (the find checked it; only the acquire "
                "spends credit)",
                self._found_with_credit),
            Aux("ranks-below-clock",
                "every consumer in an Interested list has a rank below the next rank to hand out (so appending puts a "
                "consumer strictly behind every member: the lists' order is a strict order)",
                lambda s: self.E("cons", lambda c: z3.Implies(s.intr[c], s.pos[c] < s.clock))),
            Aux("grouped-entry-held-by-its-owner",
                "a consumer holding an entry that has a group is registered and is that group's consumer",
                self._grouped_held_by_owner),
            Aux("shared-group-counts-its-held-entries",
                "shared groups: an entry a consumer holds was counted by its group (Group.add)",
                self._shared_held_counted),
        ]

    def well_formed(self, s):
        k = self.k
        base = [k.N >= 0, k.M >= 0]
        if self.bound is not None:
            return z3.And(base)
        return z3.And(base + [
            k.initc >= 0, k.maxc >= k.initc, 0 <= k.nreas, k.nreas <= len(REASONS), k.eb >= -1, k.NG >= 0,
            z3.Implies(k.shared, k.groups),
            self.E("msg", lambda j: z3.And(z3.Implies(z3.Not(k.groups), k.grp[j] == -1), -1 <= k.grp[j], k.grp[j] < k.NG)),
            self.E("cons", lambda c: z3.And(ABSENT <= s.node[c], s.node[c] <= REMOVED))])

    # -- concrete instances -------------------------------------------------------------------
    def bounded(self, s, model):
        k, c = self.k, model.config
        cs = [k.N == model.n, k.M == model.m, k.initc == c.initial_credit, k.maxc == c.max_credit,
              k.nreas == c.reasons, k.eb == c.env_budget]
        for i in range(model.n):
            cs += [k.prio[i] == model.prio[i], k.acq[i] == model.acq[i], k.lvl[i] == model.lvl[i]]
        cs += [k.held == c.held, k.expiry == c.expiry, k.reject == c.reject, k.groups == bool(c.groups),
               k.shared == (bool(c.groups) and c.group_policy is GroupPolicy.SHARED), k.NG == model.G]
        cs += [k.grp[j] == model.grp[j] for j in range(model.m)]
        return z3.And(cs)

    def encode(self, s, state, model):
        n, m = model.n, model.m
        cs = []
        for c in range(n):
            b = c * CF
            cs += [s.node[c] == state[b], s.pc[c] == state[b + F_PC], s.wake[c] == bool(state[b + F_WAKE]),
                   s.flag[c] == bool(state[b + F_FLAG]), s.credit[c] == state[b + F_CREDIT], s.susp[c] == state[b + F_SUSP]]
            cs += [s.seen[c][j] == bool((state[b + F_SEEN] >> j) & 1) for j in range(m)]
            cs += [s.all[c] == bool((state[model.L_ALL] >> c) & 1), s.ni[c] == bool((state[model.L_NI] >> c) & 1),
                   s.na[c] == bool((state[model.L_NA] >> c) & 1), s.nt[c] == bool((state[model.L_NOT] >> c) & 1)]
        for j in range(m):
            cs += [s.status[j] == state[model.MB + 2 * j], s.pend[j] == bool(state[model.MB + 2 * j + 1])]
        members = {}
        for lv in range(len(model.levels)):
            tup = state[model.IB + lv]
            for c in tup:
                members[c] = lv
            cs += [s.pos[a] < s.pos[b] for a, b in zip(tup, tup[1:])]
            cs += [s.pos[c] < s.clock for c in tup]
        for c in range(n):
            cs.append(s.intr[c] == (c in members))
            if c in members:
                cs.append(s.ilvl[c] == members[c])
        cs.append(s.budget == state[model.BUD])
        # the other actors' fields (absent from the state: their defaults)
        rej = [state[model.REJ + j] if model.REJ is not None else 0 for j in range(m)]
        dp = state[model.DP] if model.DP is not None else 0
        gcnt = state[model.GCNT] if model.GCNT is not None else 0
        for j in range(m):
            cs += [s.rej[c][j] == bool((rej[j] >> c) & 1) for c in range(n)]
            cs += [s.dp[j] == bool((dp >> j) & 1), s.gcnt[j] == bool((gcnt >> j) & 1)]
        for g in range(model.G):
            cs.append(s.gown[g] == state[model.GOWN + g])
        cs.append(s.grs == bool(state[model.GRS]) if model.GRS is not None else z3.Not(s.grs))
        return z3.And(cs)

    def decode(self, mdl, s, model):
        ev = lambda x: mdl.eval(x, model_completion=True)
        iv = lambda x: ev(x).as_long()
        bv = lambda x: z3.is_true(ev(x))
        n, m = model.n, model.m
        out: list[Any] = []
        for c in range(n):
            seen = sum(1 << j for j in range(m) if bv(s.seen[c][j]))
            out += [iv(s.node[c]), iv(s.pc[c]), int(bv(s.wake[c])), int(bv(s.flag[c])), iv(s.credit[c]), iv(s.susp[c]), seen]
        for j in range(m):
            out += [iv(s.status[j]), int(bv(s.pend[j]))]
        for f in ("all", "ni", "na", "nt"):
            out.append(sum(1 << c for c in range(n) if bv(s[f][c])))
        for lv in range(len(model.levels)):
            mem = [c for c in range(n) if bv(s.intr[c]) and iv(s.ilvl[c]) == lv]
            out.append(tuple(sorted(mem, key=lambda c: iv(s.pos[c]))))
        out.append(iv(s.budget))
        if model.REJ is not None:
            out += [sum(1 << c for c in range(n) if bv(s.rej[c][j])) for j in range(m)]
        if model.DP is not None:
            out.append(sum(1 << j for j in range(m) if bv(s.dp[j])))
        if model.G:
            out += [iv(s.gown[g]) for g in range(model.G)]
            out.append(sum(1 << j for j in range(m) if bv(s.gcnt[j])))
            out.append(int(bv(s.grs)))
        return tuple(out)

    def action_args(self, action, model):
        name = action[0]
        free = lambda p: z3.Int(f"{name}.{p}!cc")
        if name in ("target_flag",):
            return name, [z3.IntVal(action[1]), z3.BoolVal(bool(action[2]))]
        if name == "set_notify_work_desired":
            return name, [z3.IntVal(action[1]), z3.BoolVal(bool(action[2])), free("x")]
        if name == "find_next_available":
            return name, [z3.IntVal(action[1]), free("j")]
        if name in ("no_message", "remove_consumer"):
            return name, [z3.IntVal(action[1]), free("x")]
        if name in ("delete_entry", "delayed_acquisition"):
            return name, [z3.IntVal(action[1]), free("x")]
        if name == "notify_consumers":
            return name, [z3.IntVal(action[1]), free("x")]
        if name in ("suspend", "resume"):
            return name, [z3.IntVal(action[1]), z3.IntVal(REASONS.index(action[2]))]
        return name, [z3.IntVal(v) for v in action[1:]]

    def concrete_actions(self, model):
        n, m = model.n, model.m
        out: list[tuple] = []
        for c in range(n):
            for d in (False, True):
                out += [("target_flag", c, d), ("set_notify_work_desired", c, d)]
            out += [("deliver_single_message", c), ("find_next_available", c), ("deliver", c), ("no_message", c)]
            out += [("acquire", c, j) for j in range(m)]
            out += [("add_consumer", c), ("remove_consumer", c), ("credit", c)]
            out += [(a, c, r) for a in ("suspend", "resume") for r in REASONS]
        for j in range(m):
            out += [(a, j) for a in ("notify_consumers", "enqueue", "enqueue_held", "unhold", "release",
                                     "delete_entry", "delayed_acquisition")]
            out += [("reject", c, j) for c in range(n)]
        return out + [("idle",), ("reset_sub_pointers_for_groups",)]

    def readable(self, mdl, s):
        k = self.k
        ev = lambda x: mdl.eval(x, model_completion=True)
        iv = lambda x: ev(x).as_long()
        bv = lambda x: z3.is_true(ev(x))
        N, M = max(0, min(iv(k.N), 4)), max(0, min(iv(k.M), 4))
        node = lambda v: NODE_NAMES[v] if 0 <= v < len(NODE_NAMES) else v
        cons = []
        for c in range(N):
            d = {"id": c, "prio": iv(k.prio[c]), "acquires": bv(k.acq[c]), "level": iv(k.lvl[c]), "node": node(iv(s.node[c])),
                 "pc": iv(s.pc[c]), "scheduled": bv(s.wake[c]), "wants_work": bv(s.flag[c]), "credit": iv(s.credit[c]),
                 "susp": iv(s.susp[c]), "in": [f for f in ("all", "ni", "na", "nt", "intr") if bv(s[f][c])]}
            if bv(s.intr[c]):
                d["interested_at"] = [iv(s.ilvl[c]), iv(s.pos[c])]
            cons.append(d)
        G = max(0, min(iv(k.NG), 4))
        return {
            "sizes": {"consumers": iv(k.N), "messages": iv(k.M), "groups": iv(k.NG)},
            "actors": {f: bv(getattr(k, f)) for f in ("held", "expiry", "reject", "groups", "shared")},
            "consumers": cons,
            "messages": [{"status": iv(s.status[j]), "notify_owed": bv(s.pend[j]), "group": iv(k.grp[j]),
                          "delete_waiting": bv(s.dp[j]), "counted": bv(s.gcnt[j]),
                          "rejected_by": [c for c in range(N) if bv(s.rej[c][j])]} for j in range(M)],
            "group_owners": [iv(s.gown[g]) - 1 for g in range(G)],
            "group_reset_owed": bv(s.grs),
            "budget": iv(s.budget), "clock": iv(s.clock),
        }
