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
from typing import Callable

from conq.conformance.ordered_consumption.upstream.runner import CLIENT, CLIENT_VERSION, run
from conq.conformance.ordered_consumption.upstream.workloads import Workload

__all__ = ["run_campaign"]


def run_campaign(w: Workload, seeds: list[int], out: str | Path, *, cap: float = 120.0,
                 progress: Callable[[str], None] | None = None) -> dict:
    out = Path(out)
    rows = []
    rpcs: Counter = Counter()
    faults: Counter = Counter()
    by_claim: dict = defaultdict(list)
    notes = []
    for seed in seeds:
        r = run(w, seed, out=out / "traces", cap=cap)
        s = r.summary()
        rows.append(s)
        rpcs.update(r.rpc_counts)
        faults.update({f"{rpc}:{kind}": n for (rpc, kind), n in r.fault_answers.items() if kind != "ok"})
        for d in r.divergences:
            by_claim[d.claim].append({"seed": seed, "detail": d.detail, "evidence": d.evidence,
                                      "classification": d.classification,
                                      "trace": r.trace_path, "events": len(r.recorder.events())})
        notes += [f"seed {seed}: {n}" for n in r.notes]
        if progress:
            progress(f"seed {seed}: {s['end']}, {s['rpc_total']} RPCs, {s['faults_injected']} faults, "
                     f"{len(r.divergences)} divergence(s)")
    report = {
        "client": f"{CLIENT}=={CLIENT_VERSION}", "workload": w.name, "seeds": seeds,
        "runs": len(rows), "incomplete": [r["seed"] for r in rows if r["end"].startswith("incomplete")],
        "rpc_total": sum(rpcs.values()), "rpcs": dict(sorted(rpcs.items())),
        "faults_total": sum(faults.values()), "faults": dict(sorted(faults.items())),
        "listener_calls": sum(r["listener_calls"] for r in rows),
        "validation": dict(Counter((r["validation"] or {}).get("status", "none") for r in rows)),
        "divergences": {claim: {"seeds": sorted({x["seed"] for x in xs}),
                                "smallest": min(xs, key=lambda x: x["events"])}
                        for claim, xs in sorted(by_claim.items())},
        "notes": notes, "per_seed": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    (out / "report.md").write_text(_markdown(report))
    return report


def _markdown(rep: dict) -> str:
    lines = [f"# Upstream client campaign: {rep['client']}, workload `{rep['workload']}`", "",
             f"{rep['runs']} seeds ({rep['seeds'][0]}..{rep['seeds'][-1]}), {rep['rpc_total']} RPCs, "
             f"{rep['faults_total']} injected faults, {rep['listener_calls']} listener calls; incomplete runs: "
             f"{rep['incomplete'] or 'none'}; `conq validate` of the observed logs: {rep['validation']}.", "",
             "| RPC | calls |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rep["rpcs"].items()]
    lines += ["", "## Divergences", ""]
    if not rep["divergences"]:
        lines.append("None.")
    for claim, d in rep["divergences"].items():
        s = d["smallest"]
        lines += [f"### `{claim}`", "", f"{s['classification']}; seeds: {d['seeds']}", "",
                  f"smallest: seed {s['seed']}, {s['events']} events (`{s['trace']}`), steps {s['evidence']}: "
                  f"{s['detail']}", ""]
    if rep["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in rep["notes"]]
    return "\n".join(lines) + "\n"
