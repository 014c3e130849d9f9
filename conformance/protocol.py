"""The port protocol: how an implementation in any language is driven.

Every message and error code is declared once, in spec/schemas/port-protocol.schema.json
(JSON Schema, read here).  The protocol document
``spec/port-protocol.md`` is generated from these declarations
(``conq protocol --write``) and a test fails when the two differ; the stdio
adapter and the reference port validate every message they receive against
the same declarations.

In the spirit of Maelstrom's node protocol: newline-delimited JSON over the
port's stdin/stdout, one object per line, logs on stderr only.  The checker
sends one request at a time and waits for its response (with a timeout).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

@dataclass(frozen=True)
class Field:
    name: str
    type: str  # JSON type ("any": no constraint), for the document
    about: str
    required: bool = True


@dataclass(frozen=True)
class Message:
    type: str
    sender: str  # "checker" or "port"
    about: str
    fields: tuple[Field, ...]
    reply: str | None = None  # the success response to a request


@dataclass(frozen=True)
class ErrorCode:
    code: int
    name: str
    definite: bool  # True: the operation certainly did not happen
    about: str


#: the optional feature (``init_ok``'s ``features``) of a port that answers an ``action`` or a
#: ``reset`` with ``"snapshot": true`` with the snapshot after it in the same reply: one round trip
#: per step instead of two (issue 17, "Checker speed")
SNAPSHOT_IN_REPLY = "snapshot-in-reply"
#: the optional feature of a port that implements the thread level (issue 17, "Interleavings through
#: the protocol"; each system's ``thread_steps.py``): asked for with ``init``'s ``level``
THREAD_STEPS = "thread-steps"
#: the values of ``init``'s ``level``
LEVELS = ("call", "thread")
#: where the messages are declared, once: one JSON Schema (draft 2020-12), a ``$defs`` entry per
#: message type (issue 35); everything below is read from it
SCHEMA_FILE = "port-protocol.schema.json"


def schema() -> dict[str, Any]:
    """spec/schemas/port-protocol.schema.json: every message of the protocol."""
    return _schema()


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    import json

    from conq.spec import data  # importlib.resources: also from the package zip a Spark executor imports

    return json.loads(data("schemas", SCHEMA_FILE).read_text(encoding="utf-8"))


def _declarations() -> tuple[tuple[Message, ...], tuple[ErrorCode, ...]]:
    sch = _schema()
    messages = []
    errors: tuple[ErrorCode, ...] = ()
    for kind, node in sch["$defs"].items():
        required = set(node.get("required", ()))
        fields = tuple(Field(name, sub.get("type", "any"), sub["description"], name in required)
                       for name, sub in node["properties"].items() if name != "type")
        messages.append(Message(kind, node["x-sender"], node["description"], fields, node.get("x-reply")))
        if kind == "error":
            errors = tuple(ErrorCode(c["const"], c["title"], c["x-definite"], c["description"])
                           for c in node["properties"]["code"]["oneOf"])
    return tuple(messages), errors


MESSAGES, ERRORS = _declarations()
PROTOCOL_VERSION: int = _schema()["x-protocol-version"]
#: the longest line (one message) the checker reads from a port by default, in bytes;
#: the environment variable CONQ_PORT_MAX_LINE_BYTES raises it
MAX_LINE_BYTES: int = _schema()["x-max-line-bytes"]


@dataclass(frozen=True)
class FailureCode:
    """How a port failed, machine-readable: ``PortFailure.code`` (conformance/adapters.py).
    The checker matches these codes, never the text of a failure."""

    code: str
    about: str


FAILURES: tuple[FailureCode, ...] = (
    FailureCode("timeout", "the port did not answer within the checker's timeout (`--timeout`)"),
    FailureCode("crash", "the port is not running: it could not be started, or it exited or was killed before or "
                         "while answering"),
    FailureCode("bad-reply", "a reply line that is not a well-formed message: not UTF-8, not JSON, a field missing "
                             "or of the wrong type, nested too deeply, longer than the line limit"),
    FailureCode("protocol", "a well-formed message out of place: a reply with another request's id or of the wrong "
                            "type, output nobody asked for"),
    FailureCode("definite-error", "an `error` answer with a definite code (the operation certainly did not happen); "
                                  "to an `action` it is an observation, reported with what the model allowed at "
                                  "that step (13 to an `action` is the observation `not-enabled`, never a failure)"),
    FailureCode("indefinite-error", "an `error` answer with an indefinite code (20, 21): the operation may have "
                                    "happened in part"),
)
FAILURE_CODES = frozenset(f.code for f in FAILURES)

BY_TYPE = {m.type: m for m in MESSAGES}
BY_CODE = {e.code: e for e in ERRORS}
_JSON_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object",
               type(None): "null"}


@lru_cache(maxsize=None)
def _validator(kind: str) -> Any:
    """The JSON Schema validator of message type ``kind`` (its ``$defs`` entry), compiled once.
    ``integer`` is an integer proper: neither a boolean nor a number such as ``1.0`` (the schema
    language would accept ``1.0``; a port that writes it has a bug the checker should name)."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _c, v: type(v) is int)
    strict = validators.extend(Draft202012Validator, type_checker=checker)
    return strict(_schema()["$defs"][kind])


