"""The reference recovery-deferral implementation held to the model, at the granularity of its
steps: the call-level view (a feed thread that waits for room), the driver (observations, snapshot,
the environment's preconditions), the golden corpus, generated traces on every configuration in
every mode, the port protocol end to end (the reference and a mutant), and the command line.

Every verdict here is a function of the actions and the implementation's answers: the driver waits
for states of the implementation, never for durations (its safety cap is an error, not a verdict).
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
from conq.conformance.recovery_deferral import build_corpus as corpus
from conq.conformance.recovery_deferral import mutants
from conq.conformance.recovery_deferral.calls import RecoveryDeferralCalls
from conq.conformance.recovery_deferral.driver import RecoveryDeferralDriver
from conq.conformance.suite import run_suite
from conq.conformance.trace import read
from conq.conformance.views import conformance_model
from conq.model.kernel import config_dict
from conq.model.recovery_deferral.state import REC

CORPUS = Path(corpus.__file__).resolve().parent / "corpus"
MODEL = "recovery-deferral"
runner = CliRunner()


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    """The driver owns every thread it starts (the feed thread of each hand-off, the worker of each
    turn) and joins them at close."""
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    for t in leftover:
        t.join(5.0)
    assert not [t.name for t in leftover if t.is_alive()]


def step(model, state, action, observation):
    (nxt,) = [t for o, t in model.step(state, action) if o == observation]
    return nxt


# -- the view ---------------------------------------------------------------------------------------------


def test_the_view_is_the_model_plus_a_waiting_feed_thread():
    """Queues of one: producer 1's first resent event is for producer 0's full queue.  The feed thread
    waits (counted or not yet), nothing else is fed meanwhile, and the turn that takes the head of
    that queue lets the waiting hand-off complete onto it."""
    m = conformance_model(MODEL, "reference")
    assert isinstance(m, RecoveryDeferralCalls)
    s = m.init_states()[0]
    for a, o in [(("recover", 0), "forwarded"), (("feed", 0), ("queued", 0)), (("recover", 1), "forwarded")]:
        s = step(m, s, a, o)
    assert sorted(o for o, _ in m.step(s, ("feed", 1))) == [("blocked", 0, 0), ("blocked", 0, 1)]
    w = step(m, s, ("feed", 1), ("blocked", 0, 1))
    assert not [a for a in m.actions(w) if a[0] == "feed"]
    assert m.observe(w)["feed_blocked"] == 0 and m.observe(w)["pending"] == {"p0/r1": 1, "p1/r1": 1}
    assert m.observe(step(m, s, ("feed", 1), ("blocked", 0, 0)))["pending"] == {"p0/r1": 1}
    assert [o for o, _ in m.step(w, ("run", 0))] == [("listener", 0, ("queued", 0))]
    r = step(m, w, ("run", 0), ("listener", 0, ("queued", 0)))
    assert r[1] is None and m.observe(r)["queues"] == [[2], []] and m.observe(r)["running"] == [0, None]
    # every state of the view is a model state: the model's state properties hold on the explored graph
    from conq.model.engines.explorer import explore

    ex = explore(m, liveness=False)
    assert ex.ok and ex.states > len(explore(m.base, liveness=False).state_list)


def test_a_poll_of_the_waiting_events_context_reads_it_when_it_is_counted():
    """Up at any moment: the up is deferred before the recovery's only other event arrives; while
    that event waits for room, counted, the up's poll reads 1 and delivers nothing."""
    m = conformance_model(MODEL, "reference-up-any-time", {"events": [[0, 0, 1], [1, 0, 1]], "callbacks": ["FirstRecoveryCompleted"]})
    s = m.init_states()[0]
    for a, o in [(("recover", 0), "forwarded"), (("feed", 0), ("queued", 0)), (("recover", 1), "forwarded"),
                 (("status", 1, 0), "deferred")]:
        s = step(m, s, a, o)
    counted = step(m, s, ("feed", 1), ("blocked", 0, 1))
    uncounted = step(m, s, ("feed", 1), ("blocked", 0, 0))
    assert m.step(counted, ("poll", 1, 0)) == [(1, counted)]
    assert [o for o, _ in m.step(uncounted, ("poll", 1, 0))] == ["delivered"]


