"""The in-process driver of the reference recovery-deferral implementation
(``conq.impl.recovery_deferral``), one model action at a time.

Set-up: one ``ConcurrentListener`` in **manual** mode (``ConcurrentListenerConfig.manual``: the
implementation starts no thread), one wrapped feed listener and the wrapped global listener, with
the driver's recording customer listeners behind them.  The driver owns every thread:

* the **feed thread**: each ``feed(p)`` runs ``on_event`` / ``on_error`` on a fresh thread of the
  driver's, which either returns (the hand-off was accepted, or the customer's listener ran on it) or
  waits in the pool for room -- the driver sees which from the implementation itself (the call
  returned, or ``pool_snapshot().waiting``) and reports it;
* the **workers**: each ``run(q)`` runs ``ConcurrentFeedListener.run_one(q)`` (one worker turn, the
  same code as a pool worker) on a fresh thread; the customer's listener, called on it, records the
  call and blocks until ``done(q)`` lets it return (the customer raises, after being let go, for
  every odd-numbered event of the script: the model's ``done`` covers a return and a raise alike);
* the **SDK** and the **deferred-ProducerUp scheduler**: ``recover``, ``status`` and ``poll`` are
  called on the checker's thread (``poll`` is ``ConcurrentGlobalEventsListener.poll_one`` of the
  deferred callback the model names).

After each action the driver waits until every thread it started has either finished or is parked
where the model says it is (in the customer's listener, or waiting for room), so each action is one
deterministic step; waits end on a state of the implementation, never on a duration (a safety cap
raises :class:`DriverStuck`, an error and never a verdict).

Observations are the model's, computed from what the customer's listeners received during the action
and from what the implementation did with the call:

* ``feed``: ``("queued", q)`` (the task is at the tail of queue ``q``), ``("blocked", q, counted)``
  (the feed thread waits for room on ``q``; ``counted``: how much the tracker's count of the event's
  context grew before it waited), ``("feed-thread", e)`` (the customer got event ``e`` on the feed
  thread), ``("dropped", q)`` (the call returned False);
* ``run``: ``("listener", e)`` (the customer got ``e`` on that worker), or ``("listener", e,
  ("queued", q))`` when the room it made let the waiting feed thread enqueue onto ``q``;
* ``done``: ``"completed"``;  ``recover``: ``"forwarded"``;
* ``status``: ``"forwarded"`` (the customer got it), ``"deferred"`` (a new deferred callback), or
  ``"dropped"``;  ``poll``: ``"delivered"`` (the customer got it) or the pending count it read.

Any other customer call during an action makes the observation ``("customer", calls...)``, and an
exception out of the implementation ``("raised", text)``: no model state allows either.  Actions
whose precondition is the environment's (a producer's next event, the number of recoveries, each
status callback once per recovery epoch, an up only after its recovery's events were received) are
rejected by the driver; preconditions of the implementation's own steps (a worker can take the
queue, a worker is in the listener, a callback is deferred) are the implementation's answer.

Model producer ``p`` is producer id ``p + 1`` (ids are > 0).  Model match ``m`` is an event id of
the SDK's real value space, chosen by the seed (``ID_SPACES``, :func:`event_ids`): a URN string
``sr:match:N`` (hashed by BLAKE2b, negative for about half of them), a long beyond 32 bits (upstream's
``TaskID`` wraps the URN's long id), a negative integer (a negative hash: the floor modulo of DEV-008
must keep it in range), or the small integer ``m`` itself -- always one whose queue under the
reference's allocation (``events.queue_index``) is the model's, ``m mod queues``, so the allocation
is checked on every kind of id (issue 32).  Every event carries its model index as ``payload``.  The
snapshot is described in :mod:`.calls`.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable

from conq.impl.recovery_deferral import ConcurrentListener, ConcurrentListenerConfig, ErrorEvent, FeedEvent
from conq.impl.recovery_deferral.events import queue_index
from conq.impl.scheduling import REAL
from conq.impl.recovery_deferral.demux import NotRunnable
from conq.impl.recovery_deferral.global_listener import DEFERRED, SUPERSEDED

from conq.conformance.adapters import ActionRejected

#: the seed's "up" callbacks (the environment's rule ``up_after_events`` speaks of them)
UP_KINDS = frozenset({"ProducerUp", "FirstRecoveryCompleted", "ProcessingQueDelayStabilized", "ReturnedFromInactivity"})
#: the model switches the reference implements (the upstream variants are the model's alone)
REFERENCE_SWITCHES = {
    "on_queue_full": "block", "no_context_producer_up": "forward", "error_routing": "by_event",
    "index_mod": "floor", "count_before_enqueue": True, "track_error_tasks": True,
    "down_cancels_deferred_up": True, "replace_deferred": False, "poll_then_deliver": False,
    "forward_initiated_at_once": True, "new_recovery_supersedes": True, "correlate_with_events": True,
}
#: safety cap of every wait for the implementation (reaching it is an error, never a verdict)
CAP = 30.0


#: the value spaces of the SDK's event ids a run draws from (by its seed: ``ID_SPACES[seed % 4]``):
#: upstream's ids are the numeric part of URNs such as ``sr:match:123`` (longs: ``TaskID.valueOf``),
#: the reference also takes the URN string itself (``events.stable_hash``)
ID_SPACES = ("urn", "large", "negative", "small")


def event_ids(matches: int, queues: int, space: str, seed: int = 0) -> tuple:
    """One event id per model match, from ``space``, distinct, each on the model's queue of its match
    (``queue_index(id, queues) == m mod queues``), drawn from the seed: ``urn`` strings ``sr:match:N``
    (N from 40,000,000 up), ``large`` integers from 2^40 to 2^61, ``negative`` integers (a negative
    hash), ``small``: ``m`` itself."""
    if space == "small":
        return tuple(range(matches))
    rng = random.Random(seed)
    start = {"urn": 40_000_000 + rng.randrange(10_000_000), "large": (1 << 40) + rng.randrange(1 << 60),
             "negative": -(10_000_000 + rng.randrange(1 << 40))}.get(space)
    if start is None:
        raise ValueError(f"no event id space {space!r} (known: {', '.join(ID_SPACES)})")
    out: list = []
    n = start
    for m in range(matches):
        while True:
            x = f"sr:match:{n}" if space == "urn" else n
            n = n - 1 if space == "negative" else n + 1
            if queue_index(x, queues) == m % queues and x not in out:
                out.append(x)
                break
    return tuple(out)


class DriverStuck(RuntimeError):
    """The implementation did not reach a quiet state within the safety cap."""


class CustomerFailure(RuntimeError):
    """Raised by the driver's customer listener (a customer that throws)."""


