"""What a step changed, per actor: the one diff every output of a counterexample uses.

A counterexample is a list of steps; what a reader needs at each is the action, who took it and
what it changed (the TLA+ trace explorer highlights the changed variables; Stateright's explorer
shows the next state beside the last).  A model's :meth:`~conq.model.kernel.Model.view` is a
JSON-able tree; :attr:`~conq.model.kernel.Model.view_parts` says which of its top-level lists
hold one part of the system per item (a consumer, a message, a process queue), and
everything else belongs to :attr:`~conq.model.kernel.Model.view_root` (the queue, the
client).  The diff compares two views leaf by leaf and names each change by its part and the
field's path inside it::

    c0     node        "interested" -> "notified"
    queue  notified    []           -> [0]

The terminal (``conq check``), the Markdown and HTML reports, the sequence diagrams and the
``--json`` documents all render :func:`explain`'s :class:`Trail`: nothing else diffs states.
Values are JSON (``null``, ``true``, lists), never Python reprs.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Iterator

# No import of the kernel: the kernel's Model.format_path uses this module, and this module needs
# of a model only its view(), actors(), format_action(), view_parts and view_root ("Model" and
# "Path" below are the kernel's, named in annotations only).


class _Absent:
    """A field that one side of a change does not have (a view may omit a key: a backoff that
    is not running, a group without an owner)."""

    _instance: "_Absent | None" = None

    def __new__(cls) -> "_Absent":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: tuples and sets become lists, enums their values, mapping
    keys strings; anything else unknown its ``str`` (never a Python repr like ``(1, True)``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, dict):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return str(value)


def dumps(value: Any) -> str:
    """One value as compact JSON (``absent`` for a missing field)."""
    if value is ABSENT:
        return "absent"
    return json.dumps(jsonable(value), separators=(", ", ": "), ensure_ascii=False)


@dataclass(frozen=True)
class Change:
    """One field of one part that a step changed."""

    #: the part of the system: ``"c0"``, ``"m1"``, ``"queue"``
    part: str
    #: the field's path inside the part (``"node"``, ``"interested.2"``, ``""`` when the part is
    #: one value, like a message's status)
    field: str
    before: Any
    after: Any

    def text(self, *, part: bool = True) -> str:
        """``c0.node "interested" → "notified"`` (``part=False``: without the part's name)."""
        name = ".".join(x for x in ((self.part if part else ""), self.field) if x)
        return f"{name} {dumps(self.before)} → {dumps(self.after)}" if name else f"{dumps(self.before)} → {dumps(self.after)}"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"part": self.part, "field": self.field}
        if self.before is not ABSENT:
            d["before"] = jsonable(self.before)
        if self.after is not ABSENT:
            d["after"] = jsonable(self.after)
        return d


def parts(model: "Model", view: Any) -> dict[str, Any]:
    """A view split into its parts: part name -> that part's value (a dict of fields, or one
    value).  Part names follow the view: ``view_parts`` names each item of its lists
    (``"consumers": "c"`` gives ``c0``, ``c1``, by an item's ``id`` when it has one, else by its
    position), the rest is one part, ``view_root``."""
    view = jsonable(view)
    spec = getattr(model, "view_parts", {}) or {}
    root = root_name(model, view)
    if not isinstance(view, dict):
        return {root: view}
    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in view.items():
        how = spec.get(key)
        if how is None or not isinstance(value, list):
            rest[key] = value
            continue
        prefix, field_name = (how, "") if isinstance(how, str) else how
        for i, item in enumerate(value):
            ident = item.get("id", i) if isinstance(item, dict) else i
            name = f"{prefix}{ident}"
            if field_name:
                slot = out.setdefault(name, {})
                if not isinstance(slot, dict):  # the part is one value already: keep both, by field
                    slot = out[name] = {"": slot}
                slot[field_name] = item
            elif name in out and isinstance(out[name], dict):
                if isinstance(item, dict):
                    out[name] = {**item, **out[name]}
                else:
                    out[name][""] = item
            else:
                out[name] = item
    if rest:
        out = {root: rest, **out}
    return out


