"""The recovery-deferral model (seed 004, REFERENCE §3): pinned manifest
results, hypothesis walks, focused steps, replayable counterexamples."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from conq import manifest
from conq.model.recovery_deferral import state as rd
from conq.model.recovery_deferral import RecoveryDeferralModel
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind, ModelError, PropertyViolation
from conq.model.engines.registry import load_model
from conq.model.engines.stateful import state_machine

NAME = "recovery-deferral"
ENTRIES = [e for e in manifest.load() if e.model == NAME]

FED, QUEUES, RUNNING, STATUS, PENDING, ENTRIES_, SLOT, REC, NOTES, SCHED, BACKLOG, TOLD, UPCTX = range(13)


def model(config="reference", **kw):
    m = load_model(NAME, config)
    if kw:
        m = RecoveryDeferralModel(dataclasses.replace(m.config, **kw))
    return m


_EXPLORED: dict = {}


def explored(entry):
    key = (entry.config, repr(sorted(entry.overrides.items())), entry.liveness, entry.symmetry)
    if key not in _EXPLORED:
        m = load_model(NAME, entry.config, entry.overrides)
        _EXPLORED[key] = explore(m, symmetry=entry.symmetry, liveness=entry.liveness)
    return _EXPLORED[key]


def run(m, actions, state=None):
    """Replay actions and return the last state."""
    return m.replay(actions, init=state).last


# -- (a) the manifest --------------------------------------------------------------


def test_manifest_names_every_configuration():
    assert {e.config for e in ENTRIES} == set(RecoveryDeferralModel.configs())


def _marks(e):
    return [pytest.mark.slow] if e.slow else []


@pytest.mark.parametrize("entry", [pytest.param(e, marks=_marks(e), id=e.label) for e in ENTRIES])
def test_manifest_entry(entry):
    ex = explored(entry)
    assert manifest.mismatches(entry, ex) == []


def test_reference_configs_hold_and_variants_fail():
    for e in ENTRIES:
        if e.config.startswith("reference") or e.config == "legacy":
            assert e.violated == (), e.config
        else:
            assert e.violated, e.config


def test_reference_lists_every_property_name():
    # the reference lists every claim but those it has no occasion for (the catalog resolves MODEL:PROPERTY
    # against every configuration): a random task id (an error about no event), an onRecoveryInitiated the
    # scheduler hands to the customer later
    ref = {p.name for p in model().property_list()}
    extra = set()
    for name in RecoveryDeferralModel.configs():
        extra |= {p.name for p in model(name).property_list()} - ref
    assert extra == {"random-task-id-on-queue-0", "random-task-id-on-queue-1",
                     "recovery-initiated-reaches-customer-0", "recovery-initiated-reaches-customer-1"}


def test_default_bounds_are_the_issue_bounds():
    c = model().config
    assert (c.producers, c.matches, c.queues, c.workers, len(c.events), c.recoveries) == (2, 2, 2, 2, 4, 1)
    ex = explored(next(e for e in ENTRIES if e.config == "reference"))
    assert ex.ok and all(v.status in ("holds", "witnessed") for v in ex.verdicts)


# -- (b) hypothesis ---------------------------------------------------------------------

TestReferenceWalk = state_machine(model(), max_examples=60, stateful_step_count=40).TestCase
TestReRecoveryWalk = state_machine(model("reference-re-recovery"), max_examples=40, stateful_step_count=40).TestCase


@pytest.mark.parametrize(
    "config, props",
    [
        ("upstream-drop-when-full", {"no-silent-loss", "up-after-recovery-tasks"}),
        ("caller-runs-when-full", {"feed-thread-never-runs-listener", "match-order"}),
        ("upstream-count-after-enqueue", {"pending-equals-allocated-minus-completed", "pending-non-negative", "up-waits-only-for-own-tasks"}),
    ],
)
def test_hypothesis_finds_the_variant_violation(config, props):
    # two live events of one match and one of another: short walks, quick shrinking
    small = config.endswith("full")
    m = model(config, events=((0, 0, 0), (0, 0, 0), (1, 1, 0))) if small else model(config)
    machine = state_machine(m)
    with pytest.raises(PropertyViolation) as info:
        run_state_machine_as_test(machine, settings=settings(max_examples=400, stateful_step_count=12, deadline=None, database=None))
    assert info.value.prop.name in props
    assert "reproducer:" in str(info.value)


# -- (c) focused steps ----------------------------------------------------------------


def test_hash_allocation_sends_a_match_to_one_queue():
    m = model(events=((0, 0, 0), (0, 1, 0), (0, 2, 0), (1, 2, 0)), matches=3, queues=2, queue_size=4)
    assert m.ev_queues == ((0,), (1,), (0,), (0,))


def test_threads_setting_bounds_the_workers_running_at_once():
    one = model(workers=1)
    s = run(one, [("recover", 0), ("feed", 0), ("feed", 0), ("run", 0)])
    assert list(one.step(s, ("run", 1))) == []  # the only worker is busy
    two = model()
    s = run(two, [("recover", 0), ("feed", 0), ("feed", 0), ("run", 0), ("run", 1)])
    assert s[RUNNING] == (0, 1)
    assert list(two.step(run(two, [("recover", 0), ("feed", 0), ("run", 0)]), ("run", 0))) == []  # one worker per queue


def test_resent_events_follow_their_recovery():
    m = model()
    assert list(m.step(m.init_states()[0], ("feed", 0))) == []  # resent by recovery 1, not initiated yet
    live = model(events=((0, 0, 0),))
    [(obs, _)] = live.step(live.init_states()[0], ("feed", 0))
    assert obs == ("queued", 0)


def test_full_queue_blocks_the_feed_thread_in_the_reference():
    m = model(events=((0, 0, 0), (0, 0, 0)))
    s = run(m, [("feed", 0)])
    assert ("feed", 0) not in m.actions(s) or not list(m.step(s, ("feed", 0)))
    assert list(m.step(s, ("feed", 0))) == []
    s = run(m, [("run", 0)], s)  # a worker takes the task: room again
    [(obs, t)] = m.step(s, ("feed", 0))
    assert obs == ("queued", 0) and t[QUEUES][0] == (1,)


def test_full_queue_variants_drop_or_run_on_the_feed_thread():
    drop = model("upstream-drop-when-full", events=((0, 0, 0), (0, 0, 0)))
    [(obs, t)] = drop.step(run(drop, [("feed", 0)]), ("feed", 0))
    assert obs == ("dropped", 0) and t[STATUS][1] == rd.DROPPED and t[PENDING][0] == 1
    cr = model("caller-runs-when-full", events=((0, 0, 0), (0, 0, 0)))
    [(obs, t)] = cr.step(run(cr, [("feed", 0)]), ("feed", 0))
    assert obs == ("feed-thread", 1) and t[STATUS][1] == rd.FEEDRUN


def test_tracker_counts_before_the_task_can_run():
    m = model()
    s = run(m, [("recover", 0), ("feed", 0)])
    x = m.ctx(0, 1)
    assert s[PENDING][x] == 1 and s[SLOT] == -1
    s = run(m, [("run", 0), ("done", 0)], s)
    assert s[PENDING][x] == 0


def test_upstream_tracker_ignores_completion_of_an_unknown_context():
    m = model("upstream-count-after-enqueue")
    s = run(m, [("recover", 0), ("feed", 0)])
    x = m.ctx(0, 1)
    assert s[SLOT] == 0 and s[PENDING][x] == 0 and ("feed", 1) not in m.actions(s)
    s = run(m, [("run", 0), ("done", 0)], s)  # completes before taskAllocated: no entry, logged only
    assert s[PENDING][x] == 0
    s = run(m, [("track",)], s)
    assert s[PENDING][x] == 1  # stuck: nothing will ever decrement it


def test_error_events_are_tracked_untracked_or_handled_on_the_feed_thread():
    acts = [("recover", 1), ("feed", 1), ("feed", 1)]
    m = model()
    s = run(m, acts)
    assert s[STATUS][2:] == (rd.QUEUED, rd.QUEUED)
    assert s[PENDING][m.ctx(1, 1)] == 2  # DEV-010: the resent error is counted under its recovery
    up = model("upstream-untracked-errors")
    assert run(up, acts)[PENDING][up.ctx(1, 1)] == 1
    sync = model("reference-sync-errors")
    s = run(sync, [("recover", 0), ("feed", 0)])
    [(obs, t)] = sync.step(s, ("feed", 0))
    assert obs == ("feed-thread", 1) and t[STATUS][1] == rd.FEEDRUN


def test_error_without_event_may_go_to_any_queue_or_crash_upstream():
    m = model("reference-error-without-event")
    s = run(m, [("recover", 0)])
    assert [o for o, _ in m.step(s, ("feed", 1))] == [("queued", 0), ("queued", 1)]
    up = model("upstream-java-remainder")
    outcomes = dict(up.step(s, ("feed", 1)))
    assert set(outcomes) == {("queued", 0), ("queued", 1), "index-out-of-bounds"}
    assert outcomes["index-out-of-bounds"][STATUS][2] == rd.DROPPED


def test_seed_random_routing_can_put_an_error_on_another_queue():
    m = model("seed-random-error-routing")
    s = run(m, [("recover", 0), ("feed", 0)])
    assert [o for o, _ in m.step(s, ("feed", 0))] == [("queued", 1)]  # queue 0 is full: blocks there


def test_down_cancels_the_deferred_up_in_the_reference_only():
    acts = [("recover", 0), ("feed", 0), ("feed", 0), ("status", 0, 1), ("status", 0, 0)]
    ref = model()
    assert run(ref, acts)[NOTES][0] == (rd.DELIVERED, rd.CANCELLED)
    up = model("upstream-up-after-down")
    s = run(up, acts)
    assert s[NOTES][0] == (rd.DELIVERED, rd.STALE)
    s = run(up, [("run", 0), ("done", 0), ("run", 1), ("done", 1)], s)
    with pytest.raises(PropertyViolation, match="no-up-after-down"):
        up.check_path(up.replay(acts + [("run", 0), ("done", 0), ("run", 1), ("done", 1), ("poll", 0, 1)]))


def test_up_is_deferred_until_pending_reads_zero_and_polls_report_the_count():
    m = model()
    s = run(m, [("recover", 0), ("feed", 0), ("feed", 0)])
    [(obs, s)] = m.step(s, ("status", 0, 1))
    assert obs == "deferred"
    assert list(m.step(s, ("poll", 0, 1))) == [(2, s)]  # a poll that waits changes nothing
    s = run(m, [("run", 0), ("done", 0), ("run", 1), ("done", 1)], s)
    [(obs, t)] = m.step(s, ("poll", 0, 1))
    assert obs == "delivered" and t[NOTES][0][1] == rd.DELIVERED


def test_up_callback_waits_for_the_recovery_events_and_the_feed_thread():
    m = model()
    s = run(m, [("recover", 0), ("feed", 0)])
    assert list(m.step(s, ("status", 0, 1))) == []  # one resent event still to come
    up = model("upstream-count-after-enqueue")
    s = run(up, [("recover", 0), ("feed", 0), ("track",), ("feed", 0)])
    assert list(up.step(s, ("status", 0, 1))) == []  # the feed thread is still submitting


def test_non_up_status_passes_through_while_an_up_is_deferred():
    m = model()
    s = run(m, [("recover", 0), ("feed", 0), ("feed", 0), ("status", 0, 1)])
    [(obs, t)] = m.step(s, ("status", 0, 0))
    assert obs == "forwarded" and t[NOTES][0] == (rd.DELIVERED, rd.CANCELLED)  # DEV-011


def test_new_recovery_supersedes_the_deferred_up():
    m = model("reference-re-recovery")
    s = run(m, [("recover", 0), ("feed", 0), ("status", 0, 0)])
    assert s[NOTES][0] == (rd.PENDING,)
    s = run(m, [("recover", 0)], s)
    assert s[REC][0] == 2 and s[NOTES][0] == (rd.NOT_SENT,)
    assert ("poll", 0, 0) not in m.actions(s)


def test_upstream_cancel_does_not_stop_a_poll_that_read_zero():
    m = model("upstream-poll-then-deliver")
    s = run(m, [("recover", 0), ("feed", 0), ("run", 0), ("done", 0), ("status", 0, 0)])
    [(obs, s)] = m.step(s, ("poll", 0, 0))
    assert obs == "due" and s[SCHED] == (0, 1, 0)
    s = run(m, [("recover", 0)], s)
    [(obs, t)] = m.step(s, ("deliver",))
    assert obs == ("delivered", 0, 1)
    with pytest.raises(PropertyViolation, match="no-stale-up"):
        m.check_path(m.replay([("recover", 0), ("feed", 0), ("run", 0), ("done", 0), ("status", 0, 0), ("poll", 0, 0), ("recover", 0), ("deliver",)]))


def only(m, *names):
    """``m`` checking just the named properties (check_path stops at the first violation)."""
    m._properties = tuple(p for p in m.property_list() if p.name in names)
    return m


def test_customer_hears_of_a_recovery_before_its_events_and_its_up():
    ref = model()
    s = run(ref, [("recover", 0)])
    assert s[REC] == s[TOLD] == (1, 0)  # forwarded in the step that stores the context
    off = model("seed-initiated-off-feed-thread")
    s = run(off, [("recover", 0)])
    assert s[REC] == (1, 0) and s[TOLD] == (0, 0) and ("announce", 0) in off.actions(s)
    [(obs, t)] = off.step(s, ("announce", 0))
    assert obs == ("forwarded", 1) and t[TOLD] == (1, 0)
    # a resent event reaches the customer's listener before its recovery's onRecoveryInitiated
    with pytest.raises(PropertyViolation, match="recovery-initiated-first"):
        off.check_path(off.replay([("recover", 0), ("feed", 0), ("run", 0)]))
    # and, with no resent event at all, the ProducerUp of the recovery does
    live = model("seed-initiated-off-feed-thread", events=((0, 0, 0), (1, 1, 0)))
    with pytest.raises(PropertyViolation, match="recovery-initiated-first"):
        live.check_path(live.replay([("recover", 0), ("status", 0, 0), ("poll", 0, 0)]))
    live.check_path(live.replay([("recover", 0), ("announce", 0), ("status", 0, 0), ("poll", 0, 0)]))


def test_a_deferred_up_polls_its_own_context_and_a_new_recovery_supersedes_it():
    ref = model("reference-re-recovery")
    s = run(ref, [("recover", 0), ("feed", 0), ("status", 0, 0)])
    assert s[NOTES][0] == (rd.PENDING,) and s[UPCTX][0] == (1,)  # correlated with (producer 0, request 1)
    s = run(ref, [("recover", 0)], s)
    assert s[NOTES][0] == (rd.NOT_SENT,) and s[UPCTX][0] == (0,)  # superseded
    keep = model("seed-new-recovery-keeps-deferred-up")
    acts = [("recover", 0), ("feed", 0), ("status", 0, 0), ("recover", 0)]
    s = run(keep, acts)
    assert s[REC][0] == 2 and s[NOTES][0] == (rd.PENDING,) and s[UPCTX][0] == (1,)
    assert list(keep.step(s, ("poll", 0, 0))) == [(1, s)]  # its own context (0, 1), not (0, 2)
    with pytest.raises(PropertyViolation, match="deferred-up-of-latest-recovery"):
        keep.check_path(keep.replay(acts))
    # recovery 2's event arrives and waits; recovery 1's event completes; the old up fires
    stale = acts + [("feed", 0), ("run", 0), ("done", 0), ("poll", 0, 0)]
    with pytest.raises(PropertyViolation, match="no-stale-up") as info:
        only(model("seed-new-recovery-keeps-deferred-up"), "no-stale-up").check_path(keep.replay(stale))
    assert len(info.value.path) == len(stale)
    # every other claim about that up holds: it speaks of its own recovery (1), whose tasks are
    # done; read against the producer's current recovery (2, its event still queued) the same
    # delivery would have been blamed on up-after-recovery-tasks, and no-stale-up would have held --
    # which is what up-after-latest-recovery-events does (issue 32: the producer's newest recovery)
    with pytest.raises(PropertyViolation, match="up-after-latest-recovery-events"):
        only(model("seed-new-recovery-keeps-deferred-up"), "up-after-latest-recovery-events").check_path(keep.replay(stale))
    rest = [p.name for p in keep.property_list()
            if p.name not in ("no-stale-up", "deferred-up-of-latest-recovery", "up-after-latest-recovery-events")]
    only(model("seed-new-recovery-keeps-deferred-up"), *rest).check_path(keep.replay(stale))
    last = keep.replay(stale).states()[-2]
    assert last[STATUS][1] == rd.QUEUED and last[REC][0] == 2 and last[UPCTX][0] == (1,)


def test_no_context_up_is_forwarded_in_the_reference_and_dropped_upstream():
    ref = model("reference-no-context")
    [(obs, _)] = ref.step(ref.init_states()[0], ("status", 0, 0))
    assert obs == "forwarded"
    up = model("upstream-drop-without-context")
    [(obs, t)] = up.step(up.init_states()[0], ("status", 0, 0))
    assert obs == "dropped" and t[NOTES][0] == (rd.LOST,)


def test_upstream_second_deferral_cancels_the_first():
    ref = model("reference-two-callbacks")
    acts = [("recover", 0), ("feed", 0), ("feed", 0), ("status", 0, 0), ("status", 0, 1)]
    assert run(ref, acts)[NOTES][0] == (rd.PENDING, rd.PENDING)
    up = model("upstream-replace-deferred")
    assert run(up, acts)[NOTES][0] == (rd.LOST, rd.PENDING)


def test_legacy_handles_everything_on_the_feed_thread_and_forwards_ups():
    m = model("legacy")
    s = run(m, [("recover", 0), ("feed", 0), ("feed", 0)])
    assert s[STATUS][:2] == (rd.FEEDRUN, rd.FEEDRUN) and s[QUEUES] == ((), ())
    [(obs, _)] = m.step(s, ("status", 0, 1))
    assert obs == "forwarded"


def test_bad_configurations_are_refused():
    with pytest.raises(ModelError, match="out of bounds"):
        model(events=((5, 0, 0),))
    with pytest.raises(ModelError, match="unknown status callback"):
        model(callbacks=("Nope",))
    with pytest.raises(ModelError, match="on_queue_full must be one of"):
        model(on_queue_full="explode")


def test_view_is_readable():
    m = model("upstream-count-after-enqueue")
    v = m.view(run(m, [("recover", 0), ("feed", 0)]))
    assert v["feed_submitted_uncounted"] == 0 and v["events"][0] == "queued" and v["recovery"] == [1, 0]


# -- (d) counterexamples replay ---------------------------------------------------------


@pytest.mark.parametrize("entry", [pytest.param(e, marks=_marks(e), id=e.label) for e in ENTRIES if e.violated])
def test_counterexamples_replay(entry):
    ex = explored(entry)
    m = load_model(NAME, entry.config, entry.overrides)
    for name in entry.violated:
        v = ex.verdict(name)
        path = m.replay([(a, o) for a, o, _ in v.path.steps])
        assert path.last == v.path.last
        if v.prop.kind in (Kind.ALWAYS, Kind.ALWAYS_STEP):
            only = load_model(NAME, entry.config, entry.overrides)
            only._properties = (v.prop,)
            with pytest.raises(PropertyViolation) as info:
                only.check_path(path)
            assert info.value.prop.name == name
            assert len(info.value.path) == len(path)  # shortest: it fails at the last step, not before
        else:
            # a lasso: the goal never holds on it, and the cycle returns to where it started
            assert v.prop.trigger(v.path.last) or any(v.prop.trigger(t) for t in path.states())
            assert not any(v.prop.check(t) for t in path.states()[-1:])
            assert v.cycle is not None
            cyc = m.replay([(a, o) for a, o, _ in v.cycle.steps], init=v.path.last)
            assert cyc.last == v.path.last
            assert not any(v.prop.check(t) for t in cyc.states())
