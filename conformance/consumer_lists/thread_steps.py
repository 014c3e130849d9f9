"""The consumer-lists model at the granularity of its threads' steps (issue 17, "Interleavings
through the protocol"): the second protocol level.

At call level (``calls.py``) a ``pull`` is one atomic call, so a bug that only shows when another
thread runs *between* the steps of a pull -- "a delivery that moves the consumer back to INTERESTED
only after scanning" -- cannot be seen.  Here the port keeps one logical thread per consumer's IO
thread and per publishing thread, and the checker chooses the interleaving:

* environment actions (``add_consumer c``, ``enqueue j``, ``enqueue_held j``, ``unhold j``) are the
  model's own environment steps, *not* settled: an ``enqueue`` leaves the publisher's
  ``notifyConsumers`` owed, as a thread of its own;
* ``["step", "io", c]`` lets consumer ``c``'s IO thread run to its next scheduling point: one of the
  model's steps ``deliver_single_message`` (the pull begins: un-notify), ``find_next_available``,
  ``acquire``, ``deliver`` or ``no_message``; a consumer whose IO thread is neither scheduled nor in
  the middle of a pull answers "not enabled" (error 13);
* ``["step", "publisher", j]`` lets the publishing thread of message ``j`` run its owed
  ``notifyConsumers``.

(The brief proposed ``["step", thread]`` with one thread name; a thread is named by its kind and
its number instead, so that every parameter is an integer like the call level's.)

Each reply's observation is ``[label, result, notified]``: ``label`` is the model step that ran
(``["acquire", c]``, ``["notify_consumers", j]``, the environment action itself), so the checker
maps the reply onto the model's successor with that label; ``result`` is what the model observes
of it (``find_next_available``: whether it found an entry; ``acquire``: whether the acquire
succeeded; ``deliver``: the message; ``deliver_single_message``: ``"suspended"`` or null; else
null) and ``notified`` the sorted consumers the step notified.  The snapshot after every step is the
call level's (``calls.observation_of_view``), taken mid-pull: the reference reports a credit its
pull has allocated but not yet used by the acquire as still held, since the model takes the credit
*with* the acquire (``model.py`` ``_pull_take``).

Scope (``THREAD_OVERRIDES``, checked by :func:`thread_model`): the environment budget is 0 (no
credit grants, suspensions, releases or removals) and the credit never runs out (``initial_credit``
= ``max_credit`` = messages + 1), so no ``setNotifyWorkDesired`` runs: the reference runs its two
halves on the *client's* thread (``QueueConsumer._update_desired_locked``) while the model gives them
to the consumer's IO thread, and the second half's scheduling point (``desired.queue``) is reached
holding the consumer's lock; mapping those is left open (see ``UNSUPPORTED``).  The other actors
(expiry, reject, groups) are off.  Two acquirers of one priority and an acquirer with a browser are
in scope since the two findings of the first version were settled (``FINDINGS``, now empty;
spec/consumer-lists.md "Thread level"): a pull that loses the acquire race ends (``acquire`` false,
then ``no_message``), as upstream's ``AbstractQueue.attemptDelivery``; a publisher's late
notification does not wake a browser that already browsed the entry (upstream does).

The port side, :class:`ThreadStepsDriver`, runs the reference queue under a deterministic
scheduler (``conq.impl.scheduling``) whose choice is the checker's: a step hands the baton to the
named logical thread and takes it back at that thread's next model point (``pull.unnotify``,
``pull.find``, ``pull.acquire``, ``pull.deliver``, ``pull.none``, ``publish.notify``) or exit.
"""

from __future__ import annotations

import functools
import queue as _queue
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from conq.model.kernel import Kind, Model

from .calls import ENV, NOTIFYING, observation_of_view


#: the configuration every thread-level run uses on top of the named configuration (module docstring)
def thread_overrides(messages: int) -> dict[str, Any]:
    return {"env_budget": 0, "initial_credit": messages + 1, "max_credit": messages + 1}


