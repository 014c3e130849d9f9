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
listener sees the server's delivery attempt.

Receives that bring nothing are logged too (issue 19: a receive answered with an error or with
nothing is an event the client sees on the wire, and a witness must take it; before, they were
hidden and the shortest witness never took ``receive_answer error``): on a queue with messages,

=====================================  ====================================================  ==============
ReceiveMessage answer                  call                                                   observation
=====================================  ====================================================  ==============
INTERNAL_SERVER_ERROR                  ``["receive_answer", p, "error"]``                     ``"error"``
TOO_MANY_REQUESTS                      ``["receive_answer", p, "error"]`` (``"throttled"``     the same
                                       under ``answer_codes``)
MESSAGE_NOT_FOUND / OK, no message     ``["receive_answer", p, "ok"]``                        ``[]``
REQUEST_TIMEOUT, a gRPC status, other  ``["receive_answer", p]`` (answer unknown)             left out
=====================================  ====================================================  ==============

Why each is sound (``model/ordered_consumption/model.py`` ``_receive``): the model's receive answers
``error`` (every retriable answer *not applied*: timeout, unavailable, internal, throttled, named by
its first code unless ``answer_codes``) whenever the loop may receive and the configuration has
``server_faults``; the face answers INTERNAL_SERVER_ERROR and TOO_MANY_REQUESTS only before the core
applies anything (``impl/ordered_consumption/faults.py`` ``_before``).  It answers ``()`` exactly when
nothing of the queue is deliverable, and the core answers MESSAGE_NOT_FOUND only when its last check
under the queue's lock found nothing (``broker.receive_message``), except for two cases that are left
out: a receive the fault plan answers ``not-found`` without asking the core (only when the workload
injects it: ``empty_known=False``), and a receive cancelled when its client shuts down (it takes
nothing whatever is deliverable; every empty answer of a client after its NotifyClientTermination is
left out).  REQUEST_TIMEOUT is ``lost`` (delivered, answer lost) or a timeout before anything was
applied: the client cannot tell, so the answer stays unknown, as for settles.

``receive_answer`` is therefore *not hidden*: every receive of the group on a queue with messages is
in the log, except the empty answers left out above, and those are no step of the model's state
(a receive that takes nothing from a loop that may receive leaves the state as it was: ``_receive``,
``issued``); the model has no receive loop on a queue without messages (``_c_actions``).  Hiding it
would let a hidden lost receive explain any empty answer (a message "delivered, answer lost" makes
nothing deliverable), and the claim that an empty answer means nothing deliverable would be gone.
Every other step the wire does not show is hidden (``dispatch``, ``next_attempt_delay``, ``expire``,
rebalance).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["HIDDEN", "MAX_GROUP_MESSAGES", "SIMPLE_ANY_QUEUE", "SIMPLE_PER_QUEUE", "group_log", "group_units", "observed_log",
           "recorded_events", "simple_log", "validate_groups", "validate_run", "validate_simple", "write_observed"]

_ANSWER = {"OK": "ok", "INVALID_RECEIPT_HANDLE": "invalid-handle", "MESSAGE_NOT_FOUND": "not-found",
           "BAD_REQUEST": "bad-request", "TOO_MANY_REQUESTS": "throttled"}
_SETTLE_CALL = {"AckMessage": "ack_answer", "ForwardMessageToDeadLetterQueue": "forward_to_dlq_answer",
                "ChangeInvisibleDuration": "change_invisible_answer"}
#: ReceiveMessage statuses the face answers only before the core applied anything (faults.py
#: ``_before``): the model's not-applied ``error`` (``throttled`` under ``answer_codes``)
_RECEIVE_NOT_APPLIED = {"INTERNAL_SERVER_ERROR": "error", "TOO_MANY_REQUESTS": "throttled"}


def _receive_event(req: dict, ans: dict, name_of: Any, *, answer_codes: bool = False, empty_known: bool = True,
                   terminating: bool = False) -> dict | None:
    """The call of one recorded ReceiveMessage (module docstring, second table); None when not logged.
    ``name_of(message summary)`` is the model's message index."""
    msgs = ans.get("messages") or []
    if msgs:
        return {"action": ["receive_answer", req["queue"], "ok"], "observation": [[name_of(m), m["attempt"]] for m in msgs]}
    status = None if "grpc" in ans else ans.get("status")
    if status in _RECEIVE_NOT_APPLIED:
        code = _RECEIVE_NOT_APPLIED[status] if answer_codes else "error"
        return {"action": ["receive_answer", req["queue"], code], "observation": code}
    if status in ("MESSAGE_NOT_FOUND", "OK"):
        if not empty_known or terminating:
            return None
        return {"action": ["receive_answer", req["queue"], "ok"], "observation": []}
    return {"action": ["receive_answer", req["queue"]]}


def _answer_codes(config_name: str, overrides: dict | None) -> bool:
    """Whether the configuration names each status code apart (``OCConfig.answer_codes``)."""
    from conq.conformance.views import conformance_model

    return bool(getattr(conformance_model("ordered-consumption", config_name, dict(overrides or {})).base.config,
                        "answer_codes", False))


#: call-level actions a wire log never shows (``receive_answer`` is shown: module docstring)
HIDDEN = ["dispatch", "next_attempt_delay", "expire", "drop_process_queue", "create_process_queue",
          "tick", "retry", "abandon"]


