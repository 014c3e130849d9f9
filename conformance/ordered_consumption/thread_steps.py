"""The ordered-consumption model at the granularity of its threads' steps (issue 35): the thread level.

The model's actions are already the steps of the thin client's threads (model.py): the producer's send
loop (``fetch_route``, ``pick``, ``send``, ``tick``, ``retry``), each process queue's receive loop
(``receive``), the dispatcher (``dispatch``, ``take``), the consumption tasks (``consume``,
``next_attempt_delay``, the settle retry loops ``ack`` / ``change_invisible`` / ``forward_to_dlq``, FIFO's
``unlock``), the server (``expire``) and the rebalance.  The call level (calls.py) answers each call
of the environment -- a server answer, a listener result, a tick, an expiry, a rebalance -- and then
runs the internal steps it sets in motion to a quiet point: the producer's ``pick`` and its
``retry`` once the back-off is over, a receive loop's ``receive`` that finds room, the FIFO
dispatcher's ``take`` after its lock, the FIFO worker's ``unlock``, a ``consume`` settled from a
remembered outcome (C2), and the standard dispatcher's takes after the first.  So nothing can happen
between an erase and the woken receive loop's request, between a lock and its take, or between a
worker's let-go and its unlock, and a port that does those in another order -- or at another moment
-- is invisible there.  Here the checker chooses:

* environment actions, the call level's (``route_answer``, ``send_answer``, ``tick``,
  ``receive_answer``, ``listener_returns``, ``next_attempt_delay``, the settle answers, ``expire``,
  ``drop_process_queue``, ``create_process_queue``), each run to the next scheduling point of the
  threads it wakes, *without* the internal steps that follow;
* ``["step", "producer", 0]``: the producer's send thread picks its next queue and checks the
  message type (``pick``), or, its back-off over, retries (``retry``);
* ``["step", "receive", p]``: ``p``'s receive loop, woken with room in its cache, issues its request
  (``receive``, observed ``"room"``);
* ``["step", "dispatcher", p]``: the dispatcher, for ``p``: standard, one take (``dispatch``: a
  message, or ``"empty"``, which ends the dispatch of ``p``'s signal); FIFO, the lock
  (``dispatch``: ``"locked"`` / ``"lock-busy"``) and then the take (``take``);
* ``["step", "consumer", m]``: the consumption task of ``m``, a redelivery whose outcome is
  remembered (C2): its settle request goes out without the listener (``consume``);
* ``["step", "worker", p]``: FIFO, the worker that let go of ``p``'s message unlocks ``p`` and
  signals the dispatcher (``unlock``).

Each observation is ``[label, result]``: ``label`` the model step that ran (``["pick"]``,
``["take", p]``, ``["ack", m]``, ...; an environment action's label is its model step, e.g.
``["fetch_route"]`` for ``route_answer``), ``result`` the model's observation of it (the call level's
for an environment action).  The snapshot is the call level's (calls.observation_of_state): a
producer held before its pick is in phase ``pick-queue``, one whose back-off is over and that has
not retried yet in ``throttled-wait`` with ``waited`` = ``backoff``; a receive loop woken with room
is not ``waiting``; a FIFO worker waiting to unlock has let go of its message (the process queue is
still ``locked``).

The port side, :class:`ThreadStepsDriver`, is the call-level driver of the reference with a
scheduler and a clock of its own: every lock and condition is a real one, the implementation's
scheduling points (``sched.point``: ``send.pick``, ``dispatch.locked``, ``dispatch.taken``,
``consume.remembered``, ``fifo.unlock``; impl/ordered_consumption/push_consumer.py and producer.py)
hold the thread that reaches them until the checker's step, and two clock waits hold their thread at
the wake-up: a receive loop woken with room, and a producer whose back-off is over.  (A wait that
returns later than its notification, or a sleep longer than asked, is one every condition variable
and clock may do: the implementation runs unchanged.)  The dispatcher is the driver's, at both
levels (the consumer's ``dispatcher`` factory): one run of ``PushConsumer._dispatch`` per process
queue on a thread of its own, a signal consumed by the model step that consumes it (FIFO: the lock
attempt; standard: the take that finds nothing).

Scope (checked by :func:`thread_model`): one push consumer (``consumers`` 1) with the reference
switches, the outcome memo that survives a dropped process queue, and no simple consumer: its calls
are already one application call and one request each at call level, and the model's own split of
them (``call_*`` then ``rpc``) is not offered yet.
"""

