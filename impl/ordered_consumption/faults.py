"""The in-process transport between the thin client and the broker, with seeded fault injection.

What it is
----------
``InProcessChannel`` is what the clients hold instead of a gRPC stub: one method per RPC of the
messaging API (``query_route``, ``send_message``, ``end_transaction``, ``heartbeat``, ``unregister``,
``query_settings``, ``query_assignment``, ``receive_message``, ``ack_message``,
``change_invisible_duration``, ``forward_to_dlq``), each forwarded to the broker core.  It counts
requests per RPC (``requests``) and answers per RPC and kind (``answers``), so tests can assert
"exactly one request" or "no request at all", and it injects faults from a ``FaultPlan``.  The broker
itself has the same methods, so a client can also talk to it directly (no faults, no counting).

Fault injection: every answer the server can give
-------------------------------------------------
For each request the plan picks an answer kind, deterministically from ``(seed, rpc, key, n)``
(``key`` identifies the request: the topic and message keys for a send, the group and queue for a
receive, the receipt handle for a settle; ``n`` is how many times that key was asked before), so a
run's fault sequence per request does not depend on how threads interleave.  Kinds:

=================  ===================================================================  ===========
kind               what happens                                                          retriable
=================  ===================================================================  ===========
``ok``             forwarded, answered normally                                          --
``unavailable``    not delivered; transport ``UNAVAILABLE``                              yes
``timeout``        not delivered; ``REQUEST_TIMEOUT`` (client deadline)                  yes
``lost``           **delivered and applied**, the answer is lost: ``REQUEST_TIMEOUT``    yes
``throttled``      not applied; ``TOO_MANY_REQUESTS`` with a back-off the *server* picks   yes (later)
``internal``       not applied; ``INTERNAL_SERVER_ERROR``                                yes
``proxy-timeout``  not applied; ``PROXY_TIMEOUT``                                        yes
``invalid-handle`` settle RPCs: the delivery's invisible time runs out first, then the    no
                   request is forwarded and the broker itself answers
                   ``INVALID_RECEIPT_HANDLE``
``not-found``      receive: no message (``MESSAGE_NOT_FOUND`` is the empty answer);       no
                   settle: the delivery expires, answer ``MESSAGE_NOT_FOUND``;
                   route: ``TOPIC_NOT_FOUND``
``bad-request``    not applied; ``BAD_REQUEST``                                          no
=================  ===================================================================  ===========

The non-retriable settle answers are made *true* before they are given (the broker expires the
delivery), so the system stays in a state a real server could be in: the message is deliverable again
with attempt + 1 and the old handle is invalid.  ``lost`` on an ack or a DLQ forward settles the
message and the client's retry then meets a genuinely invalid handle; ``lost`` on a send stores the
message, so a retry stores a second copy (the at-least-once duplicate a real producer can make);
``lost`` on a receive leaves the batch in flight with nobody holding it until its invisible time
expires.  ``bad-request`` is the one answer that is not made true (the server rejected a request it
could not parse); a settle that meets it leaves the delivery to its invisible timer.

``max_delivery_faults`` bounds, per message, the injected faults that cost a delivery attempt
(``invalid-handle`` and ``not-found`` on settles, ``lost`` on receives): with a bound below the
group's max attempts, a message that the listener accepts is never dead-lettered by the server
because of injected faults alone, which lets a stress test check "dead-lettered exactly those that
always fail" exactly.

Concurrency argument
--------------------
``_lock`` (a leaf) protects the counters, the per-key request numbers (a bounded LRU dictionary) and
the per-message fault budget; it is never held while calling the broker, so the channel adds no lock
order.  The decision itself is a pure function of the plan and the key's request number.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from conq.impl.ordered_consumption.clock import Cancel
from conq.impl.ordered_consumption.protocol import (
    Code,
    GroupSettings,
    Message,
    MessageQueue,
    MessageType,
    ReceivedMessage,
    RpcError,
    SendReceipt,
    Transport,
)
from conq.impl.scheduling import REAL

__all__ = ["KINDS", "RPCS", "FaultPlan", "InProcessChannel"]

RPCS = ("query_route", "send_message", "end_transaction", "heartbeat", "unregister", "query_settings",
        "query_assignment", "receive_message", "ack_message", "change_invisible_duration", "forward_to_dlq")
_SETTLE = ("ack_message", "change_invisible_duration", "forward_to_dlq")
_COMMON = ("unavailable", "timeout", "internal")
#: which kinds each RPC can be answered with
KINDS: dict[str, tuple[str, ...]] = {
    "query_route": (*_COMMON, "throttled", "not-found"),
    "send_message": (*_COMMON, "lost", "throttled", "proxy-timeout", "bad-request"),
    "end_transaction": (*_COMMON, "lost"),
    "heartbeat": _COMMON,
    "unregister": _COMMON,
    "query_settings": _COMMON,
    "query_assignment": _COMMON,
    "receive_message": (*_COMMON, "lost", "throttled", "not-found"),
    **{r: (*_COMMON, "lost", "throttled", "proxy-timeout", "invalid-handle", "not-found", "bad-request")
       for r in _SETTLE},
}
_DELIVERY_COSTING = frozenset({"invalid-handle", "not-found"})


@dataclass(frozen=True)
class FaultPlan:
    """Per RPC, the probability of each non-``ok`` answer kind.  ``rates={"ack_message": {"lost": 0.1}}``;
    the key ``"*"`` applies to every RPC for the kinds it can take."""

    seed: int = 0
    rates: dict = field(default_factory=dict)
    backoffs: tuple = (0.001, 0.002, 0.005)  # the back-offs the server picks from when it throttles
    max_delivery_faults: int | None = None

    def __post_init__(self) -> None:
        for rpc, kinds in self.rates.items():
            if rpc != "*" and rpc not in KINDS:
                raise ValueError(f"unknown RPC {rpc!r}")
            for kind, p in kinds.items():
                if rpc != "*" and kind not in KINDS[rpc]:
                    raise ValueError(f"{rpc} cannot answer {kind!r} (it can: {KINDS[rpc]})")
                if not 0 <= p <= 1:
                    raise ValueError(f"probability {p} of {rpc}/{kind}")

    def table(self, rpc: str) -> tuple[tuple[str, float], ...]:
        merged: dict[str, float] = {}
        for k, p in self.rates.get("*", {}).items():
            if k in KINDS[rpc]:
                merged[k] = p
        merged.update(self.rates.get(rpc, {}))
        if sum(merged.values()) > 1 + 1e-9:
            raise ValueError(f"fault probabilities of {rpc} add up to more than 1")
        return tuple(sorted(merged.items()))

    def decide(self, rpc: str, key: str, n: int, table: tuple | None = None) -> tuple[str, float]:
        """The answer kind of the n-th request with this key, and a uniform number for secondary choices."""
        h = hashlib.blake2b(f"{self.seed}|{rpc}|{key}|{n}".encode(), digest_size=16).digest()
        u = int.from_bytes(h[:8], "big") / 2.0**64
        v = int.from_bytes(h[8:], "big") / 2.0**64
        acc = 0.0
        for kind, p in table if table is not None else self.table(rpc):
            acc += p
            if u < acc:
                return kind, v
        return "ok", v


class InProcessChannel:
    """The clients' transport to an in-process broker; see the module docstring."""

    def __init__(self, broker: Any, plan: FaultPlan | None = None, *, sched: Any = REAL,
                 key_memory: int = 200_000, record: bool = False) -> None:
        self.broker = broker
        self.plan = plan
        self._sched = sched
        self._lock = sched.lock("channel")
        self._tables = {rpc: plan.table(rpc) for rpc in RPCS} if plan is not None else {}
        self._n: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._key_memory = key_memory
        self._budget: Counter = Counter()
        self.requests: Counter = Counter()
        self.answers: Counter = Counter()
        self.trace: list[tuple[str, str, str]] | None = [] if record else None

    # ------------------------------------------------------------------ decision
    def _decide(self, rpc: str, key: str) -> tuple[str, float]:
        self._sched.point("rpc " + rpc)
        table = self._tables.get(rpc)
        with self._lock:
            self.requests[rpc] += 1
            if not table:
                kind, v = "ok", 0.0
            else:
                k = (rpc, key)
                n = self._n.pop(k, 0)
                self._n[k] = n + 1
                if len(self._n) > self._key_memory:
                    self._n.popitem(last=False)
                kind, v = self.plan.decide(rpc, key, n, table)
                if rpc in _SETTLE and kind in _DELIVERY_COSTING and not self._spend_locked(key.split("|", 1)[0]):
                    kind = "ok"
            self.answers[(rpc, kind)] += 1
            if self.trace is not None:
                self.trace.append((rpc, key, kind))
        return kind, v

    def _spend_locked(self, message_id: str) -> bool:
        """Take one delivery-costing fault from the message's budget (caller holds _lock)."""
        cap = self.plan.max_delivery_faults
        if cap is not None and self._budget[message_id] >= cap:
            return False
        self._budget[message_id] += 1
        return True

    def _before(self, rpc: str, kind: str, v: float) -> None:
        """Raise the answer of a fault that happens before the server applies anything."""
        if kind == "unavailable":
            raise RpcError(Transport.UNAVAILABLE, f"{rpc}: injected")
        if kind == "timeout":
            raise RpcError(Code.REQUEST_TIMEOUT, f"{rpc}: injected, request not delivered")
        if kind == "throttled":
            b = self.plan.backoffs
            raise RpcError(Code.TOO_MANY_REQUESTS, f"{rpc}: injected", backoff=b[int(v * len(b)) % len(b)])
        if kind == "internal":
            raise RpcError(Code.INTERNAL_SERVER_ERROR, f"{rpc}: injected")
        if kind == "proxy-timeout":
            raise RpcError(Code.PROXY_TIMEOUT, f"{rpc}: injected")
        if kind == "bad-request":
            raise RpcError(Code.BAD_REQUEST, f"{rpc}: injected")

    @staticmethod
    def _lost(rpc: str) -> RpcError:
        return RpcError(Code.REQUEST_TIMEOUT, f"{rpc}: injected, applied but the answer was lost")

    # ------------------------------------------------------------------ producer side
    def query_route(self, topic: str) -> tuple[MessageQueue, ...]:
        kind, v = self._decide("query_route", topic)
        self._before("query_route", kind, v)
        if kind == "not-found":
            raise RpcError(Code.TOPIC_NOT_FOUND, f"{topic}: injected")
        return self.broker.query_route(topic)

    def send_message(self, queue: MessageQueue, message: Message, message_type: MessageType,
                     transaction_id: str | None = None) -> SendReceipt:
        key = f"{message.topic}|{message.group}|{message.keys}|{message.body[:64]!r}"
        kind, v = self._decide("send_message", key)
        self._before("send_message", kind, v)
        receipt = self.broker.send_message(queue, message, message_type, transaction_id)
        if kind == "lost":
            raise self._lost("send_message")
        return receipt

    def end_transaction(self, topic: str, message_id: str, transaction_id: str, commit: bool) -> None:
        kind, v = self._decide("end_transaction", message_id)
        self._before("end_transaction", kind, v)
        self.broker.end_transaction(topic, message_id, transaction_id, commit)
        if kind == "lost":
            raise self._lost("end_transaction")

    # ------------------------------------------------------------------ consumer side
    def heartbeat(self, group: str, client_id: str) -> None:
        kind, v = self._decide("heartbeat", f"{group}|{client_id}")
        self._before("heartbeat", kind, v)
        self.broker.heartbeat(group, client_id)

    def unregister(self, group: str, client_id: str) -> None:
        kind, v = self._decide("unregister", f"{group}|{client_id}")
        self._before("unregister", kind, v)
        self.broker.unregister(group, client_id)

    def query_settings(self, group: str) -> GroupSettings:
        kind, v = self._decide("query_settings", group)
        self._before("query_settings", kind, v)
        return self.broker.query_settings(group)

    def query_assignment(self, topic: str, group: str, client_id: str) -> tuple[MessageQueue, ...]:
        kind, v = self._decide("query_assignment", f"{topic}|{group}|{client_id}")
        self._before("query_assignment", kind, v)
        return self.broker.query_assignment(topic, group, client_id)

    def receive_message(self, group: str, queue: MessageQueue, batch_size: int, invisible_duration: float,
                        long_polling_timeout: float = 0.0, cancel: Cancel | None = None) -> list[ReceivedMessage]:
        kind, v = self._decide("receive_message", f"{group}|{queue}")
        self._before("receive_message", kind, v)
        if kind == "not-found":
            return []
        got = self.broker.receive_message(group, queue, batch_size, invisible_duration, long_polling_timeout,
                                          cancel)
        if kind == "lost" and got:
            with self._lock:
                cap = self.plan.max_delivery_faults
                if cap is None or all(self._budget[m.message_id] < cap for m in got):
                    for m in got:
                        self._budget[m.message_id] += 1
                    raise self._lost("receive_message")
                self.answers[("receive_message", "lost")] -= 1
                self.answers[("receive_message", "ok")] += 1
        return got

    def _settle(self, rpc: str, group: str, topic: str, message_id: str | None, handle: str, call: Any) -> Any:
        kind, v = self._decide(rpc, f"{message_id}|{handle}")
        self._before(rpc, kind, v)
        if kind in ("invalid-handle", "not-found") and message_id is not None:
            self.broker.expire_now(group, message_id)
            if kind == "not-found":
                raise RpcError(Code.MESSAGE_NOT_FOUND, f"{rpc}: injected")
        result = call()
        if kind == "lost":
            raise self._lost(rpc)
        return result

    def ack_message(self, group: str, topic: str, message_id: str | None, receipt_handle: str) -> None:
        return self._settle("ack_message", group, topic, message_id, receipt_handle,
                            lambda: self.broker.ack_message(group, topic, message_id, receipt_handle))

    def change_invisible_duration(self, group: str, topic: str, message_id: str | None, receipt_handle: str,
                                  invisible_duration: float) -> str:
        return self._settle("change_invisible_duration", group, topic, message_id, receipt_handle,
                            lambda: self.broker.change_invisible_duration(group, topic, message_id, receipt_handle,
                                                                          invisible_duration))

    def forward_to_dlq(self, group: str, topic: str, message_id: str | None, receipt_handle: str,
                       delivery_attempt: int = 0, max_delivery_attempts: int = 0) -> None:
        return self._settle("forward_to_dlq", group, topic, message_id, receipt_handle,
                            lambda: self.broker.forward_to_dlq(group, topic, message_id, receipt_handle,
                                                               delivery_attempt, max_delivery_attempts))


def default_fault_plan(seed: int, max_attempts: int, scale: float = 1.0) -> FaultPlan:
    """Every answer kind the stress uses, at a few percent each (``scale`` multiplies the rates)."""
    s = scale
    settle = {"unavailable": 0.01 * s, "timeout": 0.01 * s, "lost": 0.01 * s, "throttled": 0.005 * s,
              "internal": 0.005 * s, "proxy-timeout": 0.005 * s, "invalid-handle": 0.01 * s, "not-found": 0.005 * s}
    return FaultPlan(
        seed,
        {
            "query_route": {"unavailable": 0.2 * s, "timeout": 0.1 * s},
            "send_message": {"unavailable": 0.01 * s, "timeout": 0.01 * s, "lost": 0.005 * s,
                             "throttled": 0.01 * s, "internal": 0.005 * s, "proxy-timeout": 0.005 * s},
            "receive_message": {"unavailable": 0.01 * s, "timeout": 0.01 * s, "throttled": 0.01 * s,
                                "internal": 0.005 * s, "not-found": 0.01 * s},
            "ack_message": settle,
            "forward_to_dlq": settle,
        },
        backoffs=(0.0005, 0.001, 0.002),
        max_delivery_faults=max_attempts - 1,
    )
