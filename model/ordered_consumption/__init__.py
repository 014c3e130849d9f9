"""Ordered consumption (RocketMQ thin client, seed 001): producer, push consumer (standard and
FIFO), simple consumer.

``state`` is the vocabulary (roles, phases, message states, configuration record), ``model`` the
executable model, ``properties`` its named claims, ``configs`` its named configurations,
``z3_encoding`` the symbolic encoding for ``conq prove``.
"""

from .model import OrderedConsumptionModel
from .state import OCConfig

__all__ = ["OCConfig", "OrderedConsumptionModel"]
