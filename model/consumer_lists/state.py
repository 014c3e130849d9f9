"""The consumer-lists model's vocabulary: node states, the packed state layout, the pull
rules and the configuration record.  Shared by the model, its properties and its z3 encoding
(one module all three import, so none imports another in a circle).
"""

from __future__ import annotations


import enum
from dataclasses import dataclass


# node states (upstream NodeState, plus ABSENT = never added)
ABSENT, NOT_INTERESTED, INTERESTED, NOTIFIED, NON_ACQUIRING, REMOVED = range(6)
NODE_NAMES = ("absent", "not-interested", "interested", "notified", "non-acquiring", "removed")

# message status: 0 not arrived, 1 available, 2 held, 3 + c acquired by consumer c
UNARRIVED, AVAILABLE, HELD, ACQ = 0, 1, 2, 3
# ... and -1: deleted (TTL expired and dequeued by the housekeeping thread, or a management delete:
# AbstractQueue.deleteEntry); a deleted entry is never available again
DELETED = -1

# IO-thread program counter: IDLE, DES (first half of setNotifyWorkDesired done), FIND (un-notified,
# about to look for the next entry), NONE (found nothing, about to finish), START (keep pulling: the
# target's sendNextMessage loop goes on after a delivery); TAKE + m (found m), GOT + m (acquired m)
IDLE, DES, FIND, NONE, START = range(5)
TAKE = 5

CF = 7  # fields per consumer
F_NODE, F_PC, F_WAKE, F_FLAG, F_CREDIT, F_SUSP, F_SEEN = range(CF)

REASONS = ("flow", "tcp")  # suspension reasons (credit is the third reason, counted separately)

# allowed node moves (REFERENCE.md section 1 transition table)
ALLOWED_ACQ = {
    (ABSENT, INTERESTED), (ABSENT, NOT_INTERESTED),
    (NOT_INTERESTED, INTERESTED), (INTERESTED, NOT_INTERESTED), (NOTIFIED, NOT_INTERESTED),
    (INTERESTED, NOTIFIED), (NOTIFIED, INTERESTED),
    (NOT_INTERESTED, REMOVED), (INTERESTED, REMOVED), (NOTIFIED, REMOVED),
    # two moves in one step: the queue notifies the consumer it has just made Interested
    # (addConsumer / setNotifyWorkDesired(true) followed by notifyConsumer)
    (ABSENT, NOTIFIED), (NOT_INTERESTED, NOTIFIED),
}
ALLOWED_BROWSER = {
    (ABSENT, NON_ACQUIRING), (ABSENT, NOT_INTERESTED),
    (NOT_INTERESTED, NON_ACQUIRING), (NON_ACQUIRING, NOT_INTERESTED),
    (NOT_INTERESTED, REMOVED), (NON_ACQUIRING, REMOVED),
}


class GroupPolicy(str, enum.Enum):
    """How a message group is owned (upstream ``Queue.messageGroupType``; seeds 000/002: a message
    "blocked by message grouping" becomes available again)."""

    #: SHARED_GROUPS, ``DefinedGroupMessageGroupManager``: a group belongs to the consumer that holds
    #: its acquired entries, and is given up when the last of them is released or dequeued
    SHARED = "shared"
    #: STANDARD, ``AssignedConsumerMessageGroupManager``: a group is assigned to the first consumer
    #: that takes one of its entries and stays assigned until that consumer is removed
    ASSIGNED = "assigned"


class PullRule(str, enum.Enum):
    """Seed 003: what a notified consumer must do."""

    UNTIL_EMPTY = "until-empty"  # current text: pull until uninterested or the queue returns nothing
    ONCE = "once"  # earlier text: notify no longer interested OR try to pull a message


