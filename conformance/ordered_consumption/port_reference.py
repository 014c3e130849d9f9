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
`seed` among the model's initial states; its route is fetched or already cached.

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
         "`p` is assigned, has messages, and its receive loop has a request pending (its cache is below both "
         "thresholds); `lost` only when the server has a message of `p` to deliver",
         "The server answers `p`'s receive: `ok` with what is deliverable (at most the batch asked for; FIFO "
         "with the server gate: one message of a queue at a time, only once the previous one is settled), "
         "cached and signalled to the dispatcher; `lost`: one message delivered (attempt + 1) and the answer "
         "lost; `error` / `throttled`: nothing. The loop then waits for room or issues its next request.",
         "`[[m, attempt], ...]`, `[\"lost\", [[m, attempt]]]`, `\"error\"` or `\"throttled\"`"),
    Call("dispatch", (("p", "process queue"),), "the dispatcher was signalled for `p`",
         "Standard: every cached message of `p` is taken, in queue order, each by a worker that calls the "
         "listener. FIFO: the dispatcher locks `p` and takes the earliest cached message (none: unlocks), or "
         "finds the lock held.", "the messages taken, in order, or `\"lock-busy\"`"),
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
         "The application calls receive (at most one message) on the next queue, round-robin; one request.",
         "`[\"ok\", [m, attempt]]`, `[\"ok\", []]`, `[\"lost\", [m, attempt]]`, `\"error\"` or `\"throttled\"`"),
    Call("simple_ack", (("m", "message"), ("answer", "see the notes")), "the application holds a copy of `m`",
         "The application acks `m`: one request, never retried.", "`[\"ok\", \"acked\"]`, `[\"lost\", \"acked\"]` "
         "or the answer's name"),
    Call("simple_change_invisible", (("m", "message"), ("answer", "see the notes")),
         "the application holds a copy of `m`", "The application changes `m`'s invisible duration: one request; "
         "on `ok` it lets go of its copy.", "`[\"ok\", \"changed\"]`, `[\"lost\", \"changed\"]` or the answer's name"),
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
        "`attempt`, `held`: null, `valid` or `stale`), `next_queue`."
    ),
    result_label="observation",
    notes=(
        "Settle answers: `ok` (applied); `lost` (applied, the answer lost: a repeated request then meets an "
        "invalid handle); `error` (retriable, not applied: timeout, unavailable, internal error; also "
        "throttling unless `config.answer_codes`); `throttled`; `invalid-handle` / `not-found` (the handle "
        "is no longer the server's current one: given only when it is not); `bad-request` (not applied, "
        "non-retriable). FIFO repeats an ack or DLQ forward after a retriable answer and gives up after a "
        "non-retriable one, remembering the outcome for the redelivery.",
        "A call the model has disabled, or whose environment precondition does not hold in the port's "
        "state, must be answered with error 13 (`not-enabled`, definite) and change nothing.",
        "The conformance configurations use the reference value of every switch; a port may refuse others "
        "with error 14 (`unsupported-model`) in answer to `init` (the reference refuses the model's fault "
        "switches).",
    ),
)
