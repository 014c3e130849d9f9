"""Spark trace replay: millions of generated traces, checked for conformance
and for every model property, with coverage measured against the explorer's
exhaustive graph.

Layout of the job (one pass, no shuffle of traces):

1. The driver splits the trace indices ``0..N-1`` into fixed blocks of
   :data:`BLOCK` indices.  A block is the unit of work; its traces depend only
   on ``(root seed, index)`` and on the block (the coverage-guided mode's
   memory of what it has seen is per block), never on how blocks are spread
   over partitions or executors.  So the same inputs give the same rows
   whatever the partitioning, and a task that Spark retries recomputes
   exactly the rows it lost (Spark's output commit keeps one copy).
2. One Spark stage runs plain Python per partition (``mapPartitionsWithIndex``
   over the block numbers): build the model and the implementation once per
   partition (a port is started once per partition; a reused Python worker
   keeps the model's set-up, :data:`_SETUP`), generate each trace, replay it
   through the checker, and make rows: ``trace`` rows (index, seed, steps,
   verdict, first divergence, minimised actions, the command that replays it
   alone) and ``cover`` rows (kind, key, first index that hit it, sampling
   units that met it, a state's kind) for states and transitions (keyed by
   stable fingerprints), actions, properties witnessed and requirement ids,
   aggregated over the partition.  The task writes its trace rows itself
   (pyarrow) as ``traces/part-NNNNN.parquet``, and its cover rows and
   violations to a scratch folder, each file renamed into place, so a retried
   task replaces its own files with the same rows; only one small tuple per
   partition goes back to the driver.
3. The driver merges coverage (one row per key: least index for the growth
   curve, units summed, a state's kind) and the violations (sorted by index)
   with pyarrow, writes ``coverage/`` and ``violations/``, and tells the
   summary from those tables in memory; then ``summary.json``,
   ``growth.parquet``, ``estimate.parquet`` and ``report.md`` (with a PNG plot
   of coverage growth): coverage against the exhaustive graph when it can be
   explored, and always the growth curve and the Chao2 estimate of the unseen
   states (:mod:`.coverage_estimate`, spec/replay-coverage.md).  Issue 20
   measured the previous layout (rows as Arrow batches through the JVM,
   Spark's Parquet writer, a ``groupBy`` shuffle, three Spark jobs) at most of
   a small job's cost; ``run_replay(legacy=True)`` still runs it, for the
   equality test and the benchmark.

``run_replay(keep_session=True)`` keeps the Spark session (its JVM, its Python
workers with conq imported, its package zip) for the next replays of the
process: ``conq run``'s replays and ``conq replay --config A --config B``
share one; :func:`close_session` ends it.

``ReplayParams.level="thread"`` (``conq replay consumer-lists --level thread``) replays a system's
thread-step view instead (its ``thread_level``, conformance/systems.py: the checker chooses the
interleaving, the reference runs under the deterministic scheduler), with the same blocks, seeds,
rows and coverage (:func:`target_model`, :func:`target_impl`; spec/replay-coverage.md).

The code reaches executors as a zip of the ``conq`` package built at job
start (:func:`package_zip`) and shipped with ``addPyFile``, so a cluster needs
nothing installed but Python and the third-party requirements.

The package, one idea a module: :mod:`.params` (what a replay is asked and answers, its targets),
:mod:`.rows` (the traces and their rows, as an executor makes them), :mod:`.tasks` (the Spark
tasks), :mod:`.job` (the job on the driver), :mod:`.coverage` (coverage and estimates),
:mod:`.report` (the report), :mod:`.output` (publishing the output folder), :mod:`.session` (the
Spark session and the code shipped to it).  The names below are the package's public face.
"""

from __future__ import annotations

from . import session
from .coverage import beyond_explorer, graph_out_of_reach, incidence_in_process, thread_beyond_explorer
from .job import LAST_JOB, run_replay
from .output import MARKER, output_problem, replay_folder, resolve_output
from .params import BLOCK, ReplayError, ReplayParams, ReplaySummary, stable_hash, target_impl, target_model
from .rows import CANONICAL, _replay, replay_blocks, replay_one, replay_run
from .session import (DRIVER_LOG, _KEPT, _stop_spark, close_session, java_problem, master_problem, package_zip,
                      spark_session)

__all__ = [
    "BLOCK", "CANONICAL", "DRIVER_LOG", "LAST_JOB", "MARKER", "ReplayError", "ReplayParams", "ReplaySummary",
    "beyond_explorer", "close_session", "graph_out_of_reach", "incidence_in_process", "java_problem",
    "master_problem", "output_problem", "package_zip", "replay_blocks", "replay_folder", "replay_one", "replay_run",
    "resolve_output", "run_replay",
    "session", "spark_session", "stable_hash", "target_impl", "target_model", "thread_beyond_explorer",
    # used by the upstream campaign's Spark job (conformance/ordered_consumption/upstream/spark_campaign.py)
    # and by the tests
    "_KEPT", "_replay", "_stop_spark",
]


def __getattr__(name: str):
    # the tables of targets beyond the explorer by their former names (callers iterate them)
    if name == "BEYOND_EXPLORER":
        return beyond_explorer()
    if name == "THREAD_BEYOND_EXPLORER":
        return {(config, overrides): why for (_m, config, overrides), why in thread_beyond_explorer().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
