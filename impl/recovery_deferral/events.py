"""The values that cross the concurrent listener: feed events, error events, recovery contexts,
producer statuses, and the allocation of an event to a task queue.

Sources: seed 004 "Implementation" (each event becomes a task, a hash of the event id picks the
queue), "Deferring of ProducerUp" (the RecoveryContext is the pair producer id + request id; the
statuses that count as a ProducerUp), "Configuration" (``TaskAllocator``: a Task ID is a simple
wrapper around the event id).  Upstream: sportradar/UnifiedOddsSdkJava pull request 28,
``sdk-core/.../listener/concurrent/`` -- ``global/recovery/RecoveryContext.java``,
``global/ProducerStatusQuery.java``, ``oddsfeed/task/TaskID.java``, ``oddsfeed/task/TaskAllocator.java``.

Everything here is immutable; nothing here takes a lock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "DOWN_STATUSES",
    "NONE_CONTEXT",
    "UP_STATUSES",
    "ErrorEvent",
    "FeedEvent",
    "RecoveryContext",
    "context_of",
    "is_up_status",
    "queue_index",
    "stable_hash",
]


class RecoveryContext(NamedTuple):
    """(producer id, request id): what the tracker counts by and what a deferred ProducerUp waits
    for (seed 004 "Deferring of ProducerUp": "The Request ID, together with the Producer ID
    comprises a RecoveryContext")."""

    producer_id: int
    request_id: int

    @property
    def valid(self) -> bool:
        return self.producer_id > 0 and self.request_id > 0

    def __str__(self) -> str:
        return f"p{self.producer_id}/r{self.request_id}" if self.valid else "NONE"


#: Live events carry no request id; they, and anything else without a valid context, are counted
#: under this shared context that no ProducerUp ever waits on (upstream ``RecoveryContext.none()``,
#: REFERENCE.md §3: "ids not > 0 go under a shared NONE context").
NONE_CONTEXT = RecoveryContext(0, 0)


def context_of(producer_id: int | None, request_id: int | None) -> RecoveryContext:
    if producer_id is not None and request_id is not None and producer_id > 0 and request_id > 0:
        return RecoveryContext(producer_id, request_id)
    return NONE_CONTEXT


@dataclass(frozen=True, slots=True)
class FeedEvent:
    """One sport-event message of a producer's stream (odds change, bet stop, bet settlement, ...).

    ``event_id`` is the sport event (match) the message is about: the allocation key.
    ``request_id`` is the recovery request that made the feed resend it (0 = a live message).
    ``seq`` is the message's position in its producer's stream (the simulator numbers them; the
    listener never reads it).
    """

    event_id: int | str
    producer_id: int
    request_id: int = 0
    kind: str = "odds_change"
    seq: int = 0
    payload: Any = None

    @property
    def context(self) -> RecoveryContext:
        return context_of(self.producer_id, self.request_id)


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """An error the SDK reports to the feed listener: an unparsable message (about a known sport
    event or not) or an exception a customer callback left unhandled.

    ``event_id`` is None when the error is about no sport event (upstream ``TaskID.none()``).
    """

    producer_id: int
    request_id: int = 0
    event_id: int | str | None = None
    kind: str = "unparsable_message"
    seq: int = 0
    payload: Any = None

    @property
    def context(self) -> RecoveryContext:
        return context_of(self.producer_id, self.request_id)


# -- producer statuses (upstream ProducerStatusReason names, spelling included) ---------------------

#: seed 004: "The onProducerStatusChange() method is considered to be a ProducerUp when the status
#: parameter is one of the following" (``ProducerStatusQuery.isProducerUp``).
UP_STATUSES = frozenset({"FirstRecoveryCompleted", "ProcessingQueDelayStabilized", "ReturnedFromInactivity"})
#: the other statuses the SDK reports; every one of them says the producer is *not* up to date.
DOWN_STATUSES = frozenset({"ProcessingQueueDelayViolation", "AliveIntervalViolation", "PermanentlyUnavailable", "Other"})


def is_up_status(status: Any) -> bool:
    return str(getattr(status, "value", status)) in UP_STATUSES


# -- allocation (TaskAllocator) ----------------------------------------------------------------------


def stable_hash(event_id: int | str | bytes) -> int:
    """The task id's hash: the same value for the same event id in every run and every process.

    An integer id hashes to itself (upstream's ids are longs and Java's ``Long.hashCode`` is the
    identity for the ids that occur), so consecutive match ids spread evenly over the queues.  A
    string id (``"sr:match:123"``) hashes through BLAKE2b, not ``hash()``, whose value changes per
    process (PYTHONHASHSEED).  The result may be negative: the caller must use a floor modulo.
    """
    if isinstance(event_id, bool):
        raise TypeError("an event id is an int, str or bytes, not a bool")
    if isinstance(event_id, int):
        return event_id
    if isinstance(event_id, str):
        event_id = event_id.encode()
    if isinstance(event_id, bytes):
        return int.from_bytes(hashlib.blake2b(event_id, digest_size=8).digest(), "big", signed=True)
    raise TypeError(f"an event id is an int, str or bytes, got {type(event_id).__name__}")


def queue_index(event_id: int | str | bytes, queues: int) -> int:
    """Which of ``queues`` task queues an event goes to: ``hash mod queues`` with Python's floor
    modulo, so always in ``0 .. queues-1`` (spec/deviations.md DEV-008: upstream's Java ``%`` gives a
    negative index for a negative hash and throws on the feed thread).  A pure function of the
    event id: every message of one match lands on one queue (DEMUX-027), which is what keeps a match
    in order."""
    return stable_hash(event_id) % queues
