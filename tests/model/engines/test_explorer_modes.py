"""The explorer's storage modes (issue 18): fingerprints with a parent map, and two worker
processes partitioned by fingerprint, give the default mode's counts and safety verdicts on
the manifest's small configurations; the compact liveness analysis gives the manifest's
verdicts; no worker process is left behind."""

from __future__ import annotations

import multiprocessing

import pytest

from conq.manifest import load
from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model
from conq.model.kernel import Kind

# (model, config): small entries of the manifest, with safety violations among them
CASES = [
    ("consumer-lists", "seed003-earlier"),
    ("consumer-lists", "upstream-remove"),
    ("ordered-consumption", "push-fifo-no-memo"),
    ("ordered-consumption", "mutant-fifo-no-lock"),
    ("recovery-deferral", "reference-one-queue"),
    ("recovery-deferral", "upstream-drop-without-context"),
]


def _manifest(model: str, config: str):
    (exp,) = [e for e in load() if e.model == model and e.config == config and not e.symmetry and not e.overrides]
    return exp


def _safety(ex):
    return {v.prop.name: (v.status, len(v.path) if v.path is not None else None)
            for v in ex.verdicts if v.prop.kind is not Kind.LEADS_TO}


@pytest.mark.parametrize("model,config", CASES)
def test_modes_agree_with_the_default_and_the_manifest(model, config):
    exp = _manifest(model, config)
    base = explore(load_model(model, config))
    assert (base.states, base.transitions) == (exp.states, exp.transitions)
    assert {v.prop.name for v in base.violations} == set(exp.violated)  # liveness included
    fp = explore(load_model(model, config), fingerprints=True)
    par = explore(load_model(model, config), workers=2)
    for ex in (fp, par):
        assert ex.complete
        assert (ex.states, ex.transitions, ex.depth) == (base.states, base.transitions, base.depth), ex.mode
        # same verdicts, and every path as short as the default mode's (a shortest one)
        assert _safety(ex) == _safety(base), ex.mode
        assert all(v.status == "skipped" for v in ex.verdicts if v.prop.kind is Kind.LEADS_TO)
    # fingerprint mode admits states in the default mode's order: the very same paths
    for a, b in zip(base.verdicts, fp.verdicts):
        if a.prop.kind is not Kind.LEADS_TO and a.path is not None:
            assert a.path == b.path, a.prop.name
    assert multiprocessing.active_children() == []


def test_counterexample_of_a_worker_run_replays_and_violates():
    m = load_model("ordered-consumption", "mutant-fifo-no-lock")
    ex = explore(m, workers=2)
    bad = [v for v in ex.verdicts if v.status == "violated"]
    assert {v.prop.name for v in bad} == {"fifo-order", "fifo-one-in-consumption"}
    for v in bad:
        replayed = m.replay([(a, o) for a, o, _ in v.path.steps], init=v.path.init)
        assert replayed.last == v.path.last
        if v.prop.kind is Kind.ALWAYS:
            assert not v.prop.check(v.path.last)
        else:
            a, o, t = v.path.steps[-1]
            assert not v.prop.check(v.path.states()[-2], a, o, t)


@pytest.mark.parametrize("mode", [dict(fingerprints=True), dict(workers=2)])
def test_a_state_bound_ends_every_mode_incomplete(mode):
    ex = explore(load_model("consumer-lists", "small"), max_states=500, **mode)
    assert not ex.complete and "state bound" in ex.stop_reason and not ex.ok
    assert multiprocessing.active_children() == []


def test_fingerprint_mode_keeps_at_most_twenty_four_bytes_a_state():
    # a parent id and a position (8 bytes), and the set of fingerprints (keyset.py: at least half
    # of its 8-byte slots full once it has grown, at most 16 bytes a state)
    ex = explore(load_model("consumer-lists", "same-priority"), fingerprints=True)
    assert ex.kept_bytes <= 24 * ex.states
    assert ex.state_list == [] and len(ex.parent) == ex.states


@pytest.mark.parametrize("model,config", [("consumer-lists", "seed003-earlier"), ("ordered-consumption", "push-fifo-settle-until-success")])
def test_liveness_lassos_close_and_are_fair(model, config):
    m = load_model(model, config)
    ex = explore(m)
    live = [v for v in ex.verdicts if v.prop.kind is Kind.LEADS_TO and v.status == "violated"]
    assert live
    for v in live:
        assert any(v.prop.trigger(s) for s in v.path.states())
        m.replay([(a, o) for a, o, _ in v.path.steps], init=v.path.init)
        if v.cycle is not None:
            cyc = m.replay([(a, o) for a, o, _ in v.cycle.steps], init=v.cycle.init)
            assert cyc.last == v.cycle.init == v.path.last
            assert not any(v.prop.check(s) for s in v.cycle.states())