# -- the driver -------------------------------------------------------------------------------------------


def driver(config="reference", **overrides) -> RecoveryDeferralDriver:
    return RecoveryDeferralDriver(config_dict(conformance_model(MODEL, config, overrides or None).config), 0)


def test_the_driver_observes_the_implementation_step_by_step():
    d = driver()
    try:
        assert d.do(("recover", 0)) == "forwarded"
        assert d.do(("feed", 0)) == ("queued", 0)
        assert d.do(("recover", 1)) == "forwarded"
        assert d.do(("feed", 1)) == ("blocked", 0, 1)  # the reference counts, then waits
        snap = d.snapshot()
        assert snap["feed_blocked"] == 0 and snap["pending"] == {"p0/r1": 1, "p1/r1": 1}
        assert d.do(("run", 0)) == ("listener", 0, ("queued", 0))
        assert d.snapshot()["queues"] == [[2], []] and d.snapshot()["running"] == [0, None]
        assert d.do(("feed", 0)) == ("queued", 1)
        assert d.do(("status", 0, 1)) == "deferred"
        assert d.do(("poll", 0, 1)) == 2
        assert d.do(("done", 0)) == "completed"
        assert d.do(("poll", 0, 1)) == 1
        assert d.do(("run", 1)) == ("listener", 1)
        assert d.do(("done", 1)) == "completed"  # the customer throws on odd events: still completed
        assert d.snapshot()["deferred"] == [["FirstRecoveryCompleted"], []]
        assert d.do(("poll", 0, 1)) == "delivered"
        assert d.do(("status", 0, 0)) == "forwarded"
        snap = d.snapshot()
        assert snap == {"queues": [[2], []], "running": [None, None], "pending": {"p1/r1": 1}, "feed_blocked": None,
                        "recovery": [1, 1], "deferred": [[], []]}
    finally:
        d.close()


def test_the_driver_rejects_what_the_environment_would_not_do_and_what_the_implementation_cannot():
    d = driver()
    try:
        with pytest.raises(ActionRejected, match="not initiated"):
            d.do(("feed", 0))  # a resent event before its recovery was initiated
        impl = InProcess(RecoveryDeferralDriver)
        impl.start(MODEL, config_dict(conformance_model(MODEL, "reference").config), 0)
        try:
            assert impl.do(("status", 0, 1)) == REJECTED  # no recovery yet
            assert impl.do(("recover", 0)) == "forwarded"
            assert impl.do(("status", 0, 1)) == REJECTED  # an up before its recovery's events
            assert impl.do(("run", 0)) == REJECTED  # an empty queue: the implementation's answer
            assert impl.do(("poll", 0, 1)) == REJECTED  # nothing deferred
            assert impl.do(("feed", 0)) == ("queued", 0)
            assert impl.do(("run", 0)) == ("listener", 0)
            assert impl.do(("run", 0)) == REJECTED  # one worker per queue
            assert impl.do(("done", 1)) == REJECTED
            assert impl.do(("track",)) == REJECTED  # upstream's step
            assert impl.do(("recover", 0)) == REJECTED  # one recovery in this configuration
        finally:
            impl.close()
    finally:
        d.close()
    with pytest.raises(ValueError, match="reference switches"):
        RecoveryDeferralDriver(config_dict(conformance_model(MODEL, "upstream-drop-when-full").config), 0)


def test_legacy_runs_the_customer_on_the_feed_thread():
    d = driver("legacy")
    try:
        assert d.do(("recover", 0)) == "forwarded"
        assert d.do(("feed", 0)) == ("feed-thread", 0)
        assert d.do(("feed", 0)) == ("feed-thread", 1)
        assert d.do(("status", 0, 1)) == "forwarded"
        assert d.snapshot() == {"queues": [[], []], "running": [None, None], "pending": {}, "feed_blocked": None}
    finally:
        d.close()


# -- the golden corpus ----------------------------------------------------------------------------------


