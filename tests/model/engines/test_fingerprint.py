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
