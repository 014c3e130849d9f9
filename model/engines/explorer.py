"""Exhaustive exploration of a bounded configuration.

Breadth-first over plain Python containers (building a networkx graph during
the search was measured 8x slower), so the first violation found of each
invariant is a shortest counterexample.  The networkx graph is built
afterwards, only when an analysis needs it: liveness (strongly connected
components of the not-yet-goal subgraph under weak fairness) and coverage.

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
from dataclasses import dataclass, field
from typing import Any, Callable

from conq.model.kernel import Kind, Model, Path, Property


@dataclass
class Verdict:
    """The outcome of one property on one run of the explorer."""

    prop: Property
    #: "holds" | "violated" | "vacuous" | "witnessed" | "unreached" | "skipped" | "unknown" (a
    #: witness or state not reached by a search that was cut short: no verdict)
    status: str
    path: Path | None = None  # counterexample (violated) or witness (holds/witnessed)
    cycle: Path | None = None  # liveness: the repeated part of the lasso
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("holds", "witnessed")


@dataclass
class Exploration:
    """Everything an exhaustive run found."""

    model: Model
    states: int
    transitions: int
    depth: int
    search_seconds: float
    analysis_seconds: float
    complete: bool  # False when a state or time bound cut the search
    verdicts: list[Verdict]
    #: index -> canonical state; kept for graph analyses and coverage
    state_list: list[Any] = field(repr=False, default_factory=list)
    #: flat (src, dst, label id) triples
    edges: array = field(repr=False, default_factory=lambda: array("l"))
    labels: list[tuple] = field(repr=False, default_factory=list)
    stop_reason: str = ""
    #: BFS tree: index -> parent index (-1 for initial states) and label id of the edge from it
    parent: array = field(repr=False, default_factory=lambda: array("l"))
    via: list[int] = field(repr=False, default_factory=list)

    def path(self, idx: int) -> Path:
        """The shortest path (as found by the search) from an initial state to state ``idx``."""
        chain = []
        while idx != -1:
            chain.append(idx)
            idx = self.parent[idx]
        chain.reverse()
        labels = [self.labels[self.via[k]] for k in chain[1:]]
        return _concretise(self.model, self.state_list[chain[0]], labels, None, [])

    def leaves(self) -> list[int]:
        """States that are no other state's BFS parent: their paths cover every state."""
        parents = set(self.parent)
        return [i for i in range(len(self.state_list)) if i not in parents]

    @property
    def ok(self) -> bool:
        return self.complete and all(v.ok or v.status == "skipped" for v in self.verdicts)

    @property
    def violations(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "violated"]

    def verdict(self, name: str) -> Verdict:
        for v in self.verdicts:
            if v.prop.name == name:
                return v
        raise KeyError(name)

    def graph(self):
        """The reachable graph as a ``networkx.MultiDiGraph`` over state indices;
        edge attribute ``label`` is ``(action, observation)``."""
        import networkx as nx

        g = nx.MultiDiGraph()
        g.add_nodes_from(range(len(self.state_list)))
        e = self.edges
        labels = self.labels
        g.add_edges_from((e[i], e[i + 1], {"label": labels[e[i + 2]]}) for i in range(0, len(e), 3))
        return g

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.model.name,
            "states": self.states,
            "transitions": self.transitions,
            "depth": self.depth,
            "complete": self.complete,
            "stop_reason": self.stop_reason,
            "search_seconds": round(self.search_seconds, 4),
            "analysis_seconds": round(self.analysis_seconds, 4),
            "states_per_second": round(self.states / self.search_seconds) if self.search_seconds > 0 else None,
            "ok": self.ok,
            "properties": [
                {
                    "name": v.prop.name,
                    "kind": v.prop.kind.value,
                    "claim": v.prop.claim,
                    "status": v.status,
                    "detail": v.detail,
                    "path": _path_json(self.model, v.path) if v.path is not None else None,
                    "cycle": _path_json(self.model, v.cycle) if v.cycle is not None else None,
                }
                for v in self.verdicts
            ],
        }


def _path_json(model: Model, path: Path) -> dict[str, Any]:
    return {
        "init": model.view(path.init),
        "steps": [{"action": list(a), "observation": o, "state": model.view(t)} for a, o, t in path.steps],
    }


# -- resource guards -------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchProgress:
    """What a progress callback is told, about twice a second, from the exploring thread."""

    states: int
    transitions: int
    depth: int
    seconds: float
    rss_bytes: int | None  # resident memory of this process (None: unknown on this platform)


