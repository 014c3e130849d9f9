"""The z3 encoding of recovery-deferral (model/recovery_deferral/z3_encoding.py):
every always property proved inductive for unbounded sizes on the reference
switches; BMC agreeing with the explorer on each expected violation of the
single-switch variants (same property, same length); the encoding faithful to
the executable model (hypothesis: random reachable states, every concrete
action); the strengthening necessary (a CTI without it)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from conq import manifest
from conq.model.engines import symbolic
from conq.model.engines.explorer import explore
from conq.model.kernel import Kind
from conq.model.recovery_deferral.z3_encoding import RecoveryDeferralEncoding
from conq.model.engines.registry import load_model

NAME = "recovery-deferral"


def model(cfg: str = "reference"):
    return load_model(NAME, cfg)


# -- (a) unbounded proofs ------------------------------------------------------------------
def test_every_always_property_is_proved_for_every_size():
    m = model()
    enc = symbolic.encoding_for(m)
    assert isinstance(enc, RecoveryDeferralEncoding)
    always = {p.name for p in m.property_list() if p.kind is Kind.ALWAYS}
    assert always == set(enc.invariants())  # every always property encoded, under its own name
    results = symbolic.prove_all(enc, m)
    assert {r.prop: r.status for r in results} == {p: "proved" for p in always}, [r.detail for r in results]
    for r in results:
        assert r.strengthened_with == enc.strengthening.get(r.prop, [])
    assert enc.bounded_only == {}


# -- (b) BMC agrees with the explorer on the variants ----------------------------------------
def _bmc_cases():
    return [(exp.config, prop) for exp, prop in manifest.bmc_cases(NAME, set(RecoveryDeferralEncoding().invariants()))]


BMC_CASES = sorted(set(_bmc_cases()))


def test_bmc_cases_cover_every_single_switch_state_violation():
    assert {c for c, _ in BMC_CASES} >= {
        "upstream-drop-when-full", "upstream-drop-without-context", "upstream-java-remainder",
        "upstream-count-after-enqueue", "upstream-replace-deferred",
    }


@pytest.mark.parametrize("cfg,prop", BMC_CASES)
def test_bmc_finds_the_explorers_counterexample_at_its_length(cfg, prop):
    m = model(cfg)
    path = explore(m, liveness=False).verdict(prop).path
    assert path is not None
    r = symbolic.bmc(symbolic.encoding_for(m), m, prop, len(path))
    assert r.status == "violated", r.detail
    assert len(r.trace) - 1 == len(path)
    # one step shorter finds nothing: the explorer's is the shortest
    if len(path) > 1:
        assert symbolic.bmc(symbolic.encoding_for(m), m, prop, len(path) - 1).status == "holds-to-bound"


def test_bmc_clean_on_the_reference():
    m = model()
    enc = symbolic.encoding_for(m)
    for prop in ("no-silent-loss", "pending-equals-allocated-minus-completed"):
        assert symbolic.bmc(enc, m, prop, 5).status == "holds-to-bound"


# -- (c) faithfulness ----------------------------------------------------------------------------
def walk(m, seed: int, steps: int):
    """A seeded random walk of the executable model (every outcome reachable)."""
    rng = random.Random(seed)
    s = m.init_states()[0]
    for _ in range(steps):
        succ = m.successors(s)
        if not succ:
            break
        s = succ[rng.randrange(len(succ))][2]
    return s


CROSS = ["reference", "upstream-drop-when-full", "upstream-count-after-enqueue", "seed-random-error-routing", "upstream"]


@pytest.mark.parametrize("cfg", CROSS)
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 100_000), steps=st.integers(0, 18))
def test_encoding_agrees_with_the_executable_model(cfg, seed, steps):
    m = model(cfg)
    enc = symbolic.encoding_for(m)
    assert symbolic.cross_check(enc, m, walk(m, seed, steps)) == []


def test_cross_check_catches_drift():
    # an encoding built for upstream's count-after-enqueue, checked against the reference model
    m = model()
    drifted = RecoveryDeferralEncoding(model("upstream-count-after-enqueue").config)
    s = m.init_states()[0]
    s = next(t for a, _, t in m.successors(s) if a == ("recover", 0))
    assert symbolic.cross_check(drifted, m, s, [("feed", 0)]) != []
    assert symbolic.cross_check(symbolic.encoding_for(m), m, s, [("feed", 0)]) == []


# -- (d) the strengthening is necessary ------------------------------------------------------------
class SmallSizes(RecoveryDeferralEncoding):
    """Sizes capped (still symbolic below the cap), so that z3's model-based
    quantifier instantiation can build the counterexample to induction."""

    def well_formed(self, s):
        sc = self.sc
        q = z3.Int("sm!q")
        return z3.And(super().well_formed(s), sc.N <= 3, sc.P <= 2, sc.Q <= 2, sc.C <= 2, sc.K <= 1,
                      z3.ForAll([q], z3.Implies(z3.And(0 <= q, q < sc.Q), z3.And(0 <= s.qh[q], s.qt[q] <= 3))))


class Tiny(SmallSizes):
    """Smaller still (no status callbacks, one queue, at most two events): enough for a CTI at
    ``feed``, which z3 does not find within its budget at the larger caps."""

    def well_formed(self, s):
        sc = self.sc
        return z3.And(super().well_formed(s), sc.K == 0, sc.Q == 1, sc.N <= 2)


#: z3's deterministic work budget per query (its "rlimit count", not seconds): a verdict never
#: depends on the clock or the machine's load.  The queries below need 1e6 to 1e7 each.
RLIMIT = 40_000_000

#: (property, auxiliary left out, sizes, configuration): each must then have a counterexample to
#: induction
NECESSITY = [
    ("pending-non-negative", "pending-bijection", "SmallSizes", "reference"),
    ("processed-exactly-once", "fed-prefix", "SmallSizes", "reference"),
    ("recovery-initiated-first", "told-is-latest", "SmallSizes", "reference"),
    ("recovery-initiated-first", "handed-over-after-initiated", "SmallSizes", "reference"),
    ("recovery-initiated-first", "callback-contexts", "SmallSizes", "reference"),
    ("recovery-initiated-first", "fed-in-range", "Tiny", "reference"),
    # the SDK's late onRecoveryInitiated (DEV-032): the up half's own auxiliary
    ("recovery-initiated-first", "nothing-due", "SmallSizes", "reference-late-initiation"),
]


def _without(prop: str, aux: str, sizes: type[RecoveryDeferralEncoding], cfg: str = "reference"):
    # z3's quantifier instantiation is sensitive to the order formulas were built in: a query
    # that succeeds with one solver seed may exhaust the budget with another.  Try a few solver
    # seeds; the verdict asserted below must still be a definite one.
    r = None
    for seed in range(4):
        enc = sizes(model(cfg).config)
        assert aux in enc.strengthening[prop], (prop, aux, cfg)  # leaves out what it says it does
        enc.strengthening = {k: [x for x in v if x != aux] for k, v in enc.strengthening.items()}
        # one seed per attempt, on a freshly built encoding (new term ids); the timeout is only a safety net
        r = symbolic.prove(enc, prop, timeout_ms=900_000, rlimit=RLIMIT, seeds=(seed,))
        if r.status != "unknown":
            break
    return r


def necessity_results() -> dict:
    """Every NECESSITY query, in order, in this process: "prop/aux" -> status, detail, CTI."""
    out = {}
    for prop, aux, sizes, cfg in NECESSITY:
        r = _without(prop, aux, globals()[sizes], cfg)
        out[f"{prop}/{aux}"] = {"status": r.status, "detail": r.detail, "cti": r.cti}
    return out


@pytest.fixture(scope="module")
def necessity():
    """The queries run in a fresh interpreter: z3's search depends on every term built before in
    its context (so on which tests ran first), a fresh one makes the outcome a function of the
    code alone (checked: the same for any hash seed)."""
    here = str(Path(__file__).resolve().parent)
    code = f"import json, sys; sys.path.insert(0, {here!r}); import {Path(__file__).stem} as t; print(json.dumps(t.necessity_results()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_pending_needs_the_bijection(necessity):
    r = necessity["pending-non-negative/pending-bijection"]
    assert r["status"] == "not-inductive", r["detail"]
    # an outstanding task of a context while pending is below their number: done drives it negative
    assert r["cti"]["action"] == "done"
    assert min(r["cti"]["after"]["pending"]) < 0


def test_exactly_once_needs_the_fed_prefix(necessity):
    r = necessity["processed-exactly-once/fed-prefix"]
    assert r["status"] == "not-inductive", r["detail"]
    assert r["cti"]["action"] == "feed"


def test_small_sizes_still_prove_with_the_strengthening():
    enc = SmallSizes(model().config)
    assert symbolic.prove(enc, "processed-exactly-once").status == "proved"


@pytest.mark.parametrize(
    "aux, action",
    [
        # the customer was told of an older recovery than the stored one (told < rec): a queued
        # event of the stored recovery completes (z3 picks done; run gives one too, in isolation)
        ("told-is-latest", "done"),
        # a queued event of a recovery not yet initiated: running it breaks the claim
        ("handed-over-after-initiated", "run"),
        # a deferred up correlated with a recovery the customer was not told of: the poll delivers it
        ("callback-contexts", "poll"),
        # fed beyond its script: script(p, fed[p]) is some other producer's event, queued unchecked
        ("fed-in-range", "feed"),
    ],
)
def test_initiated_first_needs_each_strengthening(necessity, aux, action):
    r = necessity[f"recovery-initiated-first/{aux}"]
    assert r["status"] == "not-inductive", r["detail"]
    assert r["cti"]["action"] == action
    after = r["cti"]["after"]
    if aux == "told-is-latest":
        assert any(t < q for t, q in zip(after["told"], after["rec"]))
    if aux == "callback-contexts":
        assert any(n == "delivered" and x > t for row, xs, t in zip(after["notes"], after["upctx"], after["told"]) for n, x in zip(row, xs))


def test_late_initiation_needs_nothing_due(necessity):
    """Where the SDK initiates late (reference rule), the up half of recovery-initiated-first needs
    ``nothing-due``: without it, a deferred up of a recovery newer than the one the customer was
    told of may wait "due", and delivering it tells the customer of an up before its initiation."""
    r = necessity["recovery-initiated-first/nothing-due"]
    assert r["status"] == "not-inductive", r["detail"]
    assert r["cti"]["action"] == "deliver"
    before = r["cti"]["before"]
    assert any(n == "due" and x > t for row, xs, t in zip(before["notes"], before["upctx"], before["told"])
               for n, x in zip(row, xs))


def test_deferred_up_of_latest_recovery_is_inductive_alone():
    enc = symbolic.encoding_for(model())
    assert enc.strengthening.get("deferred-up-of-latest-recovery", []) == []
    assert symbolic.prove(enc, "deferred-up-of-latest-recovery").status == "proved"


# -- (e) the seed-reading variants: the encoding follows their switches ------------------------------
@pytest.mark.parametrize(
    "cfg, actions",
    [
        # onRecoveryInitiated stored, not yet forwarded: the scheduler's announce, and the resent event
        ("seed-initiated-off-feed-thread", [("recover", 0), ("feed", 0)]),
        # a deferred up of recovery 1 survives recovery 2 and polls its own context
        ("seed-new-recovery-keeps-deferred-up", [("recover", 0), ("feed", 0), ("status", 0, 0), ("recover", 0)]),
    ],
)
def test_encoding_follows_the_seed_reading_variants(cfg, actions):
    m = model(cfg)
    enc = symbolic.encoding_for(m)
    s = m.init_states()[0]
    for a in actions:
        assert symbolic.cross_check(enc, m, s) == [], (cfg, a)
        [(_, s)] = m.step(s, a)
    assert symbolic.cross_check(enc, m, s) == []


# -- (f) the SDK's late onRecoveryInitiated (DEV-032, issue 32) ----------------------------------------------
LATE = ["reference-late-initiation", "upstream-late-initiation"]


@pytest.mark.parametrize("cfg", LATE)
def test_every_always_property_is_proved_when_the_sdk_initiates_late(cfg):
    """The state claims hold for every size with the late initiation too: the reference's rule (an up tied to
    the newest recovery, delivered once that recovery is the stored one) and upstream's (tied to the stored
    one: it breaks a step claim, up-after-latest-recovery-events, which BMC does not encode)."""
    m = model(cfg)
    enc = symbolic.encoding_for(m)
    always = {p.name for p in m.property_list() if p.kind is Kind.ALWAYS}
    assert always == set(enc.invariants())
    results = symbolic.prove_all(enc, m)
    assert {r.prop: r.status for r in results} == {p: "proved" for p in always}, [r.detail for r in results]
    # the events half of recovery-initiated-first is the SDK's to break: only the up half is proved, without
    # the auxiliaries that speak of the stored recovery alone where an up may be tied to the next one
    assert enc.strengthening["recovery-initiated-first"] == (
        ["told-is-latest", "nothing-due"] if m.config.correlate_with_events else ["told-is-latest", "callback-contexts"])


def _late_situations(m) -> dict[str, tuple]:
    """One reachable state (the first the explorer lists) per situation only a late initiation makes:
    situation -> (state, action)."""
    found: dict[str, tuple] = {}
    for s in explore(m, liveness=False).state_list:
        for a, o, _t in m.successors(s):
            if a[0] == "poll" and o in ("superseded", "waits-initiation"):
                kind = o
            elif a[0] == "recover" and o == "forwarded-late":
                kind = "late-initiation" + (" keeping an up" if any(v != 0 for v in s[-1][a[1]]) else "")
            elif a[0] == "feed" and m.ev_rec[m.script[a[1]][s[0][a[1]]]] > s[7][a[1]]:
                kind = "event of a recovery not initiated"
            elif a[0] == "status" and m.newest(s, a[1]) > s[7][a[1]] and m.is_up[a[2]]:
                kind = "up before its initiation"
            else:
                continue
            found.setdefault(kind, (s, a))
    return found


@pytest.mark.parametrize("cfg", LATE)
def test_the_encoding_agrees_with_the_model_where_the_sdk_initiates_late(cfg):
    m = model(cfg)
    enc = symbolic.encoding_for(m)
    found = _late_situations(m)
    common = {"late-initiation", "late-initiation keeping an up", "event of a recovery not initiated",
              "up before its initiation"}
    assert set(found) == (common | {"superseded", "waits-initiation"} if cfg.startswith("reference") else common)
    for kind, (s, a) in sorted(found.items()):  # the step that makes the situation
        assert symbolic.cross_check(enc, m, s, [a]) == [], kind
    # every action at the richest of them: an up of the next recovery deferred before its initiation
    assert symbolic.cross_check(enc, m, found["late-initiation keeping an up"][0]) == []
    # and an encoding without the rule drifts: the next recovery's event is not enabled without a late
    # initiation; upstream's correlation ties the up to the stored recovery
    s, a = found["event of a recovery not initiated"]
    assert symbolic.cross_check(RecoveryDeferralEncoding(model("reference-re-recovery").config), m, s, [a]) != []
    s, a = found["up before its initiation"]
    other = model("upstream-late-initiation" if cfg.startswith("reference") else "reference-late-initiation")
    assert symbolic.cross_check(RecoveryDeferralEncoding(other.config), m, s, [a]) != []


def test_conq_prove_takes_a_configuration():
    """``conq prove MODEL -c NAME`` proves with that configuration's switches (BMC only on its own manifest
    entries); a configuration without a model, or an unknown one, is a usage error (exit 2)."""
    from typer.testing import CliRunner

    from conq.cli import app

    runner = CliRunner()
    done = runner.invoke(app, ["prove", NAME, "-c", "reference-late-initiation", "-p", "deferred-up-of-latest-recovery",
                               "--json"])
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.stdout)
    assert (row["config"], row["property"], row["status"]) == ("reference-late-initiation", "deferred-up-of-latest-recovery",
                                                               "proved")
    assert runner.invoke(app, ["prove", "-c", "reference-late-initiation"]).exit_code == 2
    bad = runner.invoke(app, ["prove", NAME, "-c", "no-such-configuration"])
    assert bad.exit_code == 2 and "no-such-configuration" in bad.output
