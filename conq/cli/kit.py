"""The kit every ``conq`` command is built with: the application and its exit codes, the two
consoles (stdout for results, stderr for progress), ``--json``'s one document, the guard every
command body runs under (:func:`guard`: usage problems exit 2 with one line, a crash exits 3 with
one line, the traceback under ``--debug``), and the checks of input every command shares (output
folders, Spark masters, corpora, ``--set``).

A command uses it as ``kit.out``, ``kit.err``, ``kit.guard(body, json_out)``: looked up when the
command runs, so a test may replace a console.  A system's own commands get this module too
(conformance/systems.py, ``System.commands``): the layers under the command line never import it.
"""

from __future__ import annotations

import contextlib
import enum
import io
import json
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, List

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from conq import __version__
from conq.spec.catalog import CatalogError
from conq.model.kernel import ModelError

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INTERNAL, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

#: why the systems could not be loaded (a broken ``CONQ_SYSTEMS`` target): every command then exits 2
SYSTEMS_PROBLEM: list[str] = []


class _State:
    debug = bool(os.environ.get("CONQ_DEBUG"))
    #: the --json document of the running command (written by guard, once, at the end)
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
        tidy_params(self)
        _State.debug = bool(os.environ.get("CONQ_DEBUG")) or _flag(argv, "--debug")
        if SYSTEMS_PROBLEM:  # the registry of systems did not load: bad input, before any work
            err.print(f"[bold red]error:[/] {escape(SYSTEMS_PROBLEM[0])}", markup=True, highlight=False)
            if _json_requested(argv):
                write_json({"ok": False, "exit_code": EXIT_USAGE, "error": {"kind": "usage", "message": SYSTEMS_PROBLEM[0]}})
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


def tidy_params(group: Any) -> None:
    """Help and usage name what an option takes, not a Python type: a flag shows nothing (not
    ``<bool>``), a choice its choices, others a word (N, NUMBER, PATH, NAME, KEY=VALUE) unless the
    option gives its own metavar; an argument shows its name alone."""

    def word(param: Any) -> str:
        desc = getattr(param, "type_descriptor", None)
        if desc is not None and desc.is_choice:
            return "[" + "|".join(str(c.value if isinstance(c, enum.Enum) else c) for c in desc.choices or ()) + "]"
        if desc is not None and desc.is_path:
            return "PATH"
        bare = param.bare_type() if hasattr(param, "bare_type") else ""
        if bare in ("int", "list[int]") or (desc is not None and desc.is_ranged and desc.ranged_type_name == "int"):
            return "N"
        if bare in ("float", "list[float]") or (desc is not None and desc.is_ranged):
            return "NUMBER"
        named = {"set_": "KEY=VALUE", "conf": "KEY=VALUE", "config": "NAME"}
        return named.get(param.name or "", (param.name or "value").strip("_").upper().replace("_", "-"))

    def no_type(ctx: Any) -> str:
        return ""

    def visit(cmd: Any) -> None:
        if not getattr(cmd, "_conq_tidy", False) and hasattr(cmd, "get_help_option"):
            cmd._conq_tidy = True
            original = cmd.get_help_option

            def help_option(ctx: Any, original: Any = original) -> Any:
                opt = original(ctx)
                if opt is not None:
                    opt.metavar = ""
                return opt

            cmd.get_help_option = help_option
        for param in getattr(cmd, "params", []):
            if getattr(param, "_conq_tidy", False):
                continue
            param._conq_tidy = True
            if getattr(param, "is_flag", False):
                param.metavar = ""
            elif param.metavar is None:
                param.metavar = word(param)
            if getattr(param, "param_type_name", "") == "argument":
                param.display_type_rich = no_type  # the name (MODEL) says it; no <str> beside it
        for sub in getattr(cmd, "commands", {}).values():
            visit(sub)

    visit(group)


def complete_model(incomplete: str) -> list[str]:
    """Shell completion of a model argument: the registered models."""
    from conq.model.engines.registry import model_names

    return [n for n in model_names() if n.startswith(incomplete)]


def complete_config(ctx: Any, incomplete: str) -> list[str]:
    """Shell completion of --config: the named configurations of the model given before it."""
    from conq.model.engines.registry import model_class

    try:
        names = list(model_class(ctx.params.get("model") or "consumer-lists").configs())
    except Exception:  # noqa: BLE001 - no model yet, or an unknown one: nothing to offer
        return []
    return [n for n in names if n.startswith(incomplete)]


class TraceMode(str, enum.Enum):
    """How traces are generated (conformance, replay)."""

    random = "random"
    coverage = "coverage"
    exhaustive = "exhaustive"


