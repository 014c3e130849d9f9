"""The main job (``conq run``): everything a user wants after setting up.

It model-checks every entry of the manifest of expected results, then runs
each engine that later stages register in :data:`STAGES` (conformance, Spark
replay), prints one summary table and writes ``reports/summary.md`` and
``reports/summary.json``.  Exit 1 when anything differs from what is expected.
A :class:`Subset` narrows it (``conq run --model NAME[/CONFIG]``, smaller budgets);
a system that declares a golden corpus fails its conformance row when none is found.
"""

from __future__ import annotations

import json
import time
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from rich.console import Console
from rich.table import Table

from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model
from conq.progress import Progress
from conq.report import write_report
from conq.spec import catalog, manifest


@dataclass(frozen=True)
class Subset:
    """What a run covers (``conq run --model NAME[/CONFIG] --traces N --replay-traces N --no-replay``):
    by default everything, with the budgets the main job always had."""

    #: model -> the configurations to model-check and replay (None: all of them); None: every model
    models: Mapping[str, frozenset[str] | None] | None = None
    #: generated traces of the conformance stage, per system (its golden corpus always runs whole)
    traces: int = 300
    #: at most this many traces per Spark replay (None: each replay's own count)
    replay_traces: int | None = None
    replay: bool = True

    def has_model(self, model: str) -> bool:
        return self.models is None or model in self.models

    def has(self, model: str, config: str | None) -> bool:
        if not self.has_model(model):
            return False
        configs = self.models.get(model) if self.models is not None else None
        return configs is None or config in configs


#: the subset of the run under way (main_job sets it; the stages read it)
_SUBSET: ContextVar[Subset] = ContextVar("conq_run_subset", default=Subset())


def conformance_stage(out_dir: Path, console: Console) -> list[dict[str, Any]]:
    """The conformance suite against the reference implementation of every registered system
    (conformance/systems.py), with its golden corpus."""
    from conq.conformance import systems
    from conq.conformance.suite import run_suite
    from conq.model.engines.registry import model_names

    subset = _SUBSET.get()
    rows = []
    for system in systems.systems("driver"):
        name = system.name
        if name not in model_names() or not subset.has_model(name):
            continue
        console.print(f"[dim]conformance: {name} against the reference[/]")
        subject = f"{name} (reference, in-process)"
        corpus = system.corpus_dir()  # the system's golden corpus, found with importlib.resources
        if system.corpus is not None and corpus is None:  # declared, not installed: never "0 golden, ok"
            rows.append({"stage": "conformance", "subject": subject, "ok": False, "seconds": 0.0, "traces": 0, "corpus": 0,
                         "result": f"the golden corpus {system.package}/{system.corpus} is missing from this installation"})
            continue
        settings = dict(system.conformance_settings)
        res, m = run_suite(name, traces=subset.traces, seed=0, length=40,
                           corpus=Path(str(corpus)) if corpus is not None else None, **settings)
        missing = system.corpus is not None and res.corpus == 0
        rows.append({
            "stage": "conformance",
            "subject": subject + (f" {settings}" if settings else ""),
            "result": f"{res.traces} traces + {res.corpus} golden, {res.steps:,} steps, {res.steps_per_second:,.0f} steps/s"
            + ("" if res.ok else f"; {len(res.failures)} divergences: {res.failures[0].describe(m)}")
            + (f"; no golden trace of {name} in {corpus}" if missing else ""),
            "ok": res.ok and not missing,
            "seconds": round(res.seconds, 2),
            "traces": res.traces,
            "corpus": res.corpus,
        })
    return rows


