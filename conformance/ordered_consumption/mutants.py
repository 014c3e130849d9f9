"""The ordered-consumption mutant catalogue: plausible bugs of the reference thin client
(``conq.impl.ordered_consumption``), one per rule of seed 001, and the engines that must catch each.

The generic machinery (applying a mutant with ``unittest.mock`` patches, count budgets with a safety
cap, the kill matrix) is :mod:`conq.conformance.mutation`; ``conq mutants ordered-consumption`` prints
the matrix.  Every mutant patches a method of the implementation's own classes (``Producer``,
``PushConsumer``, ``ProcessQueue``, ``SimpleConsumer``); the driver runs them unchanged.

Engines (each spends a *count*, scaled by ``Budget.scale``; seconds only cap):

* ``explorer``: every call sequence of up to ``EXPLORER_DEPTH`` calls on each configuration,
  shortest first (generate.action_sequences), replayed against the implementation;
* ``random``  : seeded random walks from the consistent model states (``Checker.walk``);
* ``thread-steps``: the thread level (``thread_steps.py``): seeded walks over the threads' own steps,
  the reference held at its scheduling points (the only engine that sees ``fifo-unlock-before-let-go``).

The configurations (``TRACE_CONFIGS``) are the model's role configurations with the full broker --
invisible time that runs out while the client holds a message included (issue 32: the reference and
the model agree on every answer to a settle with a stale receipt handle) -- and the simple consumer on
one queue (see the report of issue 14 for the two divergences that rules out).
"""

from __future__ import annotations

from typing import Any

from conq.conformance.mutation import Budget, Catalogue, Clock, Detection, Mutant, replay_until_killed, walk_until_killed
from conq.impl.ordered_consumption.process_queue import HeldMessages, ProcessQueue
from conq.impl.ordered_consumption.producer import Producer
from conq.impl.ordered_consumption.protocol import RpcError
from conq.impl.ordered_consumption.push_consumer import PushConsumer
from conq.impl.ordered_consumption.simple_consumer import SimpleConsumer

PC = PushConsumer

# -- producer (seed 001 "Producer" steps 4-7 and 特别地) ------------------------------------------------
_orig_candidates = Producer._candidates
_orig_send = Producer.send
_orig_init = Producer.__init__


def _no_rotation(self, topic, route, message, mtype):
    """Step 7: a failed attempt is retried on the same queue instead of the next candidate."""
    cands = _orig_candidates(self, topic, route, message, mtype)
    return cands[:1]


def _fifo_rotates(self, *args, **kw):
    """A FIFO message rotated off its message group's queue on a retry."""
    _orig_init(self, *args, **kw)
    self.fifo_group_pinning = False


def _txn_retries(self, *args, **kw):
    """特别地: a transactional message retried like any other."""
    _orig_init(self, *args, **kw)
    self.transactional_retries = True


class _Impatient:
    """A clock whose sleeps end at once (wraps the producer's clock)."""

    def __init__(self, clock: Any):
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clock, name)

    def sleep(self, seconds: float, cancel: Any = None) -> bool:
        return True


def _ignores_backoff(self, *args, **kw):
    """特别地: a throttled send retried at once, ignoring the back-off the server asked for."""
    _orig_init(self, *args, **kw)
    self.clock = _Impatient(self.clock)


class _GivesUp(_Impatient):
    """A clock whose every wait is cut short (as if the producer were closed during it)."""

    def sleep(self, seconds: float, cancel: Any = None) -> bool:
        return False


def _gives_up_on_throttle(self, *args, **kw):
    """特别地 read as the Python client 5.1.2 does (DEV-031): a throttled answer ends the send."""
    _orig_init(self, *args, **kw)
    self.clock = _GivesUp(self.clock)


# -- push consumer: receive and cache -----------------------------------------------------------------
_orig_thresholds = PC.thresholds


