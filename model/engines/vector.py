"""A packed model's successor function over a whole level at once, with numpy (issue 36).

The packed view (model/engines/packing.py) remembers each part of the successor function (a
:class:`~conq.model.engines.packing.Section`) by the fields it read: per value of the section's
*root* a mask, and per ``state & mask`` the recorded outcome, a list of steps ``(action,
observation, keep, set)`` whose successor is ``(state & keep) | set``.  Per state that is two
dictionary look-ups per section and two integer operations per successor, and it is the Python loop
around them, not the model, that a search spends its time in (issue 36: about 20 look-ups and 4.8
microseconds a state on the consumer-lists reference, against SPIN's 1.6).

Here the same recordings are applied to an array of states:

* each section's roots and footprint keys live in open-addressing hash tables of numpy arrays
  (:class:`_Table`), so a frontier's keys are computed (``X & root``, then ``X & mask[root]``) and
  looked up with a handful of array operations;
* a key not recorded yet is recorded by the section itself (:meth:`Section.miss`, the model's own
  readable code, run once per distinct footprint) and copied into the tables: nothing is written
  twice by hand, and the dictionaries of the state-by-state path and these tables always say the
  same;
* the recorded steps are flattened into arrays (``keep`` and ``set`` per step), and a level's
  successors are ``(X[:, source] & KEEP[:, step]) | SET[:, step]``, scattered straight into the
  model's successor order (sections in order, steps in order, ``idle`` last): state ``i``'s
  successors are ``Y[:, start[i]:start[i] + count[i]]``, the very lists :meth:`Packed.expand`
  gives;
* state predicates (:func:`memoised_predicate`) are evaluated the same way (:class:`VectorPredicate`);
  a step whose label the recording did not decide is reported by its step id, for the engine to
  check on the decoded states, in successor order.

A state of more than 64 bits is ``W`` machine words: arrays are ``(W, n)``, word ``w`` holding bits
``64w`` to ``64w + 63``.  :func:`fingerprints` is :func:`~conq.model.engines.packing.fingerprint64`
on such arrays (the same value, tested).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from conq.model.engines.arrays import first_occurrences
from conq.model.engines.packing import Packed, Section
from conq.model.engines.kernels import search as _search  # (the compiled kernels: _search.c)

_M64 = (1 << 64) - 1
_U64 = np.uint64
#: odd multipliers of the tables' multiply-shift hashing, one per word of a key
_MUL = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
        0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9)


def words_for(bits: int) -> int:
    """Machine words a packing of ``bits`` bits takes (at least one)."""
    return max(1, (bits + 63) // 64)


def to_words(xs: Sequence[int] | Iterable[int], W: int) -> np.ndarray:
    """Packed states (Python ints) as a ``(W, n)`` array of words."""
    xs = list(xs)
    out = np.empty((W, len(xs)), dtype=_U64)
    if W == 1:
        out[0] = np.array(xs, dtype=_U64) if xs else 0
        return out
    for w in range(W):
        out[w] = np.array([(x >> (64 * w)) & _M64 for x in xs], dtype=_U64)
    return out


def split(x: int, W: int) -> np.ndarray:
    """One packed state (or mask) as ``W`` words."""
    return np.array([(x >> (64 * w)) & _M64 for w in range(W)], dtype=_U64)


def cols(A: np.ndarray, idx: Any) -> np.ndarray:
    """``A[:, idx]`` for a ``(W, n)`` array, a word at a time (numpy's two-dimensional fancy indexing
    was measured an order of magnitude slower than one-dimensional takes)."""
    if A.shape[0] == 1:
        return A[0][idx][None]
    if getattr(idx, "dtype", None) == bool:
        idx = np.flatnonzero(idx)
    out = np.empty((A.shape[0], len(idx)), dtype=A.dtype)
    for w in range(A.shape[0]):
        out[w] = A[w][idx]
    return out


def _ws(x: int, W: int) -> list[int]:
    """``x`` as ``W`` words (Python ints)."""
    if W == 1:
        return [x]
    return [(x >> (64 * w)) & _M64 for w in range(W)]


def to_ints(X: np.ndarray) -> list[int]:
    """A ``(W, n)`` array of words as Python ints."""
    if X.shape[0] == 1:
        return X[0].tolist()
    out = X[0].tolist()
    for w in range(1, X.shape[0]):
        hi = X[w].tolist()
        out = [a | (b << (64 * w)) for a, b in zip(out, hi)]
    return out


def to_int(X: np.ndarray, i: int) -> int:
    x = 0
    for w in range(X.shape[0]):
        x |= int(X[w, i]) << (64 * w)
    return x


def _mix64(h: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on an array (packing._mix64, element by element)."""
    h = h ^ (h >> _U64(30))
    h *= _U64(0xBF58476D1CE4E5B9)
    h ^= h >> _U64(27)
    h *= _U64(0x94D049BB133111EB)
    return h ^ (h >> _U64(31))


