"""The explorer over several worker processes: a breadth-first search whose frontier is
partitioned by stable fingerprint (issue 18).

Worker ``w`` owns the states whose 64-bit fingerprint (:mod:`conq.model.engines.fingerprint`,
the same value in every process, unlike ``hash()``) is ``w`` modulo the number of workers.
Level by level, every worker expands the states it owns, checks the transition properties
on each transition it takes, keeps the successors it owns and sends the others to their
owners (each fingerprint at most once per sender); then every worker admits what it
received, checks the state properties on what is new, and tells the coordinator (this
process) what it found.  The coordinator decides whether there is another level, and at
the end rebuilds the counterexamples and witnesses by asking the owners for parent links
(``(parent id, successor position)``) and re-running the successors from the initial state.

A model with a packed view (:meth:`Model.packed`, model/engines/packing.py) is searched on its
integers, a chunk of states at a time (vector.VectorExpander, as the one-process search): a state
is its own exact key, and only arrays of machine words cross between processes.  What the packed
sections record during a level travels with the level's successors (:class:`_recordings`).  A
packing of at most 64 bits is searched with :class:`_Exact` (numpy partitions by
:func:`exact_owners`, the compiled set of seen states admits) and with work sharing
(:class:`_SharedFrontiers`): a worker done with its own frontier takes halves of what is left of
another's, since a level waits for its slowest worker and on a busy machine one of them is often
slower for a while.  Blocks are admitted in an order that does not depend on who expanded them, so
sharing changes no count and no path.  A packing of several words is searched with
:class:`_Words` (owned by its fingerprint, told apart by all its words).  On one machine the
one-process search is still the faster (README: the figures): the workers both record what the
one process records once, and a level costs them messages and barriers.

Counts (states, transitions, depth) are those of the one-process search; every path found
is a shortest one (the search is level-synchronous), though among equally short ones it may
name another.  Liveness needs the whole graph: it is reported ``skipped``.

Processes are started with ``fork`` (the model object is inherited, never pickled), and none
outlives :func:`explore_parallel`: they are stopped and joined on every way out.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import pickle
import signal
import time
import traceback
from array import array
from typing import Any, Callable

import numpy as np

from conq.model.engines.fingerprint import fingerprint
from conq.model.engines.levels import flat_successors
from conq.model.engines.packing import PackingError
from conq.model.kernel import Kind, Model, Path


def _worker(w: int, W: int, model: Model, symmetry: bool, conn, inboxes, use_packed: bool = True,
            shared: "_SharedFrontiers | None" = None) -> None:
    from array import array

    from conq.model.engines.results import _Checks

    # (forked with SIGTERM and SIGINT held back, see explore_parallel: a worker takes them again)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        # Nothing a worker keeps forms a reference cycle; the cyclic collector's full passes over
        # the frontier's and the outboxes' millions of tuples cost up to a fifth of a worker's time
        # (measured on the consumer-lists reference) and collect nothing.  The process ends with
        # the search.
        gc.disable()
        chk = _Checks(model, symmetry)
        canon = model.canonical if symmetry else None
        packed = model.packed() if use_packed and not symmetry else None
        if packed is not None:  # integers, memoised checks (as fpsearch); a state is its own key
            chk.use_packed(packed.codec)
        seen: set[int] = set()
        sent: set[int] = set()
        parent = array("q")  # global id of the parent (local * W + owner), -1 for initial states
        via = array("I")
        frontier: list[tuple[Any, int]] = []  # (state, global id)
        inbox = inboxes[w]
        inbox_of = inboxes
        reported: dict = {}
        #: a packing of at most 64 bits: states are exact machine words, partitioned, deduplicated
        #: and admitted in bulk with numpy (_Exact), the Python loop only expands
        exact = _Exact(w, W, parent, via, chk) if packed is not None and packed.codec.total_bits <= 64 else None
        #: a packing of several words: the same, a state a column of words (_Words), no work sharing
        words = None
        if packed is not None and exact is None:
            from conq.model.engines.vector import words_for

            words = _Words(w, W, words_for(packed.codec.total_bits), parent, via, chk)
        if exact is None:
            shared = None

        def admit(items) -> None:
            for f, key, par, k in items:
                if f in seen:
                    continue
                seen.add(f)
                gid = len(parent) * W + w
                parent.append(par)
                via.append(k)
                frontier.append((key, gid))
                chk.on_state(key, gid)

        def send(level: int, by_dest) -> None:
            """Send ``by_dest[o]`` to every other worker ``o`` (a queue's feeder thread writes it
            while this worker goes on).  Pickled here, not in the feeder thread: a payload that
            cannot be pickled (a state holding a local object, say) then fails this worker, which
            tells the coordinator; in the feeder it was only printed and dropped, and every worker
            waited for it for ever."""
            for other in range(W):
                if other != w:
                    inbox_of[other].put(_dumps((level, w, by_dest[other])))

        def receive(level: int) -> list:
            """What every other worker sent this worker for ``level``, by sender (the same order in
            every run).  No message of another level can be waiting: the coordinator starts a
            level only after every worker has finished the one before."""
            got = []
            while len(got) < W - 1:
                lvl, sender, payload = pickle.loads(inbox.get())
                if lvl != level:
                    raise RuntimeError(f"worker {w}: a message of level {lvl} arrived during level {level}")
                got.append((sender, payload))
            got.sort(key=lambda m: m[0])
            return got

        def news() -> list:
            out = []
            for kind, d in (("v", chk.violated), ("w", chk.witnessed), ("vs", chk.violated_step), ("ws", chk.witnessed_step)):
                for name, where in d.items():
                    if (kind, name) not in reported:
                        reported[(kind, name)] = where
                        out.append((kind, name, where))
            return out

        while True:
            msg = conn.recv()
            if msg[0] == "init":
                if exact is not None:
                    exact.admit([(np.array([f for f, _key, _par, _k in msg[1]], dtype=np.uint64),
                                  np.array([par for _f, _key, par, _k in msg[1]], dtype=np.int64),
                                  np.array([k for _f, _key, _par, k in msg[1]], dtype=np.int64))])
                elif words is not None:
                    from conq.model.engines.vector import to_words

                    words.admit([(to_words([key for _f, key, _par, _k in msg[1]], words.Wd),
                                  np.array([par for _f, _key, par, _k in msg[1]], dtype=np.int64),
                                  np.array([k for _f, _key, _par, k in msg[1]], dtype=np.int64))])
                else:
                    admit(msg[1])
                bulk = exact if exact is not None else words
                conn.send(("ok", len(parent), 0, news(), bool(frontier) or (bulk is not None and bulk.pending > 0)))
            elif msg[0] == "level":
                level = msg[1]
                if exact is not None:
                    transitions = _level_exact(level, w, W, packed, chk, exact, shared, send, receive)
                    conn.send(("ok", len(parent), transitions, news(), exact.pending > 0))
                    continue
                if words is not None:
                    transitions = _level_words(level, w, W, packed, chk, words, send, receive)
                    conn.send(("ok", len(parent), transitions, news(), words.pending > 0))
                    continue
                current, frontier[:] = list(frontier), []
                out, transitions = _expand_level(current, w, W, model, chk, canon, seen, sent)
                send(level, out)
                admit(out[w])  # this worker's own first (the order of every run), before the wait
                got = receive(level)
                for _sender, items in got:
                    admit(items)
                conn.send(("ok", len(parent), transitions, news(), bool(frontier)))
            elif msg[0] == "parent":
                local = msg[1]
                conn.send(("ok", parent[local], via[local]))
            elif msg[0] == "exit":
                conn.send(("ok", None if packed is None else sum(sec.runs for sec in packed.sections)))
                return
    except PackingError as e:  # a state outside the packed domains: the coordinator falls back to tuples
        conn.send(("packing", str(e)))
    except BaseException:  # noqa: BLE001 - reported to the coordinator, which raises it
        try:
            conn.send(("error", traceback.format_exc()))
        except Exception:  # noqa: BLE001
            pass


def _expand_level(current: list, w: int, W: int, model: Model, chk: Any, canon, seen: set, sent: set) -> tuple[list, int]:
    """Expand this worker's states of one level: per owner, the successors ``(fingerprint, state,
    parent id, position)`` it owns (this worker's own: not yet seen here; another's: each sent once)."""
    successors = model.successors
    fp = fingerprint
    on_step, skip = chk.on_step, chk.skip
    out: list[list] = [[] for _ in range(W)]
    mine = out[w]
    transitions = 0
    for s, gid in current:
        succ = successors(s)
        transitions += len(succ)
        k = -1
        for a, o, t in succ:
            k += 1
            key = canon(t) if canon else t
            f = fp(key)
            owner = f % W
            if owner == w:
                if f not in seen:
                    mine.append((f, key, gid, k))
            elif f not in sent:
                sent.add(f)
                out[owner].append((f, key, gid, k))
            if a.__class__ not in skip:  # as in the explorer: _Checks.on_step
                on_step(s, a, o, t, (gid, k))
    return out, transitions


#: Fibonacci hashing's multiplier: the owner of a state is taken from its product's top bits
_FIB = 0x9E3779B97F4A7C15


class _recordings:
    """``with _recordings(packed, share) as recorded``: while the block runs, what the packed
    sections record is journalled; at its end ``recorded`` holds it, ready for the other workers.

    A worker's recordings of a level travel with the level's successors and are installed before
    the next level, so a recording made once is not made again by another worker later.  Two
    workers may both record a section on the same key within one level; measured on the
    consumer-lists reference, the two together make 1.27x the recordings of one process (8,300 +
    8,756 against 13,449), where deferring each miss to an owning worker cost two more barriers a
    level and was slower on the whole.  The successors, and so the counts, are those of the
    one-process search whoever records."""

    def __init__(self, packed: Any, share: bool):
        self.secs, self.share = packed.sections, share
        self.recorded: list = []

    def __enter__(self) -> list:
        for sec in self.secs:
            sec.journal = [] if self.share else None
        return self.recorded

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.recorded.extend((n, sec.export(sec.journal)) for n, sec in enumerate(self.secs) if sec.journal)
        for sec in self.secs:
            sec.journal = None


#: states a worker takes from its own frontier at a time (each take is one lock, so that another
#: worker done with its own frontier can take the rest: _SharedFrontiers), expanded at once
#: (vector.VectorExpander: a call costs about as much as a few hundred states' expansion)
_CHUNK = 4096


class _Block:
    """The successors of one contiguous range of a frontier, expanded by one worker: ``(owner of
    the frontier, start)`` orders the blocks the same way whoever expanded them."""

    __slots__ = ("owner", "start", "ys", "gids", "counts")

    def __init__(self, owner: int, start: int):
        self.owner, self.start = owner, start
        self.ys, self.gids, self.counts = array("Q"), array("q"), array("q")


def _level_exact(level: int, w: int, W: int, packed: Any, chk: Any, exact: "_Exact", shared: "_SharedFrontiers | None",
                 send: Callable, receive: Callable) -> int:
    """One level of a packing of at most 64 bits; returns its transitions.

    The worker expands its frontier chunk by chunk, then, with ``shared``, takes halves of what is
    left of the others' frontiers (work sharing: on a busy machine one worker is often slower for
    a while, and a level waits for the slowest).  Each range expanded is a :class:`_Block`; its
    successors are partitioned by owner with numpy and sent with the level's recordings.  An owner
    admits the blocks in the order ``(frontier owner is not me, frontier owner, start)``: the same
    in every run whoever expanded which range, and, with nothing taken, the order of the search
    without sharing."""
    from conq.model.engines.vector import vector_view

    vx = vector_view(packed)  # (this worker's: made after the fork)
    objs = vx.steps.objs
    decode = packed.codec.decode
    on_step, skip = chk.on_step, chk.skip
    transitions = 0

    def expand_into(xs: Any, gs: Any, blk: _Block) -> None:
        """Expand the states ``xs`` (ids ``gs``) at once (vector.VectorExpander, as the one-process
        search does); the steps whose labels the recording left to the engine are checked on the
        decoded states, in successor order."""
        nonlocal transitions
        X = np.ascontiguousarray(xs, dtype=np.uint64).reshape(1, -1)
        Y, cnt, G = vx.expand(X)
        transitions += len(G)
        blk.gids.frombytes(np.asarray(gs, dtype=np.int64).tobytes())
        blk.counts.frombytes(cnt.astype(np.int64).tobytes())
        blk.ys.frombytes(Y[0].tobytes())
        needs = vx.needs_check(skip)
        pending = np.flatnonzero(needs[G]) if needs.any() else ()
        if len(pending):
            ends = np.cumsum(cnt)
            for p, i in zip(pending.tolist(), np.searchsorted(ends, pending, side="right").tolist()):
                a, o, _keep, _put = objs[G[p]]
                on_step(decode(int(X[0, i])), a, o, decode(int(Y[0, p])), (int(gs[i]), p - int(ends[i] - cnt[i])))

    S, G = exact.take()
    if W > 1 and len(S) > 1:
        # expanded in the order of the packed values: states alike in their high fields follow each
        # other, so the sections' memo look-ups stay warm.  A worker's frontier is a hashed half of
        # the level's, and in admission order its neighbours have less in common than in one
        # process's; sorted, two workers took 12% less time on the consumer-lists reference (3.3 s
        # against 2.9 s, three runs each), while one process's order is as good as sorted.
        order = np.argsort(S, kind="stable")
        S, G = S[order], G[order]
    own = _Block(w, 0)
    blocks = [own]
    with _recordings(packed, W > 1) as recorded:
        if shared is not None and shared.publish(w, level, S, G):
            while True:
                a, b = shared.take_front(w, _CHUNK)
                if a >= b:
                    break
                expand_into(S[a:b], G[a:b], own)
            for v in [(w + i) % W for i in range(1, W)]:
                while True:
                    got = shared.steal(v, level, _CHUNK)
                    if got is None:
                        break
                    xs, gs, start = got
                    blk = _Block(v, start)
                    expand_into(xs, gs, blk)
                    blocks.append(blk)
        else:
            expand_into(S, G, own)
    mine_parts: list = []
    by_dest: list[list] = [[] for _ in range(W)]
    for blk in blocks:
        if not blk.gids:
            continue
        mine, parts = exact.partition(blk.ys, blk.gids, blk.counts)
        key = (blk.owner != w, blk.owner, blk.start)
        mine_parts.append((key, mine))
        for o in range(W):
            if o != w:
                by_dest[o].append((key, parts[o]))
    send(level, [None if o == w else (by_dest[o], recorded) for o in range(W)])
    first = mine_parts[:1] if mine_parts and mine_parts[0][0] == (False, w, 0) else []
    if first:  # this worker's own range first (it comes first in the order), before the wait
        exact.admit([first[0][1]])
    got = _install(packed, receive(level))
    rest = mine_parts[len(first):] + [(key, exact.unpack(payload)) for _sender, parts in got for key, payload in parts]
    rest.sort(key=lambda kp: kp[0])
    if rest:
        exact.admit([part for _key, part in rest])
    return transitions


class _SharedFrontiers:
    """Every worker's frontier of the current level in one shared anonymous mapping (made before
    the workers fork, so it goes with the last of them and leaves nothing behind), with a lock and
    ``(level, front, back)`` per worker: the owner takes chunks at the front, a worker done with its
    own takes half of what is left at the back.  A frontier larger than ``capacity`` states is not
    shared (its owner expands it alone)."""

    def __init__(self, ctx: Any, W: int, capacity: int = 1 << 20):
        import mmap

        self.W, self.capacity = W, capacity
        self.mm = mmap.mmap(-1, 8 * (3 * W + 2 * W * capacity))
        self.locks = [ctx.Lock() for _ in range(W)]
        self._views: Any = None

    def _attach(self) -> tuple:
        if self._views is None:  # views only in the workers (the coordinator can close the mapping)
            W, cap = self.W, self.capacity
            hdr = np.frombuffer(self.mm, dtype=np.int64, count=3 * W)
            states = [np.frombuffer(self.mm, dtype=np.uint64, count=cap, offset=8 * (3 * W + 2 * v * cap)) for v in range(W)]
            gids = [np.frombuffer(self.mm, dtype=np.int64, count=cap, offset=8 * (3 * W + (2 * v + 1) * cap)) for v in range(W)]
            self._views = (hdr, states, gids)
        return self._views

    def publish(self, w: int, level: int, S: Any, G: Any) -> bool:
        """Offer worker ``w``'s frontier of ``level`` (no one takes from it before this returns:
        the others check the level under the lock)."""
        hdr, states, gids = self._attach()
        n = len(S)
        if n > self.capacity:
            with self.locks[w]:
                hdr[3 * w:3 * w + 3] = (-1, 0, 0)
            return False
        states[w][:n] = S
        gids[w][:n] = G
        with self.locks[w]:
            hdr[3 * w:3 * w + 3] = (level, 0, n)
        return True

    def take_front(self, w: int, c: int) -> tuple[int, int]:
        hdr = self._views[0]
        with self.locks[w]:
            a = int(hdr[3 * w + 1])
            b = min(a + c, int(hdr[3 * w + 2]))
            if a < b:
                hdr[3 * w + 1] = b
        return a, b

    def steal(self, v: int, level: int, c: int) -> tuple[Any, Any, int] | None:
        """Half of what is left of worker ``v``'s frontier of ``level`` (its states, their ids and
        where the range starts), or None when less than ``c`` states are left."""
        hdr, states, gids = self._attach()
        with self.locks[v]:
            if int(hdr[3 * v]) != level:
                return None
            a, b = int(hdr[3 * v + 1]), int(hdr[3 * v + 2])
            if b - a < c:
                return None
            start = b - (b - a) // 2
            hdr[3 * v + 2] = start
        # the range is this worker's now; the owner rewrites its frontier only at the next level,
        # which starts after every worker has finished this one
        return states[v][start:b].copy(), gids[v][start:b].copy(), start

    def close(self) -> None:
        self.mm.close()


def _install(packed: Any, got: list) -> list:
    """Install the recordings the other workers sent with a level's successors; their successors."""
    for _sender, (_successors, recorded) in got:
        for n, entries in recorded:
            packed.sections[n].install(entries)
    return [(sender, successors) for sender, (successors, _recorded) in got]


