"""The thread level of the port protocol (issue 17, "Interleavings through the protocol"):
conformance/consumer_lists/thread_steps.py, the reference port's thread level, the mutant only it
catches."""

from __future__ import annotations

import io
import json
import sys

import pytest
from conq.conformance import protocol
from conq.conformance.adapters import InProcess, PortFailure, Stdio
from conq.conformance.checker import Checker
from conq.conformance.consumer_lists import mutants
from conq.conformance.consumer_lists import thread_steps as ts
from conq.conformance.mutation import Budget
from conq.conformance.port import serve
from conq.conformance.views import conformance_model

PORT = [sys.executable, "-m", "conq.conformance.port"]


@pytest.mark.parametrize("config", list(ts.THREAD_CONFIGS))
def test_the_reference_conforms_at_thread_level_in_process(config):
    r = ts.check_threads(InProcess(ts.ThreadStepsDriver), config, walks=30, length=30, depth=6)
    assert r.ok, r.describe()
    assert r.walks == 30 and r.exhaustive > 10
    assert r.steps > 400, r.describe()  # walks end early only where nothing is enabled (2 messages, no budget)


def test_the_reference_conforms_at_thread_level_through_stdio():
    impl = Stdio(PORT)
    impl.level = "thread"
    r = ts.check_threads(impl, "held", walks=15, length=30, depth=4)
    assert r.ok, r.describe()
    assert r.steps > 150 and r.exhaustive > 5


def test_unnotify_after_scan_is_caught_at_thread_level():
    with mutants.MUTANTS["unnotify-after-scan"].applied():
        r = ts.check_threads(InProcess(ts.ThreadStepsDriver), "one-acquirer", walks=10, length=30)
    assert not r.ok
    # the pull's first step left the consumer NOTIFIED while it scans: the snapshot shows it at once
    assert r.divergence.kind == "snapshot" and r.actions[-1] == ("step", "io", 0), r.describe()
    assert '"notified"' in r.divergence.detail and '"interested"' in r.divergence.detail


def test_unnotify_after_scan_is_caught_through_a_stdio_port_at_thread_level(tmp_path):
    port = tmp_path / "mutant_port.py"
    port.write_text(
        "import sys\n"
        "from conq.conformance.consumer_lists import mutants\n"
        "from conq.conformance.port import serve\n"
        "with mutants.MUTANTS['unnotify-after-scan'].applied():\n"
        "    sys.exit(serve(sys.stdin, sys.stdout))\n")
    impl = Stdio([sys.executable, str(port)])
    impl.level = "thread"
    r = ts.check_threads(impl, "dynamic", walks=10, length=30)
    assert not r.ok and r.divergence.kind == "snapshot", r.describe()


def test_unnotify_after_scan_is_not_caught_at_call_level():
    """At call level a pull is one atomic call: moving the consumer back to INTERESTED before or after
    the scan ends in the same state (INTERESTED when nothing was found, NOTIFIED again after a
    delivery) with the same notifications, and no other call can run in between; so no budget finds
    it.  A fixed budget of random walks on the configurations where it would matter, all conforming."""
    walks = 0
    with mutants.MUTANTS["unnotify-after-scan"].applied():
        for config in ("small", "same-priority"):
            checker = Checker(conformance_model("consumer-lists", config, {"env_budget": 2}),
                              InProcess(mutants._driver_cls()))
            for seed in range(120):
                r = checker.walk(seed, 30)
                walks += 1
                assert r.ok, (config, seed, r.divergence.describe())
    assert walks == 240


def test_the_thread_steps_engine_kills_the_mutant_and_passes_the_reference():
    ref = mutants.engine_thread_steps(Budget(scale=0.25))
    assert not ref.killed and not ref.capped, ref.detail
    with mutants.MUTANTS["unnotify-after-scan"].applied():
        det = mutants.engine_thread_steps(Budget(scale=0.25))
    assert det.killed, det.detail
    assert "thread-steps" in mutants.ENGINES and "unnotify-after-scan" in mutants.MUTANTS


