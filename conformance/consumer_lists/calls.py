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
  followed by the consumer's ``setNotifyWorkDesired`` when its credit ran out;
* the other actors (issue 16, ``model/consumer_lists/actors.py``; only in
  configurations that switch them on):

  - ``delete_entry j`` (``expiry``): the housekeeping thread's expiry or a
    management delete, ``AbstractQueue.deleteEntry``: an available entry is
    deleted, a sent acquisition stolen and deleted, a held entry (or an
    acquisition not yet sent) gets a delayed acquisition that completes on its
    next state change (``unhold``, a release, the send); then the deleting
    thread's notification (reference: one interested consumer while messages
    are available) and a group pointer reset if the delete freed a group;
  - ``reject c j`` (``reject``): consumer ``c``'s IO thread rejects the entry it
    holds: available again to everyone but ``c``, then the ``notifyConsumers``
    owed for it, as for ``release``;
  - message groups (``groups``) add no call: they change what ``pull`` may
    take, and the ``resetSubPointersForGroups`` owed by a call that freed a
    group runs at its end.

Every call ends by *settling* the steps it owes, to quiescence, in this order
(the order of the reference implementation; the model allows every order):
first a delete waiting for an entry whose state changed
(``delayed_acquisition``: an ``unhold`` of an entry a delete waits for deletes
it instead of offering it), then the publishers' ``notifyConsumers`` and the
consumers' ``setNotifyWorkDesired`` halves, last the group pointer reset
(``reset_sub_pointers_for_groups``).  The notifications of every settled step
belong to the call.

