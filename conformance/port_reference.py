"""Port references: one document per model, for authors of ports in other languages.

``spec/ports/<model>.md`` is generated here from the same declarations the conformance
checker uses: the model's call-level view (its system's, conformance/systems.py), its named
configurations, and the configurations the conformance suite drives.  What can be computed is computed by
exploring the call-level view on every conformance configuration (every reachable state):
the calls the checker sends, their parameters and ranges, the exact shape of every
observation (and whether its lists are sorted), the snapshot shape (the ``observe()`` view),
generated examples, and which configuration switches change behaviour at call level (with
the shortest call sequence that tells the two apart).  What cannot be computed -- what a
call does, when it is enabled -- is declared once per system (its ``port_reference``, e.g.
conformance/consumer_lists/port_reference.py; :data:`DECLARED` looks it up), and
the exploration checks that the declared calls are exactly the ones the view emits.

``python -m conq.conformance.port_reference --write`` regenerates every document;
``--check`` exits 1 when a committed one differs (tests/conformance/test_port_reference.py
does the same).  A system with a call-level view and no declaration still gets its
computed sections, marked as such, as soon as its call-level view loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conq.model.kernel import Model, config_dict
from conq.model.engines.registry import load_model

from . import protocol, systems
from .trace import jsonable

#: the most call-level states explored per configuration (the conformance configurations of
#: consumer-lists have at most a few thousand; a larger view is documented from a bounded prefix)
STATE_CAP = 20_000
#: switches are compared on the conformance configurations of at most this many call-level states
SWITCH_STATES = 1_000


@dataclass(frozen=True)
class Call:
    """One call of a model's call-level view, as a port must implement it."""

    name: str
    params: tuple[tuple[str, str], ...]  # (parameter, meaning)
    enabled: str  # when the model has it enabled (a port answers error 13 otherwise)
    does: str  # what it does, step by step
    result: str  # the first element of the observation


@dataclass(frozen=True)
class Declared:
    """What a port reference says of one model that cannot be computed."""

    intro: str
    calls: tuple[Call, ...]
    observation: str  # the observation's shape, in words
    snapshot: str  # the snapshot's fields, in words
    procedures: str = ""  # shared procedures the calls refer to (markdown)
    state: str = ""  # the state a port keeps (markdown)
    notes: tuple[str, ...] = ()
    #: what the ``result`` of each call is, in the call tables ("result": the first element of a
    #: ``[result, list]`` observation; "observation": the whole observation)
    result_label: str = "result"
    #: more sections computed from the model (markdown lines), after the switches' table
    sections: Any = None


class _Declarations(dict):
    """model name -> its declared port reference: the ``port_reference`` of its system
    (conformance/systems.py), looked up on first use; an entry set here wins (tests replace one).
    A system without one gets the computed sections only (or its view class may carry its own
    ``PORT_REFERENCE``)."""

    def __missing__(self, name: str) -> Declared:
        system = systems.find(name)
        declared = system.load("port_reference") if system is not None else None
        if declared is None:
            raise KeyError(name)
        return declared

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default


DECLARED: dict[str, Declared] = _Declarations()


# ------------------------------------------------------------------------------------------
# what is computed
# ------------------------------------------------------------------------------------------
def conformance_configs(model_name: str) -> list[tuple[str, dict[str, Any]]]:
    """The configurations the conformance suite drives for ``model_name``, each with the
    overrides it uses: its system's ``conformance_configs`` (names or ``(name, overrides)``
    pairs, or a function returning them), else every named configuration of the model."""
    system = systems.find(model_name)
    entries = system.load("conformance_configs") if system is not None else None
    if callable(entries):
        entries = entries()
    if entries is None:
        entries = tuple(type(load_model(model_name)).configs())
    out = []
    for entry in entries:
        name, own = (entry, {}) if isinstance(entry, str) else (entry[0], dict(entry[1] or {}))
        out.append((name, own))
    return out


def _shape(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (tuple, list)):
        inner = sorted({_shape(x) for x in v})
        return f"[{inner[0]}, ...]" if len(inner) == 1 else "[]" if not inner else "[" + ", ".join(_shape(x) for x in v) + "]"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


