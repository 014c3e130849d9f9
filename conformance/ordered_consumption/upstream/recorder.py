"""The recorder: every RPC the real client makes, every answer the face gives, every listener call.

``Recorder.wrap(servicer)`` (passed to ``GrpcFront(servicer_wrapper=...)``) returns a servicer that
forwards each call to the face's servicer and logs one event per call: the request and the answer in
a readable summary (the fields the ordered-consumption model talks about: topics, queues, groups,
message ids, bodies, delivery attempts, receipt handles, invisible times, status codes), or the gRPC
status the call was aborted with.  The worker process adds the listener calls and the application's
API calls (``worker.py``); ``trace()`` merges both on ``t_ns`` (``time.monotonic_ns``, one clock for
both processes), so an answer precedes the listener call it caused, which precedes the ack it led to.

Trace format
------------
``write(path, header)`` writes a conq trace (spec/trace-format.md, version 1): the header (written by
``runner.run``) has ``generator.mode = "recorded"``, ``generator.view = "observed"`` and
``generator.of_model = "ordered-consumption"``, with the client and the workload beside them; each
event is
``{"step": n, "action": [kind, name, actor], "observation": {...}}`` with kind ``rpc`` (name = the
RPC), ``listener`` (name ``consume``) or ``api`` (name = the client call), actor = the client id or
the worker's client name.  Only JSON scalars, lists and objects (no floats: durations are integer
milliseconds), so every line validates against ``schemas/trace.schema.json``.  This is the
"observed" view of issue 19 (what crosses the wire and the listener boundary, the client's internal
steps hidden).  Its actions are the wire's, not the model's: ``observed.py`` translates a model-sized
run into an observed log in the model's call vocabulary for ``conq validate``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

__all__ = ["Recorder", "RecordingServicer"]

_CLIENT_ID = "x-mq-client-id"


def _ms(d: Any) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def _code(status: Any) -> str:
    try:
        return pb.Code.Name(status.code)
    except ValueError:
        return str(status.code)


def _body(b: bytes) -> str:
    return bytes(b).decode("utf-8", "replace")


def _msg(m: Any) -> dict:
    sp = m.system_properties
    return {"message_id": sp.message_id, "body": _body(m.body), "attempt": sp.delivery_attempt,
            "handle": sp.receipt_handle, "message_group": sp.message_group if sp.HasField("message_group") else None,
            "queue": sp.queue_id, "offset": sp.queue_offset}


def _summary(rpc: str, req: Any) -> dict:
    """The request fields that matter, per RPC."""
    if rpc == "QueryRoute":
        return {"topic": req.topic.name}
    if rpc == "Heartbeat":
        return {"group": req.group.name, "client_type": pb.ClientType.Name(req.client_type)}
    if rpc == "NotifyClientTermination":
        return {"group": req.group.name}
    if rpc == "SendMessage":
        return {"messages": [{"topic": m.topic.name, "message_id": m.system_properties.message_id,
                              "body": _body(m.body), "type": pb.MessageType.Name(m.system_properties.message_type),
                              "message_group": m.system_properties.message_group
                              if m.system_properties.HasField("message_group") else None}
                             for m in req.messages]}
    if rpc == "QueryAssignment":
        return {"topic": req.topic.name, "group": req.group.name}
    if rpc == "ReceiveMessage":
        return {"group": req.group.name, "topic": req.message_queue.topic.name, "queue": req.message_queue.id,
                "batch": req.batch_size, "auto_renew": req.auto_renew,
                "invisible_ms": _ms(req.invisible_duration) if req.HasField("invisible_duration") else None,
                "long_polling_ms": _ms(req.long_polling_timeout) if req.HasField("long_polling_timeout") else None}
    if rpc == "AckMessage":
        return {"group": req.group.name, "topic": req.topic.name,
                "entries": [{"message_id": e.message_id, "handle": e.receipt_handle} for e in req.entries]}
    if rpc == "ChangeInvisibleDuration":
        return {"group": req.group.name, "topic": req.topic.name, "message_id": req.message_id,
                "handle": req.receipt_handle, "invisible_ms": _ms(req.invisible_duration)}
    if rpc == "ForwardMessageToDeadLetterQueue":
        return {"group": req.group.name, "topic": req.topic.name, "message_id": req.message_id,
                "handle": req.receipt_handle, "delivery_attempt": req.delivery_attempt,
                "max_delivery_attempts": req.max_delivery_attempts}
    if rpc == "EndTransaction":
        return {"topic": req.topic.name, "message_id": req.message_id, "transaction_id": req.transaction_id,
                "resolution": pb.TransactionResolution.Name(req.resolution)}
    return {}


def _answer(rpc: str, res: Any) -> dict:
    out: dict = {"status": _code(res.status)}
    if rpc == "QueryRoute":
        out["queues"] = [q.id for q in res.message_queues]
    elif rpc == "QueryAssignment":
        out["queues"] = [a.message_queue.id for a in res.assignments]
    elif rpc == "SendMessage":
        out["entries"] = [{"status": _code(e.status), "message_id": e.message_id, "offset": e.offset,
                           "transaction_id": e.transaction_id or None} for e in res.entries]
    elif rpc == "AckMessage":
        out["entries"] = [{"status": _code(e.status), "message_id": e.message_id} for e in res.entries]
    elif rpc == "ChangeInvisibleDuration":
        out["handle"] = res.receipt_handle
    return out


def _settings(s: Any) -> dict:
    d: dict = {"client_type": pb.ClientType.Name(s.client_type)}
    if s.HasField("subscription"):
        d.update(group=s.subscription.group.name, fifo=s.subscription.fifo,
                 batch=s.subscription.receive_batch_size,
                 long_polling_ms=_ms(s.subscription.long_polling_timeout))
    if s.HasField("backoff_policy"):
        d["max_attempts"] = s.backoff_policy.max_attempts
        if s.backoff_policy.HasField("customized_backoff"):
            d["backoff_ms"] = [_ms(x) for x in s.backoff_policy.customized_backoff.next]
    return d


class Recorder:
    """Thread-safe event log (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[dict] = []
        self.rpc_counts: Counter = Counter()
        self.answer_counts: Counter = Counter()
        # ReceiveMessage calls under way and begun, per (client id, topic, queue): the runner's script
        # waits, by state, until a dropped queue has no receive left in flight (runner.run)
        self.receives_in_flight: Counter = Counter()
        self.receives_begun: Counter = Counter()

    def receive_begins(self, key: tuple) -> None:
        with self._lock:
            self.receives_in_flight[key] += 1
            self.receives_begun[key] += 1

    def receive_ends(self, key: tuple) -> None:
        with self._lock:
            self.receives_in_flight[key] -= 1

    def receives(self, key: tuple) -> tuple[int, int]:
        """(in flight, begun so far) of one (client id, topic, queue)."""
        with self._lock:
            return self.receives_in_flight[key], self.receives_begun[key]

    def add(self, ev: dict) -> None:
        ev.setdefault("t_ns", time.monotonic_ns())
        with self._lock:
            self._events.append(ev)
            if ev.get("kind") == "rpc":
                self.rpc_counts[ev["name"]] += 1
                ans = ev["answer"]
                self.answer_counts[(ev["name"], ans.get("grpc") or ans.get("status"))] += 1

    def events(self) -> list[dict]:
        with self._lock:
            return sorted(self._events, key=lambda e: e["t_ns"])

    def rpcs(self, name: str | None = None) -> list[dict]:
        return [e for e in self.events() if e.get("kind") == "rpc" and (name is None or e["name"] == name)]

    def wrap(self, servicer: Any) -> RecordingServicer:
        return RecordingServicer(servicer, self)

    # ------------------------------------------------------------------ trace output
    def trace(self) -> list[dict]:
        """Events in the conq trace format (module docstring), in ``t_ns`` order."""
        out = []
        for i, e in enumerate(self.events(), 1):
            kind = e.get("kind") or ("listener" if e.get("event") == "listener" else "api")
            if kind == "rpc":
                action = ["rpc", e["name"], e.get("client_id") or ""]
                obs = {"t_ns": e["t_ns"], "request": e["request"], "answer": e["answer"]}
            elif kind == "listener":
                action = ["listener", "consume", e.get("client", "")]
                obs = {k: v for k, v in e.items() if k not in ("event", "client")}
            else:
                action = ["api", e.get("call") or e.get("event", ""), e.get("client", "")]
                obs = {k: v for k, v in e.items() if k not in ("event", "client", "call")}
            out.append({"step": i, "action": action, "observation": obs})
        return out

    def write(self, path: str | Path, header: dict) -> int:
        events = self.trace()
        header = dict(header, generator=dict(header.get("generator", {"mode": "recorded"}), length=len(events)))
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("w", encoding="utf-8") as fh:
            fh.write(json.dumps(header, sort_keys=True) + "\n")
            for ev in events:
                fh.write(json.dumps(ev, sort_keys=True) + "\n")
        return len(events)


def _cid(context: grpc.ServicerContext) -> str:
    for k, v in context.invocation_metadata() or ():
        if k == _CLIENT_ID:
            return v
    return ""


def _aborted(context: grpc.ServicerContext) -> dict:
    try:
        code = context.code()
    except Exception:  # noqa: BLE001 - older grpcio without ServicerContext.code()
        code = None
    name = code.name if isinstance(code, grpc.StatusCode) else "ABORTED_BY_HANDLER"
    return {"grpc": name}


_UNARY = ("QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "AckMessage",
          "ForwardMessageToDeadLetterQueue", "EndTransaction", "NotifyClientTermination",
          "ChangeInvisibleDuration", "RecallMessage", "SyncLiteSubscription")


class RecordingServicer(sgrpc.MessagingServiceServicer):
    """Forwards every call to ``inner`` and records it in ``recorder``."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self._inner = inner
        self._rec = recorder

    def _unary(self, rpc: str, request: Any, context: grpc.ServicerContext) -> Any:
        t0 = time.monotonic_ns()
        ev = {"kind": "rpc", "name": rpc, "client_id": _cid(context), "t_req_ns": t0,
              "request": _summary(rpc, request)}
        try:
            res = getattr(self._inner, rpc)(request, context)
        except BaseException:
            ev["answer"] = _aborted(context)
            self._rec.add(ev)
            raise
        ev["answer"] = _answer(rpc, res)
        self._rec.add(ev)  # stamped before the answer leaves: the client cannot act on it earlier
        return res

    def ReceiveMessage(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        t0 = time.monotonic_ns()
        ev = {"kind": "rpc", "name": "ReceiveMessage", "client_id": _cid(context), "t_req_ns": t0,
              "request": _summary("ReceiveMessage", request)}
        status, messages, pending = None, [], []
        key = (ev["client_id"], request.message_queue.topic.name, request.message_queue.id)
        self._rec.receive_begins(key)
        try:
            # The stream is buffered and recorded before its first response leaves, so the recorded
            # answer precedes everything the client does with it (it reads the whole stream first).
            for res in self._inner.ReceiveMessage(request, context):
                if res.HasField("status"):
                    status = _code(res.status)
                elif res.HasField("message"):
                    messages.append(_msg(res.message))
                pending.append(res)
        except BaseException:
            ev["answer"] = _aborted(context)
            self._rec.add(ev)
            self._rec.receive_ends(key)
            raise
        ev["answer"] = {"status": status, "messages": messages}
        self._rec.add(ev)
        self._rec.receive_ends(key)  # after the answer is recorded: no longer in flight for the runner
        yield from pending

    def Telemetry(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        cid = _cid(context)
        for res in self._inner.Telemetry(request_iterator, context):
            ev = {"kind": "rpc", "name": "Telemetry", "client_id": cid, "request": {"command": "settings"},
                  "answer": {"status": _code(res.status),
                             **({"settings": _settings(res.settings)} if res.HasField("settings") else {})}}
            self._rec.add(ev)
            yield res


def _make(rpc: str) -> Any:
    def method(self: RecordingServicer, request: Any, context: grpc.ServicerContext) -> Any:
        return self._unary(rpc, request, context)

    method.__name__ = rpc
    return method


for _rpc in _UNARY:
    setattr(RecordingServicer, _rpc, _make(_rpc))
