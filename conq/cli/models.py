"""The model-checking commands: ``conq list``, ``conq check``, ``conq prove``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import typer
from rich.table import Table

from conq.model.kernel import config_dict

from . import kit


def list_models(json_out: bool = kit.JsonOpt) -> None:
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
            kit.emit_json(rows)
            return kit.EXIT_OK
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
        kit.out.print(table)
        return kit.EXIT_OK

    kit.guard(body, json_out)


def check(
    model: str = typer.Argument(..., help="Model name (see `conq list`) or FILE.py:Class."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration (default: the model's first)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE (repeatable)."),
    all_configs: bool = typer.Option(False, "--all-configs", help="Check every named configuration of the model."),
    max_states: Optional[int] = typer.Option(None, "--max-states", min=1, help="Stop after this many distinct states (exit 4: incomplete)."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", min=0.01,
                                                help="Stop a configuration's check (search and liveness analysis) after this long (exit 4: incomplete)."),
    max_memory: Optional[float] = typer.Option(None, "--max-memory", min=1.0,
                                               help="Stop when conq's resident memory exceeds this many MB (exit 4: incomplete)."),
    symmetry: bool = typer.Option(False, "--symmetry", help="Symmetry reduction (safety only: liveness is skipped)."),
    no_liveness: bool = typer.Option(False, "--no-liveness", help="Skip liveness analysis."),
    fingerprints: bool = typer.Option(False, "--fingerprints",
                                      help="Keep 64-bit state fingerprints and a parent map only (about 20 bytes a state; liveness is skipped)."),
    workers: int = typer.Option(1, "--workers", min=1, max=64,
                                help="Worker processes (above 1: fingerprints partitioned by owner; liveness is skipped)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write a Markdown+JSON report into this folder."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Explore every reachable state of a bounded configuration and check its properties.

    Exit 0: every property holds; 1: a property is violated (or vacuous); 4: a --max-* limit
    ended the search first and no violation was found before it."""

    def body() -> int:
        from conq.model.engines.explorer import explore, rss_bytes
        from conq.model.engines.registry import load_model, model_class

        overrides = kit.parse_sets(set_)
        if report is not None:
            kit.check_output_dir(report, "--report")
        if max_memory is not None:
            rss = rss_bytes()
            if rss is not None and rss > max_memory * 2**20:
                raise kit.UsageProblem(f"--max-memory {max_memory:g}: conq already uses {rss / 2**20:,.0f} MB before the search starts")
        names = list(model_class(model).configs()) if all_configs else [config]
        models = [load_model(model, cname, overrides) for cname in names]  # every configuration validated first
        results = []
        worst = kit.EXIT_OK
        markdown = []
        for cname, m in zip(names, models):
            title = f"{m.name} / {getattr(m, 'config_name', cname)}"
            with _search_progress(title, enabled=not json_out) as progress:
                ex = explore(
                    m,
                    max_states=max_states,
                    max_seconds=max_seconds,
                    max_memory_mb=max_memory,
                    symmetry=symmetry,
                    liveness=not no_liveness,
                    progress=progress,
                    fingerprints=fingerprints,
                    workers=workers,
                )
            results.append({"config": getattr(m, "config_name", cname), "settings": config_dict(m.config), **ex.summary()})
            worst = _worse(worst, _exploration_code(ex))
            if report is not None:
                from conq.report import exploration_markdown

                markdown.append(exploration_markdown(ex, title))
            if not json_out:
                _print_exploration(ex, title)
        if report is not None:
            from conq.report import write_report

            md, _ = write_report(report, f"check-{Path(model).stem}", "\n".join(markdown), results)
            if not json_out:
                kit.out.print(f"report: {md}")
        if json_out:
            kit.emit_json(results if all_configs else results[0])
        return worst

    kit.guard(body, json_out)


def _exploration_code(ex) -> int:
    """1 when a property is violated (found before any limit, so a real counterexample);
    else 4 when a limit cut the run short; else 1 when a verdict is not ok (vacuous, unreached)."""
    if ex.violations:
        return kit.EXIT_VIOLATION
    if not ex.complete:
        return kit.EXIT_INCOMPLETE
    return kit.EXIT_OK if ex.ok else kit.EXIT_VIOLATION


def _worse(a: int, b: int) -> int:
    rank = {kit.EXIT_OK: 0, kit.EXIT_INCOMPLETE: 1, kit.EXIT_VIOLATION: 2}
    return a if rank.get(a, 3) >= rank.get(b, 3) else b


