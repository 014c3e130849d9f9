"""The conformance suite: the golden corpus plus generated traces, against an
implementation (the reference in-process, or a port over stdio).

``conq conformance`` is a thin shell over :func:`run_suite`.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from conq.model.kernel import Model
from .views import conformance_model

from . import generate, trace
from .adapters import Implementation, Stdio, reference
from .checker import Checker, RunResult


class SuiteError(ValueError):
    """Bad suite input (unknown implementation spec, unreadable corpus...)."""


#: the share of a generated trace's steps that probe a call no consistent model state enables (the
#: port must answer error 13; issue 35): random walks and coverage traces
PROBE = 0.1
#: the first words of a port command that mean "the Python running conq": the README's
#: ``stdio:python -m conq.conformance.port`` works without an active virtual environment
PYTHONS = ("python", "python3")


class PortUnusable(SuiteError):
    """The port cannot be started or does not answer ``init``: nothing can be checked, and nothing is
    retried (issue 35: a port that does not start is not restarted for every trace).  ``unsupported``:
    it answered error 14, the configuration (or the level) is not one it implements."""

    def __init__(self, failure: Any, what: str):
        self.failure = failure
        self.unsupported = getattr(failure, "code", None) == "definite-error" and getattr(failure, "error", None) == 14
        head = (f"the port does not support {what}" if self.unsupported
                else f"the port cannot be used ({getattr(failure, 'code', 'failure')} at init, {what})")
        super().__init__(f"{head}: {failure}")


def preflight(impl: Implementation, model_name: str, config: dict[str, Any], what: str, seed: int = 0) -> None:
    """Start ``impl`` on ``config`` once, before any trace: a port that does not start, exits, hangs
    or refuses ``init`` raises :class:`PortUnusable` (the failure names the request and the tail of
    the port's stderr) and is ended; one that starts is left running for the first trace."""
    from .adapters import PortFailure

    try:
        impl.start(model_name, config, seed)
    except PortFailure as e:
        impl.close()
        raise PortUnusable(e, what) from None
    except ValueError as e:  # an in-process driver refusing the configuration (the reference's switches)
        impl.close()
        raise SuiteError(f"the implementation does not support {what}: {e}") from None


def port_command(command: str) -> str:
    """``command`` with a leading ``python``/``python3`` replaced by this interpreter
    (``sys.executable``): the one that has conq installed, whatever ``python`` is on PATH."""
    head, sep, rest = command.strip().partition(" ")
    return f"{shlex.quote(sys.executable)}{sep}{rest}" if head in PYTHONS else command.strip()


def make_impl(spec: str, model: str, *, timeout: float = 10.0, max_line_bytes: int | None = None) -> Implementation:
    """``reference``, ``stdio:COMMAND``, ``driver:module:Class`` /
    ``driver:FILE.py:Class`` (an in-process driver of your own), or
    ``mutant:NAME`` (the reference with a mutant of the catalog applied).
    ``max_line_bytes`` caps one port reply (default: ``$CONQ_PORT_MAX_LINE_BYTES``
    or :data:`adapters.DEFAULT_MAX_LINE_BYTES`)."""
    if spec.startswith("mutant:"):
        from .adapters import InProcess
        from .mutation import catalogue_names, mutant_driver

        # the mutant catalogue of this model's system (conformance/systems.py)
        if model not in catalogue_names():
            raise SuiteError(f"--impl {spec}: no mutant catalogue for model {model!r} (known: {', '.join(catalogue_names())})")
        try:
            return InProcess(mutant_driver(model, spec[len("mutant:"):]), name=spec)
        except ValueError as e:
            raise SuiteError(f"--impl {spec}: {e}") from None
    if spec.startswith("driver:"):
        from .adapters import InProcess

        try:
            return InProcess(spec[len("driver:"):])
        except (ValueError, ImportError) as e:
            raise SuiteError(f"--impl {spec}: {e}") from None
    if spec == "reference":
        try:
            return reference(model)
        except ValueError as e:
            raise SuiteError(str(e)) from None
    if spec.startswith("stdio:") and spec[6:].strip():
        try:
            impl = Stdio(port_command(spec[6:]), timeout=timeout, max_line_bytes=max_line_bytes)
            impl.name = spec  # reported as given
            return impl
        except ValueError as e:
            raise SuiteError(f"--impl {spec}: {e}") from None
    raise SuiteError(f"--impl must be 'reference', 'stdio:COMMAND', 'driver:MODULE:Class' or 'mutant:NAME', got {spec!r}")


class PerConfiguration:
    """An implementation that is started afresh (``init``, never ``reset``) whenever the model or
    the configuration changes: the protocol's ``reset`` keeps the configuration of the ``init``
    before it, so a corpus of traces of several configurations must not reuse one port across
    them (issue 17).  In-process drivers are rebuilt at every start anyway."""

    def __init__(self, impl: Implementation):
        self.impl = impl
        self.name = impl.name
        self._started: tuple | None = None

    def start(self, model: str, config: dict[str, Any], seed: int) -> None:
        key = (model, repr(sorted(config.items())))
        if self._started is not None and self._started != key:
            self.impl.close()  # a port is shut down; the next start spawns a fresh one with init
        self._started = key
        self.impl.start(model, config, seed)

    def do(self, action: tuple) -> Any:
        return self.impl.do(action)

    def snapshot(self) -> Any | None:
        return self.impl.snapshot()

    def close(self) -> None:
        self._started = None
        self.impl.close()


@dataclass
class Failure:
    source: str  # "corpus:FILE" or "random seed N"
    result: RunResult
    replay: str  # the command that replays this failure alone

    def describe(self, model: Model) -> str:
        d = self.result.divergence
        text = f"{self.source}: {d.describe()}"
        if self.result.minimised is not None:
            text += "\n  minimised: " + " ; ".join(model.format_action(a, None).split(" -> ")[0] for a in self.result.minimised)
        elif self.result.actions:
            # not minimised (a corpus trace, a port failure): the actions up to the failing step, so the
            # state it failed in can be rebuilt without reading the trace file (GAPS.md entry 10)
            upto = self.result.actions[: d.step] if d.step else self.result.actions
            text += f"\n  actions (1..{len(upto)}): " + " ; ".join(model.format_action(a, None).split(" -> ")[0] for a in upto)
        return text + f"\n  replay: {self.replay}"


@dataclass
class SuiteResult:
    model: str
    impl: str
    traces: int = 0
    steps: int = 0
    seconds: float = 0.0
    corpus: int = 0
    corpus_ok: int = 0
    failures: list[Failure] = field(default_factory=list)
    #: exhaustive mode: every trace of the depth asked for (the count), all run
    exhaustive_traces: int | None = None
    #: corpus traces expected to diverge whose actions were replayed against the implementation
    corpus_replayed_diverge: int = 0
    #: corpus traces left out (``run_suite``'s ``corpus_filter``): (file name, why)
    corpus_skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0

    def to_json(self, model: Model) -> dict[str, Any]:
        return {
            "model": self.model,
            "impl": self.impl,
            "ok": self.ok,
            "traces": self.traces,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps_per_second),
            "corpus": {"traces": self.corpus, "as_expected": self.corpus_ok,
                       "diverge_replayed": self.corpus_replayed_diverge},
            "exhaustive": ({"traces": self.exhaustive_traces, "complete": self.traces >= self.exhaustive_traces}
                           if self.exhaustive_traces is not None else None),
            "failures": [
                {
                    "source": f.source,
                    "step": f.result.divergence.step,
                    "kind": f.result.divergence.kind,
                    # how a port failed (protocol.FAILURES), or "definite-error" for an error answer
                    # reported as an observation; null for every other divergence
                    "failure": f.result.divergence.failure or None,
                    "divergence": f.result.divergence.describe(),
                    "actions": [list(a) for a in f.result.actions],
                    "minimised": [list(a) for a in f.result.minimised] if f.result.minimised is not None else None,
                    "replay": f.replay,
                }
                for f in self.failures
            ],
        }


