"""Numpy helpers shared by the level-at-a-time search (levels.py) and the vector expansion
(vector.py); a module of its own so that neither of those imports the other for them."""

from __future__ import annotations

from typing import Any

import numpy as np


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