class GuardInterrupt(BaseException):
    """Raised into the exploring thread when a limit was exceeded and the search did not
    stop at a state boundary within the grace period: one call into the model (its initial
    states, one state's successors, a property) or the liveness analysis ran on.  A
    BaseException, so that a model's ``except Exception`` cannot swallow it; it never
    leaves :func:`explore`."""


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
) -> Exploration:
    """Explore every reachable state of ``model`` (breadth first).

    ``symmetry`` stores one representative per symmetry class
    (:meth:`Model.canonical`); liveness is then skipped, because weak-fairness
    classes name individual processes and are not preserved by the quotient.
    ``keep_edges`` (default: when liveness is checked) keeps the transition
    list for graph analyses.

    Limits: ``max_states`` (distinct states), ``max_seconds`` (search and
    liveness analysis together) and ``max_memory_mb`` (resident memory of the
    process).  Hitting one ends the run *incomplete* (``complete`` False,
    ``stop_reason`` says which): never a verdict.  Time and memory are watched
    from a thread of their own (:class:`_Watch`), so they are enforced inside
    long model calls too, not only between states.  ``progress`` is called
    from this thread every ``progress_interval`` seconds of the search.
    """
    box: list = []
    watch = None
    if max_seconds is not None or max_memory_mb is not None or progress is not None:
        watch = _Watch(box, time.perf_counter(), max_seconds, max_memory_mb, progress_interval if progress else None).start()
    try:
        return _explore(model, max_states, symmetry, liveness, keep_edges, progress, box, watch)
    finally:
        if watch is not None:
            watch.close()


