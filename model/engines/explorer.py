"""Exhaustive exploration of a bounded configuration.

Breadth-first over plain Python containers (building a networkx graph during
the search was measured 8x slower), so the first violation found of each
invariant is a shortest counterexample.  The graph is kept as flat integer
triples; a networkx graph is built only on request (:meth:`Exploration.graph`).

Where the time goes (issue 18, pyinstrument on the consumer-lists reference, safety only):
before, the model's ``successors`` took about 38% of the search, the properties about 33% and
the explorer's own loop (tuple hashing, label interning on every edge, a per-transition
dispatch of the step properties and per-state closure calls) about 28%.  The loop now
interns labels only when edges are kept, records the parent edge as a successor position,
dispatches step properties through per-action tables that drop a check once violated and a
witness once reached, and is inlined: the model's own code is now over 80% of the search,
so the rest of a one-core speed-up has to come from the models (or compiled successors).

Modes: whole states (this module, the default: the graph is kept for liveness and coverage),
fingerprints with a parent map (:mod:`conq.model.engines.fpsearch`), and worker processes
partitioned by fingerprint (:mod:`conq.model.engines.parallel`).  Liveness runs on the compact
graph with a C routine for the components (:mod:`conq.model.engines.liveness`).

What it reports, as Stateright and TLC do: distinct states, transitions,
depth, time (search and analysis apart), every violated invariant with its
shortest path, every ``sometimes`` and invariant witness with the shortest
path that reaches it, and the liveness verdicts.
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from itertools import accumulate
from typing import Any, Callable

from conq.model.engines.levels import LevelSearch
from conq.model.engines.packing import PackingError
from conq.model.kernel import Kind, Model, Path
from conq.model.engines.results import (  # noqa: F401 - re-exported: the explorer's public names
    Exploration, GuardInterrupt, SearchProgress, Verdict, _Checks, _concretise, _path_json, _path_of_chain,
)


# -- resource guards -------------------------------------------------------------------------


try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
    _PAGE = 4096


def rss_bytes() -> int | None:
    """Resident memory of this process now (``/proc/self/statm``), or the peak where
    ``/proc`` is missing; None when neither can be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        pass
    try:  # pragma: no cover - not Linux
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
    except (ImportError, OSError, ValueError):  # pragma: no cover
        return None


def _async_raise(tid: int, exc: type[BaseException]) -> bool:
    """Raise ``exc`` in thread ``tid`` at its next check of the eval loop.  (Never withdrawn:
    on CPython 3.11 withdrawing leaves the interpreter's eval-breaker flag set for good.)"""
    try:
        import ctypes

        return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(exc)) == 1
    except (ImportError, AttributeError, OSError):  # pragma: no cover - not CPython: cooperative stops only
        return False


class _Watch:
    """Watches the clock and this process's memory from a thread of its own, so the search
    loop pays nothing for its limits: the loop only tests whether ``box`` is non-empty once
    per state.  The watch appends to ``box`` when a limit is exceeded (``stop_reason`` says
    which) and for each progress tick.  When a stop is not taken up within ``grace``
    seconds (a single model call or the liveness analysis running on), it raises
    :class:`GuardInterrupt` into the exploring thread, while that thread is *armed*."""

    INTERVAL = 0.05

    def __init__(self, box: list, t0: float, max_seconds: float | None, max_memory_mb: float | None,
                 tick: float | None, grace: float = 1.0):
        self.box = box
        self.max_seconds = max_seconds
        self.max_memory_mb = max_memory_mb
        self.deadline = None if max_seconds is None else t0 + max_seconds
        self.max_rss = None if max_memory_mb is None else int(max_memory_mb * 2**20)
        self.tick = tick
        self.grace = grace
        self.stop_reason = ""
        self._stop_since = 0.0
        self.last_rss: int | None = None
        self.armed = False
        self.interrupted = False  # GuardInterrupt was raised into the exploring thread
        self.delivered = False  # ... and has arrived (caught)
        self._tid = threading.get_ident()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="conq-explore-watch", daemon=True)

    def start(self) -> "_Watch":
        self._check(time.perf_counter())  # a limit already exceeded stops the search before it starts
        self._thread.start()
        return self

    def _check(self, now: float) -> None:
        rss = rss_bytes() if (self.max_rss is not None or self.tick) else None
        self.last_rss = rss
        if self.stop_reason:
            return
        reason = ""
        if self.deadline is not None and now >= self.deadline:
            reason = f"time bound {self.max_seconds}s reached"
        elif self.max_rss is not None and rss is not None and rss > self.max_rss:
            reason = f"memory bound {self.max_memory_mb:g} MB reached (resident {rss / 2**20:,.0f} MB)"
        if reason:
            self.stop_reason = reason
            self._stop_since = now
            self.box.append(1)

    def _run(self) -> None:
        next_tick = time.perf_counter() + (self.tick or 0.0)
        while not self._done.wait(self.INTERVAL):
            now = time.perf_counter()
            self._check(now)
            if self.stop_reason and now - self._stop_since >= self.grace:
                with self._lock:
                    if self.armed and not self.interrupted:
                        self.interrupted = _async_raise(self._tid, GuardInterrupt)
            if self.tick and now >= next_tick:
                next_tick = now + self.tick
                self.box.append(1)

    def arm(self) -> None:
        self.armed = True

    def disarm(self) -> None:
        """No interrupt after this returns: one raised but not yet arrived is waited for
        (it arrives within a few bytecodes) and caught here."""
        try:
            with self._lock:
                self.armed = False
                owed = self.interrupted and not self.delivered
            if owed:
                give_up = time.perf_counter() + 5.0
                while time.perf_counter() < give_up:
                    pass
        except GuardInterrupt:
            self.delivered = True

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        self.disarm()