Each call observes ``(result, notified)``: the message delivered (``pull``),
the previous owner (``release``), for ``delete_entry`` the previous owner of a
stolen acquisition, None for an available entry, ``"held"`` for a held one
(the delete waits) and ``"waiting"`` for an acquisition not yet sent (never at
call level: a ``pull`` always ends with the send), else None (``reject`` and
the rest); and the sorted consumers the call notified (their order is not
specified by the seeds).  Every state of this view is a state of the model, so
the model's ``always`` properties apply unchanged; the checker checks them on
every consistent state.  The ``observe()`` view adds, when the actors are on,
``rejected_by`` (per message, the consumers that rejected it),
``delete_waiting`` (the messages a delete waits for), ``groups`` (per group its
owner or None) and ``group_reset_owed`` (always false once a call settled).
"""

from __future__ import annotations

from typing import Any

from conq.model.kernel import Kind, Model
from conq.model.consumer_lists.model import ConsumerListsModel
from conq.model.consumer_lists.state import ACQ, AVAILABLE, HELD

ENV = frozenset({"add_consumer", "remove_consumer", "credit", "suspend", "resume", "enqueue", "enqueue_held", "unhold",
                 "release", "delete_entry", "reject"})
DESIRE = frozenset({"target_flag", "set_notify_work_desired"})
PULL_END = frozenset({"deliver", "no_message"})
#: model steps whose observation is the tuple of consumers they notified
NOTIFYING = frozenset({"notify_consumers", "set_notify_work_desired", "no_message", "add_consumer", "remove_consumer",
                       "delete_entry", "delayed_acquisition", "reset_sub_pointers_for_groups"})
#: the owed steps a call settles, in three ranks: a waiting delete completes first, then the
#: publishers and the consumers' desire halves, the group pointer reset last (calls.py docstring)
SETTLE_RANK = {"delayed_acquisition": 0, "notify_consumers": 1, "target_flag": 1, "set_notify_work_desired": 1,
               "reset_sub_pointers_for_groups": 2}


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
        # The model's successors, memoised per state here (BASE_CACHE_LIMIT).  For the model itself
        # (not a subclass that changes its steps) they are taken from its readable
        # ``spec_successors``, not its fast path (model/consumer_lists/fast.py): the fast path
        # records every footprint with its step-property checks for the explorer, work a
        # conformance run (a few hundred call-level states, each composed once) never reuses --
        # profiled with pyinstrument on bench/checker_speed.py's reference row, its misses were
        # about a third of the checker's process.  tests/conformance/test_checker_speed.py checks
        # that both give the same composed successors on every reachable call-level state.
        self._base_cache: dict[Any, list] = {}
        plain = type(base).successors is ConsumerListsModel.successors and hasattr(base, "spec_successors")
        self._base_successors = base.spec_successors if plain else base.successors

    #: the most model states whose successors are memoised (cleared when full: it costs only time)
    BASE_CACHE_LIMIT = 500_000

    def _base(self, s: Any) -> list:
        cache = self._base_cache
        found = cache.get(s)
        if found is None:
            if len(cache) >= self.BASE_CACHE_LIMIT:
                cache.clear()
            found = cache[s] = self._base_successors(s)
        return found

    def init_states(self):
        return [self._settle(s)[0] for s in self.base.init_states()]

    # -- composition ------------------------------------------------------------------
    def _settle(self, s: Any, notified: list | None = None) -> tuple[Any, list]:
        """Take owed steps until none is enabled: no delete waits for an entry that changed state,
        publishers owe nothing, no consumer's desire is half-told, no group pointer reset is owed.
        Of the enabled ones, the first of the lowest ``SETTLE_RANK`` (then the model's order)."""
        notified = [] if notified is None else notified
        while True:
            best = None
            for a, o, t in self._base(s):
                rank = SETTLE_RANK.get(a[0])
                if rank is not None and (best is None or rank < best[0]):
                    best = (rank, a, o, t)
                    if rank == 0:
                        break
            if best is None:
                return s, notified
            _, a, o, s = best
            if a[0] in NOTIFYING:
                notified.extend(o or ())

    def _delete_result(self, s: Any, j: int) -> Any:
        """What ``delete_entry j`` answers, read off the state before it: the previous owner of a
        stolen acquisition, None for an available entry, "held" / "waiting" when the delete waits."""
        b = self.base
        st = s[b.MB + 2 * j]
        if st == AVAILABLE:
            return None
        if st == HELD:
            return "held"
        if st >= ACQ:
            return st - ACQ if b._stealable(s, j) else "waiting"
        raise AssertionError(f"delete_entry {j} enabled on a message in status {st}")  # pragma: no cover

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
        for a, o, t in self._base(s):
            name = a[0]
            if name in ENV:
                notified = list(o or ()) if name in NOTIFYING else []
                t, notified = self._settle(t, notified)
                if name == "release":
                    result = o
                elif name == "delete_entry":
                    result = self._delete_result(s, a[1])
                else:
                    result = None
                out.append((a, (result, tuple(sorted(notified))), t))
            elif name == "deliver_single_message":
                c = a[1]
                notified: list = []
                result = None
                state = t
                if o != "suspended":
                    while True:
                        step = next(((a2, o2, t2) for a2, o2, t2 in self._base(state) if len(a2) > 1 and a2[1] == c and a2[0] in ("find_next_available", "acquire", "deliver", "no_message")), None)
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
    out); with the other actors on, who rejected each message, the messages a
    delete waits for, each group's owner (None: no owner) and whether a group
    pointer reset is owed.  The driver builds the same shape from the
    implementation's snapshot."""
    out = {
        "consumers": [[c["node"], c["credit"]] for c in view["consumers"]],
        "messages": [m.replace(" (notify owed)", "") for m in view["messages"]],
        "interested": {p: ids for p, ids in view["lists"]["interested"].items() if ids},
    }
    # the other actors (issue 16), only when switched on: the implementation reports them too
    for key in ("rejected_by", "delete_waiting", "group_reset_owed"):
        if key in view:
            out[key] = view[key]
    if "groups" in view:
        out["groups"] = [g["owner"] for g in view["groups"]]
    return out
