"""Recovery deferral (odds-feed SDK concurrent listener, seed 004): demultiplexing by event id,
the task lifecycle tracker, ProducerUp deferred until its recovery's tasks completed.

``state`` is the vocabulary (status codes, callback kinds, policy switches, configuration
record), ``model`` the executable model, ``properties`` its named claims, ``configs`` its named
configurations, ``z3_encoding`` the symbolic encoding for ``conq prove``.
"""

from .model import RecoveryDeferralModel
from .state import ErrorRouting, IndexMod, NoContextProducerUp, OnQueueFull, RecoveryDeferralConfig

__all__ = ["ErrorRouting", "IndexMod", "NoContextProducerUp", "OnQueueFull", "RecoveryDeferralConfig", "RecoveryDeferralModel"]
