"""The basics every adapter shares, and the in-process one: :class:`PortFailure` (an
implementation failed in a way that is not an observation), :class:`ActionRejected` (a driver's
"not enabled"), :class:`InProcess` (a driver class in this process; the reference implementation of
a system is its ``driver``, conformance/systems.py) and the bounded echoes of values every verdict
uses (:func:`short_repr`).  conformance/adapters.py is the one name callers import.
"""

from __future__ import annotations

from typing import Any, Iterator, Protocol

from . import protocol
from .trace import hashable


class PortFailure(RuntimeError):
    """The implementation failed in a way that is not an observation
    (crash, hang, malformed message, indefinite error).

    ``problem`` is what was wrong; ``step``, ``request`` and ``stderr`` (the
    last lines the failed process wrote there) are set when a :class:`Stdio`
    raised it.  ``code`` classifies the failure, machine-readably (one of
    ``protocol.FAILURE_CODES``: timeout, crash, bad-reply, protocol,
    definite-error, indefinite-error); ``error`` is the port's error code when
    it answered ``error``.  Callers decide by ``code``, never by the text."""

    def __init__(self, message: str, *, problem: str | None = None, step: int | None = None,
                 request: str | None = None, stderr: list[str] | None = None,
                 code: str = "protocol", error: int | None = None):
        super().__init__(message)
        if code not in protocol.FAILURE_CODES:  # pragma: no cover - a bug of conq's
            raise ValueError(f"unknown port failure code {code!r}")
        self.problem = problem if problem is not None else message
        self.step = step
        self.request = request
        self.stderr = stderr or []
        self.code = code
        self.error = error


class ActionRejected(Exception):
    """Raised by a driver: the action's precondition does not hold (error 13, definite)."""


#: the observation a definite "not enabled" answer becomes
REJECTED = ("error", 13)

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
        # a driver's ``observed()`` is ``hashable(snapshot())`` built directly (the checker's hot path)
        fast = getattr(self.driver, "observed", None)
        if fast is not None:
            return fast()
        snap = getattr(self.driver, "snapshot", None)
        return hashable(snap()) if snap is not None else None

    def close(self) -> None:
        close = getattr(self.driver, "close", None)
        if self.driver is not None and close is not None:
            close()
        self.driver = None


def reference(model: str) -> InProcess:
    """The reference implementation of ``model``'s system, in process (its ``driver``)."""
    from . import systems

    system = systems.find(model)
    if system is None:
        raise ValueError(f"no reference implementation is wired for model '{model}' (wired: {', '.join(systems.names('driver'))})")
    return InProcess(system.load("driver"), name=f"reference:{model}")



# -- bounded echoes of values ---------------------------------------------------------------

#: the longest repr of an observation, a state or a reply that a report or a verdict echoes
ECHO_LIMIT = 1000


def short_repr(value: Any, limit: int = ECHO_LIMIT, *, tuples_as_lists: bool = False) -> str:
    """``repr(value)`` when it is at most ``limit`` characters; else its first
    ``limit`` characters and a note that it was cut.  The work is bounded by
    ``limit``, not by the size of the value (a 200 MB observation costs as
    little as a small one).  ``tuples_as_lists``: print tuples as lists, as
    ``repr(jsonable(value))`` would, without copying the value."""
    parts: list[str] = []
    size = 0
    for piece in _repr_pieces(value, limit + 1, 0, tuples_as_lists):
        parts.append(piece)
        size += len(piece)
        if size > limit:
            return "".join(parts)[:limit] + f" ... [cut at {limit:,} characters]"
    return "".join(parts)


def _repr_pieces(v: Any, budget: int, depth: int, lists: bool) -> Iterator[str]:
    """The pieces of ``repr(v)``, lazily (the consumer stops once it has enough)."""
    t = type(v)
    if lists and t is tuple:
        t = list
    if t is str or t is bytes or t is bytearray:
        yield repr(v[:budget]) if len(v) > budget else repr(v)
        return
    if depth > 100:
        yield "..."
        return
    if t is list or t is tuple:
        yield "[" if t is list else "("
        for i, x in enumerate(v):
            if i:
                yield ", "
            yield from _repr_pieces(x, budget, depth + 1, lists)
        if t is tuple and len(v) == 1:
            yield ","
        yield "]" if t is list else ")"
        return
    if t is dict:
        yield "{"
        for i, (k, x) in enumerate(v.items()):
            if i:
                yield ", "
            yield from _repr_pieces(k, budget, depth + 1, lists)
            yield ": "
            yield from _repr_pieces(x, budget, depth + 1, lists)
        yield "}"
        return
    if (t is set or t is frozenset) and v:
        yield "{" if t is set else "frozenset({"
        for i, x in enumerate(v):
            if i:
                yield ", "
            yield from _repr_pieces(x, budget, depth + 1, lists)
        yield "}" if t is set else "})"
        return
    try:
        yield repr(v)
    except ValueError:  # an int too long to print (Python's digit limit)
        yield f"<int of {v.bit_length():,} bits>" if t is int else f"<{t.__name__} that cannot be printed>"


def _clip(raw: bytes | bytearray, n: int = 200) -> str:
    """The start of a raw message, for an error text."""
    more = f" ... ({len(raw):,} bytes in all)" if len(raw) > n else ""
    return repr(bytes(raw[:n])) + more


def _clip_text(text: str, n: int = 500) -> str:
    return text if len(text) <= n else text[:n] + f" ... [cut at {n} characters]"