def observed_log(events: list[dict], config_name: str, bodies: list[str], group: str,
                 overrides: dict | None = None, queues_with_messages: tuple = (0,), *,
                 empty_known: bool = True) -> list[dict]:
    """The header and events of the observed log of one recorded run (module docstring).
    ``empty_known``: an empty receive answer means nothing was deliverable (False when the workload's
    fault plan answers receives ``not-found`` without asking the core)."""
    index = {b: i for i, b in enumerate(bodies)}
    codes = _answer_codes(config_name, overrides)
    terminating: set = set()  # client ids that sent NotifyClientTermination
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
        if e.get("kind") == "rpc" and e["name"] == "NotifyClientTermination":
            terminating.add(e["client_id"])
        receive = None
        if e.get("kind") == "rpc" and e["name"] == "ReceiveMessage" and e["request"].get("group") == group:
            receive = _receive_event(e["request"], e["answer"], lambda m: index[m["body"]], answer_codes=codes,
                                     empty_known=empty_known, terminating=e["client_id"] in terminating)
            if receive is not None and not e["answer"].get("messages") and e["request"]["queue"] not in queues_with_messages:
                receive = None  # the model's loop of a queue without messages is not modelled
        if receive is not None and (e["client_id"], e["request"]["queue"]) in dropped:
            # a receive answered after the answer that took its queue away: the drop goes after it
            k = dropped[(e["client_id"], e["request"]["queue"])]
            drops[k] = (len(out) + 1, drops[k][1])
        if e.get("event") == "api" and e.get("call") == "send" and e.get("result") == "ok":
            mids[e["message_id"]] = index[e["body"]]
        if e.get("kind") == "rpc" and e["request"].get("group") == group:
            req, ans = e["request"], e["answer"]
            if e["name"] == "ReceiveMessage":
                if receive is not None:
                    out.append(receive)
            elif e["name"] in _SETTLE_CALL:
                mid = (req.get("entries") or [{}])[0].get("message_id") or req.get("message_id")
                action = [_SETTLE_CALL[e["name"]], mids[mid]]
                action += _settle_answer(ans)
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


