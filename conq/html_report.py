"""One self-contained HTML page per run (``reports/index.html``): a headline verdict, contents,
one line per check linking to its section, the property tables folded away, a counterexample
viewer (a slider over the steps, the changed fields highlighted), states per depth, coverage
growth, and replay figures that say which view they count.

No network is needed to read it: the style and the script are inlined from
``conq/templates/conq.css`` and ``conq.js``, the plots are inline SVG drawn here.  The page is a
Jinja2 template (``conq/templates/report.html.j2``), filled from plain data that
:class:`HtmlReport` collects from explorations, replays and the other stages; the counterexamples
are :func:`conq.model.engines.changes.explain`'s trails, as in the terminal and the Markdown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Iterable

from conq.model.engines.changes import explain, jsonable, parts
from conq.model.kernel import Model, Path, config_dict
from conq.conformance.coverage_estimate import chao2_verdict
from conq.render import status_text

TEMPLATES = FsPath(__file__).resolve().parent / "templates"


def environment():
    """The Jinja2 environment of conq's pages (autoescaped; templates in conq/templates)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=jinja2.select_autoescape(
        ["html", "j2"]), undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["number"] = lambda v: f"{v:,}" if isinstance(v, int) else v
    env.filters["tojson_script"] = script_json
    return env


def script_json(value: Any) -> str:
    """JSON to embed in a ``<script type="application/json">`` (no ``</script>`` can end it early)."""
    from markupsafe import Markup

    text = json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def viewer_data(model: Model, path: Path, cycle: Path | None = None) -> dict[str, Any]:
    """What the counterexample viewer draws: the initial state's parts, then per step who acted,
    the action, the changes and the state's parts after it."""
    trail = explain(model, path, cycle)
    steps = []
    before = trail.init_parts
    for s in trail.steps:
        now = parts(model, s.state)
        # only the parts this step changed travel (the page carries the others forward): a
        # counterexample's size grows with what changes, not with the state's size
        steps.append({"n": s.number, "actor": s.actor, "target": s.target, "label": s.label,
                      "changes": [c.to_json() for c in s.changes],
                      "parts": {k: v for k, v in now.items() if before.get(k) != v},
                      "gone": [k for k in before if k not in now], "order": list(now) if list(now) != list(before) else None})
        before = now
    return {"init": trail.init_parts, "cycle_start": trail.cycle_start, "steps": steps}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def bar_chart(values: list[int], *, width: int = 520, height: int = 120, label: str = "") -> dict[str, Any]:
    """An inline SVG bar chart's geometry (drawn by the template): the bars as one path (small
    pages: a report has a chart per configuration), the values in the caption."""
    if not values:
        return {"path": "", "width": width, "height": height, "max": 0, "label": label, "n": 0, "counts": []}
    top = max(values) or 1
    w = max(1.0, (width - 40) / len(values))
    base = height - 18
    d = []
    for i, v in enumerate(values):
        h = (height - 30) * v / top
        if h > 0:
            d.append(f"M{40 + i * w:.0f} {base}v{-h:.1f}h{max(w - 1, 1):.1f}v{h:.1f}z")
    return {"path": "".join(d), "width": width, "height": height, "max": top, "label": label, "n": len(values),
            "counts": values}