def _serve(*messages: dict) -> list[dict]:
    out = io.StringIO()
    serve(io.StringIO("".join(json.dumps(m) + "\n" for m in messages)), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _init(level: str | None = "thread", model: str = "consumer-lists") -> dict:
    cfg = json.loads(json.dumps(dict(Checker(ts.thread_model("one-acquirer"), None).config)))
    msg = {"type": "init", "id": 1, "protocol": 1, "model": model, "config": cfg, "seed": 0}
    if level is not None:
        msg["level"] = level
    return msg


def test_the_reference_port_answers_thread_level_requests_and_their_errors():
    replies = _serve(
        _init(),
        {"type": "action", "id": 2, "action": ["enqueue", 0]},
        {"type": "action", "id": 3, "action": ["step", "publisher", 0], "snapshot": True},
        {"type": "action", "id": 4, "action": ["step", "publisher", 0]},  # owes nothing now: not enabled
        {"type": "action", "id": 5, "action": ["step", "io"]},  # malformed step
        {"type": "action", "id": 6, "action": ["release", 0]},  # not offered at thread level
        {"type": "action", "id": 7, "action": ["credit", 0]},  # offered, but this configuration has no budget
        {"type": "reset", "id": 8, "seed": 1},
        {"type": "shutdown", "id": 9},
    )
    init_ok, enq, pub, again, bad, release, credit, reset, bye = replies
    assert init_ok["type"] == "init_ok" and protocol.THREAD_STEPS in init_ok["features"]
    assert enq == {"type": "action_ok", "id": 2, "observation": [["enqueue", 0], None, []]}
    assert pub["observation"] == [["notify_consumers", 0], None, [0]]
    assert dict(pub["state"])["consumers"] == [["notified", 3]]  # the snapshot, as pairs (hashable form)
    assert (again["type"], again["code"], again["definite"]) == ("error", 13, True)
    assert (bad["type"], bad["code"], bad["definite"]) == ("error", 12, True)
    assert "[\"step\", \"io\" | \"publisher\", number]" in bad["text"]
    assert (release["code"], release["definite"]) == (12, True) and "not offered at thread level" in release["text"]
    assert (credit["code"], credit["definite"]) == (13, True) and "budget is spent" in credit["text"]
    assert reset["type"] == "reset_ok" and bye["type"] == "shutdown_ok"


def test_a_bad_level_in_init_is_refused_clearly():
    bad, = _serve(_init("threads"))
    assert (bad["code"], bad["definite"]) == (10, True) and "'level' must be one of call, thread" in bad["text"]
    wrong_type, = _serve(_init(7))
    assert wrong_type["code"] == 10 and "init: field 'level' must be string" in wrong_type["text"]
    # a system without a thread level (every system of the project has one since issue 35: the light
    # switch of test_new_system.py, registered by its target as a user's own system would be)
    from pathlib import Path

    from conq.conformance import systems

    systems.register(f"{Path(__file__).resolve().parent.parent / 'test_new_system.py'}:SYSTEM")
    try:
        other, = _serve(_init("thread", model="toy-switch"))
    finally:
        systems.unregister("toy-switch")
    assert other["code"] == 14 and "no thread level" in other["text"]
    call_level, = _serve(_init(None))  # the call level is unchanged: no level, no thread driver
    assert call_level["type"] == "init_ok" and "ThreadSteps" not in call_level["implementation"]
    assert protocol.THREAD_STEPS not in call_level["features"]


def test_the_checker_refuses_a_port_without_the_thread_level(tmp_path):
    port = tmp_path / "call_only.py"
    port.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    print(json.dumps({'type': 'init_ok', 'id': m['id'], 'implementation': 'call only'}), flush=True)\n")
    impl = Stdio([sys.executable, str(port)])
    impl.level = "thread"
    with pytest.raises(PortFailure, match="thread-steps"):
        impl.start("consumer-lists", {}, 0)
    impl.close()


def test_the_thread_view_maps_steps_onto_the_model():
    model = ts.thread_model("one-acquirer")
    (s,) = model.init_states()
    assert model.actions(s) == [("enqueue", 0)]  # nothing owed, no wake-up: only the environment
    ((_, obs, s),) = [x for x in model.successors(s)]
    assert obs == (("enqueue", 0), None, ())
    assert model.actions(s) == [("step", "publisher", 0), ("enqueue", 1)]
    with pytest.raises(ValueError, match="at most one|no thread-level configuration"):
        ts.thread_model("small")


def test_the_cli_runs_the_thread_level_with_its_exit_codes(monkeypatch):
    from typer.testing import CliRunner

    from conq.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["conformance", "consumer-lists", "--level", "thread", "--traces", "5", "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["ok"] and doc["level"] == "thread" and [c["config"] for c in doc["configs"]] == list(ts.THREAD_CONFIGS)
    bad = runner.invoke(app, ["conformance", "consumer-lists", "--level", "thread", "--impl", "mutant:unnotify-after-scan",
                              "--config", "one-acquirer", "--traces", "5", "--json"])
    assert bad.exit_code == 1 and json.loads(bad.stdout)["configs"][0]["actions"][-1] == ["step", "io", 0]
    # a thread-level failure carries what a call-level one does (issue 35): its seed, the replay command
    # with --impl, a minimised trace, and the step label the port reported
    f = json.loads(bad.stdout)["configs"][0]
    assert f["seed"] is not None and f["replay"].endswith(f"--traces 1 --seed {f['seed']} --length 40")
    assert "--impl mutant:unnotify-after-scan" in f["replay"] and f["minimised"][-1] == ["step", "io", 0]
    assert f["kind"] == "snapshot" and '(observed [["deliver_single_message", 0], null, []])' in f["divergence"]
    again = runner.invoke(app, f["replay"].split()[1:] + ["--json"])
    assert again.exit_code == 1 and json.loads(again.stdout)["configs"][0]["actions"] == f["actions"]
    quiet = runner.invoke(app, ["conformance", "consumer-lists", "--level", "thread", "--impl", "mutant:unnotify-after-scan",
                                "--config", "one-acquirer", "--traces", "20", "--no-snapshots"])
    assert quiet.exit_code == 1 and "observations only" in quiet.output and "state after the step" not in quiet.output
    usage = runner.invoke(app, ["conformance", "consumer-lists", "--level", "thread", "--config", "small"])
    assert usage.exit_code == 2 and "no thread-level configuration 'small'" in usage.output
    # exhaustive: every trace or none (issue 35): --traces below the count is refused up front with the count
    short = runner.invoke(app, ["conformance", "consumer-lists", "--level", "thread", "--mode", "exhaustive",
                                "--config", "held", "--length", "6", "--traces", "50", "--json"])
    assert short.exit_code == 2 and "is 103 thread-level traces" in json.loads(short.stdout)["error"]["message"]
    full = runner.invoke(app, ["conformance", "consumer-lists", "--level", "thread", "--mode", "exhaustive",
                               "--config", "held", "--length", "6", "--traces", "103", "--json"])
    (entry,) = json.loads(full.stdout)["configs"]
    assert full.exit_code == 0 and entry["exhaustive"] == {"traces": 103, "complete": True} and entry["traces"] == 103


def test_an_implementation_whose_threads_cannot_be_stepped_is_a_divergence_not_an_internal_error():
    """Issue 32: ``look-then-unnotify`` looks for a message before it moves its consumer back to
    Interested, so its pull's scheduling points come in another order than the model's thread steps.
    ``conq conformance --level thread`` used to exit 3 (an internal error), and the thread-steps engine
    let the mutant survive as "not drivable".  Now it is a divergence (a port failure of kind
    ``protocol``) with a message saying what could not be driven: exit 1, and a kill."""
    from typer.testing import CliRunner

    from conq.cli import app

    res = CliRunner().invoke(app, ["conformance", "consumer-lists", "--level", "thread", "--impl",
                                   "mutant:look-then-unnotify", "--config", "one-acquirer", "--traces", "3", "--json"])
    assert res.exit_code == 1, res.output
    cfg = json.loads(res.stdout)["configs"][0]
    assert "cannot be driven at thread level" in json.dumps(cfg) and "pull.unnotify" in json.dumps(cfg)
    with mutants.MUTANTS["look-then-unnotify"].applied():
        det = mutants.engine_thread_steps(Budget(scale=0.1))
    assert det.killed and "port failure (protocol): the implementation cannot be driven at thread level" in det.detail


# -- the widened scope: setNotifyWorkDesired's halves, credit, two acquirers --------------------------

def _run(driver, actions):
    return [driver.do(a) for a in actions]


def test_the_set_desired_halves_are_io_thread_steps_of_the_reference():
    """``credit``: the delivery that uses the last credit is followed by the halves with desired false
    (after the send, on the IO thread); a grant's halves (run by the client's thread in the reference)
    are the consumer's next two IO steps, the second notifying it of the message left."""
    d = ts.ThreadStepsDriver(json.loads(json.dumps(dict(Checker(ts.thread_model("credit"), None).config))), 0)
    try:
        obs = _run(d, [("enqueue", 0), ("enqueue", 1), ("step", "publisher", 0), ("step", "publisher", 1)]
                   + [("step", "io", 0)] * 6)
        assert [o[0] for o in obs[4:]] == [("deliver_single_message", 0), ("find_next_available", 0), ("acquire", 0),
                                           ("deliver", 0), ("target_flag", 0, False), ("set_notify_work_desired", 0, False)]
        assert d.snapshot()["consumers"] == [["not-interested", 0]]
        with pytest.raises(Exception, match="neither scheduled nor pulling"):
            d.do(("step", "io", 0))  # idle after the halves: the pull does not go on
        assert d.do(("credit", 0)) == (("credit", 0), None, ())
        assert d.snapshot()["consumers"] == [["not-interested", 1]]  # the flag and the lists not yet told
        with pytest.raises(Exception, match="budget is spent"):
            d.do(("credit", 0))
        assert d.do(("step", "io", 0)) == (("target_flag", 0, True), None, ())
        assert d.do(("step", "io", 0)) == (("set_notify_work_desired", 0, True), None, (0,))
        assert d.snapshot()["consumers"] == [["notified", 1]]
        assert d.do(("step", "io", 0))[0] == ("deliver_single_message", 0)
    finally:
        d.close()


def test_a_credit_is_not_offered_while_the_consumers_desire_is_under_way():
    """The reference holds the consumer's lock across both halves: the view does not offer ``credit``
    between them (``desire_busy``), exactly where the driver refuses it."""
    model = ts.thread_model("credit")
    seen, todo, busy = set(model.init_states()), list(model.init_states()), 0
    while todo:
        s = todo.pop()
        acts = model.actions(s)
        if model.desire_busy(s, 0):
            busy += 1
            assert ("credit", 0) not in acts
        for _a, _o, t in model.successors(s):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    assert busy > 10, busy
    base = ts.thread_model("credit").base
    assert any(a == ("credit", 0) and model.desire_busy(s, 0) for s in seen for a, _o, _t in base.successors(s))


@pytest.mark.parametrize("config,depth", [("credit", 10), ("credit-priority", 10), ("same-priority", 10),
                                          ("suspend-priority", 7)])
def test_the_widened_configurations_conform_exhaustively(config, depth):
    r = ts.check_threads(InProcess(ts.ThreadStepsDriver), config, walks=0, depth=depth)
    assert r.ok and not r.incomplete, r.describe()
    assert r.exhaustive >= 150, r.describe()


def test_a_suspension_is_offered_only_between_pulls_and_its_halves_are_io_steps():
    model = ts.thread_model("suspend-priority")
    d = ts.ThreadStepsDriver(json.loads(json.dumps(dict(Checker(model, None).config))), 0)
    try:
        assert d.do(("enqueue", 0))[0] == ("enqueue", 0)
        assert d.do(("step", "publisher", 0)) == (("notify_consumers", 0), None, (0,))
        assert d.do(("step", "io", 0))[0] == ("deliver_single_message", 0)
        with pytest.raises(Exception, match="middle of a pull"):
            d.do(("suspend", 0, "flow"))
        assert d.do(("suspend", 1, "flow")) == (("suspend", 1, "flow"), None, ())
        assert d.do(("step", "io", 1)) == (("target_flag", 1, False), None, ())
        # the loss of interest hands a wake-up over: c0, Interested since its pull began, has m0
        assert d.do(("step", "io", 1)) == (("set_notify_work_desired", 1, False), None, (0,))
        assert [n for n, _ in d.snapshot()["consumers"]] == ["notified", "not-interested"]
    finally:
        d.close()


def test_the_priority_check_reading_lists_is_caught_at_thread_level_only():
    """Issue 17's third finding kept as a mutant: the old reference read a higher consumer's list for
    "wants work"; between that consumer's halves (flag written, lists not yet moved) a lower-priority
    consumer is offered its entry.  The thread level finds it by its bounded exhaustive traces of
    ``credit-priority``; the call level cannot, flag and lists agree between calls."""
    with mutants.MUTANTS["priority-reads-lists"].applied():
        r = ts.check_threads(InProcess(ts.ThreadStepsDriver), "credit-priority", walks=0, depth=12)
        assert not r.ok and r.divergence.kind == "observation", r.describe()
        assert ("step", "io", 0) in r.actions and ("credit", 0) in r.actions  # the higher one's grant, then its halves
        walks = 0
        for config in ("small", "reasons", "reference"):
            checker = Checker(conformance_model("consumer-lists", config, {"env_budget": 2}),
                              InProcess(mutants._driver_cls()))
            for seed in range(80):
                c = checker.walk(seed, 30)
                walks += 1
                assert c.ok, (config, seed, c.divergence.describe())
    assert walks == 240
    ref = ts.check_threads(InProcess(ts.ThreadStepsDriver), "credit-priority", walks=0, depth=12)
    assert ref.ok and ref.exhaustive > r.exhaustive, ref.describe()  # the reference: every trace conforms


def test_the_set_desired_order_mutant_is_caught_at_thread_level():
    """``desire-queue-before-flag`` (upstream's order of the halves): the step the model calls the
    flag write tells the queue.  (It is also visible at call level: the priority check reads the flag,
    so the hand-over of a consumer losing interest is refused while its flag still says "wants work",
    the lost wake-up of the model's ``upstream-flag-order``.)"""
    with mutants.MUTANTS["desire-queue-before-flag"].applied():
        r = ts.check_threads(InProcess(ts.ThreadStepsDriver), "credit", walks=20, length=30)
    assert not r.ok and r.divergence.kind == "observation", r.describe()
    assert "target_flag" in r.divergence.describe()


def test_no_snapshots_checks_observations_only(monkeypatch):
    from conq.conformance.consumer_lists.thread_steps import ThreadStepsDriver

    calls = []
    monkeypatch.setattr(ThreadStepsDriver, "snapshot", lambda self: calls.append(1) or {})
    r = ts.check_threads(InProcess(ts.ThreadStepsDriver), "one-acquirer", walks=5, length=20, snapshots=False)
    assert r.ok and r.steps > 50 and calls == [], r.describe()
    assert "observations only" in r.describe()
    with mutants.MUTANTS["unnotify-after-scan"].applied():  # still caught, later: by a lost notification
        r = ts.check_threads(InProcess(ts.ThreadStepsDriver), "one-acquirer", walks=20, length=30, snapshots=False)
    assert not r.ok and r.divergence.kind == "observation", r.describe()
