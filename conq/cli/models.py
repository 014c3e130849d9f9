"""The model-checking commands: ``conq list``, ``conq check``, ``conq explore``, ``conq prove``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.markup import escape
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
                shown = " ".join(f"{k}={kit.setting_text(v)}" for k, v in r["settings"].items())
            else:
                shown = " ".join(f"{k}={kit.setting_text(v)}" for k, v in r["settings"].items() if base.get(k) != v) or "(as the default)"
            table.add_row(r["model"], r["config"], r["about"], shown)
        kit.out.print(table)
        return kit.EXIT_OK

    kit.guard(body, json_out)


def check(
    model: str = typer.Argument(..., autocompletion=kit.complete_model, help="Model name (see `conq list`) or FILE.py:Class."),
    config: Optional[str] = typer.Option(None, "--config", "-c", autocompletion=kit.complete_config, help="Named configuration (default: the model's first)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE (repeatable)."),
    all_configs: bool = typer.Option(False, "--all-configs", help="Check every named configuration of the model, each judged against the manifest."),
    max_states: Optional[int] = typer.Option(None, "--max-states", min=1, help="Stop after this many distinct states (exit 4: incomplete)."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", min=0.01,
                                                help="Stop a configuration's check (search and liveness analysis) after this long (exit 4: incomplete)."),
    max_memory: Optional[float] = typer.Option(None, "--max-memory", min=1.0, metavar="MB",
                                               help="Stop when conq's resident memory exceeds this many MB (exit 4: incomplete)."),
    symmetry: bool = typer.Option(False, "--symmetry", help="Symmetry reduction (safety only: liveness is skipped)."),
    no_liveness: bool = typer.Option(False, "--no-liveness", help="Skip liveness analysis."),
    fingerprints: bool = typer.Option(False, "--fingerprints",
                                      help="Keep 64-bit state fingerprints and a parent map only (about 20 bytes a state; liveness is skipped)."),
    workers: int = typer.Option(1, "--workers", min=1, max=64,
                                help="Worker processes (above 1: fingerprints partitioned by owner; liveness is skipped)."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL",
                                         help="Search as Spark jobs on this master (local[2], spark://HOST:PORT, ...): states "
                                         "partitioned by fingerprint across executors, the seen set in files under "
                                         "--spill-dir; liveness is skipped; limits are checked between levels (spec/spark-search.md)."),
    partitions: Optional[int] = typer.Option(None, "--partitions", min=1, max=100_000,
                                             help="With --master: partitions of the states (default: twice Spark's default parallelism)."),
    spill_dir: Optional[Path] = typer.Option(None, "--spill-dir", metavar="DIR",
                                             help="With --master: where executors keep the search's files (default: the temporary folder)."),
    conf: Optional[List[str]] = typer.Option(None, "--conf", help="With --master: a Spark setting, as spark-submit takes it (repeatable)."),
    report: Optional[Path] = typer.Option(None, "--report", metavar="DIR",
                                          help="Write an HTML page (counterexample viewer), Markdown and JSON into this folder."),
    states: bool = typer.Option(False, "--states", help="Show the full state after every step of a counterexample, not only what changed."),
    trace_out: Optional[Path] = typer.Option(None, "--trace-out", metavar="FILE",
                                             help="Write the first counterexample (of the first violated property, in "
                                             "the model's order) as a trace: FILE.itf.json in Apalache/Quint's "
                                             "Informal Trace Format (a lasso's loop marked), any other name in conq's "
                                             "NDJSON trace format; nothing is written when nothing is violated."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Explore every reachable state of a bounded configuration and check its properties.

    Exit 0: every property holds; 1: a property is violated (or vacuous); 4: a --max-* limit
    ended the search first and no violation was found before it.  With --all-configs each
    configuration is judged against the manifest (spec/manifest: some violate by design): exit 0
    when every result is as expected, 1 otherwise, and the last line says which."""

    def body() -> int:
        from conq.model.engines.explorer import rss_bytes
        from conq.model.engines.registry import load_model, model_class

        overrides = kit.parse_sets(set_)
        folder = None
        if report is not None:
            from conq.conformance.output_folder import OutputFolder

            kit.check_output_dir(report, "--report")
            # a report folder is shared (several checks, conq run): the report's files join what
            # earlier conq runs wrote there; a foreign file, or another run writing there, is exit 2
            folder = OutputFolder(report, command="conq check", option="--report", replace=False)
            folder.check()
        if trace_out is not None:
            if all_configs:
                raise kit.UsageProblem("--trace-out writes one counterexample: not with --all-configs")
            if trace_out.exists() and trace_out.is_dir():
                raise kit.UsageProblem(f"--trace-out {trace_out}: a folder; give a file name")
            if not trace_out.parent.is_dir():
                raise kit.UsageProblem(f"--trace-out {trace_out}: no folder {trace_out.parent}")
        # the options that do not go together first: --max-memory with --master is refused whatever conq uses
        spark = _spark_options(master, partitions, spill_dir, conf, symmetry=symmetry, workers=workers,
                               max_memory=max_memory)
        if max_memory is not None:
            rss = rss_bytes()
            if rss is not None and rss > max_memory * 2**20:
                raise kit.UsageProblem(f"--max-memory {max_memory:g}: conq already uses {rss / 2**20:,.0f} MB before the search starts")
        names = list(model_class(model).configs()) if all_configs else [config]
        models = [load_model(model, cname, overrides) for cname in names]  # every configuration validated first
        if folder is None:
            return _check(model, names, models, overrides, spark, None)
        with folder:  # the lock held for the whole run: a second run into the same folder is refused
            return _check(model, names, models, overrides, spark, folder)

    def _check(model, names, models, overrides, spark, folder) -> int:
        from conq.model.engines.explorer import explore
        from conq.progress import Progress

        results = []
        worst = kit.EXIT_OK
        markdown = []
        judgements = []
        page = None
        if report is not None:
            from conq.html_report import HtmlReport

            page = HtmlReport(f"conq check {model}")
        try:
            for cname, m in zip(names, models):
                cfg_name = getattr(m, "config_name", cname)
                title = f"{m.name} / {cfg_name}"
                with Progress(f"exploring {title}" + (f" on {master}" if master else ""), kit.err, json_out=json_out) as bar:
                    if spark is not None:
                        ex = spark.check(model, cfg_name, overrides, max_states=max_states, max_seconds=max_seconds,
                                         progress=bar.search())
                    else:
                        ex = explore(
                            m,
                            max_states=max_states,
                            max_seconds=max_seconds,
                            max_memory_mb=max_memory,
                            symmetry=symmetry,
                            liveness=not no_liveness,
                            progress=bar.search(),
                            fingerprints=fingerprints,
                            workers=workers,
                        )
                results.append({"config": cfg_name, "settings": config_dict(m.config), **ex.summary()})
                if trace_out is not None:
                    written = _write_counterexample(m, ex, trace_out)
                    results[-1]["trace_out"] = str(written) if written else None
                    if written and not json_out:
                        kit.err.print(f"counterexample trace: {written}", highlight=False)
                worst = _worse(worst, _exploration_code(ex))
                judged = None
                if all_configs:
                    from conq.expectations import judge_exploration

                    judged = judge_exploration(ex, cfg_name if not overrides else f"{cfg_name} (with --set)", symmetry=symmetry,
                                               liveness=not (no_liveness or symmetry or fingerprints or workers > 1 or master))
                    judgements.append(judged)
                    results[-1].update(as_expected=judged.as_expected, expectation=judged.expectation, problems=judged.problems)
                if page is not None:
                    from conq.report import exploration_markdown

                    markdown.append(exploration_markdown(ex, title))
                    page.add_exploration(ex, title, problems=judged.problems if judged else
                                         [f"{v.prop.name}: {v.status}" for v in ex.verdicts if v.status in ("violated", "vacuous", "unreached")],
                                         expected=[v.prop.name for v in ex.violations] if judged and judged.as_expected else ())
                if not json_out:
                    _print_exploration(ex, title, states=states)
                    if judged is not None:
                        kit.out.print(f"[green]as expected[/]: {escape(judged.expectation)}" if judged.as_expected else
                                      f"[bold red]not as expected[/]: {escape('; '.join(judged.problems))}")
        finally:
            if spark is not None:
                spark.close()
        line = ""
        if all_configs:
            from conq.expectations import closing_line

            worst, line = closing_line(judgements)
        if page is not None:
            from conq.report import write_report

            md, _ = write_report(folder.staging, f"check-{Path(model).stem}", "\n".join(markdown), results)
            html = page.write(folder.staging / f"check-{Path(model).stem}.html")
            if not json_out:
                kit.out.print(f"report: {folder.final / html.name} (and {md.name})")
        if json_out:
            kit.emit_json(results if all_configs else results[0])
        elif line:
            kit.out.print(("[green]" if worst == kit.EXIT_OK else "[bold red]") + escape(line) + "[/]")
        return worst

    kit.guard(body, json_out)


