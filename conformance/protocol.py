"""The port protocol: how an implementation in any language is driven.

Every message and error code is declared here, once.  The protocol document
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
from typing import Any

PROTOCOL_VERSION = 1

#: the longest line (one message) the checker reads from a port by default, in bytes;
#: the environment variable CONQ_PORT_MAX_LINE_BYTES raises it
MAX_LINE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # JSON type, for the document and validation
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


_ID = Field("id", "integer", "request id chosen by the checker; the response echoes it")

#: the optional feature (``init_ok``'s ``features``) of a port that answers an ``action`` or a
#: ``reset`` with ``"snapshot": true`` with the snapshot after it in the same reply: one round trip
#: per step instead of two (issue 17, "Checker speed")
SNAPSHOT_IN_REPLY = "snapshot-in-reply"
#: the optional feature of a port that implements the thread level (issue 17, "Interleavings through
#: the protocol"; ``conformance/consumer_lists/thread_steps.py``): asked for with ``init``'s ``level``
THREAD_STEPS = "thread-steps"
#: the values of ``init``'s ``level``
LEVELS = ("call", "thread")
_ASK = ("sent only to a port whose `init_ok` lists the feature `" + SNAPSHOT_IN_REPLY + "`: `true` asks for the "
        "snapshot taken right after the {what} in the same reply (`{reply}`'s `state`), which saves the `snapshot` "
        "request that would follow")
_GIVE = ("only when the request had `\"snapshot\": true`: the snapshot right after the {what}, as `snapshot_ok` "
         "would carry it; a port that cannot take one leaves the field out, and the checker then sends `snapshot`")

MESSAGES: tuple[Message, ...] = (
    Message(
        "init",
        "checker",
        "First message of a session. The port builds a fresh system under test for this model and configuration; "
        "`seed` fixes every choice the port makes itself (its scheduler, its tie-breaks), so a run replays exactly. "
        "A port process serves one model and configuration: when a trace of another configuration comes (the golden "
        "corpus mixes them), the checker shuts the port down and starts a fresh process with a new `init`.",
        (
            _ID,
            Field("protocol", "integer", f"protocol version; this document describes version {PROTOCOL_VERSION}"),
            Field("model", "string", "model name, e.g. `consumer-lists`"),
            Field("config", "object", "the model configuration, field by field (see `conq list --json`)"),
            Field("seed", "integer", "seed for the port's own nondeterminism"),
            Field("level", "string", "`\"call\"` (the default when absent) or `\"thread\"`: the thread level (see "
                  f"\"Thread level\" below); a port that implements it lists the feature `{THREAD_STEPS}` in the "
                  "`init_ok` it answers, one that does not answers error 14 (or ignores the field and leaves the "
                  "feature out: the checker then fails the run, saying the port has no thread level)", required=False),
        ),
        reply="init_ok",
    ),
    Message(
        "init_ok",
        "port",
        "The system under test is ready.",
        (
            _ID,
            Field("implementation", "string", "name and version of the port, for reports"),
            Field("features", "array", "the optional protocol features the port supports, by name (strings; "
                  "the checker uses those it knows and ignores the rest): "
                  f"`{SNAPSHOT_IN_REPLY}` (see `action` and `reset`), `{THREAD_STEPS}` (see \"Thread level\")",
                  required=False),
        ),
    ),
    Message(
        "action",
        "checker",
        "Perform one action of the model on the system under test and report what was observed. "
        "Actions are arrays: the call name, then its parameters: the model's *call-level* actions, listed with "
        "their parameters, when each is enabled and what each observes in `spec/ports/<model>.md` (never the "
        "model's finer thread steps).",
        (
            _ID,
            Field("action", "array", "`[name, param, ...]`, exactly as the calls of `spec/ports/<model>.md`"),
            Field("snapshot", "boolean", _ASK.format(what="action", reply="action_ok"), required=False),
        ),
        reply="action_ok",
    ),
    Message(
        "action_ok",
        "port",
        "The action was performed; `observation` is what the caller saw, in the model's vocabulary (its exact "
        "shape per model: `spec/ports/<model>.md`).",
        (
            _ID,
            Field("observation", "any", "JSON value; arrays stand for the model's tuples"),
            Field("state", "any", _GIVE.format(what="action"), required=False),
        ),
    ),
    Message(
        "snapshot",
        "checker",
        "Report the observable state of the system under test (optional: a port that cannot answers error 11).",
        (_ID,),
        reply="snapshot_ok",
    ),
    Message(
        "snapshot_ok",
        "port",
        "The observable state, in the shape of the model's `observe()` view (defined per model, with examples, in "
        "`spec/ports/<model>.md`).",
        (_ID, Field("state", "any", "JSON value")),
    ),
    Message(
        "reset",
        "checker",
        "Discard the system under test and build a fresh one with the same model and configuration as the `init` "
        "before it, and this seed (the checker never uses `reset` to change the configuration).",
        (
            _ID,
            Field("seed", "integer", "seed for the fresh system"),
            Field("snapshot", "boolean", _ASK.format(what="reset", reply="reset_ok"), required=False),
        ),
        reply="reset_ok",
    ),
    Message("reset_ok", "port", "A fresh system under test is ready.",
            (_ID, Field("state", "any", _GIVE.format(what="reset"), required=False))),
    Message("shutdown", "checker", "End of session: the port replies, then exits with status 0.", (_ID,), reply="shutdown_ok"),
    Message("shutdown_ok", "port", "The port is about to exit.", (_ID,)),
    Message(
        "error",
        "port",
        "A request failed. `definite` tells whether the operation certainly did not happen (the checker may go on) "
        "or may have happened in part (the run's verdict is a failure at this step).",
        (
            _ID,
            Field("code", "integer", "one of the error codes below"),
            Field("text", "string", "what went wrong, for a person"),
            Field("definite", "boolean", "true when the operation certainly did not happen"),
        ),
    ),
)

ERRORS: tuple[ErrorCode, ...] = (
    ErrorCode(10, "malformed-request", True, "the request is not valid JSON or lacks a field"),
    ErrorCode(11, "not-supported", True, "the message type is not supported by this port"),
    ErrorCode(12, "unknown-action", True, "the action name or its parameters are not known to the port"),
    ErrorCode(13, "not-enabled", True, "the action's precondition does not hold in the current state; nothing was done"),
    ErrorCode(14, "unsupported-model", True, "the port does not implement this model or configuration"),
    ErrorCode(20, "crashed", False, "the system under test failed while performing the action"),
    ErrorCode(21, "timeout", False, "the action did not complete in the port's own time limit"),
)



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
_JSON_TYPES = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "any": lambda v: True,
}


def validate(obj: Any, sender: str) -> str | None:
    """None when ``obj`` is a well-formed message from ``sender``, else the problem."""
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
    for f in msg.fields:
        if f.name not in obj:
            if f.required:
                return f"{kind}: missing field '{f.name}'"
            continue
        if not _JSON_TYPES[f.type](obj[f.name]):
            return f"{kind}: field '{f.name}' must be {f.type}, got {type(obj[f.name]).__name__}"
    if kind == "error" and obj["code"] not in BY_CODE:
        return f"error: unknown code {obj['code']}"
    return None


def render_markdown() -> str:
    """The protocol document, generated from the declarations above."""
    out = [
        "# The conq port protocol",
        "",
        "<!-- generated by `conq protocol --write` from conformance/protocol.py; do not edit by hand -->",
        "",
        f"Protocol version {PROTOCOL_VERSION}. A *port* is an implementation of one of the conq models, in any language, "
        "driven by the conformance checker (`conq conformance --impl stdio:CMD`).",
        "",
        "## Transport",
        "",
        "- The checker starts the port as a child process and talks to it over the port's stdin and stdout.",
        "- Each message is one JSON object on one line (newline-delimited JSON, UTF-8). Nothing else may be written "
        "to stdout: logs go to stderr (the checker shows its tail when a port fails).",
        "- The checker sends one request and waits for its response before the next one. Every request carries an "
        "integer `id`; the response echoes it.",
        "- Optional features: a port may list, in `init_ok`'s `features`, the optional parts of the protocol it "
        f"implements; the checker uses them only with such a port. Today there are two: `{SNAPSHOT_IN_REPLY}`: the "
        "snapshot after an `action` or a `reset` comes in its reply, one round trip per step instead of two (a port "
        "the checker drives is otherwise limited by the round trips, not by its own speed); and `{THREAD_STEPS}`: the "
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
        "thread level). A `reset` keeps the level. The messages are the same; only "
        "the actions and observations change. The port keeps one logical thread per consumer's IO thread and per "
        "publishing thread, stopped at its scheduling points, and the checker chooses the interleaving:",
        "",
        "- an environment action (`[\"enqueue\", j]`, `[\"add_consumer\", c]`, ...) is the model's environment "
        "step alone: the notifications it owes are *not* run, they become a thread that the checker steps;",
        "- `[\"step\", \"io\", c]` lets consumer `c`'s IO thread run to its next scheduling point (one model "
        "step); `[\"step\", \"publisher\", j]` lets the publishing thread of message `j` run its owed "
        "notification. A thread that has no step now answers error 13 (not enabled), as any disabled action;",
        "- every `action_ok`'s observation is `[label, result, notified]`: `label` names the model step that ran "
        "(for a step request the port says which one: a thread may have several), `result` what the model observes "
        "of it, `notified` the sorted consumers it notified; the snapshot after each step has the call level's shape.",
        "",
        "The steps, their labels and results, and the configurations the thread level runs on are in the model's "
        "port reference (`spec/ports/<model>.md`, section \"Thread level\").",
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
    from pathlib import Path

    from conq import spec

    return json.loads((Path(spec.__file__).parent / "schemas" / "conformance.schema.json").read_text())


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
                        ("thread", "`thread`: `--level thread` (open: the thread level may add fields)")):
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
