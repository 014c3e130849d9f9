"""Spark replay: checked steps per second per core, in-process vs Spark (issue 20).

One command:  .venv/bin/python bench/replay_scaling.py [--sizes 4096,40960] [--repeats N] [--model M --config C --impl SPEC]

Prints, for each size, side by side:
* the in-process loop (``replay_blocks``: the same per-trace work, no Spark,
  one core) in checked steps/s -- the physical limit per core;
* Spark local[1] and local[2]: steps/s and the ratio to that limit,
  the headline being the **efficiency of local[2] against two in-process
  loops** (steps/s at local[2] / (2 x in-process steps/s); goal >= 0.85 at
  40,960 traces and >= 0.6 at 4,096), plus Spark's overhead per trace at
  local[1] against the in-process loop;
* the per-job fixed cost at local[2] (session start-up aside): the job time of
  a one-trace replay, and the intercept of job time against traces between the
  sizes (goal <= 3 s);
* the parallel efficiency Spark against Spark (local[2] / 2 x local[1]).

``--beyond`` measures instead the replay targets whose graph the explorer does not complete
(``spark_replay.BEYOND_EXPLORER``; no graph, coverage by fingerprints, Chao2 estimate): for each
target and size, the in-process loop and Spark ``--master`` (default local[*]) side by side --
seconds of the job, of the whole run with the Spark session, distinct states seen, the estimate and
its interval -- which is what decides whether a target fits the main job (< ~40 s on local[*]):

    .venv/bin/python bench/replay_scaling.py --beyond --sizes 1024,2048 --repeats 1

Spark start-up is excluded from the timed part: ``run_replay`` reports the
job alone (``job_seconds``: generation, replay, aggregation, Parquet writes,
summary queries).  Every number of a size is measured in the same run, the
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


def spark(params, master: str, repeats: int) -> tuple[float, int]:
    from conq.conformance import spark_replay as sr

    times, steps = [], 0
    for _ in range(repeats):
        with TemporaryDirectory() as d:
            s = sr.run_replay(params, master=master, out=Path(d) / "out", truth=False, say=lambda m: None)
        steps = s.steps
        times.append(s.job_seconds)
    return statistics.median(times), steps


def beyond(sizes: list[int], length: int, repeats: int, master: str) -> int:
    """The targets beyond the explorer: cost and what the campaign saw, per size."""
    import json

    from conq.conformance import spark_replay as sr
    from conq.conformance.coverage_estimate import chao2, incidence_in_process

    print(f"targets beyond the explorer, length {length}, {os.cpu_count()} CPUs, master {master}; load average at start: {load()}")
    for (model, config, overrides), why in sr.BEYOND_EXPLORER.items():
        print()
        print(f"{model}/{config} {overrides}: {why}")
        print(f"{'traces':>8}{'in-proc s':>11}{'job s':>8}{'run s':>8}{'steps':>10}{'states':>8}{'Chao2':>9}{'95% CI':>18}{'seen/est':>10}")
        for n in sizes:
            p = sr.ReplayParams(model=model, config_name=config, overrides=json.loads(overrides), traces=n, length=length,
                                mode="coverage", minimise=False)
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
    ap.add_argument("--big-repeats", type=int, default=1)
    ap.add_argument("--beyond", action="store_true", help="measure the targets beyond the explorer (no graph, Chao2)")
    ap.add_argument("--master", default="local[*]", help="--beyond: the Spark master")
    args = ap.parse_args()
    if args.beyond:
        return beyond([int(x) for x in args.sizes.split(",")], args.length, args.repeats, args.master)
    from conq.conformance.spark_replay import ReplayParams

    sizes = [int(x) for x in args.sizes.split(",")]
    base = ReplayParams(model=args.model, config_name=args.config, traces=1, length=args.length, impl=args.impl, minimise=False)
    print(f"{args.model}/{args.config}, length {args.length}, {os.cpu_count()} CPUs; load average at start: {load()}")
    results = {}
    for i, n in enumerate(sizes):
        reps = args.repeats if i == 0 else args.big_repeats
        p = ReplayParams(**{**base.__dict__, "traces": n})
        t_in, steps = in_process(p, reps)
        t1, s1 = spark(p, "local[1]", reps)
        t2, s2 = spark(p, "local[2]", reps)
        assert steps == s1 == s2, (steps, s1, s2)
        results[n] = (t_in, t1, t2, steps)
        rate_in, rate1, rate2 = steps / t_in, s1 / t1, s2 / t2
        print()
        print(f"{n:,} traces ({steps:,} checked steps); medians of {reps}; load average now: {load()}")
        print(f"{'':28}{'in-process':>12}{'local[1]':>12}{'local[2]':>12}")
        print(f"{'seconds':28}{t_in:12.2f}{t1:12.2f}{t2:12.2f}")
        print(f"{'checked steps/s':28}{rate_in:12,.0f}{rate1:12,.0f}{rate2:12,.0f}")
        print(f"{'vs one in-process core':28}{1.0:12.2f}{rate1 / rate_in:12.2f}{rate2 / rate_in:12.2f}")
        print(f"efficiency of local[2] vs two in-process loops: {rate2 / (2 * rate_in):.2f}"
              f" (goal >= {0.85 if n >= 40960 else 0.6})")
        print(f"Spark overhead per trace at local[1]: {1000 * (t1 - t_in) / n:.3f} ms;"
              f" parallel efficiency Spark vs Spark: {rate2 / (2 * rate1):.2f}")
    # measured last, in a warm JVM (the first job of a JVM pays class loading and JIT once)
    t_fixed, _ = spark(base, "local[2]", args.repeats)
    print()
    print(f"per-job fixed cost at local[2] (a 1-trace job in a warm JVM, session aside): {t_fixed:.2f} s (goal <= 3 s)")
    if len(sizes) >= 2:
        (n1, r1), (n2, r2) = (sizes[0], results[sizes[0]]), (sizes[-1], results[sizes[-1]])
        per_trace = (r2[2] - r1[2]) / (n2 - n1)
        print(f"local[2] job time = {r1[2] - per_trace * n1:.2f} s + {1000 * per_trace:.3f} ms/trace (intercept between {n1:,} and {n2:,})")
        print(f"scaling at local[2]: {n2:,} traces took {r2[2]:.2f} s = {r2[2] / r1[2]:.2f}x the time of {n1:,}")
    print(f"load average at the end: {load()}")
    print("(Spark session start-up excluded; in-process = replay_blocks, the same per-trace work in one Python loop)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
