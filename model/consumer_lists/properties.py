"""The named claims of the consumer-lists model (seeds 000/002, REFERENCE.md section 1).

Each predicate reads the flat state through the model's layout (see consumer_lists.py) and is written
independently of the step functions: they say what must hold, not how the model does it.
"""

from __future__ import annotations

from .state import (
    ABSENT,
    ACQ,
    ALLOWED_ACQ,
    ALLOWED_BROWSER,
    AVAILABLE,
    CF,
    DELETED,
    DES,
    F_CREDIT,
    F_FLAG,
    F_PC,
    F_SEEN,
    F_SUSP,
    F_WAKE,
    FIND,
    GroupPolicy,
    HELD,
    PullRule,
    REASONS,
    IDLE,
    INTERESTED,
    NON_ACQUIRING,
    NONE,
    NOT_INTERESTED,
    NOTIFIED,
    REMOVED,
    START,
    TAKE,
    UNARRIVED,
    _bits,
)
from conq.model.kernel import always, always_step, leads_to, sometimes

REASONS_INDEX = {r: i for i, r in enumerate(REASONS)}
NOTIFYING = frozenset({"notify_consumers", "no_message", "remove_consumer", "add_consumer", "set_notify_work_desired",
                       "delete_entry", "delayed_acquisition", "reset_sub_pointers_for_groups"})


