"""The thin client's push consumer: seed 001 "Push consumer", standard (普通) and FIFO (顺序) modes.

What it is
----------
Seed 001 splits a message's way from the server to the listener into two processes, both per
message queue / process queue (``process_queue.ProcessQueue``):

**Receive and cache** (消息的接收与缓存): one receive loop per process queue (a thread).

1. check the cache: while it is at its count or byte threshold, wait (woken by every erase, no
   polling) -- seed step 3 "等待一段时间然后重复执行本步骤";
2. receive (``receive_message``, long polling) at most ``min(max(threshold - cached, 1), batch)``
   messages (upstream ``ProcessQueueImpl.getReceptionBatchSize``);
3. cache them and notify the dispatcher (seed step 2); repeat.

A failed receive (the seed describes only the successful one) waits ``receive_retry_delay`` (upstream
``RECEIVE_LATER_DELAY``) or, when throttled, the back-off the server chose, then goes back to 1.

**Consumption**, driven by the dispatcher (one thread, ``_Dispatcher``) that receive loops and
finished consumptions signal, and a pool of ``consumption_threads`` workers.  The mode is the consumer
group's metadata (``query_settings``), not a client option (seed: "消费模式由具体的 consumer group
元数据决定").

* Standard (普通消费模式): the dispatcher takes cached messages until the cache has none (step 2) and
  hands each to the pool; a worker consumes it, erases it from the cache (step 3), then acks it on
  success or changes its invisible duration to the retry policy's delay on failure (step 4).  One
  call, no retry (DEV-006; ``standard_settle_retry="until_ok"`` is upstream's retry every
  ``settle_retry_delay`` until OK or a non-retriable answer), erased right after consumption (DEV-005;
  ``evict_at="settled"`` is upstream's order).  The server dead-letters after the maximum number of
  deliveries; the client never does in this mode.
* FIFO (顺序消费模式): the dispatcher locks the process queue (step 2; if the lock is held it stops:
  the holder signals when it unlocks), takes the earliest cached message (step 3; none: unlock and
  stop) and hands it to the pool.  The worker consumes it (step 4); on failure below the maximum it
  waits the retry policy's delay and consumes it again with attempt + 1 (steps 5, 7); on success it
  acks (step 6), at the maximum it forwards the message to the dead-letter queue (step 8), each
  repeated until the server confirms; then it erases the message, unlocks the process queue and
  signals the dispatcher (step 9).  The attempt the listener sees is the server's delivery attempt
  plus the local re-consumptions (REFERENCE.md section 2); dead-lettering happens at attempt =
  ``max_attempts`` (the model's reference; the literal "exceeds" is the model's
  ``push-fifo-dlq-exceeds`` variant, which consumes once too often).

A listener that raises, or returns anything but ``ConsumeResult.SUCCESS``, has failed; the worker
goes on (a listener cannot stall the queue by raising).

Reference choices where seed 001 cannot terminate or is silent (spec/deviations.md)
---------------------------------------------------------------------------------
* **C1 (DEV-020): "repeat until success" ends on a non-retriable answer.**  FIFO steps 6 and 8 say
  to repeat the ack / the DLQ forward until it succeeds.  After ``INVALID_RECEIPT_HANDLE`` or ``MESSAGE_NOT_FOUND``
  (the delivery's invisible time ran out, or a lost answer hid that the first request had already
  settled the message) no repetition can ever succeed, and the process queue would stay locked for
  ever.  The reference repeats only after retriable answers (timeouts, unavailable, internal errors:
  after ``settle_retry_delay``, upstream's 100 ms; throttling: after the server's back-off) and stops
  at the first non-retriable one, like upstream (``ProcessQueueImpl`` at 014fa5752d2a: "invalid
  receipt handle, forgive to retry").  The loop also ends when the consumer shuts down.
* **C2 (DEV-021): the outcome carries over to the redelivery, across a rebalance.**  When C1 gives
  up, the consumption result is remembered by the *consumer* (``process_queue.OutcomeMemo``, shared
  by all its process queues).  If the server redelivers that message, the new
  delivery is acked (or dead-lettered) with its new receipt handle without being consumed again: the
  seed's "until success" continues on the next handle.  The memo survives a dropped process queue
  (the model's reference, ``memo_survives_drop = True``): a queue taken away and given back while
  the message is in flight still finds the outcome, so the listener consumes a message at most
  ``max_attempts`` times across redeliveries and rebalances, and a success is never re-consumed.
  ``memo_survives_drop=False`` keeps the memo per process queue (the model's variant
  ``push-fifo-memo-per-queue``, which consumes ``max_attempts + 1`` times).  After a restart of the
  consumer, or a queue given to another consumer, the memo is not there and the redelivery is
  consumed again (at-least-once), with attempts counted from the server's count.
* **C3 (DEV-022, DEV-023): FIFO order after C1.** When C1 gives up, the process queue is unlocked
  and its next message consumed.  Per message group the order still holds, because the broker never
  delivers a group's next message while an earlier one is unsettled; but the seed's order between
  two messages of one *queue* in different groups cannot be kept without blocking the queue until
  the earlier message is redelivered, which never happens if it was in fact settled.  The reference
  guarantees FIFO per message group under every answer, and per queue when no non-retriable answer
  occurs.
* **C4 (DEV-024): a dropped process queue (rebalance).**  Its cached messages are discarded (the server
  redelivers them when their invisible time expires); a consumption already under way finishes, and
  its ack / DLQ is still repeated until the server confirms (upstream gives up retries of a dropped
  queue; the handle is still valid, so giving up would only delay the group).  Its receive loop's
  long poll is cancelled, and a cancelled receive takes nothing; only a batch the broker handed out
  before the cancellation and that arrives after the drop is abandoned to its invisible time
  (``stats["abandoned"]``).
* **C5 (DEV-025): shutdown** stops receive loops, the dispatcher and the retry loops; messages taken but not
  settled are redelivered by the server when their invisible time expires.
* **C6: one copy of a message in consumption at a time, per consumer.**  A message's invisible time
  can run out while the client still consumes or settles it (a slow listener, FIFO's local retries,
  an ack still on its way), and the server then redelivers it.  Standard mode has already erased the
  message from the cache (seed 普通 step 3), and after a rebalance a FIFO redelivery reaches a new
  process queue with a lock of its own; handed to a worker at once, the redelivery would be consumed
  while the earlier copy is still being consumed or settled.  The reference caches the redelivery
  *behind* that copy (``process_queue.HeldMessages``, kept by the consumer across rebalances, like
  the memo): it counts against the cache limits, is not taken, and becomes pending -- its process
  queue signalled -- when the earlier copy is let go (its task's end: settled, given up, or its one
  settle call made), so it is consumed (or, FIFO, settled from the memo) after it, never beside it.
  The model's ``pending`` delivery (model/ordered_consumption/model.py ``_cache`` / ``_let_go``);
  the mutant ``redelivery-overtakes-settlement`` is the old dispatch.

Concurrency argument
--------------------
Threads: one receive loop per process queue, the dispatcher, ``consumption_threads`` workers, an
optional rebalance thread, and callers of ``start``/``rebalance``/``shutdown``.  Locks:

* ``_lock``: the process-queue table, the thread handles, the thresholds' divisor, the closing flag.
* each ``ProcessQueue.lock``: that queue's cache and lock flag (see ``process_queue``);
  ``_memo.lock`` (``OutcomeMemo``): the remembered FIFO outcomes, a leaf; ``_held.lock``
  (``HeldMessages``): the messages in consumption and the redeliveries waiting behind them (C6), a
  leaf (its argument is in ``process_queue``).
* ``_Dispatcher._lock``: the set of signalled process queues; ``_Pool._lock``: the task deque;
  ``_stats_lock``: counters.  All three are leaves.
* Lock order: process-queue lock -> ``_lock`` (a receive loop reads the thresholds while it holds its
  queue's lock); ``_lock`` is never held while a process-queue lock is taken (``rebalance`` drops and
  notifies queues after releasing it), and everything else is a leaf.  No lock is held while calling
  the broker, the listener or the clock's sleep; a receive loop waits for room on its own process
  queue's condition (released while waiting).

Why FIFO consumption is serial per process queue: ``try_lock`` sets ``locked`` under the queue's lock,
only the dispatcher calls it, and only the worker that got the message clears it (``unlock`` in a
``finally``), after the settle loop; so between a lock and its unlock exactly one message of the queue
is in consumption.  Why no wake-up is lost: a signal is recorded in the dispatcher's set under its
lock before the dispatcher can sleep on it; a message cached while the queue is locked is taken after
the holder's unlock, because the unlock is followed by a signal; a receive loop waiting for room is
notified by every erase and by drop/cancel, under the process queue's lock it waits on.

Interleaving points (``sched.point``, ``conq.impl.scheduling``): no-ops on real threads; at the model's
thread steps that no request or listener call already separates, so that the thread level
(conformance/ordered_consumption/thread_steps.py) can stop a thread there and run others first:
``dispatch.locked`` (FIFO: the dispatcher holds the lock and has not taken yet, the model's ``take``
next), ``dispatch.taken`` (standard: after each message the dispatcher took, one model ``dispatch``
step each), ``consume.remembered`` (C2: a redelivery settled from the memo, before its settle request)
and ``fifo.unlock`` (the worker let go of its message and has not unlocked yet, the model's
``unlock`` next).  None is inside a critical section.  (A receive loop woken with room, and a
back-off that is over, are waits on the clock: the thread level holds them there.)
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

from conq.impl.ordered_consumption.clock import Cancel, RealClock
from conq.impl.ordered_consumption.process_queue import Entry, HeldMessages, OutcomeMemo, ProcessQueue
from conq.impl.ordered_consumption.protocol import (
    ConsumeResult,
    GroupSettings,
    MessageQueue,
    ReceivedMessage,
    RpcError,
)
from conq.impl.scheduling import REAL

__all__ = ["PushConsumer"]

log = logging.getLogger(__name__)

Listener = Callable[[ReceivedMessage], Any]


class _Pool:
    """The consumption thread pool: ``n`` workers over one task deque."""

    def __init__(self, n: int, sched: Any, name: str) -> None:
        if n < 1:
            raise ValueError("at least one consumption thread")
        self._lock = sched.lock(name)
        self._cond = sched.condition(self._lock, name)
        self._tasks: deque = deque()
        self._closing = False
        self.discarded = 0
        self.errors: list[BaseException] = []
        self.threads = [sched.spawn(self._work, f"{name}-{i}") for i in range(n)]

    def submit(self, fn: Callable[[], None]) -> bool:
        with self._lock:
            if self._closing:
                return False
            self._tasks.append(fn)
            self._cond.notify()
            return True

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._tasks and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                fn = self._tasks.popleft()
            try:
                fn()
            except Exception as exc:  # a bug in a task must not kill the worker; recorded, re-raised by shutdown
                log.exception("consumption task failed")
                with self._lock:
                    self.errors.append(exc)

    def stop(self) -> None:
        with self._lock:
            self._closing = True
            self.discarded += len(self._tasks)
            self._tasks.clear()
            self._cond.notify_all()


class _Dispatcher:
    """Seed 001's dispatcher: signalled per process queue, it starts consumption of cached messages."""

    def __init__(self, consumer: PushConsumer, sched: Any, name: str) -> None:
        self._consumer = consumer
        self._lock = sched.lock(name)
        self._cond = sched.condition(self._lock, name)
        self._signalled: dict[ProcessQueue, None] = {}
        self._closing = False
        self.signals = 0
        self.thread = sched.spawn(self._run, name)

    def signal(self, pq: ProcessQueue) -> None:
        with self._lock:
            self.signals += 1
            self._signalled[pq] = None
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._signalled and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                batch = list(self._signalled)
                self._signalled.clear()
            for pq in batch:
                self._consumer._dispatch(pq)

    def stop(self) -> None:
        with self._lock:
            self._closing = True
            self._cond.notify_all()