from __future__ import annotations

from typing import Any

from .. import thread_level
from ..adapters import ActionRejected
from ..thread_level import ThreadRun
from .calls import OrderedConsumptionCalls
from .driver import REFERENCE_SWITCHES, DriverClock, DriverSched, OrderedConsumptionDriver

MODEL = "ordered-consumption"

#: the thread-level configurations: a named configuration of the model and overrides, one role each
THREAD_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    # every message type and pattern of accepting queues, route cached or not, every answer and back-off
    "producer": ("producer", {}),
    # the full broker; per process queue at most 2 messages / 2 bytes: a loop whose answer filled its
    # cache waits for room, which the erase after a consumption makes
    "push-standard": ("push-standard", {}),
    # the full broker, the lock, the server gate, a memo; 2 messages / 2 bytes per process queue: a
    # redelivery (the invisible time ran out) is cached behind the copy still consumed or settled (C6)
    "push-fifo": ("push-fifo", {}),
    # the same with a cache of one message per process queue: the receive loop waits for room after every
    # delivery, and the worker's let-go is what wakes it
    "push-fifo-one-cached": ("push-fifo", {"cache_messages": 2}),
    # one message on one queue, no rebalance and no server faults: the redelivery (the invisible time ran
    # out while the copy was consumed) that waits behind its copy in the worker's own process queue (C6)
    # is reached within a few walks; its signal is the unlock's (seed 顺序 step 9), not the let-go's
    "push-fifo-redelivery": ("push-fifo", {"queues": 1, "msg_queue": [0], "msg_size": [1], "rebalance": False,
                                           "server_faults": False}),
}
#: configurations on which the reference diverges at thread level, left for the lead (none)
FINDINGS: dict[str, tuple[str, dict[str, Any]]] = {}
#: the model's steps of the simple consumer, which the thread level does not offer (module docstring)
UNSUPPORTED = frozenset({"call_receive", "call_ack", "call_change_invisible", "rpc", "abandon"})
#: the kinds of ``["step", KIND, n]``
STEP_KINDS = ("producer", "receive", "dispatcher", "consumer", "worker")


def thread_model(config: str = "push-fifo", overrides: dict[str, Any] | None = None) -> "OrderedConsumptionThreads":
    """The thread-level view of ``THREAD_CONFIGS[config]`` (plus ``overrides``); ValueError names
    what is out of scope."""
    base = thread_level.reference_model(MODEL, config, {**THREAD_CONFIGS, **FINDINGS}, overrides, REFERENCE_SWITCHES)
    c = base.config
    if c.simple:
        raise ValueError(f"thread level, {config}: the simple consumer is not offered at thread level "
                         "(thread_steps.py, 'Scope'); set simple false")
    if not c.memo_survives_drop:
        raise ValueError(f"thread level, {config}: only the consumer's memo (memo_survives_drop true): the "
                         "reference recalls an outcome when its task starts, the per-queue variant's drop in between "
                         "is not a step it has")
    view = OrderedConsumptionThreads(base)
    view.config_name = config
    return view


class OrderedConsumptionThreads(OrderedConsumptionCalls):
    """Thread-level view of an :class:`~conq.model.ordered_consumption.OrderedConsumptionModel`: the
    model's own states and steps, the call level's composition undone (module docstring); every
    observation ``(label, result)``."""

    def init_states(self):
        return list(self.base.init_states())

    def _compose(self, s):
        succ = self.base.successors(s)
        tick = any(a[0] == "tick" for a, _, _ in succ)
        out = []
        for a, o, t in succ:
            request = self._request(s, a, o, tick)
            if request is not None:
                out.append((request, (tuple(a), o), t))
        return out

    def _request(self, s: Any, a: tuple, o: Any, tick_enabled: bool) -> tuple | None:
        """The thread-level request that makes model step ``a`` (observed ``o``) happen; None for a step
        no thread takes (a loop that checks again and still waits; ``assignment_stable``, a ghost)."""
        name = a[0]
        if name == "pick" or (name == "retry" and not tick_enabled):
            return ("step", "producer", 0)
        if name == "receive" and o in ("full", "room"):
            return ("step", "receive", a[1]) if o == "room" else None
        if name in ("dispatch", "take"):
            return ("step", "dispatcher", a[1])
        if name == "unlock":
            return ("step", "worker", a[1])
        if name == "consume" and isinstance(o, tuple) and o[0] == "remembered":
            return ("step", "consumer", a[1])
        if name in UNSUPPORTED:
            raise ValueError(f"the thread level does not offer model step {a!r} (thread_steps.py, 'Scope')")
        return self._call(s, a, o)

    def actors(self, action, observation):
        if action[0] == "step":
            return (f"{action[1]}{action[2]}", "process-queue" if action[1] != "producer" else "producer")
        return super().actors(action, observation)


