"""Issue 35's acceptance: a recovery-deferral port in JavaScript (Node.js, standard library only,
conformance/recovery_deferral/ports/node/port.js) passes at both levels, and a planted interleaving
bug in it (``handoff-in-worker``: the worker completes the waiting feed thread's hand-off itself) is
caught at the thread level only; a planted call-level bug (``down-keeps-deferred``) at both; upstream's
rule for a late onRecoveryInitiated (``stored-context-only``) on the configuration that has one.

Budgets are counts of traces, never seconds."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conq.catalog import repo_root
from conq.conformance.recovery_deferral import thread_steps as ts

PORT = repo_root() / "conformance" / "recovery_deferral" / "ports" / "node" / "port.js"
CORPUS = repo_root() / "conformance" / "recovery_deferral" / "corpus"
NODE = shutil.which("node")
IMPL = f"stdio:{shlex.quote(NODE or 'node')} {shlex.quote(str(PORT))}"

pytestmark = pytest.mark.skipif(NODE is None,
                                reason="node not on PATH (Node.js 18+ is needed, e.g. the Debian package nodejs)")


@pytest.fixture
def bug(monkeypatch):
    def use(name: str | None) -> None:
        if name:
            monkeypatch.setenv("CONQ_NODE_BUG", name)
        else:
            monkeypatch.delenv("CONQ_NODE_BUG", raising=False)
    use(None)
    return use


def conformance(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "conq.cli", "conformance", "recovery-deferral", "--impl", IMPL,
                           "--timeout", "30", "--json", *args],
                          check=False, capture_output=True, text=True, timeout=600, cwd=repo_root())
    doc = json.loads(proc.stdout)
    assert proc.returncode == (0 if doc["ok"] else 1), (proc.returncode, proc.stderr[-2000:])
    return doc


def thread_level(config: str, **kw):
    return ts.check_threads(ts.thread_impl(IMPL, timeout=30), config, impl_spec=IMPL, **kw)


def test_the_port_passes_the_corpus_and_every_configuration_at_call_level(bug):
    doc = conformance("--all-configs", "--traces", "15", "--corpus", str(CORPUS))
    assert doc["ok"], json.dumps(doc)[:3000]
    corpus = doc["configs"][0]
    assert corpus["config"] is None and corpus["corpus"]["traces"] == corpus["corpus"]["as_expected"] >= 20
    assert len(doc["configs"]) >= 9 and all(c["traces"] == 15 for c in doc["configs"][1:])


@pytest.mark.parametrize("config", sorted(ts.THREAD_CONFIGS))
def test_the_port_conforms_at_thread_level(bug, config):
    r = thread_level(config, walks=10, length=30, depth=5, probe=0.1)
    assert r.ok, r.describe()
    assert r.exhaustive == r.exhaustive_total > 20


def test_a_planted_interleaving_bug_is_caught_at_thread_level_only(bug):
    bug("handoff-in-worker")
    # call level: the corpus's call-level traces, every configuration, and every trace of 7 calls of the
    # one-queue configuration conform (the take and the feed thread's resumption are one call there);
    # only the corpus's thread-level traces catch it
    calls = conformance("--all-configs", "--traces", "15", "--corpus", str(CORPUS))
    assert all(c["ok"] for c in calls["configs"][1:]), json.dumps(calls)[:3000]
    failed = calls["configs"][0]["failures"]
    assert failed and all(f["source"].startswith("corpus:pass-thread-") for f in failed), failed
    exhaustive = conformance("--config", "reference-one-queue", "--mode", "exhaustive", "--length", "7",
                             "--traces", "1000000")
    assert exhaustive["ok"] and exhaustive["exhaustive"]["complete"] and exhaustive["traces"] > 700
    # thread level: the worker's step leaves the event queued before the feed thread ran (and
    # uncounted): the snapshot after that step shows it, with the step label the port reported
    r = thread_level("one-queue", walks=10, length=30)
    assert not r.ok and r.divergence.kind == "snapshot", r.describe()
    assert r.actions[-1][:2] == ("step", "worker")
    assert r.divergence.observed[0] == ("run", r.actions[-1][2])
    assert r.minimised and r.minimised[-1] == r.actions[-1] and len(r.minimised) <= len(r.actions)
    assert r.seed is not None and f"--seed {r.seed}" in r.replay and "--level thread" in r.replay
    assert f"--impl {shlex.quote(IMPL)}" in r.replay
    # without snapshots it still shows: the probes (steps the model has disabled) find the worker
    # taking the handed-off event from a queue the model has empty
    blind = thread_level("reference", walks=40, length=40, snapshots=False, probe=0.2)
    assert not blind.ok and blind.divergence.kind in ("observation", "not-enabled"), blind.describe()


def test_a_planted_call_level_bug_is_caught_at_both_levels(bug):
    bug("down-keeps-deferred")
    calls = conformance("--config", "reference", "--traces", "60")
    assert not calls["ok"] and calls["failures"][0]["minimised"][-1][0] == "status"
    assert not thread_level("reference", walks=60, length=40).ok


def test_upstreams_rule_for_a_late_initiation_is_caught_on_that_configuration_only(bug):
    """Issue 32, DEV-032: ``stored-context-only`` (upstream's rule: an up tied to the stored recovery only)
    conforms where the SDK initiates first, and diverges once its onRecoveryInitiated may come late."""
    bug("stored-context-only")
    assert conformance("--config", "reference-re-recovery", "--traces", "30")["ok"]
    late = conformance("--config", "reference-late-initiation", "--traces", "30")
    assert not late["ok"] and late["failures"][0]["minimised"][-1][0] in ("status", "poll"), json.dumps(late)[:3000]


def test_an_unknown_bug_name_is_refused():
    proc = subprocess.run([NODE, str(PORT)], check=False, input="", capture_output=True, text=True, timeout=30,
                          env={**os.environ, "CONQ_NODE_BUG": "no-such-bug"})
    assert proc.returncode == 2 and "unknown CONQ_NODE_BUG" in proc.stderr
