# One file: the driver and the gated channel it drives the client through are one mechanism (a request waits in the channel until the driver names its answer); apart, neither reads.
"""The in-process driver of the reference ordered-consumption implementation
(``conq.impl.ordered_consumption``), one call of the call-level view (:mod:`.calls`) at a time.

Set-up, from the model configuration and the seed:

* a ``Broker`` whose clock never moves (invisible time runs out only when the driver says so,
  ``Broker.expire_now``), one topic of ``queues`` queues, one consumer group;
* the clients talk to it through :class:`GatedChannel`, the implementation's own
  ``faults.InProcessChannel`` with its fault injection (``unavailable``, ``timeout``, ``lost``,
  ``throttled`` with the server's back-off, ``invalid-handle``, ``not-found``, ``bad-request``): a
  request made on one of the implementation's threads waits in the channel until the driver names
  the answer, and the channel then gives exactly that answer (its ``_decide`` returns the named kind
  instead of drawing one from the seeded plan's probabilities -- the one place the driver steps in);
* the clients' clock (:class:`DriverClock`): a back-off, a retry-policy delay or a wait for room in
  the cache waits for the driver (a tick, the delay's end, an erase), never for a duration; delays
  of 0 (settle and receive retries) return at once;
* the push consumer is started by ``PushConsumer.start`` (its public lifecycle: settings, heartbeat,
  the first rebalance) with the driver's dispatcher and consumption executor (the consumer's
  ``dispatcher`` and ``consumption_executor`` factories): a signal marks the process queue,
  ``dispatch`` runs ``PushConsumer._dispatch`` on the driver's thread, and every consumption task
  runs on a thread of its own (the model does not bound concurrent consumptions); ``close`` shuts it
  down with ``PushConsumer.shutdown``.  The receive loops are the
  implementation's own threads (``PushConsumer._receive_loop``, spawned through the driver's
  scheduler so that the driver knows them).  The listener waits for the driver's ``consume``.

Every thread the driver knows is, between calls, either finished or waiting at one of those gates
(a request, the listener, a delay, a wait for room while the cache is full); each call answers one
gate (or makes one event happen) and waits until every thread is at a gate again.  Waits end on
states of the implementation, never on durations (a safety cap raises :class:`DriverStuck`, an
error and never a verdict).

Which role a run drives (producer, push standard, push FIFO, simple) and, for the producer, which
message and queue pattern, is chosen from the seed among the model's initial states; the snapshot
says which (the checker keeps the initial states that agree).  Model message ``m`` is the ``m``-th
message sent (queue ``msg_queue[m]``, body of ``msg_size[m]`` bytes; FIFO: one message group per
queue); model process queue ``p`` is queue ``p``.  Observations and the snapshot: :mod:`.calls`.
"""

from __future__ import annotations

import random
import threading
import time
import zlib
from typing import Any, Callable

from conq.impl.ordered_consumption import Broker, InProcessChannel, Message, MessageType, PushConsumer, SimpleConsumer
from conq.impl.ordered_consumption.faults import FaultPlan
from conq.impl.ordered_consumption.producer import Producer
from conq.impl.ordered_consumption.protocol import Code, ConsumeResult, RetryPolicy, RpcError
from conq.impl.scheduling import ThreadScheduler

from conq.conformance.adapters import ActionRejected

#: safety cap of every wait for the implementation (reaching it is an error, never a verdict)
CAP = 30.0
#: the model switches the reference implements as they are (a fault switch of the model has no
#: counterpart in the implementation: the mutant catalogue makes those bugs instead)
REFERENCE_SWITCHES = {
    "ignore_backoff": False, "fifo_rotates": False, "skip_type_check": False, "client_lock": True,
    "dlq_when_exceeds": False, "ignore_bytes": False, "unlock_signals": True, "standard_client_dlq": False,
    "simple_retry": False, "settle_until_success": False, "remember_outcome": True,
    # the driver runs one push consumer per group (several: the model's push-fifo-shared-group, checked
    # against the upstream client's unit PF2, upstream/observed.py)
    "consumers": 1,
}
ROLES = ("producer", "push_standard", "push_fifo", "simple")
#: identifiers as users name them (a topic, a consumer group's GID_ name, a client id of the thin client's
#: shape host@pid@index), not one-letter stand-ins: the broker routes, locks and stores by them
TOPIC, GROUP, CLIENT = "TopicOrderEvents", "GID_order_service", "conq-host@4242@0"
#: the model's answer -> the channel's fault kind that produces it
_KIND = {"ok": "ok", "lost": "lost", "error": "timeout", "throttled": "throttled", "invalid-handle": "ok",
         "not-found": "not-found", "bad-request": "bad-request", "failed": "unavailable"}
#: settle answers that need the request applied (the handle current) / refused (the handle stale)
_APPLIED, _REFUSED = frozenset({"ok", "lost"}), frozenset({"invalid-handle", "not-found"})
_SETTLE_RPC = {"ack": "ack_message", "change_invisible": "change_invisible_duration", "forward_to_dlq": "forward_to_dlq"}
#: where a consumption task waits -> the model's client state of its message (``remembered``: the thread
#: level holds a redelivery settled from the memo before its settle request, still in consumption)
_CLIENT_OF_GATE = {"listener": "consuming", "remembered": "consuming", "delay": "retry-delay", "ack_message": "acking",
                   "change_invisible_duration": "changing-invisible", "forward_to_dlq": "dead-lettering"}
