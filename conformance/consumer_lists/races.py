"""Races of the other actors (issue 16) with the consumers, on the deterministic scheduler.

The call-level view (``calls.py``) runs every call to completion, so a consumer's pull is never
split by a delete, a reject or a group being freed: the races the model explores step by step
(``model/consumer_lists/actors.py``: a consumer's find-then-acquire against the housekeeping
thread's ``deleteEntry``, a delete meeting an acquisition not yet sent, a pull against the release
that frees a message group) cannot show there.  This module runs them on the reference
implementation's own threads under ``conq.impl.scheduling.DeterministicScheduler``: each
*scenario* is a few logical threads (a consumer's IO thread pulling, the housekeeping thread or a
management delete, a client settling, rejecting, removing) over a tiny queue, and
``BoundedExploration`` runs every schedule with 0, then 1, then 2 deviations from the default
schedule, fewest first (a count, never a time).

Every schedule is checked against the model's claims for these actors:

* ``deleted-never-delivered`` (a delete through ``delete_entry`` or ``delete_message``): at every send (``Queue._sent``, the model's ``deliver`` step) the
  consumer holds the entry; an entry a delete took while available is never delivered; every
  delete completes (the entry ends DELETED, no delete left waiting);
* ``rejected-not-redelivered``: a consumer is never sent an entry it rejected;
* ``group-held-by-one-consumer``: at every send, no other consumer holds an entry of the group;
* no lost wake-up: once the threads are done, the consumers pull whenever their IO thread was
  scheduled (as it would be) and, after that, no available entry is left that a registered
  consumer with credit may take (not rejected by it, its group not held by another consumer).

A failure is an ``AssertionError`` naming the scenario, the schedule (``Deviation`` s, which replay
it: ``replay(name, schedule)``) and what broke.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from conq.impl.consumer_lists.housekeeping import Housekeeping
from conq.impl.consumer_lists.queue import MessageState, Queue, QueueError
from conq.impl.scheduling import BoundedExploration, DeterministicScheduler, Deviation

from conq.conformance.consumer_lists.driver import consumer_tag

#: scheduler options: lock releases are interleaving points (a write moved out of a critical
#: section shows), and a livelock is bounded
OPTIONS: dict[str, Any] = {"release_points": True, "max_steps": 5_000}
#: deviations from the default schedule explored per scenario (every schedule up to this many)
BOUND = 2
#: pulls one IO thread makes at most per wake-up burst (the scenarios need two or three)
PULLS = 4


class _Probe(Queue):
    """The reference queue (or a mutant of it: mutants patch ``Queue``'s methods, which this class
    inherits) with the model's checks at the send."""

    run: Run

    def _sent(self, c, entry):  # noqa: ANN001 - the queue's own signature
        r = self.run
        if entry.state is not MessageState.ACQUIRED or entry.owner != c.id:
            r.fail(f"consumer {c.id} is sent message {entry.id} while it does not hold it "
                   f"({entry.state.name}, owner {entry.owner!r})")
        if entry.rejected_by and c.id in entry.rejected_by:
            r.fail(f"consumer {c.id} is sent message {entry.id}, which it rejected")
        if entry.group is not None:
            others = [e.id for e in self._entries.values()
                      if e.group == entry.group and e.state is MessageState.ACQUIRED and e.owner != c.id]
            if others:
                r.fail(f"consumer {c.id} is sent message {entry.id} of group {entry.group} while another consumer "
                       f"holds {others}")
        if entry.id in r.taken_available:
            r.fail(f"consumer {c.id} is sent message {entry.id}, which a delete took while it was available")
        r.sent.append((c.id, entry.id))
        super()._sent(c, entry)