#: model steps the thread level does not offer yet (module docstring, "Scope")
UNSUPPORTED = frozenset({"target_flag", "set_notify_work_desired", "delete_entry", "delayed_acquisition", "reject",
                         "reset_sub_pointers_for_groups", "remove_consumer", "credit", "suspend", "resume", "release"})
#: the named configurations the thread level runs on (checked in CI: tests/conformance/consumer_lists)
THREAD_CONFIGS: dict[str, dict[str, Any]] = {
    "one-acquirer": {"consumers": ((1, True),), "messages": 2},
    "held": {"consumers": ((1, True),), "messages": 2, "held": True},
    "dynamic": {"consumers": ((1, True),), "messages": 2, "preadded": False},
    # two acquirers of equal priority race for the same entry: the loser's pull ends (``acquire``
    # false -> ``no_message``), as upstream's AbstractQueue.attemptDelivery (was finding 1)
    "same-priority": {"consumers": ((1, True), (1, True)), "messages": 2},
    # a browser whose pull ran between an enqueue and its notification is not woken for the entry
    # it already browsed (was finding 2; spec/consumer-lists.md "Thread level")
    "acquirer-and-browser": {"consumers": ((2, True), (1, False)), "messages": 2},
}
#: configurations on which the reference diverges at thread level, left for the lead (``conq
#: conformance consumer-lists --level thread --config NAME`` shows the trace).  Empty: both findings
#: of the first version were settled (spec/consumer-lists.md "Thread level": a lost acquire ends the
#: pull, as upstream; a browser is not notified of an entry it already browsed, unlike upstream)
FINDINGS: dict[str, dict[str, Any]] = {}
IO_STEPS = frozenset({"deliver_single_message", "find_next_available", "acquire", "deliver", "no_message"})


def thread_model(config: str = "one-acquirer", overrides: dict[str, Any] | None = None) -> ConsumerListsThreads:
    """The thread-level view of ``THREAD_CONFIGS[config]`` (plus ``overrides``) with the scope's
    overrides; ValueError names what is out of scope."""
    from conq.model.engines.registry import load_model

    known = {**THREAD_CONFIGS, **FINDINGS}
    if config not in known:
        raise ValueError(f"no thread-level configuration {config!r} (known: {', '.join(known)})")
    fields = dict(known[config])
    fields.update(overrides or {})
    fields.update(thread_overrides(int(fields.get("messages", 3))))
    for key in ("expiry", "reject", "groups"):
        if fields.get(key):
            raise ValueError(f"the thread level does not offer the other actors yet ({key})")
    base = load_model("consumer-lists", "small", fields)
    return ConsumerListsThreads(base)


def _label(a: tuple, o: Any) -> tuple[tuple, Any, tuple]:
    """A model step as the thread level observes it: (label, result, notified)."""
    name = a[0]
    if name in ENV:
        result = o if name in ("release", "delete_entry") else None
        return tuple(a), result, tuple(sorted(o or ())) if name in NOTIFYING else ()
    if name == "find_next_available":
        return (name, a[1]), o is not None, ()
    if name == "acquire":
        return (name, a[1]), bool(o), ()
    if name in ("deliver", "deliver_single_message"):
        return (name, a[1]), o, ()
    return tuple(a), None, tuple(sorted(o or ())) if name in NOTIFYING else ()


