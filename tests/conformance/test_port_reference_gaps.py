"""Issue 35: every gap a port author met in the generated port references is answered there, and
each answer is held to the model: a test computes the fact from the model and checks that the page
says it, so a change of either fails here (spec/ports/*.md are generated; conq protocol --write)."""

from __future__ import annotations

import re

import pytest

from conq.catalog import repo_root
from conq.conformance.views import conformance_model
from conq.model.engines.registry import load_model

PORTS = repo_root() / "spec" / "ports"


def page(name: str) -> str:
    return re.sub(r"\s+", " ", (PORTS / f"{name}.md").read_text())


def reachable(model, cap: int = 60_000):
    """Every (state, action, observation, next state) of a model, breadth first (bounded)."""
    seen = list(dict.fromkeys(model.init_states()))
    known = set(seen)
    for s in seen:
        for a, o, t in model.successors(s):
            yield s, a, o, t
            if t not in known and len(known) < cap:
                known.add(t)
                seen.append(t)


def test_no_page_sends_a_reader_to_a_file_they_do_not_have():
    for path in list(PORTS.glob("*.md")) + [repo_root() / "spec" / "port-protocol.md"]:
        assert "GAPS.md" not in path.read_text(), path


# -- consumer lists, thread level ----------------------------------------------------------------------

def _cl_thread(config):
    from conq.conformance.consumer_lists import thread_steps as ts

    return ts.thread_model(config)


def test_cl_the_publisher_step_stays_enabled_after_its_message_is_gone():
    m = _cl_thread("same-priority")
    gone = [(m.observe(s)["messages"][a[2]], o) for s, a, o, t in reachable(m)
            if a[:2] == ("step", "publisher") and m.observe(s)["messages"][a[2]] != "available"]
    assert gone and all(o == (("notify_consumers", o[0][1]), None, ()) for _st, o in gone)
    assert "the step stays enabled after the message was acquired (or deleted) by someone else" in page("consumer-lists")


def test_cl_the_second_half_ends_a_pending_pull_again():
    from conq.model.consumer_lists.state import CF, F_PC, F_WAKE, IDLE

    m = _cl_thread("credit")
    seen = 0
    for s, a, o, t in reachable(m):
        if o[0][0] == "set_notify_work_desired":
            c = o[0][1]
            assert t[c * CF + F_PC] == IDLE
            assert (("step", "io", c) in m.actions(t)) == bool(t[c * CF + F_WAKE])
            seen += 1
    assert seen
    text = page("consumer-lists")
    assert "a pull-again that a delivery left pending is ended, and the consumer's next" in text


def test_cl_credit_drops_and_a_browsers_seen_changes_at_acquire():
    m = _cl_thread("acquirer-and-browser")
    for s, a, o, t in reachable(m):
        label = o[0][0]
        before, after = m.base.view(s)["consumers"], m.base.view(t)["consumers"]
        for c, (x, y) in enumerate(zip(before, after)):
            if x["credit"] != y["credit"] and label in ("find_next_available", "deliver", "deliver_single_message"):
                pytest.fail(f"credit changed at {label}")
            if x.get("seen") != y.get("seen"):
                assert label == "acquire" and o[1] is True and c == o[0][1], (label, o)
            if label == "acquire" and o[1] is True and c == o[0][1]:
                assert y["credit"] == x["credit"] - 1
    text = page("consumer-lists")
    assert "The credit drops here, at a successful `acquire`" in text
    assert "a browser's entry joins `seen(c)` here, not at the find nor at `deliver`" in text


def test_cl_add_consumer_notifies_itself_inside_its_step():
    m = _cl_thread("dynamic")
    adds = {o for _s, a, o, _t in reachable(m) if a[0] == "add_consumer"}
    assert ((("add_consumer", 0), None, (0,))) in adds
    assert "notified inside this step: `notified` is `[c]` when **notify(c)** succeeds" in page("consumer-lists")


