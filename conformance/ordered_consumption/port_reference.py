"""The ordered-consumption port reference: what spec/ports/ordered-consumption.md says that cannot
be computed (model/ordered_consumption/model.py; the call-level view calls.py; the reference driver
driver.py).  conformance/port_reference.py computes the rest.
"""

from __future__ import annotations

from conq.conformance.port_reference import Call, Declared

_OC_STATE = """\
A run drives **one role** of seed 001's thin client against a broker the port runs itself: the
producer, the push consumer in standard or FIFO mode, or the simple consumer (the configuration's
`producer`, `push_standard`, `push_fifo`, `simple` say which roles a run may drive; the port picks one
from `seed`, and the snapshot's `role` tells the checker which). Messages `m` (`0..n-1`) are sent
before the run, in order, to queue `config.msg_queue[m]` with a body of `config.msg_size[m]` bytes (FIFO:
one message group per queue); process queue `p` is queue `p`. Every message has a delivery count
`attempt`: 0 before its first delivery, one more at every delivery by the server (a `receive_answer` or
`simple_receive` answered `ok` that carries it, or `lost`); the listener sees, and the observations and the snapshot's
`messages[m].attempt` show, the count of the delivery at hand. A producer run sends one message, whose
type (`normal`, `fifo`, `transactional`), accepting queues and (FIFO) group queue the port picks from
`seed` among the model's initial states; its route is fetched or already cached. The producer's
**candidates** are the queues `0..config.queues-1`, in rotation from queue 0: attempt `k` (from 0) sends to
queue `k mod config.queues`; a FIFO message sends to its group's queue on every attempt. Before every
attempt, not only the first, the producer checks that the queue accepts the message's type: a candidate that
does not (not in `accepting_queues`) fails the send at once, at that attempt. With the route not cached
the run starts with the route query (`route_answer`); with it cached the producer picks its first candidate
and sends at once: the first call is that `send_answer` (or none: the send already failed on a type
mismatch, the initial snapshot says `phase` `done`, `result` `failed`).

A run whose configuration enables several roles (`producer`, `push_standard`, `push_fifo`, `simple`, two or
more true) drives the one the port picked; the checker may still send calls of the other roles (its traces
follow every initial state the model allows, and probe calls the model has disabled): the port answers them
with error 13 (`not-enabled`: the model has them disabled in the role it runs), never 12.

Several push consumers in one group (`config.consumers` > 1): a push call names its consumer in its parameter:
process queue `p = c * config.queues + q` is consumer `c`'s process queue of queue `q`, and message
`m = c * n + x` (`n` messages) its copy of message `x`; `expire` and every observation name the message
itself (`x`).

The port's implementation runs its own threads (receive loops, dispatcher, consumption workers, the
producer's send); a request to the server, a listener call, a retry-policy delay or a back-off **waits
for the checker**: each call below names the server's answer (or the listener's result, or the event),
the port makes its implementation get exactly that, and answers once every thread waits again. The
server's invisible time never runs out by itself (`expire` makes it), and the server's answer to a
request the checker did not answer yet is never given.
"""