# -- the checker -----------------------------------------------------------------------------------------

def check_threads(impl: Any, config: str = "push-fifo", *, walks: int = 20, length: int = 30, seed: int = 0,
                  depth: int = 0, snapshots: bool = True, probe: float = 0.0, impl_spec: str = "reference",
                  max_traces: int | None = None, minimise: bool = True) -> ThreadRun:
    """The thread-level campaign on one configuration (conformance/thread_level.py)."""
    return thread_level.check_threads(
        thread_model(config), impl, config, model_name=MODEL, impl_spec=impl_spec, walks=walks, length=length,
        seed=seed, depth=depth, snapshots=snapshots, probe=probe, max_traces=max_traces, minimise=minimise)


def thread_impl(spec: str, *, timeout: float = 10.0) -> Any:
    """The implementation ``--impl spec`` at thread level (:func:`conq.conformance.thread_level.thread_impl`)."""
    return thread_level.thread_impl(spec, MODEL, thread_driver, timeout=timeout)


def thread_driver(base: type | None = None) -> type:
    """The thread-level driver over call-level driver class ``base`` (None: the reference): a
    mutant's driver class is a subclass of the reference's, so the thread level runs it as it is."""
    if base is None or base is OrderedConsumptionDriver:
        return ThreadStepsDriver
    return type(f"ThreadSteps[{base.__name__}]", (ThreadStepsMixin, base), {})


# -- the port side -----------------------------------------------------------------------------------------

class ThreadStepsSched(DriverSched):
    """The call-level driver's scheduler (real threads and locks), whose scheduling points hold the
    driver's threads that reach them until the checker's step (module docstring)."""

    def point(self, label: str, subject: Any = None) -> None:
        drv = self.drv
        h = drv._me()
        if h is None:  # the driver's own thread: nothing to hold
            return
        if label == "send.pick":
            drv._park(("pick",), None)
        elif label in ("dispatch.locked", "dispatch.taken"):
            drv._park((label,), subject.cancel)  # a drop lets the run go on (it finds the queue dropped)
        elif label == "consume.remembered":
            h.msg = drv.index.get(subject)
            drv._park(("remembered", h.msg), None)
        elif label == "fifo.unlock":
            # a worker of a dropped process queue unlocks a lock nobody sees (the model's copy on a dropped
            # queue, ``old``, has no unlock step): it goes on
            if not subject.dropped and drv.consumer.process_queue(subject.mq) is subject:
                drv._park(("unlock", subject.mq.queue_id), subject.cancel)


class ThreadStepsClock(DriverClock):
    """The call-level driver's clock, which also holds a receive loop woken with room at its wake-up
    (outside its process queue's lock) and a producer whose back-off is over, until the checker's step."""

    def wait(self, cond: Any, deadline: float | None, cancel: Any = None) -> None:
        drv = self.drv
        h = drv._me()
        super().wait(cond, deadline, cancel)
        if (h is not None and h.kind == "loop" and not drv.closing and not (cancel is not None and cancel.cancelled)
                and not drv._full(h.pq)):
            cond.release()
            try:
                drv._park(("woken",), cancel)
            finally:
                cond.acquire()

    def sleep(self, seconds: float, cancel: Any = None) -> bool:
        ok = super().sleep(seconds, cancel)
        h = self.drv._me()
        if ok and seconds > 0 and h is not None and h.kind == "producer":
            return self.drv._park(("retry", seconds), cancel) is not None
        return ok


def _label(action: tuple) -> tuple:
    """The model step an environment action of the call level makes happen."""
    name = action[0]
    if name == "route_answer":
        return ("fetch_route",)
    if name == "listener_returns":
        return ("consume", action[1])
    if name.endswith("_answer"):
        return (name.removesuffix("_answer"), action[1])
    return tuple(action)


