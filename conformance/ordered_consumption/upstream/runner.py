"""Run a workload: the project's broker behind the gRPC face, the real client in a worker process.

``run(workload, seed)``:

1. creates the workload's topics and groups on a fresh ``Broker``, starts ``GrpcFront`` on
   127.0.0.1 (port 0) with the workload's seeded ``FaultPlan`` and the ``Recorder`` around its servicer;
2. starts ``python -m conq.conformance.ordered_consumption.upstream.worker`` with the job on stdin and reads its
   events (listener calls, API calls) into the same recorder;
3. waits, by *state*, for the end of the run: every send done and every subscribed group with nothing
   unsettled on the broker and no settle RPC awaiting a retry -- or a *stall*: a settle the client
   repeats ``STALL_REPEATS`` times after the broker answered it ``INVALID_RECEIPT_HANDLE`` (it can
   never succeed).  Seconds are only a safety cap (``cap``) that marks the run ``incomplete``;
4. tells the worker to stop, stops the face and the broker (no thread of ours is left; the worker
   process has exited or is killed), and checks the recorded run (``check``).

``check`` holds the observed run to the claims of the ordered-consumption model that can be judged
from the wire and the listener (spec/ordered-consumption.md "Properties"; counts only):

* ``nothing-lost``: every message the producer was told was sent is, for every subscribed group,
  consumed successfully or dead-lettered;
* ``dlq-only-always-failing``: the client dead-letters only messages the listener always fails (the
  server's own dead-lettering at max attempts after expiries is noted, not counted);
* ``consumed-at-most-max``: no consumption beyond the group's max attempts, counting as the model does
  (a delivery's attempt plus the local re-consumptions of that delivery before it);
* ``fifo-order``: in a FIFO group, the first successful consumptions of a message group's messages
  come in send order;
* ``fifo-one-in-consumption``: one FIFO consumer has at most one message of a message group in
  consumption (from the listener call to the last settle request of that delivery);
* ``no-retry-after-invalid-handle`` / ``no-stall``: a settle answered ``INVALID_RECEIPT_HANDLE`` is not
  repeated with the same handle (DEV-020: the reference stops there);
* ``producer-throttle-retried``: a send answered ``TOO_MANY_REQUESTS`` is retried after the server's
  back-off (seed 001 Producer, 特别地);
* ``txn-single-attempt``: a transactional message is sent with exactly one request (seed 001 Producer);
* ``standard-settle-retried``: standard mode settles a delivery with one request (seed; DEV-006);
* ``settle-with-received-handle``: every settle request carries a receipt handle the client received;
* (noted, not a verdict: a ``shutdown()`` that did not return within the worker's cap.)

Each finding is a ``Divergence`` with the claim, the evidence (the events, with their step numbers in
the written trace) and the seed that reproduces the run.  A *model-sized* workload (``model_size``:
the messages, queues and thresholds of a named configuration) is also validated against the model
itself: ``observed.py`` writes its observed log and ``conq validate`` must accept it
(``model-accepts-log``; a rejection carries the longest accepted prefix and what the model allowed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conq.conformance.ordered_consumption.upstream.recorder import Recorder
from conq.conformance.ordered_consumption.upstream.workloads import Workload
from conq.impl.ordered_consumption import Broker, FaultPlan, MessageType, RetryPolicy
from conq.impl.ordered_consumption.grpc_front import GrpcFront

__all__ = ["CLASSIFICATION", "CLIENT", "CLIENT_VERSION", "OBSERVED_MODEL", "SHUTDOWN_CAP", "STALL_REPEATS",
           "Divergence", "RunResult", "check", "run"]

CLIENT = "rocketmq-python-client"
#: the header's model name of an observed trace (see ``run``)
OBSERVED_MODEL = "ordered-consumption.observed"
STALL_REPEATS = 3  # a settle repeated this often after INVALID_RECEIPT_HANDLE is a stall
WORKER = "conq.conformance.ordered_consumption.upstream.worker"
SHUTDOWN_CAP = 5.0  # seconds a client's shutdown() may take in the worker before it is reported stuck
_SETTLES = ("AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue")
_FINAL = ("OK", "INVALID_RECEIPT_HANDLE", "MESSAGE_NOT_FOUND", "BAD_REQUEST")


def _client_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(CLIENT)
    except PackageNotFoundError:
        return "not installed"


CLIENT_VERSION = _client_version()


#: how each claim's divergence is classified (issue 19: a bug in the upstream client, an upstream
#: choice the seed leaves open or the project already records as a variant, or a gap in conq's model);
#: the reasoning is in spec/ordered-consumption.md, "The upstream client".
CLASSIFICATION = {
    "no-retry-after-invalid-handle": "upstream bug (the seed's literal rule, model variant "
                                     "push-fifo-settle-until-success, DEV-020)",
    "consumed-at-most-max": "upstream bug (FIFO local attempts restart at 1 on every delivery instead of "
                            "counting from its delivery attempt)",
    "producer-throttle-retried": "upstream bug against seed 001 Producer (the model's claim throttled-send-retried; "
                                 "variant producer-upstream-python, DEV-031)",
    "txn-single-attempt": "upstream variant (model config producer-upstream)",
    "model-accepts-log": "conq validate rejected the observed log: see the failed event and the seed",
    "model-accepts-log-as-variant": "upstream choice the seed leaves open: the configuration rejects the log, the "
                                    "model variant named in the detail accepts it",
    "stops-receiving-dropped-queue": "upstream bug: a queue taken away from the consumer is still received from",
    "settle-with-received-handle": "upstream bug (a failed change-invisible answer overwrites the message's receipt "
                                   "handle with the answer's empty one; the retry can never succeed)",
    "fifo-one-in-consumption": "upstream variant (model config push-fifo-upstream: no process-queue lock, the "
                               "next message is consumed while the previous one's settle is still retried; DEV-022)",
    "standard-settle-retried": "upstream variant (DEV-006: standard ack / change-invisible retried every second)",
    "simple-receive-round-robin": "upstream choice the seed leaves open (seed 001 names no queue order; upstream "
                                  "Java and the model ask the queues round-robin, F1): simple_consumer.py "
                                  "__select_topic_queue selects from a fresh QueueSelector (random start) on every "
                                  "receive; recorded as the model's variant simple-any-queue (switch simple_any_queue), which accepts the SC log",
}


@dataclass
class Divergence:
    claim: str
    detail: str
    evidence: list = field(default_factory=list)

    @property
    def classification(self) -> str:
        return CLASSIFICATION.get(self.claim, "unclassified: to be investigated")

    def as_dict(self) -> dict:
        return {"claim": self.claim, "classification": self.classification, "detail": self.detail,
                "evidence": self.evidence}


@dataclass
class RunResult:
    workload: str
    seed: int
    recorder: Recorder
    broker_stats: dict
    dead_letters: dict
    fault_answers: dict
    worker_exit: int | None
    worker_stderr: str
    end: str  # "settled", "stall", "worker-exited", "incomplete"
    divergences: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    trace_path: str | None = None
    validation: Any = None

    @property
    def rpc_counts(self) -> Counter:
        return self.recorder.rpc_counts

    def summary(self) -> dict:
        return {"workload": self.workload, "seed": self.seed, "end": self.end, "worker_exit": self.worker_exit,
                "rpcs": dict(sorted(self.rpc_counts.items())), "rpc_total": sum(self.rpc_counts.values()),
                "faults_injected": sum(n for (_, k), n in self.fault_answers.items() if k != "ok"),
                "listener_calls": sum(1 for e in self.recorder.events() if e.get("event") == "listener"),
                "divergences": [d.as_dict() for d in self.divergences], "notes": list(self.notes),
                "trace": self.trace_path, "validation": self.validation}


def _setup(w: Workload) -> Broker:
    b = Broker(name="conq-broker").start()
    for t in w.topics:
        mtype = MessageType.FIFO if t.fifo else MessageType.TRANSACTION if t.transactional else MessageType.NORMAL
        b.create_topic(t.name, t.queues, message_type=mtype)
    for g in w.groups:
        b.create_consumer_group(g.name, fifo=g.fifo, retry_policy=RetryPolicy(g.max_attempts, durations=g.durations),
                                assignment=g.assignment)
    return b


def job_of(w: Workload, endpoint: str, seed: int) -> dict:
    return {"endpoint": endpoint, "seed": seed, "producers": list(w.producers), "push": list(w.push),
            "simple": list(w.simple), "shutdown_cap": SHUTDOWN_CAP,
            "produce_first": any(p.get("produce_first") for p in w.producers)}


def _stall(rec: Recorder) -> list[dict]:
    """Settle RPCs repeated with a handle the broker already answered INVALID_RECEIPT_HANDLE for."""
    invalid: set = set()
    repeats: list[dict] = []
    for e in rec.rpcs():
        if e["name"] not in _SETTLES:
            continue
        req = e["request"]
        handles = [x["handle"] for x in req.get("entries", [])] or [req.get("handle")]
        ids = [x["message_id"] for x in req.get("entries", [])] or [req.get("message_id")]
        key = (e["name"], req.get("group"), tuple(handles), tuple(ids))
        if key in invalid:
            repeats.append(e)
        st = e["answer"].get("status")
        if st == "INVALID_RECEIPT_HANDLE":
            invalid.add(key)
    return repeats


def _pending_settles(rec: Recorder, groups: set) -> int:
    """Push consumers' messages whose last settle RPC got a retriable failure (the client retries it;
    a simple consumer never does: its application got the error)."""
    last: dict = {}
    for e in rec.rpcs():
        if e["name"] not in _SETTLES or e["request"].get("group") not in groups:
            continue
        req = e["request"]
        ids = [x["message_id"] for x in req.get("entries", [])] or [req.get("message_id")]
        st = e["answer"].get("grpc") or e["answer"].get("status")
        for mid in ids:
            last[(req.get("group"), mid)] = st
    return sum(1 for st in last.values() if st not in _FINAL)


#: ``conq validate``'s bound (states per closure) for the units of a larger run: a count, so a verdict
#: never depends on the machine; a closure it cuts makes the unit ``incomplete``
VALIDATE_MAX_STATES = 200_000


def run(w: Workload, seed: int, *, out: str | Path | None = None, cap: float = 120.0,
        python: str | None = None, validate_max_states: int = VALIDATE_MAX_STATES) -> RunResult:
    """Run one workload with one seed (see the module docstring)."""
    broker = _setup(w)
    rec = Recorder()
    plan = FaultPlan(seed=seed, rates=w.faults, max_delivery_faults=w.max_delivery_faults) if w.faults else None
    front = GrpcFront(broker, plan=plan, auto_renew_invisible=w.auto_renew_invisible, servicer_wrapper=rec.wrap,
                      renew=w.renew)
    front.start()
    err = tempfile.TemporaryFile(mode="w+b")
    proc = None
    reader = None
    end = "incomplete"
    flags = {"producers-done": False, "closed": False}
    stats: dict = {}
    dead: dict = {}
    try:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen([python or sys.executable, "-m", WORKER],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, text=True)

        def read() -> None:
            for line in proc.stdout:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("event") in flags:
                    flags[ev["event"]] = True
                rec.add(ev)

        reader = threading.Thread(target=read, name="conq-upstream-reader")
        reader.start()
        proc.stdin.write(json.dumps(job_of(w, front.endpoint, seed)) + "\n")
        proc.stdin.flush()
        subs = w.subscriptions()
        push_groups = {g for g, _, role in subs if role == "push"}
        script = _Script(w, broker, rec, proc, front)
        deadline = time.monotonic() + cap
        while True:
            if proc.poll() is not None:
                end = "worker-exited"
                break
            script.advance()
            if flags["producers-done"] and script.done:
                if len(_stall(rec)) >= STALL_REPEATS:
                    end = "stall"
                    break
                if all(broker.unsettled(g, t) == 0 for g, t, _ in subs) and _pending_settles(rec, push_groups) == 0:
                    end = "settled"
                    break
            if time.monotonic() > deadline:
                end = "incomplete"
                break
            time.sleep(0.02)
        if not script.done:
            rec.add({"event": "script", "client": "runner", "result": f"not done: step {script.i} {script.waiting}"})
        stats = {f"{g}/{t}": broker.group_stats(g, t) for g, t, _ in subs}
        dead = {f"{g}/{t}": [(d.body.decode(), d.by, d.attempt) for d in broker.dead_letters(g, t)] for g, t, _ in subs}
        if proc.poll() is None:
            try:
                proc.stdin.write("stop\n")
                proc.stdin.flush()
            except OSError:
                pass
    finally:
        if proc is not None:
            try:
                # each client's shutdown() has SHUTDOWN_CAP seconds in the worker (then it is reported stuck)
                proc.wait(timeout=10.0 + SHUTDOWN_CAP * (len(w.producers) + len(w.push) + len(w.simple)))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                end = end + "+worker-killed"
            if proc.stdin:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        if reader is not None:
            reader.join()
        if proc is not None and proc.stdout:
            proc.stdout.close()
        front.stop()
        broker.stop()
    err.seek(0)
    stderr = err.read().decode("utf-8", "replace")
    err.close()
    result = RunResult(w.name, seed, rec, stats, dead,
                       dict(front.channel.answers) if front.channel is not None else {},
                       proc.returncode if proc is not None else None, stderr[-4000:], end)
    result.divergences = check(w, result)
    if out is not None:
        path = Path(out) / f"{w.name}-seed{seed}.ndjson"
        # The wire-level actions are not the model's, so the header names the unregistered model
        # OBSERVED_MODEL (a reader takes the actions as they are); ``generator`` says which model the
        # observations are of, and the observed run (client version, workload, how it ended).  The
        # model's own observed log (``kind: observed``) is written for model-sized runs (below).
        header = {"format": "conq-trace", "version": 1, "model": OBSERVED_MODEL, "config": {},
                  "seed": seed, "generator": {"mode": "recorded", "view": "observed",
                                              "of_model": "ordered-consumption",
                                              "source": f"{CLIENT}=={CLIENT_VERSION}", "end": end,
                                              "workload": w.describe()}}
        rec.write(path, header)
        result.trace_path = str(path)
        if w.model_size is not None:
            from conq.conformance.ordered_consumption.upstream.observed import validate_run

            try:
                # an empty receive answer means "nothing deliverable" unless the plan answers receives
                # not-found without asking the core (observed.py, second table)
                result.validation = validate_run(rec.events(), w.model_size,
                                                 Path(out) / f"{w.name}-seed{seed}.observed.ndjson",
                                                 empty_known="not-found" not in w.faults.get("receive_message", {}),
                                                 workload=w)
            except Exception as e:  # noqa: BLE001 - a validator that cannot read the log is reported
                result.validation = {"status": "error", "why": f"{type(e).__name__}: {e}"}
            if result.validation["status"] == "rejected":
                f = result.validation["failed"] or {}
                variant = result.validation.get("variant")
                result.divergences.append(Divergence(
                    "model-accepts-log" if variant is None else "model-accepts-log-as-variant",
                    f"conq validate rejected the observed log {result.validation['log']} "
                    f"after {result.validation['accepted']} of {result.validation['events']} events; failed: {f}; "
                    f"the model allowed next: {result.validation['allowed']}"
                    + (f"; accepted by the variant {variant['name']} ({variant['log']})" if variant else "")))
        else:
            # a larger workload: each consumer group (FIFO: each message group of it) that the model
            # holds is validated on its own projection of the run (observed.py, "larger workloads")
            from conq.conformance.ordered_consumption.upstream.observed import validate_groups

            try:
                result.validation = validate_groups(w, rec.events(), out, f"{w.name}-seed{seed}",
                                                    max_states=validate_max_states,
                                                    empty_known="not-found" not in w.faults.get("receive_message", {}))
            except Exception as e:  # noqa: BLE001 - a validator that cannot read the log is reported
                result.validation = {"status": "error", "why": f"{type(e).__name__}: {e}"}
            for unit, u in sorted((result.validation.get("units") or {}).items()):
                if u["status"] == "rejected":
                    variant = u.get("variant")
                    result.divergences.append(Divergence(
                        "model-accepts-log" if variant is None else "model-accepts-log-as-variant",
                        f"conq validate rejected the observed log {u['log']} of unit {unit} ({u['config']}, "
                        f"{u['messages']} copies) after {u['accepted']} of {u['events']} events; failed: {u['failed']}; "
                        f"the model allowed next: {u['allowed']}"
                        + (f"; accepted by the variant {variant['name']} ({variant['log']})" if variant else "")))
    return result


# ---------------------------------------------------------------------------------------------- script
class _Script:
    """The broker's side of a scripted workload (``Workload.script``), one step at a time.

    ``advance()`` (called by the run loop) performs the current step if its condition holds, by state
    only: a recorded event (the listener's hold, a listener call, the assignment answer the client got)
    or a count (no receive of the dropped queue in flight, and none begun, over two polls of the loop).
    A step that never comes true leaves the run to its safety cap (``incomplete``), never a verdict.
    Every broker event the script causes is recorded (``{"event": "server", ...}``) at the moment it
    happens, so the observed log can place it (``observed.py``).

    A step acts on the workload's first push consumer unless it names one: ``"consumer": NAME``, or
    ``"consumer": "holder"``, the consumer whose listener made the hold the last ``on: hold`` step
    waited for (both consumers of a shared group may be the one the broker hands a message to, so the
    script follows the one that got it).  Steps for groups of several consumers (issue 19): ``{"do":
    "join", "consumer"}`` / ``{"do": "leave", "consumer"}`` (the worker starts a ``late`` consumer /
    shuts one down: it joins / leaves its group), ``{"on": "assigned", "consumer", "queue", "present"}``
    (that consumer's client was answered an assignment with / without the queue after the last change
    the script made), ``{"on": "quiet", "consumer", "queue"}`` (no receive of that queue by that client
    in flight, and none begun, over two polls: its process queue is dropped)."""

    def __init__(self, w: Workload, broker: Broker, rec: Recorder, proc: Any, front: Any = None) -> None:
        self.steps = list(w.script)
        self.w = w
        self.i = 0
        self.broker, self.rec, self.proc, self.front = broker, rec, proc, front
        self.consumer = w.push[0] if w.push else None
        self.holder: str | None = None  # the consumer whose hold the last ``on: hold`` step saw
        self.since_ns = 0  # when the last broker or membership change of the script was made
        self.quiet: tuple | None = None  # (receives begun) at the last poll with none in flight
        self.started = False
        self.waiting = ""

    @property
    def done(self) -> bool:
        return self.i >= len(self.steps)

    def _consumer(self, st: dict) -> dict | None:
        name = st.get("consumer")
        if name == "holder":
            name = self.holder
        if name is None:
            return self.consumer
        return next((c for c in self.w.push if c["name"] == name), None)

    def _client_id(self, c: dict | None = None) -> str | None:
        c = c or self.consumer
        for e in self.rec.events():
            if e.get("event") == "api" and e.get("call") == "startup" and e.get("client") == c["name"]:
                return e.get("client_id")
        return None

    def _core_id(self, body: str) -> str | None:
        """The broker's id of the message with this body (from the handles the face handed out)."""
        for e in reversed(self.rec.rpcs("ReceiveMessage")):
            for m in e["answer"].get("messages") or ():
                if m["body"] == body:
                    return m["handle"].split("|", 1)[0]
        return None

    def _assignment_after(self, cid: str, group: str, queue: int | None, present: bool) -> bool:
        for e in self.rec.rpcs("QueryAssignment"):
            if e["client_id"] == cid and e["t_ns"] > self.since_ns and e["answer"].get("status") == "OK" \
                    and e["request"]["group"] == group:
                qs = e["answer"].get("queues") or []
                if queue is None or (queue in qs) == present:
                    return True
        return False

    def _quiet(self, cid: str, topic: str, q: int) -> bool:
        """No receive of queue q by client cid in flight, and none began, over two polls."""
        in_flight, begun = self.rec.receives((cid, topic, q))
        self.waiting = f"no receive of queue {q} in flight"
        if in_flight:
            self.quiet = None
            return False
        if self.quiet == (begun,):
            return True
        self.quiet = (begun,)
        return False

    def advance(self) -> None:
        while not self.done and self._step(self.steps[self.i]):
            self.i += 1
            self.started = False
            self.quiet = None

    def _command(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _step(self, st: dict) -> bool:
        events = self.rec.events()
        if st.get("on") == "hold":
            self.waiting = f"hold {st['body']} {st['call']}"
            for e in events:
                if e.get("event") == "hold" and e["body"] == st["body"] and e["n"] == st["call"]:
                    self.holder = e.get("client")
                    return True
            return False
        if st.get("on") == "listener":
            self.waiting = f"listener {st['body']} attempt {st['attempt']}"
            return any(e.get("event") == "listener" and e["body"] == st["body"] and e["attempt"] == st["attempt"]
                       for e in events)
        if st.get("on") == "renewed":
            # the face (renew=True) has renewed held deliveries this often (a count, not a duration)
            self.waiting = f"{st['count']} renewals"
            return self.front is not None and self.front.renewal_counts["renewed"] >= st["count"]
        c = self._consumer(st)
        if c is None:
            self.waiting = f"consumer {st.get('consumer')}"
            return False
        group, topic = c["group"], c["topics"][0]
        do = st.get("do")
        if do == "release":
            self._command(f"release {st['body']} {st['call']}")
            return True
        if do in ("join", "leave"):
            # the worker starts a late consumer / shuts one down (it joins / leaves its group)
            self.since_ns = time.monotonic_ns()
            self.rec.add({"event": "script", "call": do, "client": c["name"], "group": group})
            self._command(f"{do} {c['name']}")
            return True
        if do == "expire":
            core = self._core_id(st["body"])
            if core is None:
                self.waiting = f"a delivery of {st['body']}"
                return False
            applied = self.broker.expire_now(group, core)
            state = self.broker.message_state(group, core)["state"]
            self.rec.add({"event": "server", "call": "expire", "client": "broker", "group": group,
                          "body": st["body"], "core": core, "applied": applied,
                          "result": "visible" if state == "ready" else "dead-lettered"})
            return True
        cid = self._client_id(c)
        if cid is None:
            self.waiting = f"the startup of {c['name']}"
            return False
        if st.get("on") == "assigned":
            self.waiting = f"{c['name']}'s assignment answer {'with' if st['present'] else 'without'} queue {st['queue']}"
            return self._assignment_after(cid, group, st["queue"], st["present"])
        if st.get("on") == "quiet":
            return self._quiet(cid, topic, st["queue"])
        if do in ("unassign", "assign"):
            q = st.get("queue")
            if not self.started:
                route = self.broker.query_route(topic)
                keep = None if do == "assign" else tuple(mq for mq in route if mq.queue_id != q)
                self.since_ns = time.monotonic_ns()
                self.broker.pin_assignment(group, cid, keep)
                self.rec.add({"event": "server", "call": do, "client": "broker", "group": group,
                              "queue": q, "queues": None if keep is None else [mq.queue_id for mq in keep]})
                self.started = True
            self.waiting = f"the client's assignment answer after {do}"
            if not self._assignment_after(cid, group, q, present=do == "assign"):
                return False
            if do == "assign":
                return True
            # taken away: done once no receive of that queue is in flight, and none began, over two polls
            return self._quiet(cid, topic, q)
        self.waiting = f"step {st}"
        return False


# ---------------------------------------------------------------------------------------------- checks
def check(w: Workload, r: RunResult) -> list[Divergence]:
    events = r.recorder.events()
    step = {id(e): i for i, e in enumerate(events, 1)}
    out: list[Divergence] = []
    sends = [e for e in events if e.get("event") == "api" and e.get("call") == "send"]
    sent = defaultdict(list)  # topic -> bodies in send order (successful sends)
    for e in sends:
        if e.get("result") == "ok":
            sent[e["topic"]].append(e["body"])
    listener = [e for e in events if e.get("event") == "listener"]
    by_group = defaultdict(list)
    for e in listener:
        by_group[e["group"]].append(e)
    simple_ok = defaultdict(set)
    simple_client_group = {c["name"]: c["group"] for c in w.simple}
    for e in events:
        # the application decided to ack (an ack whose answer was lost is applied all the same; one
        # that was not applied leaves the message to be redelivered and acked again)
        if e.get("event") == "api" and e.get("call") == "ack":
            simple_ok[simple_client_group.get(e["client"])].add(e["body"])
    fail_spec = {c["group"]: c.get("fail", {}) for c in (*w.push, *w.simple)}

    if r.end.startswith("incomplete"):
        # a safety cap is not a verdict (exit 4 in the CLI): say what was left, count nothing
        r.notes.append(f"incomplete: the run did not end within the safety cap; broker: {r.broker_stats}")
    for g, t, role in w.subscriptions():
        dead = {b for b, _, _ in r.dead_letters.get(f"{g}/{t}", [])}
        ok = {e["body"] for e in by_group[g] if e["result"] == "success"} if role == "push" else simple_ok[g]
        always = set(fail_spec.get(g, {}).get("always", ()))
        lost = [b for b in sent[t] if b not in ok and b not in dead]
        if lost and r.end == "settled":
            out.append(Divergence("nothing-lost", f"{g}: sent but neither consumed nor dead-lettered: {lost}"))
        # The client dead-lettering a message its listener accepts is the client's doing; the server
        # dead-lettering one (its invisible time ran out at max attempts: lost receives, expiries while
        # the client retried a settle -- the face does not auto-renew) is explained by the server's
        # events and noted, not counted against the client.
        by_client = sorted(b for b, by, _ in r.dead_letters.get(f"{g}/{t}", []) if by == "client" and b not in always)
        by_server = sorted(b for b, by, _ in r.dead_letters.get(f"{g}/{t}", []) if by == "server" and b not in always)
        if by_client:
            out.append(Divergence("dlq-only-always-failing", f"{g}: the client dead-lettered messages its listener "
                                  f"accepts: {by_client}"))
        if by_server:
            r.notes.append(f"{g}: the server dead-lettered accepted messages at max attempts after expiries or "
                           f"lost receives: {by_server}")
        if role != "push":
            continue
        # the model's attempt of a consumption: the delivery's attempt plus the local re-consumptions of
        # that delivery before it (spec "Actions": consume(m)); it never exceeds max attempts
        maxa = w.group(g).max_attempts
        handle_of = _handles(r, events)
        per_delivery: Counter = Counter()
        over = []
        for e in by_group[g]:
            h = handle_of.get((e["client"], e["message_id"], e["attempt"]), (e["message_id"], e["attempt"]))
            per_delivery[(e["client"], h)] += 1
            if e["attempt"] + per_delivery[(e["client"], h)] - 1 > maxa:
                over.append(e)
        if over:
            out.append(Divergence("consumed-at-most-max", f"{g}: consumptions beyond max attempts {maxa} (delivery attempt "
                                  f"+ local re-consumptions): {sorted({e['body'] for e in over})}",
                                  [step[id(e)] for e in over[:20]]))
        if w.group(g).fifo:
            first: dict = {}
            for e in by_group[g]:
                if e["result"] == "success" and e["body"] not in first:
                    first[e["body"]] = e
            for mg in sorted({e.get("message_group") for e in by_group[g]} - {None}):
                order = [b for b in sent[t] if b in first and first[b].get("message_group") == mg]
                seen = sorted(order, key=lambda b: first[b]["t_ns"])
                if seen != order:
                    out.append(Divergence("fifo-order", f"{g}/{mg}: first successful consumptions {seen}, "
                                          f"send order {order}", [step[id(first[b])] for b in seen]))
    out += _fifo_one_in_consumption(w, r, events, step)
    out += _stops_receiving(r, events, step)
    # a settle request must carry the receipt handle of a delivery the client received
    empty = [e for e in r.recorder.rpcs() if e["name"] in _SETTLES
             and "" in ([x["handle"] for x in e["request"].get("entries", [])] or [e["request"]["handle"]])]
    if empty:
        out.append(Divergence("settle-with-received-handle",
                              f"{len(empty)} settle request(s) sent with an empty receipt handle "
                              f"({Counter(e['name'] for e in empty)})", [step[id(e)] for e in empty[:10]]))
    # DEV-006: in standard mode the seed (and the reference) makes one ack / change-invisible call per
    # delivery; a second call for the same receipt handle is the client retrying it
    standard = {c["group"] for c in w.push if not w.group(c["group"]).fifo}
    per_handle = defaultdict(list)
    for e in r.recorder.rpcs():
        if e["name"] in ("AckMessage", "ChangeInvisibleDuration") and e["request"]["group"] in standard:
            req = e["request"]
            for h in [x["handle"] for x in req.get("entries", [])] or [req["handle"]]:
                if h:
                    per_handle[(req["group"], h)].append(e)
    retried = {k: es for k, es in per_handle.items() if len(es) > 1}
    if retried:
        out.append(Divergence("standard-settle-retried", f"{len(retried)} standard-mode deliveries settled with more "
                              f"than one request ({sum(len(x) for x in retried.values())} requests)",
                              [step[id(e)] for es in list(retried.values())[:3] for e in es]))
    stall = _stall(r.recorder)
    if stall:
        out.append(Divergence(
            "no-retry-after-invalid-handle",
            f"{len(stall)} settle RPC(s) repeated with a receipt handle already answered INVALID_RECEIPT_HANDLE "
            f"({Counter(e['name'] for e in stall)}); the repeat can never succeed",
            [step[id(e)] for e in stall[:10]]))
    sends_rpc = r.recorder.rpcs("SendMessage")
    throttled = [e for e in sends_rpc if e["answer"].get("status") == "TOO_MANY_REQUESTS"]
    for e in throttled:
        mid = e["request"]["messages"][0]["message_id"]
        later = [x for x in sends_rpc if x["t_ns"] > e["t_ns"] and x["request"]["messages"][0]["message_id"] == mid]
        if not later:
            out.append(Divergence("producer-throttle-retried", f"send of {mid} answered TOO_MANY_REQUESTS and never "
                                  "retried", [step[id(e)]]))
    txn_sends = defaultdict(list)
    for e in sends_rpc:
        for m in e["request"]["messages"]:
            if m["type"] == "TRANSACTION":
                txn_sends[m["message_id"]].append(e)
    for mid, es in sorted(txn_sends.items()):
        if len(es) > 1:
            out.append(Divergence("txn-single-attempt", f"transactional message {mid} sent {len(es)} times "
                                  "(seed 001 Producer: exactly one attempt)", [step[id(e)] for e in es]))
    # The simple consumer's receives ask the topic's queues round-robin (model.py ``_s_rpc``, F1: the
    # round-robin moves on after every receive, a failed one included; REFERENCE.md §2 "round-robin
    # topic and queue"): each receive of a client asks the queue after its previous receive's.
    queues_of = {t.name: t.queues for t in w.topics}
    simple_groups = {c["group"] for c in w.simple}
    by_client: dict = defaultdict(list)
    for e in events:
        if e.get("kind") == "rpc" and e["name"] == "ReceiveMessage" and e["request"].get("group") in simple_groups:
            by_client[(e["request"]["group"], e["client_id"], e["request"]["topic"])].append(e)
    for (g, _cid, t), es in sorted(by_client.items()):
        n = queues_of.get(t, 1)
        off = [(a, b) for a, b in zip(es, es[1:]) if b["request"]["queue"] != (a["request"]["queue"] + 1) % n]
        if n > 1 and off:
            a, b = off[0]
            out.append(Divergence("simple-receive-round-robin", f"{g}/{t}: {len(off)} of {len(es) - 1} receives did "
                                  f"not ask the queue after the previous receive's (first: queue "
                                  f"{a['request']['queue']} then {b['request']['queue']} of {n})",
                                  [step[id(a)], step[id(b)]]))
    for e in events:
        # a shutdown() that did not return within the worker's cap is a wall-clock observation, so it
        # is noted, never a verdict (the settle loop behind it is counted above)
        if e.get("event") == "api" and e.get("call") == "shutdown" and e.get("result") != "ok":
            r.notes.append(f"{e['client']}: shutdown() {e.get('result') or e.get('error')} (step {step[id(e)]}, "
                           f"cap {SHUTDOWN_CAP:g} s)")
    return out


def _stops_receiving(r: RunResult, events: list, step: dict) -> list[Divergence]:
    """A queue taken away from a push consumer (upstream ``__update_topic_assignment``: the process
    queue is dropped, its receive loop ends at its next turn) is received from by at most one more
    request: one may begin between the answer and the moment the client's I/O loop handles it."""
    names = {e["client_id"]: e["client"] for e in events
             if e.get("event") == "api" and e.get("call") == "startup" and e.get("client_id")}
    out = []
    assigned: dict = {}  # (client id, group, topic) -> queues of the last OK answer
    taken: dict = {}  # (client id, group, topic, queue) -> the answer that took it away
    late: dict = defaultdict(list)
    for e in events:
        if e.get("kind") != "rpc":
            continue
        req = e["request"]
        if e["name"] == "QueryAssignment" and e["answer"].get("status") == "OK":
            key = (e["client_id"], req["group"], req["topic"])
            now = set(e["answer"].get("queues") or ())
            for q in assigned.get(key, now) - now:
                taken[key + (q,)] = e
            for q in now:
                taken.pop(key + (q,), None)
            assigned[key] = now
        elif e["name"] == "ReceiveMessage":
            k = (e["client_id"], req["group"], req["topic"], req["queue"])
            if k in taken and e["t_req_ns"] > taken[k]["t_ns"]:
                late[k].append(e)
    for (cid, g, t, q), es in sorted(late.items()):
        if len(es) > 1:
            out.append(Divergence("stops-receiving-dropped-queue",
                                  f"{names.get(cid, cid)}/{g}: {len(es)} receives of {t}/{q} began after the answer "
                                  "that took the queue away", [step[id(x)] for x in es[:10]]))
    return out


def _handles(r: RunResult, events: list) -> dict:
    """(worker client name, message id, delivery attempt) -> the receipt handle of that delivery."""
    names = {e["client_id"]: e["client"] for e in events
             if e.get("event") == "api" and e.get("call") == "startup" and e.get("client_id")}
    out: dict = {}
    for e in r.recorder.rpcs("ReceiveMessage"):
        for m in e["answer"].get("messages") or ():
            out[(names.get(e["client_id"]), m["message_id"], m["attempt"])] = m["handle"]
    return out


def _fifo_one_in_consumption(w: Workload, r: RunResult, events: list, step: dict) -> list[Divergence]:
    """Model claim ``fifo-one-in-consumption``: within one FIFO consumer, a message group has at most
    one message in consumption.  A delivery (one receipt handle) is in consumption from its first
    listener call to the last settle request that carries its handle (a settle loop that never ends
    keeps it in consumption to the end of the trace)."""
    fifo_groups = {c["group"] for c in w.push if w.group(c["group"]).fifo}
    names = {e["client_id"]: e["client"] for e in events
             if e.get("event") == "api" and e.get("call") == "startup" and e.get("client_id")}
    handle_of: dict = {}  # (client, message id, attempt) -> handle of that delivery
    settle_end: dict = defaultdict(int)  # handle -> t_ns of its last settle request
    for e in r.recorder.rpcs():
        client = names.get(e["client_id"])
        if e["name"] == "ReceiveMessage":
            for m in e["answer"].get("messages") or ():
                handle_of[(client, m["message_id"], m["attempt"])] = m["handle"]
        elif e["name"] in ("AckMessage", "ForwardMessageToDeadLetterQueue", "ChangeInvisibleDuration"):
            req = e["request"]
            for h in [x["handle"] for x in req.get("entries", [])] or [req["handle"]]:
                settle_end[h] = max(settle_end[h], e["t_ns"])
    spans: dict = defaultdict(dict)  # (client, group, message group) -> handle -> [start, end, first event]
    for e in events:
        if e.get("event") != "listener" or e["group"] not in fifo_groups:
            continue
        h = handle_of.get((e["client"], e["message_id"], e["attempt"]), f"?{e['message_id']}/{e['attempt']}")
        sp = spans[(e["client"], e["group"], e.get("message_group"))].setdefault(h, [e["start_ns"], e["t_ns"], e])
        sp[1] = max(sp[1], e["t_ns"], settle_end.get(h, 0))
    out = []
    for (client, group, mg), by_handle in sorted(spans.items(), key=lambda kv: str(kv[0])):
        ordered = sorted(by_handle.values(), key=lambda x: x[0])
        for a, b in zip(ordered, ordered[1:]):
            if b[0] < a[1]:
                out.append(Divergence(
                    "fifo-one-in-consumption",
                    f"{client}/{group}/{mg}: {b[2]['body']} (attempt {b[2]['attempt']}) reached the listener while "
                    f"{a[2]['body']} (attempt {a[2]['attempt']}) was still in consumption (its settle not done)",
                    [step[id(a[2])], step[id(b[2])]]))
                break
    return out