def corpus_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise SuiteError(f"corpus folder not found: {directory}")
    return sorted(directory.rglob("*.ndjson"))


def run_suite(
    model_name: str,
    *,
    impl_spec: str = "reference",
    config_name: str | None = None,
    overrides: dict[str, Any] | None = None,
    traces: int = 100,
    seed: int = 0,
    length: int = 40,
    mode: str = "random",
    corpus: Path | None = None,
    snapshots: bool = True,
    minimise: bool = True,
    max_failures: int = 5,
    timeout: float = 10.0,
    on_trace: Callable[[], None] | None = None,
    max_line_bytes: int | None = None,
    probe: float = PROBE,
    corpus_filter: Callable[[Any], str | None] | None = None,
) -> tuple[SuiteResult, Model]:
    """The corpus (with ``corpus``), then ``traces`` generated traces of ``mode``.  ``probe``: the
    share of a random or coverage trace's steps that send a call the model has disabled (0: none).
    ``corpus_filter(trace)``: a reason to leave a golden trace out (a configuration the port does not
    support), or None; the traces left out are listed in ``SuiteResult.corpus_skipped``."""
    model = conformance_model(model_name, config_name, overrides)
    if mode == "exhaustive":
        total = generate.count_exhaustive(model, length)
        if total > traces:
            # "exhaustive" means every trace: a run that would stop part-way is refused up front,
            # never reported as a pass of what it did not run
            raise SuiteError(
                f"--mode exhaustive at --length {length} is {total:,} traces of {model.name}"
                + (f" ({getattr(model, 'config_name', None) or 'this configuration'})")
                + f"; --traces {traces:,} would run only part of them: pass --traces {total} (or more), "
                "or a shorter --length")
    impl = PerConfiguration(make_impl(impl_spec, model.name, timeout=timeout, max_line_bytes=max_line_bytes))
    res = SuiteResult(model=model.name, impl=impl.name)
    if mode == "exhaustive":
        res.exhaustive_traces = total
    t0 = time.perf_counter()
    try:
        if corpus is not None:
            _run_corpus(model_name, impl, corpus, res, snapshots, minimise, on_trace, impl_spec=impl_spec,
                        timeout=timeout, corpus_filter=corpus_filter)
        if traces:
            # a port that cannot start or refuses init stops the run here (exit 2), not at every trace
            from conq.model.kernel import config_dict

            preflight(impl, model.name, config_dict(model.config),
                      f"configuration {config_name!r}" if config_name else "the default configuration")
        checker = Checker(model, impl, snapshots=snapshots)
        base = f"conq conformance {model_name}" + (f" --config {config_name}" if config_name else "")
        base += "".join(f" --set {k}={v}" for k, v in (overrides or {}).items())
        base += _impl_option(impl_spec)
        for source, run in _generated(model, checker, traces, seed, length, mode, probe):
            res.traces += 1
            res.steps += run.steps
            generated = sum(1 for f in res.failures if not f.source.startswith("corpus:"))
            if not run.ok and generated < max_failures:  # at most max_failures generated ones; every corpus one
                if minimise and run.divergence.kind != "port":
                    checker.minimise(run)
                replay = f"{base} --mode {mode} --traces 1 --seed {source[1]} --length {length}" if mode != "exhaustive" else f"{base} --mode exhaustive --length {length}"
                res.failures.append(Failure(source[0], run, replay))
            if on_trace:
                on_trace()
    finally:
        impl.close()
        res.seconds = time.perf_counter() - t0
    return res, model