class _SparkCheck:
    """``conq check --master``: one Spark session for every configuration checked (the code shipped
    to executors as the package zip on a master that is not local), closed at the end."""

    def __init__(self, master: str, partitions: int | None, spill_dir: Path | None, settings: dict[str, str]):
        self.master, self.partitions, self.spill_dir, self.settings = master, partitions, spill_dir, settings
        self.spark = None
        self.tmp: Path | None = None

    def check(self, model: str, config: str, overrides: dict, **limits: Any):
        from conq.model.engines.spark_search import explore_spark

        if self.spark is None:
            import tempfile

            from conq.conformance.spark_replay import ReplayError, package_zip, spark_session

            try:
                self.spark = spark_session(self.master, app="conq-check", conf=self.settings or None)
            except ReplayError as e:
                raise kit.UsageProblem(str(e)) from None
            if not self.master.startswith("local"):  # executors elsewhere: conq travels with the job
                self.tmp = Path(tempfile.mkdtemp(prefix="conq-check-"))
                self.spark.sparkContext.addPyFile(str(package_zip(self.tmp)))
        return explore_spark(self.spark.sparkContext, model, config, overrides, partitions=self.partitions,
                             spill_dir=str(self.spill_dir) if self.spill_dir else None, **limits)

    def close(self) -> None:
        import shutil

        if self.spark is not None:
            self.spark.stop()
            self.spark = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _spark_options(master, partitions, spill_dir, conf, *, symmetry: bool, workers: int, max_memory) -> _SparkCheck | None:
    """The --master options checked together (exit 2 before any work), or None without --master."""
    if master is None:
        for given, name in ((partitions, "--partitions"), (spill_dir, "--spill-dir"), (conf, "--conf")):
            if given:
                raise kit.UsageProblem(f"{name} is an option of the Spark search: give --master too")
        return None
    kit.check_master(master)
    for given, name in ((symmetry, "--symmetry"), (workers > 1, "--workers"), (max_memory is not None, "--max-memory")):
        if given:
            raise kit.UsageProblem(f"{name} is not an option of the Spark search (--master): the executors' memory "
                                   "is Spark's to set (--conf spark.executor.memory=...)" if name == "--max-memory" else
                                   f"{name} is not an option of the Spark search (--master)")
    if spill_dir is not None and spill_dir.exists() and not spill_dir.is_dir():
        raise kit.UsageProblem(f"--spill-dir {spill_dir}: a file, not a folder")
    return _SparkCheck(master, partitions, spill_dir, kit.parse_conf(conf))


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


