"""The command line: subcommands, --json, and the exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from conq.cli import app

TOY = str(Path(__file__).parent / "model" / "engines" / "toy_counter.py") + ":CounterModel"
runner = CliRunner()


def test_help_lists_subcommands():
    res = subprocess.run([sys.executable, "-m", "conq", "--help"], capture_output=True, text=True, check=True)
    for cmd in ("list", "check", "requirements", "run"):
        assert cmd in res.stdout


def test_list_json_names_every_present_model():
    from conq.model.engines.registry import model_names

    res = runner.invoke(app, ["list", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {r["model"] for r in rows} == set(model_names())


def test_check_violation_exits_1_with_json_counterexample():
    res = runner.invoke(app, ["check", TOY, "--config", "racy", "--json"])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    bad = [p for p in data["properties"] if p["status"] == "violated"]
    assert [p["name"] for p in bad] == ["no-lost-update"]
    assert [s["action"][0] for s in bad[0]["path"]["steps"]] == ["read", "read", "write", "write"]


def test_check_clean_config_exits_0_and_writes_report(tmp_path):
    res = runner.invoke(app, ["check", TOY, "--config", "atomic", "--report", str(tmp_path)])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "check-toy_counter.md").read_text()
    assert "no-lost-update" in md and "distinct states" in md


def test_report_has_sequence_diagram_for_violation(tmp_path):
    res = runner.invoke(app, ["check", TOY, "--config", "aborting", "--report", str(tmp_path)])
    assert res.exit_code == 1
    md = (tmp_path / "check-toy_counter.md").read_text()
    assert "```mermaid" in md and "sequenceDiagram" in md and "loop repeated forever" in md


def test_bad_input_exits_2_with_message():
    for args, needle in [
        (["check", "no-such-model"], "unknown model 'no-such-model'"),
        (["check", TOY, "--set", "clients=two"], "expected an integer"),
        (["check", TOY, "--set", "novalue"], "--set expects KEY=VALUE"),
        (["check", TOY, "--config", "nope"], "has no configuration 'nope'"),
        (["requirements", "--area", "NOPE"], "no area"),
    ]:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert needle in res.output, (args, res.output)


def test_usage_error_exits_2():
    assert runner.invoke(app, ["check"]).exit_code == 2
    assert runner.invoke(app, ["no-such-command"]).exit_code == 2


def test_requirements_malformed_catalog_exits_2(tmp_path):
    (tmp_path / "bad.toml").write_text("[area]\nid = 'QCM'\n", encoding="utf-8")
    res = runner.invoke(app, ["requirements", "--catalog", str(tmp_path)])
    assert res.exit_code == 2
    assert "bad.toml" in res.output and "'title'" in res.output


def test_requirements_json():
    res = runner.invoke(app, ["requirements", "--json"])
    assert res.exit_code in (0, 1), res.output
    rows = json.loads(res.stdout)
    assert all({"area", "requirements", "with_checks", "missing", "broken"} <= set(r) for r in rows)
