"""Port references (issue 17): spec/ports/<model>.md generated from the call-level views, with a
drift test; the suite's corpus and exhaustive gaps; definite errors as observations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conq.catalog import repo_root
from conq.conformance import generate, port_reference
from conq.conformance.adapters import Stdio
from conq.conformance.checker import Checker
from conq.conformance.suite import SuiteError, run_suite
from conq.conformance.views import conformance_model

CORPUS = repo_root() / "conformance" / "consumer_lists" / "corpus"


@pytest.mark.parametrize("model", port_reference.models())
def test_port_reference_is_up_to_date(model):
    path = repo_root() / "spec" / "ports" / f"{model}.md"
    assert path.is_file(), f"{path} missing: python -m conq.conformance.port_reference --write"
    assert path.read_text() == port_reference.render_markdown(model), (
        f"{path} is stale: regenerate with `conq protocol --write` or "
        "`python -m conq.conformance.port_reference --write`")


def test_consumer_lists_reference_names_every_call_and_the_observation_shape():
    text = (repo_root() / "spec" / "ports" / "consumer-lists.md").read_text()
    for call in ("add_consumer", "remove_consumer", "credit", "suspend", "resume", "enqueue", "enqueue_held",
                 "unhold", "release", "pull"):
        assert f'### `["{call}"' in text
    assert "`[result, notified]`" in text and "sorted ascending" in text
    # the delivery rule the checker holds a port to: back to notified always, not "if more work"
    assert "*always* after a delivery" in text
    # the finer model steps are never sent to a port
    assert '### `["deliver"' not in text and '### `["notify_consumers"' not in text


def test_recovery_deferral_reference_declares_every_call():
    text = (repo_root() / "spec" / "ports" / "recovery-deferral.md").read_text()
    assert "No call descriptions are declared" not in text
    for call in ("recover", "feed", "status", "run", "done", "poll"):
        assert f'### `["{call}"' in text
    # the blocked feed thread and what it counted: the one shape a port could not guess from the model
    assert '`["blocked", q, counted]`' in text and "## State a port keeps" in text
    assert "| observation | `\"completed\"` |" in text  # whole observations, not [result, list] pairs


def test_declared_calls_must_match_the_view():
    declared = port_reference.DECLARED["consumer-lists"]
    broken = port_reference.Declared(declared.intro, declared.calls[:-1], declared.observation, declared.snapshot)
    port_reference.DECLARED["consumer-lists"] = broken
    try:
        with pytest.raises(ValueError, match="differ from the calls the view emits"):
            port_reference.render_markdown("consumer-lists")
    finally:
        port_reference.DECLARED["consumer-lists"] = declared


def test_corpus_through_a_stdio_port_inits_per_configuration(tmp_path):
    # a port that logs each init's configuration: the corpus mixes 12 configurations (the six of the
    # original paths, the six of issue 16's other actors), each a fresh init
    log = tmp_path / "inits"
    port = tmp_path / "logging_port.py"
    port.write_text(
        "import sys, json\n"
        "from conq.conformance import port\n"
        f"LOG = {str(log)!r}\n"
        "class Tee:\n"
        "    def __init__(self, f): self.f = f\n"
        "    def __iter__(self):\n"
        "        for line in self.f:\n"
        "            if '\"init\"' in line:\n"
        "                open(LOG, 'a').write(json.dumps(json.loads(line)['config'], sort_keys=True) + '\\n')\n"
        "            yield line\n"
        "sys.exit(port.serve(Tee(sys.stdin), sys.stdout))\n"
    )
    res, model = run_suite("consumer-lists", impl_spec=f"stdio:{sys.executable} {port}", traces=0, corpus=CORPUS)
    # 49 call-level traces of the 12 configurations, 19 of the thread level's 9 (issue 35)
    assert res.corpus_ok == res.corpus == 68, [f.describe(model) for f in res.failures]
    assert res.corpus_replayed_diverge == 14
    inits = log.read_text().splitlines()
    # a fresh init whenever the configuration changes (files run in name order), and only then (the
    # thread level's traces go to a port of their own, started with the level)
    assert len(set(inits)) == 12 + 9 and all(a != b for a, b in zip(inits, inits[1:]))


def test_a_diverge_trace_replayed_catches_an_implementation_with_that_bug():
    res, model = run_suite("consumer-lists", impl_spec="mutant:remove-no-handover", traces=0, corpus=CORPUS)
    sources = [f.source for f in res.failures]
    assert any(s.startswith("corpus:diverge-remove-no-handover.ndjson (its actions replayed") for s in sources), sources
    assert not any(s.startswith("corpus:diverge-priority-ignored") for s in sources)


def test_exhaustive_mode_runs_every_trace_or_refuses():
    model = conformance_model("consumer-lists", "small", {"env_budget": 2})
    total = generate.count_exhaustive(model, 4)
    assert total == sum(1 for _ in generate.exhaustive(model, 4))
    with pytest.raises(SuiteError, match=f"is {total:,} traces.*--traces {total}"):
        run_suite("consumer-lists", config_name="small", overrides={"env_budget": 2}, traces=total - 1, length=4,
                  mode="exhaustive")
    res, m = run_suite("consumer-lists", config_name="small", overrides={"env_budget": 2}, traces=total, length=4,
                       mode="exhaustive")
    assert res.ok and res.traces == total and res.exhaustive_traces == total
    assert res.to_json(m)["exhaustive"] == {"traces": total, "complete": True}


def test_a_definite_error_is_an_observation_with_what_the_model_allowed(tmp_path):
    driver = tmp_path / "no_pull.py"
    driver.write_text(
        "from conq.conformance.consumer_lists.driver import ConsumerListsDriver\n"
        "class NoPull(ConsumerListsDriver):\n"
        "    def do(self, action):\n"
        "        if action[0] == 'pull':\n"
        "            raise KeyError('pull is not implemented')\n"
        "        return super().do(action)\n"
    )
    model = conformance_model("consumer-lists", "small", {"env_budget": 2})
    impl = Stdio(f"{sys.executable} -m conq.conformance.port --driver {driver}:NoPull")
    try:
        run = Checker(model, impl).replay([("enqueue", 0), ("pull", 0)])
    finally:
        impl.close()
    d = run.divergence
    assert d is not None and d.step == 2 and d.kind == "observation"
    assert d.observed == ("error", 12) and d.allowed == [(0, ())]
    assert d.failure == "definite-error"
    text = d.describe()
    assert "the port answered error 12 (unknown-action, definite); the model allowed [[0, []]]" in text


# -- conq conformance: --all-configs, the --json schema, a corpus failure's actions (GAPS.md 5, 7, 10) --

def _cli_json(*args: str) -> tuple[int, dict]:
    import json

    from typer.testing import CliRunner

    from conq.cli import app

    res = CliRunner().invoke(app, ["conformance", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_all_configs_runs_every_configuration_the_suite_drives_with_its_overrides():
    code, doc = _cli_json("consumer-lists", "--all-configs", "--traces", "2", "--set", "max_credit=1")
    assert code == 0 and doc["ok"]
    expected = [(name, {**ov, "max_credit": 1}) for name, ov in port_reference.conformance_configs("consumer-lists")]
    assert [(c["config"], c["overrides"]) for c in doc["configs"]] == expected
    assert all(c["traces"] == 2 and c["ok"] for c in doc["configs"])
    # a bug: exit 1, and the failing configurations' replay commands carry the suite's overrides
    code, doc = _cli_json("consumer-lists", "--all-configs", "--traces", "20", "--impl", "mutant:notify-every-acquirer")
    assert code == 1 and not doc["ok"]
    bad = [c for c in doc["configs"] if not c["ok"]]
    assert bad and all(f"--config {c['config']} --set env_budget=2" in c["failures"][0]["replay"] for c in bad)
    assert any(c["ok"] for c in doc["configs"])  # one verdict per configuration, not one for all


def _schema_validator():
    import jsonschema

    from conq.conformance import protocol

    schema = protocol.conformance_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_every_shape_of_the_json_document_validates_against_its_schema():
    v = _schema_validator()
    docs = {
        "failures (corpus and generated)": _cli_json("consumer-lists", "--impl", "mutant:notify-every-acquirer",
                                                     "-c", "same-priority", "--traces", "10",
                                                     "--corpus", str(CORPUS))[1],
        "exhaustive": _cli_json("consumer-lists", "-c", "small", "--mode", "exhaustive", "--length", "3",
                                "--traces", "1000")[1],
        "another model": _cli_json("recovery-deferral", "--traces", "3")[1],
        "--all-configs": _cli_json("consumer-lists", "--all-configs", "--traces", "1", "--corpus", str(CORPUS))[1],
        "--level thread": _cli_json("consumer-lists", "--level", "thread", "--traces", "1")[1],
        "--level thread, failing": _cli_json("consumer-lists", "--level", "thread", "--impl", "mutant:unnotify-after-scan",
                                             "--config", "one-acquirer", "--traces", "5")[1],
        "--level thread, exhaustive, another model": _cli_json("recovery-deferral", "--level", "thread", "--config",
                                                               "one-queue", "--mode", "exhaustive", "--length", "4")[1],
    }
    for name, doc in docs.items():
        errors = [f"{list(e.absolute_path)}: {e.message[:300]}" for e in v.iter_errors(doc)]
        assert not errors, (name, errors)
    failing = docs["failures (corpus and generated)"]["failures"]
    assert {f["source"].split(":")[0].split(" ")[0] for f in failing} >= {"corpus", "random"}
    assert docs["--all-configs"]["configs"][0]["config"] is None  # the corpus run comes first
    # the call-level shapes are closed: a field the schema does not declare fails the test
    for name in ("failures (corpus and generated)", "--all-configs"):
        assert not v.is_valid({**docs[name], "undeclared": 1}), name
    assert not v.is_valid({**docs["exhaustive"], "failures": [{**failing[0], "undeclared": 1}]})
    c = docs["--all-configs"]["configs"][1]
    assert not v.is_valid({**docs["--all-configs"], "configs": [{**c, "undeclared": 1}]})
    t = docs["--level thread, failing"]["configs"][0]
    assert not v.is_valid({**docs["--level thread, failing"], "configs": [{**t, "undeclared": 1}]})
    assert docs["--level thread, exhaustive, another model"]["configs"][0]["exhaustive"]["complete"] is True


def test_the_protocol_document_describes_every_field_of_the_schema():
    from conq.conformance import protocol

    doc = (repo_root() / "spec" / "port-protocol.md").read_text()
    assert doc == protocol.render_markdown(), "spec/port-protocol.md is stale: conq protocol --write"
    schema = protocol.conformance_schema()
    for name in ("run_body", "failure", "all_configs"):
        for field, node in schema["$defs"][name]["properties"].items():
            assert node.get("description"), (name, field)
            assert f"| `{field}` |" in doc, (name, field)


def test_a_corpus_failure_shows_the_actions_up_to_the_failing_step():
    from conq.conformance.suite import run_suite

    res, m = run_suite("consumer-lists", impl_spec="mutant:look-then-unnotify", traces=0, corpus=CORPUS)
    corpus = [f for f in res.failures if f.source.startswith("corpus:") and f.result.divergence.step > 1]
    assert corpus, [f.describe(m) for f in res.failures]
    for f in corpus:
        step = f.result.divergence.step
        text = f.describe(m)
        line = next(x for x in text.splitlines() if x.strip().startswith("actions ("))
        assert line.strip().startswith(f"actions (1..{step}): ") and line.count(" ; ") == step - 1, text
        assert "minimised:" not in text


def test_the_reference_port_answers_14_to_a_configuration_its_thread_level_does_not_drive():
    """A configuration the thread level leaves out (ordered consumption's simple consumer) is error 14,
    "unsupported", which certify lists as skipped: not error 20, a crash of the system under test."""
    import io

    from conq.conformance import port
    from conq.model.engines.registry import load_model
    from conq.model.kernel import config_dict

    simple = config_dict(load_model("ordered-consumption", "simple", {}).config)
    push = config_dict(load_model("ordered-consumption", "push-fifo", {}).config)
    lines = [{"type": "init", "id": 1, "protocol": 1, "model": "ordered-consumption", "config": simple, "seed": 0,
              "level": "thread"},
             {"type": "init", "id": 2, "protocol": 1, "model": "ordered-consumption", "config": push, "seed": 0,
              "level": "thread"},
             {"type": "shutdown", "id": 3}]
    out = io.StringIO()
    assert port.serve(io.StringIO("".join(json.dumps(x) + "\n" for x in lines)), out) == 0
    replies = [json.loads(x) for x in out.getvalue().splitlines()]
    assert replies[0]["type"] == "error" and replies[0]["code"] == 14 and "simple consumer" in replies[0]["text"], replies[0]
    assert replies[1]["type"] == "init_ok" and "thread-steps" in replies[1]["features"], replies[1]  # the port serves on
    assert replies[2]["type"] == "shutdown_ok"
