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

``ReplayParams.level="thread"`` (``conq replay consumer-lists --level thread``) replays the
thread-step view instead (conformance/consumer_lists/thread_steps.py: the checker chooses the
interleaving, the reference runs under the deterministic scheduler), with the same blocks, seeds,
rows and coverage (:func:`target_model`, :func:`target_impl`; spec/replay-coverage.md).

The code reaches executors as a zip of the ``conq`` package built at job
start (:func:`package_zip`) and shipped with ``addPyFile``, so a cluster needs
nothing installed but Python and the third-party requirements.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

BLOCK = 64  # traces per unit of work; fixed so results never depend on partitioning


class ReplayError(ValueError):
    """Bad input or environment for the replay job (exit 2)."""


@dataclass
class ReplayParams:
    model: str
    config_name: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    traces: int = 1000
    seed: int = 0
    length: int = 30
    mode: str = "coverage"  # coverage | random | exhaustive
    impl: str = "reference"  # reference | stdio:COMMAND
    prefix_depth: int = 4  # exhaustive mode: depth of the enumerated prefixes
    snapshots: bool = True
    minimise: bool = True
    timeout: float = 10.0
    #: cap on one port reply line in bytes (None: $CONQ_PORT_MAX_LINE_BYTES or the default)
    max_line_bytes: int | None = None
    #: test hook: a task attempt number that must fail once (proves retries are harmless)
    fail_first_attempt_of_partition: int | None = None
    #: also count coverage by symmetry class (``--symmetry``): each state's canonical form under the
    #: model's ``canonical`` (issue 18) is a ``canonical_state`` cover row, counted against the
    #: explorer's symmetric graph (spec/replay-coverage.md, "Coverage by symmetry class")
    symmetry: bool = False
    #: the protocol level (``--level``): ``call`` (one port call per model call) or ``thread``
    #: (consumer-lists only: the thread-step view of conformance/consumer_lists/thread_steps.py, the
    #: checker choosing the interleaving, the reference under the deterministic scheduler; the
    #: configuration is one of ``thread_steps.THREAD_CONFIGS``, default ``one-acquirer``)
    level: str = "call"


def _thread_level(params: ReplayParams):
    """The thread level of ``params.model``'s system (conformance/systems.py), or ReplayError."""
    from . import systems

    with_threads = systems.names("thread_level")
    if params.model not in with_threads:
        raise ReplayError(f"--level thread: only {', '.join(with_threads)} has a thread-step level, not {params.model!r}")
    return systems.get(params.model).load("thread_level")


def target_model(params: ReplayParams):
    """The model the replay checks against: the call-level view of ``params.model`` (views.py), or
    at ``level="thread"`` its system's thread-step view (``thread_level.thread_model``).  ReplayError
    for an unknown level or a configuration the level does not offer."""
    from .views import conformance_model

    if params.level == "call":
        return conformance_model(params.model, params.config_name, params.overrides)
    if params.level != "thread":
        raise ReplayError(f"--level must be call or thread, got {params.level!r}")
    level = _thread_level(params)
    try:
        # ``--set`` values from the command line are strings: the call level parses them through
        # the model's configuration; here the same parsing through a call-level load first
        overrides = dict(params.overrides)
        if overrides:
            from conq.model.kernel import config_dict

            parsed = config_dict(conformance_model(params.model, None, overrides).config)
            overrides = {k: parsed[k] for k in overrides}
        return level.thread_model(params.config_name or next(iter(level.THREAD_CONFIGS)), overrides)
    except ValueError as e:
        raise ReplayError(f"--level thread: {e}") from None


def target_impl(params: ReplayParams, model, timeout: float | None = None):
    """The implementation under test at ``params.level`` (the thread level's ``thread_impl``)."""
    from .suite import make_impl

    t = params.timeout if timeout is None else timeout
    if params.level == "thread":
        return _thread_level(params).thread_impl(params.impl, timeout=t)
    return make_impl(params.impl, model.name, timeout=t, max_line_bytes=params.max_line_bytes)


