"""Issue 14: the PROD, PUSH, FIFO and SIMPLE requirements name implementation tests as well as model
checks.  ``tests/test_catalog.py`` proves that every named check exists; this proves that each of
these requirements names both kinds."""

from __future__ import annotations

import pytest

from conq import catalog

AREAS = ("PROD", "PUSH", "FIFO", "SIMPLE")


def _is_model_check(check: str) -> bool:
    return check.startswith(("ordered-consumption:", "prove:ordered-consumption:", "tests/model/ordered_consumption/"))


@pytest.mark.parametrize("area", AREAS)
def test_every_requirement_names_an_implementation_test_and_a_model_check(area):
    (a,) = [a for a in catalog.load() if a.id == area]
    assert a.requirements, area
    missing = [(r.id, kind) for r in a.requirements
               for kind, ok in (("implementation test", any(c.startswith("tests/impl/ordered_consumption/")
                                                            for c in r.checks)),
                                ("model check", any(_is_model_check(c) for c in r.checks)))
               if not ok]
    assert missing == [], missing
