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
    """A Mermaid ``sequenceDiagram`` of a path (and the repeated part of a lasso): arrows from who
    acted to the part the step changed, a note of the changes (conq/render.py)."""
    from conq.model.engines.changes import explain
    from conq.render import sequence_diagram as draw

    return draw(explain(model, path, cycle))


def exploration_markdown(ex: Exploration, title: str) -> str:
    """One exploration in Markdown: the counts, the property table, and each counterexample as
    a sequence diagram and a table of steps with only the changed fields (full states folded)."""
    from conq.model.engines.changes import explain
    from conq.render import status_text, trail_markdown

    m = ex.model
    settings = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in config_dict(m.config).items())
    out = [f"## {title}", ""]
    out.append(
        f"{ex.states:,} distinct states, {ex.transitions:,} transitions, depth {ex.depth}, "
        f"search {ex.search_seconds:.2f} s, analysis {ex.analysis_seconds:.2f} s"
        + ("" if ex.complete else f" — **incomplete: {ex.stop_reason}**")
    )
    out += ["", f"<details><summary>configuration</summary>\n\n`{settings}`\n\n</details>"]
    out += ["", "| property | kind | status | claim |", "|---|---|---|---|"]
    for v in ex.verdicts:
        out.append(f"| `{v.prop.name}` | {v.prop.kind.value} | {_badge(v, ex.states)} | {v.prop.claim} |")
    for v in ex.verdicts:
        if v.status == "violated" and v.path is not None:
            out += ["", f"### `{v.prop.name}` violated", "", v.prop.claim, ""]
            if v.detail:
                out += [v.detail, ""]
            out += [trail_markdown(explain(m, v.path, v.cycle))]
    return "\n".join(out) + "\n"


def _badge(v: Verdict, states: int = 0) -> str:
    from conq.render import status_text

    return {"holds": "holds", "witnessed": "witnessed", "violated": "**VIOLATED**"}.get(v.status, f"*{status_text(v.status, states)}*")


def write_report(directory: FsPath, name: str, markdown: str, data: Any) -> tuple[FsPath, FsPath]:
    """Write ``name.md`` and ``name.json`` atomically, never through a link (``write_atomic``); the
    commands write into the staging folder of their output folder (conformance/output_folder.py)."""
    from conq.conformance.output_folder import write_atomic

    directory.mkdir(parents=True, exist_ok=True)
    md = directory / f"{name}.md"
    js = directory / f"{name}.json"
    for target, text in ((md, markdown), (js, json.dumps(data, indent=2, default=str))):
        write_atomic(target, text)
    return md, js
