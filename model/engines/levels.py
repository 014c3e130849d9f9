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


def first_occurrences(y: Any) -> tuple:
    """``(values, first)``: the distinct values of ``y`` sorted, and the index of each one's first
    occurrence in ``y``.  (``np.unique(return_index=True)`` sorts stably, several times slower than
    numpy's vectorised unstable argsort; the first occurrence is then the smallest index of each run
    of equal values.)"""
    if not len(y):
        return y[:0], np.empty(0, dtype=np.int64)
    order = np.argsort(y)
    ys = y[order]
    starts = np.empty(len(ys), dtype=bool)
    starts[0] = True
    np.not_equal(ys[1:], ys[:-1], out=starts[1:])
    starts = np.flatnonzero(starts)
    return ys[starts], np.minimum.reduceat(order, starts)


def unseen(seen: Any, u: Any) -> Any:
    """A mask over the sorted values ``u``: those not in the sorted array ``seen``."""
    if not len(seen) or not len(u):
        return np.ones(len(u), dtype=bool)
    at = np.searchsorted(seen, u)
    at[at == len(seen)] = 0
    return seen[at] != u


def first_unseen(seen: Any, y: Any) -> tuple:
    """``(indices, new, rank)`` for the states ``y`` against the sorted array ``seen``: the indices
    into ``y`` of the states not seen, each at its first occurrence, in order (the order a
    state-by-state search admits them); the new states sorted; and each sorted new state's place in
    that order."""
    u, first = first_occurrences(y)
    keep = unseen(seen, u)
    new, first = u[keep], first[keep]
    admission = np.argsort(first)  # (distinct values: no ties)
    rank = np.empty(len(new), dtype=np.int64)
    rank[admission] = np.arange(len(new), dtype=np.int64)
    return first[admission], new, rank


def merge_sorted(seen: Any, new: Any, *with_ids: tuple) -> tuple:
    """The sorted array ``seen`` with the sorted, distinct, unseen values ``new`` inserted in place,
    and each ``(ids, new_ids)`` pair of arrays carried along the same way."""
    at = np.searchsorted(seen, new)
    return (np.insert(seen, at, new), *(np.insert(a, at, b) for a, b in with_ids))
