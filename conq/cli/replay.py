"""``conq replay``: traces generated and replayed on Spark (conformance/spark_replay).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from . import kit


def replay(
    model: str = typer.Argument(..., autocompletion=kit.complete_model, help="Model whose traces are generated and replayed."),
    traces: int = typer.Option(10_000, "--traces", min=1, help="How many traces."),
    seed: int = typer.Option(0, "--seed", min=0, help="Root seed: trace i is reproducible alone from (seed, i)."),
    length: int = typer.Option(30, "--length", min=1, help="Steps per trace."),
    mode: kit.TraceMode = typer.Option(kit.TraceMode.coverage, "--mode", help="coverage: walks aimed at the unexplored frontier; random; exhaustive: exhaustive prefixes, then a random walk."),
    config: Optional[List[str]] = typer.Option(None, "--config", "-c", autocompletion=kit.complete_config, help="Named configuration of the model; repeated, each is replayed in turn in one Spark session, its output in --out/CONFIG."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE."),
    impl: str = typer.Option("reference", "--impl", help="'reference', 'stdio:COMMAND' (one port per partition) or 'driver:MODULE:Class'."),
    master: str = typer.Option("local[*]", "--master", help="Spark master URL."),
    out_dir: Path = typer.Option(Path("reports/replay"), "--out", help="Output folder (Parquet tables, summary.json, report.md)."),
    partitions: Optional[int] = typer.Option(None, "--partitions", min=1, help="Spark partitions (default: two per core, at most one per block of 64 traces)."),
    only: Optional[int] = typer.Option(None, "--only", min=0, help="Replay trace INDEX alone, in this process, and print its verdict."),
    export: Optional[kit.ExportFormat] = typer.Option(None, "--export", help="With --only: print the trace itself on stdout "
                                                      "(the verdict goes to stderr): ndjson (conq's trace format, each "
                                                      "step with the model's state) or itf (Apalache/Quint's Informal "
                                                      "Trace Format, state 0 the initial state)."),
    no_truth: bool = typer.Option(False, "--no-truth", help="Do not explore the bounded graph for the coverage truth."),
    no_graph: bool = typer.Option(False, "--no-graph", help="For targets beyond the explorer: no exhaustive graph; coverage by state fingerprints, growth curve and a Chao2 estimate of the unseen states (automatic for known large targets)."),
    symmetry: bool = typer.Option(False, "--symmetry", help="Also count coverage by symmetry class (the model's canonical form), against the model's symmetric graph."),
    level: kit.Level = typer.Option(kit.Level.call, "--level", help="Protocol level: call, or thread (consumer-lists: the checker chooses the threads' interleaving; --config names one of the thread-level configurations, default one-acquirer)."),
    conf: Optional[List[str]] = typer.Option(None, "--conf", help="A Spark setting, as spark-submit takes it (repeatable): --conf spark.executor.memory=2g."),
    spark_ui: bool = typer.Option(False, "--spark-ui", help="Keep Spark's web UI on (port 4040 on the driver, or the next free one); it is off by default."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Generate and replay many traces on Spark; report conformance and coverage against the exhaustive graph."""
    mode, level = mode.value, level.value

    def body() -> int:
        import dataclasses

        from conq.progress import Progress

        from conq.conformance.spark_replay import ReplayError, ReplayParams, close_session, replay_one, resolve_output, run_replay

        if export is not None and (only is None or json_out):
            raise kit.UsageProblem("--export writes one trace: give --only INDEX (and not --json)")
        configs = list(config) if config else [None]
        several = len(configs) > 1
        if several and (only is not None or len(set(configs)) < len(configs)):
            raise kit.UsageProblem("--config: give distinct configurations" if only is None
                               else "--only replays one trace of one configuration: give one --config")

        settings = kit.parse_conf(conf)
        if spark_ui:
            settings.setdefault("spark.ui.enabled", "true")
        if only is None:
            kit.check_master(master)
            kit.check_output_dir(out_dir, "--out")
        params = ReplayParams(model=model, config_name=configs[0], overrides=kit.parse_sets(set_), traces=traces,
                              seed=seed, length=length, mode=mode, impl=impl, symmetry=symmetry, level=level)
        try:
            if only is not None and export is not None:
                return _export(params, only, export.value)
            if only is not None:
                row = replay_one(params, only)
                data = dict(zip(("index", "seed", "steps", "ok", "kind", "step", "divergence", "minimised", "replay"), row[1:]))
                if json_out:
                    kit.emit_json(data)
                else:
                    kit.out.print(f"trace {only} (seed {data['seed']}): {data['steps']} steps, " + ("[green]conforms[/]" if data["ok"] else "[red]diverges[/]"))
                    if not data["ok"]:
                        kit.out.print(data["divergence"], markup=False)
                        kit.out.print(f"minimised: {data['minimised']}", markup=False)
                return kit.EXIT_OK if data["ok"] else kit.EXIT_VIOLATION
            if spark_ui:
                kit.err.print("Spark UI: http://127.0.0.1:4040/ while the replay runs (the next port up if 4040 is taken)")
            # the job's own lines on a terminal; under --json (and piped) a line every 10 s says it is alive
            say = (lambda msg: None) if json_out else (lambda msg: kit.err.print(f"[dim]replay:[/] {msg}"))
            if several:  # every configuration and output folder checked before the first replay
                from conq.conformance.spark_replay import target_model

                for c in configs:
                    target_model(dataclasses.replace(params, config_name=c))
                    resolve_output(out_dir / c)
            summaries = []
            try:
                with Progress(f"replay {model}", kit.err, json_out=json_out, live=False,
                              heartbeat=json_out or not kit.err.is_terminal) as bar:
                    for c in configs:  # one kept Spark session serves them all
                        bar.update(c or "")
                        summaries.append(run_replay(dataclasses.replace(params, config_name=c), master=master,
                                                    out=out_dir / c if several else out_dir, partitions=partitions,
                                                    truth=not (no_truth or no_graph), say=say, keep_session=several,
                                                    conf=settings or None))
            finally:
                close_session()
        except ReplayError as e:
            raise kit.UsageProblem(str(e)) from None
        if json_out:
            kit.emit_json([dataclasses.asdict(s) for s in summaries] if several else dataclasses.asdict(summaries[0]))
        for s in ([] if json_out else summaries):
            table = Table(title=f"replay: {model}" + (f"/{s.params['config_name']}" if several else "") + f" on {master}", title_justify="left")
            for col in ("traces", "steps", "diverged", "call-level states covered", "call-level transitions covered", "seconds"):
                table.add_column(col)
            table.add_row(
                f"{s.traces:,}", f"{s.steps:,}", f"[red]{s.diverged}[/]" if s.diverged else "0",
                f"{s.states_covered:,}" + (f" / {s.graph_states:,} ({100 * s.state_fraction:.1f}%)" if s.graph_states else ""),
                f"{s.transitions_covered:,}" + (f" / {s.graph_transitions:,} ({100 * s.transition_fraction:.1f}%)" if s.graph_transitions else ""),
                f"{s.seconds}",
            )
            kit.out.print(table)
            if s.missed:
                kit.out.print(f"not covered: {s.missed}", markup=False)
            if s.state_estimate:
                from conq.conformance.coverage_estimate import Estimate

                e = Estimate(**{k: s.state_estimate[k] for k in ("observed", "units", "q1", "q2", "estimate", "se", "low", "high", "conf", "sample_coverage")})
                kit.out.print(f"states, estimated (Chao2 per {s.unit}): {e.describe()}", markup=False)
            for v in s.violations[:5]:
                kit.out.print(f"[red]trace {v['index']}[/]: {v['divergence']}\n  minimised: {v['minimised']}\n  replay: {v['replay']}")
            if s.states_covered_canonical is not None:
                kit.out.print(f"symmetry classes seen: {s.states_covered_canonical:,}"
                          + (f" / {s.graph_states_canonical:,} ({100 * s.state_fraction_canonical:.1f}%)" if s.graph_states_canonical else "")
                          + (f"; symmetric graph: {s.symmetric_graph_states:,} states" if s.symmetric_graph_states else ""), markup=False)
            kit.out.print(f"report: {s.out}/report.md")
        return kit.EXIT_OK if all(s.ok for s in summaries) else kit.EXIT_VIOLATION

    kit.guard(body, json_out)


def _export(params, index: int, fmt: str) -> int:
    """``--only N --export FORMAT``: trace ``index`` on stdout, with the model's state after every
    step (the first consistent state where several are); its verdict on stderr."""
    import sys

    from conq.conformance.spark_replay import replay_run
    from conq.conformance.trace import export, states_along

    model, run = replay_run(params, index)
    tr = run.trace(model, params.mode)
    tr.config_name = params.config_name or getattr(model, "config_name", None)
    if params.level == "thread":
        tr.level = "thread"
    init, views = states_along(model, run.actions, run.observations)
    for e, v in zip(tr.events, views):
        e.state = v
    sys.stdout.write(export(tr, fmt, init=init))
    sys.stdout.flush()
    d = run.divergence
    kit.err.print(f"trace {index} (seed {run.seed}): {run.steps} steps, "
                  + ("conforms" if d is None else f"diverges: {d.describe()}"), markup=False, highlight=False)
    return kit.EXIT_OK if d is None else kit.EXIT_VIOLATION