@dataclass
class Run:
    """One scenario's run under one schedule: the queue, the consumers' IO bookkeeping, what the
    threads saw."""

    q: _Probe
    expired: set[int] = field(default_factory=set)
    scheduled: dict[Any, bool] = field(default_factory=dict)
    pulling: dict[Any, bool] = field(default_factory=dict)
    sent: list[tuple[Any, int]] = field(default_factory=list)
    taken_available: set[int] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def fail(self, problem: str) -> None:
        self.problems.append(problem)
        raise AssertionError(problem)

    def listener(self, consumer) -> None:  # noqa: ANN001
        self.scheduled[consumer.id] = True

    def add(self, c: int, priority: int, credit: int):
        """Scenario consumer ``c``, added with the tag a broker gives it (driver.consumer_tag)."""
        tag = consumer_tag(c)
        self.scheduled[tag] = self.pulling[tag] = False
        return self.q.add_consumer(tag, priority=priority, credit=credit, listener=self.listener)

    def pull(self, c) -> int | None:  # noqa: ANN001
        """The IO thread: while scheduled or still pulling, deliverSingleMessage."""
        got = None
        for _ in range(PULLS):
            if c.closed or not (self.scheduled[c.id] or self.pulling[c.id]):
                break
            self.scheduled[c.id] = False
            mid = self.q.deliver_single_message(c)
            self.pulling[c.id] = mid is not None
            got = mid if mid is not None else got
        return got

    def delete(self, mid: int, via: str = "delete_entry") -> Any:
        """A management delete: ``delete_entry`` (upstream's ``deleteEntry``) or the administrative
        ``delete_message``."""
        with self.q._lock:  # read with the delete's own section order: the state it will find
            was_available = self.q._entries[mid].state is MessageState.AVAILABLE
        result = getattr(self.q, via)(mid)
        if result is None and was_available:
            self.taken_available.add(mid)
        return result


def _clock(run: Run) -> Callable[[], Any]:
    """The queue's clock: message ``mid`` (enqueued with ``ttl=mid``) is expired exactly when the
    scenario put it in ``run.expired``."""

    class Deadline:
        __slots__ = ("mid",)

        def __init__(self, mid: int):
            self.mid = mid

        def __le__(self, now: Any) -> bool:
            return self.mid in run.expired

        def __gt__(self, now: Any) -> bool:
            return self.mid not in run.expired

    class Now:
        def __add__(self, ttl: int) -> Deadline:
            return Deadline(ttl)

    now = Now()
    return lambda: now


def _final_checks(r: Run, *, deleted: tuple[int, ...] = ()) -> None:
    q = r.q
    # the IO threads run again whenever they were scheduled (a later wake-up is not lost)
    for _ in range(3):
        for c in list(q.consumers()):
            if not c.closed:
                r.pull(c)
    snap = q.snapshot()
    if snap["delete_waiting"]:
        r.fail(f"deletes still wait for messages {snap['delete_waiting']}")
    for mid in deleted:
        if snap["messages"][str(mid)]["state"] != "deleted":
            r.fail(f"message {mid} was deleted but ends {snap['messages'][str(mid)]['state']}")
    owners = snap["groups"]
    for key, m in snap["messages"].items():
        if m["state"] != "available":
            continue
        entry = q._entries[int(key)]
        for c in q.consumers():
            if c.closed or not c.acquires or c.credit == 0 or not c.flow_active:
                continue
            if c.id in snap["rejected_by"].get(key, ()):
                continue
            if entry.group is not None:
                owner = owners.get(str(entry.group))
                holders = {e.owner for e in q._entries.values()
                           if e.group == entry.group and e.state is MessageState.ACQUIRED}
                if owner not in (None, c.id) and (q.group_policy == "assigned" or holders - {c.id}):
                    continue
            r.fail(f"stall: message {key} is available, consumer {c.id} may take it, and nobody will pull "
                   f"(lost wake-up); consumers {[(x.id, x.state.name) for x in q.consumers()]}")


# -- the scenarios --------------------------------------------------------------------------------
# Each builds its queue and runs its set-up inside the scheduler's main thread (the deterministic
# scheduler's locks belong to its logical threads), then spawns the racing threads.
def _new(sched: DeterministicScheduler, **kw: Any) -> Run:
    r = Run(None)  # type: ignore[arg-type]
    if kw.pop("ttl", False):
        kw["clock"] = _clock(r)
    r.q = _Probe(sched, **kw)
    r.q.run = r
    return r


def _race(sched: DeterministicScheduler, threads: dict[str, Callable[[], Any]]) -> None:
    handles = [sched.spawn(fn, name) for name, fn in threads.items()]
    for h in handles:
        h.join()