def _impl_option(impl_spec: str) -> str:
    """``--impl SPEC`` for a replay command (nothing for the reference)."""
    return f" --impl {shlex.quote(impl_spec)}" if impl_spec != "reference" else ""


def _generated(model: Model, checker: Checker, traces: int, seed: int, length: int, mode: str,
               probe: float = 0.0) -> Iterator[tuple[tuple[str, int], RunResult]]:
    if mode == "random":
        # Walk online from the consistent model states: the implementation's own
        # resolution of nondeterminism never strands a pre-generated trace.
        for i in range(traces):
            s = generate.derive_seed(seed, i)
            yield (f"random trace {i} (seed {s})", s), checker.walk(s, length, probe)
    elif mode == "coverage":
        seen = generate.CoverageMemory()
        for i in range(traces):
            s = generate.derive_seed(seed, i)
            tr = generate.coverage_guided(model, s, length, seen, probe=probe)
            yield (f"coverage trace {i} (seed {s})", s), checker.replay(tr.actions(), s)
    elif mode == "exhaustive":
        # run_suite checked that ``traces`` covers them all
        for i, tr in enumerate(generate.exhaustive(model, length)):
            yield (f"exhaustive trace {i}", seed), checker.replay(tr.actions(), seed)
    else:
        raise SuiteError(f"--mode must be random, coverage or exhaustive, got {mode!r}")


