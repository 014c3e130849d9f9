"""Spark replay of the ordered-consumption reference on the FIFO push consumer (the main job's
configuration): no divergence, every call kind of the FIFO consumer replayed, coverage measured
against the explorer's graph of the call-level view, and the FIFO witnesses met.  One Spark session."""

from __future__ import annotations

import pytest

from conq.conformance.spark_replay import ReplayParams, run_replay

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.timeout(1800)  # a safety net over 10x the quiet time (147 s at load 20)
def test_replay_of_the_fifo_push_consumer_conforms_and_covers_every_call(tmp_path):
    from conq.conformance.views import conformance_model
    from conq.model.engines.explorer import explore

    params = ReplayParams(model="ordered-consumption", config_name="push-fifo", overrides={"expiry_while_held": False},
                          traces=128, seed=4, length=24, mode="coverage")
    s = run_replay(params, master="local[2]", out=tmp_path / "oc", partitions=2, say=lambda m: None)
    assert s.ok and s.traces == 128 and s.steps == 128 * 24, s.violations[:1]
    graph = explore(conformance_model("ordered-consumption", "push-fifo", {"expiry_while_held": False}),
                    liveness=False).state_list
    assert s.graph_states == len(graph) and 0 < s.states_covered <= s.graph_states
    assert "states reached that the explorer does not know" not in s.missed
    assert s.actions_covered == ["ack_answer", "create_process_queue", "dispatch", "drop_process_queue", "expire",
                                 "forward_to_dlq_answer", "listener_returns", "next_attempt_delay", "receive_answer"]
    assert {"fifo-one-in-consumption", "fifo-reconsumed-then-acked", "cache-full-waits"} <= set(s.properties_witnessed)
    assert {"FIFO-003", "PUSH-012"} <= set(s.requirements_witnessed)


#: three messages over the two queues of a FIFO push consumer: beyond the explorer's 200,000-state
#: bound (spark_replay.BEYOND_EXPLORER, spec/replay-coverage.md "Targets beyond the explorer")
BEYOND = {"msg_queue": [0, 1, 0], "msg_size": [1, 1, 1]}


def test_fifo_push_consumer_beyond_the_explorer_is_replayed_without_the_graph(tmp_path):
    """The graph is skipped by itself (a known target, matched on the resolved configuration: the
    command line's strings), and coverage is told by fingerprints: growth curve, Chao2 estimate and
    the rarest kinds.  Few traces (two blocks): a check of the wiring, not a campaign."""
    import pyarrow.parquet as pq

    from conq.conformance.spark_replay import graph_out_of_reach

    assert "three messages over two queues" in graph_out_of_reach(
        ReplayParams(model="ordered-consumption", config_name="push-fifo",
                     overrides={"msg_queue": "[0,1,0]", "msg_size": "[1,1,1]"}))
    assert graph_out_of_reach(ReplayParams(model="ordered-consumption", config_name="push-fifo",
                                           overrides={"msg_queue": [0, 1], "msg_size": [1, 1]})) is None
    params = ReplayParams(model="ordered-consumption", config_name="push-fifo", overrides=BEYOND,
                          traces=128, seed=0, length=30, mode="coverage")
    s = run_replay(params, master="local[2]", out=tmp_path / "beyond", partitions=2, say=lambda m: None)
    assert s.traces == 128 and s.graph.startswith("not explored: a FIFO push consumer") and s.graph_states is None
    assert s.unit == "block of 64 traces" and s.units == 2
    est = s.state_estimate
    assert est["observed"] == s.states_covered > 0 and est["estimate"] >= est["observed"] and est["low"] <= est["high"]
    assert s.growth_points[-1] == [128, s.states_covered]
    assert [r["distinct_states"] for r in pq.read_table(tmp_path / "beyond" / "growth.parquet").to_pylist()] == \
        [p[1] for p in s.growth_points]
    assert s.rare_classes and "## How close to exhaustive" in (tmp_path / "beyond" / "report.md").read_text()
    assert {"dispatch", "receive_answer", "create_process_queue", "drop_process_queue"} <= set(s.actions_covered)


def test_fifo_two_queues_a_request_in_flight_is_answered_after_the_thresholds_fell():
    """Was a strict xfail, the minimised trace of ``conq replay ordered-consumption --config push-fifo --set
    msg_queue=[0,1,0] --set msg_size=[1,1,1] --traces 512`` (traces 238-245 and others diverged; also with two
    messages over two queues): queue 0's cache at its threshold (A in consumption, its redelivery behind
    it), queue 1's process queue dropped -- the thresholds rise, queue 0's loop finds room and issues its
    request -- and created again -- the thresholds fall back.  The reference's request stays in flight; the
    model re-checked the cache when the answer came and had the loop waiting.  The model was wrong: seed 001
    checks the limit before receiving (step 3, then step 1) and upstream ``ProcessQueueImpl.receiveMessage``
    checks ``isCacheFull`` before ``receiveMessageImmediately`` and caches whatever comes back; fixed in the
    model (spec/ordered-consumption.md, "A request in flight when the thresholds fall")."""
    from conq.conformance.checker import Checker
    from conq.conformance.spark_replay import target_impl, target_model

    p = ReplayParams(model="ordered-consumption", config_name="push-fifo", overrides={"msg_queue": [0, 1], "msg_size": [1, 1]})
    model = target_model(p)
    trace = [("receive_answer", 0, "ok"), ("expire", 0), ("dispatch", 0), ("receive_answer", 0, "ok"),
             ("drop_process_queue", 1), ("create_process_queue", 1)]
    run = Checker(model, target_impl(p, model)).replay(trace, 0)
    assert run.ok, run.divergence.describe()
    # the model's side: after the trace queue 0 is full again (cache [2, 2] at 2 / 2) and its loop is not waiting
    # (its request, issued while queue 1 was gone, is in flight); the answer comes, then the loop waits
    s = model.init_states()[0]
    for a in trace:
        [(_, s)] = [(o, t) for act, o, t in model.successors(s) if act == a][:1]
    q0 = model.observe(s)["process_queues"][0]
    assert q0["cache"] == [2, 2] and not q0["waiting"]
    [(o, t)] = model.step(s, ("receive_answer", 0, "ok"))
    assert o == () and model.observe(t)["process_queues"][0]["waiting"]
