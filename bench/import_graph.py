"""The import graph of the distribution, and what it must not contain (issue 30).

    .venv/bin/python bench/import_graph.py            # summary: circles, layer breaches, generic -> system, largest files
    .venv/bin/python bench/import_graph.py --edges    # also every edge, one per line (module -> module)
    .venv/bin/python bench/import_graph.py --dot g.dot   # the graph for Graphviz (dot -Tsvg g.dot > g.svg)

The graph's nodes are the modules of the five folders the distribution maps under ``conq``
(pyproject.toml ``package-dir``: conq/, model/, impl/, conformance/, spec/); an edge ``a -> b``
means ``a`` imports ``b`` somewhere in its file (a function-level import is an import too: it runs
when the function does; one under ``if TYPE_CHECKING:`` is not, it never runs).  Importing one's own ancestor package is not an edge (Python runs a
package's ``__init__`` before any module inside it anyway).  Read by ``ast``, nothing imported.

tests/test_packaging.py asserts on the same graph (it loads this file): no circle anywhere, the
model and the implementation independent of each other, nothing under the command line imports
it, and no generic module imports a system package.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
MAPPING = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
#: folder -> import name (model -> conq.model, ...)
ROOTS = {folder: pkg for pkg, folder in MAPPING["package-dir"].items()}
#: the layers under the command line (and the spec loaders beside them)
LAYERS = ("conq.model", "conq.impl", "conq.conformance", "conq.spec")


def module_name(path: Path) -> str:
    folder = path.relative_to(ROOT).parts[0]
    rel = path.relative_to(ROOT / folder).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([ROOTS[folder], *parts])


def _files(folder: str) -> list[Path]:
    base = ROOT / folder
    skip = [ROOT / f for f in ROOTS if f != folder and (ROOT / f).is_relative_to(base)]
    return [f for f in sorted(base.rglob("*.py")) if not any(f.is_relative_to(s) for s in skip)]


def _walk(tree: ast.AST):
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports for type checkers
    only: they never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def imports(folder: str) -> dict[str, set[str]]:
    """module -> the absolute names it imports (relative imports resolved; ``from a import b`` names
    both ``a`` and ``a.b``), at any depth of the file."""
    out = {}
    for f in _files(folder):
        name = module_name(f)
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        mods = set()
        for node in _walk(ast.parse(f.read_text(), filename=str(f))):
            if isinstance(node, ast.Import):
                mods |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                mods.add(target)
                mods |= {f"{target}.{a.name}" for a in node.names}
        out[name] = mods
    return out


def all_imports() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for folder in ROOTS:
        out.update(imports(folder))
    return out


def graph(imported: dict[str, set[str]] | None = None) -> nx.DiGraph:
    """Modules and the modules they import (names that are not modules of ours are dropped)."""
    imported = imported if imported is not None else all_imports()
    g = nx.DiGraph()
    for module, names in imported.items():
        g.add_node(module)
        for m in names:
            if m in imported and m != module and not module.startswith(m + "."):
                g.add_edge(module, m)
    return g


def circles(g: nx.DiGraph) -> list[list[str]]:
    """Every strongly connected part of more than one module (each holds at least one circle)."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def system_packages() -> set[str]:
    """The system packages: a sub-package name found in at least two of model/, impl/ and
    conformance/ (consumer_lists, ...), under each of those layers."""
    found: dict[str, int] = {}
    for folder in ("model", "impl", "conformance"):
        for p in (ROOT / folder).iterdir():
            if (p / "__init__.py").is_file():
                found[p.name] = found.get(p.name, 0) + 1
    names = {n for n, k in found.items() if k >= 2}
    return {f"conq.{layer}.{n}" for n in names for layer in ("model", "impl", "conformance")}


def generic_modules(imported: dict[str, set[str]]) -> list[str]:
    """The modules that must not know any system: conq's own (the command line), the spec loaders,
    and conformance/'s modules outside the system packages."""
    systems = system_packages()
    return sorted(m for m in imported
                  if (m == "conq" or m.startswith(("conq.cli", "conq.jobs", "conq.report", "conq.spec", "conq.conformance")))
                  and not any(m == s or m.startswith(s + ".") for s in systems)
                  and m not in ("conq.model", "conq.impl"))