_SERVER = {"ready": "ready", "invisible": "invisible", "acked": "acked", "dead-lettered-by-client": "dlq-by-client",
           "dead-lettered-by-server": "dlq-by-server"}


class DriverStuck(RuntimeError):
    """The implementation did not reach a quiet state within the safety cap."""


class _Helper:
    """A thread of the implementation's that the driver knows (a receive loop, a consumption task,
    the producer's send)."""

    def __init__(self, kind: str, name: str, pq: Any = None):
        self.kind = kind
        self.name = name
        self.pq = pq
        self.gate: tuple | None = None  # where it waits for the driver (None: running or finished)
        self.answer: Any = None
        self.cancel: Any = None
        self.finished = False
        self.error: BaseException | None = None
        self.result: Any = None
        self.msg: int | None = None  # the message a consumption task holds
        self.handle: str | None = None  # the receipt handle of its pending settle request
        self.last: tuple | None = None  # the outcome of its last request
        self.waited = 0  # ticks of a back-off
        self.thread: threading.Thread | None = None

    # the scheduler's thread-handle interface (PushConsumer.shutdown joins receive loops)
    def join(self, timeout: float | None = None) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def is_alive(self) -> bool:
        return self.thread.is_alive()


class _Waker:
    """What a cancel token notifies for one park: the driver's condition (``Cancel`` keeps its
    registrations by object, so each park registers a waker of its own)."""

    __slots__ = ("cv",)

    def __init__(self, cv: Any):
        self.cv = cv

    def __enter__(self) -> Any:
        return self.cv.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.cv.__exit__(*exc)

    def notify_all(self) -> None:
        self.cv.notify_all()


class DriverClock:
    """The clients' clock: time stands still; a sleep or a wait for room waits for the driver."""

    def __init__(self, drv: "OrderedConsumptionDriver"):
        self.drv = drv

    def now(self) -> float:
        return 0.0

    def wait(self, cond: Any, deadline: float | None, cancel: Any = None) -> None:
        """With ``cond`` held: a receive loop waits for room (woken by an erase, a drop, a rebalance)."""
        h = self.drv._me()
        if cancel is not None and cancel._watch(cond):
            return
        try:
            if h is not None:
                with self.drv.cv:
                    h.gate, h.cancel = ("room",), cancel
                    self.drv.cv.notify_all()
            cond.wait()
        finally:
            if h is not None:
                with self.drv.cv:
                    h.gate = None
            if cancel is not None:
                cancel._unwatch(cond)

    def sleep(self, seconds: float, cancel: Any = None) -> bool:
        if seconds <= 0 or self.drv._me() is None:
            return not (cancel is not None and cancel.cancelled)
        h = self.drv._me()
        gate = ("backoff", seconds) if h.kind == "producer" else ("delay",)
        h.waited = 0
        return self.drv._park(gate, cancel) is not None


class DriverSched(ThreadScheduler):
    """Real locks; the receive loops the consumer spawns become threads the driver knows."""

    def __init__(self, drv: "OrderedConsumptionDriver"):
        self.drv = drv

    def spawn(self, fn: Callable[[], Any], name: str) -> _Helper:
        qid = int(name.rsplit("-", 1)[1])
        pc = self.drv.consumer  # called by rebalance, which holds the consumer's table lock
        pq = next(pq for mq, pq in pc._pqs.items() if mq.queue_id == qid)
        return self.drv._start("loop", fn, name, pq=pq)


