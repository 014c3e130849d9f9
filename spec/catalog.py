"""The requirements catalog: every normative statement of the seeds, traced to
the checks that cover it.

The catalog lives in ``spec/requirements/*.toml``, one file per area (QCM,
PROD, PUSH, FIFO, SIMPLE, DEMUX, REC).  Each entry names the checks that
cover it; a check is one of

* ``MODEL:PROPERTY``        a named property of a registered model
                            (``consumer-lists:acquired-at-most-once``);
* ``tests/FILE.py::NAME``   a test function or class (``::Class::method``);
* ``prove:MODEL:PROPERTY``  a z3 proof of a model property;
* ``mutant:NAME``           a mutant of the mutation catalog that the suite kills.

:func:`validate` reports every malformed entry (file, requirement, field) and
every check that names nothing; an area marked ``covered = true`` must have at
least one check on every requirement.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

KINDS = ("MUST", "SHOULD", "MAY", "STEP", "RULE", "CONFIG", "SUPERSEDED")
ID_RE = re.compile(r"^([A-Z]+)-(\d{3})$")
SEEDS = ("000", "001", "002", "003", "004")


class CatalogError(ValueError):
    """The catalog is malformed; the message says where."""


@dataclass(frozen=True)
class Requirement:
    id: str
    area: str
    seed: tuple[str, ...]
    section: str
    kind: str
    text: str
    quote: str
    checks: tuple[str, ...]
    file: str
    revision: str = "current"
    note: str = ""


@dataclass
class Area:
    id: str
    title: str
    covered: bool
    file: str
    requirements: list[Requirement] = field(default_factory=list)


def _spec_dir():
    """The ``conq.spec`` package's data folder, through importlib.resources (a Traversable: the
    installed folder, or the package zip on a Spark executor)."""
    from conq.spec import data

    return data()


def toml_files(directory) -> list:
    """The ``*.toml`` files of a folder (a Path or a Traversable), by name."""
    return sorted((f for f in directory.iterdir() if f.name.endswith(".toml") and f.is_file()), key=lambda f: f.name) \
        if directory.is_dir() else []


def load(directory: Path | None = None) -> list[Area]:
    """Read and structurally validate every area file; raise CatalogError with
    all problems found (file, requirement id, field)."""
    directory = directory or _spec_dir() / "requirements"
    files = toml_files(directory)
    if not files:
        raise CatalogError(f"{directory}: no requirement files (*.toml)")
    problems: list[str] = []
    areas: list[Area] = []
    seen_ids: dict[str, str] = {}
    for f in files:
        where = f.name
        try:
            data = tomllib.loads(f.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            problems.append(f"{where}: not valid TOML: {e}")
            continue
        head = data.get("area")
        if not isinstance(head, dict):
            problems.append(f"{where}: missing [area] table")
            continue
        for key, typ in (("id", str), ("title", str), ("covered", bool)):
            if not isinstance(head.get(key), typ):
                problems.append(f"{where}: [area] field '{key}' must be a {typ.__name__}")
        if problems and problems[-1].startswith(f"{where}: [area]"):
            continue
        area = Area(head["id"], head["title"], head["covered"], where)
        reqs = data.get("requirement", [])
        if not isinstance(reqs, list) or not reqs:
            problems.append(f"{where}: no [[requirement]] entries")
        for n, r in enumerate(reqs if isinstance(reqs, list) else [], 1):
            rid = r.get("id") if isinstance(r, dict) else None
            loc = f"{where}: requirement #{n}" + (f" ({rid})" if rid else "")
            if not isinstance(r, dict):
                problems.append(f"{loc}: not a table")
                continue
            errs = _entry_errors(r, area.id)
            if errs:
                problems.extend(f"{loc}: {e}" for e in errs)
                continue
            if rid in seen_ids:
                problems.append(f"{loc}: id {rid} already used in {seen_ids[rid]}")
                continue
            seen_ids[rid] = where
            area.requirements.append(
                Requirement(
                    id=rid,
                    area=area.id,
                    seed=tuple(r["seed"]),
                    section=r["section"],
                    kind=r["kind"],
                    text=r["text"],
                    quote=r.get("quote", ""),
                    checks=tuple(r["checks"]),
                    file=where,
                    revision=r.get("revision", "current"),
                    note=r.get("note", ""),
                )
            )
        areas.append(area)
    if problems:
        raise CatalogError("malformed requirements catalog:\n  " + "\n  ".join(problems))
    return areas


def _entry_errors(r: dict[str, Any], area: str) -> list[str]:
    errs = []
    rid = r.get("id")
    m = ID_RE.match(rid) if isinstance(rid, str) else None
    if not m:
        errs.append(f"field 'id' must look like {area}-001, got {rid!r}")
    elif m.group(1) != area:
        errs.append(f"field 'id' {rid} is not in area {area}")
    seed = r.get("seed")
    if not (isinstance(seed, list) and seed and all(s in SEEDS for s in seed)):
        errs.append(f"field 'seed' must be a non-empty list of {list(SEEDS)}, got {seed!r}")
    for key in ("section", "text"):
        if not (isinstance(r.get(key), str) and r[key].strip()):
            errs.append(f"field '{key}' must be a non-empty string")
    if r.get("kind") not in KINDS:
        errs.append(f"field 'kind' must be one of {list(KINDS)}, got {r.get('kind')!r}")
    checks = r.get("checks")
    if not (isinstance(checks, list) and all(isinstance(c, str) and c for c in checks)):
        errs.append("field 'checks' must be a list of check names")
    if "revision" in r and r["revision"] not in ("current", "earlier"):
        errs.append(f"field 'revision' must be 'current' or 'earlier', got {r['revision']!r}")
    return errs


# -- resolving checks ------------------------------------------------------------


def repo_root() -> Path:
    """The folder holding ``spec/`` and ``tests/``: the source checkout (in an installed wheel,
    the ``conq`` folder: test checks then name files that are not there)."""
    return Path(str(_spec_dir())).resolve().parent


@lru_cache(maxsize=None)
def _test_names(path: Path) -> frozenset[str]:
    """``name`` and ``Class::method`` for every test function/class in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}::{sub.name}")
        elif isinstance(node, ast.Assign):
            # ``TestFoo = state_machine(model).TestCase`` style
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
    return frozenset(names)


