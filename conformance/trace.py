"""Traces: the versioned, newline-delimited JSON format every engine shares.

Line 1 is a header::

    {"format": "conq-trace", "version": 1, "model": "consumer-lists",
     "config_name": "reference", "config": {...}, "seed": 7,
     "generator": {"mode": "random", "length": 40}}

then one event per line::

    {"step": 1, "action": ["enqueue", 0], "observation": ["notified", 1]}

optionally with ``"state"``: the model's ``observe()`` view after the step
(generators write it, so the trace can be exported to ITF and read by
TLA+/Apalache/Quint tooling).  The JSON Schema is ``spec/schemas/trace.schema.json``;
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


@dataclass
class Trace:
    model: str
    config: dict[str, Any]
    seed: int
    generator: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    config_name: str | None = None
    expect: str | None = None  # golden corpus: "pass" or "diverge"

    def header(self) -> dict[str, Any]:
        head = {
            "format": FORMAT,
            "version": VERSION,
            "model": self.model,
            "config": self.config,
            "seed": self.seed,
            "generator": self.generator,
        }
        if self.config_name is not None:
            head["config_name"] = self.config_name
        if self.expect is not None:
            head["expect"] = self.expect
        return head

    def actions(self) -> list[tuple]:
        return [e.action for e in self.events]


def hashable(value: Any) -> Any:
    """JSON value -> the tuple-based value models use."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    return value


def jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    from conq import spec

    return json.loads((Path(spec.__file__).parent / "schemas" / "trace.schema.json").read_text())


@lru_cache(maxsize=1)
def _validators():
    import jsonschema

    s = schema()
    cls = jsonschema.validators.validator_for(s)
    header = cls({**s["$defs"]["header"], "$defs": s["$defs"]})
    event = cls({**s["$defs"]["event"], "$defs": s["$defs"]})
    return header, event


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


def _check_config(cls, config: dict[str, Any], lineno: int, source: str) -> None:
    """A header's config, through the model's own validation (``Model.validate_config``)."""
    from conq.model.kernel import ConfigError, ModelError, config_from_overrides

    try:
        base = next(iter(cls.configs().values()))
        config_from_overrides(cls, base, config)
    except ConfigError as e:
        f, problem = e.problems[0]
        more = f" (and {len(e.problems) - 1} more)" if len(e.problems) > 1 else ""
        where = f"field 'config/{f}'" if f and f != "config" else "field 'config'"
        raise TraceError(f"{source}:{lineno}: {where}: {problem}{more}") from None
    except ModelError as e:
        raise TraceError(f"{source}:{lineno}: field 'config': {e}") from None


def parse_lines(lines: Iterable[str | bytes], source: str = "<trace>", *, require_known_model: bool = False) -> Trace:
    """Read a trace from its lines (text, or bytes as read from a file).

    Every problem is a :class:`TraceError` naming ``source:LINE`` and the field:
    bytes that are not UTF-8 (binary, UTF-16), NUL, lines that are not JSON, a
    header or event that breaks the schema.  When the header names a registered
    model, its config is validated by that model (``Model.validate_config``) and
    every action is checked against the model's declared actions (unknown name,
    wrong number of parameters).  ``require_known_model``: a header naming a
    model that is not registered is an error too (otherwise the trace is read
    without model checks, as a user's own model's trace is)."""
    header_v, event_v = _validators()
    trace: Trace | None = None
    cls = None
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
        if trace is None:
            problem = _problem(header_v, obj)
            if problem:
                raise TraceError(f"{source}:{lineno}: bad header: {problem}")
            cls = _model_class(obj["model"], lineno, source, require_known_model)
            if cls is not None:
                _check_config(cls, obj["config"], lineno, source)
            trace = Trace(
                model=obj["model"],
                config=obj["config"],
                seed=obj["seed"],
                generator=obj["generator"],
                config_name=obj.get("config_name"),
                expect=obj.get("expect"),
            )
            continue
        problem = _problem(event_v, obj)
        if problem:
            raise TraceError(f"{source}:{lineno}: bad event: {problem}")
        if obj["step"] != len(trace.events) + 1:
            raise TraceError(f"{source}:{lineno}: field 'step': expected {len(trace.events) + 1}, got {obj['step']}")
        action = hashable(obj["action"])
        if cls is not None:
            wrong = cls.action_problem(action)
            if wrong:
                raise TraceError(f"{source}:{lineno}: field 'action': {wrong}")
        trace.events.append(Event(obj["step"], action, hashable(obj.get("observation")), obj.get("state")))
    if trace is None:
        raise TraceError(f"{source}:{lineno + 1}: empty trace (no header line)")
    return trace


def read(path: str | os.PathLike, *, require_known_model: bool = False) -> Trace:
    """Read and validate a trace file (see :func:`parse_lines`)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            return parse_lines(f, str(p), require_known_model=require_known_model)
    except OSError as e:
        raise TraceError(f"{p}: cannot read: {e.strerror or e}") from None


def dumps(trace: Trace) -> str:
    lines = [json.dumps(trace.header(), separators=(",", ":"))]
    for e in trace.events:
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


def to_itf(trace: Trace) -> dict[str, Any]:
    """The trace in the Informal Trace Format (as Apalache and Quint write it).

    Each ITF state holds the model's observed state (when the trace carries
    it) and the step that led there, as ``action`` and ``observation``
    variables (``"init"`` for the first state).
    """
    states = []
    variables = ["action", "observation"]
    has_state = any(e.state is not None for e in trace.events)
    if has_state:
        variables.append("state")
    for i, e in enumerate(trace.events):
        st: dict[str, Any] = {
            "#meta": {"index": i},
            "action": _itf_value(list(e.action)),
            "observation": _itf_value(jsonable(e.observation)),
        }
        if has_state:
            st["state"] = _itf_value(e.state)
        states.append(st)
    return {
        "#meta": {
            "format": "ITF",
            "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
            "source": f"conq-trace v{VERSION}",
            "description": f"{trace.model} {trace.config_name or ''} seed {trace.seed}".strip(),
            "generator": trace.generator,
        },
        "vars": variables,
        "states": states,
    }
