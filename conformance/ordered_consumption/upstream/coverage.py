"""Which model states and transitions an upstream campaign exercised (issue 19, "model coverage").

``conq validate`` explains an accepted observed log by a model path: the logged steps plus the hidden
ones it searched between them (``conformance/validate.py``: the witness, a shortest such path).  The
states and transitions of that path are what the run is known to have exercised *in the model*; a
campaign's coverage is their union over its accepted logs, counted against the explored graph of the
configuration the logs were validated against (the call-level view, as ``conq replay`` counts it:
``conformance/spark_replay.py`` ``_compare_with_graph``):

* a state's key is its stable fingerprint (``model/engines/fingerprint.py``), a transition's the
  fingerprint of ``(fp(state), (action, observation), fp(next state))`` -- the same keys as replay;
* coverage is reported as covered / total states and transitions, and covered / total transitions per
  action name (the call-level action: ``receive_answer``, ``dispatch``, ...) and per kind (the name with
  the answer: ``ack_answer lost``, ``receive_answer error``: ``label_of``);
* a key the graph does not know (model or explorer drift) is counted apart (``outside_graph``), never
  as covered.

The witness is one explanation of the log (the shortest); another may exist, so the figures are what
the campaign is *shown* to exercise.  A log accepted only by a variant (``model-accepts-log-as-variant``)
or rejected is not counted: its path is not a behaviour of the campaign's configuration.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable

__all__ = ["EXPLORE_MAX_MESSAGES", "GRAPH_MAX_STATES", "campaign_coverage", "coverage_by_config", "coverage_rows",
           "graph_of", "label_of", "path_keys"]

#: the explorer's bound for the coverage truth (a count); the model-sized configurations have
#: 2,155 to 12,940 call-level states (spec/ordered-consumption.md, "The upstream client")
GRAPH_MAX_STATES = 200_000


def path_keys(steps: list, start: Any) -> dict:
    """The coverage keys of a validation path (``Validation.path``, ``Validation.start``): the states
    it visits and the transitions it takes, each transition with its kind (``label_of``).  Steps that are
    no model transition (a logged "not enabled" answer: ``before is after``, observation REJECTED) are
    left out.  Keys are decimal strings (JSON and Parquet keep 64-bit values exactly that way)."""
    from conq.model.engines.fingerprint import fingerprint

    from conq.conformance.adapters import REJECTED

    fps: dict[int, int] = {}

    def fp(s: Any) -> int:
        k = id(s)
        if k not in fps:
            fps[k] = fingerprint(s)
        return fps[k]

    states = {fp(start)} if start is not None else set()
    trans: dict[str, str] = {}
    for st in steps:
        if st.before is None or st.after is None or st.observation == REJECTED:
            continue
        states.add(fp(st.before))
        states.add(fp(st.after))
        trans[str(fingerprint((fp(st.before), (st.action, st.observation), fp(st.after))))] = label_of(st.action)
    return {"states": sorted(str(h) for h in states), "transitions": sorted([k, a] for k, a in trans.items())}


def label_of(action: tuple) -> str:
    """The kind of a transition: the action's name and its parameters that are not indexes (the answer
    of a call-level action: ``ack_answer lost``, ``receive_answer error``, ``listener_returns fail``)."""
    return " ".join([str(action[0])] + [str(x) for x in action[1:] if not isinstance(x, int)])


_GRAPHS: dict[str, dict] = {}


def graph_of(config_name: str, overrides: dict | None = None, max_states: int = GRAPH_MAX_STATES) -> dict:
    """The explored call-level graph of ``ordered-consumption`` / ``config_name`` with ``overrides``:
    ``states`` (set of keys), ``transitions`` (key -> its ``label_of``), ``complete`` (False: the bound cut
    the search, no coverage truth).  Memoised per process (the same configuration for every seed)."""
    key = json.dumps([config_name, overrides or {}, max_states], sort_keys=True, default=str)
    got = _GRAPHS.get(key)
    if got is None:
        from conq.model.engines.explorer import explore
        from conq.model.engines.fingerprint import fingerprint

        from conq.conformance.views import conformance_model

        model = conformance_model("ordered-consumption", config_name, dict(overrides or {}))
        ex = explore(model, liveness=False, keep_edges=True, max_states=max_states)
        fps = [fingerprint(s) for s in ex.state_list]
        e, labels = ex.edges, ex.labels
        trans = {str(fingerprint((fps[e[k]], labels[e[k + 2]], fps[e[k + 1]]))): label_of(labels[e[k + 2]][0])
                 for k in range(0, len(e), 3)}
        got = _GRAPHS[key] = {"states": {str(h) for h in fps}, "transitions": trans, "complete": ex.complete}
    return got


def campaign_coverage(records: Iterable[dict], config_name: str | None, overrides: dict | None, *,
                      explore: bool = True) -> dict | None:
    """The campaign's coverage (module docstring) from its per-seed records (``campaign.seed_record``:
    ``record["coverage"]`` is ``path_keys`` of an accepted log, else None).  None when the workload
    is not model-sized.  ``explore=False``: the graph is not explored (too large for the bound), so
    only the covered counts are given (totals None)."""
    if config_name is None:
        return None
    records = list(records)
    seen_states: Counter = Counter()  # key -> seeds whose path met it
    seen_trans: Counter = Counter()
    action_of: dict[str, str] = {}
    logs = 0
    for r in records:
        keys = r.get("coverage")
        if not keys:
            continue
        logs += 1
        seen_states.update(set(keys["states"]))
        for k, a in keys["transitions"]:
            seen_trans[k] += 1
            action_of[k] = a
    if not explore:
        return _unexplored(config_name, overrides, logs, len(records), seen_states, seen_trans, action_of)
    g = graph_of(config_name, overrides)
    by_action: dict[str, dict[str, int]] = {}
    by_kind: dict[str, dict[str, int]] = {}
    for k, label in g["transitions"].items():
        for table, name in ((by_action, label.split(" ", 1)[0]), (by_kind, label)):
            row = table.setdefault(name, {"covered": 0, "total": 0})
            row["total"] += 1
            row["covered"] += k in seen_trans
    states_cov = sum(1 for k in seen_states if k in g["states"])
    trans_cov = sum(1 for k in seen_trans if k in g["transitions"])
    return {
        "config": config_name, "overrides": dict(overrides or {}), "graph_complete": g["complete"],
        "accepted_logs": logs, "logs": len(records),
        "states": {"covered": states_cov, "total": len(g["states"])},
        "transitions": {"covered": trans_cov, "total": len(g["transitions"])},
        "by_action": dict(sorted(by_action.items())),
        "by_kind": dict(sorted(by_kind.items())),
        "uncovered_actions": sorted(a for a, row in by_action.items() if row["covered"] == 0),
        "uncovered_kinds": sorted(a for a, row in by_kind.items() if row["covered"] == 0),
        "outside_graph": {"states": sum(1 for k in seen_states if k not in g["states"]),
                          "transitions": sum(1 for k in seen_trans if k not in g["transitions"])},
    }


def _unexplored(config_name: str, overrides: dict | None, logs: int, n: int, seen_states: Counter,
                seen_trans: Counter, action_of: dict) -> dict:
    by_action: dict[str, dict] = {}
    by_kind: dict[str, dict] = {}
    for k in seen_trans:
        label = action_of[k]
        for table, name in ((by_action, label.split(" ", 1)[0]), (by_kind, label)):
            table.setdefault(name, {"covered": 0, "total": None})["covered"] += 1
    return {"config": config_name, "overrides": dict(overrides or {}), "graph_complete": None,
            "accepted_logs": logs, "logs": n,
            "states": {"covered": len(seen_states), "total": None},
            "transitions": {"covered": len(seen_trans), "total": None},
            "by_action": dict(sorted(by_action.items())), "by_kind": dict(sorted(by_kind.items())),
            "uncovered_actions": None, "uncovered_kinds": None, "outside_graph": None}


#: a configuration's graph is explored for the totals only when it holds at most this many messages:
#: the model-sized configurations (two messages: 2,155 to 12,940 call-level states) are; a unit of a
#: larger workload is not (one FIFO message group of 4 copies under server faults passes 200,000
#: states: ``graph_of`` cut it there after 41 s on 2 loaded cores, and so does the 6-copy standard
#: unit of the fault-free ``all`` run, after 55 s; measured for issue 19)
EXPLORE_MAX_MESSAGES = 2


def coverage_by_config(records: Iterable[dict]) -> list[dict]:
    """A campaign's coverage per configuration (issue 19: several workloads, several graphs): the
    records' ``coverages`` entries (``campaign.seed_record``: one per accepted log, with its unit,
    configuration and fields) grouped by configuration and fields, each group counted as
    ``campaign_coverage`` counts one configuration, with the units and workloads it came from.  A
    configuration with more than ``EXPLORE_MAX_MESSAGES`` messages is not explored: covered counts only."""
    groups: dict[str, dict] = {}
    for r in records:
        for e in r.get("coverages") or ():
            key = json.dumps([e["config"], e["overrides"]], sort_keys=True, default=str)
            g = groups.setdefault(key, {"config": e["config"], "overrides": e["overrides"], "records": [],
                                        "units": set(), "workloads": set()})
            g["records"].append({"seed": r["seed"], "coverage": e["keys"]})
            g["units"].add(e["unit"])
            g["workloads"].add(r.get("workload"))
    out = []
    for key in sorted(groups):
        g = groups[key]
        messages = len((g["overrides"] or {}).get("msg_queue") or (0, 0))
        cov = campaign_coverage(g["records"], g["config"], g["overrides"], explore=messages <= EXPLORE_MAX_MESSAGES)
        out.append({**cov, "units": sorted(g["units"]), "workloads": sorted(str(w) for w in g["workloads"])})
    return out


def coverage_rows(records: Iterable[dict], config_name: str | None, overrides: dict | None) -> list[dict]:
    """One row per element of the graph (and per covered key outside it): kind, key, action and label
    (a transition's action name and ``label_of``; None for a state), in_graph, seeds (how many seeds' paths met it), first_seed -- the Parquet ``coverage``
    table, from which covered / total per kind and action is one query."""
    if config_name is None:
        return []
    g = graph_of(config_name, overrides)
    seeds: dict[tuple, list] = {}
    for r in records:
        keys = r.get("coverage")
        if not keys:
            continue
        for k in keys["states"]:
            seeds.setdefault(("state", k, None), []).append(r["seed"])
        for k, a in keys["transitions"]:
            seeds.setdefault(("transition", k, a), []).append(r["seed"])
    rows = []
    universe = [("state", k, None) for k in sorted(g["states"])] + \
               [("transition", k, a) for k, a in sorted(g["transitions"].items())]
    known = set(universe)
    universe += sorted((x for x in seeds if x not in known), key=lambda x: (x[0], x[1]))
    for kind, key, action in universe:
        got = seeds.get((kind, key, action), [])
        rows.append({"kind": kind, "key": key, "action": action and action.split(" ", 1)[0], "label": action,
                     "in_graph": (kind, key, action) in known,
                     "seeds": len(set(got)), "first_seed": min(got) if got else None})
    return rows
