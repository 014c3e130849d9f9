"""Issue 35: the ordered-consumption thread level (conformance/ordered_consumption/thread_steps.py).

The view undoes the call level's compositions (the producer's pick and retry, a receive loop's
request once it has room, the dispatcher's lock then take, a FIFO worker's unlock, a redelivery
settled from a remembered outcome), and the reference, held at its scheduling points
(impl/ordered_consumption: ``send.pick``, ``dispatch.locked``, ``dispatch.taken``,
``consume.remembered``, ``fifo.unlock``) and at two clock wake-ups, conforms to it on every
thread-level configuration, probes included, in process, through the stdio port and the CLI.  Two
planted interleaving bugs (``fifo-unlock-before-let-go``; ``fifo-signal-before-unlock``, the
reference's own order until this level showed it) are caught here and by no call-level sequence.
Budgets are counts."""

from __future__ import annotations

import json
import sys

import pytest

from conq.conformance.adapters import InProcess
from conq.conformance.checker import Checker
from conq.conformance.ordered_consumption import mutants
from conq.conformance.ordered_consumption import thread_steps as ts
from conq.conformance.suite import run_suite
from conq.conformance.thread_level import count_sequences, sequences
from conq.conformance.views import conformance_model
from conq.model.kernel import config_dict

#: one FIFO message received, locked, taken, expired while consumed and received again: the redelivery
#: waits behind its copy (C6); the dispatcher finds the queue locked; the copy's ack meets the stale handle
REDELIVERY = [("receive_answer", 0, "ok"), ("step", "dispatcher", 0), ("step", "dispatcher", 0), ("expire", 0),
              ("receive_answer", 0, "ok"), ("step", "dispatcher", 0), ("listener_returns", 0, "ok"),
              ("ack_answer", 0, "invalid-handle")]


def _after(model, actions):
    states = list(model.init_states())
    for a in actions:
        states = [t for s in states for o, t in model.step(s, a)]
    return states


def driver(config: str, seed: int = 0) -> ts.ThreadStepsDriver:
    return ts.ThreadStepsDriver(config_dict(ts.thread_model(config).config), seed)


def test_the_dispatchers_lock_and_take_and_the_workers_unlock_are_steps_of_their_own():
    thread = ts.thread_model("push-fifo")
    (s,) = _after(thread, [("receive_answer", 0, "ok")])
    ((obs, locked),) = thread.step(s, ("step", "dispatcher", 0))
    assert obs == (("dispatch", 0), "locked") and thread.observe(locked)["messages"][0]["client"] == "cached"
    ((obs, taken),) = thread.step(locked, ("step", "dispatcher", 0))
    assert obs == (("take", 0), 0) and thread.observe(taken)["messages"][0]["client"] == "consuming"
    (acked,) = _after(thread, [("receive_answer", 0, "ok"), ("step", "dispatcher", 0), ("step", "dispatcher", 0),
                               ("listener_returns", 0, "ok"), ("ack_answer", 0, "ok")])
    q = thread.observe(acked)["process_queues"][0]
    assert q["locked"] and not q["notified"] and q["cache"] == [0, 0]  # let go, not unlocked yet
    assert thread.actions(acked) and ("step", "worker", 0) in thread.actions(acked)
    ((obs, unlocked),) = thread.step(acked, ("step", "worker", 0))
    assert obs == (("unlock", 0), "unlocked")
    assert not thread.observe(unlocked)["process_queues"][0]["locked"]
    # the call level composes the lock and the take into one dispatch, the unlock into the ack
    call = conformance_model("ordered-consumption", "push-fifo")
    ((obs, t),) = call.step(call.init_states()[0], ("receive_answer", 0, "ok"))
    ((obs, _),) = call.step(t, ("dispatch", 0))
    assert obs == (0,)


