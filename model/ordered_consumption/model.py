"""Ordered consumption: the RocketMQ thin client's message flows (seed 001).

Four client roles of seed 001, each a configuration of this one model:

* **producer** (seed 001 "Producer", steps 1-7): one message is sent; the
  route is known or fetched (the fetch may fail); a queue is picked from the
  candidates, its accepted message type checked, the request sent, and a
  failure retried on the next candidate until the attempts run out.
* **push-standard** (seed 001 "Push consumer" / "普通消费模式"): one process
  queue per message queue, a receive loop bounded by the cache thresholds, a
  dispatcher that takes cached messages and hands them to concurrent
  consumption; success -> ack, failure -> change invisible duration.
* **push-fifo** (seed 001 "顺序消费模式", steps 1-9): the same receive loop; the
  dispatcher locks the process queue, takes the earliest message, consumes it
  until it succeeds or reaches the maximum, acks or dead-letters it (each
  retried until OK), unlocks and signals itself.
* **simple** (seed 001 "Simple consumer"): receive / ack / change invisible
  duration are single requests, never retried inside the client.

The roles are independent: a state is tagged with its role (``state[0]``) and
the default configuration ("reference") explores the *disjoint union* of the
four role models (one initial state set per role), so its state count is the
sum of theirs, not a product.  Every property names the roles it speaks about
and is only listed when one of them is enabled (a FIFO witness cannot be
reached by a producer-only run).

The server is modelled only as far as the client's guarantees need it:
visibility (READY / INVISIBLE), the delivery attempt count, ack and
dead-letter results that may fail, server-side dead-lettering after the
maximum delivery attempts (standard and simple), and the per-queue order in
which it hands out messages.  Modelled assumption: a message's invisible time
does not expire while the client still holds it (the seed's flows never race
the invisible timer); it expires only after the client let go of it (a
change of invisible duration, or a settle that was given up).

Where today's upstream (apache/rocketmq-clients, Java; REFERENCE.md §2)
differs from the seed, the difference is a switch of :class:`OCConfig`:
``txn_retries`` (transactional sends retried since 2024),
``settle_retry`` and ``erase_after_settle`` (standard mode retries ack /
change-invisible every second and keeps the message cached until the call
completed), ``client_lock`` / ``server_gate`` (today's FIFO has no dispatcher
lock and relies on the server withholding the next message of a group until
the previous one is settled), ``dlq_when_exceeds`` (the seed's literal
"consumption count *exceeds* the maximum").  A few more switches are
deliberate faults (mutants) that show the properties can fail.
"""

from __future__ import annotations

from typing import Any

from conq.model.kernel import Model

from .state import (
    CLI_NAMES,
    C_ACKING,
    C_CACHED,
    C_CIDING,
    C_CONSUMING,
    C_DLQING,
    C_NONE,
    FIFO,
    FIFO_MSG,
    MTYPES,
    NORMAL,
    OCConfig,
    OP_ACK,
    OP_CID,
    OP_NAMES,
    OP_NONE,
    OP_RECEIVE,
    PRODUCER,
    P_DONE,
    P_PHASES,
    P_PICK,
    P_ROUTE,
    P_SEND,
    P_WAIT,
    RESULTS,
    ROLE_NAMES,
    R_FAILED,
    R_NONE,
    R_OK,
    SIMPLE,
    SRV_NAMES,
    STANDARD,
    S_ACKED,
    S_DLQ_CLI,
    S_DLQ_SRV,
    S_INVIS,
    S_READY,
    TXN,
    WORKER_NAMES,
    W_BUSY,
    W_IDLE,
    W_TAKE,
    W_UNLOCK,
    _set,
)
from .configs import descriptions, named_configs
from .properties import build_properties


