"""Numpy steps for admitting a level of packed states of at most 64 bits in bulk (issue 18), shared
by the one-process search (explorer._packed_levels_in_bulk) and the workers (parallel._Exact)."""

from __future__ import annotations

from typing import Any

import numpy as np


def flat_successors(ys: Any, counts: Any, sources: Any) -> tuple:
    """``(states, source ids, positions)`` of a level's successors: ``ys`` (array 'Q') holds them in
    expansion order, ``counts`` (array 'q') how many each expanded state has, ``sources`` (int64)
    the expanded states' ids; a successor's position is its index in its source's successor list."""
    y = np.frombuffer(ys, dtype=np.uint64) if len(ys) else np.empty(0, dtype=np.uint64)
    c = np.frombuffer(counts, dtype=np.int64) if len(counts) else np.empty(0, dtype=np.int64)
    src = np.repeat(np.asarray(sources, dtype=np.int64), c)
    k = np.arange(len(y), dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
    return y, src, k


def first_unseen(seen: Any, y: Any) -> tuple:
    """``(indices, new, rank)`` for the states ``y`` against the sorted array ``seen``: the indices
    into ``y`` of the states not seen, each at its first occurrence, in order (the order a
    state-by-state search admits them); the new states sorted; and each sorted new state's place in
    that order."""
    cand = np.arange(len(y))
    if len(seen) and len(y):
        at = np.searchsorted(seen, y)
        at[at == len(seen)] = 0
        cand = np.flatnonzero(seen[at] != y)
    new, first = np.unique(y[cand], return_index=True)
    admission = np.argsort(first, kind="stable")
    rank = np.empty(len(new), dtype=np.int64)
    rank[admission] = np.arange(len(new), dtype=np.int64)
    return cand[first[admission]], new, rank