class ThreadStepsMixin:
    """The thread level over a call-level ordered-consumption driver (the reference's or a mutant's)."""

    #: what the port (``port.serve``) asks to know it must ``close`` the driver on ``reset``
    level = "thread"
    sched_class = ThreadStepsSched
    clock_class = ThreadStepsClock

    def __init__(self, config: dict[str, Any], seed: int):
        if config.get("simple", True):
            raise ValueError("the thread level does not drive the simple consumer (thread_steps.py, 'Scope')")
        self._runs: list = []  # the dispatcher's runs of PushConsumer._dispatch, one per process queue at a time
        super().__init__(config, seed)

    def do(self, action: tuple) -> Any:
        if not action or action[0] != "step":
            if action and action[0] == "dispatch":
                raise KeyError("'dispatch' is the dispatcher's thread step at thread level: [\"step\", \"dispatcher\", p]")
            obs = super().do(action)
            return obs if isinstance(obs, tuple) and obs[:1] == ("raised",) else (_label(tuple(action)), obs)
        kind = action[1] if len(action) > 1 else None
        if kind not in STEP_KINDS or len(action) != 3 or type(action[2]) is not int:
            raise ValueError(f"a step is [\"step\", KIND, n] with KIND one of {', '.join(STEP_KINDS)}, "
                             f"got {list(action)!r}")
        if (kind == "producer") != (self.role == "producer"):
            raise ActionRejected(f"[\"step\", \"{kind}\", n]: this run drives the {self.role.replace('_', ' ')}")
        obs = getattr(self, f"_step_{kind}")(action[2])
        crashes = self._crashes()
        return ("raised", *crashes) if crashes else obs

    # -- the threads' steps -------------------------------------------------------------------------------
    def _step_producer(self, n: int) -> Any:
        if n != 0:
            raise KeyError(f"no producer thread {n}: the send thread is [\"step\", \"producer\", 0]")
        h = self._producer_thread()
        if h.finished or h.gate is None or h.gate[0] not in ("pick", "retry"):
            raise ActionRejected("the producer's send thread has no step now (it waits for an answer or a tick, "
                                 "or the send is over)")
        label = (h.gate[0],)
        self._answer(h, True)
        self._settle()
        if label == ("retry",):
            return (label, "retry")
        if h.finished:  # the queue does not accept the type: the send fails with no request (seed step 5)
            return (label, "type-mismatch")
        return (label, h.gate[1] if h.gate is not None and h.gate[0] == "send" else f"no request ({h.gate})")

    def _step_receive(self, p: int) -> Any:
        pq = self._pq(p)
        h = self._waiting("loop", lambda h: h.pq is pq and h.gate == ("woken",)) if pq is not None else None
        if h is None:
            raise ActionRejected(f"the receive loop of process queue {p} is not woken with room")
        if self._full(pq):
            raise ActionRejected(f"process queue {p}'s cache is full again: its receive loop waits on")
        self._answer(h, True)
        self._settle()
        return (("receive", p), "room")

    def _step_dispatcher(self, p: int) -> Any:
        pq = self._pq(p)
        if pq is None:
            raise ActionRejected(f"process queue {p} is not assigned: the dispatcher has nothing of it")
        fifo = self.consumer.settings.fifo
        n0 = len(self.tasks)
        run = next((h for h in self._runs if h.pq is pq and not h.finished), None)
        if run is not None:  # the run under way: FIFO's take after its lock, standard's next take
            self._answer(run, True)
            self._settle()
            taken = [h.msg for h in self.tasks[n0:]]
            if fifo:
                return (("take", p), taken[0] if taken else "empty")
        else:
            if pq not in self.signalled:
                raise ActionRejected(f"the dispatcher was not signalled for process queue {p}")
            busy = pq.locked
            if fifo:  # the lock attempt consumes the signal
                with self.cv:
                    self.signalled.discard(pq)
            run = self._start("dispatch", lambda: self.consumer._dispatch(pq), f"oc-dispatch-{p}", pq=pq)
            self._runs.append(run)
            self._settle()
            if fifo:
                return (("dispatch", p), "lock-busy" if run.finished and busy else "locked" if not run.finished
                        else "no lock")
            taken = [h.msg for h in self.tasks[n0:]]
        if taken:
            return (("dispatch", p), taken[0])
        with self.cv:  # standard: the take that finds nothing consumes the signal
            self.signalled.discard(pq)
        return (("dispatch", p), "empty")

    def _step_consumer(self, m: int) -> Any:
        self._message(m)
        h = self._waiting("task", lambda h: h.gate[0] == "remembered" and h.gate[1] == m)
        if h is None:
            raise ActionRejected(f"no consumption task of message {m} settles it from a remembered outcome now")
        self._answer(h, True)
        self._settle()
        rpc = h.gate[1] if h.gate is not None and h.gate[0] == "settle" else None
        return (("consume", m), ("remembered", {"ack_message": "ack", "forward_to_dlq": "dlq"}.get(rpc, f"{h.gate}")))

    def _step_worker(self, p: int) -> Any:
        pq = self._pq(p)
        h = self._waiting("task", lambda h: h.gate[0] == "unlock" and h.gate[1] == p) if pq is not None else None
        if h is None:
            raise ActionRejected(f"no worker of process queue {p} waits to unlock it")
        self._answer(h, True)
        self._settle()
        return (("unlock", p), "unlocked")

    def _crashes(self) -> list[str]:
        out = super()._crashes()
        for h in self._runs:
            if h.error is not None and not getattr(h, "reported", False):
                h.reported = True
                out.append(f"{h.name}: {type(h.error).__name__}: {h.error}")
        self._runs = [h for h in self._runs if not h.finished]
        return out