def replay_stage(out_dir: Path, console: Console) -> list[dict[str, Any]]:
    """A Spark local[*] replay of every registered system's main-job replays (``System.replays``)."""
    from conq.conformance import systems
    from conq.conformance.spark_replay import ReplayError, ReplayParams, close_session, run_replay

    subset = _SUBSET.get()
    if not subset.replay:
        return []
    rows = []
    # One Spark session for all the replays (issue 20): its JVM and its Python workers, with conq
    # imported and each model set up, serve every replay after the first.
    try:
        for system in systems.systems("replays"):
            model = system.name
            for r in system.replays:
                if not subset.has(model, r.config):
                    continue
                traces = r.traces if subset.replay_traces is None else min(r.traces, subset.replay_traces)
                params = ReplayParams(model=model, config_name=r.config, overrides=dict(r.overrides),
                                      traces=traces, seed=0, length=r.length, mode="coverage")
                t0 = time.perf_counter()
                try:
                    s = run_replay(params, master="local[*]", out=out_dir / r.folder,
                                   say=lambda m: console.print(f"[dim]replay: {m}[/]"), keep_session=True)
                except ReplayError as e:
                    rows.append({"stage": "spark replay", "subject": model, "result": str(e), "ok": False, "seconds": 0.0})
                    continue
                cover = f"{s.states_covered:,} call-level states" + (f" ({100 * s.state_fraction:.1f}% of the call-level graph's {s.graph_states:,})" if s.graph_states else "")
                if not s.graph_states and s.state_estimate:  # beyond the explorer: how close, by the Chao2 estimate
                    e = s.state_estimate
                    cover += f" (no graph; Chao2 estimate {e['estimate']:,.0f}, 95% CI {e['low']:,.0f}-{e['high']:,.0f}: {100 * e['completeness']:.0f}% seen)"
                rows.append({
                    "replay_summary": s,  # (for the HTML page's replay section; not in summary.json)
                    "stage": "spark replay",
                    "subject": f"{model}/{r.config} on local[*] (coverage-guided)",
                    "result": f"{s.traces:,} traces, {s.steps:,} steps, {s.diverged} diverged, {cover}; report {s.out}/report.md",
                    "ok": s.ok,
                    "seconds": round(time.perf_counter() - t0, 2),
                })
    finally:
        close_session()
    return rows


def model_mutation_stage(out_dir: Path, console: Console) -> list[dict[str, Any]]:
    """Each model's mutation coverage on its smallest configuration (conq/mutate.py, issue 31)."""
    from conq.mutate import mutation_stage

    return mutation_stage(out_dir, console, _SUBSET.get().models)


#: Stages after model checking: (name, function(out_dir, console) -> rows with
#: "stage", "subject", "result", "ok", "seconds", and optional "markdown" and "files" (name -> text,
#: written into the run's output folder; ``out_dir`` itself is only for nested conq outputs).
STAGES: list[tuple[str, Callable[[Path, Console], list[dict[str, Any]]]]] = [
    ("model mutation", model_mutation_stage),
    ("conformance", conformance_stage),
    ("spark replay", replay_stage),
]


