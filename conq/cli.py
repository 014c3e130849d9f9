"""The ``conq`` command line.

Exit codes, the same for every subcommand:

* 0: success;
* 1: a check found a violation (a counterexample, a divergence, a coverage gap);
* 2: bad usage or bad input, reported before any work is done (the one-line
  message names the option, file, line or field at fault);
* 3: an internal error of conq itself (a one-line message; ``conq --debug ...``
  prints the traceback);
* 4: incomplete: a limit (``--max-states``, ``--max-seconds``, ``--max-memory``)
  ended the run before it could give a verdict.  Not a violation (nothing was
  found) and not a pass: the limits are too small for this input;
* 130: interrupted (Ctrl-C).

``--json``: stdout holds exactly one JSON document, on success and on every
error (``{"ok": false, "exit_code": N, "error": {"kind": ..., "message": ...}}``);
progress and anything else goes to stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from conq import __version__
from conq.spec.catalog import CatalogError
from conq.model.kernel import ModelError, config_dict

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INTERNAL, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class _State:
    debug = bool(os.environ.get("CONQ_DEBUG"))
    #: the --json document of the running command (written by _guard, once, at the end)
    json_doc: Any = None
    json_set = False


def _flag(args: list[str], name: str) -> bool:
    """Whether ``name`` was given (before a ``--`` that ends the options)."""
    return name in (args[: args.index("--")] if "--" in args else args)


def _json_requested(args: list[str]) -> bool:
    return _flag(args, "--json")


class _ConqGroup(TyperGroup):
    """Maps everything onto the documented exit codes, including click's own usage
    errors (2, with a JSON error document under ``--json``) and crashes outside a
    command body (3)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        _State.debug = bool(os.environ.get("CONQ_DEBUG")) or _flag(argv, "--debug")
        if _SYSTEMS_PROBLEM:  # the registry of systems did not load: bad input, before any work
            err.print(f"[bold red]error:[/] {escape(_SYSTEMS_PROBLEM[0])}", markup=True, highlight=False)
            if _json_requested(argv):
                _write_json({"ok": False, "exit_code": EXIT_USAGE, "error": {"kind": "usage", "message": _SYSTEMS_PROBLEM[0]}})
            if standalone_mode:
                sys.exit(EXIT_USAGE)
            return EXIT_USAGE
        try:
            rv = super().main(args=argv, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else EXIT_OK
        except typer.Exit as e:  # pragma: no cover - returned as a code in non-standalone mode
            code = e.exit_code
        except _click_exceptions() as e:
            code = _usage_error(e, json_out=_json_requested(argv))
        except (KeyboardInterrupt, typer.Abort):
            err.print("[bold red]interrupted[/]")
            code = EXIT_INTERRUPTED
        except Exception as e:  # noqa: BLE001 - outside a command body (parsing, a callback): still one line
            code = _internal_error(e, json_out=_json_requested(argv))
        if standalone_mode:
            sys.exit(code)
        return code


def _click_exceptions() -> type[BaseException]:
    from typer import _click

    return _click.exceptions.ClickException


def _usage_error(e: Any, *, json_out: bool) -> int:
    try:
        from typer import rich_utils

        rich_utils.rich_format_error(e)
    except Exception:  # noqa: BLE001 - fall back to click's plain format
        e.show()
    message = e.format_message() if hasattr(e, "format_message") else str(e)
    if json_out:
        _write_json({"ok": False, "exit_code": EXIT_USAGE, "error": {"kind": "usage", "message": message}})
    return EXIT_USAGE


def _internal_message(e: BaseException) -> str:
    where = ""
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        last = tb[-1]
        where = f" (at {Path(last.filename).name}:{last.lineno})"
    return f"internal error: {type(e).__name__}: {e}{where}"


def _internal_error(e: BaseException, *, json_out: bool) -> int:
    message = _internal_message(e)
    if _State.debug:
        traceback.print_exception(e, file=sys.stderr)
    err.print(f"[bold red]error:[/] {escape(message)}" + ("" if _State.debug else " [dim](conq --debug ... prints the traceback)[/]"),
              markup=True, highlight=False)
    if json_out:
        _write_json({"ok": False, "exit_code": EXIT_INTERNAL, "error": {"kind": "internal", "message": message}})
    return EXIT_INTERNAL


app = typer.Typer(
    name="conq",
    help="Consumer/queue coordination: model-check, prove, test conformance, replay traces.",
    epilog="Exit codes: 0 ok, 1 a check found a violation, 2 bad usage or input, 3 internal error, "
    "4 incomplete (a --max-* limit ended the run before a verdict), 130 interrupted.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_ConqGroup,
)
# Piped output (CI logs, files) gets a wide fixed width instead of rich's 80 columns.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 140)

JsonOpt = typer.Option(False, "--json", help="Machine-readable output: exactly one JSON document on stdout, also on errors.")


class UsageProblem(Exception):
    """Bad arguments or bad input: exit 2 with this message."""


def _usage_types() -> tuple[type[BaseException], ...]:
    from conq.conformance.trace import TraceError

    return (UsageProblem, ModelError, CatalogError, TraceError)


def _write_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _emit_json(data: Any) -> None:
    """The command's --json document: written by :func:`_guard` once the body is done."""
    _State.json_doc = data
    _State.json_set = True


@contextlib.contextmanager
def _stdout_reserved() -> Iterator[None]:
    """While a ``--json`` command runs, whatever would reach stdout (a print, a library, the
    JVM or another child process) goes to stderr: stdout is kept for the one document."""
    saved = None
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        fd = None
    if fd == 1:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def _guard(fn: Callable[[], int], json_out: bool = False) -> None:
    """Run a command body and map its outcome onto the documented exit codes; under
    ``--json`` write exactly one document to stdout (the body's, or the error)."""
    _State.json_doc, _State.json_set = None, False
    error: dict[str, Any] | None = None
    try:
        with _stdout_reserved() if json_out else contextlib.nullcontext():
            try:
                code = fn()
            except _usage_types() as e:
                err.print(f"[bold red]error:[/] {escape(str(e))}", markup=True, highlight=False)
                code = EXIT_USAGE
                error = {"kind": "usage", "message": str(e)}
            except (KeyboardInterrupt, typer.Exit, typer.Abort, SystemExit):
                raise
            except Exception as e:  # noqa: BLE001 - a bug of conq's: one line, the traceback under --debug
                code = _internal_error(e, json_out=False)
                error = {"kind": "internal", "message": _internal_message(e)}
    except KeyboardInterrupt:
        if json_out:
            _write_json({"ok": False, "exit_code": EXIT_INTERRUPTED, "error": {"kind": "interrupted", "message": "interrupted"}})
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except SystemExit as e:  # SIGTERM made a clean exit (conformance/adapters.py): still one document
        if json_out and isinstance(e.code, int) and e.code != 0:
            _write_json({"ok": False, "exit_code": e.code, "error": {"kind": "terminated", "message": f"terminated (exit {e.code})"}})
        raise
    if json_out:
        if error is not None:
            _write_json({"ok": False, "exit_code": code, "error": error})
        elif _State.json_set:
            _write_json(_State.json_doc)
        else:  # pragma: no cover - every body emits its document
            _write_json({"ok": code == EXIT_OK, "exit_code": code})
    raise typer.Exit(code)


def _parse_sets(sets: List[str] | None) -> dict[str, str]:
    overrides = {}
    for item in sets or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageProblem(f"--set expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


#: pseudo file systems: nothing conq writes belongs there
_PSEUDO = ("/proc", "/sys", "/dev")


def _check_output_dir(path: Path, option: str) -> None:
    """Refuse, before any work, an output folder that cannot be written: under a file, in
    a pseudo file system, not writable.  Creates nothing (a probe is removed at once)."""
    real = Path(os.path.realpath(path))
    for root in _PSEUDO:
        if real == Path(root) or Path(root) in real.parents:
            if not (root == "/dev" and Path("/dev/shm") in (real, *real.parents)):
                raise UsageProblem(f"{option} {path}: {root} is a pseudo file system, not a place for output")
    existing = real
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise UsageProblem(f"{option} {path}: {existing} is a file, not a folder")
    try:
        probe = tempfile.mkdtemp(prefix=".conq-probe-", dir=existing)
        os.rmdir(probe)
    except OSError as e:
        raise UsageProblem(f"{option} {path}: cannot write in {existing}: {e.strerror or e}") from None


_MASTER = re.compile(
    r"local"
    r"|local\[\s*(\*|[1-9][0-9]*)\s*(,\s*[1-9][0-9]*\s*)?\]"
    r"|local-cluster\[\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*\]"
    r"|spark://[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}(,[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5})*"
    r"|yarn"
    r"|k8s://\S+"
    r"|mesos://\S+"
)


def _check_master(master: str) -> None:
    if not _MASTER.fullmatch(master):
        raise UsageProblem(
            f"--master {master!r}: not a Spark master URL (local, local[N], local[*], local[N,F], "
            "local-cluster[N,C,M], spark://HOST:PORT, yarn, k8s://URL)"
        )


def _check_corpus(corpus: Path) -> None:
    """Every golden trace is read and validated before the suite starts (file:line:field)."""
    from conq.conformance import trace

    if not corpus.exists():
        raise UsageProblem(f"--corpus {corpus}: no such folder")
    if not corpus.is_dir():
        raise UsageProblem(f"--corpus {corpus}: not a folder")
    for path in sorted(corpus.rglob("*.ndjson")):
        trace.read(path, require_known_model=True)


@app.callback(invoke_without_command=True)
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="On an internal error, print the traceback (also: CONQ_DEBUG=1)."),
) -> None:
    if debug:
        _State.debug = True
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

    _guard(body, json_out)


