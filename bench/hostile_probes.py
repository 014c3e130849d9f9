"""Every probe of issue 33, replayed against the real commands, one row each (the closing note's table).

    .venv/bin/python bench/hostile_probes.py            # a markdown table on stdout
    .venv/bin/python bench/hostile_probes.py --json     # the same rows as JSON

Findings 1-3 run against ``conq broker serve`` started as a process of its own (default limits, with
and without ``--admin``) on 127.0.0.1, each probe on a fresh connection, and after every probe a
well-behaved client's ``query_route`` must still be answered: a row says what the hostile client got
back and whether the server served on.  Findings 4-5 run the ``conq`` commands the issue names, in a
temporary folder, and record the exit code and the first line of the error.  Finding 6 (the suite under
load) is a CI run, not a probe.  The unit tests that pin each behaviour are
tests/impl/ordered_consumption/test_hostile_clients.py, tests/conformance/test_output_folder.py and
tests/test_exit_codes_under_abuse.py; this script shows the same on the shipped command line.
Nothing is left running: every server is stopped with SIGTERM (its exit code is a row too) and killed
with its process group if it does not end."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONQ = [sys.executable, "-m", "conq"]
CAP = 120.0  # seconds: a safety cap on any one wait, reached only by a hang


class Server:
    """``conq broker serve`` in its own process group, on an ephemeral loopback port."""

    def __init__(self, *extra: str) -> None:
        self.proc = subprocess.Popen([*CONQ, "broker", "serve", "--topic", "T:2", "--topic", "BIG:2000", "--group", "G",
                                      *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, cwd=ROOT)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.close()
            raise RuntimeError(f"conq broker serve did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        host, port = line.split()[-1].rsplit(":", 1)
        self.address = (host.strip("[]"), int(port))

    def connect(self, rcvbuf: int | None = None) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(CAP)
        s.connect(self.address)
        return s

    def ask(self, *lines: bytes, answers: int = 1) -> list[dict]:
        """Send ``lines`` on a fresh connection and read ``answers`` answers (an empty list if the
        server closed the connection first)."""
        with self.connect() as s:
            f = s.makefile("rwb")
            for line in lines:
                f.write(line + b"\n")
            f.flush()
            got = []
            for _ in range(answers):
                raw = f.readline()
                if not raw:
                    break
                got.append(json.loads(raw))
            return got

    def serves(self) -> bool:
        got = self.ask(b'{"id":1,"rpc":"query_route","args":["T"]}')
        return bool(got) and len(got[0].get("result", {}).get("$t", [])) == 2  # the route's two queues

    def close(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(CAP)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _error(answer: dict | None) -> str:
    if answer is None:
        return "(connection closed, no answer)"
    if "error" in answer:
        return f"{answer['error']['code']}: {answer['error']['message'][:110]}"
    return f"ok ({json.dumps(answer.get('result'))[:60]})"


def server_probes() -> list[dict]:
    rows = []
    with Server() as srv:
        for finding, what, line in (
            (1, '`{"id":1,"rpc":[]}`', b'{"id":1,"rpc":[]}'),
            (1, '`{"id":[1],"rpc":"query_route","args":["t"]}`', b'{"id":[1],"rpc":"query_route","args":["t"]}'),
            (1, '`{"cancel":{}}`', b'{"cancel":{}}'),
            (1, "a 200,000-deep JSON array", b"[" * 200_000 + b"]" * 200_000),
            (3, "a non-object `kwargs`", b'{"id":2,"rpc":"query_route","kwargs":[]}'),
            (3, "`create_topic(\"big\", 200000)` without `--admin`", b'{"id":3,"rpc":"create_topic","args":["big",200000]}'),
        ):
            got = srv.ask(line)
            rows.append({"finding": finding, "probe": what, "result": _error(got[0] if got else None),
                         "serves_on": srv.serves()})
        # a duplicate request id: a long poll twice under one id
        mq = json.dumps({"$": "MessageQueue", "f": {"topic": "T", "queue_id": 0}})
        poll = ('{"id":5,"rpc":"receive_message","args":["G",%s,1,2.0,60.0]}' % mq).encode()
        got = srv.ask(poll, poll, answers=2)
        refusal = next((a for a in got if a.get("id") is None), None)
        rows.append({"finding": 3, "probe": "a duplicate request id (two long polls, id 5)",
                     "result": f"{_error(refusal)}; id 5 answered {sum(a.get('id') == 5 for a in got)} time(s)",
                     "serves_on": srv.serves()})
        # a client that never reads: 200 answers of a 2,000-queue route (about 4 MB), then another client
        t0 = time.monotonic()
        with srv.connect(rcvbuf=4096) as sleeper:
            line = b'{"rpc":"query_route","args":["BIG"]}'
            try:
                sleeper.sendall(b"".join(b'{"id":%d,%s\n' % (i, line[1:]) for i in range(200)))
            except OSError:
                pass
            other = srv.serves()
            waited = time.monotonic() - t0
        rows.append({"finding": 2, "probe": "a client that never reads 200 `query_route` answers of a 2,000-queue topic",
                     "result": f"another client answered while it stayed connected ({waited:.2f} s after the flood)",
                     "serves_on": other})
        # unfinished long lines: 20 x 15 MB would be 300 MB buffered; the line bound (8 MiB) stops each
        socks = []
        try:
            for _ in range(20):
                s = srv.connect()
                socks.append(s)
                try:
                    s.sendall(b'{"id":1,"rpc":"query_route","args":["' + b"x" * (9 << 20))
                except OSError:
                    pass
            closed = 0  # each answered with the reason, then closed
            for s in socks:
                try:
                    closed += b"longer than" in s.makefile("rb").readline()
                except OSError:
                    closed += 1
        finally:
            for s in socks:
                s.close()
        rows.append({"finding": 3, "probe": "20 unfinished lines of 9 MiB each (bound: 8 MiB a line, 128 MiB in all)",
                     "result": f"{closed} of 20 connections closed by the server", "serves_on": srv.serves()})
        # more long polls than the pool has threads
        polls = [srv.connect() for _ in range(70)]
        try:
            for i, s in enumerate(polls):
                s.sendall(('{"id":%d,"rpc":"receive_message","args":["G",%s,1,30.0,60.0]}\n' % (i, mq)).encode())
            t0 = time.monotonic()
            other = srv.serves()
            waited = time.monotonic() - t0
            refused = 0
            for s in polls:
                s.settimeout(0.5)
                try:
                    raw = s.makefile("rb").readline()
                    refused += b"TOO_MANY_REQUESTS" in raw
                except OSError:
                    pass
        finally:
            for s in polls:
                s.close()
        rows.append({"finding": 3, "probe": "70 long polls at once (bound: 64 worker threads)",
                     "result": f"{refused} answered TOO_MANY_REQUESTS; `query_route` of another client in {waited:.2f} s",
                     "serves_on": other})
        code = srv.close()
        rows.append({"finding": 1, "probe": "SIGTERM to the server after all of the above", "result": f"exit {code}",
                     "serves_on": None})
    with Server("--admin") as srv:
        got = srv.ask(b'{"id":3,"rpc":"create_topic","args":["big",200000]}')
        rows.append({"finding": 3, "probe": "`create_topic(\"big\", 200000)` with `--admin`",
                     "result": _error(got[0] if got else None), "serves_on": srv.serves()})
    return rows


def _cli(*args: str, cwd: Path) -> tuple[int, str]:
    p = subprocess.run([*CONQ, *args], cwd=cwd, capture_output=True, text=True, timeout=CAP * 5)
    lines = [x for x in (p.stderr + p.stdout).splitlines() if x.strip()]
    first = next((x for x in lines if "error" in x.lower()), "")
    return p.returncode, first.strip()[:150]


def _sigterm(args: list[str], ready: str, cwd: Path) -> dict:
    """SIGTERM to ``conq ARGS`` once its stderr shows ``ready``: the exit code and the JSON document."""
    proc = subprocess.Popen([*CONQ, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        for line in proc.stderr:
            if ready in line:
                break
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=CAP)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return {"finding": 5, "probe": f"SIGTERM to `conq {' '.join(args[:3])} ... --json` mid-run",
            "result": f"exit {proc.returncode}: {_compact(out)}", "serves_on": None}


def _compact(document: str) -> str:
    try:
        return json.dumps(json.loads(document), separators=(",", ":"))[:150]
    except ValueError:
        return f"(not one JSON document: {document.strip()[:100]!r})"


def cli_probes() -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="conq-probes-") as d:
        tmp = Path(d)
        report = tmp / "R"
        report.mkdir()
        (report / "check-consumer-lists.md").write_text("mine\n")
        code, msg = _cli("check", "consumer-lists", "-c", "small", "--report", str(report), cwd=tmp)
        kept = (report / "check-consumer-lists.md").read_text() == "mine\n"
        rows.append({"finding": 4, "probe": "`conq check consumer-lists --report R` with a foreign `R/check-consumer-lists.md`",
                     "result": f"exit {code}: {msg} (file kept: {kept})", "serves_on": None})
        r2 = tmp / "R2"  # a folder conq wrote, then a link planted in it where the next run writes
        first, _ = _cli("check", "consumer-lists", "-c", "small", "--report", str(r2), cwd=tmp)
        outside = tmp / "outside.json"
        (r2 / "check-consumer-lists.json.tmp").symlink_to(outside)
        code, msg = _cli("check", "consumer-lists", "-c", "small", "--report", str(r2), cwd=tmp)
        rows.append({"finding": 4, "probe": "a planted symlink `R/check-consumer-lists.json.tmp` pointing out of a "
                     "report folder conq wrote, then `conq check --report R` again",
                     "result": f"exits {first} then {code}{': ' + msg if msg else ''} (file outside written: "
                     f"{outside.exists()}; link still there: {(r2 / 'check-consumer-lists.json.tmp').is_symlink()})",
                     "serves_on": None})
        up = tmp / "U"
        up.mkdir()
        (up / "report.md").write_text("mine\n")
        code, msg = _cli("upstream", "rocketmq-python", "--out", str(up), cwd=tmp)
        rows.append({"finding": 4, "probe": "`conq upstream rocketmq-python --out U` with a foreign `U/report.md`",
                     "result": f"exit {code}: {msg} (file kept: {(up / 'report.md').read_text() == 'mine' + chr(10)})",
                     "serves_on": None})
        deep = tmp / "deep.ndjson"
        header = sorted((ROOT / "conformance/consumer_lists/corpus").glob("pass-*.ndjson"))[0].read_text().splitlines()[0]
        deep.write_text(header + '\n{"step":1,"action":["pull",0],"observation":' + "[" * 500 + "]" * 500 + "}\n")
        code, msg = _cli("validate", "consumer-lists", str(deep), cwd=tmp)
        rows.append({"finding": 5, "probe": "a trace line nested 500 deep (`conq validate`)", "result": f"exit {code}: {msg}",
                     "serves_on": None})
        code, msg = _cli("check", "consumer-lists", "-c", "small", "--set", "messages=99999999999999999999", cwd=tmp)
        rows.append({"finding": 5, "probe": "`--set messages=99999999999999999999`", "result": f"exit {code}: {msg}",
                     "serves_on": None})
        wrong = tmp / "wrong.ndjson"
        wrong.write_text(header + '\n{"step":1,"action":["pull",99],"observation":[null,[]]}\n')
        code, msg = _cli("validate", "consumer-lists", str(wrong), cwd=tmp)
        rows.append({"finding": 5, "probe": "a trace action `[\"pull\", 99]` (`conq validate`)", "result": f"exit {code}: {msg}",
                     "serves_on": None})
        broad = tmp / "broad.ndjson"
        head = {"format": "conq-trace", "version": 1, "kind": "observed", "model": "consumer-lists", "config_name": "reference"}
        broad.write_text(json.dumps(head) + "\n" + "".join('{"step":%d,"action":["deliver"]}\n' % i for i in range(1, 11)))
        for bound in (["--max-states", "3000"], ["--max-memory", "1"], ["--max-seconds", "1"]):
            p = subprocess.run([*CONQ, "validate", "consumer-lists", str(broad), *bound, "--json"], cwd=tmp,
                               capture_output=True, text=True, timeout=CAP * 5)
            doc = json.loads(p.stdout)
            rows.append({"finding": 5, "probe": f"`conq validate` of an observed log of ten hidden steps (reference), `{' '.join(bound)}`",
                         "result": f"exit {p.returncode}: verdict {doc.get('verdict')}, stopped by {doc.get('stopped_by')!r}, "
                                   f"{doc.get('states_explored')} states", "serves_on": None})
        rows.append(_sigterm(["upstream", "rocketmq-python", "--workload", "model-push-fifo", "--seeds", "50", "--out",
                              str(tmp / "up2"), "--json"], "seed 0:", cwd=tmp))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = server_probes() + cli_probes()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| finding | probe | what the client or user got | server serves on |")
    print("|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["finding"]):
        on = "" if r["serves_on"] is None else ("yes" if r["serves_on"] else "**no**")
        print(f"| {r['finding']} | {r['probe']} | {r['result'].replace('|', '/')} | {on} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
