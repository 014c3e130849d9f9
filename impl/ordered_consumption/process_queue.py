"""The process queue: a push consumer's local cache of one message queue (seed 001, "Push consumer").

What it is
----------
Seed 001: "队列与 process queue 这个结构是一一对应的" -- one process queue per message queue; received
messages are cached in it and consumption takes them from it.  Upstream (the generation the seed
describes): ``java/.../impl/consumer/ProcessQueueImpl.java`` at commit 014fa5752d2a, with *pending*
messages (cached, not yet taken by the dispatcher) and *in-flight* messages (taken, not yet erased).

* ``cache(messages)``: pending, in offset order.  A message that is already pending (a redelivery that
  overtook the consumption of its previous delivery) is not cached twice: the pending entry takes the
  new delivery's handle and attempt (the old handle is invalid anyway).
* A redelivery of a message whose earlier copy is still in consumption or settlement (taken and not
  yet let go: the listener, FIFO's retry delay, the ack / change-invisible / DLQ call) *waits behind
  that copy*: it is cached (it counts against the cache limits) but cannot be taken until the copy is
  let go (``let_go``), which moves it to the pending messages of its process queue and returns that
  queue so that the consumer signals its dispatcher.  Otherwise one message would be in consumption
  twice at once: standard mode erases a message once consumed (seed 普通 step 3) but still settles it,
  and a FIFO redelivery after a rebalance reaches a new process queue with a lock of its own.  The
  copies in consumption are a ``HeldMessages`` table that belongs to the **consumer** (shared by all
  its process queues, like the outcome memo), so the wait survives a rebalance: a redelivery cached
  by the process queue created when the message queue is given back still waits for the copy that
  the dropped one is settling.  A newer delivery of a message already waiting replaces it (as for a
  pending one); a waiting redelivery is discarded with its process queue on ``drop()``.  (The model's
  ``pending`` delivery: model/ordered_consumption/model.py ``_cache`` / ``_let_go``.)
* Cache limits (seed "检查客户端本地缓存的消息是否超出限制"; upstream ``isCacheFull`` and
  ``getReceptionBatchSize``): the cache is full when it holds at least ``count_threshold`` messages or
  ``bytes_threshold`` body bytes (pending + in flight); the next receive asks for
  ``min(max(count_threshold - cached, 1), server_batch)`` messages.  So the count never exceeds its
  threshold and the bytes exceed theirs by less than one batch.  ``high_water`` records the largest
  count and byte size ever held (checked by the stress).
* Standard mode: ``try_take`` moves the earliest pending message in flight (seed 普通 step 2).
* FIFO mode: ``try_lock`` / ``unlock`` is the seed's process-queue lock (顺序 steps 2 and 9), and
  ``take_earliest`` the earliest pending message (顺序 steps 2-3).
* ``erase(entry)`` removes a taken message from the cache and wakes a receive loop waiting for room
  (seed 普通 step 3: "然后将其从本地缓存中擦除").
* ``drop()``: the message queue was taken away by a rebalance: pending messages are discarded (their
  invisible time will expire and the server redelivers them), the receive loop ends, consumption
  already under way finishes and settles normally (its handle is still valid).
* ``memo``: FIFO outcomes that could not be reported.  When a FIFO message's ack (or DLQ forward)
  ends with a non-retriable answer, the consumption result is known but the server does not have it;
  if the server redelivers the same message, the dispatcher settles the new delivery with that
  outcome instead of consuming the message again (see ``push_consumer``: the seed's "repeat until
  success" carried over to the next receipt handle).  The memo is an ``OutcomeMemo`` that belongs
  to the **consumer** and is shared by all its process queues (spec/deviations.md DEV-021, the
  model's ``memo_survives_drop = True``): a process queue dropped by a rebalance and created again
  while a message is in flight finds the outcome there, so the listener never consumes a message
  more than ``max_attempts`` times.  A process queue built without a shared memo owns one and clears
  it on ``drop()`` (the model's variant ``push-fifo-memo-per-queue``, kept as the consumer's switch
  ``memo_survives_drop=False`` to show the counterexample on real threads).  An entry is obsolete
  once a later message of the same message group of the same queue arrives (the server delivers it
  only after the earlier one was settled), checked when such a message is cached and again when it
  is taken (an outcome remembered after the later message was cached is pruned then) -- unless a
  copy of the earlier message is still cached in the queue (delivered again before the server
  dead-lettered it): the outcome settles that copy when it is taken, instead of a consumption the
  model does not allow -- and the memo is bounded (``MEMO_LIMIT``, oldest dropped first).

Concurrency argument
--------------------
One lock (``lock``, condition ``cond``) protects every field: pending heap and index, in-flight set,
counters, high-water marks, lock flag and dropped flag (the memo and the held-messages table have
their own locks, below).  The
receive loop (the only thread that caches into this queue), the dispatcher and the consumption
workers all go through the methods below, each one critical section; none of them calls out (no RPC,
no listener, no other lock but the memo's) while holding ``lock``.  ``cond`` is notified on every
erase and on drop, which is what a receive loop waiting for room waits for (no polling).  Lock
order: process-queue lock -> the consumer's table lock (read by the receive loop for the thresholds)
-> clock / cancel internals; and process-queue lock -> the memo's lock (``OutcomeMemo.lock``, a
leaf: pruning runs under the process queue's lock, and the memo never calls out); and process-queue
lock -> ``HeldMessages.lock`` (a leaf: ``cache`` asks it, under the queue's lock, whether a copy is
held and records the waiting redelivery in one critical section of the table, and ``_pop_locked``
records the copy it takes).  ``let_go`` takes the table's lock alone, then the lock of the queue the
waiting redelivery is in, never both at once.  Why a waiting redelivery is never forgotten: the check
"held?" and the record "waiting behind it" are one critical section of the table, and so are "release
the copy" and "hand over what waits behind it"; so a redelivery cached concurrently with the copy's
release either sees the copy held (and is handed over by that release) or sees it released (and is
pending at once).  Nothing else is taken under it.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Any

from conq.impl.ordered_consumption.clock import Cancel
from conq.impl.ordered_consumption.protocol import MessageQueue, ReceivedMessage
from conq.impl.scheduling import REAL

__all__ = ["MEMO_LIMIT", "Entry", "HeldMessages", "OutcomeMemo", "ProcessQueue"]

MEMO_LIMIT = 4096


class Entry:
    """One cached message (the latest delivery of it this queue got)."""

    __slots__ = ("message", "seq", "size", "state")

    def __init__(self, message: ReceivedMessage, seq: int) -> None:
        self.message = message
        self.size = len(message.body)
        self.seq = seq  # tie-break in the heap: two deliveries of one offset, older first
        # pending -> inflight -> erased; pending -> discarded; waiting -> pending (its copy let go) or
        # waiting -> discarded (its process queue dropped)
        self.state = "pending"

    def __repr__(self) -> str:
        return f"Entry({self.message.message_id}, attempt={self.message.delivery_attempt}, {self.state})"


class OutcomeMemo:
    """FIFO outcomes (``'ack'`` / ``'dlq'`` and the attempt they were decided at) that the server did
    not accept, by message id; shared by a consumer's process queues (see the module docstring).

    ``lock`` (a leaf) protects both tables; ``_by_slot`` indexes the entries by (message queue,
    message group) so that pruning costs what it removes, not the size of the memo."""

    def __init__(self, *, sched: Any = REAL, limit: int = MEMO_LIMIT) -> None:
        self.lock = sched.lock("outcome-memo")
        self.limit = limit
        # message id -> (outcome, message group, message queue, offset, attempt)
        self._entries: OrderedDict[str, tuple[str, str | None, MessageQueue, int, int]] = OrderedDict()
        self._by_slot: dict[tuple[MessageQueue, str | None], set[str]] = {}

    def __len__(self) -> int:
        with self.lock:
            return len(self._entries)

    def _discard_locked(self, message_id: str) -> tuple | None:
        got = self._entries.pop(message_id, None)
        if got is not None:
            slot = (got[2], got[1])
            ids = self._by_slot.get(slot)
            if ids is not None:
                ids.discard(message_id)
                if not ids:
                    del self._by_slot[slot]
        return got

    def remember(self, m: ReceivedMessage, outcome: str, attempt: int) -> None:
        with self.lock:
            self._discard_locked(m.message_id)
            self._entries[m.message_id] = (outcome, m.group, m.queue, m.offset, attempt)
            self._by_slot.setdefault((m.queue, m.group), set()).add(m.message_id)
            while len(self._entries) > self.limit:
                self._discard_locked(next(iter(self._entries)))

    def recall(self, m: ReceivedMessage) -> tuple[str, int] | None:
        """The outcome remembered for this message and the attempt it was decided at (removed)."""
        with self.lock:
            got = self._discard_locked(m.message_id)
        return None if got is None else (got[0], got[4])

    def prune(self, m: ReceivedMessage, keep: Any = frozenset()) -> None:
        """Forget outcomes of earlier messages of ``m``'s group in ``m``'s queue (they were settled),
        except those of the message ids in ``keep``: a copy of such a message is still cached, and
        its remembered outcome settles it when it is taken (the server dead-lettered or settled the
        message after delivering that copy: consumed again, it would reach the listener once more)."""
        with self.lock:
            ids = self._by_slot.get((m.queue, m.group))
            if not ids:
                return
            for k in [k for k in ids if self._entries[k][3] < m.offset and k not in keep]:
                self._discard_locked(k)

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()
            self._by_slot.clear()

    def of_queue(self, mq: MessageQueue) -> dict[str, tuple[str, str | None, int, int]]:
        """This queue's entries: message id -> (outcome, message group, offset, attempt)."""
        with self.lock:
            return {k: (o, g, off, a) for k, (o, g, q, off, a) in self._entries.items() if q == mq}