def _no_count_limit(self):
    """Receive step 3: the loop checks only the byte threshold."""
    return 10**9, _orig_thresholds(self)[1]


def _no_byte_limit(self):
    """Receive step 3: the loop checks only the message-count threshold."""
    return _orig_thresholds(self)[0], 10**9


# -- push consumer: standard ----------------------------------------------------------------------------
def _ack_failures(self, m):
    """普通 step 4: a failed consumption is acked instead of changing its invisible duration."""
    self._ack(m)


# -- push consumer: FIFO ----------------------------------------------------------------------------------
def _lock_always(self):
    """顺序 step 2: the dispatcher 'locks' a process queue that is already locked."""
    with self.lock:
        if self.dropped:
            return False
        self.locked = True
        return True


def _give_up_at_once(self, call):
    """顺序 steps 6 / 8: the ack / DLQ forward is given up after the first failed request."""
    try:
        call()
        return "ok"
    except RpcError:
        return "rejected"


def _fifo_consume_exceeds(self, m):
    """顺序 step 7: dead-lettered only once the attempt *exceeds* the maximum (one consumption too many)."""
    policy = self.settings.retry_policy
    attempt = m.delivery_attempt
    while True:
        if self._consume(m if attempt == m.delivery_attempt else m.with_attempt(attempt)):
            return "ack", attempt
        if attempt > policy.max_attempts:
            return "dlq", attempt
        if not self.clock.sleep(policy.delay(attempt), self._closing):
            return None, attempt
        attempt += 1


def _fifo_never_dlq(self, m):
    """顺序 steps 7-8: a message that keeps failing is consumed again and again, never dead-lettered."""
    policy = self.settings.retry_policy
    attempt = m.delivery_attempt
    while True:
        if self._consume(m if attempt == m.delivery_attempt else m.with_attempt(attempt)):
            return "ack", attempt
        if not self.clock.sleep(policy.delay(attempt), self._closing):
            return None, attempt
        attempt += 1


def _no_signal_after_unlock(self, pq, e):
    """顺序 step 9: the process queue is unlocked but the dispatcher is not signalled (a lost wake-up:
    a message cached meanwhile waits until the next receive signals).  ``PushConsumer._fifo_release``
    without its last line."""
    pq.erase(e)
    self._let_go(pq, e, signalled_next=pq)
    self._sched.point("fifo.unlock", pq)
    pq.unlock()


def _unlock_before_let_go(self, pq, e):
    """顺序 step 9 before the end of the settle: the worker unlocks the process queue and signals the
    dispatcher, and only then erases the settled message and lets it go (C6).  The dispatcher may lock
    again and take from a cache that still counts the settled message (a receive loop waiting for room
    is not woken), before a redelivery waiting behind it is pending.  Between calls the two orders end
    alike: only a step of another thread in between shows it (the thread level)."""
    self._sched.point("fifo.unlock", pq)
    pq.unlock()
    self._dispatcher.signal(pq)
    pq.erase(e)
    self._let_go(pq, e)


def _signal_before_unlock(self, pq, e):
    """顺序 step 9, its signal too early: a redelivery that waited behind the settled copy in the same
    process queue (C6) is signalled to the dispatcher at the let-go, before the worker unlocks (the
    reference did so until the thread level showed it, issue 35).  The dispatcher may run in between
    and find the queue still locked; the unlock's own signal comes after.  The call level composes
    the unlock into the settle answer and cannot tell."""
    pq.erase(e)
    self._let_go(pq, e)
    self._sched.point("fifo.unlock", pq)
    pq.unlock()
    self._dispatcher.signal(pq)


