"""Certifying a port: one command, every check a port author needs (issue 35; Maelstrom's ``maelstrom
test``, Jepsen's single verdict).

``conq certify MODEL --impl CMD`` runs, against one implementation:

1. a preflight: ``init`` of every configuration the conformance suite drives, at call level and (if
   the system has one) at thread level.  A port that does not start, exits, hangs, or answers
   ``init`` with anything but ``init_ok`` or error 14 stops the run at once (exit 2, its stderr):
   nothing is restarted per trace.  A configuration answered with error 14 is *unsupported*: its
   checks are listed as skipped, with the port's reason; a port without the thread level (error 14
   to ``"level": "thread"``, or ``init_ok`` without the feature ``thread-steps``) has its thread-level
   checks skipped.  A port that supports no configuration at all certifies nothing: exit 2;
2. the golden corpus (call and thread level), the traces of unsupported configurations left out;
3. per supported configuration, at call level: random walks, coverage-guided traces and a short
   exhaustive run (every trace of a length whose count fits the budget), all of them probing
   disabled calls (the port must refuse them with error 13);
4. per supported thread-level configuration: random walks (probing too) and a short exhaustive run.

One table, one verdict: exit 0 when every check that ran conforms, 1 when one diverges (each
failure with its seed, minimised trace and replay command), 2 for bad input or an unusable port.

:func:`plan` does the preflight and returns the checks, each runnable alone: ``certify`` runs them
in order, the pytest plugin (conformance/pytest_plugin.py) makes each one a test.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from . import systems
from .suite import PROBE, PortUnusable, SuiteError, make_impl, run_suite


@dataclass(frozen=True)
class Budget:
    """How much each check runs: counts of traces and steps, never seconds."""

    #: call level: random walks and coverage-guided traces per configuration, their length
    traces: int = 30
    coverage: int = 15
    length: int = 40
    #: call level: the exhaustive run's length, shortened until its trace count is at most the cap
    exhaustive_length: int = 5
    exhaustive_cap: int = 3000
    #: thread level: random walks per configuration, their length; the exhaustive run's depth and cap
    thread_walks: int = 15
    thread_length: int = 30
    thread_depth: int = 6
    thread_cap: int = 3000
    #: the share of generated steps that probe a disabled call
    probe: float = PROBE
    seed: int = 0


@dataclass
class Result:
    """One check's outcome: one row of the table."""

    level: str  # corpus | call | thread
    config: str | None
    mode: str  # corpus | random | coverage | exhaustive
    verdict: str  # conforms | DIVERGES | skipped
    traces: int = 0
    steps: int = 0
    #: skipped: why; exhaustive: the length it ran at
    note: str = ""
    #: each divergence: its JSON (the failure entry of ``conq conformance --json``, or a thread-level
    #: one), and its description in words with the replay command
    failures: list[dict[str, Any]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict != "DIVERGES"

    @property
    def name(self) -> str:
        """A stable identifier of the check (a pytest test id)."""
        return "-".join(x for x in (self.level, self.config, self.mode if self.level != "corpus" else None) if x)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "config": self.config, "mode": self.mode, "verdict": self.verdict,
                "traces": self.traces, "steps": self.steps, "note": self.note, "seconds": round(self.seconds, 3),
                "failures": self.failures}


@dataclass
class Check:
    """A planned check: run it for its :class:`Result` (a skipped one is already decided)."""

    level: str
    config: str | None
    mode: str
    run: Callable[[], Result] | None = None
    skipped: str = ""

    @property
    def name(self) -> str:
        return Result(self.level, self.config, self.mode, "").name

    def execute(self) -> Result:
        if self.run is None:
            return Result(self.level, self.config, self.mode, "skipped", note=self.skipped)
        t0 = time.perf_counter()
        r = self.run()
        r.seconds = time.perf_counter() - t0
        return r


@dataclass
class Certification:
    model: str
    impl: str
    results: list[Result] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "impl": self.impl, "ok": self.ok,
                "checks": len(self.results), "skipped": sum(r.verdict == "skipped" for r in self.results),
                "traces": sum(r.traces for r in self.results), "steps": sum(r.steps for r in self.results),
                "results": [r.to_json() for r in self.results]}


# -- the preflight -------------------------------------------------------------------------------------