def recorded_events(path: str | Path) -> list[dict]:
    """The recorder's events of a written wire trace (``Recorder.trace``'s inverse, as far as this module
    reads them): an RPC, a listener call, a broker event the runner caused (``client`` "broker") or a
    worker's API call.  For re-validating the traces of an earlier campaign with today's mapping
    (``validate_groups(workload, recorded_events(trace), ...)``)."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        next(fh)  # the header
        for line in fh:
            ev = json.loads(line)
            kind, name, who = ev["action"]
            obs = dict(ev.get("observation") or {})
            if kind == "rpc":
                out.append({"kind": "rpc", "name": name, "client_id": who, **obs})
            elif kind == "listener":
                out.append({"event": "listener", "client": who, **obs})
            else:
                out.append({"event": "server" if who == "broker" else "api", "call": name, "client": who, **obs})
    return out


def write_observed(path: str | Path, lines: list[dict]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines))


def validate_run(events: list[dict], model_size: Any, path: str | Path, *, empty_known: bool = True,
                 workload: Any = None) -> dict:
    """Write the observed log of a model-sized run to ``path`` and validate it (``conq validate``)."""
    from conq.conformance.validate import validate_file

    overrides = dict(getattr(model_size, "overrides", None) or {})
    if model_size.config_name == "simple":
        # the simple consumer's mapping ("the simple consumer (SC)" below), sized by ``overrides``
        u = validate_simple(workload, events, Path(path).parent, "", model_size.group,
                            empty_known=empty_known, base_fields=overrides, path=path)
        return {"witness": None, **u, "config": "simple", "overrides": u.get("overrides", overrides)}
    lines = observed_log(events, model_size.config_name, list(model_size.bodies), model_size.group, overrides,
                         empty_known=empty_known)
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
        found = _first_accepting_variant(path, lines, overrides, getattr(model_size, "variants", ()) or ())
        if found is not None:
            out["variant"] = {**found[0], "witness": [s.to_json() for s in found[1].path]}
    return out


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c == "-" else "" for c in name.split(" ")[0])


def _variant_path(path: str | Path, tag: str) -> Path:
    """Where a log re-validated under a variant (``tag``) is kept: beside the log at ``path``."""
    return Path(str(path).replace(".observed.ndjson", "") + f".variant-{tag}.observed.ndjson")


def _settle_answer(ans: dict) -> list[str]:
    """A settle's answer as the model's action names it: the face's status, any other status an
    error, nothing when the call failed in gRPC (the answer unknown to the client)."""
    if "grpc" in ans:
        return []
    return [_ANSWER.get(ans.get("status")) or "error"]


def _first_accepting_variant(path: str | Path, lines: list[dict], base_config: dict, variants: Any, *,
                             max_states: int | None = None) -> tuple[dict, Any] | None:
    """The upstream choices the seed leaves open, each a variant of the model, tried in order on a
    rejected log: the first whose log (``lines`` under ``base_config`` plus the variant's fields,
    written beside ``path``) ``conq validate`` accepts, as (its ``variant`` record, the validation);
    None when no variant accepts it."""
    from conq.conformance.validate import validate_file

    bound = {} if max_states is None else {"max_states": max_states}
    for name, fields in variants:
        vpath = _variant_path(path, _slug(name))
        write_observed(vpath, [dict(lines[0], config={**base_config, **fields})] + lines[1:])
        vv = validate_file("ordered-consumption", str(vpath), **bound)
        if vv.verdict == "accepted":
            return {"name": name, "fields": fields, "log": str(vpath), "accepted": vv.accepted}, vv
    return None


# ------------------------------------------------------------------------------ larger workloads
# Issue 19: every workload's trace validated, not only the model-sized ones.  ``group_log`` and
# ``validate_groups`` were written with the auto-renew work (c86e824, "larger runs validated per
# group") and never called; they validated a whole FIFO group against push-fifo-upstream, which is
# not sound for the ``fifo`` part: its two message groups g0 and g1 both hash to queue 0, and the
# broker withholds a message only behind an unsettled one *of its message group*
# (impl/ordered_consumption/broker.py, "FIFO per message group"), while the model withholds every
# message of a queue behind any invisible one (model.py ``_receive``, ``server_gate``): the model has
# one message group per queue.  They now project the run onto *units* the model holds.
#
# A unit is one consumer group (of one push consumer, or several sharing it: below) on one topic and,
# for a FIFO group, one message group of it: the stored copies the group received of that message group, the group's
# receives, settles and listener calls of those copies.  Why the projection is sound:
#
# * per consumer group: the broker keeps a consumer group's deliveries, handles, gate and assignment
#   in its own per-group state (broker.py ``_gq``: one ``_GQ`` per (queue, group)); no request of
#   another group reads or changes it, and each push consumer is its own client (its own process
#   queues), so the group's events are a run of the model's group of clients against one broker;
# * per message group (FIFO): the broker's gate and order are per message group, so the group's
#   deliveries of g0 are exactly those of a queue holding only g0's copies; what the projection drops
#   is no model step of the unit: a receive that brought only other groups' messages leaves the unit's
#   state as it was (it took none of them; logging it as "nothing" would claim none was deliverable,
#   so it is left out), other groups' listener calls and settles touch other copies; the other
#   groups' copies count in the client's cache thresholds and not in the model's, which only lets the
#   model receive more (a full cache only withholds a receive: ``_receive`` "full");
# * a settle carrying a handle the face never gave (upstream's empty handle, DEV: the
#   ``settle-with-received-handle`` divergence) is mapped by its message id when that names one copy
#   of the unit: the model then judges the answer the server gave it;
# * the configuration is the model's upstream one for the mode (push-fifo-upstream /
#   push-standard-upstream) with the unit's sizes as fields: queues, each copy's queue and body size
#   in offset order, the consumer's cache thresholds, max attempts, ``expiry_while_held`` (the face
#   does not renew unless the workload sets ``renew``), ``server_faults`` when the workload injects
#   any, no rebalance (one consumer holds every queue).
#
# A group shared by several push consumers (``fifo``'s PF2: c-fifo2a and c-fifo2b) is one unit per
# message group too, against the same configuration with ``consumers`` = the group's push consumers
# (model.py "several push consumers"; the named configuration push-fifo-shared-group is its
# reference-rule sibling): the broker couples the clients only through the group's state (one
# client's ack makes the next FIFO message deliverable to the other, a delivery goes to one client,
# a copy the other still holds after a redelivery has a refused handle), and that state is what the
# model's group shares, while each client keeps its own process queues and copies.  Projecting per
# client instead would drop steps of the shared state (the other client's deliveries and settles),
# which is why the group is one log.  Each call names its client in its parameter, the model's
# numbering of the group's process queues and copies client by client (model.py ``group_param``):
# ``["receive_answer", c * queues + q, ...]``, ``["listener_returns", c * copies + m, ...]``,
# ``["ack_answer", c * copies + m, ...]``; observations name the copies themselves.  c is the
# consumer's place among the group's push consumers in the workload, matched to the wire's client id
# by its ``startup`` event (``_consumer_index``).
#
# Reassignment, and groups under exclusive assignment (issue 19).  Which client holds which queue is
# what the broker answers each client's QueryAssignment (broker.py ``query_assignment``: "shared"
# every readable queue; "exclusive" the queues k with k mod n = i for the client at place i of the
# group's live client ids in sorted order, as upstream apache/rocketmq
# ``QueryAssignmentProcessor.doLoadBalance`` sorts ``cidAll`` -- the ids ``ConsumerManager`` holds
# from heartbeats -- and allocates over it; a client joins on its settings / heartbeat and leaves on
# NotifyClientTermination, ``unregister``, so every later query is answered over the new membership),
# and the client follows its *answers* (push_consumer.py ``__update_topic_assignment``: a queue no
# longer assigned has its process queue dropped, ``__drop_message_queues``; an assigned queue
# without one gets a new one, ``__process_message_queues``).  So:
#
# * c, the model's consumer, is the client's place among the group's consumers' client ids in
#   sorted order under exclusive assignment (the broker's order: with every consumer live the
#   broker's split is exactly the model's initial one, queue q to consumer q mod consumers,
#   ``exclusive_assignment``), and the place of its consumer in the workload under shared assignment
#   (the consumers are interchangeable there);
# * each client's process queues start as the model's consumer c's (shared: every queue; exclusive:
#   q mod consumers = c), and every OK assignment answer that differs from what the client holds is
#   ``["drop_process_queue", c * queues + q]`` / ``["create_process_queue", c * queues + q]`` for
#   the queues of the unit (a queue without a copy of the unit has no process queue in the model),
#   placed as for a model-sized run (module docstring, "Reassignment"): a create at the answer, a
#   drop at the answer or after the last logged receive of that client and queue that came later
#   (it was in flight when the client handled the answer);
# * a consumer leaving mid-run (the worker's ``leave`` event, just before its ``shutdown()``:
#   push_consumer.py ``_pre_shutdown`` drops every process queue before the client sends
#   NotifyClientTermination) drops every process queue it holds, placed the same way; a consumer
#   joining mid-run is a consumer of the model from the start that makes no step until it is
#   answered (the model never forces a receive);
# * an expiry the runner causes (``{"event": "server", "call": "expire"}``) is ``["expire", m]``
#   at that point, m the copy (by its core id); other expiries stay hidden;
# * when the unit's log has a drop or create, the configuration gets ``rebalance`` (and
#   ``exclusive_assignment`` under exclusive assignment with several consumers) and the two actions
#   are no longer hidden (each is logged where it happens); with none, the fields are as before.
#
# The client's other drop, its watchdog (``__drop_expired_message_queue``: a process queue idle for
# three times long polling plus the request timeout, dropped and rebuilt at once), is not on the
# wire and not mapped: with the face's 1 s long polling and the worker's 3 s timeout it needs 12 s
# without a receive on a queue held, and a held queue's receive loop never stops while its cache is
# below its thresholds (the groups of several consumers in the workloads never fill theirs).  Python's drop discards nothing: every received message was
# handed to consumption already (``__handle_received_message`` -> ``execute_consume``), while the
# model's drop discards a copy still cached; the model's dispatch is hidden and may come first, so
# this is a choice of the witness, not a divergence.
#
# Validation is bounded by ``max_states`` (states per closure): a bound that cut the search is
# ``incomplete``, never ``accepted``.

#: a unit is validated when it has at most this many stored copies (the model's state grows with them)
MAX_GROUP_MESSAGES = 8
#: variants tried on a rejected unit log, per configuration (workloads.NO_MEMO: upstream consumes a
#: redelivery again after a rejected settle, DEV-021)
UNIT_VARIANTS = {"push-fifo-upstream": (("push-fifo-no-memo (no remembered outcome, DEV-021)",
                                         {"remember_outcome": False}),)}


def _core(handle: str | None) -> str:
    return (handle or "").split("|", 1)[0]


def group_units(w: Any) -> list[tuple[str, str, str | None, str | None]]:
    """The units of a workload (module comment above): (unit name, consumer group, message group or
    None, why not validated or None), in name order."""
    out = []
    for group in sorted({c["group"] for c in w.push} | {c["group"] for c in w.simple}):
        consumers = [c for c in w.push if c["group"] == group]
        simple = [c for c in w.simple if c["group"] == group]
        if simple:
            # the simple consumer's own mapping ("the simple consumer (SC)" below)
            why = None
            if consumers or len(simple) != 1:
                why = (f"{len(simple)} simple and {len(consumers)} push consumers share the group: the model has "
                       "one client per group")
            elif len(simple[0]["topics"]) != 1:
                why = "a consumer of several topics: the model has one topic"
            out.append((group, group, None, why))
            continue
        if len({tuple(c["topics"]) for c in consumers}) != 1 or len(consumers[0]["topics"]) != 1:
            why = ("a consumer of several topics: the model has one topic" if len(consumers[0]["topics"]) != 1
                   else "the group's push consumers subscribe to different topics: the model has one topic")
            out.append((group, group, None, why))
            continue
        if len({(c.get("max_cache_count", 1024), c.get("max_cache_bytes", 64 * 1024 * 1024)) for c in consumers}) != 1:
            out.append((group, group, None, "the group's push consumers have different cache limits: the model's "
                        "are one configuration field for all"))
            continue
        topic = consumers[0]["topics"][0]
        if w.group(group).fifo:
            mgs = sorted({m.get("group") for p in w.producers for m in p["messages"] if m["topic"] == topic})
            out += [(f"{group}/{mg}", group, mg, None) for mg in mgs]
        else:
            out.append((group, group, None, None))
    return out


def _consumer_index(w: Any, events: list[dict], group: str) -> tuple[dict, dict] | None:
    """Several push consumers in one group (PF2, comment above): (client id -> the model's consumer
    index, consumer name -> index).  Under shared assignment the index is the consumer's place among
    the group's push consumers in the workload (the model's consumers are interchangeable there: each
    holds every queue from the start); under exclusive assignment it is the place of the consumer's
    client id among the group's consumers' client ids in sorted order, the broker's order (comment
    above, "Reassignment"), so that the model's initial split is the broker's with every consumer
    live.  The client id is the one its ``startup`` event names; a client id without one takes the
    first free index in order of appearance.  None when more client ids than consumers speak for
    the group."""
    names = [c["name"] for c in w.push if c["group"] == group]
    started: dict = {}  # consumer name -> client id
    for e in events:
        if e.get("event") == "api" and e.get("call") == "startup" and e.get("client") in names and e.get("client_id"):
            started[e["client"]] = e["client_id"]
    if w.group(group).assignment == "exclusive":
        # the started consumers in the order of their client ids, then the others in workload order
        order = sorted(started, key=lambda n: started[n]) + [n for n in names if n not in started]
        by_name = {n: i for i, n in enumerate(order)}
    else:
        by_name = {n: i for i, n in enumerate(names)}
    by_cid: dict = {cid: by_name[n] for n, cid in started.items()}
    for e in events:
        if e.get("kind") == "rpc" and e["request"].get("group") == group and e.get("client_id") not in by_cid:
            free = [i for i in range(len(names)) if i not in by_cid.values()]
            if not free:
                return None
            by_cid[e.get("client_id")] = free[0]
    return by_cid, by_name


def group_log(w: Any, events: list[dict], group: str, message_group: str | None = None, *,
              empty_known: bool = True) -> tuple[list[dict] | None, dict]:
    """The observed log of one unit of a run (module comment above) and what it holds: (lines or None,
    info); ``info["why"]`` says why there is no log."""
    consumers = [x for x in w.push if x["group"] == group]
    c = consumers[0]
    nc = len(consumers)  # push consumers of the group
    g = w.group(group)
    if nc > 1:
        named = _consumer_index(w, events, group)
        if named is None:
            return None, {"messages": None, "why": f"more clients than the group's {nc} push consumers"}
        by_cid, by_name = named

    def at(e: dict, x: int, size: int) -> int:
        """The model's parameter of queue or copy ``x`` in a call of the client the event ``e`` names: ``x``
        with one consumer; with several, consumer i's is ``i * size + x`` (``size``: the queues for a
        process queue, the copies for a copy; model.py ``group_param``)."""
        if nc == 1:
            return x
        i = by_name.get(e.get("client")) if e.get("event") == "listener" else by_cid.get(e.get("client_id"))
        return i * size + x
    topic = next(t for t in w.topics if t.name == c["topics"][0])
    copies: dict[str, tuple] = {}  # core id -> (queue, offset, body, client message id)
    others: set = set()  # core ids of the group's copies of other message groups
    for e in events:
        if e.get("kind") == "rpc" and e["name"] == "ReceiveMessage" and e["request"].get("group") == group:
            for m in e["answer"].get("messages") or ():
                mine = message_group is None or m.get("message_group") == message_group
                (copies.__setitem__(_core(m["handle"]), (m["queue"], m["offset"], m["body"], m["message_id"]))
                 if mine else others.add(_core(m["handle"])))
    if not copies:
        return None, {"messages": 0, "why": "no copy of the unit was received"}
    if len(copies) > MAX_GROUP_MESSAGES:
        return None, {"messages": len(copies), "why": f"more than {MAX_GROUP_MESSAGES} stored copies"}
    order = sorted(copies, key=lambda k: copies[k][:2])
    index = {k: i for i, k in enumerate(order)}
    by_mid: dict[str, list] = {}
    for k in order:
        by_mid.setdefault(copies[k][3], []).append(index[k])
    queues = {copies[k][0] for k in order}
    fields = {"queues": topic.queues, "msg_queue": [copies[k][0] for k in order],
              "msg_size": [len(copies[k][2].encode()) for k in order],
              "cache_messages": c.get("max_cache_count", 1024), "cache_bytes": c.get("max_cache_bytes", 64 * 1024 * 1024),
              "server_batch": 32, "max_attempts": g.max_attempts, "expiry_while_held": not w.renew,
              "server_faults": bool(w.faults), "rebalance": False}
    if nc > 1:
        fields["consumers"] = nc  # the assignment: below (comment above, "Reassignment")
    config_name = "push-fifo-upstream" if g.fifo else "push-standard-upstream"
    codes = _answer_codes(config_name, fields)
    info = {"messages": len(order), "settles": 0, "config": config_name}

    def settled(req: dict) -> int | None | str:
        """The unit's copy a settle request names; None: another unit's; "?": none."""
        handle = (req.get("entries") or [{}])[0].get("handle") if "entries" in req else req.get("handle")
        mid = (req.get("entries") or [{}])[0].get("message_id") if "entries" in req else req.get("message_id")
        k = _core(handle)
        if k in index:
            return index[k]
        if k in others:
            return None
        if len(by_mid.get(mid, ())) == 1:
            return by_mid[mid][0]
        return "?"

    exclusive = nc > 1 and g.assignment == "exclusive"

    def index_of(e: dict) -> int:
        """The model's consumer of the client the event ``e`` names (0 with one consumer)."""
        if nc == 1:
            return 0
        return by_name.get(e.get("client")) if e.get("event") in ("listener", "api") else by_cid.get(e.get("client_id"))

    # the process queues each model consumer holds (comment above, "Reassignment"): the model's
    # initial assignment, then each OK assignment answer; drops placed after a later receive
    held = {i: {q for q in queues if not exclusive or q % nc == i} for i in range(nc)}
    drops: list[tuple[int, dict]] = []  # (position in ``out``, drop event)
    dropped: dict[tuple, int] = {}  # (consumer, queue) -> index in ``drops`` while the queue is not given back
    changes = 0

    def reassign(i: int, now: set) -> None:
        nonlocal changes
        for q in sorted(held[i] - now):
            drops.append((len(out), {"action": ["drop_process_queue", i * topic.queues + q]}))
            dropped[(i, q)] = len(drops) - 1
            changes += 1
        for q in sorted(now - held[i]):
            dropped.pop((i, q), None)
            out.append({"action": ["create_process_queue", i * topic.queues + q]})
            changes += 1
        held[i] = set(now)

    # with several consumers: deliveries of the unit to another consumer than the unit's previous
    # delivery (``handoffs``), and deliveries of a copy to another consumer than its previous delivery
    # (``cross_redeliveries``: the redelivery path across consumers)
    holder: dict[int, int] = {}  # copy -> the consumer its last delivery went to
    prev: int | None = None
    info.update(handoffs=0, cross_redeliveries=0)
    out: list[dict] = []
    terminating: set = set()
    for e in events:
        if e.get("kind") == "rpc" and e["name"] == "NotifyClientTermination":
            terminating.add(e["client_id"])
        if e.get("event") == "server" and e.get("call") == "expire" and e.get("group") == group and e.get("applied"):
            k = e.get("core")
            if k in index:  # the runner expired a delivery of one of the unit's copies (by its core id)
                out.append({"action": ["expire", index[k]], "observation": e["result"]})
            continue
        if e.get("event") == "api" and e.get("call") == "leave" and e.get("result") == "ok" \
                and e.get("client") in {x["name"] for x in consumers}:
            reassign(index_of(e), set())  # the client drops every process queue (comment above)
            continue
        if e.get("kind") == "rpc" and e["request"].get("group") == group:
            req, ans = e["request"], e["answer"]
            if e["name"] == "QueryAssignment":
                if ans.get("status") == "OK" and req.get("topic", topic.name) == topic.name:
                    reassign(index_of(e), set(ans.get("queues") or ()) & queues)
                continue
            if e["name"] == "ReceiveMessage":
                if req["queue"] not in queues:
                    continue  # no copy of the unit on that queue: the model has no receive loop there
                mine = [m for m in ans.get("messages") or () if _core(m["handle"]) in index]
                if ans.get("messages") and not mine:
                    continue  # only other message groups' copies: no step of the unit (comment above)
                ev = _receive_event(req, {**ans, "messages": mine}, lambda m: index[_core(m["handle"])],
                                    answer_codes=codes, empty_known=empty_known,
                                    terminating=e["client_id"] in terminating)
                if ev is not None:
                    i = index_of(e)
                    for x in mine:  # who got each delivery (several consumers: hand-overs, below)
                        k = index[_core(x["handle"])]
                        if nc > 1 and prev is not None and prev != i:
                            info["handoffs"] += 1
                        if nc > 1 and k in holder and holder[k] != i:
                            info["cross_redeliveries"] += 1
                        holder[k], prev = i, i
                    if (i, req["queue"]) in dropped:
                        # answered after the answer that took its queue away: the drop goes after it
                        k = dropped[(i, req["queue"])]
                        drops[k] = (len(out) + 1, drops[k][1])
                    ev["action"][1] = at(e, ev["action"][1], topic.queues)
                    out.append(ev)
            elif e["name"] in _SETTLE_CALL:
                m = settled(req)
                if m is None:
                    continue
                if m == "?":
                    return None, {**info, "why": f"a {e['name']} naming no copy (handle and message id unknown)"}
                action = [_SETTLE_CALL[e["name"]], at(e, m, len(order))]
                action += _settle_answer(ans)
                out.append({"action": action})
                info["settles"] += 1
        elif e.get("event") == "listener" and e["group"] == group:
            k = _core(e.get("handle"))
            if k in others or (message_group is not None and e.get("message_group") != message_group):
                continue
            if k not in index:
                return None, {**info, "why": "a listener call of a copy the unit never received"}
            if nc > 1 and e.get("client") not in by_name:
                return None, {**info, "why": "a listener call of a client that is no consumer of the group"}
            out.append({"action": ["listener_returns", at(e, index[k], len(order)), "ok" if e["result"] == "success" else "fail"]})
    for pos, ev in sorted(drops, key=lambda x: x[0], reverse=True):
        out.insert(pos, ev)
    hidden = HIDDEN
    if changes:
        # the unit's process queues were dropped or created: the model's rebalance, each step logged
        fields["rebalance"] = True
        hidden = [h for h in HIDDEN if h not in ("drop_process_queue", "create_process_queue")]
    if exclusive:
        fields["exclusive_assignment"] = True
    info["reassignments"] = changes
    header = {"format": "conq-trace", "version": 1, "kind": "observed", "level": "call",
              "model": "ordered-consumption", "config_name": config_name, "config": fields, "hidden": hidden}
    return [header] + [dict(ev, step=i) for i, ev in enumerate(out, 1)], info


