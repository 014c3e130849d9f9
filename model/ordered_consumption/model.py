# One file: the model is the readable spec of seed 001, every role's actions (one small function each, in the seed's order) with the guards they share.
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

from conq.model.kernel import Model, int_range

from .state import (
    CLI_NAMES,
    C_ACKING,
    C_CACHED,
    C_CIDING,
    C_CONSUMING,
    C_DELAY,
    C_DLQING,
    C_NONE,
    FIFO,
    FIFO_MSG,
    HELD_NAMES,
    H_NONE,
    H_STALE,
    H_VALID,
    MEMO_NAMES,
    MTYPES,
    M_ACK,
    M_DLQ,
    M_NONE,
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
    SETTLED,
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
    #: a counterexample's changes per message (m0: the server's and the client's copy), process
    #: queue (pq0), consumer of a group (client0) and application call (call0); the rest is the
    #: role's own, named after it (the producer's send, the rebalance) (model/engines/changes.py)
    view_parts = {"messages": "m", "process_queues": "pq", "consumers": "client", "calls": "call"}
    view_root = "{role}"

    @classmethod
    def configs(cls):
        return named_configs()

    @classmethod
    def describe_configs(cls):
        return descriptions()

    #: producer, push consumer and simple consumer steps; m a message, p a process queue,
    #: th an application thread
    ACTIONS = {
        "fetch_route": (), "pick": (), "send": ("queue",), "tick": (), "retry": (),
        "receive": ("p",), "take": ("p",), "dispatch": ("p",), "consume": ("m",), "ack": ("m",),
        "change_invisible": ("m",), "forward_to_dlq": ("m",), "abandon": ("m",), "expire": ("m",), "unlock": ("p",),
        "next_attempt_delay": ("m",), "drop_process_queue": ("p",), "create_process_queue": ("p",),
        "assignment_stable": (),
        "call_receive": ("th",), "call_ack": ("th", "m"), "call_change_invisible": ("th", "m"), "rpc": ("th",),
        # the calls of the call-level view (conformance/ordered_consumption/calls.py), which name the
        # server's answer or the listener's result; answer / result: the model's observation name
        "route_answer": ("answer",), "send_answer": ("queue", "answer", "backoff"),
        "receive_answer": ("p", "answer"), "listener_returns": ("m", "result"), "ack_answer": ("m", "answer"),
        "change_invisible_answer": ("m", "answer"), "forward_to_dlq_answer": ("m", "answer"),
        "simple_receive": ("answer",), "simple_ack": ("m", "answer"), "simple_change_invisible": ("m", "answer"),
    }
    PARAM_TYPES = {"queue": int, "p": int, "m": int, "th": int, "answer": str, "result": str, "backoff": int}

    @classmethod
    def param_range(cls, config, action, param):
        # with several push consumers a push step's p / m names (client, its queue or copy):
        # group_param, so the range is the clients' times the queues or messages
        clients = max(1, config.consumers)
        if param == "queue":
            return range(config.queues)
        if param == "p":
            return range(clients * config.queues)
        if param == "m":
            return range(clients * len(config.msg_queue))
        if param == "th":
            return range(config.simple_threads)
        if param == "backoff":
            return range(2**63)
        return None

    @classmethod
    def validate_config(cls, config):
        problems = super().validate_config(config)
        bad = {p.partition(":")[0] for p in problems}
        c = config
        if not bad & {"producer", "push_standard", "push_fifo", "simple"} and not any(
                (c.producer, c.push_standard, c.push_fifo, c.simple)):
            problems.append("producer: at least one role (producer, push_standard, push_fifo, simple) must be enabled")
        int_range(problems, c, "queues", 1)
        int_range(problems, c, "max_send_attempts", 1)
        int_range(problems, c, "cache_messages", 1)
        int_range(problems, c, "cache_bytes", 1)
        int_range(problems, c, "server_batch", 1)
        int_range(problems, c, "max_attempts", 1)
        int_range(problems, c, "simple_threads", 1)
        int_range(problems, c, "consumers", 1)
        if "backoffs" not in bad:
            if not c.backoffs:
                problems.append("backoffs: must name at least one back-off (ticks)")
            for b in c.backoffs:
                if isinstance(b, bool) or not isinstance(b, int) or b < 1:
                    problems.append(f"backoffs: every back-off is a whole number of ticks >= 1, got {b!r}")
                    break
        queues_ok = "queues" not in bad and c.queues >= 1
        if "msg_queue" not in bad:
            if not c.msg_queue:
                problems.append("msg_queue: must name the queue of at least one message")
            for q in c.msg_queue:
                if isinstance(q, bool) or not isinstance(q, int) or (queues_ok and not 0 <= q < c.queues):
                    problems.append(f"msg_queue: every entry is a queue in 0..{c.queues - 1 if queues_ok else 'queues-1'}, got {q!r}")
                    break
        if "msg_size" not in bad:
            for z in c.msg_size:
                if isinstance(z, bool) or not isinstance(z, int) or z < 1:
                    problems.append(f"msg_size: every entry is a body size >= 1, got {z!r}")
                    break
            if "msg_queue" not in bad and len(c.msg_size) != len(c.msg_queue):
                problems.append(f"msg_size: must have one entry per message ({len(c.msg_queue)}, as msg_queue), got {len(c.msg_size)}")
        return problems

    def __init__(self, config: OCConfig | None = None):
        super().__init__(config)
        c = self.config
        n = len(c.msg_queue)
        self.n_msgs = n
        # messages of each queue in offset (send) order
        self.by_queue = tuple(tuple(m for m in range(n) if c.msg_queue[m] == q) for q in range(c.queues))
        # earlier messages of the same queue, for each message
        self.earlier = tuple(tuple(x for x in self.by_queue[c.msg_queue[m]] if x < m) for m in range(n))
        # per-queue thresholds as upstream computes them: max(1, total / queues)
        self.thr_count = max(1, c.cache_messages // c.queues)
        self.thr_bytes = max(1, c.cache_bytes // c.queues)
        self.roles = c.roles()
        # several push consumers in one group: the push states take the shape (role, server, clients)
        self.multi = c.consumers > 1

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
        empty_msgs = tuple((S_READY, 0, C_NONE, 0, 0, 0, 0, M_NONE, 0, 0, 0) for _ in range(self.n_msgs))
        empty_pqs = tuple((0, 0, 0, W_IDLE, 1) for _ in range(c.queues))
        if self.multi:
            empty_msgs, empty_pqs = self._group_init()
        # the assignment: 0 while the environment may still rebalance, 1 once it changes no more (without
        # rebalance it never changes: 1 from the start); see ``_assignment_stable``
        final = 0 if c.rebalance else 1
        if STANDARD in self.roles:
            out.append((STANDARD, empty_msgs, empty_pqs, final))
        if FIFO in self.roles:
            out.append((FIFO, empty_msgs, empty_pqs, final))
        if SIMPLE in self.roles:
            calls = tuple((OP_NONE, -1, 0) for _ in range(c.simple_threads))
            out.append((SIMPLE, tuple((S_READY, 0, 0) for _ in range(self.n_msgs)), 0, calls))
        return out

    def packed(self):
        """The packed view the explorer runs on (packed.py, issue 36), built once."""
        if "_packed_view" not in self.__dict__:
            from .packed import packed_view

            self._packed_view = packed_view(self)
        return self._packed_view

    def actions(self, s):
        role = s[0]
        if role == PRODUCER:
            return self._p_actions(s)
        if role == SIMPLE:
            return self._s_actions(s)
        return self._g_actions(s) if self.multi else self._c_actions(s)

    def step(self, s, a):
        role = s[0]
        if role == PRODUCER:
            return self._p_step(s, a)
        if role == SIMPLE:
            return self._s_step(s, a)
        return self._g_step(s, a) if self.multi else self._c_step(s, a)

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
            # throttled: retry after the back-off the server decides (the upstream Python client
            # gives up instead: throttle_ends_send)
            ends = exhausted or c.throttle_ends_send
            for b in c.backoffs:
                outs.append(
                    (("throttled", b), done_failed if ends else (PRODUCER, P_WAIT, mtype, mask, group, sent1, queue, b, 0, R_NONE))
                )
            return outs
        if name == "tick" and phase == P_WAIT and elapsed < backoff:
            return [(elapsed + 1, _set(s, 8, elapsed + 1))]
        if name == "retry" and phase == P_WAIT and (elapsed >= backoff or c.ignore_backoff):
            return [("retry", _set(s, 1, P_PICK))]
        return []

    # ======================================================= push consumer
    # Message record: see state.py (srv, delivered, cli, in_cache, consumed, copy, pending, memo,
    # old, ok_on, total); process queue record (waiting, notified, locked, worker, assigned).
    def _thresholds(self, pqs) -> tuple[int, int]:
        """Per process queue: max(1, total / process queues), over the process queues the consumer
        has now (upstream PushConsumerImpl.cacheMessageCountThresholdPerQueue / ...BytesThreshold...)."""
        c = self.config
        n = max(1, sum(pq[4] for pq in pqs))
        return max(1, c.cache_messages // n), max(1, c.cache_bytes // n)

    def _cache_of(self, msgs, p) -> tuple[int, int]:
        """Messages and bytes in process queue p's cache: its copies still counted (in_cache) and the
        newer deliveries cached behind a copy in consumption."""
        cnt = byts = 0
        size = self.config.msg_size
        for m in self.by_queue[p]:
            k = msgs[m][3] + (1 if msgs[m][6] else 0)
            cnt += k
            byts += k * size[m]
        return cnt, byts

    def _full(self, msgs, pqs, p) -> bool:
        thr_c, thr_b = self._thresholds(pqs)
        cnt, byts = self._cache_of(msgs, p)
        return cnt >= thr_c or (byts >= thr_b and not self.config.ignore_bytes)

    @staticmethod
    def _norm(r):
        """A settled message the client no longer holds is never delivered or consumed again: only its
        outcome and delivery count matter (and, as before, how often its last copy was consumed);
        the rest of its history is forgotten, so histories that end alike are one state."""
        if r[0] in SETTLED and r[2] == C_NONE and not r[6]:
            return (r[0], r[1], C_NONE, 0, r[4], 0, 0, M_NONE, 0, 0, 0)
        return r

    @staticmethod
    def _valid(r) -> bool:
        """The copy's receipt handle is the server's current one: its delivery is still invisible and
        no later delivery (or change of invisible duration) replaced it (broker._current)."""
        return r[0] == S_INVIS and r[5] == r[1]

    def _c_actions(self, s, expiry: bool = True):
        """The push consumer's actions in state s; ``expiry``: also the server's expiries (one client per
        group; with several, :meth:`_g_actions` lists them once for the group)."""
        c = self.config
        msgs, pqs, final = s[1], s[2], s[3]
        acts = []
        for p in range(c.queues):
            # the receive loop of every process queue never stops (one of a queue without messages
            # only ever gets empty answers: left out)
            if pqs[p][4] and self.by_queue[p]:
                acts.append(("receive", p))
        for p, (_, notified, _, worker, _) in enumerate(pqs):
            if notified:
                acts.append(("dispatch", p))
            if worker == W_TAKE:
                acts.append(("take", p))
            elif worker == W_UNLOCK:
                acts.append(("unlock", p))
        for m, r in enumerate(msgs):
            srv, cli, pending = r[0], r[2], r[6]
            if cli == C_CONSUMING:
                acts.append(("consume", m))
            elif cli == C_DELAY:
                acts.append(("next_attempt_delay", m))
            elif cli == C_ACKING:
                acts.append(("ack", m))
            elif cli == C_CIDING:
                acts.append(("change_invisible", m))
            elif cli == C_DLQING:
                acts.append(("forward_to_dlq", m))
            if expiry and srv == S_INVIS and (c.expiry_while_held or (cli == C_NONE and not pending)):
                acts.append(("expire", m))
        if c.rebalance and not final:
            for p in range(c.queues):
                if self.by_queue[p]:  # a queue with messages (another one only moves the thresholds)
                    acts.append(("drop_process_queue", p) if pqs[p][4] else ("create_process_queue", p))
            if expiry:  # the group's (one client: this one's)
                acts.append(("assignment_stable",))
        return acts

    def _c_step(self, s, a):
        role, msgs, pqs, final = s
        name = a[0]
        if name == "assignment_stable":
            return self._assignment_stable(s)
        if name in self._PQ_STEPS:
            p = a[1]
            if not 0 <= p < self.config.queues:
                return []
            if name in self._REBALANCE and final:
                return []
            outs = getattr(self, self._PQ_STEPS[name])(role, msgs, pqs, p)
        elif name in self._MSG_STEPS:
            m = a[1]
            if not 0 <= m < self.n_msgs:
                return []
            outs = getattr(self, self._MSG_STEPS[name])(role, msgs, pqs, m)
        else:
            return []
        # the steps below work on (role, msgs, pqs); no step but ``assignment_stable`` changes the flag
        return [(o, t + (final,)) for o, t in outs]

    _REBALANCE = ("drop_process_queue", "create_process_queue")

    def _assignment_stable(self, s):
        """The assignment changes no more (the environment's last rebalance is behind it): the one step
        that encodes the assumption "the environment rebalances finitely often" under weak fairness.  It
        stays enabled until taken, so every weakly fair run takes it (:meth:`fair`), and no rebalance is
        enabled after it.  Seed 001 has no rebalance at all (one process queue per message queue, for
        good); upstream asks for the assignment every 5 s (``PushConsumerImpl.startUp``:
        ``scheduleWithFixedDelay(scanAssignments, 1, 5, SECONDS)``) and ``syncProcessQueue`` drops or
        creates a process queue only when the server's answer changed (a consumer joined or left, the
        route changed), while a created process queue receives at once (``fetchMessageImmediately``).
        spec/ordered-consumption.md, "Rebalancing that never ends"."""
        if not self.config.rebalance or s[3]:
            return []
        return [("stable", s[:3] + (1,))]

    _PQ_STEPS = {"receive": "_receive", "dispatch": "_dispatch", "take": "_take", "unlock": "_unlock",
                 "drop_process_queue": "_drop_process_queue", "create_process_queue": "_create_process_queue"}
    _MSG_STEPS = {"consume": "_consume", "next_attempt_delay": "_next_attempt_delay", "ack": "_ack",
                  "change_invisible": "_change_invisible", "forward_to_dlq": "_forward_to_dlq", "expire": "_expire"}

    # -- receive and cache (seed 001 "消息的接收与缓存"; upstream ProcessQueueImpl.receiveMessage)
    def _receive(self, role, msgs, pqs, p):
        """One step of p's receive loop, which either waits for room (``waiting``) or has its request in
        flight.  The cache is checked *before* a request is issued and an answer is cached whatever the
        thresholds are by the time it comes: seed 001 step 3 checks the limit, then step 1 receives;
        upstream ``ProcessQueueImpl.receiveMessage`` checks ``isCacheFull`` and only then
        ``receiveMessageImmediately`` (which computes the batch and sends), and
        ``onReceiveMessageResult`` caches what came back (``cacheMessages``) and calls ``receiveMessage``
        again at once (the Python client 5.1.2 the same: ``__execute_receive``,
        ``__handle_received_message``).  So a loop waiting for room checks again (``full``: it keeps
        waiting; ``room``: it issues its request), and a loop with a request in flight takes the server's
        answer, caches it and makes its next check in the same step (full: it waits; otherwise its next
        request is in flight).  A rebalance that lowers the thresholds while a request is in flight
        does not call it back (spec/ordered-consumption.md, "A request in flight when the thresholds
        fall")."""
        c = self.config
        waiting, notified, locked, worker, assigned = pqs[p]
        if not assigned or not self.by_queue[p]:
            return []
        if waiting:
            # seed step 3: "否则等待一段时间然后重复执行本步骤" -- wait, then check again
            if self._full(msgs, pqs, p):
                return [("full", (role, msgs, pqs))]
            return [("room", (role, msgs, _set(pqs, p, (0, notified, locked, worker, assigned))))]
        # the request in flight was issued below the thresholds; its batch is computed here, when it is
        # answered (upstream: when issued; the same unless the thresholds fell in between)
        thr_c, _ = self._thresholds(pqs)
        cnt, _ = self._cache_of(msgs, p)
        batch = min(max(thr_c - cnt, 1), c.server_batch)
        queue_msgs = self.by_queue[p]
        if role == FIFO and c.server_gate:
            # the server hands out a FIFO queue's next message only once the previous one is
            # settled (one at a time, in order): broker.py "FIFO per message group"
            if any(msgs[m][0] == S_INVIS for m in queue_msgs):
                queue_msgs = ()
            batch = 1
        ready = [m for m in queue_msgs if msgs[m][0] == S_READY][:batch]
        issued = (role, msgs, _set(pqs, p, (0, notified, locked, worker, assigned)))
        if not ready:
            outs = [((), issued)]
        else:
            # the server returns up to `batch` messages, in queue order: any non-empty prefix;
            # received messages notify the dispatcher (seed step 2)
            signalled = _set(pqs, p, (0, 1, locked, worker, assigned))
            new, got, outs = list(msgs), [], []
            for m in ready:
                r = msgs[m]
                d1 = r[1] + 1
                new[m] = self._cache(r, d1)
                got.append((m, d1))
                outs.append((tuple(got), (role, tuple(new), signalled)))
            if c.server_faults:
                # the server delivered (attempt + 1, invisible) but the answer was lost: nobody holds
                # the message until its invisible time expires (faults.py "lost").  One message: a
                # lost batch reaches the same states as lost batches of one in turn.
                m = ready[0]
                d1 = msgs[m][1] + 1
                outs.append((("lost", ((m, d1),)), (role, _set(msgs, m, (S_INVIS, d1) + msgs[m][2:]), issued[2])))
        if c.server_faults:
            # timeout / unavailable / internal error, or throttled: nothing delivered; the loop receives
            # again after receive_retry_delay, or after the server's back-off
            outs += self._codes(("error", "throttled"), issued)
        # the loop's next check (seed step 3), right after the answer: full -> wait for room
        return [(o, self._checked(t, p)) for o, t in outs]

    def _checked(self, t, p):
        """State t after p's receive loop checked its cache: waiting for room when full, otherwise with
        its next request in flight."""
        role, msgs, pqs = t
        pq = pqs[p]
        w = 1 if self._full(msgs, pqs, p) else 0
        return t if pq[0] == w else (role, msgs, _set(pqs, p, (w,) + pq[1:]))

    def _codes(self, codes, state):
        """Answers that lead to the same state: one outcome per status code with ``answer_codes``,
        else one for the class, named after its first code (``error``: every retriable answer not
        applied -- timeout, unavailable, internal error, throttled; ``invalid-handle``:
        INVALID_RECEIPT_HANDLE or MESSAGE_NOT_FOUND)."""
        return [(code, state) for code in (codes if self.config.answer_codes else codes[:1])]

    def _cache(self, r, d1):
        """The message record after delivery d1 reached the process queue (ProcessQueue.cache)."""
        srv, d, cli, inc, cons, cd, pd, memo, old, okd, tot = r
        if cli == C_NONE:
            return (S_INVIS, d1, C_CACHED, 1, 0, d1, 0, memo, 0, okd, tot)
        if cli == C_CACHED:  # still cached: the entry takes the new delivery's handle and attempt
            return (S_INVIS, d1, C_CACHED, inc, cons, d1, pd, memo, old, okd, tot)
        # the previous delivery is still in consumption: the new one waits behind it
        return (S_INVIS, d1, cli, inc, cons, cd, d1, memo, old, okd, tot)

    # -- dispatch (seed 普通 step 2; 顺序 steps 2-3)
    def _dispatch(self, role, msgs, pqs, p):
        c = self.config
        waiting, notified, locked, worker, assigned = pqs[p]
        if not notified:
            return []
        if role == FIFO and c.client_lock:
            # seed FIFO step 2: lock the process queue; failing that, stop
            if locked:
                return [("lock-busy", (role, msgs, _set(pqs, p, (waiting, 0, locked, worker, assigned))))]
            return [("locked", (role, msgs, _set(pqs, p, (waiting, 0, 1, W_TAKE, assigned))))]
        # standard step 2 (and FIFO without the lock): take a cached message,
        # repeat until the cache has none
        for m in self.by_queue[p]:
            if msgs[m][2] == C_CACHED:
                return [(m, (role, _set(msgs, m, _set(msgs[m], 2, C_CONSUMING)), pqs))]
        return [("empty", (role, msgs, _set(pqs, p, (waiting, 0, locked, worker, assigned))))]

    def _take(self, role, msgs, pqs, p):
        waiting, notified, locked, worker, assigned = pqs[p]
        if worker != W_TAKE:
            return []
        # seed FIFO steps 2-3: the earliest cached message, or unlock and stop
        for m in self.by_queue[p]:
            if msgs[m][2] == C_CACHED:
                return [(m, (role, _set(msgs, m, _set(msgs[m], 2, C_CONSUMING)),
                             _set(pqs, p, (waiting, notified, locked, W_BUSY, assigned))))]
        return [("empty", (role, msgs, _set(pqs, p, (waiting, notified, 0, W_IDLE, assigned))))]

    def _unlock(self, role, msgs, pqs, p):
        waiting, notified, locked, worker, assigned = pqs[p]
        if worker != W_UNLOCK:
            return []
        # seed FIFO step 9: unlock and signal the dispatcher
        signal = 1 if self.config.unlock_signals else notified
        return [("unlocked", (role, msgs, _set(pqs, p, (waiting, signal, 0, W_IDLE, assigned))))]

    # -- consumption (seed 普通 steps 3-4; 顺序 steps 4-5, 7)
    def _consume(self, role, msgs, pqs, m):
        c = self.config
        r = msgs[m]
        srv, d, cli, inc, cons, cd, pd, memo, old, okd, tot = r
        if cli != C_CONSUMING:
            return []
        if memo != M_NONE:
            # C2: the outcome decided on an earlier delivery, whose settle the server rejected,
            # settles this redelivery without consuming it again (ProcessQueue.recall takes it out;
            # a rejected settle puts it back)
            to = C_ACKING if memo == M_ACK else C_DLQING
            return [(("remembered", MEMO_NAMES[memo]), (role, _set(msgs, m, (srv, d, to, inc, cons, cd, pd, M_NONE, old, okd, tot)), pqs))]
        cons1 = cons + 1
        # the delivery attempt the listener sees: the server's count for this copy plus one per
        # local retry (REFERENCE §2, FIFO mode)
        attempt = cd - 1 + cons1
        tot1 = min(tot + 1, c.max_attempts + 1) if role == FIFO else 0  # ghost (FIFO only, see state.py)
        erase = 0 if (role == STANDARD and not c.erase_after_settle) else inc  # seed standard step 3
        ok = (srv, d, C_ACKING, erase, cons1, cd, pd, memo, old, cd, tot1)
        if role == STANDARD:
            if c.standard_client_dlq and attempt >= c.max_attempts:
                fail_cli = C_DLQING
            else:
                fail_cli = C_CIDING  # seed standard step 4: change invisible duration
        else:
            # seed FIFO step 7: beyond the maximum -> DLQ, else consume again after the retry
            # policy's delay (upstream ProcessQueueImpl.eraseFifoMessage, getNextAttemptDelay)
            over = attempt > c.max_attempts if c.dlq_when_exceeds else attempt >= c.max_attempts
            fail_cli = C_DLQING if over else (C_DELAY if c.retry_delay else C_CONSUMING)
        fail = (srv, d, fail_cli, erase, cons1, cd, pd, memo, old, okd, tot1)
        return [(("ok", attempt), (role, _set(msgs, m, ok), pqs)), (("fail", attempt), (role, _set(msgs, m, fail), pqs))]

    def _next_attempt_delay(self, role, msgs, pqs, m):
        # the retry policy's delay before the next local attempt has elapsed (FIFO re-consumption:
        # RetryPolicy.getNextAttemptDelay; ConsumeService.consume(messageView, delay))
        if msgs[m][2] != C_DELAY:
            return []
        return [("elapsed", (role, _set(msgs, m, _set(msgs[m], 2, C_CONSUMING)), pqs))]

    # -- settling: ack, change invisible duration, forward to the DLQ
    def _let_go(self, role, msgs, pqs, m, srv=None, memo=None):
        """The client is done with its copy of m (settled, given up, or its one settle call made):
        erased from the cache; FIFO releases the process queue (seed 顺序 step 9: unlock, or
        without the lock signal the dispatcher); a newer delivery cached behind it becomes the copy."""
        c = self.config
        s0, d, cli, inc, cons, cd, pd, mm, old, okd, tot = msgs[m]
        s0 = s0 if srv is None else srv
        mm = mm if memo is None else memo
        # ok_on is kept only while the copy that succeeded lives: every later copy comes from a later delivery
        if pd:
            rec = (s0, d, C_CACHED, 1, 0, pd, 0, mm, 0, 0, tot)
        else:
            rec = self._norm((s0, d, C_NONE, 0, cons, cd, 0, mm, 0, 0, tot))
        p = c.msg_queue[m]
        pq = pqs[p]
        if role == FIFO and not old:
            if c.client_lock:
                pq = (pq[0], pq[1], pq[2], W_UNLOCK, pq[4])
            else:
                pq = (pq[0], 1, pq[2], pq[3], pq[4])
        elif pd and pq[4]:
            pq = (pq[0], 1, pq[2], pq[3], pq[4])  # the promoted delivery is there to be taken
        return (role, _set(msgs, m, rec), _set(pqs, p, pq))

    def _give_up(self, role, msgs, pqs, m, outcome):
        """C1: after a non-retriable answer repeating the request can never succeed: stop and let
        the server's redelivery decide; FIFO remembers the outcome for it (C2)."""
        c = self.config
        memo = None
        if role == FIFO and c.remember_outcome and (c.memo_survives_drop or not msgs[m][8]):
            memo = outcome
        return self._let_go(role, msgs, pqs, m, memo=memo)

    def _settle_answers(self, role, msgs, pqs, m, applied, repeat, outcome, lost_applied=None):
        """Every answer the server can give to one settle request (ok first): ``applied`` is the
        message record once the server took the request (``lost_applied``, if given, as the client
        keeps it when the answer is lost); ``repeat``: the client repeats the request after a
        retriable answer (FIFO steps 6, 8; upstream standard mode), else makes one call."""
        c = self.config
        s = (role, msgs, pqs)
        r = msgs[m]
        valid = self._valid(r)
        give_up = s if (repeat and c.settle_until_success) else self._give_up(role, msgs, pqs, m, outcome)
        again = s if repeat else self._let_go(role, msgs, pqs, m)
        outs = []
        if valid:
            done = _set(msgs, m, applied)
            outs.append(("ok", self._let_go(role, done, pqs, m)))
            if c.server_faults:
                # applied, but the answer was lost (REQUEST_TIMEOUT): repeated, it meets a handle
                # that is no longer valid
                kept = applied if lost_applied is None else lost_applied
                outs.append(("lost", (role, _set(msgs, m, kept), pqs) if repeat else self._let_go(role, done, pqs, m)))
        # retriable, not applied: timeout / unavailable / internal error, or throttled
        outs += self._codes(("error", "throttled") if c.server_faults else ("error",), again)
        if not valid:
            # non-retriable: the handle expired or was superseded, or the message is settled (the
            # proxy: ``AbstractProcessor.validateReceiptHandle``, "receipt handle is expired")
            outs += self._codes(("invalid-handle", "not-found"), give_up)
        if c.server_faults:
            # non-retriable, not applied, whatever the handle: the proxy checks the request (topic,
            # group: ``AckMessageActivity.validateTopicAndConsumerGroup``) before it decodes the handle
            outs.append(("bad-request", give_up))
        return outs

    def _ack(self, role, msgs, pqs, m):
        r = msgs[m]
        if r[2] != C_ACKING:
            return []
        # seed FIFO step 6: repeated until it succeeds; seed standard step 4: one call (if it fails
        # the server redelivers the message when its invisible time is over); upstream standard:
        # repeated (settle_retry)
        repeat = role == FIFO or self.config.settle_retry
        return self._settle_answers(role, msgs, pqs, m, _set(r, 0, S_ACKED), repeat, M_ACK)

    def _change_invisible(self, role, msgs, pqs, m):
        r = msgs[m]
        if r[2] != C_CIDING:
            return []
        # seed standard step 4: the message reappears once the new invisible duration (the retry
        # policy's delay) is over; the server issues a new receipt handle (the copy's is superseded)
        return self._settle_answers(role, msgs, pqs, m, r, self.config.settle_retry, M_NONE, lost_applied=_set(r, 5, 0))

    def _forward_to_dlq(self, role, msgs, pqs, m):
        r = msgs[m]
        if r[2] != C_DLQING:
            return []
        # seed FIFO step 8: retried until it succeeds
        return self._settle_answers(role, msgs, pqs, m, _set(r, 0, S_DLQ_CLI), True, M_DLQ)

    # -- server events
    def _expire(self, role, msgs, pqs, m):
        c = self.config
        r = msgs[m]
        if r[0] != S_INVIS or not (c.expiry_while_held or (r[2] == C_NONE and not r[6])):
            return []
        o, rec = self._expired(r)
        return [(o, (role, _set(msgs, m, rec), pqs))]

    def _expired(self, r):
        """The invisible time is over: the message becomes visible again (redelivered with attempt + 1,
        the handle of this delivery is no longer valid), or the server dead-letters it once the
        delivery attempts are used up (REFERENCE §2; broker._expire).  (observation, r's new record)."""
        srv, d, cli, inc, cons, cd, pd, memo, old, okd, tot = r
        if d >= self.config.max_attempts:
            return "dead-lettered", self._norm((S_DLQ_SRV, d, cli, inc, cons, cd, pd, memo, old, okd, tot))
        if cli == C_NONE:
            cons, cd = 0, 0
        return "visible", (S_READY, d, cli, inc, cons, cd, pd, memo, old, okd, tot)

    # -- rebalance (upstream PushConsumerImpl.syncProcessQueue: dropProcessQueue / createProcessQueue)
    def _drop_process_queue(self, role, msgs, pqs, p):
        c = self.config
        if not (c.rebalance and pqs[p][4] and self.by_queue[p]):
            return []
        new = list(msgs)
        for m in self.by_queue[p]:
            srv, d, cli, inc, cons, cd, pd, memo, old, okd, tot = msgs[m]
            if not c.memo_survives_drop:
                memo = M_NONE
            if cli == C_CACHED:
                # discarded: the server redelivers it when its invisible time is over
                new[m] = self._norm((srv, d, C_NONE, 0, cons, cd, 0, memo, 0, okd, tot))
            elif cli != C_NONE:
                # a consumption under way finishes on the dropped process queue (C4)
                new[m] = (srv, d, cli, 0, cons, cd, 0, memo, 1 if role == FIFO else 0, okd, tot)
            else:
                new[m] = (srv, d, cli, inc, cons, cd, pd, memo, old, okd, tot)
        return [("dropped", (role, tuple(new), _set(pqs, p, (0, 0, 0, W_IDLE, 0))))]

    def _create_process_queue(self, role, msgs, pqs, p):
        if not self.config.rebalance or pqs[p][4] or not self.by_queue[p]:
            return []
        # given back: a new process queue (its own lock) whose receive loop starts at once
        return [("created", (role, msgs, _set(pqs, p, (0, 0, 0, W_IDLE, 1))))]

    # ======================================== several push consumers in one group (issue 19, PF2)
    # The broker keeps one consumption state per consumer group and queue, whichever client asks
    # (impl/ordered_consumption/broker.py ``_gq``: one ``_GQ`` per (queue, group); ``_take``,
    # ``_current`` and ``_settle`` read and change it for every client of the group): a message's
    # visibility, its delivery count (the attempt a receive carries), its current receipt handle, the
    # FIFO gate and the outcome are the group's.  Each client has its own process queues (seed 001:
    # "队列与 process queue 这个结构是一一对应的", in each client) and its own copies: cache,
    # consumption, settle, remembered outcome.  So with ``consumers`` > 1 a push state is
    #
    #     (role, server, clients)    server[m]  = (srv, delivered)
    #                                clients[c] = (copies, process queues)
    #                                copies[m]  = the client fields of the one-client record (state.py):
    #                                             (cli, in_cache, consumed, copy, pending, memo, old, ok_on, total)
    #
    # and each client step is the one-client step taken on that client's *view* (the server fields
    # joined to its copies; its process queues), so every rule of the one-client model holds per
    # client unchanged, and the coupling is the shared server fields: what one client's ack settles
    # opens the gate for the other's receive (``_receive``, ``server_gate``), and a copy one client
    # still holds after the message was delivered again to the other carries the older delivery, whose
    # handle the server refuses (``_valid``; broker ``_current``).  The server's expiry is one step for
    # the group, changing every client's record of the message (``_expired``).  Actions name their
    # client in their one parameter (a trace's parameters are plain values): the group's process
    # queues and copies are numbered client by client, ``p = c * queues + q`` (client c's process
    # queue of queue q) and ``m = c * messages + x`` (client c's copy of message x) -- with one client
    # exactly the one-client numbering; ``expire`` and every observation name the message itself.  The
    # assignment (broker.py ``query_assignment``): "shared" gives every client every queue (RocketMQ 5
    # pop), "exclusive" queue q to client q mod consumers (the broker's round-robin over its sorted
    # clients); a rebalance drops or creates one client's process queue (the clients' views of the
    # assignment may overlap while each catches up with it, as their periodic queries allow).

    def _group_init(self):
        """The initial server fields and clients of a group of ``consumers`` push consumers."""
        c = self.config
        k = c.consumers
        copies = tuple((C_NONE, 0, 0, 0, 0, M_NONE, 0, 0, 0) for _ in range(self.n_msgs))
        server = tuple((S_READY, 0) for _ in range(self.n_msgs))
        clients = tuple(
            (copies, tuple((0, 0, 0, W_IDLE, 0 if c.exclusive_assignment and q % k != i else 1) for q in range(c.queues)))
            for i in range(k))
        return server, clients

    def consumer_view(self, s, i):
        """Client i's view of group state s: a one-client push state (role, msgs, pqs)."""
        role, server, clients, final = s
        copies, pqs = clients[i]
        return (role, tuple(sv + cp for sv, cp in zip(server, copies)), pqs, final)

    def consumer_views(self, s):
        """Every client's (msgs, pqs) of a push state (one client: the state's own two fields)."""
        if not self.multi:
            return ((s[1], s[2]),)
        return tuple(self.consumer_view(s, i)[1:3] for i in range(self.config.consumers))

    def _with_view(self, s, i, t):
        """Group state s after client i's view became t: every message's server fields and client i's
        copies and process queues from t; another client's record of a message whose server fields
        the step changed is normalised as that client's own step would (``_norm``: settled, not held)."""
        role, server, clients, _ = s
        msgs, pqs = t[1], t[2]
        new_server = tuple(r[:2] for r in msgs)
        out = list(clients)
        out[i] = (tuple(r[2:] for r in msgs), pqs)
        if new_server != server:
            for j, (copies, jpqs) in enumerate(clients):
                if j != i:
                    out[j] = (tuple(self._norm(sv1 + cp)[2:] if sv1 != sv else cp
                                    for sv, sv1, cp in zip(server, new_server, copies)), jpqs)
        return (role, new_server, tuple(out), t[3])

    @staticmethod
    def _holds(cp) -> bool:
        """A client's copies record of a message: it holds a copy (or a newer delivery cached behind one)."""
        return cp[0] != C_NONE or bool(cp[4])

    def _g_actions(self, s):
        c = self.config
        _, server, clients, final = s
        acts = []
        for i in range(c.consumers):
            acts += [(a[0], self.group_param(a[0], i, a[1]))
                     for a in self._c_actions(self.consumer_view(s, i), expiry=False)]
        for m, (srv, _) in enumerate(server):
            # the server's expiry, once for the group; without expiry_while_held only while no client holds m
            if srv == S_INVIS and (c.expiry_while_held or not any(self._holds(cp[m]) for cp, _ in clients)):
                acts.append(("expire", m))
        if c.rebalance and not final:
            acts.append(("assignment_stable",))  # the group's assignment, once
        return acts

    def _g_step(self, s, a):
        name = a[0]
        if name == "expire":
            m = a[1] if len(a) > 1 else None
            if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < self.n_msgs:
                return []
            return self._g_expire(s, m)
        if name == "assignment_stable":
            return self._assignment_stable(s)
        if name not in self._PQ_STEPS and name not in self._MSG_STEPS or len(a) != 2:
            return []
        x = a[1]
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            return []
        i, y = self.split_param(name, x)
        if i >= self.config.consumers:
            return []
        return [(o, self._with_view(s, i, t)) for o, t in self._c_step(self.consumer_view(s, i), (name, y))]

    def group_param(self, name, i, y):
        """The group's parameter of client i's process queue (``p`` steps) or copy (``m`` steps) y."""
        return i * (self.config.queues if name in self._PQ_STEPS else self.n_msgs) + y

    def split_param(self, name, x):
        """(client, its process queue or copy) of the group's parameter x of a push step (the inverse of
        :meth:`group_param`; with one client, (0, x))."""
        if not self.multi:
            return 0, x
        return divmod(x, self.config.queues if name in self._PQ_STEPS else self.n_msgs)

    def _g_expire(self, s, m):
        c = self.config
        role, server, clients, final = s
        if server[m][0] != S_INVIS or not (c.expiry_while_held or not any(self._holds(cp[m]) for cp, _ in clients)):
            return []
        out, o, rec = [], None, None
        for copies, pqs in clients:
            o, rec = self._expired(server[m] + copies[m])
            out.append((_set(copies, m, rec[2:]), pqs))
        return [(o, (role, _set(server, m, rec[:2]), tuple(out), final))]

    # ===================================================== simple consumer
    # Seed 001 "Simple consumer": every call is one remote call, no internal retry;
    # the application calls receive from several threads at once.
    # state: (SIMPLE, msgs (srv, delivered, held), rr, calls) with one call record
    # (op, message, requests) per application thread; held: none, a valid copy, a stale copy.
    def _s_busy(self, calls, m) -> bool:
        return any(op in (OP_ACK, OP_CID) and cm == m for op, cm, _ in calls)

    def _s_actions(self, s):
        c = self.config
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
            if srv == S_INVIS and (held != H_VALID or c.expiry_while_held):
                acts.append(("expire", m))
        return acts

    def _s_step(self, s, a):
        name = a[0]
        if name in ("call_receive", "call_ack", "call_change_invisible", "rpc"):
            th = a[1]
            if not 0 <= th < len(s[3]):
                return []
            if name == "rpc":
                return self._s_rpc(s, th)
            return self._s_call(s, name, th, a[2] if len(a) > 2 else None)
        m = a[1]
        if not 0 <= m < self.n_msgs:
            return []
        if name == "abandon":
            return self._s_abandon(s, m)
        if name == "expire":
            return self._s_expire(s, m)
        return []

    def _s_call(self, s, name, th, m):
        _, msgs, rr, calls = s
        if calls[th][0] != OP_NONE:
            return []
        if name == "call_receive":
            return [("called", (SIMPLE, msgs, rr, _set(calls, th, (OP_RECEIVE, -1, 0))))]
        if m is None or not 0 <= m < self.n_msgs or not msgs[m][2] or self._s_busy(calls, m):
            return []
        new_op = OP_ACK if name == "call_ack" else OP_CID
        return [("called", (SIMPLE, msgs, rr, _set(calls, th, (new_op, m, 0))))]

    def _s_rpc(self, s, th):
        """The one request of a call, and every answer the server can give to it."""
        c = self.config
        _, msgs, rr, calls = s
        op, cm, reqs = calls[th]
        if op == OP_NONE:
            return []
        idle = _set(calls, th, (OP_NONE, -1, 0))

        def returned(new_msgs, new_rr=rr):
            # a failure is returned to the application as is (the mutant retries instead)
            if c.simple_retry:
                return (SIMPLE, new_msgs, rr, _set(calls, th, (op, cm, min(reqs + 1, 2))))
            return (SIMPLE, new_msgs, new_rr, idle)

        outs: list = []
        if op == OP_RECEIVE:
            for q, rr1 in (self._select_topic_queue(rr) if c.simple_any_queue else self._take_message_queue(rr)):
                first = next((m for m in self.by_queue[q] if msgs[m][0] == S_READY), None)
                if first is None:
                    if ("ok", ()) not in [o[0] for o in outs]:
                        outs.append((("ok", ()), (SIMPLE, msgs, rr1, idle)))
                else:
                    d1 = msgs[first][1] + 1
                    outs.append((("ok", (first, d1)), (SIMPLE, _set(msgs, first, (S_INVIS, d1, H_VALID)), rr1, idle)))
                    if c.server_faults:  # delivered, the answer lost: nobody holds it until it expires
                        lost = _set(msgs, first, (S_INVIS, d1, msgs[first][2]))
                        outs.append((("lost", (first, d1)), returned(lost, rr1)))
        else:
            srv, d, held = msgs[cm]
            if op == OP_ACK:
                applied, got = (S_ACKED, d, H_NONE), "acked"
            else:
                # the message becomes visible again when its new invisible duration is over
                applied, got = (srv, d, H_NONE), "changed"
            if held == H_VALID:
                outs.append((("ok", got), (SIMPLE, _set(msgs, cm, applied), rr, idle)))
                if c.server_faults:  # applied, the answer lost: the application's handle is now stale
                    outs.append((("lost", got), returned(_set(msgs, cm, (applied[0], d, H_STALE)))))
        # a failed receive moves the round-robin on too: upstream SimpleConsumerImpl.receive0 takes the
        # next queue (takeMessageQueue, index.getAndIncrement) before it sends, and a client cannot
        # tell a lost answer from an error anyway (both REQUEST_TIMEOUT); seed 001 is silent (issue 14, F1)
        outs += self._codes(("error", "throttled") if c.server_faults else ("error",),
                            returned(msgs, (rr if c.simple_any_queue else (rr + 1) % c.queues) if op == OP_RECEIVE else rr))
        if op != OP_RECEIVE:
            if msgs[cm][2] == H_STALE:
                outs += self._codes(("invalid-handle", "not-found"), returned(msgs))
            if c.server_faults:  # the request is checked before its handle (``_settle_answers``)
                outs.append(("bad-request", returned(msgs)))
        return outs

    def _take_message_queue(self, rr):
        """Upstream Java SimpleConsumerImpl.receive0 -> takeMessageQueue
        (client/src/main/java/org/apache/rocketmq/client/java/impl/consumer/SimpleConsumerImpl.java):
        the next queue round-robin; the index moves on after every receive answer (F1)."""
        return [(rr, (rr + 1) % self.config.queues)]

    def _select_topic_queue(self, rr):
        """Python client 5.1.2 SimpleConsumer.__select_topic_queue
        (rocketmq/v5/consumer/simple_consumer.py): a fresh QueueSelector with a random start on
        every receive, so any queue may be asked; no index is kept (rr stays as it is)."""
        return [(q, rr) for q in range(self.config.queues)]

    def _s_abandon(self, s, m):
        _, msgs, rr, calls = s
        srv, d, held = msgs[m]
        if not held or self._s_busy(calls, m):
            return []
        # the application gives up on the message: it reappears when its invisible time is over
        return [("abandoned", (SIMPLE, _set(msgs, m, (srv, d, H_NONE)), rr, calls))]

    def _s_expire(self, s, m):
        c = self.config
        _, msgs, rr, calls = s
        srv, d, held = msgs[m]
        if srv != S_INVIS or (held == H_VALID and not c.expiry_while_held):
            return []
        stale = H_STALE if held else H_NONE  # a copy the application holds keeps a dead handle
        if d >= c.max_attempts:
            return [("dead-lettered", (SIMPLE, _set(msgs, m, (S_DLQ_SRV, d, stale)), rr, calls))]
        return [("visible", (SIMPLE, _set(msgs, m, (S_READY, d, stale)), rr, calls))]

    # ================================================================ fairness
    #: answers after which the client has its definitive result: weakly fair (the server
    #: eventually gives one); a timeout, throttling or a lost answer is never forced
    _DEFINITIVE = frozenset({"ok", "invalid-handle", "not-found"})

    def fair(self, action, observation):
        """Weak fairness per class: every client step, the server's invisible-time expiry, the
        retry policy's delay, a receive answered with messages (or none), and a settle answered
        with its definitive result (OK to a valid handle, INVALID_RECEIPT_HANDLE / NOT_FOUND to a
        stale one) are eventually taken while they stay enabled.  Not forced: timeouts, throttling,
        lost answers and BAD_REQUEST; the simple consumer's application calls; any one rebalance (the
        assignment is the environment's).  The environment's one fair step is ``assignment_stable``: the
        assignment eventually changes no more (rebalancing is finite, however long), see
        :meth:`_assignment_stable`."""
        name = action[0]
        o = observation
        if name in ("ack", "change_invisible", "forward_to_dlq"):
            return action if o in self._DEFINITIVE else None
        if name == "receive":
            return None if o in ("error", "throttled") or (isinstance(o, tuple) and o and o[0] == "lost") else action
        if name == "rpc":
            ok = o in self._DEFINITIVE or (isinstance(o, tuple) and o[0] == "ok")
            return action if ok else None
        if name.startswith("call_") or name in ("abandon", "drop_process_queue", "create_process_queue"):
            return None
        return action

    # ============================================================== symmetry (issue 18)
    def _symmetries(self) -> tuple[tuple, tuple]:
        """The renamings under which this configuration's model and properties are invariant, as
        ``(push, simple)``: each a tuple of ``(sigma, pi)``, sigma a renaming of the message queues
        and pi the renaming of the messages it carries (``pi[m]``: m's new index).

        What names a part, field by field: a message is named by its index in the message records
        (push and simple), in the simple consumer's call records and in observations; a queue by
        the process-queue records (push), ``msg_queue`` and the simple consumer's round-robin
        pointer.  So a queue renaming sigma is a symmetry only if it carries every queue's
        messages, in offset order, onto messages of the same body sizes (``msg_queue``,
        ``msg_size``: the cache thresholds count bytes); the messages' renaming pi follows.  The
        push consumer is invariant under every such sigma (its thresholds depend on how many
        process queues are assigned, not which).  The simple consumer asks the queues round-robin
        (``rr + 1 mod queues``), so only the rotations among them.  The producer has no
        interchangeable part: a normal message's candidates start at queue 0 in a fixed cyclic
        order (seed 001 Producer step 7) and the initial states name every acceptance mask, so
        renaming queues changes what it does; its states are never renamed.

        The simple consumer's application threads are interchangeable too (a call record names
        no thread; ``_s_busy`` looks at all of them): :meth:`canonical` sorts them."""
        found = getattr(self, "_sym", None)
        if found is None:
            import itertools

            c = self.config
            # a queue's messages in offset order, and their sizes: what sigma must carry onto each other
            shape = [tuple(c.msg_size[m] for m in self.by_queue[q]) for q in range(c.queues)]
            ident = tuple(range(c.queues))
            push, simple = [], []
            for sigma in itertools.permutations(range(c.queues)):
                if sigma == ident or any(shape[q] != shape[sigma[q]] for q in range(c.queues)):
                    continue
                pi = [0] * self.n_msgs
                for q in range(c.queues):
                    for m, m2 in zip(self.by_queue[q], self.by_queue[sigma[q]]):
                        pi[m] = m2
                if not (self.multi and c.exclusive_assignment):  # exclusive: which client holds q names q
                    push.append((sigma, tuple(pi)))
                if all(sigma[q] == (sigma[0] + q) % c.queues for q in range(c.queues)):
                    simple.append((sigma, tuple(pi)))
            found = self._sym = (tuple(push), tuple(simple))
        return found

    def permute(self, s, sigma, pi):
        """``s`` with queue q renamed ``sigma[q]`` and message m renamed ``pi[m]`` in every field that
        names one (see :meth:`_symmetries`); the producer's states are returned as they are."""
        role = s[0]
        if role == PRODUCER:
            return s
        msgs = [None] * self.n_msgs
        for m, r in enumerate(s[1]):
            msgs[pi[m]] = r
        if role == SIMPLE:
            calls = tuple(sorted((op, pi[m] if m >= 0 else m, reqs) for op, m, reqs in s[3]))
            return (SIMPLE, tuple(msgs), sigma[s[2]], calls)
        if self.multi:  # the server fields, and each client's copies and process queues
            clients = []
            for copies, pqs in s[2]:
                cps, qs = [None] * self.n_msgs, [None] * len(pqs)
                for m, r in enumerate(copies):
                    cps[pi[m]] = r
                for q, pq in enumerate(pqs):
                    qs[sigma[q]] = pq
                clients.append((tuple(cps), tuple(qs)))
            return (role, tuple(msgs), tuple(clients), s[3])
        pqs = [None] * len(s[2])
        for q, pq in enumerate(s[2]):
            pqs[sigma[q]] = pq
        return (role, tuple(msgs), tuple(pqs), s[3])

    def orbit(self, s):
        """Every renaming of ``s`` (itself included): the class :meth:`canonical` picks the least of."""
        import itertools

        role = s[0]
        if role == PRODUCER:
            return [s]
        push, simple = self._symmetries()
        ident = (tuple(range(self.config.queues)), tuple(range(self.n_msgs)))
        out = []
        for sigma, pi in (ident,) + (simple if role == SIMPLE else push):
            t = self.permute(s, sigma, pi) if (sigma, pi) != ident else s
            if role == SIMPLE:  # and every order of the threads' call records
                out.extend((SIMPLE, t[1], t[2], calls) for calls in dict.fromkeys(itertools.permutations(t[3])))
            else:
                out.append(t)
        return list(dict.fromkeys(out))

    def canonical(self, s):
        """The least of ``s``'s renamings (queues with their messages, and the simple consumer's
        threads): one representative per class."""
        role = s[0]
        if role == PRODUCER:
            return s
        push, simple = self._symmetries()
        if role == SIMPLE:
            best = (SIMPLE, s[1], s[2], tuple(sorted(s[3])))
            for sigma, pi in simple:
                t = self.permute(s, sigma, pi)
                if t < best:
                    best = t
            return best
        best = s
        for sigma, pi in push:
            t = self.permute(s, sigma, pi)
            if t < best:
                best = t
        return best

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
                    {"id": m, "server": SRV_NAMES[srv], "attempt": d, "held": HELD_NAMES[h]} for m, (srv, d, h) in enumerate(msgs)
                ],
                "next_queue": rr,
                "calls": [
                    None if op == OP_NONE else {"op": OP_NAMES[op], "message": cm, "requests": reqs}
                    for op, cm, reqs in calls
                ],
            }
        if self.multi:
            _, server, clients, _ = s
            return {
                "role": ROLE_NAMES[role],
                "messages": [{"id": m, "queue": self.config.msg_queue[m], "server": SRV_NAMES[srv], "attempt": d}
                             for m, (srv, d) in enumerate(server)],
                "consumers": [
                    {k: v for k, v in self._push_view(self.consumer_view(s, i), one_client=True).items()
                     if k not in ("role", "assignment")}
                    for i in range(len(clients))
                ],
                **self._assignment_view(s),
            }
        return self._push_view(s)

    def _assignment_view(self, s):
        """With rebalance: whether the environment may still change the assignment (no key without: it
        never changes, and the views of those configurations stay as they were)."""
        return {"assignment": "stable" if s[3] else "may change"} if self.config.rebalance else {}

    def _push_view(self, s, one_client: bool = False):
        role, msgs, pqs = s[:3]
        return {
            "role": ROLE_NAMES[role],
            "messages": [
                {
                    "id": m,
                    "queue": self.config.msg_queue[m],
                    **({} if one_client else {"server": SRV_NAMES[srv], "attempt": d}),
                    "client": CLI_NAMES[cli],
                    "cached": bool(inc),
                    "consumed": k,
                    "copy_attempt": cd,  # the delivery the client's copy came with (0: superseded)
                    "pending_attempt": pd or None,  # a newer delivery cached behind it
                    "memo": MEMO_NAMES[memo],
                    "on_dropped_queue": bool(old),
                    "ok_on_delivery": okd,  # ghost: the listener last succeeded on this delivery
                    "consumed_total": tot,  # ghost: consumptions over all deliveries
                }
                for m, (srv, d, cli, inc, k, cd, pd, memo, old, okd, tot) in enumerate(msgs)
            ],
            "process_queues": [
                {"waiting": bool(w), "notified": bool(nf), "locked": bool(lk), "worker": WORKER_NAMES[wk],
                 "assigned": bool(asg)}
                for w, nf, lk, wk, asg in pqs
            ],
            **self._assignment_view(s),
        }

    def actors(self, action, observation):
        who = self._actors(action, observation)
        if self.multi and len(action) > 1 and (action[0] in self._PQ_STEPS or action[0] in self._MSG_STEPS) \
                and action[0] != "expire":  # one client of the group
            i = self.split_param(action[0], action[1])[0]
            return tuple(f"{x}{i}" if x in ("client", "dispatcher", "process-queue", "consumer", "retry-policy",
                                            "rebalance") else x for x in who)
        return who

    def _actors(self, action, observation):
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
        if name == "next_attempt_delay":
            return ("retry-policy", "consumer")
        if name in ("drop_process_queue", "create_process_queue"):
            return ("rebalance", "process-queue")
        if name == "assignment_stable":
            return ("rebalance", "rebalance")
        return ("user", "client")