def root_name(model: "Model", view: Any) -> str:
    """The name of the part that holds what no list item does (``view_root``; a template such
    as ``"{role}"`` is filled from the view: ``producer``, ``push-fifo``)."""
    name = getattr(model, "view_root", "state")
    if "{" in name:
        try:
            name = name.format(**view)
        except (KeyError, IndexError, ValueError, TypeError):
            name = "state"
    return name


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """The leaves of a part: dicts are walked by key, lists of dicts by position; a list of
    plain values is one leaf (a consumer's suspension reasons, a list's members)."""
    if isinstance(value, dict) and (value or path):
        # an empty mapping inside a part has no leaves: a key that appears in it is a change of
        # that key (``pending.p0/r1 absent → 1``), not also of the mapping
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path and k else (k or path))
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def diff_views(model: "Model", before: Any, after: Any) -> list[Change]:
    """The changes from one view to the next, part by part in the order of the later view
    (parts that disappeared last), fields in their order within the part."""
    a, b = parts(model, before), parts(model, after)
    out: list[Change] = []
    for name in [*b, *(n for n in a if n not in b)]:
        if a.get(name, ABSENT) == b.get(name, ABSENT):
            continue
        la = dict(_leaves(a[name], "")) if name in a else {}
        lb = dict(_leaves(b[name], "")) if name in b else {}
        for field_name in [*lb, *(f for f in la if f not in lb)]:
            x, y = la.get(field_name, ABSENT), lb.get(field_name, ABSENT)
            if x != y:
                out.append(Change(name, field_name, x, y))
    return out


def diff(model: "Model", before: Any, after: Any) -> list[Change]:
    """The changes from state ``before`` to state ``after`` (compared through the model's view)."""
    return diff_views(model, model.view(before), model.view(after))


@dataclass(frozen=True)
class Step:
    """One step of a counterexample, as every output shows it."""

    number: int
    action: tuple
    observation: Any
    #: who took the step (the model's :meth:`~conq.model.kernel.Model.actors`: its first name)
    actor: str
    #: whom it was done to: the first part it changed other than the root, else the model's
    #: second name (the arrow's head in a sequence diagram)
    target: str
    #: the action as text: ``notify_consumers(0)``, with the observation when there is one
    label: str
    changes: tuple[Change, ...]
    #: the state after the step, the model's view (the full state, on demand)
    state: Any

    def to_json(self, *, state: bool = True) -> dict[str, Any]:
        d = {"step": self.number, "action": jsonable(list(self.action)), "observation": jsonable(self.observation),
             "actor": self.actor, "target": self.target, "label": self.label, "changes": [c.to_json() for c in self.changes]}
        if state:
            d["state"] = jsonable(self.state)
        return d


@dataclass(frozen=True)
class Trail:
    """A counterexample (or a witness) explained: the initial state, then per step the action,
    its actor and the fields it changed.  A lasso's cycle follows its prefix:
    ``steps[cycle_start:]`` repeat forever and end where they began."""

    init: Any
    steps: tuple[Step, ...]
    cycle_start: int | None = None
    #: the initial state split into its parts (``parts``), the way the changes name them
    init_parts: dict = field(default_factory=dict, compare=False)

    @property
    def prefix(self) -> tuple[Step, ...]:
        return self.steps if self.cycle_start is None else self.steps[: self.cycle_start]

    @property
    def cycle(self) -> tuple[Step, ...]:
        return () if self.cycle_start is None else self.steps[self.cycle_start:]

    @property
    def participants(self) -> list[str]:
        """Everyone a sequence diagram shows, in order of appearance."""
        seen: dict[str, None] = {}
        for s in self.steps:
            seen.setdefault(s.actor)
            seen.setdefault(s.target)
        return list(seen)

    def to_json(self, *, states: bool = True) -> dict[str, Any]:
        """``states``: the full state after each step too (and the initial one)."""
        d = {"steps": [s.to_json(state=states) for s in self.steps], "cycle_start": self.cycle_start}
        if states:
            d = {"init": jsonable(self.init), "init_parts": self.init_parts, **d}
        return d


