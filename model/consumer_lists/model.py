"""The queue-side consumer manager (QCM) of seeds 000/002: consumer lists, notifications, pulls.

What it holds (REFERENCE.md section 1; upstream ``QueueConsumerManagerImpl``, ``AbstractQueue``,
``QueueConsumerNode``, ``AbstractConsumerTarget``):

* per consumer: its node state (ABSENT before ``add_consumer``, NOT_INTERESTED, INTERESTED,
  NOTIFIED, NON_ACQUIRING, REMOVED), whether it acquires (browsers do not), its fixed priority,
  the target's ``notifyWorkDesired`` flag and the reasons behind it (flow control, TCP
  back-pressure, credit), its credit, a pending ``notifyWork`` (the scheduling chain
  consumer -> target -> session -> connection -> IO thread collapsed into one "connection
  scheduled" bit: the hops only forward the bit, and a bit that is set twice collapses, which is
  the behaviour that matters for lost and spurious wake-ups), the program counter of its IO thread
  and, for browsers, the set of messages already seen;
* per message: not yet arrived, available, held (unavailable: held, TTL, group-owned), acquired by a
  consumer; and whether a publishing thread still owes the queue's ``notifyConsumers`` for it;
* the lists themselves: All, NotInterested, NonAcquiring and Notified as sets (their order never
  decides anything upstream), Interested as one ordered tuple per priority level (its order decides
  who is notified first, and "back of Interested" is the seed's fairness rule).

Threads: every consumer has its own IO thread (a pull is several actions: un-notify, find the next
available entry, acquire it, finish), publishing threads run ``notifyConsumers`` as a separate step
after the entry became available, and the environment (clients, housekeeping) adds and removes
consumers, grants credit, suspends and resumes, enqueues, releases and un-holds messages.  An action
is atomic exactly where the upstream code is one guarded step (``moveFromTo`` under the node's
monitor, the entry's acquire CAS); each notification loop is one step (it only reads and CASes).

State encoding (flat tuple of small ints, the explorer's hot path):
``[consumer i]*7 = node, pc, wake, flag, credit, susp, seen`` then ``[message j]*2 = status, pend``
then ``all, notint, nonacq, notified`` (bit masks) then one Interested tuple per priority level.
"""

from __future__ import annotations

import os
from typing import Any

from conq.model.kernel import Model, int_range

from .state import (
    ABSENT,
    ACQ,
    AVAILABLE,
    CF,
    ConsumerListsConfig,
    DELETED,
    DES,
    FIND,
    F_CREDIT,
    F_FLAG,
    F_PC,
    F_SEEN,
    F_SUSP,
    F_WAKE,
    GroupPolicy,
    HELD,
    IDLE,
    INTERESTED,
    NODE_NAMES,
    NONE,
    NON_ACQUIRING,
    NOTIFIED,
    NOT_INTERESTED,
    PullRule,
    REASONS,
    REMOVED,
    START,
    TAKE,
    UNARRIVED,
    _bits,
)
from .actors import OtherActors
from .configs import descriptions, named_configs
from . import fast
from .properties import properties