class ConsumerListsThreads(Model):
    """Thread-level view of a :class:`~conq.model.consumer_lists.ConsumerListsModel`: actions are the
    environment's steps and ``("step", "io", c)`` / ``("step", "publisher", j)``; every state is a
    model state."""

    name = "consumer-lists"

    def __init__(self, base: Model):
        self.base = base
        self.config = base.config
        self.Config = type(base.config)
        self._properties = None
        self._cache: dict[Any, list] = {}

    def init_states(self):
        return self.base.init_states()

    def successors(self, s):
        found = self._cache.get(s)
        if found is None:
            if len(self._cache) >= 200_000:
                self._cache.clear()
            found = self._cache[s] = self._compose(s)
        return found

    def _compose(self, s):
        out = []
        for a, o, t in self.base.successors(s):
            name = a[0]
            if name == "idle":
                continue
            if name in UNSUPPORTED:
                raise ValueError(f"the thread level does not offer model step {a!r} (thread_steps.py, 'Scope')")
            if name in IO_STEPS:
                action = ("step", "io", a[1])
            elif name == "notify_consumers":
                action = ("step", "publisher", a[1])
            else:
                action = tuple(a)
            out.append((action, _label(a, o), t))
        return out

    def actions(self, s):
        return list(dict.fromkeys(a for a, _, _ in self.successors(s)))

    def step(self, s, action):
        return [(o, t) for a, o, t in self.successors(s) if a == action]

    def properties(self):
        return [p for p in self.base.property_list() if p.kind in (Kind.ALWAYS, Kind.SOMETIMES)]

    def view(self, s):
        return self.base.view(s)

    def observe(self, s):
        return observation_of_view(self.base.view(s))

    def actors(self, action, observation):
        if action[0] == "step":
            return (f"{action[1]}{action[2]}", "queue")
        return self.base.actors(action, observation)


# -- the checker: checker-chosen interleavings ------------------------------------------------------
@dataclass
class ThreadRun:
    """A thread-level campaign: steps checked, runs, and the first divergence (None: none)."""

    config: str
    walks: int = 0
    exhaustive: int = 0
    steps: int = 0
    divergence: Any = None
    actions: list = field(default_factory=list)
    #: non-empty: the exhaustive mode's bound was hit before every trace ran (not a verdict)
    incomplete: str = ""

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def describe(self) -> str:
        head = (f"thread level, {self.config}: {self.walks} random walks + {self.exhaustive} exhaustive traces, "
                f"{self.steps} steps checked")
        if self.divergence is None:
            return head + (f": INCOMPLETE ({self.incomplete})" if self.incomplete else ": conforms")
        return f"{head}: DIVERGES\n  actions {[list(a) for a in self.actions]}\n  {self.divergence.describe()}"


#: the most traces the bounded exhaustive mode enumerates; more: the run is incomplete (exit 4)
EXHAUSTIVE_CAP = 50_000


def _sequences(model: ConsumerListsThreads, depth: int, cap: int | None = None) -> list[list[tuple]] | None:
    """Every action sequence of exactly ``depth`` actions (or shorter, ending where nothing is
    enabled) from the initial states, in the model's order; None when there are more than ``cap``
    (default ``EXHAUSTIVE_CAP``)."""
    cap = EXHAUSTIVE_CAP if cap is None else cap
    out: list[list[tuple]] = []
    frontier = [([], s) for s in model.init_states()]
    for d in range(depth):
        if len(frontier) + len(out) > cap:
            return None
        nxt = []
        for seq, s in frontier:
            succ = model.successors(s)
            if not succ:
                out.append(seq)
            for a, _o, t in succ:
                nxt.append((seq + [a], t))
        frontier = nxt
    out += [seq for seq, _ in frontier]
    return list(dict.fromkeys(tuple(x) for x in out).keys())