_OC_CALLS = (
    Call("route_answer", (("answer", "`ok` or `failed`"),), "the producer waits for its route query",
         "The server answers the route query (`failed`: any error); the producer then picks its queue and "
         "checks the type (a mismatch fails the send at once) and sends, or fails.", "the answer"),
    Call("send_answer", (("queue", "the queue of the pending send"), ("answer", "`ok`, `error` or `throttled`"),
                         ("backoff", "ticks the server asks to wait (throttled), else 0")),
         "the producer waits for the answer to a send request to `queue`",
         "The server answers the send: `ok` ends the send; `error` (a retriable failure) makes the producer "
         "retry at once on the next candidate (a FIFO message on its group's queue; a transactional message "
         "never), `throttled` after `backoff` ticks; or fail once its attempts are used up.",
         "`\"ok\"`, `\"error\"` or `[\"throttled\", backoff]`"),
    Call("tick", (), "the producer waits out a back-off", "One tick of the producer's clock; once the back-off "
         "is over the producer picks its next queue and sends (or fails).", "the ticks waited so far"),
    Call("receive_answer", (("p", "process queue"), ("answer", "`ok`, `lost`, `error` or `throttled`")),
         "`p` is assigned, has messages (the configuration sends at least one message to queue `p`: "
         "`config.msg_queue` names it; whether one is deliverable now does not matter, an `ok` may carry none), "
         "and its receive loop has a request pending (its cache is below both thresholds); `lost` only when the "
         "server has a message of `p` to deliver",
         "The server answers `p`'s receive: `ok` with what is deliverable (at most the batch asked for; FIFO "
         "with the server gate: one message of a queue at a time, only once the previous one is settled), "
         "cached and signalled to the dispatcher (a redelivery of a message whose copy is still only cached, "
         "not yet taken by the dispatcher, replaces that copy: one cache entry, now with the new delivery's "
         "attempt and handle, the cache's count unchanged; one whose copy is in consumption waits behind it, "
         "`pending`); `lost`: one message delivered (attempt + 1) and the answer "
         "lost; `error` / `throttled`: nothing. The loop then waits for room or issues its next request. The "
         "thresholds are per process queue: `max(1, config.cache_messages // n)` messages and "
         "`max(1, config.cache_bytes // n)` bytes, `n` the number of process queues the consumer has now "
         "(integer division, rounding down).",
         "`[[m, attempt], ...]`, `[\"lost\", [[m, attempt]]]`, `\"error\"` or `\"throttled\"`"),
    Call("dispatch", (("p", "process queue"),), "the dispatcher was signalled for `p`",
         "Standard: every cached message of `p` is taken, in queue order, each by a worker that calls the "
         "listener. FIFO: the dispatcher locks `p` and takes the earliest cached message (none: unlocks), or "
         "finds the lock held. A FIFO redelivery whose outcome an earlier delivery decided (the *memo*: a "
         "settle the server answered non-retriably, `invalid-handle`, `not-found` or `bad-request`, after which "
         "FIFO gives up and remembers `ack` or `dlq`) is taken like any other and listed here, but its listener "
         "is not called: the remembered settle request is sent at once (the next call is its `ack_answer` or "
         "`forward_to_dlq_answer`), and the memo is cleared then; a copy on a process queue a rebalance dropped "
         "remembers nothing unless `config.memo_survives_drop`.", "the messages taken, in order, or `\"lock-busy\"`"),
    Call("listener_returns", (("m", "message"), ("result", "`ok` or `fail`")), "the listener is consuming `m`",
         "The listener returns. Standard: the message is erased from the cache, then acked (ok) or its "
         "invisible duration changed (fail). FIFO: ack (ok); on failure below the maximum attempt, the retry "
         "policy's delay, then the listener again with attempt + 1; at the maximum, forward to the DLQ.",
         "`[result, attempt]`: the attempt the listener saw"),
    Call("next_attempt_delay", (("m", "message"),), "FIFO: `m` waits for the retry policy's delay",
         "The delay is over: the listener is called again.", "`\"elapsed\"`"),
    Call("ack_answer", (("m", "message"), ("answer", "see the notes")), "`m`'s ack request is pending",
         "The server answers the ack (see the notes for what each answer does).", "the answer the request got"),
    Call("change_invisible_answer", (("m", "message"), ("answer", "see the notes")),
         "standard: `m`'s change-invisible-duration request is pending",
         "The server answers; the client lets go of the message either way (one call, seed 普通 step 4).",
         "the answer the request got"),
    Call("forward_to_dlq_answer", (("m", "message"), ("answer", "see the notes")),
         "FIFO: `m`'s forward-to-DLQ request is pending",
         "The server answers the forward (repeated after a retriable answer, like the ack).",
         "the answer the request got"),
    Call("expire", (("m", "message"),), "`m` is invisible (and, unless `config.expiry_while_held`, the client "
         "holds no copy of it)", "The server's invisible time of `m`'s delivery runs out: it is deliverable "
         "again, or dead-lettered by the server once its deliveries reached `config.max_attempts`.",
         "`\"visible\"` or `\"dead-lettered\"`"),
    Call("drop_process_queue", (("p", "process queue"),), "`config.rebalance`, `p` has messages and is assigned",
         "A rebalance takes queue `p` away: its cached messages are discarded, a consumption under way "
         "finishes on the dropped process queue.", "`\"dropped\"`"),
    Call("create_process_queue", (("p", "process queue"),), "`config.rebalance`, `p` has messages and is not "
         "assigned", "The queue is given back: a new process queue and receive loop.", "`\"created\"`"),
    Call("simple_receive", (("answer", "`ok`, `lost`, `error` or `throttled`"),), "a simple-consumer run",
         "The application calls receive (at most one message) on the next queue, round-robin; one request. The "
         "round-robin index (`next_queue`) moves on after every answer, a failed one included; with "
         "`config.simple_any_queue` (the Python client) a receive may ask any queue and `next_queue` does not "
         "move (the switch is invisible on the suite's `simple` configuration, which has one queue).",
         "`[\"ok\", [m, attempt]]`, `[\"ok\", []]`, `[\"lost\", [m, attempt]]`, `\"error\"` or `\"throttled\"`"),
    Call("simple_ack", (("m", "message"), ("answer", "see the notes")), "the application holds a copy of `m`",
         "The application acks `m`: one request, never retried. Its copy afterwards: `ok`: let go (`held` "
         "null); `lost` (acked, the answer lost): still held, its handle now `stale`; `error`, `throttled`, "
         "`bad-request` (nothing applied): still held and `valid`, the application may call again; "
         "`invalid-handle` / `not-found` (the handle was stale): still held, `stale`; `abandon` lets go of it.",
         "`[\"ok\", \"acked\"]`, `[\"lost\", \"acked\"]` or the answer's name"),
    Call("simple_change_invisible", (("m", "message"), ("answer", "see the notes")),
         "the application holds a copy of `m`", "The application changes `m`'s invisible duration: one request; "
         "its copy afterwards as after `simple_ack` (on `ok` it lets go).",
         "`[\"ok\", \"changed\"]`, `[\"lost\", \"changed\"]` or the answer's name"),
    Call("abandon", (("m", "message"),), "the application holds a copy of `m`",
         "The application lets go of its copy (the message comes back when its invisible time runs out).",
         "`\"abandoned\"`"),
)

