"""Stress and throughput workloads of the thin client against the in-process broker, with their checks.

What it is
----------
One driver used by the stress test (CI scale), by ``bench/oc_stress.py`` (issue 14's full scale) and
by the throughput benchmarks.  ``run_stress`` runs, on real threads:

* ``producers`` producer threads sending ``groups`` message groups of ``per_group`` messages each
  (a FIFO topic of ``queues`` queues; an application-level resend after a failed send, so that every
  message of a group is stored in order);
* one push consumer of a FIFO consumer group with ``consumption_threads`` workers;
* a listener that always fails on a seeded set of messages, fails (returning FAILURE or raising) on
  the first attempts of another seeded set, and succeeds otherwise;
* seeded faults (``faults.FaultPlan``) on every RPC: timeouts, unavailability, throttling with a
  server back-off, internal errors, lost answers (a lost send stores a duplicate), and the
  non-retriable settle answers (invalid receipt handle, message not found), bounded per message by
  ``max_attempts - 1`` (see ``faults``).  Lost *receive* answers are left out here: the messages of a
  lost batch come back only when their invisible time expires, and with a real clock that would
  make the verdict depend on timing (the broker and push-consumer tests cover them with a manual
  clock).  The invisible duration (``invisible_duration``) is far above any run's length, so no
  delivery expires by itself: every expiry is an injected, counted fault.

and checks, failing with ``StressError``:

* **per-group order**: when a message's consumption starts, every earlier message of its group has
  been settled at the broker (acked or dead-lettered).  The start is recorded by the listener and the
  settlement by the broker's observer *inside the broker's critical section*, both under one checker
  lock, so the check is exact, not sampled;
* **nothing lost**: every message sent is settled, and the broker has nothing unsettled at the end;
* **nothing consumed more than max attempts**: per stored message (duplicates counted apart), and
  every attempt the listener sees is at most ``max_attempts``;
* **dead-lettered exactly those that always fail**;
* **cache bounds**: no process queue ever held more messages than its count threshold, nor more bytes
  than its byte threshold plus one receive batch.

Budgets are counts (messages, attempts); the only time bound is ``timeout``, a safety cap that raises.
"""

from __future__ import annotations

import hashlib
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from conq.impl.ordered_consumption.broker import Broker
from conq.impl.ordered_consumption.clock import RealClock
from conq.impl.ordered_consumption.faults import FaultPlan, InProcessChannel, default_fault_plan
from conq.impl.ordered_consumption.producer import Producer
from conq.impl.ordered_consumption.protocol import (
    ConsumeResult,
    Message,
    MessageType,
    RetryPolicy,
    SendError,
)
from conq.impl.ordered_consumption.push_consumer import PushConsumer

__all__ = ["StressError", "StressResult", "default_fault_plan", "run_producer_rate", "run_stress",
           "run_throughput"]


class StressError(AssertionError):
    """A check of the stress failed (or its safety cap was reached)."""


