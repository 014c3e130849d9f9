"""The upstream campaign on Spark (``conq upstream rocketmq-python --spark``; issue 19).

One Spark task per seed by default (``partitions``: fewer tasks, each running its seeds one after the
other): a task runs ``runner.run`` -- a fresh broker, gRPC face (127.0.0.1, port 0) and client worker
process, as the local campaign does -- into a temporary folder of its own, and returns the seed's
record (``campaign.seed_record``) with the text of the traces and observed logs it wrote.  The driver
collects the records (one small row per seed), so no seed is ever run twice by a recomputation, and
writes the output folder:

* ``runs/``, ``divergences/``, ``coverage/`` -- Parquet tables (one row per seed; per divergence;
  per element of the configuration's explored graph, with the seeds whose validation path met it:
  ``coverage.coverage_rows``);
* ``traces/`` -- every run's trace and observed log, as the local campaign writes them;
* ``summary.json`` and ``report.md`` -- the same report as the local campaign (``campaign.aggregate``
  over the same records), plus how the job ran (``spark``).

The folder is written as ``conq replay`` writes its own (``conformance/spark_replay.py``): into a
marked sibling that is swapped into place at the end, refusing before any work an output folder
holding anything conq did not write, removing the sibling on any failure, SIGINT or SIGTERM (Spark
stopped first).

Determinism: a seed's run depends on its seed alone (the fault plan is keyed by seed, RPC, key and
count: ``impl/ordered_consumption/faults.py``), and the report is built from the records in seed
order, so the verdicts and the coverage do not depend on the partitioning or on which task ends
first (tests/conformance/ordered_consumption/upstream/test_spark_campaign.py compares them with the
local campaign's).  No process outlives a task: ``runner.run`` reaps the client worker in its
``finally``; should a Python worker die outright, the client worker reads end-of-file on its stdin,
which is its signal to shut down and exit (``worker.py``, ``read_commands``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

from conq.conformance.ordered_consumption.upstream.campaign import aggregate, seed_record, write_report
from conq.conformance.ordered_consumption.upstream.coverage import coverage_rows
from conq.conformance.ordered_consumption.upstream.workloads import Workload
from conq.conformance.output_folder import write_atomic

__all__ = ["COVERAGE_DDL", "DIVERGENCE_DDL", "RUN_DDL", "run_spark_campaign", "run_seeds"]

RUN_DDL = ("seed bigint, workload string, `end` string, worker_exit int, rpc_total int, faults_injected int, "
           "listener_calls int, events int, validation string, divergences int, claims array<string>, "
           "rpcs string, faults string, trace string, record string")
DIVERGENCE_DDL = ("seed bigint, claim string, classification string, detail string, evidence string, "
                  "trace string, events int")
COVERAGE_DDL = "kind string, key string, action string, label string, in_graph boolean, seeds int, first_seed bigint"


def run_seeds(w: Workload, seeds, cap: float) -> list[tuple[int, str, str]]:
    """What one Spark task does (also callable in-process): each seed's run into a temporary folder
    of its own, then (seed, record as JSON, {file name: text} as JSON).  The folder's path in the
    record is replaced by ``TRACES``, the driver's name for its ``traces/`` folder.  A run that raises
    is a record that ends ``error`` (no verdict: the campaign counts it incomplete), never a failed
    job: the other seeds' verdicts stand."""
    from conq.conformance.ordered_consumption.upstream.runner import run

    out = []
    for seed in seeds:
        tmp = Path(tempfile.mkdtemp(prefix=f"conq-upstream-seed{seed}-"))
        try:
            try:
                rec = seed_record(run(w, int(seed), out=tmp, cap=cap), w)
            except Exception as e:  # noqa: BLE001 - reported as the seed's record, not a lost task
                rec = {"workload": w.name, "seed": int(seed), "end": "error", "worker_exit": None, "rpcs": {},
                       "rpc_total": 0, "faults_injected": 0, "listener_calls": 0, "divergences": [],
                       "notes": [f"the run raised {type(e).__name__}: {e}"], "trace": None, "validation": None,
                       "faults": {}, "events": 0, "coverage": None}
            files = {p.name: p.read_text() for p in sorted(tmp.iterdir()) if p.is_file()}
            text = json.dumps(rec, sort_keys=True, default=str).replace(json.dumps(str(tmp))[1:-1], TRACES)
            out.append((int(seed), text, json.dumps(files)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # the task's own folder, nothing else
    return out


#: stands for the output's ``traces/`` folder in a task's record (replaced by the driver)
TRACES = "@TRACES@"


def _task(w: Workload, cap: float):
    def go(seeds):
        return iter(run_seeds(w, list(seeds), cap))
    return go


def run_spark_campaign(w: Workload, seeds: list[int], out: str | Path, *, master: str = "local[*]",
                       partitions: int | None = None, cap: float = 120.0,
                       say: Callable[[str], None] = print) -> dict:
    """Run the campaign on Spark and write its output folder ``out`` (module docstring).  Bad input
    or environment (no Java, an unreachable master, an output folder conq may not replace) is a
    ``ReplayError`` raised before any work."""
    from conq.conformance.adapters import sigterm_exits
    from conq.conformance.spark_replay import ReplayError, java_problem, master_problem, replay_folder

    if not seeds:
        raise ReplayError("--seeds: at least one seed")
    folder = replay_folder(Path(out), command="conq upstream")
    folder.check()  # refuses a folder conq may not replace; touches nothing
    problem = java_problem() or master_problem(master)
    if problem:
        raise ReplayError(problem)
    with sigterm_exits():  # SIGTERM: a clean exit, so the cleanup below runs
        return _run(w, seeds, folder, master, partitions, cap, say)


def _run(w: Workload, seeds: list[int], folder, master: str, partitions: int | None, cap: float, say) -> dict:
    from conq.conformance.spark_replay import _stop_spark, close_session, package_zip, spark_session

    t0 = time.perf_counter()
    staging: Path | None = None
    tmp: Path | None = None
    started = False
    final = folder.final
    try:
        staging = folder.open().staging
        tmp = Path(tempfile.mkdtemp(prefix="conq-upstream-spark-"))
        say(f"starting Spark ({master})")
        # a session a replay of this process kept (conq run) is stopped through its owner, which
        # also removes its package zip; this job then starts its own context, and stops it at the end
        close_session()
        started = True
        spark = spark_session(master, app="conq-upstream")
        sc = spark.sparkContext
        sc.addPyFile(str(package_zip(tmp)))
        parts = max(1, min(partitions or len(seeds), len(seeds)))
        say(f"running {len(seeds)} seeds of {w.name} in {parts} Spark tasks")
        t_job = time.perf_counter()
        got = sc.parallelize(list(seeds), parts).mapPartitions(_task(w, cap)).collect()
        job_seconds = time.perf_counter() - t_job
        traces = staging / "traces"
        traces.mkdir()
        records = []
        for seed, text, files in sorted(got):
            records.append(json.loads(text.replace(TRACES, json.dumps(str(final / "traces"))[1:-1])))
            for name, body in json.loads(files).items():
                write_atomic(traces / name, body)
        if sorted(r["seed"] for r in records) != sorted(seeds):
            raise RuntimeError(f"the Spark job returned seeds {sorted(r['seed'] for r in records)}, not {sorted(seeds)}")
        report = aggregate(w, records)
        say("writing runs/, divergences/, coverage/ (Parquet)")
        _write_tables(spark, staging, records, w)
        spark.stop()
        started = False
        report["spark"] = {"master": master, "tasks": parts, "job_seconds": round(job_seconds, 2),
                           "seconds": round(time.perf_counter() - t0, 2), "tables": ["runs", "divergences", "coverage"],
                           "out": str(final)}
        write_report(staging, report)
        folder.commit()
        staging = None
        return report
    except BaseException as e:
        if started:
            # no Spark task may write into the staging folder once it is removed
            _stop_spark(hard=isinstance(e, (SystemExit, KeyboardInterrupt)))
        folder.abandon()  # the staging folder (unless the failure keeps it) and the lock
        raise
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _write_tables(spark, staging: Path, records: list[dict], w: Workload) -> None:
    runs = [(r["seed"], r["workload"], r["end"], r["worker_exit"], r["rpc_total"], r["faults_injected"],
             r["listener_calls"], r["events"], (r["validation"] or {}).get("status"), len(r["divergences"]),
             [d["claim"] for d in r["divergences"]], json.dumps(r["rpcs"], sort_keys=True),
             json.dumps(r["faults"], sort_keys=True), r["trace"], json.dumps(r, sort_keys=True, default=str))
            for r in records]
    divs = [(r["seed"], d["claim"], d["classification"], d["detail"], json.dumps(d["evidence"]), r["trace"], r["events"])
            for r in records for d in r["divergences"]]
    ms = w.model_size
    cov = [(x["kind"], x["key"], x["action"], x["label"], x["in_graph"], x["seeds"], x["first_seed"])
           for x in coverage_rows(records, ms.config_name if ms else None, ms.overrides if ms else None)]
    for name, rows, ddl in (("runs", runs, RUN_DDL), ("divergences", divs, DIVERGENCE_DDL), ("coverage", cov, COVERAGE_DDL)):
        spark.createDataFrame(rows, ddl).coalesce(1).write.mode("overwrite").parquet(str(staging / name))