@pytest.mark.parametrize("mode", [dict(fingerprints=True), dict(workers=2)])
def test_every_mode_skips_the_step_checks_the_model_decided(monkeypatch, mode):
    # kernel.CheckedAction: the consumer-lists fast path marks the steps whose step checks it
    # decided once per footprint (model/consumer_lists/fast.py); every mode goes through the one
    # _Checks.on_step and skips them.  Counted: evaluations of the step checks the engines run (a
    # counter shared with forked workers), with the fast path on (CheckedAction labels) and off
    # (plain labels, nothing to skip).
    from conq.model.engines import results

    # the tuple fast path in every mode (the default mode would otherwise run the packed view,
    # model/consumer_lists/packed.py, which ignores CONQ_CL_FAST: tests/model/consumer_lists/test_packed.py)
    monkeypatch.setenv("CONQ_CL_PACKED", "0")
    evaluated = multiprocessing.get_context("fork").Value("q", 0, lock=False)
    real = results._Checks.step_table

    def counting(self, name):
        checks, wits = real(self, name)

        def wrap(fn):
            def counted(*args):
                evaluated.value += 1
                return fn(*args)
            return counted

        found = self.for_action[name] = (tuple((n, wrap(fn)) for n, fn in checks), wits)
        return found

    monkeypatch.setattr(results._Checks, "step_table", counting)

    def run(fast: str, **kw) -> tuple[int, tuple]:
        monkeypatch.setenv("CONQ_CL_FAST", fast)
        evaluated.value = 0
        ex = explore(load_model("consumer-lists", "small"), liveness=False, **kw)
        assert ex.complete
        return evaluated.value, (ex.states, ex.transitions, _safety(ex))

    plain, plain_result = run("0")
    default, default_result = run("1")
    skipped, result = run("1", **mode)
    assert result == default_result == plain_result
    assert 0 < default < plain // 2, (default, plain)
    if "fingerprints" in mode:  # the default mode's order: the very same evaluations
        assert skipped == default
    else:  # a worker skips a step once *it* has seen the witnesses of its class's maybe
        assert 0 < skipped < plain // 2, (skipped, plain)
    assert multiprocessing.active_children() == []


def test_a_successor_no_worker_can_send_fails_the_search_instead_of_hanging():
    """A state that cannot be pickled (here: one holding an int of a local class) reached by
    one worker and owned by another: the sending worker fails and the search raises, naming the
    worker.  The send used to be pickled in the queue's feeder thread, which only printed the error
    and dropped the message, and every worker then waited for it for ever."""
    import sys
    import threading
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from toy_counter import CounterConfig, CounterModel

    class Opaque(int):  # a local class (an int to the fingerprint): its objects cannot be pickled
        pass

    class Unsendable(CounterModel):
        def step(self, s, a):  # every successor's counter is an Opaque: some are the other worker's
            return [(o, (t[0], t[1], Opaque(t[2]))) for o, t in super().step(s, a)]

        def properties(self):
            return []

    m = Unsendable(CounterConfig(clients=3))
    out: dict = {}

    def run() -> None:
        try:
            out["ex"] = explore(m, workers=2, liveness=False)
        except BaseException as e:  # noqa: BLE001 - the verdict below
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)  # a safety net (the search ends in well under a second), never the verdict
    assert not t.is_alive(), "the search still waits for a message that was never sent"
    assert isinstance(out.get("error"), RuntimeError), out
    assert "explorer worker" in str(out["error"]) and "pickle" in str(out["error"]).lower(), out["error"]
    assert multiprocessing.active_children() == []


def test_a_path_through_a_step_successors_lacks_names_the_kernel_contract():
    """A search that ran step() for every action (the packed view) can number a successor that
    successors() lacks only when the model's step acts for an action actions() does not list: the
    path rebuild says so by the contract's name (a mutation engine reports the mutant killed by it)."""
    import sys
    from pathlib import Path

    from conq.model.engines.fpsearch import replay_positions
    from conq.model.engines.results import _successor
    from conq.model.kernel import ModelError, StepContractError

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from toy_counter import CounterConfig, CounterModel

    m = CounterModel(CounterConfig(clients=2))
    init = m.init_states()[0]
    assert _successor(m, init, 1) == m.successors(init)[1]
    with pytest.raises(StepContractError, match="step-only-when-enabled") as err:
        _successor(m, init, len(m.successors(init)))
    assert isinstance(err.value, ModelError)
    with pytest.raises(StepContractError):
        replay_positions(m, 0, [0, 5], symmetry=False)
