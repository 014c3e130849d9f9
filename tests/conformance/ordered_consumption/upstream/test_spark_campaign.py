"""The upstream campaign on Spark (``conq upstream rocketmq-python --spark``; issue 19).

Two seeds of a model-sized workload (``model-push-fifo-dlq``: the seed's FIFO consumer, one message
always failing and dead-lettered) on Spark ``local[2]``, on loopback, in one task (both seeds in one
partition), against the local campaign of the same seeds: the same verdicts and the same coverage,
whatever the partitioning.  Seconds are only the runner's safety cap (a run that hits it is
``incomplete`` and fails the test).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("rocketmq")
pytest.importorskip("pyspark")

from conq.conformance.ordered_consumption.upstream.campaign import run_campaign  # noqa: E402
from conq.conformance.ordered_consumption.upstream.spark_campaign import run_spark_campaign  # noqa: E402
from conq.conformance.ordered_consumption.upstream.workloads import WORKLOADS  # noqa: E402
from conq.conformance.spark_replay import ReplayError, java_problem  # noqa: E402

CAP = 120.0  # seconds, safety cap per run only
SEEDS = [0, 1]


def _spark_jvm() -> int | None:
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    return proc.pid if proc is not None and proc.poll() is None else None


@pytest.fixture(autouse=True)
def no_leftovers(process_tree):
    """This module's version of the conftest's check: the Spark gateway JVM (and py4j's threads that
    serve it) stay for the life of this process by design -- ``spark_session`` reuses them
    (conformance/spark_replay.py) -- so they are allowed; any other process under this one (a
    Python worker, a client worker of a run) or thread left after the Spark job fails the test.
    The time bound is a safety cap for processes that are finishing; it fails loudly."""
    threads = set(threading.enumerate())
    before = process_tree(os.getpid())
    yield
    deadline = time.monotonic() + 30.0
    while True:
        jvm = _spark_jvm()
        # a zombie whose parent is the JVM is the JVM's own (spark-class's launcher, never reaped by
        # java after the exec): not a process of the campaign
        left = {p for p in process_tree(os.getpid()) - before - {jvm} if _stat(p) != ("Z", jvm)}
        stray = [t for t in threading.enumerate() if t not in threads and t.is_alive()
                 and not type(t).__module__.startswith("py4j")]
        if not (left or stray) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not stray, f"threads left running: {[t.name for t in stray]}"
    assert not left, f"processes left: {[(p, _stat(p), _cmdline(p)) for p in sorted(left)]} (the Spark JVM: {jvm})"


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


def _verdicts(rep):
    return [(r["seed"], r["end"], sorted(d["claim"] for d in r["divergences"]), (r["validation"] or {}).get("status"),
             (r["validation"] or {}).get("accepted"), r["listener_calls"]) for r in rep["per_seed"]]


@pytest.mark.slow
@pytest.mark.skipif(java_problem() is not None, reason="Spark needs Java 17+")
def test_spark_campaign_matches_the_local_one(tmp_path):
    import pyarrow.parquet as pq

    w = WORKLOADS["model-push-fifo-dlq"]
    out = tmp_path / "spark"
    rep = run_spark_campaign(w, SEEDS, out, master="local[2]", partitions=1, cap=CAP, say=lambda s: None)
    local = run_campaign(w, SEEDS, tmp_path / "local", cap=CAP)
    assert rep["incomplete"] == [] and local["incomplete"] == []
    assert _verdicts(rep) == _verdicts(local)
    assert [r["seed"] for r in rep["per_seed"]] == SEEDS
    assert rep["coverage"] == local["coverage"]
    assert {k: v for k, v in rep.items() if k not in ("per_seed", "spark")} == \
        {k: v for k, v in local.items() if k not in ("per_seed",)}
    cov = rep["coverage"]
    for part in ("states", "transitions"):
        assert 0 < cov[part]["covered"] <= cov[part]["total"]
    assert cov["accepted_logs"] == 2 and cov["outside_graph"] == {"states": 0, "transitions": 0}
    # the output folder: Parquet tables, traces, the report, the marker of conq's output
    runs = pq.read_table(out / "runs").to_pylist()
    assert sorted(r["seed"] for r in runs) == SEEDS and {r["validation"] for r in runs} == {"accepted"}
    assert all((out / "traces" / f"model-push-fifo-dlq-seed{s}.observed.ndjson").is_file() for s in SEEDS)
    assert all(json.loads(r["record"])["trace"] == str(out / "traces" / f"model-push-fifo-dlq-seed{r['seed']}.ndjson")
               for r in runs)
    assert pq.read_table(out / "divergences").num_rows == 0
    table = pq.read_table(out / "coverage").to_pylist()
    covered = [r for r in table if r["seeds"] and r["in_graph"]]
    assert sum(1 for r in covered if r["kind"] == "state") == cov["states"]["covered"]
    assert sum(1 for r in covered if r["kind"] == "transition") == cov["transitions"]["covered"]
    assert sum(1 for r in table if r["kind"] == "transition") == cov["transitions"]["total"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["coverage"] == cov and "## Model coverage" in (out / "report.md").read_text()
    assert (out / ".conq-output.json").is_file() and not list(tmp_path.glob("spark.partial-*"))


def test_refuses_an_output_folder_it_did_not_write_before_any_work(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("not conq's")
    with pytest.raises(ReplayError, match="refusing to write there"):
        run_spark_campaign(WORKLOADS["model-push-fifo"], SEEDS, out, master="local[2]", say=lambda s: None)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"] and list(tmp_path.iterdir()) == [out]


def test_cli_spark_refuses_a_foreign_output_folder_and_a_bad_master_with_exit_2(tmp_path):
    from typer.testing import CliRunner

    from conq.cli import app

    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("not conq's")
    base = ["upstream", "rocketmq-python", "--workload", "model-push-fifo", "--seeds", "1", "--spark", "--json"]
    res = CliRunner().invoke(app, base + ["--out", str(out), "--master", "local[2]"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and "refusing to write there" in doc["error"]["message"], doc
    res = CliRunner().invoke(app, base + ["--out", str(tmp_path / "new"), "--master", "nowhere"])
    assert res.exit_code == 2 and "nowhere" in json.loads(res.stdout)["error"]["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"] and [p.name for p in out.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("option", [["--master", "local[2]"], ["--partitions", "2"]])
def test_cli_refuses_a_spark_option_without_spark_with_exit_2(tmp_path, option):
    # ignored silently it would run a local campaign the user did not ask for
    from typer.testing import CliRunner

    from conq.cli import app

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["upstream", "rocketmq-python", "--workload", "model-push-fifo", "--seeds", "1",
                                   "--out", str(out), "--json", *option])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and "needs --spark" in doc["error"]["message"] and option[0] in doc["error"]["message"], doc
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_run_that_raises_is_an_incomplete_record_not_a_lost_task(tmp_path, monkeypatch):
    # what a Spark task does, in-process: a run that raises (here before any process starts) is the
    # seed's record ending "error" -- no verdict, counted incomplete -- and its folder is removed
    import tempfile

    from conq.conformance.ordered_consumption.upstream import runner
    from conq.conformance.ordered_consumption.upstream.campaign import aggregate
    from conq.conformance.ordered_consumption.upstream.spark_campaign import run_seeds

    def boom(w, seed, **kw):
        raise OSError("no port")

    monkeypatch.setattr(runner, "run", boom)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    got = run_seeds(WORKLOADS["model-push-fifo"], [3], cap=CAP)
    assert [(s, json.loads(files)) for s, _, files in got] == [(3, {})]
    rec = json.loads(got[0][1])
    assert rec["end"] == "error" and "OSError: no port" in rec["notes"][0]
    rep = aggregate(WORKLOADS["model-push-fifo"], [rec])
    assert rep["incomplete"] == [3] and rep["divergences"] == {} and rep["coverage"]["accepted_logs"] == 0
    assert list(tmp_path.iterdir()) == []


def test_a_campaign_over_several_workloads_names_each_seed_with_its_workload(tmp_path, monkeypatch):
    # seeds repeat across workloads: the summary's `seeds`, `incomplete` and divergence seeds say which
    import tempfile

    from conq.conformance.ordered_consumption.upstream import runner
    from conq.conformance.ordered_consumption.upstream.campaign import aggregate
    from conq.conformance.ordered_consumption.upstream.spark_campaign import run_seeds

    def boom(w, seed, **kw):
        raise OSError("no port")

    monkeypatch.setattr(runner, "run", boom)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ws = [WORKLOADS["model-push-fifo"], WORKLOADS["model-push-fifo-dlq"]]
    recs = [json.loads(r) for w in ws for _, r, _ in run_seeds(w, [1, 0], cap=CAP)]
    rep = aggregate(ws, list(reversed(recs)))
    assert rep["seeds"] == ["model-push-fifo:0", "model-push-fifo:1", "model-push-fifo-dlq:0", "model-push-fifo-dlq:1"]
    assert rep["incomplete"] == rep["seeds"] and rep["workloads"] == ["model-push-fifo", "model-push-fifo-dlq"]
    one = aggregate(ws[0], recs[:2])
    assert one["seeds"] == [0, 1]