class ThreadStepsDriver(ThreadStepsMixin, OrderedConsumptionDriver):
    """The in-process thread-level driver of the reference: see the module docstring."""


# -- the generated port reference's section (conformance/port_reference.py) -------------------------------

#: (request kind, label) -> (request, label, what runs), in the order of the table
_STEPS = (
    ("route_answer", "fetch_route", '`["route_answer", ans]`', '`["fetch_route"]`',
     "environment: the answer to the route query (the call level's); the send thread runs to its pick"),
    ("step producer", "pick", '`["step", "producer", 0]`', '`["pick"]`',
     "the send thread picks the next candidate and checks its message type: the queue, or `\"type-mismatch\"` "
     "(the send fails with no request)"),
    ("send_answer", "send", '`["send_answer", q, ans, b]`', '`["send", q]`',
     "environment: the answer to the send request (the call level's); after an error the send thread runs "
     "to its next pick, **without** picking"),
    ("tick", "tick", '`["tick"]`', '`["tick"]`',
     "environment: one tick of a back-off; the last one wakes the send thread, which does not retry yet"),
    ("step producer", "retry", '`["step", "producer", 0]`', '`["retry"]`',
     "the back-off over, the send thread retries (to its next pick)"),
    ("receive_answer", "receive", '`["receive_answer", p, ans]`', '`["receive", p]`',
     "environment: the answer to `p`'s receive request (the call level's), cached; the loop checks its cache at "
     "once: full, it waits for room, else its next request is in flight"),
    ("step receive", "receive", '`["step", "receive", p]`', '`["receive", p]`',
     "`p`'s receive loop, woken with room (an erase, a rebalance), issues its request. Enabled only while it "
     "waits and its cache has room; the erase that makes the room does **not** run it"),
    ("step dispatcher", "dispatch", '`["step", "dispatcher", p]`', '`["dispatch", p]`',
     "the dispatcher, signalled for `p`. Standard: takes one cached message (its number; its consumption task "
     "runs to the listener) or finds none (`\"empty\"`: the signal is consumed). FIFO: locks `p` "
     "(`\"locked\"`) or finds it locked (`\"lock-busy\"`); either consumes the signal"),
    ("step dispatcher", "take", '`["step", "dispatcher", p]`', '`["take", p]`',
     "FIFO, `p` locked by the dispatcher: takes the earliest cached message (its number) or finds none "
     "(`\"empty\"`: unlocks)"),
    ("listener_returns", "consume", '`["listener_returns", m, res]`', '`["consume", m]`',
     "environment: the listener returns (the call level's); the task runs to its settle request or retry delay"),
    ("step consumer", "consume", '`["step", "consumer", m]`', '`["consume", m]`',
     "FIFO, C2: the task of a redelivery whose outcome is remembered sends its settle request without the "
     "listener: `[\"remembered\", \"ack\" | \"dlq\"]`"),
    ("next_attempt_delay", "next_attempt_delay", '`["next_attempt_delay", m]`', '`["next_attempt_delay", m]`',
     "environment: the retry policy's delay is over (the call level's)"),
    ("ack_answer", "ack", '`["ack_answer", m, ans]`', '`["ack", m]`',
     "environment: the answer to the ack (the call level's); a FIFO worker that lets go of its message waits "
     "to unlock"),
    ("change_invisible_answer", "change_invisible", '`["change_invisible_answer", m, ans]`',
     '`["change_invisible", m]`', "environment: the answer to the change of invisible duration (the call level's)"),
    ("forward_to_dlq_answer", "forward_to_dlq", '`["forward_to_dlq_answer", m, ans]`', '`["forward_to_dlq", m]`',
     "environment: the answer to the DLQ forward (the call level's); the FIFO worker waits to unlock"),
    ("step worker", "unlock", '`["step", "worker", p]`', '`["unlock", p]`',
     "FIFO: the worker that let go of `p`'s message unlocks `p` and signals the dispatcher"),
    ("expire", "expire", '`["expire", m]`', '`["expire", m]`', "environment: the server's expiry (the call level's)"),
    ("drop_process_queue", "drop_process_queue", '`["drop_process_queue", p]`', '`["drop_process_queue", p]`',
     "environment: a rebalance takes `p` away (the call level's); a thread of `p` held at a step goes on and "
     "finds it dropped"),
    ("create_process_queue", "create_process_queue", '`["create_process_queue", p]`',
     '`["create_process_queue", p]`', "environment: a rebalance gives `p` back (the call level's)"),
)


