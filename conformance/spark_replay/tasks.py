"""The Spark tasks: the per-partition functions of the one-stage job (each task replays its blocks and
writes its own Parquet part of ``traces/`` and its cover rows and violations with pyarrow) and of
the job as it was before issue 20 (rows as Arrow batches through the JVM), with the tables' schemas.
A task first registers the systems the driver knows (conformance/systems.py ``adopt``): an
executor of a cluster has only the shipped code, no installed metadata.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

from .. import systems
from .params import ReplayParams
from .rows import _replay


#: the one table the Python workers emit (as Arrow record batches): trace rows
#: and cover rows, told apart by ``tag``; cover rows use ``kind``, ``key``,
#: ``index`` (the least index of the traces in the partition that hit ``key``),
#: ``units`` (sampling units of the partition that met it) and ``class`` (a state's kind)
ROW_COLUMNS = ("tag", "index", "seed", "steps", "ok", "kind", "step", "divergence", "minimised", "replay", "key",
               "units", "class")


ROW_DDL = ("tag string, index bigint, seed bigint, steps int, ok boolean, kind string, step int, "
           "divergence string, minimised string, replay string, key string, units bigint, class string")


TRACE_COLUMNS = ("index", "seed", "steps", "ok", "kind", "step", "divergence", "minimised", "replay")


def _arrow_schema():
    import pyarrow as pa

    return pa.schema([
        ("tag", pa.string()), ("index", pa.int64()), ("seed", pa.int64()), ("steps", pa.int32()), ("ok", pa.bool_()),
        ("kind", pa.string()), ("step", pa.int32()), ("divergence", pa.string()), ("minimised", pa.string()),
        ("replay", pa.string()), ("key", pa.string()), ("units", pa.int64()), ("class", pa.string()),
    ])


def _batch(rows: list[tuple], schema):
    import pyarrow as pa

    cols = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)


def _partition_fn(params: ReplayParams, batch_rows: int = 2048):
    """The ``mapInArrow`` function: the blocks of this partition (a column of
    block numbers) -> Arrow batches of trace rows, then the partition's cover
    rows aggregated (one per distinct key)."""
    known = systems.origins()

    def run(batches):
        systems.adopt(known)
        blocks = [int(b) for rb in batches for b in rb.column(0).to_pylist()]
        if params.fail_first_attempt_of_partition is not None:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            if ctx is not None and ctx.partitionId() == params.fail_first_attempt_of_partition and ctx.attemptNumber() == 0:
                # Emit some rows' worth of work first, then die: the retry must not duplicate them.
                list(_replay(params, blocks[:1], per_block=False))
                raise RuntimeError("injected failure of the first attempt (retry test)")
        schema = _arrow_schema()
        buf: list[tuple] = []
        for row in _replay(params, blocks, per_block=False):
            if row[0] == "trace":
                buf.append(row + (None, None, None))
            else:
                _, kind, key, idx, units, cls = row
                buf.append(("cover", idx, None, None, None, kind, None, None, None, None, key, units, cls))
            if len(buf) >= batch_rows:
                yield _batch(buf, schema)
                buf = []
        if buf:
            yield _batch(buf, schema)

    return run


#: Parquet schemas of the tables the tasks and the driver write with pyarrow; the same column names
#: and types as the tables Spark's writer made before (tests/conformance/test_spark_replay.py
#: compares the rows with the legacy job's)
def _trace_schema():
    import pyarrow as pa

    return pa.schema([("index", pa.int64()), ("seed", pa.int64()), ("steps", pa.int32()), ("ok", pa.bool_()),
                      ("kind", pa.string()), ("step", pa.int32()), ("divergence", pa.string()),
                      ("minimised", pa.string()), ("replay", pa.string())])


def _cover_part_schema():
    import pyarrow as pa

    return pa.schema([("kind", pa.string()), ("key", pa.string()), ("index", pa.int64()), ("units", pa.int64()),
                      ("class", pa.string())])


def _write_parquet_atomically(table, target: Path, scratch: Path) -> None:
    """Write ``table`` to ``target`` through a file in ``scratch`` renamed into place: a task
    attempt that dies mid-write leaves nothing in the output table, and a retried or speculative
    attempt of the same partition replaces the file with identical bytes' worth of rows."""
    import pyarrow.parquet as pq

    tmp = scratch / f".{target.name}.{os.getpid()}.{time.monotonic_ns()}"
    pq.write_table(table, tmp)
    os.replace(tmp, target)


def _table(rows: list[tuple], schema):
    import pyarrow as pa

    cols = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)


def _task_fn(params: ReplayParams, traces_dir: str, scratch_dir: str, batch_rows: int = 4096):
    """The per-partition function of the one-stage job: replay the partition's blocks (as
    :func:`_replay`), write its trace rows to ``traces/part-NNNNN.parquet`` and its aggregated
    cover rows and violations to the scratch folder with pyarrow, and return one small tuple
    (partition, traces, steps, diverged) to the driver.  Nothing row-sized crosses to the JVM:
    issue 20 measured the Arrow round trip, the JVM Parquet writer and the coverage shuffle at
    most of a 4,096-trace job's overhead (spec/replay-coverage.md, "Cost of a job")."""
    known = systems.origins()  # the systems this driver knows, by where each is loaded from

    def run(pid: int, items) -> Iterator[tuple]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        systems.adopt(known)
        blocks = [int(b) for b in items]
        if params.fail_first_attempt_of_partition is not None:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            if ctx is not None and pid == params.fail_first_attempt_of_partition and ctx.attemptNumber() == 0:
                # Do some rows' worth of work first, then die: the retry must not duplicate them.
                list(_replay(params, blocks[:1], per_block=False))
                raise RuntimeError("injected failure of the first attempt (retry test)")
        if not blocks:
            return
        import pyarrow.parquet as pq

        scratch = Path(scratch_dir)
        ts, cs = _trace_schema(), _cover_part_schema()
        name = f"part-{pid:05d}.parquet"
        # trace rows go to the file in batches (a partition's rows need not fit in memory at once)
        tmp = scratch / f".{name}.{os.getpid()}.{time.monotonic_ns()}"
        writer = pq.ParquetWriter(tmp, ts)
        buf: list[tuple] = []
        cover_rows: list[tuple] = []
        bad: list[tuple] = []
        n = steps = 0
        try:
            for row in _replay(params, blocks, per_block=False):
                if row[0] == "trace":
                    buf.append(row[1:])
                    n += 1
                    steps += row[3]
                    if not row[4]:
                        bad.append(row[1:])
                    if len(buf) >= batch_rows:
                        writer.write_table(_table(buf, ts))
                        buf = []
                else:
                    cover_rows.append(row[1:])
            writer.write_table(_table(buf, ts))
        finally:
            writer.close()
        os.replace(tmp, Path(traces_dir) / name)
        _write_parquet_atomically(_table(cover_rows, cs), scratch / f"cover-{name}", scratch)
        if bad:
            _write_parquet_atomically(_table(bad, ts), scratch / f"violations-{name}", scratch)
        # the last two: this task's CPU and wall seconds in the Python worker (LAST_JOB, the benchmark)
        yield (pid, n, steps, len(bad), time.process_time() - cpu0, time.perf_counter() - wall0)

    return run
