"""``conq requirements``: requirement coverage per area (spec/requirements, conq.spec.catalog).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from . import kit


def requirements(
    area: Optional[str] = typer.Option(None, "--area", help="Only this area (e.g. QCM)."),
    missing: bool = typer.Option(False, "--missing", help="List the requirements that have no check."),
    catalog_dir: Optional[Path] = typer.Option(None, "--catalog", help="Catalog folder (default: the shipped spec/requirements)."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Print requirement coverage per area; exit 1 when a covered area has a gap or a check names nothing."""

    def body() -> int:
        from conq.spec import catalog

        if catalog_dir is not None and not catalog_dir.is_dir():
            raise kit.UsageProblem(f"--catalog {catalog_dir}: not a folder")
        areas = catalog.load(catalog_dir)
        if area is not None:
            areas = [a for a in areas if a.id == area.upper()]
            if not areas:
                raise kit.UsageProblem(f"no area {area!r}")
        cov = catalog.coverage(areas)
        code = kit.EXIT_OK if all(c.ok for c in cov) else kit.EXIT_VIOLATION
        if json_out:
            kit.emit_json(
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
        kit.out.print(table)
        for c in cov:
            for b in c.broken:
                kit.out.print(f"[red]broken check[/] {b}")
            if c.area.covered:
                for rid in c.missing:
                    kit.out.print(f"[red]no check[/] {rid} (area {c.area.id} is marked covered)")
            elif missing:
                for rid in c.missing:
                    kit.out.print(f"no check yet: {rid}")
        return code

    kit.guard(body, json_out)