def reference_section(cap: int = 3_000) -> list[str]:
    """The "Thread level" section of spec/ports/ordered-consumption.md, from the thread-level view:
    every configuration it runs on and, per request and label, the results seen over its reachable
    states (the first ``cap`` of each: 500 already see every result, the whole graphs add none)."""
    results, configs = thread_level.results_seen(thread_model, THREAD_CONFIGS, cap)
    out = ["## Thread level", "",
           ("A port may also be driven at the thread level (`conq conformance ordered-consumption --level thread`; "
            "`init` carries `\"level\": \"thread\"` and the port confirms with the feature `thread-steps` in "
            "`init_ok`, see [../port-protocol.md](../port-protocol.md)). The port keeps its threads -- the "
            "producer's send thread, each process queue's receive loop, the dispatcher, the consumption tasks -- "
            "stopped at their scheduling points, and the checker chooses which one runs next. What differs from "
            "the call level: an environment action (a server's answer, the listener's result, a tick, an expiry, a "
            "rebalance) runs the threads it wakes to their next scheduling point and **no further**; the steps the "
            "call level runs by itself after it are requests of their own: the producer's pick and its retry "
            "after a back-off, a receive loop's request once it has room, each of the dispatcher's takes (FIFO: "
            "its lock, then its take), a FIFO worker's unlock, and a redelivery settled from a remembered outcome. "
            "Anything may happen in between. Every observation is `[label, result]`: `label` the model step that "
            "ran, `result` what the call level would observe of it. The snapshot has the call level's shape: a "
            "producer held before its pick is in phase `pick-queue`, one whose back-off is over and that has not "
            "retried in `throttled-wait` with `waited` equal to `backoff`; a receive loop woken with room is not "
            "`waiting` (until its cache is full again); a FIFO worker waiting to unlock has let go of its message "
            "(`client` `-`, or `cached` for a redelivery waiting behind it) while its process queue is still "
            "`locked`; a redelivery that waited behind it in that same process queue is not `notified` yet: its "
            "signal is the unlock's (seed 顺序 step 9; signalled at the let-go, the dispatcher could run first and "
            "find the queue still locked)."), "",
           "| request | label | results seen | what runs |", "|---|---|---|---|"]
    for kind, label, req, label_text, meaning in _STEPS:
        seen_results = ", ".join(f"`{r}`" for r in sorted(results.get((kind, label), ()))) or "(never reached)"
        out.append(f"| {req} | {label_text} | {seen_results} | {meaning} |")
    out += ["", ("A request whose thread has no step now answers error 13: a send thread that waits for an answer "
                 "or a tick, a receive loop that does not wait or whose cache is still full, a dispatcher not "
                 "signalled for `p` (and with no run of `p` under way), a message whose task is not settling a "
                 "remembered outcome, a process queue no worker waits to unlock; so does an environment action the "
                 "model does not enable, and a thread of another role than the run's (as at call level). `dispatch` "
                 "is not an action at this level (error 12: it is `[\"step\", \"dispatcher\", p]`). The simple "
                 "consumer has no thread level yet. The configurations the thread level runs on, as `init` sends "
                 "them (see conformance/ordered_consumption/thread_steps.py):"), "", "```"]
    out += configs + ["```", ""]
    return out

