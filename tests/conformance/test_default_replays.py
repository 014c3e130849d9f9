"""The commands' defaults are clean (issue 32): the default replay of every system -- its reference
configuration, every default, expiry while held on for ordered consumption -- conforms.

``conq replay <model> --impl reference --master local[2]`` replays 10,000 traces per system with 0
divergences (the figures of issue 32's closing note); here the same traces' first blocks, in
process (``replay_blocks``: the per-trace work of a Spark task, no Spark), a count small enough for
CI.  The generator and the checker are the command's own, so a default that diverges shows here."""

from __future__ import annotations

import pytest

from conq.conformance.spark_replay import BLOCK, ReplayParams, replay_blocks

#: traces per system: the first two blocks of the command's default run (seed 0)
TRACES = 2 * BLOCK


@pytest.mark.parametrize("model", ["consumer-lists", "ordered-consumption", "recovery-deferral"])
def test_the_default_replay_of_every_system_conforms(model):
    params = ReplayParams(model=model, traces=10_000)  # the command's defaults: reference, seed 0, length 30
    rows = [r for r in replay_blocks(params, range(TRACES // BLOCK)) if r[0] == "trace"]
    assert len(rows) == TRACES
    bad = [(r[1], r[7], r[8]) for r in rows if not r[4]]
    assert not bad, bad
    assert sum(r[3] for r in rows) > TRACES * 5  # the walks run, they do not stop at once
