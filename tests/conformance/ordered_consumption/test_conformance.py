"""The reference ordered-consumption implementation held to the model at the granularity of its
calls: the call-level view (every state a model state, internal steps composed), the driver (the
server's answer named by the call and given by the implementation's own fault injection; the
environment's rules), the golden corpus, generated traces on every role, the port protocol, the
command line, and the reference against the model where the two disagreed (issue 14): a
redelivery waits behind the copy still consumed or settled (fixed in the reference; its old
dispatch is the mutant ``redelivery-overtakes-settlement``), and the simple consumer's round-robin
after a failed receive (the model's rule, pinned until the model changes).

Every verdict is a function of the actions and the implementation's answers: the driver waits for
states of the implementation, never for durations (its safety cap is an error, not a verdict).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conq.cli import app
from conq.conformance.adapters import REJECTED, ActionRejected, InProcess
from conq.conformance.checker import Checker, check_recorded
from conq.conformance.ordered_consumption import build_corpus as corpus
from conq.conformance.ordered_consumption import mutants
from conq.conformance.ordered_consumption.calls import OrderedConsumptionCalls
from conq.conformance.ordered_consumption.driver import OrderedConsumptionDriver
from conq.conformance.ordered_consumption.thread_steps import STEP_KINDS, THREAD_CONFIGS
from conq.conformance.suite import run_suite
from conq.conformance.trace import read
from conq.conformance.views import conformance_model
from conq.model.kernel import config_dict

CORPUS = Path(corpus.__file__).resolve().parent / "corpus"
MODEL = "ordered-consumption"
runner = CliRunner()


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    """The driver joins every thread of the implementation's it knows at close."""
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    for t in leftover:
        t.join(5.0)
    assert not [t.name for t in leftover if t.is_alive()]


def driver(config: str, seed: int = 0, **overrides) -> OrderedConsumptionDriver:
    return OrderedConsumptionDriver(config_dict(conformance_model(MODEL, config, overrides or None).config), seed)


# -- the view ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config, overrides", [
    ("producer", {}), ("simple", {}),
    ("push-standard", {"expiry_while_held": False, "rebalance": False}),
    ("push-fifo", {"expiry_while_held": False, "rebalance": False}),
], ids=["producer", "simple", "push-standard", "push-fifo"])
def test_every_state_of_the_view_is_a_model_state(config, overrides):
    """The view only composes model steps: its reachable states are model states (the model's own
    exploration reaches each of them) and the model's state properties hold on all of them.  (The
    push roles without expiry while held and rebalance keep the two explorations small; the full
    configurations are explored by the mutants' and the replay's coverage truth.)"""
    from conq.model.engines.explorer import explore

    m = conformance_model(MODEL, config, overrides or None)
    assert isinstance(m, OrderedConsumptionCalls)
    view = explore(m, liveness=False)
    base = set(explore(m.base, liveness=False).state_list)
    assert view.ok, [(v.prop.name, v.status) for v in view.verdicts if not v.ok]
    assert set(view.state_list) <= base and len(view.state_list) < len(base)


def test_a_call_names_the_answer_and_composes_the_internal_steps():
    m = conformance_model(MODEL, "push-fifo")
    s = m.init_states()[0]
    assert m.actions(s) == [("receive_answer", 0, "ok"), ("receive_answer", 0, "lost"), ("receive_answer", 0, "error"),
                            ("drop_process_queue", 0)]
    [(o, s)] = m.step(s, ("receive_answer", 0, "ok"))
    assert o == ((0, 1),)  # the server gate: one message of a FIFO queue at a time
    [(o, s)] = m.step(s, ("dispatch", 0))
    assert o == (0,)  # locked and taken in one call
    [(o, s)] = m.step(s, ("listener_returns", 0, "ok"))
    assert o == ("ok", 1)
    [(o, t)] = m.step(s, ("ack_answer", 0, "ok"))
    assert o == "ok" and m.observe(t)["process_queues"][0]["notified"]  # unlocked and signalled, composed
    assert not m.observe(t)["process_queues"][0]["locked"]


# -- the driver -------------------------------------------------------------------------------------------


