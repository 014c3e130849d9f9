"""Model mutation coverage as conq runs it: the suite configurations from the manifest, the written
arguments from the model's spec page (issue 31; the engine is model/engines/model_mutation.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from conq import manifest
from conq.catalog import _spec_dir
from conq.model.engines.model_mutation import MutationReport, SuiteConfig, arguments_from_markdown, run_mutation
from conq.model.engines.registry import MODELS


def suite_configs(model: str, names: Iterable[str] | None = None) -> list[SuiteConfig]:
    """The configurations ``model`` is checked on: every manifest entry of it that ``conq run`` checks
    (not slow; symmetry left out, the entry without it is there), each configuration and override
    set once, with the entry's liveness setting.  ``names``: only these named configurations (a name
    without a manifest entry is taken as it is, with liveness)."""
    seen: dict[tuple, SuiteConfig] = {}
    for exp in manifest.load():
        if exp.model != model or exp.slow or exp.symmetry:
            continue
        cfg = SuiteConfig.of(exp.config, exp.overrides, exp.liveness)
        seen.setdefault((cfg.name, cfg.overrides), cfg)
    configs = list(seen.values())
    if names is not None:
        wanted = list(names)
        configs = [c for c in configs if c.name in wanted]
        have = {c.name for c in configs}
        configs += [SuiteConfig.of(n) for n in wanted if n not in have]
    return configs


def smallest_config(model: str) -> SuiteConfig:
    """The smallest configuration of ``model``'s manifest (fewest states) whose claims all hold: what
    ``conq run`` measures the mutation score on."""
    entries = [e for e in manifest.load() if e.model == model and not e.slow and not e.symmetry and not e.violated
               and not e.overrides]
    e = min(entries, key=lambda x: (x.states, x.config))
    return SuiteConfig.of(e.config, {}, e.liveness)


def spec_page(model: str) -> Path:
    return _spec_dir() / f"{model}.md"


def mutate_model(model: str, configs: list[SuiteConfig] | None = None, *, workers: int = 2,
                 only: Iterable[str] | None = None, operators: Iterable[str] | None = None,
                 progress: Callable[[str], None] | None = None) -> MutationReport:
    """Mutation coverage of a registered model on its suite configurations (or ``configs``), with the
    arguments written in spec/<model>.md."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r} (known: {', '.join(MODELS)})")
    page = spec_page(model)
    args = arguments_from_markdown(page.read_text(encoding="utf-8")) if page.is_file() else {}
    return run_mutation(model, MODELS[model], configs if configs is not None else suite_configs(model),
                        workers=workers, arguments=args, arguments_file=str(page.relative_to(page.parent.parent)),
                        only=only, operators=operators, progress=progress)


def report_rows(rep: MutationReport) -> list[dict[str, Any]]:
    """The mutants worth a reader's attention first: holes, crashes, timeouts, then the rest."""
    rank = {"count-only": 0, "timeout": 1, "crashed": 2, "argued": 3, "killed": 4, "equivalent": 5}
    return sorted(rep.results, key=lambda r: (rank.get(r["verdict"], 9), r["location"]))


# -- a manifest mismatch explained (issue 31; wired into `conq run` / the manifest check) ------------

def _git(args: list[str], cwd: Path) -> str | None:
    import subprocess

    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def pinned_sources(model: str) -> tuple[str, dict[str, str]] | None:
    """(revision, the model package's files there) for the model the manifest was pinned on: HEAD's
    files when the working tree changed the package, else the files of the last commit that changed
    the model's manifest.  None outside a git checkout."""
    from conq.model.engines.isolated import package_of

    directory, _ = package_of(MODELS[model])
    root = _git(["rev-parse", "--show-toplevel"], directory)
    if root is None:
        return None
    root_path = Path(root.strip())
    rel = directory.resolve().relative_to(root_path.resolve()).as_posix()
    changed = _git(["status", "--porcelain", "--", rel], root_path)
    if changed:
        rev = "HEAD"
    else:
        manifest_file = (_spec_dir() / "manifest" / f"{model}.toml").resolve().relative_to(root_path.resolve()).as_posix()
        rev = (_git(["log", "-1", "--format=%H", "--", manifest_file], root_path) or "").strip() or "HEAD"
    names = _git(["ls-tree", "--name-only", f"{rev}:{rel}"], root_path)
    if names is None:
        return None
    sources = {}
    for name in names.split():
        if name.endswith(".py"):
            text = _git(["show", f"{rev}:{rel}/{name}"], root_path)
            if text is not None:
                sources[name] = text
    return rev, sources


def explain_mismatch(exp: manifest.Expectation) -> list[str]:
    """Readable lines saying what moved in a manifest entry's configuration since it was pinned: the
    model as pinned (git) against the model now (graph_diff.describe)."""
    from conq.model.engines.graph_diff import describe
    from conq.model.engines.model_mutation import explain_change

    pinned = pinned_sources(exp.model)
    if pinned is None:
        return ["(no git checkout: the pinned model cannot be loaded to compare with)"]
    rev, sources = pinned
    cfg = SuiteConfig.of(exp.config, exp.overrides, exp.liveness)
    try:
        diff = explain_change(MODELS[exp.model], cfg, sources)
    except Exception as e:  # the pinned model may not load against today's engines
        return [f"(the model as pinned at {rev[:10]} cannot be searched today: {type(e).__name__}: {e})"]
    return [f"compared with the model at {rev[:10]}:"] + describe(diff, ("pinned", "found"))
