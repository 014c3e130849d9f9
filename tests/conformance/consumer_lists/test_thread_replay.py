"""Spark replay at the thread-step level (issue 20, "Where replay earns its keep": thread-level traces
once the step-level protocol exists): ``conq replay consumer-lists --level thread`` replays walks of
the thread-step view (conformance/consumer_lists/thread_steps.py: the checker chooses the
interleaving, the reference runs under the deterministic scheduler) in Spark tasks, with coverage by
the fingerprints of the thread-level model's states.  Same determinism rule as the call level:
trace i comes from (root seed, i) and its block, whatever the partitioning."""

from __future__ import annotations

import pytest

from conq.conformance.consumer_lists.thread_steps import thread_model
from conq.conformance.ordered_consumption.thread_steps import thread_model as ordered_thread_model
from conq.conformance.spark_replay import (ReplayError, ReplayParams, close_session, graph_out_of_reach,
                                           replay_blocks, replay_one, run_replay, target_model)


def thread(**kw) -> ReplayParams:
    base = dict(model="consumer-lists", config_name="credit", traces=128, seed=3, length=30, mode="coverage",
                level="thread")
    base.update(kw)
    return ReplayParams(**base)


def test_thread_level_targets_and_their_errors():
    assert target_model(thread()).config == thread_model("credit").config
    assert target_model(thread(config_name=None)).config == thread_model("one-acquirer").config
    with pytest.raises(ReplayError, match="no thread-level configuration 'small'"):
        target_model(thread(config_name="small"))
    # (every system has a thread level since issue 35, each with its own configurations)
    with pytest.raises(ReplayError, match="no thread-level configuration 'reference'"):
        target_model(thread(model="ordered-consumption", config_name="reference"))
    assert target_model(thread(model="ordered-consumption", config_name="push-fifo")).config == \
        ordered_thread_model("push-fifo").config
    with pytest.raises(ReplayError, match="--level must be call or thread"):
        target_model(thread(level="step"))
    # the thread-level target beyond the explorer, matched on the resolved configuration (strings
    # from the command line); its smaller neighbour is explored
    big = thread(config_name="credit-same-priority", overrides={"messages": "3", "consumers": "[[1,true],[1,true],[1,true]]"})
    assert "three acquirers of one priority" in graph_out_of_reach(big)
    assert graph_out_of_reach(thread(config_name="credit-same-priority", overrides={"messages": 3})) is None
    assert graph_out_of_reach(thread()) is None


def test_a_thread_level_trace_is_the_same_alone_and_in_its_block():
    p = thread(traces=100)
    block = [r for r in replay_blocks(p, [1]) if r[0] == "trace"]
    assert [r[1] for r in block] == list(range(64, 100)) and all(r[4] for r in block)
    assert replay_one(p, 70) == block[6]
    assert block[6][9].endswith("--level thread --only 70")
    actions = {r[2] for r in replay_blocks(p, [0]) if r[0] == "cover" and r[1] == "action"}
    # thread steps are named by the model step they ran (the observation's label), not "step"
    assert {"target_flag", "set_notify_work_desired", "acquire", "credit"} <= actions and "step" not in actions


@pytest.mark.spark
@pytest.mark.slow
def test_thread_level_replay_on_spark_is_deterministic_and_finds_a_thread_only_mutant(tmp_path):
    """One kept Spark session: ``credit`` at thread level on 1 and 3 partitions (same coverage rows,
    coverage against the thread-level graph), then the mutant ``unnotify-after-scan`` (a pull that
    un-notifies only after scanning: visible between a pull's steps only) found, its trace replayed
    alone in this process."""
    import pyarrow.parquet as pq

    from conq.model.engines.explorer import explore

    def cover(out):
        return sorted(tuple(str(v) for v in r.values()) for r in pq.read_table(out / "coverage").to_pylist())

    try:
        one = run_replay(thread(), master="local[2]", out=tmp_path / "one", partitions=1, say=lambda m: None,
                         keep_session=True)
        three = run_replay(thread(), master="local[2]", out=tmp_path / "three", partitions=3, say=lambda m: None,
                           keep_session=True)
        assert one.ok and three.ok and cover(tmp_path / "one") == cover(tmp_path / "three")
        assert one.state_estimate == three.state_estimate and one.growth_points == three.growth_points
        assert one.graph == "explored" and one.graph_states == len(explore(thread_model("credit"), liveness=False).state_list)
        assert 0 < one.states_covered <= one.graph_states and "explorer does not know" not in one.missed
        bad = run_replay(thread(config_name="one-acquirer", impl="mutant:unnotify-after-scan", traces=64),
                         master="local[2]", out=tmp_path / "bad", partitions=2, say=lambda m: None, keep_session=True)
    finally:
        close_session()
    assert not bad.ok and bad.violations
    v = bad.violations[0]
    assert "--level thread" in v["replay"] and "--impl 'mutant:unnotify-after-scan'" in v["replay"]
    alone = replay_one(thread(config_name="one-acquirer", impl="mutant:unnotify-after-scan", traces=64), v["index"])
    assert alone[4] is False and alone[7] == v["divergence"]
