"""Port references: one document per model, for authors of ports in other languages.

``spec/ports/<model>.md`` is generated here from the same declarations the conformance
checker uses: the model's call-level view (``views.VIEWS``), its named configurations, and
the configurations the conformance suite drives.  What can be computed is computed by
exploring the call-level view on every conformance configuration (every reachable state):
the calls the checker sends, their parameters and ranges, the exact shape of every
observation (and whether its lists are sorted), the snapshot shape (the ``observe()`` view),
generated examples, and which configuration switches change behaviour at call level (with
the shortest call sequence that tells the two apart).  What cannot be computed -- what a
call does, when it is enabled -- is declared once per model below (:data:`DECLARED`), and
the exploration checks that the declared calls are exactly the ones the view emits.

``python -m conq.conformance.port_reference --write`` regenerates every document;
``--check`` exits 1 when a committed one differs (tests/conformance/test_port_reference.py
does the same).  A model registered in ``views.VIEWS`` with no declaration still gets its
computed sections, marked as such, as soon as its call-level view loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import json
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from conq.model.kernel import Model, config_dict
from conq.model.engines.registry import load_model

from . import protocol
from .trace import jsonable

#: the most call-level states explored per configuration (the conformance configurations of
#: consumer-lists have at most a few thousand; a larger view is documented from a bounded prefix)
STATE_CAP = 20_000
#: switches are compared on the conformance configurations of at most this many call-level states
SWITCH_STATES = 1_000


@dataclass(frozen=True)
class Call:
    """One call of a model's call-level view, as a port must implement it."""

    name: str
    params: tuple[tuple[str, str], ...]  # (parameter, meaning)
    enabled: str  # when the model has it enabled (a port answers error 13 otherwise)
    does: str  # what it does, step by step
    result: str  # the first element of the observation


@dataclass(frozen=True)
class Declared:
    """What a port reference says of one model that cannot be computed."""

    intro: str
    calls: tuple[Call, ...]
    observation: str  # the observation's shape, in words
    snapshot: str  # the snapshot's fields, in words
    procedures: str = ""  # shared procedures the calls refer to (markdown)
    state: str = ""  # the state a port keeps (markdown)
    notes: tuple[str, ...] = ()
    #: what the ``result`` of each call is, in the call tables ("result": the first element of a
    #: ``[result, list]`` observation; "observation": the whole observation)
    result_label: str = "result"


# ------------------------------------------------------------------------------------------
# consumer-lists
# ------------------------------------------------------------------------------------------
_CL_STATE = """\
A port keeps, per consumer `c` (ids `0..n-1`, in the order of `config.consumers`, each
`[priority, acquires]`; a higher number is a higher priority; `acquires: false` is a *browser*):

- `node`: one of `absent` (never added), `not-interested`, `interested`, `notified`,
  `non-acquiring` (a browser that wants work), `removed`;
- `registered`: added and not removed (in the queue's All list);
- `credit` (starts at `config.initial_credit`, at most `config.max_credit`) and the set of
  suspension reasons in force (`flow`, `tcp`; none at start);
- `wants`: the target's notifyWorkDesired flag; it starts as `initial_credit > 0` and, at the end
  of every call, equals *desired* = `credit > 0` and no suspension reason, for every registered
  consumer (see **set-desired** below);
- `scheduled`: the consumer's IO thread has a wake-up pending (set by **notify**, by `credit`);
- `pulling`: after a delivery the IO thread goes on pulling (the current pull rule);
- browsers only: `seen`, the messages it has already been given.

Per message `j` (ids `0..m-1`, `m = config.messages`): `unarrived`, `available`, `held`,
`acquired by c<id>`, or `deleted` (only with `config.expiry`; a deleted message stays deleted).

The other actors (issue 16), each only when its configuration field is on:

- `config.reject`: per message `j`, `rejected_by(j)`, the consumers that rejected it (empty at start);
- `config.expiry`: `delete_waiting`, the messages a delete waits for (empty at start);
- `config.groups` (one entry per message: its group `0, 1, ...`, or `-1` for none): per group `g`,
  `owner(g)` (a consumer, or none at start) and, with `config.group_policy: "shared"`, `counted(g)`,
  the messages of `g` whose acquisition the group counted; and one flag, `reset_owed` (false at
  start). A group is **valid** when it has an owner and (policy `assigned`) always, or (policy
  `shared`) its owner is registered or `counted(g)` is not empty.

The lists: one **Interested list per priority level**, ordered (a consumer entering it goes to
its tail; leaving removes it wherever it is), and the Notified set. "Interested order" means:
the levels from the highest priority to the lowest, each list from head to tail.

The environment budget: `budget` starts at `config.env_budget` (`-1`: unbounded). `remove_consumer`,
`credit`, `suspend`, `resume`, `release` and `reject` are enabled only while `budget != 0`, and each
takes one from it when it is positive (`delete_entry` takes nothing from it).
"""

