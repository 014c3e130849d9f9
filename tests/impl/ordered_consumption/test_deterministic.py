"""The push consumer, broker and channel under the seeded ``DeterministicScheduler``: every lock,
wait and thread start is an interleaving point the seed decides, so each run is one replayable
interleaving.  FIFO order per group, one consumption per process queue at a time, and completion
must hold in every explored interleaving; the same seed must give the same run."""

from __future__ import annotations

import pytest

from conq.impl.ordered_consumption import (
    Broker,
    ConsumeResult,
    FaultPlan,
    InProcessChannel,
    ManualClock,
    Message,
    MessageType,
    PushConsumer,
    RetryPolicy,
)
from conq.impl.scheduling import DeterministicScheduler


def _run(seed: int, strategy: str):
    sched = DeterministicScheduler(seed, strategy=strategy, pct_steps=3000)
    out: dict = {"violations": [], "starts": [], "active": {}, "max_active": 0}

    def main():
        clock = ManualClock(sched=sched)
        lock = sched.lock("test")
        done = sched.condition(lock, "test.done")
        settled: set[bytes] = set()

        def observe(event, group, message_id, attempt, body):
            if event in ("acked", "dlq-client", "dlq-server"):
                with lock:
                    settled.add(body)
                    done.notify_all()

        broker = Broker(clock=clock, sched=sched, observer=observe).start()
        mqs = broker.create_topic("T", 2, message_type=MessageType.FIFO)
        broker.create_consumer_group("G", fifo=True, retry_policy=RetryPolicy.immediate(2), receive_batch_size=4)
        # retriable faults and invalid handles on the settles exercise C1/C2 in every interleaving
        plan = FaultPlan(seed, {"ack_message": {"unavailable": 0.2, "invalid-handle": 0.1},
                                "forward_to_dlq": {"timeout": 0.2}}, max_delivery_faults=1)
        channel = InProcessChannel(broker, plan, sched=sched)
        bodies = []
        for seq in range(3):
            for g, q in (("a", 0), ("b", 0), ("c", 1)):
                body = b"%s:%d" % (g.encode(), seq)
                broker.send_message(mqs[q], Message("T", body, group=g), MessageType.FIFO)
                bodies.append(body)

        def listener(m):
            g, seq = m.body.split(b":")
            with lock:
                for earlier in range(int(seq)):
                    if b"%s:%d" % (g, earlier) not in settled:
                        out["violations"].append((m.body, earlier))
                out["starts"].append(m.body)
                q = m.queue.queue_id
                out["active"][q] = out["active"].get(q, 0) + 1
                out["max_active"] = max(out["max_active"], out["active"][q])
            sched.point("listener")
            with lock:
                out["active"][m.queue.queue_id] -= 1
            return ConsumeResult.FAILURE if m.body == b"b:1" else ConsumeResult.SUCCESS

        c = PushConsumer(channel, "G", "T", listener, clock=clock, sched=sched, consumption_threads=2,
                         long_polling_timeout=30.0, receive_retry_delay=0.0, settle_retry_delay=0.0)
        c.start()
        with lock:
            while len(settled) < len(bodies):
                done.wait()
        c.shutdown()
        out["dead"] = sorted(d.body for d in broker.dead_letters("G"))
        out["unsettled"] = broker.unsettled("G")

    sched.run(main, wall_timeout=60)
    out["log"] = list(sched.log)
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_fifo_consumption_in_explored_interleavings(seed, strategy):
    out = _run(seed, strategy)
    assert out["violations"] == []
    assert out["max_active"] == 1
    assert out["dead"] == [b"b:1"] and out["unsettled"] == 0
    assert set(out["starts"]) >= {b"%s:%d" % (g, s) for g in (b"a", b"b", b"c") for s in range(3)}


def test_a_seed_replays_the_same_run():
    a, b = _run(3, "random"), _run(3, "random")
    assert a["starts"] == b["starts"] and a["log"] == b["log"] and len(a["log"]) > 100
