"""``conq certify``: one command that certifies a port (conformance/certify.py)."""

from __future__ import annotations

from typing import Optional
from pathlib import Path

import typer
from rich.table import Table

from . import kit


def certify(
    model: str = typer.Argument(..., help="Model (system) the port implements."),
    impl: str = typer.Option(..., "--impl", help="The implementation: 'stdio:COMMAND' (a port; a leading python runs "
                             "with this interpreter), 'reference', 'mutant:NAME' or 'driver:MODULE:Class'."),
    traces: int = typer.Option(30, "--traces", min=0, help="Random walks per configuration (call level)."),
    coverage: int = typer.Option(15, "--coverage", min=0, help="Coverage-guided traces per configuration."),
    length: int = typer.Option(40, "--length", min=1, help="Steps per random or coverage trace."),
    exhaustive_length: int = typer.Option(5, "--exhaustive-length", min=1,
                                          help="Length of the exhaustive run, shortened until its count fits "
                                          "--exhaustive-cap."),
    exhaustive_cap: int = typer.Option(3000, "--exhaustive-cap", min=1, help="Most traces of one exhaustive run."),
    thread_walks: int = typer.Option(15, "--thread-walks", min=0, help="Random walks per thread-level configuration."),
    thread_depth: int = typer.Option(6, "--thread-depth", min=1,
                                     help="Depth of the thread level's exhaustive run (shortened to fit the cap)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Root seed of every generated trace."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="The golden corpus folder (default: the system's own)."),
    no_corpus: bool = typer.Option(False, "--no-corpus", help="Leave the golden corpus out."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds a port may take per response."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Certify a port: preflight, golden corpus, every configuration the suite drives (call and thread
    level: random, coverage, a short exhaustive run, probing disabled calls); one table, exit 0/1/2.

    A port that does not start or answer init stops the run at once (exit 2, its stderr); a
    configuration it answers with error 14 is listed as skipped.  --json: one document
    (spec/schemas/certify.schema.json)."""

    def body() -> int:
        from conq.conformance.certify import Budget, certify as run
        from conq.conformance.suite import SuiteError
        from conq.conformance.trace import TraceError

        if corpus is not None:
            kit.check_corpus(corpus)
        if corpus is not None and no_corpus:
            raise kit.UsageProblem("--corpus and --no-corpus: give one")
        budget = Budget(traces=traces, coverage=coverage, length=length, exhaustive_length=exhaustive_length,
                        exhaustive_cap=exhaustive_cap, thread_walks=thread_walks, thread_depth=thread_depth, seed=seed)

        def progress(r) -> None:
            if not json_out:
                kit.err.print(f"[dim]certify:[/] {r.name}: {r.verdict}", highlight=False)

        try:
            cert = run(model, impl, budget, timeout=timeout, on_result=progress,
                       corpus=None if no_corpus else (corpus if corpus is not None else "default"))
        except (SuiteError, TraceError) as e:
            raise kit.UsageProblem(str(e)) from None
        if json_out:
            kit.emit_json(cert.to_json())
        else:
            table = Table(title=f"certify: {model} against {impl}", title_justify="left")
            for col in ("level", "configuration", "check", "traces", "steps", "verdict", "note"):
                table.add_column(col)
            for r in cert.results:
                verdict = {"conforms": "[green]conforms[/]", "DIVERGES": "[bold red]DIVERGES[/]"}.get(r.verdict,
                                                                                                     "[yellow]skipped[/]")
                table.add_row(r.level, r.config or "-", r.mode, f"{r.traces:,}", f"{r.steps:,}", verdict,
                              r.note if len(r.note) <= 100 else r.note[:100] + " ...")
            kit.out.print(table)
            for r in cert.results:
                for text in r.text:
                    kit.out.print(f"[{r.name}] {text}", markup=False)
            ran = [r for r in cert.results if r.verdict != "skipped"]
            kit.out.print(f"{'[green]CERTIFIED[/]' if cert.ok else '[bold red]NOT CERTIFIED[/]'}: {len(ran)} checks ran, "
                          f"{len(cert.results) - len(ran)} skipped, {sum(r.steps for r in ran):,} steps")
        return kit.EXIT_OK if cert.ok else kit.EXIT_VIOLATION

    kit.guard(body, json_out)
