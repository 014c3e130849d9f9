"""Numpy steps for admitting a level of packed states in bulk (issue 18), shared by the one-process
search and the workers (parallel._Exact), and the search a level at a time in arrays that the
explorer's default safety search and its fingerprint mode share (:class:`LevelSearch`, issue 36)."""

from __future__ import annotations

import time
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


def unseen(seen: Any, u: Any) -> Any:
    """A mask over the sorted values ``u``: those not in the sorted array ``seen``."""
    if not len(seen) or not len(u):
        return np.ones(len(u), dtype=bool)
    at = np.searchsorted(seen, u)
    at[at == len(seen)] = 0
    return seen[at] != u


#: numpy's dtype for each ``array`` typecode the searches keep parents and positions in
_DTYPE = {"l": np.int64, "q": np.int64, "i": np.int32, "I": np.uint32, "H": np.uint16, "B": np.uint8}


class LevelSearch:
    """A breadth-first search of a packed view a level at a time, in arrays (issue 36): what the
    explorer's default safety search and its fingerprint mode share.

    Each chunk of a level is expanded by a :class:`~conq.model.engines.vector.VectorExpander`; its
    successors' keys (a packing of at most 64 bits is its own key, a wider one its
    :func:`~conq.model.engines.vector.fingerprints`) go through the set ``seen`` of every key so
    far (:class:`~conq.model.engines.keyset.KeySet`) in expansion order, chunk after chunk, and
    the new states are admitted in the order of their first occurrence: the order the
    state-by-state search admits them, so ids, parents, positions and paths are its own.  (With
    ``exact`` and a packing of several words, the key is the state's words, all of them: a set
    whose keys are several words wide, so no two states are ever merged.)  The
    state checks of a level's new states are evaluated as an array (only a state where something
    fires takes the usual path); a step whose label the recording did not decide is checked on the
    decoded states, in successor order, where ``step_where(i, k, y)`` names it (``i`` the source's
    id, ``k`` the position, ``y`` the successor as an int).

    ``parent`` and ``via`` (arrays of the caller's types) get each new state's parent id and
    position; ``keep``, when given, every new state (an ``array('Q')`` for a packing of one word).
    ``box``/``watch``/``progress``: the explorer's limits and progress ticks, heard every chunk."""

    #: states expanded at once (a bound on the arrays of one expansion)
    CHUNK = 1 << 16

    def __init__(self, packed: Any, chk: Any, max_states: int | None, parent: Any, via: Any,
                 step_where: Any, keep: Any = None, box: list | None = None, watch: Any = None,
                 progress: Any = None, t0: float = 0.0, exact: bool = False):
        from conq.model.engines.keyset import KeySet
        from conq.model.engines.vector import fingerprints, vector_view

        self.vx = vx = vector_view(packed)
        self.chk = chk
        self.decode = packed.codec.decode
        #: a state's key in ``seen``: a packing of one word is its own; a wider one its words
        #: (``exact``) or its 64-bit fingerprint (the fingerprint mode, 8 bytes a state)
        wide = exact and vx.W > 1
        self.key = (lambda Y: Y[0]) if vx.W == 1 else (lambda Y: Y) if wide else fingerprints
        self.cap = max_states if max_states is not None else -1
        self.max_states = max_states
        self.parent, self.via, self.keep = parent, via, keep
        self.step_where = step_where
        self.box = box if box is not None else []
        self.watch, self.progress, self.t0 = watch, progress, t0
        self.transitions = 0
        self.level_sizes: list[int] = []
        self.complete, self.stop_reason = True, ""
        self.n = 0
        self._quiet: list = [None, None]
        #: every key admitted so far (keyset.KeySet, a compiled hash set)
        self.seen = KeySet(width=vx.W if wide else 1)

    def _admit(self, new: Any, src: Any, k: Any) -> None:
        """Admit the states ``new`` (words, in admission order; their keys are in ``seen`` already)
        with their parents and positions, and check them."""
        from conq.model.engines.vector import VectorPredicate, to_int, to_ints

        n = self.n
        self.parent.frombytes(np.asarray(src, dtype=_DTYPE[self.parent.typecode]).tobytes())
        self.via.frombytes(np.asarray(k, dtype=_DTYPE[self.via.typecode]).tobytes())
        if self.keep is not None:
            if isinstance(self.keep, list):
                self.keep.extend(to_ints(new))
            else:
                self.keep.frombytes(new[0].tobytes())
        self.n = n + new.shape[1]
        chk = self.chk
        if self._quiet[0] is not chk.quiet[0]:
            self._quiet = [chk.quiet[0], VectorPredicate(chk.quiet[0], self.vx.W)]
        for j in np.flatnonzero(~self._quiet[1](new)).tolist():  # something fires: the usual path
            chk.on_state(to_int(new, j), n + j)

    def _cut(self, order: Any) -> Any:
        if self.cap != -1 and self.n + len(order) > self.cap:
            self.complete, self.stop_reason = False, f"state bound {self.max_states} reached"
            return order[:self.cap - self.n]
        return order

    def run(self, inits: list[int]) -> None:
        """Search from the packed initial states ``inits`` (their positions are the roots' ``via``)."""
        from conq.model.engines.results import SearchProgress
        from conq.model.engines.vector import cols, to_int

        vx, chk, key, box, watch = self.vx, self.chk, self.key, self.box, self.watch
        objs = vx.steps.objs
        X = vx.words(inits)
        f = key(X)
        order = self._cut(self.seen.admit(f))
        frontier = cols(X, order)
        self._admit(frontier, np.full(len(order), -1), order)
        first = 0  # the id of the frontier's first state
        while self.complete and frontier.shape[1]:
            self.level_sizes.append(frontier.shape[1])
            cand_x, cand_src, cand_k = [], [], []
            for c0 in range(0, frontier.shape[1], self.CHUNK):
                Xc = frontier[:, c0:c0 + self.CHUNK]
                Y, cnt, G = vx.expand(Xc)
                self.transitions += len(G)
                ends = np.cumsum(cnt)
                needs = vx.needs_check(chk.skip)  # (once every label is skipped: no pass over G)
                pending = np.flatnonzero(needs[G]) if needs.any() else ()
                if len(pending):  # steps the recording did not decide: on the decoded states, in order
                    src = np.searchsorted(ends, pending, side="right")
                    for p, i in zip(pending.tolist(), src.tolist()):
                        act, o, _keep, _put = objs[G[p]]
                        y = to_int(Y, p)
                        chk.on_step(self.decode(to_int(Xc, i)), act, o, self.decode(y),
                                    self.step_where(first + c0 + i, p - int(ends[i] - cnt[i]), y))
                firsts = self.seen.admit(key(Y))  # (the first occurrences of keys not seen, in order)
                src = np.searchsorted(ends, firsts, side="right")
                cand_x.append(cols(Y, firsts))
                cand_src.append(src + (first + c0))
                cand_k.append(firsts - (ends[src] - cnt[src]))
                if box:  # the watch has something to say: a limit, or a progress tick
                    box.clear()
                    if watch.stop_reason:
                        self.complete, self.stop_reason = False, watch.stop_reason
                        return
                    if self.progress is not None:
                        watch.disarm()
                        self.progress(SearchProgress(self.n, self.transitions, len(self.level_sizes) - 1,
                                                     time.perf_counter() - self.t0, watch.last_rss))
                        watch.arm()
            X_all = np.concatenate(cand_x, axis=1)
            # (distinct and in order: a chunk's keys joined ``seen`` as it admitted them)
            order = self._cut(np.arange(X_all.shape[1]))
            new = cols(X_all, order)
            del X_all
            del cand_x
            first = self.n
            self._admit(new, np.concatenate(cand_src)[order], np.concatenate(cand_k)[order])
            frontier = new
