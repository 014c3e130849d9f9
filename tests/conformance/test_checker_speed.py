"""The checker's fast paths (issue 17, "Checker speed"; bench/checker_speed.py): each one must give
exactly what the general path gives -- the same values, verdicts, replies and errors.

* the consumer-lists driver's ``observed()`` is ``hashable(snapshot())``, on every configuration,
  and verdicts under the mutants (the node-list ones read the lists with side effects) are the same
  through either;
* ``parse_reply``'s fast path accepts exactly what the general checks accept, fuzzed against the
  general checks as they were before it;
* the reference port's fast path answers as its general path does, byte for byte;
* the driver's view skips reading the lists it does not show where reading them has no visible
  effect (the plain node list on real threads), with the same runs and verdicts;
* the call-level view (conformance/consumer_lists/calls.py) composes its calls from the model's
  readable ``spec_successors``, memoised, instead of its fast path: the composed successors are the
  same on every reachable call-level state of every configuration the suite drives, and a model
  subclass that changes ``successors`` is composed through its own;
* the optional feature snapshot-in-reply: one round trip per step with a port that declares it,
  the same runs as without it, and never the new field to a port that does not declare it.
"""

from __future__ import annotations

import io
import json
import sys

from hypothesis import example, given, settings
from hypothesis import strategies as st

from conq.conformance import protocol
from conq.conformance.adapters import (InProcess, PortFailure, ReplyReader, Stdio, _clip, _clip_text, _no_constants,
                                      parse_reply, short_repr)
from conq.conformance.checker import Checker
from conq.conformance.consumer_lists import mutants
from conq.conformance.consumer_lists.driver import ConsumerListsDriver
from conq.conformance.port import serve
from conq.conformance.trace import hashable, jsonable
from conq.conformance.views import conformance_model
from conq.model.consumer_lists.model import ConsumerListsModel
from conq.model.kernel import config_dict

PORT = [sys.executable, "-m", "conq.conformance.port"]


class _Both(ConsumerListsDriver):
    """Compares the fast view with the general one at every snapshot."""

    checked = 0

    def observed(self):
        fast = ConsumerListsDriver.observed(self)
        assert fast == hashable(self.snapshot())
        _Both.checked += 1
        return fast


def test_observed_is_hashable_snapshot_on_every_configuration():
    # seeds of both parities: delete_entry goes through expiry (even) and a management delete (odd)
    _Both.checked = 0
    for cfg in ConsumerListsModel.configs():
        checker = Checker(conformance_model("consumer-lists", cfg, {"env_budget": 2}), InProcess(_Both))
        for seed in range(6):
            checker.walk(seed, 30)  # the variant configurations diverge: the views are compared all the same
    assert _Both.checked > 500


def test_a_driver_that_overrides_snapshot_is_read_through_it():
    class Lying(ConsumerListsDriver):
        def snapshot(self):
            return {**super().snapshot(), "messages": ["lost"]}

    run = Checker(conformance_model("consumer-lists", "small"), InProcess(Lying)).walk(1, 10)
    assert run.divergence is not None and run.divergence.kind == "snapshot" and run.divergence.step == 0


def _verdicts(driver: type, cfg: str, seeds: int) -> list:
    checker = Checker(conformance_model("consumer-lists", cfg, {"env_budget": 2}), InProcess(driver))
    try:
        runs = [checker.walk(seed, 40) for seed in range(seeds)]
    finally:
        checker.impl.close()  # a mutant driver's patches end with it
    return [(r.actions, r.observations, r.divergence.describe() if r.divergence else None) for r in runs]


def _other_lists(driver) -> list:
    return driver._other_lists(driver.q.qcm.levels())


def test_the_plain_view_skips_reading_lists_only_where_reading_has_no_visible_effect():
    plain = ConsumerListsDriver(config_dict(conformance_model("consumer-lists", "reference").config), 0)
    assert not plain._reads_have_effects(_other_lists(plain))
    plain.observed()
    assert not plain._reads_effects
    # under a node-list mutant (the reading step patched) every list is read, as Queue.snapshot reads it
    checker = Checker(conformance_model("consumer-lists", "reference"), InProcess(mutants.mutant_driver("node-list-unlinks-tail")))
    try:
        checker.walk(0, 3)
        driver = checker.impl.driver
        assert driver._reads_have_effects(_other_lists(driver))
        driver.observed()
        assert driver._reads_effects  # the decision observed() took (and keeps for these levels)
    finally:
        checker.impl.close()
    assert not plain._reads_have_effects(_other_lists(plain))  # the patch ended with its driver


