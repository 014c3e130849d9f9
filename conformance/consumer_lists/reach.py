"""The consumer-lists reference's public methods: which engines reach them, and why the others are
outside the model (issue 32; the mechanism: ``conq.conformance.reach``)."""

from __future__ import annotations

from typing import Any

IMPLEMENTATION = "conq.impl.consumer_lists"


def _call_level() -> None:
    """The explorer's, the random and the hypothesis engine's driver: walks on every engine
    configuration, the other actors' included, seeds 0-3 (every way the driver performs a delete)."""
    from conq.conformance.reach import walk_configs

    from . import mutants

    walk_configs(lambda cfg: mutants._checker(cfg)[0], mutants.TRACE_CONFIGS + tuple(mutants.ACTOR_CONFIGS), range(4))


def _thread_level() -> None:
    from conq.conformance.adapters import InProcess

    from .thread_steps import THREAD_CONFIGS, ThreadStepsDriver, check_threads

    for cfg in THREAD_CONFIGS:
        check_threads(InProcess(ThreadStepsDriver), cfg, walks=2, length=30)


def _races() -> None:
    from .races import SCENARIOS, explore_races

    explore_races(len(SCENARIOS))


def _pct() -> None:
    from .pct import PROGRAMS, explore_pct

    explore_pct(len(PROGRAMS), minimise=False)


def _schedules() -> None:
    from conq.impl.consumer_lists.workload import explore_schedules

    explore_schedules(3, 3)


def _linearizability() -> None:
    from conq.conformance.linearizability import check_node_list, check_queue
    from conq.impl.consumer_lists.node_list import NodeList
    from conq.impl.consumer_lists.queue import Queue

    check_node_list(lambda: NodeList(scavenge_threshold=1), rounds=2, seed=3)
    check_queue(lambda: Queue(record_events=False), rounds=2, seed=5)


ENGINES: dict[str, Any] = {
    "call level (explorer, random, hypothesis)": _call_level,
    "thread-steps": _thread_level,
    "races": _races,
    "pct": _pct,
    "schedules": _schedules,
    "linearizability": _linearizability,
}

_OBSERVE = ("observation only (counts, look-ups and invariant checks read by tests, benchmarks and the "
            "workloads' checks): it changes nothing the model speaks of")
_SOAK = ("the real-thread throughput and soak runs (bench/cl_all_actors_stress.py, the SOAK_ENGINES, "
         "tests/impl/consumer_lists/test_stress.py): random timing, no engine of the kill matrix")
_REPORT = ("how the schedules engine reports and replays a failure it found (a minimised schedule, its "
           "interleaving, the call that replays it): reached when a mutant fails, not on the reference")
_FAILED_SEND = ("the delivery chain's failure policy (a send that fails: released, or dead-lettered after "
                "max_delivery_failures, DEV-030): the model has no failed send -- a delivery the consumer does not "
                "keep is the model's release; tests/impl/consumer_lists/test_faults.py and the workload's faults")

OUTSIDE: dict[str, str] = {
    "actors_workload.py:*": _SOAK,
    "workload.py:WorkloadResult.rate": _SOAK,
    "workload.py:ScheduleExploration.*": _REPORT,
    "workload.py:ScheduleFailure.*": _REPORT,
    "workload.py:replay_pct": _REPORT,
    "workload.py:replay_schedule": _REPORT,
    "housekeeping.py:Housekeeping.start": ("the housekeeping thread's own loop on real time: the engines run its "
                                           "passes (run_once -> check_message_status) at the model's steps"),
    "housekeeping.py:Housekeeping.stop": "see Housekeeping.start",
    "delivery.py:DeliveryFailure.*": _FAILED_SEND,
    "queue.py:Queue.delivery_failed": _FAILED_SEND,
    "queue.py:Queue.release_owned": _FAILED_SEND,
    "delivery.py:Connection.close": ("closing a connection (the workloads' end and tests): the model's consumers "
                                     "leave through remove_consumer, which the drivers call"),
    "delivery.py:Connection.has_pending_work": _OBSERVE,
    "queue.py:Queue.hold": ("an available message held back again: upstream holds an entry from its arrival until "
                            "its delivery time (the model's enqueue_held, then unhold), never after it was "
                            "available; tests/impl/consumer_lists/test_queue.py"),
    "queue.py:QueueConsumer.set_credit": ("a credit window set outright (AMQP 1.0 flow): the model grants credit "
                                          "one unit at a time (the drivers' add_credit); tests"),
    "queue.py:Queue.consumer": _OBSERVE,
    "queue.py:Queue.payload": _OBSERVE,
    "queue.py:Queue.check_invariants": _OBSERVE,
    "consumer_manager.py:QueueConsumerManager.count": _OBSERVE,
    "consumer_manager.py:QueueConsumerManager.notified_count": _OBSERVE,
    "consumer_manager.py:QueueConsumerManager.non_acquiring_consumers": _OBSERVE,
    "consumer_manager.py:QueueConsumerManager.desired_at_higher_priority": _OBSERVE,
    "node_list.py:NodeList.entries": _OBSERVE,
    "node_list.py:NodeList.first": _OBSERVE,
    "node_list.py:NodeList.physical_length": _OBSERVE,
}