def _explore(model: Model, max_states, symmetry, liveness, keep_edges, progress, box: list, watch: _Watch | None) -> Exploration:
    props = model.property_list()
    inv = [p for p in props if p.kind is Kind.ALWAYS]
    inv_step = [p for p in props if p.kind is Kind.ALWAYS_STEP]
    live = [p for p in props if p.kind is Kind.LEADS_TO]
    check_live = liveness and not symmetry and bool(live)
    if keep_edges is None:
        keep_edges = check_live

    t0 = time.perf_counter()
    canon = model.canonical if symmetry else None
    index: dict[Any, int] = {}
    states: list[Any] = []
    parent = array("l")
    via: list[int] = []  # label id of the edge from parent
    label_ids: dict[tuple, int] = {}
    labels: list[tuple] = []
    edges = array("l")
    violated: dict[str, int] = {}  # invariant -> state idx (or step: idx of target)
    violated_step: dict[str, tuple[int, int]] = {}  # step invariant -> (src idx, label id)
    witnessed: dict[str, int] = {}  # witness/sometimes name -> state idx
    witnessed_step: dict[str, tuple[int, int]] = {}

    # Witness predicates are dropped from the hot loop once reached.
    pending_w = [(p.name, p.witness) for p in inv] + [
        (p.name, p.check) for p in props if p.kind is Kind.SOMETIMES
    ]
    live_triggers = [(p.name, p.trigger) for p in live]
    inv_checks = [(p.name, p.check) for p in inv]

    def admit(state: Any, par: int, lab: int) -> int:
        idx = len(states)
        index[state] = idx
        states.append(state)
        parent.append(par)
        via.append(lab)
        for name, chk in inv_checks:
            if name not in violated and not chk(state):
                violated[name] = idx
        if pending_w:
            for item in list(pending_w):
                if item[1](state):
                    witnessed[item[0]] = idx
                    pending_w.remove(item)
        if live_triggers:
            for item in list(live_triggers):
                if item[1](state):
                    witnessed[item[0]] = idx
                    live_triggers.remove(item)
        return idx

    successors = model.successors
    depth_marks = [0, 0]  # BFS level boundaries
    complete = True
    stop_reason = ""
    transitions = 0
    i = 0
    index_get = index.get

    def intern(label: tuple) -> int:
        lab = label_ids.get(label)
        if lab is None:
            lab = label_ids[label] = len(labels)
            labels.append(label)
        return lab

    # step properties (and their witnesses) that apply, per action name: most step properties
    # speak of one or two actions, and calling them for every transition dominated the search
    step_for: dict[str, tuple] = {}
    step_props = [p for p in inv_step]

    def step_checks(name: str) -> tuple:
        found = step_for.get(name)
        if found is None:
            found = step_for[name] = tuple(p for p in step_props if p.applies_to(name))
        return found

    finished = interrupted = False
    if watch is not None:
        watch.arm()
    try:
        for s in model.init_states():
            key = canon(s) if canon else s
            if key not in index:
                admit(key, -1, -1)
            if box and watch.stop_reason:
                complete = False
                stop_reason = watch.stop_reason
                break
        depth_marks[1] = len(states)
        while complete and i < len(states):
            if i == depth_marks[-1]:
                depth_marks.append(len(states))
            s = states[i]
            for a, o, t in successors(s):
                transitions += 1
                key = canon(t) if canon else t
                j = index_get(key)
                lab = -1
                if j is None:
                    if max_states is not None and len(states) >= max_states:
                        complete = False
                        stop_reason = f"state bound {max_states} reached"
                        break
                    lab = intern((a, o))
                    j = admit(key, i, lab)
                if step_props:
                    for p in step_checks(a[0]):
                        if p.name not in violated_step and not p.check(s, a, o, t):
                            violated_step[p.name] = (i, intern((a, o)), j)
                        if p.name not in witnessed_step and p.witness(s, a, o, t):
                            witnessed_step[p.name] = (i, intern((a, o)), j)
                if keep_edges:
                    if lab < 0:
                        lab = intern((a, o))
                    edges.append(i)
                    edges.append(j)
                    edges.append(lab)
            if not complete:
                break
            i += 1
            if box:  # the watch has something to say: a limit, or a progress tick
                box.clear()
                if watch.stop_reason:
                    complete = False
                    stop_reason = watch.stop_reason
                    break
                if progress is not None:
                    watch.disarm()
                    progress(SearchProgress(len(states), transitions, len(depth_marks) - 2,
                                            time.perf_counter() - t0, watch.last_rss))
                    watch.arm()
        finished = True
        if watch is not None:
            watch.disarm()
    except GuardInterrupt:
        interrupted = watch.delivered = True
        watch.disarm()
    if watch is not None and watch.stop_reason and not finished:
        complete = False
        stop_reason = watch.stop_reason
    if interrupted and not finished:
        # The interrupt may have landed anywhere in the loop: keep what is consistent.
        n = min(len(states), len(parent), len(via))
        del states[n:]
        del parent[n:]
        del via[n:]
        for d in (violated, witnessed):
            for name in [k for k, idx in d.items() if idx >= n]:
                del d[name]
        for d in (violated_step, witnessed_step):
            for name in [k for k, (src, _lab, dst) in d.items() if src >= n or dst >= n]:
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

    def concrete(chain: list[int], extra: tuple[int, int, int] | None = None) -> Path:
        labs = [labels[via[k]] for k in chain[1:]]
        targets = [states[k] for k in chain[1:]]
        if extra is not None:
            labs.append(labels[extra[1]])
            targets.append(states[extra[2]])
        return _concretise(model, states[chain[0]], labs, canon, targets)

    def not_found(p: Property, status: str, detail: str) -> Verdict:
        if complete:
            return Verdict(p, status, detail=detail)
        # a search cut short proves nothing by what it did not reach
        return Verdict(p, "unknown", detail=f"not reached before the search was cut short ({stop_reason})")

    verdicts: list[Verdict] = []
    for p in props:
        if p.kind is Kind.ALWAYS:
            if p.name in violated:
                verdicts.append(Verdict(p, "violated", concrete(path_to(violated[p.name]))))
            elif p.name in witnessed:
                verdicts.append(Verdict(p, "holds", concrete(path_to(witnessed[p.name]))))
            else:
                verdicts.append(not_found(p, "vacuous", "its witness was never reached"))
        elif p.kind is Kind.ALWAYS_STEP:
            if p.name in violated_step:
                src, lab, dst = violated_step[p.name]
                verdicts.append(Verdict(p, "violated", concrete(path_to(src), (src, lab, dst))))
            elif p.name in witnessed_step:
                src, lab, dst = witnessed_step[p.name]
                verdicts.append(Verdict(p, "holds", concrete(path_to(src), (src, lab, dst))))
            else:
                verdicts.append(not_found(p, "vacuous", "its witness was never reached"))
        elif p.kind is Kind.SOMETIMES:
            if p.name in witnessed:
                verdicts.append(Verdict(p, "witnessed", concrete(path_to(witnessed[p.name]))))
            else:
                verdicts.append(not_found(p, "unreached", "no reachable state satisfies it"))
    ex = Exploration(
        model=model,
        states=len(states),
        transitions=transitions,
        depth=depth,
        search_seconds=t1 - t0,
        analysis_seconds=0.0,
        complete=complete,
        verdicts=verdicts,
        state_list=states,
        edges=edges,
        labels=labels,
        stop_reason=stop_reason,
        parent=parent,
        via=via,
    )
    for p in live:
        if not check_live:
            ex.verdicts.append(
                Verdict(p, "skipped", detail="liveness not checked (symmetry reduction or --no-liveness)")
            )
        elif not ex.complete:
            ex.verdicts.append(Verdict(p, "skipped", detail="the search was cut short: " + ex.stop_reason))
        elif p.name not in witnessed:
            ex.verdicts.append(Verdict(p, "vacuous", detail="no reachable state satisfies its trigger"))
        elif watch is None:
            ex.verdicts.append(_check_leads_to(ex, p, via, path_to))
        else:
            v = None
            if not watch.stop_reason:
                try:
                    watch.arm()
                    v = _check_leads_to(ex, p, via, path_to)
                    watch.disarm()
                except GuardInterrupt:
                    watch.delivered = True
                    watch.disarm()
            if v is None:  # a limit was hit during the analysis
                ex.complete = False
                ex.stop_reason = f"{watch.stop_reason or 'interrupted'} (in the liveness analysis)"
                v = Verdict(p, "skipped", detail="the analysis was cut short: " + ex.stop_reason)
            ex.verdicts.append(v)
    ex.analysis_seconds = time.perf_counter() - t1
    return ex


