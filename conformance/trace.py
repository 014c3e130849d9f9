"""Traces: the versioned, newline-delimited JSON format every engine shares.

Line 1 is a header::

    {"format": "conq-trace", "version": 1, "model": "consumer-lists",
     "config_name": "reference", "config": {...}, "seed": 7,
     "generator": {"mode": "random", "length": 40}}

then one event per line::

    {"step": 1, "action": ["enqueue", 0], "observation": ["notified", 1]}

optionally with ``"state"``: the model's ``observe()`` view after the step
(generators write it, so the trace can be exported to ITF and read by
TLA+/Apalache/Quint tooling).  A header with ``"kind": "observed"`` starts a
black-box log instead (``conq validate``, :mod:`.validate`): its events may leave
parameters and observations out, carry partial state observations
(``"observe"``), and hidden steps happen between them; they are read as
:class:`ObservedEvent`.  The JSON Schema is ``spec/schemas/trace.schema.json``;
every reader validates each line against it and reports the file, line and
field of the first problem.  JSON has no tuples: lists are turned back into
tuples on reading (:func:`hashable`) because model actions and observations
are tuples.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

FORMAT = "conq-trace"
VERSION = 1


class TraceError(ValueError):
    """A trace is malformed; the message names the file, line and field."""


@dataclass
class Event:
    step: int
    action: tuple
    observation: Any
    state: Any = None
    line: int | None = None  # the file line it was read from


#: an absent ``observation`` of an observed event (None is a value: JSON null)
ANY = object()


@dataclass
class ObservedEvent:
    """One line of an observed log (``"kind": "observed"``): an action known in part, and/or a
    partial observation of the state after it.  ``name`` None: a state observation only."""

    step: int
    line: int
    name: str | None = None
    #: the parameters the log fixes: (position, value) pairs, positions from 0
    params: tuple[tuple[int, Any], ...] = ()
    #: the observation (tuples for arrays), or :data:`ANY` when the log does not say
    observation: Any = ANY
    #: the partial state observation: (path, value) pairs, path a tuple of keys/indexes
    observe: tuple[tuple[tuple, Any], ...] = ()
    #: the event as written (for reports and :func:`dumps`)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def action(self) -> tuple | None:
        """The action when every parameter up to the last fixed one is known, else None."""
        if self.name is None:
            return None
        known = dict(self.params)
        if any(i not in known for i in range(len(known))):
            return None
        return (self.name, *(known[i] for i in range(len(known))))


@dataclass
class Trace:
    model: str
    config: dict[str, Any]
    seed: int
    generator: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    config_name: str | None = None
    expect: str | None = None  # golden corpus: "pass" or "diverge"
    kind: str = "recorded"  # or "observed": a black-box log (conq validate)
    #: observed logs: "thread" or "call"; a recorded trace: "thread" for a golden trace of the thread
    #: level (its actions and observations are the system's thread-step view's), else absent
    level: str | None = None
    hidden: tuple[str, ...] | None = None  # observed logs: action names that happen unlogged
    config_given: bool = True  # the header carries "config" (an observed log may leave it out)

    def header(self) -> dict[str, Any]:
        head: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        if self.kind != "recorded":
            head["kind"] = self.kind
        head["model"] = self.model
        if self.config_given:
            head["config"] = self.config
        head["seed"] = self.seed
        head["generator"] = self.generator
        if self.config_name is not None:
            head["config_name"] = self.config_name
        if self.expect is not None:
            head["expect"] = self.expect
        if self.level is not None:
            head["level"] = self.level
        if self.hidden is not None:
            head["hidden"] = list(self.hidden)
        return head

    def actions(self) -> list[tuple]:
        return [e.action for e in self.events]


_LEAF = frozenset({str, int, bool, float, type(None)})


class FrozenDict(tuple):
    """A JSON object as :func:`hashable` makes it: its sorted ``(key, value)`` pairs, a tuple
    (equal to, and hashing as, the plain tuple of the same pairs, so models comparing plain tuples
    are unaffected) that remembers it was an object, so :func:`jsonable` and :func:`short_json`
    turn it back into one (a verdict prints the port's snapshot as the port wrote it)."""

    __slots__ = ()


def hashable(value: Any) -> Any:
    """JSON value -> the tuple-based value models use (lists -> tuples, objects -> sorted
    key/value tuples (:class:`FrozenDict`), at any depth; anything else as it is).  On the
    checker's hot path (every snapshot of every step): scalars are kept without a call, lists
    built by comprehension."""
    t = type(value)
    if t is list:
        leaf = _LEAF
        return tuple([v if type(v) in leaf else hashable(v) for v in value])
    if t is dict:
        leaf = _LEAF
        return FrozenDict(sorted([(k, v if type(v) in leaf else hashable(v)) for k, v in value.items()]))
    if isinstance(value, list):  # a subclass
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return FrozenDict(sorted((k, hashable(v)) for k, v in value.items()))
    return value


def jsonable(value: Any) -> Any:
    """The inverse of :func:`hashable` for tuples: tuples -> lists, at any depth (a
    :class:`FrozenDict` -> an object).  On the port's hot path (every snapshot it sends): scalars
    are kept without a call."""
    if type(value) is tuple:
        leaf = _LEAF
        return [v if type(v) in leaf else jsonable(v) for v in value]
    if type(value) is FrozenDict:
        return {k: jsonable(v) for k, v in value}
    if isinstance(value, tuple):  # a subclass (a named tuple)
        return [jsonable(v) for v in value]
    return value


def short_json(value: Any, limit: int = 1000) -> str:
    """``value`` as JSON text (``json.dumps``'s separators; tuples as arrays, a :class:`FrozenDict` or a dict as an
    object, anything that is not JSON as its ``str`` in a string), at most ``limit`` characters:
    a longer text is cut there with a note.  The work is bounded by ``limit``, not by the size of
    the value (a 200 MB observation costs as little as a small one).  What every verdict prints
    (issue 35: divergence messages print JSON, never Python values)."""
    parts: list[str] = []
    size = 0
    for piece in _json_pieces(value, limit + 1, 0):
        parts.append(piece)
        size += len(piece)
        if size > limit:
            return "".join(parts)[:limit] + f" ... [cut at {limit:,} characters]"
    return "".join(parts)


def _json_pieces(v: Any, budget: int, depth: int):
    t = type(v)
    if v is None or t is bool:
        yield "null" if v is None else ("true" if v else "false")
    elif t is str:
        yield json.dumps(v[:budget])
    elif t is int:
        try:
            yield str(v)
        except ValueError:  # an int too long to print (Python's digit limit)
            yield f'"<int of {v.bit_length():,} bits>"'
    elif t is float:
        yield json.dumps(v) if v == v and v not in (float("inf"), float("-inf")) else json.dumps(str(v))
    elif depth > 100:
        yield '"..."'
    elif t is FrozenDict or isinstance(v, dict):
        yield "{"
        for i, (k, x) in enumerate(v if t is FrozenDict else v.items()):
            if i:
                yield ", "
            yield json.dumps(k[:budget] if type(k) is str else str(k))
            yield ": "
            yield from _json_pieces(x, budget, depth + 1)
        yield "}"
    elif isinstance(v, (list, tuple)):
        yield "["
        for i, x in enumerate(v):
            if i:
                yield ", "
            yield from _json_pieces(x, budget, depth + 1)
        yield "]"
    elif isinstance(v, (set, frozenset)):
        yield from _json_pieces(sorted(v, key=repr), budget, depth)
    else:
        yield json.dumps(str(v)[:budget])


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    from conq.spec import data

    return json.loads(data("schemas", "trace.schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validators():
    import jsonschema

    s = schema()
    cls = jsonschema.validators.validator_for(s)
    header = cls({**s["$defs"]["header"], "$defs": s["$defs"]})
    event = cls({**s["$defs"]["event"], "$defs": s["$defs"]})
    observed = cls({**s["$defs"]["observed_event"], "$defs": s["$defs"]})
    return header, event, observed


def _problem(validator, obj: Any) -> str | None:
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    e = errors[0]
    where = "/".join(str(p) for p in e.absolute_path)
    return f"field '{where}': {e.message}" if where else e.message


def _decode(raw: str | bytes, lineno: int, source: str) -> str:
    """One line as text: UTF-8, no NUL; a UTF-8 byte-order mark on line 1 is allowed."""
    if isinstance(raw, bytes):
        if lineno == 1:
            for bom, name in _BOMS:
                if raw.startswith(bom):
                    raise TraceError(f"{source}:{lineno}: the file is {name} text (byte-order mark); a trace is UTF-8")
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        nul = raw.find(b"\x00")
        if nul >= 0:
            raise TraceError(f"{source}:{lineno}: NUL byte at column {nul + 1} (a binary or UTF-16 file?); a trace is UTF-8 JSON text")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TraceError(
                f"{source}:{lineno}: not UTF-8 text: byte 0x{raw[e.start]:02x} at column {e.start + 1} ({e.reason})"
            ) from None
    if not isinstance(raw, str):
        raise TraceError(f"{source}:{lineno}: expected a line of text, got {type(raw).__name__}")
    if lineno == 1 and raw.startswith("\ufeff"):
        raw = raw[1:]
    nul = raw.find("\x00")
    if nul >= 0:
        raise TraceError(f"{source}:{lineno}: NUL character at column {nul + 1}; a trace is UTF-8 JSON text")
    return raw


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def _model_class(name: str, lineno: int, source: str, required: bool):
    """The registered model class a header names (None: not registered and not required)."""
    from conq.model.engines.registry import MODELS, model_class
    from conq.model.kernel import ModelError

    if name not in MODELS:
        if required:
            raise TraceError(f"{source}:{lineno}: field 'model': unknown model {name!r} (known: {', '.join(MODELS)})")
        return None
    try:
        return model_class(name)
    except ModelError as e:  # pragma: no cover - a registered model that is not installed
        raise TraceError(f"{source}:{lineno}: field 'model': {e}") from None


def _check_config(cls, config: dict[str, Any], lineno: int, source: str, config_name: str | None = None) -> Any:
    """A header's config, through the model's own validation (``Model.validate_config``): the named
    configuration (else the model's default) with the header's fields over it."""
    from conq.model.kernel import ConfigError, ModelError, config_from_overrides

    try:
        named = cls.configs()
        base = named.get(config_name) if config_name in named else next(iter(named.values()))
        return config_from_overrides(cls, base, config)
    except ConfigError as e:
        f, problem = e.problems[0]
        more = f" (and {len(e.problems) - 1} more)" if len(e.problems) > 1 else ""
        where = f"field 'config/{f}'" if f and f != "config" else "field 'config'"
        raise TraceError(f"{source}:{lineno}: {where}: {problem}{more}") from None
    except ModelError as e:
        raise TraceError(f"{source}:{lineno}: field 'config': {e}") from None


KINDS = ("recorded", "observed")

#: how deep a line's JSON may nest: checked before validation, whose recursion would otherwise end
#: in a RecursionError (issue 33); real traces nest under 10 levels
MAX_DEPTH = 64


def _too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``obj`` nests lists and objects more than ``limit`` levels deep (iteratively)."""
    stack = [(obj, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, list):
            continue
        if depth > limit:
            return True
        stack.extend((x, depth + 1) for x in v if isinstance(x, (list, dict)))
    return False


def parse_lines(lines: Iterable[str | bytes], source: str = "<trace>", *, require_known_model: bool = False,
                kinds: tuple[str, ...] = ("recorded",)) -> Trace:
    """Read a trace from its lines (text, or bytes as read from a file).

    Every problem is a :class:`TraceError` naming ``source:LINE`` and the field:
    bytes that are not UTF-8 (binary, UTF-16), NUL, lines that are not JSON, a
    header or event that breaks the schema.  When the header names a registered
    model, its config is validated by that model (``Model.validate_config``) and
    every action is checked against the model's declared actions (unknown name,
    wrong number of parameters).  ``require_known_model``: a header naming a
    model that is not registered is an error too (otherwise the trace is read
    without model checks, as a user's own model's trace is).  ``kinds``: the
    header kinds the caller reads (an observed log is read by ``conq validate``
    only: a checker replaying it would have no complete actions to send)."""
    header_v, event_v, observed_v = _validators()
    trace: Trace | None = None
    cls = config = None
    lineno = 0
    for lineno, raw in enumerate(lines, 1):
        text = _decode(raw, lineno, source)
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise TraceError(f"{source}:{lineno}: not valid JSON: {e.msg} (column {e.colno})") from None
        except RecursionError:
            raise TraceError(f"{source}:{lineno}: not valid JSON: nested too deeply") from None
        except ValueError as e:  # e.g. an integer beyond Python's digit limit
            raise TraceError(f"{source}:{lineno}: not valid JSON: {e}") from None
        if _too_deep(obj):
            raise TraceError(f"{source}:{lineno}: nested deeper than {MAX_DEPTH} levels (a trace line nests a few)")
        if trace is None:
            trace, (cls, config) = _header(obj, lineno, source, header_v, require_known_model, kinds)
            continue
        if trace.kind == "observed":
            trace.events.append(_observed_event(obj, lineno, source, observed_v, cls, len(trace.events) + 1, config))
            continue
        problem = _problem(event_v, obj)
        if problem:
            raise TraceError(f"{source}:{lineno}: bad event: {problem}")
        if obj["step"] != len(trace.events) + 1:
            raise TraceError(f"{source}:{lineno}: field 'step': expected {len(trace.events) + 1}, got {obj['step']}")
        action = hashable(obj["action"])
        if cls is not None and trace.level != "thread":  # a thread-level trace's actions are its thread view's
            wrong = cls.action_problem(action, config)
            if wrong:
                raise TraceError(f"{source}:{lineno}: field 'action': {wrong}")
        trace.events.append(Event(obj["step"], action, hashable(obj.get("observation")), obj.get("state"), lineno))
    if trace is None:
        raise TraceError(f"{source}:{lineno + 1}: empty trace (no header line)")
    return trace


def _header(obj: Any, lineno: int, source: str, header_v, require_known_model: bool, kinds: tuple[str, ...]):
    kind = obj.get("kind", "recorded") if isinstance(obj, dict) else "recorded"
    if isinstance(obj, dict) and kind != "observed":
        if "hidden" in obj:  # clearer than the schema's "False schema does not allow"
            raise TraceError(f"{source}:{lineno}: bad header: field 'hidden': only an observed log "
                             "(\"kind\": \"observed\") has it")
    problem = _problem(header_v, obj)
    if problem:
        raise TraceError(f"{source}:{lineno}: bad header: {problem}")
    if kind not in kinds:
        if kind == "observed":
            raise TraceError(f"{source}:{lineno}: field 'kind': an observed log (hidden steps, partial events) is "
                             "read by `conq validate MODEL TRACE`, not replayed")
        raise TraceError(f"{source}:{lineno}: field 'kind': expected {' or '.join(kinds)}, got {kind!r}")
    cls = _model_class(obj["model"], lineno, source, require_known_model)
    config = None  # the configuration the events' parameters are judged under
    if cls is not None:
        config = _check_config(cls, obj.get("config", {}), lineno, source, obj.get("config_name"))
    hidden = obj.get("hidden")
    if hidden is not None and cls is not None and cls.ACTIONS is not None:
        for i, name in enumerate(hidden):
            if name not in cls.ACTIONS:
                raise TraceError(f"{source}:{lineno}: field 'hidden/{i}': unknown action {name!r} "
                                 f"(known: {', '.join(sorted(cls.ACTIONS))})")
    trace = Trace(
        model=obj["model"],
        config=obj.get("config", {}),
        seed=obj.get("seed", 0),
        generator=obj.get("generator", {"mode": "recorded"}),
        config_name=obj.get("config_name"),
        expect=obj.get("expect"),
        kind=kind,
        level=obj.get("level"),
        hidden=tuple(hidden) if hidden is not None else None,
        config_given="config" in obj,
    )
    return trace, (cls, config)


def _observed_event(obj: Any, lineno: int, source: str, validator, cls, step: int, config: Any = None) -> ObservedEvent:
    """One line of an observed log: schema, step, and the action against the model's declaration
    (a known name; at most as many parameters as it takes; named parameters it has)."""
    if isinstance(obj, dict) and "step" in obj and "action" not in obj and "observe" not in obj:
        raise TraceError(f"{source}:{lineno}: bad event: an observed event names an \"action\", an \"observe\" "
                         "(a partial state), or both")
    problem = _problem(validator, obj)
    if problem:
        raise TraceError(f"{source}:{lineno}: bad event: {problem}")
    if obj["step"] != step:
        raise TraceError(f"{source}:{lineno}: field 'step': expected {step}, got {obj['step']}")
    event = ObservedEvent(step, lineno, raw=obj)
    if "action" in obj:
        action = hashable(obj["action"])
        name, given = action[0], action[1:]
        params = dict(enumerate(given))
        declared = cls.ACTIONS.get(name) if cls is not None and cls.ACTIONS is not None else None
        if cls is not None and cls.ACTIONS is not None:
            if declared is None:
                raise TraceError(f"{source}:{lineno}: field 'action': unknown action '{name}' "
                                 f"(known: {', '.join(sorted(cls.ACTIONS))})")
            if len(given) > len(declared):
                raise TraceError(f"{source}:{lineno}: field 'action': action '{name}' takes {len(declared)} "
                                 f"parameter{'s' if len(declared) != 1 else ''}"
                                 + (f" ({', '.join(declared)})" if declared else "") + f", got {len(given)}")
        for pname, value in obj.get("params", {}).items():
            if declared is None:
                raise TraceError(f"{source}:{lineno}: field 'params/{pname}': the model declares no parameter "
                                 "names for this action (give parameters by position in 'action')")
            if pname not in declared:
                raise TraceError(f"{source}:{lineno}: field 'params/{pname}': action '{name}' has no parameter "
                                 f"{pname!r} (its parameters: {', '.join(declared) or 'none'})")
            i = declared.index(pname)
            if i in params and params[i] != value:
                raise TraceError(f"{source}:{lineno}: field 'params/{pname}': {value!r} contradicts the "
                                 f"action's parameter {params[i]!r}")
            params[i] = value
        if declared is not None:
            for i, value in params.items():
                wrong = cls.param_problem(config, name, declared[i], value)
                if wrong:
                    raise TraceError(f"{source}:{lineno}: field 'action': {wrong}")
        event.name = name
        event.params = tuple(sorted(params.items()))
        if "observation" in obj:
            event.observation = hashable(obj["observation"])
    if "observe" in obj:
        paths = []
        for key, value in obj["observe"].items():
            # JSON Pointer's escapes (RFC 6901): "~1" is a "/" inside a key, "~0" a "~"
            parts = [k.replace("~1", "/").replace("~0", "~") for k in key.split("/")]
            path = tuple(int(k) if k.isdigit() else k for k in parts)
            if not key or any(k == "" for k in parts):
                raise TraceError(f"{source}:{lineno}: field 'observe/{key}': a path is view fields and list "
                                 "indexes joined by '/'")
            paths.append((path, value))
        event.observe = tuple(paths)
    return event


def read(path: str | os.PathLike, *, require_known_model: bool = False, kinds: tuple[str, ...] = ("recorded",)) -> Trace:
    """Read and validate a trace file (see :func:`parse_lines`)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            return parse_lines(f, str(p), require_known_model=require_known_model, kinds=kinds)
    except OSError as e:
        raise TraceError(f"{p}: cannot read: {e.strerror or e}") from None


def dumps(trace: Trace) -> str:
    lines = [json.dumps(trace.header(), separators=(",", ":"))]
    for e in trace.events:
        if isinstance(e, ObservedEvent):
            lines.append(json.dumps({**e.raw, "step": e.step}, separators=(",", ":")))
            continue
        obj: dict[str, Any] = {"step": e.step, "action": jsonable(e.action), "observation": jsonable(e.observation)}
        if e.state is not None:
            obj["state"] = e.state
        lines.append(json.dumps(obj, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def write(trace: Trace, path: str | os.PathLike) -> None:
    """Write atomically: a crash leaves no partial trace behind."""
    atomic_write(Path(path), dumps(trace))


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# -- Informal Trace Format (ITF) --------------------------------------------------


def _itf_value(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v if v is not None else {"#unserializable": "null"}
    if isinstance(v, int):
        return v if -(2**53) < v < 2**53 else {"#bigint": str(v)}
    if isinstance(v, (list, tuple)):
        return [_itf_value(x) for x in v]  # ITF sequence
    if isinstance(v, dict):
        return {str(k): _itf_value(x) for k, x in v.items()}  # ITF record
    return v


def to_itf(trace: Trace, init: Any = None, loop: int | None = None) -> dict[str, Any]:
    """The trace in the Informal Trace Format (as Apalache and Quint write it).

    Each ITF state holds the step that led there, as ``action`` and ``observation`` variables,
    and the model's observed state when the trace carries it.  ``init``: the initial state's view,
    written as state 0 with action ``"init"`` (every event then follows it, the ITF convention of
    Apalache's counterexamples); ``loop``: a lasso's repeated part starts at that state index
    (a liveness counterexample; ITF's ``loop``).
    """
    states = []
    variables = ["action", "observation"]
    has_state = init is not None or any(e.state is not None for e in trace.events)
    if has_state:
        variables.append("state")
    if init is not None:
        states.append({"#meta": {"index": 0}, "action": "init", "observation": _itf_value(None), "state": _itf_value(init)})
    for e in trace.events:
        st: dict[str, Any] = {
            "#meta": {"index": len(states)},
            "action": _itf_value(list(e.action)),
            "observation": _itf_value(jsonable(e.observation)),
        }
        if has_state:
            st["state"] = _itf_value(e.state)
        states.append(st)
    meta: dict[str, Any] = {
        "format": "ITF",
        "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
        "source": f"conq-trace v{VERSION}",
        "description": f"{trace.model} {trace.config_name or ''} seed {trace.seed}".strip(),
        "generator": trace.generator,
    }
    out: dict[str, Any] = {"#meta": meta, "vars": variables, "states": states}
    if loop is not None:
        out["loop"] = loop
    return out


def states_along(model: Any, actions: list, observations: list) -> tuple[Any, list[Any]]:
    """The model's ``observe()`` view of the initial state and after each step of a run of
    ``actions`` with these ``observations``, following the model states consistent with them (where
    several are, the first in the model's order; a step no state explains ends the views)."""
    current = list(dict.fromkeys(model.init_states()))
    firsts = [current[0]] if current else []
    for a, o in zip(actions, observations):
        nxt: dict[Any, None] = {}
        for s in current:
            outs = model.step(s, a)
            if not outs and o == ("error", 13):
                nxt[s] = None
            for o2, t in outs:
                if o2 == o:
                    nxt[t] = None
        if not nxt:
            break
        current = list(nxt)
        firsts.append(current[0])
    init = jsonable(hashable(model.observe(firsts[0]))) if firsts else None
    views = [_view(model, t) for t in firsts[1:]]
    return init, views


def _view(model: Any, state: Any) -> Any:
    v = model.observe(state)
    return v if isinstance(v, dict) else jsonable(v)


def export(trace: Trace, fmt: str, *, init: Any = None, loop: int | None = None) -> str:
    """A trace as text in ``fmt``: ``ndjson`` (this format, conq-trace) or ``itf`` (one JSON document)."""
    if fmt == "ndjson":
        return dumps(trace)
    if fmt == "itf":
        return json.dumps(to_itf(trace, init, loop), indent=1) + "\n"
    raise ValueError(f"export format must be ndjson or itf, got {fmt!r}")
