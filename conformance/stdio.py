"""Ports over stdio: :class:`Stdio` speaks the port protocol (conformance/protocol.py) with a child
process in a process group of its own, framing its replies (:class:`ReplyReader`, bounded lines),
parsing them (:func:`parse_reply`), with a deadline on every response, and ending the whole group
on a failure, at close, at interpreter exit and when conq is told to stop (SIGTERM becomes a clean
exit while ports are alive: :func:`sigterm_exits`).  conformance/adapters.py is the one name
callers import.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Iterator

from . import protocol
from .trace import hashable, jsonable
from .inprocess import PortFailure, REJECTED, _clip, _clip_text, short_repr


#: default cap on one line a port writes (one reply); raise it with ``Stdio(max_line_bytes=...)``
#: or the environment variable below
DEFAULT_MAX_LINE_BYTES = protocol.MAX_LINE_BYTES
MAX_LINE_ENV = "CONQ_PORT_MAX_LINE_BYTES"

#: seconds a failed port gets to exit by itself once its stdin is closed, before SIGTERM
FAILURE_GRACE = 1.0
#: seconds a port gets to exit after ``shutdown_ok`` (or EOF) at close, before SIGTERM
CLOSE_GRACE = 1.0
#: seconds between SIGTERM and SIGKILL to the port's process group
TERM_GRACE = 1.0


def default_max_line_bytes() -> int:
    raw = os.environ.get(MAX_LINE_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_LINE_BYTES
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{MAX_LINE_ENV}={raw!r}: expected a positive number of bytes")
    return value


def _too_long(size: int, limit: int) -> str:
    return (
        f"a response line of more than {limit:,} bytes (read {size:,} so far), the limit on one port message; "
        f"raise it with the environment variable {MAX_LINE_ENV}=BYTES or Stdio(max_line_bytes=BYTES)"
    )


class ReplyReader:
    """Frames a port's stdout into lines: linear in the bytes read (each byte
    is scanned for the newline once), and no line may exceed ``max_line_bytes``
    (the reader fails as soon as the line under construction does, without
    reading the rest)."""

    def __init__(self, max_line_bytes: int | None = None):
        self.max_line_bytes = max_line_bytes if max_line_bytes is not None else default_max_line_bytes()
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no newline

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk

    @property
    def buffered(self) -> bytes:
        """Bytes read and not yet taken as a line (a partial line, or output nobody asked for)."""
        return bytes(self._buf)

    def pending(self) -> bool:
        """Whether any bytes are :attr:`buffered` (without copying them)."""
        return bool(self._buf)

    def take_line(self) -> bytes | None:
        """The next complete line (without its newline), None when no line is complete yet;
        :class:`PortFailure` when the line exceeds the cap."""
        i = self._buf.find(b"\n", self._scanned)
        if i < 0:
            self._scanned = len(self._buf)
            if len(self._buf) > self.max_line_bytes:
                raise PortFailure(_too_long(len(self._buf), self.max_line_bytes), code="bad-reply")
            return None
        if i > self.max_line_bytes:
            raise PortFailure(_too_long(i, self.max_line_bytes), code="bad-reply")
        line = bytes(self._buf[:i])
        del self._buf[: i + 1]
        self._scanned = 0
        return line


#: how long ``_PortProcess.read_line`` polls for a reply before it blocks (see ``_spin_read``);
#: none on a single CPU
SPIN_SECONDS = 100e-6 if (os.cpu_count() or 1) > 1 else 0.0


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: one decoder for every reply (``json.loads`` with a keyword argument builds a new one per call)
_DECODER = json.JSONDecoder(parse_constant=_no_constants)
#: reply type -> its required fields beside ``type`` and ``id``, for the replies whose other fields
#: are all of any type (``parse_reply``'s fast path: the presence of those is all there is to check)
_ANY_FIELDS = {m.type: tuple(f.name for f in m.fields if f.name != "id" and f.required)
               for m in protocol.MESSAGES
               if m.sender == "port" and m.type != "error"
               and all(f.type == "any" or (f.name == "id" and f.type == "integer" and f.required) for f in m.fields)}


def parse_reply(raw: bytes, kind: str, request_id: int) -> dict[str, Any]:
    """One line a port wrote in response to a ``kind`` request with this id:
    the reply (``<kind>_ok`` or ``error``, well-formed), or :class:`PortFailure`
    saying what is wrong with it.  Nothing else is ever raised."""
    what = f"response to {kind}"
    try:
        text = (raw if type(raw) is bytes else bytes(raw)).decode("utf-8")
    except UnicodeDecodeError as e:
        raise PortFailure(f"the {what} is not UTF-8 (invalid byte at offset {e.start}): {_clip(raw)}", code="bad-reply") from None
    try:
        # json.loads, without building a decoder per call (it refuses a BOM before decoding)
        reply = _DECODER.decode(text) if not text.startswith("\ufeff") else json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise PortFailure(f"invalid JSON in {what}: {e.msg} (column {e.colno}): {_clip(raw)}", code="bad-reply") from None
    except (ValueError, RecursionError) as e:  # NaN, a too-long integer, nesting deeper than the parser goes
        raise PortFailure(f"invalid JSON in {what}: {_clip_text(str(e) or type(e).__name__, 200)}: {_clip(raw)}",
                          code="bad-reply") from None
    expected = protocol.BY_TYPE[kind].reply
    # the hot path: the expected reply with this request's id and every field it needs (of any
    # type) is well-formed; the general checks below would accept it too
    if type(reply) is dict and reply.get("type") == expected:
        rid = reply.get("id")
        need = _ANY_FIELDS.get(expected)
        if type(rid) is int and rid == request_id and need is not None and all(f in reply for f in need):
            return reply
    problem = protocol.validate(reply, "port")
    if problem:
        raise PortFailure(f"malformed {what}: {_clip_text(problem, 300)}: {_clip(raw)}", code="bad-reply")
    if reply["id"] != request_id:
        raise PortFailure(f"stale or stray {what}: it has id {short_repr(reply['id'], 40)}, the request has id {request_id}: {_clip(raw)}",
                          code="protocol")
    if reply["type"] not in (expected, "error"):
        raise PortFailure(f"expected {expected} or error in {what}, got {reply['type']}", code="protocol")
    return reply


# SIGTERM while ports are alive: a clean exit (SystemExit), so that `finally` blocks and
# atexit handlers end the ports' process groups and remove partial output.
_terminating = False  # set once SIGTERM was received: cleanup goes straight to the point
_sig_lock = threading.Lock()
_sig_users = 0
_sig_previous: Any = None


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminating
    if _terminating:
        return  # already on the way out: let the cleanup finish
    _terminating = True
    try:
        sys.stderr.write("conq: terminated (SIGTERM); ending ports and removing partial output\n")
        sys.stderr.flush()
    except Exception:
        pass
    raise SystemExit(128 + signum)


def terminating() -> bool:
    """True once SIGTERM was received (and turned into a clean exit)."""
    return _terminating


def _hold_sigterm() -> bool:
    """Make SIGTERM a clean exit until the matching :func:`_release_sigterm`.  A
    handler someone else installed is left alone.  Only the main thread can
    install handlers; elsewhere this is a no-op (False)."""
    global _sig_users, _sig_previous
    if threading.current_thread() is not threading.main_thread():
        return False
    with _sig_lock:
        if _sig_users == 0:
            current = signal.getsignal(signal.SIGTERM)
            if current is not signal.SIG_DFL and current is not _on_sigterm:
                return False
            _sig_previous = current
            signal.signal(signal.SIGTERM, _on_sigterm)
        _sig_users += 1
        return True


def _release_sigterm() -> None:
    global _sig_users
    with _sig_lock:
        _sig_users -= 1
        if _sig_users == 0 and not _terminating and signal.getsignal(signal.SIGTERM) is _on_sigterm:
            try:
                signal.signal(signal.SIGTERM, _sig_previous if _sig_previous is not None else signal.SIG_DFL)
            except ValueError:  # not the main thread: the handler stays (it only makes exits clean)
                pass


@contextmanager
def sigterm_exits() -> Iterator[None]:
    """Within this block, SIGTERM raises SystemExit(143) in the main thread (when no
    other handler is installed), so cleanup code runs."""
    held = _hold_sigterm()
    try:
        yield
    finally:
        if held:
            _release_sigterm()


#: port processes started by this interpreter and not yet ended (atexit ends them)
_LIVE: set["_PortProcess"] = set()
_atexit_registered = False


def _end_all_ports() -> None:
    me = os.getpid()
    for p in list(_LIVE):
        if p.owner == me:  # never a forked child's copy of its parent's ports
            try:
                p.end(grace=0.0)
            except BaseException:
                pass


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class _Problem(Exception):
    """Internal: the transport failed (kind: timeout | eof | closed)."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