def properties(m):
    n, M, MB = m.n, m.m, m.MB
    acq, prio, lvl = m.acq, m.prio, m.lvl
    L_ALL, L_NI, L_NA, L_NOT, IB = m.L_ALL, m.L_NI, m.L_NA, m.L_NOT, m.IB
    nlev = len(m.levels)

    cfg = m.config
    REJ, grp = m.REJ, m.grp
    grp_on = bool(cfg.groups)
    shared = bool(cfg.groups) and cfg.group_policy is GroupPolicy.SHARED

    def available(s):
        return [j for j in range(M) if s[MB + 2 * j] == AVAILABLE]

    def reg(s, c):
        return (s[L_ALL] >> c) & 1

    def rejected(s, c, j):
        return REJ is not None and (s[REJ + j] >> c) & 1

    def holders(s, g):
        """The consumers holding (having acquired) an entry of group g."""
        return {s[MB + 2 * j] - ACQ for j in range(M) if grp[j] == g and s[MB + 2 * j] >= ACQ}

    def group_blocks(s, c, j):
        """What the group policies promise, read off the entries and the assignments, not the
        managers' bookkeeping: shared, a group belongs to whoever holds one of its entries; standard
        (assigned), to the registered consumer it was assigned to."""
        g = grp[j]
        if g < 0 or not acq[c]:
            return False
        if shared:
            return bool(holders(s, g) - {c})
        own = s[m.GOWN + g] - 1
        return own >= 0 and own != c and bool(reg(s, own))

    def can_see(s, c, j):
        """c may take entry j (apart from availability, credit and priority): a browser has not seen it,
        c has not rejected it, and no message group keeps it from c."""
        if not acq[c]:
            return not (s[c * CF + F_SEEN] >> j) & 1
        return not rejected(s, c, j) and not group_blocks(s, c, j)

    def willing(s, c):
        """The consumer wants work and could take an available message now."""
        b = c * CF
        return (
            reg(s, c)
            and s[b + F_FLAG]
            and s[b + F_CREDIT] > 0
            and s[b] in (INTERESTED, NOTIFIED, NON_ACQUIRING)
            and any(s[MB + 2 * j] == AVAILABLE and can_see(s, c, j) for j in range(M))
        )

    def some_willing(s):
        return any(willing(s, c) for c in range(n))

    def pulling(s, c):
        pc = s[c * CF + F_PC]
        return pc not in (IDLE,) and pc != 1  # 1 = DES: a desire update, not a pull

    # ---------------------------------------------------------------- lists
    def lists_match(s):
        seen_int = [0] * n
        for k in range(nlev):
            for c in s[IB + k]:
                seen_int[c] += 1
                if lvl[c] != k:
                    return False
        for c in range(n):
            node = s[c * CF]
            bit = 1 << c
            registered = node not in (ABSENT, REMOVED)
            if bool(s[L_ALL] & bit) != registered:
                return False
            want = (
                bool(s[L_NI] & bit) == (node == NOT_INTERESTED)
                and bool(s[L_NA] & bit) == (node == NON_ACQUIRING)
                and bool(s[L_NOT] & bit) == (node == NOTIFIED)
                and seen_int[c] == (1 if node == INTERESTED else 0)
            )
            if not want:
                return False
        return True

    def lists_witness(s):
        nodes = [s[c * CF] for c in range(n)]
        return NOTIFIED in nodes and (INTERESTED in nodes or NOT_INTERESTED in nodes)

    def kinds_ok(s):
        for c in range(n):
            node = s[c * CF]
            if acq[c] and node == NON_ACQUIRING:
                return False
            if not acq[c] and node in (INTERESTED, NOTIFIED):
                return False
        return True

    has_browser = not all(acq)

    def kinds_witness(s):
        if not has_browser:
            return any(acq[c] and s[c * CF] in (INTERESTED, NOTIFIED) for c in range(n))
        return any(not acq[c] and s[c * CF] == NON_ACQUIRING for c in range(n)) and any(
            acq[c] and s[c * CF] in (INTERESTED, NOTIFIED) for c in range(n)
        )

    def moves_ok(s, a, o, t):
        for c in range(n):
            x, y = s[c * CF], t[c * CF]
            if x != y and (x, y) not in (ALLOWED_ACQ if acq[c] else ALLOWED_BROWSER):
                return False
        return True

    def moves_witness(s, a, o, t):
        return any(s[c * CF] == NOTIFIED and t[c * CF] == INTERESTED for c in range(n))

    # ---------------------------------------------------------------- acquisition
    def acquired_once(s, a, o, t):
        if a[0] != "acquire" or o is not True or not acq[a[1]]:
            return True
        return s[MB + 2 * a[2]] == AVAILABLE

    def acquired_witness(s, a, o, t):
        return a[0] == "acquire" and o is True and acq[a[1]]

    # ---------------------------------------------------------------- credit
    # seed 000 "Interfaces": credit is one of the reasons a consumer tells the queue it wants no work;
    # REFERENCE.md section 1: "delivery allocates credit and restores it if acquisition fails; with no
    # credit the consumer waits" (AbstractConsumerTarget / QueueConsumerImpl, the credit manager)
    max_credit = cfg.max_credit

    def credit_in_range(s):
        return all(0 <= s[c * CF + F_CREDIT] <= max_credit for c in range(n))

    def holds_something(s, c):
        if acq[c]:
            return any(s[MB + 2 * j] == ACQ + c for j in range(M))
        return bool(s[c * CF + F_SEEN])

    def credit_spent(s):
        return any(s[c * CF + F_CREDIT] == 0 and holds_something(s, c) for c in range(n))

    def taken_with_credit(s, a, o, t):
        if a[0] != "acquire":
            return True
        b = a[1] * CF
        if o is not True:
            return t[b + F_CREDIT] == s[b + F_CREDIT]  # a failed acquire takes (keeps) no credit
        return s[b + F_CREDIT] > 0 and t[b + F_CREDIT] == s[b + F_CREDIT] - 1

    def last_credit_taken(s, a, o, t):
        return a[0] == "acquire" and o is True and s[a[1] * CF + F_CREDIT] == 1

    # ---------------------------------------------------------------- notifications
    def arrival_ok(s, a, o, t):
        if a[0] != "notify_consumers":
            return True
        j = a[1]
        if sum(1 for c in o if acq[c]) > 1:
            return False
        if s[MB + 2 * j] != AVAILABLE:
            return True
        for c in _bits(s[L_NA]):
            if can_see(s, c, j) and c not in o:
                return False
        return True

    def arrival_witness(s, a, o, t):
        return (
            a[0] == "notify_consumers"
            and any(acq[c] for c in o)
            and (not has_browser or any(not acq[c] for c in o))
        )

    def notified_after_move(s, a, o, t):
        told = set(o) if a[0] in NOTIFYING and isinstance(o, tuple) else set()
        for c in range(n):
            if not acq[c]:
                continue
            if c in told and not (t[c * CF] == NOTIFIED and s[c * CF] != NOTIFIED):
                return False
            if s[c * CF + F_WAKE] != t[c * CF + F_WAKE] and t[c * CF + F_WAKE] and c not in told and a[0] != "credit":
                return False
        return True

    def notified_witness(s, a, o, t):
        return a[0] in NOTIFYING and isinstance(o, tuple) and any(acq[c] for c in o)

    # ---------------------------------------------------------------- priority
    def priority_ok(s, a, o, t):
        if a[0] != "find_next_available" or o is None or not acq[a[1]]:
            return True
        c = a[1]
        if not available(s):
            return True
        for h in range(n):
            if prio[h] > prio[c] and acq[h] and reg(s, h) and s[h * CF + F_FLAG]:
                # ... and, with rejects or groups, h is interested in the entry picked and could take one
                if REJ is None and not grp_on:
                    return False
                if not rejected(s, h, o) and any(can_see(s, h, k) for k in available(s)):
                    return False
        return True

    levels_of_acquirers = len(set(prio[c] for c in range(n) if acq[c]))

    def priority_witness(s, a, o, t):
        if a[0] != "find_next_available" or o is None or not acq[a[1]]:
            return False
        c = a[1]
        # with one priority level there is nothing to hold back: any pick exercises the check
        return levels_of_acquirers < 2 or any(prio[h] > prio[c] and acq[h] and reg(s, h) for h in range(n))

    # ---------------------------------------------------------------- pulling
    def keeps_pulling(s, a, o, t):
        if a[0] != "deliver" or o is None:
            return True
        c = a[1]
        b = c * CF
        if t[b + F_PC] != START:
            return False
        if acq[c] and s[b] == INTERESTED:
            more = any(t[MB + 2 * j] == AVAILABLE and can_see(t, c, j) for j in range(M))
            blocked = any(
                prio[h] > prio[c] and acq[h] and reg(t, h) and t[h * CF + F_FLAG] for h in range(n)
            ) and m.config.priority_check
            if more and not blocked and t[b] != NOTIFIED:
                return False
        return True

    def keeps_witness(s, a, o, t):
        c = a[1] if a[0] == "deliver" and o is not None else None
        return c is not None and acq[c] and t[c * CF] == NOTIFIED

    def back_of_interested(s, a, o, t):
        for c in range(n):
            if s[c * CF] == NOTIFIED and t[c * CF] == INTERESTED:
                if t[IB + lvl[c]][-1:] != (c,):
                    return False
        return True

    crowded = any(sum(1 for c in range(n) if acq[c] and lvl[c] == k) > 1 for k in range(nlev))

    def back_witness(s, a, o, t):
        return any(
            s[c * CF] == NOTIFIED and t[c * CF] == INTERESTED and (len(t[IB + lvl[c]]) > 1 or not crowded)
            for c in range(n)
        )

    # ---------------------------------------------------------------- liveness
    def idle_notified(s):
        return any(acq[c] and s[c * CF] == NOTIFIED and not pulling(s, c) for c in range(n))

    def handover_trigger(s):
        for c in range(n):
            if not (acq[c] and willing(s, c)):
                continue
            hs = [h for h in range(n) if prio[h] > prio[c] and acq[h] and reg(s, h)]
            if hs and not any(s[h * CF + F_FLAG] for h in hs):
                return True
        return False

    def acquirer_willing(s):
        return any(acq[c] and willing(s, c) for c in range(n))

    fairness = (
        "weak fairness per IO thread (a consumer whose IO thread has a step to take eventually takes "
        "one) and per publishing thread (an owed notifyConsumers eventually runs); the environment "
        "(add/remove, credit, suspend/resume, enqueue, release, unhold) is never obliged to act"
    )

    props = [
        always(
            "lists-match-states",
            "every consumer is in exactly the list its node state names (Interested and Notified of its "
            "own priority), and in All iff it is registered",
            lists_match,
            witness=lists_witness,
        ),
        always(
            "browsers-and-acquirers-keep-their-lists",
            "a browser is never Interested or Notified; an acquiring consumer is never NonAcquiring",
            kinds_ok,
            witness=kinds_witness,
        ),
        always_step(
            "only-allowed-moves",
            "every change of a consumer's node state is a move of the transition table "
            "(REFERENCE.md section 1); REMOVED is terminal",
            moves_ok,
            witness=moves_witness,
        ),
        always_step(
            "acquired-at-most-once",
            "a message is acquired only while it is available, so by at most one consumer at a time",
            acquired_once,
            witness=acquired_witness,
            actions=("acquire",),
        ),
        always(
            "credit-never-negative",
            "a consumer's credit is never negative and never above what the client may grant (max_credit): "
            "delivery spends what was granted, nothing more",
            credit_in_range,
            witness=credit_spent,
        ),
        always_step(
            "taken-only-with-credit",
            "a consumer takes a message (acquires it, or a browser takes a reference) only while it has credit, and "
            "the take spends exactly one; a failed acquire spends none",
            taken_with_credit,
            witness=last_credit_taken,
            actions=("acquire",),
        ),
        always_step(
            "arrival-notifies-one-acquirer-and-every-browser",
            "a message becoming available notifies at most one acquiring consumer (no spurious "
            "wake-ups) and every interested browser that has not seen it",
            arrival_ok,
            witness=arrival_witness,
            actions=("notify_consumers",),
        ),
        always_step(
            "notified-only-after-move",
            "an acquiring consumer is told of work (notifyWork, its connection scheduled) only after a "
            "successful Interested -> Notified move in the same step",
            notified_after_move,
            witness=notified_witness,
        ),
        always_step(
            "priority-respected",
            "a consumer never picks a message while a registered acquiring consumer of higher priority "
            "wants work and could take one",
            priority_ok,
            witness=priority_witness,
            actions=("find_next_available",),
        ),
        always_step(
            "keeps-pulling-while-messages",
            "after a delivery the consumer pulls again, and stays Notified while more work it may take "
            "is available",
            keeps_pulling,
            witness=keeps_witness,
            actions=("deliver",),
        ),
        always_step(
            "back-of-interested",
            "a consumer leaving Notified for Interested goes to the back of its priority's Interested list",
            back_of_interested,
            witness=back_witness,
        ),
        sometimes(
            "message-acquired",
            "a message is acquired by a consumer",
            lambda s: any(s[MB + 2 * j] >= ACQ for j in range(M)),
        ),
        sometimes(
            "notified-pull-finds-nothing",
            "an acquiring consumer's pull finds nothing (the seed's admitted imperfection)",
            lambda s: any(acq[c] and s[c * CF + F_PC] == NONE and reg(s, c) for c in range(n)),
        ),
        leads_to(
            "no-lost-wakeup",
            "an available message that some registered consumer wanting work (with credit, Interested, "
            "Notified or NonAcquiring) could take is eventually taken, or nobody wants it any more",
            some_willing,
            lambda s: not some_willing(s),
            fairness=fairness,
        ),
        leads_to(
            "notified-consumer-pulls",
            "a Notified consumer eventually pulls or leaves Notified",
            idle_notified,
            lambda s: not idle_notified(s),
            fairness=fairness,
        ),
    ]
    if levels_of_acquirers > 1:
        props.append(leads_to(
            "lower-priority-takes-over",
            "when every higher-priority consumer has stopped wanting work, a lower-priority consumer "
            "that wants work gets the remaining messages",
            handover_trigger,
            lambda s: not acquirer_willing(s),
            fairness=fairness,
        ))
    if any(not a for a in acq):
        props.append(
            sometimes(
                "browser-sees-message",
                "a browser is delivered a message without acquiring it",
                lambda s: any(not acq[c] and s[c * CF + F_SEEN] for c in range(n)),
            )
        )
    if len(set(prio[c] for c in range(n) if acq[c])) > 1:
        props.append(
            sometimes(
                "lower-priority-served",
                "a lower-priority consumer acquires a message while a higher-priority one is registered",
                lambda s: any(
                    s[MB + 2 * j] >= ACQ
                    and any(prio[h] > prio[s[MB + 2 * j] - ACQ] and acq[h] and reg(s, h) for h in range(n))
                    for j in range(M)
                ),
            )
        )
    if any(sum(1 for c in range(n) if acq[c] and lvl[c] == k) > 1 for k in range(nlev)):
        props.append(
            sometimes(
                "interested-rotates",
                "two consumers of one priority are Interested in the reverse of their registration order",
                lambda s: any(
                    len(s[IB + k]) > 1 and list(s[IB + k]) != sorted(s[IB + k]) for k in range(nlev)
                ),
            )
        )
    if m.config.held:
        props.append(
            sometimes(
                "held-message-waits",
                "a message is held while a consumer wants work",
                lambda s: any(s[MB + 2 * j] == HELD for j in range(M)) and any(
                    s[c * CF + F_FLAG] and reg(s, c) for c in range(n)
                ),
            )
        )
    props += _other_actor_properties(m, reg, holders, rejected, group_blocks)
    props += _rule_properties(m, reg, rejected, can_see, holders)
    return props


