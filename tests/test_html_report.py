"""The HTML report (conq/html_report.py): one self-contained page, a headline verdict, a line per
check linking to its section, each counterexample's trail embedded for the viewer, replay figures
that say which view they count and a Chao2 interval that missed said so.  (The viewer itself is
driven in a real browser: tests/browser/.)"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from conq.html_report import HtmlReport, chao2_verdict
from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model


@pytest.fixture(scope="module")
def flag_order():
    return explore(load_model("consumer-lists", "upstream-flag-order", {}))


def _replay(**kw):
    base = dict(ok=True, traces=4096, steps=100_000, diverged=0, states_covered=351, graph_states=351, state_fraction=1.0,
                transitions_covered=900, graph_transitions=900, violations=[], out="reports/replay", graph="explored",
                growth_points=[[1, 10], [64, 300], [4096, 351]],
                state_estimate={"estimate": 57.0, "low": 57.0, "high": 65.9, "observed": 57})
    base.update(kw)
    return SimpleNamespace(**base)


def test_report_is_self_contained_and_links_every_check(tmp_path, flag_order):
    r = HtmlReport("conq run")
    expected = [v.prop.name for v in flag_order.violations]
    anchor = r.add_exploration(flag_order, "consumer-lists / upstream-flag-order", expected=expected)
    r.add_replay(_replay(), "consumer-lists/reference", model_states=532_908)
    page = r.write(tmp_path / "index.html").read_text()
    assert '<div class="headline ok" id="headline">2 checks, all as expected</div>' in page
    assert f'<a href="#{anchor}">consumer-lists / upstream-flag-order</a>' in page and f'id="{anchor}"' in page
    # nothing to fetch: no external script, style, image or font
    assert not re.search(r'(src|href)="(https?:)?//', page) and "<link" not in page and "@import" not in page
    # the trail of each violation, for the viewer
    blobs = re.findall(r'<script type="application/json" id="([^"]+)-data">(.*?)</script>', page)
    assert len(blobs) == len(expected)
    data = json.loads(blobs[0][1])
    told = next(s for s in data["steps"] if s["label"].startswith("set_notify_work_desired"))
    assert {"part": "c0", "field": "node", "before": "interested", "after": "not-interested"} in told["changes"]
    assert data["cycle_start"] == len(data["steps"]) - 1
    # replay figures say which view they count, beside the model check's count
    assert "351 call-level states" in page and "532,908 states of the full model" in page


def test_headline_names_what_was_not_as_expected(flag_order):
    r = HtmlReport("conq run")
    r.add_exploration(flag_order, "consumer-lists / upstream-flag-order", problems=["violated: no-lost-wakeup (expected none)"])
    r.add_row("conformance", "consumer-lists", "300 traces", True)
    assert r.headline() == "1 of 2 checks not as expected: consumer-lists / upstream-flag-order"
    assert "NOT as expected" in r.render()


def test_incomplete_search_never_says_holds():
    m = load_model("consumer-lists", "upstream-flag-order", {})
    ex = explore(m, max_states=50, liveness=False)
    r = HtmlReport("check")
    r.add_exploration(ex, "cut")
    page = r.render()
    assert not ex.complete and f"no violation in {ex.states:,} states (incomplete)" in page
    assert 'class="status-holds"' not in page


def test_a_missed_chao2_interval_is_said_to_be_missed():
    assert chao2_verdict({"estimate": 80.0, "low": 70.0, "high": 90.0}, 351)["verdict"] == \
        "missed: the true count 351 is 3.9x the interval's upper bound"
    assert chao2_verdict({"estimate": 80.0, "low": 70.0, "high": 90.0}, 85)["held"] is True
    assert chao2_verdict({"estimate": 80.0, "low": 70.0, "high": 90.0}, None)["held"] is None


def test_markdown_is_the_headline_and_a_table_linking_the_page(flag_order):
    from conq.html_report import slim_markdown

    r = HtmlReport("conq run")
    anchor = r.add_exploration(flag_order, "consumer-lists / upstream-flag-order",
                               expected=[v.prop.name for v in flag_order.violations])
    md = slim_markdown(r)
    assert md.splitlines()[2] == "**1 check, as expected**"
    assert f"[consumer-lists / upstream-flag-order](index.html#{anchor})" in md and "```" not in md