def test_runs_and_verdicts_of_the_reference_are_the_same_through_either_view():
    # the plain driver's view skips reading the lists it does not show (observed()): every run of every
    # configuration the suite drives gives the same actions, observations and verdicts as through
    # the general view, which reads every list (Queue.snapshot)
    from conq.conformance.port_reference import conformance_configs

    general = type("General", (ConsumerListsDriver,), {"observed": lambda self: hashable(self.snapshot())})
    for cfg, overrides in conformance_configs("consumer-lists"):
        runs = []
        for driver in (ConsumerListsDriver, general):
            checker = Checker(conformance_model("consumer-lists", cfg, overrides), InProcess(driver))
            runs.append([(r.actions, r.observations, r.divergence) for r in (checker.walk(seed, 40) for seed in range(8))])
        assert runs[0] == runs[1], cfg
        assert all(d is None for _a, _o, d in runs[0]), cfg


def test_verdicts_under_mutants_are_the_same_through_either_view():
    names = ["node-list-unlinks-tail", "node-list-size-twice", "requeue-to-front", "notify-every-acquirer",
             "look-then-unnotify"]
    caught = 0
    for name in names:
        fast = mutants.mutant_driver(name)
        general = type("General", (fast,), {"observed": lambda self: hashable(self.snapshot())})
        for cfg in ("reference", "dynamic", "same-priority"):
            a, b = _verdicts(fast, cfg, 12), _verdicts(general, cfg, 12)
            assert a == b, (name, cfg)
            caught += sum(v[2] is not None for v in a)
    assert caught > 0  # the comparison covers verdicts that are failures, not only passes


# -- the call-level view: composed from spec_successors (memoised) = composed from the fast path ----

def _reachable(view) -> list:
    seen = dict.fromkeys(view.init_states())
    todo = list(seen)
    while todo:
        s = todo.pop()
        for _a, _o, t in view.successors(s):
            if t not in seen:
                seen[t] = None
                todo.append(t)
    return list(seen)


def test_the_call_level_view_composes_the_same_calls_from_the_readable_successors():
    from conq.conformance.consumer_lists.calls import ConsumerListsCalls
    from conq.conformance.port_reference import conformance_configs

    total = 0
    for cfg, overrides in conformance_configs("consumer-lists"):
        view = conformance_model("consumer-lists", cfg, overrides)
        assert view._base_successors == view.base.spec_successors  # the path under test is taken
        general = ConsumerListsCalls(view.base)
        general._base_successors = view.base.successors  # the model's fast path (fast.py), as before
        assert view.base._fast is not None, "CONQ_CL_FAST=0: the fast path this compares with is off"
        states = _reachable(view)
        for s in states:
            assert view.successors(s) == general._compose(s), (cfg, s)
        assert list(view.init_states()) == list(general.init_states()), cfg
        total += len(states)
    assert total > 1_000


def test_a_model_subclass_that_changes_successors_is_composed_through_it():
    from conq.conformance.consumer_lists.calls import ConsumerListsCalls

    base = conformance_model("consumer-lists", "small").base

    class NoPulls(type(base)):
        def successors(self, s):
            return [x for x in super().successors(s) if x[0][0] != "deliver_single_message"]

    changed = NoPulls(base.config)
    view = ConsumerListsCalls(changed)
    assert view._base_successors == changed.successors
    assert all(a[0] != "pull" for s in _reachable(view) for a in view.actions(s))


# -- parse_reply: the fast path against the general checks as they were before it ------------------

def _general_parse_reply(raw: bytes, kind: str, request_id: int) -> dict:
    """parse_reply before its fast path (conformance/adapters.py at 1cf6ebd), the oracle."""
    what = f"response to {kind}"
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise PortFailure(f"the {what} is not UTF-8 (invalid byte at offset {e.start}): {_clip(raw)}", code="bad-reply") from None
    try:
        reply = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise PortFailure(f"invalid JSON in {what}: {e.msg} (column {e.colno}): {_clip(raw)}", code="bad-reply") from None
    except (ValueError, RecursionError) as e:
        raise PortFailure(f"invalid JSON in {what}: {_clip_text(str(e) or type(e).__name__, 200)}: {_clip(raw)}",
                          code="bad-reply") from None
    problem = protocol.validate(reply, "port")
    if problem:
        raise PortFailure(f"malformed {what}: {_clip_text(problem, 300)}: {_clip(raw)}", code="bad-reply")
    if reply["id"] != request_id:
        raise PortFailure(f"stale or stray {what}: it has id {short_repr(reply['id'], 40)}, the request has id {request_id}: {_clip(raw)}",
                          code="protocol")
    expected = protocol.BY_TYPE[kind].reply
    if reply["type"] not in (expected, "error"):
        raise PortFailure(f"expected {expected} or error in {what}, got {reply['type']}", code="protocol")
    return reply