def test_cl_deliver_leaves_a_renotified_consumer_notified():
    m = _cl_thread("same-priority")
    hits = 0
    for s, a, o, t in reachable(m):
        if o[0][0] == "deliver":
            c = o[0][1]
            if m.observe(s)["consumers"][c][0] == "notified":
                hits += 1
                assert m.observe(t)["consumers"][c][0] == "notified" and o[2] == ()
    assert hits
    assert "one notified again during its pull, already NOTIFIED, stays so; nobody is added to `notified`" \
        in page("consumer-lists")


def test_cl_a_snapshot_has_one_groups_entry_per_group_id():
    for name, overrides in (("all-actors-assigned", {"env_budget": 2}), ("groups-shared", {"env_budget": 2})):
        view = conformance_model("consumer-lists", name, overrides)
        groups = view.config.groups
        (s,) = view.init_states()[:1]
        assert len(view.observe(s)["groups"]) == max(groups) + 1
    assert "one entry per group id `0..max(config.groups)`" in page("consumer-lists")


def test_cl_spec_says_which_suite_configurations_drive_the_other_actors():
    from conq.conformance.consumer_lists.suite_configs import ACTOR_CONFIGS, PASS_CONFIGS

    def actors_on(name):
        c = load_model("consumer-lists", name).config
        return bool(c.expiry or c.reject or c.groups)

    assert not any(actors_on(n) for n in PASS_CONFIGS) and all(actors_on(n) for n in ACTOR_CONFIGS)
    text = re.sub(r"\s+", " ", (repo_root() / "spec" / "consumer-lists.md").read_text())
    assert (f"all off in the six configurations the conformance suite drove first ({', '.join(PASS_CONFIGS)}) and on "
            f"in the six it drives for them ({', '.join(ACTOR_CONFIGS)}" in text)


# -- recovery deferral -----------------------------------------------------------------------------------

def test_rd_an_up_waits_only_for_its_own_producers_waiting_event():
    m = conformance_model("recovery-deferral", "reference")
    states = list(m.init_states())
    for a in [("recover", 0), ("feed", 0), ("feed", 0), ("recover", 1), ("feed", 1)]:
        states = [t for s in states for _o, t in m.step(s, a)]
    assert states and all(s[1] is not None and s[1][0] == 1 for s in states)  # producer 1's event waits
    assert all(m.step(s, ("status", 0, 1)) for s in states)  # producer 0's up: enabled
    assert not any(m.step(s, ("status", 1, 1)) for s in states)  # producer 1's: not yet
    assert "a waiting event of that recovery holds the up back, another producer's waiting event does not" \
        in page("recovery-deferral")


# -- ordered consumption ------------------------------------------------------------------------------------

def _oc(config="push-standard", **overrides):
    return load_model("ordered-consumption", config, overrides)


def test_oc_a_redelivery_replaces_a_copy_that_is_only_cached():
    from conq.model.ordered_consumption.state import C_CACHED, S_INVIS

    m = _oc()
    cached = (S_INVIS, 1, C_CACHED, 1, 0, 1, 0, 0, 0, 0, 0)
    again = m._cache(cached, 2)
    assert again[2] == C_CACHED and again[3] == 1 and again[1] == again[5] == 2 and again[6] == 0
    assert ("replaces that copy: one cache entry, now with the new delivery's attempt and handle, the cache's "
            "count unchanged") in page("ordered-consumption")


def test_oc_candidates_rotate_from_queue_zero_and_the_type_is_checked_at_every_attempt():
    from conq.model.ordered_consumption.state import P_PICK, PRODUCER

    m = _oc("producer")
    q = m.config.queues
    for sent in range(4):
        s = (PRODUCER, P_PICK, 0, (1 << q) - 1, 0, sent, -1, 0, 0, 0)
        assert m._p_queue(s) == sent % q
    refused = (PRODUCER, P_PICK, 0, 0b01, 0, 1, -1, 0, 0, 0)  # second attempt on queue 1, which refuses
    assert [o for o, _t in m.step(refused, ("pick",))] == ["type-mismatch"]
    text = page("ordered-consumption")
    assert "attempt `k` (from 0) sends to queue `k mod config.queues`" in text
    assert "Before every attempt, not only the first, the producer checks that the queue accepts" in text