def _print_exploration(ex, title: str, *, states: bool = False) -> None:
    """The property table (a cut search never says holds), the counts, and each counterexample
    as its trail: per step who acted and only the fields it changed (``states``: the full state
    too), a lasso's cycle after its prefix."""
    from conq.render import status_text

    table = Table(title=title, title_justify="left")
    table.add_column("property")
    table.add_column("kind")
    table.add_column("status")
    table.add_column("claim", overflow="fold")
    style = {"holds": "green", "witnessed": "green", "violated": "bold red", "skipped": "yellow", "unknown": "yellow",
             "incomplete": "yellow"}
    for v in ex.verdicts:
        table.add_row(v.prop.name, v.prop.kind.value, f"[{style.get(v.status, 'red')}]{escape(status_text(v.status, ex.states))}[/]",
                      v.prop.claim)
    kit.out.print(table)
    rate = f", {ex.states / ex.search_seconds:,.0f} states/s" if ex.search_seconds > 0 else ""
    kit.out.print(
        f"{ex.states:,} distinct states, {ex.transitions:,} transitions, depth {ex.depth}; "
        f"search {ex.search_seconds:.2f} s{rate}, analysis {ex.analysis_seconds:.2f} s"
        + ("" if ex.complete else f" [yellow](incomplete: {escape(ex.stop_reason)})[/]")
    )
    if not ex.complete and not ex.violations:
        kit.out.print(f"[yellow]incomplete:[/] {escape(ex.stop_reason)}: no violation in {ex.states:,} states, and no verdict "
                      f"(exit {kit.EXIT_INCOMPLETE})")
    for v in ex.verdicts:
        if v.status == "violated" and v.path is not None:
            kit.out.print(f"\n[bold red]{v.prop.name}[/] violated: {escape(v.prop.claim)}")
            if v.detail:
                kit.out.print(f"  {v.detail}", markup=False)
            kit.out.print(ex.model.format_path(v.path, cycle=v.cycle, states=states), markup=False)
        elif v.status in ("vacuous", "unreached"):
            kit.out.print(f"[red]{v.prop.name}[/]: {v.status}: {escape(v.detail)}")


