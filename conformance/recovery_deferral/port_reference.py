"""The recovery-deferral port reference: what spec/ports/recovery-deferral.md says that cannot be
computed (model/recovery_deferral/model.py; the call-level view calls.py; the reference driver
driver.py).  conformance/port_reference.py computes the rest.
"""

from __future__ import annotations

from conq.conformance.port_reference import Call, Declared

_RD_STATE = """\
The configuration's script `config.events` lists the events, by index `e` (`0..n-1`): each is
`[producer, match, kind]`. `kind` 0 is a live event; `k >= 1` an event resent by recovery `k` of its
producer; `-1` an error event (an unparsable message) with no recovery context; `-(r+1)` an error
event of recovery `r`. `match` -1 (errors only) is an error about no event. Each producer's events
arrive in script order (`feed(p)` takes the producer's next one); producers interleave freely.

A port keeps (ids from 0; model producer `p`, queue `q`, callback index `k` into `config.callbacks`):

- `fed(p)`: how many of producer `p`'s events arrived;
- the **task queues** `0..config.queues-1`, each a FIFO of event indexes holding at most
  `config.queue_size`; an event of match `m` goes to queue `m mod config.queues` (every event of a
  match on one queue); an error about no event may go to any queue (the port's choice: the model
  allows each);
- `running(q)`: the event a worker is running for queue `q` (in the customer's listener), or none; a
  queue is served by at most one worker at a time, and at most `config.workers` queues run at once;
- the **tracker**: per recovery context a pending count, +1 when an event of that context is
  accepted, -1 when its task completes. The contexts: `NONE` (live events, and errors with no
  recovery) and `p<p>/r<r>` (recovery `r` of producer `p`, `r` from 1). Event `e = [p, match, kind]`
  belongs to `NONE` when `kind` is 0 or -1, to `p<p>/r<kind>` when `kind >= 1` and to `p<p>/r<r>` when
  `kind = -(r+1)`, `r >= 1`;
- per producer, `rec(p)`: the request id of its stored recovery (0: none yet; at most
  `config.recoveries`);
- per producer, `known(p)`: the newest recovery of `p` the listener knows: `rec(p)`, or a newer one
  one of whose resent events the feed thread has received (an event's recovery: `kind` when `kind >= 1`,
  `r` when `kind = -(r+1)`). Only `config.late_initiation` makes them differ: the SDK calls
  `onRecoveryInitiated` only once its HTTP request was answered, while the feed resends the recovery's
  events -- and its up -- at once, so recovery `rec(p) + 1`'s events may come first (spec/deviations.md
  DEV-032); without it `known(p) = rec(p)`;
- per producer and callback `k`, in the producer's current recovery epoch: `not-sent`, `deferred`
  (waiting for its context to drain), `delivered` (the customer got it), `cancelled` (a newer Down
  status cancelled it); and the recovery it was correlated with when the SDK made it (`known(p)` at
  that moment, for an up and a Down alike). The epoch of recovery `r` begins with `r`'s
  `onRecoveryInitiated` or, when its resent events come first, with the first of them;
- the **feed thread**: running, or waiting for room on a full queue with one event (see `feed`).

The *up* callbacks are `ProducerUp`, `FirstRecoveryCompleted`, `ProcessingQueDelayStabilized` and
`ReturnedFromInactivity`; every other status (`AliveIntervalViolation`, `ProcessingQueueDelayViolation`,
`PermanentlyUnavailable`) is a *Down*.
"""

