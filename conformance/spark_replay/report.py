"""The campaign's report: ``summary.json``, ``growth.parquet``, ``estimate.parquet``, the coverage
growth plot and ``report.md`` (coverage, how close to exhaustive, the violations with their
minimised traces and the command that replays each alone).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from ..coverage_estimate import chao2_verdict
from .params import ReplayParams, ReplaySummary, _replay_command


def _write_outputs(directory: Path, s: ReplaySummary, growth: list[tuple[int, int]]) -> None:
    data = asdict(s)
    (directory / "summary.json").write_text(json.dumps(data, indent=2, default=str))
    _write_small_tables(directory, s)
    png = directory / "coverage-growth.png"
    xs, ys, total = [], [], 0
    for idx, c in growth:
        total += c
        xs.append(idx + 1)
        ys.append(total)
    est = s.state_estimate
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        ax.step(xs or [0], ys or [0], where="post", label="distinct states seen")
        if s.growth_points:
            ax.plot([p[0] for p in s.growth_points], [p[1] for p in s.growth_points], "o", ms=3, color="C0")
        if s.graph_states:
            ax.axhline(s.graph_states, linestyle="--", color="grey", label=f"reachable states ({s.graph_states:,})")
        if est and est["estimate"] > est["observed"]:
            ax.axhline(est["estimate"], linestyle=":", color="C1", label=f"Chao2 estimate ({est['estimate']:,.0f})")
            ax.axhspan(est["low"], est["high"], color="C1", alpha=0.15, label=f"{int(round(100 * est['conf']))}% CI")
        ax.legend(loc="lower right", fontsize="small")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("traces replayed")
        ax.set_ylabel("distinct model states (fingerprints)")
        ax.set_title(f"{s.params['model']}: coverage growth")
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        plt.close(fig)
    except Exception as e:  # the report stays useful without the picture
        png = None
        print(f"warning: no coverage plot ({e})", file=sys.stderr)
    lines = [
        f"# conq replay: {s.params['model']}",
        "",
        f"`{_replay_command(ReplayParams(**{k: v for k, v in s.params.items()}))}` on `{s.master}` ({s.partitions} partitions)",
        "",
        "Coverage is counted on the call-level view (the calls a driver makes and what it observes, "
        "conformance/<system>/): its states are not the model check's states of the same configuration.",
        "",
        "| traces | steps | diverged | seconds | call-level states covered | call-level transitions covered |",
        "|---|---|---|---|---|---|",
        f"| {s.traces:,} | {s.steps:,} | {s.diverged:,} | {s.seconds} | {s.states_covered:,}"
        + (f" of {s.graph_states:,} ({100 * s.state_fraction:.1f}%)" if s.graph_states else "")
        + f" | {s.transitions_covered:,}"
        + (f" of {s.graph_transitions:,} ({100 * s.transition_fraction:.1f}%)" if s.graph_transitions else "")
        + " |",
        "",
    ]
    if s.missed:
        lines += [f"Not covered: {s.missed}", ""]
    if s.states_covered_canonical is not None:
        line = f"Symmetry classes (--symmetry, the model's canonical form): {s.states_covered_canonical:,} seen"
        if s.graph_states_canonical:
            line += (f" of the {s.graph_states_canonical:,} classes of the call-level graph's states "
                     f"({100 * s.state_fraction_canonical:.1f}%)")
        if s.symmetric_graph_states:
            line += f"; the model's symmetric graph has {s.symmetric_graph_states:,} states (call steps and the internal steps between them)"
        lines += [line + ".", ""]
    lines += _closeness_lines(s)
    if png is not None:
        lines += ["![coverage growth](coverage-growth.png)", ""]
    lines += [f"Actions covered: {', '.join(s.actions_covered)}", "", f"Properties witnessed: {', '.join(s.properties_witnessed) or 'none'}", ""]
    lines += [f"Requirements witnessed: {', '.join(s.requirements_witnessed) or 'none'}", ""]
    if s.violations:
        lines += ["## Violations", ""]
        for v in s.violations:
            lines += [f"### trace {v['index']} (seed {v['seed']})", "", f"{v['divergence']}", ""]
            if v.get("minimised"):
                lines += ["minimised actions:", "", "```json", v["minimised"], "```", ""]
            lines += ["replay alone:", "", "```sh", v["replay"], "```", ""]
    (directory / "report.md").write_text("\n".join(lines))


def _write_small_tables(directory: Path, s: ReplaySummary) -> None:
    """``growth.parquet`` (traces, distinct states) and ``estimate.parquet`` (one row per kind)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = s.growth_points
    pq.write_table(pa.table({"traces": pa.array([p[0] for p in g], pa.int64()),
                             "distinct_states": pa.array([p[1] for p in g], pa.int64())}), directory / "growth.parquet")
    rows = [dict(kind=k, unit=s.unit, **e) for k, e in (("state", s.state_estimate), ("transition", s.transition_estimate)) if e]
    if rows:
        pq.write_table(pa.Table.from_pylist(rows), directory / "estimate.parquet")