_CL_PROCEDURES = """\
The calls are built from these procedures (the model's `notifyConsumer`, `notifyConsumers`,
`notifyOtherConsumers`, `setNotifyWorkDesired`). Every consumer a procedure **notifies** is
appended to the call's *notified* list (the observation's second element).

- **next(c)**: none if `c` is not registered; else the lowest message id `j` that is `available`
  (and, for a browser, not in `seen(c)`; with `config.reject`, `c` not in `rejected_by(j)`; with
  `config.groups`, for an acquiring `c` and a message of a group `g`: `owner(g) == c` or `g` is not
  valid).
- **no-higher(c, j)**: true when no registered, acquiring consumer `h` of strictly higher priority
  than `c` has `wants(h)` and a **next(h)** and (with `config.reject`) is not in `rejected_by(j)`: a
  higher consumer that rejected `j` does not hold `j` back from `c`. Every caller passes an entry
  `j`; which one is said where it is called. (Switch `priority_check: false`: always true.)
- **notify(c)**: for an acquiring `c`: if **next(c)** is none, or **no-higher(c, next(c))** is
  false (the priority check at the entry `c` would take, whichever procedure calls **notify**), or
  `node(c)` is not `interested`, it does nothing and fails; else `c` moves `interested -> notified`
  (leaving its Interested list). Then (every browser, and an acquiring `c` that got this far)
  `scheduled(c) := true`, `c` is appended to *notified*, and it succeeds. A browser is always
  notified, whatever is available.
- **notify-consumers(j)** (a publisher, owed after `j` became available): first every browser in
  node `non-acquiring` that has not seen `j` is notified, in id order; then for each `c` in
  Interested order: if `j` is no longer available, stop; if `c` is in `rejected_by(j)`, skip it; if
  **notify(c)** succeeds, stop (switch `notify_one: false`: go on); else if **no-higher(c, j)** is
  false (here the walk's own `j`, not **next(c)**), stop.
- **notify-others(c)**: for each `x` in Interested order: if no message is available, stop; if
  `x != c` and **notify(x)** succeeds, stop. (`c` may be none: a delete excludes nobody.)
- **queue-set-desired(c, d)**: if `d`: move `c` from `not-interested` to `interested` (tail of its
  list; a browser: to `non-acquiring`); if it moved, **notify(c)**. If not `d`: move `c` from
  `interested` or `notified` (a browser: from `non-acquiring`) to `not-interested`; if it moved, let
  `top` be the highest priority of the consumers now in the Notified set (none if it is empty); for
  each `x` in Interested order: if `top` exists and `priority(x) < top`, stop; if **notify(x)**
  succeeds, stop.
- **set-desired(c)** (the IO thread's setNotifyWorkDesired, run at the end of a call for every
  registered consumer, in id order, whose `wants` differs from *desired*; `pulling` consumers
  included: the model's clause "not in the middle of a pull" speaks of its finer thread steps,
  and at call level every call, a `pull` too, runs to completion first): `wants(c) := desired`, then **queue-set-desired(c, wants(c))**, and `c` stops
  pulling. (Switch `flag_before_queue: false` tells the queue first and writes the flag after: visible
  at call level, see the switches below.)
- **group-left(j)** (`config.groups` with policy `shared` only; else nothing): if `j` is in
  `counted(g)` of its group `g`: remove it; if `counted(g)` is now empty, `owner(g) := none` and, if
  some message of `g` is `available`, `reset_owed := true`.
- **requeue(j)** (a release, a reject, the releases of a removal): message `j` becomes `available`
  and is owed a **notify-consumers**; then **group-left(j)**.
- **accept(c, j)** (the acquisition of a message `j` of a group `g` by an acquiring `c`, with
  `config.groups`): if `owner(g) != c` and `g` is not valid: `owner(g) := c`; else if `owner(g) != c`:
  it fails. Then `j` is acquired by `c` and, policy `shared`, `j` joins `counted(g)`.
- **dequeue(j)** (a delete that takes `j`): message `j` becomes `deleted`; if it was acquired,
  **group-left(j)**; then, if some message is available, **notify-others(none)** (switch
  `delete_notifies: false`: nobody is notified).
- **reset-groups** (owed as `reset_owed`): `reset_owed := false`; **notify(c)** for every registered
  acquiring consumer `c`, in id order.
- **settle** (the end of every call): repeat until nothing changes: first, for the lowest message
  `j` in `delete_waiting` that is now `available` (an `unhold` made it so): remove `j` from
  `delete_waiting` and **dequeue(j)**; else **set-desired** for the first consumer (lowest id) that
  needs it; else **notify-consumers(j)** for the lowest message `j` that is owed one (owed from
  `enqueue`, `unhold`, `release`, `reject` and the releases of `remove_consumer`; a message no longer
  available when its turn comes is simply no longer owed); else, if `reset_owed`, **reset-groups**.
"""

