"""``conq run``'s reports (conq/jobs.py): index.html with every check's section, summary.md slimmed
to the headline and a table linking the page; progress on stderr when piped.  Two manifest entries
and no other stage, to stay cheap."""

from __future__ import annotations

import io
import json

from rich.console import Console

from conq import jobs, manifest


def test_run_writes_the_page_and_a_slim_markdown(tmp_path, monkeypatch):
    entries = [e for e in manifest.load() if e.model == "consumer-lists" and e.config in ("upstream-flag-order", "small")
               and not e.symmetry and not e.overrides]
    assert len(entries) == 2
    monkeypatch.setattr(manifest, "load", lambda *a, **k: entries)
    monkeypatch.setattr(jobs, "STAGES", [])
    monkeypatch.setattr(jobs.catalog, "coverage", lambda areas: [])
    out, err = io.StringIO(), io.StringIO()
    code = jobs.main_job(tmp_path, quick=False, json_out=False, console=Console(file=out, width=200),
                         progress=Console(file=err, width=200))
    assert code == 0, out.getvalue()
    page = (tmp_path / "index.html").read_text()
    md = (tmp_path / "summary.md").read_text()
    assert "2 checks, all as expected" in page and "**2 checks, all as expected**" in md
    assert md.count("](index.html#check-") == 2 and "```mermaid" not in md and len(md.splitlines()) < 20
    assert page.count('class="cx"') == 2  # the two expected violations of upstream-flag-order, in the viewer
    assert json.loads((tmp_path / "summary.json").read_text())["headline"] == "2 checks, all as expected"
    assert out.getvalue().rstrip().endswith("2 checks, all as expected")
