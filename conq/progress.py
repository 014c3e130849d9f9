"""Progress of a long command, wherever its output goes.

On a terminal: a live line (rich) with what is being done, how far, and the time so far.  When
stderr is piped (CI logs, ``| tee``) or under ``--json``: a plain line to stderr every
``interval`` seconds (10 by default; TLC prints one a minute), so a log shows a command is alive
and where it is.  The clock only paces these lines: no result depends on it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from rich.console import Console

#: seconds between two plain progress lines
INTERVAL = 10.0


class Progress:
    """One long command's progress.  ``update`` as often as you like: a terminal shows every
    update; a pipe gets at most one line per ``interval``.  Use as a context manager."""

    def __init__(self, title: str, console: Console, *, json_out: bool = False, total: int | None = None,
                 interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic,
                 live: bool | None = None, heartbeat: bool = False):
        self.title = title
        self.console = console
        self.total = total
        self.done = 0
        self.text = ""
        self.interval = interval
        self.clock = clock
        self.live = (console.is_terminal and not json_out) if live is None else live
        self._t0 = clock()
        self._last = self._t0
        self._bar: Any = None
        self._task: Any = None
        #: the plain lines written (for a test; a terminal's live line is not counted)
        self.lines = 0
        #: piped: also write the current line every interval when nothing updates it (a thread)
        self.heartbeat = heartbeat
        self._beat: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def __enter__(self) -> "Progress":
        if not self.live and self.heartbeat:
            # a long step that reports nothing still shows in a log: the current line, every interval
            self._stop = threading.Event()
            self._beat = threading.Thread(target=self._beating, name="conq-progress", daemon=True)
            self._beat.start()
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, SpinnerColumn, TextColumn, TimeElapsedColumn

            columns: list = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:
                columns += [BarColumn(), MofNCompleteColumn()]
            columns += [TextColumn("{task.fields[text]}"), TimeElapsedColumn()]
            self._bar = Bar(*columns, console=self.console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=self.total, text="")
        return self

    def _beating(self) -> None:
        while not self._stop.wait(min(self.interval / 4, 0.5)):
            with self._lock:
                now = self.clock()
                if now - self._last >= self.interval:
                    self._last = now
                    self.plain_line(now)

    def __exit__(self, *exc: Any) -> None:
        if self._beat is not None:
            self._stop.set()
            self._beat.join()
            self._beat = None
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def update(self, text: str | None = None, *, done: int | None = None, advance: int = 0) -> None:
        if text is not None:
            self.text = text
        if done is not None:
            self.done = done
        self.done += advance
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, text=self.text)
            return
        with self._lock:
            now = self.clock()
            if now - self._last >= self.interval:
                self._last = now
                self.plain_line(now)

    def plain_line(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        part = f" {self.done}/{self.total}" if self.total is not None else ""
        text = f": {self.text}" if self.text else ""
        self.console.print(f"conq: {self.title}{part}{text} ({now - self._t0:,.0f} s)", markup=False, highlight=False,
                           soft_wrap=True)
        self.lines += 1

    def search(self, label: str = "") -> Callable[[Any], None]:
        """A callback for the explorer's ``progress`` (a :class:`SearchProgress` about twice a
        second): states, depth, rate and memory, after ``label``."""

        def tick(p: Any) -> None:
            rate = p.states / p.seconds if p.seconds > 0 else 0.0
            mem = f", {p.rss_bytes / 2**20:,.0f} MB" if getattr(p, "rss_bytes", None) is not None else ""
            self.update(f"{label}{': ' if label else ''}{p.states:,} states, depth {p.depth}, {rate:,.0f} states/s{mem}")

        return tick