class HeldMessages:
    """The messages a consumer holds -- taken for consumption and not yet let go -- by message id,
    and for each the redelivery (its entry and process queue) waiting behind it; shared by the
    consumer's process queues (see the module docstring).  ``lock`` is a leaf."""

    def __init__(self, *, sched: Any = REAL) -> None:
        self.lock = sched.lock("held-messages")
        self._held: dict[str, Entry] = {}
        self._waiting: dict[str, tuple[ProcessQueue, Entry]] = {}

    def __len__(self) -> int:
        with self.lock:
            return len(self._held)

    def hold(self, e: Entry) -> None:
        with self.lock:
            self._held[e.message.message_id] = e

    def wait_behind(self, message_id: str, pq: ProcessQueue, e: Entry) -> bool:
        """If a copy of the message is held, record ``e`` (in ``pq``) as waiting behind it: True."""
        with self.lock:
            if message_id not in self._held:
                return False
            self._waiting[message_id] = (pq, e)
            return True

    def release(self, e: Entry) -> tuple[ProcessQueue, Entry] | None:
        """``e`` is let go: what waited behind it (if ``e`` was the copy held)."""
        mid = e.message.message_id
        with self.lock:
            if self._held.get(mid) is not e:
                return None
            del self._held[mid]
            return self._waiting.pop(mid, None)