class _Helper(threading.Thread):
    """A thread of the driver's: the feed thread of one hand-off, or the worker of one turn."""

    def __init__(self, drv: "RecoveryDeferralDriver", role: str, fn: Callable[[], Any], name: str):
        super().__init__(name=name, daemon=True)
        self.drv = drv
        self.conq_role = role
        self.fn = fn
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.entered: int | None = None  # the event the customer's listener got on this thread
        self.gate = threading.Event()  # set: the customer's listener may return

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - reported as the action's outcome
            self.error = e
        finally:
            with self.drv.cv:
                self.finished = True
                self.drv.cv.notify_all()


class _FeedCustomer:
    """The customer's OddsFeedListener."""

    def __init__(self, drv: "RecoveryDeferralDriver"):
        self.drv = drv

    def on_event(self, event: FeedEvent) -> None:
        self.drv._listener_called(event)

    def on_error(self, error: ErrorEvent) -> None:
        self.drv._listener_called(error)


class _GlobalCustomer:
    """The customer's SDKGlobalEventsListener."""

    def __init__(self, drv: "RecoveryDeferralDriver"):
        self.drv = drv

    def on_recovery_initiated(self, producer_id: int, request_id: int) -> None:
        self.drv._record(("recovery", producer_id - 1, request_id))

    def on_producer_up(self, producer_id: int, reason: Any) -> None:
        self.drv._record(("callback", producer_id - 1, "ProducerUp"))

    def on_producer_down(self, producer_id: int, reason: Any) -> None:
        self.drv._record(("down", producer_id - 1, str(reason)))

    def on_producer_status_change(self, producer_id: int, status: Any) -> None:
        self.drv._record(("callback", producer_id - 1, str(getattr(status, "value", status))))


def _kind_of(d: Any) -> str:
    """The callback kind of a deferred "up" (``DeferredUp``)."""
    return "ProducerUp" if d.method == "on_producer_up" else str(getattr(d.argument, "value", d.argument))


