"""The recovery-deferral reference's public methods: which engines reach them, and why the others are
outside the model (issue 32; the mechanism: ``conq.conformance.reach``)."""

from __future__ import annotations

from typing import Any

IMPLEMENTATION = "conq.impl.recovery_deferral"


def _call_level() -> None:
    """The explorer's, the random engine's and the hypothesis engine's driver: walks on every engine
    configuration, seeds 0-7 (every event-id space of the driver, twice)."""
    from conq.conformance.reach import walk_configs

    from . import mutants

    walk_configs(lambda cfg: mutants._checker(cfg)[0], mutants.TRACE_CONFIGS, range(8))


def _thread_level() -> None:
    from conq.conformance.adapters import InProcess

    from .thread_steps import THREAD_CONFIGS, ThreadStepsDriver, check_threads

    for cfg in THREAD_CONFIGS:
        check_threads(InProcess(ThreadStepsDriver), cfg, walks=3, length=30)


def _schedules_and_journal() -> None:
    """One seeded interleaving of every script of the schedules engine, one PCT run of two journal
    scenarios (every listener thread under the deterministic scheduler, the threaded mode)."""
    from . import mutants

    for label, script in mutants._scripts():
        mutants.schedule_run(0, script, "pct")
    for k in range(2):
        mutants.journal_search(k).run(0)


ENGINES: dict[str, Any] = {
    "call level (explorer, random, hypothesis)": _call_level,
    "thread level": _thread_level,
    "schedules, journal": _schedules_and_journal,
}

_OBSERVE = ("observation only (statistics, thread names and idents read by tests and benchmarks): it changes "
            "nothing the model speaks of")
_PROTOCOL = ("an interface (typing.Protocol) the customer's listeners implement: the wrapped listeners call the "
             "customer's own methods")

_SOAK = ("the feed simulator's real-thread runner and the journal's waiting helpers: the component tests "
         "(tests/impl/recovery_deferral/test_deferral_component.py) and the benchmarks' soak runs; the engines run "
         "the same scripts under the deterministic scheduler (FeedSimulator.run)")

OUTSIDE: dict[str, str] = {
    "feed.py:FeedSimulator.start": _SOAK,
    "feed.py:FeedSimulator.join": _SOAK,
    "feed.py:Journal.wait_for": _SOAK,
    "feed.py:Journal.count": _SOAK,
    "feed.py:run_scenario": _SOAK,
    "tracker.py:TaskLifecycleTracker.task_withdrawn": (
        "the undo of a count for a hand-off that was not placed (the drop policy, a full queue's raise, or the "
        "listener closed while the feed thread waited for room): the reference blocks the feed thread (DEV-001), so "
        "a model run never withdraws; tests/impl/recovery_deferral/test_tracker.py and test_feed_listener.py"),
    "demux.py:TaskPool.queue_count": _OBSERVE,
    "demux.py:TaskPool.stats": _OBSERVE,
    "demux.py:TaskPool.worker_idents": _OBSERVE,
    "feed_listener.py:ConcurrentFeedListener.alive_threads": _OBSERVE,
    "feed_listener.py:ConcurrentFeedListener.stats": _OBSERVE,
    "feed_listener.py:ConcurrentFeedListener.worker_idents": _OBSERVE,
    "feed_listener.py:SerialFeedListener.alive_threads": _OBSERVE,
    "feed_listener.py:SerialFeedListener.stats": _OBSERVE,
    "feed_listener.py:SerialFeedListener.worker_idents": _OBSERVE,
    "global_listener.py:ConcurrentGlobalEventsListener.alive_threads": _OBSERVE,
    "global_listener.py:ConcurrentGlobalEventsListener.stats": _OBSERVE,
    "global_listener.py:ConcurrentGlobalEventsListener.thread_ident": _OBSERVE,
    "global_listener.py:PassThroughGlobalEventsListener.alive_threads": _OBSERVE,
    "global_listener.py:PassThroughGlobalEventsListener.customer_errors": _OBSERVE,
    "listener.py:ConcurrentListener.alive_threads": _OBSERVE,
    "tracker.py:TaskLifecycleTracker.counts": _OBSERVE,
    "feed_listener.py:OddsFeedListener.*": _PROTOCOL,
    "global_listener.py:GlobalEventsListener.*": _PROTOCOL,
}
