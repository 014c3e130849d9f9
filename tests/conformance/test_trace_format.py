"""The trace format document names every field of the JSON Schema (the schema is the source of truth)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_document_names_every_schema_field():
    schema = json.loads((ROOT / "spec" / "schemas" / "trace.schema.json").read_text())
    doc = (ROOT / "spec" / "trace-format.md").read_text()
    for part in ("header", "event", "observed_event"):
        for field in schema["$defs"][part]["properties"]:
            assert f"| `{field}` |" in doc, f"spec/trace-format.md does not document {part} field '{field}'"
    modes = schema["$defs"]["header"]["properties"]["generator"]["properties"]["mode"]["enum"]
    for mode in modes:
        assert f"`{mode}`" in doc
