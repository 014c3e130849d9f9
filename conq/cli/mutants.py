"""``conq mutants``: every engine against every mutant of a system; the kill matrix.
"""

from __future__ import annotations

from typing import List, Optional

import typer
from rich.table import Table

from . import kit


def mutants(
    model: str = typer.Argument("consumer-lists", autocompletion=kit.complete_model, help="The system whose mutant catalogue to run."),
    only: Optional[List[str]] = typer.Option(None, "--mutant", "-m", help="Only this mutant (repeatable)."),
    engines: Optional[List[str]] = typer.Option(None, "--engine", "-e", help="Only this engine (repeatable)."),
    scale: float = typer.Option(1.0, "--scale", min=0.01, help="Multiply every engine's count budget (paths, traces, examples, seeds, rounds)."),
    max_seconds: float = typer.Option(600.0, "--max-seconds", "--budget", min=1.0,
                                      help="Safety cap per engine and mutant: hitting it marks the run incomplete (never a verdict)."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Run every engine against every mutant of a system's implementation; print the kill matrix.

    Engines spend counts, not seconds, so the matrix is the same on a loaded machine; a cell that
    hits the safety cap is reported as capped: the run is incomplete (exit 4) unless a
    survivor or a false alarm fails it (exit 1)."""

    def body() -> int:
        from conq.conformance.mutation import Budget, capped_cells, catalogue, catalogue_names, run_catalog

        if model not in catalogue_names():
            raise kit.UsageProblem(f"no mutant catalogue for model {model!r} (known: {', '.join(catalogue_names())})")
        cat = catalogue(model)
        MUTANTS, ENGINES = cat.mutants, cat.engines
        for m in only or []:
            if m not in MUTANTS:
                raise kit.UsageProblem(f"no mutant {m!r} (known: {', '.join(MUTANTS)})")
        for e in engines or []:
            if e not in ENGINES:
                raise kit.UsageProblem(f"no engine {e!r} (known: {', '.join(ENGINES)})")
        from conq.progress import Progress

        cells = len(only or MUTANTS) * len(engines or ENGINES)
        with Progress(f"mutants {model}", kit.err, json_out=json_out, total=cells, live=False,
                      heartbeat=json_out or not kit.err.is_terminal) as bar:
            def progress(n, e, d) -> None:
                # a line per cell on a terminal; under --json (and piped) the count every 10 s
                bar.update(f"{n} / {e}", advance=1)
                if not json_out:
                    kit.err.print(f"[dim]{n} / {e}: {'capped' if d.capped else 'killed' if d.killed else 'survived'} "
                                  f"({d.spent or '-'}, {d.seconds:.1f} s)[/]")

            matrix = run_catalog(cat, only, engines, budget=Budget(scale=scale, max_seconds=max_seconds), on_cell=progress)
        capped = capped_cells(matrix)
        names = engines or list(ENGINES)
        ref = matrix.pop("(reference)")
        false_alarms = [e for e, d in ref.items() if d.killed]
        equivalent = [m for m in matrix if MUTANTS[m].equivalent]
        survivors = [m for m, row in matrix.items() if not any(d.killed for d in row.values()) and m not in equivalent]
        if json_out:
            kit.emit_json({
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
            kit.out.print(table)
            counted = len(matrix) - len(equivalent)
            kit.out.print(f"killed {counted - len(survivors)}/{counted}" + (f"; survivors: {', '.join(survivors)}" if survivors else "")
                      + (f"; equivalent (not counted): {', '.join(equivalent)}" if equivalent else ""))
            for m in equivalent:
                kit.out.print(f"{m} is equivalent: {MUTANTS[m].equivalent}", markup=False)
            for e in false_alarms:
                kit.out.print(f"[red]the reference fails engine {e}:[/] {ref[e].detail}", markup=True)
            for c in capped:
                kit.out.print(f"[yellow]incomplete: {c}[/]", markup=True)
            for m, row in matrix.items():
                first = next((d for d in row.values() if d.killed), None)
                if first is not None and first.evidence:
                    kit.out.print(f"{m}: minimal counterexample: {' ; '.join(str(list(a)) for a in first.evidence)}", markup=False)
        if survivors or false_alarms:
            return kit.EXIT_VIOLATION
        return kit.EXIT_INCOMPLETE if capped else kit.EXIT_OK

    kit.guard(body, json_out)
