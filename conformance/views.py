"""Which model an implementation is held to.

An implementation is driven one API call at a time, so it is held to the
model at the granularity of its calls.  A model whose actions are already
calls is used as it is; a model that splits calls into the atomic steps of
concurrent threads (for the explorer's sake) is wrapped in a call-level view
here, the one place where model and implementation meet.
"""

from __future__ import annotations

from typing import Any, Mapping

from conq.model.kernel import Model
from conq.model.engines.registry import load_model


def _consumer_lists(model: Model) -> Model:
    from .consumer_lists.calls import ConsumerListsCalls

    return ConsumerListsCalls(model)


#: model name -> wrapper giving its call-level view
VIEWS = {"consumer-lists": _consumer_lists}
VIEWS["recovery-deferral"] = lambda model: __import__("conq.conformance.recovery_deferral.calls", fromlist=["*"]).RecoveryDeferralCalls(model)
VIEWS["ordered-consumption"] = lambda model: __import__("conq.conformance.ordered_consumption.calls", fromlist=["*"]).OrderedConsumptionCalls(model)


def call_view(model: Model) -> Model:
    wrap = VIEWS.get(model.name)
    return wrap(model) if wrap else model


def conformance_model(name: str, config_name: str | None = None, overrides: Mapping[str, Any] | None = None) -> Model:
    """The model (call-level view) an implementation of ``name`` is checked against."""
    return call_view(load_model(name, config_name, overrides))
