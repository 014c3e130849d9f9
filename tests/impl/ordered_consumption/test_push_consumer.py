"""The push consumer (seed 001 "Push consumer"): receive-and-cache bounded by the cache limits, the
dispatcher, standard consumption (consume, erase, ack / change invisible duration), FIFO consumption
(lock, earliest message, local re-consumption, ack / DLQ until the server confirms, unlock and
signal), the consumption thread pool, listener exceptions, and the reference choices C1-C4 where
the seed's "repeat until success" cannot terminate.

Time is a ``ManualClock``: retry delays and invisible-time expiry happen when a test advances it."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

from conq.impl.ordered_consumption import (
    Broker,
    Code,
    ConsumeResult,
    InProcessChannel,
    ManualClock,
    Message,
    MessageType,
    Producer,
    PushConsumer,
    RetryPolicy,
    RpcError,
    Transport,
)

OK, FAIL = ConsumeResult.SUCCESS, ConsumeResult.FAILURE


class Env:
    """A broker with topic T and group G, a channel, and bookkeeping shared by listener and broker."""

    def __init__(self, *, queues=2, fifo=False, max_attempts=3, retry=None, batch=32, fifo_gate=True):
        self.lock = threading.Lock()
        self.settled: set[str] = set()  # message ids the broker settled (acked or dead-lettered)
        self.events: list[tuple] = []
        self.clock = ManualClock()
        self.broker = Broker(clock=self.clock, observer=self._observe).start()
        mtype = MessageType.FIFO if fifo else MessageType.NORMAL
        self.mqs = self.broker.create_topic("T", queues, message_type=mtype)
        self.broker.create_consumer_group("G", fifo=fifo, receive_batch_size=batch, fifo_gate=fifo_gate,
                                          retry_policy=retry or RetryPolicy.immediate(max_attempts))
        self.channel = InProcessChannel(self.broker)
        self.consumers: list[PushConsumer] = []

    def _observe(self, event, group, message_id, attempt, body):
        with self.lock:
            self.events.append((event, body, attempt))
            if event in ("acked", "dlq-client", "dlq-server"):
                self.settled.add(message_id)

    def send(self, body: bytes, queue: int = 0, group: str | None = None):
        mtype = MessageType.FIFO if group is not None else MessageType.NORMAL
        return self.broker.send_message(self.mqs[queue], Message("T", body, group=group), mtype)

    def consumer(self, listener, channel=None, **kw):
        kw = {"clock": self.clock, "long_polling_timeout": 30.0, "receive_retry_delay": 0.0,
              "settle_retry_delay": 0.0, "consumption_threads": 4, "invisible_duration": 60.0, **kw}
        c = PushConsumer(channel or self.channel, "G", "T", listener, **kw)
        self.consumers.append(c)
        return c.start()

    def close(self):
        for c in self.consumers:
            c.shutdown()
        self.broker.stop()


@pytest.fixture
def env_factory():
    made = []

    def make(**kw):
        e = Env(**kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


# ============================================================================ both modes
@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_consumption_mode_is_the_groups_metadata_and_only_the_order_differs(env_factory, wait_until, fifo):
    env = env_factory(queues=2, fifo=fifo)
    for i in range(8):  # two message groups, both in queue 0 (their order is what FIFO keeps)
        env.send(b"%d" % i, queue=0, group=("ab"[i % 2] if fifo else None))
    active, lock, both = [0], threading.Lock(), threading.Event()
    peak = [0]

    def listener(m):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            if active[0] == 2:
                both.set()
        if m.body in (b"0", b"1") and not fifo:
            both.wait(30)  # standard: 0 and 1 of one queue run at once (safety cap only)
        with lock:
            active[0] -= 1
        return OK

    c = env.consumer(listener)  # the same client code and options for both groups
    assert c.settings.fifo is fifo
    assert {pq.mq for pq in c.process_queues()} == set(env.mqs)  # one process queue per message queue
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 8, "everything acked")
    # FIFO: one message of a queue at a time; standard: several of one queue at once
    assert peak[0] == 1 if fifo else peak[0] >= 2


# ============================================================================ standard mode
def test_standard_consumes_and_acks_every_message(env_factory, wait_until):
    env = env_factory(queues=2)
    p = Producer(env.channel)
    for i in range(100):
        p.send(Message("T", f"m{i}".encode()))
    seen = []
    c = env.consumer(lambda m: seen.append(m.body) or OK)
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 100, "everything acked")
    s = c.snapshot_stats()
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(100))
    assert (s["consumptions"], s["acks"], s["invisible_changes"], s["dlq_forwards"]) == (100, 100, 0, 0)
    assert env.broker.group_stats("G")["deliveries"] == 100


def test_standard_failure_changes_invisible_duration_and_redelivers_with_the_next_attempt(env_factory, wait_until):
    env = env_factory(queues=1, retry=RetryPolicy(max_attempts=3, durations=(5.0,)))
    sent = env.send(b"x")
    attempts = []
    c = env.consumer(lambda m: attempts.append(m.delivery_attempt) or (OK if m.delivery_attempt == 2 else FAIL))
    wait_until(lambda: c.snapshot_stats()["invisible_changes"] == 1, "the change of invisible duration")
    env.clock.advance(4.9)
    assert env.broker.message_state("G", sent.message_id) == {"state": "invisible", "attempt": 1}
    assert c.snapshot_stats()["consumptions"] == 1
    env.clock.advance(0.1)  # the retry policy's delay for attempt 1 is over
    wait_until(lambda: sent.message_id in env.settled, "the redelivery acked")
    assert attempts == [1, 2]
    assert env.broker.message_state("G", sent.message_id)["state"] == "acked"
    assert c.process_queues()[0].cached() == (0, 0)


def test_standard_never_dead_letters_on_the_client_the_server_does(env_factory, wait_until):
    env = env_factory(queues=1, retry=RetryPolicy(max_attempts=3, durations=(1.0,)))
    sent = env.send(b"x")
    attempts = []
    c = env.consumer(lambda m: attempts.append(m.delivery_attempt) or FAIL)
    for n in (1, 2, 3):
        wait_until(lambda: c.snapshot_stats()["invisible_changes"] == n, f"change of invisible duration {n}")
        env.clock.advance(1.0)
    wait_until(lambda: sent.message_id in env.settled, "the server's dead-lettering")
    assert attempts == [1, 2, 3]
    assert [(d.message_id, d.by, d.attempt) for d in env.broker.dead_letters("G")] == [(sent.message_id, "server", 3)]
    assert c.snapshot_stats()["dlq_forwards"] == 0 and env.channel.requests["forward_to_dlq"] == 0


def test_standard_listener_exceptions_are_failures_and_never_stall(env_factory, wait_until):
    env = env_factory(queues=2, retry=RetryPolicy(max_attempts=2, durations=(1.0,)))
    for i in range(20):
        env.send(f"good{i}".encode(), queue=i % 2)
    bad = [env.send(f"bad{i}".encode(), queue=i % 2).message_id for i in range(5)]

    def listener(m):
        if m.body.startswith(b"bad"):
            raise RuntimeError("listener bug")
        return OK

    c = env.consumer(listener)
    # the good ones are not held up: all acked while the failed ones wait for the clock
    wait_until(lambda: c.snapshot_stats()["invisible_changes"] == 5 and env.broker.group_stats("G")["acked"] == 20,
               "the failures reported and the good ones acked")
    env.clock.advance(1.0)
    wait_until(lambda: c.snapshot_stats()["invisible_changes"] == 10, "the second failures reported")
    env.clock.advance(1.0)
    wait_until(lambda: all(b in env.settled for b in bad), "the server's dead-lettering")
    s = c.snapshot_stats()
    assert (s["listener_exceptions"], s["failures"], s["acks"]) == (10, 10, 20)
    assert sorted(d.message_id for d in env.broker.dead_letters("G")) == sorted(bad)


def test_a_listener_returning_anything_but_success_has_failed(env_factory, wait_until):
    env = env_factory(queues=1, retry=RetryPolicy(max_attempts=5, durations=(60.0,)))
    for body in (b"none", b"true", b"fail"):
        env.send(body)
    c = env.consumer(lambda m: {b"none": None, b"true": True, b"fail": FAIL}[m.body])
    wait_until(lambda: c.snapshot_stats()["invisible_changes"] == 3, "three failures")
    assert c.snapshot_stats()["acks"] == 0


def test_receive_loop_waits_at_the_count_threshold(env_factory, wait_until):
    env = env_factory(queues=2)
    for i in range(40):
        env.send(f"{i}".encode(), queue=i % 2)
    release = threading.Event()
    c = env.consumer(lambda m: release.wait(30) and OK, max_cache_messages=8, consumption_threads=2)
    assert c.thresholds()[0] == 4  # max(1, 8 / 2 queues), per queue (upstream)
    wait_until(lambda: all(pq.full_waits > 0 for pq in c.process_queues()), "both receive loops waiting for room")
    assert [pq.cached()[0] for pq in c.process_queues()] == [4, 4]
    assert env.broker.group_stats("G")["deliveries"] == 8  # nothing received beyond the threshold
    release.set()
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 40, "everything acked")
    assert all(pq.high_water[0] <= 4 for pq in c.process_queues())


def test_byte_threshold_alone_stops_receiving_and_is_exceeded_by_less_than_one_batch(env_factory, wait_until):
    env = env_factory(queues=1, batch=4)
    for i in range(30):
        env.send(b"%029d" % i)  # 29-byte bodies
    release = threading.Event()
    c = env.consumer(lambda m: release.wait(30) and OK, max_cache_messages=1000, max_cache_bytes=100,
                     consumption_threads=1)
    (pq,) = c.process_queues()
    wait_until(lambda: pq.full_waits > 0, "the receive loop waiting for room")
    count, size = pq.cached()
    assert count == 4 and size == 116  # one batch of 4 took it from 0 to 116 >= 100 bytes
    assert env.broker.group_stats("G")["deliveries"] == 4
    release.set()
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 30, "everything acked")
    assert 100 <= pq.high_water[1] < 100 + 4 * 29


@pytest.mark.parametrize("evict_at, cached_while_acking", [("consumed", (0, 0)), ("settled", (1, 1))],
                         ids=["seed-consumed", "upstream-settled"])
def test_standard_message_leaves_the_cache_after_consumption_seed_or_settlement_upstream(
        env_factory, wait_until, scripted, evict_at, cached_while_acking):
    env = env_factory(queues=1)
    acking, release = threading.Event(), threading.Event()
    ch = scripted(env.channel, env.broker, {"ack_message": [lambda: (acking.set(), release.wait(30))]})
    env.send(b"x")
    c = env.consumer(lambda m: OK, channel=ch, evict_at=evict_at)
    wait_until(acking.is_set, "the ack in progress")
    assert c.process_queues()[0].cached() == cached_while_acking
    release.set()
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 1, "the ack")
    wait_until(lambda: c.process_queues()[0].cached() == (0, 0), "the erase")


def test_standard_ack_failure_is_not_retried_seed_but_is_upstream(env_factory, wait_until, scripted):
    for mode, requests in (("none", 1), ("until_ok", 3)):
        env = env_factory(queues=1)
        err = RpcError(Transport.UNAVAILABLE, "scripted")
        ch = scripted(env.channel, env.broker, {"ack_message": [err, err]})
        sent = env.send(b"x")
        c = env.consumer(lambda m: OK, channel=ch, standard_settle_retry=mode)
        wait_until(lambda: ch.requests["ack_message"] == requests and c.snapshot_stats()["consumptions"] == 1,
                   "the ack requests")
        c.shutdown()
        assert ch.requests["ack_message"] == requests
        # seed: one call; the message stays invisible until its invisible time runs out (redelivery)
        assert env.broker.message_state("G", sent.message_id)["state"] == ("invisible" if mode == "none" else "acked")


def test_consumption_thread_pool_bounds_concurrency(env_factory, wait_until):
    env = env_factory(queues=3)
    for i in range(30):
        env.send(f"{i}".encode(), queue=i % 3)
    gate = threading.Barrier(3, timeout=30)

    def listener(m):
        if int(m.body) < 3:
            gate.wait()  # the first three run at the same time, or the barrier breaks the test
        return OK

    c = env.consumer(listener, consumption_threads=3)
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 30, "everything acked")
    assert c.snapshot_stats()["max_concurrent"] == 3


# ============================================================================ FIFO mode
def _fifo_checker(env):
    """Listener bookkeeping: B's consumption may start only once every earlier message of its group
    was settled at the server (seed 001 FIFO order, per message group)."""
    state = {"violations": [], "active": defaultdict(int), "max_active_per_queue": 0, "starts": [],
             "attempts": defaultdict(list)}
    ids: dict[bytes, str] = {}

    def record_ids(receipts):
        for r, body in receipts:
            ids[body] = r.message_id

    def start(m):
        group, seq = m.body.split(b":")
        with env.lock:
            for earlier in range(int(seq)):
                if ids[group + b":%d" % earlier] not in env.settled:
                    state["violations"].append((m.body, earlier))
            state["starts"].append(m.body)
            state["attempts"][m.body].append(m.delivery_attempt)
            state["active"][m.queue.queue_id] += 1
            state["max_active_per_queue"] = max(state["max_active_per_queue"], state["active"][m.queue.queue_id])

    def end(m):
        with env.lock:
            state["active"][m.queue.queue_id] -= 1

    return state, record_ids, start, end


def test_fifo_keeps_group_order_with_failures_and_concurrent_queues(env_factory, wait_until):
    env = env_factory(queues=4, fifo=True, max_attempts=3)
    state, record_ids, start, end = _fifo_checker(env)
    p = Producer(env.channel)
    receipts = []
    for seq in range(40):
        for g in range(16):
            body = b"g%d:%d" % (g, seq)
            receipts.append((p.send(Message("T", body, group=f"g{g}")), body))
    record_ids(receipts)

    def listener(m):
        start(m)
        try:
            # every 5th message fails its first consumption and is re-consumed locally
            return FAIL if hash(m.body) % 5 == 0 and m.delivery_attempt == 1 else OK
        finally:
            end(m)

    c = env.consumer(listener, consumption_threads=8)
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 640, "everything acked")
    assert state["violations"] == []
    assert state["max_active_per_queue"] == 1  # the process-queue lock: one message of a queue at a time
    s = c.snapshot_stats()
    failing = sum(hash(b) % 5 == 0 for _, b in receipts)
    assert s["consumptions"] == 640 + failing and s["failures"] == failing
    assert env.broker.group_stats("G")["deliveries"] == 640  # re-consumption is local: no redelivery
    assert all(a in ([1], [1, 2]) for a in state["attempts"].values())


def test_fifo_reconsumes_up_to_max_attempts_then_dead_letters_and_moves_on(env_factory, wait_until):
    env = env_factory(queues=1, fifo=True, retry=RetryPolicy(max_attempts=3, durations=(2.0,)))
    state, record_ids, start, end = _fifo_checker(env)
    record_ids([(env.send(b"g:%d" % i, group="g"), b"g:%d" % i) for i in range(3)])

    def listener(m):
        start(m)
        end(m)
        return FAIL if m.body == b"g:0" else OK

    c = env.consumer(listener)
    for n in (1, 2):  # the retry policy's delay before each local re-consumption
        wait_until(lambda: c.snapshot_stats()["consumptions"] == n and env.clock.waiters() >= 2,
                   f"consumption {n} done, waiting for the retry delay")
        env.clock.advance(2.0)
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 2, "the rest of the group acked")
    assert state["attempts"][b"g:0"] == [1, 2, 3]
    assert state["violations"] == [] and state["starts"] == [b"g:0"] * 3 + [b"g:1", b"g:2"]
    (dl,) = env.broker.dead_letters("G")
    assert (dl.by, dl.attempt) == ("client", 3)
    assert env.channel.requests["forward_to_dlq"] == 1
    assert env.broker.group_stats("G")["deliveries"] == 3  # one delivery each


def test_fifo_listener_exception_counts_as_failure_and_the_group_moves_on(env_factory, wait_until):
    env = env_factory(queues=1, fifo=True, max_attempts=2)
    for i in range(3):
        env.send(b"g:%d" % i, group="g")

    def listener(m):
        if m.body == b"g:1":
            raise ValueError("listener bug")
        return OK

    c = env.consumer(listener)
    wait_until(lambda: len(env.settled) == 3, "all settled")
    assert [d.body for d in env.broker.dead_letters("G")] == [b"g:1"]
    assert c.snapshot_stats()["listener_exceptions"] == 2


def test_fifo_ack_is_repeated_until_the_server_confirms(env_factory, wait_until, scripted):
    env = env_factory(queues=1, fifo=True)
    state, record_ids, start, end = _fifo_checker(env)
    errs = [RpcError(Transport.UNAVAILABLE, "x"), RpcError(Code.REQUEST_TIMEOUT, "x"),
            RpcError(Code.INTERNAL_SERVER_ERROR, "x"), RpcError(Code.PROXY_TIMEOUT, "x")]
    ch = scripted(env.channel, env.broker, {"ack_message": errs})
    record_ids([(env.send(b"g:%d" % i, group="g"), b"g:%d" % i) for i in range(2)])
    acks_at_start = []

    def listener(m):
        start(m)
        acks_at_start.append(ch.requests["ack_message"])
        end(m)
        return OK

    c = env.consumer(listener, channel=ch)
    wait_until(lambda: len(env.settled) == 2, "both acked")
    assert acks_at_start == [0, 5]  # g:1 started only after the fifth ack of g:0 was confirmed
    assert state["violations"] == []
    assert c.snapshot_stats()["settle_retries"] == 4


def test_fifo_throttled_ack_waits_for_the_servers_backoff(env_factory, wait_until, scripted):
    env = env_factory(queues=1, fifo=True)
    ch = scripted(env.channel, env.broker, {"ack_message": [RpcError(Code.TOO_MANY_REQUESTS, "x", backoff=2.0)]})
    sent = env.send(b"g:0", group="g")
    env.consumer(lambda m: OK, channel=ch)
    # the receive loop long-polls on the clock, the worker sleeps the back-off on it
    wait_until(lambda: ch.requests["ack_message"] == 1 and env.clock.waiters() == 2, "the back-off")
    env.clock.advance(1.999)
    wait_until(lambda: env.clock.waiters() == 2, "still backing off")
    assert ch.requests["ack_message"] == 1 and sent.message_id not in env.settled
    env.clock.advance(0.001)
    wait_until(lambda: sent.message_id in env.settled, "the ack after the back-off")
    assert ch.requests["ack_message"] == 2


def test_fifo_dlq_forward_is_repeated_until_the_server_confirms(env_factory, wait_until, scripted):
    env = env_factory(queues=1, fifo=True, max_attempts=2)
    ch = scripted(env.channel, env.broker, {"forward_to_dlq": [RpcError(Code.REQUEST_TIMEOUT, "x"),
                                                               RpcError(Transport.UNAVAILABLE, "x")]})
    env.send(b"g:0", group="g")
    env.consumer(lambda m: FAIL, channel=ch)
    wait_until(lambda: len(env.settled) == 1, "dead-lettered")
    assert ch.requests["forward_to_dlq"] == 3
    assert [(d.by, d.attempt) for d in env.broker.dead_letters("G")] == [("client", 2)]


def test_fifo_invalid_handle_ends_the_ack_loop_and_the_redelivery_is_acked_without_consuming(
        env_factory, wait_until, scripted):
    env = env_factory(queues=1, fifo=True)
    state, record_ids, start, end = _fifo_checker(env)
    # the first ack meets an expired delivery: the broker answers INVALID_RECEIPT_HANDLE (C1)
    ch = scripted(env.channel, env.broker, {"ack_message": ["expire"]})
    record_ids([(env.send(b"g:%d" % i, group="g"), b"g:%d" % i) for i in range(2)])

    def listener(m):
        start(m)
        end(m)
        return OK

    c = env.consumer(listener, channel=ch)
    wait_until(lambda: len(env.settled) == 2, "both acked")
    s = c.snapshot_stats()
    assert state["starts"] == [b"g:0", b"g:1"]  # g:0 consumed once although delivered twice (C2)
    assert (s["settle_rejected"], s["memo_settles"], ch.requests["ack_message"]) == (1, 1, 3)
    assert env.broker.group_stats("G")["deliveries"] == 3
    assert state["violations"] == []


def test_fifo_lost_ack_answer_then_invalid_handle_leaves_the_message_acked_once(env_factory, wait_until, scripted):
    env = env_factory(queues=1, fifo=True)
    ch = scripted(env.channel, env.broker, {"ack_message": ["lost"]})
    for i in range(2):
        env.send(b"g:%d" % i, group="g")
    starts = []
    c = env.consumer(lambda m: starts.append(m.body) or OK, channel=ch)
    wait_until(lambda: len(env.settled) == 2, "both acked")
    # the retry met a genuinely invalid handle (the lost request had acked): given up, remembered,
    # and forgotten again when the group's next message arrived
    assert starts == [b"g:0", b"g:1"] and c.snapshot_stats()["settle_rejected"] == 1
    assert c.process_queues()[0].memo == {}
    assert env.broker.group_stats("G")["acked"] == 2


def test_fifo_rejected_dlq_forward_carries_over_to_the_redelivery(env_factory, wait_until, scripted):
    env = env_factory(queues=1, fifo=True, max_attempts=3)
    ch = scripted(env.channel, env.broker, {"forward_to_dlq": ["expire"]})
    sent = env.send(b"g:0", group="g")
    attempts = []
    c = env.consumer(lambda m: attempts.append(m.delivery_attempt) or FAIL, channel=ch)
    wait_until(lambda: sent.message_id in env.settled, "dead-lettered")
    assert attempts == [1, 2, 3]  # never more than max_attempts consumptions
    assert c.snapshot_stats()["memo_settles"] == 1 and ch.requests["forward_to_dlq"] == 2
    assert [(d.by, d.attempt) for d in env.broker.dead_letters("G")] == [("client", 3)]


def test_fifo_unlock_signals_the_dispatcher_for_the_next_cached_message(env_factory, wait_until):
    env = env_factory(queues=1, fifo=True)
    for g in range(5):
        env.send(b"g%d:0" % g, group=f"g{g}")
    release = threading.Event()
    starts = []

    def listener(m):
        starts.append(m.body)
        if m.body == b"g0:0":
            release.wait(30)
        return OK

    c = env.consumer(listener, consumption_threads=4)
    (pq,) = c.process_queues()
    wait_until(lambda: pq.cached()[0] == 5 and starts == [b"g0:0"], "one batch cached, one message consuming")
    assert pq.locked and env.broker.group_stats("G")["deliveries"] == 5
    release.set()
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 5, "everything acked")
    assert starts == [b"g%d:0" % g for g in range(5)]  # earliest first, one after another
    assert env.broker.group_stats("G")["deliveries"] == 5  # no new receive was needed
    # the last unlock's signal finds the cache empty: the dispatcher unlocks again and stops
    wait_until(lambda: not pq.locked, "the process queue unlocked")
    assert c._dispatcher.signals >= 6


# ============================================================================ rebalance
def test_rebalance_takes_a_queue_away_while_messages_are_in_flight_and_gives_it_back(env_factory, wait_until):
    env = env_factory(queues=2, fifo=True, max_attempts=5)
    q0, q1 = env.mqs
    env.broker.pin_assignment("G", "A", (q0, q1))
    env.broker.pin_assignment("G", "B", ())
    receipts = {}
    for seq in range(5):
        for g in ("x", "y"):
            body = b"%s:%d" % (g.encode(), seq)
            receipts[body] = env.send(body, queue=0, group=g)
    state, record_ids, start, end = _fifo_checker(env)
    record_ids([(r, b) for b, r in receipts.items()])
    hold = threading.Event()
    consumed = {"A": [], "B": []}

    def listener_for(name):
        def listener(m):
            start(m)
            consumed[name].append(m.body)
            if m.body == b"x:0":
                hold.wait(30)
            end(m)
            return OK
        return listener

    a = env.consumer(listener_for("A"), client_id="A", invisible_duration=10.0)
    b = env.consumer(listener_for("B"), client_id="B", invisible_duration=10.0)
    pq_a = a.process_queue(q0)
    wait_until(lambda: consumed["A"] == [b"x:0"] and pq_a.cached()[0] == 2, "x:0 in consumption, y:0 cached")
    # take q0 away from A, give it to B, while x:0 is being consumed and y:0 waits in A's cache
    env.broker.pin_assignment("G", "A", (q1,))
    env.broker.pin_assignment("G", "B", (q0,))
    assert a.rebalance() == ([], [q0]) and b.rebalance() == ([q0], [])
    assert pq_a.dropped and pq_a.cached()[0] == 1  # y:0 discarded, x:0 still in consumption
    hold.set()  # A finishes x:0 and acks it with its still valid handle
    wait_until(lambda: receipts[b"x:4"].message_id in env.settled, "group x done by B")
    assert consumed["A"] == [b"x:0"] and consumed["B"] == [b"x:%d" % i for i in range(1, 5)]
    assert env.broker.message_state("G", receipts[b"y:0"].message_id)["state"] == "invisible"
    env.clock.advance(10.0)  # y:0's invisible time expires: the server redelivers it, to B
    wait_until(lambda: receipts[b"y:4"].message_id in env.settled, "group y done by B")
    assert consumed["B"][4:] == [b"y:%d" % i for i in range(5)]
    assert state["attempts"][b"y:0"] == [2] and state["violations"] == []
    # give it back
    env.broker.pin_assignment("G", "B", ())
    env.broker.pin_assignment("G", "A", (q0, q1))
    assert b.rebalance() == ([], [q0]) and a.rebalance() == ([q0], [])
    more = env.send(b"z:0", queue=0, group="z")
    wait_until(lambda: more.message_id in env.settled, "the new message consumed by A")
    assert consumed["A"][-1] == b"z:0"
    assert env.broker.unsettled("G") == 0


def test_shutdown_stops_a_retry_loop_that_cannot_succeed(env_factory, wait_until):
    env = env_factory(queues=1, fifo=True)
    sent = env.send(b"g:0", group="g")
    env.broker.stop()
    c = PushConsumer(env.channel, "G", "T", lambda m: OK, clock=env.clock, receive_retry_delay=0.0)
    with pytest.raises(RpcError):
        c.start()  # cannot read its settings from a stopped broker
    c.shutdown()
    env.broker.start()
    c = env.consumer(lambda m: env.broker.stop() or OK, settle_retry_delay=0.0)
    wait_until(lambda: c.snapshot_stats()["settle_retries"] > 10, "the ack retried against a stopped broker")
    c.shutdown()  # C5: the loop ends; the message waits for its invisible time
    env.broker.start()
    assert env.broker.message_state("G", sent.message_id)["state"] == "invisible"


# ============================================================================ C2 across a rebalance
# The model's variant ``push-fifo-memo-per-queue`` (spec/deviations.md DEV-021): with the outcome memo
# kept per process queue, a queue dropped and given back while a message is in flight loses the
# remembered outcome and the listener consumes the message max_attempts + 1 times.  The reference
# keeps the memo per consumer.  Each test runs both and asserts the reference's bound and the
# variant's counterexample, so the check is live.  Verdicts are counts; waits are safety caps only.
MEMO = pytest.mark.parametrize("survives", [True, False], ids=["memo-per-consumer", "memo-per-queue-variant"])


def _fail_then_ok(counts, hold=None):
    """a:0 fails at attempt 1 and succeeds at 2; b:0 (if any) blocks on ``hold``."""
    lock = threading.Lock()

    def listener(m):
        with lock:
            counts[m.body].append(m.delivery_attempt)
        if m.body == b"b:0":
            hold.wait(30)
            return OK
        return FAIL if m.delivery_attempt == 1 else OK

    return listener


@MEMO
def test_fifo_memo_survives_a_process_queue_dropped_between_take_and_consumption(
        env_factory, wait_until, scripted, survives):
    # the model's 13-step trace on real threads: consume fails, consume OK, the delivery expires and
    # is redelivered, the ack is answered INVALID_RECEIPT_HANDLE, the redelivery is taken, the process
    # queue is dropped (and given back), then the redelivery is consumed -- or settled from the memo
    env = env_factory(queues=2, fifo=True, max_attempts=2)
    q0, q1 = env.mqs
    env.broker.pin_assignment("G", "A", (q0, q1))
    a = env.send(b"a:0", queue=0, group="a")
    hold = threading.Event()
    counts = defaultdict(list)
    box = {}

    def expire_and_queue_a_blocker():
        # A's delivery runs out (the broker redelivers it, attempt 2); B, on the other queue, is
        # received and handed to the one consumption thread's queue *before* A's redelivery can be
        env.broker.expire_now("G", a.message_id)
        box["b"] = env.send(b"b:0", queue=1, group="b")
        pq1 = box["c"].process_queue(q1)
        wait_until(lambda: pq1.inflight() == 1, "b:0 taken for consumption")

    ch = scripted(env.channel, env.broker, {"ack_message": [expire_and_queue_a_blocker]})
    c = box["c"] = env.consumer(_fail_then_ok(counts, hold), channel=ch, client_id="A", consumption_threads=1,
                                memo_survives_drop=survives)
    pq0 = c.process_queue(q0)
    # b:0 occupies the only consumption thread; A's redelivery has been taken and waits for it
    wait_until(lambda: counts[b"b:0"] == [1] and pq0.locked and pq0.inflight() == 1 and pq0.cached()[0] == 1,
               "the redelivery of a:0 taken while b:0 is consumed")
    assert c.snapshot_stats()["settle_rejected"] == 1 and c.remembered_outcomes() == 1
    # rebalance: q0 taken away (the process queue dropped) and given back while a:0 is in flight
    env.broker.pin_assignment("G", "A", (q1,))
    assert c.rebalance() == ([], [q0]) and pq0.dropped
    env.broker.pin_assignment("G", "A", (q0, q1))
    assert c.rebalance() == ([q0], [])
    hold.set()
    wait_until(lambda: {a.message_id, box["b"].message_id} <= env.settled, "a:0 and b:0 settled")
    assert env.broker.message_state("G", a.message_id)["state"] == "acked"
    if survives:  # the reference: never more than max_attempts consumptions
        assert counts[b"a:0"] == [1, 2]
        assert c.snapshot_stats()["memo_settles"] == 1 and c.remembered_outcomes() == 0
    else:  # the variant's counterexample: consumed max_attempts + 1 times
        assert counts[b"a:0"] == [1, 2, 2]
        assert c.snapshot_stats()["memo_settles"] == 0


@MEMO
def test_fifo_memo_survives_a_process_queue_dropped_while_the_ack_is_rejected(
        env_factory, wait_until, scripted, survives):
    # the drop comes first (during the ack), the rejection is remembered by a dropped process queue,
    # and the redelivery reaches the process queue created when the message queue is given back
    env = env_factory(queues=1, fifo=True, max_attempts=2)
    (q0,) = env.mqs
    env.broker.pin_assignment("G", "A", (q0,))
    a = env.send(b"a:0", queue=0, group="a")
    counts = defaultdict(list)
    box = {}

    made = threading.Event()

    def drop_then_expire():
        # (the process queue is taken here, before the drop: the consumer's threads may reach this
        # ack before the test's thread runs again, and a dropped process queue is no longer listed)
        made.wait(60)  # (box["c"] is set; a safety net, the consumer is made long before its ack)
        box["pq0"] = box["c"].process_queue(q0)
        env.broker.pin_assignment("G", "A", ())
        assert box["c"].rebalance() == ([], [q0])  # the receive loop ends: nobody takes the redelivery
        env.broker.expire_now("G", a.message_id)  # the ack will meet an invalid handle

    ch = scripted(env.channel, env.broker, {"ack_message": [drop_then_expire]})
    c = box["c"] = env.consumer(_fail_then_ok(counts), channel=ch, client_id="A", memo_survives_drop=survives)
    made.set()
    wait_until(lambda: c.snapshot_stats()["settle_rejected"] == 1 and "pq0" in box and box["pq0"].idle(),
               "the rejected ack given up")
    assert box["pq0"].dropped
    assert counts[b"a:0"] == [1, 2] and env.broker.message_state("G", a.message_id)["state"] == "ready"
    assert c.remembered_outcomes() == (1 if survives else 0)
    env.broker.pin_assignment("G", "A", (q0,))
    assert c.rebalance() == ([q0], [])  # given back: a new process queue receives the redelivery
    wait_until(lambda: a.message_id in env.settled, "a:0 settled")
    assert env.broker.message_state("G", a.message_id)["state"] == "acked"
    assert env.broker.group_stats("G")["deliveries"] == 2  # the redelivery was attempt 2
    if survives:
        assert counts[b"a:0"] == [1, 2] and c.snapshot_stats()["memo_settles"] == 1
    else:
        assert counts[b"a:0"] == [1, 2, 2] and c.snapshot_stats()["memo_settles"] == 0


# ============================================================================ C6: one copy in consumption
# A redelivery that arrives while the previous copy of its message is still consumed or settled
# waits behind that copy (the model's ``pending`` delivery; issue 14's divergence F3): it counts
# against the cache, is not handed to a worker, and is dispatched when the copy is let go.  Each
# test first checks the wait, then that the redelivery is consumed (or settled) afterwards: no stall.


@pytest.mark.parametrize("evict_at", ["consumed", "settled"])
def test_standard_redelivery_waits_behind_the_copy_whose_ack_is_on_its_way(env_factory, wait_until, scripted,
                                                                           evict_at):
    env = env_factory(queues=1)
    acking, release = threading.Event(), threading.Event()
    box = {}

    def expire_then_block():
        env.broker.expire_now("G", box["x"].message_id)  # the server redelivers x (attempt 2) meanwhile
        acking.set()
        release.wait(30)

    ch = scripted(env.channel, env.broker, {"ack_message": [expire_then_block]})
    box["x"] = env.send(b"x")
    lock, attempts = threading.Lock(), []

    def listener(m):
        with lock:
            attempts.append(m.delivery_attempt)
        return OK

    c = env.consumer(listener, channel=ch, evict_at=evict_at)
    pq = c.process_queues()[0]

    def redelivered():
        with lock:
            return acking.is_set() and (pq.waiting() == 1 or len(attempts) > 1)

    wait_until(redelivered, "the redelivery cached (behind the copy being acked)")
    assert env.broker.group_stats("G")["deliveries"] == 2
    with lock:
        assert attempts == [1]  # not consumed beside the copy whose ack is on its way
    assert pq.waiting() == 1
    # seed 普通 step 3 erased the consumed copy (upstream: erased once settled); the redelivery counts
    assert pq.cached() == ((1, 1) if evict_at == "consumed" else (2, 2))
    release.set()  # the ack meets the expired handle: INVALID_RECEIPT_HANDLE, one call (DEV-006)
    wait_until(lambda: env.broker.group_stats("G")["acked"] == 1, "the redelivery consumed and acked")
    with lock:
        assert attempts == [1, 2]
    wait_until(lambda: pq.cached() == (0, 0) and pq.waiting() == 0, "the cache empty")
    s = c.snapshot_stats()
    assert (s["consumptions"], s["acks"], s["ack_errors"]) == (2, 1, 1)
    assert len(c._held) == 0  # nothing left held: every copy was let go


def test_fifo_redelivery_to_the_process_queue_given_back_waits_for_the_dropped_ones_copy(
        env_factory, wait_until, scripted):
    # q0 is taken away and given back while a:0 is in the listener; its invisible time runs out and
    # the new process queue (a lock of its own) receives the redelivery: it waits for the old copy
    env = env_factory(queues=1, fifo=True, max_attempts=3)
    (q0,) = env.mqs
    env.broker.pin_assignment("G", "A", (q0,))
    a = env.send(b"a:0", group="a")
    lock, attempts, box = threading.Lock(), [], {}

    def listener(m):
        with lock:
            attempts.append(m.delivery_attempt)
            first = len(attempts) == 1
        if first:
            c = box["c"]
            env.broker.pin_assignment("G", "A", ())
            assert c.rebalance() == ([], [q0])
            env.broker.pin_assignment("G", "A", (q0,))
            assert c.rebalance() == ([q0], [])
            env.broker.expire_now("G", a.message_id)
            new = c.process_queue(q0)

            def redelivered():
                with lock:
                    return new.waiting() == 1 or len(attempts) > 1

            wait_until(redelivered, "the redelivery cached by the new process queue")
            with lock:
                box["seen"] = (list(attempts), new.waiting(), new.inflight(), new.cached(), new.locked)
        return OK

    c = box["c"] = env.consumer(listener, client_id="A")
    wait_until(lambda: a.message_id in env.settled and "seen" in box, "a:0 acked")
    # while the old copy was consumed the redelivery was cached, counted, not taken and not locked
    assert box["seen"] == ([1], 1, 0, (1, 3), False)
    # the old copy's ack met the expired handle (C1): the outcome is remembered (C2) and settles the
    # redelivery once the old copy is let go -- consumed once, never twice at once
    assert attempts == [1]
    s = c.snapshot_stats()
    assert (s["settle_rejected"], s["memo_settles"], s["consumptions"]) == (1, 1, 1)
    assert env.broker.group_stats("G")["deliveries"] == 2 and env.broker.unsettled("G") == 0
    wait_until(lambda: c.process_queue(q0).idle() and len(c._held) == 0, "nothing cached or held")
