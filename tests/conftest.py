"""Suite-wide settings: no verdict may depend on the clock or on the machine's load.

Hypothesis' defaults do (a 200 ms per-example deadline, "too slow" health checks, a fresh random
seed each run): the ``conq`` profile turns them off and derandomizes, so every property test spends
a fixed count of examples and gives the same verdict on a loaded 2-core machine as on an idle one.
Tests that pass their own ``settings(...)`` inherit everything they do not set from this profile.
"""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "conq",
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile("conq")


def descendants(pid: int) -> set[int]:
    """Every process under ``pid`` now (children, their children, ...), read from /proc."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = {int(x) for x in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += list(kids - out)
            out |= kids
    return out


@pytest.fixture
def process_tree():
    """``descendants(pid)``: the processes under ``pid`` (for the tests that nothing is left behind)."""
    return descendants
