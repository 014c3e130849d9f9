"""Coverage and estimates: how close a campaign came to exhaustive.  Against the explorer's bounded
graph when it can be explored (states, transitions, symmetry classes, what was missed and why), and
always by the fingerprints alone: the growth curve and the Chao2 estimate of the unseen states
(conformance/coverage_estimate.py holds the arithmetic); the targets beyond the explorer, which
every system declares (``System.beyond_explorer``); the same figures without Spark
(:func:`incidence_in_process`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from conq.model.engines.changes import jsonable

from .params import BLOCK, ReplayParams, ReplaySummary, target_model
from .rows import CANONICAL, _replay


def incidence_in_process(params, traces: int | None = None) -> tuple[dict[str, dict[int, int]], int, list[tuple[int, int]]]:
    """The replay's coverage without Spark (one process, the same per-block work as an executor):
    incidence frequency counts per kind (``state``, ``transition``), the number of sampling units,
    and the growth points of distinct states.  ``traces`` replays only the first ones."""
    from dataclasses import replace

    from ..coverage_estimate import growth_at_powers_of_two, units_in

    p = replace(params, traces=traces if traces is not None else params.traces)
    blocks = range((p.traces + BLOCK - 1) // BLOCK)
    incid: dict[str, Counter] = {"state": Counter(), "transition": Counter()}
    first_state: Counter = Counter()
    for row in _replay(p, blocks, per_block=False):
        if row[0] == "cover" and row[1] in incid:
            incid[row[1]][row[4]] += 1
            if row[1] == "state":
                first_state[row[3]] += 1
    freqs = {k: dict(sorted(v.items())) for k, v in incid.items()}
    return freqs, units_in(p.mode, p.traces, BLOCK), growth_at_powers_of_two(first_state.items(), p.traces)


def beyond_explorer() -> dict[tuple[str, str | None, str], str]:
    """Replay targets whose call-level graph is beyond what the replay explores for its coverage
    truth (more than the graph budget of 200,000 call-level states; measured on the project's
    2-core machine, figures and commands in spec/replay-coverage.md), as every system declares them
    (``System.beyond_explorer``): (model, configuration, overrides as JSON) -> why.  ``conq replay``
    skips the graph for these by itself (as ``--no-graph``) and estimates the unseen states
    instead; any other target is explored up to the budget."""
    from .. import systems

    return {(s.name, config, overrides): why for s in systems.systems("beyond_explorer")
            for (config, overrides), why in s.beyond_explorer.items()}


def thread_beyond_explorer() -> dict[tuple[str, str, str], str]:
    """The same at thread level (``--level thread``): (model, thread-level configuration, overrides
    as JSON) -> why (``System.thread_beyond_explorer``; spec/replay-coverage.md)."""
    from .. import systems

    return {(s.name, config, overrides): why for s in systems.systems("thread_beyond_explorer")
            for (config, overrides), why in s.thread_beyond_explorer.items()}


def graph_out_of_reach(params: ReplayParams) -> str | None:
    """Why the exhaustive graph of ``params``' target is not explored, or None.  Targets are
    compared by their resolved configuration (``--set recoveries=3`` from the command line is the
    string "3"; the configuration field is the int)."""
    from conq.model.kernel import config_dict

    from ..views import conformance_model

    if params.level == "thread":
        mine = config_dict(target_model(params).config)
        for (model, config, overrides), why in thread_beyond_explorer().items():
            if model != params.model:
                continue
            if config_dict(target_model(ReplayParams(model=model, config_name=config, level="thread",
                                                     overrides=json.loads(overrides))).config) == mine:
                return why
        return None
    mine = None
    for (model, config, overrides), why in beyond_explorer().items():
        if model != params.model:
            continue
        if mine is None:
            mine = config_dict(conformance_model(params.model, params.config_name, params.overrides).config)
        if config_dict(conformance_model(model, config, json.loads(overrides)).config) == mine:
            return why
    return None


def _estimate(params: ReplayParams, summary: ReplaySummary, growth: list[tuple[int, int]], incid) -> None:
    """The campaign's coverage from fingerprints alone: growth at powers of two, Chao2 estimates of
    the states and transitions the walks can reach, and the rarest kinds of states
    (:mod:`.coverage_estimate`)."""
    from ..coverage_estimate import chao2, growth_at_powers_of_two, rare_classes, sample_unit, units_in

    summary.unit = sample_unit(params.mode, BLOCK)
    summary.units = units_in(params.mode, summary.traces, BLOCK)
    summary.growth_points = [list(x) for x in growth_at_powers_of_two(growth, summary.traces)]
    freq: dict[str, dict[int, int]] = {"state": {}, "transition": {}}
    classes = []
    for r in incid:
        k, u, c = r["kind"], int(r["units"] or 0), int(r["c"])
        freq[k][u] = freq[k].get(u, 0) + c
        if k == "state":
            classes.append((r["class"], u, c))
    if summary.units >= 1 and summary.traces:
        summary.state_estimate = chao2(freq["state"], summary.units).as_dict()
        summary.transition_estimate = chao2(freq["transition"], summary.units).as_dict()
    summary.rare_classes = rare_classes(classes)


def _canonical_keys(staging: Path) -> set[int]:
    """The symmetry classes the replay met: the ``canonical_state`` keys of ``coverage/``."""
    import pyarrow.parquet as pq

    t = pq.read_table(staging / "coverage", columns=["kind", "key"], filters=[("kind", "=", CANONICAL)])
    return {int(k) for k in t.column("key").to_pylist()}


def _compare_symmetric(model, summary: ReplaySummary, states: list, canon_keys: set[int], max_states: int | None) -> str:
    """Coverage by symmetry class: the classes of the call-level graph's states (their images under
    the model's ``canonical``), the share of them the replay met, and the model's own symmetric graph
    (``explore(symmetry=True)``, whose states are canonical forms: the manifest's symmetric count).
    Returns a note for ``missed`` (empty when every class met is one of the symmetric graph's)."""
    from conq.model.engines.explorer import explore
    from conq.model.engines.fingerprint import fingerprint

    base = getattr(model, "base", model)
    image = {fingerprint(base.canonical(s)) for s in states}
    summary.graph_states_canonical = len(image)
    summary.state_fraction_canonical = len(canon_keys & image) / len(image) if image else 1.0
    sym = explore(base, liveness=False, symmetry=True, max_states=max_states)
    if not sym.complete:
        return f"the symmetric graph has more than {max_states:,} states; not compared"
    sym_keys = {fingerprint(s) for s in sym.state_list}
    summary.symmetric_graph_states = len(sym_keys)
    notes = []
    if len(canon_keys & image) < len(image):
        notes.append(f"{len(image) - len(canon_keys & image)} symmetry classes of call-level states not reached")
    if canon_keys - sym_keys:
        notes.append(f"{len(canon_keys - sym_keys)} symmetry classes reached that the symmetric graph does not know "
                     "(canonical form or model/implementation drift?)")
    return "; ".join(notes)


def _compare_with_graph(model, summary: ReplaySummary, state_keys: set[int], trans_keys: set[int], length: int,
                        max_states: int | None = 200_000, canon_keys: set[int] | None = None) -> None:
    from conq.model.engines.explorer import explore
    from conq.model.engines.fingerprint import fingerprint

    ex = explore(model, liveness=False, keep_edges=True, max_states=max_states)
    if not ex.complete:
        summary.graph = f"not explored: the configuration has more than {max_states:,} call-level states"
        summary.missed = "the configuration is too large to explore; no coverage truth"
        return
    summary.graph = "explored"
    states = ex.state_list
    fps = [fingerprint(s) for s in states]
    all_states = {h: i for i, h in enumerate(fps)}
    e, labels = ex.edges, ex.labels
    all_trans = {fingerprint((fps[e[k]], labels[e[k + 2]], fps[e[k + 1]])) for k in range(0, len(e), 3)}
    summary.graph_states = len(all_states)
    summary.graph_transitions = len(all_trans)
    hit_s = len(state_keys & all_states.keys())
    hit_t = len(trans_keys & all_trans)
    summary.state_fraction = hit_s / len(all_states) if all_states else 1.0
    summary.transition_fraction = hit_t / len(all_trans) if all_trans else 1.0
    extra = len(state_keys - all_states.keys())
    notes = []
    missed_states = [i for h, i in all_states.items() if h not in state_keys]
    depth = _depths(ex)
    # the population the walks sample from: states no deeper than the trace length
    summary.graph_states_within_length = sum(1 for d in depth if d <= length)
    if missed_states:
        # BFS depth of each missed state: states deeper than the trace length cannot be reached.
        too_deep = sum(1 for i in missed_states if depth[i] > length)
        notes.append(
            f"{len(missed_states)} states not reached ({too_deep} lie deeper than the trace length {length}"
            + ("" if too_deep == len(missed_states) else "; the others need rarer action sequences than the walks drew: "
               "--mode coverage aims at them") + "); "
            f"e.g. {json.dumps(jsonable(model.view(states[missed_states[0]])), separators=(',', ':'))}"  # whole, as JSON
        )
    if hit_t < len(all_trans):
        notes.append(f"{len(all_trans) - hit_t} transitions not taken")
    if extra:
        notes.append(f"{extra} states reached that the explorer does not know (model/implementation drift?)")
    if canon_keys is not None:
        note = _compare_symmetric(model, summary, states, canon_keys, max_states)
        if note:
            notes.append(note)
    summary.missed = "; ".join(notes)


def _depths(ex) -> list[int]:
    depth = [0] * len(ex.state_list)
    e = ex.edges
    seen = [False] * len(ex.state_list)
    seen[0] = True
    frontier = [0]
    adj: dict[int, list[int]] = {}
    for k in range(0, len(e), 3):
        adj.setdefault(e[k], []).append(e[k + 1])
    d = 0
    while frontier:
        d += 1
        nxt = []
        for u in frontier:
            for v in adj.get(u, ()):
                if not seen[v]:
                    seen[v] = True
                    depth[v] = d
                    nxt.append(v)
        frontier = nxt
    return depth
