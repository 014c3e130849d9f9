"""Stable 64-bit fingerprints of model states.

Python's ``hash()`` is salted per process (PYTHONHASHSEED), so two Spark executors, or two explorer
worker processes, would disagree on the hash of the same state.  A fingerprint here depends only on
the state's value: the same state gives the same 64-bit integer in every process, on every machine,
in every run.  TLC and Stateright keep such fingerprints instead of whole states.

States are frozen values built from ints, bools, None, strings, bytes, floats, tuples and
frozensets (see ``conq.model.kernel``).  The encoding is canonical: a frozenset is encoded in the
order of its members' own encodings, so set iteration order never leaks in.
"""

from __future__ import annotations

import struct
from hashlib import blake2b
from typing import Any

__all__ = ["fingerprint", "encode"]

_PACK_Q = struct.Struct("<q").pack


def _enc(v: Any, out: list) -> None:
    t = type(v)
    if t is int:
        if -(1 << 63) <= v < (1 << 63):
            out.append(b"i")
            out.append(_PACK_Q(v))
        else:
            b = str(v).encode()
            out.append(b"I%d:" % len(b))
            out.append(b)
    elif t is tuple:
        out.append(b"(%d:" % len(v))
        try:  # fast path: a flat tuple of ints (packed model states) in one call
            out.append(b"q" + struct.pack("<%dq" % len(v), *v))
            if any(type(x) is not int for x in v):  # bools and int subclasses pack too: not canonical
                raise TypeError
        except (struct.error, TypeError):
            if out[-1][:1] == b"q":
                out.pop()
            for x in v:
                _enc(x, out)
    elif t is bool:
        out.append(b"T" if v else b"F")
    elif v is None:
        out.append(b"N")
    elif t is str:
        b = v.encode()
        out.append(b"s%d:" % len(b))
        out.append(b)
    elif t is frozenset:
        parts = []
        for x in v:
            sub: list = []
            _enc(x, sub)
            parts.append(b"".join(sub))
        parts.sort()
        out.append(b"{%d:" % len(parts))
        out.extend(parts)
    elif t is bytes:
        out.append(b"b%d:" % len(v))
        out.append(v)
    elif t is float:
        out.append(b"f")
        out.append(struct.pack("<d", v))
    elif isinstance(v, tuple):  # NamedTuple and other tuple subclasses: by value, like tuples
        out.append(b"(%d:" % len(v))
        for x in v:
            _enc(x, out)
    elif isinstance(v, int):  # IntEnum and other int subclasses
        _enc(int(v), out)
    else:
        raise TypeError(f"cannot fingerprint a {t.__name__} ({v!r}): model states are built from "
                        "ints, bools, None, str, bytes, floats, tuples and frozensets")


def encode(state: Any) -> bytes:
    """The canonical byte encoding of ``state`` (equal states give equal bytes)."""
    out: list = []
    _enc(state, out)
    return b"".join(out)


def fingerprint(state: Any) -> int:
    """A stable, unsigned 64-bit fingerprint of ``state`` (blake2b of its canonical encoding)."""
    return int.from_bytes(blake2b(encode(state), digest_size=8).digest(), "little")
