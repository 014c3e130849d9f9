"""Ports under faults (issue 13, items 2 to 4).

* item 2: a port runs in a process group of its own and conq ends the whole
  group -- on a timeout, a failure, close(), interpreter exit, SIGTERM and
  SIGINT: no process conq started survives.
* item 3: every port failure (at init, reset, the first snapshot or a step;
  timeout, partial line, stale reply, garbage) is a verdict naming the step,
  the request, what was wrong and the stderr tail of *that* process; the next
  trace runs on a fresh process, with nothing of the failed one glued to it.
* item 4: replies are read in linear time and capped; echoed values are cut.
* the port-reply parser, fuzzed: every input is a reply or a PortFailure.

The ports are small scripts written to tmp_path.  Nothing here depends on the
clock for a verdict: timeouts are the behaviour under test (ports that sleep
far longer than the timeout; the timeout leaves a healthy port seconds for a
reply), and every wait is a generous safety cap that fails loudly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conq.conformance import protocol
from conq.conformance.adapters import InProcess, PortFailure, ReplyReader, Stdio, parse_reply
from conq.conformance.checker import Checker
from conq.conformance.suite import Failure, SuiteError, SuiteResult, make_impl

HERE = Path(__file__).resolve().parent
DRIVER = f"{HERE / 'toy_driver.py'}:CounterDriver"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


toy = _load("toy_counter_rel", HERE.parent / "model" / "engines" / "toy_counter.py")
drivers = _load("toy_driver_rel", HERE / "toy_driver.py")


class ToyView(toy.CounterModel):
    def observe(self, s):
        return {"pc": [["idle", "read", "done"][p] for p in s[0]], "tmp": list(s[1]), "counter": s[2]}


def racy():
    return ToyView(toy.CounterModel.configs()["racy"])


FULL = [("read", 0), ("read", 1), ("write", 0), ("write", 1)]

# A port for tests: the reference port serving a driver, with faults injected
# into its replies.  argv: FAULT WHEN STATE DRIVER [child] [ignore-term] [size=N]
# WHEN is "reply_type:n[,reply_type:n]": the n-th reply of that type, counted
# over every process of the test (files in STATE), so a fault fires once and a
# fresh process behaves.  Each process records its pid (and its child's) in STATE.
FAULT_PORT = r'''
import json, os, signal, subprocess, sys, time
from conq.conformance.port import serve

fault, when, state, driver = sys.argv[1:5]
opts = sys.argv[5:]
def mark(tag, pid):
    open(os.path.join(state, f"{tag}-{pid}"), "w").close()
mark("port", os.getpid())
sys.stderr.write(f"fault port {os.getpid()} up\n"); sys.stderr.flush()
if "child" in opts:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    mark("child", child.pid)
if "ignore-term" in opts:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
size = int(next((o[5:] for o in opts if o.startswith("size=")), "0"))
targets = {(w.split(":")[0], int(w.split(":")[1])) for w in when.split(",")}
out = sys.stdout

def bump(t):
    path = os.path.join(state, f"count-{t}")
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    with open(path, "w") as f:
        f.write(str(n))
    return n

class Faulty:
    def write(self, text):
        msg = json.loads(text)
        n = bump(msg["type"])
        if fault == "none" or (msg["type"], n) not in targets:
            out.write(text)
            return
        sys.stderr.write(f"fault port {os.getpid()}: injecting {fault}\n"); sys.stderr.flush()
        if fault == "hang":
            time.sleep(600)
        elif fault == "late":
            time.sleep(4.5); out.write(text)  # after the timeout, before 2x the timeout
        elif fault == "partial-exit":
            out.write(text[: len(text) // 2]); out.flush(); sys.exit(4)
        elif fault == "crash":
            sys.stderr.write("Traceback (most recent call last): boom\n"); sys.stderr.flush(); os._exit(1)
        elif fault == "garbage":
            out.write("this is not json\n")
        elif fault == "wrong-id":
            msg["id"] += 100; out.write(json.dumps(msg) + "\n")
        elif fault == "twice":
            out.write(text + text)
        elif fault == "bad-utf8":
            out.flush(); sys.stdout.buffer.write(b'{"type": "\xff\xfe"}\n'); sys.stdout.buffer.flush()
        elif fault == "huge":
            msg["observation"] = "x" * size; out.write(json.dumps(msg) + "\n")
        elif fault == "no-exit":
            out.write(text); out.flush(); time.sleep(600)
        else:
            raise SystemExit(f"unknown fault {fault}")
    def flush(self):
        out.flush()

serve(sys.stdin, Faulty(), None if driver == "-" else driver)
'''


@pytest.fixture
def port(tmp_path):
    """(make_command, state dir); every process a test's ports recorded is SIGKILLed at teardown,
    so a failing test never leaves one behind either."""
    script = tmp_path / "fault_port.py"
    script.write_text(FAULT_PORT)
    state = tmp_path / "state"
    state.mkdir()

    def command(fault="none", when="x:0", *opts, driver=DRIVER, shell=False):
        args = [sys.executable, str(script), fault, when, str(state), driver, *opts]
        return " ".join(args) if shell else args

    yield command, state
    for pid in recorded(state):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def recorded(state: Path, tag: str = "") -> list[int]:
    """Pids the test's ports recorded, in the order they started."""
    files = [p for p in state.iterdir() if p.name.startswith(f"{tag}-" if tag else ("port-", "child-"))]
    return [int(p.name.split("-")[1]) for p in sorted(files, key=lambda p: p.stat().st_mtime_ns)]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
    return data[data.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_for(pred, cap: float, what: str) -> None:
    """Poll ``pred`` until it holds; ``cap`` is a safety cap that fails loudly."""
    deadline = time.monotonic() + cap
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"safety cap of {cap} s reached waiting for: {what}")
        time.sleep(0.05)


