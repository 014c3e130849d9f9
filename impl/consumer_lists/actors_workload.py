"""A checked workload with every actor of issue 16 on, on real threads.

Two queues -- one with shared message groups (``DefinedGroupMessageGroupManager``), one with
standard groups (``AssignedConsumerMessageGroupManager``) -- are driven at once by:

* publisher threads: every message goes to one queue; some are grouped, some have a TTL (some so
  short they expire before anyone can take them, some racing the consumers), some arrive held;
* consumers of three priorities on several connections, served by an ``IOThreadPool``; some with a
  credit window the sink refills; the sink settles, releases (at most ``MAX_RELEASES`` times per
  message) or rejects (at most once per message) what it receives;
* one housekeeping thread per queue (``Housekeeping``: TTL expiry through ``delete_entry``);
* a management thread: ``delete_entry`` of recent messages (available, held, sent or unsent), and
  ``unhold`` of the held ones;
* a churn thread adding and removing consumers, and a flow thread suspending and resuming the
  high-priority consumers (so lower priorities are served too).

Checked (each a count, never a time): nothing lost -- every message of both queues left its queue
exactly once, settled by a consumer (counted by the sink, exactly once), expired, or deleted
(``Queue.dispositions``, ``disposition_conflicts == 0``); nothing acquired twice -- a message is
never handed to a consumer while the harness still records another consumer holding it (a holder
is cleared before its release / reject / settle, and under the harness lock together with a
removal); a rejected message never reaches its rejecter again; group ownership never violated --
``Queue.check_invariants`` (entry states against the group manager: one holder per shared group, no
holder but the assigned consumer) every ``check_every`` deliveries (default 100: a check is one
queue-lock pass over the backlog, at most ``max_backlog`` entries, and costs nothing measurable at
that rate; every 5,000 it missed ``group-owner-ignored``) and at the end, with nothing else found
either; a management delete that had to wait (a held entry, an unsent acquisition) ends with the
entry deleted; every send is made only of an entry its consumer holds and that has not left the queue
(``_CheckedQueue._sent``: a delete that steals an unsent acquisition, or an acquire that lets a
deleted entry through, shows there); no stall -- the run completes: with the churn and flow threads
stopped and every consumer resumed, every remaining message is delivered, expired or deleted; no
actor thread fails (an exception out of a publisher, the management, churn or flow thread -- e.g.
``remove_consumer`` tripping over a broken invariant -- is a finding, reported at once, never just a
traceback on stderr).  Seconds are only the loud safety caps ``stall_timeout`` (no progress for that
long with work pending) and ``timeout``.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from conq.impl.consumer_lists.delivery import Connection, ConsumerTarget, IOThreadPool
from conq.impl.consumer_lists.housekeeping import Housekeeping
from conq.impl.consumer_lists.queue import DISPOSITIONS, MessageState, Queue, QueueConsumer, QueueError

__all__ = ["ActorsResult", "ActorsWorkloadError", "run_all_actors"]

PRIORITIES = (10, 5, 1)
MAX_RELEASES = 2
#: threads of a default run: publishers + IO threads + 2 housekeeping + management + churn + flow + main
DEFAULT_THREADS = 16


class ActorsWorkloadError(AssertionError):
    """A check of the all-actors workload failed (the text says which and why)."""


@dataclass
class ActorsResult:
    messages: int
    seconds: float
    threads: int
    settled: int = 0
    expired: int = 0
    deleted: int = 0
    deliveries: int = 0
    releases: int = 0
    rejects: int = 0
    steals_seen: int = 0  # settles that found their message stolen (deleted / expired after the send)
    delete_calls: dict[str, int] = field(default_factory=dict)  # delete_entry outcomes
    unholds: int = 0
    consumers_added: int = 0
    consumers_removed: int = 0
    flow_toggles: int = 0
    invariant_checks: int = 0
    housekeeping_passes: int = 0
    per_queue: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        q = ", ".join(f"{name}: " + " ".join(f"{k}={v}" for k, v in d.items()) for name, d in self.per_queue.items())
        return (f"{self.messages} messages, {self.threads} threads, {self.seconds:.1f} s ({self.rate:.0f} msg/s): "
                f"settled {self.settled}, expired {self.expired}, deleted {self.deleted} "
                f"(sum {self.settled + self.expired + self.deleted}); deliveries {self.deliveries}, "
                f"releases {self.releases}, rejects {self.rejects}, stolen after send {self.steals_seen}, "
                f"delete_entry {self.delete_calls}, unholds {self.unholds}, consumers +{self.consumers_added} "
                f"-{self.consumers_removed}, flow toggles {self.flow_toggles}, invariant checks "
                f"{self.invariant_checks}, housekeeping passes {self.housekeeping_passes}; {q}")


def _h(seed: int, *xs: int) -> int:
    """A deterministic 32-bit draw per (seed, xs) (the harness's decisions do not depend on timing)."""
    d = hashlib.blake2b(repr((seed, *xs)).encode(), digest_size=4).digest()
    return int.from_bytes(d, "little")


class _CheckedQueue(Queue):
    """The reference queue (or a mutant of it: mutants patch ``Queue``'s methods, which this class
    inherits) with the model's check at the send (``deliver`` step; ``races.py`` makes the same one
    under the deterministic scheduler): the consumer holds the entry and the entry has not left the
    queue.  Until the send nothing but the consumer's removal can take the entry from it (a delete
    or an expiry waits for the send: ``makeAcquisitionStealable``), and a removal sets ``closed``
    before it releases, so a closed consumer is exempt and nothing else is."""

    problems: list[str]
    pulling: threading.local  # ``on`` while this thread is in ``_attempt_delivery``

    def _attempt_delivery(self, c: QueueConsumer) -> Any:
        tl = self.pulling
        tl.on = True
        try:
            entry = super()._attempt_delivery(c)
        finally:
            tl.on = False
        if entry is not None:
            # give the GIL away between the acquire and the send, so the management and
            # housekeeping threads' deletes meet unsent acquisitions (the window a delete must wait
            # for) far more often than the few bytecodes of the reference would let them
            time.sleep(0)
        return entry

    def _no_higher(self, c: QueueConsumer, entry: Any) -> bool:
        # a pull of a consumer of a non-default priority (all of them here) asks this between
        # finding an entry and acquiring it: giving the GIL away here lets a delete or an expiry
        # take the entry inside that window (the acquire must then fail: ``acquire-deleted``);
        # only in a pull (the notification paths ask it too, far more often)
        if getattr(self.pulling, "on", False):
            time.sleep(0)
        return super()._no_higher(c, entry)

    def _sent(self, c: QueueConsumer, entry: Any) -> None:
        with self._lock:
            held = entry.state is MessageState.ACQUIRED and entry.owner == c.id and not self.dispositions[entry.id]
            if not held and not c.closed and len(self.problems) < 20:
                self.problems.append(f"{self.name}: consumer {c.id} is sent message {entry.id} while it does not hold it "
                                     f"({entry.state.name}, owner {entry.owner!r}, disposition "
                                     f"{DISPOSITIONS.get(self.dispositions[entry.id], 'none')})")
        super()._sent(c, entry)


class _Side:
    """One queue with its bookkeeping (arrays indexed by message id)."""

    def __init__(self, name: str, policy: str, n_max: int) -> None:
        self.name = name
        self.q = _CheckedQueue(name=name, record_events=False, retain_deleted=False, max_delivery_failures=None,
                               group_policy=policy, record_dispositions=True)
        self.q.problems = []  # the send check's findings (written under the queue's lock)
        self.q.pulling = threading.local()
        self.holder = array("i", bytes(4 * (n_max + 2)))  # consumer index + 1 holding it (harness view)
        self.rejecter = array("i", bytes(4 * (n_max + 2)))  # consumer index + 1 that rejected it
        self.releases = bytearray(n_max + 2)
        self.settled = bytearray(n_max + 2)
        self.grouped = bytearray(n_max + 2)
        self.consumers: list[QueueConsumer] = []  # registered (harness view)
        self.held_by: dict[int, set[int]] = {}  # consumer index -> message ids it holds
        self.enqueued = 0
        self.held_ids: deque[int] = deque()
        #: messages a management delete had to wait for ("held" / "waiting"): written by the
        #: management thread only, read after it is joined; each must end deleted
        self.delete_waited: list[int] = []


class _Run:
    def __init__(self, messages: int, threads: int, seed: int, groups: int, check_every: int,
                 stall_timeout: float, timeout: float, max_backlog: int) -> None:
        if threads < 10:
            raise ValueError(f"threads must be >= 10 (publishers, IO threads and 6 actor threads), got {threads}")
        self.n = messages
        self.threads = threads
        self.seed = seed
        self.groups = groups
        self.check_every = check_every
        self.stall_timeout = stall_timeout
        self.timeout = timeout
        self.max_backlog = max_backlog
        # 16 threads: 4 publishers, 6 IO threads, 2 housekeeping, management, churn, flow, main
        self.n_pub = max(1, (threads - 6) * 2 // 5)
        self.n_io = threads - 6 - self.n_pub
        self.lock = threading.Lock()  # the harness's own records (holder, held_by, violations)
        self.violations: list[str] = []
        self.sides = [_Side("shared", "shared", messages), _Side("assigned", "assigned", messages)]
        self.pool = IOThreadPool(threads=self.n_io, name="io")
        self.connections = [Connection(f"conn{i}", pool=self.pool, sink=self._sink) for i in range(4)]
        self.targets: list[ConsumerTarget] = [conn.create_session().create_target(batch=16) for conn in self.connections]
        self.by_index: dict[int, tuple[_Side, QueueConsumer, int | None]] = {}  # index -> side, consumer, window
        self.next_index = 1
        self.stop_actors = threading.Event()
        self.published = 0
        self.result = ActorsResult(messages=messages, seconds=0.0, threads=threads)
        self.delete_calls: dict[str, int] = {}
        self.deliveries = 0
        self.rng = random.Random(seed)
        self.suspended: set[int] = set()
        self.thread_errors: list[str] = []  # actor threads that raised (each is a finding)

    def _actor(self, fn: Any) -> Any:
        """``fn`` as an actor thread's body: an exception out of it is recorded (the run fails at
        once, naming the thread and where it raised) and the other actors are told to stop."""

        def body(*args: Any) -> None:
            try:
                fn(*args)
            except BaseException as exc:
                tb = exc.__traceback__
                while tb is not None and tb.tb_next is not None:
                    tb = tb.tb_next
                where = f" at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno} " \
                        f"({tb.tb_frame.f_code.co_name})" if tb is not None else ""
                with self.lock:
                    self.thread_errors.append(f"thread {threading.current_thread().name} raised "
                                              f"{type(exc).__name__}: {exc}{where}")
                self.stop_actors.set()

        body.__name__ = fn.__name__
        return body

    # -- consumers ----------------------------------------------------------------------------
    def _add_consumer(self, side: _Side, k: int) -> None:
        """Called with ``self.lock`` held (so a concurrent sink sees a consistent harness view)."""
        idx = self.next_index
        self.next_index += 1
        prio = PRIORITIES[k % len(PRIORITIES)]
        window = 8 if k % 4 == 3 else None
        target = self.targets[k % len(self.targets)]
        self.by_index[idx] = (side, None, window)  # type: ignore[assignment]
        c = target.subscribe(side.q, idx, priority=prio, credit=window)
        self.by_index[idx] = (side, c, window)
        side.consumers.append(c)
        side.held_by[idx] = set()
        self.result.consumers_added += 1

    def _remove_consumer(self, side: _Side, c: QueueConsumer) -> None:
        """Called with ``self.lock`` held: the removal's releases and the clearing of the harness's
        holder records are one step for every sink (sinks take ``self.lock`` first)."""
        side.q.remove_consumer(c)
        side.consumers.remove(c)
        for m in side.held_by.pop(c.id, set()):
            if side.holder[m] == c.id:
                side.holder[m] = 0
        self.suspended.discard(c.id)
        self.result.consumers_removed += 1

    # -- the sink (IO threads) ---------------------------------------------------------------
    def _violation(self, text: str) -> None:
        with self.lock:
            if len(self.violations) < 20:
                self.violations.append(text)

    def _sink(self, c: QueueConsumer, m: int) -> None:
        side, _, window = self.by_index[c.id]
        idx = c.id
        with self.lock:
            if c.closed:
                return  # removed: the removal released it (under this lock)
            if side.holder[m]:
                self.violations.append(f"{side.name}: message {m} delivered to consumer {idx} while consumer "
                                       f"{side.holder[m]} holds it")
            if side.rejecter[m] == idx:
                self.violations.append(f"{side.name}: message {m} redelivered to consumer {idx}, which rejected it")
            side.holder[m] = idx
            side.held_by[idx].add(m)
            self.deliveries += 1
            check = self.deliveries % self.check_every == 0
        draw = _h(self.seed, m, side.releases[m], idx) % 100
        q = side.q
        may_reject = not side.rejecter[m] and not (side.grouped[m] and q.group_policy == "assigned")
        with self.lock:
            side.holder[m] = 0
            side.held_by[idx].discard(m)
            if draw < 4 and may_reject:
                side.rejecter[m] = idx
                action = "reject"
            elif draw < 8 and side.releases[m] < MAX_RELEASES:
                side.releases[m] += 1
                action = "release"
            else:
                action = "settle"
        if action == "reject":
            try:
                q.reject(m, c)
                with self.lock:
                    self.result.rejects += 1
            except QueueError:
                with self.lock:
                    self.result.steals_seen += 1  # deleted / expired / handed back since the send
        elif action == "release":
            if q.release_owned(m, c):
                with self.lock:
                    self.result.releases += 1
        else:
            if q.settle_owned(m, c):
                with self.lock:
                    side.settled[m] += 1
                    if side.settled[m] > 1:
                        self.violations.append(f"{side.name}: message {m} settled twice")
            else:
                with self.lock:
                    self.result.steals_seen += 1
        if window is not None:
            c.add_credit(1)
        if check:
            self._check_invariants()

    def _check_invariants(self) -> None:
        for side in self.sides:
            problems = side.q.check_invariants()
            with self.lock:
                self.result.invariant_checks += 1
                for p in problems:
                    if len(self.violations) < 20:
                        self.violations.append(f"{side.name}: {p}")

    # -- publishers ---------------------------------------------------------------------------
    def _publisher(self, p: int) -> None:
        seed = self.seed
        for k in range(p, self.n, self.n_pub):
            side = self.sides[_h(seed, k, 1) % 2]
            q = side.q
            while q.available_count > self.max_backlog and not self.stop_actors.is_set():
                time.sleep(0.0005)
            d = _h(seed, k, 2)
            group = (d % self.groups) if d % 2 == 0 else None
            t = (d >> 8) % 100
            ttl = 0.0 if t < 2 else (0.002 if t < 5 else None)
            held = (d >> 16) % 100 < 2
            with self.lock:
                m = q.enqueue(k, held=held, group=group, ttl=ttl)
                if group is not None:
                    side.grouped[m] = 1
                side.enqueued += 1
                self.published += 1
                if held:
                    side.held_ids.append(m)

    # -- management: deletes and unholds ------------------------------------------------------
    def _management(self) -> None:
        rng = random.Random(self.seed * 7 + 1)
        while True:
            done = self.published >= self.n
            for side in self.sides:
                if side.held_ids and (done or rng.random() < 0.5):
                    with self.lock:
                        m = side.held_ids.popleft() if side.held_ids else None
                    if m is not None:
                        try:
                            side.q.unhold(m)
                            self.result.unholds += 1
                        except QueueError:
                            pass  # deleted meanwhile (expired / management delete)
                top = side.q._next_id
                if rng.random() < 0.5:  # a recent message: available, held, or just sent
                    m = top - 1 - rng.randrange(min(top - 1, 300)) if top > 1 else 0
                else:  # near the head, where consumers are acquiring: sent or not yet sent
                    head = side.q._first.next
                    m = head.id + rng.randrange(4) if head is not None else 0
                    m = m if m < top else 0
                if m > 0 and rng.random() < 0.3:
                    try:
                        out = side.q.delete_entry(m)
                        key = "available" if out is None else (out if isinstance(out, str) else "stolen")
                        if key in ("held", "waiting"):
                            side.delete_waited.append(m)
                    except QueueError:
                        key = "refused"
                    self.delete_calls[key] = self.delete_calls.get(key, 0) + 1
            if done and not any(s.held_ids for s in self.sides):
                return
            time.sleep(0.0002)

    # -- churn and flow ----------------------------------------------------------------------
    def _churn(self) -> None:
        rng = random.Random(self.seed * 7 + 2)
        k = 100
        while not self.stop_actors.wait(0.01):
            side = self.sides[rng.randrange(2)]
            with self.lock:
                if len(side.consumers) > 3 and rng.random() < 0.5:
                    self._remove_consumer(side, side.consumers[rng.randrange(len(side.consumers))])
                elif len(side.consumers) < 9:
                    self._add_consumer(side, k)
                    k += 1

    def _flow(self) -> None:
        rng = random.Random(self.seed * 7 + 3)
        while not self.stop_actors.wait(0.003):
            with self.lock:
                side = self.sides[rng.randrange(2)]
                high = [c for c in side.consumers if c.priority == PRIORITIES[0]]
                if not high:
                    continue
                c = high[rng.randrange(len(high))]
                on = c.id in self.suspended
                (self.suspended.discard if on else self.suspended.add)(c.id)
                c.set_flow(on)
                self.result.flow_toggles += 1

    # -- run -----------------------------------------------------------------------------------
    def _finished(self) -> int:
        return sum(s.q.settled + s.q.expired + s.q.deleted + s.q.dead_lettered for s in self.sides)

    def run(self) -> ActorsResult:
        start = time.monotonic()
        self.pool.start()
        housekeepers = [Housekeeping(s.q, interval=0.02, name=f"hk-{s.name}") for s in self.sides]
        with self.lock:
            for side in self.sides:
                for k in range(6):
                    self._add_consumer(side, k)
        for h in housekeepers:
            h.start()
        pubs = [threading.Thread(target=self._actor(self._publisher), args=(p,), name=f"pub{p}", daemon=True)
                for p in range(self.n_pub)]
        others = [threading.Thread(target=self._actor(f), name=f.__name__, daemon=True)
                  for f in (self._management, self._churn, self._flow)]
        threads = pubs + others
        for t in threads:
            t.start()
        error: BaseException | None = None
        try:
            self._wait(lambda: self.published >= self.n, "publishing")
            self._wait(lambda: not others[0].is_alive(), "the held messages' unholds")
            self.stop_actors.set()
            for t in threads:
                t.join(self.timeout)
                if t.is_alive():
                    raise ActorsWorkloadError(f"thread {t.name} did not end within {self.timeout} s")
            with self.lock:  # quiesce: everybody wants work again
                for side in self.sides:
                    for c in side.consumers:
                        if c.id in self.suspended:
                            c.set_flow(True)
                self.suspended.clear()
            self._wait(lambda: self._finished() >= self.n, "every message settled, expired or deleted")
        except BaseException as exc:
            error = exc
        finally:
            self.stop_actors.set()
            for h in housekeepers:
                try:
                    h.stop()
                except BaseException as exc:  # a failed housekeeping pass is a defect
                    error = error or exc
            try:
                self.pool.stop()
            except BaseException as exc:
                error = error or exc
            self.result.housekeeping_passes = sum(h.passes for h in housekeepers)
        if error is not None:
            if self.thread_errors and not isinstance(error, ActorsWorkloadError):
                raise ActorsWorkloadError("all-actors workload: " + "; ".join(self.thread_errors[:20])) from error
            raise error
        self._raise_findings()
        self.result.seconds = time.monotonic() - start
        self._check_invariants()
        self._final_checks()
        return self.result

    def _wait(self, done: Any, what: str) -> None:
        start = time.monotonic()
        last, last_change = -1, start
        while not done():
            self._raise_findings()
            now = time.monotonic()
            progress = self._finished() + self.published + self.deliveries
            if progress != last:
                last, last_change = progress, now
            if now - last_change > self.stall_timeout:
                raise ActorsWorkloadError(f"stall while waiting for {what}: no progress for {self.stall_timeout} s; "
                                          + self._state())
            if now - start > self.timeout:
                raise ActorsWorkloadError(f"timeout ({self.timeout} s) waiting for {what}; " + self._state())
            if self.pool.errors:
                raise self.pool.errors[0]
            time.sleep(0.01)

    def _raise_findings(self) -> None:
        """Fail now on a failed actor thread or a bad send (not only at the end)."""
        found = self.thread_errors + [p for s in self.sides for p in s.q.problems]
        if found:
            raise ActorsWorkloadError("all-actors workload: " + "; ".join(found[:20]))

    def _state(self) -> str:
        parts = []
        for s in self.sides:
            snap = s.q.snapshot() if s.q.available_count < 50 else {}
            parts.append(f"{s.name}: enqueued {s.enqueued}, available {s.q.available_count}, settled {s.q.settled}, "
                         f"expired {s.q.expired}, deleted {s.q.deleted}, interested {snap.get('interested')}, "
                         f"notified {snap.get('notified')}, groups {snap.get('groups')}, "
                         f"waiting deletes {snap.get('delete_waiting')}")
        return "; ".join(parts)

    def _final_checks(self) -> None:
        r = self.result
        r.deliveries = self.deliveries
        r.delete_calls = dict(sorted(self.delete_calls.items()))
        total = 0
        for s in self.sides:
            q = s.q
            counts = {name: 0 for name in DISPOSITIONS.values()}
            missing = 0
            for m in range(1, s.enqueued + 1):
                code = q.dispositions[m]
                if not code:
                    missing += 1
                    if missing <= 5:
                        self.violations.append(f"{s.name}: message {m} never left the queue")
                    continue
                counts[DISPOSITIONS[code]] += 1
                if (code == 1) != (s.settled[m] == 1):
                    self.violations.append(f"{s.name}: message {m}: disposition {DISPOSITIONS[code]} but settled "
                                           f"{s.settled[m]} times by the sink")
            # a delete that waited completes when the entry's state changes next (unhold, release,
            # removal, send): whatever happens, the entry ends deleted -- never settled or expired
            waited = [m for m in s.delete_waited if DISPOSITIONS.get(q.dispositions[m]) != "deleted"]
            for m in waited[:5]:
                self.violations.append(f"{s.name}: message {m}: a delete waited for it, but it ended "
                                       f"{DISPOSITIONS.get(q.dispositions[m], 'in the queue')}")
            if q.disposition_conflicts:
                self.violations.append(f"{s.name}: {q.disposition_conflicts} messages left the queue twice")
            if q.available_count:
                self.violations.append(f"{s.name}: {q.available_count} messages still available at the end")
            r.per_queue[s.name] = {"enqueued": s.enqueued, **{k: v for k, v in counts.items() if v}}
            r.settled += counts["settled"]
            r.expired += counts["expired"]
            r.deleted += counts["deleted"]
            total += s.enqueued
        if total != self.n:
            self.violations.append(f"{total} messages enqueued, expected {self.n}")
        if r.settled + r.expired + r.deleted != self.n:
            self.violations.append(f"settled + expired + deleted = {r.settled + r.expired + r.deleted}, expected {self.n}")
        if self.violations:
            raise ActorsWorkloadError("all-actors workload: " + "; ".join(self.violations[:20]))


def run_all_actors(messages: int = 1_000_000, *, threads: int = DEFAULT_THREADS, seed: int = 1, groups: int = 8,
                   check_every: int = 100, stall_timeout: float = 60.0, timeout: float = 3600.0,
                   max_backlog: int = 500) -> ActorsResult:
    """Run the all-actors workload (module docstring); raises ``ActorsWorkloadError`` on any failed
    check, returns the figures otherwise."""
    return _Run(messages, threads, seed, groups, check_every, stall_timeout, timeout, max_backlog).run()