def test_the_driver_makes_the_implementation_take_each_named_answer():
    d = driver("push-fifo", expiry_while_held=False)
    try:
        assert d.do(("receive_answer", 0, "ok")) == ((0, 1),)
        assert d.do(("dispatch", 0)) == (0,)
        assert d.do(("listener_returns", 0, "fail")) == ("fail", 1)
        assert d.snapshot()["messages"][0]["client"] == "retry-delay"
        assert d.do(("next_attempt_delay", 0)) == "elapsed"
        assert d.do(("listener_returns", 0, "fail")) == ("fail", 2)  # the local attempt: delivery 1 + 1
        assert d.do(("forward_to_dlq_answer", 0, "error")) == "error"  # retriable: repeated
        assert d.do(("forward_to_dlq_answer", 0, "ok")) == "ok"
        snap = d.snapshot()
        assert snap["messages"][0] == {"server": "dlq-by-client", "attempt": 1, "client": "-", "pending": False}
        assert snap["process_queues"][0] == {"assigned": True, "notified": True, "locked": False, "waiting": False,
                                             "cache": [0, 0]}
        assert d.do(("receive_answer", 0, "ok")) == ((1, 1),)
    finally:
        d.close()


def test_the_driver_enforces_the_environments_rules_and_reports_what_the_implementation_cannot():
    impl = InProcess(OrderedConsumptionDriver)
    impl.start(MODEL, config_dict(conformance_model(MODEL, "push-standard", {"expiry_while_held": False}).config), 0)
    try:
        assert impl.do(("dispatch", 0)) == REJECTED  # nothing signalled the dispatcher
        assert impl.do(("receive_answer", 1, "ok")) == REJECTED  # queue 1's loop has nothing to receive
        assert impl.do(("expire", 1)) == REJECTED  # not delivered: nothing to expire
        assert impl.do(("receive_answer", 0, "lost")) == ("lost", ((0, 1),))
        assert impl.do(("receive_answer", 0, "ok")) == ((1, 1),)
        assert impl.do(("expire", 1)) == REJECTED  # held by the client: no expiry in this configuration
        assert impl.do(("expire", 0)) == "visible"  # nobody holds it: its invisible time runs out
        assert impl.driver.snapshot()["process_queues"][0]["waiting"]  # 2 bytes cached: the loop waits for room
        assert impl.do(("receive_answer", 0, "ok")) == REJECTED
        assert impl.do(("simple_receive", "ok")) == REJECTED  # another role
    finally:
        impl.close()
    with pytest.raises(ValueError, match="reference switches"):
        driver("mutant-fifo-no-lock")


def test_the_producer_scenario_comes_from_the_seed_and_the_snapshot_says_which():
    m = conformance_model(MODEL, "producer")
    inits = {json.dumps(m.observe(s), sort_keys=True) for s in m.init_states()}
    seen = set()
    for seed in range(12):
        d = driver("producer", seed)
        try:
            snap = d.snapshot()
        finally:
            d.close()
        assert json.dumps(snap, sort_keys=True) in inits
        seen.add(json.dumps(snap, sort_keys=True))
    assert len(seen) > 6


# -- the golden corpus ----------------------------------------------------------------------------------


def test_golden_corpus_verdicts():
    res, model = run_suite(MODEL, traces=0, corpus=CORPUS)
    assert res.corpus >= 40 and res.corpus_ok == res.corpus, [f.describe(model) for f in res.failures]
    traces = [read(p) for p in CORPUS.glob("*.ndjson")]
    assert {t.expect for t in traces} == {"pass", "diverge"}
    assert {p.stem.removeprefix("diverge-").removeprefix("thread-") for p in CORPUS.glob("diverge-*.ndjson")} <= set(mutants.MUTANTS)
    # the thread level's golden traces (issue 35): walks on every thread-level configuration, the shortest
    # trace ending with each thread step, and the interleaving bug no call-level trace shows
    thread = [t for t in traces if t.level == "thread"]
    assert {t.config_name for t in thread} == set(THREAD_CONFIGS)
    assert {t.expect for t in thread} == {"pass", "diverge"}
    assert {p.stem.rsplit("-", 2)[1] for p in CORPUS.glob("pass-thread-*.ndjson") if not p.stem[-1].isdigit()} == set(STEP_KINDS)
    # every call kind of every configuration's view has its shortest trace
    kinds = {p.stem.rsplit("-", 1)[1] for p in CORPUS.glob("pass-*.ndjson")}
    assert {"route_answer", "send_answer", "tick", "receive_answer", "dispatch", "listener_returns", "ack_answer",
            "change_invisible_answer", "forward_to_dlq_answer", "next_attempt_delay", "expire", "drop_process_queue",
            "create_process_queue", "simple_receive", "simple_ack", "simple_change_invisible", "abandon"} <= kinds