def validate(obj: Any, sender: str) -> str | None:
    """None when ``obj`` is a well-formed message from ``sender`` (valid against its message's JSON
    Schema, spec/schemas/port-protocol.schema.json), else the first problem, by field in the order
    the schema declares them."""
    if not isinstance(obj, dict):
        return "a message must be a JSON object"
    kind = obj.get("type")
    if not isinstance(kind, str):
        return "field 'type' must be a string" if "type" in obj else "missing field 'type'"
    msg = BY_TYPE.get(kind)
    if msg is None:
        return f"unknown message type {kind!r}"
    if msg.sender != sender:
        return f"message type {kind!r} is sent by the {msg.sender}, not the {sender}"
    order = {f.name: i for i, f in enumerate(msg.fields)}
    problems: list[tuple[int, int, str]] = []
    for e in _validator(kind).iter_errors(obj):
        if e.validator == "required":
            problems += [(order.get(n, -1), 0, f"{kind}: missing field '{n}'") for n in e.validator_value if n not in obj]
            continue
        name = e.path[0] if e.path else None
        where = order.get(name, len(order)) if isinstance(name, str) else len(order)
        value = obj.get(name) if isinstance(name, str) else obj
        if e.validator == "type" and len(e.path) == 1:
            got = _JSON_NAMES.get(type(value), type(value).__name__)
            problems.append((where, 1, f"{kind}: field '{name}' must be {e.validator_value}, got {got}"))
        elif kind == "error" and name == "code" and e.validator == "oneOf":
            problems.append((where, 2, f"error: unknown code {value}"))
        else:
            path = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(e.path))
            text = e.message if len(e.message) <= 200 else e.message[:200] + " ..."
            problems.append((where, 3, f"{kind}: field '{path}': {text}"))
    return min(problems)[2] if problems else None


