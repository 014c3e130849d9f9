"""The exhaustive breadth-first search as Spark jobs, for state spaces beyond one machine (issue 36).

TLC's distributed mode and PReach (Murphi on Erlang) partition the states by a hash across workers,
each keeping the part of the seen set it owns; this is the same search on Spark:

* A state's *key* is its packed value (a packing of at most 64 bits: exact) or its 64-bit
  :func:`~conq.model.engines.vector.fingerprints` (wider packings, as the one-process fingerprint
  mode).  Partition ``p`` of ``P`` owns the states whose fingerprint is ``p`` modulo ``P``.
* Level by level, two stages.  *Expand*: each partition expands its frontier with the same
  vectorised expansion as the one-process search
  (:class:`~conq.model.engines.vector.VectorExpander`, inside the executor's Python worker, which
  keeps its recordings between tasks), checks the steps the recording left undecided, drops the
  successors it produced twice (keeping each one's smallest parent key, then position) and sends
  each to its owner (one shuffle record per owner).  *Admit*: each owner merges what it received,
  keeps the new states, writes them as the next frontier and as a run of its seen set, records
  each new state's parent key and position, and evaluates the state checks on the new states as
  an array.  The driver only adds up counts and keeps, per property, the first level where it
  fired and the smallest key there: a shortest counterexample (the levels are synchronous) that
  does not depend on how the work was spread.
* The seen set and the frontier never travel through Spark: partition ``p`` keeps them in files
  under the search's folder on the executor that runs it (``spill_dir``), the seen set as sorted
  runs of keys merged like a log-structured tree (a run per level, equal-sized runs merged, so
  a look-up searches a logarithmic number of runs; the operating system's page cache keeps what
  fits in memory and the rest is read from disk).  Each level's admit task is zipped with the
  previous level's (cached, one small record per partition), so Spark runs it where that record
  lives: on one machine (``local[N]``, or a standalone cluster on it) always; on a cluster, where
  ``spark.locality.wait`` lets it (see spec/spark-search.md).  Files are written atomically and a
  level reads only what the previous level listed (a manifest), so a retried task does the same.
* A counterexample or witness is rebuilt as in fingerprint mode: the parent keys are looked up
  level by level back to an initial state (one small job per level for all of them at once), and
  the recorded positions are replayed on the model from there.

Counts (states, transitions, depth, states per depth) and verdicts are those of the one-process
search (tests/model/engines/test_spark_search.py, on ``local[2]`` and on a standalone cluster on
127.0.0.1); among equally short paths it may name another one.  Liveness needs the whole graph:
reported ``skipped``, as in fingerprint mode.  A state bound is checked between levels.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from conq.model.kernel import CheckedAction, Kind, Path as ModelPath

#: the parent key of an initial state (its position among the initial states is its ``via``)
ROOT = np.uint64((1 << 64) - 1)


@dataclass(frozen=True)
class SearchSpec:
    """What an executor needs to take part: the model by registry name, configuration and
    overrides (loaded once per Python worker), the partitions, the search's folder."""

    model: str
    config: str
    overrides: str  # JSON, sorted keys
    partitions: int
    folder: str
    chunk: int = 1 << 16


# -- executors ------------------------------------------------------------------------------


