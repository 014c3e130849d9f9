"""The ordered-consumption reference's public methods: which engines reach them, and why the others
are outside the model (issue 32; the mechanism: ``conq.conformance.reach``)."""

from __future__ import annotations

from typing import Any

IMPLEMENTATION = "conq.impl.ordered_consumption"


def _call_level() -> None:
    """The explorer's and the random engine's driver: walks on every engine configuration, and the
    golden corpus (the shortest sequence ending with each call of every configuration)."""
    from conq.conformance.reach import walk_configs
    from conq.conformance.suite import run_suite

    from . import mutants
    from .build_corpus import CORPUS

    walk_configs(lambda k: mutants._checker(k)[0], range(len(mutants.TRACE_CONFIGS)), range(6))
    run_suite("ordered-consumption", traces=0, corpus=CORPUS)


ENGINES: dict[str, Any] = {"call level (explorer, random)": _call_level}

_TRANSPORT = ("a wire transport of the same broker calls (the model has no transport: the calls it checks are the "
              "broker's own, reached in process); tested by tests/impl/ordered_consumption/test_server.py and "
              "test_grpc_front.py")
_UPSTREAM = ("the gRPC face the real RocketMQ Python client talks to: reached by the upstream engine "
             "(conformance/ordered_consumption/upstream, 'conq upstream rocketmq-python', which needs that client), "
             "not by an in-process driver; tests/impl/ordered_consumption/test_grpc_front.py")
_OBSERVE = ("observation only (statistics and state read by tests, benchmarks and the stress workload's checks): "
            "it changes nothing the model speaks of; the driver reads the same state where its snapshot needs it")
_CLOCK = ("time: the drivers' clocks stand still and move only at the model's events (DriverClock); the real and "
          "manual clocks serve applications, workloads and tests (tests/impl/ordered_consumption/test_broker.py)")
_WORKLOAD = "the throughput and soak workloads (bench/, tests/impl/ordered_consumption/test_stress.py), not a client path"
_TXN = ("the end of a transaction (commit / rollback): seed 001 speaks of a transactional message's attempts only "
        "(特别地), which the model checks; the two-phase end is outside its flows (tests/impl/ordered_consumption/"
        "test_producer.py)")

OUTSIDE: dict[str, str] = {
    "server.py:*": _TRANSPORT,
    "grpc_front.py:*": _UPSTREAM,
    "workload.py:*": _WORKLOAD,
    "clock.py:RealClock.*": _CLOCK,
    "clock.py:ManualClock.*": _CLOCK,
    "broker.py:Broker.dead_letters": _OBSERVE,
    "broker.py:Broker.group_stats": _OBSERVE,
    "broker.py:Broker.running": _OBSERVE,
    "broker.py:Broker.unsettled": _OBSERVE,
    "broker.py:Broker.end_transaction": _TXN,
    "faults.py:InProcessChannel.end_transaction": _TXN,
    "producer.py:Transaction.commit": _TXN,
    "producer.py:Transaction.rollback": _TXN,
    "producer.py:Producer.refresh_route": ("a route change is an environment event the model leaves out (its producer "
                                           "fetches the route once, or finds it cached: seed steps 1-3); "
                                           "tests/impl/ordered_consumption/test_producer.py"),
    "producer.py:Producer.cached_route": _OBSERVE,
    "faults.py:FaultPlan.decide": ("the seeded fault plan's draw: the conformance driver names each answer instead "
                                   "(GatedChannel._decide); used by the stress workload and tests/impl/"
                                   "ordered_consumption/test_faults.py"),
    "faults.py:default_fault_plan": _WORKLOAD,
    "process_queue.py:OutcomeMemo.clear": ("the per-queue variant's drop (memo_survives_drop=False), the model's "
                                           "push-fifo-memo-per-queue, which the reference does not run by default"),
    "process_queue.py:OutcomeMemo.of_queue": _OBSERVE,
    "process_queue.py:ProcessQueue.batch_size": _OBSERVE,
    "process_queue.py:ProcessQueue.cached": _OBSERVE,
    "process_queue.py:ProcessQueue.idle": _OBSERVE,
    "process_queue.py:ProcessQueue.inflight": _OBSERVE,
    "process_queue.py:ProcessQueue.is_full": _OBSERVE,
    "process_queue.py:ProcessQueue.memo": _OBSERVE,
    "process_queue.py:ProcessQueue.waiting": _OBSERVE,
    "push_consumer.py:PushConsumer.all_process_queues": _OBSERVE,
    "push_consumer.py:PushConsumer.process_queue": _OBSERVE,
    "push_consumer.py:PushConsumer.remembered_outcomes": _OBSERVE,
    "push_consumer.py:PushConsumer.snapshot_stats": _OBSERVE,
    "protocol.py:describe": _OBSERVE,
    "protocol.py:ReceivedMessage.with_handle": "a helper of the transports (a message rebuilt with its new handle)",
    "protocol.py:RetryPolicy.immediate": ("a retry policy without delays, for workloads and tests; the driver's "
                                          "policy has the model's delays"),
}
