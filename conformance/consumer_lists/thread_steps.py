"""The consumer-lists model at the granularity of its threads' steps (issue 17, "Interleavings
through the protocol"): the second protocol level.

At call level (``calls.py``) a ``pull`` is one atomic call, so a bug that only shows when another
thread runs *between* the steps of a pull -- "a delivery that moves the consumer back to INTERESTED
only after scanning" -- cannot be seen.  Here the port keeps one logical thread per consumer's IO
thread and per publishing thread, and the checker chooses the interleaving:

* environment actions (``add_consumer c``, ``enqueue j``, ``enqueue_held j``, ``unhold j``,
  ``credit c``, ``suspend c r``, ``resume c r``) are the model's own environment steps, *not* settled: an ``enqueue`` leaves the
  publisher's ``notifyConsumers`` owed, as a thread of its own, and a ``credit`` that makes the
  consumer want work again leaves its ``setNotifyWorkDesired`` owed;
* ``["step", "io", c]`` lets consumer ``c``'s IO thread run to its next scheduling point: one of the
  model's steps ``deliver_single_message`` (the pull begins: un-notify), ``find_next_available``,
  ``acquire``, ``deliver`` or ``no_message``, or one half of ``setNotifyWorkDesired``:
  ``target_flag`` (the target's flag is written) and ``set_notify_work_desired`` (the queue is told:
  the list move and its notification); a consumer whose IO thread has no step now answers "not
  enabled" (error 13);
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

Scope (checked by :func:`thread_model`; ``UNSUPPORTED`` lists the model steps not offered yet).  A
configuration that sets no credit has the first version's scope (``thread_overrides``): environment
budget 0 and a credit that never runs out, so no ``setNotifyWorkDesired`` runs.  ``credit`` and
``credit-priority`` and ``credit-same-priority`` give each consumer one credit and the environment one grant (``env_budget`` 1,
spent on ``credit`` only: ``CREDIT_SCOPE`` switches off suspension reasons, removal and release), so
the credit runs out with a delivery and comes back.  ``suspend-priority`` spends a budget of 2 on
``suspend c flow`` / ``resume c flow`` (credit plenty): the reference runs those halves on the
client's thread too (``QueueConsumer.set_flow``), mapped the same way; a suspension or resumption is
offered only between pulls (the pull's credit allocation needs the consumer's lock the client thread
holds across the halves).

Where ``setNotifyWorkDesired`` runs.  The model gives both halves to the consumer's IO thread
(model.py ``_io_steps``: after a delivery, pc START, and between pulls), as upstream, where the
target's ``updateNotifyWorkDesired`` runs on the connection's IO thread (``ConsumerTarget_1_0``
``allocateCredit``/``restoreCredit``/``flowStateChanged``, AMQP frames being read there).  The
reference runs them where the credit changes: on the IO thread, after the send, when a delivery used
the last credit (``Queue.deliver_single_message`` -> ``_settle_credit``, which matches the model); on
the *client's* thread for a grant (``QueueConsumer.add_credit``), holding the consumer's lock across
both.  The port exposes them at the model's point: the grant's client thread runs to its first half
(scheduling point ``desired.flag``, before the flag write) and stops; the consumer's next
``["step", "io", c]`` runs the flag write (to ``desired.queue``), the next one the queue's half.  The
model allows a pull to start first at that point; the reference always runs the halves first, which
the model also allows.  Because the reference holds the consumer's lock across the halves, this view
does not offer ``credit c`` while c's ``setNotifyWorkDesired`` is owed or half done
(:meth:`ConsumerListsThreads.desire_busy`): a restriction of the environment, not of the system.

The other actors (expiry, reject, groups) are off.  Two acquirers of one priority and an acquirer with a browser are
in scope since the two findings of the first version were settled (``FINDINGS``, now empty;
spec/consumer-lists.md "Thread level"): a pull that loses the acquire race ends (``acquire`` false,
then ``no_message``), as upstream's ``AbstractQueue.attemptDelivery``; a publisher's late
notification does not wake a browser that already browsed the entry (upstream does).

The port side, :class:`ThreadStepsDriver`, runs the reference queue under a deterministic
scheduler (``conq.impl.scheduling``) whose choice is the checker's: a step hands the baton to the
named logical thread and takes it back at that thread's next model point (``pull.unnotify``,
``pull.find``, ``pull.acquire``, ``pull.deliver``, ``pull.none``, ``desired.flag``,
``desired.queue``, ``publish.notify``) or exit.

A third divergence came with the credit configurations and is settled the same way
(spec/consumer-lists.md "Thread level"): between a higher consumer's two halves its flag is written
and its list not yet moved; the reference's priority check read the lists, the model's and
upstream's read the flag, so the reference now reads the flag (``Queue._no_higher``).  The mutant
``priority-reads-lists`` (the old check) is caught here and not at call level.
"""

