"""The consumer-lists model packed for the explorer (model/consumer_lists/packed.py) against the
readable model it runs.

A section remembered by too few fields would give a wrong successor list to a state that agrees
with another on those fields only; a domain that misses a value would fail to pack a state.  These
tests compare state by state: every reachable state of the smaller named configurations (the memos
are shared across states, so a wrong replay shows as soon as a second state with the same key
differs), the memoised state predicates against the properties, and whole explorations, packed and
not, on configurations with and without violations (same counts, verdicts and shortest paths).
"""

from __future__ import annotations

import pytest

from conq.model.consumer_lists.model import ConsumerListsModel
from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model
from conq.model.kernel import CheckedAction, Kind
from conq.model.engines.packing import memoised_predicate

#: configurations compared on every reachable state: those under this many states (a count)
SMALL = 12_000


def _unpacked(config: str, monkeypatch) -> ConsumerListsModel:
    """The model searched as tuples for good: ``CONQ_CL_PACKED=0`` is read at every ``packed()`` call,
    so the environment alone would stop holding once restored (the search would build the view)."""
    monkeypatch.setenv("CONQ_CL_PACKED", "0")
    m = load_model("consumer-lists", config, {})
    assert m.packed() is None
    monkeypatch.delenv("CONQ_CL_PACKED")
    m.packed = lambda: None  # type: ignore[method-assign]
    return m


def _small_configs():
    import tomllib
    from importlib.resources import files

    doc = tomllib.loads(files("conq.spec").joinpath("manifest/consumer-lists.toml").read_text())
    return sorted({r["config"] for r in doc["run"] if r.get("states", SMALL) < SMALL and not r.get("overrides")
                   and not r.get("symmetry")})


SMALL_CONFIGS = _small_configs()


def test_the_small_configurations_are_many():
    assert len(SMALL_CONFIGS) >= 10, SMALL_CONFIGS


@pytest.mark.parametrize("config", SMALL_CONFIGS)
def test_packed_successors_and_predicates_equal_the_readable_ones_on_every_reachable_state(config, monkeypatch):
    ref = _unpacked(config, monkeypatch)
    ex = explore(ref, liveness=False)
    assert ex.complete
    m = load_model("consumer-lists", config, {})
    pk = m.packed()
    codec = pk.codec
    preds = []
    for p in m.property_list():
        if p.kind is Kind.ALWAYS:
            preds += [p.check, p.witness]
        elif p.kind is Kind.SOMETIMES:
            preds.append(p.check)
        elif p.kind is Kind.LEADS_TO:
            preds += [p.trigger, p.check]
    memo = [(f, memoised_predicate(codec, f)) for f in preds]
    step_props = [p for p in m.property_list() if p.kind is Kind.ALWAYS_STEP]
    for s in ex.state_list:
        x = codec.encode(s)
        assert codec.decode(x) == s
        want = m.spec_successors(s)
        got = pk.successors(x)
        assert [(a, o) for a, o, _ in got] == [(a, o) for a, o, _ in want], f"{config}: labels differ at {s}"
        assert [repr(o) for _, o, _ in got] == [repr(o) for _, o, _ in want]  # True is not 1
        assert [codec.decode(y) for _, _, y in got] == [t for _, _, t in want], f"{config}: successors differ at {s}"
        for f, g in memo:
            assert g(x) == bool(f(s)), f"{config}: a memoised predicate disagrees at {s}"
        # a label the recording decided is sound on the real transition: every transition check
        # that applies holds, and a witness that fires is among the label's ``maybe`` (what lets the
        # engines skip them; the checks' memo keeps verdicts by the fields they read)
        for (a, o, y), (_a, _o, t) in zip(got, want):
            if isinstance(a, CheckedAction):
                for p in step_props:
                    if p.applies_to(a[0]):
                        assert p.check(s, a, o, t), f"{config}: {a} labelled checked, but {p.name} fails at {s}"
                        assert not p.witness(s, a, o, t) or p.name in type(a).maybe, (config, a, p.name, s)
    # the memo is doing its work: far fewer recordings than state visits
    runs = sum(v["runs"] for v in pk.stats().values())
    assert runs < len(ex.state_list) * len(pk.sections) / 4


@pytest.mark.parametrize("config", ["small", "acquire-no-cas", "notify-all", "upstream-remove", "reject",
                                    "groups-shared", "upstream-shared-group-closed"])
def test_packed_explorations_give_the_same_counts_verdicts_and_paths(config, monkeypatch):
    runs = []
    for model in (_unpacked(config, monkeypatch), load_model("consumer-lists", config, {})):
        ex = explore(model, liveness=True, max_states=200_000)
        runs.append((ex.states, ex.transitions, ex.depth, ex.complete,
                     [(v.prop.name, v.status,
                       None if v.path is None else [(a, o, t) for a, o, t in v.path.steps],
                       None if v.cycle is None else [(a, o, t) for a, o, t in v.cycle.steps]) for v in ex.verdicts]))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("config", ["small", "acquire-no-cas", "notify-all", "upstream-remove", "reject",
                                    "groups-shared", "upstream-shared-group-closed"])