class ProcessQueue:
    """See the module docstring."""

    def __init__(self, mq: MessageQueue, cancel: Cancel, *, sched: Any = REAL,
                 memo: OutcomeMemo | None = None, held: HeldMessages | None = None) -> None:
        self.mq = mq
        self.cancel = cancel  # cancelled on drop / consumer shutdown: ends long polls and back-offs
        self.lock = sched.lock(f"pq {mq}")
        self.cond = sched.condition(self.lock, f"pq {mq}")
        self._heap: list[tuple[int, int, Entry]] = []
        self._pending: dict[str, Entry] = {}
        self._inflight: set[Entry] = set()
        self.count = 0
        self.bytes = 0
        self.high_water = (0, 0)
        self.locked = False
        self.dropped = False
        # the consumer's shared memo, or one of its own (cleared on drop: the per-queue variant)
        self._owns_memo = memo is None
        self.outcomes: OutcomeMemo = memo if memo is not None else OutcomeMemo(sched=sched)
        # the consumer's table of messages in consumption, or one of its own (a queue built alone)
        self.held: HeldMessages = held if held is not None else HeldMessages(sched=sched)
        self.received = 0
        self.full_waits = 0
        self._seq = 0

    def __str__(self) -> str:  # names the queue in a scheduler's log (a seed replays the same log)
        return f"pq {self.mq}"

    # ------------------------------------------------------------------ receive side
    def cached(self) -> tuple[int, int]:
        with self.lock:
            return self.count, self.bytes

    def is_full(self, count_threshold: int, bytes_threshold: int) -> bool:
        with self.lock:
            return self.count >= count_threshold or self.bytes >= bytes_threshold

    def batch_size(self, count_threshold: int, server_batch: int) -> int:
        with self.lock:
            return min(max(count_threshold - self.count, 1), server_batch)

    def cache(self, messages: list[ReceivedMessage]) -> int:
        """Cache received messages; returns how many were taken in (0 if dropped): new entries, newer
        deliveries of entries already cached, and redeliveries waiting behind a copy in consumption
        (each is news for the dispatcher: seed step 2 notifies it after every receive)."""
        with self.lock:
            if self.dropped:
                return 0
            for m in messages:
                self.received += 1
                if m.group is not None:
                    self._prune_memo_locked(m)
                old = self._pending.get(m.message_id)
                if old is not None:
                    # the newer delivery of a message still pending or waiting: keep one entry
                    old.message = m
                    continue
                self._seq += 1
                e = Entry(m, self._seq)
                self._pending[m.message_id] = e
                if self.held.wait_behind(m.message_id, self, e):
                    e.state = "waiting"  # an earlier copy is in consumption or settlement
                else:
                    heapq.heappush(self._heap, (m.offset, e.seq, e))
                self.count += 1
                self.bytes += e.size
            c, b = self.high_water
            if self.count > c or self.bytes > b:
                self.high_water = (max(c, self.count), max(b, self.bytes))
        return len(messages)

    # ------------------------------------------------------------------ consumption side
    def _pop_locked(self) -> Entry | None:
        while self._heap:
            _, _, e = heapq.heappop(self._heap)
            if e.state == "pending":
                del self._pending[e.message.message_id]
                e.state = "inflight"
                self._inflight.add(e)
                self.held.hold(e)  # in consumption until let_go
                if e.message.group is not None:
                    self._prune_memo_locked(e.message)
                return e
        return None

    def try_take(self) -> Entry | None:
        """Standard mode: the earliest pending message, moved in flight (None if none or dropped)."""
        with self.lock:
            if self.dropped:
                return None
            return self._pop_locked()

    def try_lock(self) -> bool:
        """FIFO: take the process-queue lock; False if it is held (or the queue was dropped)."""
        with self.lock:
            if self.locked or self.dropped:
                return False
            self.locked = True
            return True

    def take_earliest(self) -> Entry | None:
        """FIFO, lock held: the earliest pending message (None if none or dropped)."""
        with self.lock:
            if not self.locked:
                raise RuntimeError("take_earliest without the process-queue lock")
            if self.dropped:
                return None
            return self._pop_locked()

    def unlock(self) -> None:
        with self.lock:
            if not self.locked:
                raise RuntimeError("unlock of a process queue that is not locked")
            self.locked = False

    def erase(self, e: Entry) -> None:
        with self.lock:
            if e.state != "inflight":
                return
            e.state = "erased"
            self._inflight.discard(e)
            self.count -= 1
            self.bytes -= e.size
            self.cond.notify_all()

    def let_go(self, e: Entry) -> ProcessQueue | None:
        """The consumer is done with ``e`` (its consumption and settlement are over, whatever the
        answer): a redelivery waiting behind it becomes pending in its process queue, which is
        returned (to be signalled), or None."""
        got = self.held.release(e)
        if got is None:
            return None
        pq, w = got
        return pq if pq._promote(w) else None

    def _promote(self, e: Entry) -> bool:
        with self.lock:
            if e.state != "waiting" or self.dropped:
                return False  # discarded with its process queue
            e.state = "pending"
            heapq.heappush(self._heap, (e.message.offset, e.seq, e))
            return True

    def drop(self) -> None:
        """The message queue is no longer ours: discard pending (and waiting) messages, end the
        receive loop."""
        with self.lock:
            if self.dropped:
                return
            self.dropped = True
            for e in self._pending.values():
                e.state = "discarded"
                self.count -= 1
                self.bytes -= e.size
            self._pending.clear()
            self._heap.clear()
            if self._owns_memo:
                self.outcomes.clear()  # the per-queue variant: the outcomes go with the queue
            self.cond.notify_all()
        self.cancel.cancel()

    def inflight(self) -> int:
        """Messages taken for consumption and not yet erased."""
        with self.lock:
            return len(self._inflight)

    def waiting(self) -> int:
        """Redeliveries cached behind a copy still in consumption or settlement."""
        with self.lock:
            return sum(1 for e in self._pending.values() if e.state == "waiting")

    def idle(self) -> bool:
        with self.lock:
            return self.count == 0 and not self.locked

    # ------------------------------------------------------------------ FIFO outcome memo
    @property
    def memo(self) -> dict[str, tuple[str, str | None, int, int]]:
        """This queue's remembered outcomes (a snapshot): message id -> (outcome, group, offset, attempt)."""
        return self.outcomes.of_queue(self.mq)

    def remember(self, m: ReceivedMessage, outcome: str, attempt: int) -> None:
        """A FIFO outcome ('ack' or 'dlq', decided at ``attempt``) the server did not accept."""
        with self.lock:
            if self.dropped and self._owns_memo:
                return  # the per-queue variant: a dropped queue's outcomes are gone
        self.outcomes.remember(m, outcome, attempt)

    def recall(self, m: ReceivedMessage) -> tuple[str, int] | None:
        """The outcome remembered for this message and the attempt it was decided at (removed)."""
        return self.outcomes.recall(m)

    def _prune_memo_locked(self, m: ReceivedMessage) -> None:
        self.outcomes.prune(m, keep=self._pending)  # the ids with a copy still cached here