class _Context:
    """A Python worker's model, packed view, expander and memoised predicates for one search
    specification (kept between tasks: ``spark.python.worker.reuse``)."""

    def __init__(self, spec: SearchSpec):
        from conq.model.engines.registry import load_model
        from conq.model.engines.vector import vector_view

        self.spec = spec
        self.model = load_model(spec.model, spec.config, json.loads(spec.overrides))
        self.packed = self.model.packed()
        if self.packed is None:
            raise ValueError(f"{spec.model}: the Spark search needs a packed view (Model.packed())")
        self.vx = vector_view(self.packed)
        self.W = self.vx.W
        self.codec = self.packed.codec
        props = self.model.property_list()
        self.always = [p for p in props if p.kind is Kind.ALWAYS]
        self.sometimes = [p for p in props if p.kind is Kind.SOMETIMES]
        self.steps = [p for p in props if p.kind is Kind.ALWAYS_STEP]
        self._preds: dict[tuple, Any] = {}
        self._quiet: dict[tuple, Any] = {}
        self._needs: dict[tuple, Any] = {}

    def key(self, Y: np.ndarray) -> np.ndarray:
        from conq.model.engines.vector import fingerprints

        return Y[0].copy() if self.W == 1 else fingerprints(Y)

    def owner(self, Y: np.ndarray) -> np.ndarray:
        from conq.model.engines.vector import fingerprints

        return (fingerprints(Y) % np.uint64(self.spec.partitions)).astype(np.int64)

    def _pred(self, name: str, which: str, f: Callable) -> Any:
        from conq.model.engines.packing import memoised_predicate

        g = self._preds.get((name, which))
        if g is None:
            g = self._preds[(name, which)] = memoised_predicate(self.codec, f)
        return g

    def state_events(self, X: np.ndarray, keys: np.ndarray, decided: frozenset) -> dict:
        """``(kind, property) -> smallest key`` of the states ``X`` where an undecided state check
        fires: an invariant violated, an invariant's witness or a ``sometimes`` reached.  The
        states where nothing fires are told apart at once by one memoised predicate on arrays."""
        from conq.model.engines.packing import memoised_predicate
        from conq.model.engines.vector import VectorPredicate, to_int

        inv = [p for p in self.always if ("violated", p.name) not in decided]
        wit = [(p.name, p.witness) for p in self.always if ("witnessed", p.name) not in decided]
        wit += [(p.name, p.check) for p in self.sometimes if ("witnessed", p.name) not in decided]
        sig = (tuple(p.name for p in inv), tuple(n for n, _ in wit))
        quiet = self._quiet.get(sig)
        if quiet is None:
            checks, witnesses = [p.check for p in inv], [f for _, f in wit]
            quiet = self._quiet[sig] = VectorPredicate(memoised_predicate(
                self.codec, lambda s: all(f(s) for f in checks) and not any(w(s) for w in witnesses)), self.W)
        out: dict = {}
        for j in np.flatnonzero(~quiet(X)).tolist():
            x, k = to_int(X, j), int(keys[j])
            fired = [("violated", p.name) for p in inv if not self._pred(p.name, "check", p.check)(x)]
            fired += [("witnessed", name) for name, f in wit if self._pred(name, "witness", f)(x)]
            for ev in fired:
                if ev not in out or k < out[ev]:
                    out[ev] = k
        return out

    def needs(self, decided: frozenset) -> np.ndarray:
        """Per step id: whether a step of that label still has a check or witness to evaluate."""
        objs = self.vx.steps.objs
        cached = self._needs.get(decided)
        if cached is not None and len(cached) == len(objs):
            return cached
        out = []
        for a, *_ in objs:
            cls = a.__class__
            if cls is CheckedAction:
                out.append(False)
            elif issubclass(cls, CheckedAction):
                out.append(any(("witnessed", n) not in decided for n in cls.maybe))
            else:
                out.append(any(p.applies_to(a[0]) and (("violated", p.name) not in decided
                                                        or ("witnessed", p.name) not in decided) for p in self.steps))
        arr = self._needs[decided] = np.array(out, dtype=bool)
        return arr

    def step_events(self, a: tuple, o: Any, s: tuple, t: tuple, decided: frozenset) -> list:
        """What an undecided step check says of the step ``s --a/o--> t`` (kernel.CheckedAction's
        contract: a checked label's checks hold, only the witnesses it names may fire)."""
        cls = a.__class__
        out = []
        if cls is not tuple and issubclass(cls, CheckedAction):
            for p in self.steps:
                if p.name in cls.maybe and ("witnessed", p.name) not in decided and p.witness(s, a, o, t):
                    out.append(("witnessed", p.name))
            return out
        for p in self.steps:
            if not p.applies_to(a[0]):
                continue
            if ("violated", p.name) not in decided and not p.check(s, a, o, t):
                out.append(("violated", p.name))
            if ("witnessed", p.name) not in decided and p.witness(s, a, o, t):
                out.append(("witnessed", p.name))
        return out


_CONTEXTS: dict[SearchSpec, _Context] = {}


def _context(spec: SearchSpec) -> _Context:
    ctx = _CONTEXTS.get(spec)
    if ctx is None:
        _CONTEXTS.clear()  # one search at a time per worker: the previous one's tables go
        ctx = _CONTEXTS[spec] = _Context(spec)
    return ctx