@app.command("check")
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
    json_out: bool = JsonOpt,
) -> None:
    """Explore every reachable state of a bounded configuration and check its properties.

    Exit 0: every property holds; 1: a property is violated (or vacuous); 4: a --max-* limit
    ended the search first and no violation was found before it."""

    def body() -> int:
        from conq.model.engines.explorer import explore, rss_bytes
        from conq.model.engines.registry import load_model, model_class

        overrides = _parse_sets(set_)
        if report is not None:
            _check_output_dir(report, "--report")
        if max_memory is not None:
            rss = rss_bytes()
            if rss is not None and rss > max_memory * 2**20:
                raise UsageProblem(f"--max-memory {max_memory:g}: conq already uses {rss / 2**20:,.0f} MB before the search starts")
        names = list(model_class(model).configs()) if all_configs else [config]
        models = [load_model(model, cname, overrides) for cname in names]  # every configuration validated first
        results = []
        worst = EXIT_OK
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
                out.print(f"report: {md}")
        if json_out:
            _emit_json(results if all_configs else results[0])
        return worst

    _guard(body, json_out)


def _exploration_code(ex) -> int:
    """1 when a property is violated (found before any limit, so a real counterexample);
    else 4 when a limit cut the run short; else 1 when a verdict is not ok (vacuous, unreached)."""
    if ex.violations:
        return EXIT_VIOLATION
    if not ex.complete:
        return EXIT_INCOMPLETE
    return EXIT_OK if ex.ok else EXIT_VIOLATION


