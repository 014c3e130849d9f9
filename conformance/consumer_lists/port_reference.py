"""The consumer-lists port reference: what spec/ports/consumer-lists.md says that cannot be computed
(the state a port keeps, the procedures, each call; model/consumer_lists/model.py, the call-level
view calls.py).  conformance/port_reference.py computes the rest and checks that the calls
declared here are exactly those the view emits.
"""

from __future__ import annotations

from conq.conformance.port_reference import Call, Declared

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

DECLARED = Declared(
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
        "(`config.groups`), one entry per group id `0..max(config.groups)` in id order (as many entries as the "
        "highest group id plus one; group `-1` is no group), its owner's id or `null`, and "
        "`group_reset_owed`, always `false` (every call settles its reset); a message's status may then "
        "also be `deleted`. The checker compares it after `init`/`reset` and after "
        "every call, exactly: arrays in order (consumers and messages by id, each Interested list head "
        "first), objects by their keys whatever their order."
    ),
    notes=(
        "A call the model has disabled must be answered with error 13 (`not-enabled`, definite) and "
        "change nothing: the checker's random and coverage traces send such calls on purpose (about one "
        "step in ten probes a call the model has disabled in every state consistent with the run), and "
        "replayed traces (the corpus, `diverge-*` replays) may send others.",
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
