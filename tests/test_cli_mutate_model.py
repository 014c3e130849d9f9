"""``conq mutate-model`` (issue 31): the JSON document, the exit codes, bad input."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conq.cli import app
from conq.model.engines.isolated import package_of
from conq.model.engines.mutate_ast import enumerate_mutants

runner = CliRunner()
RD = "conq.model.recovery_deferral:RecoveryDeferralModel"


def _ids(function: str, detail_start: str) -> list[str]:
    d, _ = package_of(RD)
    return [m.ident("rd") for m in enumerate_mutants(d) if m.function.endswith(function) and m.detail.startswith(detail_start)]


def test_json_names_each_mutant_its_verdict_and_the_claim_that_killed_it():
    # legacy (81 states): an up signal deferred although the concurrent listener is off
    [mid] = _ids(".on_producer_status_change", "drop `not c.enabled` from `not up or not c.enabled`")
    res = runner.invoke(app, ["mutate-model", "recovery-deferral", "-c", "legacy", "-m", mid, "--workers", "0", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {k: doc[k] for k in ("mutants", "killed", "count_only", "equivalent", "crashed")} == {
        "mutants": 1, "killed": 1, "count_only": 0, "equivalent": 0, "crashed": 0}
    [row] = doc["results"]
    assert row["id"] == mid and row["verdict"] == "killed" and row["property"] == "only-ups-deferred"
    assert row["location"].startswith("model/recovery_deferral/model.py:") and row["operator"] == "drop-disjunct"
    assert doc["configs"] == [{"config": "legacy", "states": 81, "transitions": 198, "liveness": True}]


def test_bad_input_exits_2_before_any_search():
    for args, needle in (
        (["mutate-model", "no-such-model"], "unknown model"),
        (["mutate-model", "recovery-deferral", "-c", "nope"], "has no configuration 'nope'"),
        (["mutate-model", "recovery-deferral", "--operator", "flip"], "unknown operator 'flip'"),
        (["mutate-model", "recovery-deferral", "-c", "legacy", "-m", "rd-00000000", "--workers", "0"], "no mutant rd-00000000"),
    ):
        res = runner.invoke(app, args + ["--json"])
        assert res.exit_code == 2, (args, res.output)
        assert needle in json.loads(res.stdout)["error"]["message"], res.stdout


def test_an_engine_failure_on_a_mutant_exits_3_not_1(monkeypatch):
    """A mutant the engine itself failed on (a worker's report marked "internal") is no verdict about
    the model: the command exits 3, the internal-error code, and the document says not ok; exit 1
    stays the verdict "a count-only mutant has no argument"."""
    from conq.model.engines import model_mutation

    def engine_fails(self, mi, run):
        return {"verdict": "crashed", "internal": True, "configs_run": 1,
                "error": "engine: IndexError: list index out of range"}

    monkeypatch.setattr(model_mutation._Context, "check", engine_fails)
    [mid] = _ids(".on_producer_status_change", "drop `not c.enabled` from `not up or not c.enabled`")
    res = runner.invoke(app, ["mutate-model", "recovery-deferral", "-c", "legacy", "-m", mid, "--workers", "0", "--json"])
    assert res.exit_code == 3, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["count_only"] == 0 and doc["results"][0]["internal"] is True
