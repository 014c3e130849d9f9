"""The documented exit codes hold against hostile input and signals (issue 33, finding 5).

* A trace or log nested hundreds of levels deep is bad input (exit 2 naming the line), not a
  RecursionError in the schema validator (exit 3).
* An integer that does not fit in 64 bits, in ``--set`` or a trace header, is exit 2 naming the
  field, not an OverflowError deep in a model (exit 3).
* An action parameter of the wrong type or outside what the configuration allows is exit 2 naming
  ``action``, not a divergence (exit 1).
* ``conq validate`` has total bounds (``--max-states`` over every closure, ``--max-seconds``,
  ``--max-memory``): hit, the run ends incomplete, exit 4, naming the bound.
* SIGTERM is exit 143 with the ``--json`` document in every command (``conq upstream`` included),
  and nothing it started is left running.

Verdicts are exit codes, messages and counts; the seconds below are safety caps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conq.cli import app

runner = CliRunner()
CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "consumer_lists" / "corpus"


def _doc(res) -> dict:
    return json.loads(res.stdout)


def _recorded(tmp_path: Path, *events: str, name: str = "t.ndjson") -> Path:
    """A recorded consumer-lists trace: the header of a corpus trace that conforms, then ``events``."""
    header = next(p for p in sorted(CORPUS.glob("pass-*.ndjson"))).read_text().splitlines()[0]
    p = tmp_path / name
    p.write_text("\n".join([header, *events]) + "\n")
    return p


# ============================================================================ nesting, overflow, parameters
@pytest.mark.parametrize("depth", [200, 1000])
def test_a_deeply_nested_line_is_exit_2_naming_the_line(tmp_path, depth):
    deep = "[" * depth + "]" * depth
    p = _recorded(tmp_path, '{"step":1,"action":["pull",0],"observation":%s}' % deep)
    res = runner.invoke(app, ["validate", "consumer-lists", str(p), "--json"])
    assert res.exit_code == 2, res.stdout
    # beyond Python's own recursion limit the JSON parser says so first; under it, the depth bound
    assert _doc(res)["error"]["message"] in (f"{p}:2: nested deeper than 64 levels (a trace line nests a few)",
                                             f"{p}:2: not valid JSON: nested too deeply")


def test_an_integer_beyond_64_bits_is_exit_2_naming_the_field(tmp_path):
    res = runner.invoke(app, ["check", "consumer-lists", "--set", "messages=99999999999999999999", "--json"])
    assert res.exit_code == 2 and "messages: 99999999999999999999 is out of range" in _doc(res)["error"]["message"]
    res = runner.invoke(app, ["check", "ordered-consumption", "--set", "msg_queue=[99999999999999999999]", "--json"])
    assert res.exit_code == 2 and "msg_queue: 99999999999999999999 is out of range" in _doc(res)["error"]["message"]


@pytest.mark.parametrize("value, why", [
    ('"c0"', "parameter c of 'pull' is an integer, got 'c0'"),
    ("true", "parameter c of 'pull' is an integer, got True"),
    ("99", "parameter c of 'pull' must be in 0..1 in this configuration, got 99"),
    ("-1", "parameter c of 'pull' must be in 0..1 in this configuration, got -1"),
])
def test_a_wrong_action_parameter_is_exit_2_naming_action(tmp_path, value, why):
    p = _recorded(tmp_path, '{"step":1,"action":["pull",%s],"observation":[null,[]]}' % value)
    res = runner.invoke(app, ["validate", "consumer-lists", str(p), "--json"])
    assert res.exit_code == 2 and _doc(res)["error"]["message"] == f"{p}:2: field 'action': {why}", res.stdout
    # the same trace in a corpus: refused before anything runs, not a divergence (exit 1)
    res = runner.invoke(app, ["conformance", "consumer-lists", "--corpus", str(tmp_path), "--traces", "0", "--json"])
    assert res.exit_code == 2 and "field 'action'" in _doc(res)["error"]["message"], res.stdout


# ============================================================================ conq validate's total bounds
def _broad_log(tmp_path: Path) -> Path:
    """An observed log whose closures are broad: every step but deliver hidden (79 s and 915 MB
    unbounded on the reference configuration; the bounds below stop it within a few thousand states)."""
    head = {"format": "conq-trace", "version": 1, "kind": "observed", "model": "consumer-lists",
            "config_name": "reference"}
    p = tmp_path / "broad.ndjson"
    p.write_text("\n".join([json.dumps(head)] + [json.dumps({"step": i, "action": ["deliver"]})
                                                  for i in range(1, 11)]) + "\n")
    return p


def test_validate_max_states_bounds_the_whole_run(tmp_path):
    res = runner.invoke(app, ["validate", "consumer-lists", str(_broad_log(tmp_path)), "--max-states", "3000",
                              "--json"])
    doc = _doc(res)
    assert res.exit_code == 4 and doc["verdict"] == "incomplete", res.stdout
    assert doc["stopped_by"] == "--max-states 3,000 (states over every closure)" and doc["states_explored"] == 3001


def test_validate_max_memory_and_max_seconds_end_the_run_with_exit_4(tmp_path, monkeypatch):
    log = str(_broad_log(tmp_path))
    res = runner.invoke(app, ["validate", "consumer-lists", log, "--max-memory", "1", "--json"])
    assert res.exit_code == 4 and _doc(res)["stopped_by"].startswith("--max-memory 1 MB"), res.stdout
    # a clock that reads 0 when the run starts and before the search, an hour at every later look: the
    # bound is hit at the first look during the search
    from conq.conformance import validate as v

    reads = []
    monkeypatch.setattr(v.time, "monotonic", lambda: reads.append(1) or (0.0 if len(reads) <= 2 else 3600.0))
    res = runner.invoke(app, ["validate", "consumer-lists", log, "--max-seconds", "5", "--json"])
    doc = _doc(res)
    assert res.exit_code == 4 and doc["stopped_by"] == "--max-seconds 5", res.stdout
    assert doc["states_explored"] == 1024 and len(reads) == 3  # the first look during the search: 1,024 states


# ============================================================================ SIGTERM
def _terminate_when(args: list[str], ready: str | int, descendants) -> tuple[int, dict, str]:
    """Run ``conq ARGS --json``, send SIGTERM once its stderr shows ``ready`` (a string) or it has
    ``ready`` (a number) processes of its own; (exit code, document, stderr).  The processes it
    started must all be gone when it has exited."""
    proc = subprocess.Popen([sys.executable, "-m", "conq", *args, "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen, children = [], set()
    try:
        if isinstance(ready, str):
            for line in proc.stderr:
                seen.append(line)
                if ready in line:
                    break
        else:
            deadline = time.monotonic() + 120  # a safety cap
            while len(descendants(proc.pid)) < ready and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        children = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)  # a safety cap
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    left = [p for p in children if Path(f"/proc/{p}").exists()
            and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not left, f"left running: {left}"
    return proc.returncode, json.loads(out), "".join(seen) + err


def test_sigterm_is_exit_143_with_the_json_document_in_upstream(tmp_path, process_tree):
    pytest.importorskip("rocketmq")
    code, doc, err = _terminate_when(["upstream", "rocketmq-python", "--workload", "model-push-fifo", "--seeds", "50",
                                      "--out", str(tmp_path / "up")], "seed 0:", process_tree)
    assert code == 143 and doc == {"ok": False, "exit_code": 143,
                                   "error": {"kind": "terminated", "message": "terminated (exit 143)"}}, err


def test_sigterm_is_exit_143_with_the_json_document_in_check(process_tree):
    code, doc, err = _terminate_when(["check", "consumer-lists", "--set", "messages=6", "--workers", "2"], 2,
                                     process_tree)
    assert code == 143 and doc["exit_code"] == 143 and doc["error"]["kind"] == "terminated", err
