"""The compiled set of seen keys (model/engines/keyset.py, _search.c) against numpy's sort-based
answer, and its memory."""

import re

import numpy as np
import pytest

from conq.model.engines.arrays import first_occurrences
from conq.model.engines.keyset import FIRST_SLOTS, GROWTH, MAX_LOAD, SEGMENTS, KeySet


def _expected(chunks: list) -> list:
    """Per chunk, the indices of the keys not seen in it or any earlier chunk, first occurrences
    in order (what the sorting search computed)."""
    seen: set = set()
    out = []
    for y in chunks:
        _u, first = first_occurrences(y)
        fresh = [i for i in np.sort(first).tolist() if int(y[i]) not in seen]
        seen.update(int(y[i]) for i in fresh)
        out.append(fresh)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_admit_gives_the_first_occurrences_of_unseen_keys_in_order_across_chunks(seed):
    rng = np.random.default_rng(seed)
    # few distinct values (many repeats, within and across chunks, so every segment grows several
    # times), the key 0 among them, and values that differ only in their high bits (a packing's own key)
    pool = np.concatenate([rng.integers(0, 2**64, 20_000, dtype=np.uint64),
                           np.array([0, 1, 2**63, 2**63 + 1], dtype=np.uint64),
                           np.arange(50, dtype=np.uint64) << np.uint64(58)])
    chunks = [rng.choice(pool, size=int(rng.integers(0, 30_000))) for _ in range(8)]
    ks = KeySet()
    got = [ks.admit(y).tolist() for y in chunks]
    assert got == _expected(chunks)
    assert len(ks) == len(set(int(v) for y in chunks for v in y))
    segs = ks.segments()
    assert len(segs) == SEGMENTS and sum(n for n, _ in segs) == len(ks) - (0 in {int(v) for y in chunks for v in y})
    assert all(n <= MAX_LOAD * size for n, size in segs)


def test_the_key_zero_is_a_key_like_any_other():
    ks = KeySet()
    assert ks.admit(np.array([0, 0, 7], dtype=np.uint64)).tolist() == [0, 2]
    assert ks.admit(np.array([7, 0, 3], dtype=np.uint64)).tolist() == [2]
    assert len(ks) == 3


def test_keys_of_another_integer_type_are_taken_as_uint64():
    ks = KeySet()
    assert ks.admit(np.array([3, 3, 5], dtype=np.int32)).tolist() == [0, 2]
    assert ks.admit(np.array([5, 3, 4], dtype=np.uint64)).tolist() == [2]


def test_a_segment_grows_only_when_a_new_key_needs_the_room():
    ks = KeySet()
    keys = np.arange(1, 100_001, dtype=np.uint64)
    ks.admit(keys)
    held = ks.nbytes
    assert ks.admit(np.tile(keys, 3)).tolist() == []  # keys already there take no room
    assert ks.nbytes == held
    for n, size in ks.segments():
        # (each segment is within MAX_LOAD, and was not when it last had GROWTH times fewer slots)
        assert n <= MAX_LOAD * size and (size <= FIRST_SLOTS or n > MAX_LOAD * (size - 1) / GROWTH)


def test_a_million_keys_take_at_most_sixteen_bytes_each():
    rng = np.random.default_rng(7)
    ks = KeySet()
    ks.admit(rng.integers(1, 2**64, 1_000_000, dtype=np.uint64))
    assert 8 / MAX_LOAD <= ks.nbytes / len(ks) <= 8 * GROWTH / MAX_LOAD


@pytest.mark.parametrize("width", [2, 3])
def test_keys_of_several_words_are_told_apart_by_every_word(width):
    rng = np.random.default_rng(width)
    # columns that share words with each other (and a fingerprint would not tell them apart any
    # better than their words): few values per word, the all-zero key among them
    pool = rng.integers(0, 4, size=(width, 60)).astype(np.uint64) << np.uint64(40)
    pool[:, 0] = 0
    chunks = [pool[:, rng.integers(0, 60, size=int(rng.integers(0, 500)))] for _ in range(6)]
    ks = KeySet(width=width)
    got = [ks.admit(Y).tolist() for Y in chunks]
    seen: set = set()
    want = []
    for Y in chunks:
        fresh = []
        for i in range(Y.shape[1]):
            col = tuple(int(v) for v in Y[:, i])
            if col not in seen:
                seen.add(col)
                fresh.append(i)
        want.append(fresh)
    assert got == want and len(ks) == len(seen)
    assert ks.nbytes == 8 * width * sum(size for _n, size in ks.segments())
    with pytest.raises(ValueError, match=re.escape(f"not ({width}, n)")):
        ks.admit(np.zeros(7, dtype=np.uint64))