def validate_groups(w: Any, events: list[dict], out_dir: str | Path, stem: str, *, max_states: int = 200_000,
                    empty_known: bool = True) -> dict:
    """Validate every unit of a run (``group_units``) with ``conq validate``; the run's status is the
    worst unit's: rejected > incomplete > error > accepted, and ``partial`` when every validated
    unit is accepted but some unit is not validated (each unit says why)."""
    from conq.conformance.validate import validate_file

    units: dict = {}
    for name, group, mg, why in group_units(w):
        if why is not None:
            units[name] = {"status": "not validated", "why": why}
            continue
        if any(c["group"] == group for c in w.simple):
            try:
                units[name] = validate_simple(w, events, out_dir, stem, group, max_states=max_states,
                                              empty_known=empty_known)
            except Exception as e:  # noqa: BLE001 - as for a push unit below: this unit errs, the others keep their verdicts
                units[name] = {"status": "error", "why": f"{type(e).__name__}: {e}", "group": group}
            continue
        lines, info = group_log(w, events, group, mg, empty_known=empty_known)
        if lines is None:
            units[name] = {"status": "not validated", **info}
            continue
        path = Path(out_dir) / f"{stem}.{name.replace('/', '-')}.observed.ndjson"
        write_observed(path, lines)
        try:
            v = validate_file("ordered-consumption", str(path), max_states=max_states)
        except Exception as e:  # noqa: BLE001 - a validator that cannot read the log is reported
            units[name] = {"status": "error", "log": str(path), "why": f"{type(e).__name__}: {e}", **info}
            continue
        u = {"status": v.verdict, "log": str(path), **info, "overrides": lines[0]["config"], "events": v.events,
             "accepted": v.accepted, "failed": v.failed, "allowed": v.allowed[:10], "states": v.states}
        if v.verdict == "accepted":
            from conq.conformance.ordered_consumption.upstream.coverage import path_keys

            u["coverage"] = path_keys(v.path, v.start)
        elif v.verdict == "rejected":
            # the upstream choices the seed leaves open, as for model-sized runs (validate_run): the
            # first variant that accepts the log names the divergence
            found = _first_accepting_variant(path, lines, lines[0]["config"],
                                             UNIT_VARIANTS.get(lines[0]["config_name"], ()), max_states=max_states)
            if found is not None:
                u["variant"] = found[0]
        units[name] = u
    got = {u["status"] for u in units.values()}
    status = next((s for s in ("rejected", "incomplete", "error") if s in got), None)
    if status is None:
        status = "accepted" if got == {"accepted"} else "partial" if "accepted" in got else "not validated"
    return {"status": status, "units": units}