class GatedChannel(InProcessChannel):
    """``InProcessChannel`` whose every request made on a known thread waits for the driver's answer,
    and which then answers exactly the kind the driver named."""

    def __init__(self, drv: "OrderedConsumptionDriver", broker: Broker):
        super().__init__(broker, FaultPlan(seed=0, backoffs=(0.0,)))
        self.drv = drv
        self._tl = threading.local()

    def _decide(self, rpc: str, key: str) -> tuple[str, float]:
        kind = getattr(self._tl, "kind", None) or "ok"
        self._tl.kind = None
        with self._lock:
            self.requests[rpc] += 1
            self.answers[(rpc, kind)] += 1
        return kind, 0.0

    def _gated(self, gate: tuple, cancel: Any, call: Callable[[], Any], default: str) -> Any:
        ans = self.drv._park(gate, cancel)
        kind, backoff = ans if ans is not None else (default, 0.0)
        if kind == "throttled":
            self.plan = FaultPlan(seed=0, backoffs=(float(backoff),))
        h = self.drv._me() or self.drv.main
        self._tl.kind = kind
        try:
            result = call()
        except RpcError as e:
            h.last = ("raised", e, kind)
            raise
        h.last = ("ok", result, kind)
        return result

    # -- producer side
    def query_route(self, topic):
        return self._gated(("route",), None, lambda: super(GatedChannel, self).query_route(topic), "unavailable")

    def send_message(self, queue, message, message_type, transaction_id=None):
        return self._gated(("send", queue.queue_id), None,
                           lambda: super(GatedChannel, self).send_message(queue, message, message_type, transaction_id),
                           "unavailable")

    # -- consumer side
    def receive_message(self, group, queue, batch_size, invisible_duration, long_polling_timeout=0.0, cancel=None):
        ans = self.drv._park(("receive", queue.queue_id, batch_size), cancel)
        kind, n = ans if ans is not None else ("ok", batch_size)
        self._tl.kind = kind
        h = self.drv._me() or self.drv.main
        try:
            got = super().receive_message(group, queue, min(batch_size, n) if n else batch_size, invisible_duration,
                                          long_polling_timeout, cancel)
        except RpcError as e:
            h.last = ("raised", e, kind)
            raise
        h.last = ("ok", got, kind)
        return got

    def _settle_gate(self, rpc: str, message_id: str | None, handle: str, call: Callable[[], Any]) -> Any:
        m = self.drv.index.get(message_id)
        h = self.drv._me()
        if h is not None:
            h.msg, h.handle = m, handle  # the handle tells the driver which answers the server can give
        return self._gated(("settle", rpc, m), None, call, "unavailable")

    def _settle(self, rpc, group, topic, message_id, handle, call):
        if getattr(self._tl, "kind", None) == "not-found":
            # the driver names not-found only for a handle the server no longer takes
            # (OrderedConsumptionDriver._settle_call); the fault plan's own not-found also expires the
            # message, which would end a newer delivery of it: the model's answer changes nothing
            self._decide(rpc, f"{message_id}|{handle}")
            raise RpcError(Code.MESSAGE_NOT_FOUND, f"{rpc}: no message {message_id} for this handle")
        return super()._settle(rpc, group, topic, message_id, handle, call)

    def ack_message(self, group, topic, message_id, receipt_handle):
        return self._settle_gate("ack_message", message_id, receipt_handle,
                                 lambda: super(GatedChannel, self).ack_message(group, topic, message_id, receipt_handle))

    def change_invisible_duration(self, group, topic, message_id, receipt_handle, invisible_duration):
        return self._settle_gate("change_invisible_duration", message_id, receipt_handle,
                                 lambda: super(GatedChannel, self).change_invisible_duration(
                                     group, topic, message_id, receipt_handle, invisible_duration))

    def forward_to_dlq(self, group, topic, message_id, receipt_handle, delivery_attempt=0, max_delivery_attempts=0):
        return self._settle_gate("forward_to_dlq", message_id, receipt_handle,
                                 lambda: super(GatedChannel, self).forward_to_dlq(
                                     group, topic, message_id, receipt_handle, delivery_attempt, max_delivery_attempts))


class _Dispatcher:
    """The dispatcher's signal set; the driver's ``dispatch`` runs the dispatcher's work."""

    def __init__(self, drv: "OrderedConsumptionDriver"):
        self.drv = drv
        self.thread = self

    def signal(self, pq: Any) -> None:
        with self.drv.cv:
            self.drv.signalled.add(pq)
            self.drv.cv.notify_all()

    def stop(self) -> None:
        pass

    def join(self, timeout: float | None = None) -> bool:
        return True


class _Pool:
    """Every consumption task on a thread of its own."""

    def __init__(self, drv: "OrderedConsumptionDriver"):
        self.drv = drv
        self.threads: list = []
        self.errors: list = []

    def submit(self, fn: Callable[[], None]) -> bool:
        if self.drv.closing:
            return False
        self.drv._start("task", fn, f"oc-task-{len(self.drv.tasks)}")
        return True

    def stop(self) -> None:
        pass


def classify(last: tuple | None, answer_codes: bool = True) -> str:
    """The model's name of the answer a request got."""
    if last is None:
        return "no-request"
    if last[0] == "ok":
        return "ok"
    e, kind = last[1], last[2]
    if kind == "lost":
        return "lost"
    code = e.code
    if code == Code.INVALID_RECEIPT_HANDLE:
        return "invalid-handle"
    if code == Code.MESSAGE_NOT_FOUND:
        return "not-found"
    if code == Code.BAD_REQUEST:
        return "bad-request"
    if code == Code.TOO_MANY_REQUESTS:
        return "throttled"
    return "error" if e.retriable else f"non-retriable {code.name}"


