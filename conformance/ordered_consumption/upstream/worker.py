"""The child process that runs the real, unmodified RocketMQ Python client against the gRPC face.

Why a child process
-------------------
The pinned client (``rocketmq-python-client``) keeps process-wide state that it never releases: one
asyncio I/O loop thread shared by every client (``RpcClient._io_loop_thread``, "runs forever until the
process exits"), each consumer's message-decode thread pool (never shut down), and a rotating log
file under ``~/logs/rocketmq_python/``.  Running it in a child process is the only way to use it
*unmodified* and still leave no thread behind: the process ends, and everything with it.

Protocol (newline-delimited JSON)
---------------------------------
stdin line 1: the job (``runner.job_of``): endpoint, seed, producers, push consumers, simple
consumers.  stdin later: ``"release BODY N"`` lets a held listener call go on (below); ``"join NAME"``
starts the push consumer NAME that the job marks ``late`` (a consumer joining its group mid-run);
``"leave NAME"`` shuts the push consumer NAME down mid-run (it leaves its group: the client drops
its process queues and sends NotifyClientTermination, ``client.py`` ``shutdown``); ``"stop"`` ends
the run.  stdout: one event per line, each stamped with
``t_ns = time.monotonic_ns()`` (CLOCK_MONOTONIC, the same clock in the parent, so a listener call
and the RPCs around it order causally):

* ``{"event": "listener", ...}``: one call of a push consumer's ``MessageListener.consume`` (the
  user's listener is wrapped, never replaced: ``RecordedListener``), with its start, result and the
  message as the client handed it over;
* ``{"event": "api", ...}``: a call the application made into the client (``send``, ``receive``,
  ``ack``, ``change_invisible_duration``, ``startup``, ``shutdown``) and what it returned or raised;
* ``{"event": "hold", ...}``: the listener's call number N (counted per consumer group) of a body the
  workload holds (``fail`` spec ``"hold": {BODY: [N, ...]}``), in the consumer ``client``, has started and waits for ``"release BODY N"`` on stdin, so that
  the parent can change the broker (expire the delivery, reassign the queue) while the message is
  in consumption -- by state, never by a sleep;
* ``{"event": "api", "call": "leave", ...}`` just before a ``leave`` command's ``shutdown()`` begins
  (its ``shutdown`` event follows when it returns);
* ``{"event": "producers-done"}``, ``{"event": "started"}``, ``{"event": "closed", ...}``.

The client's internal steps are not visible here (only through the RPCs the parent records).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import threading
import time
import traceback
from typing import Any

_out_lock = threading.Lock()
_out = sys.stdout


def emit(ev: dict) -> None:
    ev["t_ns"] = time.monotonic_ns()
    line = json.dumps(ev, sort_keys=True)
    with _out_lock:
        _out.write(line + "\n")
        _out.flush()


def _err(e: BaseException) -> dict:
    return {"error": type(e).__name__, "code": getattr(e, "code", None) if isinstance(getattr(e, "code", None), int)
            else None, "text": str(e)[:200]}


def _body(m: Any) -> str:
    return bytes(m.body).decode("utf-8", "replace")


def fails(seed: int, spec: dict, group: str, body: str, call: int) -> bool:
    """The workload's listener decision: fail ``always`` bodies, the first ``first`` calls of ``flaky``
    bodies, and otherwise with probability ``rate`` from ``(seed, group, body, call)``."""
    if body in spec.get("always", ()):
        return True
    if body in spec.get("flaky", ()) and call <= spec.get("first", 1):
        return True
    rate = spec.get("rate_permille", 0)
    if rate:
        h = hashlib.blake2b(f"{seed}|{group}|{body}|{call}".encode(), digest_size=8).digest()
        return int.from_bytes(h, "big") % 1000 < rate
    return False


def main() -> int:
    job = json.loads(sys.stdin.readline())
    from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message,
                          MessageListener, Producer, PushConsumer, SimpleConsumer, TransactionChecker,
                          TransactionResolution)

    class CommitChecker(TransactionChecker):
        """The server's orphaned-transaction check (never sent by the face): commit."""

        def check(self, message: Any) -> Any:
            return TransactionResolution.COMMIT

    seed = int(job["seed"])
    # the client draws from the global `random` (QueueSelector's start, push_consumer's queue for a
    # route query): seeded from the run's seed, so a seed reproduces those draws as far as the
    # client's threads draw in the same order (verdicts never rest on one draw: observed.py, SC)
    random.seed(f"conq-upstream-{seed}")
    stop_requested = threading.Event()
    # push consumers that join mid-run (``join NAME``); ``defined`` is set once start_push and leave exist
    late = {c["name"]: c for c in job.get("push", ()) if c.get("late")}
    defined = threading.Event()
    releases: dict[tuple[str, int], threading.Event] = {}
    releases_lock = threading.Lock()

    def release_event(body: str, n: int) -> threading.Event:
        with releases_lock:
            return releases.setdefault((body, n), threading.Event())

    def read_commands() -> None:
        # the parent's commands after the job: release a held listener call, join, leave, or stop
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["release"] and len(words) == 3:
                release_event(words[1], int(words[2])).set()
            elif words[:1] == ["join"] and len(words) == 2 and words[1] in late:
                # on a thread of its own: startup() waits for the server's settings
                spec = late[words[1]]
                threading.Thread(target=lambda spec=spec: defined.wait() and start_push(spec), daemon=True,
                                 name=f"join-{words[1]}").start()
            elif words[:1] == ["leave"] and len(words) == 2:
                name = words[1]
                threading.Thread(target=lambda name=name: defined.wait() and leave(name), daemon=True,
                                 name=f"leave-{words[1]}").start()
            elif words[:1] == ["stop"]:
                break
        stop_requested.set()
        with releases_lock:
            for ev in releases.values():  # a held call never outlives the run
                ev.set()

    threading.Thread(target=read_commands, name="commands", daemon=True).start()
    cfg = ClientConfiguration(job["endpoint"], Credentials(), request_timeout=int(job.get("request_timeout", 3)))
    stop = threading.Event()
    calls: dict[tuple[str, str], int] = {}
    calls_lock = threading.Lock()

    def next_call(group: str, body: str) -> int:
        with calls_lock:
            n = calls.get((group, body), 0) + 1
            calls[(group, body)] = n
            return n

    class WorkloadListener(MessageListener):
        """The user's listener: succeeds or fails as the workload says."""

        def __init__(self, client: str, group: str, spec: dict) -> None:
            self.client, self.group, self.spec = client, group, spec

        def consume(self, message: Any) -> Any:
            n = next_call(self.group, _body(message))
            if n in self.spec.get("hold", {}).get(_body(message), ()):
                emit({"event": "hold", "client": self.client, "group": self.group, "body": _body(message), "n": n,
                      "message_id": message.message_id, "attempt": message.delivery_attempt})
                ev = release_event(_body(message), n)
                if stop_requested.is_set():
                    ev.set()
                ev.wait()
            failed = fails(seed, self.spec, self.group, _body(message), n)
            return ConsumeResult.FAILURE if failed else ConsumeResult.SUCCESS

    class RecordedListener(MessageListener):
        """Wraps the user's listener: records every call the client makes into user code."""

        def __init__(self, inner: Any, client: str, group: str) -> None:
            self.inner, self.client, self.group = inner, client, group

        def consume(self, message: Any) -> Any:
            start = time.monotonic_ns()
            ev = {"event": "listener", "client": self.client, "group": self.group, "start_ns": start,
                  "thread": threading.current_thread().name, "message_id": message.message_id,
                  "body": _body(message), "attempt": message.delivery_attempt, "handle": message.receipt_handle,
                  "message_group": message.message_group, "topic": message.topic}
            try:
                result = self.inner.consume(message)
            except BaseException as e:
                ev["result"] = "raised"
                ev.update(_err(e))
                emit(ev)
                raise
            ev["result"] = "success" if result == ConsumeResult.SUCCESS else "failure"
            emit(ev)
            return result

    clients: list[tuple[str, Any]] = []
    clients_lock = threading.Lock()

    def start(name: str, client: Any) -> bool:
        try:
            client.startup()
        except Exception as e:
            emit({"event": "api", "client": name, "call": "startup", **_err(e)})
            return False
        emit({"event": "api", "client": name, "call": "startup", "result": "ok", "client_id": client.client_id})
        with clients_lock:
            clients.append((name, client))
        return True

    def shutdown_client(name: str, client: Any, cap: float) -> dict:
        """``client.shutdown()`` on a thread of its own; the answer, or ``stuck`` after ``cap`` seconds."""
        done = threading.Event()
        box: dict = {}

        def close() -> None:
            try:
                client.shutdown()
                box["result"] = "ok"
            except Exception as e:
                box.update(_err(e))
            done.set()

        threading.Thread(target=close, daemon=True, name=f"shutdown-{name}").start()
        out = box if done.wait(cap) else {"result": "stuck"}
        emit({"event": "api", "client": name, "call": "shutdown", **out})
        return out

    def produce(p: dict, producer: Any) -> None:
        for spec in p["messages"]:
            m = Message()
            m.topic = spec["topic"]
            m.body = spec["body"].encode()
            if spec.get("group"):
                m.message_group = spec["group"]
            if spec.get("keys"):
                m.keys = spec["keys"]
            if spec.get("tag"):
                m.tag = spec["tag"]
            ev = {"event": "api", "client": p["name"], "call": "send", "body": spec["body"],
                  "message_group": spec.get("group"), "topic": spec["topic"]}
            try:
                if p.get("transactional"):
                    ev["transactional"] = True
                    tx = producer.begin_transaction()
                    r = producer.send(m, tx)
                    tx.commit()
                else:
                    r = producer.send(m)
                ev.update(result="ok", message_id=r.message_id, offset=r.offset)
            except Exception as e:
                ev.update(_err(e))
            emit(ev)

    def start_producers() -> None:
        threads = []
        for p in job.get("producers", ()):
            producer = Producer(cfg, tuple(p["topics"]),
                                checker=CommitChecker() if p.get("transactional") else None)
            if not start(p["name"], producer):
                continue
            t = threading.Thread(target=produce, args=(p, producer), name=f"producer-{p['name']}")
            t.start()
            threads.append(t)
        producer_threads.extend(threads)

    producer_threads: list = []
    if job.get("produce_first"):
        # the model's consumer configurations start with the messages already on the server
        start_producers()
        for t in producer_threads:
            t.join()

    def start_push(c: dict) -> None:
        listener = RecordedListener(WorkloadListener(c["name"], c["group"], c.get("fail", {})), c["name"], c["group"])
        pc = PushConsumer(cfg, c["group"], listener, {t: FilterExpression() for t in c["topics"]},
                          max_cache_message_count=c.get("max_cache_count", 1024),
                          max_cache_message_size=c.get("max_cache_bytes", 64 * 1024 * 1024),
                          consumption_thread_count=c.get("threads", 4))
        start(c["name"], pc)

    def leave(name: str) -> None:
        # a consumer leaving its group mid-run: the client's own shutdown (push_consumer.py
        # ``_pre_shutdown``: every process queue dropped, the consumption pool drained; client.py
        # ``shutdown``: NotifyClientTermination), after which it is no client of the run any more
        with clients_lock:
            found = [(n, c) for n, c in clients if n == name]
            clients[:] = [(n, c) for n, c in clients if n != name]
        if not found:
            emit({"event": "api", "client": name, "call": "leave", "error": "NotRunning", "text": "no such client"})
            return
        emit({"event": "api", "client": name, "call": "leave", "result": "ok", "client_id": found[0][1].client_id})
        shutdown_client(name, found[0][1], float(job.get("leave_cap", 60)))

    defined.set()
    for c in job.get("push", ()):
        if not c.get("late"):
            start_push(c)

    simple_threads = []
    for c in job.get("simple", ()):
        sc = SimpleConsumer(cfg, c["group"], {t: FilterExpression() for t in c["topics"]},
                            await_duration=int(c.get("await", 1)))
        if not start(c["name"], sc):
            continue

        def loop(sc: Any = sc, c: dict = c) -> None:
            name, group, spec = c["name"], c["group"], c.get("fail", {})
            while not stop.is_set():
                try:
                    msgs = sc.receive(int(c.get("batch", 4)), int(c.get("invisible", 2)))
                except Exception as e:
                    emit({"event": "api", "client": name, "call": "receive", **_err(e)})
                    stop.wait(0.05)
                    continue
                emit({"event": "api", "client": name, "call": "receive", "result": "ok",
                      "messages": [{"message_id": m.message_id, "body": _body(m), "attempt": m.delivery_attempt}
                                   for m in msgs]})
                for m in msgs:
                    ok = not fails(seed, spec, group, _body(m), next_call(group, _body(m)))
                    call = "ack" if ok else "change_invisible_duration"
                    try:
                        if ok:
                            sc.ack(m)
                        else:
                            sc.change_invisible_duration(m, int(c.get("retry_invisible", 0)))
                        emit({"event": "api", "client": name, "call": call, "message_id": m.message_id,
                              "body": _body(m), "attempt": m.delivery_attempt, "result": "ok"})
                    except Exception as e:
                        emit({"event": "api", "client": name, "call": call, "message_id": m.message_id,
                              "body": _body(m), "attempt": m.delivery_attempt, **_err(e)})

        t = threading.Thread(target=loop, name=f"simple-{c['name']}")
        t.start()
        simple_threads.append(t)

    if not job.get("produce_first"):
        start_producers()
    emit({"event": "started"})
    for t in producer_threads:
        t.join()
    emit({"event": "producers-done"})

    stop_requested.wait()
    stop.set()
    for t in simple_threads:
        t.join(10)
    stuck = [t.name for t in simple_threads if t.is_alive()]
    # Shut the clients down (consumers first); a shutdown that does not return (an upstream retry loop
    # that never ends) is reported, and the process ends anyway (os._exit below).
    with clients_lock:
        remaining = list(clients)
    for name, client in remaining:
        shutdown_client(name, client, float(job.get("shutdown_cap", 15)))
    alive = sorted(t.name for t in threading.enumerate() if t.is_alive() and t is not threading.current_thread())
    emit({"event": "closed", "stuck_threads": stuck, "threads_left": alive})
    sys.stdout.flush()
    os._exit(0)  # the client's I/O loop thread never ends by itself (see the module docstring)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(3)