class _Exact:
    """A worker's bulk bookkeeping for packed states of at most 64 bits (exact machine words): a
    level's successors are partitioned by owner (:func:`exact_owner`) and deduplicated with numpy,
    sent as raw arrays, and admitted in order (this worker's own first, then each sender's in
    sender order: the same in every run); ``seen`` is the set of the states this worker owns
    (keyset.KeySet).  The state checks of the admitted states are evaluated as an array (the
    predicate "nothing fires", vector.VectorPredicate, as the one-process search does): only a
    state where something fires takes the usual path."""

    def __init__(self, w: int, W: int, parent: Any, via: Any, chk: Any):
        from conq.model.engines.keyset import KeySet  # (the compiled kernels: where a search needs them)

        self.w, self.W = w, W
        self.parent, self.via, self.chk = parent, via, chk
        self.seen = KeySet()
        self.next: list = []  # the next frontier: (states, global ids) arrays, in admission order
        self.pending = 0
        self._quiet: list = [None, None]  # (chk.quiet[0], its VectorPredicate)

    def take(self) -> tuple:
        """The frontier admitted so far, as ``(states, global ids)`` arrays; the next one starts empty."""
        parts, self.next, self.pending = self.next, [], 0
        if not parts:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def partition(self, ys: Any, gids: Any, counts: Any) -> tuple[tuple, list]:
        """``(mine, by_dest)``: this worker's candidates and, per other worker, theirs as bytes;
        each ``(states, parent ids, positions)``, first occurrences only, in expansion order."""
        y, src, k = flat_successors(ys, counts, np.frombuffer(gids, dtype=np.int64) if len(gids) else ())
        return _by_owner(self.w, self.W, exact_owners(y, self.W), y.reshape(1, -1), src, k)

    @staticmethod
    def unpack(payload: tuple) -> tuple:
        return (np.frombuffer(payload[0], dtype=np.uint64), np.frombuffer(payload[1], dtype=np.int64),
                np.frombuffer(payload[2], dtype=np.int64))

    def admit(self, parts: list) -> None:
        y = np.concatenate([p[0] for p in parts])
        src = np.concatenate([p[1] for p in parts])
        k = np.concatenate([p[2] for p in parts])
        idx = self.seen.admit(y)
        y, src, k = y[idx], src[idx], k[idx]
        base = len(self.parent)
        self.parent.frombytes(src.astype(np.int64).tobytes())
        self.via.frombytes(k.astype(np.uint32).tobytes())
        g = (base + np.arange(len(y), dtype=np.int64)) * self.W + self.w
        chk = self.chk
        if self._quiet[0] is not chk.quiet[0]:
            from conq.model.engines.vector import VectorPredicate

            self._quiet = [chk.quiet[0], VectorPredicate(chk.quiet[0], 1)]
        for j in np.flatnonzero(~self._quiet[1](y.reshape(1, -1))).tolist():
            chk.on_state(int(y[j]), int(g[j]))
        if len(y):
            self.next.append((y, g))
            self.pending += len(y)