_CL_CALLS = (
    Call(
        "add_consumer", (("c", "consumer id"),),
        "`node(c)` is `absent` (only in configurations with `preadded: false`; otherwise every consumer "
        "is added, in id order, with this call's effects, when the port is built: a browser that wants work "
        "is then notified, hence scheduled, before the first call)",
        "`c` becomes registered; if `wants(c)`: node `interested` (tail of its list; a browser: "
        "`non-acquiring`) and **notify(c)**; else node `not-interested`. Then **settle**.",
        "`null`",
    ),
    Call(
        "remove_consumer", (("c", "consumer id"),),
        "`c` is registered, `budget != 0` and `config.removal`",
        "Takes one from the budget. `c` is no longer registered, node `removed` (leaving any list); every "
        "message acquired by `c` becomes `available` and is owed a **notify-consumers**, then (all released "
        "first) **group-left** of each; with `config.groups`, if an available message belongs to a group "
        "whose owner is `c`, `reset_owed := true`, and (policy `assigned`) every group of `c` loses its "
        "owner; `c` stops "
        "pulling and `scheduled(c) := false`. Then, if a message is available, **notify-others(c)** (the "
        "removed consumer's wake-up is handed over, whatever its node was; switch `remove_hands_over: "
        "false`: nobody is notified here). Then **settle**.",
        "`null`",
    ),
    Call(
        "credit", (("c", "consumer id"),),
        "`c` is registered, `budget != 0` and `credit(c) < config.max_credit`",
        "Takes one from the budget; `credit(c) += 1`; `scheduled(c) := true` (the credit manager wakes "
        "the target, whether or not anything is available). Then **settle** (a consumer whose credit was "
        "0 becomes interested and may be notified).",
        "`null`",
    ),
    Call(
        "suspend", (("c", "consumer id"), ("r", "suspension reason")),
        "`c` is registered, `budget != 0`, `r` is one of the first `config.reasons` names of (`flow`, `tcp`), "
        "and reason `r` is not in force for `c`",
        "Takes one from the budget; adds reason `r`. Then **settle** (a consumer that wanted work no "
        "longer does: it leaves the Interested list and its wake-up may pass to another consumer).",
        "`null`",
    ),
    Call(
        "resume", (("c", "consumer id"), ("r", "suspension reason")),
        "`c` is registered, `budget != 0`, `r` is one of the first `config.reasons` names of (`flow`, `tcp`), "
        "and reason `r` is in force for `c`",
        "Takes one from the budget; removes reason `r`. Then **settle**.",
        "`null`",
    ),
    Call(
        "enqueue", (("j", "message id"),),
        "message `j` is `unarrived` and `j == 0` or message `j-1` is not `unarrived` (messages arrive in "
        "id order)",
        "Message `j` becomes `available` and is owed a **notify-consumers**. Then **settle**.",
        "`null`",
    ),
    Call(
        "enqueue_held", (("j", "message id"),),
        "`config.held`, and `enqueue(j)` would be enabled",
        "Message `j` becomes `held` (it has arrived but is not available). Then **settle** (nothing to do).",
        "`null`",
    ),
    Call(
        "unhold", (("j", "message id"),),
        "message `j` is `held`",
        "Message `j` becomes `available` and is owed a **notify-consumers**. Then **settle**.",
        "`null`",
    ),
    Call(
        "release", (("j", "message id"),),
        "`config.release`, `budget != 0`, and message `j` is `acquired by` some consumer",
        "Takes one from the budget; **requeue(j)**. Then **settle**.",
        "the id of the consumer that held `j` (an integer)",
    ),
    Call(
        "delete_entry", (("j", "message id"),),
        "`config.expiry`, message `j` is `available`, `held` or `acquired by` some consumer, and `j` is not in "
        "`delete_waiting`",
        "The housekeeping thread's expiry of `j`, or a management delete (`deleteEntry`). `available`: "
        "**dequeue(j)**. `acquired by c` (sent: at call level every acquisition was sent): stolen, "
        "**dequeue(j)**. `held`: `j` joins `delete_waiting` (the delete waits; the `unhold` that follows "
        "deletes `j` instead of offering it, see **settle**). Then **settle**. Takes nothing from the budget.",
        "the id of the consumer that held `j` (stolen), `null` (it was available) or the string `\"held\"` "
        "(the delete waits)",
    ),
    Call(
        "reject", (("c", "consumer id"), ("j", "message id")),
        "`config.reject`, `budget != 0`, `c` is registered and message `j` is `acquired by c`",
        "`c`'s IO thread rejects `j`: takes one from the budget; `c` joins `rejected_by(j)` (for ever: `c` "
        "never takes `j` again, see **next**); **requeue(j)**. Then **settle**.",
        "`null`",
    ),
    Call(
        "pull", (("c", "consumer id"),),
        "`c` is `pulling`, or `c` is registered and `scheduled(c)` (one `deliverSingleMessage` of an IO "
        "thread that has work to do)",
        "`scheduled(c) := false`; if `node(c)` is `notified` it moves to `interested` (tail of its list). "
        "If `wants(c)` is false (suspended or no credit): the pull ends, nothing else (observation "
        "`[null, []]`), `c` stops pulling. Otherwise let `j` = **next(c)**: if `j` exists, and (for an "
        "acquiring `c`) **no-higher(c, j)** (a higher consumer that rejected `j` does not hold it back), and `credit(c) > 0`: message `j` becomes `acquired by c` (a "
        "browser: `j` joins `seen(c)` and the message is untouched), `credit(c) -= 1`, an acquiring `c` "
        "moves `interested -> notified` *always* after a delivery (whether or not more work is there; "
        "it is not added to *notified* and its `scheduled` is not set), and `c` is `pulling` (switch "
        "`pull_rule: once`: it stops); the result is `j`. Otherwise (nothing to deliver): if `c` acquires "
        "and a message is available, **notify-others(c)**; `c` stops pulling; the result is `null`. "
        "Then **settle** (a consumer whose credit ran out stops pulling, leaves the Interested list and "
        "may hand its wake-up on). With `config.groups`, an acquiring `c` acquires a grouped message by "
        "**accept(c, j)** (which succeeds: **next(c)** only offers it a message of a group it may take).",
        "the id of the message delivered, or `null`",
    ),
)

