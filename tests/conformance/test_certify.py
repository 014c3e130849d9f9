"""Issue 35: ``conq certify`` (conformance/certify.py) and its pytest plugin (conformance/pytest_plugin.py).

A port that does not start stops the run at once (exit 2, its stderr, one start); configurations a
port refuses (error 14) and a thread level it does not have are skipped, not failures; the default
budget catches a planted "notify every acquirer" bug (visible only among consumers of one priority);
the plugin turns each check into a test with a JUnit report.  Budgets are counts."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conq.catalog import repo_root
from conq.conformance.certify import Budget, certify, plan
from conq.conformance.suite import PortUnusable

#: the smallest budget that still runs every kind of check once
TINY = Budget(traces=2, coverage=1, length=15, exhaustive_length=2, thread_walks=1, thread_length=10, thread_depth=2)

#: a port in Python over the reference port (conq.conformance.port) that refuses some configurations
#: (error 14) and has no thread level (init_ok without the feature): what a partial port looks like
PARTIAL = r'''
import io, json, sys
from conq.conformance import port
def lines():
    for line in sys.stdin:
        m = json.loads(line)
        if m.get("type") == "init" and (m["config"].get("expiry") or m["config"].get("groups")):
            print(json.dumps({"type": "error", "id": m["id"], "code": 14, "text": "no expiry, no groups here",
                              "definite": True}), flush=True)
            continue
        if m.get("type") == "init":
            m.pop("level", None)  # answers every init at call level: init_ok without thread-steps
            line = json.dumps(m) + "\n"
        yield line
sys.exit(port.serve(lines(), sys.stdout))
'''


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conq.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd=repo_root(), env=env)


def test_the_reference_is_certified_at_both_levels():
    cert = certify("recovery-deferral", "reference", TINY)
    assert cert.ok and not [r for r in cert.results if r.verdict == "skipped"]
    levels = {(r.level, r.mode) for r in cert.results}
    assert levels == {("corpus", "corpus"), ("call", "random"), ("call", "coverage"), ("call", "exhaustive"),
                      ("thread", "random"), ("thread", "exhaustive")}
    corpus = cert.results[0]
    assert corpus.level == "corpus" and corpus.traces >= 30 and "as expected" in corpus.note


def test_a_port_that_does_not_start_stops_the_run_at_once(tmp_path):
    starts = tmp_path / "starts"
    port = tmp_path / "broken.sh"
    port.write_text(f"#!/bin/sh\necho started >> {starts}\necho 'cannot open the broker socket' >&2\nexit 3\n")
    port.chmod(0o755)
    proc = _cli("certify", "consumer-lists", "--impl", f"stdio:{port}", "--json")
    assert proc.returncode == 2, proc.stdout[-2000:]
    err = json.loads(proc.stdout)["error"]["message"]
    assert "the port cannot be used (crash at init" in err and "cannot open the broker socket" in err
    assert starts.read_text().count("started") == 1  # nothing restarted per configuration or trace
    # the same from conq conformance: one start, not one per trace
    proc = _cli("conformance", "consumer-lists", "--impl", f"stdio:{port}", "--traces", "200")
    assert proc.returncode == 2 and "cannot open the broker socket" in proc.stderr
    assert starts.read_text().count("started") == 2


def test_refused_configurations_and_a_missing_thread_level_are_skipped(tmp_path):
    port = tmp_path / "partial.py"
    port.write_text(PARTIAL)
    checks = plan("consumer-lists", f"stdio:python {port}", TINY)  # `python`: the interpreter running conq
    skipped = {c.name: c.skipped for c in checks if c.run is None}
    assert skipped["call-expiry-random"] == "error 14: no expiry, no groups here"
    assert {"call-groups-shared-coverage", "call-all-actors-exhaustive"} <= set(skipped)
    assert "call-small-random" not in skipped and "call-reference-exhaustive" not in skipped
    assert all(why.startswith("no thread level") for name, why in skipped.items() if name.startswith("thread-"))
    assert len([n for n in skipped if n.startswith("thread-")]) == 2 * 9
    corpus = next(c for c in checks if c.level == "corpus").execute()
    # the corpus traces of the refused configurations and of the thread level are left out, the rest pass
    assert corpus.ok and corpus.traces > 20 and "left out" in corpus.note


def test_a_port_refusing_every_configuration_certifies_nothing(tmp_path):
    port = tmp_path / "refuses.py"
    port.write_text("import json, sys\n"
                    "for line in sys.stdin:\n"
                    "    m = json.loads(line)\n"
                    "    print(json.dumps({'type': 'error', 'id': m['id'], 'code': 14, 'text': 'not this model', "
                    "'definite': True}), flush=True)\n")
    with pytest.raises(Exception, match="supports none of the"):
        plan("recovery-deferral", f"stdio:python {port}", TINY)


def test_the_default_budget_catches_notify_every_acquirer():
    # issue 35: with one default configuration this bug passed 200 traces; it shows only among
    # acquirers of one priority, and certify's default run drives that configuration
    checks = {c.name: c for c in plan("consumer-lists", "mutant:notify-every-acquirer", Budget(), corpus=None)}
    r = checks["call-same-priority-random"].execute()
    assert r.verdict == "DIVERGES" and r.failures[0]["minimised"][-1][0] == "enqueue"
    assert "--impl mutant:notify-every-acquirer" in r.failures[0]["replay"]


def test_the_pytest_plugin_makes_each_check_a_test(tmp_path):
    xml = tmp_path / "conq.xml"
    proc = subprocess.run(
        # the plugin comes with conq (entry point pytest11): nothing to name with -p
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--conq-impl", "mutant:notify-every-acquirer", "--conq-model", "consumer-lists", "--conq-traces", "5",
         "--conq-thread-walks", "1", "--conq-exhaustive-length", "1", "--conq-thread-depth", "1", "--conq-no-corpus",
         f"--junitxml={xml}", "-q", str(tmp_path)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:]  # some checks fail: the mutant diverges
    cases = {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")}
    assert len(cases) == 12 * 3 + 9 * 2 and "call-small-random" in cases and "thread-credit-exhaustive" in cases
    failed = [n for n, c in cases.items() if c.find("failure") is not None]
    assert "call-same-priority-random" in failed and all("same-priority" in n for n in failed), failed
    text = cases[failed[0]].find("failure").get("message") or cases[failed[0]].find("failure").text
    assert "replay: conq conformance consumer-lists" in (cases[failed[0]].find("failure").text or text)
    # without --conq-impl the plugin adds nothing
    quiet = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert quiet.returncode == 5 and "no tests ran" in quiet.stdout


@pytest.mark.parametrize("model", ["consumer-lists"])
def test_certify_prints_one_table_and_exits_by_its_verdict(model):
    proc = _cli("certify", model, "--impl", "mutant:notify-every-acquirer", "--traces", "6", "--coverage", "1",
                "--exhaustive-length", "1", "--thread-walks", "1", "--thread-depth", "1", "--no-corpus")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "NOT CERTIFIED" in proc.stdout and "DIVERGES" in proc.stdout and "replay: conq conformance" in proc.stdout
    doc = json.loads(_cli("certify", "recovery-deferral", "--impl", "reference", "--traces", "2", "--coverage", "1",
                          "--exhaustive-length", "1", "--thread-walks", "1", "--thread-depth", "1", "--no-corpus",
                          "--json").stdout)
    assert doc["ok"] and doc["checks"] == len(doc["results"]) and doc["skipped"] == 0
    from jsonschema import Draft202012Validator

    schema = json.loads((repo_root() / "spec" / "schemas" / "certify.schema.json").read_text())
    assert not list(Draft202012Validator(schema).iter_errors(doc))
    bad = _cli("certify", model, "--impl", "nonsense")
    assert bad.returncode == 2 and "--impl must be" in bad.stderr
