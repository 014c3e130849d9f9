"""The checker, adapters, trace format and port protocol on the toy model."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from conq.conformance import generate, protocol, trace
from conq.conformance.adapters import InProcess, PortFailure, Stdio
from conq.conformance.checker import Checker

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


toy = _load("toy_counter_cf", HERE.parent / "model" / "engines" / "toy_counter.py")
drivers = _load("toy_driver_cf", HERE / "toy_driver.py")
DRIVER_FILE = str(HERE / "toy_driver.py")


class ToyView(toy.CounterModel):
    """The toy model with an observe() view in the driver's snapshot shape."""

    def observe(self, s):
        return {"pc": [["idle", "read", "done"][p] for p in s[0]], "tmp": list(s[1]), "counter": s[2]}


def racy():
    return ToyView(toy.CounterModel.configs()["racy"])


def test_faithful_driver_passes_random_walks():
    # the racy model itself violates no-lost-update: conformance alone here
    checker = Checker(racy(), InProcess(drivers.CounterDriver), check_properties=False)
    for seed in range(50):
        r = checker.walk(seed, 10)
        assert r.ok, r.divergence.describe()
        assert r.steps == 4  # two clients, read + write each, then nothing is enabled


def test_conformant_run_into_a_property_violation_is_reported():
    checker = Checker(racy(), InProcess(drivers.CounterDriver))
    r = checker.replay([("read", 0), ("read", 1), ("write", 0), ("write", 1)])
    assert r.divergence.kind == "property" and "no-lost-update" in r.divergence.detail


def test_buggy_driver_diverges_and_minimises_to_the_lost_update():
    checker = Checker(racy(), InProcess(drivers.AtomicWriteDriver), snapshots=False, check_properties=False)
    bad = [r for r in (checker.walk(seed, 10) for seed in range(40)) if not r.ok]
    assert bad, "the atomic-write bug must be found by some walk"
    r = bad[0]
    assert r.divergence.kind == "observation"
    assert r.divergence.observed == 2 and r.divergence.allowed == [1]
    assert [a[0] for a in checker.minimise(r)] == ["read", "read", "write", "write"]


def test_snapshot_catches_drift_before_an_observation_does():
    acts = [("read", 0), ("write", 0), ("read", 1), ("write", 1)]
    blind = Checker(racy(), InProcess(drivers.ForgetfulDriver), snapshots=False, check_properties=False).replay(acts)
    assert blind.divergence.kind == "observation" and blind.divergence.step == 4
    seeing = Checker(racy(), InProcess(drivers.ForgetfulDriver), snapshots=True, check_properties=False).replay(acts)
    assert seeing.divergence.kind == "snapshot" and seeing.divergence.step == 3
    # client 1 read 1 but the implementation remembered 0
    assert 'implementation {"pc": ["done", "read"], "tmp": [0, 0], "counter": 1}' in seeing.divergence.detail
    assert 'model allows [{"pc": ["done", "read"], "tmp": [0, 1], "counter": 1}]' in seeing.divergence.detail


def test_rejected_action_is_consistent_only_when_the_model_disables_it():
    checker = Checker(racy(), InProcess(drivers.CounterDriver))
    assert checker.replay([("write", 0)]).ok  # rejected by both
    r = checker.replay([("read", 0), ("read", 0)])
    assert r.ok  # second read rejected, model has it disabled


def test_trace_round_trip_and_validation(tmp_path):
    m = racy()
    tr = generate.random_walk(m, seed=3, length=10, with_state=True)
    p = tmp_path / "t.ndjson"
    trace.write(tr, p)
    back = trace.read(p)
    assert back.actions() == tr.actions() and back.seed == 3
    assert Checker(m, InProcess(drivers.CounterDriver), check_properties=False).check_trace(back).ok
    itf = trace.to_itf(back)
    assert itf["vars"] == ["action", "observation", "state"] and len(itf["states"]) == len(tr.events)


@pytest.mark.parametrize(
    "lines, needle",
    [
        (['{"format":"conq-trace","version":1,"model":"m","config":{},"seed":1,"generator":{"mode":"random"}}', "{oops"], ":2: not valid JSON"),
        (['{"format":"conq-trace","version":2,"model":"m","config":{},"seed":1,"generator":{"mode":"random"}}'], ":1: bad header: field 'version'"),
        (['{"format":"conq-trace","version":1,"model":"m","config":{},"seed":1,"generator":{"mode":"random"}}', '{"step":1,"action":[]}'], ":2: bad event: field 'action'"),
        (['{"format":"conq-trace","version":1,"model":"m","config":{},"seed":1,"generator":{"mode":"random"}}', '{"step":2,"action":["a"]}'], ":2: field 'step': expected 1"),
        ([], "empty trace"),
    ],
)
def test_malformed_traces_name_line_and_field(lines, needle):
    with pytest.raises(trace.TraceError, match=needle.replace("[", r"\[")):
        trace.parse_lines(lines, "x.ndjson")


def test_generators_are_reproducible_and_exhaustive():
    m = racy()
    assert generate.random_walk(m, 9, 10).actions() == generate.random_walk(m, 9, 10).actions()
    assert generate.derive_seed(1, 2) == generate.derive_seed(1, 2) != generate.derive_seed(1, 3)
    # two clients, read before write each: 4!/(2!2!) = 6 interleavings of length 4
    all4 = list(generate.exhaustive(m, 4))
    assert len(all4) == 6 and len({tuple(t.actions()) for t in all4}) == 6
    seen = generate.CoverageMemory()
    covered = set()
    for s in range(6):
        covered |= set(map(tuple, generate.coverage_guided(m, s, 4, seen).actions()))
    assert len(covered) == 4  # every (action, client) pair