def _pull_vs_delete(sched: DeterministicScheduler, via: str = "delete_entry") -> None:
    """A consumer's find-then-acquire (and send) against a management delete of the entry it is
    about to take: the delete takes it available (never delivered), steals it sent, or waits for
    the send of an acquisition it met unsent.  ``via``: ``delete_entry`` or ``delete_message`` (the
    administrative removal; issue 32: it took an unsent acquisition and notified nobody)."""
    def main() -> None:
        r = _new(sched)
        c0 = r.add(0, 1, 2)
        m1, m2 = r.q.enqueue("a"), r.q.enqueue("b")
        _race(sched, {"io-c0": lambda: r.pull(c0), "management": lambda: r.delete(m1, via)})
        _final_checks(r, deleted=(m1,))
        if (consumer_tag(0), m2) not in r.sent:
            r.fail(f"message {m2} was never delivered")

    sched.run(main)


def _pull_vs_expiry(sched: DeterministicScheduler) -> None:
    """TTL expiry: the housekeeping thread's pass and the consumer passing the expired entry both
    try to delete it; it is never delivered, and the consumer gets the next one."""
    def main() -> None:
        r = _new(sched, ttl=True)
        c0 = r.add(0, 1, 2)
        m1 = r.q.enqueue("a", ttl=1)
        m2 = r.q.enqueue("b", ttl=2)
        r.expired.add(m1)
        hk = Housekeeping(r.q, interval=1.0)
        _race(sched, {"io-c0": lambda: r.pull(c0), "housekeeping": hk.run_once})
        _final_checks(r, deleted=(m1,))
        if any(mid == m1 for _, mid in r.sent):
            r.fail(f"expired message {m1} was delivered")
        if (consumer_tag(0), m2) not in r.sent:
            r.fail(f"message {m2} was never delivered")

    sched.run(main)


def _two_consumers_vs_delete(sched: DeterministicScheduler, via: str = "delete_entry") -> None:
    """Two consumers of two priorities and a delete of the first entry while both may pull: the
    delete's notification (DEV-016) and the pulls' hand-overs leave nobody waiting."""
    def main() -> None:
        r = _new(sched)
        c0 = r.add(0, 2, 1)
        c1 = r.add(1, 1, 1)
        m1 = r.q.enqueue("a")
        r.q.enqueue("b")
        _race(sched, {"io-c0": lambda: r.pull(c0), "io-c1": lambda: r.pull(c1),
                      "management": lambda: r.delete(m1, via)})
        _final_checks(r, deleted=(m1,))

    sched.run(main)


def _held_delete_vs_unhold(sched: DeterministicScheduler) -> None:
    """A delete meets a held entry and waits (a delayed acquisition); the housekeeping thread un-holds
    it while the consumer pulls: the delete completes on the entry's next state change."""
    def main() -> None:
        r = _new(sched)
        c0 = r.add(0, 1, 2)
        m1 = r.q.enqueue("a", held=True)
        r.q.enqueue("b")
        _race(sched, {"io-c0": lambda: r.pull(c0), "management": lambda: r.delete(m1),
                      "housekeeping": lambda: r.q.unhold(m1)})
        _final_checks(r, deleted=(m1,))

    sched.run(main)


def _reject_vs_pull(sched: DeterministicScheduler) -> None:
    """A consuming connection's IO thread rejects the entry its consumer holds, and goes on pulling,
    while the other consumer pulls: the rejecter is never sent it again, the other one gets it."""
    def main() -> None:
        r = _new(sched)
        c0 = r.add(0, 1, 2)
        c1 = r.add(1, 1, 2)
        m1 = r.q.enqueue("a")
        r.pull(c0)
        if (consumer_tag(0), m1) not in r.sent:
            r.fail(f"set-up: consumer 0 did not take message {m1}")

        def reject_then_pull() -> None:
            r.q.reject(m1, c0)
            r.scheduled[c0.id] = True  # its IO thread goes on: it must find nothing it may take
            r.pull(c0)

        _race(sched, {"io-c0": reject_then_pull, "io-c1": lambda: r.pull(c1)})
        _final_checks(r)
        if (consumer_tag(1), m1) not in r.sent:
            r.fail(f"message {m1}, rejected by consumer 0, never reached consumer 1")

    sched.run(main)