# -- rebalance ----------------------------------------------------------------------------------------------
def _keeps_stale_process_queue(self):
    """A rebalance adds process queues for new queues but keeps those of queues taken away (their
    receive loops go on receiving messages that are now another consumer's)."""
    try:
        assigned = set(self.channel.query_assignment(self.topic, self.group, self.client_id))
    except RpcError:
        return [], []
    added = []
    with self._lock:
        for mq in sorted(assigned - set(self._pqs), key=lambda m: (m.topic, m.queue_id)):
            pq = ProcessQueue(mq, self._closing.child(f"pq {mq}"), sched=self._sched, memo=getattr(self, "_memo", None),
                              held=getattr(self, "_held", None))
            self._pqs[mq] = pq
            added.append(pq)
        for pq in added:
            self._threads.append(self._sched.spawn(lambda pq=pq: self._receive_loop(pq),
                                                   f"oc-receive-{self.client_id}-{pq.mq.queue_id}"))
    return [pq.mq for pq in added], []


# -- push consumer: one copy in consumption at a time (C6) ----------------------------------------------------
def _never_waits(self, message_id, pq, e):
    """C6 undone: a redelivery is cached as pending at once, although an earlier copy of the message
    is still in consumption or settlement (the reference's dispatch before issue 14's fix): the
    dispatcher hands it to a second worker and the message is consumed / settled twice at once."""
    return False


# -- simple consumer ------------------------------------------------------------------------------------------
_orig_simple_ack = SimpleConsumer.ack


def _simple_ack_retries(self, message):
    """Simple consumer: a failed ack is retried inside the client (seed: 不做任何内部重试)."""
    try:
        return _orig_simple_ack(self, message)
    except RpcError as e:
        if not e.retriable:
            raise
        return _orig_simple_ack(self, message)


MUTANTS: dict[str, Mutant] = {m.name: m for m in [
    Mutant("producer-no-rotation", "a failed send is retried on the same queue, not the next candidate",
           "producer", ((Producer, "_candidates", _no_rotation),)),
    Mutant("producer-txn-retries", "a transactional message is retried after a failed send", "producer",
           ((Producer, "__init__", _txn_retries),)),
    Mutant("producer-fifo-rotates", "a FIFO message leaves its message group's queue on a retry", "producer",
           ((Producer, "__init__", _fifo_rotates),)),
    Mutant("producer-ignores-backoff", "a throttled send is retried at once, before the server's back-off",
           "producer", ((Producer, "__init__", _ignores_backoff),)),
    Mutant("producer-gives-up-on-throttle", "a throttled send fails at once, with attempts left (Python client 5.1.2)",
           "producer", ((Producer, "__init__", _gives_up_on_throttle),)),
    Mutant("receive-ignores-count-limit", "the receive loop ignores the cache's message-count threshold",
           "push", ((PC, "thresholds", _no_count_limit),)),
    Mutant("receive-ignores-byte-limit", "the receive loop ignores the cache's byte threshold", "push",
           ((PC, "thresholds", _no_byte_limit),)),
    Mutant("standard-acks-failure", "standard consumption acks a message whose consumption failed", "push",
           ((PC, "_change_invisible", _ack_failures),)),
    Mutant("fifo-no-lock", "FIFO dispatch does not respect the process-queue lock (out-of-order consumption)",
           "fifo", ((ProcessQueue, "try_lock", _lock_always),)),
    Mutant("fifo-gives-up-ack", "FIFO gives up an ack / DLQ forward after its first failed request", "fifo",
           ((PC, "_settle_until_ok", _give_up_at_once),)),
    Mutant("fifo-exceeds-max-attempts", "FIFO consumes once more than the maximum before dead-lettering",
           "fifo", ((PC, "_fifo_consume", _fifo_consume_exceeds),)),
    Mutant("fifo-never-dlq", "FIFO never forwards a failing message to the DLQ", "fifo",
           ((PC, "_fifo_consume", _fifo_never_dlq),)),
    Mutant("fifo-unlock-no-signal", "FIFO unlocks the process queue without signalling the dispatcher", "fifo",
           ((PC, "_fifo_release", _no_signal_after_unlock),)),
    Mutant("fifo-unlock-before-let-go", "FIFO unlocks the process queue (and signals) before the settled message "
           "is erased and let go", "fifo", ((PC, "_fifo_release", _unlock_before_let_go),)),
    Mutant("fifo-signal-before-unlock", "FIFO signals the dispatcher for a redelivery promoted into the worker's "
           "own process queue before the unlock", "fifo", ((PC, "_fifo_release", _signal_before_unlock),)),
    Mutant("rebalance-keeps-stale-queue", "a rebalance keeps the process queue of a queue taken away", "push",
           ((PC, "rebalance", _keeps_stale_process_queue),)),
    Mutant("simple-ack-retries", "the simple consumer retries a failed ack internally", "simple",
           ((SimpleConsumer, "ack", _simple_ack_retries),)),
]}