def survivors(state: Path) -> list[int]:
    return [pid for pid in recorded(state) if alive(pid)]


# -- item 2: no process of conq's survives -------------------------------------------------------


def test_a_hung_port_is_ended_with_its_children_at_the_timeout(port):
    command, state = port
    impl = Stdio(command("hang", "action_ok:1", "child", shell=True), timeout=3.0)  # through /bin/sh -c
    r = Checker(racy(), impl).replay(FULL)
    assert r.divergence.kind == "port" and "no response within 3 s" in r.divergence.detail
    assert len(recorded(state, "port")) == 1 and len(recorded(state, "child")) == 1
    # the failure itself ended the whole group: no close() needed
    assert survivors(state) == [], "the hung port or its child survived the timeout"
    impl.close()


def test_a_port_that_ignores_shutdown_and_sigterm_is_ended_with_its_children(port):
    command, state = port
    impl = Stdio(command("no-exit", "shutdown_ok:1", "child", "ignore-term"), timeout=10.0)
    assert Checker(racy(), impl, check_properties=False).replay(FULL).ok
    impl.close()  # shutdown_ok, then the port never exits and ignores SIGTERM: SIGKILL to the group
    assert survivors(state) == [], "a port that ignores shutdown (or its child) survived close()"


def test_ports_are_ended_at_interpreter_exit(port, tmp_path):
    command, state = port
    script = tmp_path / "user.py"
    script.write_text(
        "import sys\n"
        "from conq.conformance.adapters import Stdio\n"
        f"s = Stdio({command('none', 'x:0', 'child')!r}, timeout=30)\n"
        "s.start('toy-counter', {'clients': 2}, 0)\n"
        "print(s.do(('read', 0)), flush=True)\n"
        "# no close(): the interpreter exits with the port running\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(recorded(state, "child")) == 1
    wait_for(lambda: not survivors(state), 15, "the port and its child to be gone after the interpreter exited")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_conq_leaves_no_port_behind(port, sig):
    command, state = port
    impl = "stdio:" + command("none", "x:0", "child", driver="-", shell=True)
    conq = subprocess.Popen(
        [sys.executable, "-m", "conq.cli", "conformance", "consumer-lists", "--impl", impl,
         "--traces", "1000000", "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # the port is up and conq is in the middle of its traces
        wait_for(lambda: recorded(state, "child") and (state / "count-action_ok").exists() or conq.poll() is not None,
                 120, "the port to start serving")
        assert conq.poll() is None, conq.communicate()
        conq.send_signal(sig)
        _, err = conq.communicate(timeout=60)
    finally:
        if conq.poll() is None:
            conq.kill()
    assert conq.returncode != 0
    if sig == signal.SIGTERM:
        assert conq.returncode == 128 + signal.SIGTERM, err  # a clean exit, not death by the signal
        assert "Traceback" not in err, err
    assert recorded(state, "port") and recorded(state, "child")
    wait_for(lambda: not survivors(state), 15, f"the port and its child to be gone after {sig.name} to conq")


# -- item 3: every port failure is a verdict; the next trace runs on a fresh process --------------

SCENARIOS = [
    # fault, when, timeout, (step, request type, words of the problem, the failure's code)
    ("garbage", "init_ok:1", 10.0, (0, "init", "invalid JSON in response to init", "bad-reply")),
    ("crash", "init_ok:1", 10.0, (0, "init", "exited (status 1) without answering", "crash")),
    ("hang", "init_ok:1", 3.0, (0, "init", "no response within 3 s", "timeout")),
    ("wrong-id", "reset_ok:1", 10.0, (0, "reset", "stale or stray response to reset", "protocol")),
    ("garbage", "snapshot_ok:1", 10.0, (0, "snapshot", "invalid JSON in response to snapshot", "bad-reply")),
    ("late", "action_ok:2", 3.0, (2, "action", "no response within 3 s", "timeout")),
    ("partial-exit", "action_ok:1", 10.0, (1, "action", "in the middle of its response to action", "crash")),
    ("bad-utf8", "action_ok:1", 10.0, (1, "action", "is not UTF-8", "bad-reply")),
    ("twice", "action_ok:1", 10.0, (1, None, "", "protocol")),
]


@pytest.mark.parametrize("fault, when, timeout, expected", SCENARIOS, ids=[f"{s[0]}@{s[1]}" for s in SCENARIOS])
def test_a_port_failure_is_a_verdict_and_the_next_trace_is_fresh(port, fault, when, timeout, expected):
    command, state = port
    step, request, words, code = expected
    impl = Stdio(command(fault, when), timeout=timeout)
    checker = Checker(racy(), impl, check_properties=False)
    try:
        runs = [checker.replay(FULL, seed) for seed in range(3)]  # never a traceback
        bad = [r for r in runs if not r.ok]
        assert len(bad) == 1, [r.divergence.describe() for r in bad]
        d = bad[0].divergence
        failed = runs.index(bad[0])
        assert d.kind == "port" and d.step == step, d.describe()
        assert d.failure == code and f"port failure ({code})" in d.describe(), d.describe()  # the code, not the text
        if request:
            assert f'"type": "{request}"' in d.detail, d.detail  # the request is named
        if fault == "twice":  # the second copy of the reply is either still buffered or read as the next reply
            assert "nobody asked for" in d.detail or "stale or stray" in d.detail, d.detail
        assert words in d.detail, d.detail
        # the stderr tail of *that* process (the first one, in every scenario)
        pids = recorded(state, "port")
        assert f"port stderr (last lines):\n    fault port {pids[0]} up" in d.detail, d.detail
        # every later trace passed, on a fresh process
        assert all(x.ok for x in runs[failed + 1 :])
        assert len(pids) == 2, f"expected a fresh process after the failure, got pids {pids}"
        assert not alive(pids[0]), "the failed port is still running"
        assert impl.pid == pids[1]
    finally:
        impl.close()
    assert survivors(state) == []


def test_the_stderr_tail_is_that_of_the_failed_process(port):
    command, state = port
    impl = Stdio(command("garbage", "action_ok:1,action_ok:3"), timeout=10.0)
    checker = Checker(racy(), impl, check_properties=False)
    try:
        first, second = checker.replay(FULL, 0), checker.replay(FULL, 1)
    finally:
        impl.close()
    a, b = recorded(state, "port")  # pids grow; both fresh processes
    assert first.divergence.kind == second.divergence.kind == "port"
    assert f"fault port {a} up" in first.divergence.detail
    # the second failure names its own process only
    assert f"fault port {b} up" in second.divergence.detail and f"fault port {a}" not in second.divergence.detail


def test_a_failed_port_is_not_spoken_to_again(port):
    command, state = port
    impl = Stdio(command("garbage", "action_ok:1"), timeout=10.0)
    impl.start("toy-counter", {"clients": 2}, 0)
    with pytest.raises(PortFailure, match="invalid JSON") as e:
        impl.do(("read", 0))
    assert e.value.step == 1 and '"type": "action"' in e.value.request and "fault port" in "\n".join(e.value.stderr)
    assert impl.pid is None and survivors(state) == []
    with pytest.raises(PortFailure, match=r"the port is not running \(it exited \(status 0\) after the failure at step 1"):
        impl.do(("read", 1))
    impl.close()


def test_a_port_that_fails_init_stops_the_suite_once(port):
    """Through run_suite (what `conq conformance` runs): a port that answers ``init`` with garbage
    cannot be used, so the suite stops at once with PortUnusable (exit 2 on the command line),
    naming the request, what was wrong and the port's stderr, and the port is started once, not
    once per trace (issue 35: 'a port that fails to start ... stops the run at once')."""
    from conq.conformance.suite import PortUnusable, run_suite

    command, state = port
    spec = "stdio:" + command("garbage", "init_ok:1", driver="-", shell=True)
    with pytest.raises(PortUnusable) as caught:
        run_suite("consumer-lists", impl_spec=spec, config_name="small", traces=3, length=6)
    message = str(caught.value)
    assert "bad-reply at init" in message and "invalid JSON in response to init" in message
    assert "injecting garbage" in message  # the tail of the port's stderr
    assert not caught.value.unsupported
    # each fault-port process marks itself in the state folder: one start for three traces
    assert len([p for p in state.iterdir() if p.name.startswith("port-")]) == 1


# -- item 4: size limits ------------------------------------------------------------------------


class _CountingBuffer(bytearray):
    """Counts the bytes every newline search examines."""

    examined = 0

    def find(self, sub, start=0, *rest):
        _CountingBuffer.examined += len(self) - start
        return super().find(sub, start, *rest)


def test_a_long_reply_is_framed_in_linear_time():
    reader = ReplyReader(max_line_bytes=64 << 20)
    reader._buf = _CountingBuffer()
    _CountingBuffer.examined = 0
    total = 30 << 20
    chunk = b"x" * (64 << 10)
    for _ in range(total // len(chunk)):
        reader.feed(chunk)
        assert reader.take_line() is None
    reader.feed(b"\n")
    assert len(reader.take_line()) == total
    # each byte is examined once or twice, however many chunks the line came in (480 here);
    # rescanning the whole buffer per chunk would examine ~7 GB
    assert _CountingBuffer.examined <= 2 * total + 1024, _CountingBuffer.examined


def test_a_30_mb_reply_is_read_whole_under_a_raised_cap(port):
    command, state = port
    impl = Stdio(command("huge", "action_ok:1", "size=30000000"), timeout=120.0, max_line_bytes=64 << 20)
    try:
        impl.start("toy-counter", {"clients": 2}, 0)
        assert impl.do(("read", 0)) == "x" * 30_000_000
    finally:
        impl.close()


def test_a_reply_over_the_cap_is_a_verdict_naming_the_limit(port, monkeypatch):
    command, state = port
    impl = Stdio(command("huge", "action_ok:1", "size=3000000"), timeout=30.0, max_line_bytes=1_000_000)
    try:
        runs = [Checker(racy(), impl, check_properties=False).replay(FULL, s) for s in range(2)]
    finally:
        impl.close()
    d = runs[0].divergence
    assert d.kind == "port" and d.step == 1
    assert "more than 1,000,000 bytes" in d.detail and "CONQ_PORT_MAX_LINE_BYTES" in d.detail and "max_line_bytes" in d.detail
    assert len(d.detail) < 3000  # none of the 3 MB is echoed
    assert runs[1].ok  # the rest of the line is not glued to the next trace's replies
    # the default cap is a few MB and can be raised from the environment
    monkeypatch.delenv("CONQ_PORT_MAX_LINE_BYTES", raising=False)
    assert Stdio(["true"]).max_line_bytes == 8 * 1024 * 1024
    monkeypatch.setenv("CONQ_PORT_MAX_LINE_BYTES", "50000000")
    assert Stdio(["true"]).max_line_bytes == 50_000_000
    monkeypatch.setenv("CONQ_PORT_MAX_LINE_BYTES", "lots")
    with pytest.raises(SuiteError, match="CONQ_PORT_MAX_LINE_BYTES='lots': expected a positive number of bytes"):
        make_impl("stdio:true", "toy-counter")


class HugeObservationDriver(drivers.CounterDriver):
    SIZE = 50_000_000

    def do(self, action):
        obs = super().do(action)
        return "y" * self.SIZE if action == ("read", 1) else obs


def test_a_huge_observation_is_cut_wherever_it_is_echoed():
    r = Checker(racy(), InProcess(HugeObservationDriver), check_properties=False).replay(FULL)
    d = r.divergence
    assert d.kind == "observation" and len(d.observed) == HugeObservationDriver.SIZE
    text = d.describe()
    assert len(text) < 4000 and "[cut at 1,000 characters]" in text and "the model allows [0]" in text
    res = SuiteResult(model="toy-counter", impl="huge", failures=[Failure("random trace 0", r, "conq ...")])
    doc = json.dumps(res.to_json(racy()))
    assert len(doc) < 6000
    # a huge snapshot is cut as well
    s = Checker(racy(), InProcess(HugeSnapshotDriver), check_properties=False).replay(FULL)
    assert s.divergence.kind == "snapshot" and s.divergence.step == 0
    assert len(s.divergence.describe()) < 2500 and "[cut at 1,000 characters]" in s.divergence.describe()


class HugeSnapshotDriver(drivers.CounterDriver):
    def snapshot(self):
        return {**super().snapshot(), "junk": "z" * 20_000_000}


# -- the port-reply parser, fuzzed ------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
reply_types = st.sampled_from([m.type for m in protocol.MESSAGES] + ["", "nope"])
near_replies = st.fixed_dictionaries(
    {"type": reply_types | json_values, "id": st.integers(-2, 5) | json_values},
    optional={
        "observation": json_values, "state": json_values, "implementation": json_values, "code": st.integers(0, 30) | json_values,
        "text": json_values, "definite": json_values,
    },
)
lines = st.one_of(
    st.binary(max_size=200),  # random bytes, invalid UTF-8 included
    json_values.map(lambda v: json.dumps(v).encode()),  # JSON of the wrong shape
    near_replies.map(lambda v: json.dumps(v).encode()),  # replies with wrong types, ids, fields
    st.builds(lambda n: b"[" * n + b"]" * n, st.integers(1, 4000)),  # nesting deeper than the parser goes
    st.builds(lambda n, i: b'{"type": "action_ok", "id": ' + b"7" * i + b', "observation": ' + b"9" * n + b"}",
              st.integers(4000, 4500), st.integers(1, 4500)),  # integers past Python's digit limit
    st.just(b'{"type": "action_ok", "id": 1, "observation": NaN}'),
    st.builds(lambda n: b"z" * n, st.integers(9000, 30000)),  # lines over the (small) cap
)
CAP = 10_000


@settings(max_examples=100)
@given(
    stream=st.lists(lines, max_size=4).map(lambda ls: b"\n".join(ls)) | st.binary(max_size=400),
    trailing_newline=st.booleans(),
    cuts=st.lists(st.integers(0, 5000), max_size=6),
    kind=st.sampled_from(["init", "action", "snapshot", "reset", "shutdown"]),
)
def test_every_port_reply_parses_or_is_a_clear_port_failure(stream, trailing_newline, cuts, kind):
    data = stream + (b"\n" if trailing_newline else b"")
    reader = ReplyReader(max_line_bytes=CAP)
    outcomes = []
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    try:
        for lo, hi in zip(bounds, bounds[1:]):  # the bytes arrive in arbitrary chunks
            reader.feed(data[lo:hi])
            while (line := reader.take_line()) is not None:
                try:
                    reply = parse_reply(line, kind, 1)
                except PortFailure as e:
                    outcomes.append(e)
                else:
                    outcomes.append(reply)
    except PortFailure as e:  # a line over the cap
        assert f"more than {CAP:,} bytes" in str(e) and "CONQ_PORT_MAX_LINE_BYTES" in str(e)
        return
    for o in outcomes:
        if isinstance(o, PortFailure):
            msg = str(o)
            assert msg and len(msg) < 1500, msg  # clear and bounded: no line is echoed whole
            assert f"response to {kind}" in msg, msg
        else:
            assert isinstance(o, dict) and protocol.validate(o, "port") is None
            assert o["id"] == 1 and o["type"] in (protocol.BY_TYPE[kind].reply, "error")
    assert len(reader.buffered) <= CAP  # a partial line stays pending, bounded by the cap


def test_the_short_spin_before_blocking_reads_a_reply_and_sees_eof():
    """``_PortProcess._spin_read`` (the bounded poll before select, see adapters.SPIN_SECONDS) takes
    a reply that is already there, and sees the port's EOF, exactly as the blocking path does."""
    import select

    from conq.conformance.adapters import _PortProcess

    p = _PortProcess(["cat"], None, 1 << 20, 10)
    try:
        p.write(b'{"type":"pong"}\n', time.monotonic() + 30)
        select.select([p._out], [], [], 30)  # the reply is in the pipe (a safety cap, not a verdict)
        assert p._spin_read(5.0) is True
        assert p.reader.take_line() == b'{"type":"pong"}' and p.out_open
        assert p._spin_read(0.0) is False  # nothing more: the poll gives up at once
        p.popen.stdin.close()
        p.popen.wait(timeout=30)
        assert p._spin_read(5.0) is True and not p.out_open  # EOF
        with pytest.raises(Exception) as e:
            p.read_line(time.monotonic() + 5)
        assert getattr(e.value, "kind", None) == "eof"
    finally:
        p.end(0.0)