def test_a_diverging_golden_trace_is_rejected_at_its_last_step():
    tr = read(CORPUS / "diverge-simple-ack-retries.ndjson")
    d = check_recorded(conformance_model(MODEL, None, tr.config), tr.events)
    assert d is not None and d.step == len(tr.events) and d.action[0] == "simple_ack"


# -- generated traces -------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(len(mutants.TRACE_CONFIGS)), ids=corpus.SLUGS)
@pytest.mark.parametrize("mode", ["random", "coverage"])
def test_reference_conforms_on_generated_traces(k, mode):
    cfg, ov = mutants.TRACE_CONFIGS[k]
    res, model = run_suite(MODEL, config_name=cfg, overrides=ov or None, traces=25, seed=7, length=40, mode=mode)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    # a send is over in a few calls; the consumers' walks run their whole length
    assert res.steps >= (res.traces if cfg == "producer" else 25 * 40)


def test_reference_conforms_on_the_named_producer_configuration_and_upstreams_breaks_the_seed_rule():
    res, model = run_suite(MODEL, config_name="producer", traces=60, seed=1, length=40)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    # with upstream's switch (transactional sends retried), every observation is the upstream
    # model's, and the seed's property fails as the manifest expects of producer-upstream
    res, model = run_suite(MODEL, config_name="producer-upstream", traces=60, seed=1, length=40)
    assert res.failures and {f.result.divergence.kind for f in res.failures} == {"property"}
    assert all("txn-single-attempt" in f.result.divergence.detail for f in res.failures)


# -- the reference's divergences from the model (issue 14) ----------------------------------------------------

#: a redelivery cached while the previous copy is still consumed or settled (C6 of push_consumer): it
#: waits behind that copy and is dispatched when the copy is let go, in one process queue and across a
#: rebalance (the process queue given back receives it while the dropped one still settles the copy)
REDELIVERY_TRACES = {
    "standard-ack-pending": ("push-standard", [
        ("receive_answer", 0, "ok"), ("expire", 1), ("dispatch", 0), ("listener_returns", 1, "ok"),
        ("receive_answer", 0, "ok"), ("dispatch", 0), ("ack_answer", 1, "invalid-handle"), ("dispatch", 0),
        ("listener_returns", 1, "ok"), ("ack_answer", 1, "ok")], 6, ((1, 2),), (1,)),
    "standard-across-a-rebalance": ("push-standard", [
        ("receive_answer", 0, "ok"), ("expire", 0), ("dispatch", 0), ("drop_process_queue", 0),
        ("create_process_queue", 0), ("receive_answer", 0, "ok"), ("dispatch", 0), ("listener_returns", 0, "fail"),
        ("change_invisible_answer", 0, "invalid-handle"), ("dispatch", 0)], 7, ((0, 2),), (0,)),
    "fifo-across-a-rebalance": ("push-fifo", [
        ("receive_answer", 0, "ok"), ("dispatch", 0), ("listener_returns", 0, "fail"), ("next_attempt_delay", 0),
        ("expire", 0), ("drop_process_queue", 0), ("create_process_queue", 0), ("receive_answer", 0, "ok"),
        ("dispatch", 0), ("listener_returns", 0, "ok"), ("ack_answer", 0, "invalid-handle"), ("dispatch", 0)],
        9, ((0, 2),), (0,)),
}


def _replay_redelivery(name: str, drv: type):
    config, actions, *_ = REDELIVERY_TRACES[name]
    checker = Checker(conformance_model(MODEL, config), InProcess(drv))
    try:
        return checker.replay(actions)
    finally:
        checker.impl.close()