def explore(
    model: Model,
    *,
    max_states: int | None = None,
    max_seconds: float | None = None,
    max_memory_mb: float | None = None,
    symmetry: bool = False,
    liveness: bool = True,
    keep_edges: bool | None = None,
    progress: Callable[[SearchProgress], None] | None = None,
    progress_interval: float = 0.5,
    fingerprints: bool = False,
    workers: int = 1,
) -> Exploration:
    """Explore every reachable state of ``model`` (breadth first).

    ``symmetry`` stores one representative per symmetry class
    (:meth:`Model.canonical`); liveness is then skipped, because weak-fairness
    classes name individual processes and are not preserved by the quotient.
    ``keep_edges`` (default: when liveness is checked) keeps the transition
    list for graph analyses.

    ``fingerprints`` stores a stable 64-bit fingerprint per state and a parent
    map instead of whole states (about 20 bytes per state instead of about 2 KB;
    counterexamples are rebuilt by re-running the recorded successor positions
    from the initial state); ``workers`` > 1 splits the fingerprints over that
    many processes, each owning the states whose fingerprint falls to it
    (:mod:`conq.model.engines.parallel`).  Both check the safety properties and
    witnesses with the same counts and shortest counterexample lengths; liveness
    needs the whole graph and is reported ``skipped`` in these modes.

    Limits: ``max_states`` (distinct states), ``max_seconds`` (search and
    liveness analysis together) and ``max_memory_mb`` (resident memory of the
    process).  Hitting one ends the run *incomplete* (``complete`` False,
    ``stop_reason`` says which): never a verdict.  Time and memory are watched
    from a thread of their own (:class:`_Watch`), so they are enforced inside
    long model calls too, not only between states.  ``progress`` is called
    from this thread every ``progress_interval`` seconds of the search.
    """
    if workers < 1:
        raise ValueError(f"workers: must be at least 1, got {workers}")
    box: list = []
    watch = None
    if max_seconds is not None or max_memory_mb is not None or progress is not None:
        watch = _Watch(box, time.perf_counter(), max_seconds, max_memory_mb, progress_interval if progress else None).start()
    try:
        fallback = ""
        for use_packed in (True, False):
            try:
                if workers > 1:
                    from conq.model.engines.parallel import explore_parallel

                    ex = explore_parallel(model, workers, max_states, symmetry, progress, box, watch, use_packed)
                elif fingerprints:
                    from conq.model.engines.fpsearch import explore_fingerprints

                    ex = explore_fingerprints(model, max_states, symmetry, progress, box, watch, use_packed)
                else:
                    packed = model.packed() if use_packed and not symmetry else None
                    if packed is not None:
                        ex = _explore_packed(model, packed, max_states, liveness, keep_edges, progress, box, watch)
                    else:
                        ex = _explore(model, max_states, symmetry, liveness, keep_edges, progress, box, watch)
            except PackingError as e:
                # A state outside the domains the model declared for its packed view (a hint of its
                # design, model/engines/packing.py): search the states as they are, from the start.
                if not use_packed:
                    raise
                if watch is not None:
                    watch.disarm()
                fallback = str(e)
                continue
            ex.packed_fallback = fallback  # type: ignore[attr-defined]
            return ex
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        if watch is not None:
            watch.close()


