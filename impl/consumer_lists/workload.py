"""A publish/consume workload over the whole chain, with its correctness checks.

What it is
----------
One driver used by the stress test (real threads), by the seeded exploration test (deterministic
scheduler) and by the throughput benchmark: publisher threads enqueue, connections with sessions,
targets and consumers (acquiring consumers of several priorities, browsers, credit windows) pull
through the 12-step chain on an ``IOThreadPool``, an optional thread toggles flow control, and the
run is checked:

* nothing lost and nothing acquired twice (every message settled exactly once, by its owner);
* every browser saw messages at most once and in queue order, and saw *every* message of the
  browse phase (published while all acquiring consumers were suspended);
* no lost wake-up: once publishing and toggling are over every message is consumed.  Under the
  deterministic scheduler a timed wait only fires when no logical thread can run (virtual time), so
  "the main thread's wait timed out before everything was consumed" *is* "the system went quiescent
  with a message available while an interested consumer with credit idled"; on real threads the
  same condition is detected as "no progress for ``stall_timeout`` seconds";
* bounded completion: every wait has a timeout and a hang becomes a ``WorkloadError``.

Concurrency argument: this module only uses the public operations of ``queue`` and ``delivery`` plus
its own counters under ``_lock`` (a leaf lock).  The per-connection records are written only by the
IO thread currently processing that connection (the ``scheduled`` token of ``delivery``) and read by
the main thread after the IO pool is stopped (join = happens-before).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from conq.impl.consumer_lists.delivery import Connection, IOThreadPool
from conq.impl.consumer_lists.queue import DEFAULT_PRIORITY, Queue, QueueConsumer
from conq.impl.scheduling import REAL

__all__ = ["ConsumerSpec", "WorkloadError", "WorkloadResult", "run_workload"]


class WorkloadError(AssertionError):
    """A correctness check of the workload failed (the message says which, with evidence)."""


@dataclass(frozen=True)
class ConsumerSpec:
    priority: int = DEFAULT_PRIORITY
    acquires: bool = True
    credit_window: int | None = None  # None: unlimited credit; else re-granted when it runs out


@dataclass
class WorkloadResult:
    messages: int
    elapsed: float
    deliveries: dict[Any, int] = field(default_factory=dict)  # consumer id -> acquired count
    browsed: dict[Any, int] = field(default_factory=dict)  # browser id -> messages seen
    notifications: int = 0
    steps: int = 0  # deterministic scheduler steps (0 on real threads)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else float("inf")


def run_workload(
    *,
    sched: Any = REAL,
    publishers: int = 2,
    messages_per_publisher: int = 1000,
    connections: list[list[ConsumerSpec]] | None = None,
    io_threads: int = 2,
    flow_toggles: int = 0,
    browse_phase_messages: int = 0,
    seed: int = 0,
    timeout: float = 60.0,
    stall_timeout: float = 10.0,
    batch: int = 64,
    check: bool = True,
) -> WorkloadResult:
    """Run the workload (see module docstring) and return what happened; raise ``WorkloadError``."""
    if connections is None:
        connections = [[ConsumerSpec()]]
    box: dict[str, Any] = {}

    def main() -> None:
        box["result"] = _Run(sched, publishers, messages_per_publisher, connections, io_threads, flow_toggles,
                             browse_phase_messages, seed, timeout, stall_timeout, batch, check).run()

    sched.run(main)
    result: WorkloadResult = box["result"]
    result.steps = getattr(sched, "steps", 0)
    return result


class _Run:
    def __init__(self, sched: Any, publishers: int, per_publisher: int, connections: list[list[ConsumerSpec]],
                 io_threads: int, flow_toggles: int, browse_phase: int, seed: int, timeout: float,
                 stall_timeout: float, batch: int, check: bool) -> None:
        self.sched = sched
        self.det = bool(getattr(sched, "deterministic", False))
        self.publishers = publishers
        self.per_publisher = per_publisher
        self.flow_toggles = flow_toggles
        self.browse_phase = browse_phase
        self.rng = random.Random(seed)
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.check = check
        self.total = publishers * per_publisher + browse_phase
        self.queue = Queue(sched, "q", record_events=False, retain_deleted=False)
        self.pool = IOThreadPool(sched, io_threads)
        self._lock = sched.lock("workload")
        self._cv = sched.condition(self._lock, "workload.progress")
        self.settled = 0
        self.acquirers: list[QueueConsumer] = []
        self.browsers: list[QueueConsumer] = []
        self.records: dict[Any, list[int]] = {}
        self.windows: dict[Any, int | None] = {}
        self.connections: list[Connection] = []
        for ci, specs in enumerate(connections):
            conn = Connection(f"c{ci}", pool=self.pool, sched=sched, sink=self._sink)
            session = conn.create_session()
            for ti, spec in enumerate(specs):
                target = session.create_target(batch=batch)
                cid = f"c{ci}.{ti}" + ("" if spec.acquires else "b")
                self.records[cid] = []
                self.windows[cid] = spec.credit_window
                c = target.subscribe(self.queue, cid, priority=spec.priority, acquires=spec.acquires,
                                     credit=spec.credit_window)
                (self.acquirers if spec.acquires else self.browsers).append(c)
            self.connections.append(conn)
        if not self.acquirers:
            raise ValueError("the workload needs at least one acquiring consumer")

    # -- IO thread side ----------------------------------------------------------------------------
    def _sink(self, consumer: QueueConsumer, msg_id: int) -> None:
        """Step 12 plus the client's reaction: settle what was acquired, grant more credit."""
        self.records[consumer.id].append(msg_id)
        window = self.windows[consumer.id]
        if window is not None and consumer.credit == 0:
            consumer.add_credit(window)
        if consumer.acquires:
            self.queue.settle(msg_id, consumer)
            with self._lock:
                self.settled += 1
                if self.settled >= self.total:
                    self._cv.notify_all()

    # -- other threads -------------------------------------------------------------------------------
    def _publisher(self, n: int) -> None:
        for i in range(self.per_publisher):
            self.queue.enqueue((n, i))

    def _toggler(self) -> None:
        rng = random.Random(self.rng.random())
        for _ in range(self.flow_toggles):
            c = rng.choice(self.acquirers + self.browsers)
            c.set_flow(False)
            if not self.det:
                time.sleep(0.0005 * rng.random())
            c.set_flow(True)

    # -- main ----------------------------------------------------------------------------------------
    def _wait(self, done: Any, what: str, progress: Any) -> None:
        """Wait until ``done()``; fail on quiescence (deterministic) / stall or deadline (real)."""
        deadline = time.monotonic() + self.timeout
        last, last_change = progress(), time.monotonic()
        with self._cv:
            while not done():
                notified = self._cv.wait(1.0 if self.det else 0.05)
                if self.det:
                    if not notified and not done():
                        raise self._failure(f"{what}: went quiescent before completion (lost wake-up)")
                    continue
                now = time.monotonic()
                p = progress()
                if p != last:
                    last, last_change = p, now
                elif now - last_change > self.stall_timeout:
                    raise self._failure(f"{what}: no progress for {self.stall_timeout}s (lost wake-up or hang)")
                if now > deadline:
                    raise self._failure(f"{what}: not done within {self.timeout}s")

    def _failure(self, text: str) -> WorkloadError:
        snap = self.queue.snapshot()
        available = [m for m, v in snap["messages"].items() if v["state"] == "available"]
        idle = [cid for cid, v in snap["consumers"].items()
                if v["acquiring"] and v["notify_work_desired"] and v["state"] in ("INTERESTED", "NOTIFIED")]
        return WorkloadError(
            f"{text}; settled {self.settled}/{self.total}; available messages {available[:10]} "
            f"(count {snap['available_count']}); acquiring consumers wanting work {idle}; "
            f"lists: interested={snap['interested']} notified={snap['notified']} "
            f"not_interested={snap['not_interested']}; pending connections "
            f"{[c.name for c in self.connections if c.has_pending_work() or c.scheduled]}"
        )

    def run(self) -> WorkloadResult:
        start = time.perf_counter()
        self.pool.start()
        try:
            if self.browse_phase:
                self._run_browse_phase()
            handles = [self.sched.spawn(lambda n=n: self._publisher(n), f"pub{n}") for n in range(self.publishers)]
            if self.flow_toggles:
                handles.append(self.sched.spawn(self._toggler, "toggler"))
            for h in handles:
                if not h.join(self.timeout):
                    raise self._failure(f"thread {h.name} did not finish in {self.timeout}s")
            self._wait(lambda: self.settled >= self.total, "consumption", lambda: self.settled)
        finally:
            self.pool.stop(timeout=self.timeout)
        elapsed = time.perf_counter() - start
        if self.check:
            self._check()
        return WorkloadResult(
            messages=self.total,
            elapsed=elapsed,
            deliveries={c.id: len(self.records[c.id]) for c in self.acquirers},
            browsed={b.id: len(self.records[b.id]) for b in self.browsers},
            notifications=sum(c.notified_count for c in self.acquirers + self.browsers),
        )

    def _run_browse_phase(self) -> None:
        """All acquirers suspended: every browser must see every message of this phase."""
        for c in self.acquirers:
            c.set_flow(False)
        for i in range(self.browse_phase):
            self.queue.enqueue(("browse", i))
        expected = set(range(1, self.browse_phase + 1))

        def seen_all() -> bool:
            return all(expected.issubset(self.records[b.id]) for b in self.browsers)

        # browsers are driven by IO threads; progress is visible through their records
        self._wait_poll(seen_all, "browse phase", lambda: sum(len(self.records[b.id]) for b in self.browsers))
        for c in self.acquirers:
            c.set_flow(True)

    def _wait_poll(self, done: Any, what: str, progress: Any) -> None:
        if not self.browsers:
            return
        # the sink only signals settlements, so poll: on the deterministic scheduler a timed wait
        # fires at quiescence, which is exactly when the browsers can make no more progress
        self._wait(done, what, progress)

    def _check(self) -> None:
        q = self.queue
        acquired: dict[int, Any] = {}
        for c in self.acquirers:
            for m in self.records[c.id]:
                if m in acquired:
                    raise WorkloadError(f"message {m} acquired twice: by {acquired[m]!r} and by {c.id!r}")
                acquired[m] = c.id
        missing = set(range(1, self.total + 1)) - acquired.keys()
        if missing:
            raise WorkloadError(f"{len(missing)} messages never delivered, e.g. {sorted(missing)[:10]}")
        if len(acquired) != self.total:
            raise WorkloadError(f"{len(acquired)} messages acquired, {self.total} published")
        for b in self.browsers:
            seen = self.records[b.id]
            if len(seen) != len(set(seen)):
                raise WorkloadError(f"browser {b.id!r} saw a message twice")
            if seen != sorted(seen):
                raise WorkloadError(f"browser {b.id!r} saw messages out of queue order")
            if self.browse_phase and not set(range(1, self.browse_phase + 1)).issubset(seen):
                raise WorkloadError(f"browser {b.id!r} missed browse-phase messages")
        if q.available_count != 0:
            raise WorkloadError(f"{q.available_count} messages still available after the run")