from __future__ import annotations

import functools
import queue as _queue
import threading
from typing import Any

from conq.model.kernel import Kind, Model
from conq.model.consumer_lists.state import CF, DES, F_FLAG, F_PC, IDLE, START

from conq.conformance.adapters import PortFailure

from .. import thread_level
from ..thread_level import ThreadRun
from .calls import ENV, NOTIFYING, observation_of_view


class NotDrivable(PortFailure):
    """The implementation cannot be driven at thread level: one of its threads does not stop at the
    model's thread steps (``pull.unnotify``, ``pull.find``, ...) in the model's order.  A divergence
    (the checker reports it as a port failure of kind ``protocol`` at the step that showed it), never
    an internal error and never a pass: such an implementation's threads interleave in ways the model
    does not describe (issue 32)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"the implementation cannot be driven at thread level: {what} -- its scheduling points "
                         "are not the model's thread steps in the model's order", code="protocol")


#: the scope's defaults under a named configuration that does not set them (module docstring, "Scope"):
#: no environment budget and a credit that never runs out
def thread_overrides(messages: int) -> dict[str, Any]:
    return {"env_budget": 0, "initial_credit": messages + 1, "max_credit": messages + 1}


#: what a configuration with an environment budget must switch off: the budget buys credit grants,
#: suspensions and resumptions only (no removal, no release)
ENV_SCOPE = {"removal": False, "release": False}
#: the credit configurations: no suspension reason either
CREDIT_SCOPE = {"reasons": 0, **ENV_SCOPE}
#: the environment actions that change a consumer's desire (each runs setNotifyWorkDesired's halves
#: when the desire changed): not offered while that consumer's halves are owed (``desire_busy``)
DESIRE_ENV = frozenset({"credit", "suspend", "resume"})

#: model steps the thread level does not offer yet (module docstring, "Scope")
UNSUPPORTED = frozenset({"delete_entry", "delayed_acquisition", "reject", "reset_sub_pointers_for_groups",
                         "remove_consumer", "release"})
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
    # credit that runs out and one grant (the environment's budget): setNotifyWorkDesired's halves
    # (``target_flag``, ``set_notify_work_desired``) as IO-thread steps, and ``credit`` (module docstring)
    "credit": {"consumers": ((1, True),), "messages": 2, "initial_credit": 1, "max_credit": 1, "env_budget": 1,
               **CREDIT_SCOPE},
    # the same with a lower-priority acquirer: the loss of interest hands the wake-up over
    # (``set_notify_work_desired`` false notifies it), the grant takes it back
    "credit-priority": {"consumers": ((2, True), (1, True)), "messages": 2, "initial_credit": 1, "max_credit": 1,
                        "env_budget": 1, **CREDIT_SCOPE},
    # two acquirers of one priority with credit: the acquire race and the halves together
    "credit-same-priority": {"consumers": ((1, True), (1, True)), "messages": 2, "initial_credit": 1, "max_credit": 1,
                             "env_budget": 1, **CREDIT_SCOPE},
    # flow control: the higher consumer suspended and resumed (two environment steps), credit plenty:
    # the halves with desired false and true run by the client's thread in the reference (set_flow)
    "suspend-priority": {"consumers": ((2, True), (1, True)), "messages": 1, "reasons": 1, "env_budget": 2,
                         **ENV_SCOPE},
}
#: configurations on which the reference diverges at thread level, left for the lead (``conq
#: conformance consumer-lists --level thread --config NAME`` shows the trace).  Empty: both findings
#: of the first version were settled (spec/consumer-lists.md "Thread level": a lost acquire ends the
#: pull, as upstream; a browser is not notified of an entry it already browsed, unlike upstream)
FINDINGS: dict[str, dict[str, Any]] = {}
IO_STEPS = frozenset({"deliver_single_message", "find_next_available", "acquire", "deliver", "no_message",
                      "target_flag", "set_notify_work_desired"})


def thread_model(config: str = "one-acquirer", overrides: dict[str, Any] | None = None) -> ConsumerListsThreads:
    """The thread-level view of ``THREAD_CONFIGS[config]`` (plus ``overrides``) with the scope's
    overrides; ValueError names what is out of scope."""
    from conq.model.engines.registry import load_model

    known = {**THREAD_CONFIGS, **FINDINGS}
    if config not in known:
        raise ValueError(f"no thread-level configuration {config!r} (known: {', '.join(known)})")
    fields = dict(known[config])
    fields.update(overrides or {})
    for key, value in thread_overrides(int(fields.get("messages", 3))).items():
        fields.setdefault(key, value)
    for key in ("expiry", "reject", "groups"):
        if fields.get(key):
            raise ValueError(f"the thread level does not offer the other actors yet ({key})")
    if fields["env_budget"] != 0:
        wrong = [f"{k}={fields.get(k)!r}" for k, v in ENV_SCOPE.items() if fields.get(k, v) != v]
        if wrong:
            raise ValueError(f"thread level, {config}: an environment budget buys credit grants, suspensions and "
                             f"resumptions only; set {', '.join(f'{k}={v!r}' for k, v in ENV_SCOPE.items())} "
                             f"(got {', '.join(wrong)})")
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

    def desire_busy(self, s, c: int) -> bool:
        """Consumer ``c``'s ``setNotifyWorkDesired`` is owed or half done: its first half is next
        (the target's flag differs from what it should be, at an IO thread between pulls) or its
        second half is (pc DES).  The reference runs both halves holding the consumer's lock
        (``QueueConsumer._update_desired_locked``), so a credit grant (``add_credit`` takes that
        lock) could not run in between: the thread level does not offer ``credit c`` then."""
        b = self.base
        pc = s[c * CF + F_PC]
        return pc == DES or (pc in (IDLE, START) and s[c * CF + F_FLAG] != b._desired(s, c))

    def _compose(self, s):
        out = []
        for a, o, t in self.base.successors(s):
            name = a[0]
            if name == "idle":
                continue
            if name in DESIRE_ENV and self.desire_busy(s, a[1]):
                continue  # not offered while c's setNotifyWorkDesired is under way (desire_busy)
            if name in ("suspend", "resume") and s[a[1] * CF + F_PC] not in (IDLE, START):
                # nor in the middle of a pull: the reference's set_flow holds the consumer's lock
                # across the halves and the pull needs it (its credit allocation)
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


# -- the checker: checker-chosen interleavings (conformance/thread_level.py, the same for every system) --
#: the most traces the bounded exhaustive mode enumerates; more: the run is incomplete (exit 4)
EXHAUSTIVE_CAP = 50_000


def check_threads(impl: Any, config: str = "one-acquirer", *, walks: int = 20, length: int = 30, seed: int = 0,
                  depth: int = 0, snapshots: bool = True, probe: float = 0.0, impl_spec: str = "reference",
                  max_traces: int | None = None, minimise: bool = True) -> ThreadRun:
    """Seeded random walks over the enabled thread steps and environment actions (``walks`` of
    ``length`` steps, seeds ``seed`` ...), then, with ``depth`` > 0, every trace of exactly ``depth``
    actions (bounded exhaustive: at most ``max_traces``, default ``EXHAUSTIVE_CAP``); stops at the
    first divergence, minimised, with its seed and replay command.  ``snapshots=False``: each
    step's observation is checked, the implementation's state is never asked for
    (``--no-snapshots``).  See :func:`conq.conformance.thread_level.check_threads`."""
    return thread_level.check_threads(
        thread_model(config), impl, config, model_name="consumer-lists", impl_spec=impl_spec, walks=walks,
        length=length, seed=seed, depth=depth, snapshots=snapshots, probe=probe, minimise=minimise,
        max_traces=EXHAUSTIVE_CAP if max_traces is None else max_traces)


# -- the port side: the reference queue under a checker-driven scheduler -----------------------------
#: the queue's scheduling points that are the model's thread steps (queue.py, "Interleaving points")
MODEL_POINTS = frozenset({"pull.unnotify", "pull.find", "pull.acquire", "pull.none", "pull.deliver", "desired.flag",
                          "desired.queue", "publish.notify"})
#: the two halves of setNotifyWorkDesired: the point a thread waits at -> the model step it runs next
DESIRE_POINTS = {"desired.flag": "target_flag", "desired.queue": "set_notify_work_desired"}


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
        # consumer -> [the client thread of a credit grant, the desire point it waits at]: the
        # grant's setNotifyWorkDesired halves, run as that consumer's IO-thread steps (the model's)
        self.desires: dict[int, list] = {}
        #: the environment's budget (the model's ``env_budget``): each credit grant spends one
        self.budget = int(config.get("env_budget", 0))
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
            raise PortFailure("the thread-level driver's scheduler has stopped (a thread of the implementation failed before)", code="crash")
        self._inbox.put(fn)
        try:
            ok, value = self._outbox.get(timeout=self.TIMEOUT)
        except _queue.Empty:
            raise PortFailure(f"the implementation did not reach its next thread step within {self.TIMEOUT}s", code="timeout") from None
        if not ok:
            if type(value).__name__ == "_Aborted":
                raise PortFailure(f"a thread of the implementation failed: {self.sched._failure!r}", code="crash")
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
            raise NotDrivable(f"thread {t.name} {stop}: it cannot reach its next step alone")
        return stop

    def _notified_since(self, pos: int) -> tuple:
        index = self.inner.index  # consumer tag -> model consumer (driver.consumer_tag)
        return tuple(sorted([index[tag] for tag in self.inner.q.notifications[pos:]]))

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
        if name not in ("add_consumer", "enqueue", "enqueue_held", "unhold", *DESIRE_ENV):
            raise ValueError(f"{name!r} is not offered at thread level (thread_steps.py, 'Scope')")
        q = inner.q
        if name in DESIRE_ENV:
            c = action[1] if len(action) >= 2 and type(action[1]) is int else -1
            if not 0 <= c < len(inner.cons):
                raise ValueError(f"{name} takes a consumer number, got {list(action)!r}")
            if self.budget == 0:
                raise ActionRejected("the environment's budget is spent")
            if self._desire_busy(c):
                raise ActionRejected(f"consumer {c}'s setNotifyWorkDesired is under way (it holds the consumer's lock)")
            if name != "credit" and c in self.io:
                raise ActionRejected(f"consumer {c}'s IO thread is in the middle of a pull (thread_steps.py, 'Scope')")
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
        if name in DESIRE_ENV:
            self.budget -= self.budget > 0
        if stop == "publish.notify" and name in ("enqueue", "unhold"):
            self.publishers[action[1]] = t
        elif stop == "desired.flag" and name in DESIRE_ENV:
            # the grant changed the consumer's desire: the client thread waits before the flag
            # write, and the consumer's next IO-thread steps are the two halves (module docstring)
            self.desires[action[1]] = [t, stop]
        elif stop != "exit":
            raise NotDrivable(f"{list(action)} stopped at {stop!r}, not a step of its own in the model")
        return (tuple(action), None, self._notified_since(pos))

    def _step_publisher(self, j: int) -> Any:
        from conq.conformance.adapters import ActionRejected

        t = self.publishers.pop(j, None)
        if t is None:
            raise ActionRejected(f"no publishing thread owes a notification for message {j}")
        pos = len(self.inner.q.notifications)
        stop = self._run_to_point(t)
        if stop != "exit":
            raise NotDrivable(f"the publisher of message {j} stopped at {stop!r} after its notification")
        return (("notify_consumers", j), None, self._notified_since(pos))

    def _desire_busy(self, c: int) -> bool:
        """A thread of the reference is inside consumer ``c``'s setNotifyWorkDesired (holding its lock)."""
        cur = self.io.get(c)
        return c in self.desires or (cur is not None and cur[1] in DESIRE_POINTS)

    def _desire_half(self, c: int, t: Any, label: str) -> tuple[str, str]:
        """Run the half of setNotifyWorkDesired that thread ``t``, waiting at ``label``, owes:
        (the model step it was, where ``t`` stopped next)."""
        stop = self._run_to_point(t)
        want = "desired.queue" if label == "desired.flag" else "exit"
        if stop != want:
            raise NotDrivable(f"consumer {c}'s {DESIRE_POINTS[label]} stopped at {stop!r}, not {want!r}")
        return DESIRE_POINTS[label], stop

    def _step_io(self, c: int) -> Any:
        from conq.conformance.adapters import ActionRejected

        inner = self.inner
        q = inner.q
        if not 0 <= c < len(inner.cons):
            raise ActionRejected(f"no consumer {c}")
        cur = self.io.get(c)
        pos = len(q.notifications)
        pending = self.desires.get(c)
        if pending is not None:  # a credit grant's halves, on the model's IO thread (module docstring)
            t, label = pending
            name, stop = self._desire_half(c, t, label)
            if stop == "exit":
                del self.desires[c]
                inner.pulling[c] = False  # model: the IO thread is idle after the halves (pc IDLE)
            else:
                pending[1] = stop
            return ((name, c, inner.cons[c].desired), None, self._notified_since(pos))
        if cur is None:
            con = inner.cons[c]
            if con is None or inner.removed[c] or not (inner.scheduled[c] or inner.pulling[c]):
                raise ActionRejected(f"consumer {c}'s IO thread is neither scheduled nor pulling")
            inner.scheduled[c] = False  # clear_wake_first: the IO thread clears its bit, then pulls
            box: dict[str, Any] = {}
            t = self._spawn(lambda: box.__setitem__("r", q.deliver_single_message(con)), f"io-{c}")
            first = self._run_to_point(t)
            if first != "pull.unnotify":
                raise NotDrivable(f"consumer {c}'s pull reached {first!r} before its first step (pull.unnotify)")
            cur = [t, first, box]
        t, label, box = cur
        con = inner.cons[c]
        if label in DESIRE_POINTS:  # the credit ran out with the delivery: the halves, after the send
            name, stop = self._desire_half(c, t, label)
            box["halves"] = True
            if stop == "exit":
                self.io.pop(c, None)
                inner.pulling[c] = False  # model: the IO thread is idle after the halves (pc IDLE)
            else:
                self.io[c] = [t, stop, box]
            return ((name, c, con.desired), None, self._notified_since(pos))
        if label == "pull.acquire":
            held = set(con._acquired) if con.acquires else (set(con._reoffer), con._last_seen)
        stop = self._run_to_point(t)
        result: Any = None
        if label == "pull.unnotify":
            name, result = "deliver_single_message", "suspended" if stop == "exit" else None
        elif label == "pull.find":
            name, result = "find_next_available", stop == "pull.acquire"
        elif label == "pull.acquire":
            name, result = "acquire", stop == "pull.deliver"
            if result:  # what the pull took: its delivery's result, known before the pull returns
                if con.acquires:
                    (box["mid"],) = set(con._acquired) - held
                else:
                    popped = held[0] - set(con._reoffer)
                    box["mid"] = min(popped) if popped else con._last_seen.id
        elif label == "pull.deliver":
            name = "deliver"
            mid = box.get("mid")
            result = next((j for j, m in inner.ids.items() if m == mid), mid)
        elif label == "pull.none":
            name = "no_message"
        else:
            raise NotDrivable(f"consumer {c}'s IO thread waits at {label!r}, which is not a pull's step")
        if stop == "exit":
            self.io.pop(c, None)
            inner.pulling[c] = box.get("r") is not None and not box.get("halves")
        elif stop in DESIRE_POINTS and label != "pull.deliver":
            raise NotDrivable(f"consumer {c}'s pull reached {stop!r} after {label!r}: its desire is told only after the send")
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
    """The implementation ``--impl spec`` at thread level (:func:`conq.conformance.thread_level.thread_impl`)."""
    return thread_level.thread_impl(spec, "consumer-lists", thread_driver, timeout=timeout)


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
               "entry exists, even if an acquirer took it since the find. The credit drops here, at a successful "
               "`acquire` (`credit(c) -= 1`; a failed one takes none), and a browser's entry joins `seen(c)` here, "
               "not at the find nor at `deliver`",
    "deliver": "the send: an acquiring consumer moves INTERESTED -> NOTIFIED (one notified again during its pull, "
               "already NOTIFIED, stays so; nobody is added to `notified`) and the pull ends (the IO thread pulls "
               "again: pull until empty, unless this delivery used its last credit: then its next steps are "
               "`target_flag` and `set_notify_work_desired` with desired false, and it is idle after them); result "
               "the message delivered",
    "no_message": "nothing delivered: one other interested consumer is notified while messages are available; the pull "
                  "ends",
    "notify_consumers": "the publisher's `notifyConsumers` for the message: the browsers that have not browsed it "
                        "yet (one that browsed it between the enqueue and this step is not woken), then, while it is "
                        "still available, the Interested lists in priority order, stopping at the first acquiring "
                        "consumer notified. The publisher owes it until it runs: the step stays enabled after the "
                        "message was acquired (or deleted) by someone else, and then notifies only browsers that "
                        "have not seen it, often nobody",
    "target_flag": "setNotifyWorkDesired, first half: the target's flag (`wants`) is written, nothing else; label "
                   "`[\"target_flag\", c, desired]`; the IO thread's next step is the second half. Owed by a "
                   "delivery that used the last credit (desired false) and by a `credit` that gave credit back to a "
                   "consumer without any (desired true); where both a pull and this half could run, the model allows "
                   "either first",
    "set_notify_work_desired": "setNotifyWorkDesired, second half: the queue is told (queue-set-desired: the list "
                               "move, then the consumer itself notified if it may take something now (desired), or one "
                               "Interested consumer handed the wake-up (not desired)); label "
                               "`[\"set_notify_work_desired\", c, desired]`, notified the consumers it notified. The IO "
                               "thread is idle after it: a pull-again that a delivery left pending is ended, and the "
                               "consumer's next `[\"step\", \"io\", c]` needs a wake-up (`scheduled`)",
}