def explore(
    model: str = typer.Argument(..., autocompletion=kit.complete_model, help="Model name (see `conq list`) or FILE.py:Class."),
    config: Optional[str] = typer.Option(None, "--config", "-c", autocompletion=kit.complete_config,
                                         help="Named configuration (default: the model's first)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field (repeatable)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port)."),
    max_states: int = typer.Option(2_000_000, "--max-states", min=1,
                                   help="States the model check behind 'violated properties' and the page's table may hold."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Walk a model in the browser: a local page (127.0.0.1) with the state, the enabled actions and
    what each changes, back, every violated property's counterexample, search by a field's value.
    Ctrl-C (or SIGTERM) stops it."""

    def body() -> int:
        import signal
        import socket
        import threading

        from conq.explorer_app import Server, Session
        from conq.model.engines.registry import load_model

        m = load_model(model, config, kit.parse_sets(set_))
        if port:
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as e:
                raise kit.UsageProblem(f"--port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror or e}); try --port 0") from None
            finally:
                probe.close()
        server = Server(Session(m, max_states=max_states, check_states=max_states), port=port).start()
        url = server.url
        kit.err.print(f"conq explore: {m.name} / {getattr(m, 'config_name', config or '')} at [bold]{url}[/] (Ctrl-C stops it)")
        if not json_out:
            kit.out.print(url, markup=False)
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a clean stop on SIGTERM, as on Ctrl-C
        try:
            while server.thread is not None and server.thread.is_alive() and not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.stop()
        kit.emit_json({"ok": True, "url": url, "model": m.name})
        return kit.EXIT_OK

    kit.guard(body, json_out)


def prove(
    model: Optional[str] = typer.Argument(None, help="Model to prove (default: every model with an encoding)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", autocompletion=kit.complete_config,
                                         help="Prove with this named configuration's switches (default: the model's "
                                              "first); BMC then only on its own manifest entries. Needs MODEL."),
    prop: Optional[str] = typer.Option(None, "--property", "-p", help="Only this property."),
    bmc_variants: bool = typer.Option(True, "--bmc/--no-bmc", help="Also run BMC on the manifest's expected violations."),
    slow: bool = typer.Option(False, "--slow", help="BMC also on manifest entries marked slow."),
    # (the default is symbolic.DEFAULT_RLIMIT, written out so that --help needs no z3 import: a test
    # holds the two equal)
    budget: int = typer.Option(100_000_000, "--budget", min=1,
                               help="z3's deterministic work budget (rlimit) per attempt at one query: an induction "
                                    "query that runs out is retried with the next of 8 solver seeds; a BMC depth "
                                    "that runs out is unknown."),
    timeout: float = typer.Option(60.0, "--timeout", min=0.1,
                                  help="Seconds per z3 query, a safety net only (verdicts come from --budget); each "
                                       "BMC query gets three times this."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Prove every `always` property inductive for unbounded sizes (z3); BMC on the upstream variants."""

    def body() -> int:
        from conq.spec import manifest
        from conq.model.engines import symbolic
        from conq.model.engines.explorer import explore
        from conq.model.engines.registry import load_model, model_names

        from conq.model.kernel import ModelError

        if config is not None and model is None:
            raise kit.UsageProblem("--config names a configuration of one model: give the MODEL too")
        names = [model] if model else [n for n in model_names() if n in symbolic.encoded_models()]
        if not names:
            raise kit.UsageProblem("no model has a z3 encoding yet")
        rows: list[dict[str, Any]] = []
        code = kit.EXIT_OK
        for name in names:
            try:
                m = load_model(name, config)
            except ModelError as e:
                raise kit.UsageProblem(str(e)) from None
            enc = symbolic.encoding_for(m)
            try:
                results = symbolic.prove_all(enc, m, only=prop, timeout_ms=int(timeout * 1000), rlimit=budget)
            except KeyError as e:
                raise kit.UsageProblem(str(e.args[0])) from None
            for r in results:
                rows.append({"model": name, "config": getattr(m, "config_name", ""), "mode": "induction", **r.to_json()})
                if r.status in ("not-inductive", "unknown", "violated"):
                    code = kit.EXIT_VIOLATION
            if bmc_variants and prop is None:
                explored: dict[str, Any] = {}
                for exp, pname in manifest.bmc_cases(name, set(enc.invariants()), slow=slow):
                    if config is not None and exp.config != config:
                        continue
                    vm = load_model(name, exp.config, exp.overrides)
                    venc = symbolic.encoding_for(vm)
                    if exp.label not in explored:
                        explored[exp.label] = explore(vm, liveness=False)
                    v = explored[exp.label].verdict(pname)
                    if v.path is None:
                        continue
                    r = symbolic.bmc(venc, vm, pname, len(v.path), timeout_ms=int(timeout * 1000) * 3, rlimit=budget)
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

    kit.guard(kit.with_heartbeat("prove", body, json_out), json_out)


def _write_counterexample(model, ex, path: Path) -> Path | None:
    """The first violated property's counterexample as a trace file (``--trace-out``): the model's
    own actions and observations, with its ``view`` after each step; ``.itf.json``: ITF, state 0 the
    initial state, a lasso's loop marked.  None when nothing is violated."""
    from conq.conformance.trace import Event, Trace, atomic_write, export

    v = next((v for v in ex.verdicts if v.status == "violated" and v.path is not None), None)
    if v is None:
        return None
    steps = list(v.path.steps) + (list(v.cycle.steps) if v.cycle is not None else [])
    tr = Trace(model=model.name, config=config_dict(model.config), config_name=getattr(model, "config_name", None),
               seed=0, generator={"mode": "counterexample", "length": len(steps), "property": v.prop.name,
                                  "claim": v.prop.claim})
    tr.events = [Event(i, a, o, json.loads(json.dumps(model.view(t), default=str))) for i, (a, o, t) in enumerate(steps, 1)]
    itf = path.name.endswith(".itf.json")
    init = json.loads(json.dumps(model.view(v.path.init), default=str))
    loop = len(v.path.steps) if v.cycle is not None else None
    atomic_write(path, export(tr, "itf" if itf else "ndjson", init=init, loop=loop))
    return path