def _config_key(model_name: str, config: dict[str, Any]) -> str:
    return json.dumps([model_name, config], sort_keys=True, default=str)


def _support(model_name: str, impl_spec: str, targets: list[tuple[str, Any]], level: str, timeout: float,
             impl_for: Callable[[], Any]) -> dict[str, str]:
    """For each ``(name, model)``: "" when the port starts on it, else why not (error 14).  Any other
    failure at init is :class:`PortUnusable`; at the thread level a port without the level (error 14,
    or no feature thread-steps) has every configuration unsupported."""
    from conq.model.kernel import config_dict

    from .adapters import PortFailure

    out: dict[str, str] = {}
    for name, model in targets:
        impl = impl_for()
        try:
            try:
                impl.start(model_name, config_dict(model.config), 0)
            except PortFailure as e:
                if e.code == "definite-error" and e.error == 14:
                    # the port's own words (after the error's name)
                    out[name] = f"error 14: {e.problem.split('definite): ', 1)[-1]}"
                elif level == "thread" and e.code in ("definite-error", "protocol"):
                    reason = ("no thread level (init_ok lacks the feature thread-steps)" if e.code == "protocol"
                              else f"no thread level (error {e.error})")
                    return {n: reason for n, _m in targets}
                else:
                    raise PortUnusable(e, f"{level} level, configuration {name!r}") from None
            else:
                out[name] = ""
        finally:
            impl.close()
    return out


# -- the plan --------------------------------------------------------------------------------------------

def plan(model_name: str, impl_spec: str, budget: Budget = Budget(), *, timeout: float = 10.0,
         corpus: Any = "default") -> list[Check]:
    """The preflight (module docstring), then every check, in the order they run.  ``corpus``: the
    golden corpus folder (default: the system's own; None: no corpus).  Raises :class:`SuiteError`
    for bad input and :class:`PortUnusable` for a port that cannot be used."""
    from .generate import count_exhaustive
    from .port_reference import conformance_configs
    from .thread_level import count_sequences
    from .views import conformance_model

    system = systems.find(model_name)
    if system is None:
        raise SuiteError(f"no system {model_name!r} (known: {', '.join(systems.names())})")
    make_impl(impl_spec, model_name, timeout=timeout).close()  # a bad --impl is bad input, before anything runs
    calls = [(name, own, conformance_model(model_name, name, own)) for name, own in conformance_configs(model_name)]
    for name, _own, m in calls:
        m.config_name = name
    ts = system.load("thread_level")
    threads = [(name, ts.thread_model(name)) for name in ts.THREAD_CONFIGS] if ts is not None else []

    call_support = _support(model_name, impl_spec, [(n, m) for n, _o, m in calls], "call", timeout,
                            lambda: make_impl(impl_spec, model_name, timeout=timeout))
    if not any(v == "" for v in call_support.values()):
        raise SuiteError(f"the port supports none of the {len(calls)} configurations of {model_name} the suite "
                         f"drives (each was answered error 14), so nothing can be certified; the first: "
                         f"{next(iter(call_support.values()), '')}")
    thread_support = (_support(model_name, impl_spec, threads, "thread", timeout,
                               lambda: ts.thread_impl(impl_spec, timeout=timeout)) if threads else {})

    checks: list[Check] = []
    folder = system.corpus_dir() if corpus == "default" else corpus
    if folder is not None:
        checks.append(Check("corpus", None, "corpus", run=lambda: _corpus(
            model_name, impl_spec, folder, timeout, call_support, thread_support, calls, threads)))
    for name, own, m in calls:
        why = call_support[name]
        for mode in ("random", "coverage", "exhaustive"):
            if why:
                checks.append(Check("call", name, mode, skipped=why))
                continue
            if mode == "exhaustive":
                length = budget.exhaustive_length
                while length > 1 and count_exhaustive(m, length) > budget.exhaustive_cap:
                    length -= 1
                checks.append(Check("call", name, mode, run=lambda n=name, o=own, L=length: _call(
                    model_name, impl_spec, n, o, "exhaustive", budget.exhaustive_cap, L, budget, timeout)))
            else:
                traces = budget.traces if mode == "random" else budget.coverage
                checks.append(Check("call", name, mode, run=lambda n=name, o=own, md=mode, t=traces: _call(
                    model_name, impl_spec, n, o, md, t, budget.length, budget, timeout)))
    for name, m in threads:
        why = thread_support.get(name, "")
        for mode in ("random", "exhaustive"):
            if why:
                checks.append(Check("thread", name, mode, skipped=why))
                continue
            depth = budget.thread_depth
            if mode == "exhaustive":
                while depth > 1 and count_sequences(m, depth) > budget.thread_cap:
                    depth -= 1
            checks.append(Check("thread", name, mode, run=lambda n=name, md=mode, d=depth: _thread(
                ts, model_name, impl_spec, n, md, d, budget, timeout)))
    return checks


