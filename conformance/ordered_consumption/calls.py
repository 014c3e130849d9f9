"""The ordered-consumption model at the granularity of implementation calls.

The model (``conq.model.ordered_consumption``) splits every thread of seed 001's thin client into
atomic steps (fetch_route / pick / send / tick / retry; receive / dispatch / take / consume /
next_attempt_delay / ack / change_invisible / forward_to_dlq / unlock; call_* / rpc ...) and lets
the server answer each request in every way it can.  A driver (:mod:`.driver`) cannot choose among
those answers after the fact: it *names* the server's answer (or the listener's result) in the call
and makes the implementation take it.  So each call of this view is one step of the environment --
a server answer, a listener result, a clock or rebalance event, a client call -- followed by the
internal steps it sets in motion, run to quiescence.  Internal (composed, deterministic) steps:
``pick`` (the producer picks its next queue), ``retry`` once the back-off is over, a ``receive`` that
finds room in the cache again (the loop waiting for room issues its request; a loop whose cache an
answer filled waits, in that answer's step), ``take`` (FIFO: the locked dispatcher takes
the earliest message), ``unlock`` (FIFO: the worker unlocks and signals), and a FIFO ``consume`` that
settles a redelivery with a remembered outcome (no listener call).

Calls (``p`` a process queue = message queue, ``m`` a message; answers are the model's names; with
several push consumers in one group, ``consumers`` > 1, a push call names its consumer in its
parameter: ``p = c * queues + q`` is consumer c's process queue of queue q and ``m = c * messages + x``
its copy of message x (model.py ``group_param``), while ``expire`` and every observation name the
message itself):

* producer: ``("route_answer", ans)`` ans in ok / failed -- the answer to the route query;
  ``("send_answer", q, ans, b)`` ans in ok / error / throttled -- the answer to the send request to
  queue ``q`` (b: the back-off a throttling server asks for, in ticks; 0 otherwise); ``("tick",)`` -- one
  tick of the producer's clock while it waits out a back-off; ``("retry",)`` only when a
  configuration lets the producer retry before the back-off is over (never the reference);
* push consumer: ``("receive_answer", p, "ok")`` -- the server answers the pending receive of ``p``'s
  loop with what is deliverable, at most the batch the loop asked for (the model allows any non-empty
  prefix: the loop computed its batch when it issued the request, the model when it is answered);
  ``("receive_answer", p, ans)`` ans in lost (one message delivered, the answer lost) / error / throttled; ``("dispatch", p)`` -- the dispatcher handles ``p``'s signal (standard: takes every cached
  message; FIFO: locks, takes the earliest, or finds the lock busy); ``("listener_returns", m, res)``
  res in ok / fail -- the listener returns; ``("next_attempt_delay", m)`` -- FIFO: the retry policy's delay
  before the next local attempt is over; ``("ack_answer" | "change_invisible_answer" | "forward_to_dlq_answer", m, ans)``
  ans in ok / lost / error / throttled / invalid-handle / not-found / bad-request -- the answer to the
  pending settle request; ``("drop_process_queue", p)`` / ``("create_process_queue", p)`` -- a
  rebalance takes the queue away / gives it back;
* simple consumer: ``("simple_receive", ans)`` ans in ok / lost / error / throttled;
  ``("simple_ack", m, ans)`` / ``("simple_change_invisible", m, ans)`` ans as for a settle -- the
  application's call and its one request (the model's call_* then rpc of one application thread);
  ``("abandon", m)`` -- the application lets go of its copy;
* server: ``("expire", m)`` -- the invisible time of ``m``'s current delivery runs out.

Each call observes the model's observation of its own step: ``"ok"`` / ``"failed"`` (route);
``"ok"`` / ``"error"`` / ``["throttled", b]`` (send); the elapsed ticks (tick); the delivered
``[[m, attempt], ...]``, ``["lost", [[m, attempt]]]``, ``"error"`` or ``"throttled"`` (receive);
the messages whose consumption started, in order, or ``"lock-busy"`` (dispatch: a list);
``[res, attempt]`` (listener_returns: the attempt the listener saw); the answer's name (settles,
each the answer the request actually got); ``"elapsed"``; ``"visible"`` / ``"dead-lettered"`` (expire);
``"dropped"`` / ``"created"``; the simple consumer's ``["ok", [m, attempt]]``, ``["ok", []]``,
``["lost", [m, attempt]]``, ``["ok", "acked"]``, ``["ok", "changed"]``, ... (the model's rpc
observation); ``"abandoned"``.

Every state of this view is a state of the model (the composition only takes model steps), so the
model's ``always`` and ``sometimes`` properties apply unchanged; step and liveness properties speak
of the model's finer steps and stay with the model.  The model's ``assignment_stable`` (the ghost
step of its liveness assumption that rebalancing ends) is not a call: it only disables later
rebalance steps, so every call sequence after it is one without it, and this view leaves it out.

Snapshot (:meth:`OrderedConsumptionCalls.observe`, the driver reports the same shape)::

    producer: {"role", "phase", "type", "accepting_queues", "group_queue" (FIFO), "requests",
               "result", "queue" (phase send: the queue of the pending request),
               "backoff", "waited" (phase throttled-wait)}
    push:     {"role", "messages": [{"server", "attempt", "client", "pending"}],
               "process_queues": [{"assigned", "notified", "locked", "waiting", "cache": [n, bytes]}]}
    simple:   {"role", "messages": [{"server", "attempt", "held"}], "next_queue"}
    group:    {"role", "messages": [{"server", "attempt"}],
               "consumers": [{"messages": [{"client", "pending"}], "process_queues": [...]}]}

``client`` is ``-``, ``cached``, ``consuming``, ``retry-delay``, ``acking``, ``changing-invisible`` or
``dead-lettering`` (a copy on a process queue a rebalance dropped included); ``pending``: a newer
delivery is cached behind the copy in consumption; ``waiting``: the receive loop waits for room (the
cache is at a threshold); ``cache``: messages and body bytes the process queue counts.
"""

