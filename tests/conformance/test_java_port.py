"""Acceptance of issue 17: a second consumer-lists port, in Java, written from spec/ alone
(conformance/consumer_lists/ports/java/ConsumerListsPort.java), passes the golden corpus and
generated traces on every configuration the conformance suite drives."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conq.catalog import repo_root
from conq.conformance.consumer_lists.build_corpus import PASS_CONFIGS
from conq.conformance import trace
from conq.conformance.suite import run_suite

SOURCE = repo_root() / "conformance" / "consumer_lists" / "ports" / "java" / "ConsumerListsPort.java"
CORPUS = repo_root() / "conformance" / "consumer_lists" / "corpus"

pytestmark = pytest.mark.skipif(
    shutil.which("javac") is None or shutil.which("java") is None,
    reason="javac/java not on PATH (a JDK 11+ is needed, e.g. the Debian package openjdk-17-jdk-headless)",
)


@pytest.fixture(scope="module")
def java_port(tmp_path_factory):
    build = tmp_path_factory.mktemp("java-port")
    subprocess.run(["javac", "-d", str(build), str(SOURCE)], check=True, capture_output=True, timeout=120)
    return f"stdio:java -Xshare:auto -XX:TieredStopAtLevel=1 -cp {build} ConsumerListsPort"


def test_java_port_passes_the_golden_corpus(java_port, tmp_path):
    # the Java port was written before issue 16's other actors (deletes, reject, groups): it answers
    # their configurations with error 14 (unsupported configuration), so it is held to the corpus of
    # the six configurations it implements
    for p in CORPUS.glob("*.ndjson"):
        tr = trace.read(p)
        if tr.config_name in PASS_CONFIGS and tr.level != "thread":  # the Java port has no thread level
            (tmp_path / p.name).write_bytes(p.read_bytes())
    res, model = run_suite("consumer-lists", impl_spec=java_port, traces=0, corpus=tmp_path, timeout=30)
    assert res.ok and res.corpus == res.corpus_ok == 27, "\n".join(f.describe(model) for f in res.failures)
    assert res.corpus_replayed_diverge == 9


@pytest.mark.parametrize("config", PASS_CONFIGS)
def test_java_port_conforms_on_generated_traces(java_port, config):
    res, model = run_suite("consumer-lists", impl_spec=java_port, config_name=config, overrides={"env_budget": 2},
                           traces=25, seed=17, length=40, timeout=30)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    assert res.traces == 25 and res.steps > 25


def test_java_port_is_certified_with_its_unsupported_configurations_skipped(java_port):
    # issue 35: conq certify on a port that implements six of the twelve configurations and no thread
    # level: those are listed as skipped, the rest conforms
    from conq.conformance.certify import Budget, certify

    cert = certify("consumer-lists", java_port, Budget(traces=3, coverage=1, length=20, exhaustive_length=2),
                   timeout=30)
    assert cert.ok, [t for r in cert.results for t in r.text][:2]
    ran = {r.config for r in cert.results if r.level == "call" and r.verdict == "conforms"}
    assert ran == set(PASS_CONFIGS)
    skipped = [r for r in cert.results if r.verdict == "skipped"]
    assert {r.level for r in skipped} == {"call", "thread"} and all(r.note for r in skipped)
    assert cert.results[0].level == "corpus" and "left out" in cert.results[0].note