def _concretise(model: Model, init: Any, labels: list[tuple], canon, canon_states: list[Any]) -> Path:
    """Turn a path of (action, observation) labels into a concrete Path.

    Without symmetry the labels replay directly.  With symmetry each stored
    state is a class representative, so the labels may name processes of
    different representatives: walk from the initial state and at each step
    take a concrete successor whose class is the next stored state.
    """
    steps = []
    state = init
    for k, (a, o) in enumerate(labels):
        nxt = None
        if canon is None:
            for o2, t in model.step(state, a):
                if o2 == o:
                    nxt = (a, o, t)
                    break
        else:
            target = canon_states[k]
            for a2, o2, t in model.successors(state):
                if canon(t) == target:
                    nxt = (a2, o2, t)
                    break
        if nxt is None:  # pragma: no cover - would be a nondeterministic step function
            raise RuntimeError(f"{model.name}: could not replay step {k + 1} {a!r}: is step() deterministic?")
        steps.append(nxt)
        state = nxt[2]
    return Path(init, tuple(steps))


def _check_leads_to(ex: Exploration, p: Property, via, path_to) -> Verdict:
    """``P ~> Q`` under weak fairness of the model's fairness classes.

    Violated iff some reachable P-state that is not a Q-state can reach,
    through not-Q states only, either a state in which no fair step is enabled
    (no successors at all, or only steps the environment may never take: the
    run may end there without reaching Q) or a *fair* strongly connected component of
    the not-Q subgraph.  A component is fair iff, for every fairness class,
    the class is taken on an edge inside it or is disabled in one of its
    states (a weakly fair scheduler may then loop in it forever): for weak
    fairness this component test is exact, because the tour through every
    state and edge of the component is fair whenever any cycle in it is.
    """
    import networkx as nx

    model = ex.model
    states = ex.state_list
    goal = p.check
    not_q = [not goal(s) for s in states]
    trig = p.trigger
    e = ex.edges
    labels = ex.labels
    fair = model.fair
    label_class = [fair(a, o) for a, o in labels]

    g = nx.DiGraph()
    out_classes: dict[int, set] = {}
    has_succ = [False] * len(states)
    for k in range(0, len(e), 3):
        src, dst, lab = e[k], e[k + 1], e[k + 2]
        has_succ[src] = True
        c = label_class[lab]
        if c is not None:
            out_classes.setdefault(src, set()).add(c)
        if not_q[src] and not_q[dst]:
            if g.has_edge(src, dst):
                g[src][dst]["labs"].add(lab)
            else:
                g.add_edge(src, dst, labs={lab})
    bad: set[int] = set()
    reason: dict[int, str] = {}
    bad_scc: dict[int, set[int]] = {}
    for idx, nq in enumerate(not_q):
        if nq and not has_succ[idx]:
            bad.add(idx)
            reason[idx] = "deadlock: no step is enabled and the goal was never reached"
        elif nq and not out_classes.get(idx):
            # Only unfair steps (the environment's) are enabled: nothing obliges any of them
            # to happen, so a fair run may stop here for ever without reaching the goal.
            bad.add(idx)
            reason[idx] = "no fair step is enabled (only the environment could act) and the goal was never reached"
    for comp in nx.strongly_connected_components(g):
        if len(comp) == 1:
            (only,) = comp
            if not g.has_edge(only, only):
                continue
        taken: set = set()
        for u in comp:
            for v, data in g[u].items():
                if v in comp:
                    taken.update(label_class[lab] for lab in data["labs"])
        enabled_everywhere = None
        for u in comp:
            cls = out_classes.get(u, set())
            enabled_everywhere = set(cls) if enabled_everywhere is None else enabled_everywhere & cls
        starving = {c for c in (enabled_everywhere or set()) if c not in taken}
        if not starving:
            for u in comp:
                bad.add(u)
                bad_scc[u] = comp
                reason[u] = "a fair cycle never reaches the goal"
    if not bad:
        return Verdict(p, "holds", detail=f"fairness: {p.fairness}")
    # Which not-Q states can reach a bad state through not-Q states?
    g.add_nodes_from(bad)
    can_reach = set(bad)
    for b in bad:
        if b in g:
            can_reach |= nx.ancestors(g, b)
    starts = [idx for idx in range(len(states)) if not_q[idx] and idx in can_reach and trig(states[idx])]
    if not starts:
        return Verdict(p, "holds", detail=f"fairness: {p.fairness}")
    # Shortest prefix: the trigger state closest to the initial states.
    depth_of = {}

    def depth(idx: int) -> int:
        if idx not in depth_of:
            depth_of[idx] = len(path_to(idx))
        return depth_of[idx]

    start = min(starts, key=depth)
    prefix_chain = path_to(start)
    target_set = bad
    # BFS from start inside the not-Q subgraph to the nearest bad state.
    route = None
    for b, pth in nx.single_source_shortest_path(g, start).items():
        if b in target_set and (route is None or len(pth) < len(route)):
            route = pth
    assert route is not None
    end = route[-1]

    def lab_between(u: int, v: int) -> int:
        return min(g[u][v]["labs"])

    chain_labels = [labels[via[k]] for k in prefix_chain[1:]] + [labels[lab_between(u, v)] for u, v in zip(route, route[1:])]
    base = prefix_chain[0]
    lasso = _concretise(model, states[base], chain_labels, None, [])
    cycle = None
    if end in bad_scc:
        loop = _fair_cycle(g, bad_scc[end], end, label_class, out_classes)
        cycle = _concretise(model, states[end], [labels[lab] for lab in loop], None, [])
    return Verdict(p, "violated", lasso, cycle=cycle, detail=f"{reason[end]}; fairness: {p.fairness}")


