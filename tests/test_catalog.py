"""The requirements catalog: well-formed, every link resolves, covered areas
have no gaps, and malformed input is reported with file, requirement and field."""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest

from conq import catalog


def test_catalog_loads_and_counts():
    areas = catalog.load()
    ids = [r.id for a in areas for r in a.requirements]
    assert len(ids) == len(set(ids))
    assert {a.id for a in areas} >= {"QCM", "PROD", "PUSH", "FIFO", "SIMPLE", "DEMUX", "REC"}
    # every seed contributes statements
    seeds = Counter(s for a in areas for r in a.requirements for s in r.seed)
    assert all(seeds[s] > 0 for s in ("000", "001", "002", "003", "004")), seeds


def test_every_check_names_something_that_exists():
    broken = [b for c in catalog.coverage(catalog.load()) for b in c.broken]
    assert not broken, "checks that name nothing:\n" + "\n".join(broken)


def test_covered_areas_have_a_check_on_every_requirement():
    gaps = [f"{c.area.id}: {rid}" for c in catalog.coverage(catalog.load()) if c.area.covered for rid in c.missing]
    assert not gaps, "requirements of covered areas without a check:\n" + "\n".join(gaps)


def _write(tmp_path, text):
    (tmp_path / "x.toml").write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


GOOD_AREA = """
[area]
id = "QCM"
title = "t"
covered = true
"""


def test_malformed_entry_names_file_requirement_and_field(tmp_path):
    d = _write(
        tmp_path,
        GOOD_AREA
        + """
[[requirement]]
id = "QCM-001"
seed = ["009"]
section = "s"
kind = "MUSTN'T"
text = "t"
checks = []
""",
    )
    with pytest.raises(catalog.CatalogError) as info:
        catalog.load(d)
    msg = str(info.value)
    assert "x.toml: requirement #1 (QCM-001): field 'seed'" in msg
    assert "field 'kind' must be one of" in msg


def test_invalid_toml_reports_line(tmp_path):
    d = _write(tmp_path, "[area\nid = 1\n")
    with pytest.raises(catalog.CatalogError, match=r"x.toml: not valid TOML: .*line 1"):
        catalog.load(d)


def test_wrong_area_prefix_and_duplicate_ids(tmp_path):
    entry = """
[[requirement]]
id = "{id}"
seed = ["000"]
section = "s"
kind = "MUST"
text = "t"
checks = []
"""
    d = _write(tmp_path, GOOD_AREA + entry.format(id="PROD-001") + entry.format(id="QCM-002") + entry.format(id="QCM-002"))
    with pytest.raises(catalog.CatalogError) as info:
        catalog.load(d)
    assert "PROD-001 is not in area QCM" in str(info.value)
    assert "QCM-002 already used" in str(info.value)


@pytest.mark.parametrize(
    "check, problem",
    [
        ("no-such-model:prop", "unknown model 'no-such-model'"),
        ("tests/test_catalog.py::test_nope", "defines no test 'test_nope'"),
        ("tests/nope.py::test_x", "does not exist"),
        ("just words", "is not MODEL:PROPERTY"),
    ],
)
def test_broken_checks_are_reported(check, problem):
    assert problem in (catalog.check_problem(check) or "")


def test_existing_test_check_resolves():
    assert catalog.check_problem("tests/test_catalog.py::test_existing_test_check_resolves") is None


def test_covered_area_with_gap_fails_coverage(tmp_path):
    d = _write(
        tmp_path,
        GOOD_AREA
        + """
[[requirement]]
id = "QCM-001"
seed = ["000"]
section = "s"
kind = "MUST"
text = "t"
checks = []
""",
    )
    (cov,) = catalog.coverage(catalog.load(d))
    assert cov.missing == ["QCM-001"] and not cov.ok
