"""The consumer-lists model's fast successor function (issue 18): the readable steps, memoised.

Profiling the explorer on the reference configuration (pyinstrument, safety only) put the model's
``successors`` at about 40% of the search.  Its steps are the readable per-action functions of
model.py, and each one reads only a small part of the state: of 532,908 reachable states, the
queue's part (node states, target flags, browsers' seen sets, message statuses, the lists) takes
only 3,407 values.  So the fast path does not re-implement any step: it runs the readable step
sections (:meth:`~.model.ConsumerListsModel._io_steps`, ``_publisher_steps``,
``_environment_steps``, ``_message_steps``) once per distinct *footprint* (the state fields the
section may read) and replays the recorded result on every state with that footprint:

* the memo value of a section is its steps as ``(action, observation, writes)``, ``writes`` the
  fields the step changed with their new values; the successor is the state with ``writes``
  applied;
* every field outside the footprint is replaced, while the section runs on a miss, by a poison
  (one object per field) on which every comparison (but with itself), truth test or arithmetic
  raises :class:`FootprintError`: a section reading a field its footprint does not name fails
  loudly instead of being memoised wrongly, and a field it writes is always seen as written (the
  poison is never what is written), so a write of the value a field already had is replayed too;
* the model's step properties (the ``always_step`` claims of properties.py, the same functions
  the engines call) are evaluated on each recorded step, poisoned: a step whose checks all hold
  there holds on every state with that footprint, and is returned as a
  :class:`~conq.model.kernel.CheckedAction` naming the witnesses that fired or could not be
  decided, so the explorer skips its checks (a check that reads a poisoned field raises and leaves
  the step to the explorer).  This took the reference configuration's search from 17.2 s to 10.6 s
  on one core (the readable successors, ``CONQ_CL_FAST=0``, against this path; quiet machine,
  2026-11-24; ``bench/explorer_throughput.py``);
* the other actors' steps (reject, delete, groups) are not memoised (they run on the state itself);
  their fields are in every footprint, conservatively.

Sections and footprints (``Q`` is the queue's part: every consumer's node, flag and seen set, every
message's status, the lists):

* per consumer ``c``, its IO thread's steps and the environment's steps on it: ``Q``, ``c``'s own
  program counter, wake bit, credit and suspensions, and the environment's budget;
* the publishing threads (all messages): ``Q`` and the owed notifications;
* the environment's message steps (enqueue, unhold, release): the message statuses, every program
  counter (a release reads the holder's) and the budget.

tests/model/consumer_lists/test_fast.py checks on every reachable state of every small named
configuration that this function and :meth:`spec_successors` give identical successor lists.
The memos are bounded (:data:`MEMO_LIMIT` entries each; a full one is cleared, which costs only
time).  ``CONQ_CL_FAST=0`` switches the fast path off (the readable function is used).
"""

from __future__ import annotations

import os
from operator import itemgetter
from typing import Any, Callable

from conq.model.engines.packing import FootprintRead, Poison, StepChecks, _poison_in

from .state import CF, F_CREDIT, F_FLAG, F_PC, F_SEEN, F_SUSP, F_WAKE

#: entries per memo before it is cleared (a bound on memory for very large configurations; the
#: reference needs about 20,000 in its largest memo)
MEMO_LIMIT = 500_000


class FootprintError(RuntimeError):
    """A memoised step section used a state field outside its declared footprint (a bug in fast.py's
    footprints, never in the model)."""


#: the poison of field i (engines/packing.py: any use but copying it, or comparing it with itself,
#: raises FootprintRead; one object per field, so a field the step did not write equals itself,
#: which is what every real state with this footprint says of it, ``s[i] == t[i]``)
_POISONS: list[Poison] = []


def _poison(i: int) -> Poison:
    while len(_POISONS) <= i:
        _POISONS.append(Poison(len(_POISONS)))
    return _POISONS[i]


def enabled() -> bool:
    """The fast path is on unless ``CONQ_CL_FAST=0``."""
    return os.environ.get("CONQ_CL_FAST", "1") != "0"


def _record(run: Callable[[tuple, list], Any], s: tuple, outside: list[int], checks: StepChecks) -> tuple[list, Any]:
    """Run the readable section ``run`` on ``s`` with every field in ``outside`` poisoned; return its
    steps as ``(action, observation, writes)`` and what ``run`` returned.  A step whose applicable
    step properties' checks are decided by the footprint alone, and hold, gets its action as a
    :class:`~conq.model.kernel.CheckedAction` (``checks``: engines/packing.py StepChecks, which
    leaves a step that reads a poisoned field to the engine)."""
    p = list(s)
    for i in outside:
        p[i] = _poison(i)
    p = tuple(p)
    out: list = []
    try:
        result = run(p, out)
    except FootprintRead as e:
        raise FootprintError(f"a consumer-lists step section read field {e.field}, outside its footprint "
                             "(fast.py)") from None
    steps = []
    for a, o, t in out:
        writes = tuple((i, v) for i, v in enumerate(t) if v is not p[i])
        if any(type(v) is Poison for _, v in writes) or _poison_in(a) is not None or _poison_in(o) is not None:
            raise FootprintError(f"step {a!r} copied a field outside its footprint (fast.py)")
        steps.append(_shared((checks.label(p, a, o, t), o, writes)))
    return steps, result