_CL = Declared(
    intro=(
        "The checker drives a consumer-lists port one API call at a time, from one thread: every call "
        "runs to completion (its notifications, the publisher's `notifyConsumers`, the consumers' "
        "`setNotifyWorkDesired`) before the next one is sent. The model's finer thread steps "
        "(`notify_consumers`, `target_flag`, `deliver_single_message`, `find_next_available`, "
        "`acquire`, `deliver`, `no_message`, ...) are **never** sent to a port: the checker composes "
        "them into the calls below (conformance/consumer_lists/calls.py)."
    ),
    state=_CL_STATE,
    procedures=_CL_PROCEDURES,
    calls=_CL_CALLS,
    observation=(
        "Every call observes a two-element array `[result, notified]`: `result` as in the table "
        "(the message delivered by `pull`, the previous holder for `release`, for `delete_entry` the "
        "previous holder of a stolen message, `null` for an available one or `\"held\"`, else `null`) and "
        "`notified`, the ids of the consumers the call notified (every **notify** that succeeded, in "
        "any procedure of the call), **sorted ascending**. The model does not fix the order in which "
        "one call notifies, so the list is compared sorted; a consumer notified twice in one call "
        "appears twice."
    ),
    snapshot=(
        "`snapshot` answers the `observe()` view of the state after the call, an object with exactly "
        "three fields: `consumers`, one `[node, credit]` per consumer in id order (`node` one of the "
        "names above); `messages`, one status string per message in id order (`unarrived`, "
        "`available`, `held`, `acquired by c<id>`); `interested`, an object from the priority "
        "(written as a decimal string, e.g. `\"2\"`) to the ids in that priority's Interested list, "
        "head first, with empty levels left out. With the other actors on, more fields (and only then): "
        "`rejected_by` (`config.reject`), one sorted array of consumer ids per message in id order; "
        "`delete_waiting` (`config.expiry`), the sorted ids of the messages a delete waits for; `groups` "
        "(`config.groups`), one entry per group in id order, its owner's id or `null`, and "
        "`group_reset_owed`, always `false` (every call settles its reset); a message's status may then "
        "also be `deleted`. The checker compares it after `init`/`reset` and after "
        "every call, exactly: arrays in order (consumers and messages by id, each Interested list head "
        "first), objects by their keys whatever their order."
    ),
    notes=(
        "A call the model has disabled must be answered with error 13 (`not-enabled`, definite) and "
        "change nothing: the checker's own random walks only send calls some consistent model state "
        "enables, but replayed traces (the corpus, `diverge-*` replays) may send others.",
        "Every choice is determined by the state: a port needs no randomness, and `seed` can be ignored.",
        "The checker only sends parameters in the ranges above. A port may answer anything else (an unknown "
        "call, a consumer or message id out of range, an unknown reason name) with error 12 (`unknown-action`); "
        "a reason name that exists but is not toggled in this configuration (`tcp` with `reasons: 1`) is a call "
        "the model has disabled: error 13.",
        "A port may refuse a configuration it does not implement with error 14 (`unsupported-model`) in answer "
        "to `init` (for example a switch away from its reference value, or the other actors: `expiry`, "
        "`reject`, `groups`, driven in the configurations `expiry`, `reject`, `groups-shared`, "
        "`groups-assigned`, `all-actors` and `all-actors-assigned`; a port that implements only the first "
        "six configurations passes on them).",
        "Only the switches marked as visible below change what a port must do; the conformance "
        "configurations all use the reference values of every switch.",
    ),
)

# ------------------------------------------------------------------------------------------
# recovery-deferral (model/recovery_deferral/model.py; call-level view
# conformance/recovery_deferral/calls.py; the reference driver conformance/recovery_deferral/driver.py)
# ------------------------------------------------------------------------------------------
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
- per producer and callback `k`, in the producer's current recovery epoch: `not-sent`, `deferred`
  (waiting for its context to drain), `delivered` (the customer got it), `cancelled` (a newer Down
  status cancelled it); and the context a deferred callback was correlated with when it arrived;
- the **feed thread**: running, or waiting for room on a full queue with one event (see `feed`).

