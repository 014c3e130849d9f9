"""Bad input and hard limits on the command line (issue 13, items 8, 9, 11, 12, 13).

Exit codes: 0 ok, 1 a check found a violation, 2 bad usage or input (before any work), 3 an
internal error (one line; the traceback only under --debug), 4 incomplete (a --max-* limit
ended the run first).  Under --json stdout holds exactly one JSON document, errors included.
No assertion here depends on the clock: a guard test asserts that the limit fired and the run
ended, never how fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conq.cli import kit as cli
from conq.cli import app

HERE = Path(__file__).parent
TOY = str(HERE / "model" / "engines" / "toy_counter.py") + ":CounterModel"
CORPUS = HERE.parent / "conformance" / "consumer_lists" / "corpus"
runner = CliRunner()

# a model whose every state holds a fresh block of memory, and one that crashes
BIG_STATES = '''
from dataclasses import dataclass
from conq.model.kernel import Model, always

@dataclass(frozen=True)
class Cfg:
    block_mb: int = 16
    hang: str = ""  # "init" | "successors": that call never returns by itself

class Big(Model):
    name = "big-states"
    Config = Cfg

    def init_states(self):
        if self.config.hang == "init":
            while True:
                pass
        return [(0, b"")]

    def successors(self, s):
        if self.config.hang == "successors":
            while True:
                pass
        return [(("grow",), o, t) for o, t in self.step(s, ("grow",))]

    def step(self, s, action):
        n = s[0] + 1
        return [(None, (n, b"x" * (self.config.block_mb << 20) + bytes([n % 256])))]

    def properties(self):
        # a billion: no search a test runs gets there, so a run this model ends is ended by a bound
        # (--max-seconds, --max-memory, --max-states), never by a violation on a fast machine
        return [always("small", "the counter stays below a billion", lambda s: s[0] < 10**9, witness=lambda s: s[0] > 0)]


class Crash(Big):
    name = "crash"

    def successors(self, s):
        return {}["no such key"]
'''


@pytest.fixture(scope="module")
def user_models(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("models")
    (d / "big.py").write_text(textwrap.dedent(BIG_STATES))
    (d / "syntax_error.py").write_text("def broken(:\n    pass\n")
    (d / "bad_import.py").write_text("import conq_no_such_module_anywhere\n")
    # writes to stdout behind Python's back (fd 1), as a JVM or a child process would
    (d / "noisy.py").write_text(
        "import os\nos.write(1, b'noise on fd 1\\n')\nprint('noise from print')\n"
        + textwrap.dedent(BIG_STATES)
    )
    return d


def invoke(*args: str):
    return runner.invoke(app, list(args))


def one_json(res) -> dict:
    """stdout must hold exactly one JSON document (json.loads fails on anything around it)."""
    return json.loads(res.stdout)


# ---------------------------------------------------------------- item 8: configurations
@pytest.mark.parametrize(
    "sets, field",
    [
        (["messages=-1"], "messages"),
        (["reasons=7"], "reasons"),
        (["consumers=[1,2]"], "consumers"),
        (["reasons=-1"], "reasons"),
        (["initial_credit=3", "max_credit=1"], "initial_credit"),
        (["messages=0"], "messages"),
        (["consumers=[]"], "consumers"),
        (["consumers=[[1, 1]]"], "consumers"),
        (["env_budget=-2"], "env_budget"),
        (["pull_rule=sometimes"], "pull_rule"),
    ],
)
def test_bad_consumer_lists_configuration_exits_2_naming_the_field(sets, field):
    res = invoke("check", "consumer-lists", *[a for s in sets for a in ("--set", s)], "--max-states", "50")
    assert res.exit_code == 2, res.output
    assert f"{field}:" in res.output and "Traceback" not in res.output, res.output


@pytest.mark.parametrize(
    "model, sets, field",
    [
        ("ordered-consumption", ["queues=0"], "queues"),
        ("ordered-consumption", ["msg_queue=[0, 5]", "msg_size=[1, 1]"], "msg_queue"),
        ("ordered-consumption", ["msg_size=[1]"], "msg_size"),
        ("ordered-consumption", ["backoffs=[0]"], "backoffs"),
        ("ordered-consumption", ["producer=false", "push_standard=false", "push_fifo=false", "simple=false"], "producer"),
        ("recovery-deferral", ["workers=0"], "workers"),
        ("recovery-deferral", ["events=[[5, 0, 0]]"], "events"),
        ("recovery-deferral", ['callbacks=["Nope"]'], "callbacks"),
        ("recovery-deferral", ["on_queue_full=explode"], "on_queue_full"),
        (TOY, ["clients=0"], "clients"),
    ],
)
def test_every_model_validates_its_configuration(model, sets, field):
    res = invoke("check", model, *[a for s in sets for a in ("--set", s)], "--max-states", "50")
    assert res.exit_code == 2, res.output
    assert f"{field}:" in res.output and "Traceback" not in res.output, res.output


def test_every_shipped_configuration_passes_validation():
    from conq import manifest
    from conq.model.engines.registry import load_model, model_class, model_names

    for name in model_names():
        cls = model_class(name)
        for cname, cfg in cls.configs().items():
            assert cls.validate_config(cfg) == [], (name, cname)
    for exp in manifest.load():
        load_model(exp.model, exp.config, exp.overrides)


def test_a_trace_header_config_is_validated_by_the_model(tmp_path):
    from conq.conformance import trace

    head = json.loads((CORPUS / "pass-small-0.ndjson").read_text().splitlines()[0])
    head["config"]["messages"] = -1
    p = tmp_path / "t.ndjson"
    p.write_text(json.dumps(head) + "\n")
    with pytest.raises(trace.TraceError, match=r"t\.ndjson:1: field 'config/messages': must be at least 1"):
        trace.read(p)


# ---------------------------------------------------------------- item 9: files, paths, master
def test_model_file_with_a_syntax_error_exits_2(user_models):
    res = invoke("check", f"{user_models / 'syntax_error.py'}:M")
    assert res.exit_code == 2, res.output
    assert "syntax_error.py:1" in res.output and "SyntaxError" in res.output and "Traceback" not in res.output


def test_model_file_with_a_failing_import_exits_2(user_models):
    res = invoke("check", f"{user_models / 'bad_import.py'}:M")
    assert res.exit_code == 2, res.output
    assert "bad_import.py:1" in res.output and "conq_no_such_module_anywhere" in res.output


@pytest.fixture
def no_work(monkeypatch):
    """Any of these being called means work started before the input was validated."""

    def refuse(*a, **k):
        raise AssertionError("work started before the input was validated")

    import conq.conformance.spark_replay as spark_replay
    import conq.conformance.suite as suite
    import conq.jobs as jobs
    import conq.model.engines.explorer as explorer

    monkeypatch.setattr(explorer, "explore", refuse)
    monkeypatch.setattr(jobs, "model_check_rows", refuse)
    monkeypatch.setattr(spark_replay, "run_replay", refuse)
    monkeypatch.setattr(suite, "run_suite", refuse)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["check", TOY, "--report", "{file}/sub"], "is a file, not a folder"),
        (["check", TOY, "--report", "/proc/conq-report"], "/proc is a pseudo file system"),
        (["run", "--out", "{file}/x"], "is a file, not a folder"),
        (["run", "--out", "/proc/conq-out"], "/proc is a pseudo file system"),
        (["replay", "consumer-lists", "--out", "{file}/x"], "is a file, not a folder"),
        (["replay", "consumer-lists", "--out", "/proc/conq-out"], "/proc is a pseudo file system"),
        (["replay", "consumer-lists", "--master", "local[abc]"], "--master 'local[abc]': not a Spark master URL"),
        (["replay", "consumer-lists", "--master", "local[0]"], "not a Spark master URL"),
        (["replay", "consumer-lists", "--master", "spark://host"], "not a Spark master URL"),
        (["conformance", "--corpus", "/nonexistent-conq-corpus"], "--corpus /nonexistent-conq-corpus: no such folder"),
        (["conformance", "--corpus", "{file}"], "not a folder"),
        (["conformance", "--mode", "sideways"], "is not one of"),
        # --all-configs (GAPS.md entry 5 of the Node port): refused combinations, and every configuration
        # validated and counted before the first runs
        (["conformance", "--all-configs", "--config", "small"], "not with --config"),
        (["conformance", "--all-configs", "--level", "thread"], "--all-configs is for --level call"),
        (["conformance", "--all-configs", "--set", "nosuch=1"], "unknown config field 'nosuch'"),
        (["conformance", "--all-configs", "--mode", "exhaustive"], "per configuration (dynamic); --traces 200"),
        (["conformance", "--all-configs", "--mode", "sideways"], "is not one of"),
    ],
)
def test_paths_and_master_are_refused_before_any_work(args, needle, tmp_path, no_work):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    res = invoke(*[a.replace("{file}", str(afile)) for a in args])
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.split()), res.output
    assert "work started" not in res.output


# ---------------------------------------------------------------- item 10 at the command line
def _corpus_with(tmp_path: Path, lines: list[str] | bytes, expect: str | None = None) -> Path:
    d = tmp_path / "corpus"
    d.mkdir()
    if isinstance(lines, bytes):
        (d / "t.ndjson").write_bytes(lines)
    else:
        (d / "t.ndjson").write_text("\n".join(lines) + "\n")
    return d


def _header(**change) -> str:
    head = json.loads((CORPUS / "pass-small-0.ndjson").read_text().splitlines()[0])
    head.update(change)
    return json.dumps(head)


@pytest.mark.parametrize(
    "lines, needle",
    [
        ([_header(expect="diverge"), '{"step":1,"action":["frobnicate",0],"observation":null}'], "t.ndjson:2: field 'action': unknown action 'frobnicate'"),
        ([_header(expect="diverge"), '{"step":1,"action":["pull"],"observation":null}'], "t.ndjson:2: field 'action': action 'pull' takes 1 parameter"),
        ([_header(model="no-such-model")], "t.ndjson:1: field 'model': unknown model 'no-such-model'"),
        (b"\xff\xfe{\x00}\x00\n", "t.ndjson:1: the file is UTF-16 text"),
        (b'{"format":\x00}\n', "t.ndjson:1: NUL byte"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "t.ndjson:1: not UTF-8 text"),
    ],
)
def test_bad_corpus_traces_exit_2_with_file_line_and_field(lines, needle, tmp_path):
    res = invoke("conformance", "--corpus", str(_corpus_with(tmp_path, lines)), "--traces", "0")
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.split()), res.output


# ---------------------------------------------------------------- item 11: exit codes
def test_a_crash_is_exit_3_with_one_line_and_the_traceback_only_under_debug(user_models):
    target = f"{user_models / 'big.py'}:Crash"
    res = invoke("check", target)
    assert res.exit_code == 3, res.output
    assert "internal error: KeyError" in res.output and "big.py" in res.output
    assert "Traceback" not in res.output
    dbg = invoke("--debug", "check", target)
    assert dbg.exit_code == 3 and "Traceback" in dbg.output, dbg.output


@pytest.mark.parametrize(
    "args",
    [
        [],  # no command: the help, as a usage error
        ["no-such-command"],
        ["check"],  # missing argument
        ["check", "consumer-lists", "--max-states", "many"],
        ["check", "consumer-lists", "--max-seconds", "-1"],
        ["check", "consumer-lists", "--no-such-option"],
        ["list", "extra-argument"],
    ],
)
def test_usage_errors_of_the_parser_exit_2(args):
    assert invoke(*args).exit_code == 2


def test_exit_codes_in_a_real_process(user_models):
    """The installed entry point, not only the test runner: a crash is 3 and one line."""
    crash = subprocess.run([sys.executable, "-m", "conq", "check", f"{user_models / 'big.py'}:Crash"],
                           capture_output=True, text=True, timeout=120)
    assert crash.returncode == 3, crash.stderr
    assert "Traceback" not in crash.stderr and len(crash.stderr.strip().splitlines()) == 1, crash.stderr


# ---------------------------------------------------------------- item 12: --json
@pytest.mark.parametrize(
    "args, code, kind",
    [
        (["check", "consumer-lists", "--set", "messages=-1", "--json"], 2, "usage"),
        (["check", "--json"], 2, "usage"),
        (["check", "consumer-lists", "--max-seconds", "-1", "--json"], 2, "usage"),
        (["conformance", "--corpus", "/nonexistent-conq-corpus", "--json"], 2, "usage"),
        (["run", "--out", "/proc/conq-out", "--json"], 2, "usage"),
    ],
)
def test_json_errors_are_one_document_on_stdout(args, code, kind):
    res = invoke(*args)
    assert res.exit_code == code, res.output
    doc = one_json(res)
    assert doc["ok"] is False and doc["exit_code"] == code and doc["error"]["kind"] == kind and doc["error"]["message"]


def test_json_crash_is_one_document_too(user_models):
    res = invoke("check", f"{user_models / 'big.py'}:Crash", "--json")
    assert res.exit_code == 3
    doc = one_json(res)
    assert doc["error"]["kind"] == "internal" and "KeyError" in doc["error"]["message"]


def test_json_success_is_one_document():
    res = invoke("check", TOY, "--config", "atomic", "--json")
    assert res.exit_code == 0, res.output
    assert one_json(res)["ok"] is True


def test_run_json_sends_progress_to_stderr(monkeypatch, tmp_path):
    import conq.jobs as jobs

    def stage(out_dir, console):
        console.print("stage: progress line")
        return [{"stage": "fake", "subject": "s", "result": "r", "ok": True, "seconds": 0.0}]

    monkeypatch.setattr(jobs, "STAGES", [("fake", stage)])
    monkeypatch.setattr(jobs, "model_check_rows", lambda quick, console, *rest: (console.print("model-check: progress"), ([], []))[1])
    res = invoke("run", "--out", str(tmp_path / "reports"), "--json")
    doc = one_json(res)
    assert [r["stage"] for r in doc["rows"]][-1] == "fake"
    assert "progress" in res.stderr and "progress" not in res.stdout


def test_json_stdout_survives_output_behind_pythons_back(user_models):
    """A model (or a JVM, a child process) writing to fd 1 cannot spoil the document."""
    done = subprocess.run(
        [sys.executable, "-m", "conq", "check", f"{user_models / 'noisy.py'}:Big", "--max-states", "3", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 4, done.stderr  # the state bound ended the run: incomplete
    doc = json.loads(done.stdout)
    assert doc["complete"] is False and "state bound" in doc["stop_reason"]
    assert "noise on fd 1" in done.stderr and "noise from print" in done.stderr


# ---------------------------------------------------------------- item 13: limits
def test_time_guard_fires_on_a_huge_configuration():
    """The issue's probe: it ran past 120 s at 2 GB.  Asserts the guard fired and the run
    ended (the cap is only a safety net), not how fast."""
    done = subprocess.run(
        [sys.executable, "-m", "conq", "check", "consumer-lists", "--set", "messages=1000000", "--max-seconds", "0.5",
         "--no-liveness"],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 4, done.stderr[-2000:]
    assert "incomplete: time bound 0.5s reached: no violation in " in done.stdout, done.stdout[-2000:]
    assert " holds " not in done.stdout  # an incomplete search proves nothing
    assert "violated" not in done.stdout


@pytest.mark.parametrize("hang", ["init", "successors"])
def test_time_guard_interrupts_a_model_call_that_never_returns(user_models, hang):
    res = invoke("check", f"{user_models / 'big.py'}:Big", "--set", f"hang={hang}", "--max-seconds", "0.2", "--json")
    assert res.exit_code == 4, res.output
    doc = one_json(res)
    assert doc["complete"] is False and doc["stop_reason"].startswith("time bound 0.2s reached")


def test_memory_guard_stops_the_search(user_models):
    from conq.model.engines.explorer import rss_bytes

    limit = rss_bytes() / 2**20 + 150  # room for a few 16 MB states, far from the unbounded search's need
    res = invoke("check", f"{user_models / 'big.py'}:Big", "--max-memory", f"{limit:.0f}", "--json")
    assert res.exit_code == 4, res.output
    doc = one_json(res)
    assert doc["complete"] is False and doc["stop_reason"].startswith(f"memory bound {limit:.0f} MB reached")
    assert 1 < doc["states"] < 10**6


def test_a_memory_limit_below_what_conq_already_uses_is_a_usage_error():
    res = invoke("check", TOY, "--max-memory", "1")
    assert res.exit_code == 2 and "--max-memory 1: conq already uses" in res.output, res.output


def test_a_state_bound_is_incomplete_not_a_violation():
    res = invoke("check", TOY, "--config", "atomic", "--set", "clients=3", "--max-states", "2", "--json")
    assert res.exit_code == 4, res.output
    doc = one_json(res)
    statuses = {p["status"] for p in doc["properties"]}
    assert statuses <= {"incomplete", "unknown", "skipped", "witnessed"} and "incomplete" in statuses, statuses
    assert "holds" not in statuses  # a cut search proves no invariant


def test_a_violation_found_before_the_limit_is_still_exit_1():
    res = invoke("check", TOY, "--config", "racy", "--max-states", "12", "--json")
    assert res.exit_code == 1, res.output
    assert one_json(res)["complete"] is False


def test_long_search_shows_a_progress_bar_on_a_terminal_only(user_models, monkeypatch):
    import io

    from rich.console import Console

    target = f"{user_models / 'big.py'}:Big"
    buf = io.StringIO()
    monkeypatch.setattr(cli, "err", Console(file=buf, force_terminal=True, width=200))
    res = invoke("check", target, "--set", "block_mb=0", "--max-seconds", "1.5")
    assert res.exit_code == 4, res.output
    shown = buf.getvalue()
    assert "exploring big-states" in shown and "states" in shown and "depth" in shown and "MB" in shown, shown
    buf.truncate(0)
    res = invoke("check", target, "--set", "block_mb=0", "--max-seconds", "1.5", "--json")
    assert res.exit_code == 4 and "exploring" not in buf.getvalue()
    monkeypatch.setattr(cli, "err", Console(file=io.StringIO(), force_terminal=False))
    res = invoke("check", target, "--set", "block_mb=0", "--max-seconds", "1.5")
    assert res.exit_code == 4 and "exploring" not in cli.err.file.getvalue()
