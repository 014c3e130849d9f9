"""Which public methods of a reference implementation its engines reach (issue 32).

"Every public method of a reference is driven by some engine or documented as outside the model"
(the project's guide).  Each system declares, in ``conformance/<system>/reach.py``:

* ``IMPLEMENTATION``: the implementation's package (``conq.impl.<system>``);
* ``ENGINES``: name -> a small run of that engine's driver (a few walks, schedules, runs: enough to
  take every path the engine's driver can take, not its whole budget);
* ``OUTSIDE``: pattern -> the reason a public method is outside the model, for the methods no engine
  reaches.  A pattern is ``module.py:Qualified.name``, ``module.py:Class.*`` or ``module.py:*``.

:func:`public_methods` lists the public functions of the package (introspection: every function and
method whose name does not start with ``_``, properties included, defined in the package's modules);
:func:`reached` runs the engines under a profiler (``sys.setprofile`` on every thread) and records,
per engine, the implementation's functions it entered; :func:`report` puts them together:
each public method with the engines that call it, or the reason it is outside the model, or --
a gap -- neither.  ``tests/conformance/test_reach.py`` asserts there is no gap.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import os
import pkgutil
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def _impl_root(package: str) -> str:
    return os.path.dirname(os.path.dirname(importlib.import_module(package).__file__))  # the conq.impl folder


def public_methods(package: str) -> dict[str, str]:
    """``module.py:Qualified.name`` -> kind (``method``, ``property``, ``function``) of every public
    function of ``package``'s modules (classes and functions defined there, names not ``_``)."""
    pkg = importlib.import_module(package)
    root = os.path.dirname(pkg.__file__)
    out: dict[str, str] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"{package}.{info.name}")
        rel = os.path.relpath(mod.__file__, root)
        for cname, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ != mod.__name__ or cname.startswith("_"):
                continue
            for fname, f in vars(cls).items():
                if fname.startswith("_"):
                    continue
                kind = "method"
                if isinstance(f, (staticmethod, classmethod)):
                    f = f.__func__
                elif isinstance(f, property):
                    f, kind = f.fget, "property"
                if inspect.isfunction(f):
                    out[f"{rel}:{cname}.{fname}"] = kind
        for fname, f in inspect.getmembers(mod, inspect.isfunction):
            if f.__module__ == mod.__name__ and not fname.startswith("_"):
                out[f"{rel}:{fname}"] = "function"
    return out


def reached(package: str, engines: Mapping[str, Callable[[], Any]]) -> dict[str, set[str]]:
    """engine -> the ``module.py:Qualified.name`` of every function of ``package`` its run entered
    (on any thread it started)."""
    root = os.path.dirname(importlib.import_module(package).__file__) + os.sep
    out: dict[str, set[str]] = {}
    for name, run in engines.items():
        seen: set[tuple[str, str]] = set()

        def prof(frame: Any, event: str, arg: Any, seen: set = seen) -> None:
            if event == "call":
                co = frame.f_code
                if co.co_filename.startswith(root):
                    seen.add((co.co_filename[len(root):], co.co_qualname))

        threading.setprofile(prof)
        sys.setprofile(prof)
        try:
            run()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        out[name] = {f"{f}:{q}" for f, q in seen}
    return out


def walk_configs(checker_for: Callable[[Any], Any], configs: Any, seeds: range, length: int = 30) -> None:
    """Seeded random walks of ``length`` calls on each configuration (``checker_for(cfg)``: a
    :class:`~conq.conformance.checker.Checker` of the system's driver): an ``ENGINES`` run of a call-level
    engine's driver."""
    for cfg in configs:
        checker = checker_for(cfg)
        try:
            for seed in seeds:
                checker.walk(seed, length)
        finally:
            checker.impl.close()


def outside_reason(method: str, outside: Mapping[str, str]) -> str | None:
    for pattern, reason in outside.items():
        if fnmatch.fnmatchcase(method, pattern):
            return reason
    return None


@dataclass
class Reach:
    """Each public method: the engines that reach it, the reason it is outside the model, or a gap."""

    by_method: dict[str, list[str]] = field(default_factory=dict)
    outside: dict[str, str] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    #: OUTSIDE patterns that name no public method any more (stale documentation)
    stale: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        for m, engines in sorted(self.by_method.items()):
            out.append(f"{m}: {', '.join(engines)}" if engines else f"{m}: outside the model -- {self.outside[m]}"
                       if m in self.outside else f"{m}: GAP (no engine reaches it, no reason given)")
        return out


def report(declaration: Any) -> Reach:
    """Run ``declaration.ENGINES`` and put together what ``declaration`` (a system's ``reach``
    module) says: see :class:`Reach`."""
    methods = public_methods(declaration.IMPLEMENTATION)
    hits = reached(declaration.IMPLEMENTATION, declaration.ENGINES)
    r = Reach()
    for m in methods:
        engines = [e for e, seen in hits.items() if m in seen]
        r.by_method[m] = engines
        if not engines:
            reason = outside_reason(m, declaration.OUTSIDE)
            if reason:
                r.outside[m] = reason
            else:
                r.gaps.append(m)
    r.stale = [p for p in declaration.OUTSIDE if not any(fnmatch.fnmatchcase(m, p) for m in methods)]
    return r