def _worse(a: int, b: int) -> int:
    rank = {EXIT_OK: 0, EXIT_INCOMPLETE: 1, EXIT_VIOLATION: 2}
    return a if rank.get(a, 3) >= rank.get(b, 3) else b


@contextlib.contextmanager
def _search_progress(title: str, *, enabled: bool) -> Iterator[Callable | None]:
    """A progress bar on stderr for a long search (states, depth, rate, memory): only on a
    terminal, never under --json; shown from the first tick (after half a second)."""
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.fields[stats]}"),
                   TimeElapsedColumn(), console=err, transient=True)
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
    out.print(table)
    rate = f", {ex.states / ex.search_seconds:,.0f} states/s" if ex.search_seconds > 0 else ""
    out.print(
        f"{ex.states:,} distinct states, {ex.transitions:,} transitions, depth {ex.depth}; "
        f"search {ex.search_seconds:.2f} s{rate}, analysis {ex.analysis_seconds:.2f} s"
        + ("" if ex.complete else f" [yellow](incomplete: {ex.stop_reason})[/]")
    )
    if not ex.complete and not ex.violations:
        out.print(f"[yellow]incomplete:[/] {ex.stop_reason}: no violation found so far, and no verdict (exit {EXIT_INCOMPLETE})")
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
        from conq.spec import catalog

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

    _guard(body, json_out)


