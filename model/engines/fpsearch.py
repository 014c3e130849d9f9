"""Fingerprint mode of the explorer: a breadth-first search that keeps, per state, only its
stable 64-bit fingerprint and a parent map.

What is kept (issue 18; TLC keeps fingerprints off-heap and rebuilds traces from parents,
Stateright rebuilds paths by re-running actions):

* the fingerprints of every state of the finished levels in one sorted ``numpy.uint64`` array
  (8 bytes a state), and those of the level being discovered in a Python set (that level only);
* per state, in discovery (breadth-first) order: its parent's index (``array('i')``, 4 bytes)
  and the position of the edge from the parent in the parent's successor list
  (``array('I')``, 4 bytes);
* the states of two levels only, each pickled (``pickle.dumps``: about 120 bytes for a
  consumer-lists reference state instead of about 400 as a tuple): the rest of the level being
  expanded (a state's slot is cleared once expanded) and the level being discovered.  These were
  the largest cost of a 10-million-state run (issue 18: bench/explorer_throughput.py --big).

A state is looked up by fingerprint in batches (one ``numpy.searchsorted`` per chunk of
expanded states), then admitted in the very order the default mode admits it, so the state
and transition counts, the depth and the first violation of every invariant (a shortest
counterexample, the same one) are those of the default mode.  A counterexample is rebuilt by
re-running the recorded successor positions from the initial state.

Two distinct states with the same 64-bit fingerprint would be merged (TLC's risk too): with
``n`` states the chance is about ``n**2 / 2**65``, 3e-6 for 10 million states.  A model with a
packed view (:meth:`Model.packed`, model/engines/packing.py) is searched on its integers: no
pickling, the state checks memoised; a packing of at most 64 bits (the consumer-lists reference:
62) is its own fingerprint, so there is no such risk at all.
"""

from __future__ import annotations

import time
from array import array
from typing import Any

import numpy as np
from pickle import HIGHEST_PROTOCOL, dumps as _dumps, loads as _loads

from conq.model.engines.fingerprint import fingerprint
from conq.model.kernel import Kind, Model, Path

#: states expanded between two batched look-ups
CHUNK = 1024


def _same(x: Any, *_protocol: Any) -> Any:
    return x


def replay_positions(model: Model, init_pos: int, positions: list[int], symmetry: bool, goal=None) -> Path:
    """The concrete path from the ``init_pos``-th initial state along the recorded successor
    positions (with symmetry: positions in the successor lists of class representatives)."""
    from conq.model.engines.results import _concretise, _successor

    init = model.init_states()[init_pos]
    if not symmetry:
        steps = []
        state = init
        for k in positions:
            a, o, t = _successor(model, state, k)
            steps.append((a, o, t))
            state = t
        return Path(init, tuple(steps))
    canon = model.canonical
    rep = canon(init)
    labs, targets = [], []
    for k in positions:
        a, o, t = model.successors(rep)[k]
        labs.append((a, o))
        rep = canon(t)
        targets.append(rep)
    return _concretise(model, init, labs, canon, targets, goal)


