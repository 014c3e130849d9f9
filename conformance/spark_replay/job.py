"""The job, on the driver: input checked before Spark starts, one Spark stage, coverage and
violations merged with pyarrow, the coverage truth, the report, and the output folder published
whole; on any failure or signal the partial folder is removed (the legacy job of eleven Spark
queries stays for the equality test and the benchmark).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .coverage import _canonical_keys, _compare_with_graph, _estimate, graph_out_of_reach
from .output import replay_folder
from .params import BLOCK, ReplayError, ReplayParams, ReplaySummary, target_impl, target_model
from .report import _write_outputs
from . import session
from .session import _kept_session, _stop_spark, close_session, java_problem, master_problem
from .tasks import ROW_DDL, TRACE_COLUMNS, _cover_part_schema, _partition_fn, _task_fn, _trace_schema


def _merge_outputs(staging: Path, scratch: Path, results: list[tuple], truth: bool):
    """On the driver, after the one Spark stage: the coverage table (one row per key: its least
    index, the sum of its units, its class -- what the legacy job's ``groupBy`` gave) and the
    violations table (sorted by index) written with pyarrow, and the summary's figures told from
    them in memory (:func:`_summary_from_tables`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted(scratch.glob("cover-part-*.parquet"))
    cover = pa.concat_tables([pq.read_table(p) for p in parts]) if parts else _cover_part_schema().empty_table()
    g = cover.group_by(["kind", "key"], use_threads=False).aggregate(
        [("index", "min"), ("units", "sum"), ("class", "min")])
    coverage = pa.table({"kind": g["kind"], "key": g["key"], "first_index": g["index_min"],
                         "units": g["units_sum"], "class": g["class_min"]}).sort_by([("kind", "ascending"), ("key", "ascending")])
    (staging / "coverage").mkdir()
    pq.write_table(coverage, staging / "coverage" / "part-00000.parquet")
    vparts = sorted(scratch.glob("violations-part-*.parquet"))
    violations = (pa.concat_tables([pq.read_table(p) for p in vparts]).sort_by("index") if vparts
                  else _trace_schema().empty_table())
    (staging / "violations").mkdir()
    pq.write_table(violations, staging / "violations" / "part-00000.parquet")
    traces_dir = staging / "traces"
    if not any(traces_dir.glob("part-*.parquet")):
        pq.write_table(_trace_schema().empty_table(), traces_dir / "part-00000.parquet")
    agg = {"n": sum(r[1] for r in results), "steps": sum(r[2] for r in results), "bad": sum(r[3] for r in results)}
    return _summary_from_tables(agg, coverage, violations, truth)


def _summary_from_tables(agg: dict, coverage, violations, truth: bool):
    """The summary's figures from the coverage and violations tables (pyarrow, in memory): what
    :func:`_summary_by_spark` tells with Spark queries over the written tables (trace totals come
    from the tasks' tuples)."""
    cover = coverage.select(["kind", "key", "first_index", "units", "class"]).to_pydict()
    kinds: dict[str, int] = {}
    names: dict[str, list[str]] = {k: [] for k in ("action", "property", "requirement")}
    growth_c: dict[int, int] = {}
    incid_c: dict[tuple, int] = {}
    state_keys: set[int] = set()
    trans_keys: set[int] = set()
    for kind, key, first, units, cls in zip(cover["kind"], cover["key"], cover["first_index"], cover["units"], cover["class"]):
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind in names:
            names[kind].append(key)
        elif kind in ("state", "transition"):
            k = (kind, units, cls)
            incid_c[k] = incid_c.get(k, 0) + 1
            if kind == "state":
                growth_c[first] = growth_c.get(first, 0) + 1
            if truth:
                (state_keys if kind == "state" else trans_keys).add(int(key))
    names = {k: sorted(v) for k, v in names.items()}
    growth = sorted(growth_c.items())
    incid = [{"kind": k, "units": u, "class": c, "c": n}
             for (k, u, c), n in sorted(incid_c.items(), key=lambda x: (x[0][0], x[0][1] or 0, x[0][2] or ""))]
    first = violations.slice(0, 20).to_pylist()
    return agg, kinds, names, growth, incid, state_keys, trans_keys, first


def run_replay(
    params: ReplayParams,
    *,
    master: str = "local[*]",
    out: Path = Path("reports/replay"),
    partitions: int | None = None,
    truth: bool = True,
    conf: dict[str, str] | None = None,
    say=print,
    graph_max_states: int = 200_000,
    legacy: bool = False,
    keep_session: bool = False,
) -> ReplaySummary:
    """Run the job and write its output folder ``out``.

    The output is written into a fresh temporary sibling of ``out``
    (``<out>.partial-XXXX``) and renamed into place at the end, so ``out``
    only ever holds a complete output.  ``out`` is replaced only when it does
    not exist, is empty, or is a previous conq replay output holding nothing
    conq did not write (its :data:`MARKER` lists what conq wrote); anything
    else is refused with :class:`ReplayError` before any work, touching
    nothing.  On any failure, SIGINT or SIGTERM, the partial folder and the
    package zip are removed (Spark is stopped first, so no task writes there
    any more).

    ``truth=False`` (``--no-graph``) does not explore the exhaustive graph: coverage is then told
    by the fingerprints alone, with the Chao2 estimate of the unseen states.  A target listed in
    :func:`beyond_explorer` skips the graph by itself; any other stops exploring at
    ``graph_max_states`` states (a count, never the clock) and reports no truth.

    ``legacy=True`` runs the job as before issue 20 (the summary told by eleven Spark queries over
    the tables read back, violations sorted by a range shuffle); the default writes the same three
    tables from one Spark stage (the tasks write their own Parquet with pyarrow) and merges
    coverage and violations on the driver.  The outputs are equal
    (tests/conformance/test_spark_replay.py); the switch exists for that test and for
    ``bench/replay_scaling.py``, which times both in one run.

    ``keep_session=True`` leaves the Spark session running after the job, for the next
    ``run_replay`` of this process with the same ``master`` and ``conf`` (its Python workers stay
    up with conq imported and the model set up); :func:`close_session` stops it (also at exit).
    Without it, a session kept by an earlier call is reused and then stopped."""
    if params.mode not in ("random", "coverage", "exhaustive"):
        raise ReplayError(f"--mode must be random, coverage or exhaustive, got {params.mode!r}")
    model = target_model(params)  # fail fast on bad model/config/level
    from ..adapters import sigterm_exits
    from ..suite import SuiteError

    try:
        target_impl(params, model).close()  # fail fast on a bad --impl, before Spark starts
    except SuiteError as e:
        raise ReplayError(str(e)) from None
    folder = replay_folder(out)
    folder.check()  # refuses an output folder conq may not replace; touches nothing
    problem = java_problem() or master_problem(master)
    if problem:
        raise ReplayError(problem)
    with sigterm_exits():  # SIGTERM: a clean exit, so the cleanup below runs
        return _run_replay(params, model, master, folder, partitions, truth, conf, say, graph_max_states, legacy,
                           keep_session)


def _run_replay(params, model, master, folder, partitions, truth, conf, say, graph_max_states=200_000,
                legacy: bool = False, keep_session: bool = False) -> ReplaySummary:
    t0 = time.perf_counter()
    staging: Path | None = None
    tmp: Path | None = None
    started_spark = False
    final = folder.final
    try:
        staging = folder.open().staging  # the lock, what dead runs left removed, a fresh staging folder
        kept = _kept_session(master, conf)
        if kept is not None:
            # A later replay in a kept session: its JVM, its Python workers (with conq imported and
            # the model set up: _SETUP) and its package zip serve this job too.
            say(f"reusing the Spark session ({master})")
            started_spark = True
            spark = kept["spark"]
        else:
            close_session()  # another master or configuration: a new context
            tmp = Path(tempfile.mkdtemp(prefix="conq-replay-"))
            say(f"starting Spark ({master})")
            started_spark = True
            spark = session.spark_session(master, conf=conf)
            spark.sparkContext.addPyFile(str(session.package_zip(tmp)))
            if keep_session:
                session.keep(master, conf, spark, tmp)
                tmp = None  # the kept session owns the zip now (close_session removes it)
        sc = spark.sparkContext
        t_job = time.perf_counter()
        blocks = (params.traces + BLOCK - 1) // BLOCK
        # one partition per core (times two, so a slow core does not hold the job up):
        # each partition pays its set-up and its batches once
        parts = partitions or max(1, min(blocks, sc.defaultParallelism * 2))
        say(f"replaying {params.traces:,} traces ({params.mode}, length {params.length}) in {blocks} blocks on {parts} partitions")
        beyond = graph_out_of_reach(params)
        graph_note = ("not explored (--no-graph)" if not truth else f"not explored: {beyond}" if beyond else "")
        truth = truth and not beyond
        if legacy:
            agg, kinds, names, growth, incid, state_keys, trans_keys, violations = _legacy_job(spark, params, staging, parts, blocks, truth, say)
        else:
            # One Spark stage: block numbers in, each task writes its own traces/ part and its cover
            # rows and violations (pyarrow), one small tuple per partition comes back.  The driver
            # merges coverage and violations with pyarrow and tells the summary from them in memory.
            scratch = staging / "_scratch"
            scratch.mkdir()
            (staging / "traces").mkdir()
            say("replaying and writing traces/ (Parquet)")
            results = (sc.parallelize(range(blocks), parts)
                       .mapPartitionsWithIndex(_task_fn(params, str(staging / "traces"), str(scratch))).collect())
            t_merge = time.perf_counter()
            say("merging coverage/ and violations/ (Parquet)")
            agg, kinds, names, growth, incid, state_keys, trans_keys, violations = _merge_outputs(staging, scratch, results, truth)
            shutil.rmtree(scratch)
            LAST_JOB.clear()
            LAST_JOB.update(stage_seconds=t_merge - t_job, merge_seconds=time.perf_counter() - t_merge,
                            task_cpu_seconds=[round(r[4], 3) for r in results], task_seconds=[round(r[5], 3) for r in results],
                            reused_session=kept is not None)
        partitions_used = parts
        job_seconds = time.perf_counter() - t_job
        summary = ReplaySummary(
            params=asdict(params), master=master, partitions=partitions_used, traces=int(agg["n"] or 0),
            steps=int(agg["steps"] or 0), diverged=int(agg["bad"] or 0), seconds=0.0,
            states_covered=kinds.get("state", 0), transitions_covered=kinds.get("transition", 0),
            actions_covered=names["action"], properties_witnessed=names["property"], requirements_witnessed=names["requirement"],
            violations=violations, job_seconds=round(job_seconds, 3), graph=graph_note,
        )
        _estimate(params, summary, growth, incid)
        canon_keys = _canonical_keys(staging) if params.symmetry else None
        if canon_keys is not None:
            summary.states_covered_canonical = len(canon_keys)
        if truth:
            say("exploring the bounded graph for the coverage truth")
            _compare_with_graph(model, summary, state_keys, trans_keys, params.length, graph_max_states, canon_keys)
        elif summary.graph:
            say(f"no exhaustive graph: {summary.graph}")
        if not keep_session:
            close_session()
            spark.stop()  # a later run in this process may want another master
        started_spark = False
        summary.seconds = round(time.perf_counter() - t0, 2)
        summary.out = str(final)
        _write_outputs(staging, summary, growth)
        folder.commit()
        staging = None
        return summary
    except BaseException as e:
        if started_spark:
            # no Spark task may write into the staging folder once it is removed
            _stop_spark(hard=isinstance(e, (SystemExit, KeyboardInterrupt)))
            close_session(stopped=True)
        folder.abandon()  # the staging folder (unless the failure keeps it) and the lock
        raise
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _legacy_job(spark, params, staging: Path, parts: int, blocks: int, truth: bool, say):
    """The job as before issue 20: the Python workers' rows as Arrow batches through the JVM,
    cached, traces/ and coverage/ written by Spark's Parquet writer (coverage through a
    ``groupBy`` shuffle), then the summary told by eight Spark queries over the tables read back
    and violations written through a global sort (:func:`_summary_by_spark`).  Kept for the
    equality test and for ``bench/replay_scaling.py``'s "old" column."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    rows = spark.range(0, blocks, 1, parts).mapInArrow(_partition_fn(params), ROW_DDL)
    rows.persist(StorageLevel.MEMORY_AND_DISK)
    traces_df = rows.filter(F.col("tag") == "trace").select(*TRACE_COLUMNS)
    cover_df = (
        rows.filter(F.col("tag") == "cover").groupBy("kind", "key")
        .agg(F.min("index").alias("first_index"), F.sum("units").alias("units"), F.min("class").alias("class"))
    )
    say("writing traces/ (Parquet)")
    traces_df.write.mode("overwrite").parquet(str(staging / "traces"))
    say("aggregating coverage/ (Parquet)")
    cover_df.write.mode("overwrite").parquet(str(staging / "coverage"))
    try:
        return _summary_by_spark(spark, staging, truth)
    finally:
        rows.unpersist()


#: where the last one-stage job's time went (``bench/replay_scaling.py`` prints it): the Spark
#: stage's wall seconds, the driver's merge, each task's CPU and wall seconds in its Python worker,
#: and whether the session was a kept one
LAST_JOB: dict[str, Any] = {}


def _summary_by_spark(spark, staging: Path, truth: bool):
    """The summary as the job told it before issue 20: the tables read back, violations written
    through a global sort, eight Spark queries (kept for the equality test and the benchmark)."""
    from pyspark.sql import functions as F

    traces_df = spark.read.parquet(str(staging / "traces"))
    cover_df = spark.read.parquet(str(staging / "coverage"))
    violations_df = traces_df.filter(~F.col("ok")).orderBy("index")
    violations_df.write.mode("overwrite").parquet(str(staging / "violations"))
    agg = traces_df.agg(F.count("*").alias("n"), F.sum("steps").alias("steps"), F.sum((~F.col("ok")).cast("int")).alias("bad")).first()
    kinds = {r["kind"]: r["c"] for r in cover_df.groupBy("kind").agg(F.count("*").alias("c")).collect()}
    names: dict[str, list[str]] = {k: [] for k in ("action", "property", "requirement")}
    for r in cover_df.filter(F.col("kind").isin(*names)).select("kind", "key").collect():  # one job, few rows
        names[r["kind"]].append(r["key"])
    names = {k: sorted(v) for k, v in names.items()}
    growth = [(r["first_index"], r["c"]) for r in cover_df.filter(F.col("kind") == "state").groupBy("first_index").agg(F.count("*").alias("c")).orderBy("first_index").collect()]
    # incidence frequency counts (and state kinds) in one small job: Chao2 and the rarity table
    incid = cover_df.filter(F.col("kind").isin("state", "transition")).groupBy("kind", "units", "class").agg(F.count("*").alias("c")).collect()
    state_keys: set[int] = set()
    trans_keys: set[int] = set()
    if truth:
        for r in cover_df.filter(F.col("kind").isin("state", "transition")).select("kind", "key").collect():
            (state_keys if r["kind"] == "state" else trans_keys).add(int(r["key"]))
    violations = [r.asDict() for r in violations_df.limit(20).collect()]
    agg = {"n": agg["n"], "steps": agg["steps"], "bad": agg["bad"]}
    return agg, kinds, names, growth, incid, state_keys, trans_keys, violations