@dataclass(frozen=True)
class ConsumerListsConfig:
    #: per consumer: (priority, acquires); a higher number is a higher priority
    consumers: tuple = ((2, True), (1, True), (1, False))
    #: messages that may arrive (in id order)
    messages: int = 3
    #: credit each consumer starts with, and the most it can hold
    initial_credit: int = 1
    max_credit: int = 1
    #: how many of the suspension reasons (flow, tcp) the environment may toggle
    reasons: int = 1
    #: messages may arrive held and later become available (housekeeping thread)
    held: bool = False
    #: acquired messages may be released / rejected (become available again)
    release: bool = True
    #: how many credit grants, suspensions/resumptions, releases and removals the environment may make in
    #: all (-1: unbounded).  Unbounded toggling is finite-state but multiplies the interleavings;
    #: a budget keeps the 3-consumer configurations exhaustively checkable with liveness.
    env_budget: int = 1
    #: consumers start registered (False: add_consumer is explored in every order)
    preadded: bool = True
    #: consumers may be removed (closed), also in the middle of a pull
    removal: bool = True
    # --- behaviour switches (reference values first; the upstream or historical alternative named) --
    #: seed 003: the current rule (pull until empty) or the earlier one (one pull per notification)
    pull_rule: PullRule = PullRule.UNTIL_EMPTY
    #: the target writes its notifyWorkDesired flag before telling the queue (reference).  Upstream
    #: AbstractConsumerTarget.setNotifyWorkDesired tells the queue first and writes the flag after.
    flag_before_queue: bool = True
    #: deliverSingleMessage moves NOTIFIED -> INTERESTED before looking (reference, upstream);
    #: False: looks first and un-notifies only when it found nothing.
    unnotify_first: bool = True
    #: the IO thread clears the scheduled bit before pulling (reference); False: after the pull
    clear_wake_first: bool = True
    #: notifyConsumers stops at the first acquiring consumer notified (reference, upstream)
    notify_one: bool = True
    #: the priority check (noHigherPriorityWithCredit) is made (reference, upstream)
    priority_check: bool = True
    #: a browser (non-acquiring) is held back by a higher-priority acquiring consumer that wants
    #: work.  Upstream attemptDelivery applies noHigherPriorityWithCredit to every consumer, so a
    #: browser of lower priority never sees a message an active higher consumer takes first; the
    #: reference does not (a browser takes nothing away from anyone).
    priority_blocks_browsers: bool = False
    #: removing a NOTIFIED consumer hands its wake-up to another interested consumer (reference);
    #: upstream AbstractQueue.removeConsumer does not
    remove_hands_over: bool = True
    #: the acquire step re-checks that the entry is still available (the entry's CAS)
    acquire_cas: bool = True
    # --- the other actors of the seeds' Threading Model (issue 16); all off by default, and off in
    #     every configuration the conformance suite drives ------------------------------------------
    #: the housekeeping thread deletes expired entries (AbstractQueue.checkMessageStatus -> expireEntry
    #: -> deleteEntry) and management deletes / moves them (the same deleteEntry): an acquire by
    #: someone who is not a consumer (QueueEntryImpl.acquireOrSteal), racing with consumers
    expiry: bool = False
    #: a consuming connection's IO thread rejects an entry its consumer holds (QueueEntryImpl.reject,
    #: then release): the entry is offered again, to every consumer but the one that rejected it
    reject: bool = False
    #: message groups: the group (0, 1, ...) of each message; empty: the queue has no groups
    groups: tuple = ()
    #: who owns a group (meaningful only with ``groups``)
    group_policy: GroupPolicy = GroupPolicy.SHARED
    # --- rule switches of the new actors (reference values first; the upstream alternative named) --
    #: after deleteEntry took an entry, the deleting thread notifies one interested consumer while
    #: messages are available (notifyOtherConsumers(null)): a consumer that lost the race for the
    #: deleted entry is otherwise never told of the rest (reference).  Upstream deleteEntry
    #: notifies nobody.
    delete_notifies: bool = True
    #: shared groups: acceptMessage assigns a group to the consumer only together with a successful
    #: acquire (reference).  Upstream DefinedGroupMessageGroupManager.assignMessage creates the group
    #: first and keeps it when the acquire then fails (the entry was deleted meanwhile): a group owned
    #: by a consumer that holds none of its entries.
    group_assign_with_acquire: bool = True
    #: message groups: acceptMessage refuses a consumer that was removed while it was pulling (it has
    #: no queue context any more), so a closed consumer is never given a group (reference).
    #: Upstream assigns it: a STANDARD group then stays assigned to the closed consumer for ever, and
    #: a shared group's closed consumer holds an entry of a group another consumer has taken.
    group_refuses_closed: bool = True
    #: removeConsumer hands a wake-up over (``remove_hands_over``) whatever the removed consumer's
    #: state (reference): a consumer whose target still wants work keeps lower priorities from being
    #: notified (noHigherPriorityWithCredit) until it is removed.  True: only a NOTIFIED consumer's
    #: wake-up is handed over (the rule before issue 16; a lost wake-up once the removed consumer's
    #: last entry was released or deleted before the removal)
    handover_only_if_notified: bool = False


def _bits(mask: int):
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1