The *up* callbacks are `ProducerUp`, `FirstRecoveryCompleted`, `ProcessingQueDelayStabilized` and
`ReturnedFromInactivity`; every other status (`AliveIntervalViolation`, `ProcessingQueueDelayViolation`,
`PermanentlyUnavailable`) is a *Down*.
"""

_RD_CALLS = (
    Call(
        "recover", (("p", "producer"),),
        "`rec(p) < config.recoveries`",
        "The SDK's `onRecoveryInitiated` for producer `p`'s next recovery: `rec(p) += 1` (the stored "
        "RecoveryContext is now `p<p>/r<rec(p)>`); a new recovery epoch starts: every callback of `p` is "
        "`not-sent` again, and any callback of `p` still deferred is cancelled (it will never be delivered). "
        "The customer's `onRecoveryInitiated` is called at once, on the calling thread.",
        "`\"forwarded\"`",
    ),
    Call(
        "feed", (("p", "producer"),),
        "producer `p` has an event left (`fed(p)` is less than its number of events), that event's "
        "recovery was initiated (a `kind` `k >= 1` or `-(k+1)` needs `rec(p) >= k`), and the feed thread "
        "is not waiting for room",
        "The feed thread receives `p`'s next event `e` (`fed(p) += 1`). With `config.enabled: false` "
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
        "callback `k` is `not-sent` in `p`'s current epoch; `rec(p) > 0`, unless "
        "`config.callbacks_without_recovery`; an up callback with `config.up_after_events` and `rec(p) > 0` only "
        "once every event of `p` in the context `p<p>/r<rec(p)>` (kind `rec(p)` or `-(rec(p)+1)`) has been fed, "
        "and only while the feed thread is not waiting for room (with any producer's event)",
        "The SDK's `onProducerStatusChange` (or `onProducerUp`) with status `config.callbacks[k]`. A Down is "
        "forwarded to the customer at once and cancels `p`'s deferred callbacks: `\"forwarded\"`. An up "
        "callback is correlated with `p`'s stored context: with no recovery yet (`rec(p) == 0`) it is "
        "forwarded at once, `\"forwarded\"`; otherwise it is **deferred** until that context's pending count "
        "reads 0 (see `poll`): `\"deferred\"`. With `config.enabled: false` every status is forwarded at once.",
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
        "One run of the deferred task: it reads the pending count of the context the callback was correlated "
        "with when it arrived (not `p`'s current one). If it reads 0, the callback is delivered to the "
        "customer and the task ends: `\"delivered\"`. Otherwise nothing changes and the observation is the "
        "count read (a positive integer); an event the waiting feed thread already counted (`counted` 1) "
        "is included.",
        "`\"delivered\"` or the pending count read (an integer > 0)",
    ),
)

_RD = Declared(
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
        "`\"deferred\"`, `\"completed\"`, `\"delivered\"`), an integer (a `poll` that read a pending count), "
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

# ------------------------------------------------------------------------------------------
# ordered-consumption (model/ordered_consumption/model.py; call-level view
# conformance/ordered_consumption/calls.py; the reference driver conformance/ordered_consumption/driver.py)
# ------------------------------------------------------------------------------------------
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

_OC = Declared(
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

#: model name -> its declared port reference; a model of ``views.VIEWS`` missing here gets the
#: computed sections only (or the view class may carry its own ``PORT_REFERENCE``)
DECLARED: dict[str, Declared] = {"consumer-lists": _CL, "recovery-deferral": _RD, "ordered-consumption": _OC}


# ------------------------------------------------------------------------------------------
# what is computed
# ------------------------------------------------------------------------------------------
def conformance_configs(model_name: str) -> list[tuple[str, dict[str, Any]]]:
    """The configurations the conformance suite drives for ``model_name``, each with the
    overrides it uses: ``build_corpus.PASS_CONFIGS`` or ``mutants.TRACE_CONFIGS`` of the model's
    conformance package, followed by that module's ``ACTOR_CONFIGS`` if it has them
    (with ``mutants.ENV_BUDGET`` when the config has a budget), else every
    named configuration.  An entry is a configuration name or a ``(name, overrides)`` pair."""
    pkg = f"conq.conformance.{model_name.replace('-', '_')}"
    names: Iterable[str] | None = None
    overrides: dict[str, Any] = {}
    for mod, attr in (("build_corpus", "PASS_CONFIGS"), ("mutants", "TRACE_CONFIGS")):
        try:
            m = importlib.import_module(f"{pkg}.{mod}")
        except ImportError:
            continue
        if names is None and hasattr(m, attr):
            # ... and the configurations of the other actors, when the package lists them apart
            names = tuple(getattr(m, attr)) + tuple(getattr(m, "ACTOR_CONFIGS", ()))
    try:
        mutants = importlib.import_module(f"{pkg}.mutants")
        if hasattr(mutants, "ENV_BUDGET"):
            overrides["env_budget"] = mutants.ENV_BUDGET
    except ImportError:
        pass
    base = load_model(model_name)
    if names is None:
        names = tuple(type(base).configs())
    fields = {f.name for f in dataclasses.fields(type(base).Config)}
    out = []
    for entry in names:
        name, own = (entry, {}) if isinstance(entry, str) else (entry[0], dict(entry[1] or {}))
        out.append((name, {**{k: v for k, v in overrides.items() if k in fields}, **own}))
    return out


def _shape(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (tuple, list)):
        inner = sorted({_shape(x) for x in v})
        return f"[{inner[0]}, ...]" if len(inner) == 1 else "[]" if not inner else "[" + ", ".join(_shape(x) for x in v) + "]"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


@dataclass
class Facts:
    """What exploring a call-level view on one configuration found."""

    config: str
    overrides: dict[str, Any]
    config_json: dict[str, Any]
    states: int = 0
    transitions: int = 0
    complete: bool = True
    params: dict[str, list[set]] = field(default_factory=dict)  # call -> values per position
    results: dict[str, set] = field(default_factory=dict)  # call -> shapes of the result / observation
    arrays_sorted: bool = True
    arrays_dupes: bool = False
    pair_obs: bool = True  # every observation a 2-element [result, array]
    obs_shapes: dict[str, set] = field(default_factory=dict)
    disabled_somewhere: dict[str, int] = field(default_factory=dict)
    snapshot_paths: dict = field(default_factory=dict)  # leaf path -> shapes seen
    init_snapshot: Any = None
    examples: dict[str, tuple] = field(default_factory=dict)  # call -> (path, before, action, obs, after)


def _snapshot_paths(v: Any, prefix: str, out: dict[str, set]) -> None:
    """Every leaf of a snapshot as ``path -> shapes``: ``[]`` stands for any element of an array,
    ``.key`` for an object's field."""
    if isinstance(v, dict):
        if not v:
            out.setdefault(prefix or "(top)", set()).add("{}")
        for k, x in v.items():
            _snapshot_paths(x, f"{prefix}.{k}", out)
    elif isinstance(v, (list, tuple)):
        if not v:
            out.setdefault(prefix, set()).add("[]")
        for x in v:
            _snapshot_paths(x, f"{prefix}[]", out)
    elif isinstance(v, str):
        out.setdefault(prefix, set()).add(json.dumps(v))  # strings by value: they name states
    else:
        out.setdefault(prefix, set()).add(_shape(v))


def explore(model_name: str, config: str, overrides: dict[str, Any], cap: int = STATE_CAP) -> Facts:
    from .views import conformance_model

    view = conformance_model(model_name, config, overrides)
    facts = Facts(config, overrides, config_dict(view.config))
    inits = list(dict.fromkeys(view.init_states()))
    facts.init_snapshot = jsonable(view.observe(inits[0]))
    parent: dict[Any, tuple] = {s: () for s in inits}
    todo = deque(inits)
    names_seen: set[str] = set()
    while todo:
        s = todo.popleft()
        facts.states += 1
        succ = view.successors(s)
        here = {a[0] for a, _, _ in succ}
        for a, o, t in succ:
            facts.transitions += 1
            name = a[0]
            names_seen.add(name)
            ps = facts.params.setdefault(name, [set() for _ in a[1:]])
            for i, x in enumerate(a[1:]):
                ps[i].add(x)
            facts.obs_shapes.setdefault(name, set()).add(_shape(o))
            if isinstance(o, tuple) and len(o) == 2 and isinstance(o[1], tuple):
                facts.results.setdefault(name, set()).add(_shape(o[0]))
                arr = list(o[1])
                if arr != sorted(arr):
                    facts.arrays_sorted = False
                if len(set(arr)) != len(arr):
                    facts.arrays_dupes = True
            else:
                facts.pair_obs = False
            if t not in parent:
                if len(parent) >= cap:
                    facts.complete = False
                    continue
                parent[t] = parent[s] + ((a, o),)
                todo.append(t)
                _snapshot_paths(jsonable(view.observe(t)), "", facts.snapshot_paths)
            if name not in facts.examples or len(parent[s]) < len(facts.examples[name][0]):
                facts.examples[name] = (parent[s], jsonable(view.observe(s)), a, o, jsonable(view.observe(t)))
        for name in names_seen - here:
            facts.disabled_somewhere[name] = facts.disabled_somewhere.get(name, 0) + 1
    _snapshot_paths(facts.init_snapshot, "", facts.snapshot_paths)
    return facts