class OrderedConsumptionDriver:
    #: the implementation's classes (the mutant catalogue substitutes subclasses)
    producer_class: type = Producer
    push_class: type = PushConsumer
    simple_class: type = SimpleConsumer
    #: the clients' scheduler and clock (the thread level substitutes its own: thread_steps.py)
    sched_class: type = DriverSched
    clock_class: type = DriverClock

    def __init__(self, config: dict[str, Any], seed: int):
        wrong = {k: config.get(k) for k, v in REFERENCE_SWITCHES.items() if k in config and config[k] != v}
        if wrong:
            raise ValueError(f"the reference implementation has the model's reference switches only "
                             f"({REFERENCE_SWITCHES}); this configuration sets {wrong}")
        self.cfg = config
        self.queues = int(config["queues"])
        self.answer_codes = bool(config.get("answer_codes", False))
        self.cv = threading.Condition(threading.Lock())
        self.helpers: list[_Helper] = []
        self.tasks: list[_Helper] = []
        self.signalled: set = set()
        self.closing = False
        self.main = _Helper("main", "driver")
        self.events: list[tuple] = []  # the broker's deliveries, settlements, expiries
        self.attempts: dict[str, int] = {}
        self.ids: list[str] = []
        self.index: dict[str | None, int] = {}
        self.producer = self.consumer = self.simple = None
        self.held: dict[int, Any] = {}
        self.sched = self.sched_class(self)
        self.broker = Broker(clock=_StillClock(), observer=self._observe, name="conformance").start()
        self.channel = GatedChannel(self, self.broker)
        rng = random.Random(seed)
        roles = [r for r in ROLES if config.get(r, True)]
        self.role = roles[rng.randrange(len(roles))]
        try:
            getattr(self, f"_setup_{self.role}")(rng)
            self._settle()
        except BaseException:
            self.close()
            raise

    # -- the broker's observer (called under a queue lock: records only) ------------------------------
    def _observe(self, event: str, group: str, message_id: str, attempt: int, body: bytes) -> None:
        self.events.append((event, message_id, attempt))
        if event == "delivered":
            self.attempts[message_id] = attempt

    # -- threads and gates -------------------------------------------------------------------------
    def _me(self) -> _Helper | None:
        return getattr(threading.current_thread(), "conq_helper", None)

    def _start(self, kind: str, fn: Callable[[], Any], name: str, pq: Any = None) -> _Helper:
        h = _Helper(kind, name, pq)

        def body() -> None:
            threading.current_thread().conq_helper = h
            try:
                h.result = ("returned", fn())
            except BaseException as e:  # noqa: BLE001 - reported by the next call
                h.error = e
            finally:
                with self.cv:
                    h.finished = True
                    self.cv.notify_all()

        h.thread = threading.Thread(target=body, name=name, daemon=True)
        with self.cv:
            self.helpers.append(h)
            if kind == "task":
                self.tasks.append(h)
        h.thread.start()
        return h

    def _park(self, gate: tuple, cancel: Any) -> Any:
        """On a known thread: wait at ``gate`` until the driver answers (None: cancelled or closing).
        On the driver's own thread: the answer the driver set for its synchronous call."""
        h = self._me()
        if h is None:
            ans, self.main.answer = self.main.answer, None
            return ans if ans is not None else ("ok", 0.0)
        # a waker of this park's own: a token keeps one registration per object, and two threads may park
        # on one token (at the thread level a process queue's dispatcher run and its receive loop)
        waker = _Waker(self.cv)
        with self.cv:
            if cancel is not None and cancel._watch(waker):
                return None
            h.gate, h.answer, h.cancel = gate, None, cancel
            self.cv.notify_all()
            try:
                while h.answer is None and not self.closing and not (cancel is not None and cancel.cancelled):
                    self.cv.wait()
            finally:
                if cancel is not None:
                    cancel._unwatch(waker)
            ans, h.answer, h.gate = h.answer, None, None
            return ans

    def _answer(self, h: _Helper, ans: Any) -> None:
        with self.cv:
            h.answer, h.gate = ans, None
            self.cv.notify_all()

    def _full(self, pq: Any) -> bool:
        cthr, bthr = self.consumer.thresholds()
        return pq.count >= cthr or pq.bytes >= bthr

    def _quiet(self) -> bool:
        with self.cv:
            hs = [(h, h.gate, h.finished, h.cancel) for h in self.helpers]
        for h, gate, finished, cancel in hs:
            if finished:
                continue
            if gate is None or self.closing or (cancel is not None and cancel.cancelled):
                return False
            if gate[0] == "room" and not self._full(h.pq):
                return False
        return True

    def _settle(self) -> None:
        deadline = time.monotonic() + CAP
        while not self._quiet():
            if time.monotonic() > deadline:
                where = [(h.name, h.gate, h.finished) for h in self.helpers if not h.finished]
                raise DriverStuck(f"the implementation did not settle within the safety cap of {CAP:g} s: {where}")
            with self.cv:
                self.cv.wait(0.002)
        with self.cv:
            self.helpers = [h for h in self.helpers if not h.finished or h.kind == "producer"]

    def _crashes(self) -> list[str]:
        out = []
        for h in self.tasks + [h for h in self.helpers if h.kind != "task"]:
            if h.error is not None and not getattr(h, "reported", False) and h.kind != "producer":
                h.reported = True
                out.append(f"{h.name}: {type(h.error).__name__}: {h.error}")
        return out

    def _waiting(self, kind: str, pred: Callable[[_Helper], bool]) -> _Helper | None:
        with self.cv:
            return next((h for h in self.helpers if h.kind == kind and not h.finished and h.gate is not None
                         and pred(h)), None)

    # -- set-up ---------------------------------------------------------------------------------------
    def _topic(self, accept: list[frozenset]) -> None:
        self.mqs = self.broker.create_topic(TOPIC, self.queues, accept_types=accept)

    def _setup_producer(self, rng: random.Random) -> None:
        c = self.cfg
        scenarios = [(mt, mask, g, cached)
                     for mt in (MessageType.NORMAL, MessageType.FIFO, MessageType.TRANSACTION)
                     for mask in range(1 << self.queues)
                     for g in (range(self.queues) if mt is MessageType.FIFO else (0,))
                     for cached in (False, True)]
        self.scenario = mt, mask, g, cached = scenarios[rng.randrange(len(scenarios))]
        other = MessageType.DELAY
        self._topic([frozenset({mt if (mask >> q) & 1 else other}) for q in range(self.queues)])
        self.producer = self.producer_class(self.channel, client_id="p", max_attempts=int(c["max_send_attempts"]),
                                            clock=self.clock_class(self), sched=self.sched,
                                            transactional_retries=bool(c.get("txn_retries", False)))
        group = None
        if mt is MessageType.FIFO:  # a group name whose queue (crc32 over the writable queues) is g
            group = next(f"order-{k}" for k in range(10_000) if zlib.crc32(f"order-{k}".encode()) % self.queues == g)
        if cached:
            self.main.answer = ("ok", 0.0)
            self.producer.fetch_route(TOPIC)  # the route is cached before the send (seed step 1)
        txn = self.producer.begin_transaction() if mt is MessageType.TRANSACTION else None
        msg = Message(TOPIC, b"m", group=group)
        self._start("producer", lambda: self.producer.send(msg, txn), "oc-producer")

    def _send_messages(self, fifo: bool) -> None:
        c = self.cfg
        mtype = MessageType.FIFO if fifo else MessageType.NORMAL
        self._topic([frozenset({mtype})] * self.queues)
        for m, (q, size) in enumerate(zip(c["msg_queue"], c["msg_size"])):
            r = self.broker.send_message(self.mqs[q], Message(TOPIC, bytes([65 + m]) * int(size),
                                                              group=f"q{q}" if fifo else None), mtype)
            self.ids.append(r.message_id)
            self.index[r.message_id] = m

    def _group(self, fifo: bool, delay: float) -> None:
        c = self.cfg
        self.broker.create_consumer_group(
            GROUP, fifo=fifo, retry_policy=RetryPolicy(int(c["max_attempts"]), durations=(delay,)),
            receive_batch_size=int(c["server_batch"]), fifo_gate=bool(c.get("server_gate", True)))

    def _setup_push(self, fifo: bool) -> None:
        c = self.cfg
        self._send_messages(fifo)
        # standard: the retry policy's delay is the new invisible duration (the clock never reaches
        # it); FIFO: the local delay before a re-consumption, waited out at the driver's call
        self._group(fifo, 1.0 if (not fifo or c.get("retry_delay", True)) else 0.0)
        self.assigned = set(range(self.queues))
        self.broker.pin_assignment(GROUP, CLIENT, self.mqs)
        pc = self.consumer = self.push_class(
            self.channel, GROUP, TOPIC, self._listener, client_id=CLIENT, consumption_threads=1,
            max_cache_messages=int(c["cache_messages"]), max_cache_bytes=int(c["cache_bytes"]),
            invisible_duration=30.0, long_polling_timeout=0.0, receive_retry_delay=0.0, settle_retry_delay=0.0,
            standard_settle_retry="until_ok" if c.get("settle_retry") else "none",
            evict_at="settled" if c.get("erase_after_settle") else "consumed",
            clock=self.clock_class(self), sched=self.sched, consumption_executor=lambda _c: _Pool(self),
            dispatcher=lambda _c: _Dispatcher(self), **self._memo_switch())
        pc.start()

    def _memo_switch(self) -> dict[str, Any]:
        """``memo_survives_drop`` (the consumer's or each process queue's memo of FIFO outcomes)."""
        import inspect

        keep = bool(self.cfg.get("memo_survives_drop", True))
        if "memo_survives_drop" in inspect.signature(self.push_class.__init__).parameters:
            return {"memo_survives_drop": keep}
        if not keep:
            raise ValueError("this implementation has no memo_survives_drop switch")
        return {}

    def _setup_push_standard(self, rng: random.Random) -> None:
        self._setup_push(False)

    def _setup_push_fifo(self, rng: random.Random) -> None:
        self._setup_push(True)

    def _setup_simple(self, rng: random.Random) -> None:
        self._send_messages(False)
        self._group(False, 1.0)
        self.simple = self.simple_class(self.channel, GROUP, TOPIC, client_id=CLIENT).start()

    def _listener(self, m: Any) -> ConsumeResult:
        h = self._me()
        h.msg = self.index.get(m.message_id)
        ans = self._park(("listener", h.msg, m.delivery_attempt), None)
        return ConsumeResult.SUCCESS if ans == "ok" else ConsumeResult.FAILURE

    # -- calls -------------------------------------------------------------------------------------------
    def do(self, action: tuple) -> Any:
        name, *args = action
        faults = self.cfg.get("server_faults", True)
        if not faults and (set(args) & {"lost", "throttled", "bad-request"} or (name == "receive_answer" and "error" in args)):
            raise ActionRejected(f"{action}: the server answers only OK or a plain error in this configuration")
        handler = getattr(self, f"_do_{name}", None)
        if handler is None:
            raise KeyError(f"unknown action {name!r}")
        if self.role == "producer" and name not in ("route_answer", "send_answer", "tick", "retry"):
            raise ActionRejected(f"{name}: this run drives the producer")
        if self.role == "simple" and not (name.startswith("simple_") or name in ("abandon", "expire")):
            raise ActionRejected(f"{name}: this run drives the simple consumer")
        if self.role.startswith("push") and (name.startswith("simple_") or name in ("route_answer", "send_answer", "tick", "retry", "abandon")):
            raise ActionRejected(f"{name}: this run drives the push consumer")
        obs = handler(*args)
        crashes = self._crashes()
        return ("raised", *crashes) if crashes else obs

    def _producer_thread(self) -> _Helper:
        return next(h for h in self.helpers if h.kind == "producer")

    def _do_route_answer(self, ans: str) -> Any:
        h = self._producer_thread()
        if h.finished or h.gate != ("route",):
            raise ActionRejected("the producer is not waiting for a route")
        self._answer(h, (_KIND[ans], 0.0))
        self._settle()
        return "ok" if h.last and h.last[0] == "ok" and h.last[2] == "ok" else "failed"

    def _do_send_answer(self, q: int, ans: str, backoff: int = 0) -> Any:
        h = self._producer_thread()
        if h.finished or h.gate != ("send", q):
            raise ActionRejected(f"the producer has no send request to queue {q} pending")
        self._answer(h, (_KIND[ans], backoff))
        self._settle()
        got = classify(h.last)
        if got == "throttled":
            return ("throttled", int(h.last[1].backoff))
        return got

    def _do_tick(self) -> Any:
        h = self._producer_thread()
        if h.finished or h.gate is None or h.gate[0] != "backoff":
            raise ActionRejected("the producer is not waiting out a back-off")
        h.waited += 1
        waited = h.waited
        if waited >= h.gate[1]:
            self._answer(h, True)
        self._settle()
        return waited

    def _do_retry(self) -> Any:
        raise ActionRejected("the reference retries only once the back-off is over")

    def _pq(self, p: int) -> Any:
        if not 0 <= p < self.queues:
            raise KeyError(f"no queue {p}")
        return next((pq for mq, pq in self.consumer._pqs.items() if mq.queue_id == p), None)

    def _delivered(self, mark: int) -> tuple:
        return tuple((self.index[mid], a) for ev, mid, a in self.events[mark:] if ev == "delivered")

    def _deliverable(self, p: int) -> bool:
        """The broker has a message of queue p it would deliver now (a lost answer needs one: the
        server delivered it and the answer was lost).  Read off the broker's records."""
        q = self.broker._by_uid[p]
        with q.cond:
            gq = q.gqs.get(GROUP)
            if gq is None:
                return bool(q.log)
            for off, rec in gq.recs.items():
                if rec.state != 0:
                    continue
                if not gq.gated:
                    return True
                heads = gq.gpend.get(rec.msg.group if rec.msg.group is not None else ("", off))
                if heads and heads[0] == off:
                    return True
            return False

    def _do_receive_answer(self, p: int, ans: str) -> Any:
        pq = self._pq(p)
        if p not in self.cfg["msg_queue"]:
            # the model leaves out the receive loop of a queue without messages (only empty answers)
            raise ActionRejected(f"queue {p} has no messages: its receive loop is not driven")
        if ans == "lost" and not self._deliverable(p):
            raise ActionRejected(f"queue {p} has no message to deliver: no answer can be lost")
        h = self._waiting("loop", lambda h: h.pq is pq and h.gate[0] == "receive") if pq is not None else None
        if h is None:
            raise ActionRejected(f"process queue {p} has no receive request pending")
        mark = len(self.events)
        self._answer(h, (_KIND[ans], 1 if ans == "lost" else 0))
        self._settle()
        got = classify(h.last)
        if got == "ok":
            return self._delivered(mark)
        if got == "lost":
            return ("lost", self._delivered(mark))
        return "error" if got == "throttled" and not self.answer_codes else got

    def _do_dispatch(self, p: int) -> Any:
        pq = self._pq(p)
        if pq is None or pq not in self.signalled:
            raise ActionRejected(f"the dispatcher was not signalled for process queue {p}")
        with self.cv:
            self.signalled.discard(pq)
        busy = pq.locked
        n0 = len(self.tasks)
        self.consumer._dispatch(pq)
        self._settle()
        taken = tuple(h.msg for h in self.tasks[n0:])
        return "lock-busy" if busy and self.consumer.settings.fifo and not taken else taken

    def _task_at(self, m: int, gate: str) -> _Helper:
        h = self._waiting("task", lambda h: h.gate[0] == gate and h.msg == m)
        if h is None:
            raise ActionRejected(f"message {m} is not at {gate}")
        return h

    def _do_listener_returns(self, m: int, res: str) -> Any:
        h = self._waiting("task", lambda h: h.gate[0] == "listener" and h.gate[1] == m)
        if h is None:
            raise ActionRejected(f"the listener is not consuming message {m}")
        attempt = h.gate[2]
        self._answer(h, res)
        self._settle()
        return (res, attempt)

    def _do_next_attempt_delay(self, m: int) -> Any:
        self._answer(self._task_at(m, "delay"), True)
        self._settle()
        return "elapsed"

    def _settle_call(self, rpc: str, m: int, ans: str) -> Any:
        h = self._waiting("task", lambda h: h.gate[0] == "settle" and h.gate[1] == rpc and h.gate[2] == m)
        if h is None:
            raise ActionRejected(f"message {m} has no {rpc} request pending")
        self._answerable(ans, self._current_handle(h.handle), f"the {rpc} of message {m}")
        self._answer(h, (_KIND[ans], 0.0))
        self._settle()
        got = classify(h.last)
        return "error" if got == "throttled" and not self.answer_codes else got

    @staticmethod
    def _answerable(ans: str, current: bool, what: str) -> None:
        """Refuse a call whose named answer the server cannot give to this request: ``ok`` and ``lost``
        (applied, the answer lost) need the copy's receipt handle to be the current one; a stale handle
        is answered INVALID_RECEIPT_HANDLE or MESSAGE_NOT_FOUND (the proxy's ``validateReceiptHandle``:
        "receipt handle is expired"; broker ``_current``), so ``invalid-handle`` and ``not-found`` need
        it stale.  The model's ``_settle_answers`` / ``_s_rpc`` offer exactly these (spec/ordered-consumption.md,
        "A settle with a stale receipt handle").  Errors, throttling and BAD_REQUEST come whatever the handle is."""
        if ans in _APPLIED and not current:
            raise ActionRejected(f"{what} carries a receipt handle the server no longer takes: it cannot be "
                                 f"answered {ans!r} (INVALID_RECEIPT_HANDLE)")
        if ans in _REFUSED and current:
            raise ActionRejected(f"{what} carries the current receipt handle: the server applies it, it cannot be "
                                 f"answered {ans!r}")

    def _do_ack_answer(self, m: int, ans: str) -> Any:
        return self._settle_call("ack_message", m, ans)

    def _do_change_invisible_answer(self, m: int, ans: str) -> Any:
        return self._settle_call("change_invisible_duration", m, ans)

    def _do_forward_to_dlq_answer(self, m: int, ans: str) -> Any:
        return self._settle_call("forward_to_dlq", m, ans)

    def _message(self, m: int) -> str:
        if not 0 <= m < len(self.ids):
            raise KeyError(f"no message {m}")
        return self.ids[m]

    def _held(self, m: int) -> bool:
        """The client holds message m (the environment's rule ``expiry_while_held`` speaks of it)."""
        if self.role == "simple":
            return m in self.held and self._valid(self.held[m])
        snap = self.snapshot()["messages"][m]
        return snap["client"] != "-" or snap["pending"]

    def _do_expire(self, m: int) -> Any:
        mid = self._message(m)
        if not self.cfg.get("expiry_while_held", True) and self._held(m):
            raise ActionRejected(f"message {m} is held by the client: its invisible time does not run out "
                                 "in this configuration")
        if not self.broker.expire_now(GROUP, mid):
            raise ActionRejected(f"message {m} is not invisible")
        self._settle()
        st = self.broker.message_state(GROUP, mid)["state"]
        return "visible" if st == "ready" else "dead-lettered" if st.startswith("dead") else st

    def _rebalance(self, p: int, give: bool) -> Any:
        if not 0 <= p < self.queues:
            raise KeyError(f"no queue {p}")
        if not self.cfg.get("rebalance", True):
            raise ActionRejected("no rebalance in this configuration")
        if p not in self.cfg["msg_queue"] or (p in self.assigned) == give:
            raise ActionRejected(f"queue {p} cannot be {'given back' if give else 'taken away'} now")
        (self.assigned.add if give else self.assigned.discard)(p)
        self.broker.pin_assignment(GROUP, CLIENT, tuple(self.mqs[q] for q in sorted(self.assigned)))
        self.main.answer = ("ok", 0.0)
        self.consumer.rebalance()
        self._settle()
        return "created" if give else "dropped"

    def _do_drop_process_queue(self, p: int) -> Any:
        return self._rebalance(p, False)

    def _do_create_process_queue(self, p: int) -> Any:
        return self._rebalance(p, True)

    # -- the simple consumer (the driver's thread is the application's) ------------------------------
    def _sync(self, ans: str, call: Callable[[], Any]) -> tuple[str, Any]:
        self.main.answer = (_KIND[ans], 0.0)
        self.main.last = None
        try:
            result = call()
        except RpcError:
            pass
        else:
            self.main.last = ("ok", result, _KIND[ans])
        return classify(self.main.last), self.main.last

    def _do_simple_receive(self, ans: str) -> Any:
        if ans == "lost" and not self._deliverable(self.simple._next % self.queues):
            raise ActionRejected("the next queue has no message to deliver: no answer can be lost")
        mark = len(self.events)
        got, last = self._sync(ans, lambda: self.simple.receive(1, 30.0))
        if got == "ok":
            for r in last[1]:
                self.held[self.index[r.message_id]] = r
        got = "error" if got == "throttled" and not self.answer_codes else got
        if got in ("ok", "lost"):
            d = self._delivered(mark)
            return (got, d[0] if d else ())
        return got

    def _simple_settle(self, m: int, ans: str, op: str) -> Any:
        msg = self.held.get(m)
        if msg is None:
            raise ActionRejected(f"the application holds no copy of message {m}")
        self._answerable(ans, self._valid(msg), f"the {op} of message {m}")
        if op == "ack":
            got, _ = self._sync(ans, lambda: self.simple.ack(msg))
            done = "acked"
        else:
            got, _ = self._sync(ans, lambda: self.simple.change_invisible_duration(msg, 1.0))
            done = "changed"
        if got == "ok":
            del self.held[m]  # settled, or made invisible again: the application lets go of it
        if got in ("ok", "lost"):
            return (got, done)
        return "error" if got == "throttled" and not self.answer_codes else got

    def _do_simple_ack(self, m: int, ans: str) -> Any:
        return self._simple_settle(m, ans, "ack")

    def _do_simple_change_invisible(self, m: int, ans: str) -> Any:
        return self._simple_settle(m, ans, "change-invisible")

    def _do_abandon(self, m: int) -> Any:
        if self.held.pop(m, None) is None:
            raise ActionRejected(f"the application holds no copy of message {m}")
        return "abandoned"

    # -- the observed state -----------------------------------------------------------------------------
    def _valid(self, msg: Any) -> bool:
        """The receipt handle is the broker's current one (read off the broker's records)."""
        return self._current_handle(msg.receipt_handle)

    def _current_handle(self, handle: str) -> bool:
        uid, off, seq = (int(x, 16) for x in handle.split(":"))
        q = self.broker._by_uid[uid]
        with q.cond:
            gq = q.gqs.get(GROUP)
            rec = gq.recs.get(off) if gq is not None else None
            return rec is not None and rec.state == 1 and rec.seq == seq

    def _server(self, m: int) -> tuple[str, int]:
        mid = self.ids[m]
        st = self.broker.message_state(GROUP, mid)["state"]
        return _SERVER.get(st, st), self.attempts.get(mid, 0)

    def snapshot(self) -> dict[str, Any]:
        if self.role == "producer":
            return self._producer_snapshot()
        if self.role == "simple":
            msgs = []
            for m in range(len(self.ids)):
                srv, a = self._server(m)
                held = self.held.get(m)
                msgs.append({"server": srv, "attempt": a,
                             "held": None if held is None else "valid" if self._valid(held) else "stale"})
            return {"role": "simple", "messages": msgs, "next_queue": self.simple._next % self.queues}
        with self.cv:
            # a task at ``unlock`` (the thread level's FIFO worker before its unlock) has let go of its message
            tasks = [(h.msg, h.gate) for h in self.tasks if not h.finished and not (h.gate and h.gate[0] == "unlock")]
            loops = [(h.pq, h.gate) for h in self.helpers if h.kind == "loop" and not h.finished]
        current = {p: self._pq(p) for p in range(self.queues)}
        msgs = []
        for m, mid in enumerate(self.ids):
            srv, a = self._server(m)
            pq = current[self.cfg["msg_queue"][m]]
            cached = pq is not None and mid in pq._pending
            gate = next((g for tm, g in tasks if tm == m and g is not None), None)
            client = ("-" if gate is None else _CLIENT_OF_GATE.get(gate[0] if gate[0] != "settle" else gate[1], gate[0]))
            if gate is None and cached:
                client = "cached"
            msgs.append({"server": srv, "attempt": a, "client": client, "pending": gate is not None and cached})
        queues = []
        for p in range(self.queues):
            pq = current[p]
            if pq is None:
                queues.append({"assigned": False, "notified": False, "locked": False, "waiting": False, "cache": [0, 0]})
                continue
            queues.append({"assigned": True, "notified": pq in self.signalled, "locked": pq.locked,
                           # waiting for room, or woken and held at the wake-up (thread level) while full again
                           "waiting": any(lp is pq and g is not None and g[0] in ("room", "woken") for lp, g in loops)
                           and self._full(pq),
                           "cache": [pq.count, pq.bytes]})
        return {"role": self.role.replace("_", "-"), "messages": msgs, "process_queues": queues}

    def _producer_snapshot(self) -> dict[str, Any]:
        mt, mask, g, _ = self.scenario
        h = self._producer_thread()
        out: dict[str, Any] = {"role": "producer", "type": {"normal": "normal", "fifo": "fifo",
                                                            "transaction": "transactional"}[mt.value],
                               "accepting_queues": [q for q in range(self.queues) if (mask >> q) & 1],
                               "requests": self.channel.requests["send_message"], "result": None}
        if mt is MessageType.FIFO:
            out["group_queue"] = g
        if h.finished:
            out["phase"] = "done"
            out["result"] = "sent" if h.error is None else "failed"
        elif h.gate == ("route",):
            out["phase"] = "fetch-route"
        elif h.gate == ("pick",):  # the thread level: held before it picks its queue
            out["phase"] = "pick-queue"
        elif h.gate is not None and h.gate[0] == "send":
            out["phase"] = "send"
            out["queue"] = h.gate[1]
        elif h.gate is not None and h.gate[0] in ("backoff", "retry"):  # retry: the back-off over (thread level)
            out["phase"] = "throttled-wait"
            out["backoff"] = int(h.gate[1])
            out["waited"] = h.waited
        else:
            out["phase"] = f"unknown {h.gate}"
        return dict(sorted(out.items()))

    def close(self) -> None:
        """Shut the clients down (every gate lets its thread go on at once) and join every thread."""
        with self.cv:
            self.closing = True
            self.cv.notify_all()
        try:
            if self.consumer is not None:
                try:
                    self.consumer.shutdown(CAP)
                except RuntimeError:
                    pass
            if self.producer is not None:
                self.producer.close()
            if self.simple is not None:
                self.simple.close()
        finally:
            for h in list(self.helpers) + list(self.tasks):
                if h.thread is not None:
                    h.thread.join(CAP)
            self.helpers, self.tasks = [], []
            self.broker.stop()


class _StillClock:
    """The broker's clock: time stands still (invisible time runs out only by ``expire_now``)."""

    def now(self) -> float:
        return 0.0

    def wait(self, cond: Any, deadline: float | None, cancel: Any = None) -> None:
        return  # a long poll of 0 never waits

    def sleep(self, seconds: float, cancel: Any = None) -> bool:
        return True
