"""Spark replay: checked steps per second per core, in-process vs Spark.

One command:  .venv/bin/python bench/replay_scaling.py [--traces N] [--model M --config C --impl SPEC]

Prints, side by side:
* the in-process loop (the same per-trace work, no Spark) in steps/s;
* Spark local[1] and local[2]: steps/s, parallel efficiency
  (steps/s at local[2] / (2 x steps/s at local[1])), and Spark's overhead
  per trace against the in-process loop;
* scaling: the time of 10x the traces against 1x at local[2] (goal <= 11x).

Spark start-up is excluded from the timed part: ``run_replay`` reports the
job alone (``job_seconds``: generation, replay, aggregation, Parquet writes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parent.parent


def in_process(params, repeats: int) -> tuple[float, float]:
    from conq.conformance.spark_replay import BLOCK, replay_blocks

    times, steps = [], 0
    blocks = range((params.traces + BLOCK - 1) // BLOCK)
    for _ in range(repeats):
        t0 = time.perf_counter()
        steps = sum(r[3] for r in replay_blocks(params, blocks) if r[0] == "trace")
        times.append(time.perf_counter() - t0)
    return statistics.median(times), steps


def spark(params, master: str, repeats: int) -> tuple[float, float]:
    from conq.conformance import spark_replay as sr

    times, steps = [], 0
    for _ in range(repeats):
        with TemporaryDirectory() as d:
            s = sr.run_replay(params, master=master, out=Path(d) / "out", truth=False, say=lambda m: None)
        steps = s.steps
        times.append(s.job_seconds)
    return statistics.median(times), steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="consumer-lists")
    ap.add_argument("--config", default="small")
    ap.add_argument("--impl", default="reference")
    ap.add_argument("--traces", type=int, default=2000)
    ap.add_argument("--length", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from conq.conformance.spark_replay import ReplayParams

    p = ReplayParams(model=args.model, config_name=args.config, traces=args.traces, length=args.length, impl=args.impl, minimise=False)
    t_in, steps = in_process(p, args.repeats)
    t1, s1 = spark(p, "local[1]", args.repeats)
    t2, s2 = spark(p, "local[2]", args.repeats)
    big = ReplayParams(**{**p.__dict__, "traces": p.traces * 10})
    t10, _ = spark(big, "local[2]", 1)
    rate_in, rate1, rate2 = steps / t_in, s1 / t1, s2 / t2
    print(f"{args.model}/{args.config}: {args.traces:,} traces x {args.length} steps ({steps:,} checked steps); medians of {args.repeats}")
    print(f"{'':24}{'in-process':>14}{'local[1]':>14}{'local[2]':>14}")
    print(f"{'seconds':24}{t_in:14.2f}{t1:14.2f}{t2:14.2f}")
    print(f"{'checked steps/s':24}{rate_in:14,.0f}{rate1:14,.0f}{rate2:14,.0f}")
    print(f"{'steps/s per core':24}{rate_in:14,.0f}{rate1:14,.0f}{rate2 / 2:14,.0f}")
    print(f"{'vs in-process':24}{1.0:14.2f}{rate1 / rate_in:14.2f}{rate2 / rate_in:14.2f}")
    print(f"parallel efficiency at local[2]: {rate2 / (2 * rate1):.2f} (goal >= 0.85)")
    print(f"Spark overhead per trace at local[1]: {1000 * (t1 - t_in) / args.traces:.3f} ms")
    print(f"scaling at local[2]: {10 * args.traces:,} traces took {t10:.2f} s = {t10 / t2:.2f}x the time of {args.traces:,} (goal <= 11x)")
    print("(Spark session start-up excluded; in-process = the same per-trace work in one Python loop)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
