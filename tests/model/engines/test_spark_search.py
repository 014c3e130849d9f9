"""The breadth-first search as Spark jobs (model/engines/spark_search.py, issue 36) against the
one-process search: the same states, transitions, depth, states per depth, verdicts and
counterexample lengths, on ``local[2]`` and on a standalone cluster started on 127.0.0.1.  Small
configurations (tens to hundreds of states, about twenty levels: a level costs two Spark stages);
every process the cluster started is checked gone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from conq.conformance.spark_replay import java_problem, spark_session  # noqa: E402
from conq.model.engines.explorer import explore  # noqa: E402
from conq.model.engines.registry import load_model  # noqa: E402
from conq.model.engines.spark_search import LocalStandalone, explore_spark  # noqa: E402
from conq.model.kernel import Kind  # noqa: E402

pytestmark = pytest.mark.skipif(java_problem() is not None, reason="Spark needs Java 17+")

#: (configuration, overrides): a violated step check (acquire without compare-and-set, 512 states);
#: a state packed into two words (73 bits, 114 states); a violated state invariant (33 states)
STEP = ("acquire-no-cas", {"messages": 1})
WIDE = ("small", {"consumers": [[2, True], [1, True], [1, True], [3, True]], "messages": 2, "env_budget": 0})
STATE = ("seed003-earlier", {"env_budget": 0})


def _same_as_one_process(ex, config, overrides):
    model = load_model("consumer-lists", config, overrides)
    ref = explore(model, liveness=False, fingerprints=True)
    assert ex.complete and ref.complete
    assert (ex.states, ex.transitions, ex.depth, ex.level_sizes) == (ref.states, ref.transitions, ref.depth, ref.level_sizes)
    got = [(v.prop.name, v.status, None if v.path is None else len(v.path.steps)) for v in ex.verdicts]
    want = [(v.prop.name, v.status, None if v.path is None else len(v.path.steps)) for v in ref.verdicts]
    assert got == want
    for v in ex.violations:  # each counterexample replays and ends where the property fails
        s = v.path.init
        for a, o, t in v.path.steps:
            assert (a, o, t) in model.successors(s)
            last, s = (s, a, o, t), t
        if v.prop.kind is Kind.ALWAYS:
            assert not v.prop.check(s)
        else:
            assert v.prop.kind is Kind.ALWAYS_STEP and not v.prop.check(*last)
    return ex


def test_local_two_cores_agree_with_the_one_process_search(tmp_path):
    spark = spark_session("local[2]", app="conq-search-test")
    try:
        for config, overrides in (STEP, WIDE):
            ex = explore_spark(spark.sparkContext, "consumer-lists", config, overrides, partitions=3,
                               spill_dir=str(tmp_path))
            _same_as_one_process(ex, config, overrides)
            assert ex.mode == "spark"
            assert [v.prop.name for v in ex.violations] == (["acquired-at-most-once"] if config == STEP[0] else [])
        assert list(tmp_path.iterdir()) == []  # the search's files are gone
    finally:
        spark.stop()


def test_a_standalone_cluster_on_loopback_agrees_and_leaves_nothing(tmp_path, process_tree):
    before = process_tree(os.getpid())
    with LocalStandalone(cores=2, memory="1g") as cluster:
        assert cluster.url.startswith("spark://127.0.0.1:")
        spark = spark_session(cluster.url, app="conq-search-test", conf={"spark.driver.host": "127.0.0.1",
                                                                        "spark.executor.memory": "512m"})
        try:
            ex = explore_spark(spark.sparkContext, "consumer-lists", *STATE, spill_dir=str(tmp_path))
        finally:
            spark.stop()
        _same_as_one_process(ex, *STATE)
        assert [v.prop.name for v in ex.violations] == ["keeps-pulling-while-messages"]
    from pyspark import SparkContext

    jvm = getattr(SparkContext._gateway, "proc", None)  # (the gateway JVM stays for this process by design)
    left = {p for p in process_tree(os.getpid()) - before if jvm is None or p != jvm.pid}
    left = {p for p in left if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[:1]}
    assert not left, [Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in left]
    assert list(tmp_path.iterdir()) == []


def test_conq_check_master_runs_the_spark_search_and_says_what_it_cannot_do(tmp_path):
    import json

    from typer.testing import CliRunner

    from conq.cli import app

    runner = CliRunner()
    for args, why in ((["--partitions", "2"], "give --master too"), (["--master", "local[2]", "--workers", "2"], "--workers"),
                      (["--master", "local[2]", "--symmetry"], "--symmetry"), (["--master", "nowhere"], "not a Spark master URL"),
                      (["--master", "local[2]", "--max-memory", "100"], "spark.executor.memory")):
        res = runner.invoke(app, ["check", "consumer-lists", "--config", STATE[0], *args])
        assert res.exit_code == 2 and why in res.output, (args, res.output)
    res = runner.invoke(app, ["check", "consumer-lists", "--config", STATE[0], "--set", "env_budget=0", "--master", "local[2]",
                              "--partitions", "2", "--spill-dir", str(tmp_path), "--json"])
    assert res.exit_code == 1, res.output  # a violation, as the one-process search finds
    doc = json.loads(res.stdout)
    ref = explore(load_model("consumer-lists", *STATE), liveness=False, fingerprints=True)
    assert (doc["states"], doc["transitions"], doc["depth"], doc["mode"]) == (ref.states, ref.transitions, ref.depth, "spark")
    assert [p["name"] for p in doc["properties"] if p["status"] == "violated"] == [v.prop.name for v in ref.violations]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", range(4))
def test_an_owner_keeps_each_key_once_with_its_smallest_parent(seed):
    """spark_search._first_per_key against sorting by key, parent and arrival: records of one key
    from several senders (distinct parents) and, as a safety net, a parent twice for one key."""
    import numpy as np

    from conq.model.engines.spark_search import _first_per_key

    rng = np.random.default_rng(seed)
    for trial in range(60):
        n = int(rng.integers(0, 300))
        keys = rng.integers(0, 40, n).astype(np.uint64)
        parents = rng.integers(0, 1000, n).astype(np.uint64)
        if trial % 3:  # (the search's case: a key's records have distinct parents)
            _, idx = np.unique(np.stack([keys, parents]), axis=1, return_index=True)
            keys, parents = keys[np.sort(idx)], parents[np.sort(idx)]
        via = np.arange(len(keys), dtype=np.uint32)
        words = np.stack([keys * np.uint64(3), via.astype(np.uint64)])
        order = np.lexsort((via, parents, keys))
        want = order[np.concatenate(([True], keys[order][1:] != keys[order][:-1]))] if len(keys) else order
        k, par, v, w = _first_per_key(keys, parents, via, words)
        assert k.tolist() == keys[want].tolist() and par.tolist() == parents[want].tolist()
        assert v.tolist() == via[want].tolist() and w.tolist() == words[:, want].tolist()
