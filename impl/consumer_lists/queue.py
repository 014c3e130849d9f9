# One file: the queue's state and every path that takes its locks (enqueue, notify, deliver, credit, browse, delete) make one concurrency argument, read together.
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

Read positions.  All acquiring consumers see the same messages (no selectors; groups and rejects
are handled on top, see "Other actors"), so they share one read position: a cursor (the last entry known to be non-available) plus a
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
     "notifications": [consumer ids, in the order notify_work was called],
     "rejected_by": {"<msg id>": [consumer ids that rejected it, sorted]},   # only rejected entries
     "delete_waiting": [msg ids a delete waits for, sorted],
     "groups": {"<group>": owner consumer id | None}}    # every group enqueued; {} without groups

  Keys of "consumers"/"messages"/"rejected_by"/"groups" are ``str(id)``; values keep the ids' own
  types.  A deleted message stays listed ("deleted") while ``retain_deleted``.
* Operations return what happened: ``enqueue`` -> message id; ``deliver_single_message`` -> message id
  or None; ``set_notify_work_desired`` -> whether the consumer's list changed; ``release``/``settle``/
  ``hold``/``unhold`` -> True, or raise ``QueueError`` naming the message and its
  state when the transition is not allowed; ``delete_entry``/``delete_message`` -> see "Other actors"; ``remove_consumer`` -> the state the consumer left;
  ``release_owned`` -> whether it released; ``delivery_failed`` -> (``"released"`` |
  ``"dead-lettered"`` | ``"not-held"``, the message's failure count, its payload).
* ``notifications`` (when ``record_events``) is the notification event log: every notification of
  every call, those of deletes, rejects and group pointer resets included.

Other actors (issue 16; model/consumer_lists/actors.py, spec/consumer-lists.md "The other actors")
---------------------------------------------------------------------------------------------------
The API, kept stable for the conformance driver:

* ``Queue(..., group_policy=None | "shared" | "assigned", clock=callable, delete_notifies=True,
  record_dispositions=False)``; ``enqueue(payload, *, held=False, group=None, ttl=None)`` (``ttl`` in
  ``clock`` units; default clock ``time.monotonic``).
* ``delete_entry(m)`` and ``delete_message(m)`` (a management delete; the expiry path; upstream ``deleteEntry`` with
  ``acquireOrSteal``): AVAILABLE -> deleted, returns None; ACQUIRED and sent -> stolen and deleted,
  returns the previous owner's id; HELD -> ``"held"``, ACQUIRED and not yet sent -> ``"waiting"``:
  the delete completes on the thread that next changes the entry (``unhold``, a release of any kind,
  the send at the end of ``deliver_single_message``).  Then, while messages are available, one
  interested consumer is notified (reference DEV-016; ``delete_notifies=False``: upstream, nobody).
  ``QueueError`` for an entry already deleted or with a delete waiting.
* ``check_message_status()`` (the housekeeping pass; ``housekeeping.Housekeeping`` runs it on a
  thread): every expired entry goes through the ``delete_entry`` path.  Consumers skip an expired
  entry like a deleted one and delete it when they pass it (upstream ``getNextAvailableEntry``).
* ``reject(m, consumer)``: ``consumer`` holds ``m``; ``m`` is released and is never again of interest
  to ``consumer`` (``hasInterest``); notified as a release.  ``QueueError`` if ``consumer`` does not
  hold it.  ``settle_owned(m, consumer)``: settle if still held, else False (e.g. stolen).
* Message groups (``MessageGroupManager.mightAssign`` / ``acceptMessage`` under one lock section
  with the acquire): an entry of a group whose (valid) consumer is another is not available to this
  consumer.  Shared (``DefinedGroupMessageGroupManager``): a group belongs to the consumer holding
  its counted entries; when the last one leaves that consumer's acquired state (release, reject,
  settle, steal) the group is freed and, if an entry of it is available, every registered acquiring
  consumer is notified (``resetSubPointersForGroups``).  Assigned
  (``AssignedConsumerMessageGroupManager``): a group stays with its first consumer until that
  consumer is removed (``unregisterConsumer`` -> ``clearAssignments``, then the reset if an entry of
  one of its groups is available).  Reference rules: a group is given only together with a
  successful acquire (DEV-018) and never to a consumer removed while it pulled (DEV-019).

Order of the notifications inside one call (each is recorded in ``notifications``): a release /
reject / failed send: browsers that never saw the entry, then one acquirer (``notifyConsumers``),
then the group reset if owed; a delete (immediate or completed later): the delete's notification,
then the group reset; a release that a waiting delete turns into a delete: as a delete (the entry is
never offered); ``remove_consumer``: the released entries' notifications, then the delete's (if a
waiting delete took one), then the group reset, then the hand-over.