from __future__ import annotations

from typing import Any

from conq.model.kernel import Kind, Model
from conq.model.ordered_consumption.state import (
    C_NONE,
    CLI_NAMES,
    FIFO_MSG,
    HELD_NAMES,
    MTYPES,
    OP_NONE,
    P_PHASES,
    P_SEND,
    P_WAIT,
    PRODUCER,
    RESULTS,
    ROLE_NAMES,
    SIMPLE,
    SRV_NAMES,
)

#: model steps composed into the call that sets them in motion (see the module docstring)
_INTERNAL = frozenset({"pick", "take", "unlock"})
#: push-consumer steps whose answer a call names
_SETTLES = ("ack", "change_invisible", "forward_to_dlq")
#: witnesses that need two application calls in flight at once (never so in this view)
_NEEDS_OVERLAPPING_CALLS = frozenset({"simple-concurrent-receives", "simple-concurrent-settles"})


class OrderedConsumptionCalls(Model):
    """Call-level view of an :class:`~conq.model.ordered_consumption.OrderedConsumptionModel`."""

    name = "ordered-consumption"

    def __init__(self, base: Model):
        self.base = base
        self.config = base.config
        self._properties = None
        self.Config = type(base.config)
        if hasattr(base, "config_name"):
            self.config_name = base.config_name

    def init_states(self):
        return list(dict.fromkeys(self._settle(s) for s in self.base.init_states()))

    # -- composition ------------------------------------------------------------------
    def _internal(self, s: Any, a: tuple, o: Any, t: Any, tick_enabled: bool) -> bool:
        name = a[0]
        if name in _INTERNAL:
            return True
        if name == "retry":
            return not tick_enabled  # the back-off is over: the producer goes on by itself
        if name == "receive":
            return o == "room"  # the loop waiting for room finds it and issues its request
        if name == "consume":
            return isinstance(o, tuple) and o[0] == "remembered"
        return False

    def _settle(self, s: Any) -> Any:
        """Take internal steps until none is enabled (each has one outcome; their order does not
        matter: they touch different threads' records).  Memoised."""
        memo = self.__dict__.setdefault("_settled", {})
        found = memo.get(s)
        if found is None:
            if len(memo) >= self.CACHE_LIMIT:
                memo.clear()
            found = memo[s] = self._settle_now(s)
        return found

    def _settle_now(self, s: Any) -> Any:
        for _ in range(10_000):
            succ = self.base.successors(s)
            tick = any(a[0] == "tick" for a, _, _ in succ)
            for a, o, t in succ:
                if self._internal(s, a, o, t, tick):
                    s = t
                    break
            else:
                return s
        raise RuntimeError("internal steps do not end")  # pragma: no cover - the model's internal steps end

    #: composed successors are memoised (the checker asks for them twice a step)
    CACHE_LIMIT = 300_000

    def successors(self, s):
        cache = self.__dict__.setdefault("_cache", {})
        found = cache.get(s)
        if found is None:
            if len(cache) >= self.CACHE_LIMIT:
                cache.clear()
            found = cache[s] = self._compose(s)
        return found

    def _call(self, s: Any, a: tuple, o: Any) -> tuple | None:
        """The call of base step ``a`` answered ``o``; None for an internal step."""
        name = a[0]
        if name == "fetch_route":
            return ("route_answer", o)
        if name == "send":
            return ("send_answer", a[1], o[0], o[1]) if isinstance(o, tuple) else ("send_answer", a[1], o, 0)
        if name in ("tick", "retry"):
            return (name,)
        if name == "receive":
            if o in ("full", "room"):
                return None
            if isinstance(o, tuple) and o and o[0] == "lost":
                return ("receive_answer", a[1], "lost")
            if isinstance(o, tuple):
                # the server returns any non-empty prefix of what is deliverable, up to the batch
                # the client asked for (or nothing): the answer, not its length, is the call's
                return ("receive_answer", a[1], "ok")
            return ("receive_answer", a[1], o)
        if name == "consume":
            return ("listener_returns", a[1], o[0]) if isinstance(o, tuple) and o[0] in ("ok", "fail") else None
        if name in _SETTLES:
            return (name + "_answer", a[1], o)
        if name in ("next_attempt_delay", "expire", "drop_process_queue", "create_process_queue", "abandon"):
            return a
        # ``assignment_stable`` is no call: a ghost of the liveness assumption "rebalancing ends" (model.py
        # ``_assignment_stable``), which only disables later rebalance steps; every call sequence after it
        # is one without it, so this view leaves it out and its states keep the assignment changeable
        return None

    def _compose(self, s):
        b = self.base
        out = []
        role = s[0]
        succ = b.successors(s)
        tick = any(a[0] == "tick" for a, _, _ in succ)
        if role == SIMPLE:
            return self._compose_simple(s, succ)
        for a, o, t in succ:
            name = a[0]
            if self._internal(s, a, o, t, tick):
                continue
            if name == "dispatch":
                out.append(self._dispatch(a, o, t))
                continue
            call = self._call(s, a, o)
            if call is not None:
                out.append((call, o, self._settle(t)))
        return out

    def _dispatch(self, a: tuple, o: Any, t: Any) -> tuple:
        """One run of the dispatcher for process queue p: standard takes cached messages until none
        is left; FIFO locks and takes the earliest (or finds the lock busy)."""
        b, p = self.base, a[1]
        if o == "lock-busy":
            return (("dispatch", p), "lock-busy", self._settle(t))
        taken = []
        if o == "locked":
            [(o2, t)] = b.step(t, ("take", p))
            if o2 != "empty":
                taken.append(o2)
        else:
            while o != "empty":
                taken.append(o)
                [(o, t)] = b.step(t, ("dispatch", p))
        return (("dispatch", p), tuple(taken), self._settle(t))

    def _compose_simple(self, s, succ):
        """An application call and its one request, on the first idle application thread."""
        b = self.base
        calls = s[3]
        idle = next((th for th, c in enumerate(calls) if c[0] == OP_NONE), None)
        out = []
        for a, o, t in succ:
            name = a[0]
            if name in ("abandon", "expire"):
                out.append((a, o, t))
            elif name.startswith("call_") and a[1] == idle:
                for o2, t2 in b.step(t, ("rpc", idle)):
                    kind = o2[0] if isinstance(o2, tuple) else o2
                    if name == "call_receive":
                        call = ("simple_receive", kind)
                    else:
                        call = ("simple_" + name[len("call_"):], a[2], kind)
                    out.append((call, o2, t2))
        return out

    def actions(self, s):
        seen = []
        for a, _, _ in self.successors(s):
            if a not in seen:
                seen.append(a)
        return seen

    def step(self, s, action):
        return [(o, t) for a, o, t in self.successors(s) if a == action]

    # -- the model's properties and views -----------------------------------------------
    def properties(self):
        # every state here is a model state: state properties carry over; step and liveness
        # properties speak of the model's finer steps and fairness classes and stay with it
        # properties; a witness of two application calls in flight at once cannot be reached here
        # (each application call is composed with its one request)
        return [p for p in self.base.property_list()
                if p.kind in (Kind.ALWAYS, Kind.SOMETIMES) and p.name not in _NEEDS_OVERLAPPING_CALLS]

    def fair(self, action, observation):
        return action

    def view(self, s):
        return self.base.view(s)

    def observe(self, s):
        return observation_of_state(self.base, s)

    def actors(self, action, observation):
        name = action[0]
        if name in ("route_answer", "send_answer"):
            return ("server", "producer")
        if name == "tick":
            return ("clock", "producer")
        if name.endswith("_answer"):
            return ("server", "client")
        if name.startswith("simple_"):
            return ("application", "server")
        if name == "listener_returns":
            return ("listener", "consumer")
        return self.base.actors(action, observation)


