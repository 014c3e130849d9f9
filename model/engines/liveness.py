"""Liveness (``P ~> Q`` under weak fairness) on the compact graph an exhaustive search kept.

The explorer keeps the reachable graph as flat ``(src, dst, label)`` triples over state
indices (sources in breadth-first order).  Everything that is linear in the graph is done
here on numpy arrays built once from those triples and shared by every ``leads_to``
property: the fairness classes enabled in each state, the not-Q subgraph, its strongly
connected components (``scipy.sparse.csgraph.connected_components(connection="strong")``,
a C routine: networkx's pure-Python Tarjan on the whole graph took longer than the search,
issue 18), the fairness test of each component, and the states that can reach a bad one
(a breadth-first search on the reversed subgraph, in C too).  Python remains only where
the model is asked something (the goal and trigger of each state) and for the lasso:
networkx finds a fair cycle inside the one component the counterexample ends in.

The verdict is the one :func:`conq.model.engines.explorer` always gave (the criterion is
spelled out in :func:`check_leads_to`); the lasso is again a shortest prefix to the
trigger state closest to the initial states and a shortest route from it to a bad state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from conq.model.kernel import Path, Property

__all__ = ["check_leads_to", "CompactGraph"]

_WORD = 62  # fairness classes per int64 word (bit 63 unused: no sign games)


class CompactGraph:
    """The search's graph as numpy arrays, and what every liveness property shares."""

    def __init__(self, ex: Any):
        self.ex = ex
        self.n = n = len(ex.state_list)
        e = np.frombuffer(memoryview(ex.edges), dtype=np.dtype(f"i{ex.edges.itemsize}")) if len(ex.edges) else np.zeros(0, np.int64)
        e = e.reshape(-1, 3)
        self.src = np.ascontiguousarray(e[:, 0]).astype(np.int64)
        self.dst = np.ascontiguousarray(e[:, 1]).astype(np.int64)
        self.lab = np.ascontiguousarray(e[:, 2]).astype(np.int64)
        fair = ex.model.fair
        class_ids: dict[Any, int] = {}
        lab_cls = []
        for a, o in ex.labels:
            c = fair(a, o)
            lab_cls.append(-1 if c is None else class_ids.setdefault(c, len(class_ids)))
        self.classes = list(class_ids)
        self.lab_cls = np.array(lab_cls, dtype=np.int64)
        self.edge_cls = self.lab_cls[self.lab] if len(self.lab) else np.zeros(0, np.int64)
        self.words = max(1, -(-len(self.classes) // _WORD))
        self.has_succ = np.zeros(n, dtype=bool)
        self.has_succ[self.src] = True
        # the fairness classes enabled in each state: bit masks, one int64 word per 62 classes
        self.out_mask = self._or_by(self.src, self.edge_cls, n)

    def _bits(self, cls: np.ndarray, word: int) -> np.ndarray:
        lo = word * _WORD
        inside = (cls >= lo) & (cls < lo + _WORD)
        return np.where(inside, np.left_shift(np.int64(1), np.clip(cls - lo, 0, _WORD - 1)), 0).astype(np.int64)

    def _or_by(self, keys: np.ndarray, cls: np.ndarray, size: int) -> np.ndarray:
        """Per key (0..size-1): the OR of the class bits of the entries with that key."""
        out = np.zeros((size, self.words), dtype=np.int64)
        if not len(keys):
            return out
        order = np.argsort(keys, kind="stable")
        k = keys[order]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        for w in range(self.words):
            bits = self._bits(cls[order], w)
            out[k[starts], w] = np.bitwise_or.reduceat(bits, starts)
        return out


def check_leads_to(ex: Any, props: list[Property]) -> list:
    """Verdicts of ``leads_to`` properties on a complete exploration with edges kept.

    ``P ~> Q`` is violated iff some reachable P-state that is not a Q-state can reach,
    through not-Q states only, either a state in which no fair step is enabled (no
    successors at all, or only steps the environment may never take: the run may end
    there without reaching Q) or a *fair* strongly connected component of the not-Q
    subgraph.  A component is fair iff, for every fairness class, the class is taken on an
    edge inside it or is disabled in one of its states (a weakly fair scheduler may then
    loop in it forever): for weak fairness this component test is exact, because the tour
    through every state and edge of the component is fair whenever any cycle in it is."""
    g = CompactGraph(ex)
    return [_one(g, p) for p in props]


def _one(g: CompactGraph, p: Property):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    from conq.model.engines.results import Verdict

    ex = g.ex
    states = ex.state_list
    n = g.n
    goal = p.check
    # a packed search's states (model/engines/packing.py DecodedStates) evaluate the goal memoised on the
    # fields it reads instead of decoding every state
    values = states.predicate_values(goal) if hasattr(states, "predicate_values") else (goal(s) for s in states)
    not_q = ~np.fromiter(values, dtype=bool, count=n)
    holds = Verdict(p, "holds", detail=f"fairness: {p.fairness}")

    # 1: not-Q states where a fair run may stop: no step at all, or only unfair steps
    reason = np.zeros(n, dtype=np.int8)  # 0 fine, 1 deadlock, 2 no fair step, 3 fair cycle
    no_fair = ~g.out_mask.any(axis=1)
    reason[not_q & ~g.has_succ] = 1
    reason[not_q & g.has_succ & no_fair] = 2

    # 2: fair components of the not-Q subgraph
    keep = not_q[g.src] & not_q[g.dst]
    s_src, s_dst, s_lab, s_cls = g.src[keep], g.dst[keep], g.lab[keep], g.edge_cls[keep]
    ones = np.ones(len(s_src), dtype=np.int8)
    sub = csr_matrix((ones, (s_src, s_dst)), shape=(n, n))
    _ncomp, comp = connected_components(sub, directed=True, connection="strong")
    size = np.bincount(comp, minlength=_ncomp)
    loop = np.zeros(_ncomp, dtype=bool)
    loop[comp[s_src[s_src == s_dst]]] = True
    cyclic = (size > 1) | loop  # components that hold a cycle (all their states are not-Q)
    bad_comp = np.zeros(_ncomp, dtype=bool)
    if cyclic.any():
        inside = comp[s_src] == comp[s_dst]
        taken = g._or_by(comp[s_src[inside]], s_cls[inside], _ncomp)
        nodes = np.flatnonzero(cyclic[comp])
        enabled = np.full((_ncomp, g.words), -1, dtype=np.int64)
        for w in range(g.words):
            np.bitwise_and.at(enabled[:, w], comp[nodes], g.out_mask[nodes, w])
        starving = (enabled & ~taken).any(axis=1)
        bad_comp = cyclic & ~starving
        reason[bad_comp[comp] & not_q] = 3
    bad = reason > 0
    if not bad.any():
        return holds

    # 3: the not-Q states that can reach a bad state through not-Q states: a breadth-first
    # search from a virtual root joined to every bad state, on the reversed subgraph
    bad_idx = np.flatnonzero(bad)
    rev = csr_matrix(
        (np.ones(len(s_src) + len(bad_idx), dtype=np.int8),
         (np.r_[s_dst, np.full(len(bad_idx), n)], np.r_[s_src, bad_idx])),
        shape=(n + 1, n + 1),
    )
    reached = breadth_first_order(rev, n, directed=True, return_predecessors=False)
    can_reach = np.zeros(n + 1, dtype=bool)
    can_reach[reached] = True
    can_reach = can_reach[:n]
    trig = p.trigger
    # state indices are in breadth-first order: the first trigger state is a closest one
    start = next((int(i) for i in np.flatnonzero(not_q & can_reach) if trig(states[i])), None)
    if start is None:
        return holds

    # 4: the lasso: shortest prefix to ``start``, then a shortest route inside the not-Q
    # subgraph to the nearest bad state (neighbours in edge order, as the search met them)
    indptr = np.searchsorted(s_src, np.arange(n + 1)).tolist()
    s_dst_l = s_dst.tolist()
    bad_l = bad
    prev = {start: -1}
    frontier = [start]
    end = start if bad_l[start] else None
    while end is None and frontier:
        nxt = []
        for u in frontier:
            for e in range(indptr[u], indptr[u + 1]):
                v = s_dst_l[e]
                if v not in prev:
                    prev[v] = u
                    if bad_l[v]:
                        end = v
                        break
                    nxt.append(v)
            if end is not None:
                break
        frontier = nxt
    assert end is not None
    route = [end]
    while prev[route[-1]] != -1:
        route.append(prev[route[-1]])
    route.reverse()

    def lab_between(u: int, v: int) -> int:
        lo, hi = indptr[u], indptr[u + 1]
        hits = s_lab[lo:hi][s_dst[lo:hi] == v]
        return int(hits.min())

    labels = ex.labels
    prefix = ex.path(start)
    steps = list(prefix.steps)
    for u, v in zip(route, route[1:]):
        a, o = labels[lab_between(u, v)]
        steps.append((a, o, states[v]))
    lasso = Path(prefix.init, tuple(steps))
    cycle = None
    why = {1: "deadlock: no step is enabled and the goal was never reached",
           2: "no fair step is enabled (only the environment could act) and the goal was never reached",
           3: "a fair cycle never reaches the goal"}[int(reason[end])]
    if reason[end] == 3:
        members = np.flatnonzero(comp == comp[end])
        cycle = _cycle_path(g, members, end, keep, comp)
    return Verdict(p, "violated", lasso, cycle=cycle, detail=f"{why}; fairness: {p.fairness}")


def _cycle_path(g: CompactGraph, members: np.ndarray, end: int, keep: np.ndarray, comp: np.ndarray) -> Path:
    """A fair cycle through ``end`` inside its component, found with networkx on that
    component alone."""
    import networkx as nx

    from conq.model.engines.results import _concretise

    ex = g.ex
    member_set = set(members.tolist())
    in_comp = keep & (comp[g.src] == comp[end]) & (comp[g.dst] == comp[end])
    sub = nx.DiGraph()
    sub.add_nodes_from(sorted(member_set))
    for u, v, lab in zip(g.src[in_comp].tolist(), g.dst[in_comp].tolist(), g.lab[in_comp].tolist()):
        if sub.has_edge(u, v):
            sub[u][v]["labs"].add(lab)
        else:
            sub.add_edge(u, v, labs={lab})
    label_class = [None if c < 0 else g.classes[c] for c in g.lab_cls.tolist()]
    out_classes: dict[int, set] = {}
    rows = np.isin(g.src, members)
    for u, c in zip(g.src[rows].tolist(), g.edge_cls[rows].tolist()):
        if c >= 0:
            out_classes.setdefault(u, set()).add(g.classes[c])
    loop = _fair_cycle(sub, sorted(member_set), end, label_class, out_classes)
    return _concretise(ex.model, ex.state_list[end], [ex.labels[lab] for lab in loop], None, [])


def _fair_cycle(sub, comp: list[int], start: int, label_class: list, out_classes: dict[int, set]) -> list[int]:
    """Label ids of a cycle through ``start`` inside a fair component that is
    itself fair: for every fairness class enabled somewhere in the component
    it takes an edge of that class, or passes a state where the class is
    disabled.  (The shortest cycle alone may starve a process.)"""
    import networkx as nx

    classes = set().union(*(out_classes.get(u, set()) for u in comp))
    taken_edge: dict = {}
    for u in comp:
        for v, data in sub[u].items():
            for lab in sorted(data["labs"]):
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
