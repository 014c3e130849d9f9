"""Fixtures of the ordered-consumption implementation tests.

* Every test must leave no thread running (the autouse ``no_thread_left`` fixture fails the test
  otherwise, naming the threads).
* ``wait_until(predicate, what)`` waits for something another thread does.  Its time bound is only a
  safety cap that fails loudly (a hang is a failure, never a verdict): what a test checks is always a
  count or a state, never how long something took.
* ``Scripted`` wraps a channel and answers chosen requests with scripted outcomes, recording every
  call, for the tests that need an exact sequence of answers.
* ``broker_server`` starts a broker behind a ``BrokerServer`` (newline-delimited JSON over TCP on
  127.0.0.1, an ephemeral port) and stops both at the end of the test, with every ``TcpChannel`` it
  handed out; the ``no_thread_left`` check then proves nothing of it is still running.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

import pytest

from conq.impl.ordered_consumption import Code, RpcError
from conq.impl.ordered_consumption.server import ServedBroker

SAFETY_CAP = 30.0  # seconds; only ever reached by a hang, which then fails the test


@pytest.fixture(autouse=True)
def no_thread_left():
    before = set(threading.enumerate())
    yield
    # a thread that is finishing gets the safety cap, not a verdict: a loaded machine may be slow
    deadline = time.monotonic() + 30.0
    while True:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    assert not left, f"threads left running: {[t.name for t in left]}"


def _wait_until(predicate, what: str = "condition", cap: float = SAFETY_CAP):
    deadline = time.monotonic() + cap
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"safety cap: {what} not reached within {cap}s")
        time.sleep(0.0005)


@pytest.fixture
def wait_until():
    return _wait_until


class Scripted:
    """A channel wrapper: ``script[rpc]`` is a list of outcomes used by that RPC's successive calls
    (then everything passes).  An outcome is ``"ok"``, an ``RpcError`` to raise before forwarding,
    ``"expire"`` (the delivery's invisible time runs out, then the request is forwarded: the broker
    itself answers INVALID_RECEIPT_HANDLE), ``"lost"`` (forwarded, then REQUEST_TIMEOUT) or a callable
    run before forwarding (e.g. to block)."""

    def __init__(self, inner, broker, script=None):
        self._inner = inner
        self._broker = broker
        self._lock = threading.Lock()
        self.script = defaultdict(list, {k: list(v) for k, v in (script or {}).items()})
        self.calls: list[tuple[str, tuple]] = []
        self.requests = Counter()

    def __getattr__(self, rpc):
        target = getattr(self._inner, rpc)

        def call(*args, **kwargs):
            with self._lock:
                self.calls.append((rpc, args))
                self.requests[rpc] += 1
                outcome = self.script[rpc].pop(0) if self.script[rpc] else "ok"
            if isinstance(outcome, RpcError):
                raise outcome
            if callable(outcome):
                outcome()
            elif outcome == "expire":
                group, _topic, message_id = args[0], args[1], args[2]
                self._broker.expire_now(group, message_id)
            result = target(*args, **kwargs)
            if outcome == "lost":
                raise RpcError(Code.REQUEST_TIMEOUT, "scripted: answer lost")
            return result

        return call


@pytest.fixture
def scripted():
    return Scripted


@pytest.fixture
def broker_server():
    """A running broker behind a TCP server (see the module docstring); stopped at teardown."""
    served = ServedBroker()
    try:
        yield served
    finally:
        served.close()


@pytest.fixture
def broker_server_factory():
    """Like ``broker_server``, with arguments: ``make(faults=FaultPlan(...), clock=...)``."""
    made: list[ServedBroker] = []

    def make(**kw):
        s = ServedBroker(**kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