def explore_fingerprints(model: Model, max_states, symmetry: bool, progress, box: list, watch,
                         use_packed: bool = True) -> Any:
    from conq.model.engines.results import GuardInterrupt, SearchProgress, _Checks

    chk = _Checks(model, symmetry)
    t0 = time.perf_counter()
    packed = model.packed() if use_packed and not symmetry else None
    if packed is not None:
        return _explore_packed_levels(model, packed, chk, max_states, progress, box, watch, t0)
    canon = model.canonical if symmetry else None
    fp = fingerprint
    successors = model.successors
    store, load = _dumps, _loads
    on_step = chk.on_step
    parent = array("i")
    via = array("I")
    seen_old = np.empty(0, dtype=np.uint64)  # sorted: every level up to the one being expanded
    cur: list[Any] = []  # states of the level being expanded, pickled (None once expanded)
    cur_fps: Any = []  # their fingerprints (the previous level's set)
    proto = HIGHEST_PROTOCOL
    complete = True
    stop_reason = ""
    transitions = 0
    levels = 0
    level_sizes: list[int] = []  # states per depth
    cap = max_states if max_states is not None else -1
    n = 0
    on_state = chk.on_state
    skip = chk.skip
    searchsorted = np.searchsorted
    finished = False

    def merge(old: np.ndarray, fps: list[int]) -> np.ndarray:
        if not fps:
            return old
        new = np.fromiter(fps, dtype=np.uint64, count=len(fps))
        new.sort()
        pos = searchsorted(old, new)
        return np.insert(old, pos, new)

    if watch is not None:
        watch.arm()
    try:
        init_set: set[int] = set()
        for pos, s in enumerate(model.init_states()):
            key = canon(s) if canon else s
            f = fp(key)
            if f not in init_set:
                init_set.add(f)
                parent.append(-1)
                via.append(pos)
                cur.append(store(key, proto))
                cur_fps.append(f)
                on_state(key, n)
                n += 1
            if box and watch.stop_reason:
                complete = False
                stop_reason = watch.stop_reason
                break
        first = 0  # index of cur[0]
        while complete and cur:
            levels += 1
            level_sizes.append(len(cur))
            seen_old = merge(seen_old, cur_fps)
            cur_fps = []
            nxt: list[Any] = []
            nxt_set: set[int] = set()
            for c0 in range(0, len(cur), CHUNK):
                chunk = cur[c0:c0 + CHUNK]
                cand: list[tuple] = []  # (fp, key, src index, position)
                cand_append = cand.append
                i = first + c0
                cur[c0:c0 + CHUNK] = [None] * len(chunk)  # expanded: its slot no longer holds it
                for s in map(load, chunk):
                    succ = successors(s)
                    k = -1
                    for a, o, t in succ:
                        k += 1
                        key = canon(t) if canon else t
                        cand_append((fp(key), key, i, k))
                        if a.__class__ not in skip:  # as in the explorer: _Checks.on_step
                            on_step(s, a, o, t, (i, k))
                    transitions += len(succ)
                    i += 1
                # which candidates were known before this level
                fa = np.fromiter((c[0] for c in cand), dtype=np.uint64, count=len(cand))
                if len(seen_old):
                    at = searchsorted(seen_old, fa)
                    at[at == len(seen_old)] = 0
                    old = (seen_old[at] == fa).tolist()
                else:
                    old = [False] * len(cand)
                for (f, key, src, k), was in zip(cand, old):
                    if was or f in nxt_set:
                        continue
                    if n == cap:
                        complete = False
                        stop_reason = f"state bound {max_states} reached"
                        break
                    nxt_set.add(f)
                    nxt.append(store(key, proto))
                    parent.append(src)
                    via.append(k)
                    on_state(key, n)
                    n += 1
                if not complete:
                    break
                if box:  # the watch has something to say: a limit, or a progress tick
                    box.clear()
                    if watch.stop_reason:
                        complete = False
                        stop_reason = watch.stop_reason
                        break
                    if progress is not None:
                        watch.disarm()
                        progress(SearchProgress(n, transitions, levels, time.perf_counter() - t0, watch.last_rss))
                        watch.arm()
            first += len(cur)
            cur, cur_fps = nxt, nxt_set
            del nxt_set
        finished = True
        if watch is not None:
            watch.disarm()
    except GuardInterrupt:
        watch.delivered = True
        watch.disarm()
    complete, stop_reason, n = _interrupted(chk, watch, finished, complete, stop_reason, parent, via)
    depth = max(levels - 1, 0)  # the deepest level expanded (as the default mode counts)
    t1 = time.perf_counter()
    kept_bytes = seen_old.nbytes + parent.itemsize * len(parent) + via.itemsize * len(via)
    del cur, seen_old
    return _fingerprint_exploration(model, chk, n, transitions, depth, complete, stop_reason, parent, via,
                                    t0, t1, kept_bytes, symmetry, level_sizes)


