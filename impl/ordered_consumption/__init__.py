"""conq.impl.ordered_consumption -- seed 001's RocketMQ thin client and the broker it talks to.

Real, concurrent code (independent of ``conq.model``; the model's reference configuration is the
specification of the client's behaviour, spec/ordered-consumption.md):

* ``protocol``        -- status codes (``apache.rocketmq.v2.Code``), errors, messages, routes, retry policies.
* ``clock``           -- the injectable clock (``RealClock``, ``ManualClock``) and cancel tokens.
* ``broker``          -- the in-process broker core: topics, queues, routes, consumer groups, receipt
                         handles, invisible time that expires, attempts, dead-letter queue, FIFO group
                         gate, delay and transactional messages, throttling, queue assignment, start/stop.
* ``faults``          -- the in-process transport (``InProcessChannel``) with seeded fault injection of
                         every answer the server can give.
* ``producer``        -- seed 001 "Producer" (steps 1-7, transactional single attempt, throttle back-off).
* ``process_queue``   -- the push consumer's per-queue cache and lock, and the FIFO outcome memo
                         (``OutcomeMemo``, kept per consumer so that it survives a rebalance).
* ``push_consumer``   -- seed 001 "Push consumer": receive loop, dispatcher, standard and FIFO
                         consumption, consumption thread pool, rebalance.  Its docstring lists the
                         reference choices where the seed cannot terminate (C1-C5).
* ``simple_consumer`` -- seed 001 "Simple consumer": one request per call, no retry.
* ``server``          -- the broker as a real server (newline-delimited JSON over TCP on the loopback
                         interface, ``BrokerServer``) and the client transport ``TcpChannel``, which
                         the clients take in place of ``InProcessChannel``; ``conq broker serve``.
* ``workload``        -- the stress and throughput workloads and their checks (tests, ``bench/oc_*``).

Every module's docstring states its concurrency argument (what each lock protects, the lock order).
All locks, conditions and threads come from a ``conq.impl.scheduling`` scheduler (``sched=``), so the
same code runs on real threads or under the seeded ``DeterministicScheduler``.
"""

from conq.impl.ordered_consumption.broker import Broker, DeadLetter
from conq.impl.ordered_consumption.clock import Cancel, ManualClock, RealClock
from conq.impl.ordered_consumption.faults import FaultPlan, InProcessChannel
from conq.impl.ordered_consumption.process_queue import OutcomeMemo, ProcessQueue
from conq.impl.ordered_consumption.producer import Producer, Transaction
from conq.impl.ordered_consumption.protocol import (
    Code,
    ConsumeResult,
    GroupSettings,
    Message,
    MessageQueue,
    MessageType,
    Permission,
    ReceivedMessage,
    RetryPolicy,
    RpcError,
    SendError,
    SendReceipt,
    Transport,
)
from conq.impl.ordered_consumption.push_consumer import PushConsumer
from conq.impl.ordered_consumption.server import BrokerServer, TcpChannel
from conq.impl.ordered_consumption.simple_consumer import SimpleConsumer

__all__ = [
    "Broker",
    "BrokerServer",
    "Cancel",
    "Code",
    "ConsumeResult",
    "DeadLetter",
    "FaultPlan",
    "GroupSettings",
    "InProcessChannel",
    "ManualClock",
    "Message",
    "MessageQueue",
    "MessageType",
    "OutcomeMemo",
    "Permission",
    "ProcessQueue",
    "Producer",
    "PushConsumer",
    "RealClock",
    "ReceivedMessage",
    "RetryPolicy",
    "RpcError",
    "SendError",
    "SendReceipt",
    "SimpleConsumer",
    "TcpChannel",
    "Transaction",
    "Transport",
]