def _by_owner(w: int, W: int, owner: Any, Y: Any, src: Any, k: Any) -> tuple[tuple, list]:
    """``(mine, by_dest)``: the successors ``Y`` (``(words, T)``, with parent ids ``src`` and
    positions ``k``) split by ``owner`` among ``W`` workers, each owner's first occurrences only, in
    expansion order; worker ``w``'s as arrays (a state of one word as a vector), every other's as
    bytes (``by_dest[w]`` is None)."""
    from conq.model.engines.keyset import KeySet

    width = Y.shape[0]
    mine: tuple = ()
    by_dest: list = []
    for o in range(W):
        sel = np.flatnonzero(owner == o)
        sel = sel[KeySet(width=width).admit(Y[:, sel] if width > 1 else Y[0, sel])]
        part = (Y[0, sel] if width == 1 else np.ascontiguousarray(Y[:, sel]), src[sel], k[sel])
        if o == w:
            mine = part
            by_dest.append(None)
        else:
            by_dest.append(tuple(a.tobytes() for a in part))
    return mine, by_dest


class _Words:
    """:class:`_Exact` for packed states of several words (wider than 64 bits): a state is a column
    of ``Wd`` uint64 words, owned by :func:`words_owners` (its 64-bit fingerprint's), and told
    apart by all its words (keyset.KeySet of width ``Wd``: no two states are ever merged).  No
    work sharing (_SharedFrontiers holds states of one word)."""

    def __init__(self, w: int, W: int, Wd: int, parent: Any, via: Any, chk: Any):
        from conq.model.engines.keyset import KeySet

        self.w, self.W, self.Wd = w, W, Wd
        self.parent, self.via, self.chk = parent, via, chk
        self.seen = KeySet(width=Wd)
        self.next: list = []
        self.pending = 0
        self._quiet: list = [None, None]

    def take(self) -> tuple:
        parts, self.next, self.pending = self.next, [], 0
        if not parts:
            return np.empty((self.Wd, 0), dtype=np.uint64), np.empty(0, dtype=np.int64)
        return np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts])

    def partition(self, Y: Any, src: Any, k: Any) -> tuple[tuple, list]:
        """``(mine, by_dest)`` of a block's successors ``Y`` (``(Wd, T)``, with their parents' ids
        and positions), as :meth:`_Exact.partition`."""
        return _by_owner(self.w, self.W, words_owners(Y, self.W), Y, src, k)

    def unpack(self, payload: tuple) -> tuple:
        return (np.frombuffer(payload[0], dtype=np.uint64).reshape(self.Wd, -1),
                np.frombuffer(payload[1], dtype=np.int64), np.frombuffer(payload[2], dtype=np.int64))

    def admit(self, parts: list) -> None:
        from conq.model.engines.vector import VectorPredicate, cols, to_int

        Y = np.concatenate([p[0] for p in parts], axis=1)
        src = np.concatenate([p[1] for p in parts])
        k = np.concatenate([p[2] for p in parts])
        idx = self.seen.admit(Y)
        Y, src, k = cols(Y, idx), src[idx], k[idx]
        base = len(self.parent)
        self.parent.frombytes(src.astype(np.int64).tobytes())
        self.via.frombytes(k.astype(np.uint32).tobytes())
        g = (base + np.arange(Y.shape[1], dtype=np.int64)) * self.W + self.w
        chk = self.chk
        if self._quiet[0] is not chk.quiet[0]:
            self._quiet = [chk.quiet[0], VectorPredicate(chk.quiet[0], self.Wd)]
        for j in np.flatnonzero(~self._quiet[1](Y)).tolist():
            chk.on_state(to_int(Y, j), int(g[j]))
        if Y.shape[1]:
            self.next.append((Y, g))
            self.pending += Y.shape[1]


