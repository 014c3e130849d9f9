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

from . import systems


def call_view(model: Model) -> Model:
    """The call-level view of ``model``: its system's ``call_view`` (conformance/systems.py), or the
    model itself when its actions are already calls (or no system declares it)."""
    system = systems.find(model.name)
    wrap = system.load("call_view") if system is not None else None
    return wrap(model) if wrap is not None else model


def has_call_view(name: str) -> bool:
    """Whether the system ``name`` declares a call-level view."""
    return name in systems.names("call_view")


def conformance_model(name: str, config_name: str | None = None, overrides: Mapping[str, Any] | None = None) -> Model:
    """The model (call-level view) an implementation of ``name`` is checked against."""
    systems.discover()  # a system of its own brings its model to the model registry
    return call_view(load_model(name, config_name, overrides))