# ------------------------------------------------------------------------- the simple consumer (SC)
# Issue 19: the simple consumer's wire mapped onto the model's simple consumer (model.py
# ``_s_actions`` / ``_s_rpc``; seed 001 "Simple consumer": every call the application makes is one
# remote call, no internal retry), at the call level (calls.py ``_compose_simple``: an application
# call and its one request, one step):
#
# =====================================  ===============================================  ==================
# wire (the group's SimpleConsumer)      call                                              observation
# =====================================  ===============================================  ==================
# ReceiveMessage answered one message    ``["simple_receive", "ok"]``                      ``["ok", [m, attempt]]``
# ReceiveMessage MESSAGE_NOT_FOUND / OK  ``["simple_receive", "ok"]``                      ``["ok", []]``
#   with nothing
# INTERNAL_SERVER_ERROR / TOO_MANY_REQ.  ``["simple_receive", "error"]`` (``throttled``      ``"error"``
#                                        under ``answer_codes``)
# REQUEST_TIMEOUT, a gRPC status, other  ``["simple_receive"]`` (answer unknown)           left out
# AckMessage                             ``["simple_ack", m, ans]``                        left out
# ChangeInvisibleDuration                ``["simple_change_invisible", m, ans]``           left out
# =====================================  ===============================================  ==================
#
# Why each rule is sound:
#
# * every receive is logged, whatever its answer (none is left out as for the push consumer): the
#   model moves its round-robin on after *every* receive answer, a failed one included (model.py
#   ``_s_rpc``, F1 of issue 14: upstream SimpleConsumerImpl.receive0 takes the next queue before it
#   sends), so a left-out receive would shift every later one onto the wrong queue.  An answer the
#   wire cannot classify stays unknown (a timeout is lost -- delivered, nobody holds it -- or not
#   applied: the client cannot tell, seed 001 has no retry to tell it);
# * the round-robin's start: upstream picks it at random (``queue_selector.py``
#   ``QueueSelector.__init__``: ``random.randint(1, 1000)``), the model starts at queue 0; the model's
#   queues are the wire's renamed by a rotation that sends the first receive's queue to 0 (the
#   model's queues are interchangeable up to rotation: model.py ``_symmetries``, "only the
#   rotations"), and each copy's ``msg_queue`` is renamed with them;
# * an empty answer means nothing of the queue was deliverable, as for the push consumer (the core
#   answers MESSAGE_NOT_FOUND only when its last check under the queue's lock found nothing:
#   broker.receive_message), except: before the last SendMessage of the topic (the model's messages
#   are all stored from the start, the run's are sent while the consumer already receives: an empty
#   answer then may precede a copy's send), after the client's NotifyClientTermination (a cancelled
#   receive takes nothing), and when the fault plan answers not-found without asking the core -- each
#   of these is logged with its answer unknown (the receive happened: the round-robin moves on);
# * the model's simple receive brings at most one message (``_s_rpc``: the first READY of the queue):
#   a receive that brought more is not mapped (the unit is not validated, ``why`` says so); the
#   workloads' simple consumers receive one message per call (``batch`` 1, workloads.py);
# * a settle names its copy by the core id of its receipt handle (as for the push units), or by its
#   message id when that names one copy; the application settles each message once, right after its
#   receive, on the one thread of its loop (worker.py), so one call is in flight at a time, which is
#   the call-level view's composition (``simple_threads`` 1); an abandoned copy and an expiry are
#   hidden (``abandon``, ``expire``): the application drops a copy whose settle failed, and the
#   invisible time (the application's, no auto-renew) runs out unseen;
# * configuration ``simple`` with the unit's sizes as fields: queues, each copy's queue and size in
#   (queue, offset) order (the model's per-queue offset order), max attempts (the server
#   dead-letters at max attempts), ``expiry_while_held`` (nothing renews a simple consumer's
#   invisible time), ``server_faults`` when the workload injects any.
#
# The Python client 5.1.2 does *not* keep the round-robin: ``simple_consumer.py``
# ``__select_topic_queue`` builds a fresh ``QueueSelector`` (a new random start) on every receive
# and selects from it, not from the one it stored with ``put_if_absent`` -- so every receive asks a
# random queue.  Seed 001 says nothing about which queue a receive asks; the model's round-robin is
# upstream Java's (REFERENCE.md §2, "round-robin topic and queue").  A log the configuration rejects
# is therefore validated again per *queue* (``per_queue``: one log per wire queue with its copies,
# its receives and their settles, against ``simple`` with one queue, where the round-robin is
# trivially kept): sound because the broker keeps each queue's deliveries apart (broker.py ``_gq``)
# and the model couples the queues of a simple consumer only through the round-robin pointer
# (``_s_rpc``); it checks every rule but the queue choice.  When every queue's log is accepted the
# unit is recorded as rejected with that projection named as the variant that accepts it.  Before
# the projection, the whole log is tried under the model's own switch for the Python client's
# choice (configuration simple-any-queue, ``simple_any_queue``: any queue per receive, no index
# kept); the projection stays the last resort (it drops the coupling of the queues altogether).