def _level_words(level: int, w: int, W: int, packed: Any, chk: Any, words: _Words, send: Callable,
                 receive: Callable) -> int:
    """One level of a packing of several words (:class:`_Words`); returns its transitions.  The
    frontier is expanded a chunk at a time (vector.VectorExpander), each chunk's successors
    partitioned by owner; an owner admits its own first, then each sender's in sender order."""
    from conq.model.engines.levels import LevelSearch
    from conq.model.engines.vector import cols, to_int, vector_view

    vx = vector_view(packed)
    objs = vx.steps.objs
    decode = packed.codec.decode
    on_step, skip = chk.on_step, chk.skip
    transitions = 0
    S, G = words.take()
    mine_parts: list = []
    by_dest: list[list] = [[] for _ in range(W)]
    with _recordings(packed, W > 1) as recorded:
        for c0 in range(0, S.shape[1], LevelSearch.CHUNK):
            X, gs = np.ascontiguousarray(S[:, c0:c0 + LevelSearch.CHUNK]), G[c0:c0 + LevelSearch.CHUNK]
            Y, cnt, Gs = vx.expand(X)
            transitions += len(Gs)
            ends = np.cumsum(cnt)
            needs = vx.needs_check(skip)
            pending = np.flatnonzero(needs[Gs]) if needs.any() else ()
            for p, i in zip(np.asarray(pending).tolist(), np.searchsorted(ends, pending, side="right").tolist()):
                a, o, _keep, _put = objs[Gs[p]]
                on_step(decode(to_int(X, i)), a, o, decode(to_int(Y, p)), (int(gs[i]), p - int(ends[i] - cnt[i])))
            src = np.repeat(gs, cnt)
            k = np.arange(len(Gs), dtype=np.int64) - np.repeat(ends - cnt, cnt)
            mine, parts = words.partition(Y, src, k)
            mine_parts.append(mine)
            for o in range(W):
                if o != w:
                    by_dest[o].append(parts[o])
    send(level, [None if o == w else (by_dest[o], recorded) for o in range(W)])
    if mine_parts:
        words.admit(mine_parts)
    got = _install(packed, receive(level))
    rest = [words.unpack(payload) for _sender, parts in got for payload in parts]
    if rest:
        words.admit(rest)
    return transitions


