"""Progress lines (conq/progress.py): a pipe gets one plain line per interval of the given clock."""

from __future__ import annotations

import io

from rich.console import Console

from conq.model.engines.results import SearchProgress
from conq.progress import Progress


def test_piped_progress_writes_a_plain_line_per_interval():
    now = [0.0]
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    with Progress("model-check", console, total=3, clock=lambda: now[0]) as p:
        assert not p.live
        p.update("consumer-lists / reference", done=1)
        assert buf.getvalue() == ""  # within the first interval: quiet
        now[0] = 10.5
        p.update(advance=1)
        now[0] = 12.0
        p.search("consumer-lists / all-actors")(SearchProgress(1234, 5000, 7, 2.0, None))
        now[0] = 21.0
        p.update("ordered-consumption / push-fifo")
    lines = buf.getvalue().splitlines()
    assert lines == ["conq: model-check 2/3: consumer-lists / reference (10 s)",
                     "conq: model-check 2/3: ordered-consumption / push-fifo (21 s)"]
    assert p.lines == 2


def test_json_output_is_never_live_even_on_a_terminal():
    console = Console(file=io.StringIO(), force_terminal=True)
    assert Progress("x", console, json_out=True).live is False
    assert Progress("x", console).live is True
