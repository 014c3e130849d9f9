"""The queue consumer manager (QCM): node states, the five lists, per-priority lists, guarded moves.

What it is
----------
Seed 000/002 "QueueConsumerManager internals"; upstream ``QueueConsumerManagerImpl`` and
``QueueConsumerNode``; the transition table of REFERENCE.md section 1.  The QCM keeps every consumer
of a queue in exactly one of the lists below, as seen by the queue:

=================  ====================================================================
state              list
=================  ====================================================================
``INTERESTED``     Interested[priority] -- acquiring, wants work, not yet notified
``NOTIFIED``       Notified[priority]   -- acquiring, notified, expected to pull
``NOT_INTERESTED`` NotInterested        -- flow control / no credit / backpressure
``NON_ACQUIRING``  NonAcquiring         -- browsers that want work
``REMOVED``        (none; terminal once the consumer was added)
=================  ====================================================================

plus the *All* list (one per priority level) holding every registered consumer.

Every state change is one guarded step ``move_from_to(from_states, to_state)``: under the node's
lock, if the current state is in ``from_states`` the node's current list entry is marked deleted and
a *new* entry is appended at the tail of the target list (so a consumer that returns to Interested
goes to the back: "asymptotic fairness", seed 000 "The Notified List"); otherwise nothing changes and
the call returns False.

=====================  ===============================================  ========================
call                   acquiring consumer                               browser
=====================  ===============================================  ========================
add_consumer           REMOVED -> INTERESTED if desired else NOT_INT.   -> NON_ACQUIRING / NOT_INT.
remove_consumer        leave All, then any state -> REMOVED             same
set_interest(True)     NOT_INTERESTED -> INTERESTED                     NOT_INT. -> NON_ACQUIRING
set_interest(False)    INTERESTED or NOTIFIED -> NOT_INTERESTED         NON_ACQUIRING -> NOT_INT.
set_notified(True)     INTERESTED -> NOTIFIED                           no change, True
set_notified(False)    NOTIFIED -> INTERESTED                           no change, True
=====================  ===============================================  ========================

Priorities: higher number = higher priority; ``DEFAULT_PRIORITY`` (2**31-1, upstream
Integer.MAX_VALUE) is the highest.  Interested, Notified and All exist once per priority level; the
levels are kept in a tuple sorted by descending priority; iteration walks levels high to low and
each level in append order.

Differences from upstream (deliberate; each is a fix or an O(1) improvement):

* A node keeps a reference to its ``_Level`` (upstream searches the level list on every move, an
  O(levels) step inside the node monitor).
* ``notified_count`` counts Notified entries (upstream ``getNotifiedAcquiringSize`` returned the
  number of priority *levels*: ``_notified.size()`` on the list of pairs).
* ``desired_at_higher_priority`` answers "is there an acquiring consumer of higher priority that wants
  work" in O(levels) from list sizes (upstream ``noHigherPriorityWithCredit`` walks the All list).

Concurrency argument
--------------------
* ``node.lock`` protects ``node.state`` and ``node.entry`` together, so a move is atomic: the
  deleted-mark of the old entry, the state change and the append of the new entry happen as one step
  with respect to other moves of the same node.  ``node.state`` is read without the lock by
  observers (a single atomic load; the value may be stale, never torn).
* Each ``NodeList`` protects itself (see ``node_list``); the node lock is taken *before* list locks and
  list locks are leaves, so there is no lock-order cycle.
* ``_config_lock`` serialises ``add_consumer``/``remove_consumer`` (upstream: "always in the config
  thread"), which are the only writers of ``_levels``.  ``_levels`` is copy-on-write: a new tuple is
  built and published by a single reference store, so lock-free readers always see a consistent,
  sorted tuple (stale at worst).  A level is dropped from the tuple when its All list becomes empty;
  a node keeps its ``_Level`` reference, so a concurrent move of a consumer that is being removed
  still has a list to go to (it is about to move to REMOVED anyway) -- upstream in that race finds
  no level and leaves the node in INTERESTED with no list entry.
* ``_count`` changes only under ``_config_lock``.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum
from typing import Any

from conq.impl.consumer_lists.node_list import Entry, NodeList
from conq.impl.scheduling import REAL

__all__ = ["DEFAULT_PRIORITY", "ConsumerNode", "NodeState", "QueueConsumerManager"]

DEFAULT_PRIORITY = 2**31 - 1


class NodeState(IntEnum):
    REMOVED = 0
    INTERESTED = 1
    NOT_INTERESTED = 2
    NOTIFIED = 3
    NON_ACQUIRING = 4


_REMOVED = NodeState.REMOVED
_INTERESTED = NodeState.INTERESTED
_NOT_INTERESTED = NodeState.NOT_INTERESTED
_NOTIFIED = NodeState.NOTIFIED
_NON_ACQUIRING = NodeState.NON_ACQUIRING

# from-state sets as bit masks (membership test is one shift and one and)
_M_REMOVED = 1 << _REMOVED
_M_INTERESTED = 1 << _INTERESTED
_M_NOT_INTERESTED = 1 << _NOT_INTERESTED
_M_NOTIFIED = 1 << _NOTIFIED
_M_NON_ACQUIRING = 1 << _NON_ACQUIRING
_M_INTERESTED_OR_NOTIFIED = _M_INTERESTED | _M_NOTIFIED
_M_NOT_REMOVED = _M_INTERESTED | _M_NOT_INTERESTED | _M_NOTIFIED | _M_NON_ACQUIRING


class _Level:
    """The per-priority lists of one priority level."""

    __slots__ = ("all", "interested", "notified", "priority")

    def __init__(self, sched: Any, priority: int) -> None:
        self.priority = priority
        self.all: NodeList[ConsumerNode] = NodeList(sched, f"all[{priority}]")
        self.interested: NodeList[ConsumerNode] = NodeList(sched, f"interested[{priority}]")
        self.notified: NodeList[ConsumerNode] = NodeList(sched, f"notified[{priority}]")


class ConsumerNode:
    """The persistent entity that moves between the QCM's lists; refers to its consumer."""

    __slots__ = ("all_entry", "consumer", "entry", "level", "lock", "qcm", "state")

    def __init__(self, qcm: QueueConsumerManager, consumer: Any, level: _Level) -> None:
        self.qcm = qcm
        self.consumer = consumer
        self.level = level
        self.state = _REMOVED
        self.entry: Entry[ConsumerNode] | None = None
        self.all_entry: Entry[ConsumerNode] | None = None
        self.lock = qcm._sched.lock(f"node[{consumer.id}]")

    def move_from_to(self, from_mask: int, to_state: NodeState) -> bool:
        """The guarded move (see module docstring).  True iff the move happened."""
        with self.lock:
            if not (1 << self.state) & from_mask:
                return False
            entry = self.entry
            if entry is not None:
                entry.owner.remove(entry)  # type: ignore[union-attr]
            self.state = to_state
            self.entry = self.qcm._list_for(self, to_state)
            return True

    def __repr__(self) -> str:
        return f"ConsumerNode({self.consumer.id!r}, {self.state.name}, p={self.level.priority})"


