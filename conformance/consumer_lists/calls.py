"""The consumer-lists model at the granularity of implementation calls.

The model (``conq.model.consumer_lists``) splits every thread into the
atomic steps of the real code, so the explorer can interleave them and find
lost wake-ups.  A conformance driver, though, calls the implementation's API
one call at a time from a single thread: each call runs to completion before
the next begins.  This view composes the model's steps accordingly: one
*call* is an environment step followed by the steps of the threads it sets in
motion, run to quiescence, exactly as the single-threaded caller sees them:

* ``enqueue j`` / ``enqueue_held j`` / ``unhold j`` / ``release j``: the
  message changes, then the publisher's ``notifyConsumers`` for it;
* ``add_consumer c`` / ``remove_consumer c``: with the notifications they
  make, and the ``notifyConsumers`` owed for messages a removal released;
* ``suspend c r`` / ``resume c r`` / ``credit c``: the reason changes, then the
  consumer's ``setNotifyWorkDesired`` (both halves);
* ``pull c``: one ``deliverSingleMessage`` of a consumer whose IO thread is
  scheduled (or still pulling), through delivery or "nothing available",
  followed by the consumer's ``setNotifyWorkDesired`` when its credit ran out.

Each call observes ``(result, notified)``: the message delivered (``pull``),
the previous owner (``release``) or None, and the sorted consumers the call
notified (their order is not specified by the seeds).  Every state of this
view is a state of the model, so the model's ``always`` properties apply
unchanged; the checker checks them on every consistent state.
"""

from __future__ import annotations

from typing import Any

from conq.model.kernel import Kind, Model

ENV = frozenset({"add_consumer", "remove_consumer", "credit", "suspend", "resume", "enqueue", "enqueue_held", "unhold", "release"})
DESIRE = frozenset({"target_flag", "set_notify_work_desired"})
PULL_END = frozenset({"deliver", "no_message"})


class ConsumerListsCalls(Model):
    """Call-level view of a :class:`~conq.model.consumer_lists.ConsumerListsModel`."""

    name = "consumer-lists"

    def __init__(self, base: Model):
        self.base = base
        self.config = base.config
        self._properties = None
        self.Config = type(base.config)
        if hasattr(base, "config_name"):
            self.config_name = base.config_name

    def init_states(self):
        return [self._settle(s)[0] for s in self.base.init_states()]

    # -- composition ------------------------------------------------------------------
    def _run(self, s: Any, want, notified: list) -> Any:
        """Take base steps accepted by ``want(action)`` until none is enabled."""
        while True:
            for a, o, t in self.base.successors(s):
                if want(a):
                    if a[0] in ("notify_consumers", "set_notify_work_desired", "no_message", "add_consumer", "remove_consumer"):
                        notified.extend(o or ())
                    s = t
                    break
            else:
                return s

    def _settle(self, s: Any, notified: list | None = None) -> tuple[Any, list]:
        """Publishers owe nothing and no consumer's desire is half-told."""
        notified = [] if notified is None else notified
        s = self._run(s, lambda a: a[0] == "notify_consumers" or a[0] in DESIRE, notified)
        return s, notified

    #: composed successors are memoised: traces revisit the same few states over and over
    #: (the conformance checker asks for them twice a step), and composing is costly
    CACHE_LIMIT = 500_000

    def successors(self, s):
        cache = self.__dict__.setdefault("_cache", {})
        found = cache.get(s)
        if found is None:
            if len(cache) >= self.CACHE_LIMIT:
                cache.clear()
            found = cache[s] = self._compose(s)
        return found

    def _compose(self, s):
        out = []
        for a, o, t in self.base.successors(s):
            name = a[0]
            if name in ENV:
                notified = list(o) if name in ("add_consumer", "remove_consumer") else []
                t, notified = self._settle(t, notified)
                result = o if name == "release" else None
                out.append((a, (result, tuple(sorted(notified))), t))
            elif name == "deliver_single_message":
                c = a[1]
                notified: list = []
                result = None
                state = t
                if o != "suspended":
                    while True:
                        step = next(((a2, o2, t2) for a2, o2, t2 in self.base.successors(state) if len(a2) > 1 and a2[1] == c and a2[0] in ("find_next_available", "acquire", "deliver", "no_message")), None)
                        if step is None:  # pragma: no cover - the model always ends a pull
                            raise RuntimeError(f"pull of consumer {c} did not end in {self.base.view(state)}")
                        a2, o2, state = step
                        if a2[0] == "deliver":
                            result = o2
                            break
                        if a2[0] == "no_message":
                            notified.extend(o2)
                            break
                state, notified = self._settle(state, notified)
                out.append((("pull", c), (result, tuple(sorted(notified))), state))
        return out

    def actions(self, s):
        seen = []
        for a, _, _ in self.successors(s):
            if a not in seen:
                seen.append(a)
        return seen

    def step(self, s, action):
        return [(o, t) for a, o, t in self.successors(s) if a == action]

    # -- the model's properties and views apply to every state of this view -------------
    def properties(self):
        # State properties carry over (every state here is a model state); step
        # and liveness properties speak of the model's finer steps and fairness
        # classes, so they stay with the model.
        return [p for p in self.base.property_list() if p.kind in (Kind.ALWAYS, Kind.SOMETIMES)]

    def view(self, s):
        return self.base.view(s)

    def observe(self, s):
        return observation_of_view(self.base.view(s))

    def actors(self, action, observation):
        if action[0] == "pull":
            return (f"c{action[1]}", "queue")
        return self.base.actors(action, observation)


def observation_of_view(view: dict[str, Any]) -> dict[str, Any]:
    """What both the model and an implementation can report of a quiescent
    state: each consumer's list and credit, each message's state, and the
    order of the Interested list of every priority level (empty levels left
    out).  The driver builds the same shape from the implementation's snapshot."""
    return {
        "consumers": [[c["node"], c["credit"]] for c in view["consumers"]],
        "messages": [m.replace(" (notify owed)", "") for m in view["messages"]],
        "interested": {p: ids for p, ids in view["lists"]["interested"].items() if ids},
    }