@dataclass
class Facts:
    """What exploring a call-level view on one configuration found."""

    config: str
    overrides: dict[str, Any]
    config_json: dict[str, Any]
    states: int = 0
    transitions: int = 0
    complete: bool = True
    params: dict[str, list[set]] = field(default_factory=dict)  # call -> values per position
    results: dict[str, set] = field(default_factory=dict)  # call -> shapes of the result / observation
    arrays_sorted: bool = True
    arrays_dupes: bool = False
    pair_obs: bool = True  # every observation a 2-element [result, array]
    obs_shapes: dict[str, set] = field(default_factory=dict)
    disabled_somewhere: dict[str, int] = field(default_factory=dict)
    snapshot_paths: dict = field(default_factory=dict)  # leaf path -> shapes seen
    init_snapshot: Any = None
    examples: dict[str, tuple] = field(default_factory=dict)  # call -> (path, before, action, obs, after)


def _snapshot_paths(v: Any, prefix: str, out: dict[str, set]) -> None:
    """Every leaf of a snapshot as ``path -> shapes``: ``[]`` stands for any element of an array,
    ``.key`` for an object's field."""
    if isinstance(v, dict):
        if not v:
            out.setdefault(prefix or "(top)", set()).add("{}")
        for k, x in v.items():
            _snapshot_paths(x, f"{prefix}.{k}", out)
    elif isinstance(v, (list, tuple)):
        if not v:
            out.setdefault(prefix, set()).add("[]")
        for x in v:
            _snapshot_paths(x, f"{prefix}[]", out)
    elif isinstance(v, str):
        out.setdefault(prefix, set()).add(json.dumps(v))  # strings by value: they name states
    else:
        out.setdefault(prefix, set()).add(_shape(v))


def explore(model_name: str, config: str, overrides: dict[str, Any], cap: int = STATE_CAP) -> Facts:
    from .views import conformance_model

    view = conformance_model(model_name, config, overrides)
    facts = Facts(config, overrides, config_dict(view.config))
    inits = list(dict.fromkeys(view.init_states()))
    facts.init_snapshot = jsonable(view.observe(inits[0]))
    parent: dict[Any, tuple] = {s: () for s in inits}
    todo = deque(inits)
    names_seen: set[str] = set()
    while todo:
        s = todo.popleft()
        facts.states += 1
        succ = view.successors(s)
        here = {a[0] for a, _, _ in succ}
        for a, o, t in succ:
            facts.transitions += 1
            name = a[0]
            names_seen.add(name)
            ps = facts.params.setdefault(name, [set() for _ in a[1:]])
            for i, x in enumerate(a[1:]):
                ps[i].add(x)
            facts.obs_shapes.setdefault(name, set()).add(_shape(o))
            if isinstance(o, tuple) and len(o) == 2 and isinstance(o[1], tuple):
                facts.results.setdefault(name, set()).add(_shape(o[0]))
                arr = list(o[1])
                if arr != sorted(arr):
                    facts.arrays_sorted = False
                if len(set(arr)) != len(arr):
                    facts.arrays_dupes = True
            else:
                facts.pair_obs = False
            if t not in parent:
                if len(parent) >= cap:
                    facts.complete = False
                    continue
                parent[t] = parent[s] + ((a, o),)
                todo.append(t)
                _snapshot_paths(jsonable(view.observe(t)), "", facts.snapshot_paths)
            if name not in facts.examples or len(parent[s]) < len(facts.examples[name][0]):
                facts.examples[name] = (parent[s], jsonable(view.observe(s)), a, o, jsonable(view.observe(t)))
        for name in names_seen - here:
            facts.disabled_somewhere[name] = facts.disabled_somewhere.get(name, 0) + 1
    _snapshot_paths(facts.init_snapshot, "", facts.snapshot_paths)
    return facts


