"""What a new system must provide, shown by one: a fourth system defined here, registered, and run
through ``conq check``, ``conq conformance``, ``conq mutants`` and ``conq replay`` (Spark,
``local[1]``) without a line of generic code knowing it (issue 30).

The system is a light switch.  Its model has two states (off, on) and one step each way
(``turn_on``, ``turn_off``); its call-level view offers one call, ``toggle``, which is whichever
step is enabled; the implementation is a boolean behind a lock, driven by :class:`SwitchDriver`;
its mutant catalogue holds one plausible bug (a switch stuck on) and the engine that must kill it.
:data:`SYSTEM` declares the five parts (README, "Adding a system").  The registry loads it from this
file by its target (``FILE.py:SYSTEM``), so Spark's Python workers load it the same way.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from conq.conformance.adapters import ActionRejected, InProcess
from conq.conformance.mutation import Budget, Catalogue, Clock, Detection, Mutant, walk_until_killed
from conq.conformance.systems import Replay, System
from conq.model.kernel import Model, always, sometimes

NAME = "toy-switch"


# -- 1. the model: two states, one step each way -----------------------------------------------------
@dataclass(frozen=True)
class SwitchConfig:
    start_on: bool = False


class SwitchModel(Model):
    name = NAME
    Config = SwitchConfig
    ACTIONS = {"turn_on": (), "turn_off": ()}

    @classmethod
    def configs(cls):
        return {"off": SwitchConfig(), "on": SwitchConfig(start_on=True)}

    def init_states(self):
        return [self.config.start_on]

    def actions(self, on):
        return [("turn_off",)] if on else [("turn_on",)]

    def step(self, on, action):
        if action == ("turn_on",) and not on:
            return [(True, True)]
        if action == ("turn_off",) and on:
            return [(False, False)]
        return []

    def properties(self):
        return [
            always("switched-to-a-state", "the switch is off or on, nothing else",
                   lambda on: on in (False, True), witness=lambda on: on),
            sometimes("switched-off", "the switch is seen off", lambda on: not on),
        ]

    def view(self, on):
        return {"on": on}


# -- 2. its call-level view: one call, whichever step is enabled ------------------------------------
class SwitchCalls(Model):
    """``toggle``: the implementation's one call; the model's step it makes is the enabled one."""

    ACTIONS = {"toggle": ()}

    def __init__(self, base: SwitchModel):
        self.base = base
        self.name = base.name
        self.Config = base.Config
        super().__init__(base.config)
        self.config_name = getattr(base, "config_name", None)

    def init_states(self):
        return self.base.init_states()

    def actions(self, on):
        return [("toggle",)]

    def step(self, on, action):
        if action != ("toggle",):
            return []
        return [o for a in self.base.actions(on) for o in self.base.step(on, a)]

    def properties(self):
        return self.base.properties()

    def view(self, on):
        return self.base.view(on)


# -- 3. the implementation and its driver ------------------------------------------------------------
class Switch:
    def __init__(self, on: bool):
        self._on = on
        self._lock = threading.Lock()

    def toggle(self) -> bool:
        with self._lock:
            self._on = not self._on
            return self._on

    @property
    def on(self) -> bool:
        return self._on


class SwitchDriver:
    def __init__(self, config: dict, seed: int):
        self.switch = Switch(bool(config["start_on"]))

    def do(self, action):
        if tuple(action) != ("toggle",):
            raise ActionRejected(f"no call {action!r}")
        return self.switch.toggle()

    def snapshot(self):
        return {"on": self.switch.on}


# -- 4. the mutant catalogue ----------------------------------------------------------------------
def _stuck_on(self) -> bool:
    """The bug: once on, a toggle leaves it on."""
    with self._lock:
        self._on = True
        return True


MUTANTS = {"stuck-on": Mutant("stuck-on", "a toggle never turns the switch off", "logic",
                              ((Switch, "toggle", _stuck_on),))}


def engine_random(budget: Budget) -> Detection:
    from conq.conformance.checker import Checker
    from conq.conformance.views import conformance_model

    configs = list(SwitchModel.configs())
    return walk_until_killed(Clock(budget), budget.count(8), lambda i: (configs[i % 2], configs[i % 2]),
                             lambda cfg: Checker(conformance_model(NAME, cfg), InProcess(SwitchDriver)), length=4)


CATALOGUE = Catalogue(NAME, MUTANTS, {"random": engine_random})


def mutant_driver(name: str) -> type:
    if name not in MUTANTS:
        raise ValueError(f"no mutant {name!r} (known: {', '.join(MUTANTS)})")

    class Mutated(SwitchDriver):
        def do(self, action):
            with MUTANTS[name].applied():
                return super().do(action)

    Mutated.__name__ = f"SwitchDriver[{name}]"
    return Mutated


# -- 5. the declaration -------------------------------------------------------------------------
SYSTEM = System(
    name=NAME,
    package=__name__,
    model=SwitchModel,
    call_view=SwitchCalls,
    driver=SwitchDriver,
    mutants=CATALOGUE,
    mutant_driver=mutant_driver,
    replays=(Replay("off", 64, 6, "replay-toy-switch"),),
)


# -- the tests --------------------------------------------------------------------------------------
@pytest.fixture
def registered():
    """The system registered by its target, as ``CONQ_SYSTEMS`` or an entry point would name it;
    forgotten afterwards so that no other test meets it."""
    from conq.conformance import systems

    system = systems.register(f"{Path(__file__).resolve()}:SYSTEM")
    yield system
    systems.unregister(NAME)


def invoke(*args: str):
    from typer.testing import CliRunner

    from conq.cli import app

    return CliRunner().invoke(app, list(args))


def test_the_generic_layers_see_the_new_system(registered):
    from conq.conformance import systems
    from conq.conformance.port_reference import models
    from conq.model.engines.registry import model_names

    assert NAME in systems.names("mutants") and NAME in model_names() and NAME in models()
    assert registered.load("driver").__name__ == "SwitchDriver"
    assert systems.origins()[NAME].endswith("test_new_system.py:SYSTEM")


def test_check_conformance_and_mutants_run_it(registered):
    res = invoke("check", NAME, "--all-configs", "--json")
    assert res.exit_code == 0, res.output
    checks = json.loads(res.stdout)
    assert [c["states"] for c in checks] == [2, 2]
    assert {p["status"] for c in checks for p in c["properties"]} <= {"holds", "witnessed"}

    res = invoke("conformance", NAME, "--traces", "10", "--length", "5", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] and doc["traces"] == 10 and doc["steps"] == 50 and doc["impl"] == f"reference:{NAME}"

    res = invoke("conformance", NAME, "--impl", "mutant:stuck-on", "--traces", "4", "--length", "4", "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["failures"][0]["minimised"] == [["toggle"], ["toggle"]]

    res = invoke("mutants", NAME, "--json")
    assert res.exit_code == 0, res.output
    matrix = json.loads(res.stdout)
    assert matrix["killed"] == matrix["total"] == 1 and not matrix["false_alarms"]


@pytest.mark.spark
def test_replay_runs_it_on_spark(registered, tmp_path):
    """Spark's Python workers load the system from its file (the driver ships where each system
    comes from: conformance/systems.py ``origins``)."""
    from conq.conformance.spark_replay import close_session, java_problem

    if java_problem():
        pytest.skip(java_problem())
    out = tmp_path / "replay"
    try:
        res = invoke("replay", NAME, "--config", "on", "--traces", "64", "--length", "6", "--master", "local[1]",
                     "--out", str(out), "--json")
    finally:
        close_session()
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert (s["traces"], s["diverged"], s["graph_states"], s["states_covered"]) == (64, 0, 2, 2)
    assert s["properties_witnessed"] == ["switched-off", "switched-to-a-state"]
    assert (out / "report.md").is_file()


def test_conq_systems_names_it_to_a_fresh_process_and_a_broken_target_is_bad_input(tmp_path):
    """``CONQ_SYSTEMS=FILE.py:SYSTEM``: a system of your own without packaging it; a target that
    does not load is exit 2 naming the variable, the file and the line, before any command runs."""
    import os
    import subprocess
    import sys

    def conq(*args: str, target: str):
        env = {**os.environ, "CONQ_SYSTEMS": target}
        return subprocess.run([sys.executable, "-m", "conq", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)

    listed = conq("list", "--json", target=f"{Path(__file__).resolve()}:SYSTEM")
    assert listed.returncode == 0, listed.stderr
    assert {(r["model"], r["config"]) for r in json.loads(listed.stdout) if r["model"] == NAME} == {(NAME, "off"), (NAME, "on")}
    broken = tmp_path / "broken.py"
    broken.write_text("SYSTEM = undefined_name\n")
    bad = conq("list", "--json", target=f"{broken}:SYSTEM")
    assert bad.returncode == 2, bad.stderr
    message = json.loads(bad.stdout)["error"]["message"]
    assert message.startswith("CONQ_SYSTEMS: ") and "broken.py:1" in message and "NameError" in message, message
