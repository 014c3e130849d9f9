"""The conformance commands: ``conq conformance`` (call level, every configuration, thread level),
``conq validate`` (black-box trace validation) and ``conq protocol`` (the port protocol).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from conq.model.kernel import config_dict

from . import kit


def conformance(
    model: str = typer.Argument("consumer-lists", autocompletion=kit.complete_model, help="Model whose implementation is checked."),
    impl: str = typer.Option("reference", "--impl", help="'reference' (in-process) or 'stdio:COMMAND' (a port)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", autocompletion=kit.complete_config, help="Named configuration of the model."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE."),
    traces: int = typer.Option(200, "--traces", min=0,
                               help="Generated traces to run (per configuration). With --mode exhaustive, at least "
                               "the number of traces of --length actions (else exit 2; the message gives the count): "
                               "a large value such as 100000000 runs exactly the complete set."),
    seed: int = typer.Option(0, "--seed", min=0, help="Root seed; trace i uses a seed derived from (seed, i)."),
    length: int = typer.Option(40, "--length", min=1, help="Steps per generated trace (depth, for exhaustive)."),
    mode: kit.TraceMode = typer.Option(kit.TraceMode.random, "--mode",
                                       help="random walks, coverage-guided walks, or exhaustive: every trace of --length "
                                       "actions (needs --traces at least their count, see --traces)"),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Also run the golden traces in this folder."),
    no_snapshots: bool = typer.Option(False, "--no-snapshots", help="Compare observations only, not states."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds a port may take per response."),
    all_configs: bool = typer.Option(False, "--all-configs",
                                     help="Every configuration the conformance suite drives (spec/ports/<model>.md, "
                                     "with its overrides, then --set), one verdict each; the corpus once, first. "
                                     "Not with --config."),
    level: kit.Level = typer.Option(kit.Level.call, "--level", help="call, or thread (the threads' steps, the checker "
                                    "choosing the interleaving: consumer-lists, recovery-deferral; --traces walks of "
                                    "--length, --mode exhaustive: every trace of --length actions, --traces at least "
                                    "their count)"),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Hold an implementation to the model: corpus and generated traces; exit 1 on any divergence.

    --json prints one document, its shape declared in spec/schemas/conformance.schema.json."""

    mode, level = mode.value, level.value

    def body() -> int:
        from conq.progress import Progress

        if all_configs and level == "thread":
            raise kit.UsageProblem("--all-configs is for --level call (--level thread drives its own configurations)")
        if all_configs and config is not None:
            raise kit.UsageProblem("--all-configs runs every configuration the suite drives: not with --config")
        if all_configs:
            return kit.with_heartbeat(f"conformance {model} --all-configs", lambda: _conformance_all_configs(
                model, impl, set_, traces, seed, length, mode, corpus, not no_snapshots, timeout, json_out), json_out)()
        if level == "thread":
            return kit.with_heartbeat(f"conformance {model} --level thread", lambda: _thread_conformance(
                model, impl, config, set_, traces, seed, length, mode, corpus, timeout, json_out,
                snapshots=not no_snapshots), json_out)()

        from conq.conformance.suite import SuiteError, corpus_files, run_suite
        from conq.conformance.trace import TraceError

        if mode not in ("random", "coverage", "exhaustive"):
            raise kit.UsageProblem(f"--mode must be random, coverage or exhaustive, got {mode!r}")
        if corpus is not None:
            kit.check_corpus(corpus)
        try:
            total = traces + (len(corpus_files(corpus)) if corpus is not None else 0)
            # a live bar on a terminal; piped or under --json, a line every 10 s (conq/progress.py)
            with Progress(f"conformance {model}: traces", kit.err, json_out=json_out, total=total, heartbeat=True) as bar:
                res, m = run_suite(
                    model, impl_spec=impl, config_name=config, overrides=kit.parse_sets(set_), traces=traces,
                    seed=seed, length=length, mode=mode, corpus=corpus, snapshots=not no_snapshots,
                    timeout=timeout, on_trace=lambda: bar.update(advance=1),
                )
        except (SuiteError, TraceError) as e:
            raise kit.UsageProblem(str(e)) from None
        if json_out:
            kit.emit_json(res.to_json(m))
        else:
            table = Table(title=f"conformance: {res.model} against {res.impl}", title_justify="left")
            for col in ("traces", "corpus (as expected)", "steps checked", "steps/s", "divergences", "verdict"):
                table.add_column(col)
            table.add_row(
                str(res.traces), f"{res.corpus} ({res.corpus_ok})", f"{res.steps:,}", f"{res.steps_per_second:,.0f}",
                str(len(res.failures)), "[green]conforms[/]" if res.ok else "[bold red]DIVERGES[/]",
            )
            kit.out.print(table)
            for f in res.failures:
                kit.out.print(f.describe(m), markup=False)
        return kit.EXIT_OK if res.ok else kit.EXIT_VIOLATION

    kit.guard(body, json_out)