def _other_actor_properties(m, reg, holders, rejected, group_blocks):
    """The claims the housekeeping thread, reject and message groups make necessary (issue 16), each
    with a ``sometimes`` witness of the situation it speaks of."""
    cfg = m.config
    n, M, MB, acq = m.n, m.m, m.MB, m.acq
    props = []
    if cfg.expiry:
        DP = m.DP

        def never_delivered(s, a, o, t):
            if a[0] == "acquire":
                # a deleted entry is never acquired, nor referenced by a browser (newMessageReference)
                return o is not True or s[MB + 2 * a[2]] != DELETED
            if a[0] == "deliver" and o is not None and acq[a[1]]:
                return s[MB + 2 * o] == ACQ + a[1]
            return True

        def delete_waited(s, a, o, t):
            return a[0] == "deliver" and o is not None and acq[a[1]] and bool((s[DP] >> o) & 1)

        props += [
            always_step(
                "deleted-never-delivered",
                "a deleted (expired) entry is never acquired, and an entry is sent to an acquiring consumer "
                "only while that consumer holds it: a delete that meets an unsent acquisition waits for the send",
                never_delivered,
                witness=delete_waited,
                actions=("acquire", "deliver"),
            ),
            sometimes(
                "delete-wins-the-race",
                "the housekeeping thread deletes an entry a consumer has found and is about to acquire",
                lambda s: any(
                    s[c * CF + F_PC] >= TAKE and s[c * CF + F_PC] < m.GOT
                    and s[MB + 2 * (s[c * CF + F_PC] - TAKE)] == DELETED
                    for c in range(n)
                ),
            ),
        ]
    if cfg.reject:
        def not_to_rejecter(s, a, o, t):
            return a[0] != "acquire" or o is not True or not rejected(s, a[1], a[2])

        def taken_after_reject(s, a, o, t):
            return a[0] == "acquire" and o is True and acq[a[1]] and any(rejected(s, c, a[2]) for c in range(n))

        props += [
            always_step(
                "rejected-not-redelivered",
                "a consumer never acquires an entry it rejected (QueueConsumerImpl.hasInterest: isRejectedBy)",
                not_to_rejecter,
                witness=taken_after_reject,
                actions=("acquire",),
            ),
            sometimes(
                "rejected-message-taken-by-another",
                "an entry one consumer rejected is acquired by another",
                lambda s: any(
                    s[MB + 2 * j] >= ACQ and any(rejected(s, c, j) for c in range(n)) for j in range(M)
                ),
            ),
        ]
    if cfg.groups:
        G = m.G
        grp = m.grp

        def one_holder(s):
            return all(len(holders(s, g)) <= 1 for g in range(G))

        def group_waits(s):
            """An available entry is kept by its group from a registered consumer that wants work."""
            return any(
                s[MB + 2 * j] == AVAILABLE and grp[j] >= 0 and acq[c] and reg(s, c) and s[c * CF + F_FLAG]
                and group_blocks(s, c, j)
                for j in range(M) for c in range(n)
            )

        props += [
            always(
                "group-held-by-one-consumer",
                "no two consumers hold (have acquired) entries of one message group at the same time",
                one_holder,
                witness=group_waits,
            ),
            sometimes(
                "group-entry-waits-for-its-owner",
                "an available entry waits for its group's consumer while another registered consumer wants work",
                group_waits,
            ),
        ]
        if m.GRS is not None and cfg.group_policy is not GroupPolicy.SHARED:
            GOWN, GRS = m.GOWN, m.GRS

            def leaves_a_waiting_group(s, a, t):
                """a removes the consumer assigned a group that has an available entry after the step."""
                return a[0] == "remove_consumer" and any(
                    s[GOWN + grp[j]] - 1 == a[1] and t[MB + 2 * j] == AVAILABLE for j in range(M) if grp[j] >= 0)

            # AbstractQueue.unregisterConsumer -> resetSubPointersForGroups(consumer): the earliest available
            # entry of a group the consumer was assigned (findEarliestAssignedAvailableEntry) sends every
            # acquiring consumer's pointer back, or the group's entries wait behind them unseen (issue 31)
            props.append(always_step(
                "removed-owner-resets-pointers",
                "removing the consumer a message group is assigned to, while an entry of that group is available, "
                "owes a pointer reset (resetSubPointersForGroups) so the other consumers see the entry",
                lambda s, a, o, t: not leaves_a_waiting_group(s, a, t) or t[GRS] == 1,
                witness=lambda s, a, o, t: leaves_a_waiting_group(s, a, t),
                actions=("remove_consumer",),
            ))
    return props