class _Store:
    """Partition ``p``'s files: the frontier of each level, the seen set's runs and the manifest
    that lists them, each level's parent records.  Written atomically (a temporary name, then
    renamed), so a task that is run again reads and writes the same."""

    def __init__(self, spec: SearchSpec, p: int):
        self.dir = Path(spec.folder) / f"p{p:05d}"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _save(self, name: str, **arrays: np.ndarray) -> None:
        tmp = self.dir / f".{name}.{uuid.uuid4().hex}.tmp.npz"
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, self.dir / f"{name}.npz")

    def _load(self, name: str, mmap: bool = False) -> Any:
        return np.load(self.dir / f"{name}.npz", mmap_mode="r" if mmap else None)

    def runs(self, level: int) -> list[str]:
        if level < 0:
            return []
        return json.loads((self.dir / f"manifest-{level}.json").read_text())

    def unseen(self, level: int, keys: np.ndarray) -> np.ndarray:
        """A mask over the sorted distinct ``keys``: those in no run of the seen set after ``level``."""
        from conq.model.engines.levels import unseen

        keep = np.ones(len(keys), dtype=bool)
        for name in self.runs(level):
            run = np.load(self.dir / f"{name}.npy", mmap_mode="r")
            keep[keep] = unseen(run, keys[keep])
        return keep

    def add_run(self, level: int, new: np.ndarray) -> None:
        """The seen set after ``level``: that of ``level - 1`` and the sorted keys ``new``; a run no
        larger than the new one is merged into it (sizes fall by at least half along the list)."""
        runs = self.runs(level - 1)
        run = new
        merged = []
        while runs:
            last = np.load(self.dir / f"{runs[-1]}.npy", mmap_mode="r")
            if len(last) > 2 * len(run):
                break
            # (two sorted runs: numpy's stable sort merges them in linear time; its default sort
            # does not see the runs: the executors' largest cost after the expansion, measured)
            run = np.sort(np.concatenate([np.asarray(last), run]), kind="stable")
            merged.append(runs.pop())
        name = f"seen-{level}"
        tmp = self.dir / f".{name}.{uuid.uuid4().hex}.tmp.npy"
        np.save(tmp, run)
        os.replace(tmp, self.dir / f"{name}.npy")
        tmp = self.dir / f".manifest-{level}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(runs + [name]))
        os.replace(tmp, self.dir / f"manifest-{level}.json")

    def tidy(self, level: int) -> None:
        """Files no task of a later level reads: frontiers before ``level - 1``, runs listed by no
        manifest from ``level - 1`` on, manifests before it (a level's tasks read the previous one's)."""
        keep = set(self.runs(level)) | set(self.runs(level - 1))
        for f in self.dir.iterdir():
            n = f.name
            if n.startswith("front-") and int(n[6:-4]) < level - 1:
                f.unlink(missing_ok=True)
            elif n.startswith("seen-") and n[:-4] not in keep:
                f.unlink(missing_ok=True)
            elif n.startswith("manifest-") and int(n[9:-5]) < level - 1:
                f.unlink(missing_ok=True)

    def admit(self, level: int, keys: np.ndarray, parents: np.ndarray, via: np.ndarray, words: np.ndarray) -> None:
        """Level ``level``'s new states (sorted by key): parent records, frontier, seen run."""
        self._save(f"parents-{level}", keys=keys, parents=parents, via=via)
        self._save(f"front-{level}", words=words)
        self.add_run(level, keys)

    def frontier(self, level: int) -> np.ndarray:
        return self._load(f"front-{level}")["words"]

    def parents(self, level: int, keys: np.ndarray) -> dict:
        rec = self._load(f"parents-{level}")
        k = rec["keys"]
        at = np.searchsorted(k, keys)
        return {int(key): (int(rec["parents"][i]), int(rec["via"][i])) for key, i in zip(keys.tolist(), at.tolist())
                if i < len(k) and k[i] == key}


def _merge_events(into: dict, events: dict) -> None:
    for ev, where in events.items():
        if ev not in into or where < into[ev]:
            into[ev] = where


