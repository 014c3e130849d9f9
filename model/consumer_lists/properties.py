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
    F_CREDIT,
    F_FLAG,
    F_PC,
    F_SEEN,
    F_WAKE,
    GroupPolicy,
    HELD,
    IDLE,
    INTERESTED,
    NON_ACQUIRING,
    NONE,
    NOT_INTERESTED,
    NOTIFIED,
    REMOVED,
    START,
    TAKE,
    _bits,
)
from conq.model.kernel import always, always_step, leads_to, sometimes

from .rule_properties import NOTIFYING, _rule_properties


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

    def moves_witness(s, a, o, t):  # (a node the step leaves alone is not read: see back_of_interested)
        return any(s[c * CF] != t[c * CF] and s[c * CF] == NOTIFIED and t[c * CF] == INTERESTED for c in range(n))

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
            # (``s[w] != t[w] and t[w] and ...``, the earlier value read last: packing.py on ``is not``)
            w = c * CF + F_WAKE
            if s[w] is not t[w] and t[w] and c not in told and a[0] != "credit" and s[w] != t[w]:
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

    # (``s[b] != t[b]`` first: a field the step leaves alone is not read at all by the packed view's
    # memo, so the claim's verdict is remembered by the fields the step itself touches; issue 36)
    def back_of_interested(s, a, o, t):
        for c in range(n):
            b = c * CF
            if s[b] != t[b] and s[b] == NOTIFIED and t[b] == INTERESTED:
                if t[IB + lvl[c]][-1:] != (c,):
                    return False
        return True

    crowded = any(sum(1 for c in range(n) if acq[c] and lvl[c] == k) > 1 for k in range(nlev))

    def back_witness(s, a, o, t):
        return any(
            s[c * CF] != t[c * CF] and s[c * CF] == NOTIFIED and t[c * CF] == INTERESTED
            and (len(t[IB + lvl[c]]) > 1 or not crowded)
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
