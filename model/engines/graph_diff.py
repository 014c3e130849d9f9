"""Two reachable graphs compared: are they the same, and if not, what changed (issue 31).

Used by mutation coverage (model/engines/model_mutation.py: a mutant whose graph is the model's is
*equivalent*, decided here, not guessed) and to explain a manifest mismatch (a state count that
moved says nothing; this says which claims changed their verdict, which witnesses moved, and
gives a shortest path to a state one graph has and the other lacks).

A graph's *print* is three sorted arrays of stable 64-bit fingerprints
(:mod:`conq.model.engines.fingerprint`, the same in every process): its initial states, its states,
and its labelled edges (source, action and observation, target).  Two complete explorations have
the same reachable graph iff the prints are equal (up to a fingerprint collision, about 2^-64 per
pair of states).  Duplicate successors (the same edge twice in one successor list) are one edge:
they are no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from conq.model.engines.fingerprint import fingerprint
from conq.model.engines.results import Exploration

_K1, _K2, _K3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise (uint64 arithmetic wraps)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _K2
    x = x ^ (x >> np.uint64(27))
    x = x * _K3
    return x ^ (x >> np.uint64(31))


#: the key of prints made of fingerprints (any two such prints compare)
FINGERPRINTS = ("fingerprints",)


@dataclass
class GraphPrint:
    """The fingerprints of one complete exploration's graph."""

    #: per state index (the search's BFS order), the state's fingerprint
    order: np.ndarray
    states: np.ndarray  # sorted, unique
    inits: np.ndarray  # sorted, unique
    edges: np.ndarray  # sorted, unique
    transitions: int
    #: what the state numbers are: FINGERPRINTS, or ("packed", the codec's domains) when they are the
    #: packed states themselves (exact, no hashing; only prints of one codec compare)
    key: tuple = FINGERPRINTS

    def same(self, other: "GraphPrint") -> bool:
        if self.key != other.key:
            raise ValueError("graph prints of different kinds do not compare (make both with packed=False)")
        return (np.array_equal(self.states, other.states) and np.array_equal(self.inits, other.inits)
                and np.array_equal(self.edges, other.edges))


def codec_key(codec: Any) -> tuple:
    """What makes two codecs number states alike: their fields' domains."""
    return ("packed",) + tuple((v.start, v.stop) if isinstance(v, range) else tuple(v) for v in codec.values)


def graph_print(ex: Exploration, packed: bool = True) -> GraphPrint:
    """The print of ``ex`` (a whole-state exploration that kept its edges).  A packed search of at
    most 64 bits a state is printed with its packed states as the numbers (``packed``; no decoding,
    no hashing)."""
    from conq.model.engines.packing import DecodedStates

    if ex.mode != "states":
        raise ValueError(f"a graph print needs the states and edges: this exploration kept {ex.mode}")
    sl = ex.state_list
    key = FINGERPRINTS
    if packed and isinstance(sl, DecodedStates) and sl.codec.total_bits <= 64:
        order = np.array(sl.ints, dtype=np.uint64)
        key = codec_key(sl.codec)
    else:
        order = np.fromiter((fingerprint(s) for s in sl), dtype=np.uint64, count=len(sl))
    parent = np.frombuffer(ex.parent, dtype=np.int64) if len(ex.parent) else np.empty(0, np.int64)
    inits = np.unique(order[parent == -1]) if len(order) else order
    e = np.frombuffer(ex.edges, dtype=np.int64).reshape(-1, 3) if len(ex.edges) else np.empty((0, 3), np.int64)
    labels = np.fromiter((fingerprint(lab) for lab in ex.labels), dtype=np.uint64, count=len(ex.labels))
    if len(e):
        with np.errstate(over="ignore"):
            edges = _mix(order[e[:, 0]] * _K1 + _mix(labels[e[:, 2]]) * _K2 + _mix(order[e[:, 1]]) * _K3)
        edges = np.unique(edges)
    else:
        edges = np.empty(0, np.uint64)
    return GraphPrint(order=order, states=np.unique(order), inits=inits, edges=edges, transitions=ex.transitions, key=key)