def test_the_safety_search_a_level_at_a_time_gives_the_same_ids_and_paths(config, monkeypatch):
    """Without liveness the packed search goes a level at a time in arrays (levels.LevelSearch): the
    same states in the same order (ids, parents, positions), depth, transitions, verdicts and paths
    as the tuple search and as its own state-by-state loop (which keeping the edges selects)."""
    from conq.model.engines import levels

    in_bulk = []
    real = levels.LevelSearch.run
    monkeypatch.setattr(levels.LevelSearch, "run", lambda *a, **kw: in_bulk.append(1) or real(*a, **kw))
    runs = []
    for model, edges in ((_unpacked(config, monkeypatch), None), (load_model("consumer-lists", config, {}), True),
                         (load_model("consumer-lists", config, {}), None)):
        ex = explore(model, liveness=False, keep_edges=edges)
        assert len(in_bulk) == (not edges and model.packed() is not None)  # only the last run is in bulk
        assert ex.complete
        runs.append((ex.states, ex.transitions, ex.depth, list(ex.parent), list(ex.via), ex.level_sizes,
                     [(v.prop.name, v.status, None if v.path is None else [(a, o, t) for a, o, t in v.path.steps])
                      for v in ex.verdicts]))
    assert runs[0] == runs[1] == runs[2]


def test_a_violated_step_check_is_found_through_a_plain_label():
    """A step whose check fails when it is recorded keeps its plain label, so the engine evaluates it
    on the real states and reports the shortest counterexample (acquire-no-cas: a message acquired
    twice)."""
    m = load_model("consumer-lists", "acquire-no-cas", {})
    ex = explore(m, liveness=False)
    v = ex.verdict("acquired-at-most-once")
    assert v.status == "violated"
    assert v.path.steps[-1][0][0] == "acquire"
    plain = [a for sec in m.packed().sections for a, _o, _k, _v in sec.recorded_steps()
             if a[0] == "acquire" and not isinstance(a, CheckedAction)]
    assert plain, "the violating acquire steps are left to the engine"


def test_the_reference_configuration_packs_into_few_bits():
    m = load_model("consumer-lists", "reference", {})
    assert m.packed().codec.total_bits <= 80


@pytest.mark.parametrize("config", ["small", "acquire-no-cas"])
def test_fingerprint_mode_and_workers_on_packed_states_agree_with_the_tuple_search(config, monkeypatch):
    """fpsearch and the workers search integers too (fingerprints by fingerprint64, nothing pickled
    per state): the same counts, depth, verdicts and counterexample lengths as the tuple search."""
    import multiprocessing

    def summary(ex):
        return (ex.states, ex.transitions, ex.depth,
                [(v.prop.name, v.status, None if v.path is None else len(v.path.steps)) for v in ex.verdicts
                 if v.prop.kind is not Kind.LEADS_TO])

    want = summary(explore(_unpacked(config, monkeypatch), liveness=False))
    for kw in (dict(fingerprints=True), dict(workers=2)):
        m = load_model("consumer-lists", config, {})
        assert summary(explore(m, liveness=False, **kw)) == want, kw
        assert m.packed() is not None
    assert multiprocessing.active_children() == []


def test_fingerprint64_is_stable_and_spreads_the_low_bits():
    from conq.model.engines.packing import fingerprint64

    # fixed values: the same in every process and on every machine (Spark executors, workers)
    assert fingerprint64(0) == 0xE220A8397B1DCDAF  # SplitMix64's first output from seed 0
    assert fingerprint64(1) == fingerprint64(1) != fingerprint64(2)
    xs = range(1 << 12)
    fps = {fingerprint64(x) for x in xs}
    assert len(fps) == len(xs)  # a bijection on 64-bit values
    assert sum(f & 1 for f in fps) in range(1900, 2200)  # about half odd: partitions by % 2 balance
    wide = [fingerprint64(x << 64 | y) for x in range(64) for y in range(64)]
    assert len(set(wide)) == len(wide)


def test_two_workers_share_what_the_sections_record():
    """What a worker records during a level travels with the level's successors to the other
    (engines/parallel.py): the two workers together record about what one process records (only
    keys both meet first within the same level are recorded twice), not twice as much."""
    one = load_model("consumer-lists", "same-priority", {})
    explore(one, liveness=False)
    alone = sum(sec.runs for sec in one.packed().sections)
    ex = explore(load_model("consumer-lists", "same-priority", {}), liveness=False, workers=2)
    assert ex.complete and ex.states == 8659
    split = ex.worker_recordings
    assert all(r > 0 for r in split), split
    assert sum(split) < 1.25 * alone, (split, alone)
    assert max(split) < 0.75 * alone, (split, alone)