_RD_CALLS = (
    Call(
        "recover", (("p", "producer"),),
        "`rec(p) < config.recoveries`",
        "The SDK's `onRecoveryInitiated` for producer `p`'s next recovery `r = rec(p) + 1`: `rec(p) = r` (the "
        "stored RecoveryContext is now `p<p>/r<r>`). Usually a new recovery epoch starts: every callback of `p` is "
        "`not-sent` again, and any callback of `p` still deferred is superseded (it will never be delivered). A "
        "*late* initiation (`known(p) >= r` before the call: `r`'s resent events came first, only with "
        "`config.late_initiation`) does not start an epoch, `r`'s began with its first event: a callback of `p` "
        "correlated with `r` keeps its state (an up of `r` deferred before this call stays deferred, and is "
        "delivered after it), every other one is `not-sent` again, a deferred one superseded. The customer's "
        "`onRecoveryInitiated` is called at once, on the calling thread: `\"forwarded\"`, or "
        "`\"forwarded-late\"` for a late one.",
        "`\"forwarded\"` or `\"forwarded-late\"`",
    ),
    Call(
        "feed", (("p", "producer"),),
        "producer `p` has an event left (`fed(p)` is less than its number of events), that event's "
        "recovery was initiated (a `kind` `k >= 1` or `-(k+1)` needs `rec(p) >= k`) or, with "
        "`config.late_initiation`, is the next one (`k <= rec(p) + 1`: the SDK starts a recovery only after "
        "it called the previous one's `onRecoveryInitiated`), and the feed thread is not waiting for room",
        "The feed thread receives `p`'s next event `e` (`fed(p) += 1`). If `e` is resent by a recovery newer "
        "than `known(p)` (only with `config.late_initiation`: its `onRecoveryInitiated` has not come yet), its "
        "arrival starts that recovery's epoch: `known(p)` is now `e`'s recovery, and every callback of `p` that "
        "is not deferred is `not-sent` again (a deferred one stays, correlated with its older recovery, until a "
        "`poll` or the initiation supersedes it); this happens when the event is received, before it is queued "
        "or waits for room. With `config.enabled: false` "
        "(legacy), or for an error event with `config.handle_errors_async: false`, the customer's listener "
        "is called with `e` on the feed thread: `[\"feed-thread\", e]`. Otherwise `e` goes to its queue `q`: "
        "if `q` has room, `e` is counted in the tracker under its context and appended to `q`: "
        "`[\"queued\", q]`. If `q` is full the feed thread **waits** for room (nothing is lost): "
        "`[\"blocked\", q, counted]`, where `counted` is 1 when the port counted `e` in the tracker before "
        "it started waiting, 0 when it will count it once `e` is enqueued (both are allowed; the snapshot's "
        "`pending` must agree). While it waits no other `feed` is enabled; the `run(q)` that makes room "
        "completes the hand-off. An error about no event may pick any queue: `queued` on one with room or "
        "`blocked` on a full one.",
        "`[\"queued\", q]`, `[\"blocked\", q, counted]` or `[\"feed-thread\", e]`",
    ),
    Call(
        "status", (("p", "producer"), ("k", "index into `config.callbacks`")),
        "callback `k` is `not-sent` in `p`'s current epoch; `known(p) > 0`, unless "
        "`config.callbacks_without_recovery`; an up callback with `config.up_after_events` and `known(p) > 0` "
        "only once every event of `p` in the context `p<p>/r<known(p)>` (kind `known(p)` or `-(known(p)+1)`) has "
        "been fed, where the event the feed thread waits with (for room on a full queue) counts as not fed yet: a "
        "waiting event of that recovery holds the up back, another producer's waiting event does not",
        "The SDK's `onProducerStatusChange` (or `onProducerUp`) with status `config.callbacks[k]`, correlated "
        "with `known(p)` (the callback records it). A Down is forwarded to the customer at once and cancels "
        "`p`'s deferred callbacks: `\"forwarded\"`. An up callback with no recovery known yet (`known(p) == 0`) "
        "is forwarded at once, `\"forwarded\"`; otherwise it is **deferred** until its recovery's pending count "
        "reads 0 and its `onRecoveryInitiated` has come (see `poll`): `\"deferred\"`. With "
        "`config.enabled: false` every status is forwarded at once.",
        "`\"forwarded\"` or `\"deferred\"`",
    ),
    Call(
        "run", (("q", "task queue"),),
        "queue `q` is not empty, no worker runs `q`, and fewer than `config.workers` queues are running",
        "A worker takes the head event `e` of `q` and calls the customer's listener with it; the listener "
        "does not return until `done(q)`: `[\"listener\", e]`. If the feed thread was waiting for room on "
        "`q`, the room this makes lets it finish: its event is appended to `q` (and counted, if it was not "
        "yet): `[\"listener\", e, [\"queued\", q]]`.",
        "`[\"listener\", e]` or `[\"listener\", e, [\"queued\", q]]`",
    ),
    Call(
        "done", (("q", "task queue"),),
        "a worker runs `q` (a `run(q)` has not been answered by a `done(q)` yet)",
        "The customer's listener returns (or throws: the same to the port) and the task completes: the "
        "pending count of the event's context goes down by one; `q` is free for the next `run(q)`.",
        "`\"completed\"`",
    ),
    Call(
        "poll", (("p", "producer"), ("k", "index into `config.callbacks`")),
        "callback `k` of `p` is `deferred` (not delivered, not cancelled)",
        "One run of the deferred task of the callback, correlated with recovery `r` when it arrived (not "
        "necessarily `p`'s current one), in this order: (1) if `known(p) > r` (a newer recovery's event has "
        "arrived, before its `onRecoveryInitiated`: only with `config.late_initiation`), the callback is "
        "superseded, as a new recovery would: `not-sent` again (the SDK may make it again in the new epoch), "
        "never delivered: `\"superseded\"` (each deferred callback is superseded by its own `poll`; the "
        "others of `p` stay deferred until theirs, or the initiation). (2) Otherwise it reads the pending count of `p<p>/r<r>`; an event the waiting feed "
        "thread already counted (`counted` 1) is included. Not 0: nothing changes, the observation is the count "
        "read (a positive integer). (3) 0, but `r` is not `rec(p)` yet (its tasks are done, its "
        "`onRecoveryInitiated` has not come: the customer must see the initiation first): nothing changes, "
        "`\"waits-initiation\"`. (4) 0 and `r = rec(p)`: the callback is delivered to the customer and the task "
        "ends: `\"delivered\"`.",
        "`\"delivered\"`, `\"superseded\"`, `\"waits-initiation\"` or the pending count read (an integer > 0)",
    ),
)

