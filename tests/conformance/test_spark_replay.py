"""The Spark replay job, on the toy model with drivers of its own: output
tables, coverage against the exhaustive graph, determinism whatever the
partitioning, harmless task retries, a mutant reported with its minimised
trace, and shipping the code to separate executor processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from conq.conformance.spark_replay import ReplayParams, replay_one, run_replay

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
TOY = str(HERE.parent / "model" / "engines" / "toy_counter.py") + ":CounterModel"
DRIVERS = str(HERE / "toy_driver.py")


def params(**kw):
    base = dict(model=TOY, config_name="atomic", overrides={"clients": 3}, traces=300, seed=11, length=6,
                impl=f"driver:{DRIVERS}:AddDriver")
    base.update(kw)
    return ReplayParams(**base)


def rows(out: Path, table: str):
    import pyarrow.parquet as pq

    t = pq.read_table(out / table).to_pylist()
    return sorted(t, key=lambda r: tuple(str(v) for v in r.values()))


def test_replay_outputs_full_coverage_and_is_deterministic_across_partitions(tmp_path):
    a = run_replay(params(), master="local[2]", out=tmp_path / "a", partitions=1, say=lambda m: None)
    assert a.ok and a.traces == 300
    # 3 atomic clients: 2^3 states, 12 transitions; every one reached
    assert (a.graph_states, a.graph_transitions) == (8, 12)
    assert a.state_fraction == 1.0 and a.transition_fraction == 1.0 and a.missed == ""
    assert a.actions_covered == ["add"]
    for f in ("summary.json", "report.md", "coverage-growth.png"):
        assert (tmp_path / "a" / f).is_file()
    b = run_replay(params(), master="local[2]", out=tmp_path / "b", partitions=5, say=lambda m: None)
    assert rows(tmp_path / "a", "traces") == rows(tmp_path / "b", "traces")
    assert rows(tmp_path / "a", "coverage") == rows(tmp_path / "b", "coverage")


def test_retried_task_leaves_no_duplicates(tmp_path):
    # local[2,4]: two threads, a task may fail up to 4 times
    clean = run_replay(params(), master="local[2]", out=tmp_path / "clean", partitions=3, say=lambda m: None, truth=False)
    retried = run_replay(params(fail_first_attempt_of_partition=0), master="local[2,4]", out=tmp_path / "retried",
                         partitions=3, say=lambda m: None, truth=False)
    assert retried.traces == clean.traces == 300
    t = rows(tmp_path / "retried", "traces")
    assert len({r["index"] for r in t}) == len(t) == 300
    assert t == rows(tmp_path / "clean", "traces")


def test_mutant_is_found_with_minimised_trace_and_replays_alone(tmp_path):
    p = params(config_name="racy", overrides={}, impl=f"driver:{DRIVERS}:AtomicWriteDriver", traces=200)
    s = run_replay(p, master="local[2]", out=tmp_path / "m", say=lambda m: None)
    assert not s.ok and s.diverged > 0
    v = s.violations[0]
    assert v["kind"] in ("observation", "property")
    assert "--only" in v["replay"]
    assert v["minimised"] is not None
    alone = replay_one(p, v["index"])
    assert alone[4] is False and alone[7] == v["divergence"]
    report = (tmp_path / "m" / "report.md").read_text()
    assert "## Violations" in report and v["replay"] in report


def test_bad_inputs_fail_before_spark_starts(tmp_path):
    from conq.conformance.spark_replay import ReplayError

    with pytest.raises(ReplayError, match="--mode"):
        run_replay(params(mode="sideways"), out=tmp_path / "x")
    with pytest.raises(ReplayError, match="cannot reach Spark master"):
        run_replay(params(), master="spark://127.0.0.1:1", out=tmp_path / "x")
    with pytest.raises(ReplayError, match="--impl"):
        run_replay(params(impl="telepathy"), out=tmp_path / "x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


@pytest.mark.timeout(1800)  # a safety net over 10x the quiet time (the heaviest Spark tests: 223 s / 158 s at load 20)
def test_local_cluster_runs_the_shipped_package(tmp_path):
    """Executors are separate JVMs with their own Python workers; the conq
    code they run comes from the zip the job ships."""
    from conq.conformance.spark_replay import package_zip, spark_session

    spark = spark_session("local-cluster[2,1,1024]")
    try:
        sc = spark.sparkContext
        sc.addPyFile(str(package_zip(tmp_path)))

        def where(_):
            import os

            import conq.conformance.checker
            import conq.model.kernel

            yield (os.getpid(), conq.model.kernel.__file__, conq.conformance.checker.__file__)

        seen = sc.parallelize(range(4), 4).mapPartitions(where).collect()
    finally:
        spark.stop()
    assert all("conq-pkg.zip" in k and "conq-pkg.zip" in c for _, k, c in seen), seen
    s = run_replay(params(traces=128), master="local-cluster[2,1,1024]", out=tmp_path / "lc", say=lambda m: None)
    assert s.ok and s.traces == 128 and s.state_fraction == 1.0


def test_consumer_lists_reference_full_coverage_and_a_mutant_found(tmp_path):
    """The product's own model and reference: full coverage of the bounded
    call-level graph, and a mutant of the catalog found with its minimised
    trace and the command that replays it alone."""
    ref = ReplayParams(model="consumer-lists", config_name="small", traces=1500, seed=4, length=30, mode="coverage")
    s = run_replay(ref, master="local[2]", out=tmp_path / "ref", say=lambda m: None)
    assert s.ok, s.violations[:1]
    assert s.state_fraction == 1.0 and s.transition_fraction == 1.0, s.missed
    bad = ReplayParams(model="consumer-lists", config_name="small", traces=1500, seed=4, length=30,
                       impl="mutant:remove-no-handover")
    m = run_replay(bad, master="local[2]", out=tmp_path / "bad", say=lambda m: None, truth=False)
    assert not m.ok
    v = m.violations[0]
    assert '["remove_consumer", 0]' in v["minimised"] and "--impl 'mutant:remove-no-handover'" in v["replay"]
    assert replay_one(bad, v["index"])[7] == v["divergence"]


def test_partition_aggregated_coverage_equals_the_per_block_rows():
    """Workers aggregate coverage over all the blocks of a partition (one row
    per distinct key): whatever the grouping of blocks, the least index per
    key and the trace rows are those of the per-block rows."""
    from conq.conformance.spark_replay import _replay, replay_blocks

    p = params(traces=300)

    def least(rows):
        out = {}
        for r in rows:
            if r[0] == "cover":
                out[(r[1], r[2])] = min(out.get((r[1], r[2]), r[3]), r[3])
        return out

    def units(rows):  # sampling units per state/transition key, summed; and each state's kind
        out = {}
        for r in rows:
            if r[0] == "cover" and r[1] in ("state", "transition"):
                n, cls = out.get((r[1], r[2]), (0, r[5]))
                assert cls == r[5]
                out[(r[1], r[2])] = (n + r[4], cls)
        return out

    per_block = list(replay_blocks(p, range(5)))
    assert all(n >= 1 for n, _ in units(per_block).values()) and units(per_block)
    for grouping in ([[0, 1, 2, 3, 4]], [[3, 1], [4, 0, 2]], [[b] for b in range(5)]):
        merged = [r for g in grouping for r in _replay(p, g, per_block=False)]
        assert least(merged) == least(per_block)
        assert units(merged) == units(per_block)
        assert sorted(r for r in merged if r[0] == "trace") == sorted(r for r in per_block if r[0] == "trace")
        for g in grouping:  # one cover row per distinct key per partition
            keys = [(r[1], r[2]) for r in _replay(p, g, per_block=False) if r[0] == "cover"]
            assert len(keys) == len(set(keys))


def test_shipped_zip_carries_bytecode_that_imports(tmp_path):
    """The zip holds x.pyc beside x.py, so workers import without compiling."""
    import subprocess
    import sys
    import zipfile

    from conq.conformance.spark_replay import package_zip

    z = package_zip(tmp_path)
    names = set(zipfile.ZipFile(z).namelist())
    assert "conq/conformance/checker.py" in names and "conq/conformance/checker.pyc" in names
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import conq.conformance.checker as c; "
            "print(c.__file__)")
    out = subprocess.run([sys.executable, "-c", code, str(z)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("conq-pkg.zip/conq/conformance/checker.pyc")


def test_the_package_zip_carries_the_compiled_kernels(tmp_path):
    """An executor without conq installed imports it from the zip, and the search's compiled
    kernels with it (model/engines/kernels.py: from a copy of the zip's file, unlinked once
    loaded).  ``python -S``: no site-packages processing, so no installed conq to fall back on."""
    import os
    import subprocess
    import sys
    import zipfile

    import numpy

    from conq.conformance.spark_replay import package_zip

    (tmp_path / "zip").mkdir()
    z = package_zip(tmp_path / "zip")
    assert any(n.startswith("conq/model/engines/_search.") for n in zipfile.ZipFile(z).namelist())
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    code = ("import sys; sys.path[:0] = sys.argv[1:3]; import numpy as np; import conq.model.engines as e; "
            "from conq.model.engines.keyset import KeySet; from conq.model.engines.kernels import search; "
            "print(e.__file__); print(search.__file__); print(KeySet().admit(np.array([3, 3, 0, 4, 0], dtype=np.uint64)).tolist())")
    site = str(os.path.dirname(os.path.dirname(numpy.__file__)))
    out = subprocess.run([sys.executable, "-S", "-c", code, str(z), site], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "TMPDIR": str(scratch)}, timeout=120)
    assert out.returncode == 0, out.stderr
    package, loaded, admitted = out.stdout.strip().splitlines()
    assert "conq-pkg.zip" in package and os.path.basename(loaded).startswith("conq-search-")
    assert admitted == "[0, 2, 3]"
    assert list(scratch.iterdir()) == []  # (the copy is gone)
    # a zip without them (another platform's build, say): the error says what to do
    bare = tmp_path / "bare.zip"
    with zipfile.ZipFile(z) as src, zipfile.ZipFile(bare, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith("conq/model/engines/_search."):
                dst.writestr(item, src.read(item))
    out = subprocess.run([sys.executable, "-S", "-c", code, str(bare), site], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode != 0 and "install conq on this machine" in out.stderr, out.stderr


def test_fingerprint_coverage_is_identical_across_partitionings_without_the_graph(tmp_path):
    """--no-graph: coverage told by stable fingerprints alone.  The coverage table (keys, least
    index, sampling units, state kinds), the growth curve and the Chao2 estimates are the same on
    1 and 3 partitions (Python's salted hash() would differ between the workers), and the state
    keys are exactly the fingerprints of the states the explorer finds (the toy reaches them all)."""
    import json

    import pyarrow.parquet as pq

    from conq.conformance.views import conformance_model
    from conq.model.engines.explorer import explore
    from conq.model.engines.fingerprint import fingerprint

    p = params(mode="random")
    one = run_replay(p, master="local[2]", out=tmp_path / "one", partitions=1, truth=False, say=lambda m: None)
    three = run_replay(p, master="local[2]", out=tmp_path / "three", partitions=3, truth=False, say=lambda m: None)
    assert one.graph == three.graph == "not explored (--no-graph)" and one.graph_states is None
    assert rows(tmp_path / "one", "coverage") == rows(tmp_path / "three", "coverage")
    for t in ("growth.parquet", "estimate.parquet"):
        assert pq.read_table(tmp_path / "one" / t).to_pylist() == pq.read_table(tmp_path / "three" / t).to_pylist()
    assert one.state_estimate == three.state_estimate and one.transition_estimate == three.transition_estimate
    assert one.growth_points == three.growth_points and one.growth_points[-1] == [300, 8]
    assert one.unit == "trace" and one.units == 300
    cover = rows(tmp_path / "one", "coverage")
    graph = explore(conformance_model(TOY, "atomic", {"clients": 3}), liveness=False).state_list
    assert {r["key"] for r in cover if r["kind"] == "state"} == {str(fingerprint(s)) for s in graph}
    assert all(r["units"] >= 1 and r["class"] for r in cover if r["kind"] == "state")
    # every state seen in many traces: nothing is estimated unseen
    assert one.state_estimate["estimate"] == one.state_estimate["observed"] == 8
    report = (tmp_path / "one" / "report.md").read_text()
    assert "## How close to exhaustive" in report and "| states | 8 |" in report
    assert json.loads((tmp_path / "one" / "summary.json").read_text())["state_estimate"]["observed"] == 8


@pytest.mark.timeout(1800)  # a safety net over 10x the quiet time (the heaviest Spark tests: 223 s / 158 s at load 20)
def test_new_job_equals_the_legacy_job(tmp_path):
    """Issue 20: the job in three Spark jobs with the summary read from its Parquet gives the same
    tables, summary and report as the legacy job (eight summary queries, a sorted shuffle), on a
    mutant (violations present, in index order) with the coverage truth, in one Spark session."""
    import json

    p = params(config_name="racy", overrides={}, impl=f"driver:{DRIVERS}:AtomicWriteDriver", traces=200)
    new = run_replay(p, master="local[2]", out=tmp_path / "new", partitions=3, say=lambda m: None)
    old = run_replay(p, master="local[2]", out=tmp_path / "old", partitions=3, say=lambda m: None, legacy=True)
    assert new.diverged == old.diverged > 1 and new.graph == old.graph == "explored"
    for t in ("traces", "coverage", "violations"):
        assert rows(tmp_path / "new", t) == rows(tmp_path / "old", t), t
    import pyarrow.parquet as pq

    v = pq.read_table(tmp_path / "new" / "violations").column("index").to_pylist()
    assert v == sorted(v) == pq.read_table(tmp_path / "old" / "violations").column("index").to_pylist()

    def same(s):  # everything but the clock and the output folder
        d = json.loads((tmp_path / s / "summary.json").read_text())
        return {k: v for k, v in d.items() if k not in ("seconds", "job_seconds", "out")}

    assert same("new") == same("old")
    for f in ("growth.parquet", "estimate.parquet"):
        assert pq.read_table(tmp_path / "new" / f).to_pylist() == pq.read_table(tmp_path / "old" / f).to_pylist()

    def report(s):  # the report names the seconds of the run
        return [line for line in (tmp_path / s / "report.md").read_text().splitlines() if "| seconds |" not in line
                and not line.startswith(f"| {new.traces:,} |")]

    assert report("new") == report("old")


def test_a_kept_session_serves_later_replays_with_the_same_output(tmp_path, monkeypatch):
    """Issue 20: ``keep_session=True`` keeps the Spark session (JVM, Python workers, package zip)
    for the next replays of the process; a replay in the kept session writes exactly what a replay
    in a fresh session writes, another master replaces the session, and close_session removes the
    zip.  The worker of a reused session has the model set up already (_SETUP)."""
    import tempfile

    from conq.conformance import spark_replay as sr

    zips = tmp_path / "tmp"
    zips.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(zips))
    fresh = run_replay(params(), master="local[2]", out=tmp_path / "fresh", partitions=3, say=lambda m: None, truth=False)
    assert list(zips.iterdir()) == []  # not kept: the zip is gone with the session
    said: list[str] = []
    try:
        a = run_replay(params(), master="local[2]", out=tmp_path / "a", partitions=3, say=said.append, truth=False,
                       keep_session=True)
        assert not sr.LAST_JOB["reused_session"] and len(list(zips.glob("conq-replay-*/conq-pkg.zip"))) == 1
        b = run_replay(params(), master="local[2]", out=tmp_path / "b", partitions=2, say=said.append, truth=False,
                       keep_session=True)
        assert sr.LAST_JOB["reused_session"] and "reusing the Spark session (local[2])" in said
        assert len(sr.LAST_JOB["task_cpu_seconds"]) == 2
        for t in ("traces", "coverage", "violations"):
            assert rows(tmp_path / "a", t) == rows(tmp_path / "b", t) == rows(tmp_path / "fresh", t), t
        assert a.state_estimate == b.state_estimate == fresh.state_estimate
        # another master: a new session (the kept one is stopped and its zip removed)
        c = run_replay(params(), master="local[1]", out=tmp_path / "c", say=said.append, truth=False, keep_session=True)
        assert not sr.LAST_JOB["reused_session"] and len(list(zips.glob("conq-replay-*"))) == 1
        assert rows(tmp_path / "c", "coverage") == rows(tmp_path / "fresh", "coverage")
    finally:
        sr.close_session()
    assert list(zips.iterdir()) == []
    # the tables are written by the tasks (one file per partition) and by the driver
    assert sorted(p.name for p in (tmp_path / "b" / "traces").iterdir()) == ["part-00000.parquet", "part-00001.parquet"]
    assert not (tmp_path / "b" / "_scratch").exists()


def test_symmetry_counts_coverage_by_class_against_the_symmetric_graph(tmp_path):
    """``--symmetry`` (issue 20): on consumer-lists same-priority, whose two consumers are
    interchangeable (same priority and kind), the replay also counts the states it met by symmetry
    class (the model's ``canonical``).  Hand-checkable: swapping the two consumers is the only
    renaming, a group of order two, so a class of call-level states is a pair {x, swap(x)} when both
    are call-level states and x alone otherwise: classes = states - pairs.  (Not Burnside's
    (states + fixed) / 2: the call-level state set is not closed under the swap -- the call view
    settles owed steps in the model's order, which breaks ties by consumer index; measured: 77
    states, 1 fixed, 31 pairs, 14 whose swap is no call-level state.)  The covered classes are at
    most the covered states; every class met is a state of the model's symmetric graph, whose count
    is the manifest's (5,425)."""
    from conq import manifest
    from conq.conformance.views import conformance_model
    from conq.model.engines.explorer import explore

    from conq.conformance.spark_replay import close_session

    p = ReplayParams(model="consumer-lists", config_name="same-priority", traces=256, seed=0, length=30, symmetry=True)
    try:  # both replays in one kept session (a session start costs more than these jobs)
        s = run_replay(p, master="local[2]", out=tmp_path / "sym", say=lambda m: None, keep_session=True)
        plain = run_replay(ReplayParams(**{**p.__dict__, "symmetry": False}), master="local[2]", out=tmp_path / "plain",
                           say=lambda m: None, truth=False, keep_session=True)
    finally:
        close_session()
    assert s.ok and s.state_fraction == 1.0
    view = conformance_model("consumer-lists", "same-priority")
    perms = view.base._symmetry_perms()
    assert len(perms) == 1  # one non-identity renaming: the swap
    states = explore(view, liveness=False).state_list
    known = set(states)
    paired = [x for x in states if view.base.permute(x, perms[0]) != x and view.base.permute(x, perms[0]) in known]
    assert s.graph_states == len(states) and len(paired) % 2 == 0 and paired
    assert s.graph_states_canonical == len(states) - len(paired) // 2 < len(states)
    assert s.states_covered_canonical == s.graph_states_canonical and s.state_fraction_canonical == 1.0
    assert s.states_covered_canonical <= s.states_covered
    pinned = [e.states for e in manifest.load() if e.model == "consumer-lists" and e.config == "same-priority"
              and e.symmetry and not e.overrides]
    assert s.symmetric_graph_states == pinned[0] == 5425
    assert "symmetry classes reached that the symmetric graph does not know" not in s.missed
    assert "--symmetry" in s.violations[0]["replay"] if s.violations else True
    report = (tmp_path / "sym" / "report.md").read_text()
    assert f"Symmetry classes (--symmetry, the model's canonical form): {s.states_covered_canonical:,} seen" in report
    # without --symmetry nothing of this is counted, and the coverage table has no class rows
    assert plain.states_covered_canonical is None
    assert {r["kind"] for r in rows(tmp_path / "plain", "coverage")} == {r["kind"] for r in rows(tmp_path / "sym", "coverage")} - {"canonical_state"}
    assert [r for r in rows(tmp_path / "plain", "coverage")] == [r for r in rows(tmp_path / "sym", "coverage") if r["kind"] != "canonical_state"]


def test_cli_replays_several_configurations_in_one_session(tmp_path):
    """``conq replay --config A --config B`` (issue 20): each configuration in turn in one kept Spark
    session, its output in --out/CONFIG; --json gives one document, a list; the session is closed
    at the end.  --only takes one configuration."""
    import json

    from typer.testing import CliRunner

    from conq.cli import app
    from conq.conformance import spark_replay as sr

    runner = CliRunner()
    bad = runner.invoke(app, ["replay", "consumer-lists", "--config", "small", "--config", "same-priority", "--only", "3"])
    assert bad.exit_code == 2 and "--only replays one trace of one configuration" in bad.output
    res = runner.invoke(app, ["replay", "consumer-lists", "--config", "small", "--config", "same-priority", "--traces", "64",
                              "--master", "local[2]", "--no-truth", "--out", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    docs = json.loads(res.stdout)
    assert [d["params"]["config_name"] for d in docs] == ["small", "same-priority"]
    assert [d["out"] for d in docs] == [str((tmp_path / "out" / c).resolve()) for c in ("small", "same-priority")]
    assert all((tmp_path / "out" / c / "report.md").is_file() for c in ("small", "same-priority"))
    assert sr.LAST_JOB["reused_session"] and "session" not in sr._KEPT
