"""The recovery-deferral model at the granularity the reference implementation can be driven.

The model's actions (``conq.model.recovery_deferral``) are already the steps a driver can make the
implementation take one at a time -- the environment's calls (``feed`` an event, ``recover``,
``status``) and the internal steps of its threads (``run``: a worker takes the head task of a queue
and calls the customer's listener; ``done``: the listener returns and the task is completed;
``poll``: the deferred-ProducerUp scheduler checks one deferred callback).  The driver
(:mod:`.driver`) makes each of them happen on a thread of its own and waits until the
implementation is quiet again, so this view keeps every one of them: interleavings are checked,
not hidden.

One thing the model leaves out is a feed thread that is *blocked*: in the model, ``feed(p)`` is
simply not enabled while its event's queue is full (spec/recovery-deferral.md "Full queue").  A
driver cannot ask the implementation whether a hand-off would block without making it; it makes the
hand-off and sees the feed thread wait.  So this view adds that state:

* ``feed(p)`` whose queue ``q`` is full (``on_queue_full = block``) observes ``("blocked", q,
  counted)``: the feed thread waits; no other ``feed`` (nor upstream's ``track``) is enabled until it
  is released;
* the state it waits in is the model's ``receive(p)``, the first half of its ``feed(p)``: the event
  has arrived (``fed`` counts it) but is in no queue yet;
* the ``run(q)`` that makes room on ``q`` releases it: the step is the model's ``run(q)`` followed by
  the model's ``hand_off`` of the event onto ``q`` (the second half of ``feed(p)``), observed as
  ``("listener", e, ("queued", q))``;
* an error about no event (any queue) may block on a full queue while another has room (the
  implementation picks the queue first, then waits): ``("blocked", q, counted)`` for each full
  candidate.

While it waits, the feed thread may already have counted the event in the tracker (``counted`` 1:
the reference counts before it enqueues, DEV-009) or not yet (``counted`` 0: the model's atomic
count-and-enqueue): both are allowed -- pending(context) of the waiting event reads one more in the
first case, in the snapshot and in a ``poll`` of that context, which then does not deliver.  Counting
while blocked is safe either way: no worker can see the task before it is enqueued.  (The driver
reads ``counted`` off the tracker; it is in the observation so that an action and its observation
determine the next state, as the explorer's paths need.)

With ``late_initiation`` the waiting event may be the first resent event of a recovery whose
onRecoveryInitiated has not come yet (DEV-032).  Its arrival (``receive``) has already done what the
model's ``feed`` does on the SDK's side: the SDK is in that recovery's epoch (its status callbacks may
come again) and the listener knows the recovery from its event (``newest``), counted or not -- so
while the feed thread waits, a poll of an older recovery's deferred up finds it superseded, an up the
SDK sends is tied to the new recovery (and held back by the waiting event, which counts as not fed:
``up_after_events``), and the late onRecoveryInitiated is ``"forwarded-late"``.  (issue 32: before,
this view had no state for that wait, and the driver refused the hand-off instead.)

States are ``(model state, blocked)`` with ``blocked`` None or ``(producer, event, queue, counted)``.
Every model state is a state of this view and the view's ``always`` and ``sometimes`` properties are
the model's, checked on the model state (step and liveness properties speak of the model's own steps
and fairness and stay with the model; the checker holds the implementation to them through the
observations, which are the model's).

Snapshot (:func:`observation_of_state`, the driver reports the same shape)::

    {"queues":   per queue, the event ids waiting, head first (queue order, not sorted),
     "running":  per queue, the event its worker is running, or None,
     "pending":  {context: pending count} for every context whose count is not 0
                 ("NONE", "p<producer>/r<request>"; keys sorted by the comparison),
     "recovery": per producer, the request id of the stored recovery context (0: none),
     "deferred": per producer, the kinds of the callbacks deferred now, sorted,
     "feed_blocked": the queue the feed thread waits for room on, or None}

``recovery`` and ``deferred`` are left out when the concurrent listener is disabled (the legacy
pass-through stores and defers nothing).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from conq.model.kernel import Kind, Model
from conq.model.recovery_deferral import state as _state
from conq.model.recovery_deferral.state import DUE, PENDING, STALE, OnQueueFull

#: callback states in which the implementation holds a deferred callback
_DEFERRED = (PENDING, STALE, DUE)
#: where each field sits in a model state (read by name: the model's state may grow)
_F = {f: i for i, f in enumerate(getattr(_state, "FIELDS", (
    "fed", "queues", "running", "status", "pending", "entries", "slot", "rec", "notes", "sched", "backlog")))}
QUEUES, RUNNING, PENDING_COUNTS, REC, NOTES = (_F[f] for f in ("queues", "running", "pending", "rec", "notes"))
UPCTX = _F.get("upctx")


def polled_context(base: Model, s: Any, p: int, k: int) -> int:
    """The context whose pending count ``poll(p, k)`` reads: the one the callback was correlated with
    when it arrived (``upctx``), or, in a model without that field, the producer's stored one."""
    r = s[UPCTX][p][k] if UPCTX is not None else s[REC][p]
    return base.ctx(p, r)