def render_markdown() -> str:
    """The protocol document, generated from the declarations above."""
    out = [
        "# The conq port protocol",
        "",
        "<!-- generated by `conq protocol --write` from spec/schemas/port-protocol.schema.json (conformance/protocol.py); do not edit by hand -->",
        "",
        f"Protocol version {PROTOCOL_VERSION}. A *port* is an implementation of one of the conq models, in any language, "
        "driven by the conformance checker (`conq conformance --impl stdio:CMD`).",
        "",
        "## Transport",
        "",
        "- The checker starts the port as a child process and talks to it over the port's stdin and stdout "
        "(`--impl stdio:COMMAND`, run by `/bin/sh`; a COMMAND whose first word is `python` or `python3` runs with the "
        "interpreter that runs conq, so `stdio:python -m conq.conformance.port` needs no activated virtual environment).",
        "- `conq certify MODEL --impl stdio:COMMAND` first sends `init` for every configuration (and level) it will "
        "use: a port that does not start, exits, hangs or answers anything but `init_ok` or error 14 stops the run at "
        "once (exit 2, with the port's stderr); error 14 marks that configuration (or the thread level) unsupported, "
        "and its checks are skipped. `conq conformance` does the same for its one configuration.",
        "- Each message is one JSON object on one line (newline-delimited JSON, UTF-8). Nothing else may be written "
        "to stdout: logs go to stderr (the checker shows its tail when a port fails).",
        "- The checker sends one request and waits for its response before the next one. Every request carries an "
        "integer `id`; the response echoes it.",
        "- Optional features: a port may list, in `init_ok`'s `features`, the optional parts of the protocol it "
        f"implements; the checker uses them only with such a port. Today there are two: `{SNAPSHOT_IN_REPLY}`: the "
        "snapshot after an `action` or a `reset` comes in its reply, one round trip per step instead of two (a port "
        f"the checker drives is otherwise limited by the round trips, not by its own speed); and `{THREAD_STEPS}`: the "
        "port implements the thread level and confirms it in answer to an `init` asking for it (section \"Thread level\").",
        "- Every response must arrive within the checker's timeout (`--timeout`, default 10 s); a port that does not "
        "answer in time, exits, or writes anything that is not a well-formed message fails the run at that step, with "
        "the step, the request and what went wrong in the verdict.",
        f"- One line may hold at most {MAX_LINE_BYTES:,} bytes ({MAX_LINE_BYTES // (1024 * 1024)} MiB) by default; a longer "
        "response fails the run at that step without being read further (raise the limit with the environment variable "
        "`CONQ_PORT_MAX_LINE_BYTES`).",
        "- The port runs in a process group (a session) of its own. A port that failed is ended, together with every "
        "process it started, and never sent another request: the next trace starts a fresh port with `init`. At the end "
        "of a session (`shutdown`, or EOF on its stdin) the port exits; one that is still running a moment later gets "
        "SIGTERM, then SIGKILL, sent to its whole process group. The same happens when conq itself is interrupted or "
        "terminated.",
        "",
        "## Session",
        "",
        "```",
        "checker -> port   {\"type\":\"init\",\"id\":1,\"protocol\":1,\"model\":\"consumer-lists\",\"config\":{...},\"seed\":7}",
        "port -> checker   {\"type\":\"init_ok\",\"id\":1,\"implementation\":\"my-port 0.3\"}",
        "checker -> port   {\"type\":\"action\",\"id\":2,\"action\":[\"enqueue\",0]}",
        "port -> checker   {\"type\":\"action_ok\",\"id\":2,\"observation\":[null,[0]]}",
        "checker -> port   {\"type\":\"snapshot\",\"id\":3}",
        "port -> checker   {\"type\":\"snapshot_ok\",\"id\":3,\"state\":{\"consumers\":[[\"notified\",1],[\"interested\",1]],...}}",
        "...",
        "checker -> port   {\"type\":\"shutdown\",\"id\":9}",
        "port -> checker   {\"type\":\"shutdown_ok\",\"id\":9}",
        "```",
        "",
        "The checker accepts a run when the model can produce the same observations for the same actions; the model may "
        "allow several observations for one action (it tracks every model state consistent with what it saw).",
        "",
        "What goes inside the messages for each model -- the calls, their parameters and ranges, when each is enabled, "
        "what it does, the exact observation and snapshot shapes, which configuration switches matter -- is in the "
        "generated port reference `spec/ports/<model>.md` (for example [ports/consumer-lists.md](ports/consumer-lists.md)); "
        "a port can be written from that page and this one alone.",
        "",
        "## Messages",
        "",
        "Every message is declared once, as a JSON Schema (draft 2020-12): "
        f"[schemas/{SCHEMA_FILE}](schemas/{SCHEMA_FILE}), one `$defs` entry per message type; the tables below "
        "are generated from it, and the checker validates every reply that is not the expected one with a known "
        "shape against it (the `jsonschema` package). A port may validate the requests it gets with the same file. "
        "An `integer` is an integer proper: not `1.0`, not `true`.",
        "",
    ]
    for m in MESSAGES:
        out += [f"### `{m.type}` ({m.sender} -> {'port' if m.sender == 'checker' else 'checker'})", "", m.about, ""]
        if m.reply:
            out += [f"Answered by `{m.reply}`, or by `error`.", ""]
        out += ["| field | type | meaning |", "|---|---|---|", "| `type` | string | `\"" + m.type + "\"` |"]
        out += [f"| `{f.name}` | {f.type}{'' if f.required else ' (optional)'} | {f.about} |" for f in m.fields]
        out.append("")
    out += [
        "## Thread level",
        "",
        "A port may also be driven at the *thread level*: the checker sends `init` with `\"level\": \"thread\"`, "
        f"and a port that implements it confirms with the feature `{THREAD_STEPS}` in its `init_ok` (one that does "
        "not answers error 14, or leaves the feature out; either way the checker reports that the port has no "
        "thread level). A `reset` keeps the level. The messages are the same; only the actions and observations "
        "change. The port keeps one logical thread per thread of the system (which ones: the model's port "
        "reference), each stopped at its scheduling points, and the checker chooses the interleaving:",
        "",
        "- an environment action (a call from outside the system: `[\"enqueue\", j]`, `[\"feed\", p]`, ...) is "
        "the model's environment step alone: the work it hands to the system's threads is *not* run, it becomes a "
        "step of a thread that the checker steps;",
        "- `[\"step\", kind, n, ...]` lets the thread named by its kind and its number(s) run to its next "
        "scheduling point (one model step): `[\"step\", \"io\", c]` is consumer `c`'s IO thread in consumer "
        "lists, `[\"step\", \"worker\", q]` the worker serving task queue `q` in recovery deferral. A thread "
        "that has no step now answers error 13 (not enabled), as any disabled action;",
        "- every `action_ok`'s observation is an array whose first element, `label`, names the model step that "
        "ran (for a step request the port says which one: a thread may have several) and whose second, `result`, "
        "is what the model observes of it; a system may add more (consumer lists: `notified`, the sorted "
        "consumers the step notified). The snapshot after each step has the call level's shape.",
        "",
        "The threads, their steps, labels and results, and the configurations the thread level runs on are in the "
        "model's port reference (`spec/ports/<model>.md`, section \"Thread level\").",
        "",
        "## Error codes",
        "",
        "| code | name | definite | meaning |",
        "|---|---|---|---|",
    ]
    out += [f"| {e.code} | `{e.name}` | {'yes' if e.definite else 'no'} | {e.about} |" for e in ERRORS]
    out += [
        "",
        "*Definite* errors say the operation certainly did not happen: the checker treats them as an observation "
        "(`[\"error\", code]`) that the model must allow. The model allows `[\"error\", 13]` (`not-enabled`) exactly "
        "where it has the action disabled, and no other error: a definite error 10, 11 (to an `action`), 12 or 14 fails "
        "the run at that step as an observation, the verdict naming what the model allowed instead (for example "
        "`step 3: action [\"pull\", 0]: the port answered error 12 (unknown-action, definite); the model allowed "
        "[[0, []]] (the port: ...)`). Error 11 answered to `snapshot` only means the port has no snapshot. Indefinite errors end the "
        "run with a failing verdict at that step.",
        "",
        "## How a port fails",
        "",
        "Every failure of a port is classified by one machine-readable code (the checker's `PortFailure.code`; "
        "a verdict names it, and the checker decides by the code, never by the failure's text):",
        "",
        "| code | what happened |",
        "|---|---|",
    ]
    out += [f"| `{f.code}` | {f.about} |" for f in FAILURES]
    out += [""]
    out += conformance_json_section()
    return "\n".join(out)