def _explore(model: Model, max_states, symmetry, liveness, keep_edges, progress, box: list, watch: _Watch | None) -> Exploration:
    chk = _Checks(model, symmetry)
    props = chk.props
    live = [p for p in props if p.kind is Kind.LEADS_TO]
    check_live = liveness and not symmetry and bool(live)
    if keep_edges is None:
        keep_edges = check_live

    t0 = time.perf_counter()
    canon = model.canonical if symmetry else None
    index: dict[Any, int] = {}
    states: list[Any] = []
    parent = array("l")
    via = array("l")  # position of the edge from the parent in its successor list
    label_ids: dict[tuple, int] = {}
    labels: list[tuple] = []
    edges = array("l")
    # step events: (src idx, successor position, dst idx)
    witnessed = chk.witnessed

    successors = model.successors
    depth_marks = [0, 0]  # BFS level boundaries
    complete = True
    stop_reason = ""
    transitions = 0
    cap = max_states if max_states is not None else -1
    i = 0
    index_get = index.get
    states_append = states.append
    parent_append = parent.append
    via_append = via.append
    edges_extend = edges.extend
    label_get = label_ids.get
    on_state = chk.on_state
    on_step = chk.on_step
    skip = chk.skip

    finished = interrupted = False
    if watch is not None:
        watch.arm()
    try:
        for pos, s in enumerate(model.init_states()):
            key = canon(s) if canon else s
            if key not in index:
                idx = len(states)
                index[key] = idx
                states_append(key)
                parent_append(-1)
                via_append(pos)
                on_state(key, idx)
            if box and watch.stop_reason:
                complete = False
                stop_reason = watch.stop_reason
                break
        depth_marks[1] = len(states)
        n = len(states)
        while complete and i < n:
            if i == depth_marks[-1]:
                depth_marks.append(n)
            s = states[i]
            succ = successors(s)
            k = -1
            for a, o, t in succ:
                k += 1
                key = canon(t) if canon else t
                j = index_get(key)
                if j is None:
                    if n == cap:
                        complete = False
                        stop_reason = f"state bound {max_states} reached"
                        break
                    j = n
                    n += 1
                    index[key] = j
                    states_append(key)
                    parent_append(i)
                    via_append(k)
                    on_state(key, j)
                # a CheckedAction (or a subclass whose witnesses are all found): the model evaluated
                # this step's checks and witnesses (kernel.CheckedAction); any other label: on_step
                if a.__class__ not in skip:
                    on_step(s, a, o, t, (i, k, j))
                if keep_edges:
                    lab = label_get((a, o))
                    if lab is None:
                        lab = label_ids[(a, o)] = len(labels)
                        labels.append((a, o))
                    edges_extend((i, j, lab))
            if not complete:
                transitions += k + 1
                break
            transitions += len(succ)
            i += 1
            if box:  # the watch has something to say: a limit, or a progress tick
                box.clear()
                if watch.stop_reason:
                    complete = False
                    stop_reason = watch.stop_reason
                    break
                if progress is not None:
                    watch.disarm()
                    progress(SearchProgress(n, transitions, len(depth_marks) - 2,
                                            time.perf_counter() - t0, watch.last_rss))
                    watch.arm()
        finished = True
        if watch is not None:
            watch.disarm()
    except GuardInterrupt:
        interrupted = watch.delivered = True
        watch.disarm()
    ex, t1 = _wrap_up(model, chk, states, states, parent, via, edges, labels, depth_marks, complete, stop_reason,
                      transitions, interrupted and not finished, watch, t0, symmetry)
    _liveness(ex, live, check_live, witnessed, watch, t1)
    return ex