def check_threads(impl: Any, config: str = "one-acquirer", *, walks: int = 20, length: int = 30, seed: int = 0,
                  depth: int = 0) -> ThreadRun:
    """Seeded random walks over the enabled thread steps and environment actions (``walks`` of
    ``length`` steps, seeds ``seed`` ...), then, with ``depth`` > 0, every trace of exactly ``depth``
    actions (bounded exhaustive); stops at the first divergence."""
    from conq.conformance.checker import Checker

    model = thread_model(config)
    checker = Checker(model, impl)
    out = ThreadRun(config)
    try:
        for k in range(walks):
            r = checker.walk(seed + k, length)
            out.walks += 1
            if not r.ok:
                out.divergence, out.actions = r.divergence, r.actions
                return out
        if depth > 0:
            rng = random.Random(seed)
            seqs = _sequences(model, depth)
            if seqs is None:
                out.incomplete = f"more than {EXHAUSTIVE_CAP:,} traces of {depth} actions: lower the depth"
                return out
            for seq in seqs:
                r = checker.replay(list(seq), rng.randrange(1 << 30))
                out.exhaustive += 1
                if not r.ok:
                    out.divergence, out.actions = r.divergence, r.actions
                    return out
    finally:
        out.steps = checker.steps_checked
        close = getattr(impl, "close", None)
        if close is not None:
            close()
    return out


# -- the port side: the reference queue under a checker-driven scheduler -----------------------------
#: the queue's scheduling points that are the model's thread steps (queue.py, "Interleaving points")
MODEL_POINTS = frozenset({"pull.unnotify", "pull.find", "pull.acquire", "pull.none", "pull.deliver", "desired.queue",
                          "publish.notify"})


def _stepping_scheduler():
    from conq.impl.scheduling import DeterministicScheduler

    class SteppingScheduler(DeterministicScheduler):
        """A deterministic scheduler whose every choice is made by the controller (the logical
        thread ``main``): ``target`` runs until it reaches a model point, exits or blocks; then
        ``main`` runs again.  Nothing else ever runs."""

        def __init__(self) -> None:
            super().__init__(0, strategy="fixed", record=False)
            self.main: Any = None
            self.target: Any = None
            self.stop: str | None = None

        def _pick_locked(self, me, label):
            runnable = self._runnable_locked()
            tgt = self.target
            if tgt is not None:
                if me is tgt and tgt in runnable and label.partition(" ")[0] in MODEL_POINTS:
                    self.target, self.stop = None, label.partition(" ")[0]
                    return self.main
                if tgt in runnable:
                    return tgt
                self.target, self.stop = None, "exit" if tgt.done else f"blocked ({label})"
            return self.main if self.main in runnable else None

    return SteppingScheduler()