def _first_per_key(keys: np.ndarray, parents: np.ndarray, *others: np.ndarray) -> tuple:
    """Each key once, with its smallest parent key (then the first of the rest), sorted by key.

    The records ordered by parent (a stable sort: each sender's records are in expansion order,
    already sorted by parent, so the sort merges a few runs), each key's first record kept with the
    compiled set (keyset.py), then the kept ones sorted by key: 0.14 s against 0.18 for a two-key
    lexsort and 0.19 for one sort by key with the smallest parent of each run, on 1.2M records of
    four senders (0.6M keys; warm, the second of two calls)."""
    from conq.model.engines.keyset import KeySet

    order = np.argsort(parents, kind="stable")
    pick = order[KeySet().admit(keys[order])]
    pick = pick[np.argsort(keys[pick])]
    return (keys[pick], parents[pick], *(o[..., pick] for o in others))


def _drain(it: Iterable) -> None:
    """Read a task's input to its end: a Python worker that leaves input unread is not reused
    (``spark.python.worker.reuse``), and a fresh one sets the model up and records again."""
    for _ in it:
        pass


def _init_task(spec: SearchSpec, decided: frozenset, p: int, it: Iterable) -> list:
    _drain(it)
    ctx = _context(spec)
    X = ctx.vx.words(ctx.packed.inits)
    mine = np.flatnonzero(ctx.owner(X) == p)
    keys = ctx.key(X)[mine]
    from conq.model.engines.arrays import first_occurrences

    _u, first = first_occurrences(keys)
    pos = mine[first]  # each initial state's first position, sorted by key
    X = X[:, pos]
    store = _Store(spec, p)
    store.admit(0, keys[first], np.full(len(pos), ROOT, dtype=np.uint64), pos.astype(np.uint32), X)
    return [{"p": p, "new": len(pos), "transitions": 0, "events": {k: (0, w) for k, w in ctx.state_events(X, keys[first], decided).items()}}]


def _expand_task(spec: SearchSpec, level: int, decided: frozenset, p: int, it: Iterable) -> Iterable:
    """Expand partition ``p``'s frontier of level ``level - 1``; yield ``(owner, candidates)``
    per owner and ``(p, stats)``."""
    _drain(it)
    from conq.model.engines.keyset import KeySet
    from conq.model.engines.vector import cols, to_int

    ctx = _context(spec)
    vx, decode = ctx.vx, ctx.codec.decode
    front = _Store(spec, p).frontier(level - 1)  # sorted by key: expansion order is (parent key, position)
    fkeys = ctx.key(front)
    transitions = 0
    events: dict = {}
    parts: list[tuple] = []
    #: the keys this task produced: each successor is kept at its first occurrence in expansion
    #: order, that is with its smallest parent key, then position (the compiled set of keyset.py)
    produced = KeySet()
    for c0 in range(0, front.shape[1], spec.chunk):
        Xc = front[:, c0:c0 + spec.chunk]
        Y, cnt, G = vx.expand(Xc)
        transitions += len(G)
        ends = np.cumsum(cnt)
        pending = np.flatnonzero(ctx.needs(decided)[G])
        if len(pending):  # steps the recording did not decide: on the decoded states
            src = np.searchsorted(ends, pending, side="right")
            for q, i in zip(pending.tolist(), src.tolist()):
                a, o, _keep, _put = vx.steps.objs[G[q]]
                where = (int(fkeys[c0 + i]), q - int(ends[i] - cnt[i]))
                for ev in ctx.step_events(a, o, decode(to_int(Xc, i)), decode(to_int(Y, q)), decided):
                    if ev not in events or where < events[ev]:
                        events[ev] = where
        keys = ctx.key(Y)
        firsts = produced.admit(keys)  # (in order; a key an earlier chunk produced is not there)
        src = np.searchsorted(ends, firsts, side="right")
        parts.append((keys[firsts], fkeys[c0 + src], (firsts - (ends[src] - cnt[src])).astype(np.uint32),
                      cols(Y, firsts)))
    yield p, ("s", {"transitions": transitions, "events": {k: (level - 1, w) for k, w in events.items()}})
    if not parts:
        return
    keys = np.concatenate([x[0] for x in parts])
    parents = np.concatenate([x[1] for x in parts])
    via = np.concatenate([x[2] for x in parts])
    words = np.concatenate([x[3] for x in parts], axis=1)
    owners = ctx.owner(words)
    order = np.argsort(owners, kind="stable")
    bounds = np.searchsorted(owners[order], np.arange(spec.partitions + 1))
    for o in range(spec.partitions):
        sel = order[bounds[o]:bounds[o + 1]]
        if len(sel):
            yield o, ("c", keys[sel], parents[sel], via[sel], cols(words, sel))


