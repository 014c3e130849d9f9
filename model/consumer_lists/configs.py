"""The named configurations of the consumer-lists model: what each one switches and why
(the manifest in spec/manifest/ pins the expected result of each)."""

from __future__ import annotations

from .state import (
    ConsumerListsConfig,
    GroupPolicy,
    PullRule,
)


def named_configs() -> dict[str, ConsumerListsConfig]:
    c = ConsumerListsConfig
    small = dict(consumers=((2, True), (1, True)), messages=2)
    every_actor = dict(held=True, expiry=True, reject=True)
    upstream_actors = dict(delete_notifies=False, group_assign_with_acquire=False, group_refuses_closed=False,
                           remove_hands_over=False)
    return {
        "reference": c(),
        "small": c(**small),
        "dynamic": c(consumers=((2, True), (1, True), (1, False)), messages=2, preadded=False),
        "same-priority": c(consumers=((1, True), (1, True)), messages=2),
        "held": c(**small, held=True),
        "reasons": c(**small, reasons=2, max_credit=2),
        "seed003-current": c(**small, initial_credit=2, max_credit=2),
        "seed003-earlier": c(**small, initial_credit=2, max_credit=2, pull_rule=PullRule.ONCE),
        "upstream-flag-order": c(**small, flag_before_queue=False),
        "upstream-remove": c(**small, remove_hands_over=False),
        "look-then-unnotify": c(**small, unnotify_first=False),
        "clear-wake-late": c(**small, clear_wake_first=False),
        "notify-all": c(**small, notify_one=False),
        "no-priority-check": c(**small, priority_check=False),
        "acquire-no-cas": c(**small, acquire_cas=False),
        # the rule before issue 16: a removal hands over only a Notified consumer's wake-up
        "handover-only-if-notified": c(**small, env_budget=2, handover_only_if_notified=True),
        # --- the other actors (issue 16): each on its own, then all together --------------------
        "expiry": c(**small, expiry=True),
        "reject": c(**small, reject=True),
        "groups-shared": c(**small, groups=(0, 0), group_policy=GroupPolicy.SHARED),
        "groups-assigned": c(**small, groups=(0, 0), group_policy=GroupPolicy.ASSIGNED),
        "all-actors": c(**small, **every_actor, groups=(0, 0), group_policy=GroupPolicy.SHARED),
        "all-actors-assigned": c(**small, **every_actor, groups=(0, -1), group_policy=GroupPolicy.ASSIGNED),
        # ... and upstream's behaviour where the reference differs
        "upstream-delete": c(**small, expiry=True, delete_notifies=False),
        "upstream-group-acquire": c(**small, expiry=True, groups=(0, 0), group_assign_with_acquire=False),
        "upstream-shared-group-closed": c(**small, groups=(0, 0), group_refuses_closed=False),
        "upstream-assigned-group-closed": c(**small, groups=(0, 0), group_policy=GroupPolicy.ASSIGNED,
                                            group_refuses_closed=False),
        "upstream-all-actors": c(**small, **every_actor, groups=(0, 0), **upstream_actors),
    }


def descriptions() -> dict[str, str]:
    return {
        "reference": "3 consumers (prio 2, prio 1, a browser), 3 messages, credit 1, flow control, release, removal",
        "small": "2 acquiring consumers of two priorities, 2 messages",
        "dynamic": "3 consumers added in every order, 2 messages",
        "same-priority": "2 acquiring consumers of equal priority, 2 messages",
        "held": "small, messages may arrive held and become available later",
        "reasons": "small, flow control and TCP back-pressure, credit up to 2",
        "seed003-current": "seed 003 current rule (pull until empty), credit 2 so a consumer can take both messages",
        "seed003-earlier": "seed 003 earlier rule (one pull per notification), credit 2",
        "upstream-flag-order": "upstream AbstractConsumerTarget: queue told before the flag is written",
        "upstream-remove": "upstream AbstractQueue.removeConsumer: a removed NOTIFIED consumer's wake-up is dropped",
        "look-then-unnotify": "deliverSingleMessage looks before moving NOTIFIED -> INTERESTED",
        "clear-wake-late": "the IO thread clears the scheduled bit after the pull",
        "notify-all": "notifyConsumers notifies every interested consumer",
        "no-priority-check": "no noHigherPriorityWithCredit check",
        "acquire-no-cas": "acquire does not re-check that the entry is still available",
        "handover-only-if-notified": "small, budget 2: a removal hands over only a Notified consumer's wake-up "
        "(the rule before issue 16)",
        "expiry": "small, the housekeeping thread / management deletes entries (deleteEntry, acquireOrSteal)",
        "reject": "small, a consuming connection's IO thread rejects an entry it holds",
        "groups-shared": "small, both messages in one group, shared groups (DefinedGroupMessageGroupManager)",
        "groups-assigned": "small, both messages in one group, standard groups (AssignedConsumerMessageGroupManager)",
        "all-actors": "small with every actor: held, expiry / delete, reject, one shared group of both messages",
        "all-actors-assigned": "small with every actor: held, expiry / delete, reject, standard groups (m0 grouped, "
        "m1 not)",
        "upstream-delete": "expiry, upstream deleteEntry: notifies nobody",
        "upstream-group-acquire": "expiry and one shared group, upstream assignMessage: the group stays with a "
        "consumer whose acquire failed",
        "upstream-shared-group-closed": "one shared group, upstream acceptMessage: a consumer closed while it "
        "pulled still takes a group",
        "upstream-assigned-group-closed": "one standard group, upstream acceptMessage: a consumer closed while it "
        "pulled is assigned the group for ever",
        "upstream-all-actors": "all-actors with upstream's rules for removal, deletes and group assignment",
    }