DECLARED = Declared(
    intro=(
        "The checker drives an ordered-consumption port one call at a time: each call is one step of the "
        "environment -- the server's answer to a pending request, the listener's result, an event of the "
        "clock, the server or a rebalance, or an application call of the simple consumer -- followed by "
        "every step of the client it sets in motion, until every thread of the port waits again. The "
        "model's finer steps (`pick`, `take`, `unlock`, a receive that finds the cache full, a FIFO "
        "redelivery settled with a remembered outcome) are never sent: the checker composes them "
        "(conformance/ordered_consumption/calls.py; the reference driver: "
        "conformance/ordered_consumption/driver.py)."
    ),
    state=_OC_STATE,
    calls=_OC_CALLS,
    observation="The whole observation is the model's observation of the call's own step (table above).",
    snapshot=(
        "An object. Producer: `role`, `phase` (`fetch-route`, `send`, `throttled-wait`, `done`), `type`, "
        "`accepting_queues`, `group_queue` (FIFO), `requests` (send requests made), `result` (`sent`, "
        "`failed` or null), `queue` (phase send: the queue of the pending request), `backoff` and `waited` "
        "(phase throttled-wait). Push consumer: `role`; `messages`, per message `server` (`ready`, "
        "`invisible`, `acked`, `dlq-by-server`, `dlq-by-client`), `attempt` (the server's delivery count), "
        "`client` (`-`, `cached`, `consuming`, `retry-delay`, `acking`, `changing-invisible`, "
        "`dead-lettering`), `pending` (a newer delivery is cached behind the copy in consumption); "
        "`process_queues`, per queue `assigned`, `notified`, `locked`, `waiting` (the receive loop waits "
        "for room) and `cache` (`[messages, bytes]` counted). Simple consumer: `role`, `messages` (`server`, "
        "`attempt`, `held`: null, `valid` or `stale`), `next_queue`. Several push consumers "
        "(`config.consumers` > 1): `role`; `messages`, per message the server's fields once (`server`, "
        "`attempt`); `consumers`, per consumer in id order its own part: `messages` (per message its copy's "
        "`client` and `pending`) and `process_queues` (as above)."
    ),
    result_label="observation",
    sections=lambda: answers_section(),
    notes=(
        "Settle answers: `ok` (applied); `lost` (applied, the answer lost: a repeated request then meets an "
        "invalid handle); `error` (retriable, not applied: timeout, unavailable, internal error; also "
        "throttling unless `config.answer_codes`); `throttled`; `invalid-handle` / `not-found` (the handle "
        "is no longer the server's current one: given only when it is not); `bad-request` (not applied, "
        "non-retriable). FIFO repeats an ack or DLQ forward after a retriable answer (`error`, `throttled`) and "
        "gives up after a non-retriable one (`invalid-handle`, `not-found`, and `bad-request` too), remembering "
        "the outcome for the redelivery (see `dispatch`).",
        "The producer's send: `error` makes it send to its next candidate at once; `throttled` after the "
        "back-off, in ticks; but a throttled answer on the send's last attempt (`config.max_send_attempts` "
        "used up), or any failure of a transactional message (one attempt: `config.txn_retries` false), fails "
        "the send at once: the observation is still `[\"throttled\", backoff]` and no `tick` follows.",
        "`[\"retry\"]`: the producer retries before its back-off is over; sent only with "
        "`config.ignore_backoff` (a mutant's configuration, none of the suite's): otherwise the retry after the "
        "back-off is the producer's own step, composed into the last `tick`, and a port answers `retry` with "
        "error 13 (or refuses `ignore_backoff: true` with error 14 at `init`).",
        "A call the model has disabled, or whose environment precondition does not hold in the port's "
        "state, must be answered with error 13 (`not-enabled`, definite) and change nothing.",
        "The conformance configurations use the reference value of every switch; a port may refuse others "
        "with error 14 (`unsupported-model`) in answer to `init` (the reference refuses the model's fault "
        "switches).",
    ),
)


