"""What a user sees of the command line: help without Python type names or internal issue numbers,
choices shown and checked as choices, `conq list` settings that `--set` takes back, shell
completion of models and configurations, `--all-configs` judged with a closing line."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from conq.cli import app
from conq.model.engines.registry import model_class, model_names
from conq.model.kernel import config_dict, config_from_overrides

runner = CliRunner()
TOY = "tests/model/engines/toy_counter.py:CounterModel"


def _commands() -> list[list[str]]:
    from typer.main import get_command

    root = get_command(app)
    out = [[]]
    for name, cmd in root.commands.items():
        out.append([name])
        out += [[name, sub] for sub in getattr(cmd, "commands", {})]
    return out


def test_help_shows_no_type_names_and_no_issue_numbers():
    for path in _commands():
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, (path, res.output)
        assert not re.search(r"<(bool|str|int|float|list\[|path|int range|float range)", res.output), (path, res.output)
        assert not re.search(r"\bissues? \d+", res.output, re.I), (path, res.output)


def test_choices_are_choices():
    res = runner.invoke(app, ["conformance", "--help"], env={"COLUMNS": "200"})
    assert "[random|coverage|exhaustive]" in res.output and "[call|thread]" in res.output
    bad = runner.invoke(app, ["conformance", "consumer-lists", "--mode", "bogus"])
    assert bad.exit_code == 2 and "'bogus' is not one of" in " ".join(bad.output.split())


def test_list_settings_are_accepted_by_set():
    from conq.cli.kit import setting_text as _setting_text

    res = runner.invoke(app, ["list", "--json"])
    rows = json.loads(res.stdout)
    assert rows
    for row in rows:
        cls = model_class(row["model"])
        base = cls.Config()
        given = {k: _setting_text(v) for k, v in row["settings"].items()}
        assert config_dict(config_from_overrides(cls, base, given)) == row["settings"], row["config"]
    text = runner.invoke(app, ["list"], env={"COLUMNS": "400"}).output
    assert not re.search(r"\b(True|False|None)\b", text) and "consumers=[[2,true]," in text


def test_completion_offers_models_and_configurations():
    from conq.cli.kit import complete_config as _complete_config, complete_model as _complete_model

    assert _complete_model("cons") == ["consumer-lists"] and set(_complete_model("")) == set(model_names())

    class Ctx:
        params = {"model": "consumer-lists"}

    assert "upstream-flag-order" in _complete_config(Ctx(), "upstream-f")


def test_all_configs_ends_with_a_line_that_says_which():
    res = runner.invoke(app, ["check", TOY, "--all-configs", "--no-liveness"])
    last = res.output.strip().splitlines()[-1]
    # the toy has no manifest entry: its racy configuration's lost update is not expected
    assert res.exit_code == 1 and last.startswith("1 of 3 configurations not as expected: toy-counter/racy")


def test_conf_takes_spark_settings_only():
    res = runner.invoke(app, ["replay", "consumer-lists", "--conf", "executor.memory=2g", "--traces", "1"])
    assert res.exit_code == 2 and "not a Spark setting" in res.output
