"""Fixtures of the upstream-client tests: nothing of a run may outlive it.

``no_leftovers`` (autouse) fails a test that leaves a thread of this process running or a child
process alive (the worker runs the real client in a child process: ``runner.run`` must have reaped
it).  The time bound is only a safety cap for threads that are finishing; it fails loudly.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest


def _children() -> set[int]:
    pid = os.getpid()
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out |= {int(x) for x in (task / "children").read_text().split()}
        except OSError:
            pass
    return out


@pytest.fixture(autouse=True)
def no_leftovers():
    threads = set(threading.enumerate())
    children = _children()
    yield
    # a thread that is finishing gets the safety cap, not a verdict: a loaded machine may be slow
    deadline = time.monotonic() + 30.0
    while True:
        left = [t for t in threading.enumerate() if t not in threads and t.is_alive()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert not left, f"threads left running: {[t.name for t in left]}"
    assert _children() <= children, f"child processes left: {sorted(_children() - children)}"