class OrderedConsumptionModel(Model):
    name = "ordered-consumption"
    Config = OCConfig

    @classmethod
    def configs(cls):
        return named_configs()

    @classmethod
    def describe_configs(cls):
        return descriptions()

    def __init__(self, config: OCConfig | None = None):
        super().__init__(config)
        c = self.config
        n = len(c.msg_queue)
        if len(c.msg_size) != n or any(not 0 <= q < c.queues for q in c.msg_queue):
            from conq.model.kernel import ModelError

            raise ModelError(f"{self.name}: msg_queue/msg_size must have one entry per message, queues in 0..{c.queues - 1}")
        self.n_msgs = n
        # messages of each queue in offset (send) order
        self.by_queue = tuple(tuple(m for m in range(n) if c.msg_queue[m] == q) for q in range(c.queues))
        # earlier messages of the same queue, for each message
        self.earlier = tuple(tuple(x for x in self.by_queue[c.msg_queue[m]] if x < m) for m in range(n))
        # per-queue thresholds as upstream computes them: max(1, total / queues)
        self.thr_count = max(1, c.cache_messages // c.queues)
        self.thr_bytes = max(1, c.cache_bytes // c.queues)
        self.roles = c.roles()

    # ------------------------------------------------------------------ states
    def init_states(self):
        c = self.config
        out = []
        if PRODUCER in self.roles:
            # Every message type, every pattern of queues accepting it, route cached
            # or not; a FIFO message on each possible group queue.  The rotation
            # starts at candidate 0: upstream starts at a random index, which the
            # enumeration of acceptance masks makes symmetric.
            for mtype in (NORMAL, FIFO_MSG, TXN):
                for mask in range(1 << c.queues):
                    for group in range(c.queues) if mtype == FIFO_MSG else (0,):
                        for cached in (False, True):
                            phase = P_PICK if cached else P_ROUTE
                            out.append((PRODUCER, phase, mtype, mask, group, 0, -1, 0, 0, R_NONE))
        empty_msgs = tuple((S_READY, 0, C_NONE, 0, 0) for _ in range(self.n_msgs))
        empty_pqs = tuple((0, 0, 0, W_IDLE) for _ in range(c.queues))
        if STANDARD in self.roles:
            out.append((STANDARD, empty_msgs, empty_pqs))
        if FIFO in self.roles:
            out.append((FIFO, empty_msgs, empty_pqs))
        if SIMPLE in self.roles:
            calls = tuple((OP_NONE, -1, 0) for _ in range(c.simple_threads))
            out.append((SIMPLE, tuple((S_READY, 0, 0) for _ in range(self.n_msgs)), 0, calls))
        return out

    def actions(self, s):
        role = s[0]
        if role == PRODUCER:
            return self._p_actions(s)
        if role == SIMPLE:
            return self._s_actions(s)
        return self._c_actions(s)

    def step(self, s, a):
        role = s[0]
        if role == PRODUCER:
            return self._p_step(s, a)
        if role == SIMPLE:
            return self._s_step(s, a)
        return self._c_step(s, a)

    # ================================================================ producer
    # Seed 001 "Producer" steps 1-7; upstream ProducerImpl.send0 / SendReceiptImpl
    # (REFERENCE §2): attempt k uses candidates[(k-1) mod n]; a FIFO message uses
    # its group's queue on every attempt.
    def _p_queue(self, s) -> int:
        _, _, mtype, _, group, sent, *_ = s
        if mtype == FIFO_MSG and not self.config.fifo_rotates:
            return group
        base = group if mtype == FIFO_MSG else 0
        return (base + sent) % self.config.queues

    def _p_actions(self, s):
        phase = s[1]
        if phase == P_ROUTE:
            return [("fetch_route",)]
        if phase == P_PICK:
            return [("pick",)]
        if phase == P_SEND:
            return [("send", s[6])]
        if phase == P_WAIT:
            acts = []
            if s[8] < s[7]:
                acts.append(("tick",))
            if s[8] >= s[7] or self.config.ignore_backoff:
                acts.append(("retry",))
            return acts
        return []

    def _p_step(self, s, a):
        c = self.config
        _, phase, mtype, mask, group, sent, queue, backoff, elapsed, result = s
        name = a[0]
        if name == "fetch_route" and phase == P_ROUTE:
            # seed step 3: a failed route fetch fails the send
            return [
                ("ok", _set(s, 1, P_PICK)),
                ("failed", (PRODUCER, P_DONE, mtype, mask, group, sent, queue, backoff, elapsed, R_FAILED)),
            ]
        if name == "pick" and phase == P_PICK:
            q = self._p_queue(s)
            # seed step 5: the queue must accept the message type, else fail at once
            if not (mask >> q) & 1 and not c.skip_type_check:
                return [("type-mismatch", (PRODUCER, P_DONE, mtype, mask, group, sent, q, backoff, elapsed, R_FAILED))]
            return [(q, (PRODUCER, P_SEND, mtype, mask, group, sent, q, backoff, elapsed, result))]
        if name == "send" and phase == P_SEND and a[1] == queue:
            sent1 = sent + 1
            # seed: a transactional message has exactly one chance; upstream since
            # 2024 retries it like the others (txn_retries)
            exhausted = sent1 >= c.max_send_attempts or (mtype == TXN and not c.txn_retries)
            done_failed = (PRODUCER, P_DONE, mtype, mask, group, sent1, queue, 0, 0, R_FAILED)
            outs = [("ok", (PRODUCER, P_DONE, mtype, mask, group, sent1, queue, 0, 0, R_OK))]
            # seed step 7: other failures rotate to the next candidate at once
            outs.append(("error", done_failed if exhausted else (PRODUCER, P_PICK, mtype, mask, group, sent1, queue, 0, 0, R_NONE)))
            # throttled: retry after the back-off the server decides
            for b in c.backoffs:
                outs.append(
                    (("throttled", b), done_failed if exhausted else (PRODUCER, P_WAIT, mtype, mask, group, sent1, queue, b, 0, R_NONE))
                )
            return outs
        if name == "tick" and phase == P_WAIT and elapsed < backoff:
            return [(elapsed + 1, _set(s, 8, elapsed + 1))]
        if name == "retry" and phase == P_WAIT and (elapsed >= backoff or c.ignore_backoff):
            return [("retry", _set(s, 1, P_PICK))]
        return []

    # ======================================================= push consumer
    def _cache_of(self, msgs, p) -> tuple[int, int]:
        cnt = byts = 0
        size = self.config.msg_size
        for m in self.by_queue[p]:
            if msgs[m][3]:
                cnt += 1
                byts += size[m]
        return cnt, byts

    def _full(self, msgs, p) -> bool:
        cnt, byts = self._cache_of(msgs, p)
        return cnt >= self.thr_count or (byts >= self.thr_bytes and not self.config.ignore_bytes)

    def _c_actions(self, s):
        _, msgs, pqs = s
        acts = []
        for p in range(self.config.queues):
            acts.append(("receive", p))  # the receive loop never stops
        for p, (_, notified, _, worker) in enumerate(pqs):
            if notified:
                acts.append(("dispatch", p))
            if worker == W_TAKE:
                acts.append(("take", p))
            elif worker == W_UNLOCK:
                acts.append(("unlock", p))
        for m, (srv, _, cli, _, _) in enumerate(msgs):
            if cli == C_CONSUMING:
                acts.append(("consume", m))
            elif cli == C_ACKING:
                acts.append(("ack", m))
            elif cli == C_CIDING:
                acts.append(("change_invisible", m))
            elif cli == C_DLQING:
                acts.append(("forward_to_dlq", m))
            elif cli == C_NONE and srv == S_INVIS:
                acts.append(("expire", m))
        return acts

    def _released(self, role, msgs, pqs, m):
        """After m is settled in FIFO mode: schedule unlock (seed step 9), or,
        without the lock, signal the dispatcher for the next message."""
        p = self.config.msg_queue[m]
        pq = pqs[p]
        if role == FIFO:
            if self.config.client_lock:
                return _set(pqs, p, (pq[0], pq[1], pq[2], W_UNLOCK))
            return _set(pqs, p, (pq[0], 1, pq[2], pq[3]))
        return pqs

    def _c_step(self, s, a):
        c = self.config
        role, msgs, pqs = s
        name = a[0]
        if name == "receive":
            p = a[1]
            waiting, notified, locked, worker = pqs[p]
            # seed "消息的接收与缓存" step 3: below the thresholds receive again,
            # otherwise wait and check again (the waiting flag records that)
            if self._full(msgs, p):
                return [("full", (role, msgs, _set(pqs, p, (1, notified, locked, worker))))]
            cnt, _ = self._cache_of(msgs, p)
            batch = min(max(self.thr_count - cnt, 1), c.server_batch)
            queue_msgs = self.by_queue[p]
            if role == FIFO and c.server_gate:
                # upstream: the next message of a FIFO queue is handed out only once
                # the previous one is settled (one at a time, in order)
                if any(msgs[m][0] == S_INVIS for m in queue_msgs):
                    queue_msgs = ()
                batch = 1
            ready = [m for m in queue_msgs if msgs[m][0] == S_READY][:batch]
            if not ready:
                return [((), (role, msgs, _set(pqs, p, (0, notified, locked, worker))))]
            # the server returns up to `batch` messages, in queue order: any non-empty prefix
            outs = []
            pq = (0, 1, locked, worker)  # received messages notify the dispatcher
            new = list(msgs)
            got = []
            for m in ready:
                srv, d, cli, inc, cons = new[m]
                new[m] = (S_INVIS, d + 1, C_CACHED, 1, 0)
                got.append((m, d + 1))
                outs.append((tuple(got), (role, tuple(new), _set(pqs, p, pq))))
            return outs
        if name == "dispatch":
            p = a[1]
            waiting, notified, locked, worker = pqs[p]
            if not notified:
                return []
            if role == FIFO and c.client_lock:
                # seed FIFO step 2: lock the process queue; failing that, stop
                if locked:
                    return [("lock-busy", (role, msgs, _set(pqs, p, (waiting, 0, locked, worker))))]
                return [("locked", (role, msgs, _set(pqs, p, (waiting, 0, 1, W_TAKE))))]
            # standard step 2 (and FIFO without the lock): take a cached message,
            # repeat until the cache has none
            for m in self.by_queue[p]:
                if msgs[m][2] == C_CACHED:
                    return [(m, (role, _set(msgs, m, _set(msgs[m], 2, C_CONSUMING)), pqs))]
            return [("empty", (role, msgs, _set(pqs, p, (waiting, 0, locked, worker))))]
        if name == "take":
            p = a[1]
            waiting, notified, locked, worker = pqs[p]
            if worker != W_TAKE:
                return []
            # seed FIFO steps 2-3: the earliest cached message, or unlock and stop
            for m in self.by_queue[p]:
                if msgs[m][2] == C_CACHED:
                    return [(m, (role, _set(msgs, m, _set(msgs[m], 2, C_CONSUMING)), _set(pqs, p, (waiting, notified, locked, W_BUSY))))]
            return [("empty", (role, msgs, _set(pqs, p, (waiting, notified, 0, W_IDLE))))]
        if name == "unlock":
            p = a[1]
            waiting, notified, locked, worker = pqs[p]
            if worker != W_UNLOCK:
                return []
            # seed FIFO step 9: unlock and signal the dispatcher
            return [("unlocked", (role, msgs, _set(pqs, p, (waiting, 1 if c.unlock_signals else notified, 0, W_IDLE))))]
        m = a[1]
        srv, d, cli, inc, cons = msgs[m]
        if name == "consume" and cli == C_CONSUMING:
            cons1 = cons + 1
            # the delivery attempt the listener sees: the server's count plus one
            # per local retry (REFERENCE §2, FIFO mode)
            attempt = d - 1 + cons1
            erase = 0 if (role == STANDARD and not c.erase_after_settle) else inc  # seed standard step 3
            ok = (role, _set(msgs, m, (srv, d, C_ACKING, erase, cons1)), pqs)
            if role == STANDARD:
                if c.standard_client_dlq and attempt >= c.max_attempts:
                    fail_cli = C_DLQING
                else:
                    fail_cli = C_CIDING  # seed standard step 4: change invisible duration
            else:
                # seed FIFO step 7: beyond the maximum -> DLQ, else consume again
                over = attempt > c.max_attempts if c.dlq_when_exceeds else attempt >= c.max_attempts
                fail_cli = C_DLQING if over else C_CONSUMING
            fail = (role, _set(msgs, m, (srv, d, fail_cli, erase, cons1)), pqs)
            return [(("ok", attempt), ok), (("fail", attempt), fail)]
        if name == "ack" and cli == C_ACKING:
            ok_msgs = _set(msgs, m, (S_ACKED, d, C_NONE, 0, cons))
            outs = [("ok", (role, ok_msgs, self._released(role, msgs, pqs, m)))]
            if role == FIFO or c.settle_retry:
                outs.append(("error", s))  # retried until it succeeds (seed FIFO step 6)
            else:
                # seed standard: one ack; if it fails the message stays invisible and
                # the server redelivers it when the invisible time is over
                outs.append(("error", (role, _set(msgs, m, (srv, d, C_NONE, 0, cons)), pqs)))
            return outs
        if name == "change_invisible" and cli == C_CIDING:
            gone = (role, _set(msgs, m, (srv, d, C_NONE, 0, cons)), pqs)
            return [("ok", gone), ("error", s if c.settle_retry else gone)]
        if name == "forward_to_dlq" and cli == C_DLQING:
            ok_msgs = _set(msgs, m, (S_DLQ_CLI, d, C_NONE, 0, cons))
            # seed FIFO step 8: retried until it succeeds
            return [("ok", (role, ok_msgs, self._released(role, msgs, pqs, m))), ("error", s)]
        if name == "expire" and cli == C_NONE and srv == S_INVIS:
            # the invisible time is over: redeliver, or dead-letter on the server
            # once the delivery attempts are used up (standard mode, REFERENCE §2)
            if d >= c.max_attempts:
                return [("dead-lettered", (role, _set(msgs, m, (S_DLQ_SRV, d, C_NONE, 0, cons)), pqs))]
            return [("visible", (role, _set(msgs, m, (S_READY, d, C_NONE, 0, 0)), pqs))]
        return []

    # ===================================================== simple consumer
    # Seed 001 "Simple consumer": every call is one remote call, no internal retry;
    # the application calls receive from several threads at once.
    # state: (SIMPLE, msgs (srv, delivered, held), rr, calls) with one call record
    # (op, message, requests) per application thread.
    def _s_busy(self, calls, m) -> bool:
        return any(op in (OP_ACK, OP_CID) and cm == m for op, cm, _ in calls)

    def _s_actions(self, s):
        _, msgs, rr, calls = s
        acts = []
        for th, (op, cm, reqs) in enumerate(calls):
            if op == OP_NONE:
                acts.append(("call_receive", th))
                for m, (srv, d, held) in enumerate(msgs):
                    # the application settles a message it holds, one thread at a time
                    if held and not self._s_busy(calls, m):
                        acts += [("call_ack", th, m), ("call_change_invisible", th, m)]
            else:
                acts.append(("rpc", th))
        for m, (srv, d, held) in enumerate(msgs):
            if held and not self._s_busy(calls, m):
                acts.append(("abandon", m))
            if srv == S_INVIS and not held:
                acts.append(("expire", m))
        return acts

    def _s_step(self, s, a):
        c = self.config
        _, msgs, rr, calls = s
        name = a[0]
        if name in ("call_receive", "call_ack", "call_change_invisible", "rpc"):
            th = a[1]
            if not 0 <= th < len(calls):
                return []
            op, cm, reqs = calls[th]
            if name == "call_receive" and op == OP_NONE:
                return [("called", (SIMPLE, msgs, rr, _set(calls, th, (OP_RECEIVE, -1, 0))))]
            if name in ("call_ack", "call_change_invisible") and op == OP_NONE:
                m = a[2]
                if not msgs[m][2] or self._s_busy(calls, m):
                    return []
                new_op = OP_ACK if name == "call_ack" else OP_CID
                return [("called", (SIMPLE, msgs, rr, _set(calls, th, (new_op, m, 0))))]
            if name == "rpc" and op != OP_NONE:
                idle = _set(calls, th, (OP_NONE, -1, 0))
                if op == OP_RECEIVE:
                    # upstream: each receive asks one queue, taken round-robin
                    got: Any = ()
                    new = msgs
                    for m in self.by_queue[rr]:
                        srv, d, held = msgs[m]
                        if srv == S_READY:
                            new = _set(msgs, m, (S_INVIS, d + 1, 1))
                            got = (m, d + 1)
                            break
                    ok = (SIMPLE, new, (rr + 1) % c.queues, idle)
                elif op == OP_ACK:
                    srv, d, held = msgs[cm]
                    ok = (SIMPLE, _set(msgs, cm, (S_ACKED, d, 0)), rr, idle)
                    got = "acked"
                else:
                    srv, d, held = msgs[cm]
                    # the message becomes visible again when its new invisible duration is over
                    ok = (SIMPLE, _set(msgs, cm, (srv, d, 0)), rr, idle)
                    got = "changed"
                # an error is returned to the application as is (the mutant retries instead)
                if c.simple_retry:
                    err = (SIMPLE, msgs, rr, _set(calls, th, (op, cm, min(reqs + 1, 2))))
                else:
                    err = (SIMPLE, msgs, rr, idle)
                return [(("ok", got), ok), ("error", err)]
            return []
        m = a[1]
        srv, d, held = msgs[m]
        if name == "abandon" and held and not self._s_busy(calls, m):
            # the application gives up on the message: it reappears when its invisible time is over
            return [("abandoned", (SIMPLE, _set(msgs, m, (srv, d, 0)), rr, calls))]
        if name == "expire" and srv == S_INVIS and not held:
            if d >= c.max_attempts:
                return [("dead-lettered", (SIMPLE, _set(msgs, m, (S_DLQ_SRV, d, 0)), rr, calls))]
            return [("visible", (SIMPLE, _set(msgs, m, (S_READY, d, 0)), rr, calls))]
        return []

    # ================================================================ fairness
    def fair(self, action, observation):
        """Weak fairness per class: every client step, every successful server
        answer and the server's invisible-time expiry is eventually taken while
        it stays enabled; a failing server answer is never forced, and the
        simple consumer's user calls are the user's choice (never forced)."""
        name = action[0]
        if name in ("ack", "change_invisible", "forward_to_dlq") and observation != "ok":
            return None
        if name == "rpc" and observation == "error":
            return None
        if name.startswith("call_") or name == "abandon":
            return None
        return action

    # ============================================================== properties
    def properties(self):
        return build_properties(self)

    # ================================================================== views
    def view(self, s):
        role = s[0]
        if role == PRODUCER:
            _, phase, mtype, mask, group, sent, queue, backoff, elapsed, result = s
            v = {
                "role": "producer",
                "phase": P_PHASES[phase],
                "type": MTYPES[mtype],
                "accepting_queues": [q for q in range(self.config.queues) if (mask >> q) & 1],
                "requests": sent,
                "queue": queue,
                "result": RESULTS[result],
            }
            if mtype == FIFO_MSG:
                v["group_queue"] = group
            if backoff:
                v["backoff"] = backoff
                v["waited"] = elapsed
            return v
        if role == SIMPLE:
            _, msgs, rr, calls = s
            return {
                "role": "simple",
                "messages": [
                    {"id": m, "server": SRV_NAMES[srv], "attempt": d, "held": bool(h)} for m, (srv, d, h) in enumerate(msgs)
                ],
                "next_queue": rr,
                "calls": [
                    None if op == OP_NONE else {"op": OP_NAMES[op], "message": cm, "requests": reqs}
                    for op, cm, reqs in calls
                ],
            }
        _, msgs, pqs = s
        return {
            "role": ROLE_NAMES[role],
            "messages": [
                {
                    "id": m,
                    "queue": self.config.msg_queue[m],
                    "server": SRV_NAMES[srv],
                    "attempt": d,
                    "client": CLI_NAMES[cli],
                    "cached": bool(inc),
                    "consumed": k,
                }
                for m, (srv, d, cli, inc, k) in enumerate(msgs)
            ],
            "process_queues": [
                {"waiting": bool(w), "notified": bool(nf), "locked": bool(lk), "worker": WORKER_NAMES[wk]}
                for w, nf, lk, wk in pqs
            ],
        }

    def actors(self, action, observation):
        name = action[0]
        if name in ("call_receive", "call_ack", "call_change_invisible", "rpc"):
            return (f"app-thread{action[1]}", "client") if name != "rpc" else ("client", "server")
        if name in ("fetch_route", "send"):
            return ("producer", "server")
        if name in ("pick", "tick", "retry"):
            return ("producer", "producer")
        if name in ("receive", "ack", "change_invisible", "forward_to_dlq", "rpc"):
            return ("client", "server")
        if name == "expire":
            return ("server", "server")
        if name in ("dispatch", "take", "unlock"):
            return ("dispatcher", "process-queue")
        if name == "consume":
            return ("consumer", "listener")
        return ("user", "client")
