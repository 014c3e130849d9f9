"""The distribution's shape: one import root, every package listed, and the
model and the implementation independent of each other."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPING = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed():
    listed = set(MAPPING["packages"])
    found = set()
    for pkg, folder in MAPPING["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([pkg, *rel.parts]) if rel.parts else pkg)
    assert found == listed, f"pyproject packages differ: missing {found - listed}, extra {listed - found}"


def _imports(folder: str) -> dict[str, set[str]]:
    out = {}
    for f in (ROOT / folder).rglob("*.py"):
        mods = set()
        for node in ast.walk(ast.parse(f.read_text(), filename=str(f))):
            if isinstance(node, ast.Import):
                mods |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods.add(("." * node.level) + node.module)
        out[str(f.relative_to(ROOT))] = mods
    return out


def test_model_and_impl_never_import_each_other():
    for folder, forbidden in (("model", ("conq.impl", "conq.conformance")), ("impl", ("conq.model", "conq.conformance"))):
        for file, mods in _imports(folder).items():
            bad = [m for m in mods if m.startswith(forbidden) or m.lstrip(".").startswith(("impl", "model", "conformance"))]
            assert not bad, f"{file} imports {bad}: model/ and impl/ must stay independent"


def test_no_generic_top_level_names_installed():
    assert all(p == "conq" or p.startswith("conq.") for p in MAPPING["packages"])