class RecoveryDeferralCalls(Model):
    """Call-level view of a :class:`~conq.model.recovery_deferral.RecoveryDeferralModel`."""

    name = "recovery-deferral"

    def __init__(self, base: Model):
        self.base = base
        self.config = base.config
        self._properties = None
        self.Config = type(base.config)
        self.ACTIONS = base.ACTIONS
        if hasattr(base, "config_name"):
            self.config_name = base.config_name
        c = base.config
        R = c.recoveries
        self.ctx_names = ["NONE"] + [f"p{p}/r{r}" for p in range(c.producers) for r in range(1, R + 1)]

    def init_states(self):
        return [(s, None) for s in self.base.init_states()]

    # -- composition ------------------------------------------------------------------
    #: composed successors are memoised (the checker asks for them twice a step)
    CACHE_LIMIT = 500_000

    def successors(self, vs):
        cache = self.__dict__.setdefault("_cache", {})
        found = cache.get(vs)
        if found is None:
            if len(cache) >= self.CACHE_LIMIT:
                cache.clear()
            found = cache[vs] = self._compose(vs)
        return found

    def _blocked_outcomes(self, s, p: int) -> list[tuple]:
        """``feed(p)`` when the feed thread has to wait: one outcome per full candidate queue.  The
        state it waits in is the model's ``receive`` (the event arrived: ``fed`` counts it, and the
        first resent event of a recovery not initiated yet has started the SDK's epoch of that
        recovery and made it known to the listener, ``late_initiation``); the model's ``hand_off``
        follows when a worker makes room (:meth:`_release`)."""
        b, c = self.base, self.config
        if not c.enabled or c.on_queue_full is not OnQueueFull.BLOCK:
            return []
        got = b.receive(s, p)
        if got is None:
            return []
        e, arrived = got
        if b.ev_error[e] and not c.handle_errors_async:
            return []
        queues = s[QUEUES]
        x = b.ev_ctx[e]
        counts = (1, 0) if x >= 0 and c.count_before_enqueue else (0,)
        return [
            (("feed", p), ("blocked", q, counted), (arrived, (p, e, q, counted)))
            for q in b.ev_queues[e]
            if len(queues[q]) >= c.queue_size
            for counted in counts
        ]

    def _release(self, t, blk) -> list[tuple]:
        """The waiting hand-off of ``blk`` completed onto its queue, from model state ``t`` (room made
        there): ``[(("queued", q), next state)]``."""
        _p, e, q, _counted = blk
        return [(o, t2) for o, t2 in self.base.hand_off(t, e) if o == ("queued", q)]

    def _compose(self, vs):
        s, blk = vs
        b = self.base
        out = []
        by_action: dict[tuple, list] = {}
        for a, o, t in b.successors(s):
            by_action.setdefault(a, []).append((o, t))
        if blk is None:
            for a in b.actions(s):
                for o, t in by_action.get(a, ()):
                    out.append((a, o, (t, None)))
                if a[0] == "feed":  # listed whenever p has an event left: maybe blocked
                    out.extend(self._blocked_outcomes(s, a[1]))
            return out
        p, e, q, counted = blk
        x = b.ev_ctx[e]
        for a in b.actions(s):
            name = a[0]
            if name in ("feed", "track"):
                continue  # the feed thread is waiting for room
            for o, t in by_action.get(a, ()):
                if name == "run" and a[1] == q:
                    # room on q: the waiting hand-off completes onto q
                    for o2, t2 in self._release(t, blk):
                        out.append((a, (o[0], o[1], o2), (t2, None)))
                    continue
                if name == "poll" and counted and polled_context(b, s, a[1], a[2]) == x:
                    # the waiting event is counted: its context reads one more, nothing is delivered
                    out.append((a, s[PENDING_COUNTS][x] + 1, vs))
                    continue
                out.append((a, o, (t, blk)))
        return out

    def actions(self, vs):
        seen = []
        for a, _, _ in self.successors(vs):
            if a not in seen:
                seen.append(a)
        return seen

    def step(self, vs, action):
        return [(o, t) for a, o, t in self.successors(vs) if a == action]

    # -- the model's properties, views and fairness --------------------------------------
    def properties(self):
        out = []
        for prop in self.base.property_list():
            if prop.kind not in (Kind.ALWAYS, Kind.SOMETIMES):
                continue
            check, witness = prop.check, prop.witness
            out.append(dataclasses.replace(
                prop,
                check=lambda vs, f=check: f(vs[0]),
                witness=None if witness is None else (lambda vs, f=witness: f(vs[0])),
            ))
        return out

    def fair(self, action, observation):
        return self.base.fair(action, observation)

    def view(self, vs):
        s, blk = vs
        v = self.base.view(s)
        if blk is not None:
            p, e, q, counted = blk
            v["feed_blocked"] = {"producer": p, "event": e, "queue": q, "counted": bool(counted)}
        return v

    def observe(self, vs):
        return observation_of_state(self, vs)

    def actors(self, action, observation):
        return self.base.actors(action, observation)

    def describe_event(self, e: int) -> str:
        return self.base.describe_event(e)


def observation_of_state(view: RecoveryDeferralCalls, vs: Any) -> dict[str, Any]:
    """The snapshot of a view state (see the module docstring); the driver builds the same shape
    from the implementation."""
    s, blk = vs
    b, c = view.base, view.config
    queues, running, pending, rec, notes = s[QUEUES], s[RUNNING], s[PENDING_COUNTS], s[REC], s[NOTES]
    extra = {}
    if blk is not None and blk[3]:
        extra[b.ev_ctx[blk[1]]] = 1
    counts = {view.ctx_names[x]: pending[x] + extra.get(x, 0) for x in range(b.n_ctx)}
    out: dict[str, Any] = {
        "queues": [list(q) for q in queues],
        "running": [None if r == -1 else r for r in running],
        "pending": {k: n for k, n in counts.items() if n},
        "feed_blocked": None if blk is None else blk[2],
    }
    if c.enabled:
        out["recovery"] = list(rec)
        out["deferred"] = [sorted(c.callbacks[k] for k, st in enumerate(np) if st in _DEFERRED) for np in notes]
    return out