#: the model's variant for the Python client's queue choice, tried first on a rejected SC log
SIMPLE_ANY_QUEUE = ("simple-any-queue (the client picks a random queue per receive, simple_consumer.py "
                    "__select_topic_queue; model switch simple_any_queue)", {"simple_any_queue": True})
#: the name the runner reports for the per-queue projection of a rejected simple-consumer log
SIMPLE_PER_QUEUE = ("simple-any-queue (per-queue projection: the client picks a random queue per receive, "
                    "simple_consumer.py __select_topic_queue)")


def simple_log(w: Any, events: list[dict], group: str, *, empty_known: bool = True, per_queue: int | None = None,
               config_name: str = "simple", base_fields: dict | None = None) -> tuple[list[dict] | None, dict]:
    """The observed log of a simple-consumer group (comment above): (lines or None, info); ``per_queue``:
    the projection onto one wire queue (one model queue)."""
    c = next(x for x in w.simple if x["group"] == group)
    g = w.group(group)
    topic = next(t for t in w.topics if t.name == c["topics"][0])
    receives = [e for e in events if e.get("kind") == "rpc" and e["name"] == "ReceiveMessage"
                and e["request"].get("group") == group]
    if not receives:
        return None, {"messages": 0, "why": "the group made no receive"}
    n = 1 if per_queue is not None else topic.queues
    start = receives[0]["request"]["queue"]

    def mq(q: int) -> int:  # the model's queue of wire queue q (comment above: a rotation)
        return 0 if per_queue is not None else (q - start) % n

    copies: dict[str, tuple] = {}  # core id -> (queue, offset, body, client message id)
    for e in receives:
        msgs = e["answer"].get("messages") or ()
        if len(msgs) > 1:
            return None, {"messages": None, "why": f"a receive brought {len(msgs)} messages: the model's simple "
                                                   "receive brings one"}
        for m in msgs:
            if per_queue is None or m["queue"] == per_queue:
                copies[_core(m["handle"])] = (m["queue"], m["offset"], m["body"], m["message_id"])
    if not copies:
        return None, {"messages": 0, "why": "no copy of the unit was received"}
    if len(copies) > MAX_GROUP_MESSAGES:
        return None, {"messages": len(copies), "why": f"more than {MAX_GROUP_MESSAGES} stored copies"}
    order = sorted(copies, key=lambda k: (mq(copies[k][0]), copies[k][1]))
    index = {k: i for i, k in enumerate(order)}
    by_mid: dict[str, list] = {}
    for k in order:
        by_mid.setdefault(copies[k][3], []).append(index[k])
    fields = {**(base_fields or {}), "queues": n, "msg_queue": [mq(copies[k][0]) for k in order],
              "msg_size": [len(copies[k][2].encode()) or 1 for k in order], "max_attempts": g.max_attempts,
              "expiry_while_held": True, "server_faults": bool(w.faults), "simple_threads": 1}
    codes = _answer_codes(config_name, fields)
    info = {"messages": len(order), "settles": 0, "config": config_name}
    last_send = max((i for i, e in enumerate(events) if e.get("kind") == "rpc" and e["name"] == "SendMessage"
                     and any(m.get("topic") == topic.name for m in e["request"].get("messages") or ())), default=-1)
    out: list[dict] = []
    terminating: set = set()
    for i, e in enumerate(events):
        if e.get("kind") != "rpc":
            continue
        if e["name"] == "NotifyClientTermination":
            terminating.add(e["client_id"])
        req, ans = e["request"], e["answer"]
        if req.get("group") != group:
            continue
        if e["name"] == "ReceiveMessage":
            if per_queue is not None and req["queue"] != per_queue:
                continue  # another queue's receive: no step of this queue (comment above)
            known = empty_known and i > last_send and e["client_id"] not in terminating
            msgs = ans.get("messages") or ()
            status = None if "grpc" in ans else ans.get("status")
            if msgs:
                ev = {"action": ["simple_receive", "ok"],
                      "observation": ["ok", [index[_core(msgs[0]["handle"])], msgs[0]["attempt"]]]}
            elif status in _RECEIVE_NOT_APPLIED:
                code = _RECEIVE_NOT_APPLIED[status] if codes else "error"
                ev = {"action": ["simple_receive", code], "observation": code}
            elif status in ("MESSAGE_NOT_FOUND", "OK") and known:
                ev = {"action": ["simple_receive", "ok"], "observation": ["ok", []]}
            else:
                ev = {"action": ["simple_receive"]}
            out.append(ev)
        elif e["name"] in ("AckMessage", "ChangeInvisibleDuration"):
            handle = (req.get("entries") or [{}])[0].get("handle") if "entries" in req else req.get("handle")
            mid = (req.get("entries") or [{}])[0].get("message_id") if "entries" in req else req.get("message_id")
            k = _core(handle)
            if k in index:
                m = index[k]
            elif len(by_mid.get(mid, ())) == 1:
                m = by_mid[mid][0]
            elif per_queue is not None:
                continue  # another queue's copy
            else:
                return None, {**info, "why": f"a {e['name']} naming no copy (handle and message id unknown)"}
            action = ["simple_ack" if e["name"] == "AckMessage" else "simple_change_invisible", m]
            action += _settle_answer(ans)
            out.append({"action": action})
            info["settles"] += 1
    header = {"format": "conq-trace", "version": 1, "kind": "observed", "level": "call",
              "model": "ordered-consumption", "config_name": config_name, "config": fields, "hidden": HIDDEN}
    return [header] + [dict(ev, step=i) for i, ev in enumerate(out, 1)], info