class _PortProcess:
    """One port process, in a session (and process group) of its own, with its
    pipes, its stdout line reader and the tail of its stderr."""

    def __init__(self, args: list[str], cwd: str | None, max_line_bytes: int, stderr_lines: int):
        global _atexit_registered
        if not _atexit_registered:
            atexit.register(_end_all_ports)
            _atexit_registered = True
        self.popen = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, bufsize=0, start_new_session=True,
        )
        _LIVE.add(self)
        self.pid = self.pgid = self.popen.pid
        self.owner = os.getpid()
        self.how: str | None = None  # how it ended, once it has
        self.reader = ReplyReader(max_line_bytes)
        self.stderr: deque[str] = deque(maxlen=stderr_lines)
        self._err = bytearray()
        self._in = self.popen.stdin.fileno()
        os.set_blocking(self._in, False)
        self._out = self.popen.stdout.fileno()
        os.set_blocking(self._out, False)  # read_line's short spin reads it without blocking
        self._errfd = self.popen.stderr.fileno()
        self.out_open = True
        self._discarding = False  # once the port is being ended, its stdout is read and dropped
        self.sel = selectors.DefaultSelector()
        self.sel.register(self._out, selectors.EVENT_READ, "out")
        self.sel.register(self._errfd, selectors.EVENT_READ, "err")

    # -- state ------------------------------------------------------------------------------
    def exit_status(self) -> int | None:
        """The port's exit status once it has ended, else None.  The process is not
        reaped (WNOWAIT), so its id, which is also its group's, stays reserved
        until the group has been ended."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        if hasattr(os, "waitid"):
            try:
                r = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return self.popen.poll()
            if r is None:
                return None
            return r.si_status if r.si_code == os.CLD_EXITED else -r.si_status
        return self.popen.poll()

    def members(self) -> list[int]:
        """Live processes of the port's group or session (the port and whatever it started)."""
        try:
            names = os.listdir("/proc")
        except OSError:
            if self.popen.returncode is not None:
                return []  # reaped: its group id may belong to someone else now
            try:
                os.killpg(self.pgid, 0)
                return [self.pgid]
            except ProcessLookupError:
                return []
            except PermissionError:
                return [self.pgid]
        out = []
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    data = f.read()
                rest = data[data.rfind(b")") + 2 :].split()
                state, pgrp, session = rest[0], int(rest[2]), int(rest[3])
            except (OSError, IndexError, ValueError):
                continue
            if state not in (b"Z", b"X") and (pgrp == self.pgid or session == self.pgid):
                out.append(int(name))
        return out

    def _signal(self, sig: int) -> None:
        members = self.members()
        if self.popen.returncode is None:  # not reaped: the group id is still ours
            try:
                os.killpg(self.pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in members:  # members that left the group but not the session
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    # -- pipes --------------------------------------------------------------------------------
    def _on_ready(self, key: selectors.SelectorKey) -> None:
        try:
            chunk = os.read(key.fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if key.data == "err":
            if chunk:
                self._take_stderr(chunk)
            else:
                self.sel.unregister(key.fd)
        elif chunk:
            if not self._discarding:
                self.reader.feed(chunk)
        else:
            self.out_open = False
            self.sel.unregister(key.fd)

    def _take_stderr(self, chunk: bytes) -> None:
        self._err += chunk
        if b"\n" in chunk:
            *lines, rest = self._err.split(b"\n")
            self._err = bytearray(rest)
            for line in lines[-self.stderr.maxlen :] if self.stderr.maxlen else lines:
                self.stderr.append(_clip_text(line.decode("utf-8", "replace"), 300))
        if len(self._err) > 4096:  # a very long line without a newline: keep its start
            self.stderr.append(_clip_text(self._err.decode("utf-8", "replace"), 300))
            self._err = bytearray()

    def stderr_tail(self) -> list[str]:
        tail = list(self.stderr)
        if self._err:
            tail.append(_clip_text(self._err.decode("utf-8", "replace"), 300))
        return tail

    def _pump(self, timeout: float) -> None:
        """Read whatever the port writes for up to ``timeout`` s (stdout is read too,
        so a port blocked on a full pipe can move on and exit)."""
        if not self.sel.get_map():
            time.sleep(timeout)
            return
        for key, _ in self.sel.select(timeout):
            self._on_ready(key)

    def write(self, data: bytes, deadline: float) -> None:
        try:  # the common case: the pipe takes the whole request at once
            n = os.write(self._in, data)
        except OSError:  # full (BlockingIOError) or closed: the loop below tells which
            n = 0
        if n == len(data):
            return
        view = memoryview(data)[n:]
        wsel: selectors.BaseSelector | None = None
        try:
            while view:
                try:
                    n = os.write(self._in, view)
                    view = view[n:]
                    continue
                except BlockingIOError:
                    pass
                except OSError:  # EPIPE: the port closed its stdin (exited?)
                    raise _Problem("closed") from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Problem("timeout")
                if wsel is None:
                    # stderr is read meanwhile (a port may block on it); stdout is not: a port that
                    # writes replies nobody asked for instead of reading its requests times out
                    wsel = selectors.DefaultSelector()
                    wsel.register(self._in, selectors.EVENT_WRITE, "in")
                    if self._errfd in self.sel.get_map():
                        wsel.register(self._errfd, selectors.EVENT_READ, "err")
                for key, _ in wsel.select(left):
                    if key.data == "err":
                        self._on_ready(self.sel.get_key(self._errfd))
                        if self._errfd not in self.sel.get_map():  # EOF on stderr
                            wsel.unregister(self._errfd)
        finally:
            if wsel is not None:
                wsel.close()

    def read_line(self, deadline: float) -> bytes:
        spin = SPIN_SECONDS
        while True:
            line = self.reader.take_line()  # PortFailure when over the cap
            if line is not None:
                return line
            if not self.out_open:
                raise _Problem("eof")
            if spin:
                spin = 0.0
                if self._spin_read(SPIN_SECONDS):
                    continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Problem("timeout")
            for key, _ in self.sel.select(left):
                self._on_ready(key)

    def _spin_read(self, seconds: float) -> bool:
        """Poll the port's stdout without blocking for up to ``seconds``; True once it gave bytes
        or EOF.  A port that answers at once answers within tens of microseconds; blocking in
        select() instead lets this CPU go idle, and on a virtual machine waking an idle vCPU costs
        more than the whole answer (measured on the 2-core CI machine: a blocking pipe round trip
        74-90 us, 12,700-13,500/s; with a 100 us spin on the reader's side 48,000-59,000/s).  Bounded,
        and never on one CPU, where spinning would only keep the port from running."""
        end = time.perf_counter() + seconds
        fd = self._out
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                if time.perf_counter() >= end:
                    return False
                continue
            except OSError:
                chunk = b""
            if chunk:
                if not self._discarding:
                    self.reader.feed(chunk)
            else:
                self.out_open = False
                self.sel.unregister(fd)
            return True

    # -- the end --------------------------------------------------------------------------------
    def end(self, grace: float) -> str:
        """End the port and every process of its group and session: EOF on its
        stdin, up to ``grace`` s to exit by itself, then SIGTERM to all of them,
        up to :data:`TERM_GRACE` s, then SIGKILL.  Idempotent; returns how the
        port ended ("exited (status 3)", "was ended by conq (SIGTERM)", ...)."""
        if self.how is not None:
            return self.how
        signalled = False
        self._discarding = True
        try:
            try:
                self.popen.stdin.close()
            except OSError:
                pass
            if grace > 0 and not _terminating:
                deadline = time.monotonic() + grace
                while self.exit_status() is None and time.monotonic() < deadline:
                    self._pump(0.02)
            exited_alone = self.exit_status() is not None
            if self.members() or not exited_alone:
                self._signal(signal.SIGTERM)
                signalled = True
                deadline = time.monotonic() + TERM_GRACE
                while self.members() and time.monotonic() < deadline:
                    self._pump(0.02)
                if self.members() or self.exit_status() is None:
                    self._signal(signal.SIGKILL)
            try:
                code = self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:  # not even SIGKILL ended it (uninterruptible sleep)
                self.how = f"did not end even after SIGKILL (pid {self.pid})"
                return self.how
            if code >= 0:
                self.how = f"exited (status {code})"
            elif signalled and not exited_alone:
                self.how = f"was ended by conq ({_signal_name(-code)})"
            else:
                self.how = f"was killed by {_signal_name(-code)}"
            return self.how
        finally:
            self._drain()
            for f in (self.popen.stdout, self.popen.stderr):
                try:
                    f.close()
                except OSError:
                    pass
            self.sel.close()
            _LIVE.discard(self)

    def _drain(self, cap_bytes: int = 1 << 20, cap_seconds: float = 0.5) -> None:
        """Whatever the ended port still had in its stderr pipe (its last words)."""
        deadline = time.monotonic() + cap_seconds
        got = 0
        try:
            while "err" in {k.data for k in self.sel.get_map().values()} and got < cap_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                for key, _ in self.sel.select(left):
                    if key.data == "err":
                        before = len(self._err)
                        self._on_ready(key)
                        got += max(1, len(self._err) - before)
                    else:
                        self._on_ready(key)
        except (OSError, ValueError, KeyError):
            pass


#: The start of a reply whose ``type`` and ``id`` are its first two members: two replies to the
#: same request type that differ only in the digits of that id are the same reply but for its id,
#: when the rest holds no other ``"type"`` or ``"id"`` member (JSON takes the last of duplicate
#: members) and no escape (a member name spelt with one); then a reply can be told from an earlier
#: one by its rest alone, without decoding it again (only JSON whitespace but the newline is allowed).
_REPLY_HEAD = re.compile(rb'\{[ \t\r]*"type"[ \t\r]*:[ \t\r]*"([a-z_]+)"[ \t\r]*,[ \t\r]*"id"[ \t\r]*:[ \t\r]*'
                         rb'(0|[1-9][0-9]*)(?=[ \t\r]*[,}])')  # JSON whitespace only (\\s has \\f, \\v)
_NOT_MEMO = (b'"type"', b'"id"', b"\\")
#: the longest reply line the memo keeps
_MEMO_LINE = 1 << 16


class Stdio:
    """Drive a port over the NDJSON port protocol.  One port process serves
    consecutive traces (``reset`` between them) until it fails; a failed port
    is ended and the next :meth:`start` starts a fresh process."""

    def __init__(self, command: str | list[str], *, timeout: float = 10.0, cwd: str | None = None,
                 max_line_bytes: int | None = None, stderr_lines: int = 20):
        if max_line_bytes is None:
            max_line_bytes = default_max_line_bytes()
        elif max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
        self.command = command
        self.timeout = timeout
        self.cwd = cwd
        self.max_line_bytes = max_line_bytes
        self.stderr_lines = stderr_lines
        self.name = f"stdio:{command if isinstance(command, str) else ' '.join(command)}"
        #: the protocol level (protocol.LEVELS): "thread" asks init for the thread level (issue 17)
        self.level = "call"
        self.port: _PortProcess | None = None
        self._last: _PortProcess | None = None  # the most recent port process (for its stderr tail)
        self._sig_held = False
        self._next_id = 0
        self._pending: str | None = None  # a request sent and not answered (the pipe is out of step)
        self._request_text = ""
        self._kind = ""
        self._ended: str | None = None  # how the last port ended, after which failure
        self.step = 0
        self.implementation = ""
        #: action -> its request's JSON text after the id (actions repeat: encoded once)
        self._action_tails: dict[tuple, str] = {}
        #: (request type, a reply's text after its id) -> the reply, values hashable (_REPLY_HEAD)
        self._replies: dict[tuple, dict[str, Any]] = {}
        #: the running port supports snapshot-in-reply (its init_ok said so)
        self._with_snapshot = False
        #: the checker takes snapshots (it asked for one): worth asking for them with the actions
        self._snapshots_wanted = False
        #: (state, request type): the snapshot the last action's or reset's reply carried, until
        #: it is taken or stale
        self._stash: tuple | None = None

    @property
    def pid(self) -> int | None:
        """The running port's process id (None when none runs)."""
        return self.port.pid if self.port is not None else None

    # -- process plumbing ---------------------------------------------------------
    def _spawn(self) -> None:
        args = self.command if isinstance(self.command, list) else ["/bin/sh", "-c", self.command]
        if not self._sig_held:
            self._sig_held = _hold_sigterm()
        try:
            self.port = self._last = _PortProcess(args, self.cwd, self.max_line_bytes, self.stderr_lines)
        except OSError as e:
            self._let_go_of_sigterm()
            raise self._fail(f"cannot start the port: {e}", code="crash") from None
        self._pending = None
        self._ended = None

    def _let_go_of_sigterm(self) -> None:
        if self._sig_held:
            self._sig_held = False
            _release_sigterm()

    def _end_port(self, grace: float, *, failed: bool = True) -> str | None:
        """End the running port (if any) and its whole process group."""
        port = self.port
        if port is None:
            return None
        self.port = None
        self._pending = None
        self._stash = None
        self._with_snapshot = False
        try:
            how = port.end(0.0 if _terminating else grace)
        finally:
            self._let_go_of_sigterm()
        self._ended = f"{how} after the failure at {self._where()}" if failed else how
        return how

    def _where(self) -> str:
        kind = self._kind
        if kind == "init":
            return "init (starting the port)"
        if kind == "reset":
            return "reset (start of a trace)"
        if kind == "action":
            return f"step {self.step}"
        if kind == "snapshot":
            return f"snapshot after step {self.step}" if self.step else "initial snapshot"
        return kind or "handshake"

    def _fail(self, problem: str, grace: float = FAILURE_GRACE, *, code: str = "protocol",
              error: int | None = None) -> PortFailure:
        """End the port (a failed port is never reused) and describe the failure:
        where, the request, what was wrong (``code``, see :class:`PortFailure`), the
        tail of that process's stderr."""
        where = self._where()
        self._end_port(grace)
        tail = self._last.stderr_tail() if self._last is not None else []
        request = _clip_text(self._request_text, 300)
        text = f"port {self.name}: {where}" + (f" (request {request})" if request else "") + f": {problem}"
        if tail:
            text += "\n  port stderr (last lines):\n    " + "\n    ".join(tail)
        return PortFailure(text, problem=problem, step=self.step, request=request or None, stderr=tail,
                           code=code, error=error)

    def _request(self, kind: str, tail: str | None = None, **fields: Any) -> dict[str, Any]:
        """Send one request and read its reply.  ``tail``: the request's JSON text after its id
        (``', "action": [...]}'``), when the caller has it at hand; else it is ``fields`` encoded,
        the same text either way (``json.dumps`` of the whole message)."""
        self._next_id += 1
        self._stash = None  # a snapshot that came with a reply is stale once anything else is asked
        if tail is None:
            line = json.dumps({"type": kind, "id": self._next_id, **fields})
        else:
            line = f'{{"type": "{kind}", "id": {self._next_id}{tail}'
        self._kind, self._request_text = kind, line
        port = self.port
        if port is None:
            before = f" (it {self._ended}; start() starts a fresh one)" if self._ended else ""
            raise self._fail(f"the port is not running{before}", code="crash")
        if port.exit_status() is not None:
            how = self._end_port(FAILURE_GRACE)
            raise self._fail(f"the port {how} before it was sent {kind}", code="crash")
        if port.reader.pending():
            raise self._fail(f"the port wrote output nobody asked for before {kind}: {_clip(port.reader.buffered)}",
                             code="protocol")
        deadline = time.monotonic() + self.timeout
        self._pending = kind
        try:
            port.write((line + "\n").encode(), deadline)
            raw = port.read_line(deadline)
        except _Problem as p:
            if p.kind == "timeout":
                # unresponsive: no grace, straight to SIGTERM (then SIGKILL) to its group
                raise self._fail(f"no response within {self.timeout:g} s (hung?)", grace=0.0, code="timeout") from None
            partial = port.reader.buffered
            how = self._end_port(FAILURE_GRACE)
            if p.kind == "closed":
                raise self._fail(f"the port {how} before reading {kind}", code="crash") from None
            if partial:
                raise self._fail(f"the port {how} in the middle of its response to {kind} "
                                 f"(an unterminated line of {len(partial):,} bytes: {_clip(partial)})", code="crash") from None
            raise self._fail(f"the port {how} without answering", code="crash") from None
        except PortFailure as e:  # the line is over the cap
            raise self._fail(e.problem, code=e.code) from None
        # a reply seen before but for its id (ports answer the same few observations and states
        # over and over) is taken from the memo, its values already hashable (see _REPLY_HEAD)
        head = _REPLY_HEAD.match(raw) if len(raw) <= _MEMO_LINE else None
        key = None
        if head is not None and head.group(1) == protocol.BY_TYPE[kind].reply.encode() \
                and head.group(2) == str(self._next_id).encode():
            key = (kind, raw[head.end():].lstrip(b" \t\r"))
            hit = self._replies.get(key)
            if hit is not None:
                self._pending = None
                return {**hit, "id": self._next_id}
        try:
            reply = parse_reply(raw, kind, self._next_id)
        except PortFailure as e:
            raise self._fail(e.problem, code=e.code) from None
        self._pending = None
        if key is not None and not any(c in key[1] for c in _NOT_MEMO):
            try:
                memo = {k: hashable(v) if k in ("observation", "state") else v for k, v in reply.items()}
            except RecursionError:  # the caller's conversion fails it, with its message
                return reply
            if len(self._replies) >= 20_000:
                self._replies.clear()
            self._replies[key] = memo
            return memo
        return reply

    def _error_text(self, reply: dict[str, Any]) -> str:
        err = protocol.BY_CODE[reply["code"]]
        return (f"error {err.code} ({err.name}, {'definite' if err.definite else 'indefinite'}): "
                f"{_clip_text(reply['text'])}")

    def _error_fail(self, what: str, reply: dict[str, Any]) -> PortFailure:
        """The failure an ``error`` answer is: definite or not by its code (the protocol's table)."""
        definite = protocol.BY_CODE[reply["code"]].definite
        return self._fail(f"{what}: {self._error_text(reply)}", code="definite-error" if definite else "indefinite-error",
                          error=reply["code"])

    def _value(self, value: Any, what: str) -> Any:
        try:
            return hashable(value)
        except RecursionError:
            raise self._fail(f"the {what} is nested too deeply", code="bad-reply") from None

    # -- Implementation -------------------------------------------------------------
    def start(self, model: str, config: dict[str, Any], seed: int) -> None:
        self.step = 0
        port = self.port
        if port is not None and self._pending is None and port.exit_status() is None:
            batched = self._with_snapshot and self._snapshots_wanted  # snapshot-in-reply: see do()
            if batched:
                reply = self._request("reset", f', "seed": {json.dumps(seed)}, "snapshot": true}}')
            else:
                reply = self._request("reset", seed=seed)
            if reply["type"] == "error":
                raise self._error_fail("reset refused", reply)
            if batched and "state" in reply:
                self._stash = (reply["state"], "reset")
            return
        if port is not None:
            self._end_port(FAILURE_GRACE, failed=False)  # interrupted mid-request, or exited between traces: never reused
        self._kind, self._request_text = "init", ""
        self._spawn()
        extra = {"level": self.level} if self.level != "call" else {}
        reply = self._request("init", protocol=protocol.PROTOCOL_VERSION, model=model, config=config, seed=seed, **extra)
        if reply["type"] == "error":
            raise self._error_fail("init refused", reply)
        self.implementation = _clip_text(reply["implementation"], 200)
        features = reply.get("features")
        if extra and not (type(features) is list and protocol.THREAD_STEPS in features):
            raise self._fail(f"the port does not list the feature {protocol.THREAD_STEPS!r} in init_ok, so it has no "
                             f"thread level", code="protocol")
        self._with_snapshot = type(features) is list and protocol.SNAPSHOT_IN_REPLY in features

    def do(self, action: tuple) -> Any:
        self.step += 1
        try:
            tail = self._action_tails.get(action)
        except TypeError:  # an unhashable action: encoded each time
            tail = f', "action": {json.dumps(jsonable(action))}}}'
        if tail is None:
            if len(self._action_tails) >= 100_000:
                self._action_tails.clear()
            tail = self._action_tails[action] = f', "action": {json.dumps(jsonable(action))}}}'
        # a port with the feature snapshot-in-reply is asked for the snapshot in the same round
        # trip, once the checker has shown that it takes snapshots (one without never asks)
        batched = self._with_snapshot and self._snapshots_wanted
        reply = self._request("action", tail[:-1] + ', "snapshot": true}' if batched else tail)
        if reply["type"] == "error":
            if reply["code"] == 13:
                return REJECTED
            raise self._error_fail(f"action {short_repr(list(action), 200)} failed", reply)
        if batched and "state" in reply:
            self._stash = (reply["state"], "action")
        return self._value(reply["observation"], "observation")

    def snapshot(self) -> Any | None:
        self._snapshots_wanted = True
        stash = self._stash
        if stash is not None:  # it came with the action or reset just done (snapshot-in-reply)
            self._stash = None
            self._kind = "snapshot"  # from here on a failure is the snapshot's, as if it was asked apart
            port = self.port
            if port is not None and port.reader.pending():  # what a snapshot request would have seen first
                raise self._fail(f"the port wrote output nobody asked for after its response to {stash[1]}: "
                                 f"{_clip(port.reader.buffered)}", code="protocol")
            return self._value(stash[0], "state")
        reply = self._request("snapshot", "}")
        if reply["type"] == "error":
            if reply["code"] == 11:
                return None
            raise self._error_fail("snapshot failed", reply)
        return self._value(reply["state"], "state")

    def close(self) -> None:
        port = self.port
        if port is None:
            return
        if self._pending is None and not _terminating and port.exit_status() is None:
            try:
                self._request("shutdown")
            except PortFailure:
                return  # it failed to shut down, and was ended
        self._end_port(0.0 if _terminating else CLOSE_GRACE if self._pending is None else FAILURE_GRACE, failed=False)
