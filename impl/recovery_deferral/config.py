"""The concurrent listener's configuration (seed 004 "Configuration"; upstream
``oddsfeed/ConcurrentOddsFeedListenerConfig.java``).

The four settings of the seed -- ``enabled``, ``threads``, ``queue_size``,
``handle_errors_asynchronously`` -- plus the decisions the seed leaves open, each with the reference
choice as its default and the upstream behaviour available by name (spec/deviations.md):

* ``on_queue_full`` (DEV-001): ``"block"`` (reference: the feed thread waits for room), ``"drop"``
  (upstream ``TaskExecutor``: the task is logged and lost; kept for comparison), ``"raise"`` (the
  hand-off fails with ``QueueFull``; for tests and callers that want to decide themselves).
* ``queues``: the number of task queues; ``None`` = one per worker thread, as upstream (one
  single-thread executor per queue).  The seed never relates the two (DEMUX-023 vs DEMUX-026).
* ``poll_interval``: how often a deferred ProducerUp re-reads its pending count (upstream 200 ms);
  ``None`` = never by the clock, only on the event-driven wake and ``poll_now()`` (for tests and
  step-by-step drivers; see ``global_listener``).
* ``wake_on_drain``: deliver a deferred ProducerUp as soon as the last task of its recovery
  completes instead of at the next poll (the reference; ``False`` = poll only, as upstream).
* ``manual``: start no thread at all -- a step-by-step driver (the conformance driver) runs each
  worker turn with ``ConcurrentFeedListener.run_one`` and each deferred-ProducerUp check with
  ``ConcurrentGlobalEventsListener.poll_one`` / ``poll_now``, from threads of its own.  The code of a
  turn and of a check is the same as with threads; only who calls it, and when, changes.

Upstream's bounds (threads 5..30, queueSize >= 500) are operating advice, not correctness: the
models check 1 or 2 workers and queues of 1, so any value >= 1 is accepted here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ON_QUEUE_FULL", "ConcurrentListenerConfig"]

ON_QUEUE_FULL = ("block", "drop", "raise")


@dataclass(frozen=True)
class ConcurrentListenerConfig:
    #: False = the legacy serial pipeline: every event handled on the calling (feed) thread, every
    #: global callback forwarded at once (the baseline the concurrent listener is measured against)
    enabled: bool = True
    #: worker threads per wrapped feed listener (upstream default 10)
    threads: int = 10
    #: capacity of each task queue; None = unbounded (upstream ``withUnboundedQueues``)
    queue_size: int | None = 10_000
    #: True = error events are queued like events (an error about a sport event on that event's
    #: queue, DEV-007); False = handled on the calling (feed) thread
    handle_errors_asynchronously: bool = True
    queues: int | None = None
    on_queue_full: str = "block"
    poll_interval: float | None = 0.2
    wake_on_drain: bool = True
    #: no worker and no scheduler thread: the caller drives every step (see the module docstring)
    manual: bool = False

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.queue_size is not None and self.queue_size < 1:
            raise ValueError(f"queue_size must be >= 1 or None (unbounded), got {self.queue_size}")
        if self.queues is not None and self.queues < 1:
            raise ValueError(f"queues must be >= 1 or None (one per thread), got {self.queues}")
        if self.on_queue_full not in ON_QUEUE_FULL:
            raise ValueError(f"on_queue_full must be one of {ON_QUEUE_FULL}, got {self.on_queue_full!r}")
        if self.poll_interval is not None and not self.poll_interval > 0:
            raise ValueError(f"poll_interval must be > 0 or None, got {self.poll_interval}")

    @property
    def queue_count(self) -> int:
        return self.threads if self.queues is None else self.queues
