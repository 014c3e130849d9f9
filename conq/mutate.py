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