def _switches(model_name: str, config: str, overrides: dict[str, Any], cap: int = 5_000) -> list[tuple[str, Any, str]]:
    """For every boolean or enumerated field of the configuration: flipped on ``config``, does
    the call-level view behave differently?  (field, other value, the shortest difference or '')."""
    from .views import conformance_model

    base_model = load_model(model_name, config, overrides)
    cfg = base_model.config
    out = []
    ref = conformance_model(model_name, config, overrides)
    ref_memo: dict = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, bool):
            others = [not v]
        elif isinstance(v, enum.Enum):
            others = [x for x in type(v) if x != v]
        else:
            continue
        for other in others:
            value = other.value if isinstance(other, enum.Enum) else other
            try:
                alt = conformance_model(model_name, config, {**overrides, f.name: value})
            except Exception as e:  # an invalid combination: say so
                out.append((f.name, value, f"(not a valid configuration here: {e})"))
                continue
            out.append((f.name, value, _difference(ref, alt, cap, ref_memo)))
    return out


def _fmt_call(a: tuple) -> str:
    return json.dumps(jsonable(list(a)))


def _observed(model: Model, state: Any, memo: dict) -> str:
    found = memo.get(state)
    if found is None:
        found = memo[state] = json.dumps(jsonable(model.observe(state)), sort_keys=True)
    return found


def _difference(ref: Model, alt: Model, cap: int, ref_memo: dict | None = None) -> str:
    """The shortest call sequence after which the two views allow different observations or
    snapshots; '' when none within ``cap`` state pairs (the switch is invisible at call level)."""
    start = (ref.init_states()[0], alt.init_states()[0])
    if jsonable(ref.observe(start[0])) != jsonable(alt.observe(start[1])):
        return "the initial snapshot differs"
    seen = {start: ()}
    todo = deque([start])
    rm = {} if ref_memo is None else ref_memo
    am: dict = {}
    while todo:
        pair = todo.popleft()
        s, t = pair
        a_out: dict = {}
        b_out: dict = {}
        for a, o, x in ref.successors(s):
            a_out.setdefault(a, {})[(o, _observed(ref, x, rm))] = x
        for a, o, x in alt.successors(t):
            b_out.setdefault(a, {})[(o, _observed(alt, x, am))] = x
        for a in list(dict.fromkeys(list(a_out) + list(b_out))):
            if set(a_out.get(a, {})) != set(b_out.get(a, {})):
                path = " ; ".join(f"{_fmt_call(pa)} -> {json.dumps(jsonable(po))}" for pa, po in seen[pair])
                def obs(d):
                    return " or ".join(sorted({json.dumps(jsonable(o)) for o, _ in d})) if d else "disabled (error 13)"
                lead = f"after {path}: " if path else "from the start: "
                ro, ao = obs(a_out.get(a, {})), obs(b_out.get(a, {}))
                if ro == ao:
                    return f"{lead}{_fmt_call(a)} observes {ro} in both, but the snapshots differ"
                return f"{lead}{_fmt_call(a)} observes {ro} with the reference value, {ao} with this one"
            for key, x in a_out.get(a, {}).items():
                nxt = (x, b_out[a][key])
                if nxt not in seen and len(seen) < cap:
                    seen[nxt] = seen[pair] + ((a, key[0]),)
                    todo.append(nxt)
    return ""


# ------------------------------------------------------------------------------------------
# the document
# ------------------------------------------------------------------------------------------
def models() -> list[str]:
    """The systems with a call-level view that loads (conformance/systems.py), in name order."""
    from .views import conformance_model

    out = []
    for name in sorted(systems.names("call_view")):
        try:
            conformance_model(name)
        except Exception:  # a view under construction: no document until it loads
            continue
        out.append(name)
    return out


def _range(values: set) -> str:
    vals = sorted(values, key=repr)
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        lo, hi = min(vals), max(vals)
        return f"{lo}..{hi}" if vals == list(range(lo, hi + 1)) and hi > lo else ", ".join(map(str, vals))
    return ", ".join(json.dumps(jsonable(v)) for v in vals)