#: Bugs that show only where invisible time runs out while the client holds a message, which the
#: engines' configurations (``TRACE_CONFIGS``) leave out: not in the kill matrix; the conformance tests
#: replay their counterexample on the model's reference configuration (``mutant_driver`` takes them).
VARIANTS: dict[str, Mutant] = {m.name: m for m in [
    Mutant("redelivery-overtakes-settlement", "a redelivery is consumed while the previous copy is still consumed "
           "or settled", "push", ((HeldMessages, "wait_behind", _never_waits),)),
]}

#: the requirements (spec/requirements/*.toml) each mutant breaks
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "producer-no-rotation": ("PROD-004", "PROD-007"),
    "producer-txn-retries": ("PROD-009",),
    "producer-fifo-rotates": ("PROD-004", "FIFO-001"),
    "producer-ignores-backoff": ("PROD-011", "PROD-012"),
    "producer-gives-up-on-throttle": ("PROD-011",),
    "receive-ignores-count-limit": ("PUSH-012", "PUSH-013"),
    "receive-ignores-byte-limit": ("PUSH-012", "PUSH-013"),
    "standard-acks-failure": ("PUSH-018",),
    "fifo-no-lock": ("FIFO-001", "FIFO-003", "FIFO-005"),
    "fifo-gives-up-ack": ("FIFO-009",),
    "fifo-exceeds-max-attempts": ("FIFO-010", "FIFO-013"),
    "fifo-never-dlq": ("FIFO-010", "FIFO-011"),
    "fifo-unlock-no-signal": ("FIFO-012",),
    "fifo-unlock-before-let-go": ("FIFO-012",),
    "fifo-signal-before-unlock": ("FIFO-012",),
    "rebalance-keeps-stale-queue": ("PUSH-005",),
    "simple-ack-retries": ("SIMPLE-006", "SIMPLE-007"),
}


def _driver_cls() -> type:
    from .driver import OrderedConsumptionDriver

    return OrderedConsumptionDriver


def mutant_driver(name: str) -> type:
    """The reference driver with mutant ``name`` applied while a driver is open."""
    known = {**MUTANTS, **VARIANTS}
    if name not in known:
        raise ValueError(f"no mutant {name!r} (known: {', '.join(known)})")
    base = _driver_cls()
    mutant = known[name]

    class MutantDriver(base):  # type: ignore[misc, valid-type]
        def __init__(self, config: dict, seed: int):
            self._mutant = mutant.applied()
            self._mutant.__enter__()
            try:
                super().__init__(config, seed)
            except BaseException:
                self._mutant.__exit__(None, None, None)
                raise

        def close(self) -> None:
            try:
                super().close()
            finally:
                self._mutant.__exit__(None, None, None)

    MutantDriver.__name__ = f"MutantDriver[{name}]"
    return MutantDriver


# -- engines ------------------------------------------------------------------------------------------------