def _conformance_all_configs(model: str, impl: str, set_: Optional[List[str]], traces: int, seed: int, length: int,
                             mode: str, corpus: Optional[Path], snapshots: bool, timeout: float, json_out: bool) -> int:
    """``conq conformance --all-configs`` (issue 17, GAPS.md entry 5): the corpus once, then every
    configuration the suite drives (``port_reference.conformance_configs``: the list and overrides
    spec/ports/<model>.md prints), each with --set on top; one verdict per configuration; exit 1 if
    any diverges.  Every configuration is validated (and, exhaustive, counted) before anything runs."""
    from conq.conformance.generate import count_exhaustive
    from conq.conformance.port_reference import conformance_configs
    from conq.conformance.suite import SuiteError, run_suite
    from conq.conformance.trace import TraceError
    from conq.conformance.views import conformance_model

    if mode not in ("random", "coverage", "exhaustive"):
        raise kit.UsageProblem(f"--mode must be random, coverage or exhaustive, got {mode!r}")
    if corpus is not None:
        kit.check_corpus(corpus)
    extra = kit.parse_sets(set_)
    try:
        cfgs = [(name, {**own, **extra}) for name, own in conformance_configs(model)]
        # every configuration is built (validated) and, exhaustive, counted first: the most traces
        # any one needs is the --traces to ask for
        totals = {}
        for name, ov in cfgs:
            m = conformance_model(model, name, ov)
            totals[name] = count_exhaustive(m, length) if mode == "exhaustive" else 0
        most = max(totals, key=totals.get) if totals else None
        if most is not None and totals[most] > traces:
            raise SuiteError(f"--mode exhaustive at --length {length} is up to {totals[most]:,} traces of {model} "
                             f"per configuration ({most}); --traces {traces:,} would run only part of them: pass "
                             f"--traces {totals[most]} (or more), or a shorter --length")
        runs = []
        if corpus is not None:
            runs.append((None, {}, *run_suite(model, impl_spec=impl, traces=0, corpus=corpus, snapshots=snapshots,
                                              timeout=timeout)))
        for name, ov in cfgs:
            res, m = run_suite(model, impl_spec=impl, config_name=name, overrides=ov, traces=traces, seed=seed,
                               length=length, mode=mode, snapshots=snapshots, timeout=timeout)
            settings = config_dict(m.config)  # the overrides as the model took them (--set 1 is the integer 1)
            runs.append((name, {k: settings.get(k, v) for k, v in ov.items()}, res, m))
    except (SuiteError, TraceError, ValueError) as e:
        raise kit.UsageProblem(str(e)) from None
    ok = all(res.ok for _n, _o, res, _m in runs)
    if json_out:
        kit.emit_json({"model": model, "impl": runs[0][2].impl if runs else impl, "ok": ok,
                    "configs": [{"config": name, "overrides": ov, **res.to_json(m)} for name, ov, res, m in runs]})
    else:
        table = Table(title=f"conformance: {model} against {impl}, every configuration the suite drives",
                      title_justify="left")
        for col in ("configuration", "overrides", "traces", "corpus (as expected)", "steps checked", "divergences", "verdict"):
            table.add_column(col)
        for name, ov, res, _m in runs:
            table.add_row(name or "(corpus)", ", ".join(f"{k}={v}" for k, v in ov.items()) or "-", str(res.traces),
                          f"{res.corpus} ({res.corpus_ok})", f"{res.steps:,}", str(len(res.failures)),
                          "[green]conforms[/]" if res.ok else "[bold red]DIVERGES[/]")
        kit.out.print(table)
        for name, _ov, res, m in runs:
            for f in res.failures:
                kit.out.print(f"[{name or 'corpus'}] " + f.describe(m), markup=False)
    return kit.EXIT_OK if ok else kit.EXIT_VIOLATION


