"""``conq mutate-model``: model mutation coverage, is every rule of a model pinned by a claim (issue 31).
"""

from __future__ import annotations

from typing import List, Optional

import typer
from rich.table import Table

from . import kit


def mutate_model(
    model: str = typer.Argument(..., help="The model (see `conq list`)."),
    configs: Optional[List[str]] = typer.Option(
        None, "--config", "-c", help="Only this named configuration (repeatable; default: every suite configuration "
        "of the model's manifest)."),
    mutants: Optional[List[str]] = typer.Option(None, "--mutant", "-m", help="Only this mutant id (repeatable), as a "
                                                "report names it (cl-1a2b3c4d)."),
    operators: Optional[List[str]] = typer.Option(None, "--operator", help="Only this mutation operator (repeatable)."),
    workers: int = typer.Option(2, "--workers", min=0, help="Worker processes (0: search in this process)."),
    show_all: bool = typer.Option(False, "--all", help="List every mutant (killed and equivalent ones too)."),
    json_out: bool = kit.JsonOpt,
) -> None:
    """Mutate the model's own step code (drop a conjunct, negate a condition, move a comparison or a bound by
    one, drop, duplicate or swap an update), search each mutant on the suite configurations and classify it:
    killed (a named property violated or a witness lost), count-only (the reachable graph changed, every claim
    still holds: a specification hole), argued (count-only, with a written argument in spec/MODEL.md), equivalent
    (the same reachable graph) or crashed.  Exit 1 when a count-only mutant has no argument; 3 when
    the engine itself failed on a mutant (reported as crashed, "internal")."""

    def body() -> int:
        from conq.model.engines.model_mutation import VERDICTS
        from conq.model.engines.mutate_ast import OPERATORS
        from conq.model.engines.registry import model_class, model_names
        from conq.mutate import mutate_model as run, report_rows, suite_configs

        if model not in model_names():
            raise kit.UsageProblem(f"unknown model {model!r} (known: {', '.join(model_names())})")
        known = list(model_class(model).configs())
        for c in configs or []:
            if c not in known:
                raise kit.UsageProblem(f"--config: {model} has no configuration {c!r} (known: {', '.join(known)})")
        for op in operators or []:
            if op not in OPERATORS:
                raise kit.UsageProblem(f"--operator: unknown operator {op!r} (known: {', '.join(OPERATORS)})")
        if mutants:
            from conq.model.engines.isolated import package_of
            from conq.model.engines.model_mutation import prefix_of
            from conq.model.engines.mutate_ast import enumerate_mutants
            from conq.model.engines.registry import MODELS

            known_ids = {m.ident(prefix_of(model)) for m in enumerate_mutants(package_of(MODELS[model])[0])}
            missing = sorted(set(mutants) - known_ids)
            if missing:
                raise kit.UsageProblem(f"--mutant: no mutant {', '.join(missing)} of {model} "
                                       "(ids are printed by a run without --mutant)")
        suite = suite_configs(model, configs)
        progress = None if json_out else (lambda msg: kit.err.print(f"[dim]{msg}[/]"))
        rep = run(model, suite, workers=workers, only=mutants, operators=operators, progress=progress)
        if json_out:
            kit.emit_json(rep.to_json())
        else:
            j = rep.to_json()
            table = Table(title=f"{model}: model mutation coverage on {len(suite)} configuration(s)", title_justify="left")
            for col in ("mutants", "killed", "count-only", "argued", "equivalent", "crashed", "timeout", "score"):
                table.add_column(col, justify="right")
            table.add_row(str(j["mutants"]), str(j["killed"]), str(j["count_only"]), str(j["argued"]),
                          str(j["equivalent"]), str(j["crashed"]), str(j["timeout"]),
                          "-" if j["score"] is None else f"{100 * j['score']:.1f}%")
            kit.out.print(table)
            shown = [r for r in report_rows(rep) if show_all or r["verdict"] not in ("killed", "equivalent")]
            for r in shown:
                kit.out.print(f"{r['verdict']:10s} {r['id']}  {r['location']}  {r['operator']}: {r['detail']}", markup=False)
                kit.out.print("           " + _why(r), markup=False)
            if j["unused_arguments"]:
                kit.out.print(f"arguments in {j['arguments']} for mutants that are no longer count-only: "
                              + ", ".join(j["unused_arguments"]), markup=False)
            kit.out.print(rep.summary(), markup=False)
            assert set(VERDICTS) >= {r["verdict"] for r in rep.results}
        if any(r.get("internal") for r in rep.results):  # the engine failed: its own code, not a verdict
            return kit.EXIT_INTERNAL
        if rep.count("count-only"):
            return kit.EXIT_VIOLATION
        return kit.EXIT_INCOMPLETE if rep.count("timeout") else kit.EXIT_OK

    kit.guard(body, json_out)


def _why(r: dict) -> str:
    """One line: what decided the verdict."""
    v = r["verdict"]
    if v == "killed":
        length = f", counterexample {r['length']} steps" if r.get("length") is not None else ""
        return f"{r['how']}: '{r['property']}' on {r['config']}{length}"
    if v in ("count-only", "argued"):
        ch = r.get("changed") or {}
        text = f"on {ch.get('config')}: states {ch.get('states', {}).get('model')} -> {ch.get('states', {}).get('mutant')}"
        if ch.get("only_mutant"):
            text += f"; a state only the mutant reaches, {ch['only_mutant']['length']} steps: " + ", ".join(ch["only_mutant"]["steps"])
        elif ch.get("only_model"):
            text += f"; a state the mutant loses, {ch['only_model']['length']} steps: " + ", ".join(ch["only_model"]["steps"])
        if v == "argued":
            text += f"; argued: {r.get('argument', '')}"
        return text
    if v == "equivalent":
        return r.get("reason", "")
    return r.get("error") or r.get("detail") or ""