def test_oc_a_send_with_a_cached_route_starts_at_its_first_send():
    view = conformance_model("ordered-consumption", "producer")
    phases = {view.observe(s)["phase"] for s in view.init_states() if view.observe(s)["phase"] != "fetch-route"}
    assert phases == {"send", "done"}
    assert "with it cached the producer picks its first candidate and sends at once: the first call is that " \
           "`send_answer`" in page("ordered-consumption")


def test_oc_a_throttle_on_the_last_attempt_or_of_a_transaction_fails_the_send():
    from conq.model.ordered_consumption.state import P_DONE, P_SEND, PRODUCER, TXN

    m = _oc("producer")
    last = (PRODUCER, P_SEND, 0, 3, 0, m.config.max_send_attempts - 1, 0, 0, 0, 0)
    txn = (PRODUCER, P_SEND, TXN, 3, 0, 0, 0, 0, 0, 0)
    for s in (last, txn):
        throttled = [t for o, t in m.step(s, ("send", 0)) if isinstance(o, tuple) and o[0] == "throttled"]
        assert throttled and all(t[1] == P_DONE for t in throttled)
    assert "a throttled answer on the send's last attempt" in page("ordered-consumption")
    assert "or any failure of a transactional message" in page("ordered-consumption")


def test_oc_bad_request_ends_fifos_repetition_too():
    from conq.model.ordered_consumption.state import C_ACKING, M_ACK, S_INVIS

    m = _oc("push-fifo")
    msgs = tuple((S_INVIS, 1, C_ACKING, 1, 1, 1, 0, 0, 0, 1, 1) if i == 0 else m.init_states()[0][1][i]
                 for i in range(m.n_msgs))
    s = (m.init_states()[0][0], msgs, m.init_states()[0][2], 1)
    outs = dict(m.step(s, ("ack", 0)))
    assert outs["bad-request"][1][0][7] == M_ACK and outs["bad-request"][1][0][2] != C_ACKING  # gave up, remembered
    assert outs["error"][1][0][2] == C_ACKING  # retriable: repeated
    assert "gives up after a non-retriable one (`invalid-handle`, `not-found`, and `bad-request` too)" \
        in page("ordered-consumption")


def test_oc_the_answers_with_server_faults_off_are_the_models():
    from conq.conformance.ordered_consumption.port_reference import answers

    got = answers("simple", {"queues": 1, "server_faults": False})
    text = page("ordered-consumption").split("## Server answers per call", 1)[1]
    assert got["simple_receive"] == {"ok", "error"}
    row = re.search(r"\| `simple_receive` \| [^|]* \| ([^|]*) \|", text).group(1)
    assert sorted(re.findall(r"`([a-z-]+)`", row)) == sorted(got["simple_receive"])


def test_oc_simple_any_queue_asks_any_queue_and_round_robin_moves_after_every_answer():
    plain = conformance_model("ordered-consumption", "simple", {"queues": 2, "msg_queue": (0, 1)})
    anyq = conformance_model("ordered-consumption", "simple", {"queues": 2, "msg_queue": (0, 1), "simple_any_queue": True})
    (s0,) = plain.init_states()
    assert {plain.observe(t)["next_queue"] for o, t in plain.step(s0, ("simple_receive", "error"))} == {1}
    got = {o[1][0] for o, _t in anyq.step(anyq.init_states()[0], ("simple_receive", "ok")) if o[1]}
    assert got == {0, 1}  # either queue's message
    assert {anyq.observe(t)["next_queue"] for o, t in anyq.step(anyq.init_states()[0], ("simple_receive", "ok"))} == {0}
    text = page("ordered-consumption")
    assert "moves on after every answer, a failed one included; with `config.simple_any_queue`" in text


def test_oc_several_consumers_number_their_parameters_and_share_the_servers_fields():
    view = conformance_model("ordered-consumption", "push-standard", {"consumers": 2})
    base = view.base
    q, n = base.config.queues, base.n_msgs
    assert base.group_param("receive", 1, 0) == q and base.group_param("consume", 1, 1) == n + 1
    snap = view.observe(view.init_states()[0])
    assert set(snap) == {"role", "messages", "consumers"} and set(snap["messages"][0]) == {"server", "attempt"}
    assert set(snap["consumers"][0]) == {"messages", "process_queues"}
    text = page("ordered-consumption")
    assert "process queue `p = c * config.queues + q`" in text and "message `m = c * n + x`" in text
    assert "`consumers`, per consumer in id order its own part" in text


