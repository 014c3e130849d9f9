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
QueryAssignment without queue p        ``["drop_process_queue", p]``                          left out
QueryAssignment with p again           ``["create_process_queue", p]``                        left out
the runner expires m's delivery        ``["expire", m]``                                      ``visible`` / ``dead-lettered``
=====================================  ====================================================  ==============

Reassignment (the client's process queue is dropped or created when its I/O loop handles the
assignment answer, a step the wire does not show): ``create_process_queue`` is placed at the answer
that gives the queue back (every later receive of it is caused by it); ``drop_process_queue`` at the
answer that takes it away, *or after the last answer of a receive of that queue* until it is given
back, if one came later: such a receive was in flight (or began before the client handled the answer),
and the model's receive is one atomic step, so the only linearisation that keeps the wire's order
puts the drop after it.  Only queues with messages are mapped (the model moves only those).  The
runner's expiries are logged where they happen; expiries the runner did not cause (a lost receive's
delivery running out) stay hidden.

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


def observed_log(events: list[dict], config_name: str, bodies: list[str], group: str,
                 overrides: dict | None = None, queues_with_messages: tuple = (0,)) -> list[dict]:
    """The header and events of the observed log of one recorded run (module docstring)."""
    index = {b: i for i, b in enumerate(bodies)}
    mids: dict[str, int] = {}  # client message id -> model index
    out: list[dict] = []
    assigned: dict[str, set] = {}  # client id -> queues of its last OK assignment answer
    dropped: dict[tuple, int] = {}  # (client id, queue) -> index in ``out`` where its drop goes (for now)
    drops: list[tuple[int, dict]] = []
    for e in events:
        if e.get("event") == "server" and e.get("call") == "expire" and e.get("group") == group and e.get("applied"):
            out.append({"action": ["expire", index[e["body"]]], "observation": e["result"]})
            continue
        if e.get("kind") == "rpc" and e["name"] == "QueryAssignment" and e["request"].get("group") == group \
                and e["answer"].get("status") == "OK":
            cid = e["client_id"]
            now = set(e["answer"].get("queues") or ()) & set(queues_with_messages)
            before = assigned.get(cid, set(queues_with_messages))  # the model starts with every queue held
            for q in sorted(before - now):
                ev = {"action": ["drop_process_queue", q]}
                drops.append((len(out), ev))
                dropped[(cid, q)] = len(drops) - 1
            for q in sorted(now - before):
                dropped.pop((cid, q), None)
                out.append({"action": ["create_process_queue", q]})
            assigned[cid] = now
            continue
        if e.get("kind") == "rpc" and e["name"] == "ReceiveMessage" and (e["client_id"], e["request"]["queue"]) in dropped \
                and e["request"].get("group") == group:
            # a receive answered after the answer that took its queue away: the drop goes after it
            k = dropped[(e["client_id"], e["request"]["queue"])]
            if e["answer"].get("messages"):
                drops[k] = (len(out) + 1, drops[k][1])
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
    for pos, ev in sorted(drops, key=lambda x: x[0], reverse=True):
        out.insert(pos, ev)
    header = {"format": "conq-trace", "version": 1, "kind": "observed", "level": "call",
              "model": "ordered-consumption", "config_name": config_name,
              "hidden": [h for h in HIDDEN if not (overrides or {}).get("rebalance")
                         or h not in ("drop_process_queue", "create_process_queue")]}
    if overrides:
        header["config"] = dict(overrides)
    return [header] + [dict(ev, step=i) for i, ev in enumerate(out, 1)]


def write_observed(path: str | Path, lines: list[dict]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines))


def validate_run(events: list[dict], model_size: Any, path: str | Path) -> dict:
    """Write the observed log of a model-sized run to ``path`` and validate it (``conq validate``)."""
    from conq.conformance.validate import validate_file

    overrides = dict(getattr(model_size, "overrides", None) or {})
    lines = observed_log(events, model_size.config_name, list(model_size.bodies), model_size.group, overrides)
    write_observed(path, lines)
    v = validate_file("ordered-consumption", str(path))
    out = {"status": v.verdict, "log": str(path), "config": model_size.config_name, "overrides": overrides,
           "events": v.events, "accepted": v.accepted, "failed": v.failed, "allowed": v.allowed[:10],
           "witness": [s.to_json() for s in v.path] if v.verdict == "accepted" else None}
    if v.verdict == "accepted":
        # the model states and transitions the witness visits (hidden steps included): the run's
        # coverage of the configuration's graph (``coverage.py``)
        from conq.conformance.ordered_consumption.upstream.coverage import path_keys

        out["coverage"] = path_keys(v.path, v.start)
    if v.verdict == "rejected":
        # the upstream choices the seed leaves open, each a variant of the model: the first that
        # accepts the log names the divergence (the log under the variant is kept beside it)
        for name, fields in getattr(model_size, "variants", ()) or ():
            vpath = Path(str(path).replace(".observed.ndjson", "") + f".variant-{_slug(name)}.observed.ndjson")
            write_observed(vpath, [dict(lines[0], config={**overrides, **fields})] + lines[1:])
            vv = validate_file("ordered-consumption", str(vpath))
            if vv.verdict == "accepted":
                out["variant"] = {"name": name, "fields": fields, "log": str(vpath), "accepted": vv.accepted,
                                  "witness": [s.to_json() for s in vv.path]}
                break
    return out


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c == "-" else "" for c in name.split(" ")[0])


