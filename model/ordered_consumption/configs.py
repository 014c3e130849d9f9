"""The named configurations of the ordered-consumption model: what each one switches and why
(the manifest in spec/manifest/ pins the expected result of each)."""

from __future__ import annotations

from typing import Any

from .state import (
    OCConfig,
)


def _only(**kw: Any) -> OCConfig:
    roles = {"producer": False, "push_standard": False, "push_fifo": False, "simple": False}
    roles.update({k: v for k, v in kw.items() if k in roles})
    rest = {k: v for k, v in kw.items() if k not in roles}
    return OCConfig(**roles, **rest)


#: the broker as seed 001's flows assume it: invisible time never runs out while the client holds a
#: message, every answer is OK or a plain retriable error, no rebalance, FIFO re-consumption at once,
#: no server gate.  The mutants and the variants about other rules run against it, so that their
#: counterexamples show their own fault and nothing else.
SEED_BROKER = dict(expiry_while_held=False, server_faults=False, rebalance=False, retry_delay=False, server_gate=False)


def _seed(**kw: Any) -> OCConfig:
    return _only(**{**SEED_BROKER, **kw})


#: each variant of a seed rule switches on only the broker behaviour its counterexample needs
_EXPIRY = dict(SEED_BROKER, expiry_while_held=True, server_gate=True)


_CONFIGS: dict[str, tuple[OCConfig, str]] = {
    "reference": (OCConfig(), "all four roles, reference rules, against every answer and event of the broker "
                              "(disjoint union; the reference)"),
    "producer": (_only(producer=True), "producer only, seed rules"),
    "push-standard": (_only(push_standard=True), "push consumer, standard mode, against the full broker"),
    "push-fifo": (_only(push_fifo=True), "push consumer, FIFO mode: the seed's dispatcher lock, the server gate, "
                                         "a rejected settle given up and its outcome remembered; full broker"),
    "push-fifo-shared-group": (
        _only(push_fifo=True, consumers=2, cache_messages=8, cache_bytes=8, **_EXPIRY),
        "two push consumers sharing one FIFO consumer group (issue 19, unit PF2): each its own process queues and "
        "copies, the broker's per-group state (visibility, delivery counts, receipt handles, the gate) shared, every "
        "queue assigned to both; reference FIFO rules; seed broker with the gate and invisible time that may run "
        "out; cache 8 messages / 8 bytes per consumer",
    ),
    "simple": (_only(simple=True), "simple consumer, seed rules, against the full broker"),
    "simple-any-queue": (
        _only(simple=True, simple_any_queue=True),
        "upstream Python client 5.1.2 (rocketmq/v5/consumer/simple_consumer.py __select_topic_queue): each "
        "receive asks any queue, not round-robin; full broker",
    ),
    "producer-upstream": (
        _only(producer=True, txn_retries=True),
        "upstream since 2024: transactional sends retried (violates txn-single-attempt)",
    ),
    "producer-upstream-python": (
        _only(producer=True, txn_retries=True, throttle_ends_send=True),
        "upstream Python client 5.1.2: transactional sends retried, and a throttled answer ends the send "
        "(violates txn-single-attempt and throttled-send-retried)",
    ),
    "push-standard-upstream": (
        _only(push_standard=True, erase_after_settle=True, settle_retry=True, rebalance=False),
        "upstream standard mode: settle retried until OK or a non-retriable answer, erased from the cache only "
        "once settled; full broker but no rebalance",
    ),
    "push-fifo-upstream": (
        _only(push_fifo=True, client_lock=False, **{**SEED_BROKER, "server_gate": True, "server_faults": True}),
        "upstream FIFO: no dispatcher lock, the server withholds the next message until settled; seed broker "
        "with the server's faults (a lost ack answer lets the next message start while the ack is repeated)",
    ),
    "push-fifo-settle-until-success": (
        _only(push_fifo=True, settle_until_success=True, **_EXPIRY),
        "seed FIFO steps 6 and 8 literally: ack / DLQ repeated until success even after INVALID_RECEIPT_HANDLE "
        "(the process queue stays locked for ever); invisible time may run out",
    ),
    "push-fifo-lock-only": (
        _only(push_fifo=True, **{**_EXPIRY, "server_gate": False}),
        "seed FIFO order by the dispatcher lock alone, no server gate: after a rejected settle the next message "
        "is consumed before the earlier one is settled; invisible time may run out",
    ),
    "push-fifo-no-memo": (
        _only(push_fifo=True, remember_outcome=False, msg_queue=(0,), msg_size=(1,), **_EXPIRY),
        "a rejected settle given up and the redelivery consumed again (no remembered outcome): one consumption "
        "too many; one message, invisible time may run out",
    ),
    "push-fifo-memo-per-queue": (
        _only(push_fifo=True, memo_survives_drop=False, msg_queue=(0,), msg_size=(1,), **{**_EXPIRY, "rebalance": True}),
        "the remembered outcome kept in the process queue and lost when a rebalance drops it: the redelivery to "
        "the queue's new process queue is consumed again; one message, invisible time may run out, rebalance",
    ),
    "push-fifo-dlq-exceeds": (
        _seed(push_fifo=True, dlq_when_exceeds=True),
        "seed read literally: DLQ only once the count exceeds the maximum (one consumption too many); seed broker",
    ),
    "mutant-producer-ignore-backoff": (
        _only(producer=True, ignore_backoff=True),
        "fault: throttled sends retried at once",
    ),
    "mutant-producer-fifo-rotates": (
        _only(producer=True, fifo_rotates=True),
        "fault: FIFO messages rotated off their group's queue",
    ),
    "mutant-producer-skip-type-check": (
        _only(producer=True, skip_type_check=True),
        "fault: message type not checked before sending",
    ),
    "mutant-push-ignore-bytes": (
        _seed(push_standard=True, ignore_bytes=True),
        "fault: the receive loop ignores the byte threshold; seed broker",
    ),
    "mutant-fifo-no-lock": (
        _seed(push_fifo=True, client_lock=False),
        "fault: FIFO without the seed's lock and without the upstream server gate; seed broker",
    ),
    "mutant-fifo-unlock-no-signal": (
        _seed(push_fifo=True, unlock_signals=False),
        "fault: unlocking does not signal the dispatcher (a lost wake-up); seed broker",
    ),
    "mutant-standard-client-dlq": (
        _seed(push_standard=True, standard_client_dlq=True),
        "fault: standard mode dead-letters on the client; seed broker",
    ),
    "mutant-simple-retry": (
        _seed(simple=True, simple_retry=True, simple_threads=1),
        "fault: the simple consumer retries a failed request internally (one application thread); seed broker",
    ),
}


def named_configs() -> dict[str, OCConfig]:
    return {k: v[0] for k, v in _CONFIGS.items()}


def descriptions() -> dict[str, str]:
    return {k: v[1] for k, v in _CONFIGS.items()}
