"""Unit tests of conq.impl.consumer_lists.consumer_manager: the transition table and the per-priority lists."""

import pytest

from conq.impl.consumer_lists.consumer_manager import DEFAULT_PRIORITY, NodeState, QueueConsumerManager


class C:
    def __init__(self, cid, priority=DEFAULT_PRIORITY, acquires=True):
        self.id, self.priority, self.acquires, self.node = cid, priority, acquires, None


def states(qcm, *cs):
    return [c.node.state for c in cs]


def test_add_places_by_desire_and_kind():
    qcm = QueueConsumerManager()
    a, b, br, br2 = C("a"), C("b"), C("br", acquires=False), C("br2", acquires=False)
    qcm.add_consumer(a, True)
    qcm.add_consumer(b, False)
    qcm.add_consumer(br, True)
    qcm.add_consumer(br2, False)
    assert states(qcm, a, b, br, br2) == [NodeState.INTERESTED, NodeState.NOT_INTERESTED,
                                          NodeState.NON_ACQUIRING, NodeState.NOT_INTERESTED]
    d = qcm.describe()
    assert d["interested"] == [[DEFAULT_PRIORITY, ["a"]]]
    assert d["not_interested"] == ["b", "br2"] and d["non_acquiring"] == ["br"]
    assert qcm.count == 4
    with pytest.raises(ValueError, match="already registered"):
        qcm.add_consumer(a, True)


def test_transition_table_acquiring():
    qcm = QueueConsumerManager()
    a = C("a")
    qcm.add_consumer(a, True)
    assert qcm.set_interest(a, True) is False  # already interested: guarded move refuses
    assert qcm.set_notified(a, False) is False  # not NOTIFIED
    assert qcm.set_notified(a, True) is True and a.node.state == NodeState.NOTIFIED
    assert qcm.set_notified(a, True) is False
    assert qcm.notified_count == 1 and qcm.highest_notified_priority() == DEFAULT_PRIORITY
    assert qcm.set_interest(a, False) is True and a.node.state == NodeState.NOT_INTERESTED  # NOTIFIED -> NOT_INT
    assert qcm.set_notified(a, True) is False
    assert qcm.set_interest(a, True) is True and a.node.state == NodeState.INTERESTED
    assert qcm.set_notified(a, True) and qcm.set_notified(a, False) and a.node.state == NodeState.INTERESTED
    assert qcm.remove_consumer(a) == NodeState.INTERESTED
    assert a.node.state == NodeState.REMOVED
    assert qcm.remove_consumer(a) is None  # terminal
    for call in (lambda: qcm.set_interest(a, True), lambda: qcm.set_notified(a, True)):
        assert call() is False and a.node.state == NodeState.REMOVED
    assert qcm.count == 0 and list(qcm.all()) == [] and qcm.levels() == ()


def test_transition_table_browser():
    qcm = QueueConsumerManager()
    b = C("b", acquires=False)
    qcm.add_consumer(b, True)
    assert qcm.set_notified(b, True) is True and b.node.state == NodeState.NON_ACQUIRING  # no change
    assert qcm.set_notified(b, False) is True and b.node.state == NodeState.NON_ACQUIRING
    assert qcm.set_interest(b, False) is True and b.node.state == NodeState.NOT_INTERESTED
    assert qcm.set_interest(b, False) is False
    assert qcm.set_interest(b, True) is True and b.node.state == NodeState.NON_ACQUIRING


def test_priority_order_and_back_of_the_list_fairness():
    qcm = QueueConsumerManager()
    cs = [C("lo1", 1), C("hi1", 10), C("lo2", 1), C("def"), C("hi2", 10)]
    for c in cs:
        qcm.add_consumer(c, True)
    assert [c.id for c in qcm.interested()] == ["def", "hi1", "hi2", "lo1", "lo2"]
    assert [lv.priority for lv in qcm.levels()] == [DEFAULT_PRIORITY, 10, 1]
    hi1 = cs[1]
    qcm.set_notified(hi1, True)
    qcm.set_notified(hi1, False)  # back to Interested: appended at the back of its level
    assert [c.id for c in qcm.interested()] == ["def", "hi2", "hi1", "lo1", "lo2"]
    assert qcm.desired_at_higher_priority(1) is True
    assert qcm.desired_at_higher_priority(10) is True  # the default level
    assert qcm.desired_at_higher_priority(DEFAULT_PRIORITY) is False
    qcm.set_interest(cs[3], False)
    assert qcm.desired_at_higher_priority(10) is False
    qcm.set_notified(cs[4], True)
    assert qcm.highest_notified_priority() == 10
    assert qcm.desired_at_higher_priority(1) is True  # NOTIFIED counts as wanting work


def test_level_dropped_when_empty_and_recreated():
    qcm = QueueConsumerManager()
    a, b = C("a", 5), C("b", 5)
    qcm.add_consumer(a, True)
    qcm.add_consumer(b, True)
    qcm.remove_consumer(a)
    assert [lv.priority for lv in qcm.levels()] == [5]
    qcm.remove_consumer(b)
    assert qcm.levels() == ()
    c = C("c", 5)
    qcm.add_consumer(c, True)
    assert [x.id for x in qcm.interested()] == ["c"]


def test_remove_never_added_is_an_error():
    with pytest.raises(ValueError, match="never added"):
        QueueConsumerManager().remove_consumer(C("x"))
