"""Results judged against what is expected of them, and a closing line that says which.

``conq check --all-configs`` runs every named configuration of a model, and some violate by
design (an upstream variant, a mutant): the manifest (``spec/manifest/*.toml``) says which
properties each configuration must violate and how many states it has.  ``conq upstream``'s
divergences are judged against the known divergence classes (each with its evidence: a deviation
record, a model variant).  Either command exits 0 when every result is as expected, 1 otherwise,
and its last line says which (and names what was not).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

from conq.model.kernel import Kind, config_dict


@dataclass
class Judgement:
    """One result against its expectation."""

    subject: str
    as_expected: bool
    #: what differs from the expectation (empty when as expected)
    problems: list[str] = field(default_factory=list)
    #: what the expectation was, in words ("violates no-lost-wakeup by design (manifest)")
    expectation: str = ""
    #: a limit ended the run before a verdict
    incomplete: bool = False


def _same_settings(model: Any, exp: Any) -> bool:
    """Whether a checked model is the manifest entry's configuration with its overrides."""
    from conq.model.engines.registry import load_model

    try:
        wanted = load_model(exp.model, exp.config, exp.overrides)
    except Exception:  # noqa: BLE001 - an entry the model no longer accepts matches nothing
        return False
    return config_dict(wanted.config) == config_dict(model.config)


def find_expectation(model: Any, config_name: str, *, symmetry: bool = False) -> Any | None:
    """The manifest entry for this model and configuration (its settings, overrides included, and
    the symmetry setting must agree), or None."""
    from conq.spec import manifest

    for exp in manifest.load():
        if exp.model == model.name and exp.config == config_name and exp.symmetry == symmetry and _same_settings(model, exp):
            return exp
    return None


def judge_exploration(ex: Any, config_name: str, *, symmetry: bool = False, liveness: bool = True) -> Judgement:
    """An exploration against the manifest entry of its configuration; without an entry, the plain
    rule (as expected when every property holds or is witnessed)."""
    from conq.spec import manifest

    subject = f"{ex.model.name}/{config_name}"
    violated = sorted(v.prop.name for v in ex.violations)
    if not ex.complete:
        return Judgement(subject, False, [f"incomplete: {ex.stop_reason}"], incomplete=not violated)
    exp = find_expectation(ex.model, config_name, symmetry=symmetry)
    if exp is None:
        problems = [f"{v.prop.name}: {v.status}" for v in ex.verdicts if v.status in ("violated", "vacuous", "unreached")]
        return Judgement(subject, not problems, problems, "no manifest entry: every property must hold")
    checked = ex
    live = {p.name for p in ex.model.property_list() if p.kind is Kind.LEADS_TO}
    if not liveness and exp.liveness:  # liveness was skipped here: compare the safety properties only
        exp = dataclasses.replace(exp, violated=tuple(x for x in exp.violated if x not in live))
    # an entry with liveness = false pins the safety verdicts only: a run that checked liveness too is
    # judged on those (its liveness verdicts are news to the manifest, not a mismatch)
    problems = manifest.mismatches(exp, checked, ignore=live if liveness and not exp.liveness else ())
    why = f"violates {', '.join(exp.violated)} by design (manifest)" if exp.violated else "every property holds (manifest)"
    return Judgement(subject, not problems, problems, why)


def closing_line(judgements: Iterable[Judgement], noun: str = "configurations") -> tuple[int, str]:
    """The exit code (0 all as expected, 1 otherwise, 4 when only limits stood in the way) and the
    closing line that says which."""
    js = list(judgements)
    bad = [j for j in js if not j.as_expected]
    by_design = sum(1 for j in js if j.as_expected and "by design" in j.expectation)
    if not bad:
        extra = f" ({by_design} violate by design, as the manifest expects)" if by_design else ""
        return 0, f"{len(js)} {noun}: all as expected{extra}"
    code = 4 if all(j.incomplete for j in bad) else 1
    names = "; ".join(f"{j.subject} ({'; '.join(j.problems)})" for j in bad)
    return code, f"{len(bad)} of {len(js)} {noun} not as expected: {names}"


#: divergence classes that are not a known, documented class: they fail the run
UNKNOWN_CLASSES = ("unclassified", "conq validate rejected")


def judge_divergences(divergences: dict[str, dict[str, Any]]) -> tuple[int, str]:
    """``conq upstream``: every divergence in a known, documented class (a deviation record, a
    model variant) is as expected; an unclassified one, or a log the model rejects, is not."""
    unknown = {claim: d for claim, d in divergences.items()
               if any(d["smallest"]["classification"].startswith(u) for u in UNKNOWN_CLASSES)}
    known = len(divergences) - len(unknown)
    if not unknown:
        if not divergences:
            return 0, "no divergence: as expected"
        return 0, (f"{known} divergence{'s' if known != 1 else ''}, all of known, documented classes "
                   f"({', '.join(sorted(divergences))}): as expected")
    names = ", ".join(f"{c} [{d['smallest']['classification']}]" for c, d in sorted(unknown.items()))
    return 1, f"{len(unknown)} of {len(divergences)} divergences not of a known class: {names}"
