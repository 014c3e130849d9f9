"""The distribution's shape: one import root, every package listed, one package per system in
every layer, the model and the implementation independent of each other, and no import circle
inside ``model/``."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
MAPPING = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
#: folder -> import name (model -> conq.model, ...)
ROOTS = {folder: pkg for pkg, folder in MAPPING["package-dir"].items()}
SYSTEMS = ("consumer_lists", "ordered_consumption", "recovery_deferral")


def test_every_package_folder_is_listed():
    listed = set(MAPPING["packages"])
    found = set()
    for pkg, folder in MAPPING["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([pkg, *rel.parts]) if rel.parts else pkg)
    assert found == listed, f"pyproject packages differ: missing {found - listed}, extra {listed - found}"


def _module_name(path: Path) -> str:
    folder = path.relative_to(ROOT).parts[0]
    rel = path.relative_to(ROOT / folder).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([ROOTS[folder], *parts])


def _imports(folder: str) -> dict[str, set[str]]:
    """module -> the absolute names it imports (relative imports resolved), at any depth of the
    file (a function-level import is an import too)."""
    out = {}
    for f in sorted((ROOT / folder).rglob("*.py")):
        name = _module_name(f)
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        mods = set()
        for node in ast.walk(ast.parse(f.read_text(), filename=str(f))):
            if isinstance(node, ast.Import):
                mods |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                    # `from . import x` imports submodule x when it exists
                    mods |= {f"{target}.{a.name}" for a in node.names} if not node.module else {target}
                else:
                    mods.add(node.module or "")
        out[name] = mods
    return out


def test_model_and_impl_never_import_each_other():
    for folder, forbidden in (("model", ("conq.impl", "conq.conformance")), ("impl", ("conq.model", "conq.conformance"))):
        imports = _imports(folder)
        assert len(imports) >= 6, f"{folder}: too few modules found: the walk is broken"
        for module, mods in imports.items():
            bad = sorted(m for m in mods if m.startswith(forbidden) or m.split(".")[0] in ("model", "impl", "conformance"))
            assert not bad, f"{module} imports {bad}: model/ and impl/ must stay independent"


def test_the_check_sees_a_violation():
    """The walk resolves relative imports (a check that cannot fail is no check)."""
    fake = ROOT / "model" / "engines" / "explorer.py"
    mods = _imports("model")[_module_name(fake)]
    assert "conq.model.kernel" in mods


def test_no_import_circle_inside_model():
    imports = _imports("model")
    g = nx.DiGraph()
    for module, mods in imports.items():
        g.add_node(module)
        for m in mods:
            # `from .state import X` names a module; `from conq.model import x` may name one too
            target = m if m in imports else m.rpartition(".")[0] if m.rpartition(".")[0] in imports else None
            if target and target != module and not module.startswith(target + ".") and target != module.rpartition(".")[0]:
                g.add_edge(module, target)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"import circles inside model/: {cycles}"
    assert g.has_edge("conq.model.consumer_lists.model", "conq.model.consumer_lists.properties")


def test_one_package_per_system_in_every_layer():
    """A newcomer lists one folder per layer to find a system's model, properties, z3 encoding,
    configurations, implementation and conformance view."""
    for system in SYSTEMS:
        pkg = ROOT / "model" / system
        for part in ("model.py", "state.py", "properties.py", "configs.py", "z3_encoding.py", "__init__.py"):
            assert (pkg / part).is_file(), f"model/{system}/{part} missing"
        assert (ROOT / "tests" / "model" / system).is_dir(), f"tests/model/{system}/ missing"
    for folder in ("impl", "conformance"):
        systems_here = [p.name for p in (ROOT / folder).iterdir() if (p / "__init__.py").is_file()]
        assert "consumer_lists" in systems_here
        for system in systems_here:
            assert system in SYSTEMS, f"{folder}/{system}/ is not a system"
            assert (ROOT / "tests" / folder / system).is_dir(), f"tests/{folder}/{system}/ missing (tests mirror the tree)"
    engines = {p.stem for p in (ROOT / "model" / "engines").glob("*.py")}
    assert {"explorer", "stateful", "symbolic", "registry"} <= engines
    flat = sorted(p.name for p in (ROOT / "model").glob("*.py") if p.name != "__init__.py")
    assert flat == ["kernel.py"], f"model/ keeps only the kernel at top level, found {flat}"


def test_no_generic_top_level_names_installed():
    assert all(p == "conq" or p.startswith("conq.") for p in MAPPING["packages"])


def test_every_data_file_is_shipped():
    """Every tracked non-Python file inside a package folder is matched by a `package-data` glob, so
    an installed (non-editable) conq has its corpora, port references and ports too."""
    import subprocess

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    tracked = subprocess.run(["git", "ls-files", *MAPPING["package-dir"].values()], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    assert len(tracked) > 100, "git ls-files found too few files: the walk is broken"
    missing = []
    for rel in tracked:
        path = Path(rel)
        if path.suffix == ".py" or path.name in (".gitignore",):
            continue
        folder = path.parts[0]
        # the deepest package that holds the file, and the file's path relative to that package
        owner, inside = None, None
        for pkg, pkg_folder in MAPPING["package-dir"].items():
            if folder != pkg_folder:
                continue
            for depth in range(len(path.parts) - 1, 0, -1):
                candidate = ROOT.joinpath(*path.parts[:depth])
                if (candidate / "__init__.py").is_file():
                    owner = ".".join([pkg, *path.parts[1:depth]])
                    inside = "/".join(path.parts[depth:])
                    break
        assert owner, f"{rel}: no package holds it"
        # setuptools expands the globs with glob(), where `*` does not cross a folder
        pkg_dir = ROOT / rel[: len(rel) - len(inside)]
        if not any((ROOT / rel) in set(pkg_dir.glob(g)) for g in data.get(owner, [])):
            missing.append(f"{rel} (package {owner}, as {inside!r})")
    assert not missing, "package-data in pyproject.toml misses: " + "; ".join(missing)