def _fair_cycle(g, comp: set[int], start: int, label_class: list, out_classes: dict[int, set]) -> list[int]:
    """Label ids of a cycle through ``start`` inside a fair component that is
    itself fair: for every fairness class enabled somewhere in the component
    it takes an edge of that class, or passes a state where the class is
    disabled.  (The shortest cycle alone may starve a process.)"""
    import networkx as nx

    sub = g.subgraph(comp)
    classes = set().union(*(out_classes.get(u, set()) for u in comp))
    taken_edge: dict = {}
    for u in comp:
        for v, data in sub[u].items():
            for lab in data["labs"]:
                c = label_class[lab]
                if c is not None and c not in taken_edge:
                    taken_edge[c] = (u, v, lab)
    labs: list[int] = []
    here = start

    def walk(to: int) -> None:
        nonlocal here
        route = nx.shortest_path(sub, here, to)
        labs.extend(min(sub[u][v]["labs"]) for u, v in zip(route, route[1:]))
        here = to

    for c in sorted(classes, key=repr):
        if c in taken_edge:
            u, v, lab = taken_edge[c]
            walk(u)
            labs.append(lab)
            here = v
        else:
            walk(next(u for u in comp if c not in out_classes.get(u, set())))
    if here != start or not labs:
        if here == start:  # a self-loop component or nothing to visit: take one step out and back
            v = next(iter(sub.successors(start)))
            labs.append(min(sub[start][v]["labs"]))
            here = v
        walk(start)
    return labs