class ThreadStepsDriver:
    """The in-process thread-level driver of the reference (or of ``base``, a call-level driver
    class such as a mutant's): see the module docstring."""

    #: the call-level driver whose queue, consumers and snapshot this one reuses
    base: Any = None
    #: what the port (``port.serve``) asks to know it must ``close`` the driver on ``reset``
    level = "thread"
    #: the safety cap (seconds) of one request to the controller thread
    TIMEOUT = 60.0

    def __init__(self, config: dict[str, Any], seed: int):
        from conq.conformance.consumer_lists.driver import ConsumerListsDriver

        self.sched = _stepping_scheduler()
        self._inbox: _queue.Queue = _queue.Queue()
        self._outbox: _queue.Queue = _queue.Queue()
        self.io: dict[int, list] = {}  # consumer -> [logical thread, point it waits at, result box]
        self.publishers: dict[int, Any] = {}  # message -> its publishing thread, waiting at publish.notify
        self._runner = threading.Thread(target=self._run, name="thread-steps", daemon=True)
        self._runner.start()
        base = self.base or ConsumerListsDriver
        sched = self.sched

        def setup() -> None:
            inner_cls = type("SteppedDriver", (base,), {"queue_class": functools.partial(base.queue_class, sched)})
            self.inner = inner_cls(config, seed)

        self._call(setup)

    # -- the controller ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.sched.run(self._controller, wall_timeout=None)
        except BaseException as e:  # noqa: BLE001 - a logical thread failed: the pending request gets it
            self._outbox.put((False, e))

    def _controller(self) -> None:
        self.sched.main = self.sched._me()
        while True:
            fn = self._inbox.get()
            if fn is None:
                with self.sched._cv:  # unwind the threads still waiting at a point
                    self.sched._aborting = True
                    self.sched._cv.notify_all()
                return
            try:
                self._outbox.put((True, fn()))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                self._outbox.put((False, e))
                if type(e).__name__ == "_Aborted":
                    return

    def _call(self, fn: Any) -> Any:
        if not self._runner.is_alive():
            raise RuntimeError("the thread-level driver's scheduler has stopped")
        self._inbox.put(fn)
        try:
            ok, value = self._outbox.get(timeout=self.TIMEOUT)
        except _queue.Empty:
            raise RuntimeError(f"the thread-level driver did not answer within {self.TIMEOUT}s") from None
        if not ok:
            if type(value).__name__ == "_Aborted":
                raise RuntimeError(f"a thread of the implementation failed: {self.sched._failure!r}")
            raise value
        return value

    def close(self) -> None:
        if self._runner.is_alive():
            self._inbox.put(None)
            self._runner.join(10)
        inner_close = getattr(getattr(self, "inner", None), "close", None)
        if inner_close is not None:  # e.g. a mutant driver lets its mutant go
            inner_close()
            self.inner = None

    # -- running one logical thread (on the controller) ---------------------------------------------
    def _spawn(self, fn: Any, name: str) -> Any:
        self.sched.spawn(fn, name)
        return self.sched._threads[-1]

    def _run_to_point(self, t: Any) -> str:
        s = self.sched
        with s._cv:
            s.target, s.stop = t, None
        s.point("step")
        stop = s.stop or "exit"
        if stop.startswith("blocked"):
            raise RuntimeError(f"thread {t.name} {stop}: it cannot reach its next step alone")
        return stop

    def _notified_since(self, pos: int) -> tuple:
        return tuple(sorted(self.inner.q.notifications[pos:]))

    # -- the protocol's actions -----------------------------------------------------------------
    def do(self, action: tuple) -> Any:
        if action and action[0] == "step":
            if len(action) != 3 or action[1] not in ("io", "publisher") or type(action[2]) is not int:
                raise ValueError(f"a step is [\"step\", \"io\" | \"publisher\", number], got {list(action)!r}")
            fn = self._step_io if action[1] == "io" else self._step_publisher
            return self._call(lambda: fn(action[2]))
        return self._call(lambda: self._env(tuple(action)))

    def _env(self, action: tuple) -> Any:
        from conq.conformance.adapters import ActionRejected

        inner, name = self.inner, action[0]
        if name not in ("add_consumer", "enqueue", "enqueue_held", "unhold"):
            raise ValueError(f"{name!r} is not offered at thread level (thread_steps.py, 'Scope')")
        q = inner.q
        if name in ("enqueue", "enqueue_held"):
            (j,) = action[1:]
            if j in inner.ids or any(k not in inner.ids for k in range(j)) or j >= inner._n_messages:
                raise ActionRejected(f"message {j} cannot arrive now (messages arrive in order)")
            inner.ids[j] = q._next_id  # the queue numbers its messages in order; known before the publisher ends
            held = name == "enqueue_held"
            body = lambda: q.enqueue(payload=j, held=held)
        else:
            problem: list = []

            def body() -> None:
                try:
                    inner.do(action)
                except ActionRejected as e:
                    problem.append(e)

        pos = len(q.notifications)
        t = self._spawn(body, f"env:{name}")
        stop = self._run_to_point(t)
        if name not in ("enqueue", "enqueue_held") and problem:
            raise problem[0]
        if stop == "publish.notify" and name in ("enqueue", "unhold"):
            self.publishers[action[1]] = t
        elif stop != "exit":
            raise RuntimeError(f"{list(action)} stopped at {stop!r}, not a step of its own in the model")
        return (tuple(action), None, self._notified_since(pos))

    def _step_publisher(self, j: int) -> Any:
        from conq.conformance.adapters import ActionRejected

        t = self.publishers.pop(j, None)
        if t is None:
            raise ActionRejected(f"no publishing thread owes a notification for message {j}")
        pos = len(self.inner.q.notifications)
        stop = self._run_to_point(t)
        if stop != "exit":
            raise RuntimeError(f"the publisher of message {j} stopped at {stop!r} after its notification")
        return (("notify_consumers", j), None, self._notified_since(pos))

    def _step_io(self, c: int) -> Any:
        from conq.conformance.adapters import ActionRejected

        inner = self.inner
        q = inner.q
        if not 0 <= c < len(inner.cons):
            raise ActionRejected(f"no consumer {c}")
        cur = self.io.get(c)
        pos = len(q.notifications)
        if cur is None:
            con = inner.cons[c]
            if con is None or inner.removed[c] or not (inner.scheduled[c] or inner.pulling[c]):
                raise ActionRejected(f"consumer {c}'s IO thread is neither scheduled nor pulling")
            inner.scheduled[c] = False  # clear_wake_first: the IO thread clears its bit, then pulls
            box: dict[str, Any] = {}
            t = self._spawn(lambda: box.__setitem__("r", q.deliver_single_message(con)), f"io-{c}")
            first = self._run_to_point(t)
            if first != "pull.unnotify":
                raise RuntimeError(f"consumer {c}'s pull reached {first!r} before its first step (pull.unnotify)")
            cur = [t, first, box]
        t, label, box = cur
        stop = self._run_to_point(t)
        result: Any = None
        if label == "pull.unnotify":
            name, result = "deliver_single_message", "suspended" if stop == "exit" else None
        elif label == "pull.find":
            name, result = "find_next_available", stop == "pull.acquire"
        elif label == "pull.acquire":
            name, result = "acquire", stop == "pull.deliver"
        elif label == "pull.deliver":
            name = "deliver"
            mid = box.get("r")
            result = next((j for j, m in inner.ids.items() if m == mid), mid)
        elif label == "pull.none":
            name = "no_message"
        else:
            raise RuntimeError(f"consumer {c}'s IO thread waits at {label!r}, which is not a pull's step")
        if stop == "exit":
            del self.io[c]
            inner.pulling[c] = box.get("r") is not None
        else:
            self.io[c] = [t, stop, box]
        return ((name, c), result, self._notified_since(pos))

    # -- the snapshot ------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        def take() -> dict[str, Any]:
            snap = self.inner.snapshot()
            for c, (_t, label, _box) in self.io.items():
                con = self.inner.cons[c]
                if label == "pull.acquire" and con is not None and con.credit is not None:
                    # allocated by the find, used by the acquire: the model takes it with the acquire
                    snap["consumers"][c][1] += 1
            return snap

        return self._call(take)