class ConsumerListsModel(OtherActors, Model):
    name = "consumer-lists"
    Config = ConsumerListsConfig
    #: a counterexample's changes per consumer (c0), message (m1, with who rejected it) and group
    #: (g0); the lists, the budget and the rest are the queue's (model/engines/changes.py)
    view_parts = {"consumers": "c", "messages": "m", "rejected_by": ("m", "rejected_by"), "groups": "g"}
    view_root = "queue"
    #: the model's steps (threads and environment) and, for traces of the call-level view
    #: (conformance/consumer_lists/calls.py), its ``pull`` call; parameters: c a consumer,
    #: j a message, r a suspension reason name, desired a boolean
    ACTIONS = {
        "add_consumer": ("c",), "remove_consumer": ("c",), "credit": ("c",),
        "suspend": ("c", "r"), "resume": ("c", "r"),
        "enqueue": ("j",), "enqueue_held": ("j",), "unhold": ("j",), "release": ("j",),
        "notify_consumers": ("j",), "target_flag": ("c", "desired"), "set_notify_work_desired": ("c", "desired"),
        "deliver_single_message": ("c",), "find_next_available": ("c",), "acquire": ("c", "j"),
        "deliver": ("c",), "no_message": ("c",), "idle": (),
        # the other actors (issue 16, actors.py): housekeeping / management, reject, message groups
        "delete_entry": ("j",), "delayed_acquisition": ("j",), "reject": ("c", "j"),
        "reset_sub_pointers_for_groups": (),
        "pull": ("c",),
    }
    PARAM_TYPES = {"c": int, "j": int, "r": str, "desired": bool}

    @classmethod
    def param_range(cls, config, action, param):
        if param == "c":
            return range(len(config.consumers))
        if param == "j":
            return range(config.messages)
        if param == "r":
            return REASONS[: config.reasons]
        return None

    @classmethod
    def configs(cls):
        return named_configs()

    @classmethod
    def validate_config(cls, config):
        problems = super().validate_config(config)
        bad = {p.partition(":")[0] for p in problems}
        cons = config.consumers
        if "consumers" not in bad:
            if not cons:
                problems.append("consumers: must name at least one consumer, as [[priority, acquires], ...]")
            for i, entry in enumerate(cons):
                if not (isinstance(entry, tuple) and len(entry) == 2):
                    problems.append(f"consumers: entry {i} must be [priority, acquires], got {entry!r}")
                    break
                prio, acquires = entry
                if isinstance(prio, bool) or not isinstance(prio, int):
                    problems.append(f"consumers: entry {i}: priority must be an integer, got {prio!r}")
                    break
                if not isinstance(acquires, bool):
                    problems.append(f"consumers: entry {i}: acquires must be true or false, got {acquires!r}")
                    break
        int_range(problems, config, "messages", 1, why="with no message nothing is ever delivered")
        int_range(problems, config, "max_credit", 1, why="a consumer with no credit never takes a message")
        int_range(problems, config, "initial_credit", 0)
        if not {"initial_credit", "max_credit"} & bad and isinstance(config.initial_credit, int) \
                and isinstance(config.max_credit, int) and config.initial_credit > config.max_credit >= 1:
            problems.append(f"initial_credit: must be at most max_credit ({config.max_credit}), got {config.initial_credit}")
        int_range(problems, config, "reasons", 0, len(REASONS), why=f"the suspension reasons are {', '.join(REASONS)}")
        int_range(problems, config, "env_budget", -1, why="-1 is unbounded")
        groups = getattr(config, "groups", ())
        if groups and "groups" not in bad:
            if any(isinstance(g, bool) or not isinstance(g, int) or g < -1 for g in groups):
                problems.append(f"groups: every entry is a message's group (0, 1, ...) or -1 (none), got {list(groups)}")
            elif "messages" not in bad and len(groups) != config.messages:
                problems.append(f"groups: must name the group of each of the {config.messages} messages, got {len(groups)}")
        return problems

    @classmethod
    def describe_configs(cls):
        return descriptions()

    def __init__(self, config: ConsumerListsConfig | None = None):
        super().__init__(config)
        cfg = self.config
        if isinstance(cfg.pull_rule, str) and not isinstance(cfg.pull_rule, PullRule):
            object.__setattr__(cfg, "pull_rule", PullRule(cfg.pull_rule))
        if isinstance(cfg.group_policy, str) and not isinstance(cfg.group_policy, GroupPolicy):
            object.__setattr__(cfg, "group_policy", GroupPolicy(cfg.group_policy))
        self.n = n = len(cfg.consumers)
        self.m = cfg.messages
        self.prio = tuple(int(p) for p, _ in cfg.consumers)
        self.acq = tuple(bool(a) for _, a in cfg.consumers)
        self.levels = tuple(sorted(set(self.prio), reverse=True))
        self.lvl = tuple(self.levels.index(p) for p in self.prio)
        self.MB = n * CF  # first message field
        self.LB = self.MB + 2 * self.m  # first list field
        self.L_ALL, self.L_NI, self.L_NA, self.L_NOT = self.LB, self.LB + 1, self.LB + 2, self.LB + 3
        self.IB = self.LB + 4  # first Interested tuple
        self.GOT = TAKE + self.m
        self.BUD = self.IB + len(self.levels)  # the environment's remaining budget
        # consumers of strictly higher priority, per consumer
        self.higher = tuple(tuple(h for h in range(n) if self.prio[h] > self.prio[c]) for c in range(n))
        # the other actors' fields (housekeeping, reject, groups) follow the budget (actors.py)
        self._setup_actors()
        #: the memoised successor function (fast.py), None when CONQ_CL_FAST=0
        self._fast = fast.fast_successors(self) if fast.enabled() else None
        self._packed = None

    # ------------------------------------------------------------------ state helpers
    def init_states(self):
        cfg = self.config
        s: list[Any] = []
        for c in range(self.n):
            desired = cfg.initial_credit > 0
            s += [ABSENT, IDLE, 0, int(desired), cfg.initial_credit, 0, 0]
        s += [UNARRIVED, 0] * self.m
        s += [0, 0, 0, 0] + [()] * len(self.levels)
        s.append(cfg.env_budget)
        s += self._actor_fields()
        if cfg.preadded:
            for c in range(self.n):
                self._add(s, c, [])
        return [tuple(s)]

    def node(self, s, c):
        return s[c * CF]

    def registered(self, s, c):
        return (s[self.L_ALL] >> c) & 1

    def _move(self, l, c, frm, to) -> bool:
        """``QueueConsumerNode.moveFromTo``: one guarded step under the node's monitor: leave the old
        list, enter the new one at its tail."""
        b = c * CF
        old = l[b]
        if old not in frm:
            return False
        bit = 1 << c
        if old == NOT_INTERESTED:
            l[self.L_NI] &= ~bit
        elif old == NON_ACQUIRING:
            l[self.L_NA] &= ~bit
        elif old == NOTIFIED:
            l[self.L_NOT] &= ~bit
        elif old == INTERESTED:
            k = self.IB + self.lvl[c]
            l[k] = tuple(x for x in l[k] if x != c)
        l[b] = to
        if to == NOT_INTERESTED:
            l[self.L_NI] |= bit
        elif to == NON_ACQUIRING:
            l[self.L_NA] |= bit
        elif to == NOTIFIED:
            l[self.L_NOT] |= bit
        elif to == INTERESTED:
            k = self.IB + self.lvl[c]
            l[k] = l[k] + (c,)
        return True

    def _next_for(self, l, c):
        """``getNextAvailableEntry``: the lowest available message ``c`` may take; browsers skip what
        they have already seen; a removed consumer has no queue context (None).  With the other
        actors: skips what ``c`` rejected (``hasInterest``) and what another consumer's message group
        holds (``mightAssign``)."""
        if not (l[self.L_ALL] >> c) & 1:
            return None
        mb = self.MB
        seen = l[c * CF + F_SEEN]
        if self.REJ is None and not self.G:
            for j in range(self.m):
                if l[mb + 2 * j] == AVAILABLE and not (seen >> j) & 1:
                    return j
            return None
        for j in range(self.m):
            if l[mb + 2 * j] == AVAILABLE and self._interest(l, c, j) and self._might_assign(l, c, j):
                return j
        return None

    def _any_available(self, l) -> bool:
        mb = self.MB
        return any(l[mb + 2 * j] == AVAILABLE for j in range(self.m))

    def _no_higher(self, l, c, j=None) -> bool:
        """``noHigherPriorityWithCredit(c, entry j)``: no registered, acquiring consumer of higher
        priority whose target wants work, that is interested in the entry (has not rejected it), has
        an available entry."""
        if not self.config.priority_check:
            return True
        for h in self.higher[c]:
            if (l[self.L_ALL] >> h) & 1 and self.acq[h] and l[h * CF + F_FLAG] and self._next_for(l, h) is not None:
                if j is None or self.REJ is None or self._interest(l, h, j):
                    return False
        return True

    def _notify(self, l, c, out) -> bool:
        """``AbstractQueue.notifyConsumer``: consumerHasAvailableMessages, then setNotified(true) (a
        CAS INTERESTED -> NOTIFIED for acquiring consumers), then notifyWork (sets the scheduled bit)."""
        if self.acq[c]:
            j = self._next_for(l, c)
            if j is None or not self._no_higher(l, c, j):
                return False
            if not self._move(l, c, (INTERESTED,), NOTIFIED):
                return False
        l[c * CF + F_WAKE] = 1
        out.append(c)
        return True

    def _interested_order(self, l):
        for k in range(len(self.levels)):
            yield from l[self.IB + k]

    def _notify_consumers(self, l, j, out):
        """``AbstractQueue.notifyConsumers(entry)``: every browser interested in the entry, then the
        Interested lists in priority order while the entry is available, stopping at the first
        consumer notified or when a higher-priority consumer would take the entry."""
        for c in _bits(l[self.L_NA]):
            if not (l[c * CF + F_SEEN] >> j) & 1:
                self._notify(l, c, out)
        for c in list(self._interested_order(l)):
            if l[self.MB + 2 * j] != AVAILABLE:
                break
            if self.REJ is not None and not self._interest(l, c, j):
                continue  # consumer.hasInterest(entry): it rejected this entry
            if self._notify(l, c, out):
                if self.config.notify_one:
                    break
            elif not self._no_higher(l, c, j):
                break

    def _notify_others(self, l, excluded, out):
        """``AbstractQueue.notifyOtherConsumers``: while messages are available, notify one other
        interested consumer."""
        for c in list(self._interested_order(l)):
            if not self._any_available(l):
                break
            if c != excluded and self._notify(l, c, out):
                break

    def _desired(self, l, c) -> bool:
        b = c * CF
        return l[b + F_SUSP] == 0 and l[b + F_CREDIT] > 0

    def _add(self, l, c, out):
        """``addConsumer`` (config thread): into All, then REMOVED -> INTERESTED / NON_ACQUIRING if
        the target wants work, else NOT_INTERESTED; a consumer that becomes interested is notified
        (seed 000: notifyWork scenario "Consumer becomes Interested")."""
        l[self.L_ALL] |= 1 << c
        if l[c * CF + F_FLAG]:
            self._move(l, c, (ABSENT,), INTERESTED if self.acq[c] else NON_ACQUIRING)
            self._notify(l, c, out)
        else:
            self._move(l, c, (ABSENT,), NOT_INTERESTED)

    def _queue_set_desired(self, l, c, desired, out):
        """``AbstractQueue.setNotifyWorkDesired``: setInterest, then notify the consumer itself
        (desired) or one Interested consumer whose priority is not below the highest notified one
        (not desired: "a high priority consumer becomes uninterested")."""
        if desired:
            moved = self._move(l, c, (NOT_INTERESTED,), INTERESTED if self.acq[c] else NON_ACQUIRING)
            if moved:
                self._notify(l, c, out)
        else:
            moved = self._move(l, c, (INTERESTED, NOTIFIED) if self.acq[c] else (NON_ACQUIRING,), NOT_INTERESTED)
            if moved:
                notified = l[self.L_NOT]
                highest = max((self.prio[x] for x in _bits(notified)), default=None)
                for x in list(self._interested_order(l)):
                    if (highest is not None and self.prio[x] < highest) or self._notify(l, x, out):
                        break

    # ------------------------------------------------------------------ actions
    def actions(self, s):
        return [a for a, _, _ in self.successors(s)]

    def step(self, s, action):
        return [(o, t) for a, o, t in self.successors(s) if a == action]

    def fair(self, action, observation):
        name = action[0]
        if name in _IO_ACTIONS:
            return ("io", action[1])
        if name == "notify_consumers":
            return ("publisher", action[1])
        if name == "delayed_acquisition":
            return ("housekeeping", action[1])  # a delete waiting for the entry completes
        if name == "reset_sub_pointers_for_groups":
            return ("group-reset",)  # owed by the thread that freed a group
        # the environment may never add, remove, credit, suspend, enqueue, release, reject, delete
        return None

    def successors(self, s):
        """The labelled successors of ``s`` in the fixed order of :meth:`spec_successors`; the
        memoised fast path (fast.py) unless ``CONQ_CL_FAST=0`` (issue 18)."""
        if self._fast is not None:
            return self._fast(s)
        return self.spec_successors(s)

    #: layouts wider than this are explored as tuples: packing a state of thousands of fields
    #: (``--set messages=1000000``) costs more than the memo saves, and a time bound must be able to
    #: stop such a run at once
    PACK_MAX_FIELDS = 512

    def packed(self):
        """The packed view the explorer runs on (packed.py; model/engines/packing.py), built once; None
        when ``CONQ_CL_PACKED=0`` or the layout is wider than :attr:`PACK_MAX_FIELDS`."""
        if os.environ.get("CONQ_CL_PACKED", "1") == "0" or self.END > self.PACK_MAX_FIELDS:
            return None
        if self._packed is None:
            from .packed import packed_view

            self._packed = packed_view(self)
        return self._packed

    def spec_successors(self, s):
        """The readable successor function, the spec of the fast path: the IO threads' steps, the
        publishing threads', the other actors', then the environment's (per consumer, then per
        message), and ``idle`` when nothing the system must do is enabled."""
        out: list = []
        fair_enabled = False
        for c in range(self.n):
            fair_enabled = self._io_steps(s, c, out) or fair_enabled
        fair_enabled = self._publisher_steps(s, out) or fair_enabled
        # --- the other actors: housekeeping / management deletes, reject, group resets ----
        if self.END > self.BUD + 1:
            fair_enabled = self._actor_successors(s, out) or fair_enabled
        for c in range(self.n):
            self._environment_steps(s, c, out)
        self._message_steps(s, out)
        if not fair_enabled:
            # Stuttering: nothing the system must do is enabled, so a run may stay here forever
            # (the environment is never obliged to act).  Without this step a state whose only
            # successors are environment steps would count as "something must happen".
            out.append((("idle",), None, s))
        return out

    def _io_steps(self, s, c, out) -> bool:
        """Consumer ``c``'s IO thread: the step its program counter names (a desire update, a pull
        started, or the next part of one); True when it has a step (it is then owed)."""
        b = c * CF
        pc = s[b + F_PC]
        if pc == IDLE:
            reg = (s[self.L_ALL] >> c) & 1
            stepped = False
            if reg and s[b + F_FLAG] != self._desired(s, c):
                stepped = True
                out.append(self._set_desired_first(s, c))
            if reg and s[b + F_WAKE]:
                stepped = True
                out.append(self._pull_start(s, c))
            return stepped
        if pc == START:
            if s[b + F_FLAG] != self._desired(s, c):
                out.append(self._set_desired_first(s, c))
            out.append(self._pull_start(s, c))
        elif pc == DES:
            out.append(self._set_desired_second(s, c))
        elif pc == FIND:
            out.append(self._pull_find(s, c))
        elif pc == NONE:
            out.append(self._pull_none(s, c))
        elif pc < self.GOT:
            out.append(self._pull_take(s, c, pc - TAKE))
        else:
            out.append(self._pull_done(s, c, pc - self.GOT))
        return True

    def _publisher_steps(self, s, out) -> bool:
        """Publishing threads: ``notifyConsumers`` owed for an entry that became available; True when
        one is owed."""
        owed = False
        for j in range(self.m):
            owed = self._publisher_step(s, j, out) or owed
        return owed

    def _publisher_step(self, s, j, out) -> bool:
        """The thread that made entry ``j`` available runs ``notifyConsumers`` for it (when it still
        owes it); True when it does."""
        MB = self.MB
        if not s[MB + 2 * j + 1]:
            return False
        l = list(s)
        l[MB + 2 * j + 1] = 0
        notified: list[int] = []
        if l[MB + 2 * j] == AVAILABLE:
            self._notify_consumers(l, j, notified)
        out.append((("notify_consumers", j), tuple(notified), tuple(l)))
        return True

    def _environment_steps(self, s, c, out) -> None:
        """The environment's steps on consumer ``c``: add it, or (within the budget) remove it, grant
        credit, suspend or resume it."""
        cfg = self.config
        b = c * CF
        node = s[b]
        if node == ABSENT:
            l = list(s)
            notified: list[int] = []
            self._add(l, c, notified)
            out.append((("add_consumer", c), tuple(notified), tuple(l)))
            return
        bud = self.BUD
        budget = s[bud]
        if node == REMOVED or not budget:
            return
        if cfg.removal:
            a, o, t = self._remove(s, c)
            if budget > 0:
                t = t[:bud] + (budget - 1,) + t[bud + 1 :]
            out.append((a, o, t))
        if s[b + F_CREDIT] < cfg.max_credit:
            l = list(s)
            l[b + F_CREDIT] += 1
            l[bud] -= budget > 0
            # the credit manager tells the target its state changed (QueueConsumerImpl
            # externalStateChange -> target.notifyWork): the target will try to pull again
            l[b + F_WAKE] = 1
            out.append((("credit", c), None, tuple(l)))
        susp = s[b + F_SUSP]
        for r in range(cfg.reasons):
            l = list(s)
            l[b + F_SUSP] = susp ^ (1 << r)
            l[bud] -= budget > 0
            name = "resume" if (susp >> r) & 1 else "suspend"
            out.append(((name, c, REASONS[r]), None, tuple(l)))

    def _message_steps(self, s, out) -> None:
        """The environment's steps on the messages: enqueue (in id order), un-hold, release."""
        cfg = self.config
        MB = self.MB
        bud = self.BUD
        budget = s[bud]
        for j in range(self.m):
            st = s[MB + 2 * j]
            if st == UNARRIVED:
                if j == 0 or s[MB + 2 * (j - 1)] != UNARRIVED:
                    l = list(s)
                    l[MB + 2 * j] = AVAILABLE
                    l[MB + 2 * j + 1] = 1
                    out.append((("enqueue", j), None, tuple(l)))
                    if cfg.held:
                        l = list(s)
                        l[MB + 2 * j] = HELD
                        out.append((("enqueue_held", j), None, tuple(l)))
            elif st == HELD:
                l = list(s)
                l[MB + 2 * j] = AVAILABLE
                l[MB + 2 * j + 1] = 1
                out.append((("unhold", j), None, tuple(l)))
            elif st >= ACQ and cfg.release and budget and s[(st - ACQ) * CF + F_PC] != self.GOT + j:
                # a client releases (or its session, closing, releases) only what it was sent: the
                # acquisition between the acquire and the send belongs to the IO thread
                l = list(s)
                l[bud] -= budget > 0
                self._requeue(l, j)
                out.append((("release", j), st - ACQ, tuple(l)))

    # -- the IO thread's steps ----------------------------------------------------------
    def _set_desired_first(self, s, c):
        """The target's ``setNotifyWorkDesired(desired)``, first half (on the consumer's IO thread,
        after a reason changed): reference writes the flag, upstream tells the queue first."""
        l = list(s)
        b = c * CF
        desired = self._desired(s, c)
        l[b + F_PC] = DES
        notified: list[int] = []
        if self.config.flag_before_queue:
            l[b + F_FLAG] = int(desired)
            return (("target_flag", c, desired), None, tuple(l))
        self._queue_set_desired(l, c, desired, notified)
        return (("set_notify_work_desired", c, desired), tuple(notified), tuple(l))

    def _set_desired_second(self, s, c):
        l = list(s)
        b = c * CF
        l[b + F_PC] = IDLE
        notified: list[int] = []
        if self.config.flag_before_queue:
            desired = bool(s[b + F_FLAG])
            if (l[self.L_ALL] >> c) & 1:
                self._queue_set_desired(l, c, desired, notified)
            return (("set_notify_work_desired", c, desired), tuple(notified), tuple(l))
        desired = not s[b + F_FLAG]
        l[b + F_FLAG] = int(desired)
        return (("target_flag", c, desired), None, tuple(l))

    def _pull_start(self, s, c):
        """``deliverSingleMessage`` begins: setNotified(false) (NOTIFIED -> INTERESTED) *before*
        looking, which is what prevents a lost wake-up (REFERENCE.md section 1); a suspended target
        gets nothing."""
        l = list(s)
        b = c * CF
        if self.config.clear_wake_first:
            l[b + F_WAKE] = 0
        if self.config.unnotify_first:
            self._move(l, c, (NOTIFIED,), INTERESTED)
        if not s[b + F_FLAG]:
            # suspended: deliverSingleMessage returns null without a look
            l[b + F_PC] = IDLE
            if not self.config.clear_wake_first:
                l[b + F_WAKE] = 0
            return (("deliver_single_message", c), "suspended", tuple(l))
        l[b + F_PC] = FIND
        return (("deliver_single_message", c), None, tuple(l))

    def _pull_find(self, s, c):
        """attemptDelivery: getNextAvailableEntry, the priority check, allocateCredit (a read that
        decides; the acquire is the next step)."""
        l = list(s)
        b = c * CF
        j = self._next_for(l, c)
        blocked = j is not None and (self.acq[c] or self.config.priority_blocks_browsers) and not self._no_higher(l, c, j)
        if j is not None and not blocked and s[b + F_CREDIT] > 0:
            l[b + F_PC] = TAKE + j
            return (("find_next_available", c), j, tuple(l))
        l[b + F_PC] = NONE
        return (("find_next_available", c), None, tuple(l))

    def _pull_take(self, s, c, j):
        """The entry's acquire (a CAS: succeeds only if still available) with the credit taken; a
        browser only takes a reference and marks the entry seen.  With message groups the acquire
        is the group manager's ``acceptMessage`` (actors.py)."""
        l = list(s)
        b = c * CF
        st = s[self.MB + 2 * j]
        if self.acq[c] and self.G:
            ok = self._accept_message(l, c, j)
        elif self.acq[c]:
            ok = st == AVAILABLE or (not self.config.acquire_cas and st >= ACQ)
        else:
            # a browser takes a message reference, not the entry: it succeeds while the entry
            # exists, even if an acquiring consumer took it since the look (newMessageReference);
            # not once it was deleted (the housekeeping thread, actors.py)
            ok = st != DELETED
        if ok:
            if self.acq[c]:
                l[self.MB + 2 * j] = ACQ + c
            else:
                l[b + F_SEEN] |= 1 << j
            l[b + F_CREDIT] -= 1
            l[b + F_PC] = self.GOT + j
        else:
            l[b + F_PC] = NONE  # credit restored: it was never taken in the model
        return (("acquire", c, j), ok, tuple(l))

    def _pull_done(self, s, c, j):
        """A delivery: setNotified(true) (back to NOTIFIED) and the
        target goes on pulling (current rule) or stops (seed 003 earlier rule).  A consumer closed
        in the middle of the delivery cannot send: the entry is released again."""
        l = list(s)
        b = c * CF
        if not (s[self.L_ALL] >> c) & 1:
            if self.acq[c] and s[self.MB + 2 * j] == ACQ + c:
                # QueueEntryImpl.release(consumer): only if still acquired by c (the removal may have
                # released it already, and another consumer may hold it now)
                self._requeue(l, j)
            l[b + F_PC] = IDLE
            l[b + F_WAKE] = 0
            return (("deliver", c), None, tuple(l))
        if self.acq[c]:
            # upstream AbstractQueue.deliverSingleMessage: setNotified(consumer, true) after every
            # delivery; seed 000 "The Notified list": the consumer remains Notified and keeps
            # calling deliverSingleMessage until it cannot deliver (conformance found the earlier
            # "only when more work is there" condition here to differ from both)
            self._move(l, c, (INTERESTED,), NOTIFIED)
        if self.config.pull_rule is PullRule.UNTIL_EMPTY:
            l[b + F_PC] = START
        else:
            l[b + F_PC] = IDLE
            if not self.config.clear_wake_first:
                l[b + F_WAKE] = 0
        return (("deliver", c), j, tuple(l))

    def _pull_none(self, s, c):
        """Nothing delivered: (look-then-unnotify variant: un-notify now), notify one *other*
        interested consumer if messages are available, then noMessagesAvailable."""
        l = list(s)
        b = c * CF
        if not self.config.unnotify_first:
            self._move(l, c, (NOTIFIED,), INTERESTED)
        notified: list[int] = []
        if self.acq[c] and self._any_available(l):
            self._notify_others(l, c, notified)
        l[b + F_PC] = IDLE
        if not self.config.clear_wake_first:
            l[b + F_WAKE] = 0
        return (("no_message", c), tuple(notified), tuple(l))

    def _remove(self, s, c):
        """``removeConsumer`` (config thread): leave All, any state -> REMOVED, its acquired messages
        are released (they owe a notification); with message groups, ``resetSubPointersForGroups``.
        Reference: one other interested consumer is notified while messages are available
        (``notifyOtherConsumers``), whatever the removed consumer's state (before issue 16 only a
        NOTIFIED consumer's wake-up was handed over); upstream notifies nobody."""
        l = list(s)
        b = c * CF
        was_notified = s[b] == NOTIFIED
        l[self.L_ALL] &= ~(1 << c)
        self._move(l, c, (NOT_INTERESTED, INTERESTED, NOTIFIED, NON_ACQUIRING), REMOVED)
        mine = [j for j in range(self.m) if l[self.MB + 2 * j] == ACQ + c]
        for j in mine:
            l[self.MB + 2 * j] = AVAILABLE
            l[self.MB + 2 * j + 1] = 1
        for j in mine:
            self._group_left(l, j, True)  # the session's release of each: Group.subtract (actors.py)
        self._unregister_groups(l, c)  # message groups: resetSubPointersForGroups(consumer)
        if l[b + F_PC] in (IDLE, START):
            l[b + F_PC] = IDLE
        l[b + F_WAKE] = 0
        notified: list[int] = []
        hand = was_notified or not self.config.handover_only_if_notified
        if hand and self.config.remove_hands_over and self._any_available(l):
            self._notify_others(l, c, notified)
        return (("remove_consumer", c), tuple(notified), tuple(l))

    # ------------------------------------------------------------------ symmetry (issue 18)
    def _symmetry_perms(self) -> tuple:
        """Every renaming of consumers that swaps only interchangeable ones: consumers of the same
        priority and the same kind (acquiring or browser) -- every other per-consumer input (credit,
        budget) is global, and no step breaks a tie by consumer index in a way that changes the
        state (the Interested lists are kept in arrival order, notification order is by list).
        Each group is tiny (at most a few consumers), so the canonical form is the minimum over
        the product of the groups' permutations; identity only when no two consumers match."""
        perms = getattr(self, "_perms", None)
        if perms is None:
            import itertools

            groups: dict = {}
            for c in range(self.n):
                groups.setdefault((self.prio[c], self.acq[c]), []).append(c)
            choices = [[(g, q) for q in itertools.permutations(g)] for g in groups.values()]
            perms = []
            for combo in itertools.product(*choices):
                p = list(range(self.n))
                for g, q in combo:
                    for old, new in zip(g, q):
                        p[old] = new
                if p != list(range(self.n)):
                    perms.append(tuple(p))
            perms = self._perms = tuple(perms)
        return perms

    def permute(self, s, p) -> tuple:
        """The state ``s`` with consumer ``c`` renamed ``p[c]`` in every field that names one: the
        per-consumer blocks, an acquired message's holder (ACQ + c), the node-list bit masks, the
        Interested lists, each message's rejecters (actors.py) and each group's owner."""
        n = self.n
        l = list(s)
        for c in range(n):
            nb = p[c] * CF
            l[nb:nb + CF] = s[c * CF:c * CF + CF]
        mb = self.MB
        for j in range(self.m):
            st = s[mb + 2 * j]
            if st >= ACQ:
                l[mb + 2 * j] = ACQ + p[st - ACQ]

        def bits(mask):
            out = 0
            for c in range(n):
                if (mask >> c) & 1:
                    out |= 1 << p[c]
            return out

        for k in (self.L_ALL, self.L_NI, self.L_NA, self.L_NOT):
            l[k] = bits(s[k])
        for k in range(self.IB, self.BUD):
            l[k] = tuple(p[c] for c in s[k])
        if self.REJ is not None:
            for j in range(self.m):
                l[self.REJ + j] = bits(s[self.REJ + j])
        if self.GOWN is not None:
            for g in range(self.G):
                o = s[self.GOWN + g]
                l[self.GOWN + g] = p[o - 1] + 1 if o else 0
        return tuple(l)

    #: "interested-rotates" (properties.py) reads registration order as index order ("Interested in
    #: the reverse of their registration order"): renaming two consumers of one priority turns a
    #: rotated list into a sorted one, so a representative alone could miss it.  With symmetry the
    #: engines evaluate it on the representative's whole orbit (kernel.Model.orbit_properties).
    orbit_properties = frozenset({"interested-rotates"})

    def orbit(self, s):
        return list(dict.fromkeys([s] + [self.permute(s, p) for p in self._symmetry_perms()]))

    def canonical(self, s):
        perms = self._symmetry_perms()
        if not perms:
            return s
        best = s
        for p in perms:
            t = self.permute(s, p)
            if t < best:
                best = t
        return best

    # ------------------------------------------------------------------ properties
    def properties(self):
        return properties(self)

    # ------------------------------------------------------------------ views
    def view(self, s):
        cons = []
        for c in range(self.n):
            b = c * CF
            pc = s[b + F_PC]
            if pc >= self.GOT:
                pcs = f"got m{pc - self.GOT}"
            elif pc >= TAKE:
                pcs = f"take m{pc - TAKE}"
            else:
                pcs = ("idle", "desire-half-done", "find", "none-found", "pull-again")[pc]
            d = {
                "id": c,
                "prio": self.prio[c],
                "acquires": self.acq[c],
                "node": NODE_NAMES[s[b]],
                "io": pcs,
                "scheduled": bool(s[b + F_WAKE]),
                "wants_work": bool(s[b + F_FLAG]),
                "credit": s[b + F_CREDIT],
                "suspended": [REASONS[r] for r in range(len(REASONS)) if (s[b + F_SUSP] >> r) & 1],
            }
            if not self.acq[c]:
                d["seen"] = [j for j in range(self.m) if (s[b + F_SEEN] >> j) & 1]
            cons.append(d)
        msgs = []
        for j in range(self.m):
            st = s[self.MB + 2 * j]
            if st == DELETED:
                text = "deleted"
            else:
                text = ("unarrived", "available", "held")[st] if st < ACQ else f"acquired by c{st - ACQ}"
            if s[self.MB + 2 * j + 1]:
                text += " (notify owed)"
            msgs.append(text)
        return {
            "environment_budget": s[self.BUD],
            "consumers": cons,
            "messages": msgs,
            "lists": {
                "all": list(_bits(s[self.L_ALL])),
                "not_interested": list(_bits(s[self.L_NI])),
                "non_acquiring": list(_bits(s[self.L_NA])),
                "notified": list(_bits(s[self.L_NOT])),
                "interested": {str(p): list(s[self.IB + k]) for k, p in enumerate(self.levels)},
            },
            **self._actor_view(s),  # empty unless a new actor is on (actors.py)
        }

    def actors(self, action, observation):
        name = action[0]
        if name in ("notify_consumers",):
            return (f"publisher(m{action[1]})", "queue")
        if name in ("enqueue", "enqueue_held", "unhold", "release"):
            return ("producer/housekeeping", "queue")
        if name == "idle":
            return ("environment", "environment")
        if name in ("suspend", "resume", "credit"):
            return ("client", f"c{action[1]}")
        if name in ("add_consumer", "remove_consumer"):
            return ("config thread", "queue")
        if name in ("delete_entry", "delayed_acquisition"):
            return ("housekeeping/management", "queue")
        if name == "reset_sub_pointers_for_groups":
            return ("group manager", "queue")
        return (f"c{action[1]} IO thread", "queue")


_IO_ACTIONS = frozenset(
    {"target_flag", "set_notify_work_desired", "deliver_single_message", "find_next_available", "acquire", "deliver", "no_message"}
)