def first_missing(a: GraphPrint, b: GraphPrint) -> int | None:
    """The index (in a's BFS order, so with a shortest path) of the first state of a that b lacks."""
    if not len(a.order):
        return None
    missing = ~np.isin(a.order, b.states)
    idx = int(np.argmax(missing))
    return idx if missing[idx] else None


def _verdicts(ex: Exploration) -> dict[str, tuple[str, int | None]]:
    return {v.prop.name: (v.status, len(v.path) if v.path is not None else None) for v in ex.verdicts}


def _path_summary(ex: Exploration, idx: int) -> dict[str, Any]:
    path = ex.path(idx)
    m = ex.model
    return {
        "length": len(path),
        "steps": [m.format_action(a, o) for a, o, _ in path.steps],
        "state": m.view(path.last),
    }


def graph_diff(a: Exploration, b: Exploration, *, names: tuple[str, str] = ("expected", "found"),
               prints: tuple[GraphPrint | None, GraphPrint | None] = (None, None)) -> dict[str, Any]:
    """What differs between two explorations of one configuration: the counts, each property whose
    verdict changed, each witness or counterexample whose shortest length changed, and a shortest
    path (in its own graph) to the first state, in breadth-first order, that one graph has and the
    other lacks.  ``names`` label the two sides in the result; ``prints``: their graph prints if
    already made."""
    na, nb = names
    va, vb = _verdicts(a), _verdicts(b)
    verdicts, witnesses = [], []
    for name in list(va) + [n for n in vb if n not in va]:
        sa, la = va.get(name, ("absent", None))
        sb, lb = vb.get(name, ("absent", None))
        if sa != sb:
            verdicts.append({"property": name, na: sa, nb: sb})
        elif la != lb:
            witnesses.append({"property": name, "status": sa, f"{na}_length": la, f"{nb}_length": lb})
    out: dict[str, Any] = {
        "states": {na: a.states, nb: b.states},
        "transitions": {na: a.transitions, nb: b.transitions},
        "verdicts": verdicts,
        "witnesses": witnesses,
    }
    if a.complete and b.complete and a.mode == b.mode == "states":
        pa, pb = prints
        if pa is None or pb is None or pa.key != pb.key:
            pa, pb = graph_print(a, packed=False), graph_print(b, packed=False)
        out["same_graph"] = pa.same(pb)
        for side, (x, px, py) in ((f"only_{na}", (a, pa, pb)), (f"only_{nb}", (b, pb, pa))):
            idx = first_missing(px, py)
            out[side] = None if idx is None else _path_summary(x, idx)
        if out["same_graph"] is False and out[f"only_{na}"] is None and out[f"only_{nb}"] is None:
            out["edges_differ"] = True  # same states, different transitions between them
    return out


def describe(diff: dict[str, Any], names: tuple[str, str] = ("expected", "found")) -> list[str]:
    """The diff as readable lines (for a terminal or a report)."""
    na, nb = names
    lines = [f"states: {na} {diff['states'][na]:,}, {nb} {diff['states'][nb]:,}; "
             f"transitions: {na} {diff['transitions'][na]:,}, {nb} {diff['transitions'][nb]:,}"]
    for v in diff["verdicts"]:
        lines.append(f"verdict of '{v['property']}': {na} {v[na]}, {nb} {v[nb]}")
    for w in diff["witnesses"]:
        lines.append(f"'{w['property']}' ({w['status']}): shortest path {w[f'{na}_length']} steps in {na}, "
                     f"{w[f'{nb}_length']} in {nb}")
    for side, who, other in ((f"only_{na}", na, nb), (f"only_{nb}", nb, na)):
        p = diff.get(side)
        if p:
            lines.append(f"a state only {who} reaches ({p['length']} steps; {other} lacks it): " + ", ".join(p["steps"]))
    if diff.get("edges_differ"):
        lines.append("same states, different transitions between them")
    if not diff["verdicts"] and not diff["witnesses"] and diff.get("same_graph") is False:
        lines.append("no claim changed its verdict: the change is seen by the state count only")
    return lines
