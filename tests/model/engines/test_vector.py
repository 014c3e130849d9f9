"""The vectorised expansion (model/engines/vector.py) against the packed view's state-by-state
successor function, and the searches that use it against the tuple searches (issue 36)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from conq.model.engines.explorer import explore
from conq.model.engines.packing import fingerprint64
from conq.model.engines.registry import load_model
from conq.model.engines.vector import Table, VectorPredicate, fingerprints, to_ints, to_words, vector_view
from conq.model.kernel import CheckedAction, Kind

#: a consumer-lists configuration packed into more than 64 bits (two words a state), 3,680 states
WIDE = ("small", {"consumers": [[2, True], [1, True], [1, False], [1, True], [3, True]], "messages": 2,
                  "env_budget": 0})


def _tuples(model):
    model.packed = lambda: None  # type: ignore[method-assign]
    return model


@pytest.mark.parametrize("config,overrides", [("small", {}), ("reject", {}), ("groups-shared", {}), WIDE])
def test_a_level_expanded_at_once_is_the_packed_successor_lists_state_by_state(config, overrides):
    """Every reachable state, expanded in arrays of a few hundred states by a fresh expander (so most
    footprints are recorded while expanding), gives the very successor lists of Packed.expand: the
    same steps in the same order, the same successors."""
    ref = load_model("consumer-lists", config, overrides).packed()
    xs = list(explore(load_model("consumer-lists", config, overrides), liveness=False).state_list.ints)
    vx = vector_view(load_model("consumer-lists", config, overrides).packed())
    assert vx.W == (2 if overrides else 1)
    for c0 in range(0, len(xs), 700):
        chunk = xs[c0:c0 + 700]
        Y, count, G = vx.expand(to_words(chunk, vx.W))
        ys, at = to_ints(Y), 0
        for i, x in enumerate(chunk):
            want = ref.expand(x)
            got = [vx.steps.objs[g] for g in G[at:at + count[i]].tolist()]
            assert [(repr(a), repr(o)) for a, o, _k, _p in got] == [(repr(a), repr(o)) for a, o, _k, _p in want]
            # checked or plain alike; a checked label's ``maybe`` may name more witnesses in one than in
            # the other (a witness reading a field one recording did not know yet may fire, and that
            # verdict is kept: both are sound, tests/model/consumer_lists/test_packed.py)
            assert [isinstance(a, CheckedAction) for a, *_ in got] == [isinstance(a, CheckedAction) for a, *_ in want]
            assert ys[at:at + count[i]] == [(x & k) | p for _a, _o, k, p in want]
            at += count[i]
        assert at == Y.shape[1]


def test_the_state_predicates_on_arrays_agree_with_the_properties():
    m = load_model("consumer-lists", *WIDE)
    codec = m.packed().codec
    states = explore(m, liveness=False).state_list
    xs = list(states.ints)
    X = to_words(xs, 2)
    from conq.model.engines.packing import memoised_predicate

    for p in m.property_list():
        if p.kind is Kind.ALWAYS:
            vp = VectorPredicate(memoised_predicate(codec, p.check), 2)
            assert vp(X).tolist() == [bool(p.check(codec.decode(x))) for x in xs], p.name


def test_fingerprints_on_arrays_are_fingerprint64():
    rng = random.Random(7)
    for W in (1, 2, 3):
        xs = [rng.getrandbits(64 * W - rng.choice((0, 3, 40, 63))) for _ in range(300)] + [0, 1, 1 << 64, (1 << 64) - 1]
        xs = [x for x in xs if x < 1 << (64 * W)]
        assert fingerprints(to_words(xs, W)).tolist() == [fingerprint64(x) for x in xs]


def test_the_hash_table_finds_what_it_was_given_through_collisions_and_growth():
    rng = np.random.default_rng(3)
    for W in (1, 2):
        t = Table(W, 2)
        keys = np.unique(rng.integers(0, 1 << 20, (W, 3000), dtype=np.uint64), axis=1)  # small keys: many collisions
        vals = np.arange(keys.shape[1])
        for c0 in range(0, keys.shape[1], 500):
            t.put_many(keys[:, c0:c0 + 500], vals[c0:c0 + 500])
        assert t.get(keys).tolist() == vals.tolist()
        t.put_many(keys[:, :10], vals[:10] + 10_000)  # replaced, not added
        assert t.n == keys.shape[1]
        assert t.get(keys[:, :10]).tolist() == (vals[:10] + 10_000).tolist()
        absent = rng.integers(1 << 21, 1 << 22, (W, 500), dtype=np.uint64)
        assert (t.get(absent) == -1).all()


@pytest.mark.parametrize("config,overrides,fingerprints", [("acquire-no-cas", {}, True), ("upstream-remove", {}, True),
                                                          (*WIDE, True), (*WIDE, False)])
def test_the_array_searches_keep_the_tuple_search_ids_parents_and_paths(config, overrides, fingerprints):
    """Fingerprint mode, and the default mode on a packing of two words (exact: states told apart
    by their words, not their fingerprints)."""
    def run(model):
        ex = explore(model, liveness=False, fingerprints=fingerprints)
        assert getattr(ex, "packed_fallback", "") == ""
        return (ex.states, ex.transitions, ex.depth, ex.complete, list(ex.parent), list(ex.via),
                [(v.prop.name, v.status, None if v.path is None else list(v.path.steps)) for v in ex.verdicts])

    want = run(_tuples(load_model("consumer-lists", config, overrides)))
    assert run(load_model("consumer-lists", config, overrides)) == want


def test_a_state_bound_cuts_the_array_searches_at_the_bound():
    for kw in ({}, {"fingerprints": True}):
        ex = explore(load_model("consumer-lists", "small", {}), liveness=False, max_states=1000, **kw)
        assert not ex.complete and ex.states == 1000 and "state bound" in ex.stop_reason


def test_the_successors_kernel_refuses_arrays_that_do_not_fit_together():
    from conq.model.engines import _search

    info = np.array([[(0 << (_search.COUNT_BITS + 1)) | 2]], dtype=np.int64)  # one state: steps 0 and 1
    X = np.array([[0b1010]], dtype=np.uint64)
    flat = np.array([0, 1], dtype=np.int32)
    keep = np.array([[~np.uint64(0), np.uint64(0)]], dtype=np.uint64)
    put = np.array([[0, 7]], dtype=np.uint64)
    Y, G = np.empty((1, 2), dtype=np.uint64), np.empty(2, dtype=np.int32)
    _search.successors(info, X, flat, keep, put, Y, G, 1, 1, 1, 2)
    assert Y.tolist() == [[0b1010, 7]] and G.tolist() == [0, 1]
    with pytest.raises(ValueError, match="wrong sizes"):  # Y holds three, G two
        _search.successors(info, X, flat, keep, put, np.empty((1, 3), dtype=np.uint64), G, 1, 1, 1, 2)
    with pytest.raises(ValueError, match="more successors than Y holds"):
        _search.successors(info, X, flat, keep, put, Y[:, :1].copy(), G[:1].copy(), 1, 1, 1, 2)
    with pytest.raises(ValueError, match="a step id outside"):
        _search.successors(info, X, np.array([0, 5], dtype=np.int32), keep, put, Y, G, 1, 1, 1, 2)
    with pytest.raises(ValueError, match="fewer successors"):
        _search.successors(info, X, flat, keep, put, np.empty((1, 3), dtype=np.uint64), np.empty(3, dtype=np.int32),
                           1, 1, 1, 2)
