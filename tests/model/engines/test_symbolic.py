"""The z3 engines on the toy counter: unbounded proofs with and without
strengthening (and the CTI shown when it is missing), BMC agreeing with the
explorer on the shortest counterexample, and the faithfulness cross-check
catching a drifted encoding."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from conq.conformance import generate
from conq.model.engines import symbolic
from conq.model.engines.explorer import explore

HERE = Path(__file__).parent


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


toy = _load("toy_counter_z3m", "toy_counter.py")
enc_mod = _load("toy_counter_z3", "toy_counter_z3.py")


def racy():
    return toy.CounterModel(toy.CounterModel.configs()["racy"])


def test_strengthened_invariant_is_proved_for_every_size():
    r = symbolic.prove(enc_mod.CounterEncoding(), "done-means-written")
    assert r.status == "proved", r.detail
    assert r.strengthened_with == ["non-negative"]


def test_missing_strengthening_shows_a_counterexample_to_induction():
    enc = enc_mod.CounterEncoding()
    enc.strengthening = {}
    r = symbolic.prove(enc, "done-means-written")
    assert r.status == "not-inductive"
    assert r.cti["action"] == "write" and r.cti["failing"] == ["done-means-written"]
    # the CTI's pre-state had a negative value read: what the strengthening rules out
    assert min(r.cti["before"]["tmp"]) < 0 or r.cti["before"]["counter"] < 0


def test_bmc_finds_the_lost_update_at_the_explorers_depth():
    m = racy()
    ex = explore(m)
    shortest = len(ex.verdict("no-lost-update").path)
    r = symbolic.bmc(enc_mod.CounterEncoding(), m, "no-lost-update", k=6)
    assert r.status == "violated" and len(r.trace) - 1 == shortest == 4
    assert r.trace[-1]["counter"] == 1


def test_a_bmc_depth_that_runs_out_of_its_work_budget_is_unknown_whatever_the_clock():
    # the budget is z3's deterministic work count, the same on a quiet machine and at load 10: with
    # the default the lost update is found at depth 4; with a budget of 1 no depth can be decided,
    # whatever the timeout allows (an hour here: the clock plays no part in the verdict)
    m = racy()
    assert symbolic.bmc(enc_mod.CounterEncoding(), m, "no-lost-update", k=6).status == "violated"
    r = symbolic.bmc(enc_mod.CounterEncoding(), m, "no-lost-update", k=6, rlimit=1, timeout_ms=3_600_000)
    assert r.status == "unknown" and "within its work budget (rlimit 1)" in r.detail, r.detail


def test_the_cli_budget_default_is_the_engines():
    import inspect

    from conq.cli import models

    assert inspect.signature(models.prove).parameters["budget"].default.default == symbolic.DEFAULT_RLIMIT


def test_bmc_clean_on_atomic():
    m = toy.CounterModel(toy.CounterModel.configs()["atomic"])
    r = symbolic.bmc(enc_mod.CounterEncoding(atomic=True), m, "no-lost-update", k=3)
    assert r.status == "holds-to-bound"


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(0, 4))
def test_encoding_agrees_with_the_executable_model(seed, steps):
    m = racy()
    tr = generate.random_walk(m, seed, steps)
    state = m.replay(tr.actions()).last
    assert symbolic.cross_check(enc_mod.CounterEncoding(), m, state) == []


def test_cross_check_catches_drift():
    class Drifted(enc_mod.CounterEncoding):
        def actions(self):
            acts = super().actions()
            # a write that forgets to read its temp: counter + 1 instead
            def write(s, t, i):
                return z3.And(self._in(s, i), s.pc[i] == enc_mod.READ, t.pc == z3.Store(s.pc, i, enc_mod.DONE),
                              t.tmp == s.tmp, t.counter == s.counter + 1, t.n == s.n)
            return [acts[0], symbolic.SymAction("write", [("i", enc_mod.I)], write)]

    m = racy()
    state = m.replay([("read", 0), ("read", 1), ("write", 0)]).last
    problems = symbolic.cross_check(Drifted(), m, state)
    assert problems and problems[0].startswith("('write', 1)")


class _WithAHardAction(enc_mod.CounterEncoding):
    """The counter with one more action first in order whose query z3 cannot settle: its guard
    asks for a cube that is the sum of two cubes (Fermat, n = 3: none exists, but z3's nonlinear
    integer arithmetic cannot show it), and its update would break done-means-written."""

    def actions(self):
        x, y, z = z3.Ints("hard.x hard.y hard.z")

        def hard(s, t, i):
            return z3.And(self._in(s, i), x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z,
                          t.pc == z3.Store(s.pc, i, enc_mod.DONE), t.tmp == s.tmp, t.counter == 0, t.n == s.n)

        return [symbolic.SymAction("hard", [("i", enc_mod.I)], hard)] + super().actions()


def test_an_action_z3_gives_up_on_does_not_hide_a_later_counterexample_to_induction():
    # a small deterministic work budget (rlimit), never seconds: the same verdict on any machine
    enc = _WithAHardAction()
    enc.strengthening = {}
    r = symbolic.prove(enc, "done-means-written", rlimit=2_000_000, seeds=(0, 1))
    assert r.status == "not-inductive" and r.cti["action"] == "write", r.detail


def test_unknown_names_every_action_z3_gave_up_on_after_every_seed():
    r = symbolic.prove(_WithAHardAction(), "done-means-written", rlimit=2_000_000, seeds=(0, 1))
    assert r.status == "unknown", r.detail
    assert r.detail.startswith("action hard: ") and "action read" not in r.detail
    # with the hard action gone the same budget proves it: the budget is not what failed
    assert symbolic.prove(enc_mod.CounterEncoding(), "done-means-written", rlimit=2_000_000).status == "proved"