class QueueConsumerManager:
    """See the module docstring.  Consumers must have ``id``, ``priority`` and ``acquires``
    attributes (immutable) and a ``node`` attribute the manager sets."""

    def __init__(self, sched: Any = REAL) -> None:
        self._sched = sched
        self._config_lock = sched.lock("qcm.config")
        self._levels: tuple[_Level, ...] = ()
        self.not_interested: NodeList[ConsumerNode] = NodeList(sched, "not_interested")
        self.non_acquiring: NodeList[ConsumerNode] = NodeList(sched, "non_acquiring")
        self._count = 0

    # -- placement -----------------------------------------------------------------------------------
    def _list_for(self, node: ConsumerNode, state: NodeState) -> Entry[ConsumerNode] | None:
        if state is _INTERESTED:
            return node.level.interested.append(node)
        if state is _NOTIFIED:
            return node.level.notified.append(node)
        if state is _NOT_INTERESTED:
            return self.not_interested.append(node)
        if state is _NON_ACQUIRING:
            return self.non_acquiring.append(node)
        return None  # REMOVED: in no list

    # -- configuration (serialised) ------------------------------------------------------------------
    def add_consumer(self, consumer: Any, notify_work_desired: bool) -> ConsumerNode:
        """Register ``consumer``; it starts INTERESTED/NON_ACQUIRING if it wants work, else NOT_INTERESTED."""
        with self._config_lock:
            if getattr(consumer, "node", None) is not None:
                raise ValueError(f"consumer {consumer.id!r} is already registered with a queue")
            priority = consumer.priority
            levels = self._levels
            level = next((lv for lv in levels if lv.priority == priority), None)
            if level is None:
                level = _Level(self._sched, priority)
                # copy-on-write, kept sorted by descending priority, published by one store
                self._levels = tuple(sorted((*levels, level), key=lambda lv: -lv.priority))
            node = ConsumerNode(self, consumer, level)
            consumer.node = node
            node.all_entry = level.all.append(node)
            if notify_work_desired:
                target = _INTERESTED if consumer.acquires else _NON_ACQUIRING
            else:
                target = _NOT_INTERESTED
            node.move_from_to(_M_REMOVED, target)
            self._count += 1
            return node

    def remove_consumer(self, consumer: Any) -> NodeState | None:
        """Unregister; returns the state the consumer left (None if it was already removed)."""
        node: ConsumerNode | None = getattr(consumer, "node", None)
        if node is None:
            raise ValueError(f"consumer {consumer.id!r} was never added to this manager")
        with self._config_lock:
            level = node.level
            if node.all_entry is not None:
                level.all.remove(node.all_entry)
                if level.all.is_empty():
                    self._levels = tuple(lv for lv in self._levels if lv is not level)
            with node.lock:
                previous = node.state
                if previous is _REMOVED:
                    return None
                if node.entry is not None:
                    node.entry.owner.remove(node.entry)  # type: ignore[union-attr]
                node.entry = None
                node.state = _REMOVED
            self._count -= 1
            return previous

    # -- state changes (any thread) ------------------------------------------------------------------
    def set_interest(self, consumer: Any, interested: bool) -> bool:
        node: ConsumerNode = consumer.node
        if interested:
            return node.move_from_to(_M_NOT_INTERESTED, _INTERESTED if consumer.acquires else _NON_ACQUIRING)
        if consumer.acquires:
            return node.move_from_to(_M_INTERESTED_OR_NOTIFIED, _NOT_INTERESTED)
        return node.move_from_to(_M_NON_ACQUIRING, _NOT_INTERESTED)

    def set_notified(self, consumer: Any, notified: bool) -> bool:
        if not consumer.acquires:
            return True
        node: ConsumerNode = consumer.node
        if notified:
            return node.move_from_to(_M_INTERESTED, _NOTIFIED)
        return node.move_from_to(_M_NOTIFIED, _INTERESTED)

    # -- reading (any thread, weakly consistent) ------------------------------------------------------
    def interested(self) -> Iterator[Any]:
        """Interested consumers: priority levels high to low, each level in append order."""
        for level in self._levels:
            for node in level.interested:
                yield node.consumer

    def all(self) -> Iterator[Any]:
        for level in self._levels:
            for node in level.all:
                yield node.consumer

    def non_acquiring_consumers(self) -> Iterator[Any]:
        for node in self.non_acquiring:
            yield node.consumer

    def highest_notified_priority(self) -> int | None:
        """Priority of the highest level with a Notified consumer, or None."""
        for level in self._levels:
            if level.notified.size > 0:
                return level.priority
        return None

    def desired_at_higher_priority(self, priority: int) -> bool:
        """Is there an acquiring consumer of priority > ``priority`` that wants work?

        Acquiring consumers that want work are exactly those INTERESTED or NOTIFIED, so this reads the
        sizes of those lists of the higher levels: O(number of levels above ``priority``).
        """
        for level in self._levels:
            if level.priority <= priority:
                return False
            if level.interested.size or level.notified.size:
                return True
        return False

    @property
    def count(self) -> int:
        return self._count

    @property
    def notified_count(self) -> int:
        return sum(level.notified.size for level in self._levels)

    def levels(self) -> tuple[_Level, ...]:
        return self._levels

    def describe(self) -> dict[str, Any]:
        """Order of each per-priority list (JSON-serialisable; for snapshots)."""
        return {
            "interested": [[lv.priority, [n.consumer.id for n in lv.interested]] for lv in self._levels],
            "notified": [[lv.priority, [n.consumer.id for n in lv.notified]] for lv in self._levels],
            "all": [[lv.priority, [n.consumer.id for n in lv.all]] for lv in self._levels],
            "not_interested": [n.consumer.id for n in self.not_interested],
            "non_acquiring": [n.consumer.id for n in self.non_acquiring],
        }
