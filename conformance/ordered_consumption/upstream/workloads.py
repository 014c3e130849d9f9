"""Workloads for the upstream RocketMQ Python client: what the broker holds, what the clients do.

A ``Workload`` names the broker's topics and consumer groups (created on the project's broker before
the face starts), the clients the worker process runs (``worker.py``), the listener's decisions (which
bodies fail: ``always``, the first ``first`` calls of ``flaky`` ones, or a seeded ``rate_permille``)
and the seeded fault plan (``faults.FaultPlan`` rates per RPC of the broker core).  Counts, never
durations, decide a verdict: how many messages, which fail, the fault probabilities.

Named workloads (``WORKLOADS``):

``standard``  producer -> topic T (2 queues); push consumer (standard, shared assignment) in group
              PS: one flaky body (fails once, redelivered with attempt 2), one always failing body
              (the server dead-letters it at max attempts); simple consumer in group SC: one flaky body.
``fifo``      producer -> FIFO topic F (2 queues), two message groups; push consumer in FIFO group PF:
              one flaky body (local re-consumption), one always failing body (forwarded to the DLQ by
              the client); two push consumers sharing FIFO group PF2 (order across consumers rests on
              the server's gate).
``all``       both in one run (one worker process).
``faults``    ``all`` under seeded faults on send, receive, ack, change-invisible, DLQ forward and
              assignment queries (``FAULT_RATES``): lost answers, timeouts, unavailability, throttling,
              internal errors, invalid or expired receipt handles.
``fifo-handoff``     the shared FIFO group PF2 alone, scripted so that a PF2 message is delivered again
              to the *other* consumer while the first one still holds it (issue 19): below.
``fifo-join-leave``  a FIFO group under exclusive assignment whose second consumer joins mid-run and
              whose first one leaves mid-run, each change handing a queue over while a message of it
              is in consumption (issue 19): below.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

__all__ = ["FAULT_RATES", "WORKLOADS", "GroupSpec", "TopicSpec", "Workload", "fifo_part", "merge", "standard_part",
           "workload", "workload_list"]


@dataclass(frozen=True)
class TopicSpec:
    name: str
    queues: int = 2
    fifo: bool = False
    transactional: bool = False


@dataclass(frozen=True)
class GroupSpec:
    name: str
    fifo: bool = False
    max_attempts: int = 3
    durations: tuple = (0.0,)  # retry-policy delays (seconds; the client reads whole seconds)
    assignment: str = "shared"


@dataclass(frozen=True)
class ModelSize:
    """A workload the model can hold: its named configuration, the bodies in the model's message
    order, the consumer group whose run is validated (``observed.py``)."""

    config_name: str
    bodies: tuple
    group: str
    #: fields over the named configuration (the header's ``config``): the broker events this workload
    #: makes happen (``rebalance``, ``expiry_while_held``)
    overrides: dict = field(default_factory=dict)
    #: (variant, fields over ``overrides``) tried, in order, when the configuration rejects the log: the
    #: first that accepts it names the upstream choice the divergence is (``runner`` records it)
    variants: tuple = ()


@dataclass(frozen=True)
class Workload:
    name: str
    topics: tuple
    groups: tuple
    producers: tuple = ()
    push: tuple = ()
    simple: tuple = ()
    faults: dict = field(default_factory=dict)
    max_delivery_faults: int | None = 1
    # Long enough that no invisible time runs out in a fault-free run on a loaded machine (the face does
    # not auto-renew); the ``faults`` workload shortens it so that lost receives come back soon.
    auto_renew_invisible: float = 30.0
    model_size: ModelSize | None = None
    #: the broker's side of the run, step by step, each step waiting for a state (``runner._Script``):
    #: ``{"on": "hold", "body", "call"}`` (the listener holds that call), ``{"on": "listener", "body",
    #: "attempt"}``, ``{"do": "unassign", "queue"}`` / ``{"do": "assign"}`` (the broker changes the
    #: consumer's assignment; done once the client has been answered the new one and, for a queue
    #: taken away, has no receive on it left in flight), ``{"do": "expire", "body"}`` (the delivery's
    #: invisible time runs out now), ``{"do": "release", "body", "call"}``
    script: tuple = ()
    #: the face renews auto-renew deliveries as the proxy does (``grpc_front.py``, "Auto-renew")
    renew: bool = False

    def group(self, name: str) -> GroupSpec:
        return next(g for g in self.groups if g.name == name)

    def subscriptions(self) -> list[tuple[str, str, str]]:
        """(consumer group, topic, role) of every consumer."""
        out = []
        for c in self.push:
            out += [(c["group"], t, "push") for t in c["topics"]]
        for c in self.simple:
            out += [(c["group"], t, "simple") for t in c["topics"]]
        return sorted(set(out))

    def describe(self) -> dict:
        """The workload as a JSON value for a trace header (no floats: per-mille and milliseconds)."""
        return {
            "workload": self.name,
            "topics": [[t.name, t.queues, "fifo" if t.fifo else "transaction" if t.transactional else "normal"]
                       for t in self.topics],
            "groups": [[g.name, g.fifo, g.max_attempts, [int(d * 1000) for d in g.durations], g.assignment]
                       for g in self.groups],
            "producers": [[p["name"], len(p["messages"])] for p in self.producers],
            "push": [[c["name"], c["group"], c["topics"]] for c in self.push],
            "simple": [[c["name"], c["group"], c["topics"]] for c in self.simple],
            "faults_permille": {rpc: {k: int(round(p * 1000)) for k, p in kinds.items()}
                                for rpc, kinds in sorted(self.faults.items())},
            "max_delivery_faults": self.max_delivery_faults,
            "auto_renew_invisible_ms": int(self.auto_renew_invisible * 1000),
            "renew": self.renew,
            "script": [dict(x) for x in self.script],
        }


def standard_part(n: int = 6, invisible: int = 30) -> dict:
    bodies = [f"T-{i}" for i in range(n)]
    return {
        "topics": (TopicSpec("T", 2),),
        "groups": (GroupSpec("PS", max_attempts=3), GroupSpec("SC", max_attempts=3)),
        "producers": ({"name": "p-std", "topics": ["T"], "messages": [{"topic": "T", "body": b} for b in bodies]},),
        "push": ({"name": "c-std", "group": "PS", "topics": ["T"], "threads": 4,
                  "fail": {"flaky": ["T-1"], "first": 1, "always": ["T-4"]}},),
        # batch 1: the model's simple receive brings one message (model.py ``_s_rpc``), so the unit SC
        # is validated (observed.py, "the simple consumer (SC)")
        "simple": ({"name": "s-1", "group": "SC", "topics": ["T"], "batch": 1, "invisible": invisible, "await": 1,
                    "fail": {"flaky": ["T-2"], "first": 1}},),
    }


def fifo_part(per_group: int = 4) -> dict:
    msgs = [{"topic": "F", "body": f"F-g{g}-{i}", "group": f"g{g}"} for i in range(per_group) for g in range(2)]
    return {
        "topics": (TopicSpec("F", 2, fifo=True),),
        "groups": (GroupSpec("PF", fifo=True, max_attempts=2), GroupSpec("PF2", fifo=True, max_attempts=2)),
        "producers": ({"name": "p-fifo", "topics": ["F"], "messages": msgs},),
        "push": ({"name": "c-fifo", "group": "PF", "topics": ["F"], "threads": 4,
                  "fail": {"flaky": ["F-g0-1"], "first": 1, "always": ["F-g1-2"]}},
                 {"name": "c-fifo2a", "group": "PF2", "topics": ["F"], "threads": 2},
                 {"name": "c-fifo2b", "group": "PF2", "topics": ["F"], "threads": 2}),
        "simple": (),
    }


def merge(*parts: dict) -> dict:
    out: dict = {"topics": (), "groups": (), "producers": (), "push": (), "simple": ()}
    for p in parts:
        for k in out:
            out[k] = out[k] + tuple(p[k])
    return out


#: the seeded fault plan of the ``faults`` workload (probabilities per RPC of the broker core)
FAULT_RATES = {
    "send_message": {"unavailable": 0.04, "lost": 0.05, "internal": 0.04},
    "receive_message": {"unavailable": 0.03, "lost": 0.03, "throttled": 0.03, "internal": 0.03},
    "ack_message": {"lost": 0.06, "invalid-handle": 0.05, "internal": 0.05, "unavailable": 0.03},
    "change_invisible_duration": {"lost": 0.05, "invalid-handle": 0.05, "internal": 0.05},
    "forward_to_dlq": {"lost": 0.1, "internal": 0.1},
    "query_assignment": {"internal": 0.05},
}

WORKLOADS: dict[str, Workload] = {
    "standard": Workload("standard", **standard_part()),
    "fifo": Workload("fifo", **fifo_part()),
    "all": Workload("all", **merge(standard_part(), fifo_part())),
}
def _group_on_queue(queue: int, queues: int) -> str:
    """A message-group name the face sends to ``queue`` (the proxy's hash, grpc_front._pick_queue)."""
    return next(g for g in (f"g{i}" for i in range(1000))
                if int.from_bytes(hashlib.sha256(g.encode()).digest()[:8], "big") % queues == queue)


def model_push_fifo(name: str, fail: dict, faults: dict | None = None, *, script: tuple = (),
                    overrides: dict | None = None, variants: tuple = ()) -> Workload:
    """The consumer side of configuration ``push-fifo-upstream``: messages A (1 byte) and B (2 bytes)
    of one message group on queue 0 of 2, already on the server when the consumer starts; cache
    thresholds 4 messages / 4 bytes, max attempts 2, re-consumption at once (no retry delay).
    ``script`` / ``overrides``: broker events (reassignment, expiry) and the model switches they need."""
    g = _group_on_queue(0, 2)
    return Workload(
        name, topics=(TopicSpec("M", 2, fifo=True),),
        groups=(GroupSpec("MF", fifo=True, max_attempts=2, durations=(0.0,)),),
        producers=({"name": "p-model", "topics": ["M"], "produce_first": True,
                    "messages": [{"topic": "M", "body": "A", "group": g}, {"topic": "M", "body": "BB", "group": g}]},),
        push=({"name": "c-model", "group": "MF", "topics": ["M"], "threads": 2, "max_cache_count": 4,
               "max_cache_bytes": 4, "fail": fail},),
        faults=faults or {}, max_delivery_faults=None, script=script,
        model_size=ModelSize("push-fifo-upstream", ("A", "BB"), "MF", dict(overrides or {}), variants))


#: server faults the configuration push-fifo-upstream has (``server_faults``: lost answers, errors,
#: throttling; no expiry while held, so no invalid-handle faults)
MODEL_FAULT_RATES = {
    "ack_message": {"lost": 0.2, "internal": 0.2},
    "forward_to_dlq": {"lost": 0.2, "internal": 0.2},
    "receive_message": {"internal": 0.2, "throttled": 0.1},
}

WORKLOADS["model-push-fifo"] = model_push_fifo("model-push-fifo", {})
WORKLOADS["model-push-fifo-dlq"] = model_push_fifo("model-push-fifo-dlq", {"always": ["BB"]})
WORKLOADS["model-push-fifo-faults"] = model_push_fifo("model-push-fifo-faults", {"always": ["BB"]}, MODEL_FAULT_RATES)
#: the upstream choices the seed leaves open that a model-sized log may show, as fields over the
#: configuration: the model's variant of that name (spec/ordered-consumption.md, "Configurations")
NO_MEMO = ("push-fifo-no-memo (no remembered outcome, DEV-021)", {"remember_outcome": False})

# Reassignment mid-run: A is in the listener when the broker takes queue 0 away from the consumer;
# the client must drop the process queue and stop receiving from it; A's consumption finishes on the
# dropped process queue (its ack is still valid: a reassignment does not end a delivery); queue 0
# is given back and B is received by the new process queue.
WORKLOADS["model-push-fifo-rebalance"] = model_push_fifo(
    "model-push-fifo-rebalance", {"hold": {"A": [1]}},
    script=({"on": "hold", "body": "A", "call": 1}, {"do": "unassign", "queue": 0},
            {"do": "release", "body": "A", "call": 1}, {"do": "assign"}),
    overrides={"rebalance": True})
# Invisible time running out mid-consumption: B is in the listener, its queue is taken away (so the
# redelivery cannot reach the client while B is held), B's invisible time runs out, the listener
# returns OK and the ack meets an invalid handle (the client gives up: DEV-020); queue 0 is given
# back and B is delivered again (attempt 2).  The reference remembers the outcome and acks the
# redelivery without consuming it (DEV-021); upstream consumes it again: variant push-fifo-no-memo.
WORKLOADS["model-push-fifo-expiry"] = model_push_fifo(
    "model-push-fifo-expiry", {"hold": {"BB": [1]}},
    script=({"on": "hold", "body": "BB", "call": 1}, {"do": "unassign", "queue": 0}, {"do": "expire", "body": "BB"},
            {"do": "release", "body": "BB", "call": 1}, {"do": "assign"}),
    overrides={"rebalance": True, "expiry_while_held": True}, variants=(NO_MEMO,))
# The same expiry with the queue kept: the redelivery (attempt 2) is deliverable at once, but B's
# 2 bytes fill the process queue's byte threshold (4 bytes over 2 process queues), so the receive
# loop waits until the held copy is evicted (after its ack is refused) -- the model's cache says the
# same, which is why it can keep one copy per message in consumption.
WORKLOADS["model-push-fifo-expiry-kept"] = model_push_fifo(
    "model-push-fifo-expiry-kept", {"hold": {"BB": [1]}},
    script=({"on": "hold", "body": "BB", "call": 1}, {"do": "expire", "body": "BB"},
            {"do": "release", "body": "BB", "call": 1}),
    overrides={"expiry_while_held": True}, variants=(NO_MEMO,))

# Auto-renew (the face renews as the proxy does): B is held in the listener for three renewals of
# its 2 s invisible time (renewed 1 s ahead, scanned every 0.5 s), far beyond it; the ack is valid.
WORKLOADS["model-push-fifo-renewed"] = replace(model_push_fifo(
    "model-push-fifo-renewed", {"hold": {"BB": [1]}},
    script=({"on": "hold", "body": "BB", "call": 1}, {"on": "renewed", "count": 3},
            {"do": "release", "body": "BB", "call": 1})), renew=True, auto_renew_invisible=2.0)

def model_simple(name: str, fail: dict, faults: dict | None = None, invisible: int = 30) -> Workload:
    """The simple consumer of configuration ``simple`` (seed 001 "Simple consumer"): messages A (1 byte)
    and B (2 bytes) on one queue, already on the server when the consumer starts, max attempts 2; the
    application receives one message per call and acks it, or changes its invisible duration to 0 when
    the workload fails it (worker.py).  One queue, not the configuration's two: the Python client
    asks a random queue per receive (observed.py, "the simple consumer (SC)"), so on two queues the
    model's round-robin rejects almost every run for that alone -- the two-queue case is the
    ``standard`` / ``faults`` unit SC.  Sizes (fields over ``simple``) come from the run's copies."""
    return Workload(
        name, topics=(TopicSpec("MS", 1),), groups=(GroupSpec("MSC", max_attempts=2),),
        producers=({"name": "p-model", "topics": ["MS"], "produce_first": True,
                    "messages": [{"topic": "MS", "body": "A"}, {"topic": "MS", "body": "BB"}]},),
        simple=({"name": "s-model", "group": "MSC", "topics": ["MS"], "batch": 1, "invisible": invisible, "await": 1,
                 "fail": fail},),
        faults=faults or {}, max_delivery_faults=None,
        model_size=ModelSize("simple", ("A", "BB"), "MSC", {"queues": 1, "msg_queue": [0, 0], "msg_size": [1, 2],
                                                             "max_attempts": 2, "expiry_while_held": True,
                                                             "server_faults": bool(faults), "simple_threads": 1}))


WORKLOADS["model-simple"] = model_simple("model-simple", {"flaky": ["BB"], "first": 1})
#: server faults of configuration simple's ``server_faults`` (failed and throttled receives, lost and
#: failed settles); no lost receive (its delivery would wait out the invisible time unseen), and a
#: short invisible time so that a copy whose settle failed comes back soon (``expiry_while_held``)
MODEL_SIMPLE_FAULT_RATES = {
    "receive_message": {"internal": 0.2, "throttled": 0.1},
    "ack_message": {"lost": 0.2, "internal": 0.2},
    "change_invisible_duration": {"lost": 0.2, "internal": 0.2},
}
WORKLOADS["model-simple-faults"] = model_simple("model-simple-faults", {"flaky": ["BB"], "first": 1},
                                                MODEL_SIMPLE_FAULT_RATES, invisible=2)

WORKLOADS["faults"] = Workload("faults", **merge(standard_part(invisible=2), fifo_part()), faults=FAULT_RATES,
                                auto_renew_invisible=2.0)


def fifo_handoff(name: str = "fifo-handoff") -> Workload:
    """The shared FIFO group PF2 of ``fifo`` (two push consumers, shared assignment, message groups g0
    and g1 of 4 messages each, both hashing to queue 0) with a script that redelivers a PF2 message to
    the other consumer, deterministically for every seed (no fault plan: nothing is left to a race):

    1. F-g0-1 is held in the listener of whichever consumer got it (the *holder*; both carry the hold,
       the worker counts listener calls per group, so only the first call of F-g0-1 is held);
    2. queue 0 is taken away from the holder (the broker pins its assignment to queue 1; done once the
       holder was answered it and has no receive of queue 0 in flight), so that only the other
       consumer receives queue 0 from now on;
    3. F-g0-1's invisible time runs out now (``expire``): the broker makes it deliverable again, and
       the other consumer receives it (attempt 2) while the holder still consumes its copy;
    4. once the other consumer's listener has consumed it (attempt 2), the holder's call returns: its
       ack carries the first delivery's handle and is refused (INVALID_RECEIPT_HANDLE; the client gives
       up, DEV-020);
    5. queue 0 is given back to the holder.

    The broker's gate keeps g0's order across the two consumers (F-g0-2 only after the other
    consumer's ack of F-g0-1).  The invisible time is the default 30 s, so no other expiry comes in a
    run of a few seconds."""
    part = fifo_part()
    hold = {"hold": {"F-g0-1": [1]}}
    push = tuple(dict(c, fail=hold) for c in part["push"] if c["group"] == "PF2")
    return Workload(
        name, topics=part["topics"], groups=tuple(g for g in part["groups"] if g.name == "PF2"),
        producers=part["producers"], push=push,
        script=({"on": "hold", "body": "F-g0-1", "call": 1},
                {"do": "unassign", "queue": 0, "consumer": "holder"},
                {"do": "expire", "body": "F-g0-1", "consumer": "holder"},
                {"on": "listener", "body": "F-g0-1", "attempt": 2},
                {"do": "release", "body": "F-g0-1", "call": 1},
                {"do": "assign", "consumer": "holder"}))


WORKLOADS["fifo-handoff"] = fifo_handoff()


def fifo_join_leave(name: str = "fifo-join-leave", per_group: int = 3) -> Workload:
    """A FIFO group under *exclusive* assignment whose membership changes mid-run (issue 19): topic FX
    (2 queues), message group X0 on queue 0 and X1 on queue 1 (the face's hash, ``_group_on_queue``),
    ``per_group`` messages each; group PX (FIFO, exclusive, max attempts 2); consumer c-x1 from the
    start and c-x2 joining later (``late``).  The broker reassigns on membership (broker.py
    ``query_assignment`` over the live client ids in sorted order; upstream apache/rocketmq
    ``QueryAssignmentProcessor.doLoadBalance``); c-x1's client id sorts first (the client numbers its
    ids in creation order, ``client_id.py``, and c-x2 is created later), so with both live c-x1 holds
    queue 0 and c-x2 queue 1 -- the mapping (observed.py) reads the order from the ids, not from this.

    1. c-x1, alone, holds both queues; X1-1 and X0-1 are held in its listener (one task per message
       group: ``fifo_consumption.py``, so both at once on its two threads);
    2. c-x2 joins; c-x1 is answered an assignment without queue 1 (its process queue of queue 1 is
       dropped, X1-1's consumption goes on there) and c-x2 one with it;
    3. X1-1 is released: c-x1 acks it (the handle is still valid: a reassignment does not end a
       delivery), which opens the gate for X1-2, delivered to c-x2 -- a hand-over of queue 1 with a
       message in consumption;
    4. c-x1 leaves (``shutdown()``: every process queue dropped, the consumption pool drained, then
       NotifyClientTermination) while X0-1 is held; once it has no receive of queue 0 in flight,
       X0-1 is released and acked; after the termination c-x2 is answered both queues and consumes
       the rest of X0 -- a hand-over of queue 0 on leaving."""
    g0, g1 = _group_on_queue(0, 2), _group_on_queue(1, 2)
    msgs = [{"topic": "FX", "body": f"X{q}-{i}", "group": g} for i in range(per_group) for q, g in ((0, g0), (1, g1))]
    hold = {"hold": {"X0-1": [1], "X1-1": [1]}}
    return Workload(
        name, topics=(TopicSpec("FX", 2, fifo=True),),
        groups=(GroupSpec("PX", fifo=True, max_attempts=2, assignment="exclusive"),),
        producers=({"name": "p-x", "topics": ["FX"], "messages": msgs},),
        push=({"name": "c-x1", "group": "PX", "topics": ["FX"], "threads": 2, "fail": hold},
              {"name": "c-x2", "group": "PX", "topics": ["FX"], "threads": 2, "fail": hold, "late": True}),
        script=({"on": "hold", "body": "X1-1", "call": 1},
                {"on": "hold", "body": "X0-1", "call": 1},
                {"do": "join", "consumer": "c-x2"},
                {"on": "assigned", "consumer": "c-x1", "queue": 1, "present": False},
                {"on": "quiet", "consumer": "c-x1", "queue": 1},
                {"on": "assigned", "consumer": "c-x2", "queue": 1, "present": True},
                {"do": "release", "body": "X1-1", "call": 1},
                {"on": "listener", "body": "X1-2", "attempt": 1},
                {"do": "leave", "consumer": "c-x1"},
                {"on": "quiet", "consumer": "c-x1", "queue": 0},
                {"do": "release", "body": "X0-1", "call": 1},
                {"on": "assigned", "consumer": "c-x2", "queue": 0, "present": True}))


WORKLOADS["fifo-join-leave"] = fifo_join_leave()


def workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r} (known: {', '.join(sorted(WORKLOADS))})") from None


def workload_list(spec: str) -> list[Workload]:
    """The workloads a campaign runs (issue 19: coverage across several configurations): a name, a
    comma-separated list, or ``all-model`` (every model-sized workload, in name order)."""
    names: list[str] = []
    for part in (x.strip() for x in spec.split(",")):
        if not part:
            raise ValueError(f"empty workload name in {spec!r}")
        names += sorted(n for n, w in WORKLOADS.items() if w.model_size is not None) if part == "all-model" else [part]
    out = [workload(n) for n in names]
    if len({w.name for w in out}) != len(out):
        raise ValueError(f"a workload named twice in {spec!r}")
    return out
