"""The thin client's simple consumer: seed 001 "Simple consumer".

What it is
----------
Seed 001: the simple consumer exposes the atomic operations receive / acknowledgement / change
invisible time, and the application controls each message's whole life cycle; "所有暴露给客户的接口
都只是远程过程调用的简单封装，不做任何内部重试" -- every exposed operation is a thin wrapper around one
remote call, with no internal retry.  Upstream: ``java/.../impl/consumer/SimpleConsumerImpl.java`` and
``python/rocketmq/v5/consumer/simple_consumer.py`` (REFERENCE.md section 2: receive takes the topics'
queues round-robin, with an explicit invisible duration).

* ``receive(max_messages, invisible_duration)``: one ``receive_message`` request to the next queue in
  round-robin order (long polling up to ``await_duration``); returns the messages (possibly none).
  The queue is taken *before* the request (upstream ``SubscriptionLoadBalancer.takeMessageQueue``:
  ``index.getAndIncrement()`` before ``receiveMessage``), so every receive moves the round-robin on,
  whatever its answer.  The seed says nothing of the order.  Moving on only after an answer
  (the model's rule at issue 14) cannot be implemented: a request that timed out before the server
  took it and one whose answer was lost after the server delivered are both ``REQUEST_TIMEOUT`` to
  the client; and staying on a queue that keeps failing would starve the other queues.
* ``ack(message)``: one ``ack_message`` request.
* ``change_invisible_duration(message, duration)``: one request; returns the message with its new
  receipt handle (the old one is invalid from now on).
* A failed request raises its ``RpcError`` to the caller, after that one request.  The client takes
  no life-cycle action of its own (no automatic ack, no renewal): a message the application does not
  settle comes back when its invisible time is over, and the server dead-letters it after the group's
  maximum number of deliveries.

The route (the queues to take round-robin) is fetched once, by ``start()``, so that each of the three
calls is exactly one request.

Concurrency argument
--------------------
Any number of application threads may call the three operations at once (seed: "并发调用 receive
接口").  ``_lock`` (a leaf) protects only the round-robin index and the started/closed flags; it is
released before the request, so concurrent receives run their long polls in parallel.  Distinct
receives never get the same delivery: the broker hands each deliverable message to one receive
under its queue lock.
"""

from __future__ import annotations

from typing import Any

from conq.impl.ordered_consumption.clock import Cancel
from conq.impl.ordered_consumption.protocol import MessageQueue, ReceivedMessage
from conq.impl.scheduling import REAL

__all__ = ["SimpleConsumer"]


class SimpleConsumer:
    """See the module docstring."""

    def __init__(self, channel: Any, group: str, topic: str, *, client_id: str = "simple-consumer",
                 await_duration: float = 0.0, sched: Any = REAL) -> None:
        self.channel = channel
        self.group = group
        self.topic = topic
        self.client_id = client_id
        self.await_duration = await_duration
        self._lock = sched.lock("simple-consumer")
        self._queues: tuple[MessageQueue, ...] = ()
        self._next = 0
        self._closing = Cancel("simple-consumer")

    def start(self) -> SimpleConsumer:
        route = self.channel.query_route(self.topic)
        readable = tuple(mq for mq in route if mq.permission.readable)
        if not readable:
            raise ValueError(f"{self.topic} has no readable queue")
        with self._lock:
            self._queues = readable
        return self

    def close(self) -> None:
        """Release receives that are long polling (they return what they have, usually nothing)."""
        self._closing.cancel()

    def __enter__(self) -> SimpleConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def receive(self, max_messages: int, invisible_duration: float) -> list[ReceivedMessage]:
        """One receive request to the next queue (round-robin)."""
        with self._lock:
            if not self._queues:
                raise RuntimeError("start() the simple consumer first")
            mq = self._queues[self._next % len(self._queues)]
            self._next += 1
        return self.channel.receive_message(self.group, mq, max_messages, invisible_duration,
                                            self.await_duration, self._closing)

    def ack(self, message: ReceivedMessage) -> None:
        """One ack request."""
        self.channel.ack_message(self.group, message.topic, message.message_id, message.receipt_handle)

    def change_invisible_duration(self, message: ReceivedMessage, duration: float) -> ReceivedMessage:
        """One change-invisible-duration request; the returned message carries the new receipt handle."""
        handle = self.channel.change_invisible_duration(self.group, message.topic, message.message_id,
                                                        message.receipt_handle, duration)
        return message.with_handle(handle)