def stable_hash(value: Any) -> int:
    """A 63-bit hash of a model value's ``repr``.  Coverage no longer uses it: the ``repr`` of a
    frozenset follows its iteration order, which follows Python's per-process salted ``hash`` of
    strings, so two executors could name one state differently.  Coverage keys are the stable
    fingerprints of :mod:`conq.model.engines.fingerprint` (a canonical encoding)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "big") >> 1


# -- per-partition work (runs on executors) --------------------------------------


def _exhaustive_prefixes(model, depth: int) -> list[list[tuple]]:
    from .generate import exhaustive

    return [tr.actions() for tr in exhaustive(model, depth)]


def replay_blocks(params: ReplayParams, blocks: Iterable[int]) -> Iterator[tuple]:
    """Rows for the traces of the given blocks.  Row shapes:
    ("trace", index, seed, steps, ok, kind, step, detail, minimised_json, replay_cmd)
    ("cover", kind, key, first_index, units, class)   -- one per distinct key per block

    ``key`` of a ``state`` is its stable fingerprint (:func:`~conq.model.engines.fingerprint.fingerprint`),
    of a ``transition`` the fingerprint of ``(fp(state), (action, observation), fp(next state))``;
    ``units`` (states and transitions only) is how many sampling units of the given blocks met the
    key (a unit is a trace, or a block in coverage mode: :mod:`.coverage_estimate`), so units add up
    across blocks and partitions; ``class`` (states only) is the state's kind for the rarity table.
    """
    return _replay(params, blocks, per_block=True)


#: per-process cache of what a partition needs before its first trace and
#: that depends on nothing but the parameters (model, property requirements,
#: exhaustive prefixes); a reused Python worker builds it once
_SETUP: dict[str, tuple] = {}


def _setup(params: ReplayParams) -> tuple:
    from conq.model.kernel import Kind

    key = json.dumps([params.model, params.config_name, params.overrides, params.mode, params.prefix_depth, params.level],
                     sort_keys=True, default=str)
    got = _SETUP.get(key)
    if got is None:
        model = target_model(params)
        sometimes = [p for p in model.property_list() if p.kind is Kind.SOMETIMES or p.witness is not None]
        checks = [
            (p.check if p.kind is Kind.SOMETIMES else p.witness, p.name)
            for p in sometimes if p.kind is not Kind.ALWAYS_STEP
        ]
        prop_reqs = _property_requirements(model.name)
        hits = {name: [("property", name)] + [("requirement", r) for r in prop_reqs.get(name, ())] for _, name in checks}
        prefixes = _exhaustive_prefixes(model, params.prefix_depth) if params.mode == "exhaustive" else []
        got = _SETUP[key] = (model, checks, hits, prefixes)
    return got


def _replay(params: ReplayParams, blocks: Iterable[int], per_block: bool) -> Iterator[tuple]:
    """The rows of :func:`replay_blocks`; with ``per_block=False`` the cover
    rows are aggregated over all the given blocks (one per distinct key, with
    its least index and the sum of its units), emitted after the last trace row."""
    from conq.model.engines.fingerprint import fingerprint

    from . import generate
    from .checker import Checker
    from .coverage_estimate import state_class
    model, checks, hits, prefixes = _setup(params)
    # the states of a call-level view are states of its model (settled ones), so the model's own
    # canonical form names their symmetry class (conformance/consumer_lists/calls.py keeps ``base``)
    canon = getattr(model, "base", model).canonical if params.symmetry else None
    impl = target_impl(params, model)
    checker = Checker(model, impl, snapshots=params.snapshots, record=True)
    base_cmd = _replay_command(params)
    first: dict[tuple, int] = {}
    units: dict[tuple, int] = {}  # state/transition key -> sampling units that met it
    classes: dict[tuple, str] = {}  # state key -> its kind
    unit_keys: set[tuple] = set()  # the state/transition keys met in the current unit
    thread = params.level == "thread"
    by_block = params.mode == "coverage"  # the sampling unit: a block (coverage mode) or a trace
    # Fingerprints are memoised per process (states are hashable; the dict's salted hash never
    # leaves this process): a walk meets the same states over and over.
    fps: dict[Any, int] = {}
    tfps: dict[Any, tuple] = {}

    def fp(s) -> int:
        h = fps.get(s)
        if h is None:
            if len(fps) >= 200_000:
                fps.clear()
            h = fps[s] = fingerprint(s)
        return h

    def end_unit() -> None:
        for k in unit_keys:
            units[k] = units.get(k, 0) + 1
        unit_keys.clear()

    def cover_rows():
        for (kind, key), idx in first.items():
            yield ("cover", kind, str(key), idx, units.get((kind, key)), classes.get((kind, key)))

    try:
        for block in (blocks if per_block else sorted(blocks)):
            if per_block:
                first, units, classes = {}, {}, {}
            seen = generate.CoverageMemory()
            for index in range(block * BLOCK, min((block + 1) * BLOCK, params.traces)):
                seed = generate.derive_seed(params.seed, index)
                if params.mode == "random":
                    run = checker.walk(seed, params.length)
                elif params.mode == "coverage":
                    tr = generate.coverage_guided(model, seed, params.length, seen)
                    run = checker.replay(tr.actions(), seed)
                elif params.mode == "exhaustive":
                    prefix = prefixes[index % len(prefixes)]
                    run = checker.replay(prefix, seed) if params.length <= len(prefix) else _prefix_then_walk(checker, model, prefix, seed, params.length)
                else:
                    raise ReplayError(f"unknown mode {params.mode!r}")
                d = run.divergence
                minimised = None
                if d is not None and params.minimise and d.kind != "port":
                    minimised = json.dumps([list(a) for a in checker.minimise(run)])
                yield (
                    "trace", index, seed, run.steps, d is None,
                    d.kind if d else None, d.step if d else None, d.describe() if d else None,
                    minimised, f"{base_cmd} --only {index}",
                )
                # Blocks come in ascending order and indices ascend within a block, so the
                # first time a key is met is its least index (also across merged blocks).
                for s in run.visited:
                    key = ("state", fp(s))
                    unit_keys.add(key)
                    if key not in first:
                        first[key] = index
                        classes[key] = state_class(model, s, by_step=thread)
                        if canon is not None:  # first sight of a member: the class's least index too
                            first.setdefault((CANONICAL, fp(canon(s))), index)
                        for pred, name in checks:
                            if pred(s):
                                for k in hits[name]:
                                    first.setdefault(k, index)
                for tr_ in run.transitions:
                    got = tfps.get(tr_)
                    if got is None:
                        if len(tfps) >= 200_000:
                            tfps.clear()
                        s, label, t = tr_
                        # at thread level every thread step is the action "step": its observation's
                        # label names the model step that ran (thread_steps.py, "Each reply's observation")
                        name = label[1][0][0] if thread else label[0][0]
                        got = tfps[tr_] = (("transition", fingerprint((fp(s), label, fp(t)))), ("action", name))
                    tkey, akey = got
                    unit_keys.add(tkey)
                    first.setdefault(tkey, index)
                    first.setdefault(akey, index)
                if not by_block:
                    end_unit()
            if by_block:
                end_unit()
            if per_block:
                yield from cover_rows()
        if not per_block:
            yield from cover_rows()
    finally:
        impl.close()


#: the cover kind of a state's symmetry class (``ReplayParams.symmetry``): key = fingerprint of
#: ``model.canonical(state)``
CANONICAL = "canonical_state"


def replay_one(params: ReplayParams, index: int) -> tuple:
    """The ``trace`` row of one trace, computed alone in this process (no
    Spark): the trace is regenerated from ``(root seed, index)`` and its block."""
    if not 0 <= index < params.traces:
        raise ReplayError(f"--only {index}: the run has traces 0..{params.traces - 1}")
    for row in replay_blocks(params, [index // BLOCK]):
        if row[0] == "trace" and row[1] == index:
            return row
    raise AssertionError("unreachable: the block always yields its traces")


def incidence_in_process(params, traces: int | None = None) -> tuple[dict[str, dict[int, int]], int, list[tuple[int, int]]]:
    """The replay's coverage without Spark (one process, the same per-block work as an executor):
    incidence frequency counts per kind (``state``, ``transition``), the number of sampling units,
    and the growth points of distinct states.  ``traces`` replays only the first ones."""
    from dataclasses import replace

    from .coverage_estimate import growth_at_powers_of_two, units_in

    p = replace(params, traces=traces if traces is not None else params.traces)
    blocks = range((p.traces + BLOCK - 1) // BLOCK)
    incid: dict[str, Counter] = {"state": Counter(), "transition": Counter()}
    first_state: Counter = Counter()
    for row in _replay(p, blocks, per_block=False):
        if row[0] == "cover" and row[1] in incid:
            incid[row[1]][row[4]] += 1
            if row[1] == "state":
                first_state[row[3]] += 1
    freqs = {k: dict(sorted(v.items())) for k, v in incid.items()}
    return freqs, units_in(p.mode, p.traces, BLOCK), growth_at_powers_of_two(first_state.items(), p.traces)


def _prefix_then_walk(checker, model, prefix, seed, length):
    """An exhaustive prefix followed by a seeded online walk to ``length`` steps."""
    import random

    rng = random.Random(seed)
    acts = list(prefix)

    def choose(current, n):
        if n <= len(acts):
            return acts[n - 1]
        enabled = list(model.actions(current[0]))
        return enabled[rng.randrange(len(enabled))] if enabled else None

    return checker._run(seed, choose, length)


def _property_requirements(model: str) -> dict[str, list[str]]:
    """property name -> requirement ids whose checks name it (from the catalog)."""
    from conq.spec import catalog

    out: dict[str, list[str]] = {}
    try:
        areas = catalog.load()
    except catalog.CatalogError:
        return out
    for a in areas:
        for r in a.requirements:
            for c in r.checks:
                m, _, prop = c.partition(":")
                if m == model and prop:
                    out.setdefault(prop, []).append(r.id)
    return out


def _replay_command(p: ReplayParams) -> str:
    cmd = f"conq replay {p.model} --traces {p.traces} --seed {p.seed} --length {p.length} --mode {p.mode}"
    if p.config_name:
        cmd += f" --config {p.config_name}"
    cmd += "".join(f" --set {k}={v}" for k, v in p.overrides.items())
    if p.impl != "reference":
        cmd += f" --impl '{p.impl}'"
    if p.symmetry:
        cmd += " --symmetry"
    if p.level != "call":
        cmd += f" --level {p.level}"
    return cmd


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

    def run(batches):
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


# -- the job in one Spark stage (issue 20) ---------------------------------------------------------

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

    def run(pid: int, items) -> Iterator[tuple]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
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


# -- shipping the code -----------------------------------------------------------------


def package_zip(directory: Path) -> Path:
    """A zip of the whole ``conq`` package as installed (the mapped folders
    included), to ship to executors."""
    import conq
    import conq.conformance
    import conq.impl
    import conq.model
    import conq.spec

    target = directory / "conq-pkg.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in (conq, conq.model, conq.impl, conq.conformance, conq.spec):
            root = Path(pkg.__file__).parent
            arc = Path(*pkg.__name__.split("."))
            for f in sorted(root.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".toml", ".json", ".md", ".properties"):
                    rel = f.relative_to(root)
                    if pkg is conq and rel.parts and rel.parts[0] in ("model", "impl", "conformance", "spec"):
                        continue
                    zf.write(f, str(arc / rel))
                    if f.suffix == ".py":
                        _add_pyc(zf, f, str(arc / rel))
    return target


def _add_pyc(zf: zipfile.ZipFile, source: Path, arcname: str) -> None:
    """Put the compiled module next to its source in the zip (``x.pyc`` beside
    ``x.py``, which zipimport looks for first), so every Python worker that
    imports conq from the zip does not compile it again.  An unchecked
    hash-based pyc: valid whatever the zip entries' timestamps; a worker on
    another Python version sees a foreign magic number and compiles the source."""
    import importlib.util
    import marshal

    data = source.read_bytes()
    body = None
    try:  # the driver's own fresh bytecode cache, when there is one: no compiling at all
        raw = Path(importlib.util.cache_from_source(str(source))).read_bytes()
        st = source.stat()
        if (raw[:4] == importlib.util.MAGIC_NUMBER and raw[4:8] == bytes(4)
                and int.from_bytes(raw[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(raw[12:16], "little") == st.st_size & 0xFFFFFFFF):
            body = raw[16:]
    except (OSError, NotImplementedError, ValueError):
        pass
    if body is None:
        try:
            body = marshal.dumps(compile(data, arcname, "exec", dont_inherit=True))
        except SyntaxError:
            return  # the worker reports it on import, as before
    header = importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little") + importlib.util.source_hash(data)
    zf.writestr(arcname[:-3] + ".pyc", header + body)


# -- the driver -----------------------------------------------------------------------------


def java_problem() -> str | None:
    java = shutil.which("java")
    if java is None and os.environ.get("JAVA_HOME"):
        cand = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        java = str(cand) if cand.exists() else None
    if java is None:
        return "Spark needs Java 17 or newer and no `java` was found. On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"
    import re
    import subprocess

    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"could not run {java} -version: {e}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(m.group(1)) if m else 0
    if major == 1 and m and m.group(2):
        major = int(m.group(2))
    if major < 17:
        return f"Spark needs Java 17 or newer; {java} is version {major or 'unknown'}. On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"
    return None


def master_problem(master: str) -> str | None:
    """Fail fast on a standalone master that cannot be reached (Spark itself
    would retry for a minute before giving up)."""
    if master.startswith("spark://"):
        for hostport in master[len("spark://") :].split(","):
            host, _, port = hostport.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=5):
                    return None
            except (OSError, ValueError) as e:
                last = f"cannot reach Spark master {hostport}: {e}"
        return last
    if master.startswith(("local", "yarn", "k8s://", "mesos://")):
        return None
    return f"unknown Spark master URL {master!r} (expected local[*], local-cluster[...], spark://HOST:PORT, yarn, k8s://...)"


#: where the Spark JVM's own console output goes (quiet terminal); shown on failure
DRIVER_LOG = Path(tempfile.gettempdir()) / "conq-spark-driver.log"


def spark_session(master: str, app: str = "conq-replay", conf: dict[str, str] | None = None):
    """A quiet SparkSession: the driver JVM's console output goes to
    :data:`DRIVER_LOG` (Spark prints start-up notices there even at level
    ERROR), executors log at ERROR, and conq prints its own progress lines."""
    problem = java_problem() or master_problem(master)
    if problem:
        raise ReplayError(problem)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = Path(__file__).with_name("log4j2.properties")
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        **(conf or {}),
    }
    sconf = SparkConf().setMaster(master).setAppName(app).setAll(list(settings.items()))
    gateway = None
    if SparkContext._gateway is None:  # first session of this process: start the JVM quietly
        log = open(DRIVER_LOG, "ab")
        try:
            gateway = launch_gateway(sconf, popen_kwargs={"stdout": log, "stderr": log})
        except Exception as e:
            raise ReplayError(f"Spark did not start ({e}); its log: {DRIVER_LOG}") from None
        finally:
            log.close()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()  # a new master needs a new context
    sc = SparkContext(conf=sconf, gateway=gateway)
    sc.setLogLevel("ERROR")
    return SparkSession(sc)


@dataclass
class ReplaySummary:
    params: dict[str, Any]
    master: str
    partitions: int
    traces: int
    steps: int
    diverged: int
    seconds: float
    states_covered: int
    transitions_covered: int
    actions_covered: list[str]
    properties_witnessed: list[str]
    requirements_witnessed: list[str]
    graph_states: int | None = None
    graph_transitions: int | None = None
    #: reachable states no deeper (BFS) than the trace length: what walks of that length can reach
    graph_states_within_length: int | None = None
    state_fraction: float | None = None
    transition_fraction: float | None = None
    missed: str = ""
    violations: list[dict[str, Any]] = field(default_factory=list)
    out: str = ""
    #: the Spark job alone: generation, replay, aggregation and Parquet writes
    #: (no session start-up, no coverage truth)
    job_seconds: float = 0.0
    #: the sampling unit of the incidence counts (a trace, or a block in coverage mode) and how many
    unit: str = "trace"
    units: int = 0
    #: "explored" when coverage was measured against the exhaustive graph, else why not
    graph: str = ""
    #: Chao2 estimates (:class:`~conq.conformance.coverage_estimate.Estimate` as a dict)
    state_estimate: dict[str, Any] | None = None
    transition_estimate: dict[str, Any] | None = None
    #: (traces replayed, distinct states seen) at powers of two and at the end
    growth_points: list[list[int]] = field(default_factory=list)
    #: the rarest kinds of states seen (``coverage_estimate.rare_classes``)
    rare_classes: list[dict[str, Any]] = field(default_factory=list)
    #: ``--symmetry``: symmetry classes of the states seen (distinct ``model.canonical`` forms);
    #: with the graph: the classes of the call-level graph's states, the share of them seen, and
    #: the states of the model's symmetric graph (``explore(symmetry=True)``: the manifest's count)
    states_covered_canonical: int | None = None
    graph_states_canonical: int | None = None
    state_fraction_canonical: float | None = None
    symmetric_graph_states: int | None = None

    @property
    def ok(self) -> bool:
        return self.diverged == 0


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
    from .adapters import sigterm_exits
    from .suite import SuiteError

    try:
        target_impl(params, model).close()  # fail fast on a bad --impl, before Spark starts
    except SuiteError as e:
        raise ReplayError(str(e)) from None
    final = resolve_output(out)  # refuses an output folder conq may not replace; touches nothing
    problem = java_problem() or master_problem(master)
    if problem:
        raise ReplayError(problem)
    with sigterm_exits():  # SIGTERM: a clean exit, so the cleanup below runs
        return _run_replay(params, model, master, final, partitions, truth, conf, say, graph_max_states, legacy,
                           keep_session)


def beyond_explorer() -> dict[tuple[str, str | None, str], str]:
    """Replay targets whose call-level graph is beyond what the replay explores for its coverage
    truth (more than the graph budget of 200,000 call-level states; measured on the project's
    2-core machine, figures and commands in spec/replay-coverage.md), as every system declares them
    (``System.beyond_explorer``): (model, configuration, overrides as JSON) -> why.  ``conq replay``
    skips the graph for these by itself (as ``--no-graph``) and estimates the unseen states
    instead; any other target is explored up to the budget."""
    from . import systems

    return {(s.name, config, overrides): why for s in systems.systems("beyond_explorer")
            for (config, overrides), why in s.beyond_explorer.items()}


def thread_beyond_explorer() -> dict[tuple[str, str, str], str]:
    """The same at thread level (``--level thread``): (model, thread-level configuration, overrides
    as JSON) -> why (``System.thread_beyond_explorer``; spec/replay-coverage.md)."""
    from . import systems

    return {(s.name, config, overrides): why for s in systems.systems("thread_beyond_explorer")
            for (config, overrides), why in s.thread_beyond_explorer.items()}


def __getattr__(name: str):
    # the tables by their former names (callers iterate them)
    if name == "BEYOND_EXPLORER":
        return beyond_explorer()
    if name == "THREAD_BEYOND_EXPLORER":
        return {(config, overrides): why for (_m, config, overrides), why in thread_beyond_explorer().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def graph_out_of_reach(params: ReplayParams) -> str | None:
    """Why the exhaustive graph of ``params``' target is not explored, or None.  Targets are
    compared by their resolved configuration (``--set recoveries=3`` from the command line is the
    string "3"; the configuration field is the int)."""
    from conq.model.kernel import config_dict

    from .views import conformance_model

    if params.level == "thread":
        mine = config_dict(target_model(params).config)
        for (model, config, overrides), why in thread_beyond_explorer().items():
            if model != params.model:
                continue
            if config_dict(target_model(ReplayParams(model=model, config_name=config, level="thread",
                                                     overrides=json.loads(overrides))).config) == mine:
                return why
        return None
    mine = None
    for (model, config, overrides), why in beyond_explorer().items():
        if model != params.model:
            continue
        if mine is None:
            mine = config_dict(conformance_model(params.model, params.config_name, params.overrides).config)
        if config_dict(conformance_model(model, config, json.loads(overrides)).config) == mine:
            return why
    return None


def _run_replay(params, model, master, final: Path, partitions, truth, conf, say, graph_max_states=200_000,
                legacy: bool = False, keep_session: bool = False) -> ReplaySummary:
    t0 = time.perf_counter()
    staging: Path | None = None
    tmp: Path | None = None
    started_spark = False
    try:
        staging = _make_staging(final)
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
            spark = spark_session(master, conf=conf)
            spark.sparkContext.addPyFile(str(package_zip(tmp)))
            if keep_session:
                _KEPT["session"] = {"key": _session_key(master, conf), "spark": spark, "sc": spark.sparkContext, "tmp": tmp}
                _register_exit_hook()
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
        _write_marker(staging, complete=True)
        _publish(staging, final)
        staging = None
        return summary
    except BaseException as e:
        if started_spark:
            # no Spark task may write into the staging folder once it is removed
            _stop_spark(hard=isinstance(e, (SystemExit, KeyboardInterrupt)))
            close_session(stopped=True)
        if staging is not None and not getattr(e, "keep_staging", False):
            shutil.rmtree(staging, ignore_errors=True)
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


def _session_key(master: str, conf: dict[str, str] | None) -> str:
    return json.dumps([master, sorted((conf or {}).items())])


#: the Spark session ``run_replay(keep_session=True)`` keeps for the next replays of this process
#: (``conq run``'s replays, ``conq replay --config A --config B``): its context, its key (master and
#: configuration) and the folder of its package zip.  A reused session keeps its Python workers
#: (``spark.python.worker.reuse``), which have conq imported and the model set up: issue 20
#: measured their start-up at most of a small job's cost (spec/replay-coverage.md, "Cost of a job").
_KEPT: dict[str, Any] = {}


def _kept_session(master: str, conf: dict[str, str] | None) -> dict[str, Any] | None:
    """The kept session when it serves ``master`` and ``conf`` and is still the live context."""
    kept = _KEPT.get("session")
    if kept is None or kept["key"] != _session_key(master, conf):
        return None
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not kept["sc"] or kept["sc"]._jsc is None:
        close_session(stopped=True)  # someone stopped or replaced it
        return None
    return kept


def close_session(stopped: bool = False) -> None:
    """Stop the Spark session kept by ``run_replay(keep_session=True)``, if any, and remove its
    package zip.  ``stopped``: the context is already stopped (or must not be called any more)."""
    kept = _KEPT.pop("session", None)
    if kept is None:
        return
    try:
        if not stopped:
            kept["spark"].stop()
    finally:
        shutil.rmtree(kept["tmp"], ignore_errors=True)


_EXIT_HOOK: list[bool] = []


def _register_exit_hook() -> None:
    if not _EXIT_HOOK:
        import atexit

        atexit.register(close_session)
        _EXIT_HOOK.append(True)


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


def _stop_spark(hard: bool) -> None:
    """Stop Spark, so that no task writes into the staging folder any more.
    ``hard`` (conq is being terminated or interrupted): end the JVM itself and
    wait for it, without a word to it over Py4J -- the call that was
    interrupted still occupies this thread's connection, so any further call
    would wait for the running job to finish.  A later session in this
    process starts a fresh JVM."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    sc = SparkContext._active_spark_context
    if not hard:
        if sc is not None:
            try:
                sc.cancelAllJobs()
                sc.stop()
            except BaseException:
                pass
        return
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        import subprocess

        try:
            proc.stdin.close()  # the JVM exits when its stdin closes (running its shutdown hooks)
        except (OSError, AttributeError):
            pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None


