"""The node list: thread-safe singly linked list with O(1) append, O(1) delete-by-entry and O(1) size.

What it is
----------
The data structure under every list of the consumer manager (seed 000/002 "QueueConsumerNodeList";
upstream ``QueueConsumerNodeList`` and ``QueueConsumerNodeListEntry``).  ``append(value)`` returns
the ``Entry`` that holds the value; ``remove(entry)`` deletes it in O(1) by *marking* it deleted; the
physical unlink happens lazily, during later traversals, or during a scavenge.  Iterators are weakly
consistent.

Structure
---------
``head`` is a sentinel entry that is born deleted; ``tail`` is the last appended entry.  Every
entry's ``next`` points to an entry appended later (or is ``None`` for the last one).

Operations and the concurrency argument
---------------------------------------
The argument uses only two facts about the runtime, both true on CPython with or without the GIL
(PEP 703 keeps single attribute loads and stores of object references atomic): a single attribute
load or store is atomic (no torn references), and a lock release/acquire pair is a happens-before
edge.  No compound operation is assumed atomic.

* ``append`` -- under the list lock (the only writer of ``tail``, of ``size`` increments and of any
  ``next`` that is ``None``): ``tail.next = new; tail = new; size += 1``.  In a lock-free port this is
  the CAS loop on ``tail``; here the lock *is* the atomic step.  O(1).
* ``remove(entry)`` -- under the list lock: if not yet deleted, set ``deleted`` (one-shot, never
  reset), ``size -= 1``, count the deletion.  Returns whether this call deleted it, so ``size`` is
  decremented exactly once however many threads race.  O(1).  When the deletions since the last
  scavenge exceed ``max(scavenge_threshold, size)`` the remover scavenges (walks the list unlinking
  deleted entries) *after* releasing the lock.  The ``max(.., size)`` is a deliberate change from
  upstream (fixed threshold 100): a walk costs O(size), and charging it only after at least ``size``
  deletions keeps ``remove`` amortised O(1) at 10,000 consumers.
* Traversal (iterators and scavenge) takes no lock.  To step from ``prev`` it reads ``n = prev.next``;
  while ``n`` is deleted and ``n.next`` is not ``None`` it *unlinks* ``n`` by the plain store
  ``prev.next = n.next`` and re-reads.  A deleted entry whose ``next`` is ``None`` (the physical tail)
  is never unlinked: a concurrent ``append`` may be writing its ``next`` right now, and unlinking it
  would lose that append (upstream rule, seed 000 "special care ... removing elements from the tail").

Why the unlocked unlink store is safe (the invariant J): *every entry strictly between ``a`` and
``a.next`` in append order is deleted*.  ``append`` preserves J (nothing lies between the old tail and
the new entry).  An unlink writes ``prev.next = m`` only after reading ``n`` from ``prev.next`` and
``m`` from ``n.next`` with ``n`` deleted; by J at those two reads everything strictly between ``prev``
and ``m`` is deleted, and deletion is permanent, so J still holds after the store -- even when the
store is stale (another traverser already moved ``prev.next`` further; then this store moves it back
to a deleted-only prefix, which J allows).  An unlink never stores ``None`` and never touches a
``next`` that is ``None``, so it cannot race with ``append``'s store.  From J: following ``next`` from
any entry reaches every non-deleted entry appended after it, in append order.

Iterator guarantee (weak consistency), checked by ``tests/impl/consumer_lists/test_node_list_linearizability.py``:
  (a) every entry appended before the iteration starts and not removed before it ends is yielded
      exactly once;
  (b) no entry is yielded twice, and entries are yielded in append order;
  (c) an entry removed before the iteration starts is never yielded;
  (d) an entry appended or removed during the iteration may or may not be yielded.
(a)-(b) follow from J and from ``next`` only pointing forward; (c) from ``deleted`` being checked
when the iterator steps onto an entry.

``size`` is a single atomic load of a counter that only changes under the lock, so ``size``,
``append`` and ``remove`` are linearizable (linearization points: the lock-protected updates).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from conq.impl.scheduling import REAL

__all__ = ["Entry", "NodeList"]

T = TypeVar("T")

DEFAULT_SCAVENGE_THRESHOLD = 100  # upstream's QUEUE_SCAVANGE_COUNT default


class Entry(Generic[T]):
    """One list cell.  ``value`` is immutable after construction; ``next``/``deleted`` see module doc."""

    __slots__ = ("deleted", "next", "owner", "value")

    def __init__(self, owner: NodeList[T] | None, value: T | None, deleted: bool = False) -> None:
        self.owner = owner
        self.value = value
        self.next: Entry[T] | None = None
        self.deleted = deleted

    def __repr__(self) -> str:
        return f"Entry({self.value!r}{', deleted' if self.deleted else ''})"


class NodeList(Generic[T]):
    """Thread-safe append-only-at-tail list with mark-deleted removal.  See the module docstring."""

    __slots__ = ("_deletes", "_lock", "_point", "_scavenge_threshold", "head", "name", "size", "tail")

    def __init__(self, sched: Any = REAL, name: str = "list", scavenge_threshold: int = DEFAULT_SCAVENGE_THRESHOLD):
        if scavenge_threshold < 1:
            raise ValueError(f"NodeList {name!r}: scavenge_threshold must be >= 1, got {scavenge_threshold}")
        self.name = name
        self._lock = sched.lock(f"{name}.lock")
        self._point = sched.point  # bound once: a no-op function on real threads
        self.head: Entry[T] = Entry(self, None, deleted=True)  # sentinel, born deleted
        self.tail: Entry[T] = self.head
        self.size = 0
        self._deletes = 0
        self._scavenge_threshold = scavenge_threshold

    # -- mutation ------------------------------------------------------------------------------------
    def append(self, value: T) -> Entry[T]:
        """Append ``value`` at the tail; O(1).  Returns the entry (the handle for ``remove``)."""
        entry: Entry[T] = Entry(self, value)  # fully built before it is published below
        with self._lock:
            self.tail.next = entry
            self.tail = entry
            self.size += 1
        return entry

    def remove(self, entry: Entry[T]) -> bool:
        """Mark ``entry`` deleted; O(1) amortised.  True iff this call deleted it."""
        if entry.owner is not self:
            raise ValueError(f"NodeList {self.name!r}: remove() of an entry of another list ({entry!r})")
        with self._lock:
            if entry.deleted:
                return False
            entry.deleted = True
            self.size -= 1
            self._deletes += 1
            scavenge = self._deletes > self._scavenge_threshold and self._deletes > self.size
            if scavenge:
                self._deletes = 0
        if scavenge:
            self.scavenge()
        return True

    def scavenge(self) -> None:
        """Walk the whole list, unlinking deleted entries (never the physical tail)."""
        node: Entry[T] | None = self.head
        while node is not None:
            node = self._find_next(node)

    # -- reading -------------------------------------------------------------------------------------
    def _find_next(self, prev: Entry[T]) -> Entry[T] | None:
        """First non-deleted entry after ``prev``, unlinking deleted non-tail entries on the way."""
        point = self._point
        point("nodelist.read_next")
        n = prev.next
        while n is not None and n.deleted:
            after = n.next
            if after is None:
                return None  # n is the physical tail: never unlinked (a concurrent append may follow it)
            point("nodelist.unlink")
            prev.next = after  # safe without CAS, see invariant J in the module docstring
            n = prev.next
        return n

    def __iter__(self) -> Iterator[T]:
        """Weakly consistent iterator over the values (guarantees in the module docstring)."""
        node: Entry[T] | None = self.head
        find_next = self._find_next
        while True:
            node = find_next(node)  # type: ignore[arg-type]
            if node is None:
                return
            yield node.value  # type: ignore[misc]

    def entries(self) -> Iterator[Entry[T]]:
        """Weakly consistent iterator over the live entries."""
        node: Entry[T] | None = self.head
        while True:
            node = self._find_next(node)  # type: ignore[arg-type]
            if node is None:
                return
            yield node

    def first(self) -> T | None:
        """The first live value, or None; O(1) amortised (deleted prefix is unlinked as it is passed)."""
        n = self._find_next(self.head)
        return None if n is None else n.value

    def __len__(self) -> int:
        return self.size

    def is_empty(self) -> bool:
        return self.size == 0

    def physical_length(self) -> int:
        """Entries physically linked after the head, deleted or not (for tests of the unlinking)."""
        count = 0
        n = self.head.next
        while n is not None:
            count += 1
            n = n.next
        return count

    def __repr__(self) -> str:
        return f"NodeList({self.name!r}, size={self.size})"