def thread_impl(spec: str, *, timeout: float = 10.0) -> Any:
    """The implementation ``--impl spec`` at thread level: ``reference`` / ``mutant:NAME`` /
    ``driver:...`` in process (the call-level driver under :class:`ThreadStepsDriver`), ``stdio:CMD``
    a port asked for the thread level (``init``'s ``level``).  SuiteError for a bad spec."""
    from conq.conformance.adapters import InProcess, Stdio
    from conq.conformance.suite import make_impl

    impl = make_impl(spec, "consumer-lists", timeout=timeout)
    if isinstance(impl, Stdio):
        impl.level = "thread"
        return impl
    if isinstance(impl, InProcess):
        return InProcess(thread_driver(impl.driver_cls), name=f"{impl.name} (thread level)")
    raise ValueError(f"--impl {spec}: no thread level for {type(impl).__name__}")  # pragma: no cover


def thread_driver(base: type | None = None) -> type:
    """The thread-level driver over call-level driver class ``base`` (None: the reference)."""
    from conq.conformance.consumer_lists.driver import ConsumerListsDriver

    if base is None or base is ConsumerListsDriver:
        return ThreadStepsDriver
    return type(f"ThreadSteps[{base.__name__}]", (ThreadStepsDriver,), {"base": base})


# -- the generated port reference's section (conformance/port_reference.py) -------------------------
_STEP_MEANING = {
    "deliver_single_message": "the pull begins: `setNotified(false)` (NOTIFIED -> INTERESTED) *before* looking; result "
                              "`\"suspended\"` when the target does not want work (the pull ends), else null",
    "find_next_available": "`getNextAvailableEntry`, the priority check, the credit allocation: result true when it "
                           "found an entry it may take (next step: `acquire`), false (next: `no_message`)",
    "acquire": "the entry's acquire (a compare-and-set) with the credit taken: result true when it succeeded (next: "
               "`deliver`), false when another consumer acquired the entry since the find (next: `no_message`: the "
               "pull ends, it does not look again); a browser takes a reference, not the entry: true while the "
               "entry exists, even if an acquirer took it since the find",
    "deliver": "the send: back to NOTIFIED and the pull ends (the IO thread pulls again: pull until empty); result the "
               "message delivered",
    "no_message": "nothing delivered: one other interested consumer is notified while messages are available; the pull "
                  "ends",
    "notify_consumers": "the publisher's `notifyConsumers` for the message, only while it is still available: the "
                        "browsers that have not browsed it yet (one that browsed it between the enqueue and this step "
                        "is not woken), then the Interested lists in priority order, stopping at the first acquiring "
                        "consumer notified",
}


