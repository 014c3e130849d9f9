"""The one diff every counterexample output uses (model/engines/changes.py): only what changed, per part,
as JSON; a lasso's cycle after its prefix; the sequence diagram's arrows from who acted to what
changed.  On the consumer-lists upstream-flag-order counterexample (1,902 states) and small views."""

from __future__ import annotations

import enum
import json

import pytest

from conq.model.engines.changes import ABSENT, Change, diff_views, explain, format_trail, jsonable, parts
from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model
from conq.model.kernel import Model
from conq.render import sequence_diagram, steps_table, trail_markdown


class _Parts(Model):
    name = "parts"
    view_parts = {"consumers": "c", "messages": "m", "rejected_by": ("m", "rejected_by")}
    view_root = "queue"


class _Colour(enum.Enum):
    RED = "red"


def test_jsonable_gives_json_values_not_python_reprs():
    assert jsonable({1: (True, None), "k": _Colour.RED, "s": frozenset({2, 1})}) == {"1": [True, None], "k": "red", "s": [1, 2]}


def test_parts_name_items_by_id_and_file_lists_under_fields():
    view = {"budget": 1, "consumers": [{"id": 7, "node": "idle"}], "messages": ["unarrived", "held"],
            "rejected_by": [[0], []]}
    got = parts(_Parts.__new__(_Parts), view)
    assert got == {"queue": {"budget": 1}, "c7": {"id": 7, "node": "idle"},
                   "m0": {"": "unarrived", "rejected_by": [0]}, "m1": {"": "held", "rejected_by": []}}


def test_diff_names_only_changed_fields_by_part():
    m = _Parts.__new__(_Parts)
    before = {"budget": 1, "lists": {"notified": [], "interested": {"2": [0]}},
              "consumers": [{"id": 0, "node": "interested", "credit": 1}, {"id": 1, "node": "interested", "credit": 1}],
              "messages": ["unarrived"]}
    after = {"budget": 1, "lists": {"notified": [0], "interested": {"2": []}},
             "consumers": [{"id": 0, "node": "notified", "credit": 1}, {"id": 1, "node": "interested", "credit": 1}],
             "messages": ["available"], "extra": True}
    got = diff_views(m, before, after)
    assert got == [
        Change("queue", "lists.notified", [], [0]), Change("queue", "lists.interested.2", [0], []),
        Change("queue", "extra", ABSENT, True),
        Change("c0", "node", "interested", "notified"), Change("m0", "", "unarrived", "available"),
    ]
    assert got[2].to_json() == {"part": "queue", "field": "extra", "after": True}  # absent: no key
    assert got[3].text() == 'c0.node "interested" → "notified"' and got[4].text() == 'm0 "unarrived" → "available"'


@pytest.fixture(scope="module")
def flag_order():
    m = load_model("consumer-lists", "upstream-flag-order", {})
    ex = explore(m)
    return m, ex.verdict("no-lost-wakeup")


def test_upstream_flag_order_lasso_shows_changes_and_its_cycle(flag_order):
    m, v = flag_order
    assert v.status == "violated" and v.cycle is not None
    trail = explain(m, v.path, v.cycle)
    assert trail.cycle_start == len(v.path.steps) and len(trail.cycle) == len(v.cycle.steps)
    # the step where c0's IO thread tells the queue first (upstream's order) and writes its flag after
    told = next(s for s in trail.steps if s.action[0] == "set_notify_work_desired")
    assert told.actor == "c0 IO thread" and told.target == "c0"
    fields = {(c.part, c.field) for c in told.changes}
    assert ("c0", "node") in fields and ("queue", "lists.not_interested") in fields
    assert all(c.before != c.after for c in told.changes)
    # only changed fields: the untouched consumer c1 never appears in a change
    assert not any(c.part == "c1" for s in trail.steps for c in s.changes)
    text = format_trail(trail)
    assert "then forever, a cycle of" in text and "↺ back to the state after step" in text
    assert 'c0: node "interested" → "not-interested"' in text
    for repr_only in ("None", "True", "False", "'flow'"):
        assert repr_only not in text, repr_only
    json.dumps(trail.to_json())  # every value is JSON


def test_sequence_diagram_points_from_actor_to_the_changed_part(flag_order):
    m, v = flag_order
    trail = explain(m, v.path, v.cycle)
    diagram = sequence_diagram(trail)
    assert "c0_IO_thread->>c0: " in diagram and "Note over c0: c0: node" in diagram
    assert "loop repeated forever" in diagram and diagram.rstrip().endswith("end")
    assert ";" not in diagram
    table = steps_table(trail)
    assert table.count("\n| ") == len(trail.steps) and "↺" in table
    assert "<details>" in trail_markdown(trail)


def test_format_path_is_the_trail(flag_order):
    m, v = flag_order
    assert m.format_path(v.path, cycle=v.cycle) == format_trail(explain(m, v.path, v.cycle))
    assert "state: {" in m.format_path(v.path, states=True)
