"""The manifest of expected model-checking results (``spec/manifest/*.toml``).

Like the TLA+ Examples manifest: each entry names a model, a configuration,
and what exhaustive exploration must find there: distinct states, transitions,
and which properties are violated (an upstream variant is *expected* to
violate some).  The tests pin state counts from this file and ``conq run``
reports every entry as matching or not: one source of truth.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from conq.model.engines.explorer import Exploration

from .catalog import CatalogError, _spec_dir, toml_files


@dataclass(frozen=True)
class Expectation:
    model: str
    config: str
    states: int
    transitions: int
    violated: tuple[str, ...] = ()
    symmetry: bool = False
    liveness: bool = True
    slow: bool = False  # left out of `conq run`'s quick pass; still run by the tests
    overrides: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def label(self) -> str:
        extra = " +symmetry" if self.symmetry else ""
        # as --set takes it back: JSON values (``consumers=[[1,true],[1,true]]``), strings bare
        extra += "".join(f" {k}={v if isinstance(v, str) else json.dumps(v, separators=(',', ':'))}"
                         for k, v in self.overrides.items())
        return f"{self.model}/{self.config}{extra}"


def load(directory: Path | None = None) -> list[Expectation]:
    """Every entry of ``spec/manifest/*.toml`` (one file per model)."""
    directory = directory or _spec_dir() / "manifest"
    out: list[Expectation] = []
    for path in toml_files(directory):
        out += load_file(path)
    return out


def load_file(path: Path) -> list[Expectation]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except tomllib.TOMLDecodeError as e:
        raise CatalogError(f"{path.name}: not valid TOML: {e}") from None
    out = []
    for n, e in enumerate(data.get("run", []), 1):
        loc = f"{path.name}: [[run]] #{n}"
        for key, typ in (("model", str), ("config", str), ("states", int), ("transitions", int)):
            if not isinstance(e.get(key), typ):
                raise CatalogError(f"{loc}: field '{key}' must be a {typ.__name__}")
        out.append(
            Expectation(
                model=e["model"],
                config=e["config"],
                states=e["states"],
                transitions=e["transitions"],
                violated=tuple(e.get("violated", ())),
                symmetry=bool(e.get("symmetry", False)),
                liveness=bool(e.get("liveness", True)),
                slow=bool(e.get("slow", False)),
                overrides=dict(e.get("overrides", {})),
            )
        )
    return out


def mismatches(exp: Expectation, ex: Exploration, ignore: Iterable[str] = ()) -> list[str]:
    """What differs between an exploration and its expectation (empty: as expected); the verdicts of
    the properties named in ``ignore`` are not judged (those the expectation did not check)."""
    ignore = frozenset(ignore)
    problems = []
    if not ex.complete:
        problems.append(f"search incomplete: {ex.stop_reason}")
    if ex.states != exp.states:
        problems.append(f"states: expected {exp.states}, found {ex.states}")
    if ex.transitions != exp.transitions:
        problems.append(f"transitions: expected {exp.transitions}, found {ex.transitions}")
    found = {v.prop.name for v in ex.verdicts if v.status == "violated" and v.prop.name not in ignore}
    if found != set(exp.violated) - ignore:
        problems.append(f"violated: expected {sorted(exp.violated)}, found {sorted(found)}")
    for v in ex.verdicts:
        if v.status in ("vacuous", "unreached") and v.prop.name not in ignore:
            problems.append(f"{v.prop.name}: {v.status} ({v.detail})")
    return problems


def bmc_cases(model: str, encoded: set[str] | frozenset[str], *, slow: bool = False) -> list[tuple[Expectation, str]]:
    """The (entry, property) pairs BMC must reproduce for ``model``: every
    expected violation of a property the z3 encoding has (``encoded``),
    leaving out entries marked slow unless ``slow``."""
    return [
        (exp, prop)
        for exp in load()
        if exp.model == model and (slow or not exp.slow)
        for prop in exp.violated
        if prop in encoded
    ]