class ExportFormat(str, enum.Enum):
    """How a trace is written for a debugger or other tools: conq's own NDJSON trace format
    (spec/trace-format.md) or the Informal Trace Format of Apalache and Quint."""

    ndjson = "ndjson"
    itf = "itf"


class Level(str, enum.Enum):
    """The protocol level a port is driven at."""

    call = "call"
    thread = "thread"


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
        write_json({"ok": False, "exit_code": EXIT_USAGE, "error": {"kind": "usage", "message": message}})
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
        write_json({"ok": False, "exit_code": EXIT_INTERNAL, "error": {"kind": "internal", "message": message}})
    return EXIT_INTERNAL


app = typer.Typer(
    name="conq",
    help="Consumer/queue coordination: model-check, prove, test conformance, replay traces.",
    epilog="Exit codes: 0 ok, 1 a check found a violation, 2 bad usage or input, 3 internal error, "
    "4 incomplete (a --max-* limit ended the run before a verdict), 130 interrupted.",
    no_args_is_help=True,
    add_completion=True,
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
    from conq.conformance.output_folder import OutputRefused
    from conq.conformance.trace import TraceError

    return (UsageProblem, ModelError, CatalogError, TraceError, OutputRefused)


def write_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def emit_json(data: Any) -> None:
    """The command's --json document: written by :func:`guard` once the body is done."""
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


def guard(fn: Callable[[], int], json_out: bool = False) -> None:
    """Run a command body and map its outcome onto the documented exit codes; under
    ``--json`` write exactly one document to stdout (the body's, or the error)."""
    from conq.conformance.adapters import sigterm_exits

    _State.json_doc, _State.json_set = None, False
    error: dict[str, Any] | None = None
    try:
        # SIGTERM is a clean exit 143 in every command (its cleanup runs, --json still gets its one
        # document); a command that stops on SIGTERM by design (broker serve) installs its own handler
        with sigterm_exits(), _stdout_reserved() if json_out else contextlib.nullcontext():
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
            write_json({"ok": False, "exit_code": EXIT_INTERRUPTED, "error": {"kind": "interrupted", "message": "interrupted"}})
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except SystemExit as e:  # SIGTERM made a clean exit (conformance/adapters.py): still one document
        if json_out and isinstance(e.code, int) and e.code != 0:
            write_json({"ok": False, "exit_code": e.code, "error": {"kind": "terminated", "message": f"terminated (exit {e.code})"}})
        raise
    if json_out:
        if error is not None:
            write_json({"ok": False, "exit_code": code, "error": error})
        elif _State.json_set:
            write_json(_State.json_doc)
        else:  # pragma: no cover - every body emits its document
            write_json({"ok": code == EXIT_OK, "exit_code": code})
    raise typer.Exit(code)


def parse_sets(sets: List[str] | None) -> dict[str, str]:
    overrides = {}
    for item in sets or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageProblem(f"--set expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def with_heartbeat(title: str, fn: Callable[[], int], json_out: bool) -> Callable[[], int]:
    """``fn`` run under a heartbeat: piped or under ``--json``, a line to stderr every 10 s while
    it works (conq/progress.py); on a terminal the command's own output shows it is alive."""

    def run() -> int:
        from conq.progress import Progress

        with Progress(title, err, json_out=json_out, live=False, heartbeat=json_out or not err.is_terminal):
            return fn()

    return run


def parse_conf(items: List[str] | None) -> dict[str, str]:
    """``--conf KEY=VALUE`` (as spark-submit takes it): Spark settings, each a ``spark.`` key."""
    settings = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise UsageProblem(f"--conf expects KEY=VALUE, got {item!r}")
        if not key.startswith("spark."):
            raise UsageProblem(f"--conf {key}: not a Spark setting (Spark's settings start with 'spark.')")
        settings[key] = value.strip()
    return settings


def setting_text(value: Any) -> str:
    """A configuration value as ``--set`` takes it back: JSON (``true``, ``[[2,true],[1,false]]``),
    a string bare (``until-empty``)."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def judge_divergences(divergences: dict[str, dict[str, Any]]) -> tuple[int, str]:
    """A campaign's divergences against the known, documented classes: the exit code and the
    closing line (conq/expectations.py; given to a system's commands through the kit)."""
    from conq.expectations import judge_divergences as judge

    return judge(divergences)


#: pseudo file systems: nothing conq writes belongs there
_PSEUDO = ("/proc", "/sys", "/dev")


def check_output_dir(path: Path, option: str) -> None:
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


def check_master(master: str) -> None:
    if not _MASTER.fullmatch(master):
        raise UsageProblem(
            f"--master {master!r}: not a Spark master URL (local, local[N], local[*], local[N,F], "
            "local-cluster[N,C,M], spark://HOST:PORT, yarn, k8s://URL)"
        )


def check_corpus(corpus: Path) -> None:
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