def _u(seed: int, *parts: Any) -> float:
    h = hashlib.blake2b(("|".join(map(str, (seed, *parts)))).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64


@dataclass
class StressResult:
    messages: int  # payloads sent (each acknowledged by a successful send)
    stored: int  # messages stored at the broker (duplicates from lost send answers included)
    elapsed: float
    consumptions: int
    always_fail: int
    dead_lettered: int
    max_consumptions: int
    high_water: tuple[int, int]
    thresholds: tuple[int, int]
    max_body: int
    batch: int
    consumer_stats: dict = field(default_factory=dict)
    answers: dict = field(default_factory=dict)
    app_resends: int = 0

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else float("inf")


class _Checker:
    """The stress's bookkeeping: every method runs under ``lock``."""

    def __init__(self, groups: int, per_group: int, max_attempts: int, seed: int, always_fail: float,
                 flaky: float) -> None:
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.groups, self.per_group, self.max_attempts = groups, per_group, max_attempts
        n = groups * per_group
        self.total = n
        self.settled = bytearray(n)  # per payload: settled at least once
        self.upto = [0] * groups  # per group: payloads 0..upto-1 all settled
        self.n_settled = 0
        self.dlq_payloads: set[int] = set()
        self.acked_payloads_fail: list[int] = []
        self.per_id: dict[int, array] = {}  # queue uid -> consumptions per offset
        self.settles_per_id: dict[int, array] = {}
        self.violations: list[str] = []
        self.consumptions = 0
        self.max_seen = 0
        self.stored = 0
        # seeded listener behaviour per payload: always fail, or fail the first k attempts
        self.fail_until = bytearray(n)  # 0: never fails; k: fails while attempt < k; 255: always
        for p in range(n):
            u = _u(seed, "listener", p)
            if u < always_fail:
                self.fail_until[p] = 255
            elif u < always_fail + flaky:
                self.fail_until[p] = 2 + int(_u(seed, "flaky", p) * (max_attempts - 1))  # 2..max_attempts

    @staticmethod
    def _slot(table: dict[int, array], message_id: str) -> tuple[array, int]:
        uid, off = int(message_id[:4], 16), int(message_id[4:], 16)
        a = table.get(uid)
        if a is None:
            a = table[uid] = array("H")
        if off >= len(a):
            a.frombytes(bytes(a.itemsize * (off + 1 - len(a) + max(1024, len(a)))))
        return a, off

    def payload(self, body: bytes) -> tuple[int, int]:
        g, seq, _ = body.split(b":", 2)
        return int(g), int(seq)

    # -- broker observer (called inside the broker's critical section) --------------------------
    def on_event(self, event: str, group: str, message_id: str, attempt: int, body: bytes) -> None:
        if event not in ("acked", "dlq-client", "dlq-server"):
            return
        g, seq = self.payload(body)
        p = g * self.per_group + seq
        with self.lock:
            a, off = self._slot(self.settles_per_id, message_id)
            a[off] += 1
            if a[off] > 1:
                self.violations.append(f"{message_id} settled twice")
            if event == "acked":
                if self.fail_until[p] == 255:
                    self.acked_payloads_fail.append(p)
            else:
                self.dlq_payloads.add(p)
            if not self.settled[p]:
                self.settled[p] = 1
                self.n_settled += 1
                while self.upto[g] < self.per_group and self.settled[g * self.per_group + self.upto[g]]:
                    self.upto[g] += 1
                if self.n_settled == self.total:
                    self.done.notify_all()

    # -- listener ----------------------------------------------------------------------------------
    def consume(self, m: Any) -> ConsumeResult:
        g, seq = self.payload(m.body)
        p = g * self.per_group + seq
        attempt = m.delivery_attempt
        with self.lock:
            self.consumptions += 1
            if self.upto[g] < seq:
                self.violations.append(f"group {g}: message {seq} started before message {self.upto[g]} was settled")
            if attempt > self.max_attempts:
                self.violations.append(f"{m.message_id} consumed at attempt {attempt} > {self.max_attempts}")
            a, off = self._slot(self.per_id, m.message_id)
            a[off] += 1
            if a[off] > self.max_seen:
                self.max_seen = a[off]
            fail_until = self.fail_until[p]
        if fail_until and attempt < fail_until:
            if (p + attempt) % 3 == 0:
                raise RuntimeError("injected listener failure")  # exceptions count as failures
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def run_stress(*, groups: int = 64, per_group: int = 800, queues: int = 16, producers: int = 4,
               consumption_threads: int = 16, max_attempts: int = 3, seed: int = 1,
               faults: FaultPlan | None | str = "default", always_fail: float = 0.01, flaky: float = 0.05,
               max_cache_messages: int = 1024, max_cache_bytes: int = 64 * 1024, batch: int = 32,
               timeout: float = 600.0, invisible_duration: float = 3600.0) -> StressResult:
    """See the module docstring.  ``groups * per_group`` messages."""
    if faults == "default":
        faults = default_fault_plan(seed, max_attempts)
    clock = RealClock()
    chk = _Checker(groups, per_group, max_attempts, seed, always_fail, flaky)
    broker = Broker(clock=clock, observer=chk.on_event).start()
    broker.create_topic("S", queues, message_type=MessageType.FIFO)
    broker.create_consumer_group("G", fifo=True, retry_policy=RetryPolicy.immediate(max_attempts),
                                 receive_batch_size=batch)
    channel = InProcessChannel(broker, faults)
    consumer = PushConsumer(channel, "G", "S", chk.consume, client_id="stress", consumption_threads=consumption_threads,
                            max_cache_messages=max_cache_messages, max_cache_bytes=max_cache_bytes,
                            invisible_duration=invisible_duration, long_polling_timeout=0.2,
                            receive_retry_delay=0.0005, settle_retry_delay=0.0, clock=clock)
    resends = [0] * producers
    max_body = [0]
    errors: list[BaseException] = []

    def body(g: int, seq: int) -> bytes:
        pad = b"x" * int(_u(seed, "size", g, seq) * 48)
        return b"%d:%d:%s" % (g, seq, pad)

    def produce(k: int) -> None:
        try:
            p = Producer(channel, client_id=f"producer-{k}", clock=clock, max_attempts=3)
            mine = [g for g in range(groups) if g % producers == k]
            for seq in range(per_group):
                for g in mine:
                    msg = Message("S", body(g, seq), group=f"g{g}")
                    while True:  # the application resends until the broker has it
                        try:
                            p.send(msg)
                            break
                        except SendError:
                            resends[k] += 1
        except BaseException as exc:  # surfaced by the main thread
            errors.append(exc)

    max_body[0] = len(b"%d:%d:" % (groups - 1, per_group - 1)) + 47  # an upper bound of every body
    start = time.monotonic()
    consumer.start()
    threads = [threading.Thread(target=produce, args=(k,), name=f"oc-stress-producer-{k}") for k in range(producers)]
    for t in threads:
        t.start()
    try:
        deadline = start + timeout
        with chk.lock:
            while chk.n_settled < chk.total and not errors:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StressError(f"safety cap: {chk.n_settled}/{chk.total} settled after {timeout}s; "
                                      f"broker {broker.group_stats('G')}; consumer {consumer.snapshot_stats()}")
                chk.done.wait(min(left, 1.0))
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        # duplicates (a lost send answer stores a second copy) settle too
        while broker.unsettled("G") and not errors:
            if time.monotonic() > deadline:
                raise StressError(f"safety cap: duplicates unsettled {broker.group_stats('G')}")
            time.sleep(0.001)
        elapsed = time.monotonic() - start
    finally:
        for t in threads:
            t.join(5)
        consumer.shutdown()
        broker.stop()
    if errors:
        raise StressError("a producer thread failed") from errors[0]
    stats = broker.group_stats("G")
    cthr, bthr = consumer.thresholds()
    hw = (max(pq.high_water[0] for pq in consumer.all_process_queues()),
          max(pq.high_water[1] for pq in consumer.all_process_queues()))
    always = {p for p in range(chk.total) if chk.fail_until[p] == 255}
    problems = list(chk.violations[:20])
    if stats["unsettled"]:
        problems.append(f"lost: {stats['unsettled']} messages unsettled at the broker")
    if chk.n_settled != chk.total:
        problems.append(f"lost: {chk.total - chk.n_settled} payloads never settled")
    if chk.max_seen > max_attempts:
        problems.append(f"a message was consumed {chk.max_seen} times > max attempts {max_attempts}")
    if chk.dlq_payloads != always:
        problems.append(f"dead-lettered {len(chk.dlq_payloads)} payloads, {len(always)} always fail; "
                        f"extra {sorted(chk.dlq_payloads - always)[:5]}, "
                        f"missing {sorted(always - chk.dlq_payloads)[:5]}")
    if chk.acked_payloads_fail:
        problems.append(f"always-failing payloads acked: {chk.acked_payloads_fail[:5]}")
    if hw[0] > cthr:
        problems.append(f"cache held {hw[0]} messages > count threshold {cthr}")
    if hw[1] >= bthr + batch * max_body[0]:
        problems.append(f"cache held {hw[1]} bytes >= byte threshold {bthr} + one batch ({batch} x {max_body[0]})")
    if problems:
        raise StressError("; ".join(problems))
    return StressResult(
        messages=chk.total,
        stored=stats["acked"] + stats["dead_lettered_by_client"] + stats["dead_lettered_by_server"],
        elapsed=elapsed, consumptions=chk.consumptions, always_fail=len(always),
        dead_lettered=stats["dead_lettered_by_client"] + stats["dead_lettered_by_server"],
        max_consumptions=chk.max_seen, high_water=hw, thresholds=(cthr, bthr), max_body=max_body[0],
        batch=batch, consumer_stats=consumer.snapshot_stats(),
        answers={f"{rpc}/{kind}": n for (rpc, kind), n in sorted(channel.answers.items()) if n},
        app_resends=sum(resends))


def run_throughput(mode: str, *, messages: int = 100_000, groups: int = 64, queues: int = 16,
                   consumption_threads: int = 16, batch: int = 32, transport: str = "inproc") -> float:
    """Consumed messages per second of one push consumer over a pre-filled topic (no faults, the
    listener accepts everything): ``mode`` is ``"fifo"`` (FIFO group, messages spread over ``groups``
    message groups) or ``"standard"``; ``transport`` is ``"inproc"`` (the consumer calls the broker
    directly) or ``"tcp"`` (through ``server.BrokerServer`` / ``server.TcpChannel`` on 127.0.0.1)."""
    if transport not in ("inproc", "tcp"):
        raise ValueError("transport is 'inproc' or 'tcp'")
    fifo = mode == "fifo"
    clock = RealClock()
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def observer(event: str, group: str, message_id: str, attempt: int, body: bytes) -> None:
        if event == "acked":
            with lock:
                count[0] += 1
                if count[0] == messages:
                    done.set()

    broker = Broker(clock=clock, observer=observer).start()
    broker.create_topic("B", queues, message_type=MessageType.FIFO if fifo else MessageType.NORMAL)
    broker.create_consumer_group("G", fifo=fifo, receive_batch_size=batch, retry_policy=RetryPolicy.immediate(3))
    producer = Producer(broker, clock=clock)
    for i in range(messages):
        producer.send(Message("B", b"%d" % i, group=f"g{i % groups}" if fifo else None))
    server = channel = None
    if transport == "tcp":
        from conq.impl.ordered_consumption.server import BrokerServer, TcpChannel

        server = BrokerServer(broker).start()
        channel = TcpChannel(server.address)
    consumer = PushConsumer(channel or broker, "G", "B", lambda m: ConsumeResult.SUCCESS, client_id="bench",
                            consumption_threads=consumption_threads, invisible_duration=3600.0,
                            long_polling_timeout=0.2, clock=clock)
    start = time.monotonic()
    consumer.start()
    try:
        if not done.wait(600):
            raise StressError(f"safety cap: {count[0]}/{messages} consumed in 600 s")
        elapsed = time.monotonic() - start
    finally:
        consumer.shutdown()
        if channel is not None:
            channel.close()
            server.stop()
        broker.stop()
    return messages / elapsed


def run_producer_rate(*, messages: int = 50_000, threads: int = 1, fifo: bool = False, queues: int = 16,
                      faults: FaultPlan | None = None) -> float:
    """Successful sends per second of ``threads`` threads sharing one producer."""
    clock = RealClock()
    broker = Broker(clock=clock).start()
    broker.create_topic("P", queues, message_type=MessageType.FIFO if fifo else MessageType.NORMAL)
    channel = InProcessChannel(broker, faults)
    producer = Producer(channel, clock=clock, max_attempts=3)
    producer.send(Message("P", b"warm-up", group="g" if fifo else None))
    per = messages // threads
    failed = [0]

    def run(k: int) -> None:
        for i in range(per):
            try:
                producer.send(Message("P", b"%d:%d" % (k, i), group=f"g{(k * per + i) % 64}" if fifo else None))
            except SendError:
                failed[0] += 1

    ts = [threading.Thread(target=run, args=(k,), name=f"oc-bench-producer-{k}") for k in range(threads)]
    start = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - start
    broker.stop()
    return (per * threads - failed[0]) / elapsed