@app.command("conformance")
def conformance(
    model: str = typer.Argument("consumer-lists", help="Model whose implementation is checked."),
    impl: str = typer.Option("reference", "--impl", help="'reference' (in-process) or 'stdio:COMMAND' (a port)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration of the model."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE."),
    traces: int = typer.Option(200, "--traces", min=0,
                               help="Generated traces to run (per configuration). With --mode exhaustive, at least "
                               "the number of traces of --length actions (else exit 2; the message gives the count): "
                               "a large value such as 100000000 runs exactly the complete set."),
    seed: int = typer.Option(0, "--seed", min=0, help="Root seed; trace i uses a seed derived from (seed, i)."),
    length: int = typer.Option(40, "--length", min=1, help="Steps per generated trace (depth, for exhaustive)."),
    mode: str = typer.Option("random", "--mode",
                             help="random | coverage | exhaustive (every trace of --length actions; needs --traces "
                             "at least their count, see --traces)"),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Also run the golden traces in this folder."),
    no_snapshots: bool = typer.Option(False, "--no-snapshots", help="Compare observations only, not states."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds a port may take per response."),
    all_configs: bool = typer.Option(False, "--all-configs",
                                     help="Every configuration the conformance suite drives (spec/ports/<model>.md, "
                                     "with its overrides, then --set), one verdict each; the corpus once, first. "
                                     "Not with --config."),
    level: str = typer.Option("call", "--level", help="call | thread (consumer-lists: the threads' steps, "
                              "the checker choosing the interleaving; --traces walks of --length, --mode exhaustive: "
                              "every trace of --length actions)"),
    json_out: bool = JsonOpt,
) -> None:
    """Hold an implementation to the model: corpus and generated traces; exit 1 on any divergence.

    --json prints one document, its shape declared in spec/schemas/conformance.schema.json."""

    def body() -> int:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if level not in ("call", "thread"):
            raise UsageProblem(f"--level must be call or thread, got {level!r}")
        if all_configs and level == "thread":
            raise UsageProblem("--all-configs is for --level call (--level thread drives its own configurations)")
        if all_configs and config is not None:
            raise UsageProblem("--all-configs runs every configuration the suite drives: not with --config")
        if all_configs:
            return _conformance_all_configs(model, impl, set_, traces, seed, length, mode, corpus, not no_snapshots,
                                            timeout, json_out)
        if level == "thread":
            return _thread_conformance(model, impl, config, set_, traces, seed, length, mode, corpus, timeout, json_out,
                                       snapshots=not no_snapshots)

        from conq.conformance.suite import SuiteError, corpus_files, run_suite
        from conq.conformance.trace import TraceError

        if mode not in ("random", "coverage", "exhaustive"):
            raise UsageProblem(f"--mode must be random, coverage or exhaustive, got {mode!r}")
        if corpus is not None:
            _check_corpus(corpus)
        try:
            total = traces + (len(corpus_files(corpus)) if corpus is not None else 0)
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

    _guard(body, json_out)


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
        raise UsageProblem(f"--mode must be random, coverage or exhaustive, got {mode!r}")
    if corpus is not None:
        _check_corpus(corpus)
    extra = _parse_sets(set_)
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
        raise UsageProblem(str(e)) from None
    ok = all(res.ok for _n, _o, res, _m in runs)
    if json_out:
        _emit_json({"model": model, "impl": runs[0][2].impl if runs else impl, "ok": ok,
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
        out.print(table)
        for name, _ov, res, m in runs:
            for f in res.failures:
                out.print(f"[{name or 'corpus'}] " + f.describe(m), markup=False)
    return EXIT_OK if ok else EXIT_VIOLATION


def _thread_conformance(model: str, impl: str, config: Optional[str], set_: Optional[List[str]], traces: int,
                        seed: int, length: int, mode: str, corpus: Optional[Path], timeout: float, json_out: bool,
                        snapshots: bool = True) -> int:
    """``conq conformance --level thread`` (issue 17): the system's thread level (conformance/systems.py,
    ``thread_level``).  ``--no-snapshots``: the steps' observations only, no snapshot after each step
    (GAPS.md 9)."""
    from conq.conformance import systems

    with_threads = systems.names("thread_level")
    if model not in with_threads:
        raise UsageProblem(f"--level thread: only {', '.join(with_threads)} has a thread level, got {model!r}")
    if set_ or corpus is not None:
        raise UsageProblem("--level thread: --set and --corpus are not supported (named thread-level configurations only)")
    if mode not in ("random", "exhaustive"):
        raise UsageProblem(f"--level thread: --mode must be random or exhaustive, got {mode!r}")
    from conq.conformance.suite import SuiteError

    ts = systems.get(model).load("thread_level")

    names = [config] if config else list(ts.THREAD_CONFIGS)
    for name in names:
        if name not in ts.THREAD_CONFIGS and name not in ts.FINDINGS:
            raise UsageProblem(f"--config: no thread-level configuration {name!r} "
                               f"(known: {', '.join([*ts.THREAD_CONFIGS, *ts.FINDINGS])})")
    runs = []
    for name in names:
        try:
            implementation = ts.thread_impl(impl, timeout=timeout)
        except SuiteError as e:
            raise UsageProblem(str(e)) from None
        walks, depth = (0, length) if mode == "exhaustive" else (traces, 0)
        runs.append(ts.check_threads(implementation, name, walks=walks, length=length, seed=seed, depth=depth,
                                     snapshots=snapshots))
    ok = all(r.ok for r in runs)
    if json_out:
        _emit_json({"model": model, "level": "thread", "impl": impl, "ok": ok, "steps": sum(r.steps for r in runs),
                    "configs": [{"config": r.config, "walks": r.walks, "exhaustive": r.exhaustive, "steps": r.steps,
                                 "ok": r.ok, "incomplete": r.incomplete,
                                 "actions": [list(a) for a in r.actions] if not r.ok else [],
                                 "divergence": None if r.ok else r.divergence.describe()} for r in runs]})
    else:
        for r in runs:
            out.print(r.describe(), markup=False)
    if not ok:
        return EXIT_VIOLATION
    return EXIT_INCOMPLETE if any(r.incomplete for r in runs) else EXIT_OK


@app.command("validate")
def validate_log(
    model: str = typer.Argument(..., help="Model the log is validated against."),
    trace_file: Path = typer.Argument(..., metavar="TRACE", help="The log: an observed NDJSON trace (spec/trace-format.md)."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Named configuration (default: the log's, else the model's first); the log's config fields apply over it."),
    level: Optional[str] = typer.Option(None, "--level", help="thread (the model's own steps) or call (its call-level view); default: the log's level, else thread (a recorded trace: call)."),
    max_states: int = typer.Option(200_000, "--max-states", min=1, help="Bound on the states of one closure under hidden steps; hit before a verdict: exit 4."),
    json_out: bool = JsonOpt,
) -> None:
    """Black-box trace validation: can the model, with hidden internal steps between the logged
    events, produce this log?  Exit 0 accepted, 1 rejected (the longest accepted prefix, what the
    model allowed next, a shortest path there), 2 bad log, 4 incomplete (--max-states hit)."""

    def body() -> int:
        from conq.conformance.validate import validate_file

        if level is not None and level not in ("thread", "call"):
            raise UsageProblem(f"--level must be thread or call, got {level!r}")
        res = validate_file(model, str(trace_file), config_name=config, level=level, max_states=max_states)
        if json_out:
            _emit_json(res.to_json())
        else:
            for line in res.describe():
                out.print(line, markup=False)
        return res.exit_code

    _guard(body, json_out)


@app.command("protocol")
def protocol_doc(
    write: bool = typer.Option(False, "--write", help="Regenerate spec/port-protocol.md."),
    json_out: bool = JsonOpt,
) -> None:
    """Print the port protocol (generated from its declarations in code)."""

    def body() -> int:
        import dataclasses

        from conq.spec.catalog import repo_root
        from conq.conformance import protocol

        if json_out:
            _emit_json({
                "version": protocol.PROTOCOL_VERSION,
                "messages": [dataclasses.asdict(m) for m in protocol.MESSAGES],
                "errors": [dataclasses.asdict(e) for e in protocol.ERRORS],
                "failures": [dataclasses.asdict(f) for f in protocol.FAILURES],
            })
        elif write:
            from conq.conformance.trace import atomic_write

            target = repo_root() / "spec" / "port-protocol.md"
            atomic_write(target, protocol.render_markdown())
            out.print(f"wrote {target}")
            from conq.conformance import port_reference  # spec/ports/<model>.md too (issue 17)

            for path in port_reference.write_all(repo_root()):
                out.print(f"wrote {path}")
        else:
            sys.stdout.write(protocol.render_markdown())
        return EXIT_OK

    _guard(body, json_out)


@app.command("replay")
def replay(
    model: str = typer.Argument(..., help="Model whose traces are generated and replayed."),
    traces: int = typer.Option(10_000, "--traces", min=1, help="How many traces."),
    seed: int = typer.Option(0, "--seed", min=0, help="Root seed: trace i is reproducible alone from (seed, i)."),
    length: int = typer.Option(30, "--length", min=1, help="Steps per trace."),
    mode: str = typer.Option("coverage", "--mode", help="coverage (walks aimed at the unexplored frontier) | random | exhaustive (exhaustive prefixes + random walk)."),
    config: Optional[List[str]] = typer.Option(None, "--config", "-c", help="Named configuration of the model; repeated, each is replayed in turn in one Spark session, its output in --out/CONFIG."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a configuration field: KEY=VALUE."),
    impl: str = typer.Option("reference", "--impl", help="'reference', 'stdio:COMMAND' (one port per partition) or 'driver:MODULE:Class'."),
    master: str = typer.Option("local[*]", "--master", help="Spark master URL."),
    out_dir: Path = typer.Option(Path("reports/replay"), "--out", help="Output folder (Parquet tables, summary.json, report.md)."),
    partitions: Optional[int] = typer.Option(None, "--partitions", min=1, help="Spark partitions (default: two per core, at most one per block of 64 traces)."),
    only: Optional[int] = typer.Option(None, "--only", min=0, help="Replay trace INDEX alone, in this process, and print its verdict."),
    no_truth: bool = typer.Option(False, "--no-truth", help="Do not explore the bounded graph for the coverage truth."),
    no_graph: bool = typer.Option(False, "--no-graph", help="For targets beyond the explorer: no exhaustive graph; coverage by state fingerprints, growth curve and a Chao2 estimate of the unseen states (automatic for known large targets)."),
    symmetry: bool = typer.Option(False, "--symmetry", help="Also count coverage by symmetry class (the model's canonical form), against the model's symmetric graph."),
    level: str = typer.Option("call", "--level", help="Protocol level: call, or thread (consumer-lists: the checker chooses the threads' interleaving; --config names one of the thread-level configurations, default one-acquirer)."),
    json_out: bool = JsonOpt,
) -> None:
    """Generate and replay many traces on Spark; report conformance and coverage against the exhaustive graph."""

    def body() -> int:
        import dataclasses

        from conq.conformance.spark_replay import ReplayError, ReplayParams, close_session, replay_one, resolve_output, run_replay

        configs = list(config) if config else [None]
        several = len(configs) > 1
        if several and (only is not None or len(set(configs)) < len(configs)):
            raise UsageProblem("--config: give distinct configurations" if only is None
                               else "--only replays one trace of one configuration: give one --config")

        if mode not in ("random", "coverage", "exhaustive"):
            raise UsageProblem(f"--mode must be random, coverage or exhaustive, got {mode!r}")
        if only is None:
            _check_master(master)
            _check_output_dir(out_dir, "--out")
        params = ReplayParams(model=model, config_name=configs[0], overrides=_parse_sets(set_), traces=traces,
                              seed=seed, length=length, mode=mode, impl=impl, symmetry=symmetry, level=level)
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
            if several:  # every configuration and output folder checked before the first replay
                from conq.conformance.spark_replay import target_model

                for c in configs:
                    target_model(dataclasses.replace(params, config_name=c))
                    resolve_output(out_dir / c)
            summaries = []
            try:
                for c in configs:  # one kept Spark session serves them all (issue 20)
                    summaries.append(run_replay(dataclasses.replace(params, config_name=c), master=master,
                                                out=out_dir / c if several else out_dir, partitions=partitions,
                                                truth=not (no_truth or no_graph), say=say, keep_session=several))
            finally:
                close_session()
        except ReplayError as e:
            raise UsageProblem(str(e)) from None
        if json_out:
            _emit_json([dataclasses.asdict(s) for s in summaries] if several else dataclasses.asdict(summaries[0]))
        for s in ([] if json_out else summaries):
            table = Table(title=f"replay: {model}" + (f"/{s.params['config_name']}" if several else "") + f" on {master}", title_justify="left")
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
            if s.state_estimate:
                from conq.conformance.coverage_estimate import Estimate

                e = Estimate(**{k: s.state_estimate[k] for k in ("observed", "units", "q1", "q2", "estimate", "se", "low", "high", "conf", "sample_coverage")})
                out.print(f"states, estimated (Chao2 per {s.unit}): {e.describe()}", markup=False)
            for v in s.violations[:5]:
                out.print(f"[red]trace {v['index']}[/]: {v['divergence']}\n  minimised: {v['minimised']}\n  replay: {v['replay']}")
            if s.states_covered_canonical is not None:
                out.print(f"symmetry classes seen: {s.states_covered_canonical:,}"
                          + (f" / {s.graph_states_canonical:,} ({100 * s.state_fraction_canonical:.1f}%)" if s.graph_states_canonical else "")
                          + (f"; symmetric graph: {s.symmetric_graph_states:,} states" if s.symmetric_graph_states else ""), markup=False)
            out.print(f"report: {s.out}/report.md")
        return EXIT_OK if all(s.ok for s in summaries) else EXIT_VIOLATION

    _guard(body, json_out)


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
        from conq.spec import manifest
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

    _guard(body, json_out)


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
    hits the safety cap is reported as capped: the run is incomplete (exit 4) unless a
    survivor or a false alarm fails it (exit 1)."""

    def body() -> int:
        from conq.conformance.mutation import Budget, capped_cells, catalogue, catalogue_names, run_catalog

        if model not in catalogue_names():
            raise UsageProblem(f"no mutant catalogue for model {model!r} (known: {', '.join(catalogue_names())})")
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
        if survivors or false_alarms:
            return EXIT_VIOLATION
        return EXIT_INCOMPLETE if capped else EXIT_OK

    _guard(body, json_out)


@app.command("run")
def run(
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Where the report goes."),
    quick: bool = typer.Option(False, "--quick", help="Skip manifest entries marked slow."),
    json_out: bool = JsonOpt,
) -> None:
    """The main job: model-check every manifest entry, run the engines that exist, write reports/."""

    def body() -> int:
        from conq.jobs import main_job

        _check_output_dir(out_dir, "--out")
        return main_job(out_dir, quick=quick, json_out=json_out, console=out, progress=err, emit_json=_emit_json)

    _guard(body, json_out)


#: the kit a system's own commands are given (conformance/systems.py, ``System.commands``)
guard, emit_json, check_output_dir, check_master = _guard, _emit_json, _check_output_dir, _check_master
#: why the systems could not be loaded (a broken ``CONQ_SYSTEMS`` target): every command then exits 2
_SYSTEMS_PROBLEM: list[str] = []


def _add_system_commands() -> None:
    """Each registered system's own commands (``conq broker``, ``conq upstream``: ordered consumption's)."""
    from conq.conformance import systems

    try:
        for system in systems.systems("commands"):
            system.load("commands")(app, sys.modules[__name__])
    except (ModelError, ValueError) as e:
        _SYSTEMS_PROBLEM.append(f"{systems.ENV}: {e}")


_add_system_commands()


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