class PushConsumer:
    """See the module docstring."""

    def __init__(self, channel: Any, group: str, topic: str, listener: Listener, *, client_id: str = "push-consumer",
                 consumption_threads: int = 20, max_cache_messages: int = 4096,
                 max_cache_bytes: int = 64 * 1024 * 1024, invisible_duration: float = 30.0,
                 long_polling_timeout: float = 30.0, receive_retry_delay: float = 3.0,
                 settle_retry_delay: float = 0.1, standard_settle_retry: str = "none", evict_at: str = "consumed",
                 rebalance_interval: float | None = None, memo_survives_drop: bool = True, clock: Any = None,
                 sched: Any = REAL, consumption_executor: Callable[[PushConsumer], Any] | None = None,
                 dispatcher: Callable[[PushConsumer], Any] | None = None) -> None:
        if standard_settle_retry not in ("none", "until_ok"):
            raise ValueError("standard_settle_retry is 'none' (seed) or 'until_ok' (upstream)")
        if evict_at not in ("consumed", "settled"):
            raise ValueError("evict_at is 'consumed' (seed) or 'settled' (upstream)")
        self.channel = channel
        self.group = group
        self.topic = topic
        self.listener = listener
        self.client_id = client_id
        self.consumption_threads = consumption_threads
        self.max_cache_messages = max_cache_messages
        self.max_cache_bytes = max_cache_bytes
        self.invisible_duration = invisible_duration
        self.long_polling_timeout = long_polling_timeout
        self.receive_retry_delay = receive_retry_delay
        self.settle_retry_delay = settle_retry_delay
        self.standard_settle_retry = standard_settle_retry
        self.evict_at = evict_at
        self.rebalance_interval = rebalance_interval
        self.memo_survives_drop = memo_survives_drop
        # what ``start`` runs consumption and dispatch on: factories taking this consumer (an executor:
        # ``submit(fn) -> bool``, ``stop()``, ``threads``; a dispatcher: ``signal(pq)``, ``stop()``,
        # ``thread``).  None: ``consumption_threads`` threads of the consumer's own and one dispatcher
        # thread (upstream lets the application give the consumption executor: PushConsumerBuilder
        # setConsumptionThreadCount; a conformance driver gives both, to run each step on its own call)
        self._executor_factory = consumption_executor
        self._dispatcher_factory = dispatcher
        # C2: the FIFO outcomes the server did not accept, kept by the consumer across rebalances
        self._memo = OutcomeMemo(sched=sched) if memo_survives_drop else None
        # C6: the messages in consumption or settlement, and the redeliveries waiting behind them
        self._held = HeldMessages(sched=sched)
        self.clock = clock if clock is not None else RealClock(sched)
        self._sched = sched
        self._lock = sched.lock("consumer")
        self._stats_lock = sched.lock("consumer.stats")
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        self._retired: list[ProcessQueue] = []
        self._threads: list[Any] = []
        self._closing = Cancel("consumer")
        self._started = False
        self._closed = False
        self.settings: GroupSettings | None = None
        self._dispatcher: _Dispatcher | None = None
        self._pool: _Pool | None = None
        self._active = 0
        self.stats: dict[str, int] = dict.fromkeys(
            ("consumptions", "successes", "failures", "listener_exceptions", "max_concurrent", "acks",
             "ack_errors", "invisible_changes", "invisible_change_errors", "dlq_forwards", "settle_retries",
             "settle_rejected", "memo_settles", "receive_errors", "abandoned"), 0)

    # ================================================================ lifecycle
    def start(self) -> PushConsumer:
        with self._lock:
            if self._started:
                raise RuntimeError("already started")
            self._started = True
        self.settings = self.channel.query_settings(self.group)
        self.channel.heartbeat(self.group, self.client_id)
        self._pool = (self._executor_factory(self) if self._executor_factory is not None
                      else _Pool(self.consumption_threads, self._sched, f"oc-consume-{self.client_id}"))
        self._dispatcher = (self._dispatcher_factory(self) if self._dispatcher_factory is not None
                            else _Dispatcher(self, self._sched, f"oc-dispatch-{self.client_id}"))
        self.rebalance()
        if self.rebalance_interval is not None:
            t = self._sched.spawn(self._rebalance_loop, f"oc-rebalance-{self.client_id}")
            with self._lock:
                self._threads.append(t)
        return self

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop receiving and consuming (C5); join every thread this consumer started."""
        with self._lock:
            if self._closed or not self._started:
                self._closed = True
                return
            self._closed = True
            threads = list(self._threads)
        self._closing.cancel()  # ends long polls, back-offs, retry loops, room waits
        for pq in self.process_queues():
            with pq.cond:
                pq.cond.notify_all()
        stuck = [t.name for t in threads if not t.join(timeout)]
        if self._dispatcher is not None:
            self._dispatcher.stop()
            if not self._dispatcher.thread.join(timeout):
                stuck.append(self._dispatcher.thread.name)
        if self._pool is not None:
            self._pool.stop()
            stuck += [t.name for t in self._pool.threads if not t.join(timeout)]
        try:
            self.channel.unregister(self.group, self.client_id)
        except RpcError:
            pass  # the broker forgets clients it cannot reach anyway
        if stuck:
            raise RuntimeError(f"threads still running after {timeout}s: {stuck}")
        if self._pool is not None and self._pool.errors:
            raise RuntimeError("a consumption task failed") from self._pool.errors[0]

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ================================================================ observation
    def process_queues(self) -> list[ProcessQueue]:
        with self._lock:
            return list(self._pqs.values())

    def process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        with self._lock:
            return self._pqs.get(mq)

    def all_process_queues(self) -> list[ProcessQueue]:
        """Current and dropped process queues (high-water marks of the whole run)."""
        with self._lock:
            return list(self._pqs.values()) + list(self._retired)

    def remembered_outcomes(self) -> int:
        """How many FIFO outcomes the consumer remembers (C2), over all its process queues."""
        if self._memo is not None:
            return len(self._memo)
        return sum(len(pq.outcomes) for pq in self.all_process_queues())

    def thresholds(self) -> tuple[int, int]:
        """Per-queue cache thresholds: ``max(1, total / queues)`` (upstream), count and bytes."""
        with self._lock:
            n = max(1, len(self._pqs))
        return max(1, self.max_cache_messages // n), max(1, self.max_cache_bytes // n)

    def snapshot_stats(self) -> dict[str, int]:
        with self._stats_lock:
            return dict(self.stats)

    def _count(self, key: str, n: int = 1) -> None:
        with self._stats_lock:
            self.stats[key] += n

    # ================================================================ rebalance
    def rebalance(self) -> tuple[list[MessageQueue], list[MessageQueue]]:
        """Ask the broker which queues are ours; drop the others, open process queues for new ones.
        Returns (added, removed)."""
        try:
            assigned = set(self.channel.query_assignment(self.topic, self.group, self.client_id))
        except RpcError:
            return [], []  # keep the current assignment; the next rebalance asks again
        added: list[ProcessQueue] = []
        removed: list[ProcessQueue] = []
        with self._lock:
            if self._closed:
                return [], []
            for mq in [mq for mq in self._pqs if mq not in assigned]:
                pq = self._pqs.pop(mq)
                self._retired.append(pq)
                removed.append(pq)
            for mq in sorted(assigned - set(self._pqs), key=lambda m: (m.topic, m.queue_id)):
                pq = ProcessQueue(mq, self._closing.child(f"pq {mq}"), sched=self._sched, memo=self._memo,
                                  held=self._held)
                self._pqs[mq] = pq
                added.append(pq)
            for pq in added:
                self._threads.append(self._sched.spawn(lambda pq=pq: self._receive_loop(pq),
                                                       f"oc-receive-{self.client_id}-{pq.mq.queue_id}"))
            remaining = list(self._pqs.values())
        for pq in removed:
            pq.drop()  # C4
        for pq in remaining:  # the thresholds changed: wake loops waiting for room
            with pq.cond:
                pq.cond.notify_all()
        return [pq.mq for pq in added], [pq.mq for pq in removed]

    def _rebalance_loop(self) -> None:
        while self.clock.sleep(self.rebalance_interval, self._closing):
            self.rebalance()

    # ================================================================ receive and cache
    def _receive_loop(self, pq: ProcessQueue) -> None:
        settings = self.settings
        cancel = pq.cancel
        while not cancel.cancelled:
            # seed step 3: below both thresholds receive, otherwise wait for room and check again
            cthr, bthr = self.thresholds()
            with pq.cond:
                while (pq.count >= cthr or pq.bytes >= bthr) and not cancel.cancelled:
                    pq.full_waits += 1
                    self.clock.wait(pq.cond, None, cancel)
                    cthr, bthr = self.thresholds()
                batch = min(max(cthr - pq.count, 1), settings.receive_batch_size)
            if cancel.cancelled:
                return
            try:
                got = self.channel.receive_message(self.group, pq.mq, batch, self.invisible_duration,
                                                   self.long_polling_timeout, cancel)  # seed step 1
            except RpcError as e:
                self._count("receive_errors")
                delay = e.backoff if e.throttled and e.backoff else self.receive_retry_delay
                self.clock.sleep(delay, cancel)
                continue
            if not got:
                continue
            if pq.cache(got):  # seed step 2: cached, then the dispatcher is notified
                self._dispatcher.signal(pq)
            elif pq.dropped:
                self._count("abandoned", len(got))

    # ================================================================ dispatch
    def _dispatch(self, pq: ProcessQueue) -> None:
        if self.settings.fifo:
            # 顺序 step 2: lock, or stop (the holder signals when it unlocks)
            if not pq.try_lock():
                return
            self._sched.point("dispatch.locked", pq)  # the model's ``take`` is a step of its own
            e = pq.take_earliest()
            if e is None:  # 顺序 step 3: nothing cached: unlock and stop
                pq.unlock()
                return
            if not self._pool.submit(lambda: self._fifo_task(pq, e)):
                pq.let_go(e)  # shutting down (C5): the server redelivers it
                pq.unlock()
            return
        # 普通 step 2: take messages until the cache has none
        while True:
            e = pq.try_take()
            if e is None:
                return
            if not self._pool.submit(lambda e=e: self._standard_task(pq, e)):
                pq.let_go(e)
                return
            self._sched.point("dispatch.taken", pq)  # each take is one step of the model's dispatcher

    # ================================================================ consumption
    def _consume(self, m: ReceivedMessage) -> bool:
        with self._stats_lock:
            self._active += 1
            self.stats["consumptions"] += 1
            if self._active > self.stats["max_concurrent"]:
                self.stats["max_concurrent"] = self._active
        ok = False
        try:
            ok = self.listener(m) is ConsumeResult.SUCCESS
        except Exception:  # the listener's failure is a consumption failure, never a stall
            log.debug("listener raised on %s", m.message_id, exc_info=True)
            self._count("listener_exceptions")
        finally:
            with self._stats_lock:
                self._active -= 1
                self.stats["successes" if ok else "failures"] += 1
        return ok

    def _settle_until_ok(self, call: Callable[[], Any]) -> str:
        """Repeat a settle until OK (C1): 'ok', 'rejected' (non-retriable answer) or 'closed'."""
        while True:
            try:
                call()
                return "ok"
            except RpcError as e:
                if not e.retriable:
                    self._count("settle_rejected")
                    return "rejected"
                self._count("settle_retries")
                delay = e.backoff if e.throttled and e.backoff else self.settle_retry_delay
                if not self.clock.sleep(delay, self._closing) or self._closing.cancelled:
                    return "closed"

    def _ack(self, m: ReceivedMessage) -> None:
        self.channel.ack_message(self.group, m.topic, m.message_id, m.receipt_handle)
        self._count("acks")

    def _forward(self, m: ReceivedMessage, attempt: int) -> None:
        self.channel.forward_to_dlq(self.group, m.topic, m.message_id, m.receipt_handle, attempt,
                                    self.settings.max_attempts)
        self._count("dlq_forwards")

    def _change_invisible(self, m: ReceivedMessage) -> None:
        delay = self.settings.retry_policy.delay(m.delivery_attempt)
        self.channel.change_invisible_duration(self.group, m.topic, m.message_id, m.receipt_handle, delay)
        self._count("invisible_changes")

    def _let_go(self, pq: ProcessQueue, e: Entry, signalled_next: ProcessQueue | None = None) -> None:
        """C6: the consumption and settlement of ``e`` are over; a redelivery waiting behind it is
        pending now, and its process queue's dispatcher is signalled -- unless it is
        ``signalled_next``, which the caller signals itself right after (FIFO: the unlock's signal,
        seed 顺序 step 9; signalled here too, the dispatcher would find the queue still locked)."""
        waited = pq.let_go(e)
        if waited is not None and waited is not signalled_next:
            self._dispatcher.signal(waited)

    def _standard_task(self, pq: ProcessQueue, e: Entry) -> None:
        try:
            self._standard_consume(pq, e)
        finally:
            self._let_go(pq, e)  # C6

    def _standard_consume(self, pq: ProcessQueue, e: Entry) -> None:
        m = e.message
        ok = self._consume(m)
        if self.evict_at == "consumed":
            pq.erase(e)  # 普通 step 3: consumed, then erased from the cache
        try:
            # 普通 step 4: ack on success, change invisible duration on failure
            if self.standard_settle_retry == "until_ok":
                self._settle_until_ok((lambda: self._ack(m)) if ok else (lambda: self._change_invisible(m)))
            else:
                try:
                    self._ack(m) if ok else self._change_invisible(m)
                except RpcError:
                    # one call (DEV-006): the invisible time runs out and the server redelivers
                    self._count("ack_errors" if ok else "invisible_change_errors")
        finally:
            if self.evict_at == "settled":
                pq.erase(e)

    def _fifo_task(self, pq: ProcessQueue, e: Entry) -> None:
        m = e.message
        try:
            remembered = pq.recall(m)
            if remembered is not None:  # C2: settle the redelivery with the known outcome
                self._sched.point("consume.remembered", m.message_id)
                outcome, attempt = remembered
                attempt = max(m.delivery_attempt, attempt)
                self._count("memo_settles")
            else:
                outcome, attempt = self._fifo_consume(m)
            if outcome is None:
                return  # shut down between re-consumptions (C5)
            if outcome == "ack":  # 顺序 step 6
                result = self._settle_until_ok(lambda: self._ack(m))
            else:  # 顺序 step 8
                result = self._settle_until_ok(lambda: self._forward(m, attempt))
            if result == "rejected":
                pq.remember(m, outcome, attempt)  # C1 + C2
        finally:
            self._fifo_release(pq, e)

    def _fifo_release(self, pq: ProcessQueue, e: Entry) -> None:
        """The FIFO worker is done with ``e`` (settled, given up, or shut down): erase it, let it go,
        then 顺序 step 9: unlock the process queue and signal the dispatcher."""
        pq.erase(e)
        # C6: before the unlock, so the redelivery is there to be taken; promoted into this queue, it is
        # signalled by the unlock's signal (into the new process queue of a dropped one's: at once)
        self._let_go(pq, e, signalled_next=pq)
        self._sched.point("fifo.unlock", pq)
        pq.unlock()
        self._dispatcher.signal(pq)

    def _fifo_consume(self, m: ReceivedMessage) -> tuple[str | None, int]:
        """顺序 steps 4, 5, 7: consume until success or the maximum; (outcome, last attempt)."""
        policy = self.settings.retry_policy
        attempt = m.delivery_attempt
        while True:
            if self._consume(m if attempt == m.delivery_attempt else m.with_attempt(attempt)):
                return "ack", attempt
            if attempt >= policy.max_attempts:
                return "dlq", attempt
            if not self.clock.sleep(policy.delay(attempt), self._closing):
                return None, attempt
            attempt += 1