DECLARED = Declared(
    intro=(
        "The checker drives a recovery-deferral port one step at a time: the SDK's calls (`recover`, "
        "`status`), the arrival of the next event on the feed thread (`feed`), each worker's turn (`run`: "
        "the customer's listener is entered; `done`: it returns) and each poll of a deferred ProducerUp "
        "(`poll`). Each call must run to a quiet point before it is answered: a worker left inside the "
        "customer's listener until its `done`, the feed thread either back or waiting for room. The port "
        "owns every thread, so an interleaving is the checker's choice (the reference driver: "
        "conformance/recovery_deferral/driver.py; the call-level view: conformance/recovery_deferral/calls.py)."
    ),
    state=_RD_STATE,
    calls=_RD_CALLS,
    observation=(
        "Each call observes one JSON value, as in the call tables: a string (`\"forwarded\"`, "
        "`\"forwarded-late\"`, `\"deferred\"`, `\"completed\"`, `\"delivered\"`, `\"superseded\"`, "
        "`\"waits-initiation\"`), an integer (a `poll` that read a pending count), "
        "or an array whose first element names what happened (`queued`, `blocked`, `feed-thread`, "
        "`listener`). Event indexes are positions in `config.events`; queue and producer ids count from 0. "
        "Nothing is sorted: every array is positional."
    ),
    snapshot=(
        "`snapshot` answers an object with these fields: `queues`, per queue the event indexes waiting, "
        "head first; `running`, per queue the event its worker runs, or `null`; `pending`, an object from "
        "context name (`\"NONE\"`, `\"p0/r1\"`, ...) to its pending count, for every context whose count is "
        "not 0 (an event counted by a waiting feed thread included); `feed_blocked`, the queue the feed "
        "thread waits for room on, or `null`; and, unless `config.enabled` is false, `recovery`, per "
        "producer its stored request id (0: none), and `deferred`, per producer the names of its callbacks "
        "deferred now, sorted. Objects compare by their keys whatever their order; arrays in order."
    ),
    result_label="observation",
    notes=(
        "A call the model has disabled must be answered with error 13 (`not-enabled`, definite) and change "
        "nothing. The environment's preconditions (a producer's next event, the number of recoveries, each "
        "status callback once per epoch, an up only after its recovery's events) are the port's to check, as "
        "are its own (a worker can take the queue, a worker is in the listener, a callback is deferred).",
        "The port's own choices (the queue of an error about no event, whether it counts a blocked event "
        "before waiting) may use `seed`; the model allows every choice, and the snapshot tells the checker "
        "which was made.",
        "A customer listener that the port's implementation calls at any other moment than the calls above "
        "say (a second call, a call on the wrong thread) has no observation the model allows: the run fails "
        "at that step.",
        "The conformance configurations use the reference value of every switch; a port may refuse others "
        "with error 14 (`unsupported-model`) in answer to `init` (the reference refuses the upstream variants).",
    ),
)
