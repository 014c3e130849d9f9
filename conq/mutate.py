"""Model mutation coverage as conq runs it: the suite configurations from the manifest, the written
arguments from the model's spec page (issue 31; the engine is model/engines/model_mutation.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from conq.spec import manifest
from conq.spec.catalog import _spec_dir
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


def smallest_config(model: str, among: Iterable[str] | None = None) -> SuiteConfig:
    """The smallest configuration of ``model``'s manifest (fewest states) whose claims all hold (of the
    named ones ``among``, when given: any of them if none is clean): what ``conq run`` measures the
    mutation score on."""
    entries = [e for e in manifest.load() if e.model == model and not e.slow and not e.symmetry and not e.overrides]
    if among is not None:
        names = set(among)
        entries = [e for e in entries if e.config in names]
    clean = [e for e in entries if not e.violated] or entries
    if not clean:
        return SuiteConfig.of(sorted(among)[0]) if among else SuiteConfig.of(next(iter(suite_configs(model))).name)
    e = min(clean, key=lambda x: (x.states, x.config))
    return SuiteConfig.of(e.config, {}, e.liveness)


def spec_page(model: str) -> Any:
    """The model's spec page (spec/MODEL.md; a Traversable of the installed package)."""
    return _spec_dir() / f"{model}.md"


def mutate_model(model: str, configs: list[SuiteConfig] | None = None, *, workers: int = 2,
                 only: Iterable[str] | None = None, operators: Iterable[str] | None = None, lines: bool = True,
                 sample: int | None = None,
                 progress: Callable[[str], None] | None = None,
                 on_result: Callable[[dict[str, Any]], None] | None = None) -> MutationReport:
    """Mutation coverage of a registered model on its suite configurations (or ``configs``), with the
    arguments written in spec/<model>.md."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r} (known: {', '.join(MODELS)})")
    page = spec_page(model)
    args = arguments_from_markdown(page.read_text(encoding="utf-8")) if page.is_file() else {}
    return run_mutation(model, MODELS[model], configs if configs is not None else suite_configs(model),
                        workers=workers, arguments=args, arguments_file=f"spec/{model}.md",
                        only=only, operators=operators, progress=progress, on_result=on_result, lines=lines,
                        sample=sample)


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


# -- the main job's stage ----------------------------------------------------------------------------

#: mutants the main job searches per model (a count: the full run is bench/model_mutation.py)
STAGE_SAMPLE = 30
#: a mutant count-only on the smallest configuration is searched first on the suite's configurations
#: of at most this many states (the manifest's counts), then, if still count-only, on the rest
ESCALATE_STATES = 20_000


def mutation_stage(out_dir: Path, console: Any,
                   models: Mapping[str, frozenset[str] | None] | None = None) -> list[dict[str, Any]]:
    """``conq run``: each model's mutation score on its smallest configuration (smallest_config), over
    a fixed sample of :data:`STAGE_SAMPLE` of the mutants whose code runs there (ids in hash order).
    A mutant count-only there is searched on the rest of the suite; the row fails when one stays
    count-only everywhere without a written argument (a rule no claim pins), or the engine errs.
    ``models`` is the run's subset (model -> the configurations named, None: all of them; None: every
    model). Each model's report: reports/model-mutation-MODEL.json."""
    from conq.model.engines.registry import model_names

    rows = []
    for model in model_names():
        if models is not None and model not in models:
            continue
        t0 = time.perf_counter()
        named = models.get(model) if models is not None else None
        small = smallest_config(model, named)
        console.print(f"[dim]model mutation: {model} on {small.label}[/]")
        rep = mutate_model(model, [small], sample=STAGE_SAMPLE)
        holes = [r for r in rep.results if r["verdict"] == "count-only"]
        elsewhere: dict[str, dict] = {}
        if holes:
            # the rest of the suite, in two tiers: the configurations of at most ESCALATE_STATES states
            # first, and only what is still count-only on them on the larger ones
            sizes = {(c.name, c.overrides): e.states for e in manifest.load() if e.model == model
                     for c in [SuiteConfig.of(e.config, e.overrides)]}
            rest = [c for c in suite_configs(model) if (c.name, c.overrides) != (small.name, small.overrides)]
            size = {id(c): sizes.get((c.name, c.overrides), 0) for c in rest}
            for tier in ([c for c in rest if size[id(c)] <= ESCALATE_STATES], [c for c in rest if size[id(c)] > ESCALATE_STATES]):
                todo = [r["id"] for r in holes if elsewhere.get(r["id"], {}).get("verdict") != "killed"]
                if not tier or not todo:
                    continue
                console.print(f"[dim]model mutation: {model}: {len(todo)} count-only on {small.label}, searched on "
                              f"{len(tier)} more configurations[/]")
                wider = mutate_model(model, tier, only=todo, lines=False)
                for r in wider.results:
                    if elsewhere.get(r["id"], {}).get("verdict") != "killed":
                        elsewhere[r["id"]] = r
        # count-only here and the same graph everywhere else is still count-only: only a kill settles it
        left = [r for r in holes if elsewhere.get(r["id"], r)["verdict"] != "killed"]
        internal = [r for r in rep.results if r.get("internal")]
        j = rep.to_json()
        j["count_only_elsewhere"] = {i: {k: r.get(k) for k in ("verdict", "config", "property", "how", "length")}
                                     for i, r in elsewhere.items()}
        score = "-" if j["score"] is None else f"{100 * j['score']:.1f}%"
        pop = j["population"]
        result = (f"{j['mutants']} of {pop.get('run', j['mutants'])} mutants run there ({pop.get('mutants')} in all): {j['killed']} killed, {j['equivalent']} equivalent, {j['argued']} argued, "
                  f"{j['crashed']} crashed, {j['count_only']} count-only; score {score}")
        if holes:
            result += f"; of the count-only, {len(holes) - len(left)} killed on a larger configuration"
        if left:
            result += "; specification holes: " + ", ".join(f"{r['id']} ({r['location']} {r['operator']})" for r in left)
        if internal:
            result += f"; engine errors: {internal[0].get('error')}"
        rows.append({"stage": "model mutation", "subject": f"{model}/{small.label}", "result": result,
                     "ok": not left and not internal and not j["timeout"], "seconds": round(time.perf_counter() - t0, 2),
                     # staged by the main job in its output folder (conformance/output_folder.py)
                     "files": {f"model-mutation-{model}.json": json.dumps(j, indent=1, default=str) + "\n"}})
    return rows