def test_the_view_names_each_step_by_its_thread_and_keeps_its_scope():
    names = set()
    for config in ("producer", "push-fifo"):
        thread = ts.thread_model(config)
        names |= {a[:2] if a[0] == "step" else a[:1] for seq in sequences(thread, 5) for a in seq}
        assert count_sequences(thread, 4) == len(list(sequences(thread, 4)))
    assert {("step", k) for k in ("producer", "dispatcher")} <= names and ("dispatch",) not in names
    with pytest.raises(ValueError, match="only the reference switches"):
        ts.thread_model("push-fifo", {"unlock_signals": False})
    with pytest.raises(ValueError, match="simple consumer is not offered"):
        ts.thread_model("producer", {"simple": True})
    with pytest.raises(ValueError, match="no thread-level configuration 'reference'"):
        ts.thread_model("reference")


@pytest.mark.parametrize("config", list(ts.THREAD_CONFIGS))
def test_the_reference_conforms_at_thread_level(config):
    r = ts.check_threads(InProcess(ts.ThreadStepsDriver), config, walks=12, length=30, depth=4, probe=0.1)
    assert r.ok, r.describe()
    assert r.exhaustive == r.exhaustive_total > 15 and r.to_json()["exhaustive"]["complete"]


def test_every_thread_step_of_the_reference_on_scripted_traces():
    """The producer's pick and retry, a receive loop's request after a wait for room, and, on a
    redelivery waiting behind its copy, the worker's unlock and the remembered outcome's settle."""
    producer = ts.thread_model("producer")
    # a cached route, a throttled send of a normal message accepted by queue 0: the second pick rotates
    throttled = [("step", "producer", 0), ("send_answer", 0, "throttled", 1), ("tick",), ("step", "producer", 0),
                 ("step", "producer", 0)]
    c = Checker(producer, InProcess(ts.ThreadStepsDriver))
    try:
        r = next(run for seed in range(200) if (run := c.replay(throttled, seed)).observations[0] == (("pick",), 0)
                 and run.observations[-1][0] == ("pick",))
        assert r.ok, r.divergence.describe()
        assert r.observations[1:4] == [(("send", 0), ("throttled", 1)), (("tick",), 1), (("retry",), "retry")]
    finally:
        c.impl.close()
    fifo = ts.thread_model("push-fifo")
    c = Checker(fifo, InProcess(ts.ThreadStepsDriver))
    try:
        steps = REDELIVERY + [("step", "worker", 0), ("step", "dispatcher", 0), ("step", "dispatcher", 0),
                              ("step", "consumer", 0), ("ack_answer", 0, "ok"), ("step", "worker", 0),
                              ("receive_answer", 0, "ok")]
        r = c.replay(steps)
        assert r.ok, r.divergence.describe()
        assert r.observations[11] == (("consume", 0), ("remembered", "ack"))
        one = ts.thread_model("push-fifo-one-cached")
        c2 = Checker(one, InProcess(ts.ThreadStepsDriver))
        try:  # a cache of one: full after the delivery, room after the let-go, the request is a step of its own
            r = c2.replay([("receive_answer", 0, "ok"), ("step", "dispatcher", 0), ("step", "dispatcher", 0),
                           ("listener_returns", 0, "ok"), ("ack_answer", 0, "ok"), ("step", "receive", 0),
                           ("step", "worker", 0)])
            assert r.ok, r.divergence.describe()
            assert r.observations[-2] == (("receive", 0), "room")
        finally:
            c2.impl.close()
    finally:
        c.impl.close()


def test_a_redelivery_promoted_into_the_workers_own_queue_is_signalled_by_the_unlock_only():
    """Found by the thread level: the reference signalled the dispatcher when the worker let go of a copy
    whose redelivery waited behind it in the same process queue, before its unlock (the model, seed
    顺序 step 9: the unlock signals).  Between the two the dispatcher could run and find the queue
    locked; the call level composes the unlock into the ack and cannot tell."""
    d = driver("push-fifo")
    try:
        for a in REDELIVERY:
            d.do(a)
        q = d.snapshot()["process_queues"][0]
        assert q["locked"] and not q["notified"] and d.snapshot()["messages"][0]["client"] == "cached"
        d.do(("step", "worker", 0))
        q = d.snapshot()["process_queues"][0]
        assert not q["locked"] and q["notified"]
    finally:
        d.close()


