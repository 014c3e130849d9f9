"""Unit tests of conq.impl.consumer_lists.node_list (sequential behaviour and the lazy-unlink rules)."""

import pytest

from conq.impl.consumer_lists.node_list import NodeList


def test_append_iterate_size_in_order():
    nl = NodeList(name="t")
    entries = [nl.append(i) for i in range(5)]
    assert list(nl) == [0, 1, 2, 3, 4]
    assert len(nl) == 5 and nl.size == 5 and not nl.is_empty()
    assert [e.value for e in nl.entries()] == [0, 1, 2, 3, 4]
    assert nl.first() == 0
    assert entries[-1] is nl.tail


def test_remove_is_idempotent_and_counts_once():
    nl = NodeList()
    e = nl.append("a")
    nl.append("b")
    assert nl.remove(e) is True
    assert nl.remove(e) is False
    assert nl.size == 1
    assert list(nl) == ["b"]


def test_remove_foreign_entry_is_rejected():
    a, b = NodeList(name="a"), NodeList(name="b")
    e = a.append(1)
    with pytest.raises(ValueError, match="another list"):
        b.remove(e)


def test_deleted_entries_are_unlinked_lazily_by_traversal():
    nl = NodeList(scavenge_threshold=1000)
    es = [nl.append(i) for i in range(6)]
    for i in (1, 2, 4):
        nl.remove(es[i])
    assert nl.physical_length() == 6  # marking only
    assert list(nl) == [0, 3, 5]
    assert nl.physical_length() == 3  # the traversal unlinked the deleted ones


def test_physical_tail_is_never_unlinked():
    nl = NodeList(scavenge_threshold=1000)
    es = [nl.append(i) for i in range(3)]
    nl.remove(es[2])  # the tail
    assert list(nl) == [0, 1]
    assert nl.physical_length() == 3  # deleted tail still linked
    assert nl.tail is es[2]
    nl.append(3)  # an append after a deleted tail is not lost
    assert list(nl) == [0, 1, 3]
    assert nl.physical_length() == 3  # and now the old tail could be unlinked


def test_remove_everything_then_reuse():
    nl = NodeList(scavenge_threshold=1000)
    es = [nl.append(i) for i in range(4)]
    for e in es:
        nl.remove(e)
    assert list(nl) == [] and nl.is_empty() and nl.first() is None
    nl.append(9)
    assert list(nl) == [9]


def test_scavenge_keeps_remove_amortised_constant():
    # Scavenge only after max(threshold, size) deletions: the physical length stays bounded by
    # about twice the live size plus the threshold, with no traversal at all.
    nl = NodeList(scavenge_threshold=10)
    live = [nl.append(i) for i in range(1000)]
    for round_ in range(20):
        for e in live[:100]:
            nl.remove(e)
        live = live[100:] + [nl.append(("r", round_, j)) for j in range(100)]
        assert nl.physical_length() <= 2 * nl.size + 10 + 100
    assert nl.size == 1000
    assert [v for v in nl] == [e.value for e in live]


def test_iterator_sees_appends_made_during_iteration_and_skips_removed():
    nl = NodeList()
    es = [nl.append(i) for i in range(3)]
    it = iter(nl)
    assert next(it) == 0
    nl.remove(es[1])
    nl.append(3)
    assert list(it) == [2, 3]


def test_bad_threshold():
    with pytest.raises(ValueError, match="scavenge_threshold"):
        NodeList(scavenge_threshold=0)
