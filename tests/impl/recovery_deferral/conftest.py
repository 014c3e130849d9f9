"""Shared pieces of the concurrent-listener tests: no test may leave a thread running.

Every test here starts real threads (worker pools, the deferred-up scheduler, a feed thread).  The
autouse fixture compares the live threads after the test with those before it: a thread the test
started must have been joined (``close`` joins every thread it owns).  It allows each leftover a
short grace join -- a thread that is *finishing* after its owner returned is still a leak of
``close``'s contract, but reporting it only after 5 s keeps the message about real leaks.
"""

from __future__ import annotations

import threading

import pytest
from conq.impl.recovery_deferral import ConcurrentListener, ConcurrentListenerConfig
from conq.impl.recovery_deferral.feed import (
    Journal,
    RecordingFeedListener,
    RecordingGlobalListener,
)

#: the safety cap of every wait here: reaching it fails the test loudly; no verdict depends on it
CAP = 60.0


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    for t in leftover:
        t.join(5.0)
    alive = [t.name for t in leftover if t.is_alive()]
    assert not alive, f"threads left running after the test: {alive}"


class Rig:
    """A ConcurrentListener with recording customer listeners.  ``hold(item)`` (settable at any
    time) returns the gate an item's handler waits on, or None; ``gate()`` makes a gate that
    teardown opens before closing (so a failing test never leaves a handler waiting)."""

    def __init__(self, config: ConcurrentListenerConfig, fail=None, global_fail=None) -> None:
        self.journal = Journal()
        self.gates: list[threading.Event] = []
        self.hold = None
        self.cl = ConcurrentListener(config)
        self.customer = RecordingFeedListener(
            self.journal, hold=lambda item: self.hold(item) if self.hold else None, fail=fail, hold_cap=CAP
        )
        self.feed = self.cl.wrap_feed_listener(self.customer)
        self.events = self.cl.wrap_global_listener(RecordingGlobalListener(self.journal, fail=global_fail))

    def up(self, producer_id: int, callback: str = "FirstRecoveryCompleted") -> None:
        """Send an "up" as the SDK would (journalled as ``up-sent``, like the feed simulator does)."""
        self.journal.record("up-sent", producer=producer_id, callback=callback)
        if callback == "ProducerUp":
            self.events.on_producer_up(producer_id, "FirstRecoveryCompleted")
        else:
            self.events.on_producer_status_change(producer_id, callback)

    def gate(self) -> threading.Event:
        g = threading.Event()
        self.gates.append(g)
        return g

    def close(self) -> None:
        for g in self.gates:
            g.set()
        self.cl.close(CAP)


@pytest.fixture
def make_rig():
    rigs: list[Rig] = []

    def make(config: ConcurrentListenerConfig, **kw) -> Rig:
        r = Rig(config, **kw)
        rigs.append(r)
        return r

    yield make
    for r in rigs:
        r.close()