def _dumps(obj: Any) -> bytes:
    """A message between workers, pickled by the sender (``send`` in :func:`_worker`)."""
    return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)


def exact_owners(y: Any, W: int) -> Any:
    """The owners of packed states of at most 64 bits (a numpy uint64 array): Fibonacci hashing,
    the multiplication wrapping at 64 bits as numpy's unsigned arithmetic does."""
    return (((y * np.uint64(_FIB)) >> np.uint64(32)) % np.uint64(W)).astype(np.int64)


def exact_owner(x: int, W: int) -> int:
    """:func:`exact_owners` of one state (the coordinator's initial states)."""
    return (((x * _FIB) & 0xFFFFFFFFFFFFFFFF) >> 32) % W


def words_owners(Y: Any, W: int) -> Any:
    """The owners of packed states of several words (``(Wd, n)``): :func:`exact_owners` of their
    64-bit fingerprints (vector.fingerprints)."""
    from conq.model.engines.vector import fingerprints

    return exact_owners(fingerprints(Y), W)


def words_owner(x: int, Wd: int, W: int) -> int:
    """:func:`words_owners` of one state (the coordinator's initial states)."""
    from conq.model.engines.vector import to_words

    return int(words_owners(to_words([x], Wd), W)[0])


def _reply(r: tuple, w: int) -> tuple:
    """A worker's reply, or its failure raised here (PackingError: the explorer falls back to tuples)."""
    if r[0] == "packing":
        raise PackingError(r[1])
    if r[0] == "error":
        raise RuntimeError(f"explorer worker {w} failed:\n{r[1]}")
    return r