def _admit_task(spec: SearchSpec, level: int, decided: frozenset, p: int, it: Iterable) -> list:
    """Admit partition ``p``'s candidates of level ``level`` (the shuffle's records, zipped with
    the previous level's record of ``p``)."""
    ctx = _context(spec)
    ((records, _previous),) = list(it)
    cands = [r[1] for r in records if r[1][0] == "c"]
    stats = [r[1][1] for r in records if r[1][0] == "s"]
    store = _Store(spec, p)
    events: dict = {}
    for s in stats:
        _merge_events(events, s["events"])
    new = 0
    if cands:
        keys = np.concatenate([c[1] for c in cands])
        parents = np.concatenate([c[2] for c in cands])
        via = np.concatenate([c[3] for c in cands])
        words = np.concatenate([c[4] for c in cands], axis=1)
        keys, parents, via, words = _first_per_key(keys, parents, via, words)
        fresh = store.unseen(level - 1, keys)
        keys, parents, via, words = keys[fresh], parents[fresh], via[fresh], words[:, fresh]
        new = len(keys)
    else:
        keys = np.empty(0, dtype=np.uint64)
        parents, via, words = keys.copy(), np.empty(0, dtype=np.uint32), np.empty((ctx.W, 0), dtype=np.uint64)
    store.admit(level, keys, parents, via, words)
    _merge_events(events, {k: (level, w) for k, w in ctx.state_events(words, keys, decided).items()})
    store.tidy(level)
    return [{"p": p, "new": new, "transitions": sum(s["transitions"] for s in stats), "events": events}]


def _lookup_task(spec: SearchSpec, level: int, wanted: dict, p: int, it: Iterable) -> list:
    _drain(it)
    keys = wanted.get(p)
    if not keys:
        return []
    return [_Store(spec, p).parents(level, np.array(sorted(keys), dtype=np.uint64))]


def _remove_task(spec: SearchSpec, p: int, it: Iterable) -> list:
    _drain(it)
    shutil.rmtree(Path(spec.folder) / f"p{p:05d}", ignore_errors=True)
    return []


def _owner_of(key: int, spec: SearchSpec, W: int) -> int:
    """The partition owning a state of key ``key`` (for a packing of one word the key is the state;
    otherwise the key is the fingerprint, which is what partitions)."""
    from conq.model.engines.packing import fingerprint64

    return (fingerprint64(key) if W == 1 else key) % spec.partitions


def _identity(k: int) -> int:
    return k


def _kept(rdd: Any) -> Any:
    """A level's records kept on their executors, the lineage before them let go.  (Persisted as
    well as checkpointed: PySpark fuses a function into the next one's task unless its RDD is
    cached, and the level's work would be done again by the next level.)"""
    from pyspark import StorageLevel

    rdd.persist(StorageLevel.MEMORY_AND_DISK)
    rdd.localCheckpoint()
    return rdd


# -- the driver -------------------------------------------------------------------------------


