"""Issue 35: the protocol's messages are declared once, as a JSON Schema (spec/schemas/
port-protocol.schema.json); the checker validates replies with it (jsonschema), the protocol document
is generated from it, and every verdict prints JSON; a port's bad snapshot or observation is a
divergence (exit 1), never an internal error."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from jsonschema import Draft202012Validator

from conq.catalog import repo_root
from conq.conformance import protocol
from conq.conformance.adapters import PortFailure, parse_reply

SCHEMA = repo_root() / "spec" / "schemas" / "port-protocol.schema.json"


def test_the_schema_is_a_valid_json_schema_and_the_only_declaration():
    sch = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(sch)
    assert [m.type for m in protocol.MESSAGES] == list(sch["$defs"])
    assert protocol.PROTOCOL_VERSION == sch["x-protocol-version"] == 1
    assert {e.code: e.definite for e in protocol.ERRORS} == {
        c["const"]: c["x-definite"] for c in sch["$defs"]["error"]["properties"]["code"]["oneOf"]}
    # every field of every message is in the generated document, with its description
    doc = (repo_root() / "spec" / "port-protocol.md").read_text()
    for kind, node in sch["$defs"].items():
        assert f"### `{kind}`" in doc
        for name, sub in node["properties"].items():
            if name != "type":
                assert f"| `{name}` |" in doc and sub["description"] in doc, (kind, name)


def test_the_document_has_no_unexpanded_placeholder():
    # issue 35: the literal `{THREAD_STEPS}` (a string that was not an f-string)
    doc = (repo_root() / "spec" / "port-protocol.md").read_text()
    assert not re.findall(r"\{[A-Z_]{3,}\}", doc)
    assert f"`{protocol.THREAD_STEPS}`: the port implements the thread level" in doc


def test_the_session_example_validates_against_the_schema():
    doc = (repo_root() / "spec" / "port-protocol.md").read_text()
    block = doc.split("## Session", 1)[1].split("```")[1]
    whole = Draft202012Validator(json.loads(SCHEMA.read_text()))
    seen = 0
    for line in block.splitlines():
        if "->" not in line or "..." in line:
            continue
        sender, msg = line.split("->")[0].strip(), json.loads(line.split("   ", 1)[1])
        assert protocol.validate(msg, sender) is None, line
        assert whole.is_valid(msg), line
        seen += 1
    assert seen >= 6


def test_replies_are_validated_by_the_schema_file(monkeypatch):
    # a constraint that only the schema file states (features are strings) is enforced...
    bad = b'{"type": "init_ok", "id": 1, "implementation": "x", "features": [1]}'
    with pytest.raises(PortFailure, match=r"features\[0\]"):
        parse_reply(bad, "init", 1)
    # ... and an integer is an integer proper (JSON Schema alone would accept 1.0)
    assert "must be integer, got number" in protocol.validate({"type": "snapshot_ok", "id": 1.0, "state": 0}, "port")
    assert "must be integer, got boolean" in protocol.validate({"type": "snapshot_ok", "id": True, "state": 0}, "port")
    assert protocol.validate({"type": "error", "id": 1, "code": 13, "text": "", "definite": True}, "port") is None
    assert protocol.validate({"type": "error", "id": 1, "code": 15, "text": "", "definite": True}, "port") == \
        "error: unknown code 15"


# -- a port's bad data is a divergence, printed as JSON ---------------------------------------------

_BAD_PORT = r'''
import json, sys
mode = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    t, i = m["type"], m["id"]
    if t == "init":
        r = {"type": "init_ok", "id": i, "implementation": "bad", "features": ["thread-steps"]}
    elif t == "reset":
        r = {"type": "reset_ok", "id": i}
    elif t == "snapshot":
        state = {"shape": {"consumers": 5, "queues": "x", "deep": [[{"a": None}]]}, "list": [1, 2],
                 "scalar": 7, "good": None}[mode]
        if mode == "good":
            r = {"type": "error", "id": i, "code": 11, "text": "no snapshot", "definite": True}
        else:
            r = {"type": "snapshot_ok", "id": i, "state": state}
    elif t == "action":
        r = {"type": "action_ok", "id": i, "observation": {"a": [1, {"b": None}], "c": True}}
    else:
        print(json.dumps({"type": "shutdown_ok", "id": i}), flush=True)
        break
    print(json.dumps(r), flush=True)
'''


@pytest.mark.parametrize("model,level,mode", [
    ("consumer-lists", "call", "shape"), ("recovery-deferral", "call", "list"), ("ordered-consumption", "call", "scalar"),
    ("consumer-lists", "thread", "shape"), ("consumer-lists", "call", "good"), ("recovery-deferral", "call", "good"),
])
def test_a_bad_snapshot_or_observation_is_a_divergence_in_json(tmp_path, model, level, mode):
    port = tmp_path / "bad_port.py"
    port.write_text(_BAD_PORT)
    args = [sys.executable, "-m", "conq.cli", "conformance", model, "--impl", f"stdio:{sys.executable} {port} {mode}",
            "--traces", "1", "--length", "3", "--json"]
    if level == "thread":
        args += ["--level", "thread", "--config", "one-acquirer"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=repo_root())
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    doc = json.loads(proc.stdout)
    text = json.dumps(doc)
    assert not doc["ok"]
    verdict = (doc["failures"][0]["divergence"] if level == "call" else doc["configs"][0]["divergence"])
    if mode == "good":  # no snapshot: the observation (an object) is compared, and printed as JSON
        assert '{"a": [1, {"b": null}], "c": true}' in verdict, verdict
    else:
        assert "initial state" in verdict and "matches no consistent model state" in verdict, verdict
    assert not re.search(r"\bNone\b|\bTrue\b|\bFalse\b|\['|\('|', '", verdict), verdict  # no Python values
    assert "Traceback" not in proc.stderr and "internal error" not in text