def _context_name(ctx: Any) -> str:
    return f"p{ctx.producer_id - 1}/r{ctx.request_id}" if ctx.valid else "NONE"


class RecoveryDeferralDriver:
    #: the scheduler the implementation's locks and conditions come from (``conq.impl.scheduling``):
    #: real threads; the thread level (thread_steps.py) gives it a scheduler that holds a woken feed
    #: thread at its wake-up point until the checker steps it
    def scheduler(self) -> Any:
        return REAL

    def __init__(self, config: dict[str, Any], seed: int):
        wrong = {k: config.get(k) for k, v in REFERENCE_SWITCHES.items() if k in config and config[k] != v}
        if wrong:
            raise ValueError(f"the reference implementation has the model's reference switches only "
                             f"({REFERENCE_SWITCHES}); this configuration sets {wrong}")
        self.cfg = config
        self.producers = int(config["producers"])
        self.queues = int(config["queues"])
        self.queue_size = int(config["queue_size"])
        self.recoveries = int(config["recoveries"])
        self.callbacks = [str(k) for k in config["callbacks"]]
        self.enabled = bool(config["enabled"])
        self.up_after_events = bool(config.get("up_after_events", True))
        self.without_recovery = bool(config.get("callbacks_without_recovery", False))
        #: the SDK calls onRecoveryInitiated late: a recovery's events and up may come first (DEV-032)
        self.late = bool(config.get("late_initiation", False))
        self.events = [tuple(int(x) for x in e) for e in config["events"]]
        self.script = [[i for i, e in enumerate(self.events) if e[0] == p] for p in range(self.producers)]
        self.id_space = ID_SPACES[seed % len(ID_SPACES)]
        self.match_ids = event_ids(int(config["matches"]), self.queues, self.id_space, seed)
        self.items = [self._item(i, e) for i, e in enumerate(self.events)]
        self.cv = threading.Condition(threading.Lock())
        self.calls: list[tuple] = []
        # the environment's bookkeeping: what the driver has made the SDK do
        self.fed = [0] * self.producers  # events handed to the listener, per producer
        self.rec = [0] * self.producers  # recoveries initiated
        #: per producer, the status callbacks the SDK made in its current epoch: callback -> the SDK's
        #: recovery when it made it
        self.sent: list[dict[int, int]] = [{} for _ in range(self.producers)]
        self.blocked: _Helper | None = None  # the feed thread waiting for room, and on what
        self.blocked_event = -1
        self.workers: dict[int, list[_Helper]] = {q: [] for q in range(self.queues)}
        self.helpers: list[_Helper] = []
        self.cl = ConcurrentListener(
            ConcurrentListenerConfig(
                enabled=self.enabled, threads=int(config["workers"]), queues=self.queues, queue_size=self.queue_size,
                handle_errors_asynchronously=bool(config["handle_errors_async"]), on_queue_full="block",
                poll_interval=None, manual=True,
            ),
            seed=seed, name="conformance", sched=self.scheduler(),
        )
        self.feed = self.cl.wrap_feed_listener(_FeedCustomer(self))
        self.glob = self.cl.wrap_global_listener(_GlobalCustomer(self))

    # -- the customer's side ----------------------------------------------------------------------
    def _item(self, i: int, e: tuple) -> Any:
        p, m, k = e
        eid = self.match_ids[m] if m >= 0 else None
        if k >= 0:
            return FeedEvent(eid, p + 1, k, "odds_change", i + 1, i)
        return ErrorEvent(p + 1, 0 if k == -1 else -k - 1, eid, "unparsable_message", i + 1, i)

    def _record(self, call: tuple) -> None:
        with self.cv:
            self.calls.append(call)
            self.cv.notify_all()

    def _listener_called(self, item: Any) -> None:
        th = threading.current_thread()
        role = getattr(th, "conq_role", "caller")
        e = item.payload
        with self.cv:
            self.calls.append(("listener", e, role))
            if role == "worker" and th.entered is None:
                th.entered = e
            self.cv.notify_all()
        if role == "worker":
            if not th.gate.wait(CAP):
                raise DriverStuck(f"the customer's listener for event {e} was never let go")
            if e % 2:
                raise CustomerFailure(f"the customer's listener fails on event {e}")

    # -- waiting for a quiet implementation -----------------------------------------------------------
    def _wait(self, pred: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + CAP
        while not pred():
            if time.monotonic() > deadline:
                raise DriverStuck(f"the implementation did not settle within the safety cap of {CAP:g} s: {what}")
            with self.cv:
                self.cv.wait(0.0005)

    def _start(self, role: str, fn: Callable[[], Any], name: str) -> _Helper:
        h = _Helper(self, role, fn, name)
        self.helpers.append(h)
        h.start()
        return h

    def _waiting_queue(self) -> int | None:
        if not self.enabled:
            return None
        w = self.feed.pool_snapshot().waiting
        return next((q for q, n in enumerate(w) if n), None)

    def _where(self, item: Any) -> int | None:
        for q, tasks in enumerate(self.feed.pool_snapshot().queues):
            if any(t.item is item for t in tasks):
                return q
        return None

    def _feed_outcome(self, h: _Helper, e: int, calls: list[tuple]) -> Any:
        """The observation of a hand-off that returned."""
        if h.error is not None:
            return ("raised", f"{type(h.error).__name__}: {h.error}")
        if calls == [("listener", e, "feed")]:
            return ("feed-thread", e)
        if calls:
            return ("customer", *calls)
        if h.result is False:
            m = self.events[e][1]
            return ("dropped", m % self.queues if m >= 0 else -1)
        q = self._where(self.items[e]) if self.enabled else None
        return ("queued", q) if q is not None else ("accepted-nowhere", e)

    def _settle_blocked(self) -> None:
        """Wait until a waiting feed thread has either enqueued or still has no room."""
        h = self.blocked
        if h is None:
            return

        def quiet() -> bool:
            if h.finished:
                return True
            snap = self.feed.pool_snapshot()
            return any(n and len(snap.queues[q]) >= self.queue_size for q, n in enumerate(snap.waiting))

        self._wait(quiet, "a feed thread that waited for room")

    # -- actions ------------------------------------------------------------------------------------
    def do(self, action: tuple) -> Any:
        name, *args = action
        handler = getattr(self, f"_do_{name}", None)
        if handler is None:
            if name in ("track", "deliver", "announce"):
                raise ActionRejected(f"{name} is a step of upstream's implementation, not of the reference")
            raise KeyError(f"unknown action {name!r}")
        return handler(*args)

    @staticmethod
    def _recovery_of(k: int) -> int:
        """The recovery an event of kind ``k`` was resent by (0: live)."""
        return k if k >= 0 else (0 if k == -1 else -k - 1)

    def _sdk(self, p: int) -> int:
        """The recovery the SDK is in for producer p: the last one initiated, or (late initiation) the
        next one, once its resent events began to arrive (the model's ``newest``)."""
        seen = max((self._recovery_of(self.events[e][2]) for e in self.script[p][:self.fed[p]]), default=0)
        return max(self.rec[p], seen) if self.late else self.rec[p]

    def _deferred_kinds(self, p: int, context: Any = None) -> set[int]:
        """The callbacks of producer p with a deferred up (of ``context``, if given)."""
        ds = [d for d in self.glob.deferrals(p + 1) if d.state == DEFERRED and (context is None or d.context == context)]
        return {k for k, kind in enumerate(self.callbacks) if any(_kind_of(d) == kind for d in ds)}

    def _do_feed(self, p: int) -> Any:
        if not 0 <= p < self.producers:
            raise KeyError(f"no producer {p}")
        if self.blocked is not None:
            raise ActionRejected("the feed thread is waiting for room on a full queue")
        if self.fed[p] >= len(self.script[p]):
            raise ActionRejected(f"producer {p} has no more events")
        e = self.script[p][self.fed[p]]
        er = self._recovery_of(self.events[e][2])
        if er > self.rec[p] + (1 if self.late else 0):
            raise ActionRejected(f"event {e} is resent by a recovery of producer {p} that was not initiated yet")
        if self.late and er > self._sdk(p):
            # the first resent event of the next recovery: the SDK is in its epoch now, its status callbacks
            # may come again (those still deferred from the epoch before keep their place) -- whether the
            # hand-off then queues the event or waits for room (calls.py: the model's ``receive``)
            still = self._deferred_kinds(p)
            self.sent[p] = {k: r for k, r in self.sent[p].items() if k in still}
        item = self.items[e]
        method = self.feed.on_error if isinstance(item, ErrorEvent) else self.feed.on_event
        before = self.cl.tracker.pending(item.context)
        mark = len(self.calls)
        h = self._start("feed", lambda: method(item), f"feed-{e}")
        self._wait(lambda: h.finished or self._waiting_queue() is not None, f"the hand-off of event {e}")
        self.fed[p] += 1
        calls = self.calls[mark:]
        if h.finished:
            return self._feed_outcome(h, e, calls)
        self.blocked, self.blocked_event = h, e
        q = self._waiting_queue()
        counted = self.cl.tracker.pending(item.context) - before
        return ("customer", *calls) if calls else ("blocked", q, counted)

    def _do_run(self, q: int) -> Any:
        if not self.enabled:
            raise ActionRejected("the legacy pipeline has no workers")
        if not 0 <= q < self.queues:
            raise KeyError(f"no queue {q}")
        mark = len(self.calls)
        h = self._start("worker", lambda: self.feed.run_one(q), f"worker-q{q}")
        self._wait(lambda: h.entered is not None or h.finished, f"a worker turn on queue {q}")
        if h.finished and isinstance(h.error, NotRunnable):
            raise ActionRejected(str(h.error))
        self._settle_blocked()
        calls = self.calls[mark:]
        if h.entered is None:
            return ("no-listener", f"{type(h.error).__name__}: {h.error}" if h.error else "the turn ended without calling the customer")
        self.workers[q].append(h)
        e = h.entered
        rest = list(calls)
        rest.remove(("listener", e, "worker"))
        released = self._released_feed(rest)
        if released is not None:
            return ("listener", e, released)
        return ("customer", *calls) if rest else ("listener", e)

    def _released_feed(self, calls: list[tuple]) -> Any:
        """The outcome of a waiting hand-off that this action let finish, or None."""
        fb = self.blocked
        if fb is None or not fb.finished:
            return None
        self.blocked = None
        return self._feed_outcome(fb, self.blocked_event, calls)

    def _do_done(self, q: int) -> Any:
        if not 0 <= q < self.queues:
            raise KeyError(f"no queue {q}")
        if not self.workers.get(q):
            raise ActionRejected(f"no worker is in the customer's listener for queue {q}")
        h = self.workers[q].pop(0)
        mark = len(self.calls)
        h.gate.set()
        self._wait(lambda: h.finished, f"the end of the worker turn on queue {q}")
        self._settle_blocked()
        calls = self.calls[mark:]
        if h.error is not None:
            return ("raised", f"{type(h.error).__name__}: {h.error}")
        released = self._released_feed(calls)
        if released is not None:  # the reference never lets a waiting hand-off go here
            return ("completed", released)
        return "completed" if not calls else ("customer", *calls)

    def _do_recover(self, p: int) -> Any:
        if not 0 <= p < self.producers:
            raise KeyError(f"no producer {p}")
        if self.rec[p] >= self.recoveries:
            raise ActionRejected(f"producer {p} has no more recoveries")
        r = self.rec[p] + 1
        late = self.late and self._sdk(p) >= r  # its events came first: the SDK's call is a late one
        # a new epoch of status callbacks -- unless its events came first: then the SDK has been in this
        # recovery's epoch since its first event, and what it sent since stays sent (DEV-032)
        keep = {k: x for k, x in self.sent[p].items() if x == r} if late else {}
        mark = len(self.calls)
        try:
            self.glob.on_recovery_initiated(p + 1, r)
        except Exception as e:  # noqa: BLE001
            return ("raised", f"{type(e).__name__}: {e}")
        finally:
            self.rec[p] = r
            self.sent[p] = keep
        calls = self.calls[mark:]
        return ("forwarded-late" if late else "forwarded") if calls == [("recovery", p, r)] else ("customer", *calls)

    def _do_status(self, p: int, k: int) -> Any:
        if not (0 <= p < self.producers and 0 <= k < len(self.callbacks)):
            raise KeyError(f"no producer {p} or callback {k}")
        kind = self.callbacks[k]
        if k in self.sent[p]:
            raise ActionRejected(f"{kind} of producer {p} was already called in this recovery epoch")
        r = self._sdk(p)  # the SDK's recovery: with late initiation, possibly one not initiated yet
        if r == 0 and not self.without_recovery:
            raise ActionRejected(f"no recovery of producer {p} was initiated yet")
        if kind in UP_KINDS and self.up_after_events and r > 0:
            waiting = self.blocked_event if self.blocked is not None else -1
            for i, e in enumerate(self.script[p]):
                ep, _, ek = self.events[e]
                er = ek if ek >= 0 else (0 if ek == -1 else -ek - 1)
                if er == r and (i >= self.fed[p] or e == waiting):
                    raise ActionRejected(f"{kind} of producer {p} comes after every resent event of recovery {r}")
        before = {d.seq for d in self.glob.deferrals(p + 1)} if self.enabled else set()
        mark = len(self.calls)
        try:
            if kind == "ProducerUp":
                self.glob.on_producer_up(p + 1, "FirstRecoveryCompleted")
            else:
                self.glob.on_producer_status_change(p + 1, kind)
        except Exception as e:  # noqa: BLE001
            return ("raised", f"{type(e).__name__}: {e}")
        finally:
            self.sent[p][k] = r  # sent in the epoch of the SDK's recovery r
        calls = self.calls[mark:]
        if calls == [("callback", p, kind)]:
            return "forwarded"
        if calls:
            return ("customer", *calls)
        if self.enabled and any(d.seq not in before and d.state == DEFERRED and _kind_of(d) == kind
                                for d in self.glob.deferrals(p + 1)):
            return "deferred"
        return "dropped"

    def _do_poll(self, p: int, k: int) -> Any:
        if not (0 <= p < self.producers and 0 <= k < len(self.callbacks)):
            raise KeyError(f"no producer {p} or callback {k}")
        if not self.enabled:
            raise ActionRejected("the legacy pipeline defers nothing")
        kind = self.callbacks[k]
        waiting = [d for d in self.glob.deferrals(p + 1) if d.state == DEFERRED and _kind_of(d) == kind]
        if not waiting:
            raise ActionRejected(f"no {kind} of producer {p} is deferred")
        seq = waiting[0].seq
        mark = len(self.calls)
        try:
            self.glob.poll_one(seq)
        except Exception as e:  # noqa: BLE001
            return ("raised", f"{type(e).__name__}: {e}")
        calls = self.calls[mark:]
        if calls == [("callback", p, kind)]:
            return "delivered"
        if calls:
            return ("customer", *calls)
        d = next(d for d in self.glob.deferrals(p + 1) if d.seq == seq)
        if d.state == SUPERSEDED:
            self.sent[p].pop(k, None)  # in the newer recovery's epoch: the SDK may call it again
            return "superseded"  # a newer recovery's events came before its initiation (DEV-032)
        if d.state != DEFERRED:
            return ("not-delivered", d.state)
        if d.last_pending == 0:
            return "waits-initiation"  # its tasks are done; its recovery's onRecoveryInitiated has not come
        return d.last_pending

    # -- the observed state -------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        pending = {_context_name(ctx): c.pending for ctx, c in self.cl.tracker.snapshot().items() if c.pending}
        if not self.enabled:
            return {"queues": [[] for _ in range(self.queues)], "running": [None] * self.queues,
                    "pending": pending, "feed_blocked": None}
        snap = self.feed.pool_snapshot()
        out: dict[str, Any] = {
            "queues": [[t.item.payload for t in tasks] for tasks in snap.queues],
            "running": [None if t is None else t.item.payload for t in snap.running],
            "pending": pending,
            "feed_blocked": next((q for q, n in enumerate(snap.waiting) if n), None),
        }
        recovery, deferred = [], []
        for p in range(self.producers):
            ctx = self.glob.stored_context(p + 1)
            recovery.append(ctx.request_id if ctx is not None and ctx.valid else 0)
            deferred.append(sorted(_kind_of(d) for d in self.glob.deferrals(p + 1) if d.state == DEFERRED))
        out["recovery"] = recovery
        out["deferred"] = deferred
        return out

    def close(self) -> None:
        """Let every customer call return, close the listener (a waiting feed thread is released with
        ``ListenerClosed``; the queues drain on this thread) and join every thread started."""
        for h in self.helpers:
            h.gate.set()
        for h in self.helpers:
            if h.conq_role == "worker":
                h.join(CAP)
        try:
            self.cl.close(CAP)
        finally:
            for h in self.helpers:
                h.join(CAP)
            self.helpers = []