def _call(model_name: str, impl_spec: str, name: str, own: dict, mode: str, traces: int, length: int,
          budget: Budget, timeout: float) -> Result:
    res, m = run_suite(model_name, impl_spec=impl_spec, config_name=name, overrides=own, traces=traces,
                       seed=budget.seed, length=length, mode=mode, timeout=timeout, probe=budget.probe)
    out = Result("call", name, mode, "conforms" if res.ok else "DIVERGES", traces=res.traces, steps=res.steps,
                 note=f"length {length}" if mode == "exhaustive" else "")
    doc = res.to_json(m)
    out.failures = doc["failures"]
    out.text = [f.describe(m) for f in res.failures]
    return out


def _thread(ts: Any, model_name: str, impl_spec: str, name: str, mode: str, depth: int, budget: Budget,
            timeout: float) -> Result:
    walks, depth = (budget.thread_walks, 0) if mode == "random" else (0, depth)
    r = ts.check_threads(ts.thread_impl(impl_spec, timeout=timeout), name, walks=walks, length=budget.thread_length,
                         seed=budget.seed, depth=depth, probe=budget.probe, impl_spec=impl_spec,
                         max_traces=budget.thread_cap)
    verdict = "conforms" if r.ok and not r.incomplete else ("DIVERGES" if not r.ok else "skipped")
    out = Result("thread", name, mode, verdict, traces=r.traces, steps=r.steps,
                 note=r.incomplete or (f"depth {depth}" if mode == "exhaustive" else ""))
    if not r.ok:
        out.failures = [r.to_json()]
        out.text = [r.describe()]
    return out


def _corpus(model_name: str, impl_spec: str, folder: Any, timeout: float, call_support: dict[str, str],
            thread_support: dict[str, str], calls: list, threads: list) -> Result:
    from conq.model.kernel import config_dict

    from .views import conformance_model

    refused = {_config_key(model_name, config_dict(m.config)): why for n, _o, m in calls if (why := call_support[n])}

    def leave_out(tr: Any) -> str | None:
        if tr.level == "thread":
            return thread_support.get(tr.config_name) or ("" if tr.config_name in thread_support else
                                                          "no such thread-level configuration")
        key = _config_key(model_name, config_dict(conformance_model(tr.model, None, tr.config).config))
        return refused.get(key)

    res, m = run_suite(model_name, impl_spec=impl_spec, traces=0, corpus=folder, timeout=timeout,
                       corpus_filter=lambda tr: leave_out(tr) or None)
    out = Result("corpus", None, "corpus", "conforms" if res.ok else "DIVERGES", traces=res.corpus, steps=res.steps,
                 note=f"{res.corpus_ok} of {res.corpus} as expected"
                      + (f"; {len(res.corpus_skipped)} left out (configurations the port does not support)"
                         if res.corpus_skipped else ""))
    out.failures = res.to_json(m)["failures"]
    out.text = [f.describe(m) for f in res.failures]
    return out


def certify(model_name: str, impl_spec: str, budget: Budget = Budget(), *, timeout: float = 10.0,
            corpus: Any = "default", on_result: Callable[[Result], None] | None = None) -> Certification:
    """Plan (preflight) and run every check in order; see the module docstring."""
    cert = Certification(model_name, impl_spec)
    for check in plan(model_name, impl_spec, budget, timeout=timeout, corpus=corpus):
        r = check.execute()
        cert.results.append(r)
        if on_result is not None:
            on_result(r)
    return cert


__all__ = ["Budget", "Certification", "Check", "PortUnusable", "Result", "certify", "plan"]
