"""The ordered-consumption model (seed 001, REFERENCE §2): pinned manifest
results, hypothesis walks, focused steps, replayable counterexamples."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from conq import manifest
from conq.model import ordered_consumption as oc
from conq.model.explorer import explore
from conq.model.kernel import Kind, PropertyViolation
from conq.model.registry import load_model
from conq.model.stateful import state_machine

NAME = "ordered-consumption"
ENTRIES = [e for e in manifest.load() if e.model == NAME]


def model(config="reference", **kw):
    m = load_model(NAME, config)
    if kw:
        m = oc.OrderedConsumptionModel(dataclasses.replace(m.config, **kw))
    return m


_EXPLORED: dict = {}


def explored(entry):
    key = (entry.config, tuple(sorted(entry.overrides.items())))
    if key not in _EXPLORED:
        m = load_model(NAME, entry.config, entry.overrides)
        _EXPLORED[key] = explore(m, symmetry=entry.symmetry, liveness=entry.liveness)
    return _EXPLORED[key]


# -- (a) the manifest --------------------------------------------------------------


def test_manifest_names_every_configuration():
    assert {e.config for e in ENTRIES} == set(oc.OrderedConsumptionModel.configs())


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.label)
def test_manifest_entry(entry):
    ex = explored(entry)
    assert manifest.mismatches(entry, ex) == []


def test_reference_is_the_disjoint_union_of_the_roles():
    roles = ["producer", "push-standard", "push-fifo", "simple"]
    by = {e.config: e for e in ENTRIES}
    assert by["reference"].states == sum(by[r].states for r in roles)
    assert by["reference"].transitions == sum(by[r].transitions for r in roles)
    assert not by["reference"].violated and all(not by[r].violated for r in roles)


def test_reference_lists_every_property_name():
    # the catalog resolves MODEL:PROPERTY against the default configuration
    ref = {p.name for p in model().property_list()}
    for name in oc.OrderedConsumptionModel.configs():
        assert {p.name for p in model(name).property_list()} <= ref


# -- (b) hypothesis ---------------------------------------------------------------------

TestReferenceWalk = state_machine(model(), max_examples=60, stateful_step_count=40).TestCase
TestFifoWalk = state_machine(model("push-fifo"), max_examples=60, stateful_step_count=40).TestCase


@pytest.mark.parametrize(
    "config, prop",
    [
        ("producer-upstream", "txn-single-attempt"),
        ("mutant-simple-retry", "simple-no-internal-retry"),
    ],
)
def test_hypothesis_finds_the_variant_violation(config, prop):
    machine = state_machine(model(config), stateful_step_count=30)
    with pytest.raises(PropertyViolation) as info:
        run_state_machine_as_test(machine, settings=settings(max_examples=1000, deadline=None, database=None, derandomize=True))
    assert info.value.prop.name == prop


# -- (c) focused steps ------------------------------------------------------------------


def producer_init(m, mtype, mask, group=0, cached=True):
    for s in m.init_states():
        if s[0] == oc.PRODUCER and s[2] == mtype and s[3] == mask and s[4] == group and (s[1] == oc.P_PICK) == cached:
            return s
    raise AssertionError("no such initial state")


def outcome(m, s, action, obs):
    outs = [t for o, t in m.step(s, action) if o == obs]
    assert outs, (action, obs, [o for o, _ in m.step(s, action)])
    return outs[0]


def test_producer_rotates_candidates_and_stops_at_max_attempts():
    m = model("producer")
    s = producer_init(m, oc.NORMAL, 0b11)
    queues = []
    for _ in range(m.config.max_send_attempts):
        s = outcome(m, s, ("pick",), s[5] % 2)
        queues.append(s[6])
        s = outcome(m, s, ("send", s[6]), "error")
    assert queues == [0, 1, 0]
    assert s[1] == oc.P_DONE and s[9] == oc.R_FAILED and s[5] == 3
    assert m.actions(s) == []


def test_route_fetch_failure_fails_the_send_without_request():
    m = model("producer")
    s = producer_init(m, oc.NORMAL, 0b11, cached=False)
    assert m.actions(s) == [("fetch_route",)]
    t = outcome(m, s, ("fetch_route",), "failed")
    assert t[9] == oc.R_FAILED and t[5] == 0


def test_type_mismatch_fails_at_once_even_on_a_retry():
    m = model("producer")
    s = producer_init(m, oc.NORMAL, 0b01)  # queue 1 does not accept the type
    s = outcome(m, outcome(m, s, ("pick",), 0), ("send", 0), "error")
    t = outcome(m, s, ("pick",), "type-mismatch")
    assert t[9] == oc.R_FAILED and t[5] == 1 and m.actions(t) == []


def test_transactional_send_one_attempt_seed_and_retried_upstream():
    seed, upstream = model("producer"), model("producer-upstream")
    for m, after in ((seed, oc.P_DONE), (upstream, oc.P_PICK)):
        s = outcome(m, producer_init(m, oc.TXN, 0b11), ("pick",), 0)
        assert outcome(m, s, ("send", 0), "error")[1] == after
        assert outcome(m, s, ("send", 0), ("throttled", 1))[1] == (oc.P_DONE if m is seed else oc.P_WAIT)


def test_throttled_retry_waits_for_the_servers_backoff():
    m = model("producer")
    s = outcome(m, producer_init(m, oc.NORMAL, 0b11), ("pick",), 0)
    s = outcome(m, s, ("send", 0), ("throttled", 2))
    assert m.actions(s) == [("tick",)]
    s = outcome(m, s, ("tick",), 1)
    assert m.actions(s) == [("tick",)]
    s = outcome(m, s, ("tick",), 2)
    assert m.actions(s) == [("retry",)]
    # a plain error retries at once: straight back to picking
    s2 = outcome(m, producer_init(m, oc.NORMAL, 0b11), ("pick",), 0)
    assert outcome(m, s2, ("send", 0), "error")[1] == oc.P_PICK


def test_fifo_message_stays_on_its_group_queue():
    m = model("producer")
    s = producer_init(m, oc.FIFO_MSG, 0b11, group=1)
    seen = []
    while s[1] != oc.P_DONE:
        s = outcome(m, s, ("pick",), 1)
        seen.append(s[6])
        s = outcome(m, s, ("send", 1), "error")
    assert seen == [1, 1, 1]


def push_init(m, role):
    return next(s for s in m.init_states() if s[0] == role)


def test_cache_thresholds_split_per_queue_and_batch_size():
    m = model("push-standard")
    assert (m.thr_count, m.thr_bytes) == (2, 2)  # max(1, 4 / 2) each
    assert model("push-standard", cache_messages=1).thr_count == 1
    s = push_init(m, oc.STANDARD)
    # empty cache: batch min(max(2 - 0, 1), 2) = 2, any non-empty prefix
    assert [o for o, _ in m.step(s, ("receive", 0))] == [((0, 1),), ((0, 1), (1, 1))]
    full = outcome(m, s, ("receive", 0), ((0, 1), (1, 1)))
    assert [o for o, _ in m.step(full, ("receive", 0))] == ["full"]
    # one message of size 1 cached: batch min(max(2 - 1, 1), 2) = 1
    one = outcome(m, s, ("receive", 0), ((0, 1),))
    assert [o for o, _ in m.step(one, ("receive", 0))] == [((1, 1),)]


def test_byte_threshold_alone_stops_receiving():
    m = model("push-standard", msg_size=(2, 1, 1))
    s = outcome(m, push_init(m, oc.STANDARD), ("receive", 0), ((0, 1),))
    assert [o for o, _ in m.step(s, ("receive", 0))] == ["full"]  # 1 message < 2, but 2 bytes >= 2
    ignoring = model("mutant-push-ignore-bytes", msg_size=(2, 1, 1))
    s = outcome(ignoring, push_init(ignoring, oc.STANDARD), ("receive", 0), ((0, 1),))
    assert [o for o, _ in ignoring.step(s, ("receive", 0))] == [((1, 1),)]


def test_fifo_lock_busy_stops_and_unlock_signals():
    m = model("push-fifo")
    s = push_init(m, oc.FIFO)
    s = outcome(m, s, ("receive", 0), ((0, 1),))
    s = outcome(m, s, ("dispatch", 0), "locked")
    s = outcome(m, s, ("take", 0), 0)
    s = outcome(m, s, ("receive", 0), ((1, 1),))
    busy = outcome(m, s, ("dispatch", 0), "lock-busy")
    assert busy[2][0][1] == 0 and ("dispatch", 0) not in m.actions(busy)
    s = outcome(m, busy, ("consume", 0), ("ok", 1))
    s = outcome(m, s, ("ack", 0), "ok")
    s = outcome(m, s, ("unlock", 0), "unlocked")
    assert s[2][0] == (0, 1, 0, oc.W_IDLE)  # unlocked and signalled
    s = outcome(m, outcome(m, s, ("dispatch", 0), "locked"), ("take", 0), 1)
    assert s[1][1][2] == oc.C_CONSUMING
    lost = model("mutant-fifo-unlock-no-signal")
    t = lost.replay([(a, o) for a, o, _ in m.replay(_fifo_prefix()).steps])
    assert t.last[2][0][1] == 0  # no signal: message 1 stays cached


def _fifo_prefix():
    return [
        (("receive", 0), ((0, 1),)),
        (("dispatch", 0), "locked"),
        (("take", 0), 0),
        (("receive", 0), ((1, 1),)),
        (("dispatch", 0), "lock-busy"),
        (("consume", 0), ("ok", 1)),
        (("ack", 0), "ok"),
        (("unlock", 0), "unlocked"),
    ]


def test_fifo_failure_reconsumes_then_dead_letters_at_max():
    m = model("push-fifo")
    s = push_init(m, oc.FIFO)
    for a, o in [(("receive", 0), ((0, 1),)), (("dispatch", 0), "locked"), (("take", 0), 0)]:
        s = outcome(m, s, a, o)
    s = outcome(m, s, ("consume", 0), ("fail", 1))
    assert s[1][0][2] == oc.C_CONSUMING  # below the maximum: consume again
    s = outcome(m, s, ("consume", 0), ("fail", 2))
    assert s[1][0][2] == oc.C_DLQING  # at the maximum: dead-letter
    assert dict(m.step(s, ("forward_to_dlq", 0)))["error"] == s  # retried until it succeeds
    t = outcome(m, s, ("forward_to_dlq", 0), "ok")
    assert t[1][0][0] == oc.S_DLQ_CLI and t[2][0][3] == oc.W_UNLOCK
    # the seed read literally allows one more consumption
    lit = model("push-fifo-dlq-exceeds")
    s2 = lit.replay([(("receive", 0), ((0, 1),)), (("dispatch", 0), "locked"), (("take", 0), 0),
                     (("consume", 0), ("fail", 1)), (("consume", 0), ("fail", 2))]).last
    assert s2[1][0][2] == oc.C_CONSUMING


def test_standard_failure_changes_invisible_then_redelivers_with_next_attempt():
    m = model("push-standard")
    path = m.replay([
        (("receive", 1), ((2, 1),)),
        (("dispatch", 1), 2),
        (("consume", 2), ("fail", 1)),
        (("change_invisible", 2), "ok"),
        (("expire", 2), "visible"),
        (("receive", 1), ((2, 2),)),
        (("dispatch", 1), 2),
        (("consume", 2), ("fail", 2)),
        (("change_invisible", 2), "error"),  # seed: not retried; the invisible timer still runs out
        (("expire", 2), "dead-lettered"),
    ])
    assert path.last[1][2][0] == oc.S_DLQ_SRV
    m.check_path(path)
    # seed standard mode erases the message from the cache right after consuming it
    assert path.steps[2][2][1][2][3] == 0


def test_standard_upstream_keeps_cache_until_settled_and_retries_settle():
    m = model("push-standard-upstream")
    s = m.replay([(("receive", 1), ((2, 1),)), (("dispatch", 1), 2), (("consume", 2), ("ok", 1))]).last
    assert s[1][2][3] == 1  # still cached
    assert dict(m.step(s, ("ack", 2)))["error"] == s  # retried until OK
    assert outcome(m, s, ("ack", 2), "ok")[1][2][3] == 0


def test_simple_consumer_returns_errors_without_retry():
    m = model("simple")
    s = next(iter(m.init_states()))
    s = outcome(m, s, ("call_receive",), "called")
    t = outcome(m, s, ("rpc",), "error")
    assert t[3] == oc.OP_NONE  # the error is returned to the user
    r = model("mutant-simple-retry")
    t2 = outcome(r, s, ("rpc",), "error")
    assert t2[3] == oc.OP_RECEIVE and ("rpc",) in r.actions(t2)
    got = outcome(m, s, ("rpc",), ("ok", (0, 1)))
    assert got[1][0] == (oc.S_INVIS, 1, 1) and got[2] == 1  # next receive goes to the next queue


def test_fairness_never_forces_failures_or_user_calls():
    m = model()
    assert m.fair(("ack", 0), "error") is None
    assert m.fair(("forward_to_dlq", 0), "error") is None
    assert m.fair(("rpc",), "error") is None
    assert m.fair(("call_ack", 0), "called") is None
    assert m.fair(("ack", 0), "ok") == ("ack", 0)
    assert m.fair(("expire", 1), "visible") == ("expire", 1)


def test_properties_follow_the_enabled_roles():
    names = {p.name for p in model("producer").property_list()}
    assert "send-attempts-within-max" in names and "fifo-order" not in names
    assert "fifo-lock-contended" not in {p.name for p in model("push-fifo-upstream").property_list()}
    for p in model().property_list():
        assert p.claim and p.name == p.name.lower()
        if p.kind is Kind.LEADS_TO:
            assert p.fairness


# -- (d) counterexamples replay -------------------------------------------------------


VIOLATING = [e for e in ENTRIES if e.violated]


@pytest.mark.parametrize("entry", VIOLATING, ids=lambda e: e.label)
def test_counterexamples_replay_and_reraise(entry):
    ex = explored(entry)
    m = ex.model
    for name in entry.violated:
        v = ex.verdict(name)
        assert v.status == "violated" and v.path is not None
        replayed = m.replay([(a, o) for a, o, _ in v.path.steps], init=v.path.init)
        assert replayed.last == v.path.last
        if v.prop.is_invariant:
            with pytest.raises(PropertyViolation) as info:
                m.check_path(replayed)
            assert info.value.prop.name in entry.violated
            # and the named property itself fails on exactly this path, at its last step
            only = load_model(NAME, entry.config, entry.overrides)
            only._properties = (only.property(name),)
            with pytest.raises(PropertyViolation) as info:
                only.check_path(replayed)
            assert info.value.prop.name == name and len(info.value.path) == len(replayed)
        else:
            # a liveness lasso: the goal is never reached along it, and its cycle returns to its start
            assert v.prop.trigger(replayed.last) or any(v.prop.trigger(x) for x in replayed.states())
            assert not any(v.prop.check(x) for x in replayed.states()[-1:])
            if v.cycle is not None:
                cyc = m.replay([(a, o) for a, o, _ in v.cycle.steps], init=v.cycle.init)
                assert cyc.last == cyc.init == replayed.last
                assert not any(v.prop.check(x) for x in cyc.states())