@pytest.mark.parametrize("mode", [{}, dict(fingerprints=True), dict(workers=2)])
def test_a_state_outside_the_packed_domains_falls_back_to_tuples(monkeypatch, mode):
    """The domains are hints of the model's design (an acquirer never marks an entry seen, ...); a
    variant that breaks one is still checked: the explorer searches its states as tuples, from the
    start, with the same verdicts and counterexamples, and says why."""
    import multiprocessing

    from conq.model.consumer_lists import packed as packed_view

    want = explore(_unpacked("acquire-no-cas", monkeypatch), liveness=False, **mode)
    real = packed_view.field_domains

    def too_narrow(model):
        doms = real(model)
        doms[model.MB] = (0,)  # message 0 never arrives: wrong, the first enqueue leaves it
        return doms

    monkeypatch.setattr(packed_view, "field_domains", too_narrow)
    m = load_model("consumer-lists", "acquire-no-cas", {})
    got = explore(m, liveness=False, **mode)
    assert "message 0 status: value 1 is outside its declared domain" in got.packed_fallback
    assert (got.states, got.transitions, got.depth) == (want.states, want.transitions, want.depth)
    assert [(v.prop.name, v.status, None if v.path is None else len(v.path.steps)) for v in got.verdicts] == \
        [(v.prop.name, v.status, None if v.path is None else len(v.path.steps)) for v in want.verdicts]
    assert multiprocessing.active_children() == []


def test_a_worker_that_takes_most_of_the_others_frontier_changes_nothing(monkeypatch):
    """Work sharing (engines/parallel.py, _SharedFrontiers): whoever expands a range of a frontier,
    the owners admit the blocks in one order, so the counts and every path are those of the search
    without sharing.  Here, at every level, worker 1 takes halves of worker 0's frontier until less
    than a chunk is left, and worker 0 starts only then (it waits on a shared counter, not a clock)."""
    import multiprocessing
    import time

    from conq.model.engines import parallel

    def run():
        ex = explore(load_model("consumer-lists", "same-priority", {}), liveness=False, workers=2)
        assert ex.complete
        return ex.states, ex.transitions, ex.depth, [(v.prop.name, v.status, v.path) for v in ex.verdicts]

    real = parallel._SharedFrontiers
    monkeypatch.setattr(parallel, "_SharedFrontiers", lambda ctx, W: None)
    alone = run()
    ctx = multiprocessing.get_context("fork")
    done, stolen = ctx.Value("q", 0), ctx.Value("q", 0)  # the last level worker 1 finished taking; states taken

    class Greedy(real):
        def publish(self, w, level, S, G):
            self.level = level
            return super().publish(w, level, S, G)

        def take_front(self, w, c):
            while w == 0 and done.value < self.level:
                time.sleep(0.0002)
            return super().take_front(w, c)

        def steal(self, v, level, c):
            hdr = self._attach()[0]
            while hdr[3 * v] != level:  # worker 0 has not offered this level's frontier yet
                time.sleep(0.0002)
            got = super().steal(v, level, c)
            if got is None:
                done.value = level
            else:
                stolen.value += len(got[0])
            return got

    monkeypatch.setattr(parallel, "_SharedFrontiers", Greedy)
    monkeypatch.setattr(parallel, "_CHUNK", 64)  # (levels of a few thousand states: chunks to take)
    shared = run()
    assert stolen.value > 1000, stolen.value  # most of worker 0's 4,000-odd states
    assert shared == alone
    assert multiprocessing.active_children() == []


def test_shared_frontiers_hand_out_each_state_once():
    """The owner takes chunks at the front, a thief halves what is left at the back; a frontier of
    another level, or too large, is not handed out."""
    import multiprocessing

    import numpy as np

    from conq.model.engines.parallel import _SharedFrontiers

    sf = _SharedFrontiers(multiprocessing.get_context("fork"), 2, capacity=1000)
    try:
        S, G = np.arange(10, 110, dtype=np.uint64), np.arange(100, dtype=np.int64) * 2
        assert sf.publish(0, 3, S, G)
        assert sf.take_front(0, 30) == (0, 30)
        assert sf.steal(0, 2, 10) is None  # another level
        xs, gs, start = sf.steal(0, 3, 10)
        assert (start, xs.tolist(), gs.tolist()) == (65, list(range(75, 110)), [2 * i for i in range(65, 100)])
        assert sf.take_front(0, 30) == (30, 60)
        xs, gs, start = sf.steal(0, 3, 3)  # 5 left: half of them
        assert (start, len(xs)) == (63, 2)
        assert sf.steal(0, 3, 4) is None  # fewer than a chunk left: the owner finishes them
        assert sf.take_front(0, 30) == (60, 63)
        assert sf.take_front(0, 30) == (63, 63)
        assert not sf.publish(1, 3, np.zeros(1001, dtype=np.uint64), np.zeros(1001, dtype=np.int64))
        assert sf.steal(1, 3, 1) is None
    finally:
        sf._views = None  # the views into the mapping go first
        sf.close()