With consumer-specific availability (groups on, or after the first reject) the notification walks
go on past a consumer that has nothing it may take (upstream's walk), the priority check asks each
higher consumer that wants work whether it has an entry it may take (upstream
``noHigherPriorityWithCredit``), and finding is O(entries this consumer skips) instead of O(1).

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

The other actors' state (per entry: group, expiry, ``rejected_by``, ``sent``, ``delete_pending``,
``counted``; the group manager's owners / counts / available counts; ``_delete_waiting``) is guarded
by ``Queue._lock`` too, which stands for the entry CAS and for the group manager's monitor: a
delete's choice (take now / wait) and a send's "stealable now, complete a waiting delete" are each
one section, so a delete registered concurrently with a send is completed by exactly one of them;
``acceptMessage`` and the acquire are one section.  ``_no_higher`` reads the QCM before taking
``Queue._lock`` (lock order).  ``check_message_status`` walks the entry links without the lock (they
are only appended; ``_first`` advancing never unlinks a ``next``) and deletes each expired entry in
its own section.

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
import time
from collections.abc import Callable, Hashable, Iterator
from enum import IntEnum
from typing import Any

from conq.impl.consumer_lists.consumer_manager import DEFAULT_PRIORITY, NodeState, QueueConsumerManager
from conq.impl.scheduling import REAL

__all__ = ["DEFAULT_MAX_DELIVERY_FAILURES", "DEFAULT_PRIORITY", "DISPOSITIONS", "GROUP_POLICIES", "MessageEntry",
           "MessageState", "Queue", "QueueConsumer", "QueueError"]

#: failed deliveries after which a message is dead-lettered (``Queue.delivery_failed``).  Upstream's
#: ``maximumDeliveryAttempts`` defaults to 0 (unbounded): a message whose delivery always fails is then
#: redelivered forever, and -- being the oldest available message -- is what every pull returns first,
#: so a single consumer never gets past it.  Bounded by default here ("a failing callback never stalls
#: delivery"); ``max_delivery_failures=None`` restores upstream's behaviour.
DEFAULT_MAX_DELIVERY_FAILURES = 10


#: ``Queue(group_policy=...)``: no message groups, shared groups, standard (assigned) groups
GROUP_POLICIES = (None, "shared", "assigned")

#: ``Queue.dispositions`` codes: how a message left the queue
DISPOSITIONS = {1: "settled", 2: "expired", 3: "deleted", 4: "dead-lettered", 5: "removed"}
_CODE = {v: k for k, v in DISPOSITIONS.items()}


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
    __slots__ = ("counted", "delete_pending", "expires", "failures", "group", "id", "next", "owner", "payload",
                 "rejected_by", "sent", "state")

    def __init__(self, msg_id: int, state: MessageState, payload: Any = None, group: int | None = None,
                 expires: float | None = None) -> None:
        self.id = msg_id
        self.state = state
        self.payload = payload
        self.owner: Hashable | None = None
        self.next: MessageEntry | None = None
        self.failures = 0  # failed deliveries (``Queue.delivery_failed``), guarded by Queue._lock
        # issue 16 (all guarded by Queue._lock): the message group (None: none), the expiry time in the
        # queue's clock units (None: never), the consumers that rejected it (None: nobody;
        # upstream ``QueueEntryImpl._rejectedBy``), whether the current acquisition was sent (so a
        # delete may steal it: ``makeAcquisitionStealable``), the reason of a delete waiting for the
        # entry's next state change (``DelayedAcquisitionStateListener``), and whether its shared
        # group counted its acquisition (``DefinedGroupMessageGroupManager.Group.add``)
        self.group = group
        self.expires = expires
        self.rejected_by: set[Hashable] | None = None
        self.sent = False
        self.delete_pending: str | None = None
        self.counted = False

    def __repr__(self) -> str:
        return f"MessageEntry({self.id}, {self.state.name}, owner={self.owner!r})"


#: node states of an acquiring consumer that wants work


def _sorted_ids(ids: Any) -> list[Hashable]:
    """Consumer ids sorted by value (ints numerically), or by ``repr`` when they do not compare."""
    try:
        return sorted(ids)
    except TypeError:
        return sorted(ids, key=repr)


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
            tell = self.node is not None and not self.closed
            # model: setNotifyWorkDesired's two halves, the target's flag, then the queue; each is a
            # scheduling point of a deterministic scheduler (``desired.flag``, ``desired.queue``), so
            # the thread level can run them as the model's steps ``target_flag`` and
            # ``set_notify_work_desired`` (conformance/consumer_lists/thread_steps.py)
            if tell and self.queue._det:
                self.queue._point("desired.flag", self.id)
            self._write_flag(desired, tell)
            if tell:
                if self.queue._det:
                    self.queue._point("desired.queue", self.id)
                self.queue.set_notify_work_desired(self, desired)

    def _write_flag(self, desired: bool, registered: bool) -> None:
        """The target's flag (``notifyWorkDesired``) and, for a registered acquiring consumer, its
        place in ``Queue._wanting`` (what the priority check reads, ``Queue._no_higher``): one step."""
        self.desired = desired
        if registered and self.acquires:
            ids = self.queue._wanting.setdefault(self.priority, set())
            (ids.add if desired else ids.discard)(self.id)  # single set operations: atomic

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
                 max_delivery_failures: int | None = DEFAULT_MAX_DELIVERY_FAILURES,
                 group_policy: str | None = None, clock: Callable[[], float] | None = None,
                 delete_notifies: bool = True, record_dispositions: bool = False) -> None:
        if max_delivery_failures is not None and max_delivery_failures < 1:
            raise ValueError(f"queue {name!r}: max_delivery_failures must be None or >= 1, got {max_delivery_failures}")
        if group_policy not in GROUP_POLICIES:
            raise ValueError(f"queue {name!r}: group_policy must be one of {GROUP_POLICIES}, got {group_policy!r}")
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
        #: per priority, the registered acquiring consumers whose target's flag says "wants work" (the
        #: priority check's question, answered in O(levels): ``_no_higher``)
        self._wanting: dict[int, set[Hashable]] = {}
        self.record_events = record_events
        self.retain_deleted = retain_deleted
        self.max_delivery_failures = max_delivery_failures
        self.dead_lettered = 0  # messages removed by delivery_failed after max_delivery_failures
        self.notifications: list[Hashable] = []
        # -- the other actors (issue 16; module docstring "Other actors") -------------------------------
        #: None (no groups), "shared" (upstream DefinedGroupMessageGroupManager) or "assigned"
        #: (AssignedConsumerMessageGroupManager)
        self.group_policy = group_policy
        self._clock: Callable[[], float] = clock if clock is not None else time.monotonic
        #: reference (DEV-016): a delete notifies one interested consumer while messages are
        #: available; False: upstream's deleteEntry, which notifies nobody (variants / mutants)
        self.delete_notifies = delete_notifies
        #: per-consumer availability is in play (groups, or some entry was rejected): the notification
        #: walks and the priority check then look at each consumer's own next entry (sticky)
        self._excl = group_policy is not None
        self._ttl_used = False  # some entry has a TTL: finding skips (and deletes) expired entries
        self._group_owner: dict[int, QueueConsumer] = {}  # group -> its consumer
        self._group_count: dict[int, int] = {}  # shared: group -> entries its listener counted
        self._group_avail: dict[int, int] = {}  # group -> its AVAILABLE entries
        self._delete_waiting: set[int] = set()  # entries a delete waits for (delete_pending set)
        self.expired = 0  # entries deleted because their TTL passed (housekeeping or a passing consumer)
        self.deleted = 0  # entries deleted by delete_entry (management)
        self.settled = 0  # entries settled by their consumer
        #: per message id, how it left the queue (``DISPOSITIONS`` codes; 0 while still on the queue),
        #: when ``record_dispositions``; ``disposition_conflicts`` counts an entry deleted twice
        self.record_dispositions = record_dispositions
        self.dispositions = bytearray(1) if record_dispositions else bytearray()
        self.disposition_conflicts = 0

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
            c._write_flag(c.desired, True)
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
            consumer._write_flag(False, True)
            previous = self.qcm.remove_consumer(consumer)
        if previous is None:
            return None
        released: list[tuple[MessageEntry, list[QueueConsumer]]] = []
        taken = reset = False
        with self._lock:
            self._browsers.pop(consumer.id, None)
            if release_acquired:
                for msg_id in sorted(consumer._acquired):
                    entry = self._entries[msg_id]  # ACQUIRED by consumer (invariant), so not deleted
                    released.append((entry, self._release_locked(entry, consumer)))
                # issue 16, after every entry was released (as the model's removal): the shared
                # groups' listener counts each out, then a delete waiting for one takes it
                for entry, _ in released:
                    reset = self._group_left_locked(entry) or reset
                for entry, _ in released:
                    if entry.delete_pending is not None:
                        reset = self._take_for_delete_locked(entry, entry.delete_pending) or reset
                        taken = True
            if self._group_owner:
                reset = self._unregister_groups_locked(consumer) or reset
        for entry, unseen in released:
            if entry.state is _DELETED:
                continue  # a waiting delete took it: notified below, as a delete
            if self._det:
                self._point("publish.notify", entry.id)
            self._notify_released(entry, unseen)
        if taken:
            self._after_delete(False)
        if reset:
            self._reset_sub_pointers_for_groups()
        if consumer.acquires and previous in (NodeState.INTERESTED, NodeState.NOTIFIED):
            self._notify_after_loss_of_interest()
        return previous.name

    # ================================================================================================
    # messages (publishing side: any thread)
    # ================================================================================================
    def enqueue(self, payload: Any = None, *, held: bool = False, group: int | None = None,
                ttl: float | None = None) -> int:
        """Append a message; returns its id.  ``held`` messages are not deliverable until ``unhold``.

        ``group``: the message group (an int; needs a ``group_policy``), None for none.  ``ttl``: time
        to live in the queue's clock units (``Queue(clock=...)``, default ``time.monotonic``); once
        ``clock() >= enqueue time + ttl`` the message is expired: every consumer skips it (and
        deletes it when it passes it) and ``check_message_status`` deletes it (``delete_entry``)."""
        if group is not None:
            if self.group_policy is None:
                raise ValueError(f"queue {self.name!r}: enqueue(group={group!r}) needs a group_policy")
            if isinstance(group, bool) or not isinstance(group, int):
                raise TypeError(f"queue {self.name!r}: a message group must be an int, got {group!r}")
        if ttl is not None and not ttl >= 0:
            raise ValueError(f"queue {self.name!r}: ttl must be None or >= 0, got {ttl!r}")
        expires = None if ttl is None else self._clock() + ttl
        with self._lock:
            msg_id = self._next_id
            self._next_id = msg_id + 1
            entry = MessageEntry(msg_id, _HELD if held else _AVAILABLE, payload, group, expires)
            self._entries[msg_id] = entry
            self._tail.next = entry
            self._tail = entry
            if expires is not None:
                self._ttl_used = True
            if self.record_dispositions:
                self.dispositions.append(0)
            if group is not None:
                self._group_avail.setdefault(group, 0)
            if not held:
                self._available += 1
                if group is not None:
                    self._group_avail[group] += 1
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
        """ACQUIRED -> AVAILABLE (release/requeue); if ``consumer`` is given it must be the owner.  A
        delete waiting for the entry (``delete_entry`` -> "waiting") completes here instead: the entry
        is deleted (DELETED) and the delete's notification runs; a shared group whose last counted
        entry this was is given up (``resetSubPointersForGroups``)."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _ACQUIRED:
                raise QueueError(f"release of message {msg_id}: it is {entry.state.name}, not ACQUIRED")
            owner = self._consumers.get(entry.owner)  # type: ignore[arg-type]
            if consumer is not None and consumer is not owner:
                raise QueueError(f"release of message {msg_id} by {consumer.id!r}: it is owned by {entry.owner!r}")
            unseen, reset = self._give_back_locked(entry, owner)
        if self._det:
            self._point("publish.notify", msg_id)
        self._after_give_back(entry, unseen, reset)
        return True

    def reject(self, msg_id: int, consumer: QueueConsumer) -> bool:
        """The consumer's IO thread rejects the entry ``consumer`` holds (seeds 000/002 "Threading
        Model"; upstream ``QueueEntryImpl.reject(consumer)`` then ``release(consumer)``): the entry is
        available again to every consumer but ``consumer``, which never gets it again (its
        ``hasInterest`` is false: finding skips it, the notification walks pass over it, and it does
        not hold lower priorities back for it); consumers are then notified as for ``release``.
        Raises ``QueueError`` if ``consumer`` does not hold ``msg_id``."""
        with self._lock:
            entry = self._entries.get(msg_id)
            if entry is None or msg_id not in consumer._acquired:  # invariant: ACQUIRED by consumer
                state = "deleted" if entry is None else entry.state.name
                raise QueueError(f"reject of message {msg_id} by {consumer.id!r}: it does not hold it ({state})")
            if entry.rejected_by is None:
                entry.rejected_by = set()
            entry.rejected_by.add(consumer.id)
            self._excl = True
            unseen, reset = self._give_back_locked(entry, consumer)
        if self._det:
            self._point("publish.notify", msg_id)
        self._after_give_back(entry, unseen, reset)
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
            unseen, reset = self._give_back_locked(entry, consumer)
        self._after_give_back(entry, unseen, reset)
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
                reset = self._group_left_locked(entry)
                self._delete_locked(entry, "dead-lettered")
                self.dead_lettered += 1
                dead = True
            else:
                dead = False
                unseen, reset = self._give_back_locked(entry, consumer)
        if dead:
            if reset:
                self._reset_sub_pointers_for_groups()
            return "dead-lettered", failures, payload
        self._after_give_back(entry, unseen, reset)
        return "released", failures, payload

    def _release_locked(self, entry: MessageEntry, owner: QueueConsumer | None) -> list[QueueConsumer]:
        """ACQUIRED -> AVAILABLE under ``Queue._lock``; returns the browsers to offer it to."""
        msg_id = entry.id
        entry.state = _AVAILABLE
        entry.owner = None
        entry.sent = False
        if owner is not None:
            owner._acquired.discard(msg_id)
        self._available += 1
        if entry.group is not None:
            self._group_avail[entry.group] += 1
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

    def _give_back_locked(self, entry: MessageEntry,
                          owner: QueueConsumer | None) -> tuple[list[QueueConsumer] | None, bool]:
        """Release, then (as upstream's state-change listeners run inside the release) the shared
        group's ``Group.subtract(entry, released=true)`` and a waiting delete
        (``DelayedAcquisitionStateListener``: the released entry is taken and deleted now).  Returns
        (the browsers to offer the entry to, or None when the waiting delete took it; whether a
        group pointer reset is owed)."""
        unseen = self._release_locked(entry, owner)
        reset = self._group_left_locked(entry)
        if entry.delete_pending is not None:
            reset = self._take_for_delete_locked(entry, entry.delete_pending) or reset
            return None, reset
        return unseen, reset

    def _after_give_back(self, entry: MessageEntry, unseen: list[QueueConsumer] | None, reset: bool) -> None:
        """Outside every lock, after ``_give_back_locked``: a waiting delete that took the entry
        notifies as a delete (``_after_delete``); else the release's notification (browsers that
        never saw the entry, then one acquirer), then the group pointer reset if one is owed."""
        if unseen is None:
            self._after_delete(reset)
            return
        self._notify_released(entry, unseen)
        if reset:
            self._reset_sub_pointers_for_groups()

    def _notify_released(self, entry: MessageEntry, unseen: list[QueueConsumer]) -> None:
        """After a release (outside the lock): the browsers that never saw it, then one acquirer."""
        for b in unseen:
            if b.state is NodeState.NON_ACQUIRING:
                self._notify_consumer(b)
        self._notify_consumers(entry, browsers=False)

    def settle(self, msg_id: int, consumer: QueueConsumer | None = None) -> bool:
        """ACQUIRED -> DELETED (the consumer accepted the message).  A shared group whose last counted
        entry this was is given up (``Group.subtract(entry, released=false)``) and, if an entry of
        it is available, every acquiring consumer's pointer is reset (notified)."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _ACQUIRED:
                raise QueueError(f"settle of message {msg_id}: it is {entry.state.name}, not ACQUIRED")
            owner = self._consumers.get(entry.owner)  # type: ignore[arg-type]
            if consumer is not None and consumer is not owner:
                raise QueueError(f"settle of message {msg_id} by {consumer.id!r}: it is owned by {entry.owner!r}")
            if owner is not None:
                owner._acquired.discard(msg_id)
            reset = self._group_left_locked(entry)
            self._delete_locked(entry, "settled")
        if reset:
            self._reset_sub_pointers_for_groups()
        return True

    def settle_owned(self, msg_id: int, consumer: QueueConsumer) -> bool:
        """Settle ``msg_id`` if ``consumer`` still holds it and return True; otherwise (a delete
        stole it, it expired, the removal handed it back, ...) change nothing and return False.  One
        ``Queue._lock`` section checks and settles (as ``release_owned``)."""
        with self._lock:
            entry = self._entries.get(msg_id)
            if entry is None or msg_id not in consumer._acquired:  # invariant: ACQUIRED by consumer
                return False
            consumer._acquired.discard(msg_id)
            reset = self._group_left_locked(entry)
            self._delete_locked(entry, "settled")
        if reset:
            self._reset_sub_pointers_for_groups()
        return True

    def delete_message(self, msg_id: int) -> Hashable | str | None:
        """An administrative removal of one message (the management's "delete messages" of a queue):
        upstream it goes through ``AbstractQueue.deleteEntry`` like every delete and move
        (REFERENCE.md section 4), so it is ``delete_entry`` -- the same answers, waits and
        notification -- recorded as ``"removed"`` in ``dispositions``.

        It used to take the entry at once in any state and notify nobody (issue 32): a consumer
        that had just found the entry lost it with nothing handed over, so the next message waited
        with nobody woken (a lost wake-up), and a consumer between its acquire and its send was sent
        an entry it no longer held."""
        return self._delete_entry(msg_id, "removed")

    # ------------------------------------------------------------------------------------------------
    # the housekeeping thread and management: deleteEntry (issue 16)
    # ------------------------------------------------------------------------------------------------
    def delete_entry(self, msg_id: int) -> Hashable | str | None:
        """Upstream ``AbstractQueue.deleteEntry`` (a management delete or move; the expiry path):
        the entry is acquired by a non-consumer (``QueueEntryImpl.acquireOrSteal``) and deleted.

        * AVAILABLE -> DELETED; returns None.
        * ACQUIRED and already sent (stealable: ``deliver_single_message`` returned it) -> stolen and
          DELETED (the owner's later settle / release finds nothing: ``settle_owned`` is False);
          returns the previous owner's consumer id.
        * HELD -> a delayed acquisition is registered (``DelayedAcquisitionStateListener``);
          returns ``"held"``.  ACQUIRED but not yet sent (the owner's pull is between its acquire and
          its send) -> likewise; returns ``"waiting"``.  The delete then completes on the thread
          that changes the entry's state next: ``unhold``, a release (``release``, ``reject``,
          ``release_owned``, ``delivery_failed``, ``remove_consumer``) or the send.  A settle of the
          entry meanwhile settles it (the delete has nothing left to do).

        After a delete took the entry, while messages are available, one interested consumer is
        notified (reference DEV-016; ``Queue(delete_notifies=False)``: upstream, nobody), then, if
        the entry was the last counted one of a shared group and an entry of that group is
        available, every acquiring consumer's pointer is reset (``resetSubPointersForGroups``).
        Raises ``QueueError`` for an entry already deleted or with a delete already pending."""
        return self._delete_entry(msg_id, "deleted")

    def _delete_entry(self, msg_id: int, reason: str) -> Hashable | str | None:
        with self._lock:
            entry = self._entry(msg_id)
            state = entry.state
            if state is _DELETED:
                raise QueueError(f"delete of message {msg_id}: already DELETED")
            if entry.delete_pending is not None:
                raise QueueError(f"delete of message {msg_id}: a delete is already waiting for it")
            if state is _HELD or (state is _ACQUIRED and not entry.sent):
                entry.delete_pending = reason
                self._delete_waiting.add(msg_id)
                return "held" if state is _HELD else "waiting"
            previous = entry.owner if state is _ACQUIRED else None
            reset = self._take_for_delete_locked(entry, reason)
        self._after_delete(reset)
        return previous

    def _take_for_delete_locked(self, entry: MessageEntry, reason: str) -> bool:
        """``acquireOrSteal`` + ``dequeueEntry`` under ``Queue._lock``: any state -> DELETED; a stolen
        acquisition leaves its group (``Group.subtract(entry, released=false)``).  Returns whether a
        group pointer reset is owed."""
        state = entry.state
        reset = False
        if state is _AVAILABLE:
            self._available -= 1
            if entry.group is not None:
                self._group_avail[entry.group] -= 1
        elif state is _ACQUIRED:
            owner = self._consumers.get(entry.owner)  # type: ignore[arg-type]
            if owner is not None:
                owner._acquired.discard(entry.id)
            reset = self._group_left_locked(entry)
        self._delete_locked(entry, reason)
        return reset

    def _after_delete(self, reset: bool) -> None:
        """Outside every lock, after a delete took an entry: (reference) one interested consumer is
        notified while messages are available (``notifyOtherConsumers(null)``), then the group
        pointer reset if one is owed."""
        if self.delete_notifies and self._available > 0:
            self._notify_other_consumers(None)
        if reset:
            self._reset_sub_pointers_for_groups()

    def check_message_status(self) -> int:
        """Upstream ``AbstractQueue.checkMessageStatus`` (the housekeeping thread's pass): every
        expired entry that is not deleted and has no delete waiting is deleted through the
        ``delete_entry`` path (stolen if acquired and sent; a delayed acquisition if held or unsent).
        Returns how many deletes it started.  The walk reads the entry links without the lock (links
        are only ever appended; a stale read misses an entry appended meanwhile, which the next pass
        sees); each delete is its own locked section."""
        if not self._ttl_used:
            return 0
        now = self._clock()
        started = 0
        entry = self._first.next
        while entry is not None:
            expires = entry.expires
            if (expires is not None and expires <= now and entry.state is not _DELETED
                    and entry.delete_pending is None):
                try:
                    self._delete_entry(entry.id, "expired")
                    started += 1
                except QueueError:
                    pass  # settled, deleted or already waited for meanwhile: nothing left to do
            entry = entry.next
        return started

    def hold(self, msg_id: int) -> bool:
        """AVAILABLE -> HELD (housekeeping found the message must be held back)."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _AVAILABLE:
                raise QueueError(f"hold of message {msg_id}: it is {entry.state.name}, not AVAILABLE")
            entry.state = _HELD
            self._available -= 1
            if entry.group is not None:
                self._group_avail[entry.group] -= 1
        return True

    def unhold(self, msg_id: int) -> bool:
        """HELD -> AVAILABLE: the message becomes available; consumers are told as for a new one.  A
        delete waiting for the entry (``delete_entry`` -> "held") completes here instead: the entry is
        deleted and the delete's notification runs."""
        with self._lock:
            entry = self._entry(msg_id)
            if entry.state is not _HELD:
                raise QueueError(f"unhold of message {msg_id}: it is {entry.state.name}, not HELD")
            entry.state = _AVAILABLE
            self._available += 1
            if entry.group is not None:
                self._group_avail[entry.group] += 1
            pending = entry.delete_pending
            if pending is not None:
                self._take_for_delete_locked(entry, pending)
            else:
                self._make_visible_again_locked(entry)
                for b in self._browsers.values():
                    if b._skipped_held.pop(msg_id, None) is not None:
                        b._reoffer[msg_id] = entry
        if pending is not None:
            self._after_delete(False)
            return True
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

    def _delete_locked(self, entry: MessageEntry, reason: str) -> None:
        """-> DELETED under ``Queue._lock`` (``reason``: a ``DISPOSITIONS`` name); the caller has
        already taken the entry out of the available count / its owner's acquired set."""
        entry.state = _DELETED
        entry.owner = None
        entry.sent = False
        if entry.delete_pending is not None:
            entry.delete_pending = None
            self._delete_waiting.discard(entry.id)
        if reason == "expired":
            self.expired += 1
        elif reason == "deleted":
            self.deleted += 1
        elif reason == "settled":
            self.settled += 1
        if self.record_dispositions:
            if self.dispositions[entry.id]:
                self.disposition_conflicts += 1
            self.dispositions[entry.id] = _CODE[reason]
        if not self.retain_deleted:
            del self._entries[entry.id]
        first = self._first  # advance past the deleted prefix so it can be garbage collected
        nxt = first.next
        while nxt is not None and nxt.state is _DELETED:
            first = nxt
            nxt = nxt.next
        self._first = first

    # ------------------------------------------------------------------------------------------------
    # message groups (issue 16): the group manager's state is guarded by Queue._lock, which stands
    # for the manager's monitor (upstream: synchronized methods of the MessageGroupManager)
    # ------------------------------------------------------------------------------------------------
    def _group_valid_locked(self, g: int, owner: QueueConsumer) -> bool:
        """``DefinedGroupMessageGroupManager.Group.isValid``: its consumer is open or still holds a
        counted entry.  An assigned group (standard policy) is valid while assigned."""
        if self.group_policy == "shared":
            return not owner.closed or self._group_count.get(g, 0) > 0
        return True

    def _may_take_locked(self, c: QueueConsumer, entry: MessageEntry) -> bool:
        """``hasInterest`` (not rejected by ``c``) and ``mightAssign`` (the entry's group has no
        valid consumer, or it is ``c``)."""
        rb = entry.rejected_by
        if rb is not None and c.id in rb:
            return False
        g = entry.group
        if g is None:
            return True
        owner = self._group_owner.get(g)
        return owner is None or owner is c or not self._group_valid_locked(g, owner)

    def _group_left_locked(self, entry: MessageEntry) -> bool:
        """Shared groups' ``GroupStateChangeListener``: an entry the group counted leaves its
        consumer's acquired state (released, settled, stolen): ``Group.subtract``.  The last one out
        gives the group up; a pointer reset is owed if an entry of the group is available (the
        model's rule, actors.py ``_group_left``).  Returns whether the reset is owed."""
        if not entry.counted:
            return False
        entry.counted = False
        g = entry.group
        n = self._group_count[g] - 1  # type: ignore[index]
        if n:
            self._group_count[g] = n  # type: ignore[index]
            return False
        del self._group_count[g]  # type: ignore[arg-type]
        self._group_owner.pop(g, None)  # type: ignore[arg-type]
        return self._group_avail.get(g, 0) > 0  # type: ignore[arg-type]

    def _unregister_groups_locked(self, c: QueueConsumer) -> bool:
        """``AbstractQueue.unregisterConsumer`` -> ``resetSubPointersForGroups(consumer)``: is an entry
        of a group of ``c`` available?  Then (standard policy) ``clearAssignments(c)``.  Returns
        whether a pointer reset is owed."""
        mine = [g for g, owner in self._group_owner.items() if owner is c]
        found = any(self._group_avail.get(g, 0) > 0 for g in mine)
        if self.group_policy == "assigned":
            for g in mine:
                del self._group_owner[g]
        return found

    def _reset_sub_pointers_for_groups(self) -> None:
        """``AbstractQueue.resetSubPointersForGroups`` -> ``resetSubPointers``: every registered
        acquiring consumer is moved back and notified (``notifyConsumer``: only if it has an entry it
        may take and no higher priority holds it back; recorded in ``notifications``).  Owed by the
        thread that freed a group; runs outside every lock."""
        for c in list(self.qcm.all()):
            if c.acquires and not c.closed:
                self._notify_consumer(c)

    def payload(self, msg_id: int) -> Any:
        return self._entry(msg_id).payload

    @property
    def available_count(self) -> int:
        return self._available

    # ================================================================================================
    # finding messages (all under self._lock)
    # ================================================================================================
    def _expired_locked(self, entry: MessageEntry) -> bool:
        """An AVAILABLE entry whose TTL passed is deleted by whoever passes it (upstream
        ``getNextAvailableEntry``: ``node.expired()`` -> acquire -> ``dequeueEntry``); True if so.
        No notification: the passer is a consumer looking for work (it keeps pulling or, finding
        nothing, notifies the others) or a notification walk (which notifies the consumer that has
        work)."""
        expires = entry.expires
        if expires is None or expires > self._clock():
            return False
        self._take_for_delete_locked(entry, "expired")
        return True

    def _peek_acquirable_locked(self) -> MessageEntry | None:
        """The first available entry (every acquiring consumer's next entry when nothing is
        consumer-specific): the smaller of the requeue heap's top and the first available entry
        after the shared cursor."""
        heap = self._requeued
        ttl = self._ttl_used
        while heap and (heap[0][1].state is not _AVAILABLE or (ttl and self._expired_locked(heap[0][1]))):
            self._requeued_ids.discard(heapq.heappop(heap)[0])
        cur = self._cursor
        nxt = cur.next
        if ttl:
            while nxt is not None and (nxt.state is not _AVAILABLE or self._expired_locked(nxt)):
                cur = nxt
                nxt = nxt.next
        else:
            while nxt is not None and nxt.state is not _AVAILABLE:
                cur = nxt
                nxt = nxt.next
        self._cursor = cur
        if heap and (nxt is None or heap[0][0] < nxt.id):
            return heap[0][1]
        return nxt

    def _iter_available_locked(self) -> Iterator[MessageEntry]:
        """Every available (not expired) entry in queue order: the requeue heap's entries (all at or
        behind the cursor), then the list after the cursor.  Only for consumer-specific finding."""
        ttl = self._ttl_used
        for _, e in sorted(self._requeued):
            if e.state is _AVAILABLE and not (ttl and self._expired_locked(e)):
                yield e
        e = self._cursor.next
        while e is not None:
            if e.state is _AVAILABLE and not (ttl and self._expired_locked(e)):
                yield e
            e = e.next

    def _next_for_locked(self, c: QueueConsumer) -> MessageEntry | None:
        """Upstream ``getNextAvailableEntry(c)`` for an acquiring consumer: the first available entry
        ``c`` may take (``hasInterest``: not rejected by ``c``; ``mightAssign``: its group has no other
        valid consumer).  O(1) amortised while nothing is consumer-specific; else O(entries skipped)
        (upstream keeps a pointer per consumer and moves it back on a group reset)."""
        first = self._peek_acquirable_locked()
        if first is None or not self._excl or self._may_take_locked(c, first):
            return first
        for e in self._iter_available_locked():
            if self._may_take_locked(c, e):
                return e
        return None

    def _peek_browsable_locked(self, b: QueueConsumer) -> MessageEntry | None:
        ttl = self._ttl_used
        while b._reoffer:
            # Re-offered messages (released or un-held after the browser passed them) are shown
            # only while available: one acquired again goes back to waiting for its release.
            first = b._reoffer[min(b._reoffer)]
            if first.state is _AVAILABLE and not (ttl and self._expired_locked(first)):
                return first
            del b._reoffer[first.id]
            if first.state is _ACQUIRED:
                b._skipped_acquired[first.id] = first
            elif first.state is _HELD:
                b._skipped_held[first.id] = first
        cur = b._last_seen
        assert cur is not None
        nxt = cur.next
        while nxt is not None and (nxt.state is not _AVAILABLE or (ttl and self._expired_locked(nxt))):
            if nxt.state is _HELD:
                b._skipped_held[nxt.id] = nxt  # shown later if it becomes available (see unhold)
            elif nxt.state is _ACQUIRED:
                b._skipped_acquired[nxt.id] = nxt  # shown later if it is released (see release)
            cur = nxt
            nxt = nxt.next
        b._last_seen = cur
        return nxt

    def _no_higher(self, c: QueueConsumer, entry: MessageEntry | None) -> bool:
        """Upstream ``noHigherPriorityWithCredit(c, entry)``: no acquiring consumer of higher priority
        whose target wants work has an available entry it may take and, for ``entry``, has not
        rejected it.  "Wants work" is the target's flag (``QueueConsumer.desired``), as upstream's
        ``consumer.isNotifyWorkDesired()`` (QueueConsumerImpl.java line 196: the target's flag) and
        the model's ``_no_higher`` (F_FLAG); not the consumer's list: between setNotifyWorkDesired's
        two halves the flag is already written and the lists not yet moved, and reading the lists
        there let a lower-priority consumer take an entry the model keeps for the higher one (found
        at thread level, issue 17; spec/consumer-lists.md "Thread level").  While nothing is
        consumer-specific every acquiring consumer has the same next entry, so one higher consumer
        that wants work decides (``_wanting``, kept with the flag: O(levels)); else each one is asked
        (read from the QCM before taking ``Queue._lock``: the lock order puts QCM locks first)."""
        if c.priority == DEFAULT_PRIORITY:
            return True
        wanting = self._wanting
        for lv in self.qcm.levels():
            if lv.priority <= c.priority:
                return True  # no higher consumer's flag says "wants work"
            if wanting.get(lv.priority):
                break
        else:
            # every level is higher than c's (c's own level is gone: a consumer being removed) and
            # none wants work: there is no higher consumer to defer to
            return True
        if not self._excl:
            return False
        higher = []
        for h in self.qcm.all():
            if h.priority <= c.priority:
                break
            if h.acquires and h.id in wanting.get(h.priority, ()):
                higher.append(h)
        if not higher:
            return True
        rb = entry.rejected_by if entry is not None else None
        with self._lock:
            for h in higher:
                if rb is not None and h.id in rb:
                    continue
                if self._next_for_locked(h) is not None:
                    return False
        return True

    def _has_work_for(self, c: QueueConsumer) -> bool:
        """Upstream ``consumerHasAvailableMessages``: an available message c may take and no
        higher-priority acquiring consumer that wants work (and could take one).  (The one hook of
        every notification: the mutation catalogue replaces it.)"""
        if not c.acquires:
            return True
        with self._lock:
            entry = self._next_for_locked(c)
        return entry is not None and self._no_higher(c, entry)

    # ================================================================================================
    # notification rules
    # ================================================================================================
    def _notify_consumer(self, c: QueueConsumer) -> bool:
        return self._try_notify(c) is True

    def _try_notify(self, c: QueueConsumer) -> bool | None:
        """Upstream ``notifyConsumer``.  True: notified; False: it had work but could not be moved to
        NOTIFIED (it moved concurrently); None: it has no work it may take (none, or a higher
        priority holds it back).  Every notification is recorded in ``notifications`` (when
        ``record_events``), whichever call made it."""
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
        """New (or again available) message: every interested browser, then at most one acquirer.
        With consumer-specific availability (groups, rejects) the walk passes over a consumer that
        rejected the entry and goes on past one that has nothing it may take, stopping at the first
        consumer notified or held back from the entry by a higher priority (the model's
        ``_notify_consumers``)."""
        if browsers and self._browsers:
            # Only a browser that has not seen the entry, and only while it is available (the
            # model's ``_notify_consumers``; the reference's release rule, ``_release_locked``).
            # Upstream (AbstractQueue.notifyConsumers) wakes every browser whose ``hasInterest``
            # holds, and ``QueueConsumerImpl.hasInterest`` does not ask whether the browser already
            # browsed the entry: a browser whose pull ran between the enqueue and this notification
            # is woken for nothing (a spurious wake-up, found at thread level, issue 17;
            # spec/consumer-lists.md "Thread level").  Not copied.
            with self._lock:
                unseen = [b for b in self._browsers.values()
                          if entry.state is _AVAILABLE
                          and (entry.id in b._reoffer or entry.id > b._last_seen.id)]  # type: ignore[union-attr]
            for b in unseen:
                if b.state is NodeState.NON_ACQUIRING:
                    self._notify_consumer(b)
        if self._excl:
            for c in self.qcm.interested():
                if entry.state is not _AVAILABLE:
                    break
                rb = entry.rejected_by
                if rb is not None and c.id in rb:
                    continue  # consumer.hasInterest(entry) is false
                r = self._try_notify(c)
                if r is True:
                    break
                if r is not False and not self._no_higher(c, entry):
                    break
            return
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
    # With consumer-specific availability (groups, rejects) they walk on, as upstream.
    def _notify_other_consumers(self, excluded: QueueConsumer | None) -> None:
        excl = self._excl
        for c in self.qcm.interested():
            if self._available <= 0:
                break
            if c is excluded:
                continue
            r = self._try_notify(c)
            if r is True or (r is not False and not excl):
                break

    def _notify_after_loss_of_interest(self) -> None:
        highest_notified = self.qcm.highest_notified_priority()
        excl = self._excl
        for c in self.qcm.interested():
            if highest_notified is not None and c.priority < highest_notified:
                break
            r = self._try_notify(c)
            if r is True or (r is not False and not excl):
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
        a consumer that has been removed: removal may race with its IO thread).

        Returning the id is the send: the acquisition becomes stealable (``makeAcquisitionStealable``)
        and a delete that waited for it ("waiting") completes here, on this thread -- the id is still
        returned (it was sent), and the consumer's later settle finds nothing (``settle_owned``)."""
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
            if c.acquires:
                self._sent(c, entry)
            # Only now, after the send, a credit that ran out is told (setNotifyWorkDesired(false)):
            # the model's IO thread updates its desire after the delivery, before it pulls again
            # (model.py ``_io_steps``, pc START), as upstream's connection IO thread does once the
            # link's credit changed (ConsumerTarget_1_0.updateNotifyWorkDesired).  Told between the
            # acquire and the send, the hand-over to another consumer would come before this
            # consumer's delivery, an order the model does not have (thread level, issue 17).
            c._settle_credit()
            return entry.id
        finally:
            c._deliver_guard.release()

    def _sent(self, c: QueueConsumer, entry: MessageEntry) -> None:
        """The send (``AbstractConsumerTarget.send`` -> ``makeAcquisitionStealable``): from now on a
        delete may steal the acquisition; one that waited for it completes now."""
        with self._lock:
            if entry.state is not _ACQUIRED or entry.owner != c.id:
                return  # released / removed / deleted meanwhile: nothing to mark
            entry.sent = True
            pending = entry.delete_pending
            if pending is None:
                return
            reset = self._take_for_delete_locked(entry, pending)
        self._after_delete(reset)

    def _attempt_delivery(self, c: QueueConsumer) -> MessageEntry | None:
        det = self._det
        groups = self.group_policy is not None
        if det:
            self._point("pull.find", c.id)
        with self._lock:
            entry = self._next_for_locked(c)
        if entry is None:
            return None
        if c.priority != DEFAULT_PRIORITY and not self._no_higher(c, entry):
            return None  # strict priority: a higher-priority consumer wants work
        if not c._allocate_credit():
            return None  # no credit: wait for add_credit (which turns desired back on)
        if det:
            self._point("pull.acquire", c.id)
        with self._lock:
            # ``closed`` re-read under the lock: no acquisition after remove_consumer's release;
            # with groups this section is also the group manager's ``acceptMessage``
            acquired = entry.state is _AVAILABLE and not c.closed
            if acquired and groups and entry.group is not None:
                acquired = self._accept_locked(c, entry)
            if acquired:
                entry.state = _ACQUIRED
                entry.owner = c.id
                entry.sent = False
                self._available -= 1
                if entry.group is not None:
                    self._group_avail[entry.group] -= 1
                c._acquired.add(entry.id)
        if acquired:
            return entry  # the credit's loss of interest is told after the send (deliver_single_message)
        # Lost the race for it (another consumer acquired it first): the credit goes back and the
        # pull ends with nothing, as upstream's AbstractQueue.attemptDelivery (restoreCredit, then
        # NO_MESSAGES; deliverSingleMessage then notifies one *other* consumer while messages
        # remain).  The reference used to look again here; the model ends the pull (``acquire`` ->
        # ``no_message``) and proves no wake-up is lost that way: the winner is between its
        # un-notify and its delivery, so it pulls again (spec/consumer-lists.md "Thread level").
        c._restore_credit()
        return None

    def _accept_locked(self, c: QueueConsumer, entry: MessageEntry) -> bool:
        """``MessageGroupManager.acceptMessage`` for an available entry of a group, under the
        manager's monitor (``Queue._lock``), together with the acquire that follows it: a group
        without a valid consumer is given to ``c``; a group of another valid consumer refuses; a shared
        group counts the acquisition (``Group.add``).  Reference rules: the group is assigned only
        together with a successful acquire (DEV-018: here the acquire cannot fail once the group is
        given, both are one section) and a closed consumer is refused (DEV-019: the caller checked
        ``closed``)."""
        g = entry.group
        owner = self._group_owner.get(g)  # type: ignore[arg-type]
        if owner is not c:
            if owner is not None and self._group_valid_locked(g, owner):  # type: ignore[arg-type]
                return False
            self._group_owner[g] = c  # type: ignore[index]
        if self.group_policy == "shared":
            entry.counted = True
            self._group_count[g] = self._group_count.get(g, 0) + 1  # type: ignore[index]
        return True

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
        return entry  # the credit's loss of interest is told after the send (deliver_single_message)

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
            rejected_by = {str(e.id): _sorted_ids(e.rejected_by)
                           for e in sorted(self._entries.values(), key=lambda e: e.id) if e.rejected_by}
            delete_waiting = sorted(self._delete_waiting)
            groups: dict[str, Hashable | None] = {}
            if self.group_policy is not None:
                for g in sorted(set(self._group_avail) | set(self._group_owner)):
                    owner = self._group_owner.get(g)
                    groups[str(g)] = owner.id if owner is not None else None
        with self._log_lock:
            notifications = list(self.notifications)
        lists = self.qcm.describe()
        return {
            "consumers": consumers,
            "messages": messages,
            **lists,
            "available_count": available,
            "notifications": notifications,
            "rejected_by": rejected_by,
            "delete_waiting": delete_waiting,
            "groups": groups,
        }

    def check_invariants(self) -> list[str]:
        """The queue's invariants, checked from the entries' own states in one ``Queue._lock``
        section (tests and stress harnesses; O(entries on the list + consumers)).  Returns the
        violations found (empty: none):

        * ``m in c._acquired`` iff ``m`` is ACQUIRED with owner ``c``; the available counts (total and
          per group) match the entries;
        * message groups: no two consumers hold entries of one group (shared), no consumer but a
          group's assigned one holds entries of it while that one is registered (assigned), a shared
          group's count is the number of its counted entries, all held by its consumer;
        * a delete waits only for a HELD or unsent ACQUIRED entry (else it should have completed)."""
        problems: list[str] = []
        with self._lock:
            avail = 0
            gavail: dict[int, int] = {}
            holders: dict[int, set[Hashable]] = {}
            counted: dict[int, int] = {}
            seen_acq: dict[Hashable, set[int]] = {}
            e = self._first.next
            while e is not None:
                st = e.state
                if st is _AVAILABLE:
                    avail += 1
                    if e.group is not None:
                        gavail[e.group] = gavail.get(e.group, 0) + 1
                elif st is _ACQUIRED:
                    seen_acq.setdefault(e.owner, set()).add(e.id)
                    if e.group is not None:
                        holders.setdefault(e.group, set()).add(e.owner)
                if e.counted:
                    counted[e.group] = counted.get(e.group, 0) + 1  # type: ignore[index]
                    if st is not _ACQUIRED or self._group_owner.get(e.group) is None \
                            or self._group_owner[e.group].id != e.owner:  # type: ignore[index]
                        problems.append(f"message {e.id}: counted by group {e.group} but {st.name} by {e.owner!r}")
                if e.delete_pending is not None and not (st is _HELD or (st is _ACQUIRED and not e.sent)):
                    problems.append(f"message {e.id}: a delete waits for it, but it is {st.name} (sent={e.sent})")
                e = e.next
            if avail != self._available:
                problems.append(f"available count {self._available}, but {avail} entries are AVAILABLE")
            for g, n in self._group_avail.items():
                if n != gavail.get(g, 0):
                    problems.append(f"group {g}: available count {n}, but {gavail.get(g, 0)} entries are AVAILABLE")
            for cid, c in self._consumers.items():
                if c._acquired != seen_acq.get(cid, set()):
                    problems.append(f"consumer {cid!r}: acquired set {sorted(c._acquired)} but owns "
                                    f"{sorted(seen_acq.get(cid, set()))}")
            for g, hs in holders.items():
                owner = self._group_owner.get(g)
                if self.group_policy == "shared" and len(hs) > 1:
                    problems.append(f"group {g}: entries held by {sorted(hs, key=repr)} at once")
                if self.group_policy == "assigned" and owner is not None and not owner.closed:
                    others = {h for h in hs if h != owner.id}
                    if others:
                        problems.append(f"group {g}: assigned to {owner.id!r} but entries held by {sorted(others, key=repr)}")
            if self.group_policy == "shared" and counted != self._group_count:
                problems.append(f"shared group counts {self._group_count} but counted entries {counted}")
        return problems

    def message_state(self, msg_id: int) -> MessageState:
        return self._entry(msg_id).state

    def consumers(self) -> list[QueueConsumer]:
        return list(self._consumers.values())