@contextlib.contextmanager
def _search_progress(title: str, *, enabled: bool) -> Iterator[Callable | None]:
    """A progress bar on stderr for a long search (states, depth, rate, memory): only on a
    terminal, never under --json; shown from the first tick (after half a second)."""
    if not enabled or not kit.err.is_terminal:
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.fields[stats]}"),
                   TimeElapsedColumn(), console=kit.err, transient=True)
    task = None

    def tick(p) -> None:
        nonlocal task
        rate = p.states / p.seconds if p.seconds > 0 else 0.0
        mem = f", {p.rss_bytes / 2**20:,.0f} MB" if p.rss_bytes is not None else ""
        stats = f"{p.states:,} states, depth {p.depth}, {rate:,.0f} states/s{mem}"
        if task is None:
            bar.start()
            task = bar.add_task(f"exploring {title}", total=None, stats=stats)
        else:
            bar.update(task, stats=stats)

    try:
        yield tick
    finally:
        if task is not None:
            bar.stop()


def _print_exploration(ex, title: str) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("property")
    table.add_column("kind")
    table.add_column("status")
    table.add_column("claim", overflow="fold")
    style = {"holds": "green", "witnessed": "green", "violated": "bold red", "skipped": "yellow", "unknown": "yellow"}
    for v in ex.verdicts:
        table.add_row(v.prop.name, v.prop.kind.value, f"[{style.get(v.status, 'red')}]{v.status}[/]", v.prop.claim)
    kit.out.print(table)
    rate = f", {ex.states / ex.search_seconds:,.0f} states/s" if ex.search_seconds > 0 else ""
    kit.out.print(
        f"{ex.states:,} distinct states, {ex.transitions:,} transitions, depth {ex.depth}; "
        f"search {ex.search_seconds:.2f} s{rate}, analysis {ex.analysis_seconds:.2f} s"
        + ("" if ex.complete else f" [yellow](incomplete: {ex.stop_reason})[/]")
    )
    if not ex.complete and not ex.violations:
        kit.out.print(f"[yellow]incomplete:[/] {ex.stop_reason}: no violation found so far, and no verdict (exit {kit.EXIT_INCOMPLETE})")
    for v in ex.verdicts:
        if v.status == "violated" and v.path is not None:
            kit.out.print(f"\n[bold red]{v.prop.name}[/] violated: {v.prop.claim}")
            if v.detail:
                kit.out.print(f"  {v.detail}")
            kit.out.print(ex.model.format_path(v.path), markup=False)
            if v.cycle is not None:
                kit.out.print("  then forever:", markup=False)
                kit.out.print(ex.model.format_path(v.cycle), markup=False)
        elif v.status in ("vacuous", "unreached"):
            kit.out.print(f"[red]{v.prop.name}[/]: {v.status}: {v.detail}")


def prove(
    model: Optional[str] = typer.Argument(None, help="Model to prove (default: every model with an encoding)."),
    prop: Optional[str] = typer.Option(None, "--property", "-p", help="Only this property."),
    bmc_variants: bool = typer.Option(True, "--bmc/--no-bmc", help="Also run BMC on the manifest's expected violations."),
    slow: bool = typer.Option(False, "--slow", help="BMC also on manifest entries marked slow."),
    timeout: float = typer.Option(20.0, "--timeout", min=0.1, help="Seconds z3 may spend on one query."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Prove every `always` property inductive for unbounded sizes (z3); BMC on the upstream variants."""

    def body() -> int:
        from conq.spec import manifest
        from conq.model.engines import symbolic
        from conq.model.engines.explorer import explore
        from conq.model.engines.registry import load_model, model_names

        names = [model] if model else [n for n in model_names() if n in symbolic.encoded_models()]
        if not names:
            raise kit.UsageProblem("no model has a z3 encoding yet")
        rows: list[dict[str, Any]] = []
        code = kit.EXIT_OK
        for name in names:
            m = load_model(name)
            enc = symbolic.encoding_for(m)
            try:
                results = symbolic.prove_all(enc, m, only=prop, timeout_ms=int(timeout * 1000))
            except KeyError as e:
                raise kit.UsageProblem(str(e.args[0])) from None
            for r in results:
                rows.append({"model": name, "config": getattr(m, "config_name", ""), "mode": "induction", **r.to_json()})
                if r.status in ("not-inductive", "unknown", "violated"):
                    code = kit.EXIT_VIOLATION
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
                        code = kit.EXIT_VIOLATION
        if json_out:
            kit.emit_json(rows)
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
        kit.out.print(table)
        for r in rows:
            if r["status"] in ("not-inductive", "unknown", "bounded"):
                kit.out.print(f"{r['model']}/{r['property']}: {r['status']}: {r['detail']}", markup=False)
                if r.get("cti"):
                    kit.out.print(f"  before: {json.dumps(r['cti'].get('before'))}\n  action: {r['cti']['action']} {r['cti'].get('params', '')}\n  after:  {json.dumps(r['cti']['after'])}", markup=False)
        kit.out.print(f"total {sum(r['seconds'] for r in rows):.2f} s")
        return code

    kit.guard(body, json_out)
