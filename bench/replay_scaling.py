"""Spark replay: checked steps per second per core, in-process vs Spark (issue 20).

One command:  .venv/bin/python bench/replay_scaling.py [--sizes 4096,40960] [--repeats N] [--model M --config C --impl SPEC]

Prints, for each size, side by side:
* the in-process loop (``replay_blocks``: the same per-trace work, no Spark,
  one core) in checked steps/s -- the physical limit per core;
* Spark local[1] and local[2], each job in a kept session (``run_replay(keep_session=True)``:
  what ``conq run``'s replays and ``conq replay --config A --config B`` get after their first
  replay): steps/s and the ratio to that limit, the headline being the **efficiency of local[2]
  against two in-process loops** (steps/s at local[2] / (2 x in-process steps/s); goal >= 0.85 at
  40,960 traces and >= 0.6 at 4,096), plus Spark's overhead per trace at local[1] against the
  in-process loop;
* where the last local[2] job's time went (``spark_replay.LAST_JOB``): the stage's wall time, the
  tasks' CPU seconds in their Python workers against the in-process loop's CPU seconds (a ratio the
  load of a shared machine does not distort), the driver's merge;
* the per-job fixed cost at local[2] (session start-up aside): a one-trace job in a kept session,
  and the first job of a session (Python workers started, conq imported, the model set up: what a
  lone ``conq replay`` pays), the intercept of job time against traces between the sizes
  (goal <= 3 s);
* the parallel efficiency Spark against Spark (local[2] / 2 x local[1]);
* the job as it was before issue 20 (``run_replay(legacy=True)``, a fresh session per job: rows
  through the JVM, Spark's Parquet writer, a coverage shuffle, eight summary queries and a sorted
  shuffle after the writes) as the column "old local[2]", timed in the same run.

One SparkContext per process: the columns are measured session by session, the in-process loop
beside every Spark job (so the load of a shared machine falls on both alike).

``--beyond`` measures instead the replay targets whose graph the explorer does not complete
(``spark_replay.BEYOND_EXPLORER``, and ``THREAD_BEYOND_EXPLORER`` at ``--level thread`` in random mode;
no graph, coverage by fingerprints, Chao2 estimate): for each
target and size, the in-process loop and Spark ``--master`` (default local[*]) side by side --
seconds of the job, of the whole run with the Spark session, distinct states seen, the estimate and
its interval -- which is what decides whether a target fits the main job (< ~40 s on local[*]):

    .venv/bin/python bench/replay_scaling.py --beyond --sizes 1024,2048 --repeats 1

Spark start-up is excluded from the timed part: ``run_replay`` reports the
job alone (``job_seconds``: generation, replay, aggregation, Parquet writes,
the summary's figures).  Every number of a size is measured in the same run, the
ratios from medians of ``--repeats`` runs.  The load average is printed: on
a shared machine the ratios, not the absolute rates, are what to compare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parent.parent


def in_process(params, repeats: int) -> tuple[float, int]:
    from conq.conformance.spark_replay import BLOCK, replay_blocks

    times, steps = [], 0
    blocks = range((params.traces + BLOCK - 1) // BLOCK)
    for _ in range(repeats):
        t0 = time.perf_counter()
        steps = sum(r[3] for r in replay_blocks(params, blocks) if r[0] == "trace")
        times.append(time.perf_counter() - t0)
    return statistics.median(times), steps


def in_process_cpu(params) -> float:
    """CPU seconds of one in-process loop (immune to the other processes of a shared machine)."""
    from conq.conformance.spark_replay import BLOCK, replay_blocks

    c0 = time.process_time()
    for _ in replay_blocks(params, range((params.traces + BLOCK - 1) // BLOCK)):
        pass
    return time.process_time() - c0


def spark(params, master: str, repeats: int, legacy: bool = False, keep: bool = False) -> tuple[float, int]:
    """Median ``job_seconds`` of ``repeats`` jobs.  ``keep``: in the kept session (what ``conq run``
    and ``conq replay --config A --config B`` give every replay after the first); else each job in
    a fresh session, as every job ran before issue 20."""
    from conq.conformance import spark_replay as sr

    times, steps = [], 0
    for _ in range(repeats):
        with TemporaryDirectory() as d:
            s = sr.run_replay(params, master=master, out=Path(d) / "out", truth=False, say=lambda m: None, legacy=legacy,
                              keep_session=keep)
        steps = s.steps
        times.append(s.job_seconds)
    return statistics.median(times), steps


#: the columns of the main table: (label, master, legacy job?, kept session?)
COLUMNS = (("in-process", None, False, False), ("local[1]", "local[1]", False, True), ("local[2]", "local[2]", False, True),
           ("old local[2]", "local[2]", True, False))


def measure(sizes: list[int], repeats: dict[int, int], base) -> tuple[dict, dict, dict]:
    """Per size and column, the seconds of every repeat, and the checked steps.  One SparkContext
    per process, so the columns are taken session by session: the old job first (a fresh session
    per job, as before issue 20), then a kept local[1] session, then a kept local[2] session (each
    opened by its first job, timed apart as "first job of a session"); the in-process loop runs
    beside every Spark job, so the load of a shared machine falls on both alike."""
    from conq.conformance import spark_replay as sr

    times = {n: {c[0]: [] for c in COLUMNS} for n in sizes}
    steps: dict[int, set] = {n: set() for n in sizes}
    first: dict[str, float] = {}
    cpu: dict[int, dict[str, float]] = {}
    for label, master, legacy, keep in COLUMNS[1:][::-1]:
        if keep:
            sr.close_session()
            # the session's first job: JVM class loading and JIT, the Python workers' start-up and
            # imports, the model's set-up -- paid once per session, reported apart
            first[master] = spark(base, master, 1, keep=True)[0]
        else:
            spark(base, master, 1)  # a first job in this JVM pays class loading and JIT once: untimed
        for n in sizes:
            p = sr.ReplayParams(**{**base.__dict__, "traces": n})
            for _ in range(repeats[n]):
                t, k = in_process(p, 1)
                times[n]["in-process"].append(t)
                steps[n].add(k)
                t, k = spark(p, master, 1, legacy=legacy, keep=keep)
                times[n][label].append(t)
                steps[n].add(k)
            if label == "local[2]":  # where the CPU went in the last job (sr.LAST_JOB), against the loop's
                job = dict(sr.LAST_JOB)
                cpu[n] = {"in-process": in_process_cpu(p), "tasks": sum(job["task_cpu_seconds"]),
                          "stage": job["stage_seconds"], "merge": job["merge_seconds"],
                          "task wall": sum(job["task_seconds"])}
    warm = {}
    for master in ("local[2]",):
        warm[master] = spark(base, master, repeats[sizes[0]], keep=True)[0]
    sr.close_session()
    for n in sizes:
        assert len(steps[n]) == 1, steps[n]
    return ({n: {k: statistics.median(v) for k, v in t.items()} for n, t in times.items()},
            {n: steps[n].pop() for n in sizes}, {"first": first, "warm": warm, "cpu": cpu})


def beyond(sizes: list[int], length: int, repeats: int, master: str) -> int:
    """The targets beyond the explorer: cost and what the campaign saw, per size."""
    import json

    from conq.conformance import spark_replay as sr
    from conq.conformance.coverage_estimate import chao2
    from conq.conformance.spark_replay import incidence_in_process

    print(f"targets beyond the explorer, length {length}, {os.cpu_count()} CPUs, master {master}; load average at start: {load()}")
    targets = [(f"{model}/{config} {overrides}", dict(model=model, config_name=config, overrides=json.loads(overrides),
                                                       mode="coverage"), why)
               for (model, config, overrides), why in sr.BEYOND_EXPLORER.items()]
    # the thread level's (--level thread), in random mode: coverage-guided walks stay in few thread-level
    # states there (spec/replay-coverage.md, "Ordered consumption and the thread level")
    targets += [(f"consumer-lists --level thread --mode random {config} {overrides}",
                 dict(model="consumer-lists", config_name=config, overrides=json.loads(overrides), level="thread",
                      mode="random"), why)
                for (config, overrides), why in sr.THREAD_BEYOND_EXPLORER.items()]
    for title, target, why in targets:
        print()
        print(f"{title}: {why}")
        print(f"{'traces':>8}{'in-proc s':>11}{'job s':>8}{'run s':>8}{'steps':>10}{'states':>8}{'Chao2':>9}{'95% CI':>18}{'seen/est':>10}")
        for n in sizes:
            p = sr.ReplayParams(**target, traces=n, length=length, minimise=False)
            t_in = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                freqs, units, _growth = incidence_in_process(p)
                t_in.append(time.perf_counter() - t0)
            e_in = chao2(freqs["state"], units)
            jobs, runs, s = [], [], None
            for _ in range(repeats):
                with TemporaryDirectory() as d:
                    t0 = time.perf_counter()
                    s = sr.run_replay(p, master=master, out=Path(d) / "out", say=lambda m: None)
                    runs.append(time.perf_counter() - t0)
                jobs.append(s.job_seconds)
            e = s.state_estimate
            assert e["observed"] == e_in.observed and s.graph.startswith("not explored"), (e, e_in, s.graph)
            print(f"{n:>8,}{statistics.median(t_in):>11.2f}{statistics.median(jobs):>8.2f}{statistics.median(runs):>8.2f}"
                  f"{s.steps:>10,}{e['observed']:>8,}{e['estimate']:>9,.0f}{e['low']:>9,.0f}-{e['high']:<8,.0f}"
                  f"{100 * e['completeness']:>9.1f}%")
    print(f"load average at the end: {load()}")
    print("(run s: the whole run_replay with Spark session start-up, as the main job pays it; job s: the Spark job alone)")
    return 0


def load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="consumer-lists")
    ap.add_argument("--config", default="reference")
    ap.add_argument("--impl", default="reference")
    ap.add_argument("--sizes", default="4096,40960", help="comma-separated trace counts")
    ap.add_argument("--length", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the smallest size (larger sizes: --big-repeats)")
    ap.add_argument("--big-repeats", type=int, default=3)
    ap.add_argument("--beyond", action="store_true", help="measure the targets beyond the explorer (no graph, Chao2)")
    ap.add_argument("--master", default="local[*]", help="--beyond: the Spark master")
    args = ap.parse_args()
    if args.beyond:
        return beyond([int(x) for x in args.sizes.split(",")], args.length, args.repeats, args.master)
    from conq.conformance.spark_replay import ReplayParams

    sizes = [int(x) for x in args.sizes.split(",")]
    base = ReplayParams(model=args.model, config_name=args.config, traces=1, length=args.length, impl=args.impl, minimise=False)
    print(f"{args.model}/{args.config}, length {args.length}, {os.cpu_count()} CPUs; load average at start: {load()}")
    repeats = {n: (args.repeats if i == 0 else args.big_repeats) for i, n in enumerate(sizes)}
    results, steps, extra = measure(sizes, repeats, base)
    labels = [c[0] for c in COLUMNS]
    for n in sizes:
        t = results[n]
        print()
        print(f"{n:,} traces ({steps[n]:,} checked steps); medians of {repeats[n]}; load average now: {load()}")
        print(f"{'':34}" + "".join(f"{c:>14}" for c in labels))
        print(f"{'job seconds':34}" + "".join(f"{t[c]:14.2f}" for c in labels))
        print(f"{'checked steps/s':34}" + "".join(f"{steps[n] / t[c]:14,.0f}" for c in labels))
        print(f"{'vs one in-process core':34}" + "".join(f"{t['in-process'] / t[c]:14.2f}" for c in labels))
        print(f"{'efficiency vs 2 in-process loops':34}{'':14}{'':14}"
              + "".join(f"{t['in-process'] / (2 * t[c]):14.2f}" for c in ("local[2]", "old local[2]"))
              + f"   (goal for local[2] >= {0.85 if n >= 40960 else 0.6})")
        print(f"Spark overhead per trace at local[1]: {1000 * (t['local[1]'] - t['in-process']) / n:.3f} ms;"
              f" parallel efficiency Spark vs Spark (local[2] / 2 x local[1]): {t['local[1]'] / (2 * t['local[2]']):.2f}")
        c = extra["cpu"].get(n)
        if c:
            print(f"where the last local[2] job went: stage {c['stage']:.2f} s wall (tasks: {c['tasks']:.2f} s CPU, "
                  f"{c['task wall']:.2f} s wall summed), driver merge {c['merge']:.2f} s; the in-process loop: "
                  f"{c['in-process']:.2f} s CPU -> CPU efficiency (loop CPU / task CPU) {c['in-process'] / c['tasks']:.2f}")
    print()
    print(f"per-job fixed cost at local[2] (a 1-trace job, session aside): {extra['warm']['local[2]']:.2f} s in a kept session "
          f"(median of {repeats[sizes[0]]}); the first job of a session {extra['first']['local[2]']:.2f} s "
          f"(local[1]: {extra['first']['local[1]']:.2f} s) (goal <= 3 s)")
    if len(sizes) >= 2:
        (n1, r1), (n2, r2) = (sizes[0], results[sizes[0]]), (sizes[-1], results[sizes[-1]])
        for c in ("local[2]", "old local[2]"):
            per_trace = (r2[c] - r1[c]) / (n2 - n1)
            print(f"{c} job time = {r1[c] - per_trace * n1:.2f} s + {1000 * per_trace:.3f} ms/trace (intercept between {n1:,} and {n2:,})")
    print(f"load average at the end: {load()}")
    print("(Spark session start-up excluded; local[1] and local[2]: jobs in a kept session, as conq run's replays and "
          "conq replay --config A --config B run; old local[2]: the job before issue 20, a fresh session per job; "
          "in-process = replay_blocks, the same per-trace work in one Python loop)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