def test_oc_retry_is_a_call_only_with_ignore_backoff():
    def sends_retry(**ov):
        view = conformance_model("ordered-consumption", "producer", ov)
        return any(a == ("retry",) for _s, a, _o, _t in reachable(view))

    assert not sends_retry() and sends_retry(ignore_backoff=True)
    assert "`[\"retry\"]`: the producer retries before its back-off is over; sent only with " \
           "`config.ignore_backoff`" in page("ordered-consumption")


def test_oc_a_remembered_outcome_settles_a_redelivery_without_the_listener():
    from conq.model.ordered_consumption.state import C_ACKING, C_CONSUMING, M_ACK, M_NONE, S_INVIS

    m = _oc("push-fifo")
    init = m.init_states()[0]
    msgs = tuple((S_INVIS, 2, C_CONSUMING, 1, 0, 2, 0, M_ACK, 0, 0, 1) if i == 0 else init[1][i] for i in range(m.n_msgs))
    ((o, t),) = m.step((init[0], msgs, init[2], 1), ("consume", 0))
    assert o == ("remembered", "ack") and t[1][0][2] == C_ACKING and t[1][0][7] == M_NONE
    text = page("ordered-consumption")
    assert "is taken like any other and listed here, but its listener is not called" in text
    assert "the memo is cleared then" in text


def test_oc_the_simple_consumers_copy_after_each_answer():
    from conq.model.ordered_consumption.state import H_NONE, H_STALE, H_VALID

    m = _oc("simple", queues=1)
    held = {}
    for s, a, o, t in reachable(m):
        if a[0] == "rpc" and s[3][a[1]][0] == 2:  # an ack's one request (OP_ACK)
            cm = s[3][a[1]][1]
            if s[1][cm][2] == H_VALID:
                held.setdefault(o if isinstance(o, str) else o[0], set()).add(t[1][cm][2])
    assert held["ok"] == {H_NONE} and held["lost"] == {H_STALE}
    assert held["error"] == {H_VALID} and held["bad-request"] == {H_VALID}
    assert ("`lost` (acked, the answer lost): still held, its handle now `stale`; `error`, `throttled`, "
            "`bad-request` (nothing applied): still held and `valid`") in page("ordered-consumption")


def test_oc_the_per_queue_threshold_divides_by_integers():
    m = _oc(cache_messages=5, cache_bytes=7)
    pqs = m.init_states()[0][2]
    assert m._thresholds(pqs) == (5 // len(pqs), 7 // len(pqs)) == (2, 3)
    assert "`max(1, config.cache_messages // n)` messages" in page("ordered-consumption")
    assert "(integer division, rounding down)" in page("ordered-consumption")


def test_oc_has_messages_is_the_configurations_queue_not_what_is_deliverable():
    view = conformance_model("ordered-consumption", "push-standard")
    base = view.base
    assert all(bool(base.by_queue[p]) == (p in base.config.msg_queue) for p in range(base.config.queues))
    # a receive answered ok with nothing: the queue "has messages" though none is deliverable now
    empty = [o for _s, a, o, _t in reachable(view, 5_000) if a[0] == "receive_answer" and o == ()]
    assert empty
    assert "has messages (the configuration sends at least one message to queue `p`" in page("ordered-consumption")


def test_oc_a_run_of_several_roles_answers_the_other_roles_calls_with_13():
    view = conformance_model("ordered-consumption", "push-fifo", {"producer": True, "push_standard": True,
                                                                    "simple": True})
    roles = {view.observe(s)["role"] for s in view.init_states()}
    assert roles == {"producer", "push-standard", "push-fifo", "simple"}
    assert "the port answers them with error 13 (`not-enabled`: the model has them disabled in the role it runs), " \
           "never 12" in page("ordered-consumption")