def test_golden_corpus_verdicts():
    res, model = run_suite(MODEL, traces=0, corpus=CORPUS)
    assert res.corpus >= 20 and res.corpus_ok == res.corpus, [f.describe(model) for f in res.failures]
    traces = [read(p) for p in CORPUS.glob("*.ndjson")]
    assert {t.expect for t in traces} == {"pass", "diverge"}
    assert {t.config_name for t in traces if t.expect == "pass" and t.level != "thread"} == set(mutants.TRACE_CONFIGS)
    # the thread level's golden traces (issue 35): every thread-level configuration
    from conq.conformance.recovery_deferral.thread_steps import THREAD_CONFIGS

    assert {t.config_name for t in traces if t.level == "thread"} == set(THREAD_CONFIGS)
    assert {p.stem.removeprefix("diverge-") for p in CORPUS.glob("diverge-*.ndjson")} <= set(mutants.MUTANTS)


def test_a_diverging_golden_trace_is_rejected_at_its_last_step():
    tr = read(CORPUS / "diverge-deliver-without-waiting.ndjson")
    d = check_recorded(conformance_model(MODEL, None, tr.config), tr.events)
    assert d is not None and d.step == len(tr.events) and d.action[0] == "status"
    assert d.observed == "forwarded" and d.allowed == ["deferred"]


# -- generated traces -------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", mutants.TRACE_CONFIGS)
@pytest.mark.parametrize("mode", ["random", "coverage"])
def test_reference_conforms_on_generated_traces(config, mode):
    res, model = run_suite(MODEL, config_name=config, traces=20, seed=7, length=40, mode=mode)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    assert res.steps > 100


def test_reference_conforms_on_every_exhaustive_trace():
    res, model = run_suite(MODEL, config_name="reference-one-queue", traces=10_000, length=7, mode="exhaustive")
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    assert res.traces > 100


def test_every_state_of_a_small_configuration_is_reached_with_the_implementation_in_step():
    """Coverage-guided walks over reference-one-queue reach every state the reference can be in:
    all of the call-level graph but the waits on a full queue *before* counting, which the reference
    never makes (it counts, then waits: DEV-009)."""
    from conq.conformance.generate import CoverageMemory, coverage_guided, derive_seed
    from conq.model.engines.explorer import explore

    model = conformance_model(MODEL, "reference-one-queue")
    checker = Checker(model, InProcess(RecoveryDeferralDriver), record=True)
    seen, visited = CoverageMemory(), set()
    try:
        for i in range(200):
            run = checker.replay(coverage_guided(model, derive_seed(3, i), 24, seen).actions(), i)
            assert run.ok, run.divergence.describe()
            visited |= run.visited
    finally:
        checker.impl.close()
    graph = set(explore(model, liveness=False).state_list)
    never = {s for s in graph if s[1] is not None and s[1][3] == 0}
    assert visited <= graph and never
    assert visited == graph - never


# -- the port protocol ---------------------------------------------------------------------------------------


def test_reference_conforms_through_the_port_protocol(tmp_path):
    # the golden traces of the same configuration too (a port keeps the configuration of its init
    # across resets, so one run speaks of one configuration)
    for p in CORPUS.glob("pass-reference-up-any-time-*.ndjson"):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    cmd = f"stdio:{sys.executable} -m conq.conformance.port"
    res, model = run_suite(MODEL, impl_spec=cmd, config_name="reference-up-any-time", traces=12, seed=3, length=40,
                           corpus=tmp_path)
    assert res.ok, "\n".join(f.describe(model) for f in res.failures)
    assert res.impl.startswith("stdio:") and res.corpus_ok == res.corpus == 2 and res.traces == 12


def test_a_mutant_is_caught_through_the_port_protocol_too(tmp_path):
    port = tmp_path / "mutant_port.py"
    port.write_text(
        "import sys\n"
        "from conq.conformance import port\n"
        "from conq.conformance.recovery_deferral import mutants\n"
        "with mutants.MUTANTS['down-does-not-cancel'].applied():\n"
        "    sys.exit(port.main([]))\n"
    )
    res, model = run_suite(MODEL, impl_spec=f"stdio:{sys.executable} {port}", config_name="reference", traces=40, seed=1,
                           length=40)
    assert not res.ok
    f = res.failures[0]
    assert f.result.divergence.kind in ("observation", "snapshot") and f.result.minimised
    assert ("status", 0, 0) in f.result.minimised or ("status", 1, 0) in f.result.minimised