#: (named configuration, overrides) the engines run on: every role, every call kind the reference
#: passes (see the module docstring)
TRACE_CONFIGS: tuple[tuple[str, dict], ...] = (
    ("producer", {}),
    ("push-standard", {}),
    # the message-count threshold bites before the byte threshold (2 messages of 1 byte, 4 bytes)
    ("push-standard", {"msg_size": (1, 1), "cache_bytes": 8}),
    ("push-fifo", {}),
    ("simple", {"queues": 1}),
)
#: calls per sequence of the explorer engine (every sequence up to it, shortest first)
EXPLORER_DEPTH = 4
#: sequences per configuration the explorer replays at most
EXPLORER_SEQUENCES = 1500
#: seeded random walks of 40 calls (random engine), spread over the configurations
RANDOM_TRACES = 400

_SHORT: dict[tuple[int, int], list[list[tuple]]] = {}


def _model(k: int):
    from conq.conformance.views import conformance_model

    cfg, ov = TRACE_CONFIGS[k]
    return conformance_model("ordered-consumption", cfg, ov or None)


def _checker(k: int):
    from conq.conformance.adapters import InProcess
    from conq.conformance.checker import Checker

    model = _model(k)
    return Checker(model, InProcess(_driver_cls())), model


def _label(k: int) -> str:
    cfg, ov = TRACE_CONFIGS[k]
    return cfg + "".join(f" {a}={b}" for a, b in ov.items())


def _short_sequences(k: int, depth: int) -> list[list[tuple]]:
    from conq.conformance.generate import action_sequences

    if (k, depth) not in _SHORT:
        _SHORT[k, depth] = list(action_sequences(_model(k), depth))
    return _SHORT[k, depth]


def engine_explorer(budget: Budget) -> Detection:
    """Shortest first: every call sequence of up to ``EXPLORER_DEPTH`` calls on every configuration
    (at most ``EXPLORER_SEQUENCES`` each), replayed with a seed per sequence (the seed picks the role
    and, for the producer, the message and queue pattern)."""
    clock = Clock(budget)
    cap = budget.count(EXPLORER_SEQUENCES)
    phases = [(_label(k), lambda k=k: _checker(k)[0], lambda k=k: _short_sequences(k, EXPLORER_DEPTH)[:cap])
              for k in range(len(TRACE_CONFIGS))]
    det, replayed = replay_until_killed(clock, phases, unit="sequences", seed_per_sequence=True)
    return det or clock.survived(f"{replayed} sequences (every sequence of <= {EXPLORER_DEPTH} calls, at most {cap} "
                                 "per configuration) conform", f"{replayed} sequences")


def engine_random(budget: Budget) -> Detection:
    n = len(TRACE_CONFIGS)
    return walk_until_killed(Clock(budget), budget.count(RANDOM_TRACES), lambda i: (_label(i % n), i % n),
                             lambda k: _checker(k)[0])


#: seeded walks per thread-level configuration (thread_steps.THREAD_CONFIGS) and their length
THREAD_WALKS = 40
THREAD_LENGTH = 40


def engine_thread_steps(budget: Budget) -> Detection:
    """The thread level (``thread_steps.py``): the reference's threads held at their scheduling points
    and stepped one model step at a time in the order the checker chooses, ``THREAD_WALKS`` seeded
    walks per thread-level configuration, every step checked against the model's thread steps: the
    engine for interleaving bugs that end alike at every call's quiet point."""
    from conq.conformance.thread_level import mutant_engine

    from . import thread_steps

    return mutant_engine(thread_steps, budget, THREAD_WALKS, THREAD_LENGTH)


ENGINES = {"explorer": engine_explorer, "random": engine_random, "thread-steps": engine_thread_steps}

CATALOGUE = Catalogue("ordered-consumption", MUTANTS, ENGINES)


#: the ordered-consumption kill matrix (see :func:`conq.conformance.mutation.run_catalog`)
run_catalog = CATALOGUE.run


__all__ = ["CATALOGUE", "ENGINES", "MUTANTS", "REQUIREMENTS", "TRACE_CONFIGS", "VARIANTS", "mutant_driver", "run_catalog"]
