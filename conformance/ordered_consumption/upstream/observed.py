"""From a recorded upstream run to an observed log of the model (``conq validate``).

The recorder's trace speaks the wire (RPCs, answers, listener calls); ``conq validate`` speaks the
model.  For a run whose workload is *model-sized* (``MODEL_WORKLOADS``: the messages, queues, cache
thresholds, batch and max attempts of a named configuration of ``ordered-consumption``), this module
writes the run as an observed log (spec/trace-format.md, "Observed logs") at the call level of the
model (``conformance/ordered_consumption/calls.py``):

=====================================  ====================================================  ==============
wire / listener event                  call                                                   observation
=====================================  ====================================================  ==============
ReceiveMessage on the message queue    ``["receive_answer", p, "ok"]``                        ``[[m, attempt], ...]``
listener call                          ``["listener_returns", m, "ok" | "fail"]``             left out
AckMessage                             ``["ack_answer", m, ans]``                             left out
ForwardMessageToDeadLetterQueue        ``["forward_to_dlq_answer", m, ans]``                  left out
ChangeInvisibleDuration                ``["change_invisible_answer", m, ans]``                left out
=====================================  ====================================================  ==============

``m`` is the model's message index (send order of the bodies), ``p`` the queue.  ``ans`` is the
model's name of the answer; an answer the wire cannot tell apart (a gRPC DEADLINE_EXCEEDED is
``lost`` if the server applied the request and ``error`` if not) is left out (unknown).  The
listener's attempt is left out: the model's attempt counts local re-consumptions, the upstream
listener sees the server's delivery attempt.  Receives on queues without messages and empty
answers are not logged (``receive_answer`` is hidden, like every step the wire does not show:
``dispatch``, ``next_attempt_delay``, ``expire``, rebalance).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["HIDDEN", "observed_log", "validate_run", "write_observed"]

_ANSWER = {"OK": "ok", "INVALID_RECEIPT_HANDLE": "invalid-handle", "MESSAGE_NOT_FOUND": "not-found",
           "BAD_REQUEST": "bad-request", "TOO_MANY_REQUESTS": "throttled"}
_SETTLE_CALL = {"AckMessage": "ack_answer", "ForwardMessageToDeadLetterQueue": "forward_to_dlq_answer",
                "ChangeInvisibleDuration": "change_invisible_answer"}
#: call-level actions a wire log never shows (or shows only in part: empty receive answers)
HIDDEN = ["receive_answer", "dispatch", "next_attempt_delay", "expire", "drop_process_queue", "create_process_queue",
          "tick", "retry", "abandon"]


def observed_log(events: list[dict], config_name: str, bodies: list[str], group: str) -> list[dict]:
    """The header and events of the observed log of one recorded run (module docstring)."""
    index = {b: i for i, b in enumerate(bodies)}
    mids: dict[str, int] = {}  # client message id -> model index
    out: list[dict] = []
    for e in events:
        if e.get("event") == "api" and e.get("call") == "send" and e.get("result") == "ok":
            mids[e["message_id"]] = index[e["body"]]
        if e.get("kind") == "rpc" and e["request"].get("group") == group:
            req, ans = e["request"], e["answer"]
            if e["name"] == "ReceiveMessage":
                msgs = ans.get("messages") or []
                if msgs:
                    out.append({"action": ["receive_answer", req["queue"], "ok"],
                                "observation": [[index[m["body"]], m["attempt"]] for m in msgs]})
            elif e["name"] in _SETTLE_CALL:
                mid = (req.get("entries") or [{}])[0].get("message_id") or req.get("message_id")
                action = [_SETTLE_CALL[e["name"]], mids[mid]]
                name = _ANSWER.get(ans.get("status")) if "grpc" not in ans else None
                if name is None and "grpc" not in ans:
                    name = "error"
                if name is not None:
                    action.append(name)
                out.append({"action": action})
        elif e.get("event") == "listener" and e["group"] == group:
            out.append({"action": ["listener_returns", index[e["body"]], "ok" if e["result"] == "success" else "fail"]})
    header = {"format": "conq-trace", "version": 1, "kind": "observed", "level": "call",
              "model": "ordered-consumption", "config_name": config_name, "hidden": HIDDEN}
    return [header] + [dict(ev, step=i) for i, ev in enumerate(out, 1)]


def write_observed(path: str | Path, lines: list[dict]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines))


def validate_run(events: list[dict], model_size: Any, path: str | Path) -> dict:
    """Write the observed log of a model-sized run to ``path`` and validate it (``conq validate``)."""
    from conq.conformance.validate import validate_file

    lines = observed_log(events, model_size.config_name, list(model_size.bodies), model_size.group)
    write_observed(path, lines)
    v = validate_file("ordered-consumption", str(path))
    return {"status": v.verdict, "log": str(path), "config": model_size.config_name, "events": v.events,
            "accepted": v.accepted, "failed": v.failed, "allowed": v.allowed[:10]}