def explore_spark(sc: Any, model_name: str, config: str, overrides: dict | None = None, *,
                  partitions: int | None = None, max_states: int | None = None, max_seconds: float | None = None,
                  spill_dir: str | None = None, progress: Callable | None = None) -> Any:
    """Search ``model_name`` / ``config`` (with ``overrides``) exhaustively on the Spark context
    ``sc``; an :class:`~conq.model.engines.results.Exploration` like fingerprint mode's
    (``mode`` ``spark``).  ``partitions``: of the states (default twice the default parallelism);
    ``spill_dir``: where executors keep the search's files (default: the temporary folder); a state
    bound and a time bound are checked between levels."""
    from conq.model.engines.fpsearch import replay_positions
    from conq.model.engines.registry import load_model
    from conq.model.engines.results import Exploration, SearchProgress, Verdict, _Checks
    from conq.model.engines.vector import words_for

    overrides = dict(overrides or {})
    model = load_model(model_name, config, overrides)
    packed = model.packed()
    if packed is None:
        raise ValueError(f"{model_name}: the Spark search needs a model with a packed view (Model.packed())")
    W = words_for(packed.codec.total_bits)
    P = partitions or max(2, 2 * sc.defaultParallelism)
    folder = Path(spill_dir or tempfile.gettempdir()) / f"conq-spark-search-{uuid.uuid4().hex[:12]}"
    spec = SearchSpec(model_name, config, json.dumps(overrides, sort_keys=True), P, str(folder))
    t0 = time.perf_counter()
    decided: dict = {}  # (kind, property) -> (level, where): the first level, the smallest key there
    level_sizes: list[int] = []
    transitions = 0
    complete, stop_reason = True, ""
    marker = None
    try:
        seeds = sc.parallelize(range(P), P)
        marker = _kept(seeds.mapPartitionsWithIndex(partial(_init_task, spec, frozenset())))
        stats = marker.collect()
        level = 0
        while True:
            new = sum(s["new"] for s in stats)
            transitions += sum(s["transitions"] for s in stats)
            events: dict = {}
            for s in stats:
                _merge_events(events, s["events"])
            for ev, where in events.items():
                if ev not in decided or where < decided[ev]:
                    decided[ev] = where
            if not new:
                break
            level_sizes.append(new)
            n = sum(level_sizes)
            if progress is not None:
                progress(SearchProgress(n, transitions, level, time.perf_counter() - t0, None))
            if max_states is not None and n >= max_states:
                complete, stop_reason = False, f"state bound {max_states} reached (checked between levels)"
                break
            if max_seconds is not None and time.perf_counter() - t0 >= max_seconds:
                complete, stop_reason = False, f"time bound {max_seconds}s reached (checked between levels)"
                break
            level += 1
            known = frozenset(decided)
            shuffled = marker.mapPartitionsWithIndex(partial(_expand_task, spec, level, known)).partitionBy(P, _identity)
            nxt = _kept(shuffled.glom().zip(marker).mapPartitionsWithIndex(partial(_admit_task, spec, level, known)))
            stats = nxt.collect()
            marker.unpersist()
            marker = nxt
        t1 = time.perf_counter()
        paths = _rebuild_chains(sc, marker, spec, W, decided) if marker is not None else {}
    finally:
        if marker is not None:
            try:
                marker.mapPartitionsWithIndex(partial(_remove_task, spec)).collect()
            except Exception:  # (the folder below is this machine's; a lost executor's is gone with it)
                pass
            marker.unpersist()
        shutil.rmtree(folder, ignore_errors=True)

    chk = _Checks(model, False)
    for (kind, name), (lvl, where) in decided.items():
        step = isinstance(where, tuple)
        d = (chk.violated_step if kind == "violated" else chk.witnessed_step) if step else \
            (chk.violated if kind == "violated" else chk.witnessed)
        d[name] = (lvl, where)

    def state_path(where: tuple, goal=None) -> ModelPath:
        root, ks = paths[where]
        return replay_positions(model, root, ks, False, goal)

    def step_path(where: tuple) -> ModelPath:
        lvl, (src, k) = where
        root, ks = paths[(lvl, src)]
        return replay_positions(model, root, ks + [k], False)

    verdicts = chk.verdicts(complete, stop_reason, state_path, step_path)
    for p in chk.props:
        if p.kind is Kind.LEADS_TO:
            verdicts.append(Verdict(p, "skipped", detail="liveness needs the whole graph: not checked by the Spark search"))
    ex = Exploration(model=model, states=sum(level_sizes), transitions=transitions,
                     depth=max(len(level_sizes) - 1, 0), search_seconds=t1 - t0,
                     analysis_seconds=time.perf_counter() - t1, complete=complete, verdicts=verdicts,
                     stop_reason=stop_reason, mode="spark", level_sizes=level_sizes)
    ex.partitions = P  # type: ignore[attr-defined]
    return ex


