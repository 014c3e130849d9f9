"""Adapters: how the checker drives an implementation.

* :class:`InProcess` wraps a *driver*: a class in ``conformance/`` that maps a
  model's actions onto an implementation's API and reports observations in the
  model's vocabulary.  The reference implementation is driven this way, under
  its deterministic scheduler, so a run replays exactly from its seed.
* :class:`Stdio` speaks the port protocol (``conformance/protocol.py``) with a
  child process, for ports in any language.  Every response has a deadline; a
  port that crashes, hangs, or writes garbage gets a clear
  :class:`PortFailure` naming the step and the problem, never a hang.

A driver class has ``__init__(config: dict, seed: int)``, ``do(action) ->
observation`` (raising :class:`ActionRejected` when the action's precondition
does not hold) and optionally ``snapshot() -> observed state``.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections import deque
from typing import Any, Protocol

from . import protocol
from .trace import hashable, jsonable


class PortFailure(RuntimeError):
    """The implementation failed in a way that is not an observation
    (crash, hang, malformed message, indefinite error)."""


class ActionRejected(Exception):
    """Raised by a driver: the action's precondition does not hold (error 13, definite)."""


#: the observation a definite "not enabled" answer becomes
REJECTED = ("error", 13)

#: model name -> "module:Class" of the in-process driver of the reference implementation
DRIVERS: dict[str, str] = {
    "consumer-lists": "conq.conformance.consumer_lists.driver:ConsumerListsDriver",
}


class Implementation(Protocol):
    name: str

    def start(self, model: str, config: dict[str, Any], seed: int) -> None: ...
    def do(self, action: tuple) -> Any: ...
    def snapshot(self) -> Any | None: ...
    def close(self) -> None: ...


def load_class(target: str) -> type:
    """A driver class named ``module:Class`` or ``FILE.py:Class``."""
    from conq.model.kernel import ModelError
    from conq.model.engines.registry import load_object

    try:
        return load_object(target)
    except ModelError as e:
        raise ValueError(str(e)) from None


class InProcess:
    """Drive a driver class in this process."""

    def __init__(self, driver: type | str, name: str | None = None):
        self.driver_cls = load_class(driver) if isinstance(driver, str) else driver
        self.name = name or f"in-process:{self.driver_cls.__name__}"
        self.driver: Any = None

    def start(self, model: str, config: dict[str, Any], seed: int) -> None:
        self.close()  # one system under test at a time: the previous one is let go first
        self.driver = self.driver_cls(config, seed)

    def do(self, action: tuple) -> Any:
        try:
            return self.driver.do(action)
        except ActionRejected:
            return REJECTED

    def snapshot(self) -> Any | None:
        snap = getattr(self.driver, "snapshot", None)
        return hashable(snap()) if snap is not None else None

    def close(self) -> None:
        close = getattr(self.driver, "close", None)
        if self.driver is not None and close is not None:
            close()
        self.driver = None


def reference(model: str) -> InProcess:
    target = DRIVERS.get(model)
    if target is None:
        raise ValueError(f"no reference implementation is wired for model '{model}' (wired: {', '.join(DRIVERS)})")
    return InProcess(target, name=f"reference:{model}")


class Stdio:
    """Drive a port over the NDJSON port protocol (one child process per session)."""

    def __init__(self, command: str | list[str], *, timeout: float = 10.0, cwd: str | None = None):
        self.command = command
        self.timeout = timeout
        self.cwd = cwd
        self.name = f"stdio:{command if isinstance(command, str) else ' '.join(command)}"
        self.proc: subprocess.Popen | None = None
        self._next_id = 0
        self._buf = b""
        self._stderr: deque[str] = deque(maxlen=20)
        self.step = 0
        self.implementation = ""

    # -- process plumbing ---------------------------------------------------------
    def _spawn(self) -> None:
        args = self.command if isinstance(self.command, list) else ["/bin/sh", "-c", self.command]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.cwd,
            bufsize=0,
        )
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ, "out")
        self._sel.register(self.proc.stderr, selectors.EVENT_READ, "err")
        self._err_buf = b""

    def _fail(self, what: str) -> PortFailure:
        tail = "\n".join(self._stderr)
        where = f"step {self.step}" if self.step else "handshake"
        return PortFailure(f"port {self.name}: {where}: {what}" + (f"\n  port stderr (last lines):\n    {tail.replace(chr(10), chr(10) + '    ')}" if tail else ""))

    def _read_line(self) -> bytes:
        assert self.proc is not None
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"no response within {self.timeout:g} s (hung?)")
            for key, _ in self._sel.select(timeout=left):
                chunk = os.read(key.fileobj.fileno(), 65536)
                if key.data == "err":
                    if chunk:
                        self._err_buf += chunk
                        *lines, self._err_buf = self._err_buf.split(b"\n")
                        self._stderr.extend(l.decode("utf-8", "replace") for l in lines)
                    else:
                        self._sel.unregister(key.fileobj)
                    continue
                if not chunk:
                    code = self.proc.wait(timeout=5)
                    raise self._fail(f"the port exited (status {code}) without answering")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _request(self, kind: str, **fields: Any) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            raise self._fail("the port is not running")
        self._next_id += 1
        msg = {"type": kind, "id": self._next_id, **fields}
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            code = self.proc.wait(timeout=5)
            raise self._fail(f"the port exited (status {code}) before reading {kind}") from None
        raw = self._read_line()
        try:
            reply = json.loads(raw)
        except json.JSONDecodeError as e:
            raise self._fail(f"invalid JSON in response to {kind}: {e.msg}: {raw[:200]!r}") from None
        problem = protocol.validate(reply, "port")
        if problem:
            raise self._fail(f"malformed response to {kind}: {problem}: {raw[:200]!r}")
        if reply["id"] != msg["id"]:
            raise self._fail(f"response id {reply['id']} does not match request id {msg['id']}")
        if reply["type"] == "error":
            return reply
        expected = protocol.BY_TYPE[kind].reply
        if reply["type"] != expected:
            raise self._fail(f"expected {expected} in response to {kind}, got {reply['type']}")
        return reply

    # -- Implementation -------------------------------------------------------------
    def start(self, model: str, config: dict[str, Any], seed: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.step = 0
            reply = self._request("reset", seed=seed)
            if reply["type"] == "error":
                raise self._fail(f"reset failed: error {reply['code']}: {reply['text']}")
            return
        self._spawn()
        self.step = 0
        reply = self._request("init", protocol=protocol.PROTOCOL_VERSION, model=model, config=config, seed=seed)
        if reply["type"] == "error":
            raise self._fail(f"init refused: error {reply['code']} ({protocol.BY_CODE[reply['code']].name}): {reply['text']}")
        self.implementation = reply["implementation"]

    def do(self, action: tuple) -> Any:
        self.step += 1
        reply = self._request("action", action=jsonable(action))
        if reply["type"] == "error":
            err = protocol.BY_CODE[reply["code"]]
            if reply["code"] == 13:
                return REJECTED
            raise self._fail(
                f"action {list(action)} failed: error {err.code} ({err.name}, "
                f"{'definite' if err.definite else 'indefinite'}): {reply['text']}"
            )
        return hashable(reply["observation"])

    def snapshot(self) -> Any | None:
        reply = self._request("snapshot")
        if reply["type"] == "error":
            if reply["code"] == 11:
                return None
            raise self._fail(f"snapshot failed: error {reply['code']}: {reply['text']}")
        return hashable(reply["state"])

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                try:
                    self._request("shutdown")
                except PortFailure:
                    pass
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        finally:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    f.close()
                except OSError:
                    pass
            self.proc = None