def _explore_packed_levels(model: Model, packed: Any, chk: Any, max_states, progress, box: list, watch,
                           t0: float) -> Any:
    """Fingerprint mode on a packed view, a level at a time with numpy (issue 36): each chunk of
    the frontier is expanded by :class:`~conq.model.engines.vector.VectorExpander`, its successors'
    fingerprints (a packing of at most 64 bits is its own) go through the set of every state's
    fingerprint (:class:`~conq.model.engines.keyset.KeySet`), and the new states are admitted in
    the order of their first occurrence, the state-by-state search's order: the same ids, parents,
    positions, counts, depth, verdicts and paths.  What is kept: the set of fingerprints (a hash
    table at most 3/4 full, 10.7 to 16 bytes a state), a parent id and a position per state (8
    bytes), and the words of one level's states.  (The module's note above describes the search of
    a model without a packed view.)"""
    from conq.model.engines.levels import LevelSearch
    from conq.model.engines.results import GuardInterrupt

    chk.use_packed(packed.codec)
    parent = array("i")
    via = array("I")
    search = LevelSearch(packed, chk, max_states, parent, via, lambda i, k, _y: (i, k), None, box, watch, progress, t0)
    finished = False
    if watch is not None:
        watch.arm()
    try:
        search.run(packed.inits)
        finished = True
        if watch is not None:
            watch.disarm()
    except GuardInterrupt:
        watch.delivered = True
        watch.disarm()
    complete, stop_reason = search.complete, search.stop_reason
    level_sizes = search.level_sizes
    levels = len(level_sizes)
    transitions = search.transitions
    complete, stop_reason, n = _interrupted(chk, watch, finished, complete, stop_reason, parent, via)
    depth = max(levels - 1, 0)
    t1 = time.perf_counter()
    kept_bytes = search.seen.nbytes + parent.itemsize * len(parent) + via.itemsize * len(via)
    del search
    return _fingerprint_exploration(model, chk, n, transitions, depth, complete, stop_reason, parent, via,
                                    t0, t1, kept_bytes, False, level_sizes)


def _interrupted(chk: Any, watch: Any, finished: bool, complete: bool, stop_reason: str, parent: Any,
                 via: Any) -> tuple[bool, str, int]:
    """``(complete, stop reason, states)`` after a search that a limit may have interrupted
    anywhere: what it recorded of states it had not admitted in full is forgotten."""
    if watch is not None and watch.stop_reason and not finished:
        complete, stop_reason = False, watch.stop_reason
    n = min(len(parent), len(via))
    if not finished:
        for d in (chk.violated, chk.witnessed):
            for name in [k for k, idx in d.items() if idx >= n]:
                del d[name]
        for d in (chk.violated_step, chk.witnessed_step):
            for name in [k for k, (src, _k) in d.items() if src >= n]:
                del d[name]
    return complete, stop_reason, n


def _fingerprint_exploration(model: Model, chk: Any, n: int, transitions: int, depth: int, complete: bool,
                             stop_reason: str, parent: Any, via: Any, t0: float, t1: float, kept_bytes: int,
                             symmetry: bool, level_sizes: list[int]) -> Any:
    """The Exploration of a fingerprint search: verdicts with paths rebuilt from the parent map."""
    from conq.model.engines.results import Exploration, Verdict

    def chain(idx: int) -> tuple[int, list[int]]:
        ks = []
        while parent[idx] != -1:
            ks.append(via[idx])
            idx = parent[idx]
        return via[idx], ks[::-1]

    def state_path(idx: int, goal=None) -> Path:
        root, ks = chain(idx)
        return replay_positions(model, root, ks, symmetry, goal)

    def step_path(where: tuple[int, int]) -> Path:
        root, ks = chain(where[0])
        return replay_positions(model, root, ks + [where[1]], symmetry)

    verdicts = chk.verdicts(complete, stop_reason, state_path, step_path)
    for p in chk.props:
        if p.kind is Kind.LEADS_TO:
            verdicts.append(Verdict(p, "skipped", detail="liveness needs the whole graph: not checked in fingerprint mode"))
    ex = Exploration(
        model=model,
        states=n,
        transitions=transitions,
        depth=depth,
        level_sizes=level_sizes,
        search_seconds=t1 - t0,
        analysis_seconds=time.perf_counter() - t1,
        complete=complete,
        verdicts=verdicts,
        stop_reason=stop_reason,
        parent=parent,
        via=via,
        mode="fingerprints",
        symmetry=symmetry,
    )
    ex.kept_bytes = kept_bytes  # type: ignore[attr-defined]
    return ex
