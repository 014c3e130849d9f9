"""The ``conq`` command line.

Every subcommand takes ``--json`` (machine-readable output on stdout) and
exits 0 on success, 1 when a check finds a violation, 2 on bad usage or bad
input (the message says what was wrong and where).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
from rich.console import Console
from rich.table import Table

from conq import __version__
from conq.catalog import CatalogError
from conq.model.kernel import ModelError, config_dict

app = typer.Typer(
    name="conq",
    help="Consumer/queue coordination: model-check, prove, test conformance, replay traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Piped output (CI logs, files) gets a wide fixed width instead of rich's 80 columns.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 140)

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2

JsonOpt = typer.Option(False, "--json", help="Machine-readable output on stdout.")


class UsageProblem(Exception):
    """Bad arguments or bad input: exit 2 with this message."""


def _guard(fn: Callable[[], int]) -> None:
    """Run a command body and map its failures onto the documented exit codes."""
    try:
        code = fn()
    except (UsageProblem, ModelError, CatalogError) as e:
        err.print(f"[bold red]error:[/] {e}", markup=True, highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    raise typer.Exit(code)


def _parse_sets(sets: List[str] | None) -> dict[str, str]:
    overrides = {}
    for item in sets or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageProblem(f"--set expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def _emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@app.callback(invoke_without_command=True)
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        out.print(f"conq {__version__}")
        raise typer.Exit(0)


@app.command("list")
def list_models(json_out: bool = JsonOpt) -> None:
    """List the models and their named configurations."""

    def body() -> int:
        from conq.model.engines.registry import model_class, model_names

        rows = []
        for name in model_names():
            cls = model_class(name)
            descr = cls.describe_configs()
            for cname, cfg in cls.configs().items():
                rows.append({"model": name, "config": cname, "about": descr.get(cname, ""), "settings": config_dict(cfg)})
        if json_out:
            _emit_json(rows)
            return EXIT_OK
        table = Table(title="models and configurations (settings: the default in full, the others where they differ)")
        for col in ("model", "config", "about", "settings"):
            table.add_column(col, overflow="fold")
        defaults: dict[str, dict] = {}
        for r in rows:
            base = defaults.setdefault(r["model"], r["settings"])
            if base is r["settings"]:
                shown = " ".join(f"{k}={v}" for k, v in r["settings"].items())
            else:
                shown = " ".join(f"{k}={v}" for k, v in r["settings"].items() if base.get(k) != v) or "(as the default)"
            table.add_row(r["model"], r["config"], r["about"], shown)
        out.print(table)
        return EXIT_OK

    _guard(body)


@app.command("check")
def check(
    model: str = typer.Argument(..., help="Model name (see `conq list`) or FILE.py:Class."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration (default: the model's first)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE (repeatable)."),
    all_configs: bool = typer.Option(False, "--all-configs", help="Check every named configuration of the model."),
    max_states: Optional[int] = typer.Option(None, "--max-states", min=1, help="Stop after this many distinct states."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", min=0.1, help="Stop the search after this long."),
    symmetry: bool = typer.Option(False, "--symmetry", help="Symmetry reduction (safety only: liveness is skipped)."),
    no_liveness: bool = typer.Option(False, "--no-liveness", help="Skip liveness analysis."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write a Markdown+JSON report into this folder."),
    json_out: bool = JsonOpt,
) -> None:
    """Explore every reachable state of a bounded configuration and check its properties."""

    def body() -> int:
        from conq.model.engines.explorer import explore
        from conq.model.engines.registry import load_model, model_class

        overrides = _parse_sets(set_)
        names = list(model_class(model).configs()) if all_configs else [config]
        results = []
        worst = EXIT_OK
        markdown = []
        for cname in names:
            m = load_model(model, cname, overrides)
            ex = explore(
                m,
                max_states=max_states,
                max_seconds=max_seconds,
                symmetry=symmetry,
                liveness=not no_liveness,
            )
            title = f"{m.name} / {getattr(m, 'config_name', cname)}"
            results.append({"config": getattr(m, "config_name", cname), "settings": config_dict(m.config), **ex.summary()})
            if not ex.ok:
                worst = EXIT_VIOLATION
            if report is not None:
                from conq.report import exploration_markdown

                markdown.append(exploration_markdown(ex, title))
            if not json_out:
                _print_exploration(ex, title)
        if report is not None:
            from conq.report import write_report

            md, _ = write_report(report, f"check-{Path(model).stem}", "\n".join(markdown), results)
            if not json_out:
                out.print(f"report: {md}")
        if json_out:
            _emit_json(results if all_configs else results[0])
        return worst

    _guard(body)


def _print_exploration(ex, title: str) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("property")
    table.add_column("kind")
    table.add_column("status")
    table.add_column("claim", overflow="fold")
    style = {"holds": "green", "witnessed": "green", "violated": "bold red", "skipped": "yellow"}
    for v in ex.verdicts:
        table.add_row(v.prop.name, v.prop.kind.value, f"[{style.get(v.status, 'red')}]{v.status}[/]", v.prop.claim)
    out.print(table)
    rate = f", {ex.states / ex.search_seconds:,.0f} states/s" if ex.search_seconds > 0 else ""
    out.print(
        f"{ex.states:,} distinct states, {ex.transitions:,} transitions, depth {ex.depth}; "
        f"search {ex.search_seconds:.2f} s{rate}, analysis {ex.analysis_seconds:.2f} s"
        + ("" if ex.complete else f" [yellow](incomplete: {ex.stop_reason})[/]")
    )
    for v in ex.verdicts:
        if v.status == "violated" and v.path is not None:
            out.print(f"\n[bold red]{v.prop.name}[/] violated: {v.prop.claim}")
            if v.detail:
                out.print(f"  {v.detail}")
            out.print(ex.model.format_path(v.path), markup=False)
            if v.cycle is not None:
                out.print("  then forever:", markup=False)
                out.print(ex.model.format_path(v.cycle), markup=False)
        elif v.status in ("vacuous", "unreached"):
            out.print(f"[red]{v.prop.name}[/]: {v.status}: {v.detail}")


@app.command("requirements")
def requirements(
    area: Optional[str] = typer.Option(None, "--area", help="Only this area (e.g. QCM)."),
    missing: bool = typer.Option(False, "--missing", help="List the requirements that have no check."),
    catalog_dir: Optional[Path] = typer.Option(None, "--catalog", help="Catalog folder (default: the shipped spec/requirements)."),
    json_out: bool = JsonOpt,
) -> None:
    """Print requirement coverage per area; exit 1 when a covered area has a gap or a check names nothing."""

    def body() -> int:
        from conq import catalog

        if catalog_dir is not None and not catalog_dir.is_dir():
            raise UsageProblem(f"--catalog {catalog_dir}: not a folder")
        areas = catalog.load(catalog_dir)
        if area is not None:
            areas = [a for a in areas if a.id == area.upper()]
            if not areas:
                raise UsageProblem(f"no area {area!r}")
        cov = catalog.coverage(areas)
        code = EXIT_OK if all(c.ok for c in cov) else EXIT_VIOLATION
        if json_out:
            _emit_json(
                [
                    {
                        "area": c.area.id,
                        "title": c.area.title,
                        "marked_covered": c.area.covered,
                        "requirements": c.total,
                        "with_checks": c.with_checks,
                        "missing": c.missing,
                        "broken": c.broken,
                    }
                    for c in cov
                ]
            )
            return code
        table = Table(title="requirements catalog (spec/requirements)", title_justify="left")
        for col in ("area", "title", "requirements", "with checks", "marked covered", "problems"):
            table.add_column(col)
        for c in cov:
            probs = len(c.broken) + (len(c.missing) if c.area.covered else 0)
            table.add_row(
                c.area.id,
                c.area.title,
                str(c.total),
                f"{c.with_checks} ({100 * c.with_checks / max(c.total, 1):.0f}%)",
                "yes" if c.area.covered else "no",
                f"[red]{probs}[/]" if probs else "0",
            )
        out.print(table)
        for c in cov:
            for b in c.broken:
                out.print(f"[red]broken check[/] {b}")
            if c.area.covered:
                for rid in c.missing:
                    out.print(f"[red]no check[/] {rid} (area {c.area.id} is marked covered)")
            elif missing:
                for rid in c.missing:
                    out.print(f"no check yet: {rid}")
        return code

    _guard(body)


@app.command("conformance")
def conformance(
    model: str = typer.Argument("consumer-lists", help="Model whose implementation is checked."),
    impl: str = typer.Option("reference", "--impl", help="'reference' (in-process) or 'stdio:COMMAND' (a port)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration of the model."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE."),
    traces: int = typer.Option(200, "--traces", min=0, help="Generated traces to run."),
    seed: int = typer.Option(0, "--seed", min=0, help="Root seed; trace i uses a seed derived from (seed, i)."),
    length: int = typer.Option(40, "--length", min=1, help="Steps per generated trace (depth, for exhaustive)."),
    mode: str = typer.Option("random", "--mode", help="random | coverage | exhaustive"),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Also run the golden traces in this folder."),
    no_snapshots: bool = typer.Option(False, "--no-snapshots", help="Compare observations only, not states."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds a port may take per response."),
    json_out: bool = JsonOpt,
) -> None:
    """Hold an implementation to the model: corpus and generated traces; exit 1 on any divergence."""

    def body() -> int:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from conq.conformance.suite import SuiteError, corpus_files, run_suite
        from conq.conformance.trace import TraceError

        total = traces + (len(corpus_files(corpus)) if corpus is not None else 0)
        try:
            with Progress(
                TextColumn("conformance"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=err, disable=json_out or not err.is_terminal, transient=True,
            ) as bar:
                task = bar.add_task("traces", total=total)
                res, m = run_suite(
                    model, impl_spec=impl, config_name=config, overrides=_parse_sets(set_), traces=traces,
                    seed=seed, length=length, mode=mode, corpus=corpus, snapshots=not no_snapshots,
                    timeout=timeout, on_trace=lambda: bar.advance(task),
                )
        except (SuiteError, TraceError) as e:
            raise UsageProblem(str(e)) from None
        if json_out:
            _emit_json(res.to_json(m))
        else:
            table = Table(title=f"conformance: {res.model} against {res.impl}", title_justify="left")
            for col in ("traces", "corpus (as expected)", "steps checked", "steps/s", "divergences", "verdict"):
                table.add_column(col)
            table.add_row(
                str(res.traces), f"{res.corpus} ({res.corpus_ok})", f"{res.steps:,}", f"{res.steps_per_second:,.0f}",
                str(len(res.failures)), "[green]conforms[/]" if res.ok else "[bold red]DIVERGES[/]",
            )
            out.print(table)
            for f in res.failures:
                out.print(f.describe(m), markup=False)
        return EXIT_OK if res.ok else EXIT_VIOLATION

    _guard(body)


@app.command("protocol")
def protocol_doc(
    write: bool = typer.Option(False, "--write", help="Regenerate spec/port-protocol.md."),
    json_out: bool = JsonOpt,
) -> None:
    """Print the port protocol (generated from its declarations in code)."""

    def body() -> int:
        import dataclasses

        from conq.catalog import repo_root
        from conq.conformance import protocol

        if json_out:
            _emit_json({
                "version": protocol.PROTOCOL_VERSION,
                "messages": [dataclasses.asdict(m) for m in protocol.MESSAGES],
                "errors": [dataclasses.asdict(e) for e in protocol.ERRORS],
            })
        elif write:
            from conq.conformance.trace import atomic_write

            target = repo_root() / "spec" / "port-protocol.md"
            atomic_write(target, protocol.render_markdown())
            out.print(f"wrote {target}")
        else:
            sys.stdout.write(protocol.render_markdown())
        return EXIT_OK

    _guard(body)


@app.command("replay")
def replay(
    model: str = typer.Argument(..., help="Model whose traces are generated and replayed."),
    traces: int = typer.Option(10_000, "--traces", min=1, help="How many traces."),
    seed: int = typer.Option(0, "--seed", min=0, help="Root seed: trace i is reproducible alone from (seed, i)."),
    length: int = typer.Option(30, "--length", min=1, help="Steps per trace."),
    mode: str = typer.Option("coverage", "--mode", help="coverage (walks aimed at the unexplored frontier) | random | exhaustive (exhaustive prefixes + random walk)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration of the model."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE."),
    impl: str = typer.Option("reference", "--impl", help="'reference', 'stdio:COMMAND' (one port per partition) or 'driver:MODULE:Class'."),
    master: str = typer.Option("local[*]", "--master", help="Spark master URL."),
    out_dir: Path = typer.Option(Path("reports/replay"), "--out", help="Output folder (Parquet tables, summary.json, report.md)."),
    partitions: Optional[int] = typer.Option(None, "--partitions", min=1, help="Spark partitions (default: 4 per core, at most one per block)."),
    only: Optional[int] = typer.Option(None, "--only", min=0, help="Replay trace INDEX alone, in this process, and print its verdict."),
    no_truth: bool = typer.Option(False, "--no-truth", help="Do not explore the bounded graph for the coverage truth."),
    json_out: bool = JsonOpt,
) -> None:
    """Generate and replay many traces on Spark; report conformance and coverage against the exhaustive graph."""

    def body() -> int:
        from conq.conformance.spark_replay import ReplayError, ReplayParams, replay_one, run_replay

        params = ReplayParams(model=model, config_name=config, overrides=_parse_sets(set_), traces=traces,
                              seed=seed, length=length, mode=mode, impl=impl)
        try:
            if only is not None:
                row = replay_one(params, only)
                data = dict(zip(("index", "seed", "steps", "ok", "kind", "step", "divergence", "minimised", "replay"), row[1:]))
                if json_out:
                    _emit_json(data)
                else:
                    out.print(f"trace {only} (seed {data['seed']}): {data['steps']} steps, " + ("[green]conforms[/]" if data["ok"] else "[red]diverges[/]"))
                    if not data["ok"]:
                        out.print(data["divergence"], markup=False)
                        out.print(f"minimised: {data['minimised']}", markup=False)
                return EXIT_OK if data["ok"] else EXIT_VIOLATION
            say = (lambda msg: None) if json_out else (lambda msg: err.print(f"[dim]replay:[/] {msg}"))
            s = run_replay(params, master=master, out=out_dir, partitions=partitions, truth=not no_truth, say=say)
        except ReplayError as e:
            raise UsageProblem(str(e)) from None
        if json_out:
            import dataclasses

            _emit_json(dataclasses.asdict(s))
        else:
            table = Table(title=f"replay: {model} on {master}", title_justify="left")
            for col in ("traces", "steps", "diverged", "states covered", "transitions covered", "seconds"):
                table.add_column(col)
            table.add_row(
                f"{s.traces:,}", f"{s.steps:,}", f"[red]{s.diverged}[/]" if s.diverged else "0",
                f"{s.states_covered:,}" + (f" / {s.graph_states:,} ({100 * s.state_fraction:.1f}%)" if s.graph_states else ""),
                f"{s.transitions_covered:,}" + (f" / {s.graph_transitions:,} ({100 * s.transition_fraction:.1f}%)" if s.graph_transitions else ""),
                f"{s.seconds}",
            )
            out.print(table)
            if s.missed:
                out.print(f"not covered: {s.missed}", markup=False)
            for v in s.violations[:5]:
                out.print(f"[red]trace {v['index']}[/]: {v['divergence']}\n  minimised: {v['minimised']}\n  replay: {v['replay']}")
            out.print(f"report: {s.out}/report.md")
        return EXIT_OK if s.ok else EXIT_VIOLATION

    _guard(body)


@app.command("prove")
def prove(
    model: Optional[str] = typer.Argument(None, help="Model to prove (default: every model with an encoding)."),
    prop: Optional[str] = typer.Option(None, "--property", "-p", help="Only this property."),
    bmc_variants: bool = typer.Option(True, "--bmc/--no-bmc", help="Also run BMC on the manifest's expected violations."),
    slow: bool = typer.Option(False, "--slow", help="BMC also on manifest entries marked slow."),
    timeout: float = typer.Option(20.0, "--timeout", min=0.1, help="Seconds z3 may spend on one query."),
    json_out: bool = JsonOpt,
) -> None:
    """Prove every `always` property inductive for unbounded sizes (z3); BMC on the upstream variants."""

    def body() -> int:
        from conq import manifest
        from conq.model.engines import symbolic
        from conq.model.engines.explorer import explore
        from conq.model.engines.registry import load_model, model_names

        names = [model] if model else [n for n in model_names() if n in symbolic.encoded_models()]
        if not names:
            raise UsageProblem("no model has a z3 encoding yet")
        rows: list[dict[str, Any]] = []
        code = EXIT_OK
        for name in names:
            m = load_model(name)
            enc = symbolic.encoding_for(m)
            try:
                results = symbolic.prove_all(enc, m, only=prop, timeout_ms=int(timeout * 1000))
            except KeyError as e:
                raise UsageProblem(str(e.args[0])) from None
            for r in results:
                rows.append({"model": name, "config": getattr(m, "config_name", ""), "mode": "induction", **r.to_json()})
                if r.status in ("not-inductive", "unknown", "violated"):
                    code = EXIT_VIOLATION
            if bmc_variants and prop is None:
                explored: dict[str, Any] = {}
                for exp, pname in manifest.bmc_cases(name, set(enc.invariants()), slow=slow):
                    vm = load_model(name, exp.config, exp.overrides)
                    venc = symbolic.encoding_for(vm)
                    if exp.label not in explored:
                        explored[exp.label] = explore(vm, liveness=False)
                    v = explored[exp.label].verdict(pname)
                    if v.path is None:
                        continue
                    r = symbolic.bmc(venc, vm, pname, len(v.path), timeout_ms=int(timeout * 1000) * 3)
                    agree = r.status == "violated" and len(r.trace) - 1 == len(v.path)
                    rows.append({"model": name, "config": exp.config, "mode": f"bmc (explorer: {len(v.path)} steps)",
                                 **r.to_json(), "agrees_with_explorer": agree})
                    if not agree:
                        code = EXIT_VIOLATION
        if json_out:
            _emit_json(rows)
            return code
        table = Table(title="z3", title_justify="left")
        for col in ("model", "config", "property", "mode", "status", "strengthened with", "s"):
            table.add_column(col, overflow="fold")
        style = {"proved": "green", "violated": "yellow", "bounded": "yellow", "holds-to-bound": "green"}
        for r in rows:
            status = r["status"]
            if r["mode"].startswith("bmc"):
                status += " (agrees)" if r.get("agrees_with_explorer") else " [red](DISAGREES)[/]"
            table.add_row(r["model"], r["config"], r["property"], r["mode"], f"[{style.get(r['status'], 'red')}]{status}[/]",
                          ", ".join(r["strengthened_with"]), f"{r['seconds']:.2f}")
        out.print(table)
        for r in rows:
            if r["status"] in ("not-inductive", "unknown", "bounded"):
                out.print(f"{r['model']}/{r['property']}: {r['status']}: {r['detail']}", markup=False)
                if r.get("cti"):
                    out.print(f"  before: {json.dumps(r['cti'].get('before'))}\n  action: {r['cti']['action']} {r['cti'].get('params', '')}\n  after:  {json.dumps(r['cti']['after'])}", markup=False)
        out.print(f"total {sum(r['seconds'] for r in rows):.2f} s")
        return code

    _guard(body)


@app.command("mutants")
def mutants(
    model: str = typer.Argument("consumer-lists", help="The system whose mutant catalogue to run."),
    only: Optional[List[str]] = typer.Option(None, "--mutant", "-m", help="Only this mutant (repeatable)."),
    engines: Optional[List[str]] = typer.Option(None, "--engine", "-e", help="Only this engine (repeatable)."),
    scale: float = typer.Option(1.0, "--scale", min=0.01, help="Multiply every engine's count budget (paths, traces, examples, seeds, rounds)."),
    max_seconds: float = typer.Option(600.0, "--max-seconds", "--budget", min=1.0,
                                      help="Safety cap per engine and mutant: hitting it marks the run incomplete (never a verdict)."),
    json_out: bool = JsonOpt,
) -> None:
    """Run every engine against every mutant of a system's implementation; print the kill matrix.

    Engines spend counts, not seconds, so the matrix is the same on a loaded machine; a cell that
    hits the safety cap is reported as capped and the run fails (exit 1)."""

    def body() -> int:
        from conq.conformance.mutation import CATALOGUES, Budget, capped_cells, catalogue, run_catalog

        if model not in CATALOGUES:
            raise UsageProblem(f"no mutant catalogue for model {model!r} (known: {', '.join(CATALOGUES)})")
        cat = catalogue(model)
        MUTANTS, ENGINES = cat.mutants, cat.engines
        for m in only or []:
            if m not in MUTANTS:
                raise UsageProblem(f"no mutant {m!r} (known: {', '.join(MUTANTS)})")
        for e in engines or []:
            if e not in ENGINES:
                raise UsageProblem(f"no engine {e!r} (known: {', '.join(ENGINES)})")
        progress = (lambda n, e, d: None) if json_out else (
            lambda n, e, d: err.print(f"[dim]{n} / {e}: {'capped' if d.capped else 'killed' if d.killed else 'survived'} "
                                      f"({d.spent or '-'}, {d.seconds:.1f} s)[/]"))
        matrix = run_catalog(cat, only, engines, budget=Budget(scale=scale, max_seconds=max_seconds), on_cell=progress)
        capped = capped_cells(matrix)
        names = engines or list(ENGINES)
        ref = matrix.pop("(reference)")
        false_alarms = [e for e, d in ref.items() if d.killed]
        equivalent = [m for m in matrix if MUTANTS[m].equivalent]
        survivors = [m for m, row in matrix.items() if not any(d.killed for d in row.values()) and m not in equivalent]
        if json_out:
            _emit_json({
                "model": model,
                "budget": {"scale": scale, "max_seconds": max_seconds},
                "reference": {e: d.as_dict() for e, d in ref.items()},
                "mutants": {m: {"bug": MUTANTS[m].bug, "kind": MUTANTS[m].kind,
                                "engines": {e: d.as_dict() for e, d in row.items()}} for m, row in matrix.items()},
                "killed": sum(1 for m, row in matrix.items() if any(d.killed for d in row.values())),
                "total": len(matrix) - len(equivalent), "equivalent": equivalent, "survivors": survivors,
                "false_alarms": false_alarms, "capped": capped,
            })
        else:
            table = Table(title=f"{model} kill matrix (what each engine spent to detect; - survived)", title_justify="left")
            table.add_column("mutant")
            table.add_column("kind")
            for e in names:
                table.add_column(e, justify="right")
            table.add_row("(reference)", "", *[("[red]FALSE ALARM[/]" if ref[e].killed else "[yellow]capped[/]" if ref[e].capped
                                                else "[green]passes[/]") for e in names])
            for m, row in matrix.items():
                miss = "[dim]-[/]" if m in equivalent else "[red]-[/]"
                table.add_row(m + (" (equivalent)" if m in equivalent else ""), MUTANTS[m].kind,
                              *[(f"[green]{row[e].spent or 'yes'}[/]" if row[e].killed else "[yellow]capped[/]" if row[e].capped
                                 else miss) if e in row else "" for e in names])
            out.print(table)
            counted = len(matrix) - len(equivalent)
            out.print(f"killed {counted - len(survivors)}/{counted}" + (f"; survivors: {', '.join(survivors)}" if survivors else "")
                      + (f"; equivalent (not counted): {', '.join(equivalent)}" if equivalent else ""))
            for m in equivalent:
                out.print(f"{m} is equivalent: {MUTANTS[m].equivalent}", markup=False)
            for e in false_alarms:
                out.print(f"[red]the reference fails engine {e}:[/] {ref[e].detail}", markup=True)
            for c in capped:
                out.print(f"[yellow]incomplete: {c}[/]", markup=True)
            for m, row in matrix.items():
                first = next((d for d in row.values() if d.killed), None)
                if first is not None and first.evidence:
                    out.print(f"{m}: minimal counterexample: {' ; '.join(str(list(a)) for a in first.evidence)}", markup=False)
        return EXIT_OK if not survivors and not false_alarms and not capped else EXIT_VIOLATION

    _guard(body)


@app.command("run")
def run(
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Where the report goes."),
    quick: bool = typer.Option(False, "--quick", help="Skip manifest entries marked slow."),
    json_out: bool = JsonOpt,
) -> None:
    """The main job: model-check every manifest entry, run the engines that exist, write reports/."""

    def body() -> int:
        from conq.jobs import main_job

        return main_job(out_dir, quick=quick, json_out=json_out, console=out)

    _guard(body)


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