def _wrap_up(model: Model, chk: _Checks, states, state_list, parent, via, edges, labels, depth_marks: list,
             complete: bool, stop_reason: str, transitions: int, interrupted: bool, watch: _Watch | None,
             t0: float, symmetry: bool) -> tuple[Exploration, float]:
    """The Exploration of a finished (or stopped) whole-state search: what an interrupt left
    consistent, the safety verdicts with their shortest paths, the search time.  ``states`` is what
    the search stored, ``state_list`` how the Exploration shows it (the same list, or a decoding
    view of packed states)."""
    if interrupted:  # (only a limit of the watch interrupts a search)
        complete = False
        stop_reason = watch.stop_reason if watch is not None and watch.stop_reason else stop_reason
        # The interrupt may have landed anywhere in the loop: keep what is consistent.
        n = min(len(states), len(parent), len(via))
        del states[n:]
        del parent[n:]
        del via[n:]
        for d in (chk.violated, chk.witnessed):
            for name in [k for k, idx in d.items() if idx >= n]:
                del d[name]
        for d in (chk.violated_step, chk.witnessed_step):
            for name in [k for k, (src, _k, dst) in d.items() if src >= n or dst >= n]:
                del d[name]
        del edges[len(edges) - len(edges) % 3:]
        while edges and (edges[-3] >= n or edges[-2] >= n):
            del edges[-3:]
        depth_marks = [m for m in depth_marks if m <= n] or [0]
        while len(depth_marks) < 2:
            depth_marks.append(n)
    depth = len(depth_marks) - 2
    t1 = time.perf_counter()

    def path_to(idx: int) -> list[int]:
        chain = []
        while idx != -1:
            chain.append(idx)
            idx = parent[idx]
        return chain[::-1]

    def state_path(idx: int, goal=None) -> Path:
        return _path_of_chain(model, state_list, path_to(idx), via, symmetry, goal=goal)

    def step_path(where: tuple[int, int, int]) -> Path:
        src, k, _dst = where
        return _path_of_chain(model, state_list, path_to(src), via, symmetry, last=k)

    verdicts = chk.verdicts(complete, stop_reason, state_path, step_path)
    ex = Exploration(
        model=model,
        states=len(states),
        transitions=transitions,
        depth=depth,
        search_seconds=t1 - t0,
        analysis_seconds=0.0,
        complete=complete,
        verdicts=verdicts,
        state_list=state_list,
        edges=edges,
        labels=labels,
        stop_reason=stop_reason,
        parent=parent,
        via=via,
        symmetry=symmetry,
        level_sizes=_level_sizes(depth_marks, len(states)),
    )
    return ex, t1


def _level_sizes(depth_marks: list, n: int) -> list[int]:
    """States per breadth-first level from the level boundaries (``depth_marks[k]``: where level
    ``k`` starts, after a leading 0)."""
    marks = sorted(set([m for m in depth_marks[1:] if m < n] + [0, n]))
    return [b - a for a, b in zip(marks, marks[1:])]


def _liveness(ex: Exploration, live: list, check_live: bool, witnessed: dict, watch: _Watch | None, t1: float) -> None:
    """The liveness verdicts of a finished search (appended to ``ex.verdicts``), and the analysis time."""
    todo = []
    for p in live:
        if not check_live:
            ex.verdicts.append(
                Verdict(p, "skipped", detail="liveness not checked (symmetry reduction or --no-liveness)")
            )
        elif not ex.complete:
            ex.verdicts.append(Verdict(p, "skipped", detail="the search was cut short: " + ex.stop_reason))
        elif p.name not in witnessed:
            ex.verdicts.append(Verdict(p, "vacuous", detail="no reachable state satisfies its trigger"))
        else:
            todo.append(p)
    if todo:
        from conq.model.engines.liveness import check_leads_to

        t2 = time.perf_counter()
        found = None
        if watch is None:
            found = check_leads_to(ex, todo)
        elif not watch.stop_reason:
            try:
                watch.arm()
                found = check_leads_to(ex, todo)
                watch.disarm()
            except GuardInterrupt:
                watch.delivered = True
                watch.disarm()
        if found is None:  # a limit was hit during the analysis
            ex.complete = False
            ex.stop_reason = f"{watch.stop_reason or 'interrupted'} (in the liveness analysis)"
            found = [Verdict(p, "skipped", detail="the analysis was cut short: " + ex.stop_reason) for p in todo]
        # in the properties' own order
        by_name = {v.prop.name: v for v in found}
        ex.verdicts.extend(by_name[p.name] for p in todo)
        ex.liveness_seconds = time.perf_counter() - t2
    ex.analysis_seconds = time.perf_counter() - t1


def _resolve_successors(chk: _Checks, states: Any) -> None:
    """The step events a level-at-a-time search recorded as ``(source id, position, successor's
    packed value)``: the successor's id instead of its value (it was admitted, in ``states``)."""
    import numpy as np

    for d in (chk.violated_step, chk.witnessed_step):
        for name, (i, k, y) in list(d.items()):
            if isinstance(states, list):  # (states of several words)
                at = [states.index(y)] if y in states else []
            else:
                at = np.flatnonzero(np.frombuffer(states, dtype=np.uint64) == np.uint64(y))
            d[name] = (i, k, int(at[0]) if len(at) else len(states))  # (not admitted: a bound cut it)