#: one object per distinct recorded step, shared by every memo entry that has it (a 10-million-state
#: run holds about a million entries, most steps recurring in thousands of them: issue 18)
_STEPS: dict = {}


def _shared(step: tuple) -> tuple:
    """``step``, or the equal step recorded before.  Keyed by the label's class and the step's repr:
    a CheckedAction equals (and hashes as) the plain action, and True equals 1, but neither may
    stand for the other."""
    key = (step[0].__class__, repr(step))
    found = _STEPS.get(key)
    if found is None:
        if len(_STEPS) >= MEMO_LIMIT:
            _STEPS.clear()
        found = _STEPS[key] = step
    return found


def _memo(footprint: list[int], width: int, run: Callable[[tuple, list], Any], entry: Callable[[list, Any], tuple],
          checks: Callable[[], StepChecks] = lambda: StepChecks(())):
    """(key function, memo, miss function) of one section: ``miss(s, key)`` records the section on
    ``s`` and stores ``entry(steps, what run returned)`` under ``key``; ``checks()``: what decides
    the step properties per step."""
    keep = set(footprint)
    outside = [i for i in range(width) if i not in keep]
    memo: dict = {}

    def miss(s: tuple, key: Any) -> tuple:
        e = entry(*_record(run, s, outside, checks()))
        if len(memo) >= MEMO_LIMIT:
            memo.clear()
        memo[key] = e
        return e

    return itemgetter(*footprint), memo, miss


def fast_successors(model) -> Callable[[tuple], list]:
    """The memoised successor function of ``model`` (a ConsumerListsModel), equal to
    ``model.spec_successors`` on every state."""
    n = model.n
    MB, LB, BUD, END = model.MB, model.LB, model.BUD, model.END
    actors = set(range(BUD + 1, END))  # the other actors' fields: in every footprint
    queue = (
        {c * CF + f for c in range(n) for f in (0, F_FLAG, F_SEEN)}
        | set(range(MB, LB, 2))  # statuses
        | set(range(LB, BUD))  # the lists: All, NotInterested, NonAcquiring, Notified, Interested
        | actors
    )
    pends = set(range(MB + 1, LB, 2))
    pcs = {c * CF + F_PC for c in range(n)}
    checks_box: list = []

    def step_checks() -> StepChecks:
        # the model's own step properties, the functions the engines evaluate (built once, lazily:
        # the model is not finished when this function is made); a check that reads a poisoned
        # field leaves the step to the engine (grow=False: the footprints here are fixed)
        if not checks_box:
            checks_box.append(StepChecks(model.property_list(), grow=False))
        return checks_box[0]

    def consumer_run(c: int) -> Callable[[tuple, list], tuple]:
        def run(s: tuple, out: list) -> tuple:
            owed = model._io_steps(s, c, out)
            split = len(out)  # where the environment's steps begin
            model._environment_steps(s, c, out)
            return owed, split

        return run

    cons = []
    for c in range(n):
        b = c * CF
        own = {b + F_PC, b + F_WAKE, b + F_CREDIT, b + F_SUSP, BUD}
        cons.append(_memo(sorted(queue | own), END, consumer_run(c), _io_and_environment, step_checks))
    pub_key, pub_memo, pub_miss = _memo(sorted(queue | pends), END, model._publisher_steps, _steps_owed,
                                        step_checks)
    msg_key, msg_memo, msg_miss = _memo(sorted(set(range(MB, LB, 2)) | pcs | {BUD} | actors), END,
                                        model._message_steps, _steps_owed, step_checks)
    has_actors = END > BUD + 1
    actor_steps = model._actor_successors
    idle = ("idle",)

    def successors(s: tuple) -> list:
        out: list = []
        fair = False
        env = []
        for key_of, memo, miss in cons:
            k = key_of(s)
            e = memo.get(k)
            if e is None:
                e = miss(s, k)
            io_steps, env_steps, owed = e
            if owed:
                fair = True
            for a, o, writes in io_steps:
                t = list(s)
                for i, v in writes:
                    t[i] = v
                out.append((a, o, tuple(t)))
            env.append(env_steps)
        k = pub_key(s)
        e = pub_memo.get(k)
        if e is None:
            e = pub_miss(s, k)
        steps, owed = e
        if owed:
            fair = True
        for a, o, writes in steps:
            t = list(s)
            for i, v in writes:
                t[i] = v
            out.append((a, o, tuple(t)))
        if has_actors and actor_steps(s, out):
            fair = True
        for steps in env:
            for a, o, writes in steps:
                t = list(s)
                for i, v in writes:
                    t[i] = v
                out.append((a, o, tuple(t)))
        k = msg_key(s)
        e = msg_memo.get(k)
        if e is None:
            e = msg_miss(s, k)
        for a, o, writes in e[0]:
            t = list(s)
            for i, v in writes:
                t[i] = v
            out.append((a, o, tuple(t)))
        if not fair:
            out.append((idle, None, s))
        return out

    memos = [m for _, m, _ in cons] + [pub_memo, msg_memo]
    successors.memo_sizes = lambda: [len(m) for m in memos]  # type: ignore[attr-defined]
    return successors


def _io_and_environment(steps: list, result: tuple) -> tuple:
    owed, split = result
    return tuple(steps[:split]), tuple(steps[split:]), bool(owed)


def _steps_owed(steps: list, owed: Any) -> tuple:
    return tuple(steps), bool(owed)