def explore_parallel(model: Model, W: int, max_states, symmetry: bool, progress, box: list, watch,
                     use_packed: bool = True) -> Any:
    from conq.model.engines.results import Exploration, SearchProgress, Verdict, _Checks
    from conq.model.engines.fpsearch import replay_positions

    try:
        ctx = mp.get_context("fork")
    except ValueError:  # pragma: no cover - a platform without fork
        raise RuntimeError("--workers needs the 'fork' start method (Linux, macOS)") from None
    t0 = time.perf_counter()
    props = _Checks(model).props
    packed = model.packed() if use_packed and not symmetry else None  # (before any queue or pipe is made)
    # a packing of at most 64 bits: the frontiers are shared, so that a worker done early helps
    shared = _SharedFrontiers(ctx, W) if packed is not None and packed.codec.total_bits <= 64 and W > 1 else None
    inboxes = [ctx.Queue() for _ in range(W)]
    pipes = [ctx.Pipe() for _ in range(W)]
    procs = [ctx.Process(target=_worker, args=(w, W, model, symmetry, pipes[w][1], inboxes, use_packed, shared), daemon=True,
                         name=f"conq-explore-{w}") for w in range(W)]
    conns = [p[0] for p in pipes]
    complete, stop_reason = True, ""
    found: dict[tuple[str, str], tuple[int, int, Any]] = {}  # (kind, name) -> (level, worker, where)

    def ask_all(msg) -> list:
        """Every worker's reply to ``msg``, taken as they come: a worker that fails while the others
        wait for its share of a level (a PackingError, say) is heard at once, not after them."""
        from multiprocessing.connection import wait

        for c in conns:
            c.send(msg)
        replies: list = [None] * W
        waiting = {c: w for w, c in enumerate(conns)}
        while waiting:
            for c in wait(list(waiting), timeout=0.05):
                w = waiting.pop(c)
                replies[w] = _reply(c.recv(), w)
            if watch is not None and watch.stop_reason:
                raise _Stop(watch.stop_reason)
            for c, w in waiting.items():
                if not procs[w].is_alive() and not c.poll():
                    raise RuntimeError(f"explorer worker {w} died (exit code {procs[w].exitcode})")
        return replies

    def ask(w: int, msg):
        conns[w].send(msg)
        return _reply(conns[w].recv(), w)

    states = transitions = levels = 0
    totals: list[int] = []  # states found up to each depth
    recordings: list = [None] * W
    clean = False  # every worker acknowledged its exit
    try:
        # SIGTERM and SIGINT wait while the workers are forked: a handler that raises (conq's turns
        # SIGTERM into SystemExit) would run inside the fork's after-fork hooks (logging's lock
        # release), where Python reports the exception and drops it, and the search went on to its
        # end (a CI run: exit 0 instead of 143).  Delivered, if they came, right after the forks.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            for p in procs:
                p.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        canon = model.canonical if symmetry else None
        init_items: list[list] = [[] for _ in range(W)]
        for pos, s in enumerate(model.init_states() if packed is None else packed.inits):
            key = canon(s) if canon else s
            if packed is None:
                f = fingerprint(key)
                init_items[f % W].append((f, key, -1, pos))
            elif packed.codec.total_bits <= 64:
                init_items[exact_owner(key, W)].append((key, key, -1, pos))
            else:
                from conq.model.engines.vector import words_for

                init_items[words_owner(key, words_for(packed.codec.total_bits), W)].append((key, key, -1, pos))
        for w, c in enumerate(conns):
            c.send(("init", init_items[w]))
        replies = []
        for w, c in enumerate(conns):
            replies.append(_reply(c.recv(), w))
        try:
            while True:
                states = sum(r[1] for r in replies)
                totals.append(states)
                transitions += sum(r[2] for r in replies)
                for w, r in enumerate(replies):
                    for kind, name, where in r[3]:
                        if (kind, name) not in found:
                            found[(kind, name)] = (levels, w, where)
                if max_states is not None and states > max_states:
                    complete, stop_reason = False, f"state bound {max_states} reached"
                    break
                if not any(r[4] for r in replies):
                    break
                if box:
                    box.clear()
                    if watch.stop_reason:
                        raise _Stop(watch.stop_reason)
                    if progress is not None:
                        progress(SearchProgress(states, transitions, levels, time.perf_counter() - t0, watch.last_rss))
                levels += 1
                replies = ask_all(("level", levels))
        except _Stop as e:
            complete, stop_reason = False, str(e)
            raise
        t1 = time.perf_counter()

        def chain(gid: int) -> tuple[int, list[int]]:
            ks = []
            while True:
                _ok, par, k = ask(gid % W, ("parent", gid // W))
                if par == -1:
                    return k, ks[::-1]
                ks.append(k)
                gid = par

        def state_path(gid: int, goal=None) -> Path:
            root, ks = chain(gid)
            return replay_positions(model, root, ks, symmetry, goal)

        def step_path(where) -> Path:
            root, ks = chain(where[0])
            return replay_positions(model, root, ks + [where[1]], symmetry)

        chk = _Checks(model, symmetry)
        for (kind, name), (_lvl, _w, where) in found.items():
            {"v": chk.violated, "w": chk.witnessed, "vs": chk.violated_step, "ws": chk.witnessed_step}[kind][name] = where
        verdicts = chk.verdicts(complete, stop_reason, state_path, step_path)
        for c in conns:
            c.send(("exit",))
        recordings = [c.recv()[1] for c in conns]
        clean = True
    except _Stop:
        t1 = time.perf_counter()
        verdicts = []
        for p in props:
            if p.kind is not Kind.LEADS_TO:
                verdicts.append(Verdict(p, "unknown", detail=f"not reached before the search was cut short ({stop_reason})"))
    finally:
        for p in procs:
            if p.pid is None:  # never started
                continue
            if not clean and p.is_alive():
                p.terminate()  # cut short (a limit, an error): nothing of the workers is needed
            p.join(timeout=5)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=2)
            if p.is_alive():  # pragma: no cover
                p.kill()
                p.join()
        for q in inboxes:
            q.cancel_join_thread()
            q.close()
        for a, b in pipes:
            a.close()
            b.close()
        if shared is not None:
            shared.close()
    for p in props:
        if p.kind is Kind.LEADS_TO:
            verdicts.append(Verdict(p, "skipped", detail=f"liveness needs the whole graph: not checked with {W} workers"))
    ex = Exploration(
        model=model,
        states=states,
        transitions=transitions,
        depth=max(levels - 1, 0),
        level_sizes=[b - a for a, b in zip([0, *totals], totals) if b > a],
        search_seconds=t1 - t0,
        analysis_seconds=time.perf_counter() - t1,
        complete=complete,
        verdicts=verdicts,
        stop_reason=stop_reason,
        mode=f"workers={W}",
        symmetry=symmetry,
    )
    #: per worker, the recordings its packed sections made (None: not packed, or cut short)
    ex.worker_recordings = recordings  # type: ignore[attr-defined]
    return ex


class _Stop(Exception):
    """A limit of the watch ended a parallel search."""
