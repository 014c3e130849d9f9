"""Every output folder goes through one discipline (conformance/output_folder.py; issue 33, finding 4):
conq's marker, refusal of anything conq did not write (exit 2, nothing changed), files created
exclusively without following links, stale staging folders of dead runs removed, and a lock so a
second concurrent run into the same folder exits 2 -- for ``conq check --report``, ``conq run
--out``, ``conq upstream --out``, ``conq replay --out`` and the bench outputs alike.

Cheap by construction: the models checked are the toy counter of tests/model/engines, and the
refusals happen before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conq.cli import app
from conq.conformance.output_folder import MARKER, OutputFolder, OutputRefused, write_atomic

runner = CliRunner()
TOY = str(Path(__file__).resolve().parents[1] / "model" / "engines" / "toy_counter.py") + ":CounterModel"
REPO = Path(__file__).resolve().parents[2]


def _check(report: Path) -> tuple[int, dict]:
    res = runner.invoke(app, ["check", TOY, "--report", str(report), "--json"])
    return res.exit_code, json.loads(res.stdout)


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): ("-> " + os.readlink(p) if p.is_symlink() else p.read_text())
            for p in sorted(folder.rglob("*")) if p.is_symlink() or p.is_file()}


# ============================================================================ refusal, links, merging
def test_check_report_refuses_a_foreign_file_and_changes_nothing(tmp_path):
    report = tmp_path / "R"
    report.mkdir()
    (report / "check-toy_counter.md").write_text("my notes")
    code, doc = _check(report)
    assert code == 2 and "refusing to write there" in doc["error"]["message"] and "--report" in doc["error"]["message"]
    assert _tree(report) == {"check-toy_counter.md": "my notes"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R"]  # no staging folder, no lock left


def test_a_planted_link_is_never_followed(tmp_path):
    report = tmp_path / "R"
    assert _check(report)[0] == 1  # the toy violates by design; conq's folder now, with its marker
    victim = tmp_path / "victim"
    (report / "check-toy_counter.json.tmp").symlink_to(victim)
    code, doc = _check(report)
    assert code == 2 and "check-toy_counter.json.tmp" in doc["error"]["message"]
    assert not victim.exists()
    # the writer itself replaces a link at its target instead of writing through it
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    write_atomic(link, "data")
    assert not victim.exists() and not link.is_symlink() and link.read_text() == "data"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_reports_of_several_checks_share_their_folder(tmp_path):
    report = tmp_path / "R"
    assert _check(report)[0] == 1  # written (the toy violates by design)
    assert runner.invoke(app, ["check", "recovery-deferral", "-c", "reference", "--report", str(report),
                               "--max-states", "200"]).exit_code in (0, 4)
    names = sorted(p.name for p in report.iterdir())
    assert {"check-toy_counter.md", "check-toy_counter.json", "check-recovery-deferral.md"} <= set(names)
    marker = json.loads((report / MARKER).read_text())
    assert sorted(marker["entries"]) == [n for n in names if n != MARKER] and marker["complete"]


# ============================================================================ the lock, dead runs
def test_a_second_run_into_the_same_folder_exits_2(tmp_path):
    report = tmp_path / "R"
    with OutputFolder(report, command="test", option="--report", replace=False):  # a run in progress
        code, doc = _check(report)
        assert code == 2 and "another conq run is writing there" in doc["error"]["message"], doc
        with pytest.raises(OutputRefused, match=f"process {os.getpid()}"):
            OutputFolder(report, command="test").open()
    assert _check(report)[0] == 1  # released: the next run goes ahead
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R"]  # the lock file went with its run


def test_what_dead_runs_left_beside_the_folder_is_removed(tmp_path):
    report = tmp_path / "R"
    assert _check(report)[0] == 1  # written (the toy violates by design)
    dead = _dead_pid()
    staging = tmp_path / "R.partial-x1y2"  # a staging folder of a run killed with -9
    staging.mkdir()
    (staging / MARKER).write_text(json.dumps({"written_by": "conq check", "complete": False, "pid": dead,
                                              "entries": []}))
    (staging / "check-toy_counter.md").write_text("half")
    trash = tmp_path / ".R.old-a1b2" / "R"  # an output set aside by a run killed mid-swap
    trash.mkdir(parents=True)
    (trash / MARKER).write_text(json.dumps({"written_by": "conq replay", "complete": True, "pid": dead,
                                            "entries": []}))
    foreign = tmp_path / "R.partial-mine"  # looks like one, but no marker: not recognisably conq's
    foreign.mkdir()
    (foreign / "notes").write_text("keep")
    assert _check(report)[0] == 1  # written (the toy violates by design)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R", "R.partial-mine"]
    assert (foreign / "notes").read_text() == "keep"


def test_a_replaced_folder_swaps_whole_and_a_failed_run_leaves_the_previous_one(tmp_path):
    out = tmp_path / "U"
    with OutputFolder(out, command="test") as f:
        f.write("traces/a.ndjson", "1")
        f.write("report.md", "first")
    with pytest.raises(RuntimeError):
        with OutputFolder(out, command="test") as f:
            f.write("report.md", "second, never published")
            raise RuntimeError("the run failed")
    assert _tree(out) == {MARKER: (out / MARKER).read_text(), "report.md": "first", "traces/a.ndjson": "1"}
    with OutputFolder(out, command="test") as f:
        f.write("report.md", "third")
    assert sorted(_tree(out)) == [MARKER, "report.md"]  # replaced whole: the old trace is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["U"]


# ============================================================================ every command's folder
def test_conq_run_out_refuses_a_foreign_folder_before_any_work(tmp_path):
    out = tmp_path / "reports"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    res = runner.invoke(app, ["run", "--out", str(out), "--model", "recovery-deferral", "--no-replay", "--json"])
    assert res.exit_code == 2 and "refusing to write there" in json.loads(res.stdout)["error"]["message"]
    assert _tree(out) == {"summary.json": "{}"}


def test_conq_upstream_out_refuses_a_foreign_folder_before_any_run(tmp_path):
    pytest.importorskip("rocketmq")
    out = tmp_path / "U"
    out.mkdir()
    (out / "report.md").write_text("mine")
    res = runner.invoke(app, ["upstream", "rocketmq-python", "--workload", "model-push-fifo", "--seeds", "1",
                              "--out", str(out), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and "refusing to write there" in doc["error"]["message"], doc
    assert _tree(out) == {"report.md": "mine"} and sorted(p.name for p in tmp_path.iterdir()) == ["U"]


def test_a_bench_output_refuses_a_foreign_folder(tmp_path):
    out = tmp_path / "B"
    out.mkdir()
    (out / "model-mutation-consumer-lists.json").write_text("mine")
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "model_mutation.py"), "consumer-lists", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)  # a safety cap: refused before any work
    assert proc.returncode == 2 and "refusing to write there" in proc.stderr, proc.stderr
    assert _tree(out) == {"model-mutation-consumer-lists.json": "mine"}