def render_markdown(model_name: str) -> str:
    from .views import conformance_model

    view = conformance_model(model_name)
    declared = DECLARED.get(model_name) or getattr(type(view), "PORT_REFERENCE", None)
    cfgs = conformance_configs(model_name)
    facts = [explore(model_name, c, o) for c, o in cfgs]
    out = [
        f"# Port reference: `{model_name}`",
        "",
        "<!-- generated by `python -m conq.conformance.port_reference --write` (and `conq protocol --write`) "
        "from the model's call-level view, its configurations and conformance/port_reference.py; do not edit by hand -->",
        "",
        f"What a port of `{model_name}` must do to pass `conq conformance {model_name} --impl stdio:CMD`. "
        "The transport and the messages are in [../port-protocol.md](../port-protocol.md); this page is "
        "what goes inside them: the `config` of `init`, the `action` arrays the checker sends, the "
        "`observation` each must answer, and the `state` of `snapshot`.",
        "",
    ]
    if declared is None:
        out += ["> No call descriptions are declared for this model yet (its system declares no "
                "`port_reference`): the sections below are computed from its call-level view only.", ""]
    else:
        out += [declared.intro, ""]
    out += ["## Configurations the conformance suite drives", "",
            "`init` carries the configuration field by field (`conq list --json`). The suite drives these:", "",
            "| configuration | overrides | states | calls (transitions) | explored |", "|---|---|---|---|---|"]
    for f in facts:
        ov = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in f.overrides.items()) or "-"
        out.append(f"| `{f.config}` | {ov} | {f.states:,} | {f.transitions:,} | {'all' if f.complete else f'first {STATE_CAP:,} states'} |")
    out += ["", "Their `config` objects, as `init` sends them:", "", "```"]
    out += [f"{f.config}: {json.dumps(f.config_json, separators=(',', ':'))}" for f in facts]
    out += ["```", ""]
    default = getattr(conformance_model(model_name), "config_name", None) or "the model's first"
    out += [f"To run all of them as the suite does (each with its overrides): "
            f"`conq conformance {model_name} --impl stdio:CMD --all-configs`, one verdict per configuration, exit 1 if "
            "any diverges (`--set KEY=VALUE` goes on top of every configuration's overrides). Without `--all-configs` "
            f"a run uses one configuration, `--config NAME` (default `{default}`) with its own field values: pass "
            "the overrides of the table yourself (`--set env_budget=2`) to run it as the suite does.", "",
            f"`--mode exhaustive` runs every trace of `--length` actions; it needs `--traces` at least their count "
            "and refuses to start otherwise (exit 2, the message gives the count, per configuration the largest with "
            "`--all-configs`): `--traces 100000000` runs exactly the complete set. The counts at the default "
            "`--length 40` run into the millions on the larger configurations; a shorter `--length` keeps them small.",
            ""]
    if declared is not None and declared.state:
        out += ["## State a port keeps", "", declared.state, ""]
    if declared is not None and declared.procedures:
        out += ["## Procedures", "", declared.procedures, ""]
    # calls: computed table
    names: list[str] = []
    for f in facts:
        for n in f.params:
            if n not in names:
                names.append(n)
    base_actions = getattr(getattr(view, "base", view), "ACTIONS", None) or getattr(view, "ACTIONS", None) or {}
    out += ["## Calls the checker sends", "",
            "The `action` of every `action` request is `[name, param, ...]`. These are all the names the "
            "checker sends (computed: every call the call-level view enables in some reachable state of a "
            "configuration above); ranges are the values seen, per configuration.", "",
            "| call | parameters | values | observation seen | in configurations |", "|---|---|---|---|---|"]
    for n in names:
        params = base_actions.get(n, tuple(f"p{i}" for i in range(len(next(f.params[n] for f in facts if n in f.params)))))
        ranges = []
        for i, p in enumerate(params):
            per = {}
            for f in facts:
                if n in f.params and i < len(f.params[n]):
                    per.setdefault(_range(f.params[n][i]), []).append(f.config)
            ranges.append(f"`{p}`: " + "; ".join(f"{r} ({', '.join(cs)})" if len(per) > 1 else r for r, cs in per.items()))
        if all(f.pair_obs for f in facts):
            rs = sorted(set().union(*(f.results.get(n, set()) for f in facts)))
            shapes = [f"[{' or '.join(rs)}, [ids]]"]
        else:
            shapes = sorted(set().union(*(f.obs_shapes.get(n, set()) for f in facts)))
        where = [f.config for f in facts if n in f.params]
        out.append(f"| `{n}` | {', '.join(f'`{p}`' for p in params) or '-'} | {'<br>'.join(ranges) or '-'} | "
                   f"{' / '.join(f'`{x}`' for x in shapes)} | {'all' if len(where) == len(facts) else ', '.join(where)} |")
    out.append("")
    if declared is not None:
        declared_names = [c.name for c in declared.calls]
        missing = [n for n in names if n not in declared_names]
        extra = [n for n in declared_names if n not in names]
        if missing or extra:
            raise ValueError(f"{model_name}: declared calls {declared_names} differ from the calls the view emits {names}")
        for c in declared.calls:
            out += [f"### `{_signature(c)}`", "",
                    "| | |", "|---|---|"]
            if c.params:  # the declared meaning of each parameter (its range is in the table above)
                out.append("| parameters | " + "; ".join(f"`{p}`: {meaning}" for p, meaning in c.params) + " |")
            out += [f"| enabled when | {c.enabled} |",
                    f"| does | {c.does} |",
                    f"| {declared.result_label} | {c.result} |", ""]
            ex = next((f.examples[c.name] for f in facts if c.name in f.examples), None)
            if ex is not None:
                path, before, a, o, after = ex
                cfg = next(f.config for f in facts if c.name in f.examples)
                out += [f"Example (`{cfg}`, computed)" + (": after " + " ; ".join(f"`{_fmt_call(pa)}` -> `{json.dumps(jsonable(po))}`" for pa, po in path) if path else ", from the initial state") + ":", "",
                        "```",
                        f"before:      {json.dumps(before)}",
                        f"action:      {_fmt_call(a)}",
                        f"observation: {json.dumps(jsonable(o))}",
                        f"after:       {json.dumps(after)}",
                        "```", ""]
    # observations
    out += ["## Observations", ""]
    if declared is not None:
        out += [declared.observation, ""]
    pair = all(f.pair_obs for f in facts)
    if pair:
        srt = all(f.arrays_sorted for f in facts)
        dup = any(f.arrays_dupes for f in facts)
        out += ["Computed over every transition explored: every observation is a two-element array "
                "`[result, list]`; the list is " + ("always sorted ascending" if srt else "NOT always sorted")
                + (", and one consumer appeared twice in it in some transition" if dup else ", and never held one id twice in the transitions explored")
                + ". Result shapes per call:", ""]
        out += ["| call | result |", "|---|---|"]
        for n in names:
            rs = sorted(set().union(*(f.results.get(n, set()) for f in facts)))
            out.append(f"| `{n}` | {' or '.join(f'`{r}`' for r in rs)} |")
        out.append("")
    else:
        out += ["Observation shapes per call (computed):", "", "| call | shapes |", "|---|---|"]
        for n in names:
            out.append(f"| `{n}` | {' / '.join(f'`{x}`' for x in sorted(set().union(*(f.obs_shapes.get(n, set()) for f in facts))))} |")
        out.append("")
    out += ["A call the model has disabled is answered with `error` code 13 (`not-enabled`, definite); "
            "the checker records it as the observation `[\"error\", 13]`. Any other definite error "
            "(10, 11, 12, 14) is also an observation, one the model never allows: the run fails at that "
            "step with what the model allowed instead.", ""]
    # snapshot
    out += ["## Snapshot", ""]
    if declared is not None:
        out += [declared.snapshot, ""]
    paths: dict[str, set] = {}
    for f in facts:
        for k, v in f.snapshot_paths.items():
            paths.setdefault(k, set()).update(v)
    out += ["Every leaf seen in a snapshot (computed over every state explored; `[]` is any element of an "
            "array, `.key` a field of an object; `[]` as a shape is an empty array; strings are shown by value):", "",
            "| path | shapes | in configurations |", "|---|---|---|"]
    for k in sorted(paths):
        where = [f.config for f in facts if k in f.snapshot_paths]
        shown = sorted(paths[k])
        strings = [x for x in shown if x.startswith('"')]
        if len(strings) > 12:
            shown = [x for x in shown if not x.startswith('"')] + [f"string ({len(strings)} values)"]
        out.append(f"| `{k}` | {' or '.join(f'`{x}`' for x in shown)} | {'all' if len(where) == len(facts) else ', '.join(where)} |")
    out += ["", "Initial snapshots:", "", "```"]
    out += [f"{f.config}: {json.dumps(f.init_snapshot)}" for f in facts]
    out += ["```", ""]
    # switches
    small = [(f.config, f.overrides) for f in facts if f.complete and f.states <= SWITCH_STATES] or [cfgs[0]]
    ref_cfg, ref_ov = small[0]
    out += ["## Configuration switches at call level", "",
            "Each boolean or enumerated configuration field, flipped on each conformance configuration of at "
            f"most {SWITCH_STATES:,} call-level states ({', '.join(f'`{c}`' for c, _ in small)}). Computed: the "
            "call-level views with and without the flip, explored side by side, give the shortest call "
            "sequence after which they allow different observations or snapshots. *Invisible* means no call "
            "sequence tells the two apart on those configurations: a port may ignore the switch there.", "",
            f"| field | value on `{ref_cfg}` | flipped to (on `{ref_cfg}`) | visible on | the shortest difference |", "|---|---|---|---|---|"]
    ref_model = load_model(model_name, ref_cfg, ref_ov)
    found: dict[tuple, list] = {}
    for c, o in small:
        for name, value, diff in _switches(model_name, c, o):
            found.setdefault(name, []).append((c, diff, json.dumps(value)))
    for name, per in found.items():
        value = per[0][2]
        per = [(c, d) for c, d, _ in per]
        cur = getattr(ref_model.config, name)
        cur = cur.value if isinstance(cur, enum.Enum) else cur
        vis = [(c, d) for c, d in per if d]
        if not vis:
            out.append(f"| `{name}` | `{json.dumps(cur)}` | `{value}` | invisible | - |")
            continue
        c0, d0 = min(vis, key=lambda cd: (cd[1].count(" ; "), len(cd[1])))
        where = "all" if len(vis) == len(per) else ", ".join(f"`{c}`" for c, _ in vis)
        out.append(f"| `{name}` | `{json.dumps(cur)}` | `{value}` | {where} | `{c0}`: {d0} |")
    out.append("")
    if declared is not None and declared.sections is not None:
        out += declared.sections()
    out += ["## The golden corpus", "",
            f"`conq conformance {model_name} --impl stdio:CMD --corpus conformance/{model_name.replace('-', '_')}/corpus` "
            "also runs the golden traces. Each trace starts a port with its own configuration (`init`, not "
            "`reset`, whenever the configuration changes). `pass-*` traces are replayed and the port must "
            "match their recorded observations' model. `diverge-*` traces record a known bug (a mutant's "
            "observations, which the model rejects); their actions are replayed against the port too, "
            "and the port must conform on them: it must not reproduce the bug. A port that does counts "
            "as a failure of that trace, with the step the bug shows at.", ""]
    thread_level = systems.get(model_name).load("thread_level") if systems.find(model_name) else None
    if thread_level is not None:  # the second protocol level (issue 17)
        out += thread_level.reference_section()
    if declared is not None and declared.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in declared.notes] + [""]
    out += ["## See also", "", "- [../port-protocol.md](../port-protocol.md): transport, messages, error codes",
            f"- `conq list --json`: every named configuration of `{model_name}`", ""]
    return "\n".join(out)


def _signature(c: Call) -> str:
    return f"[\"{c.name}\"" + "".join(f", {p}" for p, _ in c.params) + "]"


def targets(root: Path) -> dict[Path, str]:
    """Every port reference, path -> generated text."""
    return {root / "spec" / "ports" / f"{name}.md": render_markdown(name) for name in models()}


def write_all(root: Path) -> list[Path]:
    from .trace import atomic_write

    written = []
    for path, text in targets(root).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    from conq.spec.catalog import repo_root

    ap = argparse.ArgumentParser(prog="python -m conq.conformance.port_reference", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate spec/ports/*.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed document differs")
    ap.add_argument("model", nargs="?", help="print this model's reference")
    args = ap.parse_args(argv)
    root = repo_root()
    if args.write:
        for p in write_all(root):
            print(f"wrote {p}")
        return 0
    if args.check:
        stale = [str(p) for p, text in targets(root).items() if not p.is_file() or p.read_text() != text]
        for p in stale:
            print(f"stale: {p} (python -m conq.conformance.port_reference --write)")
        return 1 if stale else 0
    sys.stdout.write(render_markdown(args.model or models()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