def _closeness_lines(s: ReplaySummary) -> list[str]:
    """The report's section on how close to exhaustive the campaign came."""
    est, tr = s.state_estimate, s.transition_estimate
    if not est:
        return []
    pct = int(round(100 * est["conf"]))
    lines = ["## How close to exhaustive", ""]
    graph = ("the exhaustive graph: " + (f"{s.graph_states:,} reachable states, {s.graph_states_within_length:,} within "
                                         f"{s.params['length']} steps" if s.graph_states else s.graph or "not explored"))
    lines += [f"Coverage is counted by stable state fingerprints; {graph}. Unseen remainder: bias-corrected Chao2 over "
              f"incidence counts, the sampling unit being one {s.unit} ({s.units:,} units"
              + ("; prefixes are enumerated, not sampled, so the estimate is indicative only" if s.params.get("mode") == "exhaustive" else "")
              + ").", ""]
    lines += [f"| | seen | met in 1 unit (Q1) | in 2 (Q2) | Chao2 estimate | {pct}% CI | seen / estimate | seen / upper bound | sample coverage |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, e in (("states", est), ("transitions", tr)):
        if e:
            lines.append(f"| {name} | {e['observed']:,} | {e['q1']:,} | {e['q2']:,} | {e['estimate']:,.1f} | "
                         f"{e['low']:,.1f} - {e['high']:,.1f} | {100 * e['completeness']:.1f}% | {100 * e['completeness_low']:.1f}% | "
                         f"{100 * e['sample_coverage']:.1f}% |")
    lines.append("")
    lines += ["Sample coverage: the estimated share of what one more unit would meet that was already seen. "
              "Chao2 is a lower bound of the states the walks can reach (exact only when the unseen states are as easy "
              "to reach as those seen once or twice), so seen / estimate is an upper bound of how close the campaign came.", ""]
    if est["q1"] > est["observed"] / 2:
        lines += [f"**Far from saturation**: {est['q1']:,} of the {est['observed']:,} states seen were met in one unit only; "
                  "the estimate is then a weak lower bound and the true remainder may be many times larger "
                  "(measured: recovery-deferral/reference with 3 recoveries, 1,024 traces, estimated 5,493 of 54,116). "
                  "Replay more traces, or longer ones.", ""]
    if s.graph_states_within_length:
        # an interval that missed the truth is said to have missed it, by how much (not a neutral fact)
        verdict = chao2_verdict(est, s.graph_states_within_length)["verdict"]
        lines += [f"Check against the graph: {s.graph_states_within_length:,} states lie within {s.params['length']} steps; "
                  f"{'**' + verdict + '**: read the estimate as a lower bound' if verdict.startswith('missed') else verdict}.", ""]
    if s.growth_points:
        lines += ["Growth (distinct states seen after the first N traces):", "",
                  "| traces | " + " | ".join(f"{p[0]:,}" for p in s.growth_points) + " |",
                  "|---|" + "---|" * len(s.growth_points),
                  "| states | " + " | ".join(f"{p[1]:,}" for p in s.growth_points) + " |", ""]
    if s.rare_classes:
        lines += ["Rarest kinds of states (a kind: the set of action names a state enables; unit-visits: "
                  "the sampling units that met a state, summed over the kind's states):", "",
                  "| kind | states seen | seen in one unit only | unit-visits | per state |", "|---|---|---|---|---|"]
        for r in s.rare_classes:
            lines.append(f"| {r['class']} | {r['states']:,} | {r['seen_once']:,} | {r['unit_visits']:,} | {r['unit_visits'] / r['states']:.1f} |")
        lines.append("")
    return lines
