"""A feed simulator for tests and benchmarks: seeded scripts of producers' streams, recording customer
listeners, one journal of everything the customer saw, and the checks of seed 004's guarantees.

Sources: seed 004 "Deferring of ProducerUp" (a recovery with its request id, the resent events, the
"up" after them; upstream's ``DeferredProducerUpComponentTest`` sends the "up" before, during and
after the events, re-recovers a producer while the first recovery is in progress or its "up" is
scheduled, and recovers three producers in parallel -- REFERENCE.md §3), "Legacy SDK issue"
(producers' streams over many matches; per-match order).

Pieces
------
* Script steps (``Recover``, ``Event``, ``Error``, ``Up``, ``Status``, ``Down``, ``Call``) and
  ``build_script(Scenario)``: per producer a stream of live events over its matches, then for each
  recovery ``Recover(p, r)``, the resent events (some of them unparsable: ``Error`` about the event),
  the "up" callbacks at the chosen moment (before / during / after the resent events), optional
  errors about no event, an optional Down; the producers' streams are interleaved by a seeded
  merge that keeps each stream's order.  Each event carries a ``Work`` payload (how long the
  customer's handler takes, whether it raises), drawn from the seed, so a scenario is a pure
  function of its ``Scenario``.
* ``Journal``: an append-only, totally ordered log (one lock) of hand-offs and of every call the
  customer's listeners received, with the calling thread.  Causality makes its order meaningful: a
  handler records ``end`` before it returns, the tracker counts the completion after that, and a
  deferred "up" is delivered (and recorded) only after reading the count -- so "end before up" in
  the journal is "completed before the up was delivered".
* ``RecordingFeedListener`` / ``RecordingGlobalListener``: the customer's listeners.
* ``FeedSimulator``: plays a script on one thread -- the feed thread -- calling the wrapped
  listeners exactly as the SDK would.
* ``check_journal``: the guarantees, as a list of violations (empty = all hold); ``run_scenario``
  ties it all together for randomised tests and the benchmarks.

Verdicts never depend on the clock: a latency changes how threads interleave, never what the checks
accept.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from conq.impl.recovery_deferral.config import ConcurrentListenerConfig
from conq.impl.recovery_deferral.events import (
    ErrorEvent,
    FeedEvent,
    RecoveryContext,
    is_up_status,
)
from conq.impl.recovery_deferral.listener import ConcurrentListener

__all__ = [
    "Call",
    "Down",
    "Entry",
    "Error",
    "Event",
    "FeedSimulator",
    "Journal",
    "RecordingFeedListener",
    "RecordingGlobalListener",
    "Recover",
    "RunResult",
    "Scenario",
    "SimulatedFailure",
    "Status",
    "Up",
    "Work",
    "build_script",
    "check_journal",
    "run_scenario",
]


# -- script ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Work:
    """What the customer's handler does with an item: block for ``latency`` seconds, then raise if
    ``fail``."""

    latency: float = 0.0
    fail: bool = False


@dataclass(frozen=True, slots=True)
class Recover:
    producer_id: int
    request_id: int


@dataclass(frozen=True, slots=True)
class Event:
    event: FeedEvent


@dataclass(frozen=True, slots=True)
class Error:
    error: ErrorEvent


@dataclass(frozen=True, slots=True)
class Up:
    """An "up" callback: ``"ProducerUp"`` (``on_producer_up``) or an up status
    (``on_producer_status_change``).  ``request``: the recovery it completes, when the script says
    (the SDK knows it: ``snapshot_complete`` carries the request id, though the callback does not) --
    a script whose ``Recover`` comes after the "up" of that recovery (a late ``onRecoveryInitiated``)
    needs it to be checked (``check_journal``)."""

    producer_id: int
    callback: str = "FirstRecoveryCompleted"
    request: int | None = None


@dataclass(frozen=True, slots=True)
class Status:
    """A status change that is not an "up" (``AliveIntervalViolation``, ...)."""

    producer_id: int
    status: str = "AliveIntervalViolation"


@dataclass(frozen=True, slots=True)
class Down:
    producer_id: int
    reason: str = "AliveIntervalViolation"


@dataclass(frozen=True)
class Call:
    """Run ``fn()`` on the feed thread at this point of the script (a test's synchronisation point)."""

    fn: Callable[[], Any]
    label: str = "call"


Step = Recover | Event | Error | Up | Status | Down | Call


@dataclass(frozen=True)
class Scenario:
    producers: int = 3
    matches_per_producer: int = 8
    live_events: int = 10  # per producer, before its first recovery
    recoveries: int = 1  # per producer
    events_per_recovery: int = 30
    up_timing: str = "after"  # "before" | "during" | "after" | "random"
    up_callbacks: tuple[str, ...] = ("FirstRecoveryCompleted",)
    error_rate: float = 0.0  # share of resent messages that arrive unparsable (an error about the event)
    errors_without_event: int = 0  # per recovery
    failure_rate: float = 0.0  # share of items whose handler raises
    latency: tuple[float, float] = (0.0, 0.0)  # handler latency range, seconds (uniform)
    down_after_up_rate: float = 0.0  # chance that a Down follows a recovery's "up" callbacks
    interleave: bool = True  # merge the producers' streams (else one producer after the other)
    #: chance that the SDK calls a recovery's onRecoveryInitiated late: after some of its resent events,
    #: maybe after its "up" (upstream's SDK, spec/deviations.md DEV-032); before the next recovery's
    late_initiation_rate: float = 0.0
    seed: int = 0


def build_script(s: Scenario) -> list[Step]:
    rng = random.Random(s.seed)

    def work() -> Work:
        lo, hi = s.latency
        return Work(latency=rng.uniform(lo, hi) if hi > 0 else 0.0, fail=rng.random() < s.failure_rate)

    streams: list[list[Step]] = []
    for p in range(1, s.producers + 1):
        matches = [p * 1000 + m for m in range(s.matches_per_producer)]
        out: list[Step] = []
        for _ in range(s.live_events):
            out.append(Event(FeedEvent(rng.choice(matches), p, 0, "odds_change", 0, work())))
        for r in range(1, s.recoveries + 1):
            late = s.late_initiation_rate > 0 and rng.random() < s.late_initiation_rate
            if not late:
                out.append(Recover(p, r))
            resent: list[Step] = []
            for _ in range(s.events_per_recovery):
                m = rng.choice(matches)
                if rng.random() < s.error_rate:
                    resent.append(Error(ErrorEvent(p, r, m, "unparsable_message", 0, work())))
                else:
                    kind = rng.choice(("odds_change", "bet_stop", "bet_settlement"))
                    resent.append(Event(FeedEvent(m, p, r, kind, 0, work())))
            for _ in range(s.errors_without_event):
                at = rng.randrange(len(resent) + 1)
                resent.insert(at, Error(ErrorEvent(p, r, None, "unparsable_message", 0, work())))
            timing = s.up_timing if s.up_timing != "random" else rng.choice(("before", "during", "after"))
            at = {"before": 0, "during": len(resent) // 2, "after": len(resent)}[timing]
            # a late initiation's "up" says which recovery it completes (the journal check needs it)
            ups: list[Step] = [Up(p, cb, request=r if late else None) for cb in s.up_callbacks]
            resent[at:at] = ups
            if late:
                # after the up half the time (the HTTP answer came last), else after some of the events
                late_at = len(resent) if rng.random() < 0.5 else rng.randrange(1, len(resent) + 1) if resent else 0
                resent.insert(late_at, Recover(p, r))
            out += resent
            if rng.random() < s.down_after_up_rate:
                out.append(Down(p))
        # number the messages (``seq``) in stream order, now that every insertion is done
        n = itertools.count(1)
        streams.append([
            Event(dataclasses.replace(x.event, seq=next(n))) if isinstance(x, Event)
            else Error(dataclasses.replace(x.error, seq=next(n))) if isinstance(x, Error) else x
            for x in out
        ])
    if not s.interleave:
        return [step for st in streams for step in st]
    merged: list[Step] = []
    pos = [0] * len(streams)
    while True:
        live = [i for i, st in enumerate(streams) if pos[i] < len(st)]
        if not live:
            return merged
        i = rng.choice(live)
        merged.append(streams[i][pos[i]])
        pos[i] += 1


# -- the journal -----------------------------------------------------------------------------------


class Entry(NamedTuple):
    i: int
    kind: str  # handoff, accepted, start, end, up-sent (the feed side); rec-init, up, status, down (the customer)
    thread: int
    t: float  # perf_counter (for benchmarks only; no check reads it)
    data: dict


class Journal:
    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._entries: list[Entry] = []

    def record(self, kind: str, **data: Any) -> int:
        with self._cv:
            i = len(self._entries)
            self._entries.append(Entry(i, kind, threading.get_ident(), time.perf_counter(), data))
            self._cv.notify_all()
            return i

    def entries(self) -> list[Entry]:
        with self._cv:
            return list(self._entries)

    def wait_for(self, predicate: Callable[[list[Entry]], bool], timeout: float) -> bool:
        """Wait until ``predicate(entries)`` holds; False when ``timeout`` (a safety cap) ran out."""
        with self._cv:
            return self._cv.wait_for(lambda: predicate(self._entries), timeout)

    def count(self, kind: str, pred: Callable[[dict], bool] = lambda d: True) -> int:
        with self._cv:
            return sum(1 for e in self._entries if e.kind == kind and pred(e.data))


# -- the customer's listeners ----------------------------------------------------------------------


class SimulatedFailure(RuntimeError):
    """Raised by a recording listener when the item's ``Work`` says so."""


class RecordingFeedListener:
    """The customer's OddsFeedListener: records ``start``/``end`` (with the thread), waits on
    ``hold(item)`` if it returns an event (a test's gate; ``hold_cap`` seconds at most, then it
    raises so a broken test fails instead of hanging), sleeps the item's ``Work.latency``, raises if
    ``Work.fail`` (or ``fail(item)``)."""

    def __init__(
        self,
        journal: Journal,
        *,
        hold: Callable[[Any], threading.Event | None] | None = None,
        fail: Callable[[Any], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        hold_cap: float = 60.0,
    ) -> None:
        self.journal = journal
        self._hold = hold
        self._fail = fail
        self._sleep = sleep
        self._hold_cap = hold_cap

    def on_event(self, event: FeedEvent) -> None:
        self._handle(event)

    def on_error(self, error: ErrorEvent) -> None:
        self._handle(error)

    def _handle(self, item: Any) -> None:
        self.journal.record("start", item=item)
        try:
            gate = self._hold(item) if self._hold else None
            if gate is not None and not gate.wait(self._hold_cap):
                raise TimeoutError(f"test gate for {item!r} never opened (safety cap {self._hold_cap}s)")
            work = item.payload if isinstance(item.payload, Work) else None
            if work is not None and work.latency > 0:
                self._sleep(work.latency)
            if (work is not None and work.fail) or (self._fail is not None and self._fail(item)):
                raise SimulatedFailure(repr(item))
        finally:
            self.journal.record("end", item=item)


class RecordingGlobalListener:
    """The customer's SDKGlobalEventsListener: records every callback (an "up" as ``up``)."""

    def __init__(self, journal: Journal, *, fail: Callable[[str, int], bool] | None = None) -> None:
        self.journal = journal
        self._fail = fail

    def _maybe_fail(self, what: str, producer_id: int) -> None:
        if self._fail is not None and self._fail(what, producer_id):
            raise SimulatedFailure(f"{what} p{producer_id}")

    def on_recovery_initiated(self, producer_id: int, request_id: int) -> None:
        self.journal.record("rec-init", producer=producer_id, request=request_id)
        self._maybe_fail("rec-init", producer_id)

    def on_producer_up(self, producer_id: int, reason: Any) -> None:
        self.journal.record("up", producer=producer_id, callback="ProducerUp", reason=reason)
        self._maybe_fail("up", producer_id)

    def on_producer_down(self, producer_id: int, reason: Any) -> None:
        self.journal.record("down", producer=producer_id, reason=reason)
        self._maybe_fail("down", producer_id)

    def on_producer_status_change(self, producer_id: int, status: Any) -> None:
        if is_up_status(status):
            self.journal.record("up", producer=producer_id, callback=str(status))
            self._maybe_fail("up", producer_id)
        else:
            self.journal.record("status", producer=producer_id, status=str(status))
            self._maybe_fail("status", producer_id)


# -- the feed thread -------------------------------------------------------------------------------


class FeedSimulator:
    """Plays ``script`` against the wrapped listeners, as the SDK's feed thread would."""

    def __init__(self, script: Iterable[Step], feed: Any, global_events: Any, journal: Journal) -> None:
        self.script = list(script)
        self.feed = feed
        self.global_events = global_events
        self.journal = journal
        self.feed_ident: int | None = None
        self.error: BaseException | None = None
        self.handoff_seconds = 0.0  # time spent inside feed.on_event / on_error
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        self.feed_ident = threading.get_ident()
        j, feed, g = self.journal, self.feed, self.global_events
        for step in self.script:
            if isinstance(step, Event):
                j.record("handoff", item=step.event)
                t0 = time.perf_counter()
                feed.on_event(step.event)
                self.handoff_seconds += time.perf_counter() - t0
                j.record("accepted", item=step.event)
            elif isinstance(step, Error):
                j.record("handoff", item=step.error)
                t0 = time.perf_counter()
                feed.on_error(step.error)
                self.handoff_seconds += time.perf_counter() - t0
                j.record("accepted", item=step.error)
            elif isinstance(step, Recover):
                g.on_recovery_initiated(step.producer_id, step.request_id)
            elif isinstance(step, Up):
                j.record("up-sent", producer=step.producer_id, callback=step.callback, request=step.request)
                if step.callback == "ProducerUp":
                    g.on_producer_up(step.producer_id, "FirstRecoveryCompleted")
                else:
                    g.on_producer_status_change(step.producer_id, step.callback)
            elif isinstance(step, Status):
                g.on_producer_status_change(step.producer_id, step.status)
            elif isinstance(step, Down):
                g.on_producer_down(step.producer_id, step.reason)
            elif isinstance(step, Call):
                step.fn()
            else:
                raise TypeError(f"unknown script step {step!r}")

    def start(self, name: str = "feed-thread") -> FeedSimulator:
        def body() -> None:
            try:
                self.run()
            except BaseException as exc:  # noqa: BLE001 - reported by join()
                self.error = exc

        self._thread = threading.Thread(target=body, name=name, daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float) -> None:
        assert self._thread is not None, "start() first"
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the feed thread did not finish within the safety cap of {timeout}s")
        if self.error is not None:
            raise self.error


# -- the checks --------------------------------------------------------------------------------------


def _ctx(item: Any) -> RecoveryContext:
    return item.context


def _match(item: Any) -> Any:
    return getattr(item, "event_id", None)


def check_journal(
    entries: list[Entry],
    *,
    feed_ident: int | None = None,
    feed_thread_may_run: Callable[[Any], bool] = lambda item: False,
    ordered: Callable[[Any], bool] = lambda item: True,
    strict_up: bool = False,
    complete: bool = True,
    late_initiation: bool = False,
) -> list[str]:
    """Seed 004's guarantees over a finished run, as violations (empty list: all hold).

    ``late_initiation``: the script calls ``onRecoveryInitiated`` after (some of) its recovery's
    resent events (upstream's SDK does, spec/deviations.md DEV-032): the customer then sees those
    events before the initiation, which no listener can change; every other check stands.

    * **per-match order**: the items of one sport event (``ordered(item)``) start in hand-off order,
      each after the previous one ended (never two at once);
    * **feed thread**: no customer call on ``feed_ident`` unless ``feed_thread_may_run(item)``;
    * **nothing lost, nothing twice** (``complete``: the run was drained): every handed-off item
      started and ended exactly once;
    * **recovery initiated first**: each item of a recovery starts after that recovery's
      ``rec-init``; each "up" follows a ``rec-init`` of its producer (the recovery it completes is the
      last one before it -- a stale "up" would be attributed to the newer recovery and fail below);
    * **up after its recovery's events**: every item of the up's recovery that the listener had
      *accepted* before the up was delivered ended before it (the model's ``up-after-recovery-tasks``);
      with ``strict_up`` every item of that recovery in the whole run did (the scenarios whose
      "up" the script or a gate places after all of them);
    * **up exactly once / never when superseded or cancelled**: every "up" the SDK sent
      (``up-sent``) is delivered at most once, and never after a ``rec-init``, a Down or a non-up
      status of its producer reached the customer after it was sent (the model's ``up-at-most-once``,
      ``no-stale-up``, ``no-up-after-down``); with ``complete`` every "up" not closed that way was
      delivered exactly once.
    """
    bad: list[str] = []
    handoff: dict[int, int] = {}
    accepted: dict[int, int] = {}
    starts: dict[int, list[Entry]] = defaultdict(list)
    ends: dict[int, list[Entry]] = defaultdict(list)
    items: dict[int, Any] = {}
    for e in entries:
        if e.kind in ("handoff", "accepted", "start", "end"):
            it = e.data["item"]
            items[id(it)] = it
            {"handoff": handoff, "accepted": accepted}.get(e.kind, {}).setdefault(id(it), e.i)
            if e.kind == "start":
                starts[id(it)].append(e)
            elif e.kind == "end":
                ends[id(it)].append(e)

    # nothing lost, nothing twice; the feed thread
    for k, it in items.items():
        if complete and k in handoff and (len(starts[k]) != 1 or len(ends[k]) != 1):
            bad.append(f"{it!r}: started {len(starts[k])}x, ended {len(ends[k])}x (expected once each)")
        for s in starts[k]:
            if feed_ident is not None and s.thread == feed_ident and not feed_thread_may_run(it):
                bad.append(f"{it!r}: the customer's listener ran on the feed thread")

    # per-match order
    by_match: dict[Any, list[int]] = defaultdict(list)
    for k in sorted(handoff, key=handoff.get):
        it = items[k]
        if _match(it) is not None and ordered(it):
            by_match[_match(it)].append(k)
    for m, ks in by_match.items():
        prev_end = -1
        last = None
        for k in ks:
            if not starts[k]:
                continue
            s = starts[k][0].i
            if s < prev_end:
                bad.append(f"match {m}: {items[k]!r} started before {items[last]!r} ended (or overtook it)")
            prev_end = ends[k][0].i if ends[k] else 10**18
            last = k

    # recovery initiated first
    recinit: dict[tuple[int, int], int] = {}
    for e in entries:
        if e.kind == "rec-init":
            recinit.setdefault((e.data["producer"], e.data["request"]), e.i)
    for k, it in items.items():
        c = _ctx(it)
        if c.valid and starts[k] and not late_initiation:
            r = recinit.get((c.producer_id, c.request_id))
            if r is None or r > starts[k][0].i:
                bad.append(f"{it!r}: handled before the customer saw recovery {c} initiated")

    # ups: attribute each delivered up to the producer's last rec-init before it
    last_rec: dict[int, tuple[int, int]] = {}
    delivered: list[tuple[Entry, RecoveryContext | None]] = []
    for e in entries:
        if e.kind == "rec-init":
            last_rec[e.data["producer"]] = (e.data["request"], e.i)
        elif e.kind == "up":
            p = e.data["producer"]
            rec = last_rec.get(p)
            delivered.append((e, RecoveryContext(p, rec[0]) if rec else None))
    ctx_items: dict[RecoveryContext, list[int]] = defaultdict(list)
    for k, it in items.items():
        if _ctx(it).valid:
            ctx_items[_ctx(it)].append(k)
    for e, c in delivered:
        if c is None:
            continue  # DEV-002: an "up" with no recovery, forwarded at once
        for k in ctx_items.get(c, ()):
            must = strict_up or (k in accepted and accepted[k] < e.i)
            if must and not (ends[k] and ends[k][0].i < e.i):
                bad.append(f"up #{e.i} of {c} ({e.data['callback']}) delivered before {items[k]!r} was processed")

    # ups exactly once / never when superseded or cancelled: walk the journal per producer.  An
    # "up" the SDK sent is open until delivered; a rec-init, a Down or a non-up status of its
    # producer reaching the customer closes every open "up" of that producer for good -- except that
    # a (late) rec-init leaves open the "ups" the script says belong to that very recovery.
    open_ups: dict[int, list[Entry]] = defaultdict(list)
    for e in entries:
        if e.kind == "up-sent":
            open_ups[e.data["producer"]].append(e)
        elif e.kind == "rec-init":
            open_ups[e.data["producer"]] = [u for u in open_ups[e.data["producer"]]
                                            if u.data.get("request") == e.data["request"]]
        elif e.kind in ("down", "status"):
            open_ups[e.data["producer"]] = []
        elif e.kind == "up":
            p, cb = e.data["producer"], e.data["callback"]
            match = next((u for u in open_ups[p] if u.data["callback"] == cb), None)
            if match is None:
                bad.append(f"up #{e.i} ({cb}) of producer {p}: no open {cb} of the current recovery "
                           "(a stale, cancelled or duplicate up)")
            else:
                open_ups[p].remove(match)
                r = match.data.get("request")
                if r is not None:  # the recovery it completes is known: its initiation and its events first
                    c = RecoveryContext(p, r)
                    if recinit.get((p, r), 10**18) > e.i:
                        bad.append(f"up #{e.i} of {c} ({cb}) delivered before the customer saw {c} initiated")
                    for k in ctx_items.get(c, ()):
                        if not (ends[k] and ends[k][0].i < e.i):
                            bad.append(f"up #{e.i} of {c} ({cb}) delivered before {items[k]!r} was processed")
    if complete:
        for p, ups in open_ups.items():
            for u in ups:
                bad.append(f"{u.data['callback']} of producer {p} sent at #{u.i} was never delivered")
    return bad


# -- one whole run -----------------------------------------------------------------------------------


@dataclass
class RunResult:
    entries: list[Entry]
    script: list[Step]
    violations: list[str]
    elapsed: float  # from the first hand-off to the end of the drain (close)
    feed_ident: int
    handoff_seconds: float  # time the feed thread spent inside the listener's on_event/on_error
    worker_idents: frozenset[int] = field(default_factory=frozenset)
    stats: Any = None
    global_stats: Any = None


def run_scenario(
    scenario: Scenario | list[Step],
    config: ConcurrentListenerConfig,
    *,
    cap: float = 60.0,
    strict_up: bool = False,
    hold: Callable[[Any], threading.Event | None] | None = None,
) -> RunResult:
    """Build the listeners, play the script on a fresh feed thread, drain and close everything
    (every thread joined), check the journal."""
    script = build_script(scenario) if isinstance(scenario, Scenario) else scenario
    journal = Journal()
    cl = ConcurrentListener(config)
    try:
        feed = cl.wrap_feed_listener(RecordingFeedListener(journal, hold=hold))
        g = cl.wrap_global_listener(RecordingGlobalListener(journal))
        sim = FeedSimulator(script, feed, g, journal)
        t0 = time.perf_counter()
        sim.start()
        sim.join(cap)
    finally:
        cl.close(cap)
    elapsed = time.perf_counter() - t0
    entries = journal.entries()
    sync_errors = not config.handle_errors_asynchronously
    violations = check_journal(
        entries,
        feed_ident=sim.feed_ident,
        feed_thread_may_run=(lambda it: True) if not config.enabled else (lambda it: sync_errors and isinstance(it, ErrorEvent)),
        ordered=lambda it: not (sync_errors and config.enabled and isinstance(it, ErrorEvent)),
        strict_up=strict_up,
    )
    f = cl.feed_listeners[0]
    return RunResult(
        entries=entries,
        script=script,
        violations=violations,
        elapsed=elapsed,
        feed_ident=sim.feed_ident or 0,
        handoff_seconds=sim.handoff_seconds,
        worker_idents=f.worker_idents(),
        stats=f.stats(),
        global_stats=g.stats() if hasattr(g, "stats") else None,
    )