def _group_freed_vs_pull(sched: DeterministicScheduler, policy: str = "shared") -> None:
    """One message group of two entries: the higher consumer holds the first (and has no credit
    left), the lower one waits for the group; the holder settles it (shared: the group is freed) or
    is removed (standard groups: its assignment is cleared) while the lower consumer pulls: it gets
    the second entry."""
    def main() -> None:
        r = _new(sched, group_policy=policy)
        c0 = r.add(0, 2, 1)
        c1 = r.add(1, 1, 2)
        m1 = r.q.enqueue("a", group=0)
        m2 = r.q.enqueue("b", group=0)
        r.pull(c0)
        if (consumer_tag(0), m1) not in r.sent:
            r.fail(f"set-up: consumer 0 did not take message {m1}")

        def free() -> None:
            if policy == "shared":
                r.q.settle_owned(m1, c0)
            else:
                r.q.remove_consumer(c0)

        _race(sched, {"client-c0": free, "io-c1": lambda: r.pull(c1)})
        _final_checks(r)
        if (consumer_tag(1), m2) not in r.sent:
            r.fail(f"message {m2} never reached consumer 1 after the group was freed")

    sched.run(main)


SCENARIOS: dict[str, Callable[[DeterministicScheduler], None]] = {
    "pull-vs-delete": _pull_vs_delete,
    "pull-vs-expiry": _pull_vs_expiry,
    "two-consumers-vs-delete": _two_consumers_vs_delete,
    "held-delete-vs-unhold": _held_delete_vs_unhold,
    "reject-vs-pull": _reject_vs_pull,
    "shared-group-freed-vs-pull": _group_freed_vs_pull,
    "assigned-group-removed-vs-pull": lambda s: _group_freed_vs_pull(s, "assigned"),
    # the administrative removal (issue 32), after the scenarios the mutants' tests count on
    "pull-vs-delete-message": lambda s: _pull_vs_delete(s, "delete_message"),
    "two-consumers-vs-delete-message": lambda s: _two_consumers_vs_delete(s, "delete_message"),
}


@dataclass
class RaceResult:
    explored: int = 0
    per_scenario: dict[str, int] = field(default_factory=dict)
    complete: bool = True  # every schedule up to BOUND deviations of every scenario ran
    failure: str | None = None
    schedule: tuple[Deviation, ...] = ()
    stopped: bool = False

    def describe(self) -> str:
        runs = ", ".join(f"{k} {v}" for k, v in self.per_scenario.items())
        return f"{self.explored} schedules ({runs}; every schedule with <= {BOUND} deviations: {self.complete})"


def explore_races(budget: int, *, stop: Callable[[], bool] | None = None) -> RaceResult:
    """Every schedule with 0, then 1, then 2 deviations of every scenario, fewest first, at most
    ``budget`` schedules in all; stops at the first failure."""
    out = RaceResult()
    explorations = {name: BoundedExploration(fn, bound=BOUND, **OPTIONS) for name, fn in SCENARIOS.items()}
    for depth in range(BOUND + 1):
        for name, ex in explorations.items():
            for trial in ex.level(depth):
                out.explored += 1
                out.per_scenario[name] = out.per_scenario.get(name, 0) + 1
                if trial.failed:
                    err = trial.error.__cause__ or trial.error  # the scheduler wraps the thread's failure
                    text = str(err).splitlines()[0] if str(err) else type(err).__name__
                    if not isinstance(err, (AssertionError, QueueError)):
                        text = f"{type(err).__name__}: {text}"
                    out.failure = f"{name}, schedule {[str(d) for d in trial.schedule] or 'default'}: {text}"
                    out.schedule = trial.schedule
                    return out
                if out.explored >= budget:
                    out.complete = False
                    return out
                if stop is not None and stop():
                    out.stopped = True
                    out.complete = False
                    return out
    return out


def replay(name: str, schedule: tuple[Deviation, ...] = ()) -> BaseException | None:
    """Run scenario ``name`` under the fixed schedule ``schedule``; the failure, or None."""
    sched = DeterministicScheduler(0, strategy="fixed", schedule=tuple(schedule), **OPTIONS)
    try:
        SCENARIOS[name](sched)
    except Exception as e:  # the scenario's own verdict
        return e
    return None
