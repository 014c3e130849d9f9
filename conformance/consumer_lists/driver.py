"""The in-process driver of the reference consumer-lists implementation.

It maps the actions of the call-level view of the model
(:mod:`conq.conformance.consumer_lists.calls`) onto ``conq.impl.consumer_lists.queue``'s API,
one call at a time from the caller's thread, and reports observations in the
model's vocabulary: ``(result, notified)`` per call, where ``notified`` is the
sorted list of consumers whose ``notify_work`` the call triggered (read from
the queue's notification log).  Model consumer ``c`` is the implementation
consumer tagged ``sgen_<c+1>``, the tag the broker gives a consumer whose client
names none (upstream ``AMQChannel``: ``"sgen_" + getNextConsumerTag()``): the
queue is driven with identifiers as users have them, never with the model's
indices, so nothing in it may lean on an id being a small integer (its order,
its use as an index); the driver maps tags back to indices in what it reports.
Model message ``j`` is the ``j+1``-th message enqueued.

The consumer's IO thread is represented by the driver's own bookkeeping of
what the chain would do: a consumer whose ``notify_work`` fired is scheduled
(the chain's "would like to do work" bit), and after a delivery it keeps
pulling; ``pull c`` is rejected (error 13, definite) for a consumer that is
neither, exactly as the model has it disabled.

The other actors (issue 16) are configured from the model configuration:
``groups`` (the group of each message, -1 for none) and ``group_policy`` become
``Queue(group_policy=...)`` and ``enqueue(group=...)``, ``delete_notifies``
becomes ``Queue(delete_notifies=...)``.  ``delete_entry j`` (``expiry``) is
performed three ways, chosen by the seed, because the model makes the
housekeeping thread's TTL expiry and a management delete one step (the same
``deleteEntry``): a seed of 1 modulo 4 calls ``Queue.delete_entry``, 3 modulo 4
the administrative ``Queue.delete_message``; an even seed
makes message ``j`` expire on the queue's clock and runs one housekeeping pass
(``Housekeeping.run_once`` -> ``check_message_status``).  The queue's clock is
the driver's: every message is enqueued with a TTL, and a message is expired
exactly when the driver says so (``_Deadline``), so expiry happens at the
call, never on the wall clock.  ``reject c j`` is ``Queue.reject``.
"""

from __future__ import annotations

from typing import Any

from conq.impl.consumer_lists.consumer_manager import NodeState
from conq.impl.consumer_lists.housekeeping import Housekeeping
from conq.impl.consumer_lists.queue import MessageState, Queue, QueueConsumer, QueueError

from conq.impl.consumer_lists.node_list import NodeList
from conq.impl.scheduling import REAL

from conq.conformance.adapters import ActionRejected
from conq.conformance.trace import hashable

NODE = {
    "INTERESTED": "interested",
    "NOT_INTERESTED": "not-interested",
    "NOTIFIED": "notified",
    "NON_ACQUIRING": "non-acquiring",
    "REMOVED": "removed",
}
#: the same names by the queue's node state and message state (the view's hot path: no string work)
_NODE_OF = {st: NODE[st.name] for st in NodeState}
_MESSAGE_OF = {st: st.name.lower() for st in MessageState}
_ACQUIRED = MessageState.ACQUIRED
#: the node list's own reading step (impl/consumer_lists/node_list.py), as defined there: the mutants
#: that patch it (conformance/consumer_lists/mutants.py) replace it with a function of theirs
_PLAIN_FIND_NEXT = NodeList._find_next if NodeList._find_next.__module__ == NodeList.__module__ else None


class _Deadline:
    """A message's expiry time on the driver's clock: passed exactly when the driver has expired
    the message (``ConsumerListsDriver._expired``), whatever the order of the messages."""

    __slots__ = ("expired", "j")

    def __init__(self, expired: set[int], j: int):
        self.expired = expired
        self.j = j

    def __le__(self, now: Any) -> bool:
        return self.j in self.expired

    def __gt__(self, now: Any) -> bool:
        return self.j not in self.expired


