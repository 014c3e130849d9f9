"""The distribution's shape: one import root, every package listed, one package per system in
every layer, the model and the implementation independent of each other, nothing under the command
line importing it, no import circle anywhere, generic modules that never name a system, and every
system declared once (issue 30).  The import graph is bench/import_graph.py's."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPPING = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
#: folder -> import name (model -> conq.model, ...)
ROOTS = {folder: pkg for pkg, folder in MAPPING["package-dir"].items()}
SYSTEMS = ("consumer_lists", "ordered_consumption", "recovery_deferral")
#: conformance/'s generic sub-packages (no system's)
GENERIC_PACKAGES = ("spark_replay",)


def test_every_package_folder_is_listed():
    listed = set(MAPPING["packages"])
    found = set()
    for pkg, folder in MAPPING["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([pkg, *rel.parts]) if rel.parts else pkg)
    assert found == listed, f"pyproject packages differ: missing {found - listed}, extra {listed - found}"


def _graph_tool():
    """bench/import_graph.py: the one walker of the import graph (a command of its own too)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("conq_import_graph", ROOT / "bench" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GRAPH = _graph_tool()


def test_model_and_impl_never_import_each_other_and_nothing_under_the_command_line_imports_it():
    """model/ and impl/ independent, neither imports conformance/; none of model/, impl/,
    conformance/ and spec/ imports the command line (conq.cli, conq.jobs, conq.report, the old
    conq.catalog / conq.manifest names, or conq's own version: it comes from package metadata)."""
    imports = GRAPH.all_imports()
    for folder in ("model", "impl", "conformance"):
        assert sum(1 for m in imports if m.startswith(f"conq.{folder}")) >= 6, f"{folder}: too few modules: the walk is broken"
    assert GRAPH.layer_breaches(imports) == []


def test_the_checks_see_a_violation():
    """The walk resolves relative imports, and each check fails on a breach (a check that cannot
    fail is no check)."""
    imports = GRAPH.all_imports()
    assert "conq.model.kernel" in imports["conq.model.engines.explorer"]
    assert "conq.conformance.trace" in imports["conq.conformance.suite"]  # `from . import generate, trace`

    def with_edge(module: str, name: str) -> dict[str, set[str]]:
        changed = {k: set(v) for k, v in imports.items()}
        changed[module].add(name)
        return changed

    (circle,) = GRAPH.circles(GRAPH.graph(with_edge("conq.model.kernel", "conq.model.engines.explorer")))
    assert {"conq.model.engines.explorer", "conq.model.kernel"} <= set(circle)
    assert GRAPH.layer_breaches(with_edge("conq.impl.scheduling", "conq.model.kernel")) == [
        "conq.impl.scheduling imports conq.model.kernel"]
    assert len(GRAPH.layer_breaches(with_edge("conq.conformance.trace", "conq.cli"))) == 1
    assert "conq.conformance.suite imports conq.conformance.consumer_lists.driver" in GRAPH.generic_to_system(
        with_edge("conq.conformance.suite", "conq.conformance.consumer_lists.driver"))


def test_no_import_circle_anywhere():
    """Not inside model/ (the readable spec), nor in impl/, conformance/, spec/ or the command line,
    nor across them; a function-level import counts (it runs when the function does)."""
    g = GRAPH.graph()
    assert GRAPH.circles(g) == []
    assert g.has_edge("conq.model.consumer_lists.model", "conq.model.consumer_lists.properties")


def test_generic_modules_never_name_a_system():
    """The generic layers (conformance/'s own modules, the spec loaders, the command line) find the
    systems only through the registry (conformance/systems.py): no import of a system package, no
    ``module:Name`` string naming one.  The issue's grep, as a test."""
    imports = GRAPH.all_imports()
    generic = GRAPH.generic_modules(imports)
    assert {"conq.conformance.suite", "conq.conformance.views", "conq.cli", "conq.spec.catalog"} <= set(generic)
    assert not any("consumer_lists" in m for m in generic)
    assert GRAPH.generic_to_system(imports) == []


def test_every_shipped_system_is_declared_once_and_registered():
    """Each conformance/<system>/ declares SYSTEM, listed once as a ``conq.systems`` entry point,
    and the registry finds exactly those."""
    from conq.conformance import systems

    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["conq.systems"]
    assert sorted(eps.values()) == sorted(f"conq.conformance.{s}:SYSTEM" for s in SYSTEMS)
    for name, target in eps.items():
        system = systems.get(name)
        assert system.name == name and systems.origins()[name] == target
        assert system.package == target.partition(":")[0]


def test_the_version_comes_from_package_metadata():
    from importlib.metadata import version

    import conq
    from conq.spec import version as spec_version

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert conq.__version__ == version("conq") == spec_version() == declared


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
            if folder == "conformance" and system in GENERIC_PACKAGES:
                continue  # generic machinery in a package of its own (one idea a module)
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


@pytest.mark.slow
def test_the_installed_wheel_runs_the_main_job_with_its_golden_corpus(tmp_path):
    """The wheel built from the tracked files, installed in a fresh virtual environment, runs
    ``conq run`` on a small subset (one model, one configuration, 20 generated traces, no Spark)
    from a folder outside the checkout: the golden corpus is found in the installed package
    (importlib.resources) and checked, never "0 golden, ok".  The third-party packages come from
    this environment (a ``.pth`` file), so nothing is downloaded and nothing of the checkout is
    imported."""
    import subprocess
    import sys
    import sysconfig

    src = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in tracked:
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / rel).read_bytes())
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(src)], check=True, capture_output=True, timeout=600)
    (wheel,) = dist.glob("conq-*.whl")
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300)
    python = env / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "conq-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True, timeout=600)
    work = tmp_path / "work"
    work.mkdir()
    where = subprocess.run([python, "-c", "import conq, conq.conformance; print(conq.__file__, conq.conformance.__file__, conq.__version__)"],
                           cwd=work, capture_output=True, text=True, check=True).stdout.split()
    assert all(Path(p).is_relative_to(env) for p in where[:2]) and where[2] == tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["project"]["version"], where
    done = subprocess.run([env / "bin" / "conq", "run", "--model", "recovery-deferral/reference-one-queue", "--traces", "20",
                           "--no-replay", "--out", str(work / "reports"), "--json"],
                          cwd=work, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    (row,) = [r for r in doc["rows"] if r["stage"] == "conformance"]
    assert row["ok"] and row["traces"] == 20 and row["corpus"] > 0, row
    assert [r["subject"] for r in doc["rows"] if r["stage"] == "model-check"] == ["recovery-deferral/reference-one-queue"]
    assert not any(r["stage"] == "spark replay" for r in doc["rows"])
    assert (work / "reports" / "summary.json").is_file()



#: how a file's first comment starts, by suffix (a file over the limit says there why it is one file)
COMMENT = {".py": "#", ".toml": "#", ".sh": "#", ".md": "<!--", ".js": "//", ".java": "//", ".j2": "{#", ".css": "/*"}
#: the most lines a tracked file may have without saying why it must be one file
MAX_LINES = 900


def one_file_reasons() -> tuple[list[str], list[str]]:
    """(files over the limit that say why, files over it that do not): a tracked text file of more
    than MAX_LINES lines must open with a comment that says why it must be one file ("one file: ...")."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    said, unsaid = [], []
    for rel in tracked:
        path = ROOT / rel
        if path.suffix not in COMMENT or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.count("\n") <= MAX_LINES:
            continue
        first = next((line for line in text.splitlines() if line.strip() and not line.startswith("#!")), "")  # after a shebang
        ok = first.lstrip().startswith(COMMENT[path.suffix]) and "one file" in first.lower()
        (said if ok else unsaid).append(f"{rel} ({text.count(chr(10))} lines)")
    return said, unsaid


def test_no_file_over_900_lines_unless_its_first_comment_says_why():
    said, unsaid = one_file_reasons()
    assert not unsaid, (f"over {MAX_LINES} lines without a first comment saying why it must be one file "
                        f"('# one file: ...'): {unsaid}")
