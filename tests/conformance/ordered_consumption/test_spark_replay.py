"""Spark replay of the ordered-consumption reference on the FIFO push consumer (the main job's
configuration): no divergence, every call kind of the FIFO consumer replayed, coverage measured
against the explorer's graph of the call-level view, and the FIFO witnesses met.  One Spark session."""

from __future__ import annotations

import pytest

from conq.conformance.spark_replay import ReplayParams, run_replay

pytestmark = [pytest.mark.spark, pytest.mark.slow]


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
