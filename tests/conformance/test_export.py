"""Issue 35: traces a port author can feed to a debugger or to Apalache/Quint tooling:
``conq replay --only N --export ndjson|itf`` and ``conq check --trace-out FILE``."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conq.cli import app
from conq.conformance import trace
from conq.conformance.views import conformance_model

runner = CliRunner()


def test_replay_exports_one_trace_with_its_states(tmp_path):
    res = runner.invoke(app, ["replay", "consumer-lists", "--only", "3", "--traces", "10", "--export", "ndjson"])
    assert res.exit_code == 0, res.output
    body = res.stdout.split("\n", 1)[1] if res.stdout.startswith("trace ") else res.stdout
    path = tmp_path / "t.ndjson"
    path.write_text("".join(line + "\n" for line in res.stdout.splitlines() if line.startswith("{")))
    tr = trace.read(path)
    assert tr.events and all(e.state is not None for e in tr.events) and body
    # each state is the model's view after the step: replaying the actions through the model agrees
    model = conformance_model("consumer-lists", None, tr.config)
    init, views = trace.states_along(model, tr.actions(), [e.observation for e in tr.events])
    assert views == [e.state for e in tr.events] and init is not None
    itf = runner.invoke(app, ["replay", "recovery-deferral", "--level", "thread", "--config", "reference", "--only", "2",
                              "--traces", "10", "--mode", "random", "--export", "itf"])
    doc = json.loads("".join(line for line in itf.stdout.splitlines() if not line.startswith("trace ")))
    assert doc["vars"] == ["action", "observation", "state"] and doc["states"][0]["action"] == "init"
    assert doc["states"][1]["observation"][0] == doc["states"][1]["action"]  # thread level: [label, result]
    refused = runner.invoke(app, ["replay", "consumer-lists", "--export", "itf", "--traces", "10"])
    assert refused.exit_code == 2 and "--only" in refused.output


def test_check_writes_its_counterexample_as_a_trace(tmp_path):
    args = ["check", "consumer-lists", "-c", "small", "--set", "notify_one=false", "--no-liveness"]
    nd = tmp_path / "cx.ndjson"
    res = runner.invoke(app, args + ["--trace-out", str(nd)])
    assert res.exit_code == 1, res.output
    tr = trace.read(nd)
    assert tr.generator["mode"] == "counterexample" and tr.generator["property"] and tr.events
    # the counterexample is a run of the model: conq validate (thread level) accepts it
    ok = runner.invoke(app, ["validate", "consumer-lists", str(nd), "--level", "thread"])
    assert ok.exit_code == 0, ok.output
    itf_path = tmp_path / "cx.itf.json"
    assert runner.invoke(app, args + ["--trace-out", str(itf_path)]).exit_code == 1
    itf = json.loads(itf_path.read_text())
    assert len(itf["states"]) == len(tr.events) + 1 and itf["states"][0]["action"] == "init"
    assert [s["#meta"]["index"] for s in itf["states"]] == list(range(len(itf["states"])))
    # nothing violated: nothing written
    none = tmp_path / "none.ndjson"
    assert runner.invoke(app, ["check", "consumer-lists", "-c", "small", "--no-liveness", "--trace-out",
                               str(none)]).exit_code == 0
    assert not none.exists()
    assert runner.invoke(app, ["check", "consumer-lists", "--trace-out", str(tmp_path)]).exit_code == 2


def test_itf_marks_a_lassos_loop():
    tr = trace.Trace(model="m", config={}, seed=0, generator={"mode": "counterexample"})
    tr.events = [trace.Event(i, ("a", i), None, {"x": i}) for i in (1, 2, 3)]
    doc = trace.to_itf(tr, {"x": 0}, loop=2)
    assert doc["loop"] == 2 and len(doc["states"]) == 4 and doc["states"][2]["state"] == {"x": 2}