#: the thread level's environment actions with what they do there (the call level's, not settled)
_ENV_MEANING = {
    "add_consumer": "the consumer is added (configurations with `preadded: false`) and, if its target wants work, "
                    "notified inside this step: `notified` is `[c]` when **notify(c)** succeeds, and no thread "
                    "is owed for it",
    "credit": "one more credit (only below `max_credit`, and only while the consumer's setNotifyWorkDesired is neither "
              "owed nor half done), the IO thread scheduled; the environment's budget pays for it. A consumer that had "
              "no credit now owes setNotifyWorkDesired(true): its next `[\"step\", \"io\", c]` is `target_flag`",
    "suspend": "suspension reason `r` set (only while the consumer's setNotifyWorkDesired is neither owed nor half done; "
               "the budget pays for it); nobody is scheduled. A consumer that wanted work now owes "
               "setNotifyWorkDesired(false): its next `[\"step\", \"io\", c]` is `target_flag`",
    "resume": "suspension reason `r` cleared (same conditions, and for both: only between the consumer's pulls, not "
              "in the middle of one); a consumer that now wants work again owes "
              "setNotifyWorkDesired(true)",
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
           "next. The environment actions are `add_consumer`, `enqueue`, `enqueue_held`, `unhold`, `credit`, "
           "`suspend` and `resume`, each the model's step alone: the notification an `enqueue` or `unhold` owes is a "
           "publisher thread of its own, and the setNotifyWorkDesired a `credit`, `suspend` or `resume` owes is run "
           "by the consumer's IO thread (below). "
           "Every observation is `[label, result, notified]` (`notified` sorted ascending); an environment action's "
           "label is the action itself, with result null. The snapshot has the call level's shape, taken between "
           "steps; a credit allocated by `find_next_available` counts as held until the `acquire` takes it."), "",
           "| request | label | results seen | what ran |", "|---|---|---|---|"]
    for step, meaning in _STEP_MEANING.items():
        req = '`["step", "publisher", j]`' if step == "notify_consumers" else '`["step", "io", c]`'
        label = f'`["{step}", {"j" if step == "notify_consumers" else "c"}]`'
        if step in ("target_flag", "set_notify_work_desired"):
            label = f'`["{step}", c, desired]`'
        seen_results = ", ".join(f"`{r}`" for r in sorted(results.get(step, ()))) or "(never reached)"
        out.append(f"| {req} | {label} | {seen_results} | {meaning} |")
    for name, meaning in _ENV_MEANING.items():
        req = f'`["{name}", c]`' if name in ("credit", "add_consumer") else f'`["{name}", c, r]`'
        out.append(f"| {req} | {req} | `null` | {meaning} |")
    out += ["", ("A thread with no step now (an IO thread neither scheduled, nor pulling, nor owing a half of "
            "setNotifyWorkDesired; a message whose publisher owes nothing) answers error 13, and so does a `credit` "
            "the model does not offer now (at `max_credit`, the budget spent, or the consumer's setNotifyWorkDesired "
            "owed or half done), and likewise a `suspend` or `resume`. The configurations the thread level runs on, as `init` sends them (those without an "
            "environment budget have a credit that never runs out: no `setNotifyWorkDesired` runs there; the three "
            "`credit` ones have one credit per consumer and one grant, `suspend-priority` a suspension and a "
            "resumption, offered only between the consumer's pulls; see "
            "conformance/consumer_lists/thread_steps.py):"), "", "```"]
    out += configs + ["```", ""]
    return out