def _outcome(f, raw, kind, rid):
    try:
        return ("reply", f(raw, kind, rid))
    except PortFailure as e:
        return ("failure", str(e), e.code)


_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=6),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                       max_leaves=8)
_replies = st.fixed_dictionaries(
    {"type": st.sampled_from(["action_ok", "snapshot_ok", "reset_ok", "shutdown_ok", "init_ok", "error", "action", "x"]) | _values,
     "id": st.integers(0, 3) | st.booleans() | _values},
    optional={"observation": _values, "state": _values, "implementation": _values, "features": _values,
              "code": st.sampled_from([11, 13, 20, 99]) | _values, "text": _values, "definite": _values},
)
_lines = st.one_of(
    _replies.map(lambda r: json.dumps(r).encode()),
    _replies.map(lambda r: ("\ufeff" + json.dumps(r)).encode()),  # a byte order mark
    _values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=60),
    st.just(b'{"type": "action_ok", "id": 1, "observation": NaN}'),
    st.just(b'{"type": "action_ok", "id": 1.0, "observation": 1}'),
)


@settings(max_examples=400, deadline=None)
@example(raw=b'{"type": "action_ok", "id": true, "observation": 1}', kind="action", rid=1)
@example(raw=b'{"type": "snapshot_ok", "id": 2}', kind="snapshot", rid=2)
@example(raw=b'{"type": "reset_ok", "id": 2, "state": []}', kind="action", rid=2)
@example(raw=b'{"type": "init_ok", "id": 0, "implementation": "x", "features": 3}', kind="init", rid=0)
@given(raw=_lines, kind=st.sampled_from(["init", "action", "snapshot", "reset", "shutdown"]), rid=st.integers(0, 3))
def test_parse_reply_is_the_general_checks(raw, kind, rid):
    assert _outcome(parse_reply, raw, kind, rid) == _outcome(_general_parse_reply, raw, kind, rid)


# -- the reference port: fast path and general path answer alike -------------------------------------

def _serve(requests: list[dict], driver: str | None = None) -> list[str]:
    out = io.StringIO()
    serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out, driver)
    return out.getvalue().splitlines()


def _init(cfg: str = "small") -> dict:
    model = conformance_model("consumer-lists", cfg)
    return {"type": "init", "id": 1, "protocol": protocol.PROTOCOL_VERSION, "model": "consumer-lists",
            "config": jsonable(config_dict(model.config)), "seed": 1}


def test_the_reference_port_answers_in_the_canonical_json_of_its_replies():
    reqs = [_init(), {"type": "snapshot", "id": 2}, {"type": "action", "id": 3, "action": ["enqueue", 0]},
            {"type": "action", "id": 4, "action": ["pull", 1]}, {"type": "action", "id": 5, "action": ["nope"]},
            {"type": "action", "id": 6, "action": ["pull", 0], "snapshot": True}, {"type": "snapshot", "id": 7},
            {"type": "action", "id": True, "action": ["pull", 0]},
            {"type": "reset", "id": 8, "seed": 2, "snapshot": True}, {"type": "snapshot", "id": 9},
            {"type": "reset", "id": 10, "seed": 2}, {"type": "shutdown", "id": 11}]
    lines = _serve(reqs)
    assert len(lines) == len(reqs)
    for line in lines:  # every reply, fast path or not, is json.dumps of its message
        assert json.dumps(json.loads(line)) == line
    replies = [json.loads(x) for x in lines]
    assert replies[0]["features"] == [protocol.SNAPSHOT_IN_REPLY]
    assert replies[2] == {"type": "action_ok", "id": 3, "observation": [None, [0]]}
    assert [r["type"] for r in replies[3:5]] == ["error", "error"] and replies[3]["code"] == 13 and replies[4]["code"] == 12
    # snapshot-in-reply: the state is the snapshot a separate request returns right after
    assert replies[5]["type"] == "action_ok" and replies[5]["state"] == replies[6]["state"]
    assert "state" not in replies[2]  # not asked for
    assert replies[7]["type"] == "error" and replies[7]["code"] == 10  # a boolean id: the general path's error
    assert replies[8]["type"] == "reset_ok" and replies[8]["state"] == replies[9]["state"] == replies[1]["state"]
    assert replies[10] == {"type": "reset_ok", "id": 10}


