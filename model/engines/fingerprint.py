"""Stable 64-bit fingerprints of model states.

Python's ``hash()`` is salted per process (PYTHONHASHSEED), so two Spark executors, or two explorer
worker processes, would disagree on the hash of the same state.  A fingerprint here depends only on
the state's value: the same state gives the same 64-bit integer in every process, on every machine,
in every run.  TLC and Stateright keep such fingerprints instead of whole states.

States are frozen values built from ints, bools, None, strings, bytes, floats, tuples and
frozensets (see ``conq.model.kernel``).  The encoding is canonical: it is ``marshal`` format
version 2 of the value (a fixed, documented format: no object references, no string
interning, unlike versions 3 and 4, so equal values give equal bytes whatever objects they are
made of), except that a frozenset's members are written in the order of their own encodings, so
set iteration order never leaks in, and that int and tuple subclasses (IntEnum, NamedTuple) are
written as the plain int or tuple they equal.

Speed (issue 18): the explorer fingerprints every transition, so the common case, a value with
no frozenset in it, is one call of the C ``marshal.dumps`` (about 25x faster than encoding it in
Python).  A frozenset, a set, a dict or a list leaves its type code byte in marshal's output; when
one of those bytes occurs (or marshal refuses a subclass), the value is encoded member by member
instead, which gives the same bytes wherever marshal's were already canonical.
"""

from __future__ import annotations

import marshal
import struct
from hashlib import blake2b
from typing import Any

__all__ = ["fingerprint", "encode"]

_dumps = marshal.dumps
_LEN = struct.Struct("<i").pack
_LEAF = (int, str, bytes, float, bool, type(None))
_MARKERS = b"<>[{"


def _fast(v: Any) -> bytes | None:
    """marshal's bytes of ``v`` when they are already canonical, else None."""
    try:
        data = _dumps(v, 2)
    except ValueError:  # an int or tuple subclass, or something marshal does not take
        return None
    # '>' frozenset, '<' set, '{' dict, '[' list: a false alarm (the byte inside a number)
    # only costs the slow path, which gives the same bytes.  (One translate pass: measured
    # 3.5x cheaper than four ``in`` tests.)
    if len(data.translate(None, _MARKERS)) != len(data):
        return None
    return data


def _enc(v: Any, out: list) -> None:
    t = type(v)
    if t in _LEAF:
        out.append(_dumps(v, 2))
    elif t is tuple or isinstance(v, tuple):
        data = _fast(v) if t is tuple else None
        if data is not None:
            out.append(data)
            return
        out.append(b"(" + _LEN(len(v)))
        for x in v:
            _enc(x, out)
    elif t is frozenset:
        parts = []
        for x in v:
            sub: list = []
            _enc(x, sub)
            parts.append(b"".join(sub))
        parts.sort()
        out.append(b">" + _LEN(len(parts)))
        out.extend(parts)
    elif isinstance(v, bool):  # pragma: no cover - bool cannot be subclassed
        out.append(b"T" if v else b"F")
    elif isinstance(v, int):  # IntEnum and other int subclasses: as the int they equal
        out.append(_dumps(int(v), 2))
    else:
        raise TypeError(f"cannot fingerprint a {t.__name__} ({v!r}): model states are built from "
                        "ints, bools, None, str, bytes, floats, tuples and frozensets")


def encode(state: Any) -> bytes:
    """The canonical byte encoding of ``state`` (equal states give equal bytes)."""
    data = _fast(state)
    if data is not None:
        return data
    out: list = []
    _enc(state, out)
    return b"".join(out)


def fingerprint(state: Any) -> int:
    """A stable, unsigned 64-bit fingerprint of ``state`` (blake2b of its canonical encoding)."""
    data = _fast(state)
    if data is None:
        out: list = []
        _enc(state, out)
        data = b"".join(out)
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little")
