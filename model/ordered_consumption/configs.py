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


_CONFIGS: dict[str, tuple[OCConfig, str]] = {
    "reference": (OCConfig(), "all four roles as the seed describes them (disjoint union; the reference)"),
    "producer": (_only(producer=True), "producer only, seed rules"),
    "push-standard": (_only(push_standard=True), "push consumer, standard mode, seed rules"),
    "push-fifo": (_only(push_fifo=True), "push consumer, FIFO mode with the seed's dispatcher lock"),
    "simple": (_only(simple=True), "simple consumer, seed rules"),
    "producer-upstream": (
        _only(producer=True, txn_retries=True),
        "upstream since 2024: transactional sends retried (violates txn-single-attempt)",
    ),
    "push-standard-upstream": (
        _only(push_standard=True, erase_after_settle=True, settle_retry=True),
        "upstream standard mode: settle retried until OK, erased from the cache only once settled",
    ),
    "push-fifo-upstream": (
        _only(push_fifo=True, client_lock=False, server_gate=True),
        "upstream FIFO: no dispatcher lock, the server withholds the next message until settled",
    ),
    "push-fifo-dlq-exceeds": (
        _only(push_fifo=True, dlq_when_exceeds=True),
        "seed read literally: DLQ only once the count exceeds the maximum (one consumption too many)",
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
        _only(push_standard=True, ignore_bytes=True),
        "fault: the receive loop ignores the byte threshold",
    ),
    "mutant-fifo-no-lock": (
        _only(push_fifo=True, client_lock=False),
        "fault: FIFO without the seed's lock and without the upstream server gate",
    ),
    "mutant-fifo-unlock-no-signal": (
        _only(push_fifo=True, unlock_signals=False),
        "fault: unlocking does not signal the dispatcher (a lost wake-up)",
    ),
    "mutant-standard-client-dlq": (
        _only(push_standard=True, standard_client_dlq=True),
        "fault: standard mode dead-letters on the client",
    ),
    "mutant-simple-retry": (
        _only(simple=True, simple_retry=True, simple_threads=1),
        "fault: the simple consumer retries a failed request internally (one application thread)",
    ),
}


def named_configs() -> dict[str, OCConfig]:
    return {k: v[0] for k, v in _CONFIGS.items()}


def descriptions() -> dict[str, str]:
    return {k: v[1] for k, v in _CONFIGS.items()}