@pytest.mark.parametrize("name", sorted(REDELIVERY_TRACES))
def test_a_redelivery_waits_behind_the_copy_still_consumed_or_settled(name):
    """Standard mode erases a message from the cache once consumed (seed 普通 step 3), and a FIFO
    redelivery after a rebalance reaches a process queue with a lock of its own; the model keeps the
    redelivery behind the copy in consumption until that copy is let go (``pending``).  The reference
    conforms (issue 14's divergence F3, fixed: ``push_consumer`` C6)."""
    _, _, step, redelivery, dispatched = REDELIVERY_TRACES[name]
    run = _replay_redelivery(name, OrderedConsumptionDriver)
    assert run.ok, run.divergence.describe()
    assert run.observations[step - 2] == redelivery  # cached while the first copy is still held
    assert run.observations[step - 1] == ()  # not dispatched: it waits behind that copy
    assert dispatched in run.observations[step:]  # dispatched once the copy is let go


@pytest.mark.parametrize("name", sorted(REDELIVERY_TRACES))
def test_divergence_a_redelivery_is_consumed_while_the_previous_copy_is_still_settled(name):
    """The reference's dispatch before the fix, kept as the mutant ``redelivery-overtakes-settlement``:
    the redelivery is cached as a new entry and the dispatcher hands it to a second worker at once,
    so the dispatch diverges from the model where the reference now waits."""
    _, _, step, _, dispatched = REDELIVERY_TRACES[name]
    run = _replay_redelivery(name, mutants.mutant_driver("redelivery-overtakes-settlement"))
    d = run.divergence
    assert d is not None and d.step == step and d.kind == "observation", run.observations
    assert d.observed == dispatched and d.allowed == [()]


#: issue 32: invisible time that runs out while the client holds the message (``expiry_while_held``,
#: on in every default); minimised from ``conq replay ordered-consumption`` (10,000 traces), where
#: they were 32 divergences of the unmutated reference
_HELD = [("receive_answer", 0, "ok"), ("expire", 0), ("dispatch", 0), ("listener_returns", 0, "ok")]
STALE_HANDLE_TRACES = {
    # the server answers INVALID_RECEIPT_HANDLE to the settle of an expired delivery (the proxy's
    # validateReceiptHandle, "receipt handle is expired"): a call naming ``ok`` or ``lost`` (applied)
    # cannot happen, and the driver refuses it before the request is answered
    "ack-ok-refused": ("push-fifo", _HELD + [("ack_answer", 0, "ok")], REJECTED),
    "ack-lost-refused": ("push-standard", _HELD + [("ack_answer", 0, "lost")], REJECTED),
    "ack-invalid-handle": ("push-fifo", _HELD + [("ack_answer", 0, "invalid-handle")], "invalid-handle"),
    # and the other way round: a current handle is applied, never answered INVALID_RECEIPT_HANDLE
    "ack-current-handle-refused": ("push-standard", [("receive_answer", 0, "ok"), ("dispatch", 0),
                                                     ("listener_returns", 0, "ok"), ("ack_answer", 0, "invalid-handle")],
                                   REJECTED),
    # BAD_REQUEST comes before the handle is looked at (AckMessageActivity.validateTopicAndConsumerGroup)
    "ack-bad-request": ("push-fifo", _HELD + [("ack_answer", 0, "bad-request")], "bad-request"),
    "change-invisible-bad-request": ("push-standard", [("receive_answer", 0, "ok"), ("dispatch", 0), ("expire", 1),
                                                       ("listener_returns", 1, "fail"),
                                                       ("change_invisible_answer", 1, "bad-request")], "bad-request"),
    # the outcome remembered for a rejected FIFO ack settles the stale copy still cached after the
    # server dead-lettered the message, although a later message of its group arrived meanwhile
    "fifo-memo-outlives-the-next-message": ("push-fifo", [
        ("receive_answer", 0, "ok"), ("expire", 0), ("dispatch", 0), ("receive_answer", 0, "ok"),
        ("listener_returns", 0, "ok"), ("ack_answer", 0, "invalid-handle"), ("expire", 0), ("receive_answer", 0, "ok"),
        ("dispatch", 0), ("ack_answer", 0, "invalid-handle")], "invalid-handle"),
}