def _run_corpus(model_name, impl, directory: Path, res: SuiteResult, snapshots: bool, minimise: bool, on_trace, *,
                impl_spec: str = "reference", timeout: float = 10.0,
                corpus_filter: Callable[[Any], str | None] | None = None) -> None:
    """Golden traces: the model's verdict on the recorded observations must be
    the one the trace expects; the actions of every trace are then replayed
    against the implementation, which must conform on them: for a trace expected
    to pass, that is its recorded run; for a trace expected to diverge (a known
    bug's counterexample, recorded from a mutant), the implementation must not
    reproduce the bug.  Each trace starts the implementation with its own
    configuration (``impl`` is a :class:`PerConfiguration`).  A thread-level trace
    (header ``"level": "thread"``) is held to its system's thread-step view and
    replayed against the implementation at the thread level (``impl_spec`` started
    with ``init``'s ``level``), one port for all of them."""
    threads: Any = None  # the implementation at the thread level, started at the first thread trace
    try:
        for path in corpus_files(directory):
            tr = trace.read(path)  # raises TraceError with file:line
            if tr.model != model_name:
                continue
            why = corpus_filter(tr) if corpus_filter is not None else None
            if why:
                res.corpus_skipped.append((path.name, why))
                continue
            if tr.level == "thread":
                model = _thread_model(tr)
                if threads is None:
                    threads = PerConfiguration(_system_thread_level(model_name).thread_impl(impl_spec, timeout=timeout))
                target = threads
            else:
                model = conformance_model(tr.model, None, tr.config)
                target = impl
            _corpus_trace(model_name, model, target, path, tr, res, snapshots, impl_spec)
            if on_trace:
                on_trace()
    finally:
        if threads is not None:
            threads.close()


def _system_thread_level(model_name: str) -> Any:
    from . import systems

    system = systems.find(model_name)
    ts = system.load("thread_level") if system is not None else None
    if ts is None:
        raise SuiteError(f"a thread-level golden trace of {model_name!r}, which has no thread level")
    return ts


def _thread_model(tr: Any) -> Model:
    """The thread-step view a thread-level golden trace is held to: its system's thread-level
    configuration ``config_name``, with the trace's configuration fields."""
    ts = _system_thread_level(tr.model)
    try:
        return ts.thread_model(tr.config_name, tr.config)
    except ValueError as e:
        raise SuiteError(f"thread-level golden trace (config_name {tr.config_name!r}): {e}") from None


def _corpus_trace(model_name, model, impl, path: Path, tr: Any, res: SuiteResult, snapshots: bool,
                  impl_spec: str) -> None:
    """One golden trace: the model's verdict on its recorded observations, then its actions replayed."""
    from .checker import Divergence, check_recorded

    res.corpus += 1
    expect = tr.expect or "pass"
    offline = check_recorded(model, tr.events)
    problem = None
    source = f"corpus:{path.name}"
    if expect == "pass" and offline is not None:
        problem = offline
    elif expect == "diverge" and offline is None:
        problem = Divergence(len(tr.events), ("end",), None, [], "expectation", "the trace is expected to diverge from the model, and it does not")
    run = None
    if problem is None:
        run = Checker(model, impl, snapshots=snapshots).check_trace(tr)
        res.steps += run.steps
        if expect == "diverge":
            res.corpus_replayed_diverge += 1
        if not run.ok:
            problem = run.divergence
            if expect == "diverge":
                note = (tr.generator or {}).get("note") or "the known bug this trace records"
                source = f"corpus:{path.name} (its actions replayed; this trace records {note})"
    if problem is None:
        res.corpus_ok += 1
    else:
        result = run or RunResult(seed=tr.seed, actions=tr.actions(), observations=[e.observation for e in tr.events])
        result.divergence = problem
        res.failures.append(Failure(source, result, f"conq conformance {model_name} --corpus {shlex.quote(str(path.parent))} "
                                                     f"--traces 0{_impl_option(impl_spec)}"))
