"""``conq run``: the main job (conq/jobs.py), whole or on a subset (``--model``, smaller budgets).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from . import kit


def run(
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Where the report goes."),
    quick: bool = typer.Option(False, "--quick", help="Skip manifest entries marked slow."),
    model: Optional[List[str]] = typer.Option(None, "--model", "-m", metavar="NAME[/CONFIG]",
                                              help="Only this model (repeatable): its manifest entries, its "
                                              "conformance (golden corpus included) and its replays; with /CONFIG only "
                                              "that configuration's entries and replays."),
    traces: int = typer.Option(300, "--traces", min=0, help="Generated conformance traces per system (the golden corpus always runs whole)."),
    replay_traces: Optional[int] = typer.Option(None, "--replay-traces", min=1,
                                                help="At most this many traces per Spark replay (default: each replay's own count)."),
    no_replay: bool = typer.Option(False, "--no-replay", help="Skip the Spark replays."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """The main job: model-check every manifest entry, run the engines that exist, write reports/ (index.html, summary.md)."""

    def body() -> int:
        from conq.jobs import Subset, main_job

        subset = Subset(models=_models(model), traces=traces, replay_traces=replay_traces, replay=not no_replay)
        kit.check_output_dir(out_dir, "--out")
        return main_job(out_dir, quick=quick, json_out=json_out, console=kit.out, progress=kit.err,
                        emit_json=kit.emit_json, subset=subset)

    kit.guard(body, json_out)


def _models(given: Optional[List[str]]) -> dict[str, frozenset[str] | None] | None:
    """``--model NAME[/CONFIG]`` as model -> configurations (None: all), each checked before any work."""
    if not given:
        return None
    from conq.conformance import systems
    from conq.model.engines.registry import model_class, model_names

    systems.discover()  # a system of its own brings its model
    out: dict[str, set[str] | None] = {}
    for item in given:
        name, _, config = item.partition("/")
        if name not in model_names():
            raise kit.UsageProblem(f"--model {item}: unknown model {name!r} (known: {', '.join(model_names())})")
        if config:
            if config not in model_class(name).configs():
                raise kit.UsageProblem(f"--model {item}: model {name!r} has no configuration {config!r} "
                                       f"(known: {', '.join(model_class(name).configs())})")
            if out.get(name, set()) is not None:
                out.setdefault(name, set()).add(config)
        else:
            out[name] = None
    return {k: (frozenset(v) if v is not None else None) for k, v in out.items()}
