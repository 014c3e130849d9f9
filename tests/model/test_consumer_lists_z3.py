"""The z3 encoding of consumer-lists (model/consumer_lists_z3.py): every always
property proved inductive for unbounded sizes on the reference switches; BMC
agreeing with the explorer on the variant's state-encodable violation (same
property, same length); the encoding faithful to the executable model
(hypothesis: random reachable states, every concrete action)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conq import manifest
from conq.conformance.generate import random_walk
from conq.model import symbolic
from conq.model.consumer_lists_z3 import ConsumerListsEncoding
from conq.model.explorer import explore
from conq.model.kernel import Kind
from conq.model.registry import load_model

NAME = "consumer-lists"


def model(cfg: str = "reference"):
    return load_model(NAME, cfg)


# -- (a) unbounded proofs ------------------------------------------------------------------
def test_every_always_property_is_proved_for_every_size():
    m = model()
    enc = symbolic.encoding_for(m)
    assert isinstance(enc, ConsumerListsEncoding)
    always = {p.name for p in m.property_list() if p.kind is Kind.ALWAYS}
    assert always <= set(enc.invariants())  # every always property encoded, under its own name
    results = symbolic.prove_all(enc, m)
    assert {r.prop: r.status for r in results} == {p: "proved" for p in always}, [r.detail for r in results]
    for r in results:
        assert r.strengthened_with == enc.strengthening.get(r.prop, [])
    assert enc.bounded_only == {}


def test_acquire_cas_proves_acquired_at_most_once_for_every_size():
    """The always-step property, as the state invariant over the history ghost."""
    assert symbolic.prove(ConsumerListsEncoding(model().config), "acquired-at-most-once").status == "proved"
    bad = ConsumerListsEncoding(model("acquire-no-cas").config)
    assert symbolic.prove(bad, "acquired-at-most-once").status == "not-inductive"