def _explore_packed(model: Model, packed, max_states, liveness, keep_edges, progress, box: list,
                    watch: _Watch | None) -> Exploration:
    """The default mode on a model's packed view (:meth:`Model.packed`, model/engines/packing.py): states
    are integers, a successor is ``(x & keep) | set`` from the steps the model's sections recorded,
    and the state properties are memoised on the fields they read.  Same order as :func:`_explore`
    (the packed successors are the model's, in its order), so the same counts, depth and shortest
    paths; the Exploration's ``state_list`` decodes on access."""
    from conq.model.engines.packing import DecodedStates

    codec = packed.codec
    chk = _Checks(model, False)
    chk.use_packed(codec)
    props = chk.props
    live = [p for p in props if p.kind is Kind.LEADS_TO]
    check_live = liveness and bool(live)
    if keep_edges is None:
        keep_edges = check_live
    decode = codec.decode

    t0 = time.perf_counter()
    index: dict[int, int] = {}
    states = array("Q") if codec.total_bits <= 64 else []
    parent = array("l")
    via = array("l")
    label_ids: dict[tuple, int] = {}
    labels: list[tuple] = []
    edges = array("l")
    witnessed = chk.witnessed
    expand = packed.expand
    depth_marks = [0, 0]
    complete = True
    stop_reason = ""
    transitions = 0
    cap = max_states if max_states is not None else -1
    i = 0
    index_get = index.get
    states_append = states.append
    parent_append = parent.append
    via_append = via.append
    edges_extend = edges.extend
    label_get = label_ids.get
    on_state = chk.on_state
    on_step = chk.on_step
    skip = chk.skip

    finished = interrupted = False
    bulk = None
    if watch is not None:
        watch.arm()
    try:
        if not keep_edges:
            # a level at a time in arrays (levels.LevelSearch, issue 36): the same ids, parents and
            # paths (states of several words told apart by all of them: exact); a step check it
            # reports names its successor by value, resolved below
            bulk = LevelSearch(packed, chk, max_states, parent, via, lambda i, k, y: (i, k, y), states, box, watch,
                               progress, t0, exact=True)
            bulk.run(packed.inits)
            transitions, complete, stop_reason = bulk.transitions, bulk.complete, bulk.stop_reason
            depth_marks[1:] = list(accumulate(bulk.level_sizes))
            i = n = len(states)
        for pos, x in enumerate(packed.inits if bulk is None else ()):
            if x not in index:
                idx = len(states)
                index[x] = idx
                states_append(x)
                parent_append(-1)
                via_append(pos)
                on_state(x, idx)
            if box and watch.stop_reason:
                complete = False
                stop_reason = watch.stop_reason
                break
        if bulk is None:
            depth_marks[1] = len(states)
            n = len(states)
        while complete and i < n:
            if i == depth_marks[-1]:
                depth_marks.append(n)
            x = states[i]
            steps = expand(x)
            k = -1
            for a, o, keep, put in steps:
                k += 1
                y = (x & keep) | put
                j = index_get(y)
                if j is None:
                    if n == cap:
                        complete = False
                        stop_reason = f"state bound {max_states} reached"
                        break
                    j = n
                    n += 1
                    index[y] = j
                    states_append(y)
                    parent_append(i)
                    via_append(k)
                    on_state(y, j)
                if a.__class__ not in skip:  # not decided when the step was recorded: on the states
                    on_step(decode(x), a, o, decode(y), (i, k, j))
                if keep_edges:
                    lab = label_get((a, o))
                    if lab is None:
                        lab = label_ids[(a, o)] = len(labels)
                        labels.append((a, o))
                    edges_extend((i, j, lab))
            if not complete:
                transitions += k + 1
                break
            transitions += len(steps)
            i += 1
            if box:
                box.clear()
                if watch.stop_reason:
                    complete = False
                    stop_reason = watch.stop_reason
                    break
                if progress is not None:
                    watch.disarm()
                    progress(SearchProgress(n, transitions, len(depth_marks) - 2,
                                            time.perf_counter() - t0, watch.last_rss))
                    watch.arm()
        finished = True
        if watch is not None:
            watch.disarm()
    except GuardInterrupt:
        interrupted = watch.delivered = True
        watch.disarm()
    del index
    if bulk is not None:  # the successors named by value: their ids (a few look-ups at the end)
        _resolve_successors(chk, states)
    ex, t1 = _wrap_up(model, chk, states, DecodedStates(codec, states), parent, via, edges, labels, depth_marks,
                      complete, stop_reason, transitions, interrupted and not finished, watch, t0, False)
    _liveness(ex, live, check_live, witnessed, watch, t1)
    return ex
