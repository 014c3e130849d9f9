"""The consumer -> target -> session -> connection chain (steps 3-12 of the seed), step by step and
on real IO threads."""

import threading

from conq.impl.consumer_lists.consumer_manager import NodeState
from conq.impl.consumer_lists.delivery import Connection, IOThreadPool
from conq.impl.consumer_lists.queue import Queue


def test_chain_step_by_step_without_io_threads():
    q = Queue()
    conn = Connection("c")
    t1 = conn.create_session().create_target(batch=2)
    a = t1.subscribe(q, "a")
    assert not conn.scheduled
    q.enqueue()
    # steps 3-6: the notification marked the connection scheduled; no IO thread runs it
    assert conn.scheduled and conn.has_pending_work() and conn.outbox == []
    for _ in range(4):
        q.enqueue()
    assert conn.process() == 5  # steps 7-12, batch of 2 re-queued behind the others until empty
    assert conn.outbox == [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("a", 5)]
    assert not conn.scheduled and a.state == NodeState.INTERESTED
    assert conn.process() == 0


def test_fairness_batch_interleaves_consumers_of_one_connection():
    q = Queue()
    conn = Connection("c")
    s = conn.create_session()
    ta, tb = s.create_target(batch=1), s.create_target(batch=1)
    ta.subscribe(q, "a")
    tb.subscribe(q, "b")
    for _ in range(6):
        q.enqueue()
    conn.process()
    owners = [cid for cid, _ in conn.outbox]
    assert sorted(m for _, m in conn.outbox) == [1, 2, 3, 4, 5, 6]
    assert owners.count("a") >= 2 and owners.count("b") >= 2  # both pulled, neither starved


def test_multi_queue_target_and_browsers():
    q1, q2 = Queue(name="q1"), Queue(name="q2")
    conn = Connection("c")
    t = conn.create_session().create_target()
    t.subscribe(q1, "x1")
    t.subscribe(q2, "x2")
    t.subscribe(q1, "br", acquires=False)
    q1.enqueue()
    q2.enqueue()
    conn.process()
    # the browser was notified first (browsers before acquirers), so it saw q1's message while available
    assert sorted(conn.outbox) == [("br", 1), ("x1", 1), ("x2", 1)]


def test_io_threads_deliver_messages_published_from_other_threads():
    q = Queue(record_events=False)
    pool = IOThreadPool(threads=2).start()
    got = []
    done = threading.Event()
    lock = threading.Lock()
    total = 2000

    def sink(c, m):
        q.settle(m, c)
        with lock:
            got.append(m)
            if len(got) == total:
                done.set()

    conns = [Connection(f"c{i}", pool=pool, sink=sink) for i in range(3)]
    for i, conn in enumerate(conns):
        conn.create_session().create_target().subscribe(q, f"k{i}", credit=None if i else 5)
    conns[0].sink = lambda c, m: (sink(c, m), c.add_credit(1))
    pubs = [threading.Thread(target=lambda: [q.enqueue() for _ in range(total // 4)]) for _ in range(4)]
    for p in pubs:
        p.start()
    for p in pubs:
        p.join(30)
    assert done.wait(30), f"only {len(got)} of {total} delivered"
    pool.stop()
    assert sorted(got) == list(range(1, total + 1))


def test_pool_failure_is_reported_not_swallowed():
    q = Queue()
    pool = IOThreadPool(threads=1).start()

    def bad_sink(c, m):
        raise ValueError("boom")

    conn = Connection("c", pool=pool, sink=bad_sink)
    conn.create_session().create_target().subscribe(q, "a")
    q.enqueue()
    try:
        pool.stop()
    except RuntimeError as exc:
        assert isinstance(exc.__cause__, ValueError)
    else:
        raise AssertionError("the failure in process() was swallowed")