class _Now:
    """The driver's clock reading: ``now + ttl`` is the deadline of the message whose TTL is its
    model id (the driver enqueues message ``j`` with ``ttl=j``)."""

    __slots__ = ("expired",)

    def __init__(self, expired: set[int]):
        self.expired = expired

    def __add__(self, ttl: int) -> _Deadline:
        return _Deadline(self.expired, ttl)


def consumer_tag(c: int) -> str:
    """Model consumer ``c``'s consumer tag: the one the broker generates for a consumer whose
    client names none (upstream ``AMQChannel.consumeFromSource``: ``"sgen_" + getNextConsumerTag()``,
    counted from 1 on the channel), all of them on one channel."""
    return f"sgen_{c + 1}"


class ConsumerListsDriver:
    #: the queue class to drive (the mutation catalog substitutes subclasses)
    queue_class: type = Queue

    def __init__(self, config: dict[str, Any], seed: int):
        self.cfg = config
        self.spec = [(int(p), bool(a)) for p, a in config["consumers"]]
        groups = [int(g) for g in config.get("groups") or ()]
        self.groups = groups
        self.n_groups = max(groups) + 1 if groups else 0
        self.expiry = bool(config.get("expiry", False))
        self.reject = bool(config.get("reject", False))
        #: messages the driver has expired (their deadline passed on the driver's clock)
        self._expired: set[int] = set()
        #: delete_entry through the housekeeping thread's expiry (even seeds) or a management delete:
        #: ``Queue.delete_entry`` (1 modulo 4) or the administrative ``Queue.delete_message`` (3 modulo 4)
        self.delete_by_expiry = self.expiry and seed % 2 == 0
        self.management_delete = "delete_message" if seed % 4 == 3 else "delete_entry"
        now = _Now(self._expired)
        kw: dict[str, Any] = {"delete_notifies": bool(config.get("delete_notifies", True))}
        if self.n_groups:
            kw["group_policy"] = str(config.get("group_policy", "shared"))
        if self.delete_by_expiry:
            kw["clock"] = lambda: now
        self.q = self.queue_class(record_events=True, **kw)
        self.housekeeping = Housekeeping(self.q, interval=1.0) if self.delete_by_expiry else None
        n = len(self.spec)
        #: model consumer -> its consumer tag, and back (the module's docstring)
        self.tags = [consumer_tag(c) for c in range(n)]
        self.index: dict[Any, int] = {tag: c for c, tag in enumerate(self.tags)}
        self.cons: list[QueueConsumer | None] = [None] * n
        self.removed = [False] * n
        self.scheduled = [False] * n
        self.pulling = [False] * n
        self.suspended: list[set[str]] = [set() for _ in range(n)]
        self.ids: dict[int, int] = {}  # model message -> implementation id
        self.log_pos = 0
        m = int(config["messages"])
        self._n_messages = m
        #: the environment's budget (spec/ports/consumer-lists.md, "State a port keeps"): remove_consumer,
        #: credit, suspend, resume, release and reject are enabled only while it is not 0, and each
        #: takes one from it when it is positive (-1: unbounded); the model bounds its environment so
        #: and a port must refuse them once it is spent (issue 35: generated traces probe it)
        self.budget = int(config.get("env_budget", -1))
        self.removal = bool(config.get("removal", True))
        self.release_on = bool(config.get("release", True))
        self._absent = ("absent", int(config.get("initial_credit", 1)))
        #: "acquired by cN" per owner, built once
        self._acquired_by: dict[Any, str] = {}
        #: the view's fast path (``observed``) mirrors ``snapshot`` over ``Queue.snapshot``: only when
        #: neither is overridden (a subclass that changes either is read through them)
        self._fast_view = type(self).snapshot is ConsumerListsDriver.snapshot and type(self.q).snapshot is Queue.snapshot
        if config.get("preadded", True):
            for c in range(n):
                self._add(c)
            self.log_pos = len(self.q.notifications)
            # the model's initial state already holds these notifications (as scheduled IO threads)

    # -- helpers -----------------------------------------------------------------------------
    def _listener(self, consumer: QueueConsumer) -> None:
        self.scheduled[self.index[consumer.id]] = True

    def _add(self, c: int) -> None:
        prio, acq = self.spec[c]
        self.cons[c] = self.q.add_consumer(
            self.tags[c], priority=prio, acquires=acq, credit=int(self.cfg.get("initial_credit", 1)),
            flow_active=True, listener=self._listener,
        )

    def _consumer(self, c: int) -> QueueConsumer:
        con = self.cons[c]
        if con is None or self.removed[c]:
            raise ActionRejected(f"consumer {c} is not registered")
        return con

    def _message(self, j: int) -> int:
        if j not in self.ids:
            raise ActionRejected(f"message {j} has not arrived")
        return self.ids[j]

    def _notified(self) -> tuple:
        log = self.q.notifications
        new = log[self.log_pos :]
        self.log_pos = len(log)
        index = self.index
        return tuple(sorted([index[tag] for tag in new]))

    def _model_id(self, answer: Any) -> Any:
        """A delete's answer in the model's vocabulary: the previous owner's index for its tag;
        None, ``"held"`` and ``"waiting"`` as they are (no tag is one of them: ``consumer_tag``)."""
        return self.index.get(answer, answer) if answer is not None else None

    # -- actions -------------------------------------------------------------------------------
    #: the calls the environment's budget pays for
    BUDGETED = frozenset({"remove_consumer", "credit", "suspend", "resume", "release", "reject"})

    def do(self, action: tuple) -> Any:
        name, *args = action
        if name in self.BUDGETED and self.budget == 0:
            raise ActionRejected("the environment's budget is spent")
        out = self._do(name, args)
        if name in self.BUDGETED:
            self.budget -= self.budget > 0
        # settle (spec/ports/consumer-lists.md): a consumer whose credit ran out, or that was
        # suspended, no longer wants work: its IO thread stops pulling (its next pull is not enabled)
        for c, con in enumerate(self.cons):
            if self.pulling[c] and con is not None and not con.desired:
                self.pulling[c] = False
        return out

    def _do(self, name: str, args: list) -> Any:
        result = None
        if name == "add_consumer":
            (c,) = args
            if self.cons[c] is not None:
                raise ActionRejected(f"consumer {c} was already added")
            self._add(c)
        elif name == "remove_consumer":
            (c,) = args
            if not self.removal:
                raise ActionRejected("this configuration removes no consumer")
            self.q.remove_consumer(self._consumer(c))
            self.removed[c] = True
            self.scheduled[c] = self.pulling[c] = False
        elif name == "credit":
            (c,) = args
            con = self._consumer(c)
            if con.credit >= int(self.cfg.get("max_credit", 1)):
                raise ActionRejected(f"consumer {c} already has the most credit it may hold")
            con.add_credit(1)
        elif name in ("suspend", "resume"):
            c, reason = args
            con = self._consumer(c)
            if (reason in self.suspended[c]) == (name == "suspend"):
                raise ActionRejected(f"consumer {c} is already {name}ed for {reason}")
            (self.suspended[c].add if name == "suspend" else self.suspended[c].discard)(reason)
            con.set_flow(not self.suspended[c])
        elif name in ("enqueue", "enqueue_held"):
            (j,) = args
            if j in self.ids or any(k not in self.ids for k in range(j)):
                raise ActionRejected(f"message {j} cannot arrive now (messages arrive in order)")
            group = self.groups[j] if j < len(self.groups) and self.groups[j] >= 0 else None
            ttl = j if self.delete_by_expiry else None
            self.ids[j] = self.q.enqueue(payload=j, held=name == "enqueue_held", group=group, ttl=ttl)
        elif name == "unhold":
            (j,) = args
            if self.q.message_state(self._message(j)).name.lower() != "held":
                raise ActionRejected(f"message {j} is not held")
            self.q.unhold(self._message(j))
        elif name == "release":
            (j,) = args
            if not self.release_on:
                raise ActionRejected("this configuration releases no message")
            mid = self._message(j)
            owner = self.q.snapshot()["messages"][str(mid)]["owner"]
            if owner is None:
                raise ActionRejected(f"message {j} is not acquired")
            self.q.release(mid)
            result = self.index[owner]
        elif name == "delete_entry":
            (j,) = args
            mid = self._message(j)
            if not self.expiry:
                raise ActionRejected("this configuration has no deletes (expiry is off)")
            if self.delete_by_expiry:
                snap = self.q.snapshot()
                m = snap["messages"][str(mid)]
                if m["state"] == "deleted" or mid in snap["delete_waiting"]:
                    raise ActionRejected(f"message {j} is deleted or a delete already waits for it")
                # the housekeeping thread: j's TTL has passed, one checkMessageStatus pass deletes it
                self._expired.add(j)
                if self.housekeeping.run_once() != 1:
                    raise AssertionError(f"the housekeeping pass did not start the delete of message {j}")
                result = "held" if m["state"] == "held" else self._model_id(m["owner"])
            else:
                try:
                    result = self._model_id(getattr(self.q, self.management_delete)(mid))
                except QueueError as e:
                    raise ActionRejected(str(e)) from None
        elif name == "reject":
            c, j = args
            if not self.reject:
                raise ActionRejected("this configuration has no rejects")
            con = self._consumer(c)
            try:
                self.q.reject(self._message(j), con)
            except QueueError as e:
                raise ActionRejected(str(e)) from None
        elif name == "pull":
            (c,) = args
            con = self._consumer(c)
            if not (self.scheduled[c] or self.pulling[c]):
                raise ActionRejected(f"consumer {c} is not scheduled and not pulling")
            self.scheduled[c] = False
            mid = self.q.deliver_single_message(con)
            self.pulling[c] = mid is not None
            result = None if mid is None else mid - 1
        else:
            raise KeyError(f"unknown action {name!r}")
        return (result, self._notified())

    def snapshot(self) -> dict[str, Any]:
        snap = self.q.snapshot()
        consumers = []
        for c in range(len(self.spec)):
            info = snap["consumers"].get(str(self.tags[c]))
            if self.cons[c] is None:
                consumers.append(["absent", int(self.cfg.get("initial_credit", 1))])
            else:
                consumers.append([NODE[info["state"]], info["credit"]])
        messages = []
        for j in range(int(self.cfg["messages"])):
            if j not in self.ids:
                messages.append("unarrived")
                continue
            m = snap["messages"][str(self.ids[j])]
            messages.append(f"acquired by c{self.index[m['owner']]}" if m["state"] == "acquired" else m["state"])
        index = self.index
        interested = {str(p): [index[i] for i in ids] for p, ids in snap["interested"] if ids}
        out = {"consumers": consumers, "messages": messages, "interested": interested}
        # the other actors (issue 16): the keys of the model's view (calls.observation_of_view)
        m = int(self.cfg["messages"])
        if self.reject:
            rb = snap["rejected_by"]
            out["rejected_by"] = [sorted(index[i] for i in rb.get(str(self.ids[j]), ())) if j in self.ids else []
                                  for j in range(m)]
        if self.expiry:
            waiting = set(snap["delete_waiting"])
            out["delete_waiting"] = [j for j in range(m) if self.ids.get(j) in waiting]
        if self.n_groups:
            # every call settles the reset it owes before it returns: none is ever owed in between
            out["group_reset_owed"] = False
            out["groups"] = [None if (o := snap["groups"].get(str(g))) is None else index[o] for g in range(self.n_groups)]
        return out

    #: (the levels, the reading step) the last decision of ``_reads_have_effects`` was made for
    _reads_key: tuple | None = None
    _reads_effects = True

    def _other_lists(self, levels: tuple) -> list:
        """The node lists ``observed()`` does not show, in the order Queue.snapshot reads them."""
        qcm = self.q.qcm
        return [lv.notified for lv in levels] + [lv.all for lv in levels] + [qcm.not_interested, qcm.non_acquiring]

    def _reads_have_effects(self, lists: list) -> bool:
        """Whether reading these node lists may have an effect beyond unlinking deleted entries:
        the reading step is patched (a mutant), a list is of another class, or the queue runs under
        a deterministic scheduler (every read is a scheduling point)."""
        return not (NodeList._find_next is _PLAIN_FIND_NEXT and self.q._sched is REAL
                    and all(type(lst) is NodeList for lst in lists))

    def observed(self) -> tuple:
        """``hashable(self.snapshot())``, read from the queue directly: the checker asks for it
        after every step (``InProcess.snapshot``), and the general-purpose ``Queue.snapshot`` (every
        field of every consumer, the whole notification log, the JSON-shaped dicts and their
        conversion) was half of in-process conformance's time (bench/checker_speed.py).  The same
        values, built as the tuples ``hashable`` makes of them (keys in sorted order); the queue's
        node lists are read as ``Queue.snapshot`` reads them (every list, through
        ``NodeList._find_next``) wherever reading may have an effect (the node-list mutants, a
        deterministic scheduler: ``_reads_have_effects``), so such a list behaves the same; the
        lists it does not show are skipped where reading only unlinks deleted entries.
        Single-threaded, like every driver call: the queue is quiescent."""
        if not self._fast_view:
            return hashable(self.snapshot())
        q = self.q
        node_of = _NODE_OF
        absent = self._absent
        consumers = tuple([absent if con is None else (node_of[con.state], con.credit) for con in self.cons])
        # the lists, as QueueConsumerManager.describe walks them (interested, notified, all per level,
        # then not_interested and non_acquiring); only the non-empty Interested lists are shown
        qcm = q.qcm
        levels = qcm.levels()
        interested = []
        index = self.index
        for lv in levels:
            lst = lv.interested
            find = lst._find_next
            n = find(lst.head)
            if n is not None:
                ids = []
                while n is not None:
                    ids.append(index[n.value.consumer.id])
                    n = find(n)
                interested.append((str(lv.priority), tuple(ids)))
        # Reading the other lists only matters when reading has effects someone can see: a patched or
        # subclassed reading step (the node-list mutants), or a deterministic scheduler, to which every
        # read is a scheduling point.  The plain NodeList's read, on real threads, only unlinks
        # entries already marked deleted (never the tail): no list's contents, size or later read
        # change, so it is skipped there -- about 40% of this view (profiled, bench/checker_speed.py).
        # tests/conformance/test_checker_speed.py: the same runs and verdicts as the general view.
        # Decided again only when the levels (a copy-on-write tuple) or the reading step change.
        key = (levels, NodeList._find_next)
        if self._reads_key != key:
            self._reads_key = key
            self._reads_effects = self._reads_have_effects(self._other_lists(levels))
        if self._reads_effects:
            for lst in self._other_lists(levels):
                find = lst._find_next
                n = find(lst.head)
                while n is not None:
                    n = find(n)
        interested.sort()
        ids = self.ids
        entries = q._entries
        message_of = _MESSAGE_OF
        acquired_by = self._acquired_by
        m = self._n_messages
        messages = []
        for j in range(m):
            mid = ids.get(j)
            if mid is None:
                messages.append("unarrived")
                continue
            e = entries[mid]
            if e.state is _ACQUIRED:
                name = acquired_by.get(e.owner)
                if name is None:
                    name = acquired_by[e.owner] = f"acquired by c{index[e.owner]}"
                messages.append(name)
            else:
                messages.append(message_of[e.state])
        out: list[tuple[str, Any]] = [("consumers", consumers)]
        # the other actors (issue 16), in the order of their keys
        if self.expiry:
            waiting = q._delete_waiting
            out.append(("delete_waiting", tuple([j for j in range(m) if ids.get(j) in waiting])))
        if self.n_groups:
            owners = q._group_owner
            out.append(("group_reset_owed", False))
            out.append(("groups", tuple([None if (o := owners.get(g)) is None else index[o.id] for g in range(self.n_groups)])))
        out.append(("interested", tuple(interested)))
        out.append(("messages", tuple(messages)))
        if self.reject:
            rb = []
            for j in range(m):
                mid = ids.get(j)
                by = entries[mid].rejected_by if mid is not None else None
                rb.append(tuple(sorted([index[i] for i in by])) if by else ())
            out.append(("rejected_by", tuple(rb)))
        return tuple(out)
