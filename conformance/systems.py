"""The registry of systems: the one place the generic layers learn which systems exist.

A *system* (consumer lists, ordered consumption, recovery deferral, or one of your own) is declared
once, by a :class:`System` value in its conformance package (``SYSTEM = System(...)`` in
``conformance/<system>/__init__.py``): its model's name, its call-level view, its thread-level view
where it has one, the driver of its reference implementation, its mutant catalogue, its golden
corpus, the Spark replays of the main job, its port-reference sections and the commands it adds to
the command line.  The generic modules (the checker, the suite, the Spark replay, the port
references, trace validation, the mutation engine, the command line) find systems only here; none
of them imports a system package by name.

Systems are registered, in this order, from

1. the ``conq.systems`` entry points of the installed distributions (conq's own three are declared
   in ``pyproject.toml``; a package of yours declares its own the same way);
2. the environment variable ``CONQ_SYSTEMS``: targets ``module:NAME`` or ``FILE.py:NAME`` separated
   by commas (a system of your own without packaging it);
3. :func:`register`, in the running process.

Every field that names code may be the object itself or a target string: ``module:Name``,
``FILE.py:Name``, ``.module:Name`` relative to the declaring package (``System.package``), or a
module (``.module``).
Targets are imported only when used, so listing the systems costs nothing and one broken system
does not hide the others.  Spark executors get the systems by their origin (:func:`origins`,
:func:`adopt`): an executor of a cluster has no installed metadata, only the shipped code.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Protocol, Sequence

#: the entry-point group systems are declared in
ENTRY_POINTS = "conq.systems"
#: the environment variable naming more systems (comma-separated targets)
ENV = "CONQ_SYSTEMS"

#: a piece of a system: the object itself, or where to import it from
Target = Any


@dataclass(frozen=True)
class Replay:
    """One Spark replay of the main job (``conq run``): a configuration of the system's model, how
    many traces of what length, and the output folder under the report folder."""

    config: str
    traces: int
    length: int
    folder: str
    overrides: Mapping[str, Any] = field(default_factory=dict)


class ThreadLevel(Protocol):
    """What a system's thread-step level offers (``--level thread``; each of the project's systems has
    one: conformance/<system>/thread_steps.py).  Its configurations are its own, named."""

    #: the thread-level configurations the suite drives, name -> overrides
    THREAD_CONFIGS: Mapping[str, Any]
    #: named configurations kept for the findings they reproduce (accepted, not driven by default)
    FINDINGS: Mapping[str, Any]

    def thread_model(self, config: str = ..., overrides: Mapping[str, Any] | None = None) -> Any: ...
    def thread_impl(self, spec: str, *, timeout: float = ...) -> Any: ...
    def thread_driver(self, call_driver: type) -> type: ...
    def check_threads(self, impl: Any, config: str = ..., **kw: Any) -> Any: ...
    def reference_section(self) -> list[str]: ...


@dataclass(frozen=True)
class System:
    """One system, declared once.  Only ``name``, ``package`` and ``driver`` are required: a
    system whose model's actions are already calls needs no view, and every other part is
    optional (``conq mutants`` needs a catalogue, ``conq run`` replays only the replays listed)."""

    #: the model's registry name, which is the system's name on the command line (``consumer-lists``)
    name: str
    #: the package relative targets are resolved in (the declaring module's ``__name__``)
    package: str
    #: the class driving the reference implementation in process (conformance/adapters.py: a driver)
    driver: Target
    #: model -> its call-level view (a :class:`~conq.model.kernel.Model`); None: its actions are calls
    call_view: Target = None
    #: the model class, for a model the model registry (model/engines/registry.py) does not ship:
    #: registering the system registers it under ``name``
    model: Target = None
    #: the thread-step level (:class:`ThreadLevel`), where the system has one
    thread_level: Target = None
    #: the mutant catalogue (conformance/mutation.py ``Catalogue``)
    mutants: Target = None
    #: ``mutant_driver(name)``: the driver class with mutant ``name`` applied (``--impl mutant:NAME``)
    mutant_driver: Target = None
    #: the golden corpus: a folder of ``*.ndjson`` traces inside ``package`` (importlib.resources)
    corpus: str | None = None
    #: the configurations the conformance suite drives: a sequence (or a function returning one) of
    #: names or ``(name, overrides)``; None: every named configuration of the model
    conformance_configs: Target = None
    #: the Spark replays of the main job
    replays: Sequence[Replay] = ()
    #: the main job's conformance stage: settings other than the default configuration (run_suite's keywords)
    conformance_settings: Mapping[str, Any] = field(default_factory=dict)
    #: replay targets whose call-level graph is beyond the coverage-truth budget: (configuration,
    #: overrides as JSON) -> why (spark_replay: no graph is explored for them)
    beyond_explorer: Mapping[tuple[str | None, str], str] = field(default_factory=dict)
    #: the same at the thread level: (thread-level configuration, overrides as JSON) -> why
    thread_beyond_explorer: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: what the port reference declares that cannot be computed (port_reference.Declared)
    port_reference: Target = None
    #: ``add_commands(app, kit)``: the system's own commands on the command line (conq/cli/kit.py
    #: is the kit: its consoles, error types and the guard every command runs under)
    commands: Target = None
    #: loaded targets (not part of the declaration)
    _loaded: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False, hash=False)

    def load(self, part: str) -> Any:
        """The object ``part`` names (imported on first use), or None when the system has none."""
        if part in self._loaded:
            return self._loaded[part]
        value = getattr(self, part)
        if isinstance(value, str):
            value = resolve(value, self.package)
        self._loaded[part] = value
        return value

    def corpus_dir(self):
        """The golden corpus folder (a :class:`pathlib.Path` when the package is on the file
        system), or None when the system has none or it is not there."""
        if self.corpus is None:
            return None
        from importlib.resources import files

        folder = files(self.package).joinpath(self.corpus)
        return folder if folder.is_dir() else None


def resolve(target: str, package: str | None = None) -> Any:
    """The object a target names: ``module:Name``, ``FILE.py:Name``, ``.module:Name`` (relative to
    ``package``), or a module itself (``.module``, ``module``).  A file's failure is bad input
    (ModelError, FILE:LINE); a module's propagates."""
    from conq.model.engines.registry import load_object

    module, sep, name = target.rpartition(":")
    if not sep:
        module, name = target, None
    if not module or (sep and not name):
        raise ValueError(f"expected module:Name, .module:Name, FILE.py:Name or a module, got {target!r}")
    if module.startswith(".") and package is None:
        raise ValueError(f"relative target {target!r} without a package")
    if module.startswith(".") or name is None:
        loaded = importlib.import_module(module, package)
        return loaded if name is None else getattr(loaded, name)
    return load_object(target, user=module.endswith(".py"))