#: (mutant, thread-level configuration, call-level exhaustive length reaching its scenario, its sequences)
INTERLEAVING_BUGS = [("fifo-unlock-before-let-go", "push-fifo", 5, 900),  # receive, dispatch, listener, ack
                     # receive, dispatch, expire, the redelivery's receive, listener, the copy's stale ack
                     ("fifo-signal-before-unlock", "push-fifo-redelivery", 7, 1000)]


@pytest.mark.parametrize("name, config, length, sequences", INTERLEAVING_BUGS)
def test_an_interleaving_bug_is_caught_at_thread_level_and_not_at_call_level(name, config, length, sequences):
    """Unlocking before the let-go, or signalling the redelivery at the let-go: between calls both end
    where the reference does (the call level composes the unlock into the settle answer); a step of
    another thread in between shows them."""
    bug = mutants.MUTANTS[name]
    named, overrides = ts.THREAD_CONFIGS[config]
    with bug.applied():
        r = ts.check_threads(InProcess(ts.ThreadStepsDriver), config, walks=20, length=30)
        assert not r.ok and r.divergence.kind == "snapshot", r.describe()
        assert r.minimised is not None and r.minimised[-1][0] in ("ack_answer", "forward_to_dlq_answer")
        # every call sequence long enough to reach the bug's scenario, and random walks, on the same
        # configuration: the call level ends every call where the reference does
        exhaustive, _ = run_suite("ordered-consumption", config_name=named, overrides=overrides or None,
                                  traces=10_000, length=length, mode="exhaustive")
        walks, _ = run_suite("ordered-consumption", config_name=named, overrides=overrides or None, traces=40,
                             length=40, seed=3)
    assert exhaustive.ok and exhaustive.traces == exhaustive.exhaustive_traces > sequences and walks.ok and walks.traces == 40
    assert "thread-steps" in mutants.ENGINES and mutants.REQUIREMENTS[bug.name] == ("FIFO-012",)


def test_the_thread_level_reference_section_lists_every_step():
    text = "\n".join(ts.reference_section())
    for request in ('["step", "producer", 0]', '["step", "receive", p]', '["step", "dispatcher", p]',
                    '["step", "consumer", m]', '["step", "worker", p]'):
        assert request in text
    assert "(never reached)" not in text
    for name in ts.THREAD_CONFIGS:
        assert f"\n{name}: " in text
    # each row's results are the model's: the take's are a message or "empty"
    take = next(line for line in text.splitlines() if line.startswith('| `["step", "dispatcher", p]` | `["take", p]`'))
    assert '`"empty"`' in take and "`n`" in take


def test_the_reference_port_serves_the_thread_level_over_stdio():
    impl = ts.thread_impl(f"stdio:{sys.executable} -m conq.conformance.port")
    r = ts.check_threads(impl, "push-fifo", walks=6, length=25, probe=0.1)
    assert r.ok and r.walks == 6 and r.steps > 100, r.describe()


def test_the_cli_runs_the_thread_level_and_replays_a_failure_alone():
    from typer.testing import CliRunner

    from conq.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["conformance", "ordered-consumption", "--level", "thread", "--traces", "3", "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["ok"] and [c["config"] for c in doc["configs"]] == list(ts.THREAD_CONFIGS)
    bad = runner.invoke(app, ["conformance", "ordered-consumption", "--level", "thread", "--impl",
                              "mutant:fifo-signal-before-unlock", "--config", "push-fifo-redelivery", "--traces", "20",
                              "--json"])
    assert bad.exit_code == 1, bad.output
    f = json.loads(bad.stdout)["configs"][0]
    assert f["kind"] == "snapshot" and "--impl mutant:fifo-signal-before-unlock" in f["replay"]
    assert f["minimised"][-1][0] in ("ack_answer", "forward_to_dlq_answer")
    again = runner.invoke(app, f["replay"].split()[1:] + ["--json"])
    assert again.exit_code == 1 and json.loads(again.stdout)["configs"][0]["actions"] == f["actions"]
