"""Checks of a model's packed view (issue 36), shared by the models' test_packed files (loaded by
path: the tests run with --import-mode=importlib).

(a) On every reachable state of a configuration, the packed successors, decoded, are the model's
    ``successors``: the same labels and observations (their reprs too: ``True`` is not ``1``), the
    same states, in the same order; and the state predicates remembered by the fields they read
    agree with the properties.
(b) Whole searches, packed (the default mode in arrays where the packing fits one word, and
    fingerprint mode) and as tuples, give the same counts, depth and verdicts with the same paths;
    and no state fell outside the layout's domains (the packed search was not abandoned for the
    tuples).
"""

from __future__ import annotations

import tomllib
from importlib.resources import files

from conq.model.engines.explorer import explore
from conq.model.engines.packing import memoised_predicate
from conq.model.kernel import Kind


def as_tuples(model):
    model.packed = lambda: None  # type: ignore[method-assign]
    return model


def same_successors_on_every_state(model, fresh) -> int:
    """(a) for ``model``'s reachable states; ``fresh``: another instance whose packed view records."""
    states = explore(as_tuples(model), liveness=False).state_list
    pk = fresh.packed()
    assert pk is not None, "no packed view"
    codec = pk.codec
    preds = []
    for p in fresh.property_list():
        if p.kind is Kind.ALWAYS:
            preds += [p.check, p.witness]
        elif p.kind is Kind.SOMETIMES:
            preds.append(p.check)
    memo = [(f, memoised_predicate(codec, f)) for f in preds]
    for s in states:
        x = codec.encode(s)
        assert codec.decode(x) == s
        want = fresh.successors(s)
        got = pk.successors(x)
        assert [(repr(a), repr(o)) for a, o, _ in got] == [(repr(a), repr(o)) for a, o, _ in want], s
        assert [codec.decode(y) for _, _, y in got] == [t for _, _, t in want], s
        for f, g in memo:
            assert g(x) == bool(f(s)), s
    return len(states)


def same_searches(load) -> None:
    """(b) ``load()`` gives a fresh instance of the configuration."""
    def run(model, **kw):
        ex = explore(model, liveness=False, **kw)
        assert getattr(ex, "packed_fallback", "") == "", ex.packed_fallback
        return (ex.states, ex.transitions, ex.depth, ex.level_sizes,
                [(v.prop.name, v.status, None if v.path is None else list(v.path.steps)) for v in ex.verdicts])

    want = run(as_tuples(load()))
    assert run(load()) == want
    assert run(load(), fingerprints=True)[:4] == want[:4]


def manifest_configs(model: str, limit: int) -> list:
    """The model's manifest configurations (and overrides) of fewer than ``limit`` states, each once."""
    doc = tomllib.loads(files("conq.spec").joinpath(f"manifest/{model}.toml").read_text())
    out = []
    for r in doc["run"]:
        item = (r["config"], r.get("overrides") or {})
        if r.get("states", limit) < limit and not r.get("symmetry") and item not in out:
            out.append(item)
    return out