# ------------------------------------------------------------------------------ larger workloads
#: a group's log is validated when it has one push consumer and at most this many stored messages
#: (the model's state grows with the messages; the validator's closures with the unknown answers)
MAX_GROUP_MESSAGES = 8


def group_log(w: Any, events: list[dict], group: str) -> tuple[list[dict], dict] | None:
    """The observed log of one push consumer group of a larger run (``faults``, ``all``, ...), with the
    configuration that holds it: the model's FIFO or standard upstream configuration with the run's
    own sizes as fields over it (queues, each stored copy's queue and body size in offset order, cache
    thresholds, batch, max attempts) and the broker events the run can show (expiry while held: the
    face does not renew; server faults when the workload injects them).  Messages are the broker's
    stored copies (a lost send answer stores two under one client id), named by their receipt
    handles' core id; listener calls by the handle the client consumed.  None when the group is not
    validated (a simple consumer, several consumers, too many messages)."""
    consumers = [c for c in w.push if c["group"] == group]
    if len(consumers) != 1 or len(consumers[0]["topics"]) != 1:
        return None
    c = consumers[0]
    g = w.group(group)
    topic = next(t for t in w.topics if t.name == c["topics"][0])
    copies: dict[str, tuple] = {}  # core id -> (queue, offset, body)
    for e in events:
        if e.get("kind") == "rpc" and e["name"] == "ReceiveMessage" and e["request"].get("group") == group:
            for m in e["answer"].get("messages") or ():
                copies[m["handle"].split("|", 1)[0]] = (m["queue"], m["offset"], m["body"])
    if not copies or len(copies) > MAX_GROUP_MESSAGES:
        return None
    order = sorted(copies, key=lambda k: copies[k][:2])
    index = {k: i for i, k in enumerate(order)}
    ms = {"settles": 0}

    def idx(handle: str) -> int | None:
        return index.get((handle or "").split("|", 1)[0])

    out: list[dict] = []
    for e in events:
        if e.get("kind") == "rpc" and e["request"].get("group") == group:
            req, ans = e["request"], e["answer"]
            if e["name"] == "ReceiveMessage":
                msgs = ans.get("messages") or []
                if msgs:
                    out.append({"action": ["receive_answer", req["queue"], "ok"],
                                "observation": [[index[m["handle"].split("|", 1)[0]], m["attempt"]] for m in msgs]})
            elif e["name"] in _SETTLE_CALL:
                handles = [x["handle"] for x in req.get("entries", ())] or [req.get("handle")]
                m = idx(handles[0])
                if m is None:
                    return None  # a handle the face never gave (upstream's empty handle): not a model event
                action = [_SETTLE_CALL[e["name"]], m]
                name = _ANSWER.get(ans.get("status")) if "grpc" not in ans else None
                if name is None and "grpc" not in ans:
                    name = "error"
                if name is not None:
                    action.append(name)
                out.append({"action": action})
                ms["settles"] += 1
        elif e.get("event") == "listener" and e["group"] == group:
            m = idx(e.get("handle"))
            if m is None:
                return None
            out.append({"action": ["listener_returns", m, "ok" if e["result"] == "success" else "fail"]})
    fields = {"queues": topic.queues, "msg_queue": [copies[k][0] for k in order],
              "msg_size": [len(copies[k][2].encode()) for k in order],
              "cache_messages": c.get("max_cache_count", 1024), "cache_bytes": c.get("max_cache_bytes", 64 * 1024 * 1024),
              "server_batch": 32, "max_attempts": g.max_attempts, "expiry_while_held": True,
              "server_faults": bool(w.faults), "rebalance": False}
    config_name = "push-fifo-upstream" if g.fifo else "push-standard-upstream"
    header = {"format": "conq-trace", "version": 1, "kind": "observed", "level": "call",
              "model": "ordered-consumption", "config_name": config_name, "config": fields, "hidden": HIDDEN}
    return [header] + [dict(ev, step=i) for i, ev in enumerate(out, 1)], {"messages": len(order), **ms}


def validate_groups(w: Any, events: list[dict], out_dir: str | Path, stem: str, max_states: int = 200_000) -> dict:
    """Validate every push group of a larger run that ``group_log`` can hold (``conq validate``)."""
    from conq.conformance.validate import validate_file

    res: dict = {}
    for group in sorted({c["group"] for c in w.push}):
        got = group_log(w, events, group)
        if got is None:
            res[group] = {"status": "not validated", "why": "several consumers, a simple consumer, more than "
                          f"{MAX_GROUP_MESSAGES} messages, or a settle with a handle the face never gave"}
            continue
        lines, info = got
        path = Path(out_dir) / f"{stem}.{group}.observed.ndjson"
        write_observed(path, lines)
        v = validate_file("ordered-consumption", str(path), max_states=max_states)
        res[group] = {"status": v.verdict, "log": str(path), "config": lines[0]["config_name"], **info,
                      "events": v.events, "accepted": v.accepted, "failed": v.failed, "allowed": v.allowed[:10],
                      "states": v.states,
                      "witness": [s.to_json() for s in v.path] if v.verdict == "accepted" else None}
    return res
