"""Stable fingerprints: equal states agree in every process; distinct shapes do not collide."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conq.model.engines.fingerprint import encode, fingerprint

SAMPLES = [
    (),
    (0,),
    (1, 2, 3),
    (1, True),
    (1, 1),
    (1, (2,)),
    (1, 2),
    ((1, 2),),
    (None, "a", b"a", 1.5, frozenset({3, 1, 2})),
    (-1, 1 << 70, -(1 << 63)),
    ("consumer", (0, 1), frozenset({("x", 1), ("y", 2)})),
]


def test_distinct_values_of_different_shape_have_distinct_encodings():
    # bool vs int, nesting vs flat, str vs bytes: equal-looking values of different types must differ
    encodings = [encode(s) for s in SAMPLES]
    assert len(set(encodings)) == len(SAMPLES)
    assert len({fingerprint(s) for s in SAMPLES}) == len(SAMPLES)


def test_frozenset_order_does_not_leak_in():
    a = frozenset(("m%d" % i, i) for i in range(50))
    b = frozenset(reversed(sorted(a)))
    assert fingerprint((a,)) == fingerprint((b,))


def test_fingerprint_is_64_bit_unsigned():
    for s in SAMPLES:
        assert 0 <= fingerprint(s) < 1 << 64


def test_unsupported_value_is_a_clear_error():
    with pytest.raises(TypeError, match="cannot fingerprint a dict"):
        fingerprint(({"a": 1},))


def test_same_fingerprint_in_a_process_with_another_hash_seed():
    # hash() is salted per process; a fingerprint must not be (Spark executors, explorer workers)
    code = ("from conq.model.engines.fingerprint import fingerprint; "
            f"print([fingerprint(s) for s in {SAMPLES!r}])")
    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert outs == {repr([fingerprint(s) for s in SAMPLES]) + "\n"}


def test_fast_and_member_by_member_encodings_agree():
    # marshal's bytes are taken as they are unless a frozenset (or a byte that looks like its
    # type code, here the int 62) is inside; both ways must give the same bytes for one value
    import enum
    import marshal

    class E(enum.IntEnum):
        THREE = 3

    for v in [(1, 62, (2, "x")), (60, 123, 91), ((1, 2), None, True, 1.5, b"b")]:
        assert encode(v) == marshal.dumps(v, 2)
    assert encode((E.THREE, (1, 2))) == encode((3, (1, 2)))
    assert encode((62, frozenset({1, 2}))) == encode((62, frozenset({2, 1})))


def test_model_states_fingerprint_the_same_in_another_process():
    from conq.model.engines.explorer import explore
    from conq.model.engines.registry import load_model

    ex = explore(load_model("recovery-deferral", "reference-one-queue"), liveness=False)
    sample = ex.state_list[:: max(1, len(ex.state_list) // 40)]
    code = ("import sys; from conq.model.engines.explorer import explore; "
            "from conq.model.engines.registry import load_model; "
            "from conq.model.engines.fingerprint import fingerprint; "
            "ex = explore(load_model('recovery-deferral', 'reference-one-queue'), liveness=False); "
            f"print([fingerprint(s) for s in ex.state_list[::{max(1, len(ex.state_list) // 40)}]])")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert got == repr([fingerprint(s) for s in sample]) + "\n"
    assert len({fingerprint(s) for s in ex.state_list}) == len(ex.state_list)