#: the configurations whose server answers are listed with the switches flipped (answers_section)
_ANSWER_CONFIGS = (("producer", {}), ("push-standard", {}), ("push-fifo", {}), ("simple", {"queues": 1}))
#: the switches that change which server answers a call may name
_ANSWER_SWITCHES = ({"server_faults": False}, {"answer_codes": True})


def answers(config: str, overrides: dict) -> dict[str, set]:
    """Call -> the server answers (its ``answer`` parameter) the call-level view sends on ``config``
    with ``overrides``, over every reachable state (conformance/port_reference.py ``explore``)."""
    from conq.conformance.port_reference import explore

    facts = explore("ordered-consumption", config, overrides)
    out: dict[str, set] = {}
    for name, params in facts.params.items():
        index = 1 if name == "send_answer" else len(params) - 1
        if name.endswith("_answer") or name.startswith("simple_"):
            out.setdefault(name, set()).update(params[index])
    return out


def answers_section() -> list[str]:
    """Which server answers each call may name, with the suite's switches and with each flipped
    (issue 35: which answers stay enabled with ``server_faults`` off)."""
    columns = [{}, *_ANSWER_SWITCHES]
    found: dict[str, list[set]] = {}
    for overrides in columns:
        for config, own in _ANSWER_CONFIGS:
            for name, got in answers(config, {**own, **overrides}).items():
                found.setdefault(name, [set() for _ in columns])[columns.index(overrides)].update(got)
    head = ["the suite's configurations"] + [", ".join(f"`{k}: {str(v).lower()}`" for k, v in o.items())
                                             for o in _ANSWER_SWITCHES]
    out = ["## Server answers per call", "",
           "The answers a call may name (computed: every call the call-level view sends over the reachable states "
           f"of {', '.join(f'`{c}`' for c, _ in _ANSWER_CONFIGS)}), with the suite's values of the switches and "
           "with each flipped. `server_faults: false` leaves only the answers a healthy server gives (no lost "
           "answer, no bad request, no failed receive, no throttled receive or settle: the producer's send may still be throttled); `answer_codes: true` names each status "
           "code apart (`throttled` apart from `error`, `not-found` apart from `invalid-handle`). A port that "
           "implements `server_faults: false` answers every other answer with error 13.", "",
           "| call | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for name, cols in found.items():
        out.append(f"| `{name}` | " + " | ".join(", ".join(f"`{a}`" for a in sorted(c)) or "-" for c in cols) + " |")
    return out + [""]
