"""``conq run``: the main job (conq/jobs.py).
"""

from __future__ import annotations

from pathlib import Path

import typer

from . import kit


def run(
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Where the report goes."),
    quick: bool = typer.Option(False, "--quick", help="Skip manifest entries marked slow."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """The main job: model-check every manifest entry, run the engines that exist, write reports/ (index.html, summary.md)."""

    def body() -> int:
        from conq.jobs import main_job

        kit.check_output_dir(out_dir, "--out")
        return main_job(out_dir, quick=quick, json_out=json_out, console=kit.out, progress=kit.err, emit_json=kit.emit_json)

    kit.guard(body, json_out)
