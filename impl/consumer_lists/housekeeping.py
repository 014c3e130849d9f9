"""The housekeeping thread: periodic TTL expiry of a queue (issue 16).

Seeds 000/002 "Threading Model": the publishing part of the queue "might be invoked from different
threads (..., Housekeeping thread for held or TTLed messages, ...)".  Upstream Broker-J runs
``AbstractQueue.checkMessageStatus`` from the virtual host's housekeeping task
(``VirtualHost.HouseKeepingTask`` -> ``queue.checkMessageStatus()``) every
``virtualhost.housekeepingCheckPeriod``; it walks the queue and deletes every expired entry through
``expireEntry`` -> ``deleteEntry`` (an acquire by a non-consumer: ``acquireOrSteal``).

:class:`Housekeeping` is that thread for one queue: a daemon thread calling
``queue.check_message_status()`` every ``interval`` seconds (real time; the expiry itself is decided
by the queue's own clock, ``Queue(clock=...)``).  Tests and the conformance driver call
``queue.check_message_status()`` directly for deterministic runs; the thread adds nothing but the
timing.

Concurrency: the thread only calls ``check_message_status``, which is safe with everything else
(``Queue`` docstring, "Other actors").  ``stop()`` sets an event the thread waits on and joins it, so
no thread is left behind; an exception out of a pass is kept (``errors``) and re-raised by ``stop``,
never swallowed.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["Housekeeping"]


class Housekeeping:
    """``Housekeeping(queue, interval=0.01).start()`` ... ``.stop()`` (also a context manager)."""

    def __init__(self, queue: Any, *, interval: float, name: str | None = None) -> None:
        if not interval > 0:
            raise ValueError(f"housekeeping interval must be > 0 seconds, got {interval!r}")
        self.queue = queue
        self.interval = interval
        self.name = name or f"housekeeping[{getattr(queue, 'name', 'queue')}]"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0  # completed check_message_status passes
        self.started_deletes = 0  # deletes those passes started
        self.errors: list[BaseException] = []

    def start(self) -> Housekeeping:
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: already started")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.started_deletes += self.queue.check_message_status()
            except BaseException as exc:  # kept and re-raised by stop(): a failed pass is a defect
                self.errors.append(exc)
                return
            self.passes += 1

    def run_once(self) -> int:
        """One pass on the caller's thread (deterministic use); returns the deletes it started."""
        n = self.queue.check_message_status()
        self.started_deletes += n
        self.passes += 1
        return n

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and join it; raises if it does not end within ``timeout`` seconds (a safety
        cap) or if a pass failed."""
        self._stop.set()
        t = self._thread
        if t is not None:
            t.join(timeout)
            if t.is_alive():
                raise RuntimeError(f"{self.name}: the thread did not stop within {timeout} s")
        if self.errors:
            raise self.errors[0]

    def __enter__(self) -> Housekeeping:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