def conformance_schema() -> dict[str, Any]:
    """spec/schemas/conformance.schema.json: the shape of ``conq conformance --json``."""
    import json

    from conq.spec import data

    return json.loads(data("schemas", "conformance.schema.json").read_text(encoding="utf-8"))


def _schema_type(node: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in node and "type" not in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return "object (`run`)" if name == "run_body" else name
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " / ".join(f"`{v}`" for v in node["enum"])
    types = node.get("type", "any")
    types = types if isinstance(types, list) else [types]
    shown = []
    for t in types:
        if t == "array" and isinstance(node.get("items"), dict):
            shown.append(f"array of {_schema_type(node['items'], defs)}")
        else:
            shown.append(t)
    return " or ".join(shown)


def _schema_rows(node: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> list[str]:
    """One table row per field of an object node, nested objects inline (``a.b``)."""
    rows = []
    required = set(node.get("required", ()))
    for name, sub in (node.get("properties") or {}).items():
        if not isinstance(sub, dict):
            continue
        if "$ref" in sub and "description" not in sub:
            sub = {**defs[sub["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in sub.items() if k != "$ref"}}
        path = prefix + name
        rows.append(f"| `{path}` | {_schema_type(sub, defs)} | {'yes' if name in required else 'no'} | {sub.get('description', '')} |")
        if "properties" in sub and not isinstance(sub.get("items"), dict):
            rows += _schema_rows(sub, defs, path + ".")
    return rows


def conformance_json_section() -> list[str]:
    """The section on ``conq conformance --json``, generated from its JSON schema (GAPS.md entry 7)."""
    sch = conformance_schema()
    defs = sch["$defs"]
    out = ["## The `--json` document of `conq conformance`", "",
           sch["description"], "",
           "The schema: [schemas/conformance.schema.json](schemas/conformance.schema.json). A run's verdict is `ok` "
           "and the exit code (0 conforms, 1 a divergence, 2 bad input with no document printed); nothing in it "
           "depends on the clock but `seconds` and `steps_per_second`.", ""]
    head = ["| field | type | required | meaning |", "|---|---|---|---|"]
    for name, title in (("run_body", "`run`: call level, one configuration (closed: no other field)"),
                        ("failure", "`failure`: one entry of `failures` (closed)"),
                        ("all_configs", "`all_configs`: call level, `--all-configs` (closed)"),
                        ("thread", "`thread`: `--level thread` (each entry of `configs` closed)")):
        node = defs[name]
        out += [f"### {title}", ""]
        if name == "run_body":
            out += [defs["run"]["description"][0].upper() + defs["run"]["description"][1:] + ".", ""]
        elif node.get("description"):
            out += [node["description"][0].upper() + node["description"][1:] + ".", ""]
        out += head + _schema_rows(node, defs)
        for arr in ("configs",):
            items = (node.get("properties") or {}).get(arr, {}).get("items")
            if isinstance(items, dict) and "properties" in items:
                extra = " every field of `run`, and" if "$ref" in items else ""
                out += ["", f"Each entry of `configs`:{extra}", ""] + head + _schema_rows(items, defs, "configs[].")
        out += [""]
    return out
