"""The named configurations of the consumer-lists model: what each one switches and why
(the manifest in spec/manifest/ pins the expected result of each)."""

from __future__ import annotations

from .state import (
    ConsumerListsConfig,
    PullRule,
)


def named_configs() -> dict[str, ConsumerListsConfig]:
    c = ConsumerListsConfig
    small = dict(consumers=((2, True), (1, True)), messages=2)
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
    }