@lru_cache(maxsize=None)
def _model_properties(model: str) -> frozenset[str] | None:
    from conq.conformance import systems
    from conq.model.engines.registry import MODELS, load_model, model_class

    systems.find(model)  # a system of its own registers its model
    if model not in MODELS:
        return None

    # a property may exist only in some configurations (e.g. a role of the model)
    return frozenset(
        p.name for name in model_class(model).configs() for p in load_model(model, name).property_list()
    )


#: extra resolvers registered by engines that land later: prefix -> (name -> problem or None)
RESOLVERS: dict[str, Callable[[str], str | None]] = {}


def tests_present() -> bool:
    """Whether the test suite is here to resolve ``tests/...`` checks against: in the source checkout
    it is; an installed wheel ships no tests (its test checks are then not verifiable, not broken)."""
    return (repo_root() / "tests").is_dir()


def check_problem(check: str) -> str | None:
    """None when ``check`` names something that exists (or, for a test check where the test suite
    is not installed, when it is well formed), else what is wrong."""
    if check.startswith("tests/"):
        file, sep, name = check.partition("::")
        path = repo_root() / file
        if not sep or not name:
            return f"test check '{check}' must be tests/FILE.py::NAME"
        if not tests_present():
            return None
        if not path.is_file():
            return f"test file {file} does not exist"
        if name.split("[")[0] not in _test_names(path):
            return f"{file} defines no test '{name}'"
        return None
    prefix, sep, rest = check.partition(":")
    if prefix in RESOLVERS:
        return RESOLVERS[prefix](rest)
    if prefix == "prove":
        model, _, prop = rest.partition(":")
        props = _model_properties(model)
        if props is None:
            return f"unknown model '{model}' in '{check}'"
        return None if prop in props else f"model '{model}' has no property '{prop}'"
    if prefix == "mutant":
        # a mutant of any system's catalogue (conformance/systems.py: each system's ``mutants``)
        from conq.conformance import systems

        known = set()
        for system in systems.systems("mutants"):
            try:
                known |= set(system.load("mutants").mutants)
            except Exception:  # a catalogue that cannot load names nothing
                continue
        return None if rest in known else f"no mutant named '{rest}' in any catalogue ({', '.join(systems.names('mutants'))})"
    if sep:
        props = _model_properties(prefix)
        if props is None:
            return f"unknown model '{prefix}' in '{check}'"
        return None if rest in props else f"model '{prefix}' has no property '{rest}'"
    return f"check '{check}' is not MODEL:PROPERTY, tests/FILE.py::NAME, prove:MODEL:PROPERTY or mutant:NAME"


@dataclass
class AreaCoverage:
    area: Area
    total: int
    with_checks: int
    missing: list[str]  # requirement ids without checks
    broken: list[str]  # "ID: problem"
    #: test checks that could not be resolved: no test suite in this installation (a wheel)
    unverified: int = 0

    @property
    def ok(self) -> bool:
        return not self.broken and (not self.area.covered or not self.missing)


def coverage(areas: Iterable[Area]) -> list[AreaCoverage]:
    out = []
    for a in areas:
        missing = [r.id for r in a.requirements if not r.checks]
        broken = []
        for r in a.requirements:
            for c in r.checks:
                problem = check_problem(c)
                if problem:
                    broken.append(f"{r.id}: {problem}")
        unverified = 0 if tests_present() else sum(c.startswith("tests/") for r in a.requirements for c in r.checks)
        out.append(AreaCoverage(a, len(a.requirements), len(a.requirements) - len(missing), missing, broken, unverified))
    return out
