"""The in-process driver of the reference consumer-lists implementation.

It maps the actions of the call-level view of the model
(:mod:`conq.conformance.consumer_lists.calls`) onto ``conq.impl.consumer_lists.queue``'s API,
one call at a time from the caller's thread, and reports observations in the
model's vocabulary: ``(result, notified)`` per call, where ``notified`` is the
sorted list of consumers whose ``notify_work`` the call triggered (read from
the queue's notification log).  Model consumer ``c`` is implementation
consumer id ``c``; model message ``j`` is the ``j+1``-th message enqueued.

The consumer's IO thread is represented by the driver's own bookkeeping of
what the chain would do: a consumer whose ``notify_work`` fired is scheduled
(the chain's "would like to do work" bit), and after a delivery it keeps
pulling; ``pull c`` is rejected (error 13, definite) for a consumer that is
neither, exactly as the model has it disabled.
"""

from __future__ import annotations

from typing import Any

from conq.impl.consumer_lists.queue import Queue, QueueConsumer

from conq.conformance.adapters import ActionRejected

NODE = {
    "INTERESTED": "interested",
    "NOT_INTERESTED": "not-interested",
    "NOTIFIED": "notified",
    "NON_ACQUIRING": "non-acquiring",
    "REMOVED": "removed",
}


class ConsumerListsDriver:
    #: the queue class to drive (the mutation catalog substitutes subclasses)
    queue_class: type = Queue

    def __init__(self, config: dict[str, Any], seed: int):
        self.cfg = config
        self.spec = [(int(p), bool(a)) for p, a in config["consumers"]]
        self.q = self.queue_class(record_events=True)
        n = len(self.spec)
        self.cons: list[QueueConsumer | None] = [None] * n
        self.removed = [False] * n
        self.scheduled = [False] * n
        self.pulling = [False] * n
        self.suspended: list[set[str]] = [set() for _ in range(n)]
        self.ids: dict[int, int] = {}  # model message -> implementation id
        self.log_pos = 0
        if config.get("preadded", True):
            for c in range(n):
                self._add(c)
            self.log_pos = len(self.q.notifications)
            # the model's initial state already holds these notifications (as scheduled IO threads)

    # -- helpers -----------------------------------------------------------------------------
    def _listener(self, consumer: QueueConsumer) -> None:
        self.scheduled[consumer.id] = True

    def _add(self, c: int) -> None:
        prio, acq = self.spec[c]
        self.cons[c] = self.q.add_consumer(
            c, priority=prio, acquires=acq, credit=int(self.cfg.get("initial_credit", 1)),
            flow_active=True, listener=self._listener,
        )

    def _consumer(self, c: int) -> QueueConsumer:
        con = self.cons[c]
        if con is None or self.removed[c]:
            raise ActionRejected(f"consumer {c} is not registered")
        return con

    def _message(self, j: int) -> int:
        if j not in self.ids:
            raise ActionRejected(f"message {j} has not arrived")
        return self.ids[j]

    def _notified(self) -> tuple:
        log = self.q.notifications
        new = log[self.log_pos :]
        self.log_pos = len(log)
        return tuple(sorted(new))

    # -- actions -------------------------------------------------------------------------------
    def do(self, action: tuple) -> Any:
        name, *args = action
        result = None
        if name == "add_consumer":
            (c,) = args
            if self.cons[c] is not None:
                raise ActionRejected(f"consumer {c} was already added")
            self._add(c)
        elif name == "remove_consumer":
            (c,) = args
            self.q.remove_consumer(self._consumer(c))
            self.removed[c] = True
            self.scheduled[c] = self.pulling[c] = False
        elif name == "credit":
            (c,) = args
            con = self._consumer(c)
            if con.credit >= int(self.cfg.get("max_credit", 1)):
                raise ActionRejected(f"consumer {c} already has the most credit it may hold")
            con.add_credit(1)
        elif name in ("suspend", "resume"):
            c, reason = args
            con = self._consumer(c)
            if (reason in self.suspended[c]) == (name == "suspend"):
                raise ActionRejected(f"consumer {c} is already {name}ed for {reason}")
            (self.suspended[c].add if name == "suspend" else self.suspended[c].discard)(reason)
            con.set_flow(not self.suspended[c])
        elif name in ("enqueue", "enqueue_held"):
            (j,) = args
            if j in self.ids or any(k not in self.ids for k in range(j)):
                raise ActionRejected(f"message {j} cannot arrive now (messages arrive in order)")
            self.ids[j] = self.q.enqueue(payload=j, held=name == "enqueue_held")
        elif name == "unhold":
            (j,) = args
            if self.q.message_state(self._message(j)).name.lower() != "held":
                raise ActionRejected(f"message {j} is not held")
            self.q.unhold(self._message(j))
        elif name == "release":
            (j,) = args
            mid = self._message(j)
            owner = self.q.snapshot()["messages"][str(mid)]["owner"]
            if owner is None:
                raise ActionRejected(f"message {j} is not acquired")
            self.q.release(mid)
            result = owner
        elif name == "pull":
            (c,) = args
            con = self._consumer(c)
            if not (self.scheduled[c] or self.pulling[c]):
                raise ActionRejected(f"consumer {c} is not scheduled and not pulling")
            self.scheduled[c] = False
            mid = self.q.deliver_single_message(con)
            self.pulling[c] = mid is not None
            result = None if mid is None else mid - 1
        else:
            raise KeyError(f"unknown action {name!r}")
        return (result, self._notified())

    def snapshot(self) -> dict[str, Any]:
        snap = self.q.snapshot()
        consumers = []
        for c in range(len(self.spec)):
            info = snap["consumers"].get(str(c))
            if self.cons[c] is None:
                consumers.append(["absent", int(self.cfg.get("initial_credit", 1))])
            else:
                consumers.append([NODE[info["state"]], info["credit"]])
        messages = []
        by_id = {mid: j for j, mid in self.ids.items()}
        for j in range(int(self.cfg["messages"])):
            if j not in self.ids:
                messages.append("unarrived")
                continue
            m = snap["messages"][str(self.ids[j])]
            messages.append(f"acquired by c{m['owner']}" if m["state"] == "acquired" else m["state"])
        interested = {str(p): list(ids) for p, ids in snap["interested"] if ids}
        return {"consumers": consumers, "messages": messages, "interested": interested}
