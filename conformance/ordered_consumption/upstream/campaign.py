"""A campaign: one workload over several seeds, one report (``conq upstream rocketmq-python``).

Each seed is one ``runner.run`` (a fresh broker, face and worker process); its trace goes to
``OUT/traces/<workload>-seed<N>.ndjson``.  The report (``OUT/summary.json``, ``OUT/report.md``) gives
the client version, per seed how the run ended, the RPC counts, the faults injected, the listener
calls and the divergences; every divergence is grouped by claim with the seeds that reproduce it and
the smallest trace that shows it (fewest events).  Verdicts are counts: a divergence is a divergence
on any seed; a run that hit its safety cap is ``incomplete`` (exit 4 in the CLI).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

from conq.conformance.ordered_consumption.upstream.coverage import campaign_coverage, coverage_by_config
from conq.conformance.ordered_consumption.upstream.runner import CLIENT, CLIENT_VERSION, run
from conq.conformance.ordered_consumption.upstream.workloads import Workload
from conq.conformance.output_folder import OutputFolder, write_atomic

__all__ = ["aggregate", "revalidate", "run_campaign", "seed_record", "write_report"]


def seed_record(r: Any, w: Workload | None = None) -> dict:
    """What a campaign keeps of one run (``runner.RunResult``), as JSON values: its summary, the
    injected faults by ``rpc:kind``, its number of trace events and, for an accepted model-sized log,
    the coverage keys of the validation path (``coverage.path_keys``; moved out of ``validation``);
    ``coverages``: one entry per accepted log of the run (the model-sized log, or each unit of a larger
    workload: observed.validate_groups) with its unit, configuration and fields, for the coverage per
    configuration (``coverage.coverage_by_config``)."""
    s = r.summary()
    validation = dict(s["validation"] or {})
    keys = validation.pop("coverage", None)
    coverages = []
    if keys is not None:
        ms = w.model_size if w is not None else None
        coverages.append({"unit": ms.group if ms else None, "config": validation.get("config"),
                          "overrides": dict(validation.get("overrides") or {}), "keys": keys})
    if validation.get("units"):
        units = {}
        for name, u in sorted(validation["units"].items()):
            u = dict(u)
            ukeys = u.pop("coverage", None)
            if ukeys is not None:
                coverages.append({"unit": name, "config": u["config"], "overrides": u["overrides"], "keys": ukeys})
            units[name] = u
        validation["units"] = units
    return {**s, "validation": validation or None,
            "faults": {f"{rpc}:{kind}": n for (rpc, kind), n in sorted(r.fault_answers.items()) if kind != "ok"},
            "events": len(r.recorder.events()), "coverage": keys, "coverages": coverages}


def aggregate(w: Workload | list, records: list[dict]) -> dict:
    """The campaign's report from its per-seed records (``seed_record``), in seed order whatever
    order they came in (a Spark job's tasks end in any order).  ``w``: the workload, or the list of
    workloads of a campaign over several (records in workload order, then seed order); ``coverage``
    is then the first model-sized workload's and ``coverage_by_config`` has every configuration."""
    ws = list(w) if isinstance(w, (list, tuple)) else [w]
    if len(ws) > 1:
        order = {x.name: i for i, x in enumerate(ws)}
        rep = _aggregate_one(ws, sorted(records, key=lambda x: (order.get(x.get("workload"), 0), x["seed"])))
        rep["workload"] = ",".join(x.name for x in ws)
        rep["workloads"] = [x.name for x in ws]
        return rep
    return _aggregate_one(ws, sorted(records, key=lambda x: x["seed"]))


def _aggregate_one(ws: list, records: list[dict]) -> dict:
    w = ws[0]

    def label(r: dict) -> Any:
        # a seed of a campaign over several workloads is named with its workload ("faults:3")
        return f"{r.get('workload')}:{r['seed']}" if len(ws) > 1 else r["seed"]

    rpcs: Counter = Counter()
    faults: Counter = Counter()
    by_claim: dict = defaultdict(list)
    notes = []
    for rec in records:
        rpcs.update(rec["rpcs"])
        faults.update(rec["faults"])
        for d in rec["divergences"]:
            by_claim[d["claim"]].append({"seed": label(rec), "detail": d["detail"], "evidence": d["evidence"],
                                         "classification": d["classification"],
                                         "trace": rec["trace"], "events": rec["events"]})
        notes += [f"seed {rec['seed']}: {n}" for n in rec["notes"]]
    ms = next((x.model_size for x in ws if x.model_size is not None), None)
    mname = next((x.name for x in ws if x.model_size is not None), None)
    coverage = campaign_coverage([r for r in records if r.get("workload", mname) == mname],
                                 ms.config_name if ms else None, ms.overrides if ms else None)
    by_class: Counter = Counter()
    for xs in by_claim.values():
        by_class[xs[0]["classification"]] += 1
    return {
        "client": f"{CLIENT}=={CLIENT_VERSION}", "workload": w.name, "seeds": [label(r) for r in records],
        "runs": len(records), "incomplete": [label(r) for r in records if not r["end"].split("+")[0] in _ENDED],
        "validation_units": dict(Counter(f"{u}: {x['status']}" for r in records
                                         for u, x in ((r["validation"] or {}).get("units") or {}).items())),
        "shared_groups": _shared_groups(records),
        "rpc_total": sum(rpcs.values()), "rpcs": dict(sorted(rpcs.items())),
        "faults_total": sum(faults.values()), "faults": dict(sorted(faults.items())),
        "listener_calls": sum(r["listener_calls"] for r in records),
        "validation": dict(Counter((r["validation"] or {}).get("status", "none") for r in records)),
        "divergences": {claim: {"seeds": sorted({x["seed"] for x in xs}),
                                "smallest": min(xs, key=lambda x: (x["events"], x["seed"]))}
                        for claim, xs in sorted(by_claim.items())},
        "divergences_by_classification": dict(sorted(by_class.items())),
        "coverage": coverage,
        "coverage_by_config": coverage_by_config(records),
        "notes": notes, "per_seed": [{k: v for k, v in r.items() if k not in ("coverage", "coverages")} for r in records],
    }


def _shared_groups(records: list[dict]) -> dict:
    """The units of groups shared by several push consumers (issue 19, PF2 and the exclusive groups):
    how many, their statuses, and what they exercised of the coupling (observed.group_log's counts:
    deliveries to another consumer than the unit's previous one, deliveries of a copy to another
    consumer than its previous delivery -- the cross-consumer redelivery path -- and the process
    queues dropped or created by reassignment)."""
    out: dict = {"units": 0, "status": Counter(), "handoffs": 0, "cross_redeliveries": 0,
                 "units_with_cross_redelivery": 0, "reassignments": 0}
    for r in records:
        for u in ((r["validation"] or {}).get("units") or {}).values():
            if (u.get("overrides") or {}).get("consumers", 1) < 2:
                continue
            out["units"] += 1
            out["status"][u["status"]] += 1
            out["handoffs"] += u.get("handoffs", 0)
            out["cross_redeliveries"] += u.get("cross_redeliveries", 0)
            out["units_with_cross_redelivery"] += bool(u.get("cross_redeliveries"))
            out["reassignments"] += u.get("reassignments", 0)
    out["status"] = dict(sorted(out["status"].items()))
    return out


#: how a run ends with a verdict (else it hit its safety cap or failed: ``incomplete``)
_ENDED = ("settled", "stall", "worker-exited")


def write_report(out: str | Path, report: dict) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "summary.json", json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    write_atomic(out / "report.md", _markdown(report))


def run_campaign(w: Workload | list, seeds: list[int], out: str | Path, *, cap: float = 120.0,
                 progress: Callable[[str], None] | None = None) -> dict:
    """Every seed of every workload (``w`` one or a list), one report (``aggregate``).  The output
    folder ``out`` is written the one way (conformance/output_folder.py): refused before any run
    if it holds anything conq did not write (:class:`OutputRefused`), staged, and replaced as a
    whole at the end, so an interrupted campaign leaves the previous output as it was."""
    ws = list(w) if isinstance(w, (list, tuple)) else [w]
    records = []
    with OutputFolder(out, command="conq upstream", option="--out", replace=True) as folder:
        staging, final = folder.staging, folder.final
        for x in ws:
            for seed in seeds:
                r = run(x, seed, out=staging / "traces", cap=cap)
                rec = seed_record(r, x)
                records.append(rec)
                if progress:
                    progress(f"{x.name} seed {seed}: {rec['end']}, {rec['rpc_total']} RPCs, {rec['faults_injected']} "
                             f"faults, {len(rec['divergences'])} divergence(s), validation "
                             f"{(rec['validation'] or {}).get('status')}")
        # the records name the traces where they will be once the folder is published
        records = json.loads(json.dumps(records, default=str).replace(json.dumps(str(staging))[1:-1],
                                                                      json.dumps(str(final))[1:-1]))
        report = aggregate(ws if len(ws) > 1 else ws[0], records)
        write_report(staging, report)
    return report


def revalidate(campaign: str | Path, out: str | Path) -> dict:
    """The units of an earlier campaign's larger runs validated again with today's mapping, from the wire
    traces it wrote (``observed.recorded_events``; the runner's ``empty_known`` rule): how many unit
    verdicts (status, accepted events, variant) are the same as the campaign's ``summary.json`` says,
    which differ, and the new ``shared_groups`` counts.  Model-sized runs are left out (their log is
    the observed one the campaign wrote)."""
    from conq.conformance.ordered_consumption.upstream.observed import recorded_events, validate_groups
    from conq.conformance.ordered_consumption.upstream.workloads import workload

    campaign = Path(campaign)
    old = json.loads((campaign / "summary.json").read_text())

    def key(u: dict) -> tuple:
        return (u["status"], u.get("accepted"), u.get("events"), (u.get("variant") or {}).get("name"))

    same, different, records = 0, [], []
    for r in old["per_seed"]:
        units = ((r.get("validation") or {}).get("units")) or {}
        if not units:
            continue
        w = workload(r["workload"])
        v = validate_groups(w, recorded_events(campaign / "traces" / f"{w.name}-seed{r['seed']}.ndjson"), out,
                            f"{w.name}-seed{r['seed']}",
                            empty_known="not-found" not in w.faults.get("receive_message", {}))
        for name, u in sorted(units.items()):
            if key(u) == key(v["units"][name]):
                same += 1
            else:
                different.append({"workload": w.name, "seed": r["seed"], "unit": name, "was": key(u),
                                  "now": key(v["units"][name])})
        records.append({"validation": v})
    return {"same": same, "different": different, "shared_groups": _shared_groups(records)}


def _markdown(rep: dict) -> str:
    lines = [f"# Upstream client campaign: {rep['client']}, workload `{rep['workload']}`", "",
             f"{rep['runs']} seeds ({rep['seeds'][0]}..{rep['seeds'][-1]}), {rep['rpc_total']} RPCs, "
             f"{rep['faults_total']} injected faults, {rep['listener_calls']} listener calls; incomplete runs: "
             f"{rep['incomplete'] or 'none'}; `conq validate` of the observed logs: {rep['validation']}.", "",
             "| RPC | calls |", "|---|---|"]
    if rep.get("spark"):
        sp = rep["spark"]
        lines[2:2] = [f"On Spark `{sp['master']}`: {sp['tasks']} tasks, job {sp['job_seconds']} s, {sp['seconds']} s in all; "
                      f"Parquet tables {', '.join(f'`{t}/`' for t in sp['tables'])}.", ""]
    lines += [f"| {k} | {v} |" for k, v in rep["rpcs"].items()]
    lines += ["", "## Divergences", ""]
    if not rep["divergences"]:
        lines += ["None.", ""]
    else:
        lines += ["Claims diverging, by classification: "
                  + "; ".join(f"{c}: {n}" for c, n in rep["divergences_by_classification"].items()), ""]
    for claim, d in rep["divergences"].items():
        s = d["smallest"]
        lines += [f"### `{claim}`", "", f"{s['classification']}; seeds: {d['seeds']}", "",
                  f"smallest: seed {s['seed']}, {s['events']} events (`{s['trace']}`), steps {s['evidence']}: "
                  f"{s['detail']}", ""]
    lines += _coverage_lines(rep.get("coverage"))
    lines += _by_config_lines(rep.get("coverage_by_config") or [], rep.get("validation_units") or {})
    sg = rep.get("shared_groups") or {}
    if sg.get("units"):
        lines += ["## Groups of several consumers", "",
                  f"{sg['units']} units of groups shared by several push consumers ({sg['status']}): "
                  f"{sg['handoffs']} deliveries to another consumer than the unit's previous one, "
                  f"{sg['cross_redeliveries']} redeliveries of a copy to another consumer than its previous delivery "
                  f"(in {sg['units_with_cross_redelivery']} units), {sg['reassignments']} process queues dropped or "
                  "created by reassignment.", ""]
    if rep["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in rep["notes"]]
    return "\n".join(lines) + "\n"


def _coverage_lines(cov: dict | None) -> list[str]:
    lines = ["## Model coverage", ""]
    if cov is None:
        return lines + ["Not model-sized: the runs are held to the runner's claims only, no model path.", ""]
    st, tr = cov["states"], cov["transitions"]
    graph = "" if cov["graph_complete"] else " (the explorer's bound cut the graph: no coverage truth)"
    lines += [f"The validation paths of {cov['accepted_logs']} accepted logs (of {cov['logs']} runs) against the "
              f"explored call-level graph of `{cov['config']}`"
              + (f" with {json.dumps(cov['overrides'], sort_keys=True)}" if cov["overrides"] else "") + f"{graph}: "
              f"{st['covered']} / {st['total']} states, {tr['covered']} / {tr['total']} transitions "
              f"(keys outside the graph: {cov['outside_graph']['states']} states, "
              f"{cov['outside_graph']['transitions']} transitions).", "",
              "| action | transitions covered | of | |", "|---|---|---|---|"]
    for a, row in cov["by_action"].items():
        pct = f"{100 * row['covered'] / row['total']:.1f}%" if row["total"] else ""
        lines.append(f"| `{a}` | {row['covered']} | {row['total']} | {pct} |")
    lines += ["", "| kind (action and answer) | transitions covered | of |", "|---|---|---|"]
    lines += [f"| `{a}` | {row['covered']} | {row['total']} |" for a, row in cov["by_kind"].items()]
    lines += ["", f"Actions never taken: {', '.join(f'`{a}`' for a in cov['uncovered_actions']) or 'none'}; "
              f"kinds never taken: {', '.join(f'`{a}`' for a in cov['uncovered_kinds']) or 'none'}.", ""]
    return lines


def _by_config_lines(covs: list[dict], units: dict) -> list[str]:
    lines = ["## Model coverage per configuration", ""]
    if units:
        lines += ["Validated units of the larger workloads (observed.py, \"larger workloads\"), runs per unit and "
                  "status: " + "; ".join(f"{k} {n}" for k, n in sorted(units.items())), ""]
    if not covs:
        return lines + ["No accepted log.", ""]
    lines += ["| configuration | fields | units (workloads) | accepted logs | states covered / total | "
              "transitions covered / total | kinds taken |", "|---|---|---|---|---|---|---|"]
    for c in covs:
        st, tr = c["states"], c["transitions"]
        tot = (lambda x: "not explored" if x["total"] is None else f"{x['total']:,}")
        cut = "" if c["graph_complete"] in (True, None) else " (graph cut)"
        kinds = ", ".join(f"`{k}` {v['covered']}" for k, v in c["by_kind"].items() if v["covered"])
        lines.append(f"| `{c['config']}` | `{json.dumps(c['overrides'], sort_keys=True)}` | "
                     f"{', '.join(str(u) for u in c['units'])} ({', '.join(c['workloads'])}) | {c['accepted_logs']} | "
                     f"{st['covered']} / {tot(st)}{cut} | {tr['covered']} / {tot(tr)}{cut} | {kinds} |")
    return lines + [""]