def test_a_snapshot_that_cannot_be_taken_is_left_out_of_the_action_reply(tmp_path):
    driver = tmp_path / "broken.py"
    driver.write_text(
        "from conq.conformance.consumer_lists.driver import ConsumerListsDriver\n"
        "class Broken(ConsumerListsDriver):\n"
        "    def snapshot(self):\n"
        "        raise RuntimeError('no view')\n"
        "    observed = None\n"
    )
    lines = _serve([_init(), {"type": "action", "id": 2, "action": ["enqueue", 0], "snapshot": True},
                    {"type": "snapshot", "id": 3}], f"{driver}:Broken")
    replies = [json.loads(x) for x in lines]
    assert replies[1] == {"type": "action_ok", "id": 2, "observation": [None, [0]]}
    assert replies[2]["type"] == "error" and replies[2]["code"] == 20 and "no view" in replies[2]["text"]


# -- snapshot-in-reply through Stdio ---------------------------------------------------------------

def test_snapshot_with_action_saves_a_round_trip_per_step_and_changes_no_run():
    model = conformance_model("consumer-lists", "reference")
    impl = Stdio(PORT, timeout=30)
    try:
        checker = Checker(model, impl)
        through_port = [checker.walk(seed, 40) for seed in range(8)]
        assert impl._with_snapshot
        requests, steps = impl._next_id, sum(r.steps for r in through_port)
    finally:
        impl.close()
    in_process = [Checker(model, InProcess(ConsumerListsDriver)).walk(seed, 40) for seed in range(8)]
    assert [(r.actions, r.observations, r.ok) for r in through_port] == [(r.actions, r.observations, r.ok) for r in in_process]
    # init and the first snapshot, then one reset (with its snapshot) per trace and one request per
    # step, but for a snapshot after each rejection
    rejected = sum(o == ("error", 13) for r in through_port for o in r.observations)
    assert requests <= 2 + len(through_port) + steps + rejected < 2 * steps


def test_the_action_request_is_the_json_of_the_message():
    impl = Stdio(PORT, timeout=30)
    model = conformance_model("consumer-lists", "small")
    try:
        impl.start("consumer-lists", config_dict(model.config), 3)
        impl.do(("enqueue", 0))
        assert impl._request_text == json.dumps({"type": "action", "id": impl._next_id, "action": ["enqueue", 0]})
        impl.snapshot()  # the checker takes snapshots: from now on they come with the actions
        impl.do(("pull", 0))
        assert impl._request_text == json.dumps({"type": "action", "id": impl._next_id, "action": ["pull", 0],
                                                 "snapshot": True})
        n = impl._next_id
        assert impl.snapshot() is not None and impl._next_id == n  # no request: it came with the action
    finally:
        impl.close()


def test_a_port_without_the_feature_is_never_sent_the_field(tmp_path):
    log = tmp_path / "requests.log"
    script = tmp_path / "plain_port.py"
    script.write_text(
        "import json, sys\n"
        "from conq.conformance import port\n"
        f"log = open({str(log)!r}, 'w')\n"
        "class Plain:\n"
        "    def __init__(self, out): self.out = out\n"
        "    def write(self, text):\n"
        "        msg = json.loads(text)\n"
        "        msg.pop('features', None)\n"
        "        self.out.write(json.dumps(msg) + '\\n')\n"
        "    def flush(self): self.out.flush()\n"
        "class Logged:\n"
        "    def __iter__(self):\n"
        "        for line in sys.stdin:\n"
        "            log.write(line); log.flush()\n"
        "            yield line\n"
        "sys.exit(port.serve(Logged(), Plain(sys.stdout)))\n"
    )
    impl = Stdio([sys.executable, str(script)], timeout=30)
    try:
        runs = [Checker(conformance_model("consumer-lists", "small"), impl).walk(seed, 20) for seed in range(3)]
    finally:
        impl.close()
    assert all(r.ok for r in runs)
    sent = [json.loads(x) for x in log.read_text().splitlines()]
    assert sum(m["type"] == "snapshot" for m in sent) > 3
    assert not any("snapshot" in m for m in sent if m["type"] == "action")


# -- the reply memo: a reply seen before but for its id is not decoded again ---------------------------

class _ScriptedPort:
    """Stands in for a port process: answers the next request with the given line."""

    def __init__(self, line: bytes):
        self.line = line
        self.reader = ReplyReader()

    def exit_status(self):
        return None

    def write(self, data, deadline):
        pass

    def read_line(self, deadline):
        return self.line

    def end(self, grace):
        return "was ended"