def _thread_conformance(model: str, impl: str, config: Optional[str], set_: Optional[List[str]], traces: int,
                        seed: int, length: int, mode: str, corpus: Optional[Path], timeout: float, json_out: bool,
                        snapshots: bool = True) -> int:
    """``conq conformance --level thread`` (issue 17): the system's thread level (conformance/systems.py,
    ``thread_level``).  ``--no-snapshots``: the steps' observations only, no snapshot after each step
    (GAPS.md 9)."""
    from conq.conformance import systems

    with_threads = systems.names("thread_level")
    if model not in with_threads:
        raise kit.UsageProblem(f"--level thread: only {', '.join(with_threads)} has a thread level, got {model!r}")
    if set_ or corpus is not None:
        raise kit.UsageProblem("--level thread: --set and --corpus are not supported (named thread-level configurations only)")
    if mode not in ("random", "exhaustive"):
        raise kit.UsageProblem(f"--level thread: --mode must be random or exhaustive, got {mode!r}")
    from conq.conformance.suite import PROBE, SuiteError

    ts = systems.get(model).load("thread_level")

    names = [config] if config else list(ts.THREAD_CONFIGS)
    for name in names:
        if name not in ts.THREAD_CONFIGS and name not in ts.FINDINGS:
            raise kit.UsageProblem(f"--config: no thread-level configuration {name!r} "
                               f"(known: {', '.join([*ts.THREAD_CONFIGS, *ts.FINDINGS])})")
    if mode == "exhaustive":
        # every trace, or none: --traces below the count is refused up front, as at call level
        from conq.conformance.thread_level import count_sequences

        counts = {name: count_sequences(ts.thread_model(name), length) for name in names}
        most = max(counts, key=counts.get)
        if counts[most] > traces:
            raise kit.UsageProblem(
                f"--mode exhaustive at --length {length} is {counts[most]:,} thread-level traces of {model} ({most}); "
                f"--traces {traces:,} would run only part of them: pass --traces {counts[most]} (or more), or a "
                "shorter --length")
    runs = []
    for name in names:
        try:
            implementation = ts.thread_impl(impl, timeout=timeout)
        except SuiteError as e:
            raise kit.UsageProblem(str(e)) from None
        walks, depth = (0, length) if mode == "exhaustive" else (traces, 0)
        runs.append(ts.check_threads(implementation, name, walks=walks, length=length, seed=seed, depth=depth,
                                     snapshots=snapshots, probe=PROBE, impl_spec=impl, max_traces=traces))
    ok = all(r.ok for r in runs)
    if json_out:
        kit.emit_json({"model": model, "level": "thread", "impl": impl, "ok": ok, "steps": sum(r.steps for r in runs),
                       "configs": [r.to_json() for r in runs]})
    else:
        for r in runs:
            kit.out.print(r.describe(), markup=False)
    if not ok:
        return kit.EXIT_VIOLATION
    return kit.EXIT_INCOMPLETE if any(r.incomplete for r in runs) else kit.EXIT_OK


def validate_log(
    model: str = typer.Argument(..., autocompletion=kit.complete_model, help="Model the log is validated against."),
    trace_file: Path = typer.Argument(..., metavar="TRACE", help="The log: an observed NDJSON trace (spec/trace-format.md)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", autocompletion=kit.complete_config, help="Named configuration (default: the log's, else the model's first); the log's config fields apply over it."),
    level: Optional[str] = typer.Option(None, "--level", help="thread (the model's own steps) or call (its call-level view); default: the log's level, else thread (a recorded trace: call)."),
    max_states: int = typer.Option(1_000_000, "--max-states", min=1, help="Bound on the model states explored in all (every closure under hidden steps together); hit before a verdict: exit 4."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", min=0.01, help="Bound on the run's seconds; hit before a verdict: exit 4."),
    max_memory: Optional[float] = typer.Option(None, "--max-memory", min=1.0, help="Bound on resident memory (MB); hit before a verdict: exit 4."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Black-box trace validation: can the model, with hidden internal steps between the logged
    events, produce this log?  Exit 0 accepted, 1 rejected (the longest accepted prefix, what the
    model allowed next, a shortest path there), 2 bad log, 4 incomplete (--max-states,
    --max-seconds or --max-memory hit)."""

    def body() -> int:
        from conq.conformance.validate import validate_file

        if level is not None and level not in ("thread", "call"):
            raise kit.UsageProblem(f"--level must be thread or call, got {level!r}")
        res = validate_file(model, str(trace_file), config_name=config, level=level, max_states=max_states,
                            max_total_states=max_states, max_seconds=max_seconds, max_memory_mb=max_memory)
        if json_out:
            kit.emit_json(res.to_json())
        else:
            for line in res.describe():
                kit.out.print(line, markup=False)
        return res.exit_code

    kit.guard(kit.with_heartbeat("validate", body, json_out), json_out)


def protocol_doc(
    write: bool = typer.Option(False, "--write", help="Regenerate spec/port-protocol.md."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Print the port protocol (generated from its declarations in code)."""

    def body() -> int:
        import dataclasses

        from conq.spec.catalog import repo_root
        from conq.conformance import protocol

        if json_out:
            kit.emit_json({
                "version": protocol.PROTOCOL_VERSION,
                "messages": [dataclasses.asdict(m) for m in protocol.MESSAGES],
                "errors": [dataclasses.asdict(e) for e in protocol.ERRORS],
                "failures": [dataclasses.asdict(f) for f in protocol.FAILURES],
            })
        elif write:
            from conq.conformance.trace import atomic_write

            target = repo_root() / "spec" / "port-protocol.md"
            atomic_write(target, protocol.render_markdown())
            kit.out.print(f"wrote {target}")
            from conq.conformance import port_reference  # spec/ports/<model>.md too (issue 17)

            for path in port_reference.write_all(repo_root()):
                kit.out.print(f"wrote {path}")
        else:
            sys.stdout.write(protocol.render_markdown())
        return kit.EXIT_OK

    kit.guard(body, json_out)