# -- the command line -------------------------------------------------------------------------------------------


def test_the_generic_commands_drive_the_recovery_deferral_reference():
    res = runner.invoke(app, ["conformance", MODEL, "--traces", "5", "--corpus", str(CORPUS), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["ok"] and data["traces"] == 5 and data["corpus"]["traces"] == data["corpus"]["as_expected"]
    res = runner.invoke(app, ["replay", MODEL, "--config", "reference-one-queue", "--traces", "70", "--only", "66", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ok"] is True
    res = runner.invoke(app, ["mutants", MODEL, "-m", "deliver-without-waiting", "-e", "schedules", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["killed"] == 1 and data["mutants"]["deliver-without-waiting"]["engines"]["schedules"]["killed"]
    assert not data["reference"]["schedules"]["killed"]


# -- event ids of the SDK's value space (issue 32) -------------------------------------------------------


def test_the_driver_draws_event_ids_from_the_sdks_value_space():
    from conq.conformance.recovery_deferral.driver import ID_SPACES, event_ids
    from conq.impl.recovery_deferral.events import queue_index, stable_hash

    ids = {space: event_ids(4, 3, space, seed=7) for space in ID_SPACES}
    for space, got in ids.items():
        assert len(set(got)) == 4 and [queue_index(x, 3) for x in got] == [m % 3 for m in range(4)], space
    assert all(isinstance(x, str) and x.startswith("sr:match:") for x in ids["urn"])
    assert any(stable_hash(x) < 0 for x in ids["urn"])  # a URN's BLAKE2b hash is negative about half the time
    assert all(x >= 1 << 40 for x in ids["large"]) and all(stable_hash(x) < 0 for x in ids["negative"])
    drivers = [RecoveryDeferralDriver(config_dict(conformance_model(MODEL, "reference").config), seed) for seed in range(4)]
    try:
        assert {d.id_space for d in drivers} == set(ID_SPACES)  # the seed picks the space
    finally:
        for d in drivers:
            d.cl.close()


@pytest.mark.parametrize("name, space", [("index-java-remainder", "negative"), ("index-int-hash", "large")])
def test_the_allocation_is_checked_on_real_ids_a_bug_small_ids_cannot_show(name, space):
    """Java's remainder (a negative queue index for a negative hash, DEV-008) and a 32-bit hash of a
    long id allocate every small non-negative id as the reference does: on the ids the old driver used
    they are invisible.  On ids of the SDK's value space the checker sees the event on another queue
    than the model's (or the implementation fail)."""
    from conq.conformance.recovery_deferral.driver import ID_SPACES

    model = conformance_model(MODEL, "reference")
    seeds = {sp: [s for s in range(40) if ID_SPACES[s % len(ID_SPACES)] == sp][:6] for sp in ("small", space)}
    with mutants.MUTANTS[name].applied():
        checker = Checker(model, InProcess(RecoveryDeferralDriver))
        try:
            small = [checker.walk(s, 25) for s in seeds["small"]]
            real = [checker.walk(s, 25) for s in seeds[space]]
        finally:
            checker.impl.close()
    assert all(r.ok for r in small), [r.divergence.describe() for r in small if not r.ok]
    assert any(not r.ok for r in real)


#: reference-late-initiation: producer 0's first recovery runs its event; the resent event of its second
#: recovery (on queue 1) and the up come before that recovery's onRecoveryInitiated (DEV-032)
LATE_UP = [("recover", 0), ("feed", 0), ("run", 0), ("done", 0), ("feed", 0), ("status", 0, 0)]


def test_upstreams_rule_diverges_where_the_sdk_calls_on_recovery_initiated_late():
    """Issue 32, DEV-032: reference-late-initiation is a conformance configuration (the suite, the corpus
    and the thread level run it); the reference conforms on the two ways upstream's rule goes wrong, and
    that rule (the mutant ``up-tied-to-stored-recovery``: an up tied to the stored recovery only) diverges
    on both: the up delivered while the new recovery's event is outstanding, and the up lost to the late
    initiation."""
    assert "reference-late-initiation" in mutants.TRACE_CONFIGS
    early = LATE_UP + [("poll", 0, 0)]
    lost = LATE_UP + [("recover", 0), ("run", 1), ("done", 1), ("poll", 0, 0)]
    model = conformance_model(MODEL, "reference-late-initiation")
    ref = Checker(model, InProcess(RecoveryDeferralDriver), snapshots=True)
    upstream = Checker(model, InProcess(mutants.mutant_driver("up-tied-to-stored-recovery")), snapshots=False)
    try:
        a, b = ref.replay(early), ref.replay(lost)
        assert a.ok and b.ok, (a.divergence or b.divergence).describe()
        assert a.observations[4:] == [("queued", 1), "deferred", 1]
        assert b.observations[4:] == [("queued", 1), "deferred", "forwarded-late", ("listener", 1), "completed",
                                      "delivered"]
        d = upstream.replay(early).divergence
        assert d is not None and d.step == len(early) and d.observed == "delivered" and d.allowed == [1]
        d = upstream.replay(lost).divergence
        # upstream's late initiation superseded the up: no deferred up left to poll (the driver refuses)
        assert d is not None and d.step == len(lost) and d.observed == REJECTED and d.allowed == ["delivered"]
    finally:
        ref.impl.close()
        upstream.impl.close()


#: reference-late-initiation: producer 0's first resent event of its second recovery arrives while queue 1
#: is full, before that recovery's onRecoveryInitiated, with producer 0's first up deferred
LATE_WAIT = [("recover", 0), ("feed", 0), ("run", 0), ("recover", 1), ("feed", 1), ("feed", 1), ("status", 0, 0)]


def test_a_feed_thread_waiting_with_a_late_recoverys_event_is_a_state_of_the_view():
    """Issue 32: the probe that found the call view without a state for the feed thread waiting with the
    event of a recovery not initiated yet (late_initiation).  The view waits in the model's ``receive``:
    the SDK is in the new recovery's epoch and the listener knows the recovery, so the deferred up of
    the first one is superseded, an up waits for the waiting event, and the initiation is a late one."""
    m = conformance_model(MODEL, "reference-late-initiation")
    s = m.init_states()[0]
    for a in LATE_WAIT:
        (s,) = [t for _, t in m.step(s, a)]
    assert sorted(o for o, _ in m.step(s, ("feed", 0))) == [("blocked", 1, 0), ("blocked", 1, 1)]
    w = step(m, s, ("feed", 0), ("blocked", 1, 1))
    assert [o for o, _ in m.step(w, ("poll", 0, 0))] == ["superseded"]
    w = step(m, w, ("poll", 0, 0), "superseded")
    assert m.step(w, ("status", 0, 0)) == []  # the waiting event is not fed yet: the up waits for it
    assert [o for o, _ in m.step(w, ("recover", 0))] == ["forwarded-late"]
    # the reference, driven through its public calls (the driver refuses nothing the SDK may do), with
    # snapshots after every step
    checker = Checker(m, InProcess(RecoveryDeferralDriver), snapshots=True, record=True)
    try:
        run = checker.replay(LATE_WAIT + [("feed", 0), ("poll", 0, 0), ("status", 0, 0), ("recover", 0), ("run", 1),
                                          ("status", 0, 0), ("done", 1), ("run", 1), ("done", 1), ("poll", 0, 0)])
        assert run.ok, run.divergence.describe()
        assert run.observations[7:] == [("blocked", 1, 1), "superseded", REJECTED, "forwarded-late",
                                        ("listener", 3, ("queued", 1)), "deferred", "completed", ("listener", 1),
                                        "completed", "delivered"]
        # the probe: seeded walks that also send calls no consistent state enables, snapshots on; most pass
        # through such a wait, and every one conforms
        b, waits = m.base, 0
        for seed in range(12):
            r = checker.walk(seed, 40, probe=0.2)
            assert r.ok, r.divergence.describe()
            waits += any(blk is not None and b.ev_rec[blk[1]] > st[REC][blk[0]] for st, blk in r.visited)
        assert waits >= 3
    finally:
        checker.impl.close()
    # the driver's refusal of that hand-off (issue 35's stop-gap) is gone
    assert not hasattr(RecoveryDeferralDriver, "_would_wait")
