"""``ConcurrentListener``: one SDK's listener set-up -- the configuration, the TaskLifecycleTracker
shared by every wrapped feed listener and by the global-events listener, and the shutdown of all of
their threads.

Sources: seed 004 "Implementation" ("Multiple OddsFeedListeners can be registered ... There is only
ever one SDKGlobalEventsListener registered"; each customer listener is wrapped), "Configuration"
(``enabled``: False keeps the legacy pipeline), "Improvements" (each ConcurrentOddsFeedListener has
its own pool of worker threads).  Upstream ``sdk-core/.../listener/concurrent/ConcurrentListenerFactory.java``.

One tracker for the whole set-up: a recovery's "up" waits for the recovery's tasks in *every*
wrapped feed listener.  Shutdown order: the feed listeners first (each drains its queues, so the
last tasks complete and their "ups" become deliverable), then the global listener (its scheduler
makes one last check, then stops).  Every thread is joined; ``close`` raises ``ShutdownTimeout``
naming the ones that are not (a customer listener that never returns).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from conq.impl.recovery_deferral.config import ConcurrentListenerConfig
from conq.impl.recovery_deferral.demux import ShutdownTimeout
from conq.impl.recovery_deferral.feed_listener import (
    ConcurrentFeedListener,
    OddsFeedListener,
    SerialFeedListener,
)
from conq.impl.recovery_deferral.global_listener import (
    ConcurrentGlobalEventsListener,
    GlobalEventsListener,
    PassThroughGlobalEventsListener,
)
from conq.impl.recovery_deferral.tracker import TaskLifecycleTracker
from conq.impl.scheduling import REAL

__all__ = ["ConcurrentListener"]


class ConcurrentListener:
    def __init__(
        self,
        config: ConcurrentListenerConfig | None = None,
        *,
        sched: Any = REAL,
        clock: Callable[[], float] = time.monotonic,
        name: str = "uof",
        seed: int = 0,
    ) -> None:
        self.config = config or ConcurrentListenerConfig()
        self.tracker = TaskLifecycleTracker(sched)
        self._sched = sched
        self._clock = clock
        self._name = name
        self._seed = seed
        self.feed_listeners: list[ConcurrentFeedListener | SerialFeedListener] = []
        self.global_listener: ConcurrentGlobalEventsListener | PassThroughGlobalEventsListener | None = None
        self._closed = False

    def wrap_feed_listener(self, customer: OddsFeedListener) -> ConcurrentFeedListener | SerialFeedListener:
        """The listener the SDK's feed thread calls instead of ``customer`` (its own worker pool)."""
        if self._closed:
            raise RuntimeError("closed")
        i = len(self.feed_listeners)
        if self.config.enabled:
            wrapped: ConcurrentFeedListener | SerialFeedListener = ConcurrentFeedListener(
                customer, config=self.config, tracker=self.tracker, sched=self._sched,
                name=f"{self._name}-feed{i}", seed=self._seed + i,
            )
        else:
            wrapped = SerialFeedListener(customer, name=f"{self._name}-feed{i}-legacy", sched=self._sched)
        self.feed_listeners.append(wrapped)
        return wrapped

    def wrap_global_listener(
        self, customer: GlobalEventsListener
    ) -> ConcurrentGlobalEventsListener | PassThroughGlobalEventsListener:
        """The listener the SDK calls instead of ``customer``; only one per set-up (DEMUX-013)."""
        if self._closed:
            raise RuntimeError("closed")
        if self.global_listener is not None:
            raise RuntimeError("only one global-events listener is ever registered (seed 004)")
        if self.config.enabled:
            self.global_listener = ConcurrentGlobalEventsListener(
                customer, self.tracker, poll_interval=self.config.poll_interval,
                wake_on_drain=self.config.wake_on_drain, sched=self._sched, clock=self._clock,
                name=f"{self._name}-global", manual=self.config.manual,
            )
        else:
            self.global_listener = PassThroughGlobalEventsListener(customer, sched=self._sched)
        return self.global_listener

    def alive_threads(self) -> list[str]:
        out = [t for f in self.feed_listeners for t in f.alive_threads()]
        if self.global_listener is not None:
            out += self.global_listener.alive_threads()
        return out

    def close(self, timeout: float | None = 30.0) -> None:
        """Drain and stop every feed listener, then the global listener; join every thread.
        ``timeout`` applies to each component in turn."""
        self._closed = True
        stuck: list[str] = []
        for f in self.feed_listeners:
            try:
                f.close(timeout)
            except ShutdownTimeout as exc:
                stuck += exc.threads
        if self.global_listener is not None:
            try:
                self.global_listener.close(timeout)
            except ShutdownTimeout as exc:
                stuck += exc.threads
        if stuck:
            raise ShutdownTimeout(f"{self._name}: threads still alive after close: {stuck}", stuck)

    def __enter__(self) -> ConcurrentListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