def validate_simple(w: Any, events: list[dict], out_dir: str | Path, stem: str, group: str, *,
                    max_states: int = 200_000, empty_known: bool = True, base_fields: dict | None = None,
                    path: str | Path | None = None) -> dict:
    """Validate a simple-consumer group (comment above): the whole group, and when that is rejected,
    the per-queue projection as the variant that may accept it."""
    from conq.conformance.validate import validate_file

    model_sized = path is not None
    lines, info = simple_log(w, events, group, empty_known=empty_known, base_fields=base_fields)
    if lines is None:
        return {"status": "not validated", **info}
    path = Path(path) if path is not None else Path(out_dir) / f"{stem}.{group}.observed.ndjson"
    write_observed(path, lines)
    v = validate_file("ordered-consumption", str(path), max_states=max_states)
    u = {"status": v.verdict, "log": str(path), **info, "overrides": lines[0]["config"], "events": v.events,
         "accepted": v.accepted, "failed": v.failed, "allowed": v.allowed[:10], "states": v.states}
    if v.verdict == "accepted":
        from conq.conformance.ordered_consumption.upstream.coverage import path_keys

        u["coverage"] = path_keys(v.path, v.start)
        if model_sized:  # as validate_run gives it (a unit of a larger run keeps only its coverage)
            u["witness"] = [st.to_json() for st in v.path]
    elif v.verdict == "rejected":
        found = _first_accepting_variant(path, lines, lines[0]["config"], [SIMPLE_ANY_QUEUE], max_states=max_states)
        if found is not None:
            u["variant"] = found[0]
            return u
        queues = sorted({e["request"]["queue"] for e in events if e.get("kind") == "rpc"
                         and e["name"] == "ReceiveMessage" and e["request"].get("group") == group})
        logs, accepted, verdicts = [], 0, []
        for q in queues:
            ql, qinfo = simple_log(w, events, group, empty_known=empty_known, per_queue=q, base_fields=base_fields)
            if ql is None:
                verdicts.append("accepted" if qinfo.get("messages") == 0 else "not validated")
                continue
            qpath = _variant_path(path, f"queue{q}")
            write_observed(qpath, ql)
            qv = validate_file("ordered-consumption", str(qpath), max_states=max_states)
            verdicts.append(qv.verdict)
            logs.append(str(qpath))
            accepted += qv.accepted
        if verdicts and set(verdicts) == {"accepted"}:
            u["variant"] = {"name": SIMPLE_PER_QUEUE, "fields": {"queues": 1}, "log": ", ".join(logs),
                            "accepted": accepted}
    return u
