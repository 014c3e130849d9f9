"""Human reports: Markdown with Mermaid sequence diagrams of counterexamples.

Mermaid renders as a picture wherever Markdown is read (GitHub, GitLab, most
editors), so a counterexample is shown as who-did-what-to-whom rather than a
list of tuples.
"""

from __future__ import annotations

import json
from pathlib import Path as FsPath
from typing import Any

from conq.model.engines.explorer import Exploration, Verdict
from conq.model.kernel import Model, Path, config_dict


def sequence_diagram(model: Model, path: Path, cycle: Path | None = None) -> str:
    """A Mermaid ``sequenceDiagram`` of a path (and the repeated part of a lasso)."""
    lines = ["sequenceDiagram"]
    seen: list[str] = []
    body: list[str] = []

    def add(steps, start: int) -> None:
        for n, (a, o, _t) in enumerate(steps, start):
            src, dst = model.actors(a, o)
            for who in (src, dst):
                if who not in seen:
                    seen.append(who)
            text = model.format_action(a, o).replace(";", ",").replace("#", "")
            body.append(f"    {_ident(src)}->>{_ident(dst)}: {n}. {text}")

    add(path.steps, 1)
    if cycle is not None and cycle.steps:
        body.append("    loop repeated forever (fair cycle)")
        add(cycle.steps, len(path.steps) + 1)
        body.append("    end")
    lines += [f"    participant {_ident(w)} as {w}" for w in seen]
    return "\n".join(lines + body)


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name) or "x"


def exploration_markdown(ex: Exploration, title: str) -> str:
    m = ex.model
    out = [f"## {title}", ""]
    out.append(f"configuration: `{json.dumps(config_dict(m.config))}`")
    out.append("")
    out.append(
        f"{ex.states:,} distinct states, {ex.transitions:,} transitions, depth {ex.depth}, "
        f"search {ex.search_seconds:.2f} s, analysis {ex.analysis_seconds:.2f} s"
        + ("" if ex.complete else f" — **incomplete: {ex.stop_reason}**")
    )
    out += ["", "| property | kind | status | claim |", "|---|---|---|---|"]
    for v in ex.verdicts:
        out.append(f"| `{v.prop.name}` | {v.prop.kind.value} | {_badge(v)} | {v.prop.claim} |")
    for v in ex.verdicts:
        if v.status == "violated" and v.path is not None:
            out += ["", f"### `{v.prop.name}` violated", "", v.prop.claim, ""]
            if v.detail:
                out += [v.detail, ""]
            out += ["```mermaid", sequence_diagram(m, v.path, v.cycle), "```", ""]
            out += ["```", m.format_path(v.path, states=True), "```"]
    return "\n".join(out) + "\n"


def _badge(v: Verdict) -> str:
    return {"holds": "holds", "witnessed": "witnessed", "violated": "**VIOLATED**"}.get(v.status, f"*{v.status}*")


def write_report(directory: FsPath, name: str, markdown: str, data: Any) -> tuple[FsPath, FsPath]:
    """Write ``name.md`` and ``name.json`` atomically (no partial files on error)."""
    directory.mkdir(parents=True, exist_ok=True)
    md = directory / f"{name}.md"
    js = directory / f"{name}.json"
    for target, text in ((md, markdown), (js, json.dumps(data, indent=2, default=str))):
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    return md, js
