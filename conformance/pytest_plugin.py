"""A pytest plugin that certifies a port (issue 35): each check of ``conq certify`` is one test, so a
port's own CI gets a test report (``--junitxml``) for free.

Installed with conq (entry point ``pytest11``); inert unless ``--conq-impl`` is given::

    pytest --conq-impl 'stdio:node port.js' --conq-model recovery-deferral --junitxml=conq.xml

Tests are named ``conq::<model>::<level>-<configuration>-<check>`` (``conq::recovery-deferral::
call-reference-random``, ``conq::consumer-lists::corpus``): a divergence fails its test with the
verdict, the minimised trace and the replay command; a configuration the port answers with error 14
(or a thread level it does not implement) is a skipped test, with the port's reason.  A port that
cannot be started or does not answer ``init`` fails one test, ``conq::<model>::preflight``, with its
stderr, and nothing else runs.  The budget options mirror ``conq certify``'s.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("conq", "certify a conq port (conq certify as tests)")
    group.addoption("--conq-impl", default=None, metavar="SPEC",
                    help="The implementation to certify: 'stdio:COMMAND' (a port), 'reference', 'mutant:NAME'.")
    group.addoption("--conq-model", action="append", default=None, metavar="MODEL",
                    help="The model (system) the port implements; repeat for several (default: consumer-lists).")
    group.addoption("--conq-traces", type=int, default=None, metavar="N",
                    help="Random walks per configuration (call level); default as conq certify.")
    group.addoption("--conq-thread-walks", type=int, default=None, metavar="N",
                    help="Random walks per thread-level configuration; default as conq certify.")
    group.addoption("--conq-exhaustive-length", type=int, default=None, metavar="N",
                    help="Length of the call level's exhaustive run; default as conq certify.")
    group.addoption("--conq-thread-depth", type=int, default=None, metavar="N",
                    help="Depth of the thread level's exhaustive run; default as conq certify.")
    group.addoption("--conq-seed", type=int, default=0, metavar="N", help="Root seed of every generated trace.")
    group.addoption("--conq-timeout", type=float, default=10.0, metavar="SECONDS",
                    help="Seconds the port may take per response.")
    group.addoption("--conq-no-corpus", action="store_true", default=False, help="Leave the golden corpus out.")


class CertifyFailure(Exception):
    """A check diverged (or the preflight failed): its message is the verdict."""


class CertifyItem(pytest.Item):
    """One check of the certification."""

    def __init__(self, *, check: Any = None, problem: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.check = check
        self.problem = problem

    def runtest(self) -> None:
        if self.check is None:
            raise CertifyFailure(self.problem)
        r = self.check.execute()
        self.user_properties += [("traces", r.traces), ("steps", r.steps), ("verdict", r.verdict)]
        if r.verdict == "skipped":
            pytest.skip(r.note)
        if not r.ok:
            raise CertifyFailure("\n".join(r.text) or f"{r.name}: DIVERGES")

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, CertifyFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
    impl = config.getoption("conq_impl")
    if not impl:
        return
    from conq.conformance.certify import Budget, plan
    from conq.conformance.suite import SuiteError
    from conq.conformance.trace import TraceError

    defaults = Budget()
    budget = Budget(traces=config.getoption("conq_traces") or defaults.traces,
                    thread_walks=config.getoption("conq_thread_walks") or defaults.thread_walks,
                    exhaustive_length=config.getoption("conq_exhaustive_length") or defaults.exhaustive_length,
                    thread_depth=config.getoption("conq_thread_depth") or defaults.thread_depth,
                    seed=config.getoption("conq_seed"))
    for model in config.getoption("conq_model") or ["consumer-lists"]:
        try:
            checks = plan(model, impl, budget, timeout=config.getoption("conq_timeout"),
                          corpus=None if config.getoption("conq_no_corpus") else "default")
        except (SuiteError, TraceError) as e:
            items.append(CertifyItem.from_parent(session, name=f"conq::{model}::preflight", problem=str(e)))
            continue
        items.extend(CertifyItem.from_parent(session, name=f"conq::{model}::{c.name}", check=c) for c in checks)