def label(model: "Model", action: tuple, observation: Any) -> str:
    """An action as a reader writes it: ``suspend(0, "flow")``, then ``→ observation`` when the
    step had something to observe (JSON values)."""
    args = ", ".join(dumps(x) for x in action[1:])
    text = f"{action[0]}({args})"
    if observation is not None and observation != ():
        text += f" → {dumps(observation)}"
    return text


def step_changes(model: "Model", before: Any, after: Any, default_target: str) -> tuple[str, tuple[Change, ...]]:
    """A step's target (the first part it changed other than the root, else ``default_target``:
    the model's second actor) and its changes, the target's first."""
    changes = diff_views(model, before, after)
    root = root_name(model, after)
    target = next((c.part for c in changes if c.part != root), default_target)
    return target, tuple(sorted(changes, key=lambda c: c.part != target))  # (a stable sort)


def explain(model: "Model", path: "Path", cycle: "Path | None" = None) -> Trail:
    """The trail of ``path`` (and of the lasso's ``cycle``, which starts where ``path`` ends)."""
    steps: list[Step] = []
    init_view = jsonable(model.view(path.init))
    prev_view = init_view
    runs = [path.steps] + ([cycle.steps] if cycle is not None else [])
    cycle_start = None
    for k, run in enumerate(runs):
        if k == 1:
            cycle_start = len(steps)
        for a, o, t in run:
            view = jsonable(model.view(t))
            src, dst = model.actors(a, o)
            target, changes = step_changes(model, prev_view, view, dst)
            steps.append(Step(len(steps) + 1, tuple(a), o, src, target, model.format_action(a, o), changes, view))
            prev_view = view
    return Trail(init_view, tuple(steps), cycle_start, parts(model, init_view))


def format_trail(trail: Trail, *, states: bool = False, indent: str = "  ") -> str:
    """A trail as terminal text: the initial state once, then per step its number, actor and
    action and, indented under it, the changed fields grouped by part (``states``: the full
    state after each step too).  A lasso's cycle is introduced as such."""
    lines = [f"{indent}init:"]
    lines += [f"{indent}       {name}: {dumps(value)}" for name, value in trail.init_parts.items()]
    for s in trail.steps:
        if trail.cycle_start is not None and s.number == trail.cycle_start + 1:
            back = f"the state after step {trail.cycle_start}" if trail.cycle_start else "the initial state"
            lines.append(f"{indent}then forever, a cycle of {len(trail.cycle)} step{'s' if len(trail.cycle) != 1 else ''} "
                         f"from {back}:")
        lines.append(f"{indent}{s.number:>3}. {s.actor}: {s.label}")
        lines += [f"{indent}       {text}" for text in change_lines(s.changes)]
        if not s.changes:
            lines.append(f"{indent}       (nothing changed)")
        if states:
            lines.append(f"{indent}       state: {dumps(s.state)}")
    if trail.cycle:
        back = f"the state after step {trail.cycle_start}" if trail.cycle_start else "the initial state"
        lines.append(f"{indent}     ↺ back to {back}")
    return "\n".join(lines)


def change_lines(changes: tuple[Change, ...] | list[Change]) -> list[str]:
    """Changes grouped by part, one line a part: ``c0: node "interested" → "notified", credit 1 → 0``."""
    by_part: dict[str, list[Change]] = {}
    for c in changes:
        by_part.setdefault(c.part, []).append(c)
    return [f"{part}: " + ", ".join(c.text(part=False) for c in cs) for part, cs in by_part.items()]
