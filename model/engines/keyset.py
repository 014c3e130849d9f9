"""The set of 64-bit state keys a level-at-a-time search has seen (issue 36): one pass over a
chunk's successor keys admits each key not seen before at its first occurrence, in order, and
remembers it.  The work is a small C extension (``_search.c``, built when conq is installed).

Why compiled: the same work in numpy (sort the chunk's keys to find first occurrences, then look
the distinct ones up in a sorted array of every key so far and merge the new ones in) was the
largest single cost of the consumer-lists reference once its recordings were warm (measured with
pyinstrument: argsort 0.12 s of 0.43 s, plus 0.04 s of searchsorted and merges), and it is the
work SPIN does in C per transition: one hash probe.  Why not numba: it was tried (the same table,
the same speed), but importing it and loading its compiled code holds about 140 MB of LLVM in the
process, more than the whole search of the reference configuration (measured: a process that
imports numba peaks at 146 MB, one that imports numpy at 25 MB).

The table: open addressing with linear probing over 8-byte slots, split into ``SEGMENTS`` segments
by the top bits of the mixed key, each at most ``MAX_LOAD`` full and grown by ``GROWTH`` on its own
(so a growth copies one segment, never the whole set): about 13 bytes a key, where the sorted array
it replaced took 8 and, at each merge, a copy of itself."""

from __future__ import annotations

import numpy as np

from conq.model.engines.kernels import search

FIRST_SLOTS, GROWTH, MAX_LOAD, SEGMENTS = search.FIRST_SLOTS, search.GROWTH, search.MAX_LOAD, search.SEGMENTS
_KeySet = search.KeySet

__all__ = ["KeySet", "FIRST_SLOTS", "GROWTH", "MAX_LOAD", "SEGMENTS"]


class KeySet:
    """A set of keys of ``width`` uint64 words (see the module's note): a packing of at most 64 bits
    is one word, a wider one several, told apart by all of them (no fingerprint, so no collision)."""

    def __init__(self, width: int = 1) -> None:
        self.width = width
        self._set = _KeySet(width=width)

    def admit(self, keys: np.ndarray) -> np.ndarray:
        """The indices of the keys (uint64: a vector for one word, ``(width, n)`` columns for more)
        not in the set, each at its first occurrence, in order (the order a state-by-state search
        admits them); they join the set."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        n = keys.shape[-1]
        if self.width > 1 and keys.shape != (self.width, n):
            raise ValueError(f"KeySet(width={self.width}).admit: keys of shape {keys.shape}, not ({self.width}, n)")
        out = np.empty(n, dtype=np.int64)
        return out[:self._set.admit(keys, out)]

    def segments(self) -> list[tuple[int, int]]:
        """Per segment, ``(keys, slots)``."""
        return self._set.segments()

    def __len__(self) -> int:
        return len(self._set)

    @property
    def nbytes(self) -> int:
        return self._set.nbytes()
