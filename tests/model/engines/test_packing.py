"""The packed-state machinery (model/engines/packing.py) on small hand-made functions: the codec, the
poison's reads, predicates and sections memoised on the fields they read."""

from __future__ import annotations

import itertools

import pytest

from conq.model.kernel import CheckedAction, always_step
from conq.model.engines.packing import Codec, FootprintRead, PackingError, Poison, Section, StepChecks, memoised_predicate

DOMAINS = [range(4), (0, 1), ((), (0,), (1,), (0, 1), (1, 0)), range(-1, 3)]


def _states():
    return list(itertools.product(*[tuple(d) for d in DOMAINS]))


def test_the_codec_round_trips_every_state_and_packs_tightly():
    codec = Codec(DOMAINS)
    assert codec.total_bits == 2 + 1 + 3 + 2
    assert Codec([range(1), (7,), range(2)]).total_bits == 1  # a field of one value takes no bit
    seen = set()
    for s in _states():
        x = codec.encode(s)
        assert codec.decode(x) == s
        assert 0 <= x <= codec.full
        seen.add(x)
    assert len(seen) == len(_states())  # injective


def test_a_value_outside_its_domain_names_the_field():
    codec = Codec(DOMAINS, ["pc", "wake", "order", "status"])
    with pytest.raises(PackingError, match=r"status: value 7 is outside its declared domain"):
        codec.encode((0, 0, (), 7))
    with pytest.raises(PackingError, match=r"wake: value True is outside"):  # a bool is not the int it equals
        codec.encode((0, True, (), 0))
    with pytest.raises(PackingError, match="2 fields, the layout has 4"):
        codec.encode((0, 0))
    with pytest.raises(PackingError, match="lists 1 twice"):
        Codec([(0, 1, 1)])


def test_writes_give_the_successor_by_two_integer_operations():
    codec = Codec(DOMAINS)
    s = (3, 1, (1, 0), -1)
    keep, put = codec.writes([(0, 1), (2, (0,))])
    assert codec.decode((codec.encode(s) & keep) | put) == (1, 1, (0,), -1)


def test_every_use_of_a_poison_but_copying_and_self_comparison_is_a_read():
    p, q = Poison(5), Poison(6)
    assert p == p and not (p != p)
    uses = [lambda: p == 1, lambda: p != q, lambda: p < 1, lambda: bool(p), lambda: p + 1, lambda: 1 + p,
            lambda: 1 << p, lambda: p & 1, lambda: hash(p), lambda: len(p), lambda: list(p), lambda: p[0],
            lambda: (1, 2)[p], lambda: p in (1, 2), lambda: 1 in p, lambda: -p, lambda: {p: 1}]
    for use in uses:
        with pytest.raises(FootprintRead) as e:
            use()
        assert e.value.field in (5, 6)
    # not an Exception: a model's `except Exception` cannot swallow it
    assert not issubclass(FootprintRead, Exception)


def test_a_memoised_predicate_learns_the_fields_it_reads_and_agrees_everywhere():
    codec = Codec(DOMAINS)
    calls = []

    def f(s):  # reads field 1 always, field 3 only when field 1 is set: field 0 and 2 never
        calls.append(s)
        return s[1] == 0 or s[3] > 0

    g = memoised_predicate(codec, f)
    for s in _states():
        assert g(codec.encode(s)) == (s[1] == 0 or s[3] > 0)
    assert g.mask() == codec.mask([1, 3])
    # f ran about once per distinct (field 1, field 3) pair (plus once per field learnt), not once
    # per state; entries recorded under a smaller mask stay (they are still right)
    assert len(calls) <= 2 * 4 + 2 + 2 < len(_states()) == 160


def test_a_predicate_that_fails_on_a_poison_in_another_way_reads_everything():
    codec = Codec(DOMAINS)

    def f(s):  # isinstance() is not intercepted; the TypeError makes the memo read every field
        if not isinstance(s[0], int):
            raise TypeError("not an int")
        return s[0] > 1

    g = memoised_predicate(codec, f)
    for s in _states():
        assert g(codec.encode(s)) == f(s)
    assert g.mask() == codec.full


def _step_props():
    return [always_step("never-to-three", "field 0 never becomes 3",
                        lambda s, a, o, t: not (a[0] == "inc" and t[0] == 3),
                        witness=lambda s, a, o, t: a[0] == "inc" and s[1] == 1, actions=["inc"])]


def _run(s, out):
    """A toy thread: when field 1 is set it increments field 0 (reading it), else it does nothing."""
    if s[1]:
        l = list(s)
        l[0] = s[0] + 1 if s[0] < 3 else 0
        out.append((("inc",), None, tuple(l)))
        return True
    return False


def test_a_section_replays_the_readable_steps_and_decides_their_checks():
    codec = Codec(DOMAINS)
    sec = Section(codec, _run, [1], StepChecks(_step_props()), "toy")
    for s in _states():
        x = codec.encode(s)
        e = sec.lookup(x)
        out: list = []
        owed = _run(s, out)
        assert e[1] == owed
        assert [(a, o, codec.decode((x & k) | v)) for a, o, k, v in e[0]] == out
        for a, _o, _k, _v in e[0]:
            # the check holds unless the step makes field 0 three: those steps stay plain (the engine
            # evaluates them and finds the violation); the others are checked, naming the witness
            # when field 1 was set (it fires)
            if s[0] == 2:
                assert type(a) is tuple
            else:
                assert isinstance(a, CheckedAction) and "never-to-three" in type(a).maybe
    # an idle thread read field 1 only: one entry for all of them
    assert sec.masks[codec.encode((0, 0, (), -1)) & sec.root] == codec.mask([1])
    assert sec.masks[codec.encode((0, 1, (), -1)) & sec.root] == codec.mask([0, 1])
    assert len(sec.memo) == 1 + 4  # one entry for every idle state, one per value of field 0 else


def test_a_range_domain_is_used_as_it_is_however_large():
    codec = Codec([range(1 << 200), range(-1, 2)], ["mask", "status"])
    assert codec.total_bits == 200 + 2
    s = ((1 << 199) + 5, -1)
    assert codec.decode(codec.encode(s)) == s
    with pytest.raises(PackingError, match=r"status: value 2 is outside its declared domain \(-1..1\)"):
        codec.encode((0, 2))
    with pytest.raises(PackingError, match="mask: value False is outside"):
        codec.encode((False, 0))
