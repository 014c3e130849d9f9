"""Counterexamples for people who read Markdown: a table of steps (who acted, the action, the
fields it changed) and a Mermaid sequence diagram whose arrows go from the one who acted to the
part it changed, with a note of the changes.  Both are drawn from :func:`conq.model.engines.changes.explain`'s
trail, as the terminal text and the HTML viewer are: one diff, every output."""

from __future__ import annotations

from conq.model.engines.changes import Trail, change_lines, dumps


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name) or "x"


def _mermaid_text(text: str) -> str:
    # ';' ends a Mermaid statement and '#' starts an entity code: neither may stand in a message
    return text.replace(";", ",").replace("#", "")


def sequence_diagram(trail: Trail) -> str:
    """A Mermaid ``sequenceDiagram``: one arrow per step, from its actor to the part it changed,
    a note over that part with the changed fields; a lasso's cycle in a ``loop`` block."""
    lines = ["sequenceDiagram"]
    lines += [f"    participant {_ident(w)} as {w}" for w in trail.participants]
    for s in trail.steps:
        if trail.cycle_start is not None and s.number == trail.cycle_start + 1:
            lines.append("    loop repeated forever (fair cycle)")
        lines.append(f"    {_ident(s.actor)}->>{_ident(s.target)}: {s.number}. {_mermaid_text(s.label)}")
        notes = change_lines(tuple(c for c in s.changes if c.part == s.target)) + change_lines(
            tuple(c for c in s.changes if c.part != s.target))
        if notes:
            lines.append(f"    Note over {_ident(s.target)}: " + "<br/>".join(_mermaid_text(n) for n in notes))
    if trail.cycle:
        lines.append("    end")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def steps_table(trail: Trail) -> str:
    """The steps as a Markdown table: number, who acted, the action, what changed (per part)."""
    rows = ["| step | who | action | changed |", "|---:|---|---|---|"]
    for s in trail.steps:
        number = f"{s.number}" + (" ↺" if trail.cycle_start is not None and s.number > trail.cycle_start else "")
        changed = "<br>".join(_cell(x) for x in change_lines(s.changes)) or "(nothing)"
        rows.append(f"| {number} | {_cell(s.actor)} | `{_cell(s.label)}` | {changed} |")
    if trail.cycle:
        back = f"the state after step {trail.cycle_start}" if trail.cycle_start else "the initial state"
        rows.append(f"\n↺: the fair cycle, repeated forever (it ends at {back}).")
    return "\n".join(rows)


def trail_markdown(trail: Trail) -> str:
    """A counterexample in Markdown: the diagram, the table of steps, and the full states
    (initial, then after each step) folded away."""
    init = "\n".join(f"{name}: {dumps(value)}" for name, value in trail.init_parts.items())
    states = "\n".join(f"{s.number}: {dumps(s.state)}" for s in trail.steps)
    return "\n".join([
        "```mermaid", sequence_diagram(trail), "```", "",
        steps_table(trail), "",
        "<details><summary>initial state and full states</summary>", "",
        "```", init, "```", "", "```", states, "```", "", "</details>",
    ])


def status_text(status: str, states: int) -> str:
    """A verdict as a reader should see it: an invariant that a cut search did not see violated
    is not ``holds`` but "no violation in N states (incomplete)"."""
    if status == "incomplete":
        return f"no violation in {states:,} states (incomplete)"
    if status == "unknown":
        return f"not reached in {states:,} states (incomplete)"
    return status
