"""The ordered-consumption model (seed 001, REFERENCE §2): pinned manifest
results, hypothesis walks, focused steps, replayable counterexamples."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from conq import manifest
from conq.model.ordered_consumption import state as oc
from conq.model.ordered_consumption import OrderedConsumptionModel
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind, PropertyViolation
from conq.model.engines.registry import load_model
from conq.model.engines.stateful import state_machine

NAME = "ordered-consumption"
ENTRIES = [e for e in manifest.load() if e.model == NAME]


def model(config="reference", **kw):
    m = load_model(NAME, config)
    if kw:
        m = OrderedConsumptionModel(dataclasses.replace(m.config, **kw))
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
    assert {e.config for e in ENTRIES} == set(OrderedConsumptionModel.configs())


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
    for name in OrderedConsumptionModel.configs():
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
    s = outcome(m, m.init_states()[0], ("call_receive", 0), "called")
    t = outcome(m, s, ("rpc", 0), "error")
    assert t[3][0][0] == oc.OP_NONE  # the error is returned to the application
    got = outcome(m, s, ("rpc", 0), ("ok", (0, 1)))
    assert got[1][0] == (oc.S_INVIS, 1, 1) and got[2] == 1  # the next receive asks the next queue
    r = model("mutant-simple-retry")
    s2 = outcome(r, r.init_states()[0], ("call_receive", 0), "called")
    t2 = outcome(r, s2, ("rpc", 0), "error")
    assert t2[3][0][0] == oc.OP_RECEIVE and ("rpc", 0) in r.actions(t2)


def test_simple_concurrent_receives_get_distinct_messages():
    m = model("simple")
    s = m.init_states()[0]
    s = outcome(m, s, ("call_receive", 0), "called")
    s = outcome(m, s, ("call_receive", 1), "called")
    assert [c[0] for c in s[3]] == [oc.OP_RECEIVE, oc.OP_RECEIVE]
    s = outcome(m, s, ("rpc", 1), ("ok", (0, 1)))
    s = outcome(m, s, ("rpc", 0), ("ok", (2, 1)))  # round-robin: the second receive asks queue 1
    assert [r[2] for r in s[1]] == [1, 0, 1]


def test_simple_client_takes_no_lifecycle_action_of_its_own():
    # every change of a message's fate is the answer to an application call, or the server's timer
    ex = explored(next(e for e in ENTRIES if e.config == "simple"))
    m = ex.model
    states, e, labels = ex.state_list, ex.edges, ex.labels
    for k in range(0, len(e), 3):
        s, t = states[e[k]], states[e[k + 1]]
        a, o = labels[e[k + 2]]
        for m_id, (before, after) in enumerate(zip(s[1], t[1])):
            if after[0] == oc.S_ACKED and before[0] != oc.S_ACKED:
                assert a[0] == "rpc" and s[3][a[1]][:2] == (oc.OP_ACK, m_id)
            if before[2] and not after[2]:  # the application let go of a message
                assert a[0] == "abandon" or (a[0] == "rpc" and s[3][a[1]][1] == m_id and o != "error")
            if after[0] != before[0] and a[0] not in ("rpc", "expire"):
                raise AssertionError(f"{a} changed message {m_id} on the server")
        if a[0] == "rpc":
            assert s[3][a[1]][0] != oc.OP_NONE  # a request only for a call the application made
    assert {a[0] for a, _ in labels} == {"call_receive", "call_ack", "call_change_invisible", "rpc", "abandon", "expire"}


def test_route_cached_skips_the_fetch():
    m = model("producer")
    cached = producer_init(m, oc.NORMAL, 0b11, cached=True)
    fetched = producer_init(m, oc.NORMAL, 0b11, cached=False)
    assert m.actions(cached) == [("pick",)] and m.actions(fetched) == [("fetch_route",)]
    assert outcome(m, fetched, ("fetch_route",), "ok") == cached


def test_consumption_mode_is_configuration_and_only_the_dispatch_differs():
    std, fifo = model("push-standard"), model("push-fifo")
    assert std.init_states()[0][1:] == fifo.init_states()[0][1:]
    s_std = outcome(std, std.init_states()[0], ("receive", 0), ((0, 1), (1, 1)))
    s_fifo = outcome(fifo, fifo.init_states()[0], ("receive", 0), ((0, 1), (1, 1)))
    assert s_std[1:] == s_fifo[1:]  # the same receive-and-cache process
    # standard: the dispatcher hands out both messages at once; FIFO: lock, then the earliest only
    s_std = outcome(std, outcome(std, s_std, ("dispatch", 0), 0), ("dispatch", 0), 1)
    assert [r[2] for r in s_std[1][:2]] == [oc.C_CONSUMING, oc.C_CONSUMING]
    s_fifo = outcome(fifo, outcome(fifo, s_fifo, ("dispatch", 0), "locked"), ("take", 0), 0)
    assert [r[2] for r in s_fifo[1][:2]] == [oc.C_CONSUMING, oc.C_CACHED] and ("take", 0) not in fifo.actions(s_fifo)


def test_each_queue_has_its_own_process_queue_and_messages_arrive_only_by_receive():
    m = model("push-standard")
    s = m.init_states()[0]
    assert len(s[2]) == m.config.queues
    t = outcome(m, s, ("receive", 1), ((2, 1),))
    assert t[1][2][2:4] == (oc.C_CACHED, 1) and t[1][0] == s[1][0] and t[2][0] == s[2][0]
    assert t[2][1][1] == 1  # received messages notify the dispatcher of that process queue
    assert outcome(m, t, ("dispatch", 1), 2)[1][2][2] == oc.C_CONSUMING
    assert m.step(t, ("dispatch", 0)) == []  # nothing was signalled for queue 0
    # no step other than a receive ever puts a message into a cache
    ex = explored(next(e for e in ENTRIES if e.config == "push-standard"))
    states, e, labels = ex.state_list, ex.edges, ex.labels
    for k in range(0, len(e), 3):
        a, _ = labels[e[k + 2]]
        if any(not x[3] and y[3] for x, y in zip(states[e[k]][1], states[e[k + 1]][1])):
            assert a[0] == "receive"


def test_standard_dispatcher_takes_until_the_cache_is_empty():
    m = model("push-standard")
    s = outcome(m, m.init_states()[0], ("receive", 0), ((0, 1), (1, 1)))
    s = outcome(m, s, ("dispatch", 0), 0)
    assert s[2][0][1] == 1  # still signalled: repeat the step
    s = outcome(m, s, ("dispatch", 0), 1)
    s = outcome(m, s, ("dispatch", 0), "empty")
    assert s[2][0][1] == 0 and ("dispatch", 0) not in m.actions(s)


def test_fifo_take_on_an_empty_cache_unlocks_and_ack_is_retried():
    m = model("push-fifo")
    s = m.replay(_fifo_prefix()).last  # message 1 cached, process queue 0 signalled
    s = outcome(m, s, ("dispatch", 0), "locked")
    s = outcome(m, s, ("take", 0), 1)
    s = outcome(m, outcome(m, s, ("consume", 1), ("ok", 1)), ("ack", 1), "error")
    assert s[1][1][2] == oc.C_ACKING  # a failed FIFO ack is repeated until it succeeds
    s = outcome(m, outcome(m, s, ("ack", 1), "ok"), ("unlock", 0), "unlocked")
    s = outcome(m, s, ("dispatch", 0), "locked")
    t = outcome(m, s, ("take", 0), "empty")
    assert t[2][0] == (0, 0, 0, oc.W_IDLE)


def test_fairness_never_forces_failures_or_user_calls():
    m = model()
    assert m.fair(("ack", 0), "error") is None
    assert m.fair(("forward_to_dlq", 0), "error") is None
    assert m.fair(("rpc", 0), "error") is None
    assert m.fair(("call_ack", 0, 0), "called") is None
    assert m.fair(("rpc", 0), ("ok", "acked")) == ("rpc", 0)
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