def _switches(model_name: str, config: str, overrides: dict[str, Any], cap: int = 5_000) -> list[tuple[str, Any, str]]:
    """For every boolean or enumerated field of the configuration: flipped on ``config``, does
    the call-level view behave differently?  (field, other value, the shortest difference or '')."""
    from .views import conformance_model

    base_model = load_model(model_name, config, overrides)
    cfg = base_model.config
    out = []
    ref = conformance_model(model_name, config, overrides)
    ref_memo: dict = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, bool):
            others = [not v]
        elif isinstance(v, enum.Enum):
            others = [x for x in type(v) if x != v]
        else:
            continue
        for other in others:
            value = other.value if isinstance(other, enum.Enum) else other
            try:
                alt = conformance_model(model_name, config, {**overrides, f.name: value})
            except Exception as e:  # an invalid combination: say so
                out.append((f.name, value, f"(not a valid configuration here: {e})"))
                continue
            out.append((f.name, value, _difference(ref, alt, cap, ref_memo)))
    return out


def _fmt_call(a: tuple) -> str:
    return json.dumps(jsonable(list(a)))


def _observed(model: Model, state: Any, memo: dict) -> str:
    found = memo.get(state)
    if found is None:
        found = memo[state] = json.dumps(jsonable(model.observe(state)), sort_keys=True)
    return found


def _difference(ref: Model, alt: Model, cap: int, ref_memo: dict | None = None) -> str:
    """The shortest call sequence after which the two views allow different observations or
    snapshots; '' when none within ``cap`` state pairs (the switch is invisible at call level)."""
    start = (ref.init_states()[0], alt.init_states()[0])
    if jsonable(ref.observe(start[0])) != jsonable(alt.observe(start[1])):
        return "the initial snapshot differs"
    seen = {start: ()}
    todo = deque([start])
    rm = {} if ref_memo is None else ref_memo
    am: dict = {}
    while todo:
        pair = todo.popleft()
        s, t = pair
        a_out: dict = {}
        b_out: dict = {}
        for a, o, x in ref.successors(s):
            a_out.setdefault(a, {})[(o, _observed(ref, x, rm))] = x
        for a, o, x in alt.successors(t):
            b_out.setdefault(a, {})[(o, _observed(alt, x, am))] = x
        for a in list(dict.fromkeys(list(a_out) + list(b_out))):
            if set(a_out.get(a, {})) != set(b_out.get(a, {})):
                path = " ; ".join(f"{_fmt_call(pa)} -> {json.dumps(jsonable(po))}" for pa, po in seen[pair])
                def obs(d):
                    return " or ".join(sorted({json.dumps(jsonable(o)) for o, _ in d})) if d else "disabled (error 13)"
                lead = f"after {path}: " if path else "from the start: "
                ro, ao = obs(a_out.get(a, {})), obs(b_out.get(a, {}))
                if ro == ao:
                    return f"{lead}{_fmt_call(a)} observes {ro} in both, but the snapshots differ"
                return f"{lead}{_fmt_call(a)} observes {ro} with the reference value, {ao} with this one"
            for key, x in a_out.get(a, {}).items():
                nxt = (x, b_out[a][key])
                if nxt not in seen and len(seen) < cap:
                    seen[nxt] = seen[pair] + ((a, key[0]),)
                    todo.append(nxt)
    return ""


# ------------------------------------------------------------------------------------------
# the document
# ------------------------------------------------------------------------------------------
def models() -> list[str]:
    """Models with a call-level view that loads (``views.VIEWS``), in name order."""
    from .views import VIEWS, conformance_model

    out = []
    for name in sorted(VIEWS):
        try:
            conformance_model(name)
        except Exception:  # a view under construction: no document until it loads
            continue
        out.append(name)
    return out


def _range(values: set) -> str:
    vals = sorted(values, key=repr)
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        lo, hi = min(vals), max(vals)
        return f"{lo}..{hi}" if vals == list(range(lo, hi + 1)) and hi > lo else ", ".join(map(str, vals))
    return ", ".join(json.dumps(jsonable(v)) for v in vals)


