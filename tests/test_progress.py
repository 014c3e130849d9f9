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


def test_a_heartbeat_shows_a_step_that_reports_nothing():
    import threading

    now = [0.0]
    buf = io.StringIO()
    done = threading.Event()
    console = Console(file=buf, width=200, force_terminal=False)
    with Progress("conformance", console, clock=lambda: now[0], interval=10.0, heartbeat=True) as p:
        p.update("consumer-lists against the reference")
        now[0] = 25.0  # a long silent step: the heartbeat thread writes the line (it polls every interval/4 s)
        p.interval = 0.04  # (shorten the thread's poll for the test; the clock decides when a line is due)
        for _ in range(500):
            if p.lines:
                break
            done.wait(0.01)
    assert buf.getvalue().splitlines()[0] == "conq: conformance: consumer-lists against the reference (25 s)"