def observation_of_state(base: Model, s: Any, one_client: bool = False) -> dict[str, Any]:
    """The snapshot of a view state (see the module docstring); the driver builds the same shape
    from the implementation.  ``one_client``: one consumer's part of a group's snapshot (no role,
    no server fields)."""
    role = s[0]
    c = base.config
    if role == PRODUCER:
        _, phase, mtype, mask, group, sent, queue, backoff, elapsed, result = s
        out: dict[str, Any] = {
            "role": "producer", "phase": P_PHASES[phase], "type": MTYPES[mtype],
            "accepting_queues": [q for q in range(c.queues) if (mask >> q) & 1],
            "requests": sent, "result": RESULTS[result],
        }
        if mtype == FIFO_MSG:
            out["group_queue"] = group
        if phase == P_SEND:
            out["queue"] = queue
        if phase == P_WAIT:
            out["backoff"] = backoff
            out["waited"] = elapsed
        return out
    if role == SIMPLE:
        _, msgs, rr, _calls = s
        return {"role": "simple",
                "messages": [{"server": SRV_NAMES[srv], "attempt": d, "held": HELD_NAMES[h]} for srv, d, h in msgs],
                "next_queue": rr}
    if getattr(base, "multi", False) and not one_client:
        # several push consumers in one group (model.py "several push consumers"): the group's server
        # fields once, each consumer's copies and process queues as one consumer's snapshot has them
        views = [observation_of_state(base, base.consumer_view(s, i), one_client=True)
                 for i in range(len(s[2]))]
        return {"role": ROLE_NAMES[role],
                "messages": [{"server": SRV_NAMES[srv], "attempt": d} for srv, d in s[1]],
                "consumers": views}
    msgs, pqs = s[1], s[2]
    thr_c, thr_b = base._thresholds(pqs)
    queues = []
    for p, (w, nf, lk, _wk, asg) in enumerate(pqs):
        cnt, byts = base._cache_of(msgs, p)
        queues.append({"assigned": bool(asg), "notified": bool(nf and asg), "locked": bool(lk and asg),
                       "waiting": bool(w and asg and (cnt >= thr_c or (byts >= thr_b and not c.ignore_bytes))),
                       "cache": [cnt, byts] if asg else [0, 0]})
    if one_client:
        return {"messages": [{"client": CLI_NAMES[r[2]], "pending": bool(r[6])} for r in msgs],
                "process_queues": queues}
    return {
        "role": ROLE_NAMES[role],
        "messages": [{"server": SRV_NAMES[r[0]], "attempt": r[1], "client": CLI_NAMES[r[2]], "pending": bool(r[6])}
                     for r in msgs],
        "process_queues": queues,
    }


__all__ = ["OrderedConsumptionCalls", "observation_of_state", "C_NONE"]