def reference_section(cap: int = 20_000) -> list[str]:
    """The "Thread level" section of spec/ports/consumer-lists.md, from the thread-level view: every
    configuration it runs on and, per step, the results seen over its reachable states."""
    import json

    results: dict[str, set] = {}
    configs = []
    for name in THREAD_CONFIGS:
        model = thread_model(name)
        from conq.model.kernel import config_dict

        configs.append(f"{name}: {json.dumps(config_dict(model.config), separators=(',', ':'))}")
        seen = set(model.init_states())
        todo = list(seen)
        while todo and len(seen) < cap:
            s = todo.pop()
            for a, (label, result, _n), t in model.successors(s):
                if a[0] == "step":
                    results.setdefault(label[0], set()).add(json.dumps(result))
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
    out = ["## Thread level", "",
           ("A port may also be driven at the thread level (`conq conformance consumer-lists --level thread`; `init` "
           "carries `\"level\": \"thread\"` and the port confirms with the feature `thread-steps` in `init_ok`, see "
           "[../port-protocol.md](../port-protocol.md)). The port keeps one logical thread per consumer's IO thread "
           "and per publishing thread and stops each at its scheduling points; the checker chooses which thread runs "
           "next. The environment actions are `add_consumer`, `enqueue`, `enqueue_held` and `unhold`, each the "
           "model's step alone: the notification an `enqueue` or `unhold` owes is a publisher thread of its own. "
           "Every observation is `[label, result, notified]` (`notified` sorted ascending); an environment action's "
           "label is the action itself, with result null. The snapshot has the call level's shape, taken between "
           "steps; a credit allocated by `find_next_available` counts as held until the `acquire` takes it."), "",
           "| request | label | results seen | what ran |", "|---|---|---|---|"]
    for step, meaning in _STEP_MEANING.items():
        req = '`["step", "publisher", j]`' if step == "notify_consumers" else '`["step", "io", c]`'
        label = f'`["{step}", {"j" if step == "notify_consumers" else "c"}]`'
        seen_results = ", ".join(f"`{r}`" for r in sorted(results.get(step, ()))) or "(never reached)"
        out.append(f"| {req} | {label} | {seen_results} | {meaning} |")
    out += ["", ("A thread with no step now (an IO thread neither scheduled nor pulling, a message whose publisher owes "
            "nothing) answers error 13. The configurations the thread level runs on (environment budget 0, credit "
            "that never runs out: no `setNotifyWorkDesired` runs; see conformance/consumer_lists/thread_steps.py), as "
            "`init` sends them:"), "", "```"]
    out += configs + ["```", ""]
    return out