_rests = st.sampled_from([
    b', "observation": [1, [0, 2]]}', b',"observation":[1,[0,2]]}', b', "observation": 5, "id": 3}',
    b', "observation": 5, "type": "error"}', b', "observation": "\\u0069d"}', b', "observation": [1, [0, 2]] }',
    b', "state": [["consumers", [["notified", 1]]]]}', b', "observation": null, "state": {"b": [1], "a": 2}}',
    b'}', b', "observation": 1e400}', b', "observation": [[[[1]]]]}', b', "observation": 1',
])
_heads = st.sampled_from([b'{"type": "%s", "id": %s', b'{"type":"%s","id":%s', b'{ "type" :"%s" ,\t"id": %s',
                          b'{"type": "%s", "id":\x0c%s', b' {"type": "%s", "id": %s'])


def _taken(outcome):
    if outcome[0] != "reply":
        return outcome
    return ("reply", {k: hashable(v) if k in ("observation", "state") else v for k, v in outcome[1].items()})


@settings(max_examples=300, deadline=None)
@given(replies=st.lists(st.tuples(_heads, st.sampled_from(["action_ok", "snapshot_ok", "error"]),
                                   st.sampled_from(["right", "wrong", "zero-led"]), _rests), min_size=1, max_size=12),
       kind=st.sampled_from(["action", "snapshot"]))
def test_the_reply_memo_answers_as_parse_reply(replies, kind):
    stdio = Stdio(["true"])
    for head, rtype, which, rest in replies:
        rid = stdio._next_id + 1
        digits = {"right": str(rid), "wrong": str(rid + 7), "zero-led": f"0{rid}"}[which]
        line = head % (rtype.encode(), digits.encode()) + rest
        want = _outcome(parse_reply, line, kind, rid)
        stdio.port = _ScriptedPort(line)
        try:
            got = ("reply", stdio._request(kind, "}"))
        except PortFailure as e:
            got = ("failure", e.problem, e.code)
        # the values as the callers take them (Stdio._value: hashable), which the memo holds already
        assert _taken(got) == _taken(want), line
    stdio.port = None


def test_the_reply_memo_is_used():
    stdio = Stdio(["true"])
    for _ in range(3):
        stdio.port = _ScriptedPort(b'{"type": "action_ok", "id": %d, "observation": [1, [0]]}' % (stdio._next_id + 1))
        assert stdio._request("action", "}")["observation"] == (1, (0,))
    assert len(stdio._replies) == 1
    stdio.port = None


def test_the_reply_memo_never_takes_a_reply_whose_rest_names_type_or_id():
    # JSON takes the last of duplicate members: a rest that names "id" or "type" again (or spells a
    # member name with an escape) decides the reply, so it is decoded every time
    for rest, problem in [(b', "observation": 5, "id": 1}', "stale or stray"),
                          (b', "observation": 5, "i\\u0064": 1}', "stale or stray"),
                          (b', "observation": 5, "type": "action_ok"}', None)]:
        stdio = Stdio(["true"])
        stdio.port = _ScriptedPort(b'{"type": "action_ok", "id": 1' + rest)
        first = _outcome(lambda *a: stdio._request("action", "}"), None, None, None)
        stdio.port = _ScriptedPort(b'{"type": "action_ok", "id": 2' + rest)
        second = _outcome(lambda *a: stdio._request("action", "}"), None, None, None)
        assert first[0] == "reply"
        if problem:
            assert second[0] == "failure" and problem in second[1], (rest, second)
        else:
            assert second[0] == "reply" and second[1]["id"] == 2
        stdio.port = None


def test_the_reply_memo_takes_only_json_whitespace_around_type_and_id():
    stdio = Stdio(["true"])
    stdio.port = _ScriptedPort(b'{"type": "action_ok", "id": 1, "observation": 5}')
    assert stdio._request("action", "}")["observation"] == 5
    for n, head in enumerate([b'{"type": "action_ok", "id":\x0c%d', b'{"type":\x0b"action_ok", "id": %d',
                              b'{"type": "action_ok", "id": 0%d'], start=2):
        stdio.port = _ScriptedPort(head % n + b', "observation": 5}')
        outcome = _outcome(lambda *a: stdio._request("action", "}"), None, None, None)
        assert outcome[0] == "failure" and "invalid JSON" in outcome[1], outcome
    stdio.port = _ScriptedPort(b'{ "type" : "action_ok" ,\t"id":5 , "observation": 5}')
    assert stdio._request("action", "}")["id"] == 5 and len(stdio._replies) == 1
    stdio.port = None
