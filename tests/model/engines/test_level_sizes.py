"""States per depth (Exploration.level_sizes, the HTML report's plot): the same in every search mode,
summing to the states, one level per depth."""

from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model


def test_states_per_depth_agree_across_modes():
    m = load_model("consumer-lists", "upstream-flag-order", {})
    whole = explore(m, liveness=False)
    assert sum(whole.level_sizes) == whole.states and len(whole.level_sizes) == whole.depth + 1
    assert whole.level_sizes[0] == len(m.init_states())
    assert explore(m, fingerprints=True).level_sizes == whole.level_sizes
    assert explore(m, workers=2).level_sizes == whole.level_sizes
    assert whole.summary()["states_per_depth"] == whole.level_sizes