def render_markdown(model_name: str) -> str:
    from .views import conformance_model

    view = conformance_model(model_name)
    declared = DECLARED.get(model_name) or getattr(type(view), "PORT_REFERENCE", None)
    cfgs = conformance_configs(model_name)
    facts = [explore(model_name, c, o) for c, o in cfgs]
    out = [
        f"# Port reference: `{model_name}`",
        "",
        "<!-- generated by `python -m conq.conformance.port_reference --write` (and `conq protocol --write`) "
        "from the model's call-level view, its configurations and conformance/port_reference.py; do not edit by hand -->",
        "",
        f"What a port of `{model_name}` must do to pass `conq conformance {model_name} --impl stdio:CMD`. "
        "The transport and the messages are in [../port-protocol.md](../port-protocol.md); this page is "
        "what goes inside them: the `config` of `init`, the `action` arrays the checker sends, the "
        "`observation` each must answer, and the `state` of `snapshot`.",
        "",
    ]
    if declared is None:
        out += ["> No call descriptions are declared for this model yet (conformance/port_reference.py "
                "`DECLARED`): the sections below are computed from its call-level view only.", ""]
    else:
        out += [declared.intro, ""]
    out += ["## Configurations the conformance suite drives", "",
            "`init` carries the configuration field by field (`conq list --json`). The suite drives these:", "",
            "| configuration | overrides | states | calls (transitions) | explored |", "|---|---|---|---|---|"]
    for f in facts:
        ov = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in f.overrides.items()) or "-"
        out.append(f"| `{f.config}` | {ov} | {f.states:,} | {f.transitions:,} | {'all' if f.complete else f'first {STATE_CAP:,} states'} |")
    out += ["", "Their `config` objects, as `init` sends them:", "", "```"]
    out += [f"{f.config}: {json.dumps(f.config_json, separators=(',', ':'))}" for f in facts]
    out += ["```", ""]
    default = getattr(conformance_model(model_name), "config_name", None) or "the model's first"
    out += [f"To run all of them as the suite does (each with its overrides; GAPS.md entry 5 of the Node port): "
            f"`conq conformance {model_name} --impl stdio:CMD --all-configs`, one verdict per configuration, exit 1 if "
            "any diverges (`--set KEY=VALUE` goes on top of every configuration's overrides). Without `--all-configs` "
            f"a run uses one configuration, `--config NAME` (default `{default}`) with its own field values: pass "
            "the overrides of the table yourself (`--set env_budget=2`) to run it as the suite does.", "",
            f"`--mode exhaustive` runs every trace of `--length` actions; it needs `--traces` at least their count "
            "and refuses to start otherwise (exit 2, the message gives the count, per configuration the largest with "
            "`--all-configs`): `--traces 100000000` runs exactly the complete set. The counts at the default "
            "`--length 40` run into the millions on the larger configurations; a shorter `--length` keeps them small.",
            ""]
    if declared is not None and declared.state:
        out += ["## State a port keeps", "", declared.state, ""]
    if declared is not None and declared.procedures:
        out += ["## Procedures", "", declared.procedures, ""]
    # calls: computed table
    names: list[str] = []
    for f in facts:
        for n in f.params:
            if n not in names:
                names.append(n)
    base_actions = getattr(getattr(view, "base", view), "ACTIONS", None) or getattr(view, "ACTIONS", None) or {}
    out += ["## Calls the checker sends", "",
            "The `action` of every `action` request is `[name, param, ...]`. These are all the names the "
            "checker sends (computed: every call the call-level view enables in some reachable state of a "
            "configuration above); ranges are the values seen, per configuration.", "",
            "| call | parameters | values | observation seen | in configurations |", "|---|---|---|---|---|"]
    for n in names:
        params = base_actions.get(n, tuple(f"p{i}" for i in range(len(next(f.params[n] for f in facts if n in f.params)))))
        ranges = []
        for i, p in enumerate(params):
            per = {}
            for f in facts:
                if n in f.params and i < len(f.params[n]):
                    per.setdefault(_range(f.params[n][i]), []).append(f.config)
            ranges.append(f"`{p}`: " + "; ".join(f"{r} ({', '.join(cs)})" if len(per) > 1 else r for r, cs in per.items()))
        if all(f.pair_obs for f in facts):
            rs = sorted(set().union(*(f.results.get(n, set()) for f in facts)))
            shapes = [f"[{' or '.join(rs)}, [ids]]"]
        else:
            shapes = sorted(set().union(*(f.obs_shapes.get(n, set()) for f in facts)))
        where = [f.config for f in facts if n in f.params]
        out.append(f"| `{n}` | {', '.join(f'`{p}`' for p in params) or '-'} | {'<br>'.join(ranges) or '-'} | "
                   f"{' / '.join(f'`{x}`' for x in shapes)} | {'all' if len(where) == len(facts) else ', '.join(where)} |")
    out.append("")
    if declared is not None:
        declared_names = [c.name for c in declared.calls]
        missing = [n for n in names if n not in declared_names]
        extra = [n for n in declared_names if n not in names]
        if missing or extra:
            raise ValueError(f"{model_name}: declared calls {declared_names} differ from the calls the view emits {names}")
        for c in declared.calls:
            out += [f"### `{_signature(c)}`", "",
                    "| | |", "|---|---|"]
            if c.params:  # the declared meaning of each parameter (its range is in the table above)
                out.append("| parameters | " + "; ".join(f"`{p}`: {meaning}" for p, meaning in c.params) + " |")
            out += [f"| enabled when | {c.enabled} |",
                    f"| does | {c.does} |",
                    f"| {declared.result_label} | {c.result} |", ""]
            ex = next((f.examples[c.name] for f in facts if c.name in f.examples), None)
            if ex is not None:
                path, before, a, o, after = ex
                cfg = next(f.config for f in facts if c.name in f.examples)
                out += [f"Example (`{cfg}`, computed)" + (": after " + " ; ".join(f"`{_fmt_call(pa)}` -> `{json.dumps(jsonable(po))}`" for pa, po in path) if path else ", from the initial state") + ":", "",
                        "```",
                        f"before:      {json.dumps(before)}",
                        f"action:      {_fmt_call(a)}",
                        f"observation: {json.dumps(jsonable(o))}",
                        f"after:       {json.dumps(after)}",
                        "```", ""]
    # observations
    out += ["## Observations", ""]
    if declared is not None:
        out += [declared.observation, ""]
    pair = all(f.pair_obs for f in facts)
    if pair:
        srt = all(f.arrays_sorted for f in facts)
        dup = any(f.arrays_dupes for f in facts)
        out += ["Computed over every transition explored: every observation is a two-element array "
                "`[result, list]`; the list is " + ("always sorted ascending" if srt else "NOT always sorted")
                + (", and one consumer appeared twice in it in some transition" if dup else ", and never held one id twice in the transitions explored")
                + ". Result shapes per call:", ""]
        out += ["| call | result |", "|---|---|"]
        for n in names:
            rs = sorted(set().union(*(f.results.get(n, set()) for f in facts)))
            out.append(f"| `{n}` | {' or '.join(f'`{r}`' for r in rs)} |")
        out.append("")
    else:
        out += ["Observation shapes per call (computed):", "", "| call | shapes |", "|---|---|"]
        for n in names:
            out.append(f"| `{n}` | {' / '.join(f'`{x}`' for x in sorted(set().union(*(f.obs_shapes.get(n, set()) for f in facts))))} |")
        out.append("")
    out += ["A call the model has disabled is answered with `error` code 13 (`not-enabled`, definite); "
            "the checker records it as the observation `[\"error\", 13]`. Any other definite error "
            "(10, 11, 12, 14) is also an observation, one the model never allows: the run fails at that "
            "step with what the model allowed instead.", ""]
    # snapshot
    out += ["## Snapshot", ""]
    if declared is not None:
        out += [declared.snapshot, ""]
    paths: dict[str, set] = {}
    for f in facts:
        for k, v in f.snapshot_paths.items():
            paths.setdefault(k, set()).update(v)
    out += ["Every leaf seen in a snapshot (computed over every state explored; `[]` is any element of an "
            "array, `.key` a field of an object; `[]` as a shape is an empty array; strings are shown by value):", "",
            "| path | shapes | in configurations |", "|---|---|---|"]
    for k in sorted(paths):
        where = [f.config for f in facts if k in f.snapshot_paths]
        shown = sorted(paths[k])
        strings = [x for x in shown if x.startswith('"')]
        if len(strings) > 12:
            shown = [x for x in shown if not x.startswith('"')] + [f"string ({len(strings)} values)"]
        out.append(f"| `{k}` | {' or '.join(f'`{x}`' for x in shown)} | {'all' if len(where) == len(facts) else ', '.join(where)} |")
    out += ["", "Initial snapshots:", "", "```"]
    out += [f"{f.config}: {json.dumps(f.init_snapshot)}" for f in facts]
    out += ["```", ""]
    # switches
    small = [(f.config, f.overrides) for f in facts if f.complete and f.states <= SWITCH_STATES] or [cfgs[0]]
    ref_cfg, ref_ov = small[0]
    out += ["## Configuration switches at call level", "",
            "Each boolean or enumerated configuration field, flipped on each conformance configuration of at "
            f"most {SWITCH_STATES:,} call-level states ({', '.join(f'`{c}`' for c, _ in small)}). Computed: the "
            "call-level views with and without the flip, explored side by side, give the shortest call "
            "sequence after which they allow different observations or snapshots. *Invisible* means no call "
            "sequence tells the two apart on those configurations: a port may ignore the switch there.", "",
            f"| field | value on `{ref_cfg}` | flipped to (on `{ref_cfg}`) | visible on | the shortest difference |", "|---|---|---|---|---|"]
    ref_model = load_model(model_name, ref_cfg, ref_ov)
    found: dict[tuple, list] = {}
    for c, o in small:
        for name, value, diff in _switches(model_name, c, o):
            found.setdefault(name, []).append((c, diff, json.dumps(value)))
    for name, per in found.items():
        value = per[0][2]
        per = [(c, d) for c, d, _ in per]
        cur = getattr(ref_model.config, name)
        cur = cur.value if isinstance(cur, enum.Enum) else cur
        vis = [(c, d) for c, d in per if d]
        if not vis:
            out.append(f"| `{name}` | `{json.dumps(cur)}` | `{value}` | invisible | - |")
            continue
        c0, d0 = min(vis, key=lambda cd: (cd[1].count(" ; "), len(cd[1])))
        where = "all" if len(vis) == len(per) else ", ".join(f"`{c}`" for c, _ in vis)
        out.append(f"| `{name}` | `{json.dumps(cur)}` | `{value}` | {where} | `{c0}`: {d0} |")
    out.append("")
    out += ["## The golden corpus", "",
            f"`conq conformance {model_name} --impl stdio:CMD --corpus conformance/{model_name.replace('-', '_')}/corpus` "
            "also runs the golden traces. Each trace starts a port with its own configuration (`init`, not "
            "`reset`, whenever the configuration changes). `pass-*` traces are replayed and the port must "
            "match their recorded observations' model. `diverge-*` traces record a known bug (a mutant's "
            "observations, which the model rejects); their actions are replayed against the port too, "
            "and the port must conform on them: it must not reproduce the bug. A port that does counts "
            "as a failure of that trace, with the step the bug shows at.", ""]
    if model_name == "consumer-lists":  # the second protocol level (issue 17)
        from conq.conformance.consumer_lists.thread_steps import reference_section

        out += reference_section()
    if declared is not None and declared.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in declared.notes] + [""]
    out += ["## See also", "", "- [../port-protocol.md](../port-protocol.md): transport, messages, error codes",
            f"- `conq list --json`: every named configuration of `{model_name}`", ""]
    return "\n".join(out)


def _signature(c: Call) -> str:
    return f"[\"{c.name}\"" + "".join(f", {p}" for p, _ in c.params) + "]"


def targets(root: Path) -> dict[Path, str]:
    """Every port reference, path -> generated text."""
    return {root / "spec" / "ports" / f"{name}.md": render_markdown(name) for name in models()}


def write_all(root: Path) -> list[Path]:
    from .trace import atomic_write

    written = []
    for path, text in targets(root).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    from conq.catalog import repo_root

    ap = argparse.ArgumentParser(prog="python -m conq.conformance.port_reference", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate spec/ports/*.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed document differs")
    ap.add_argument("model", nargs="?", help="print this model's reference")
    args = ap.parse_args(argv)
    root = repo_root()
    if args.write:
        for p in write_all(root):
            print(f"wrote {p}")
        return 0
    if args.check:
        stale = [str(p) for p, text in targets(root).items() if not p.is_file() or p.read_text() != text]
        for p in stale:
            print(f"stale: {p} (python -m conq.conformance.port_reference --write)")
        return 1 if stale else 0
    sys.stdout.write(render_markdown(args.model or "consumer-lists"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