# -- the registry ---------------------------------------------------------------------------------

_SYSTEMS: dict[str, System] = {}
#: name -> where the system came from (a target), for processes that must load it again
_ORIGINS: dict[str, str] = {}
_DISCOVERED: list[bool] = []


class UnknownSystem(ValueError):
    """No system of that name is registered."""


def discover() -> None:
    """Register the installed systems and those of ``CONQ_SYSTEMS`` (once per process; every
    lookup does it first)."""
    if _DISCOVERED:
        return
    _DISCOVERED.append(True)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        _add(resolve(ep.value), ep.value)
    for target in os.environ.get(ENV, "").split(","):
        if target.strip():
            register(target.strip())


def register(system: System | str, origin: str | None = None) -> System:
    """Register a system (a :class:`System`, or a target naming one) and, when it brings its own
    model class, that model.  ``origin``: the target other processes load it from (a target
    string is its own origin).  Registering the same system again changes nothing; another system
    under a taken name is refused."""
    discover()
    if isinstance(system, str):
        origin = origin or system
        system = resolve(system)
    return _add(system, origin)


def _add(system: Any, origin: str | None) -> System:
    if not isinstance(system, System):
        raise ValueError(f"{origin or system!r} is not a conq System (conq.conformance.systems.System)")
    known = _SYSTEMS.get(system.name)
    if known is not None and origin is not None and _ORIGINS.get(system.name) == origin:
        return known  # the same declaration, loaded again
    if known is not None and known != system:
        raise ValueError(f"a system named {system.name!r} is already registered (from {_ORIGINS.get(system.name, 'this process')})")
    _SYSTEMS[system.name] = system
    if origin is not None:
        _ORIGINS[system.name] = origin
    if system.model is not None:
        from conq.model.engines import registry

        registry.register(system.name, system.load("model"))
    return system


def unregister(name: str) -> None:
    """Forget a system registered in this process (and the model it brought)."""
    system = _SYSTEMS.pop(name, None)
    _ORIGINS.pop(name, None)
    if system is not None and system.model is not None:
        from conq.model.engines import registry

        registry.unregister(name)


def find(name: str) -> System | None:
    discover()
    return _SYSTEMS.get(name)


def get(name: str) -> System:
    system = find(name)
    if system is None:
        raise UnknownSystem(f"no system named {name!r} (known: {', '.join(names()) or 'none'})")
    return system


def names(part: str | None = None) -> list[str]:
    """The registered systems, in registration order; with ``part``, those that have it."""
    discover()
    return [n for n, s in _SYSTEMS.items() if part is None or getattr(s, part)]


def systems(part: str | None = None) -> Iterator[System]:
    return (_SYSTEMS[n] for n in names(part))


def origins() -> dict[str, str]:
    """name -> origin of every system with one: what another process needs to load them."""
    discover()
    return dict(_ORIGINS)


def adopt(known: Mapping[str, str]) -> None:
    """Register the systems of another process (:func:`origins`) that this one lacks."""
    discover()
    for name, origin in known.items():
        if name not in _SYSTEMS:
            register(origin)
