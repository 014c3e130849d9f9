"""The claims that pin the rules ``conq mutate-model consumer-lists`` found unpinned (issue 31):
the environment's budget, the lives of entries and consumers, the find, whom the queue notifies,
hand-overs, desire updates, credit grants, the acquire's CAS, deletes and groups.  Part of the model's
claims (properties.py lists them all, these last); written, like them, independently of the step
functions, reading the flat state through the model's layout.
"""

from __future__ import annotations

from .state import (
    ABSENT,
    ACQ,
    AVAILABLE,
    CF,
    DELETED,
    DES,
    F_CREDIT,
    F_FLAG,
    F_PC,
    F_SUSP,
    F_WAKE,
    FIND,
    GroupPolicy,
    REASONS,
    HELD,
    PullRule,
    IDLE,
    INTERESTED,
    NONE,
    NOT_INTERESTED,
    NOTIFIED,
    REMOVED,
    START,
    UNARRIVED,
)
from conq.model.kernel import always_step, sometimes

REASONS_INDEX = {r: i for i, r in enumerate(REASONS)}
#: the steps whose observation is the tuple of consumers they notified
NOTIFYING = frozenset({"notify_consumers", "no_message", "remove_consumer", "add_consumer", "set_notify_work_desired",
                       "delete_entry", "delayed_acquisition", "reset_sub_pointers_for_groups"})


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
            # (``s[w] != t[w] and t[w] and not reg(t, c)``, the earlier value read last: packing.py on
            # ``is not``)
            w = b + F_WAKE
            if s[w] is not t[w] and t[w] and not reg(t, c) and s[w] != t[w]:
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
            # (the registration is read last: most IO steps are decided by the fields they touch,
            # so the packed view remembers the verdict without the All list; issue 36)
            if s[b + F_PC] in (IDLE, START) and not reg(s, c):
                return False  # a closed consumer's IO thread starts nothing
            if name == "deliver" and (t[b + F_PC] != IDLE or t[b + F_WAKE]) and not reg(s, c):
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