#: the environment's acts that spend its budget (model/consumer_lists/state.py ``env_budget``): the
#: client's removals, credit grants, suspensions and resumptions, releases and rejects
ENVIRONMENT_ACTS = frozenset({"remove_consumer", "credit", "suspend", "resume", "release", "reject"})
#: the steps of a consumer's IO thread (seed 000 "Threading Model": the consuming part runs on it)
IO_ACTIONS = frozenset({"target_flag", "set_notify_work_desired", "deliver_single_message", "find_next_available",
                        "acquire", "deliver", "no_message"})
#: the steps that tell acquiring consumers of work and hand a wake-up over (notifyOtherConsumers)
HANDOVERS = frozenset({"no_message", "remove_consumer", "delete_entry", "delayed_acquisition"})


def _rule_properties(m, reg, rejected, can_see, holders):
    """Issue 31: the claims that pin the rules ``conq mutate-model consumer-lists`` found unpinned (a
    change to them moved only the state count).  Each reads the state through the layout only, and
    a step claim compares a field of the two states before it reads it (so the packed view learns
    only the fields a step changes, model/engines/packing.py)."""
    cfg = m.config
    n, M, MB, acq, prio = m.n, m.m, m.MB, m.acq, m.prio
    L_ALL, BUD, GOT = m.L_ALL, m.BUD, m.GOT
    grouped = bool(cfg.groups)
    levels_of_acquirers = len(set(prio[c] for c in range(n) if acq[c]))

    def status(s, j):
        return s[MB + 2 * j]

    def first_entry(s, c):
        """The entry getNextAvailableEntry gives c: the first available one (queue order) c may take."""
        if not reg(s, c):
            return None  # a closed consumer has no queue context
        for j in range(M):
            if status(s, j) == AVAILABLE and can_see(s, c, j):
                return j
        return None

    def held_back(s, c, j):
        """AbstractQueue.noHigherPriorityWithCredit(c, j) says no: a registered acquiring consumer of
        higher priority wants work, is interested in j (has not rejected it) and has an entry it may take."""
        if not cfg.priority_check:
            return False
        return any(prio[h] > prio[c] and acq[h] and reg(s, h) and s[h * CF + F_FLAG] and not rejected(s, h, j)
                   and first_entry(s, h) is not None for h in range(n))

    def notifiable(s, c):
        """notifyConsumer(c) would succeed on s: c is Interested and has an entry nobody above holds back."""
        if s[c * CF] != INTERESTED:
            return False
        j = first_entry(s, c)
        return j is not None and not held_back(s, c, j)

    def desire(s, c):
        b = c * CF
        return s[b + F_SUSP] == 0 and s[b + F_CREDIT] > 0

    def untouched(s):
        """Nothing has changed a consumer's reasons yet: no entry arrived (so none was taken with credit)
        and the environment has not acted (no credit, suspension or resumption)."""
        return cfg.env_budget >= 0 and s[BUD] == cfg.env_budget and all(status(s, j) == UNARRIVED for j in range(M))

    props = []

    # -- the environment's budget (spec/consumer-lists.md "Configurations": env_budget bounds the client's
    #    and housekeeping's acts so that the 3-consumer configurations stay exhaustively checkable)
    def budget_kept(s, a, o, t):
        if s[BUD] == t[BUD]:
            return a[0] not in ENVIRONMENT_ACTS or s[BUD] == -1
        return a[0] in ENVIRONMENT_ACTS and s[BUD] > 0 and t[BUD] == s[BUD] - 1

    props.append(always_step(
        "environment-acts-within-budget",
        "each of the environment's acts (remove, credit, suspend, resume, release, reject) spends one unit of the "
        "configuration's budget and none happens once it is spent; no other step touches the budget",
        budget_kept,
        witness=lambda s, a, o, t: a[0] in ENVIRONMENT_ACTS and s[BUD] != t[BUD] and t[BUD] == 0,
    ))

    # -- an entry's life (seeds 000/002 "Interfaces": a new message arrives, a previously unavailable
    #    message (acquired, held) becomes available; upstream QueueEntryImpl acquire / release / delete,
    #    AbstractQueue.enqueue (arrival in order), AbstractConsumerTarget.send (a client releases or
    #    rejects only what it was sent))
    def sent_by(s, c, j):
        return status(s, j) == ACQ + c and s[c * CF + F_PC] != GOT + j

    def entry_move_ok(s, a, o, t, j):
        x, y, name = status(s, j), status(t, j), a[0]
        if x == DELETED:
            return False
        if y == DELETED:
            return cfg.expiry and name in ("delete_entry", "delayed_acquisition") and a[1] == j and (
                x == AVAILABLE or (x >= ACQ and sent_by(s, x - ACQ, j)))
        if x == UNARRIVED:
            in_order = j == 0 or status(s, j - 1) != UNARRIVED
            if y == AVAILABLE:
                return name == "enqueue" and a[1] == j and in_order
            return y == HELD and cfg.held and name == "enqueue_held" and a[1] == j and in_order
        if y >= ACQ:
            return name == "acquire" and a[1] == y - ACQ and a[2] == j and acq[a[1]] and o is True
        if x == HELD:
            return y == AVAILABLE and name == "unhold" and a[1] == j
        if x >= ACQ and y == AVAILABLE:
            c = x - ACQ
            if name == "release":
                return a[1] == j and o == c and sent_by(s, c, j)
            if name == "reject":
                return a[1:] == (c, j) and bool(reg(s, c)) and s[c * CF + F_PC] in (IDLE, START)
            if name == "remove_consumer":
                return a[1] == c
            # a delivery the consumer's close interrupted gives the entry back (QueueEntryImpl.release)
            return name == "deliver" and a[1] == c and not reg(s, c) and s[c * CF + F_PC] == GOT + j
        return False

    def entry_life(s, a, o, t):
        for j in range(M):
            k = MB + 2 * j
            if s[k] != t[k]:
                if not entry_move_ok(s, a, o, t, j):
                    return False
                if status(t, j) == AVAILABLE and not t[k + 1]:
                    return False  # became available: notifyConsumers is owed for it
                if status(t, j) != AVAILABLE and s[k + 1] != t[k + 1] and t[k + 1]:
                    return False  # a notification is owed only for an entry that became available
            elif s[k + 1] != t[k + 1] and t[k + 1]:
                return False  # a notification is owed only for an entry that became available
            if s[k + 1] != t[k + 1] and not t[k + 1] and a != ("notify_consumers", j):
                return False  # only the owing publisher's notifyConsumers pays it
        if a[0] in ("release", "reject"):
            j = a[-1]
            return status(t, j) == AVAILABLE and status(s, j) != AVAILABLE
        return True

    def release_by_a_higher(s, a, o, t):
        """A consumer releases an entry while a lower-priority acquirer is registered (with one priority
        level: any release)."""
        if a[0] != "release":
            return False
        return levels_of_acquirers < 2 or any(acq[d] and prio[d] < prio[o] and reg(s, d) for d in range(n))

    props.append(always_step(
        "entry-lifecycle",
        "an entry arrives in order (enqueue, or held then un-held), is acquired only by an acquire, leaves its "
        "consumer only by that consumer's release or reject of a sent entry, its close, or a delete, is deleted "
        "only by the housekeeping / management thread and never comes back; an entry that becomes available owes "
        "one notifyConsumers, which only that publisher pays",
        entry_life,
        witness=release_by_a_higher,
    ))

    # -- a consumer's life (REFERENCE.md section 1 addConsumer / removeConsumer; seed 000 "The All list":
    #    a consumer is removed only when it is closed; a closed consumer's IO thread only finishes the pull
    #    it is in, and a delivery it can no longer send is released)
    def consumer_life(s, a, o, t):
        name = a[0]
        for c in range(n):
            b = c * CF
            if s[b] != t[b] and s[b] == ABSENT and (name != "add_consumer" or a[1] != c or cfg.preadded):
                return False
            if s[b + F_WAKE] != t[b + F_WAKE] and t[b + F_WAKE] and not reg(t, c):
                return False  # a closed consumer is never scheduled
        if name == "remove_consumer":
            b = a[1] * CF
            if t[b + F_WAKE]:
                return False
            stopped = s[b + F_PC] in (IDLE, START)
            return t[b + F_PC] == IDLE if stopped else t[b + F_PC] == s[b + F_PC]
        if name in IO_ACTIONS:
            c = a[1]
            b = c * CF
            if not reg(s, c):
                if s[b + F_PC] in (IDLE, START):
                    return False  # a closed consumer's IO thread starts nothing
                if name == "deliver" and (t[b + F_PC] != IDLE or t[b + F_WAKE]):
                    return False
        return True

    props.append(always_step(
        "consumer-lifecycle",
        "a consumer joins only by addConsumer (only where the configuration adds consumers during the run); once "
        "closed it is never scheduled, its IO thread starts no pull or desire update, a pull in progress ends and an "
        "undelivered entry is released; the close stops the IO thread between pulls",
        consumer_life,
        witness=lambda s, a, o, t: a[0] in IO_ACTIONS and not reg(s, a[1]),
    ))

    # -- the find (AbstractQueue.attemptDelivery: getNextAvailableEntry, noHigherPriorityWithCredit,
    #    the credit check; REFERENCE.md section 1 "Credit", section 4 mightAssign; seed 000 "Handling
    #    Consumer Priorities")
    def find_ok(s, a, o, t):
        if a[0] != "find_next_available":
            return True
        c = a[1]
        j = first_entry(s, c)
        if o is not None:
            return o == j and s[c * CF + F_CREDIT] > 0
        if j is None or s[c * CF + F_CREDIT] <= 0:
            return True
        return (acq[c] or cfg.priority_blocks_browsers) and held_back(s, c, j)

    props.append(always_step(
        "find-takes-the-first-entry-it-may",
        "a consumer's look picks the first available entry (queue order) it may take (not seen by a browser, not "
        "rejected by it, not kept by another consumer's message group), and only with credit; it finds nothing "
        "only with no credit, no such entry, or a registered higher-priority acquirer that wants work, is "
        "interested in that entry and has one available",
        find_ok,
        witness=lambda s, a, o, t: a[0] == "find_next_available" and o is None and any(
            status(s, j) == AVAILABLE for j in range(M)),
        actions=("find_next_available",),
    ))

    # -- whom the queue notifies (REFERENCE.md section 1: "a consumer is notified only if it has an
    #    available message it may take"; notifyConsumers skips consumers not interested in the entry)
    def told_have_work(s, a, o, t):
        if a[0] not in NOTIFYING or not isinstance(o, tuple):
            return True
        if len(set(o)) != len(o):
            return False  # one notifyWork per consumer and step
        if a[0] in HANDOVERS and sum(1 for c in o if acq[c]) > 1:
            return False  # notifyOtherConsumers notifies one consumer
        for c in o:
            if not acq[c]:
                continue
            if first_entry(t, c) is None:
                return False
            if a[0] == "notify_consumers" and rejected(t, c, a[1]):
                return False
        return True

    props.append(always_step(
        "notified-only-with-work",
        "an acquiring consumer is notified only while it has an available entry it may take, a new or returned "
        "entry's notifyConsumers never notifies a consumer that rejected it, no step notifies a consumer twice, and "
        "a hand-over (a pull that found nothing, a removal, a delete) notifies at most one acquirer",
        told_have_work,
        witness=lambda s, a, o, t: a[0] in HANDOVERS and isinstance(o, tuple) and any(acq[c] for c in o),
    ))

    # -- a consumer that becomes interested, and one that stops (seed 000 "Interfaces": notifyWork when a
    #    "Consumer becomes Interested" and when "a high priority consumer becomes uninterested and thus allows
    #    a low priority consumer to consume messages"; REFERENCE.md section 1: "unless a NOTIFIED consumer of
    #    higher priority exists")
    def became_interested(s, a, t):
        c = a[1]
        if a[0] == "add_consumer":
            return t[c * CF] != NOT_INTERESTED
        return a[0] == "set_notify_work_desired" and a[2] and s[c * CF] == NOT_INTERESTED and t[c * CF] != NOT_INTERESTED

    def interest_changes_notify(s, a, o, t):
        if a[0] not in ("add_consumer", "set_notify_work_desired") or not isinstance(o, tuple):
            return True
        c = a[1]
        if became_interested(s, a, t):
            if not acq[c]:
                return c in o  # a browser that wants work is always told
            j = first_entry(t, c)
            return (c in o) == (j is not None and not held_back(t, c, j))
        if a[0] == "set_notify_work_desired" and not a[2] and s[c * CF] != t[c * CF]:
            told = [x for x in o if acq[x]]
            if len(told) > 1:
                return False
            others = [x for x in range(n) if acq[x] and t[x * CF] == NOTIFIED and x not in told]
            highest = max((prio[x] for x in others), default=None)
            if told:
                return highest is None or prio[told[0]] >= highest
            return not any(acq[x] and x != c and notifiable(t, x) and (highest is None or prio[x] >= highest)
                           for x in range(n))
        return True

    props.append(always_step(
        "interest-changes-notify",
        "a consumer that becomes interested (added wanting work, or setNotifyWorkDesired(true)) is notified exactly "
        "when it could take an entry (a browser always); one that stops wanting work hands a wake-up to one "
        "Interested acquirer that could take an entry, not below the highest Notified one's priority, when there is one",
        interest_changes_notify,
        witness=lambda s, a, o, t: a[0] == "set_notify_work_desired" and not a[2] and s[a[1] * CF] != t[a[1] * CF]
        and isinstance(o, tuple) and any(acq[x] for x in o),
        actions=("add_consumer", "set_notify_work_desired"),
    ))

    # -- a new or returned entry (seed 000 "The Interested list": "When a message becomes available, the
    #    Queue will notify Consumers from this list"; REFERENCE.md section 1: walk Interested in priority
    #    order, skipping consumers not interested in the entry, stop at the first one notified or at a
    #    higher-priority consumer that could take the entry)
    def arrival_wakes_someone(s, a, o, t):
        if a[0] != "notify_consumers" or status(s, a[1]) != AVAILABLE:
            return True
        j = a[1]
        if any(acq[c] for c in o):
            return True
        return not any(acq[c] and not rejected(t, c, j) and notifiable(t, c) for c in range(n))

    props.append(always_step(
        "arrival-wakes-an-acquirer-who-can",
        "notifyConsumers for an available entry notifies an Interested acquirer when one that is interested in "
        "the entry could take an entry",
        arrival_wakes_someone,
        witness=lambda s, a, o, t: a[0] == "notify_consumers" and any(acq[c] for c in o),
        actions=("notify_consumers",),
    ))
    if not all(acq):
        def browser_told_at_once(s):
            return untouched(s) and any(not acq[c] and s[c * CF + F_PC] == FIND for c in range(n))

        # AbstractQueue.addConsumer -> notifyConsumer: a non-acquiring consumer is always told (setNotified
        # returns true), so a browser added wanting work looks at once, before anything happened
        props.append(sometimes(
            "added-browser-is-told",
            "a browser added wanting work is notified at once: it looks before any entry arrived or the "
            "environment acted",
            browser_told_at_once,
        ))

    # -- a pull that found nothing (seed 000 "Interfaces": "a notified consumer did not do the work we
    #    expected it to do: we need to notify someone else"; upstream deliverSingleMessage ->
    #    notifyOtherConsumers, one consumer; setNotified(false) was done before the look)
    def hands_over(s, a, o, t):
        if a[0] != "no_message":
            return True
        c = a[1]
        if not acq[c]:
            return not any(acq[d] for d in o)  # a browser takes nothing away from anyone: nothing to hand over
        if cfg.unnotify_first and s[c * CF] != t[c * CF]:
            return False  # the consumer's own un-notify came before the look
        told = [d for d in o if acq[d]]
        if len(told) > 1 or c in told:
            return False
        if told:
            return True
        return not any(d != c and acq[d] and notifiable(t, d) for d in range(n))

    props.append(always_step(
        "nothing-found-hands-over",
        "a pull that finds nothing notifies exactly one other Interested acquirer that could take an entry, when "
        "there is one, and nobody else; it leaves the consumer's own list alone",
        hands_over,
        witness=lambda s, a, o, t: a[0] == "no_message" and any(acq[d] for d in o),
        actions=("no_message",),
    ))

    # -- a removal hands the removed consumer's wake-up over (seed 000 "Interfaces": "a notified consumer
    #    did not do the work we expected it to do: we need to notify someone else"; the reference does it
    #    whatever the removed consumer's state (spec/deviations.md DEV-017), the rule before issue 16 only for
    #    a Notified one (handover-only-if-notified), upstream AbstractQueue.removeConsumer never (upstream-remove))
    def removal_hands_over(s, a, o, t):
        if a[0] != "remove_consumer":
            return True
        c = a[1]
        told = [d for d in o if acq[d]]
        owed = cfg.remove_hands_over and (s[c * CF] == NOTIFIED or not cfg.handover_only_if_notified)
        if not owed:
            return not told
        return bool(told) or not any(d != c and acq[d] and notifiable(t, d) for d in range(n))

    props.append(always_step(
        "removal-hands-over",
        "removing a consumer notifies one other Interested acquirer that could take an entry, when there is one "
        "(reference: whatever the removed consumer's state; handover-only-if-notified: only for a Notified one; "
        "upstream-remove: never), and nobody where no hand-over is owed",
        removal_hands_over,
        witness=lambda s, a, o, t: a[0] == "remove_consumer" and any(status(t, j) == AVAILABLE for j in range(M)),
        actions=("remove_consumer",),
    ))

    # -- a pull the suspended target refuses (AbstractConsumerTarget: deliverSingleMessage returns null
    #    without a look) ends the IO thread's scheduled work
    props.append(always_step(
        "suspended-pull-ends-the-wake-up",
        "a pull that a suspended target refuses leaves its IO thread idle and no longer scheduled",
        lambda s, a, o, t: a[0] != "deliver_single_message" or o != "suspended" or (
            t[a[1] * CF + F_PC] == IDLE and not t[a[1] * CF + F_WAKE]),
        witness=lambda s, a, o, t: a[0] == "deliver_single_message" and o == "suspended",
        actions=("deliver_single_message",),
    ))
    if cfg.held:
        # seeds 000/002 "Threading Model": the housekeeping thread makes a held message available
        props.append(always_step(
            "held-entry-becomes-available",
            "the housekeeping thread un-holds a held entry: it becomes available and owes its notifyConsumers",
            lambda s, a, o, t: a[0] != "unhold" or (status(s, a[1]) == HELD and status(t, a[1]) == AVAILABLE
                                                    and bool(t[MB + 2 * a[1] + 1])),
            witness=lambda s, a, o, t: a[0] == "unhold",
            actions=("unhold",),
        ))

    # -- the stutter step (spec/consumer-lists.md "Fairness": idle is offered exactly where no fair step is)
    def nothing_owed(s):
        for c in range(n):
            b = c * CF
            if s[b + F_PC] != IDLE:
                return False
            if reg(s, c) and (s[b + F_WAKE] or bool(s[b + F_FLAG]) != desire(s, c)):
                return False
        if any(s[MB + 2 * j + 1] for j in range(M)):
            return False
        if m.GRS is not None and s[m.GRS]:
            return False
        if m.DP is not None:
            for j in range(M):
                if (s[m.DP] >> j) & 1 and (status(s, j) == AVAILABLE or (status(s, j) >= ACQ and sent_by(
                        s, status(s, j) - ACQ, j))):
                    return False
        return True

    props.append(always_step(
        "idle-only-when-nothing-is-owed",
        "the system rests (idle) only where no IO thread has a step to take, no publisher owes notifyConsumers, "
        "no group reset and no waiting delete is owed",
        lambda s, a, o, t: a[0] != "idle" or nothing_owed(s),
        witness=lambda s, a, o, t: a[0] == "idle",
        actions=("idle",),
    ))

    # -- the consumer's wish for work (seed 000 "Interfaces": setNotifyWorkDesired for flow control,
    #    credit, TCP back-pressure; upstream AbstractConsumerTarget.updateNotifyWorkDesired)
    def desire_ok(s, a, o, t):
        name = a[0]
        if name in ("suspend", "resume"):
            b = a[1] * CF
            r = REASONS_INDEX[a[2]]
            was = (s[b + F_SUSP] >> r) & 1
            return t[b + F_SUSP] == s[b + F_SUSP] ^ (1 << r) and was == (name == "resume")
        if name in ("target_flag", "set_notify_work_desired"):
            c, wanted = a[1], a[2]
            b = c * CF
            if s[b + F_PC] == DES:
                return t[b + F_PC] == IDLE  # the second half ends the update
            if untouched(s):
                return False  # a target is created wanting work exactly when it has credit: nothing to update
            return bool(wanted) == desire(s, c) and bool(wanted) != bool(s[b + F_FLAG]) and t[b + F_PC] == DES
        return True

    def between_pulls(s, a, o, t):
        if a[0] not in ("target_flag", "set_notify_work_desired") or s[a[1] * CF + F_PC] == DES:
            return False
        return cfg.pull_rule is not PullRule.UNTIL_EMPTY or s[a[1] * CF + F_PC] == START

    props.append(always_step(
        "desire-follows-credit-and-suspension",
        "suspend and resume set and clear their reason; a target is created wanting work exactly when it has credit, "
        "and starts a setNotifyWorkDesired only when its desire (credit, no suspension reason) differs from its flag, "
        "with that desire, and the second half ends it",
        desire_ok,
        witness=between_pulls,
        actions=("suspend", "resume", "target_flag", "set_notify_work_desired"),
    ))

    def credit_granted(s, a, o, t):
        if a[0] != "credit":
            return True
        b = a[1] * CF
        return t[b + F_CREDIT] == s[b + F_CREDIT] + 1 and t[b + F_WAKE] == 1

    # QueueConsumerImpl.externalStateChange -> notifyWork: the credit manager tells the target its state changed
    props.append(always_step(
        "credit-grant-wakes-the-consumer",
        "a credit grant adds one credit and schedules the consumer's connection, so the target pulls again",
        credit_granted,
        witness=lambda s, a, o, t: a[0] == "credit" and s[a[1] * CF + F_CREDIT] == 0,
        actions=("credit",),
    ))

    # -- the acquire (QueueEntryImpl.acquire: a compare-and-set on the entry's state; with message groups
    #    MessageGroupManager.acceptMessage decides first); upstream attemptDelivery gives up the pull when
    #    the acquire fails (the consumer is told no message was available)
    def acquire_ok(s, a, o, t):
        if a[0] != "acquire":
            return True
        c, j = a[1], a[2]
        b = c * CF
        if o is not True and t[b + F_PC] != NONE:
            return False  # a failed acquire ends the attempt
        if acq[c] and not grouped and (status(s, j) == AVAILABLE or (not cfg.acquire_cas and status(s, j) >= ACQ)):
            return o is True  # the entry's CAS alone decides (acquire-no-cas: none), whoever the consumer is now
        return True

    props.append(always_step(
        "acquire-is-the-entrys-cas",
        "without message groups an acquire of an available entry succeeds (the entry's compare-and-set knows "
        "nothing of the consumer: one closed meanwhile still takes it, and its delivery releases it); a failed "
        "acquire ends the pull with nothing delivered",
        acquire_ok,
        witness=lambda s, a, o, t: a[0] == "acquire" and acq[a[1]] and not reg(s, a[1]) and (o is True) != grouped,
        actions=("acquire",),
    ))

    if m.DP is not None:
        DP = m.DP

        def delete_ok(s, a, o, t):
            if a[0] not in ("delete_entry", "delayed_acquisition"):
                return True
            j = a[1]
            x, waiting = status(s, j), (s[DP] >> j) & 1
            takeable = x == AVAILABLE or (x >= ACQ and sent_by(s, x - ACQ, j))
            if a[0] == "delayed_acquisition":
                return bool(waiting) and takeable and status(t, j) == DELETED and not (t[DP] >> j) & 1
            if waiting or x in (UNARRIVED, DELETED):
                return False  # one delete at a time, of an entry on the queue
            if takeable:
                return status(t, j) == DELETED and not (t[DP] >> j) & 1
            return status(t, j) == x and bool((t[DP] >> j) & 1)

        def delayed_steal_from_a_higher(s, a, o, t):
            if a[0] != "delayed_acquisition" or status(s, a[1]) < ACQ:
                return False
            h = status(s, a[1]) - ACQ
            return levels_of_acquirers < 2 or any(acq[d] and prio[d] < prio[h] and reg(s, d) for d in range(n))

        # AbstractQueue.deleteEntry -> QueueEntryImpl.acquireOrSteal: an available entry or a sent acquisition
        # (AbstractConsumerTarget.send -> makeAcquisitionStealable) is taken at once; a held entry or an unsent
        # acquisition gets a DelayedAcquisitionStateListener, which completes the delete on its next state change
        props.append(always_step(
            "delete-takes-or-waits",
            "a delete (of an entry on the queue, one at a time) takes an available entry or a sent acquisition at "
            "once, else waits for the entry; a waiting delete completes only on an entry it can take, and deletes it",
            delete_ok,
            witness=delayed_steal_from_a_higher,
            actions=("delete_entry", "delayed_acquisition"),
        ))
    if m.GRS is not None:
        GOWN, GRS, G, grp = m.GOWN, m.GRS, m.G, m.grp

        def given_up_with_waiting(s, t):
            """A message group had a registered consumer before the step and has none after (its consumer
            gave it up, or was removed), with an entry of it available."""
            for g in range(G):
                was = s[GOWN + g] - 1
                if was < 0 or not reg(s, was):
                    continue
                now = t[GOWN + g] - 1
                if (now < 0 or not reg(t, now)) and any(grp[j] == g and status(t, j) == AVAILABLE for j in range(M)):
                    return True
            return False

        def reset_owed(s, a, o, t):
            if a[0] == "reset_sub_pointers_for_groups":
                return bool(s[GRS]) and not t[GRS]
            if s[GRS] != t[GRS]:
                return bool(t[GRS]) and given_up_with_waiting(s, t)
            return True

        def reset_notifies(s, a, o, t):
            if a[0] != "reset_sub_pointers_for_groups":
                return True
            return set(o) == {c for c in range(n) if acq[c] and reg(s, c) and notifiable(s, c)}

        # AbstractQueue.resetSubPointersForGroups: owed when a group is given up (DefinedGroupMessageGroupManager
        # Group.subtract, AssignedConsumerMessageGroupManager.clearAssignments on unregisterConsumer) while an
        # entry of it is available; it moves every consumer's pointer back and notifies each (notifyConsumer)
        props.append(always_step(
            "group-reset-owed-when-a-group-is-given-up",
            "a group pointer reset is owed only by a step that gave up a message group (or removed its consumer) "
            "with an entry of it available, and is paid only by the reset",
            reset_owed,
            witness=lambda s, a, o, t: a[0] == "remove_consumer" and s[GRS] != t[GRS],
        ))
        props.append(always_step(
            "group-reset-notifies-the-waiting",
            "a group pointer reset notifies exactly the Interested acquirers that could take an entry",
            reset_notifies,
            witness=lambda s, a, o, t: a[0] == "reset_sub_pointers_for_groups" and bool(o),
            actions=("reset_sub_pointers_for_groups",),
        ))

        def owners_follow_holders(s, a, o, t):
            for j in range(M):
                g = grp[j]
                if g < 0:
                    continue
                k = MB + 2 * j
                if s[k] == t[k] and s[GOWN + g] == t[GOWN + g]:
                    continue
                if status(t, j) >= ACQ and t[GOWN + g] != status(t, j) - ACQ + 1:
                    return False
            if a[0] == "acquire" and o is not True:
                return all(s[GOWN + g] == t[GOWN + g] for g in range(G))
            return True

        # MessageGroupManager.acceptMessage (assignMessage, then the entry's acquire) and the group listeners
        # (DefinedGroupMessageGroupManager.GroupStateChangeListener): the consumer holding an entry of a group is
        # that group's consumer; a failed acquire gives no group and takes none away (upstream assignMessage
        # keeps a group it created for an acquire that then failed: configuration upstream-group-acquire)
        props.append(always_step(
            "group-follows-its-holder",
            "whoever holds an entry of a message group is that group's consumer after every step, and a failed "
            "acquire neither gives a group nor takes one away",
            owners_follow_holders,
            witness=lambda s, a, o, t: a[0] == "acquire" and o is True and grp[a[2]] >= 0,
        ))
    if grouped and cfg.group_policy is GroupPolicy.SHARED and not cfg.group_assign_with_acquire:
        GOWN = m.GOWN

        # upstream DefinedGroupMessageGroupManager: assignMessage keeps a group created for an acquire that then
        # failed, and its clearAssignments does nothing (shared groups are given up only by their listener), so
        # the group outlives its closed consumer (configuration upstream-group-acquire)
        props.append(sometimes(
            "stale-shared-group-outlives-its-consumer",
            "a shared group kept for a failed acquire still names its consumer after that consumer was removed",
            lambda s: any(s[GOWN + g] and s[(s[GOWN + g] - 1) * CF] == REMOVED for g in range(m.G)),
        ))
    if grouped and cfg.group_policy is GroupPolicy.ASSIGNED:
        GOWN, grp = m.GOWN, m.grp

        def waits_for_idle_owner(s):
            for j in range(M):
                g = grp[j]
                if g < 0 or status(s, j) != AVAILABLE:
                    continue
                own = s[GOWN + g] - 1
                if own >= 0 and reg(s, own) and own not in holders(s, g) and any(
                        c != own and acq[c] and reg(s, c) and s[c * CF + F_FLAG] for c in range(n)):
                    return True
            return False

        # AssignedConsumerMessageGroupManager: a standard group stays assigned to its consumer until that
        # consumer is removed, even while it holds none of the group's entries (shared groups are given up)
        props.append(sometimes(
            "standard-group-stays-with-its-consumer",
            "an available entry waits for the consumer its standard group is assigned to while that consumer holds "
            "none of the group's entries and another registered consumer wants work",
            waits_for_idle_owner,
        ))
    return props


__all__ = ["properties", "FIND", "START", "TAKE", "IDLE", "REMOVED"]