def _rebuild_chains(sc: Any, marker: Any, spec: SearchSpec, W: int, decided: dict) -> dict:
    """``(level, key) -> (initial position, successor positions)`` for every state a verdict names
    (a violating or witnessing state, or the source of a step), looked up level by level."""
    targets: dict[int, set] = {}
    for (lvl, where) in decided.values():
        key = where[0] if isinstance(where, tuple) else where
        targets.setdefault(lvl, set()).add(key)
    links: dict[tuple, tuple] = {}
    for lvl in range(max(targets, default=-1), -1, -1):
        if not targets.get(lvl):
            continue
        wanted: dict[int, list] = {}
        for key in targets[lvl]:
            wanted.setdefault(_owner_of(key, spec, W), []).append(key)
        found: dict = {}
        if all((Path(spec.folder) / f"p{q:05d}").is_dir() for q in wanted):  # the executors' files are here
            for q, keys in wanted.items():
                found.update(_Store(spec, q).parents(lvl, np.array(sorted(keys), dtype=np.uint64)))
        else:  # (on a cluster: one small job per level, each partition answering for its keys)
            for part in marker.mapPartitionsWithIndex(partial(_lookup_task, spec, lvl, wanted)).collect():
                found.update(part)
        for key in targets[lvl]:
            parent, via = found[key]
            links[(lvl, key)] = (parent, via)
            if lvl > 0:
                targets.setdefault(lvl - 1, set()).add(parent)
    out = {}
    for (lvl, key) in list(links):
        ks = []
        at = (lvl, key)
        while at[0] > 0:
            parent, via = links[at]
            ks.append(via)
            at = (at[0] - 1, parent)
        out[(lvl, key)] = (links[at][1], ks[::-1])
    return out


# -- a standalone cluster on this machine -------------------------------------------------------


class LocalStandalone:
    """A Spark standalone master and one worker on 127.0.0.1, started with ``spark-class`` from the
    pyspark package (what a cluster runs, on one machine: for tests, the bench and trying
    ``--master spark://...`` before a real cluster).  A context manager: on the way out both are
    stopped with everything they started (executors, their Python workers: each is the leader of
    its own process group) and waited for, and their folder is removed.  ``url`` is the master's."""

    def __init__(self, cores: int = 2, memory: str = "2g", wait: float = 120.0):
        self.cores, self.memory, self.wait = cores, memory, wait
        self.url = ""
        self._procs: list = []
        self._dir: Path | None = None

    @staticmethod
    def _free_port() -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def _start(self, cls: str, *args: str) -> Any:
        import subprocess

        from pyspark.find_spark_home import _find_spark_home

        home = Path(_find_spark_home())
        assert self._dir is not None
        log = open(self._dir / f"{cls.rsplit('.', 1)[1].lower()}.log", "ab")
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=str(self._dir), SPARK_WORKER_DIR=str(self._dir / "work"))
        try:
            p = subprocess.Popen([str(home / "bin" / "spark-class"), cls, *args], stdout=log, stderr=log,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            log.close()
        self._procs.append(p)
        return p

    def _until(self, what: str, ok: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.wait
        while not ok():
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._procs):
                logs = "\n".join(f.read_text(errors="replace")[-2000:] for f in sorted(self._dir.glob("*.log")))
                raise RuntimeError(f"the local standalone cluster did not come up ({what}):\n{logs}")
            time.sleep(0.2)

    def __enter__(self) -> "LocalStandalone":
        import socket

        self._dir = Path(tempfile.mkdtemp(prefix="conq-standalone-"))
        try:
            port = self._free_port()
            self._start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                        "--webui-port", str(self._free_port()))

            def listening() -> bool:
                with socket.socket() as s:
                    return s.connect_ex(("127.0.0.1", port)) == 0

            self._until("the master's port", listening)
            self.url = f"spark://127.0.0.1:{port}"
            self._start("org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores",
                        str(self.cores), "--memory", self.memory, "--webui-port", str(self._free_port()),
                        "--work-dir", str(self._dir / "work"))
            self._until("a worker registered", lambda: "Registering worker" in
                        (self._dir / "master.log").read_text(errors="replace"))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        import signal

        for p in reversed(self._procs):  # the worker first (its executors with it), then the master
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=30)
            except Exception:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # what the group started (executors, Python workers)
                try:
                    os.killpg(p.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self._procs.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
