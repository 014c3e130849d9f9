"""Adapters: how the checker drives an implementation.

* :class:`InProcess` wraps a *driver*: a class in ``conformance/`` that maps a
  model's actions onto an implementation's API and reports observations in the
  model's vocabulary.  The reference implementation is driven this way, under
  its deterministic scheduler, so a run replays exactly from its seed.
* :class:`Stdio` speaks the port protocol (``conformance/protocol.py``) with a
  child process, for ports in any language.  Every response has a deadline; a
  port that crashes, hangs, or writes garbage gets a clear
  :class:`PortFailure` naming the step, the request, the problem and the tail
  of that process's stderr, never a hang.  A port that failed is ended at once
  and never spoken to again: the next :meth:`Stdio.start` starts a fresh one.

Every port runs in a process group (a session) of its own, and conq ends the
whole group -- the port and anything it started -- on a failure, on
:meth:`Stdio.close`, at interpreter exit and when conq is told to stop
(SIGINT, or SIGTERM, which becomes a clean exit while ports are alive).

A driver class has ``__init__(config: dict, seed: int)``, ``do(action) ->
observation`` (raising :class:`ActionRejected` when the action's precondition
does not hold) and optionally ``snapshot() -> observed state`` and ``observed() ->
hashable(snapshot())``, the same value built without the JSON-shaped detour (preferred when present).

The code: conformance/inprocess.py (the shared types, :class:`InProcess`, the echoes) and
conformance/stdio.py (ports over stdio); this module is the name callers import.
"""

from __future__ import annotations

from .inprocess import (  # noqa: F401 - the adapters, by one name
    ActionRejected, ECHO_LIMIT, Implementation, InProcess, PortFailure, REJECTED, _clip, _clip_text,
    load_class, reference, short_repr,
)
from .stdio import (  # noqa: F401 - the adapters, by one name
    CLOSE_GRACE, DEFAULT_MAX_LINE_BYTES, FAILURE_GRACE, MAX_LINE_ENV, ReplyReader, SPIN_SECONDS, Stdio,
    TERM_GRACE, _PortProcess, _no_constants, default_max_line_bytes, parse_reply, sigterm_exits, terminating,
)
