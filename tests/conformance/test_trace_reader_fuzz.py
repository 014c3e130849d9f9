"""The trace reader on hostile input (issue 13, item 10): whatever the bytes, the reader returns
a Trace or raises a TraceError naming FILE:LINE, never another exception.  Hypothesis runs a
fixed number of examples (derandomized by tests/conftest.py), so the verdict does not depend on
the machine or the clock."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conq.conformance import trace
from conq.conformance.trace import Trace, TraceError

CORPUS = Path(__file__).resolve().parent.parent.parent / "conformance" / "consumer_lists" / "corpus"
GOOD = (CORPUS / "pass-reference-0.ndjson").read_bytes()
DIVERGE = (CORPUS / "diverge-add-no-notify.ndjson").read_bytes()
SOURCE = "fuzz.ndjson"
WHERE = re.compile(re.escape(SOURCE) + r":[0-9]+: \S")


def outcome(data: bytes, **kw) -> Trace | TraceError:
    """What the reader makes of ``data``: a Trace, or the TraceError (anything else fails the test)."""
    try:
        return trace.parse_lines(io.BytesIO(data), SOURCE, **kw)
    except TraceError as e:
        assert WHERE.match(str(e)), f"no FILE:LINE in {e!s:.300}"
        return e


# -- hostile inputs ----------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
FIELDS_HEADER = ["format", "version", "model", "config", "seed", "generator", "config_name", "expect"]
FIELDS_EVENT = ["step", "action", "observation", "state"]


@st.composite
def wrong_types(draw) -> bytes:
    """A real trace with one field of the header, the config or an event replaced by any JSON value."""
    lines = GOOD.decode().splitlines()
    head = json.loads(lines[0])
    events = [json.loads(x) for x in lines[1:]]
    where = draw(st.sampled_from(["header", "config", "event"]))
    value = draw(json_values)
    if where == "header":
        head[draw(st.sampled_from(FIELDS_HEADER))] = value
    elif where == "config":
        head["config"][draw(st.sampled_from(sorted(head["config"]) + ["no_such_field"]))] = value
    else:
        ev = events[draw(st.integers(0, len(events) - 1))]
        key = draw(st.sampled_from(FIELDS_EVENT + ["action/0", "action/1"]))
        if key.startswith("action/"):
            i = int(key[-1])
            ev["action"] = list(ev["action"]) + [None] * (i + 1 - len(ev["action"]))
            ev["action"][i] = value
        else:
            ev[key] = value
    return ("\n".join([json.dumps(head)] + [json.dumps(e) for e in events]) + "\n").encode()


@st.composite
def damaged(draw) -> bytes:
    """A real trace, truncated, with a byte inserted or replaced, or re-encoded."""
    data = draw(st.sampled_from([GOOD, DIVERGE]))
    how = draw(st.sampled_from(["truncate", "insert", "replace", "nul", "utf16", "utf16-nobom", "utf8-bom", "crlf"]))
    i = draw(st.integers(0, len(data)))
    if how == "truncate":
        return data[:i]
    if how == "insert":
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i:]
    if how == "replace":
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
    if how == "nul":
        return data[:i] + b"\x00" + data[i:]
    if how == "utf16":
        return data.decode().encode("utf-16")
    if how == "utf16-nobom":
        return data.decode().encode("utf-16-le")
    if how == "utf8-bom":
        return b"\xef\xbb\xbf" + data
    return data.replace(b"\n", b"\r\n")


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes(data):
    outcome(data)
    outcome(data, require_known_model=True)


@settings(max_examples=200)
@given(damaged())
def test_damaged_traces(data):
    outcome(data)


@settings(max_examples=120)
@given(wrong_types())
def test_wrong_types(data):
    outcome(data)


@settings(max_examples=100)
@given(st.lists(st.text(max_size=60), max_size=5))
def test_text_lines(lines):
    try:
        trace.parse_lines(lines, SOURCE)
    except TraceError as e:
        assert WHERE.match(str(e)), str(e)


# -- the cases of the issue, one by one ----------------------------------------------------------
def test_a_real_trace_reads_back():
    tr = outcome(GOOD, require_known_model=True)
    assert isinstance(tr, Trace) and tr.model == "consumer-lists" and tr.events
    assert isinstance(outcome(GOOD.replace(b"\n", b"\r\n")), Trace)
    assert isinstance(outcome(b"\xef\xbb\xbf" + GOOD), Trace)  # a UTF-8 byte-order mark is tolerated


@pytest.mark.parametrize(
    "data, needle",
    [
        (GOOD.decode().encode("utf-16"), ":1: the file is UTF-16 text (byte-order mark)"),
        (GOOD.decode().encode("utf-16-le"), ":1: NUL byte at column 2"),
        (GOOD[:40] + b"\x00" + GOOD[40:], ":1: NUL byte at column 41"),
        (b"\x89PNG\r\n\x1a\n", ":1: not UTF-8 text: byte 0x89 at column 1"),
        (GOOD + b"\xc3\x28\n", f":{len(GOOD.splitlines()) + 1}: not UTF-8 text"),
        (GOOD[: len(GOOD) // 2], "not valid JSON"),
        (b"[" * 100_000, ":1: not valid JSON"),
        (b'{"n": ' + b"9" * 5000 + b"}", ":1: not valid JSON"),
        (b"\n\n", ":3: empty trace"),
    ],
)
def test_undecodable_input_names_file_and_line(data, needle):
    e = outcome(data)
    assert isinstance(e, TraceError) and needle in str(e), str(e)


def _with_event(action, expect="diverge") -> bytes:
    head = json.loads(DIVERGE.decode().splitlines()[0])
    head["expect"] = expect
    return (json.dumps(head) + "\n" + json.dumps({"step": 1, "action": action, "observation": None}) + "\n").encode()


@pytest.mark.parametrize(
    "action, needle",
    [
        (["frobnicate", 0], ":2: field 'action': unknown action 'frobnicate'"),
        (["pull"], ":2: field 'action': action 'pull' takes 1 parameter (c), got 0"),
        (["pull", 0, 1], ":2: field 'action': action 'pull' takes 1 parameter (c), got 2"),
        (["suspend", 0], ":2: field 'action': action 'suspend' takes 2 parameters (c, r), got 1"),
    ],
)
def test_unknown_action_or_wrong_arity_is_an_input_error_even_in_a_diverge_trace(action, needle):
    e = outcome(_with_event(action))
    assert isinstance(e, TraceError) and needle in str(e), str(e)


def test_a_header_naming_an_unknown_model():
    data = DIVERGE.replace(b'"model":"consumer-lists"', b'"model":"consumer-listz"')
    assert isinstance(outcome(data), Trace)  # a user's own model: read without model checks
    e = outcome(data, require_known_model=True)
    assert isinstance(e, TraceError) and ":1: field 'model': unknown model 'consumer-listz'" in str(e)


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("messages", -1, "field 'config/messages': must be at least 1"),
        ("reasons", 7, "field 'config/reasons': must be between 0 and 2"),
        ("consumers", [1, 2], "field 'config/consumers': entry 0 must be [priority, acquires]"),
        ("held", 1, "field 'config/held': must be a boolean"),
        ("pull_rule", "sometimes", "field 'config/pull_rule'"),
        ("no_such_field", 1, "field 'config/no_such_field': unknown config field"),
    ],
)
def test_header_config_is_validated_through_the_model(field, value, needle):
    head = json.loads(GOOD.decode().splitlines()[0])
    head["config"][field] = value
    e = outcome((json.dumps(head) + "\n").encode())
    assert isinstance(e, TraceError) and f"{SOURCE}:1: {needle}" in str(e), str(e)


def test_read_names_the_file(tmp_path):
    p = tmp_path / "bad.ndjson"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TraceError, match=re.escape(f"{p}:1: the file is UTF-16 text")):
        trace.read(p)
    with pytest.raises(TraceError, match=re.escape(f"{tmp_path}: cannot read")):
        trace.read(tmp_path)