def line_chart(points: list[tuple[float, float]], *, width: int = 520, height: int = 160, truth: float | None = None,
               xlabel: str = "", ylabel: str = "") -> dict[str, Any]:
    """An inline SVG line chart's geometry (a coverage-growth curve; ``truth``: a horizontal line)."""
    if not points:
        return {"path": "", "width": width, "height": height, "xmax": 0, "ymax": 0, "truth_y": None, "xlabel": xlabel,
                "ylabel": ylabel}
    xmax = max(p[0] for p in points) or 1
    ymax = max([p[1] for p in points] + ([truth] if truth else [])) or 1
    sx = lambda x: 50 + (width - 60) * x / xmax  # noqa: E731
    sy = lambda y: height - 22 - (height - 34) * y / ymax  # noqa: E731
    d = " ".join(f"{'M' if i == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for i, (x, y) in enumerate(points))
    return {"path": d, "width": width, "height": height, "xmax": xmax, "ymax": ymax,
            "truth_y": sy(truth) if truth else None, "truth": truth, "xlabel": xlabel, "ylabel": ylabel}


@dataclass
class Row:
    """One line of the summary table: a check, with a link to its section."""

    stage: str
    subject: str
    result: str
    ok: bool
    seconds: float
    anchor: str = ""


@dataclass
class HtmlReport:
    """Collects a run's results; :meth:`write` renders the page."""

    title: str
    rows: list[Row] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    replays: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: model -> its properties' claims, listed once (each configuration's table links to them)
    claims: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    _ids: set[str] = field(default_factory=set)

    def _anchor(self, prefix: str, text: str) -> str:
        base = f"{prefix}-{slug(text)}"
        anchor, k = base, 2
        while anchor in self._ids:
            anchor, k = f"{base}-{k}", k + 1
        self._ids.add(anchor)
        return anchor

    def add_row(self, stage: str, subject: str, result: str, ok: bool, seconds: float = 0.0, anchor: str = "") -> None:
        self.rows.append(Row(stage, subject, result, ok, seconds, anchor))

    def add_exploration(self, ex: Any, label: str, *, problems: Iterable[str] = (), expected: Iterable[str] | None = None,
                        seconds: float | None = None, row: bool = True) -> str:
        """A model check's section (and, with ``row``, its line in the summary table); returns
        the section's anchor.  ``problems``: how the result differs from what the manifest
        expects (empty: as expected); ``expected``: the properties expected violated."""
        problems = list(problems)
        model = ex.model
        anchor = self._anchor("check", label)
        if model.name not in self.claims:
            self.claims[model.name] = [{"name": p.name, "kind": p.kind.value, "claim": p.claim,
                                        "anchor": f"claim-{slug(model.name)}-{slug(p.name)}"} for p in model.property_list()]
        known = {c["name"]: c["anchor"] for c in self.claims[model.name]}
        expected_set = set(expected or ())
        props = []
        cxs = []
        for v in ex.verdicts:
            props.append({"name": v.prop.name, "kind": v.prop.kind.value, "claim_anchor": known.get(v.prop.name, ""),
                          "status": v.status,
                          "text": status_text(v.status, ex.states), "detail": v.detail,
                          "expected": v.prop.name in expected_set})
            if v.status == "violated" and v.path is not None:
                cx_id = self._anchor("cx", f"{label}-{v.prop.name}")
                cxs.append({"id": cx_id, "property": v.prop.name, "claim": v.prop.claim, "detail": v.detail,
                            "expected": v.prop.name in expected_set, "lasso": v.cycle is not None,
                            "data": viewer_data(model, v.path, v.cycle)})
        counts: dict[str, int] = {}
        for p in props:
            counts[p["status"]] = counts.get(p["status"], 0) + 1
        violated = [v.prop.name for v in ex.violations]
        secs = ex.search_seconds + ex.analysis_seconds if seconds is None else seconds
        self.checks.append({
            "anchor": anchor, "label": label, "model": model.name, "ok": not problems, "problems": problems,
            "settings": config_dict(model.config), "states": ex.states, "transitions": ex.transitions, "depth": ex.depth,
            "complete": ex.complete, "stop_reason": ex.stop_reason, "seconds": round(secs, 2),
            "properties": props, "counts": sorted(counts.items()), "counterexamples": cxs,
            "depth_chart": bar_chart(list(getattr(ex, "level_sizes", []) or []), label="states first found at each depth"),
        })
        if row:
            result = f"{ex.states:,} states, {ex.transitions:,} transitions"
            if not ex.complete:
                result += f"; incomplete: {ex.stop_reason}"
            if violated and not problems:
                result += f"; violated as expected: {', '.join(violated)}"
            if problems:
                result = "; ".join(problems)
            self.add_row("model-check", label, result, not problems, secs, anchor)
        return anchor

    def add_replay(self, summary: Any, label: str, *, seconds: float = 0.0, model_states: int | None = None,
                   row: bool = True) -> str:
        """A Spark replay's section: coverage as the call-level view counts it (said so, beside the
        model check's own count when known), the growth curve, the Chao2 estimate and whether its
        interval held the true count."""
        s = summary
        anchor = self._anchor("replay", label)
        estimate = chao2_verdict(s.state_estimate, s.graph_states)
        points = [(float(a), float(b)) for a, b in (s.growth_points or [])]
        self.replays.append({
            "anchor": anchor, "label": label, "ok": s.ok, "traces": s.traces, "steps": s.steps, "diverged": s.diverged,
            "states_covered": s.states_covered, "graph_states": s.graph_states, "state_fraction": s.state_fraction,
            "transitions_covered": s.transitions_covered, "graph_transitions": s.graph_transitions,
            "model_states": model_states, "estimate": estimate, "violations": s.violations, "out": s.out,
            "growth": line_chart(points, truth=s.graph_states, xlabel="traces replayed", ylabel="distinct states seen"),
            "graph": s.graph,
        })
        if row:
            cover = f"{s.states_covered:,} call-level states" + (f" of {s.graph_states:,}" if s.graph_states else "")
            self.add_row("spark replay", label, f"{s.traces:,} traces, {s.diverged} diverged, {cover}", s.ok, seconds, anchor)
        return anchor

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    def headline(self) -> str:
        n = len(self.rows)
        if not self.failed:
            return "1 check, as expected" if n == 1 else f"{n} checks, all as expected"
        names = ", ".join(r.subject for r in self.failed[:5]) + (" ..." if len(self.failed) > 5 else "")
        return f"{len(self.failed)} of {n} checks not as expected: {names}"

    def render(self) -> str:
        env = environment()
        stages: dict[str, list[Row]] = {}
        for r in self.rows:
            stages.setdefault(r.stage, []).append(r)
        return env.get_template("report.html.j2").render(
            title=self.title, headline=self.headline(), ok=not self.failed, rows=self.rows, stages=stages,
            checks=self.checks, replays=self.replays, notes=self.notes, claims=self.claims,
            css=(TEMPLATES / "conq.css").read_text(encoding="utf-8"),
            js=(TEMPLATES / "conq.js").read_text(encoding="utf-8"),
        )

    def write(self, target: FsPath) -> FsPath:
        """Write the page atomically, never through a link (no partial file on error)."""
        from conq.conformance.output_folder import write_atomic

        html = self.render()
        target.parent.mkdir(parents=True, exist_ok=True)
        return write_atomic(target, html)


def slim_markdown(report: HtmlReport, html_name: str = "index.html") -> str:
    """The Markdown beside the page: the headline and one line per check, each linking to its
    section of the HTML page (where the counterexamples, plots and property tables are)."""
    lines = [f"# {report.title}", "", f"**{report.headline()}**", "",
             f"Everything else (counterexamples with their steps, property tables, plots): [{html_name}]({html_name}).", "",
             "| stage | subject | result | as expected | s |", "|---|---|---|---|---:|"]
    for r in report.rows:
        subject = f"[{r.subject}]({html_name}#{r.anchor})" if r.anchor else r.subject
        result = r.result.replace("|", "\\|")
        lines.append(f"| {r.stage} | {subject} | {result} | {'yes' if r.ok else '**NO**'} | {r.seconds:.1f} |")
    return "\n".join(lines) + "\n"