def _stdio(driver="CounterDriver", timeout=10.0):
    return Stdio([sys.executable, "-m", "conq.conformance.port", "--driver", f"{DRIVER_FILE}:{driver}"], timeout=timeout)


def test_stdio_port_passes_like_in_process():
    impl = _stdio()
    try:
        checker = Checker(racy(), impl, check_properties=False)
        for seed in range(5):
            r = checker.walk(seed, 10)
            assert r.ok, r.divergence.describe()
    finally:
        impl.close()


def test_stdio_crash_is_a_clear_port_verdict():
    impl = _stdio("CrashingDriver")
    try:
        r = Checker(racy(), impl).replay([("read", 0), ("write", 0)])
    finally:
        impl.close()
    assert r.divergence.kind == "port" and r.divergence.step == 2
    assert "error 20 (crashed, indefinite)" in r.divergence.detail and "boom" in r.divergence.detail


def test_stdio_hang_times_out():
    impl = _stdio("HangingDriver", timeout=1.0)
    try:
        r = Checker(racy(), impl).replay([("read", 0), ("write", 0)])
    finally:
        impl.close()
    assert r.divergence.kind == "port" and "no response within 1 s" in r.divergence.detail


def test_stdio_garbage_and_exit_are_reported(tmp_path):
    script = tmp_path / "bad_port.py"
    script.write_text(
        "import sys, json\n"
        "line = sys.stdin.readline()\n"
        "msg = json.loads(line)\n"
        "print(json.dumps({'type': 'init_ok', 'id': msg['id'], 'implementation': 'bad'}), flush=True)\n"
        "sys.stdin.readline()\n"
        "print('this is not json', flush=True)\n"
        "sys.stdin.readline()\n"
        "print('dying', file=sys.stderr, flush=True)\n"
        "sys.exit(3)\n"
    )
    impl = Stdio([sys.executable, str(script)], timeout=5)
    with pytest.raises(PortFailure, match="invalid JSON"):
        impl.start("toy-counter", {}, 0)
        impl.do(("read", 0))
    with pytest.raises(PortFailure, match=r"exited \(status 3\)"):
        impl.do(("read", 1))
    impl.close()


def test_protocol_document_is_generated_from_declarations():
    doc = (ROOT / "spec" / "port-protocol.md").read_text()
    assert doc == protocol.render_markdown(), "regenerate with: conq protocol --write"


def test_protocol_validation():
    assert protocol.validate({"type": "action_ok", "id": 1, "observation": None}, "port") is None
    assert "missing field 'observation'" in protocol.validate({"type": "action_ok", "id": 1}, "port")
    assert "sent by the checker" in protocol.validate({"type": "init", "id": 1}, "port")
    assert "unknown code 99" in protocol.validate({"type": "error", "id": 1, "code": 99, "text": "", "definite": True}, "port")


class _WeakPreconditionDriver(drivers.CounterDriver):
    """A client may read again after it wrote: the model has ``read`` disabled once the client is done."""

    def do(self, action):
        if action[0] == "read" and self.c.phase[action[1]] == "done":
            self.c.phase[action[1]] = "idle"
        return super().do(action)


def test_probing_walks_send_disabled_calls_and_catch_weak_preconditions():
    # issue 35: without probes a walk sends only calls some consistent state enables, so a port that
    # performs a disabled call is never caught by generated traces; with them it is, and a faithful
    # port refuses every probe with error 13
    blind = Checker(racy(), InProcess(_WeakPreconditionDriver), check_properties=False)
    assert all(blind.walk(s, 12).ok for s in range(30))
    probing = Checker(racy(), InProcess(_WeakPreconditionDriver), check_properties=False)
    caught = [r for r in (probing.walk(s, 12, probe=0.3) for s in range(30)) if not r.ok]
    assert caught and {r.divergence.kind for r in caught} == {"not-enabled"}
    assert all(r.divergence.action[0] == "read" for r in caught)
    faithful = Checker(racy(), InProcess(drivers.CounterDriver), check_properties=False)
    runs = [faithful.walk(s, 12, probe=0.3) for s in range(30)]
    assert all(r.ok for r in runs) and sum(o == ("error", 13) for r in runs for o in r.observations) > 10
    # the same seed replays the same walk, probes included (a function of the seed and the run alone)
    again = Checker(racy(), InProcess(drivers.CounterDriver), check_properties=False).walk(7, 12, probe=0.3)
    assert again.actions == runs[7].actions


@pytest.mark.parametrize("model,config", [("consumer-lists", "reference"), ("consumer-lists", "all-actors"),
                                          ("recovery-deferral", "reference"), ("ordered-consumption", "simple"),
                                          ("ordered-consumption", "push-fifo")])
def test_the_reference_refuses_every_probed_disabled_call(model, config):
    # the references' drivers enforce every precondition the port references document (the
    # environment's budget, a pull after the credit ran out, an answer the server cannot give)
    from conq.conformance.adapters import reference
    from conq.conformance.generate import derive_seed
    from conq.conformance.views import conformance_model

    overrides = {"env_budget": 2} if model == "consumer-lists" else {}
    checker = Checker(conformance_model(model, config, overrides), reference(model))
    runs = [checker.walk(derive_seed(3, i), 40, probe=0.2) for i in range(25)]
    checker.impl.close()
    assert all(r.ok for r in runs), [r.divergence.describe() for r in runs if not r.ok][:1]
    assert sum(o == ("error", 13) for r in runs for o in r.observations) >= 10
