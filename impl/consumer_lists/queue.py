"""The queue: message entries, the notification rules, ``deliver_single_message``, credit, browsers.

What it is
----------
The pull model of seed 000/002 ("Responsibilities", "Interfaces Between Consumers and Queues") with
the rules of REFERENCE.md section 1, as upstream ``AbstractQueue`` (``notifyConsumers``,
``notifyOtherConsumers``, ``deliverSingleMessage``, ``attemptDelivery``, ``setNotifyWorkDesired``,
``notifyConsumer``, ``requeue``) and ``QueueConsumerImpl`` implement them:

* A queue notifies at least one interested consumer when there is work; a consumer notified of work
  pulls until it is no longer interested or the queue returns nothing.
* ``enqueue`` (any thread): the entry is linked, then every interested browser is notified and, walking
  Interested high priority first, at most one acquiring consumer: the first that moves
  INTERESTED -> NOTIFIED; the walk stops early when the message is no longer available or when an
  acquiring consumer of higher priority wants work (it would take the message).
* A consumer is notified only if it has an available message it may take and no higher-priority
  acquiring consumer wants work (upstream ``consumerHasAvailableMessages``/``noHigherPriorityWithCredit``).
* ``deliver_single_message(c)`` first moves c NOTIFIED -> INTERESTED, *then* looks for a message.  On
  success c moves back to NOTIFIED (keep pulling).  On nothing delivered while the queue still has
  available messages, one *other* interested consumer is notified.  Moving back to INTERESTED before
  looking is what prevents the lost wake-up: a message enqueued after the look is enqueued after c is
  in Interested, so that enqueue's walk finds c.
* ``set_notify_work_desired(c, True)`` moves c into Interested/NonAcquiring and notifies c;
  ``(c, False)`` moves it to NotInterested and notifies one Interested consumer, unless a NOTIFIED
  consumer of higher priority exists.
* ``release``/``unhold`` make a message available again: the acquiring consumers' read position is
  moved back to it and one acquiring consumer is notified as for a new message (upstream notifies
  every consumer whose pointer moved; one is enough for the "at least one" rule and avoids spurious
  wake-ups).  A browser is never shown a message twice (upstream ``seesRequeues`` is false for
  browsers: "we don't make browsers send the same stuff twice"), but a browser that passed a message
  while it was HELD or ACQUIRED never saw it, so it is offered the message (and notified) once it
  becomes available again: browsers see every message that is ever available while they browse.
* ``remove_consumer`` releases what the consumer had acquired and, if it was Interested or Notified,
  notifies as for a loss of interest (upstream only closes it: a NOTIFIED consumer removed before it
  pulled would strand the message it was notified for).  The release is atomic with respect to
  concurrent settles and acquisitions (see the method): after it returns no message is held by the
  removed consumer, and a late settle by it is refused with a ``QueueError``.  ``add_consumer`` notifies a consumer that
  wants work ("Consumer becomes Interested"; upstream does not, which can strand a message that
  arrived before the only consumer).
* Walks over Interested stop at the first consumer that has no work it may take: acquiring
  consumers all see the same messages, so no later (equal or lower priority) consumer can have any.
  Upstream keeps walking, O(consumers) per call on an empty queue; here every notification rule is
  O(1) amortised in the number of consumers (O(priority levels) for the priority checks).
* Credit: ``deliver`` allocates one credit before acquiring and restores it when acquisition fails;
  with credit exhausted the consumer's notify-work-desired turns false (seed: "Credit" is a reason for
  ``setNotifyWorkDesired``), and ``add_credit`` turns it back on.
* Failed sends (the delivery chain's failure policy, ``delivery``): ``delivery_failed(m, c)`` counts a
  failed delivery of ``m`` and releases it if ``c`` still holds it -- or, at ``max_delivery_failures``
  (upstream ``maximumDeliveryAttempts``), dead-letters it (ACQUIRED -> DELETED, ``dead_lettered``);
  ``release_owned(m, c)`` releases ``m`` only if ``c`` still holds it.  Neither raises when ``c`` no
  longer holds ``m`` (settled, released, handed back by removal): one lock section checks and acts.

Message states: AVAILABLE, ACQUIRED (owner = consumer id), HELD (not yet deliverable), DELETED.
Message ids are assigned by ``enqueue``: 1, 2, 3, ... in queue order.  Consumer priorities: higher
number = higher priority, default ``DEFAULT_PRIORITY`` (the highest).

Read positions.  All acquiring consumers see the same messages (no selectors or message groups
here), so they share one read position: a cursor (the last entry known to be non-available) plus a
min-heap of released/unheld entries behind the cursor.  The next available message for any acquiring
consumer is the smaller of the heap top and the first AVAILABLE entry after the cursor; both are
advanced lazily past non-available entries, so finding the next message is amortised O(1) however
many consumers there are (upstream keeps one pointer per consumer and each walks past every message
acquired by the others: O(consumers) per message).  Browsers keep a per-consumer pointer.

Observation API (for the conformance checker)
---------------------------------------------
* ``snapshot()`` -> JSON-serialisable dict::

    {"consumers": {"<id>": {"state": "INTERESTED", "priority": int, "acquiring": bool,
                            "credit": int | None, "flow_active": bool, "notify_work_desired": bool,
                            "closed": bool, "acquired": [msg ids]}},
     "messages": {"<id>": {"state": "available" | "acquired" | "held" | "deleted",
                           "owner": consumer id | None}},
     "interested": [[priority, [consumer ids in list order]], ...],   # high priority first
     "notified": [[priority, [ids]], ...], "all": [[priority, [ids]], ...],
     "not_interested": [ids], "non_acquiring": [ids],
     "available_count": int,
     "notifications": [consumer ids, in the order notify_work was called]}

  Keys of "consumers"/"messages" are ``str(id)``; values keep the ids' own types.
* Operations return what happened: ``enqueue`` -> message id; ``deliver_single_message`` -> message id
  or None; ``set_notify_work_desired`` -> whether the consumer's list changed; ``release``/``settle``/
  ``hold``/``unhold``/``delete_message`` -> True, or raise ``QueueError`` naming the message and its
  state when the transition is not allowed; ``remove_consumer`` -> the state the consumer left;
  ``release_owned`` -> whether it released; ``delivery_failed`` -> (``"released"`` |
  ``"dead-lettered"`` | ``"not-held"``, the message's failure count, its payload).
* ``notifications`` (when ``record_events``) is the notification event log.

Concurrency argument
--------------------
Locks, in the only order they are ever nested (outer first):

1. ``QueueConsumer._lock`` -- the consumer's credit, flow flag, closed flag and ``desired``.  Held
   while calling ``set_notify_work_desired`` so two threads changing the same consumer's wish cannot
   deliver their calls to the QCM in the opposite order of their decisions.  No code path holds two
   consumers' locks.
2. ``QueueConsumerManager`` node/list locks (see ``consumer_manager``) -- leaves except node -> list.
3. ``Queue._lock`` -- protects the message list links, every message state/owner, the available
   count, the acquirers' cursor and requeue heap, every browser's pointer/re-offer/skipped-held
   bookkeeping, each consumer's ``acquired`` set and ``_first``.  It stands for the per-entry CAS of a
   lock-free port; every critical section is O(1) amortised (``remove_consumer``'s: O(messages the
   consumer holds), one release each) and calls nothing outside this module.  Invariant, kept by
   every section that changes a message's state or owner: ``m in c._acquired`` iff ``m`` is ACQUIRED
   with owner ``c`` -- so "does ``c`` still hold ``m``" is one lookup under the lock.  An acquisition
   re-reads ``c.closed`` inside its section; ``remove_consumer`` sets it before its own section, so
   no acquisition is serialised after a removal's release (``remove_consumer`` docstring).
4. Delivery-chain locks (``delivery``) and ``_log_lock`` -- leaves.

``Queue._lock`` is never held while calling out (credit, QCM moves, notify_work), so the order above
has no cycle.  Lock-free reads: ``entry.state`` in the notify walk and ``_available`` in the
"messages remain" tests are single atomic loads used as hints; a stale value only causes a spurious
or a skipped *extra* notification, never a lost one, because the lost-wake-up argument above rests on
the QCM moves (node locks) and on the enqueue linking its entry before it walks Interested.

Interleaving points (``conq.impl.scheduling``): besides every lock acquire (and release, when the
deterministic scheduler has ``release_points``), the model's thread steps are points under a
deterministic scheduler -- a pull's ``pull.unnotify``, ``pull.find``, ``pull.acquire``,
``pull.deliver``/``pull.none``, the second half of set-notify-work-desired (``desired.queue``, after the
consumer's flag) and a publisher's notification after linking or making a message available again
(``publish.notify``); on real threads one test of ``_det`` skips them.

``deliver_single_message`` for one consumer must not run concurrently with itself (upstream: a
consumer is only pulled by its connection's IO thread); a per-consumer try-lock turns a violation into
a ``QueueError`` instead of silent corruption.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from enum import IntEnum
from typing import Any

from conq.impl.consumer_lists.consumer_manager import DEFAULT_PRIORITY, NodeState, QueueConsumerManager
from conq.impl.scheduling import REAL

__all__ = ["DEFAULT_MAX_DELIVERY_FAILURES", "DEFAULT_PRIORITY", "MessageEntry", "MessageState", "Queue",
           "QueueConsumer", "QueueError"]

#: failed deliveries after which a message is dead-lettered (``Queue.delivery_failed``).  Upstream's
#: ``maximumDeliveryAttempts`` defaults to 0 (unbounded): a message whose delivery always fails is then
#: redelivered forever, and -- being the oldest available message -- is what every pull returns first,
#: so a single consumer never gets past it.  Bounded by default here ("a failing callback never stalls
#: delivery"); ``max_delivery_failures=None`` restores upstream's behaviour.
DEFAULT_MAX_DELIVERY_FAILURES = 10


class QueueError(RuntimeError):
    """An operation that is not allowed in the current state (message id and state in the text)."""


class MessageState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    HELD = 2
    DELETED = 3


_AVAILABLE = MessageState.AVAILABLE
_ACQUIRED = MessageState.ACQUIRED
_HELD = MessageState.HELD
_DELETED = MessageState.DELETED


class MessageEntry:
    __slots__ = ("failures", "id", "next", "owner", "payload", "state")

    def __init__(self, msg_id: int, state: MessageState, payload: Any = None) -> None:
        self.id = msg_id
        self.state = state
        self.payload = payload
        self.owner: Hashable | None = None
        self.next: MessageEntry | None = None
        self.failures = 0  # failed deliveries (``Queue.delivery_failed``), guarded by Queue._lock

    def __repr__(self) -> str:
        return f"MessageEntry({self.id}, {self.state.name}, owner={self.owner!r})"


def _noop_listener(consumer: QueueConsumer) -> None:  # noqa: ARG001
    """Default notify_work listener when no delivery chain is attached (step-by-step use)."""


class QueueConsumer:
    """The queue-facing consumer (upstream ``QueueConsumerImpl``): identity, priority, acquiring or
    browsing, credit and flow control, and the hook ``listener`` called by ``notify_work``."""

    __slots__ = (
        "_acquired",
        "_deliver_guard",
        "_last_seen",
        "_lock",
        "_reoffer",
        "_skipped_acquired",
        "_skipped_held",
        "acquires",
        "closed",
        "credit",
        "delivered",
        "desired",
        "flow_active",
        "id",
        "listener",
        "node",
        "notified_count",
        "priority",
        "queue",
    )

    def __init__(self, queue: Queue, consumer_id: Hashable, priority: int, acquires: bool,
                 credit: int | None, flow_active: bool) -> None:
        sched = queue._sched
        self.queue = queue
        self.id = consumer_id
        self.priority = priority
        self.acquires = acquires
        self.credit = credit
        self.flow_active = flow_active
        self.closed = False
        self.desired = self._compute_desired()
        self.node: Any = None
        self.listener = _noop_listener
        self.notified_count = 0
        self.delivered = 0
        self._lock = sched.lock(f"consumer[{consumer_id}]")
        self._deliver_guard = sched.lock(f"deliver[{consumer_id}]")
        self._acquired: set[int] = set()  # guarded by Queue._lock
        # browser read state, guarded by Queue._lock
        self._last_seen: MessageEntry | None = None
        self._reoffer: dict[int, MessageEntry] = {}
        self._skipped_held: dict[int, MessageEntry] = {}
        self._skipped_acquired: dict[int, MessageEntry] = {}

    # -- notify_work (called by the queue) ------------------------------------------------------------
    def notify_work(self) -> None:
        """Queue -> consumer: there is potentially work; the listener (the target) takes it from here."""
        self.notified_count += 1  # statistic only; a lost increment under free threading is harmless
        self.listener(self)

    # -- credit and flow (client side, any thread) ------------------------------------------------------
    def _compute_desired(self) -> bool:
        return (not self.closed) and self.flow_active and (self.credit is None or self.credit > 0)

    def _update_desired_locked(self) -> None:
        desired = self._compute_desired()
        if desired != self.desired:
            self.desired = desired
            if self.node is not None and not self.closed:
                # model: setNotifyWorkDesired's two halves (the target's flag, then the queue)
                if self.queue._det:
                    self.queue._point("desired.queue", self.id)
                self.queue.set_notify_work_desired(self, desired)

    def add_credit(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"consumer {self.id!r}: add_credit({n}) must not be negative")
        with self._lock:
            if self.credit is None:
                raise QueueError(f"consumer {self.id!r} has unlimited credit; use set_credit to limit it")
            self.credit += n
            self._update_desired_locked()
            schedule = n > 0 and self.node is not None and not self.closed
        if schedule:
            # A credit grant is an external state change of the target (upstream
            # AbstractConsumerTarget.externalStateChange): its IO thread is scheduled to look for
            # work, since a consumer that ran out of credit mid-pull gave up its wake-up.
            self.listener(self)

    def set_credit(self, credit: int | None) -> None:
        if credit is not None and credit < 0:
            raise ValueError(f"consumer {self.id!r}: credit must be None or >= 0, got {credit}")
        with self._lock:
            self.credit = credit
            self._update_desired_locked()

    def set_flow(self, active: bool) -> None:
        """Flow control / TCP backpressure: False suspends the consumer, True resumes it."""
        with self._lock:
            self.flow_active = active
            self._update_desired_locked()

    def _allocate_credit(self) -> bool:
        """Take one credit for a delivery about to be attempted.  The loss of interest that an
        exhausted credit means is told to the queue only once the attempt is settled
        (``_settle_credit``): told now, the queue would hand the wake-up to another consumer for the
        very message this one is about to acquire (a spurious wake-up, found by conformance)."""
        with self._lock:
            if self.credit is None:
                return True
            if self.credit <= 0:
                return False
            self.credit -= 1
            return True

    def _settle_credit(self) -> None:
        """After a delivery attempt: tell the queue if the credit ran out."""
        with self._lock:
            self._update_desired_locked()

    def _restore_credit(self) -> None:
        with self._lock:
            if self.credit is not None:
                self.credit += 1
                self._update_desired_locked()

    @property
    def state(self) -> NodeState:
        return NodeState.REMOVED if self.node is None else self.node.state

    def acquired_ids(self) -> list[int]:
        with self.queue._lock:
            return sorted(self._acquired)

    def __repr__(self) -> str:
        return f"QueueConsumer({self.id!r}, p={self.priority}, {'acq' if self.acquires else 'browse'})"


class Queue:
    """A queue with the consumer manager, the notification rules and pull delivery.

    ``record_events``: keep the notification log (``notifications``).  ``retain_deleted``: keep
    deleted messages addressable (for ``snapshot``); turn off for long runs so memory stays bounded.
    ``max_delivery_failures``: a message whose delivery failed that many times is dead-lettered
    (``delivery_failed``); None: never (upstream's default ``maximumDeliveryAttempts`` = 0).
    """

    def __init__(self, sched: Any = REAL, name: str = "queue", *, record_events: bool = True,
                 retain_deleted: bool = True,
                 max_delivery_failures: int | None = DEFAULT_MAX_DELIVERY_FAILURES) -> None:
        if max_delivery_failures is not None and max_delivery_failures < 1:
            raise ValueError(f"queue {name!r}: max_delivery_failures must be None or >= 1, got {max_delivery_failures}")
        self._sched = sched
        self.name = name
        self.qcm = QueueConsumerManager(sched)
        self._lock = sched.lock(f"{name}.lock")
        self._log_lock = sched.lock(f"{name}.log")
        self._point = sched.point
        #: the model's thread steps are interleaving points (``_point``) only under a deterministic
        #: scheduler; on real threads the hot path skips them with one test of this flag
        self._det = bool(getattr(sched, "deterministic", False))
        sentinel = MessageEntry(0, _DELETED)
        self._tail = sentinel
        self._first = sentinel  # last entry of the deleted prefix: where a new browser starts
        self._cursor = sentinel  # acquirers: everything up to here is known non-available
        self._requeued: list[tuple[int, MessageEntry]] = []  # heap of available entries <= cursor
        self._requeued_ids: set[int] = set()
        self._entries: dict[int, MessageEntry] = {}
        self._next_id = 1
        self._available = 0
        self._consumers: dict[Hashable, QueueConsumer] = {}
        self._browsers: dict[Hashable, QueueConsumer] = {}
        self.record_events = record_events
        self.retain_deleted = retain_deleted
        self.max_delivery_failures = max_delivery_failures
        self.dead_lettered = 0  # messages removed by delivery_failed after max_delivery_failures
        self.notifications: list[Hashable] = []

    # ================================================================================================
    # consumers (configuration)
    # ================================================================================================
    def add_consumer(self, consumer_id: Hashable, *, priority: int = DEFAULT_PRIORITY, acquires: bool = True,
                     credit: int | None = None, flow_active: bool = True,
                     listener: Any = None) -> QueueConsumer:
        """Create and register a consumer (``listener(consumer)`` is called by its ``notify_work``;
        it is set before registration so the first notification is not missed); if it wants work it is notified (rule: "Consumer becomes
        Interested").  Upstream does not notify on add, which can leave an already available message
        waiting when the new consumer is the only one."""
        if not isinstance(priority, int):
            raise TypeError(f"consumer {consumer_id!r}: priority must be an int, got {priority!r}")
        if credit is not None and credit < 0:
            raise ValueError(f"consumer {consumer_id!r}: credit must be None or >= 0, got {credit}")
        c = QueueConsumer(self, consumer_id, priority, acquires, credit, flow_active)
        if listener is not None:
            c.listener = listener
        with self._lock:
            if consumer_id in self._consumers:
                raise QueueError(f"queue {self.name!r}: consumer id {consumer_id!r} is already in use")
            self._consumers[consumer_id] = c
            if not acquires:
                c._last_seen = self._first
                self._browsers[consumer_id] = c
        with c._lock:
            self.qcm.add_consumer(c, c.desired)
            if c.desired:
                self._notify_consumer(c)
        return c

    def consumer(self, consumer_id: Hashable) -> QueueConsumer:
        try:
            return self._consumers[consumer_id]
        except KeyError:
            raise QueueError(f"queue {self.name!r}: no consumer {consumer_id!r}") from None

    def remove_consumer(self, consumer: QueueConsumer, *, release_acquired: bool = True) -> str | None:
        """Unregister ``consumer``; its acquired messages are released (unless told otherwise).
        If it was Interested or Notified, one other consumer is notified as when a consumer loses
        interest (upstream only closes the consumer, which can strand a message a NOTIFIED consumer
        was expected to pull).  Returns the name of the state it left, or None if already removed.

        Atomic with respect to concurrent settles, releases and acquisitions (issue 13, item 6):

        1. ``closed`` is set (under the consumer's lock) before anything else, then the QCM moves
           the consumer to REMOVED: no later move (notification) of it succeeds, and its IO thread
           pulls nothing more (``deliver_single_message`` checks ``closed``; see 3 for a pull
           already past that check).
        2. One ``Queue._lock`` critical section releases *every* message the consumer holds at that
           moment.  Invariant (every writer holds ``Queue._lock``): ``m in c._acquired`` iff message
           ``m`` is ACQUIRED with owner ``c``.  So a settle or release serialised before the section
           already took ``m`` out of ``_acquired`` and the section leaves it alone; one serialised
           after it finds ``m`` AVAILABLE again (or re-acquired by another consumer) and gets a
           ``QueueError`` -- the settle arrived after the consumer was closed, the message was
           handed back (upstream likewise: an accept only dequeues an entry that
           ``makeAcquisitionUnstealable(consumer)`` finds still acquired by that consumer).
           Nothing is released twice and nothing in between can make the removal fail half-way.
        3. An acquisition re-reads ``closed`` inside its own ``Queue._lock`` section
           (``_attempt_delivery``); ``closed`` was written before step 2 took the lock, so an
           acquisition serialised after step 2 sees it and is refused, and one serialised before is
           released by step 2: no message is left owned by a removed consumer.
        4. The notifications (released messages, hand-over of the consumer's wake-up) run after the
           section, outside every lock, as for ``release``; they cannot fail on message state.
        """
        with consumer._lock:
            consumer.closed = True
            consumer.desired = False
            previous = self.qcm.remove_consumer(consumer)
        if previous is None:
            return None
        released: list[tuple[MessageEntry, list[QueueConsumer]]] = []
        with self._lock:
            self._browsers.pop(consumer.id, None)
            if release_acquired:
                for msg_id in sorted(consumer._acquired):
                    entry = self._entries[msg_id]  # ACQUIRED by consumer (invariant), so not deleted
                    released.append((entry, self._release_locked(entry, consumer)))
        for entry, unseen in released:
            if self._det:
                self._point("publish.notify", entry.id)
            self._notify_released(entry, unseen)
        if consumer.acquires and previous in (NodeState.INTERESTED, NodeState.NOTIFIED):
            self._notify_after_loss_of_interest()
        return previous.name

    # ================================================================================================
    # messages (publishing side: any thread)
    # ================================================================================================
    def enqueue(self, payload: Any = None, *, held: bool = False) -> int:
        """Append a message; returns its id.  ``held`` messages are not deliverable until ``unhold``."""
        with self._lock:
            msg_id = self._next_id
            self._next_id = msg_id + 1
            entry = MessageEntry(msg_id, _HELD if held else _AVAILABLE, payload)
            self._entries[msg_id] = entry
            self._tail.next = entry
            self._tail = entry
            if not held:
                self._available += 1
        if not held:
            if self._det:  # model: notifyConsumers is a step of its own
                self._point("publish.notify", msg_id)
            self._notify_consumers(entry)
        return msg_id

    def _entry(self, msg_id: int) -> MessageEntry:
        entry = self._entries.get(msg_id)
        if entry is None:
            if 0 < msg_id < self._next_id:
                raise QueueError(f"queue {self.name!r}: message {msg_id} was deleted")
            raise QueueError(f"queue {self.name!r}: no message {msg_id}")
        return entry

    def release(self, msg_id: int, consumer: QueueConsumer | None = None) -> bool:
        """ACQUIRED -> AVAILABLE (reject/release/requeue); if ``consumer`` is given it must be the owner."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _ACQUIRED:
                raise QueueError(f"release of message {msg_id}: it is {entry.state.name}, not ACQUIRED")
            owner = self._consumers.get(entry.owner)  # type: ignore[arg-type]
            if consumer is not None and consumer is not owner:
                raise QueueError(f"release of message {msg_id} by {consumer.id!r}: it is owned by {entry.owner!r}")
            unseen = self._release_locked(entry, owner)
        if self._det:
            self._point("publish.notify", msg_id)
        self._notify_released(entry, unseen)
        return True

    def release_owned(self, msg_id: int, consumer: QueueConsumer) -> bool:
        """Release ``msg_id`` if ``consumer`` still holds it (ACQUIRED by ``consumer`` -> AVAILABLE,
        notified as ``release``) and return True; otherwise -- settled, released, re-acquired by
        another consumer, or handed back by ``remove_consumer`` -- change nothing and return False.
        The check and the release are one ``Queue._lock`` section, so this never races with a
        concurrent settle or removal (the delivery chain's policy for a failed send)."""
        with self._lock:
            entry = self._entries.get(msg_id)
            if entry is None or msg_id not in consumer._acquired:  # invariant: ACQUIRED by consumer
                return False
            unseen = self._release_locked(entry, consumer)
        self._notify_released(entry, unseen)
        return True

    def delivery_failed(self, msg_id: int, consumer: QueueConsumer) -> tuple[str, int, Any]:
        """The delivery chain's policy for a send that failed (``delivery``: failure policy).  In one
        ``Queue._lock`` section: if ``consumer`` no longer holds ``msg_id`` (settled, released,
        handed back by ``remove_consumer``) nothing changes -> ``"not-held"``; else the message's
        failure count goes up and it is released (ACQUIRED -> AVAILABLE, notified as ``release``)
        -> ``"released"``, or, at ``max_delivery_failures``, dead-lettered: ACQUIRED -> DELETED and
        counted in ``dead_lettered`` -> ``"dead-lettered"`` (upstream: a message delivered more than
        ``maximumDeliveryAttempts`` times is routed to the alternate binding, else discarded; here the
        caller hands it on, e.g. to a dead-letter hook).  Returns (outcome, failure count, payload)."""
        with self._lock:
            entry = self._entries.get(msg_id)
            if entry is None or msg_id not in consumer._acquired:  # invariant: ACQUIRED by consumer
                return "not-held", 0 if entry is None else entry.failures, None
            entry.failures += 1
            failures, payload = entry.failures, entry.payload
            limit = self.max_delivery_failures
            if limit is not None and failures >= limit:
                consumer._acquired.discard(msg_id)
                self._delete_locked(entry)
                self.dead_lettered += 1
                return "dead-lettered", failures, payload
            unseen = self._release_locked(entry, consumer)
        self._notify_released(entry, unseen)
        return "released", failures, payload

    def _release_locked(self, entry: MessageEntry, owner: QueueConsumer | None) -> list[QueueConsumer]:
        """ACQUIRED -> AVAILABLE under ``Queue._lock``; returns the browsers to offer it to."""
        msg_id = entry.id
        entry.state = _AVAILABLE
        entry.owner = None
        if owner is not None:
            owner._acquired.discard(msg_id)
        self._available += 1
        self._make_visible_again_locked(entry)
        # A browser that passed the message while it was acquired never saw it: offer it now.
        # A browser that saw it is not shown it twice (upstream seesRequeues=false for browsers).
        unseen = []
        for b in self._browsers.values():
            if b._skipped_acquired.pop(msg_id, None) is not None:
                b._reoffer[msg_id] = entry
            if msg_id in b._reoffer or msg_id > b._last_seen.id:  # type: ignore[union-attr]
                unseen.append(b)
        return unseen

    def _notify_released(self, entry: MessageEntry, unseen: list[QueueConsumer]) -> None:
        """After a release (outside the lock): the browsers that never saw it, then one acquirer."""
        for b in unseen:
            if b.state is NodeState.NON_ACQUIRING:
                self._notify_consumer(b)
        self._notify_consumers(entry, browsers=False)

    def settle(self, msg_id: int, consumer: QueueConsumer | None = None) -> bool:
        """ACQUIRED -> DELETED (the consumer accepted the message)."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _ACQUIRED:
                raise QueueError(f"settle of message {msg_id}: it is {entry.state.name}, not ACQUIRED")
            owner = self._consumers.get(entry.owner)  # type: ignore[arg-type]
            if consumer is not None and consumer is not owner:
                raise QueueError(f"settle of message {msg_id} by {consumer.id!r}: it is owned by {entry.owner!r}")
            if owner is not None:
                owner._acquired.discard(msg_id)
            self._delete_locked(entry)
        return True

    def delete_message(self, msg_id: int) -> bool:
        """Any non-deleted state -> DELETED (administrative delete, expiry)."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is _DELETED:
                raise QueueError(f"delete of message {msg_id}: already DELETED")
            if entry.state is _AVAILABLE:
                self._available -= 1
            elif entry.state is _ACQUIRED:
                owner = self._consumers.get(entry.owner)  # type: ignore[arg-type]
                if owner is not None:
                    owner._acquired.discard(msg_id)
            self._delete_locked(entry)
        return True

    def hold(self, msg_id: int) -> bool:
        """AVAILABLE -> HELD (housekeeping found the message must be held back)."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _AVAILABLE:
                raise QueueError(f"hold of message {msg_id}: it is {entry.state.name}, not AVAILABLE")
            entry.state = _HELD
            self._available -= 1
        return True

    def unhold(self, msg_id: int) -> bool:
        """HELD -> AVAILABLE: the message becomes available; consumers are told as for a new one."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _HELD:
                raise QueueError(f"unhold of message {msg_id}: it is {entry.state.name}, not HELD")
            entry.state = _AVAILABLE
            self._available += 1
            self._make_visible_again_locked(entry)
            for b in self._browsers.values():
                if b._skipped_held.pop(msg_id, None) is not None:
                    b._reoffer[msg_id] = entry
        if self._det:
            self._point("publish.notify", msg_id)
        self._notify_consumers(entry)
        return True

    def _make_visible_again_locked(self, entry: MessageEntry) -> None:
        # Behind the acquirers' cursor: the cursor will not look at it again, so put it on the heap.
        # Same critical section as every cursor move, hence no race between the check and a move.
        if entry.id <= self._cursor.id and entry.id not in self._requeued_ids:
            self._requeued_ids.add(entry.id)
            heapq.heappush(self._requeued, (entry.id, entry))

    def _delete_locked(self, entry: MessageEntry) -> None:
        entry.state = _DELETED
        entry.owner = None
        if not self.retain_deleted:
            del self._entries[entry.id]
        first = self._first  # advance past the deleted prefix so it can be garbage collected
        nxt = first.next
        while nxt is not None and nxt.state is _DELETED:
            first = nxt
            nxt = nxt.next
        self._first = first

    def payload(self, msg_id: int) -> Any:
        return self._entry(msg_id).payload

    @property
    def available_count(self) -> int:
        return self._available

    # ================================================================================================
    # finding messages (all under self._lock)
    # ================================================================================================
    def _peek_acquirable_locked(self) -> MessageEntry | None:
        heap = self._requeued
        while heap and heap[0][1].state is not _AVAILABLE:
            self._requeued_ids.discard(heapq.heappop(heap)[0])
        cur = self._cursor
        nxt = cur.next
        while nxt is not None and nxt.state is not _AVAILABLE:
            cur = nxt
            nxt = nxt.next
        self._cursor = cur
        if heap and (nxt is None or heap[0][0] < nxt.id):
            return heap[0][1]
        return nxt

    def _peek_browsable_locked(self, b: QueueConsumer) -> MessageEntry | None:
        while b._reoffer:
            # Re-offered messages (released or un-held after the browser passed them) are shown
            # only while available: one acquired again goes back to waiting for its release.
            first = b._reoffer[min(b._reoffer)]
            if first.state is _AVAILABLE:
                return first
            del b._reoffer[first.id]
            if first.state is _ACQUIRED:
                b._skipped_acquired[first.id] = first
            elif first.state is _HELD:
                b._skipped_held[first.id] = first
        cur = b._last_seen
        assert cur is not None
        nxt = cur.next
        while nxt is not None and nxt.state is not _AVAILABLE:
            if nxt.state is _HELD:
                b._skipped_held[nxt.id] = nxt  # shown later if it becomes available (see unhold)
            elif nxt.state is _ACQUIRED:
                b._skipped_acquired[nxt.id] = nxt  # shown later if it is released (see release)
            cur = nxt
            nxt = nxt.next
        b._last_seen = cur
        return nxt

    def _has_work_for(self, c: QueueConsumer) -> bool:
        """Upstream ``consumerHasAvailableMessages``: an available message c may take and no
        higher-priority acquiring consumer that wants work."""
        if not c.acquires:
            return True
        with self._lock:
            if self._peek_acquirable_locked() is None:
                return False
        return c.priority == DEFAULT_PRIORITY or not self.qcm.desired_at_higher_priority(c.priority)

    # ================================================================================================
    # notification rules
    # ================================================================================================
    def _notify_consumer(self, c: QueueConsumer) -> bool:
        return self._try_notify(c) is True

    def _try_notify(self, c: QueueConsumer) -> bool | None:
        """Upstream ``notifyConsumer``.  True: notified; False: it had work but could not be moved to
        NOTIFIED (it moved concurrently); None: it has no work it may take."""
        if not self._has_work_for(c):
            return None
        if not self.qcm.set_notified(c, True):
            return False
        if self.record_events:
            with self._log_lock:
                self.notifications.append(c.id)
        c.notify_work()
        return True

    def _notify_consumers(self, entry: MessageEntry, *, browsers: bool = True) -> None:
        """New (or again available) message: every interested browser, then at most one acquirer."""
        if browsers:
            for b in self.qcm.non_acquiring_consumers():
                self._notify_consumer(b)
        for c in self.qcm.interested():
            if entry.state is not _AVAILABLE:
                break
            if self._try_notify(c) is not False:
                # notified; or c may take nothing -- no message left, or a higher-priority consumer
                # that wants work would take it (upstream's "!noHigherPriorityWithCredit" break)
                break

    # Both walks below stop at the first Interested consumer that has no work it may take (``None``
    # from ``_try_notify``): acquiring consumers all see the same messages, and the walk goes from
    # high to low priority, so no consumer after it can have work either.  Upstream walks on through
    # the whole Interested list in that case, which is O(consumers) per call when the queue is empty.
    def _notify_other_consumers(self, excluded: QueueConsumer) -> None:
        for c in self.qcm.interested():
            if self._available <= 0:
                break
            if c is not excluded and self._try_notify(c) is not False:
                break

    def _notify_after_loss_of_interest(self) -> None:
        highest_notified = self.qcm.highest_notified_priority()
        for c in self.qcm.interested():
            if highest_notified is not None and c.priority < highest_notified:
                break
            if self._try_notify(c) is not False:
                break

    def set_notify_work_desired(self, c: QueueConsumer, desired: bool) -> bool:
        """Consumer -> queue: whether it wants work (flow control, credit, backpressure).  Returns
        whether the consumer's QCM state changed.  Normally called through the consumer's
        ``set_flow``/``add_credit``/``set_credit``, which keep ``c.desired`` consistent."""
        if c.node is None:
            raise QueueError(f"set_notify_work_desired for consumer {c.id!r}, which is not on queue {self.name!r}")
        if not self.qcm.set_interest(c, desired):
            return False
        if desired:
            self._notify_consumer(c)
        else:
            self._notify_after_loss_of_interest()
        return True

    # ================================================================================================
    # delivery (consumer side: the consumer's IO thread)
    # ================================================================================================
    def deliver_single_message(self, c: QueueConsumer) -> int | None:
        """Consumer -> queue: pull one message.  Returns the delivered message id or None (also for
        a consumer that has been removed: removal may race with its IO thread)."""
        if c.queue is not self or c.node is None:
            raise QueueError(f"deliver_single_message for consumer {c.id!r}, which is not on queue {self.name!r}")
        if c.closed:
            return None  # removed (possibly concurrently by the config thread): nothing more for it
        if not c._deliver_guard.acquire(False):
            raise QueueError(f"deliver_single_message for consumer {c.id!r} called concurrently with itself")
        try:
            # the model's thread steps of a pull (un-notify, find, acquire, deliver / none) are
            # interleaving points of a deterministic scheduler (``_det``; real threads skip them)
            det = self._det
            qcm = self.qcm
            if det:
                self._point("pull.unnotify", c.id)
            qcm.set_notified(c, False)  # NOTIFIED -> INTERESTED *before* looking: no lost wake-up
            if not c.desired:
                return None  # suspended: it already told the queue it does not want work
            entry = self._attempt_delivery(c) if c.acquires else self._attempt_browse(c)
            if entry is None:
                if det:
                    self._point("pull.none", c.id)
                if c.acquires and self._available > 0:
                    self._notify_other_consumers(c)
                return None
            c.delivered += 1
            if det:
                self._point("pull.deliver", c.id)
            qcm.set_notified(c, True)  # keep pulling
            return entry.id
        finally:
            c._deliver_guard.release()

    def _attempt_delivery(self, c: QueueConsumer) -> MessageEntry | None:
        det = self._det
        while True:
            if det:
                self._point("pull.find", c.id)
            with self._lock:
                entry = self._peek_acquirable_locked()
            if entry is None:
                return None
            if c.priority != DEFAULT_PRIORITY and self.qcm.desired_at_higher_priority(c.priority):
                return None  # strict priority: a higher-priority consumer wants work
            if not c._allocate_credit():
                return None  # no credit: wait for add_credit (which turns desired back on)
            if det:
                self._point("pull.acquire", c.id)
            with self._lock:
                # ``closed`` re-read under the lock: no acquisition after remove_consumer's release
                acquired = entry.state is _AVAILABLE and not c.closed
                if acquired:
                    entry.state = _ACQUIRED
                    entry.owner = c.id
                    self._available -= 1
                    c._acquired.add(entry.id)
            if acquired:
                c._settle_credit()
                return entry
            c._restore_credit()  # lost the race for it: someone else made progress; look again
            if c.closed or not c.desired:
                return None

    def _attempt_browse(self, b: QueueConsumer) -> MessageEntry | None:
        if self._det:
            self._point("pull.find", b.id)
        with self._lock:
            entry = self._peek_browsable_locked(b)
        if entry is None:
            return None
        if not b._allocate_credit():
            return None
        if self._det:
            self._point("pull.acquire", b.id)
        with self._lock:
            if b._reoffer.pop(entry.id, None) is None:
                if entry.id <= b._last_seen.id:  # type: ignore[union-attr]
                    raise QueueError(f"browser {b.id!r}: read pointer moved behind message {entry.id}")
                b._last_seen = entry
            shown = entry.state is not _DELETED
        if not shown:
            b._restore_credit()
            return None
        b._settle_credit()
        return entry

    # ================================================================================================
    # observation
    # ================================================================================================
    def snapshot(self) -> dict[str, Any]:
        """JSON-serialisable observation (format in the module docstring).  Exact when the queue is
        quiescent; during concurrent activity each part is individually consistent."""
        consumers = {}
        for cid, c in list(self._consumers.items()):
            with self._lock:
                acquired = sorted(c._acquired)
            consumers[str(cid)] = {
                "state": c.state.name,
                "priority": c.priority,
                "acquiring": c.acquires,
                "credit": c.credit,
                "flow_active": c.flow_active,
                "notify_work_desired": c.desired,
                "closed": c.closed,
                "acquired": acquired,
            }
        with self._lock:
            messages = {
                str(e.id): {"state": e.state.name.lower(), "owner": e.owner}
                for e in sorted(self._entries.values(), key=lambda e: e.id)
            }
            available = self._available
        with self._log_lock:
            notifications = list(self.notifications)
        lists = self.qcm.describe()
        return {
            "consumers": consumers,
            "messages": messages,
            **lists,
            "available_count": available,
            "notifications": notifications,
        }

    def message_state(self, msg_id: int) -> MessageState:
        return self._entry(msg_id).state

    def consumers(self) -> list[QueueConsumer]:
        return list(self._consumers.values())
