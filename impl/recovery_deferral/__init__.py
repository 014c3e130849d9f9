"""conq.impl.recovery_deferral -- the reference implementation of the odds-feed SDK's concurrent
listener and its deferred ProducerUp (seed 004; issue 15).

Real, concurrent code, independent of the model (it never imports ``conq.model``): the model
(``model/recovery_deferral``, spec/recovery-deferral.md) is the specification, and its ``reference``
configuration's choices are what this code does.  Upstream: sportradar/UnifiedOddsSdkJava pull
request 28 (never merged), ``sdk-core/src/main/java/com/sportradar/unifiedodds/sdk/listener/concurrent/``
(REFERENCE.md §3).  Where the reference differs from upstream: spec/deviations.md DEV-001, DEV-002,
DEV-007 ... DEV-011, DEV-014, DEV-015.

Modules, bottom up:

* ``events``          -- feed and error events, RecoveryContext (NONE for live traffic), the "up"
                         statuses, ``queue_index`` (a stable, non-negative hash of the event id).
* ``config``          -- ``ConcurrentListenerConfig``: ``enabled``, ``threads``, ``queue_size``,
                         ``handle_errors_asynchronously`` and the reference decisions (full queue
                         blocks, poll interval, wake on drain).
* ``tracker``         -- ``TaskLifecycleTracker``: allocated / started / completed per context,
                         counted before the task is visible to a worker (DEV-009).
* ``demux``           -- ``TaskPool``: bounded FIFO task queues and a worker pool, at most one worker
                         per queue at a time; a full queue blocks the feed thread (DEV-001).
* ``feed_listener``   -- ``ConcurrentFeedListener`` (the feed thread only hands off) and the legacy
                         ``SerialFeedListener``.
* ``global_listener`` -- ``ConcurrentGlobalEventsListener``: stores the recovery context, defers
                         every "up" until its recovery's tasks completed (scheduler thread with a
                         poll interval plus a wake when a count drops to 0); a new recovery
                         supersedes, a Down cancels (DEV-011); ``PassThroughGlobalEventsListener``.
* ``listener``        -- ``ConcurrentListener``: one set-up (shared tracker, wrapping, shutdown).
* ``feed``            -- the feed simulator, recording customer listeners, the journal and its
                         checks (tests and benchmarks).

Use::

    cl = ConcurrentListener(ConcurrentListenerConfig(threads=8, queue_size=1000))
    feed = cl.wrap_feed_listener(my_odds_feed_listener)        # the SDK's feed thread calls feed.on_event
    events = cl.wrap_global_listener(my_global_events_listener)  # ... and events.on_recovery_initiated, ...
    ...
    cl.close()   # drains the queues, delivers what is due, joins every thread

Each module's docstring gives its concurrency argument (what each lock protects, the lock order,
why the counts are right), written so that it holds without the GIL.  Every lock, condition and
thread comes from a ``conq.impl.scheduling`` scheduler (``REAL`` by default), so the same code runs
under the seeded ``DeterministicScheduler`` in the tests.
"""

from conq.impl.recovery_deferral.config import ConcurrentListenerConfig
from conq.impl.recovery_deferral.demux import (
    ListenerClosed,
    QueueFull,
    ShutdownTimeout,
    TaskPool,
)
from conq.impl.recovery_deferral.events import (
    NONE_CONTEXT,
    UP_STATUSES,
    ErrorEvent,
    FeedEvent,
    RecoveryContext,
    context_of,
    is_up_status,
    queue_index,
)
from conq.impl.recovery_deferral.feed_listener import (
    ConcurrentFeedListener,
    SerialFeedListener,
)
from conq.impl.recovery_deferral.global_listener import (
    ConcurrentGlobalEventsListener,
    DeferredUp,
    PassThroughGlobalEventsListener,
)
from conq.impl.recovery_deferral.listener import ConcurrentListener
from conq.impl.recovery_deferral.tracker import ContextCounts, TaskLifecycleTracker

__all__ = [
    "NONE_CONTEXT",
    "UP_STATUSES",
    "ConcurrentFeedListener",
    "ConcurrentGlobalEventsListener",
    "ConcurrentListener",
    "ConcurrentListenerConfig",
    "ContextCounts",
    "DeferredUp",
    "ErrorEvent",
    "FeedEvent",
    "ListenerClosed",
    "PassThroughGlobalEventsListener",
    "QueueFull",
    "RecoveryContext",
    "SerialFeedListener",
    "ShutdownTimeout",
    "TaskLifecycleTracker",
    "TaskPool",
    "context_of",
    "is_up_status",
    "queue_index",
]