@pytest.mark.parametrize("name", sorted(STALE_HANDLE_TRACES))
def test_a_settle_with_a_stale_receipt_handle_gets_the_answers_the_model_allows(name):
    """The reference and the model agree on a settle whose delivery expired while the client held it
    (issue 32, with snapshots): the calls the server cannot answer that way are refused, the others
    observe what the model allows."""
    config, actions, last = STALE_HANDLE_TRACES[name]
    checker = Checker(conformance_model(MODEL, config), InProcess(OrderedConsumptionDriver))
    try:
        run = checker.replay(actions)
    finally:
        checker.impl.close()
    assert run.ok, run.divergence.describe()
    assert run.observations[-1] == last and REJECTED not in run.observations[:-1], run.observations


def test_a_failed_simple_receive_moves_the_round_robin_on_in_model_and_implementation():
    """Issue 14, F1: the simple consumer takes the next queue before its request
    (``SimpleConsumer.receive``), as upstream does (``SubscriptionLoadBalancer.takeMessageQueue``; seed
    001 says nothing of the order).  The model used to move its round-robin on after an ``ok`` or
    ``lost`` answer only, a rule no client can follow: ``lost`` (delivered, answer lost) and ``error``
    (a timeout, not delivered) are the same REQUEST_TIMEOUT to it.  The model now moves on after every
    receive answer; both sides agree on each of them."""
    model = conformance_model(MODEL, "simple")
    checker = Checker(model, InProcess(OrderedConsumptionDriver))
    try:
        runs = {a: checker.replay([("simple_receive", a), ("simple_receive", "ok")]) for a in ("error", "lost", "ok")}
    finally:
        checker.impl.close()
    for answer, run in runs.items():
        assert run.ok, (answer, run.divergence.describe() if run.divergence else None)
    # ``simple``: two queues, both messages on queue 0.  After the failed receive on queue 0 the next
    # receive asks queue 1 and finds nothing; a model that stayed on queue 0 would deliver message 0
    assert model.config.queues == 2 and model.config.msg_queue == (0, 0)
    assert runs["error"].observations == ["error", ("ok", ())]
    assert runs["lost"].observations == [("lost", (0, 1)), ("ok", ())]
    assert runs["ok"].observations == [("ok", (0, 1)), ("ok", ())]


# -- the port protocol ---------------------------------------------------------------------------------------


def test_reference_conforms_through_the_port_protocol(tmp_path):
    for p in CORPUS.glob("pass-push-fifo-no-expiry-*.ndjson"):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    cmd = f"stdio:{sys.executable} -m conq.conformance.port"
    res, model = run_suite(MODEL, impl_spec=cmd, config_name="push-fifo", overrides={"expiry_while_held": False},
                           traces=8, seed=3, length=40, corpus=tmp_path)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    assert res.impl.startswith("stdio:") and res.corpus_ok == res.corpus >= 10 and res.traces == 8


# -- the command line -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_generic_commands_drive_the_ordered_consumption_reference():
    res = runner.invoke(app, ["conformance", MODEL, "--config", "push-standard", "--set", "expiry_while_held=false",
                              "--traces", "5", "--mode", "coverage", "--corpus", str(CORPUS), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["ok"] and data["traces"] == 5 and data["corpus"]["traces"] == data["corpus"]["as_expected"]
    res = runner.invoke(app, ["replay", MODEL, "--config", "simple", "--set", "queues=1", "--traces", "70", "--only", "66",
                              "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ok"] is True
    res = runner.invoke(app, ["mutants", MODEL, "-m", "producer-txn-retries", "-e", "explorer", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["killed"] == 1 and data["mutants"]["producer-txn-retries"]["engines"]["explorer"]["killed"]
    assert not data["reference"]["explorer"]["killed"]


def test_the_driver_raises_for_an_unknown_call():
    d = driver("producer")
    try:
        with pytest.raises(KeyError):
            d.do(("nonsense",))
        with pytest.raises(ActionRejected):
            d.do(("dispatch", 0))
    finally:
        d.close()