_GAMMA = _U64(0x9E3779B97F4A7C15)


def fingerprints(X: np.ndarray) -> np.ndarray:
    """:func:`conq.model.engines.packing.fingerprint64` of every state of ``X`` (``(W, n)``): the
    first word mixed, then each further word folded in while any word from it on is non-zero (as
    the scalar version stops when what is left of the integer is zero)."""
    with np.errstate(over="ignore"):
        h = _mix64(X[0] + _GAMMA)
        for w in range(1, X.shape[0]):
            rest = X[w] != 0
            for v in range(w + 1, X.shape[0]):
                rest |= X[v] != 0
            h = np.where(rest, _mix64((h ^ X[w]) + _GAMMA), h)
    return h


class Table:
    """``W``-word keys to non-negative int64 values: open addressing with linear probing over numpy
    arrays (an empty slot holds -1), looked up and filled an array of keys at a time.  At most half
    full."""

    SPARSE_SLOTS = 1 << 16

    def __init__(self, W: int, bits: int = 8, dtype: Any = np.int64, spread: int = 2):
        self.W = W
        self.n = 0
        self.dtype = dtype
        #: slots per key at least while the table is small (a sparser table probes less; the memo
        #: tables are small), 2 (at most half full) once ``spread`` slots a key would pass
        #: SPARSE_SLOTS (memory: the ``--big`` configuration's 375,385 entries would take 104 MB
        #: of tables at 8 slots a key)
        self.spread = spread
        self._alloc(bits)

    def _alloc(self, bits: int) -> None:
        self.bits = bits
        self.cap = 1 << bits
        self.keys = np.zeros((self.W, self.cap), dtype=_U64)
        self.vals = np.full(self.cap, -1, dtype=self.dtype)
        self._shift = _U64(64 - bits)
        self._mul = [_U64(m) for m in _MUL[:self.W]]

    def _slots(self, K: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = K[0] * self._mul[0]
            for w in range(1, self.W):
                h += K[w] * self._mul[w]
        return (h >> self._shift).view(np.int64)

    def get(self, K: np.ndarray) -> np.ndarray:
        """The values of the keys ``K`` (``(W, n)``), -1 where a key is absent."""
        slot = self._slots(K)
        vals, keys, m = self.vals, self.keys, self.cap - 1
        out = vals[slot]
        hit = keys[0][slot] == K[0]
        for w in range(1, self.W):
            hit &= keys[w][slot] == K[w]
        # (an empty slot whose zero key equals K holds -1: absent, as it should)
        todo = np.flatnonzero(~hit)
        if not len(todo):
            return out
        out[todo] = -1
        slot = slot[todo]
        more = vals[slot] >= 0  # another key there: probe on; an empty slot: absent
        todo, slot = todo[more], slot[more]
        while len(todo):
            slot = (slot + 1) & m
            v = vals[slot]
            occupied = v >= 0
            hit = occupied.copy()
            for w in range(self.W):
                hit &= keys[w][slot] == K[w][todo]
            out[todo[hit]] = v[hit]
            more = occupied & ~hit
            todo, slot = todo[more], slot[more]
        return out

    def put_many(self, K: np.ndarray, V: np.ndarray) -> None:
        """Keys ``K`` (``(W, m)``) -> values ``V`` (non-negative); a key already present, or given
        twice, takes the last value given."""
        if not K.shape[1]:
            return
        V = np.asarray(V, dtype=self.dtype)
        old = self.get(K)
        there = old >= 0
        if there.any():  # replace in place: find each one's slot
            self._replace(cols(K, there), V[there])
            K, V = cols(K, ~there), V[~there]
        if K.shape[1] > 1:  # a key given twice: its last value
            fp = K[0] if self.W == 1 else fingerprints(K)
            _, last = np.unique(fp[::-1], return_index=True)
            if len(last) < K.shape[1]:
                keep = np.sort(K.shape[1] - 1 - last)
                K, V = cols(K, keep), V[keep]
        self.insert_new(K, V)

    def insert_new(self, K: np.ndarray, V: Any) -> None:
        """Keys known to be absent and distinct -> values (the table grows as needed)."""
        m = K.shape[1]
        V = np.asarray(V, dtype=self.dtype)
        spread = self.spread if self.spread * (self.n + m) <= self.SPARSE_SLOTS else 2
        if spread * (self.n + m) > self.cap:
            live = np.flatnonzero(self.vals >= 0)
            LK, LV = cols(self.keys, live), self.vals[live]
            bits = self.bits
            while spread * (self.n + m) > (1 << bits):
                bits += 1
            self._alloc(bits)
            self.n = 0
            self._insert(LK, LV)
        self._insert(K, V)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.vals.nbytes

    def _insert(self, K: np.ndarray, V: np.ndarray) -> None:
        """Insert keys known to be absent and distinct: each round, every key still out claims its
        slot if free (one claimant wins a slot: whichever numpy's scatter kept), the rest probe on."""
        slot = self._slots(K)
        mask = self.cap - 1
        todo = np.arange(K.shape[1])
        claim = np.empty(self.cap, dtype=np.int64)
        while len(todo):
            s = slot[todo]
            free = self.vals[s] < 0
            cand, cs = todo[free], s[free]
            claim[cs] = cand
            win = cand[claim[cs] == cand]
            ws = slot[win]
            for w in range(self.W):
                self.keys[w][ws] = K[w][win]
            self.vals[ws] = V[win]
            lost = np.ones(len(todo), dtype=bool)
            lost[np.flatnonzero(free)[claim[cs] == cand]] = False
            todo = todo[lost]
            slot[todo] = (slot[todo] + 1) & mask
        self.n += K.shape[1]

    def _replace(self, K: np.ndarray, V: np.ndarray) -> None:
        slot = self._slots(K)
        mask = self.cap - 1
        todo = np.arange(K.shape[1])
        while len(todo):
            s = slot[todo]
            hit = np.ones(len(todo), dtype=bool)
            for w in range(self.W):
                hit &= self.keys[w][s] == K[w][todo]
            self.vals[s[hit]] = V[todo[hit]]
            todo = todo[~hit]
            slot[todo] = (slot[todo] + 1) & mask


_Table = Table


class _Compact:
    """The bits of a mask gathered into a small integer (runs of contiguous bits shifted together):
    a root of few bits is looked up in a plain array instead of a hash table."""

    def __init__(self, mask: int, W: int):
        self.runs = []  # (word, shift, width mask, output shift)
        out = 0
        for w, word in enumerate(_ws(mask, W)):
            b = 0
            while word >> b:
                if not (word >> b) & 1:
                    b += 1
                    continue
                e = b
                while (word >> e) & 1:
                    e += 1
                self.runs.append((w, _U64(b), _U64((1 << (e - b)) - 1), _U64(out)))
                out += e - b
                b = e
        self.bits = out

    def __call__(self, X: np.ndarray) -> np.ndarray:
        if not self.runs:
            return np.zeros(X.shape[1], dtype=np.int64)
        acc = None
        for w, sh, m, o in self.runs:
            part = (X[w] >> sh) & m
            if o:
                part <<= o
            acc = part if acc is None else (acc | part)
        return acc.view(np.int64)

    def of(self, x: int, W: int) -> int:
        return int(self(to_words([x], W))[0])


class _Steps:
    """Every step a packed view recorded, numbered (its global step id): the objects, and their
    ``keep`` and ``set`` words in ``(W, n)`` arrays."""

    def __init__(self, W: int):
        self.W = W
        self.objs: list[tuple] = []
        self._ids: dict[int, int] = {}  # id(step) -> step id (the objects are kept alive in objs)
        self.keep = np.zeros((W, 64), dtype=_U64)
        self.put = np.zeros((W, 64), dtype=_U64)
        #: runs of step ids, one per recorded entry of any section (an entry names its run's start);
        #: ``nflat`` of them are in use
        self.flat = np.zeros(1024, dtype=np.int32)
        self.nflat = 0
        #: ``(ids of an entry's steps, owed)`` -> its entry info (:func:`entry_info`): one run each
        self.infos: dict[tuple, int] = {}

    def runs(self, runs: list[list[int]]) -> list[int]:
        """Append runs of step ids to ``flat``; the index of each one's first."""
        starts, at = [], self.nflat
        for r in runs:
            starts.append(at)
            at += len(r)
        self.flat = _grown(self.flat, at)
        self.flat[self.nflat:at] = [g for r in runs for g in r]
        self.nflat = at
        return starts

    def gid(self, step: tuple) -> int:
        g = self._ids.get(id(step))
        if g is not None:
            return g
        g = len(self.objs)
        if g == self.keep.shape[1]:
            self.keep = np.concatenate([self.keep, np.zeros_like(self.keep)], axis=1)
            self.put = np.concatenate([self.put, np.zeros_like(self.put)], axis=1)
        self.objs.append(step)
        self._ids[id(step)] = g
        for w, (k, p) in enumerate(zip(_ws(step[2], self.W), _ws(step[3], self.W))):
            self.keep[w, g] = k
            self.put[w, g] = p
        return g


def _grown(a: np.ndarray, need: int) -> np.ndarray:
    """``a`` with room for at least ``need`` items on its last axis (doubling)."""
    if need <= a.shape[-1]:
        return a
    size = a.shape[-1]
    while size < need:
        size *= 2
    out = np.zeros(a.shape[:-1] + (size,), dtype=a.dtype)
    out[..., :a.shape[-1]] = a
    return out


#: an entry as one int64: where its run of step ids starts, whether a step is owed, how many steps
_COUNT_BITS = _search.COUNT_BITS  # (the kernel that reads entries packs them the same way)
_COUNT = (1 << _COUNT_BITS) - 1
_OWED = 1 << _COUNT_BITS
_FIRST_SHIFT = _COUNT_BITS + 1


def entry_info(first: int, count: int, owed: bool) -> int:
    if count > _COUNT:  # pragma: no cover - half a million steps from one state's section
        raise ValueError(f"a section recorded {count} steps for one state (at most {_COUNT})")
    return (first << _FIRST_SHIFT) | (_OWED if owed else 0) | count


class _VecSection:
    """One :class:`Section`'s recordings as arrays: its roots (root value -> root id, and each
    root's mask), its footprint keys (``state & mask`` -> entry id) and, per entry, its steps (a
    run of step ids in ``flat``), their number and whether one is owed."""

    #: roots of at most this many bits are looked up in a plain array
    DIRECT_ROOT_BITS = 16

    def __init__(self, sec: Section, W: int, steps: _Steps):
        self.sec = sec
        self.W = W
        self.steps = steps
        self.R = split(sec.root, W)[:, None]
        compact = _Compact(sec.root, W)
        self.compact = compact if compact.bits <= self.DIRECT_ROOT_BITS else None
        self.root_index = np.full(1 << compact.bits, -1, dtype=np.int32) if self.compact else None
        self.roots = None if self.compact else Table(W, 4)
        self.root_ids: dict[int, int] = {}
        self.root_masks: dict[int, int] = {}
        self.rmask = np.zeros((W, 8), dtype=_U64)
        #: per root id, its entry when the root alone is the footprint (-2: a key is looked up); the
        #: last item answers root id -1 (a root not seen yet): -1
        self.root_info = np.full(9, -1, dtype=np.int64)
        self.root_only = False
        self.keys = Table(W, 8, spread=8)
        self._staged: list = []  # (key, entry) recorded since the last flush
        for r, mask in list(sec.masks.items()):  # what the section already knows (a warm memo)
            self._root(r, mask)
        for key, e in list(sec.memo.items()):
            self._staged.append((key, e))
        self._flush()

    def _root(self, r: int, mask: int) -> None:
        if self.root_masks.get(r) == mask:
            return
        self.root_masks[r] = mask
        rid = self.root_ids.get(r)
        if rid is None:
            rid = self.root_ids[r] = len(self.root_ids)
            self.rmask = _grown(self.rmask, rid + 1)
            if rid + 1 >= len(self.root_info):
                grown = np.full(self.rmask.shape[1] + 1, -1, dtype=np.int64)
                grown[:rid] = self.root_info[:rid]
                self.root_info = grown
            if self.compact is not None:
                self.root_index[self.compact.of(r, self.W)] = rid
            else:
                self.roots.put_many(to_words([r], self.W), [rid])
        for w, v in enumerate(_ws(mask, self.W)):
            self.rmask[w, rid] = v
        self.root_info[rid] = -2

    def _flush(self) -> None:
        """Copy the staged entries into the arrays and the key table."""
        staged, self._staged = self._staged, []
        if not staged:
            return
        # entries with the same steps share one run of step ids (a step object, once numbered, is
        # kept alive by ``steps.objs``, so its id names it)
        known = self.steps.infos
        infos = [known.get((tuple(map(id, steps)), owed), -1) for _key, (steps, owed) in staged]
        todo = [i for i, info in enumerate(infos) if info < 0]
        if todo:
            gid = self.steps.gid
            fresh: dict = {}
            for i in todo:
                steps, owed = staged[i][1]
                k = (tuple(map(id, steps)), owed)
                info = fresh.get(k)
                if info is None:
                    r = [gid(s) for s in steps]
                    k = (tuple(map(id, steps)), owed)
                    info = fresh[k] = entry_info(self.steps.runs([r])[0], len(r), owed)
                infos[i] = info
            known.update(fresh)
        # (new keys, distinct: a key is recorded only when its state's look-up failed, and a mask
        # only grows, so two recordings of a round differ on the fields of the smaller mask)
        self.keys.insert_new(to_words([k for k, _ in staged], self.W), infos)
        root = self.sec.root
        for (key, _e), info in zip(staged, infos):
            if self.root_masks[key & root] == root:  # the root alone decides: no key to look up
                self.root_info[self.root_ids[key & root]] = info
                self.root_only = True

    def _record(self, x: int) -> None:
        """Stage the section's entry for ``x``: its memo's (an entry this table has not seen: one
        the scalar path recorded, or a parallel worker installed from another), else recorded now
        (the model's own code, :meth:`Section.miss`)."""
        sec = self.sec
        e = sec.lookup(x)
        r = x & sec.root
        mask = sec.masks[r]
        self._root(r, mask)
        self._staged.append((x & mask, e))

    def _rids(self, X: np.ndarray) -> np.ndarray:
        if self.compact is not None:
            return self.root_index[self.compact(X)]
        return self.roots.get(X & self.R)

    def _lookup(self, X: np.ndarray) -> np.ndarray:
        rid = self._rids(X)
        if self.root_only:
            info = self.root_info[rid]
            need = np.flatnonzero(info == -2)
            if len(need) < len(info):
                if len(need):
                    info[need] = self.keys.get(cols(X, need) & cols(self.rmask, rid[need]))
                return info
        info = self.keys.get(X & cols(self.rmask, rid))
        info[rid < 0] = -1
        return info

    def entries(self, X: np.ndarray) -> np.ndarray:
        """The entry of every state of ``X`` (:func:`entry_info`), recording the footprints not seen
        yet."""
        eid = self._lookup(X)
        bad = np.flatnonzero(eid < 0)
        while len(bad):
            Xb = cols(X, bad)
            # one state per distinct key (under the masks known now) is recorded; a recording that
            # grows its root's mask may leave others of that key unresolved: the loop goes on
            rid = self._rids(Xb)
            Kb = np.where(rid >= 0, Xb & cols(self.rmask, rid), Xb & self.R)
            _, first = first_occurrences(Kb[0] if self.W == 1 else fingerprints(Kb))
            for i in np.sort(first).tolist():
                self._record(to_int(Xb, i))
            self._flush()
            got = self._lookup(Xb)
            eid[bad] = got
            bad = bad[got < 0]
        return eid


class VectorExpander:
    """A packed view's successor function over arrays of states (see the module's note)."""

    def __init__(self, packed: Packed):
        self.packed = packed
        self.W = words_for(packed.codec.total_bits)
        self.steps = _Steps(self.W)
        self.secs = [_VecSection(s, self.W, self.steps) for s in packed.sections]
        self.nfair = packed.nfair
        self.idle = None if packed.idle_step is None else self.steps.gid(packed.idle_step)
        self.idle_info = entry_info(self.steps.runs([[self.idle]])[0], 1, False) if self.idle is not None else 0
        self._needs = np.zeros(0, dtype=bool)
        self._needs_for: tuple = ()

    def words(self, xs: Iterable[int]) -> np.ndarray:
        return to_words(xs, self.W)

    def expand(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(Y, count, G)`` for the states ``X`` (``(W, n)``): their successors ``Y`` (``(W, T)``)
        in the order of :meth:`Packed.expand`, state by state (state ``i``'s are the ``count[i]``
        after those of states ``0..i-1``), and the step id of each (``G``, int32; the objects are
        ``self.steps.objs``).

        One pass for all sections: a matrix of (state, section) pairs, each with its entry's number
        of steps and the start of its run of step ids; its non-empty cells, state by state and
        section by section, are the successor lists in the model's order (written out by the
        compiled kernel ``_search.successors``: in numpy, the transposes, repeats and gathers that
        did the same cost 0.08 of the consumer-lists reference's 0.25 CPU s once warm)."""
        W, n = X.shape
        S = len(self.secs)
        info = np.empty((S + 1, n), dtype=np.int64)
        for s, vs in enumerate(self.secs):
            info[s] = vs.entries(X)
        if self.idle is not None:
            owed = np.bitwise_or.reduce(info[:self.nfair], axis=0) & _OWED if self.nfair else np.zeros(n, np.int64)
            info[S] = np.where(owed, 0, self.idle_info)
        else:
            info[S] = 0
        total = (info & _COUNT).sum(axis=0)
        T = int(total.sum())
        steps = self.steps
        Y = np.empty((W, T), dtype=_U64)
        G = np.empty(T, dtype=np.int32)
        _search.successors(info, np.ascontiguousarray(X), steps.flat, steps.keep, steps.put, Y, G, n, S + 1, W,
                           steps.keep.shape[1])
        return Y, total, G

    def needs_check(self, skip: set) -> np.ndarray:
        """Per step id: whether its label was left to the engine (its class not in ``skip``; the
        engines only ever add to ``skip``)."""
        objs = self.steps.objs
        if self._needs_for != (id(skip), len(skip)):
            self._needs = np.zeros(0, dtype=bool)
            self._needs_for = (id(skip), len(skip))
        if len(self._needs) < len(objs):
            more = [s[0].__class__ not in skip for s in objs[len(self._needs):]]
            self._needs = np.concatenate([self._needs, np.array(more, dtype=bool)])
        return self._needs


class VectorPredicate:
    """A memoised state predicate (:func:`~conq.model.engines.packing.memoised_predicate`) on
    arrays: a table keyed by ``state & mask``, filled from the predicate's own memo and by calling it
    on one state per key not seen yet (its mask may grow: entries of a smaller mask stay right, as
    in the predicate's own memo)."""

    def __init__(self, g: Any, W: int):
        self.g = g
        self.W = W
        self.table = Table(W, 6)
        items = list(g.memo.items())
        self.table.put_many(to_words([k for k, _ in items], W), [int(r) for _, r in items])

    def __call__(self, X: np.ndarray) -> np.ndarray:
        g, W = self.g, self.W
        M = split(g.mask(), W)[:, None]
        v = self.table.get(X & M)
        bad = np.flatnonzero(v < 0)
        while len(bad):
            Xb = cols(X, bad)
            Kb = Xb & M
            _, first = first_occurrences(Kb[0] if W == 1 else fingerprints(Kb))
            keys, vals = [], []
            for i in np.sort(first).tolist():
                x = to_int(Xb, i)
                vals.append(int(g(x)))
                keys.append(x & g.mask())
            self.table.put_many(to_words(keys, W), vals)
            M = split(g.mask(), W)[:, None]
            got = self.table.get(Xb & M)
            v[bad] = got
            bad = bad[got < 0]
        return v.astype(bool)


def vector_view(packed: Packed) -> VectorExpander:
    """The packed view's :class:`VectorExpander`, made once (its tables keep what was recorded)."""
    vx = getattr(packed, "_vector", None)
    if vx is None:
        vx = packed._vector = VectorExpander(packed)
    return vx