# -- the output folder -------------------------------------------------------------------

#: marks a folder written by conq replay, and lists what conq wrote there
MARKER = ".conq-output.json"


def _entries(directory: Path) -> set[str]:
    """Every file and folder under ``directory`` (relative, POSIX separators; links not followed)."""
    found: set[str] = set()
    for root, dirs, files in os.walk(directory):
        rel = Path(root).relative_to(directory)
        for name in dirs + files:
            found.add((rel / name).as_posix())
    return found


def _write_marker(directory: Path, complete: bool) -> None:
    from conq.spec import version

    entries = sorted(_entries(directory) - {MARKER})
    (directory / MARKER).write_text(json.dumps(
        {"written_by": "conq replay", "version": version(), "complete": complete, "entries": entries}, indent=1
    ))


def output_problem(out: Path) -> str | None:
    """None when conq may write the output folder ``out`` (replacing it as a
    whole): it does not exist, is empty, or is a previous conq replay output
    that holds nothing but what conq wrote.  Else why not."""
    if not out.exists():
        return f"{out} is a broken symbolic link" if out.is_symlink() else None
    if not out.is_dir():
        return f"{out} exists and is not a folder"
    try:
        found = _entries(out)
    except OSError as e:
        return f"{out} cannot be read ({e})"
    if not found:
        return None
    marker = out / MARKER
    if not marker.is_file():
        return (f"{out} is not empty and is not the output of a previous conq replay (it has no {MARKER}); "
                "conq replaces its output folder as a whole and never deletes files it did not write")
    try:
        listed = set(json.loads(marker.read_text())["entries"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{out} has an unreadable {MARKER} ({e})"
    extra = sorted(found - listed - {MARKER})
    if extra:
        shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        return (f"{out} is a previous conq replay output but also holds {len(extra)} file(s) conq did not write ({shown}); "
                "conq never deletes files it did not write")
    return None


def resolve_output(out: Path) -> Path:
    """The absolute output folder (``a/b/..`` is ``a``, symbolic links resolved),
    or :class:`ReplayError` when conq may not write it.  Touches nothing."""
    given = str(out)
    try:
        final = Path(out).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise ReplayError(f"--out {given}: {e}") from None
    if final.parent == final:
        raise ReplayError(f"--out {given}: the output folder cannot be the root folder")
    cwd = Path.cwd().resolve()
    if final == cwd or final in cwd.parents:
        raise ReplayError(f"--out {given}: {final} holds the current folder; the output folder is replaced as a whole, choose another")
    problem = output_problem(final)
    if problem:
        raise ReplayError(f"--out {given}: refusing to write there: {problem}. Nothing was changed; choose another --out")
    ancestor = final.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ReplayError(f"--out {given}: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ReplayError(f"--out {given}: cannot create anything in {ancestor} (permission denied)")
    return final


def _make_staging(final: Path) -> Path:
    """A fresh folder next to ``final``, marked as conq's, for the run to write into."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f"{final.name}.partial-"))
    except OSError as e:
        raise ReplayError(f"--out {final}: cannot create the output folder: {e}") from None
    try:
        _write_marker(staging, complete=False)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


class _OutputChanged(ReplayError):
    keep_staging = True


def _publish(staging: Path, final: Path) -> None:
    """Put the complete output in place: the previous output (checked again: it
    must still be conq's alone) is moved aside, the staging folder renamed to
    ``final``, then the previous output removed.  SIGTERM and SIGINT are held
    back meanwhile (delivered right after), so a signal never leaves a half-swapped
    folder."""
    import signal

    blockable = hasattr(signal, "pthread_sigmask")
    if blockable:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        problem = output_problem(final)
        if problem:
            raise _OutputChanged(f"--out {final} changed during the run ({problem}); nothing there was changed, "
                                 f"and the new output was left in {staging}")
        trash = None
        if final.exists():
            trash = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.old-"))
            os.rename(final, trash / final.name)
        try:
            os.rename(staging, final)
        except BaseException:
            if trash is not None:
                os.rename(trash / final.name, final)
                shutil.rmtree(trash, ignore_errors=True)
            raise
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        if blockable:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _estimate(params: ReplayParams, summary: ReplaySummary, growth: list[tuple[int, int]], incid) -> None:
    """The campaign's coverage from fingerprints alone: growth at powers of two, Chao2 estimates of
    the states and transitions the walks can reach, and the rarest kinds of states
    (:mod:`.coverage_estimate`)."""
    from .coverage_estimate import chao2, growth_at_powers_of_two, rare_classes, sample_unit, units_in

    summary.unit = sample_unit(params.mode, BLOCK)
    summary.units = units_in(params.mode, summary.traces, BLOCK)
    summary.growth_points = [list(x) for x in growth_at_powers_of_two(growth, summary.traces)]
    freq: dict[str, dict[int, int]] = {"state": {}, "transition": {}}
    classes = []
    for r in incid:
        k, u, c = r["kind"], int(r["units"] or 0), int(r["c"])
        freq[k][u] = freq[k].get(u, 0) + c
        if k == "state":
            classes.append((r["class"], u, c))
    if summary.units >= 1 and summary.traces:
        summary.state_estimate = chao2(freq["state"], summary.units).as_dict()
        summary.transition_estimate = chao2(freq["transition"], summary.units).as_dict()
    summary.rare_classes = rare_classes(classes)


def _canonical_keys(staging: Path) -> set[int]:
    """The symmetry classes the replay met: the ``canonical_state`` keys of ``coverage/``."""
    import pyarrow.parquet as pq

    t = pq.read_table(staging / "coverage", columns=["kind", "key"], filters=[("kind", "=", CANONICAL)])
    return {int(k) for k in t.column("key").to_pylist()}


def _compare_symmetric(model, summary: ReplaySummary, states: list, canon_keys: set[int], max_states: int | None) -> str:
    """Coverage by symmetry class: the classes of the call-level graph's states (their images under
    the model's ``canonical``), the share of them the replay met, and the model's own symmetric graph
    (``explore(symmetry=True)``, whose states are canonical forms: the manifest's symmetric count).
    Returns a note for ``missed`` (empty when every class met is one of the symmetric graph's)."""
    from conq.model.engines.explorer import explore
    from conq.model.engines.fingerprint import fingerprint

    base = getattr(model, "base", model)
    image = {fingerprint(base.canonical(s)) for s in states}
    summary.graph_states_canonical = len(image)
    summary.state_fraction_canonical = len(canon_keys & image) / len(image) if image else 1.0
    sym = explore(base, liveness=False, symmetry=True, max_states=max_states)
    if not sym.complete:
        return f"the symmetric graph has more than {max_states:,} states; not compared"
    sym_keys = {fingerprint(s) for s in sym.state_list}
    summary.symmetric_graph_states = len(sym_keys)
    notes = []
    if len(canon_keys & image) < len(image):
        notes.append(f"{len(image) - len(canon_keys & image)} symmetry classes of call-level states not reached")
    if canon_keys - sym_keys:
        notes.append(f"{len(canon_keys - sym_keys)} symmetry classes reached that the symmetric graph does not know "
                     "(canonical form or model/implementation drift?)")
    return "; ".join(notes)


def _compare_with_graph(model, summary: ReplaySummary, state_keys: set[int], trans_keys: set[int], length: int,
                        max_states: int | None = 200_000, canon_keys: set[int] | None = None) -> None:
    from conq.model.engines.explorer import explore
    from conq.model.engines.fingerprint import fingerprint

    ex = explore(model, liveness=False, keep_edges=True, max_states=max_states)
    if not ex.complete:
        summary.graph = f"not explored: the configuration has more than {max_states:,} call-level states"
        summary.missed = "the configuration is too large to explore; no coverage truth"
        return
    summary.graph = "explored"
    states = ex.state_list
    fps = [fingerprint(s) for s in states]
    all_states = {h: i for i, h in enumerate(fps)}
    e, labels = ex.edges, ex.labels
    all_trans = {fingerprint((fps[e[k]], labels[e[k + 2]], fps[e[k + 1]])) for k in range(0, len(e), 3)}
    summary.graph_states = len(all_states)
    summary.graph_transitions = len(all_trans)
    hit_s = len(state_keys & all_states.keys())
    hit_t = len(trans_keys & all_trans)
    summary.state_fraction = hit_s / len(all_states) if all_states else 1.0
    summary.transition_fraction = hit_t / len(all_trans) if all_trans else 1.0
    extra = len(state_keys - all_states.keys())
    notes = []
    missed_states = [i for h, i in all_states.items() if h not in state_keys]
    depth = _depths(ex)
    # the population the walks sample from: states no deeper than the trace length
    summary.graph_states_within_length = sum(1 for d in depth if d <= length)
    if missed_states:
        # BFS depth of each missed state: states deeper than the trace length cannot be reached.
        too_deep = sum(1 for i in missed_states if depth[i] > length)
        notes.append(
            f"{len(missed_states)} states not reached ({too_deep} lie deeper than the trace length {length}"
            + ("" if too_deep == len(missed_states) else "; the others need rarer action sequences than the walks drew: "
               "--mode coverage aims at them") + "); "
            f"e.g. {json.dumps(model.view(states[missed_states[0]]), default=str)[:300]}"
        )
    if hit_t < len(all_trans):
        notes.append(f"{len(all_trans) - hit_t} transitions not taken")
    if extra:
        notes.append(f"{extra} states reached that the explorer does not know (model/implementation drift?)")
    if canon_keys is not None:
        note = _compare_symmetric(model, summary, states, canon_keys, max_states)
        if note:
            notes.append(note)
    summary.missed = "; ".join(notes)


def _depths(ex) -> list[int]:
    depth = [0] * len(ex.state_list)
    e = ex.edges
    seen = [False] * len(ex.state_list)
    seen[0] = True
    frontier = [0]
    adj: dict[int, list[int]] = {}
    for k in range(0, len(e), 3):
        adj.setdefault(e[k], []).append(e[k + 1])
    d = 0
    while frontier:
        d += 1
        nxt = []
        for u in frontier:
            for v in adj.get(u, ()):
                if not seen[v]:
                    seen[v] = True
                    depth[v] = d
                    nxt.append(v)
        frontier = nxt
    return depth


def _write_outputs(directory: Path, s: ReplaySummary, growth: list[tuple[int, int]]) -> None:
    data = asdict(s)
    (directory / "summary.json").write_text(json.dumps(data, indent=2, default=str))
    _write_small_tables(directory, s)
    png = directory / "coverage-growth.png"
    xs, ys, total = [], [], 0
    for idx, c in growth:
        total += c
        xs.append(idx + 1)
        ys.append(total)
    est = s.state_estimate
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        ax.step(xs or [0], ys or [0], where="post", label="distinct states seen")
        if s.growth_points:
            ax.plot([p[0] for p in s.growth_points], [p[1] for p in s.growth_points], "o", ms=3, color="C0")
        if s.graph_states:
            ax.axhline(s.graph_states, linestyle="--", color="grey", label=f"reachable states ({s.graph_states:,})")
        if est and est["estimate"] > est["observed"]:
            ax.axhline(est["estimate"], linestyle=":", color="C1", label=f"Chao2 estimate ({est['estimate']:,.0f})")
            ax.axhspan(est["low"], est["high"], color="C1", alpha=0.15, label=f"{int(round(100 * est['conf']))}% CI")
        ax.legend(loc="lower right", fontsize="small")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("traces replayed")
        ax.set_ylabel("distinct model states (fingerprints)")
        ax.set_title(f"{s.params['model']}: coverage growth")
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        plt.close(fig)
    except Exception as e:  # the report stays useful without the picture
        png = None
        print(f"warning: no coverage plot ({e})", file=sys.stderr)
    lines = [
        f"# conq replay: {s.params['model']}",
        "",
        f"`{_replay_command(ReplayParams(**{k: v for k, v in s.params.items()}))}` on `{s.master}` ({s.partitions} partitions)",
        "",
        "| traces | steps | diverged | seconds | states covered | transitions covered |",
        "|---|---|---|---|---|---|",
        f"| {s.traces:,} | {s.steps:,} | {s.diverged:,} | {s.seconds} | {s.states_covered:,}"
        + (f" of {s.graph_states:,} ({100 * s.state_fraction:.1f}%)" if s.graph_states else "")
        + f" | {s.transitions_covered:,}"
        + (f" of {s.graph_transitions:,} ({100 * s.transition_fraction:.1f}%)" if s.graph_transitions else "")
        + " |",
        "",
    ]
    if s.missed:
        lines += [f"Not covered: {s.missed}", ""]
    if s.states_covered_canonical is not None:
        line = f"Symmetry classes (--symmetry, the model's canonical form): {s.states_covered_canonical:,} seen"
        if s.graph_states_canonical:
            line += (f" of the {s.graph_states_canonical:,} classes of the call-level graph's states "
                     f"({100 * s.state_fraction_canonical:.1f}%)")
        if s.symmetric_graph_states:
            line += f"; the model's symmetric graph has {s.symmetric_graph_states:,} states (call steps and the internal steps between them)"
        lines += [line + ".", ""]
    lines += _closeness_lines(s)
    if png is not None:
        lines += ["![coverage growth](coverage-growth.png)", ""]
    lines += [f"Actions covered: {', '.join(s.actions_covered)}", "", f"Properties witnessed: {', '.join(s.properties_witnessed) or 'none'}", ""]
    lines += [f"Requirements witnessed: {', '.join(s.requirements_witnessed) or 'none'}", ""]
    if s.violations:
        lines += ["## Violations", ""]
        for v in s.violations:
            lines += [f"### trace {v['index']} (seed {v['seed']})", "", f"{v['divergence']}", ""]
            if v.get("minimised"):
                lines += ["minimised actions:", "", "```json", v["minimised"], "```", ""]
            lines += ["replay alone:", "", "```sh", v["replay"], "```", ""]
    (directory / "report.md").write_text("\n".join(lines))


def _write_small_tables(directory: Path, s: ReplaySummary) -> None:
    """``growth.parquet`` (traces, distinct states) and ``estimate.parquet`` (one row per kind)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = s.growth_points
    pq.write_table(pa.table({"traces": pa.array([p[0] for p in g], pa.int64()),
                             "distinct_states": pa.array([p[1] for p in g], pa.int64())}), directory / "growth.parquet")
    rows = [dict(kind=k, unit=s.unit, **e) for k, e in (("state", s.state_estimate), ("transition", s.transition_estimate)) if e]
    if rows:
        pq.write_table(pa.Table.from_pylist(rows), directory / "estimate.parquet")


def _closeness_lines(s: ReplaySummary) -> list[str]:
    """The report's section on how close to exhaustive the campaign came."""
    est, tr = s.state_estimate, s.transition_estimate
    if not est:
        return []
    pct = int(round(100 * est["conf"]))
    lines = ["## How close to exhaustive", ""]
    graph = ("the exhaustive graph: " + (f"{s.graph_states:,} reachable states, {s.graph_states_within_length:,} within "
                                         f"{s.params['length']} steps" if s.graph_states else s.graph or "not explored"))
    lines += [f"Coverage is counted by stable state fingerprints; {graph}. Unseen remainder: bias-corrected Chao2 over "
              f"incidence counts, the sampling unit being one {s.unit} ({s.units:,} units"
              + ("; prefixes are enumerated, not sampled, so the estimate is indicative only" if s.params.get("mode") == "exhaustive" else "")
              + ").", ""]
    lines += [f"| | seen | met in 1 unit (Q1) | in 2 (Q2) | Chao2 estimate | {pct}% CI | seen / estimate | seen / upper bound | sample coverage |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, e in (("states", est), ("transitions", tr)):
        if e:
            lines.append(f"| {name} | {e['observed']:,} | {e['q1']:,} | {e['q2']:,} | {e['estimate']:,.1f} | "
                         f"{e['low']:,.1f} - {e['high']:,.1f} | {100 * e['completeness']:.1f}% | {100 * e['completeness_low']:.1f}% | "
                         f"{100 * e['sample_coverage']:.1f}% |")
    lines.append("")
    lines += ["Sample coverage: the estimated share of what one more unit would meet that was already seen. "
              "Chao2 is a lower bound of the states the walks can reach (exact only when the unseen states are as easy "
              "to reach as those seen once or twice), so seen / estimate is an upper bound of how close the campaign came.", ""]
    if est["q1"] > est["observed"] / 2:
        lines += [f"**Far from saturation**: {est['q1']:,} of the {est['observed']:,} states seen were met in one unit only; "
                  "the estimate is then a weak lower bound and the true remainder may be many times larger "
                  "(measured: recovery-deferral/reference with 3 recoveries, 1,024 traces, estimated 5,493 of 54,116). "
                  "Replay more traces, or longer ones.", ""]
    if s.graph_states_within_length:
        inside = est["low"] <= s.graph_states_within_length <= est["high"]
        lines += [f"Check against the graph: {s.graph_states_within_length:,} states lie within {s.params['length']} steps; "
                  f"the interval {'contains' if inside else 'does not contain'} it.", ""]
    if s.growth_points:
        lines += ["Growth (distinct states seen after the first N traces):", "",
                  "| traces | " + " | ".join(f"{p[0]:,}" for p in s.growth_points) + " |",
                  "|---|" + "---|" * len(s.growth_points),
                  "| states | " + " | ".join(f"{p[1]:,}" for p in s.growth_points) + " |", ""]
    if s.rare_classes:
        lines += ["Rarest kinds of states (a kind: the set of action names a state enables; unit-visits: "
                  "the sampling units that met a state, summed over the kind's states):", "",
                  "| kind | states seen | seen in one unit only | unit-visits | per state |", "|---|---|---|---|---|"]
        for r in s.rare_classes:
            lines.append(f"| {r['class']} | {r['states']:,} | {r['seen_once']:,} | {r['unit_visits']:,} | {r['unit_visits'] / r['states']:.1f} |")
        lines.append("")
    return lines