def model_check_rows(quick: bool, console: Console, page: Any = None, bar: Progress | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Every manifest entry model-checked and judged; its section added to the HTML ``page``."""
    rows, markdown = [], []
    entries = _entries(quick)
    for k, exp in enumerate(entries):
        m = load_model(exp.model, exp.config, exp.overrides)
        if bar is not None:
            bar.update(exp.label, done=k)
        t0 = time.perf_counter()
        ex = explore(m, symmetry=exp.symmetry, liveness=exp.liveness, progress=bar.search(exp.label) if bar else None)
        secs = time.perf_counter() - t0
        problems = manifest.mismatches(exp, ex)
        if problems:  # a moved count says nothing by itself: what changed, against the model as pinned
            from conq.mutate import explain_mismatch

            problems += explain_mismatch(exp)
        violated = [v.prop.name for v in ex.violations]
        result = f"{ex.states:,} states, {ex.transitions:,} transitions"
        result += f"; violated as expected: {', '.join(violated)}" if violated and not problems else ""
        anchor = page.add_exploration(ex, exp.label, problems=problems, expected=exp.violated, seconds=secs, row=False) if page else ""
        rows.append(
            {
                "stage": "model-check",
                "subject": exp.label,
                "result": result if not problems else "; ".join(problems),
                "ok": not problems,
                "seconds": round(secs, 2),
                "states": ex.states,
                "transitions": ex.transitions,
                "violated": violated,
                "anchor": anchor,
            }
        )
    if bar is not None:
        bar.update("", done=len(entries))
    return rows, markdown


def _entries(quick: bool) -> list:
    """The manifest entries the run checks (``--quick`` leaves the slow ones out; a subset, the others)."""
    subset = _SUBSET.get()
    return [exp for exp in manifest.load() if not (quick and exp.slow) and subset.has(exp.model, exp.config)]


def main_job(out_dir: Path, *, quick: bool, json_out: bool, console: Console, progress: Console | None = None,
             emit_json: Callable[[Any], None] | None = None, subset: Subset = Subset()) -> int:
    """Run everything (or ``subset``); the summary table goes to ``console`` (or, under
    ``json_out``, the summary document to ``emit_json``: stdout then holds that document alone);
    the stages' progress lines go to ``progress`` (stderr): a live line on a terminal, a plain line
    every 10 s when piped.  Writes ``index.html`` (the page: every section, counterexample viewer,
    plots), ``summary.md`` (the headline and the table, linking the page) and ``summary.json``."""
    from conq.conformance.output_folder import OutputFolder

    token = _SUBSET.set(subset)
    # the report folder is shared (conq check --report, the replays nested in it): the run's own files
    # join what earlier conq runs wrote there; a foreign file, or another run writing there, is refused
    folder = OutputFolder(out_dir, command="conq run", option="--out", replace=False)
    try:
        folder.check()
        with folder:
            return _main_job(folder, quick=quick, json_out=json_out, console=console, progress=progress,
                             emit_json=emit_json)
    finally:
        _SUBSET.reset(token)


def _main_job(folder: Any, *, quick: bool, json_out: bool, console: Console, progress: Console | None,
              emit_json: Callable[[Any], None] | None) -> int:
    from conq.html_report import HtmlReport, slim_markdown

    out_dir = folder.final  # the replays publish their own outputs in it; the page and summary are staged

    t0 = time.perf_counter()
    progress = progress or Console(stderr=True, highlight=False)
    page = HtmlReport("conq run")
    n_checks = len(_entries(quick))
    with Progress("model-check", progress, json_out=json_out, total=n_checks, heartbeat=True) as bar:
        rows, markdown = model_check_rows(quick, progress, page, bar)
    cov = catalog.coverage(catalog.load())
    for c in cov:
        rows.append(
            {
                "stage": "requirements",
                "subject": c.area.id,
                "result": f"{c.with_checks}/{c.total} with checks" + (f"; {len(c.broken)} broken" if c.broken else "")
                + (f"; {c.unverified} test checks not verifiable (no test suite in this installation)" if c.unverified else ""),
                "ok": c.ok,
                "seconds": 0.0,
            }
        )
    for name, stage in STAGES:
        with Progress(name, progress, json_out=json_out, heartbeat=True):
            stage_rows = stage(out_dir, progress)
        for row in stage_rows:
            markdown.append(row.pop("markdown", ""))
            for name, data in row.pop("files", {}).items():  # a stage's own files, staged with the page
                folder.write(name, data)
            summary = row.pop("replay_summary", None)
            if summary is not None:
                model_name, _, config_name = row["subject"].partition(" ")[0].partition("/")
                row["anchor"] = page.add_replay(summary, row["subject"], seconds=row["seconds"],
                                                model_states=_model_states(model_name, config_name), row=False)
            rows.append(row)
    for r in rows:
        page.add_row(r["stage"], r["subject"], r["result"], r["ok"], r["seconds"], r.pop("anchor", ""))
    ok = all(r["ok"] for r in rows)
    summary = {"ok": ok, "seconds": round(time.perf_counter() - t0, 2), "headline": page.headline(), "rows": rows}
    html = out_dir / page.write(folder.staging / "index.html").name
    path = out_dir / write_report(folder.staging, "summary", slim_markdown(page, "index.html"), summary)[0].name
    if json_out:
        if emit_json is not None:
            emit_json(summary)
        else:
            print(json.dumps(summary, indent=2, default=str))
    else:
        table = Table(title="conq run", title_justify="left")
        for col in ("stage", "subject", "result", "ok", "s"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(r["stage"], r["subject"], r["result"], "[green]yes[/]" if r["ok"] else "[red]NO[/]", f"{r['seconds']:.1f}")
        console.print(table)
        console.print(f"report: {html} (the headline and the table: {path})")
        console.print(("[green]" if ok else "[bold red]") + page.headline() + "[/]")
    return 0 if ok else 1


def _model_states(model: str, config: str) -> int | None:
    """The model check's state count of a configuration (the manifest's, without symmetry or
    overrides), to set beside a replay's call-level count."""
    for exp in manifest.load():
        if exp.model == model and exp.config == config and not exp.symmetry and not exp.overrides:
            return exp.states
    return None


def _table_md(rows: list[dict[str, Any]]) -> str:
    lines = ["| stage | subject | result | ok | seconds |", "|---|---|---|---|---|"]
    lines += [f"| {r['stage']} | {r['subject']} | {r['result']} | {'yes' if r['ok'] else '**no**'} | {r['seconds']} |" for r in rows]
    return "\n".join(lines) + "\n"