def generic_to_system(imported: dict[str, set[str]]) -> list[str]:
    """``module -> system module`` for every import (or ``module:Name`` string target) of a system
    package in a generic module."""
    systems = system_packages()
    bad = []
    target = re.compile(r"(conq\.(?:model|impl|conformance)\.[a-z_]+)[\w.]*:\w+")
    for m in generic_modules(imported):
        for name in sorted(imported[m]):
            if any(name == s or name.startswith(s + ".") for s in systems):
                bad.append(f"{m} imports {name}")
        path = _path_of(m)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                hit = target.fullmatch(node.value.strip())
                if hit and hit.group(1) in systems:
                    bad.append(f"{m} names {node.value!r}")
    return bad


def layer_breaches(imported: dict[str, set[str]]) -> list[str]:
    """Imports across layers that must not happen: model/ <-> impl/, model/ and impl/ -> conformance/,
    and any of the layers under the command line -> the command line (``conq.cli``, ``conq.jobs``,
    ``conq.report``, a shim such as ``conq.catalog``, or a name of ``conq`` itself: its version)."""
    bad = []
    forbidden = {"conq.model": ("conq.impl", "conq.conformance"), "conq.impl": ("conq.model", "conq.conformance")}
    for m, names in sorted(imported.items()):
        layer = next((lay for lay in LAYERS if m == lay or m.startswith(lay + ".")), None)
        if layer is None:
            continue
        for name in sorted(names):
            if name.startswith(forbidden.get(layer, ())):
                bad.append(f"{m} imports {name}")
            if name.startswith("conq.") and not name.startswith(tuple(lay + "." for lay in LAYERS)) and name not in LAYERS:
                bad.append(f"{m} imports {name} (the command line, or conq's root)")
    return bad


def _path_of(module: str) -> Path:
    for folder in ROOTS:
        for f in _files(folder):
            if module_name(f) == module:
                return f
    raise KeyError(module)


def largest_files(n: int = 12) -> list[tuple[int, str]]:
    """The ``n`` largest tracked files, by lines (``git ls-files | xargs wc -l``)."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    counts = []
    for f in files:
        p = ROOT / f
        try:
            counts.append((p.read_bytes().count(b"\n"), f))
        except (OSError, IsADirectoryError):
            continue
    return sorted(counts)[-n:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", action="store_true", help="print every edge")
    ap.add_argument("--dot", type=Path, help="write the graph in Graphviz's format")
    ap.add_argument("--root", type=Path, help="another checkout to read (e.g. `git worktree add /tmp/old <commit>`)")
    args = ap.parse_args(argv)
    if args.root:
        global ROOT, MAPPING, ROOTS
        ROOT = args.root.resolve()
        MAPPING = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
        ROOTS = {folder: pkg for pkg, folder in MAPPING["package-dir"].items()}
    imported = all_imports()
    g = graph(imported)
    print(f"{g.number_of_nodes()} modules, {g.number_of_edges()} import edges")
    cs = circles(g)
    print(f"import circles: {len(cs)}")
    for c in cs:
        print("  " + " <-> ".join(c))
    breaches = layer_breaches(imported)
    print(f"layer breaches: {len(breaches)}")
    for b in breaches:
        print("  " + b)
    leaks = generic_to_system(imported)
    print(f"generic modules naming a system: {len(leaks)} (of {len(generic_modules(imported))} generic modules)")
    for b in leaks:
        print("  " + b)
    print("largest files (lines):")
    for lines, f in reversed(largest_files()):
        print(f"  {lines:6d} {f}")
    if args.edges:
        for a, b in sorted(g.edges()):
            print(f"{a} -> {b}")
    if args.dot:
        # a file, not a folder: written whole and never through a link (conformance/output_folder.py),
        # and only over a graph this command wrote before
        text = "digraph conq {\n" + "".join(f'  "{a}" -> "{b}";\n' for a, b in sorted(g.edges())) + "}\n"
        if args.dot.is_symlink() or (args.dot.exists() and not args.dot.read_text(errors="replace").startswith("digraph conq {")):
            sys.exit(f"error: --dot {args.dot}: exists and is not a graph this command wrote; refusing to overwrite it")
        from conq.conformance.output_folder import write_atomic

        write_atomic(args.dot, text)
    return 1 if cs or breaches or leaks else 0


if __name__ == "__main__":
    sys.exit(main())
