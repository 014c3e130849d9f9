"""``conq explore`` as a user starts it: a URL on 127.0.0.1, the model's answers, a refused port,
and a clean stop on SIGTERM (nothing left running)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

CONQ = [sys.executable, "-m", "conq"]


def test_explore_serves_on_loopback_and_stops_cleanly():
    proc = subprocess.Popen([*CONQ, "explore", "consumer-lists", "--config", "upstream-flag-order", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/"), (url, proc.stderr.read() if proc.poll() else "")
        about = json.loads(urllib.request.urlopen(url + "api/model", timeout=30).read())
        assert about["model"] == "consumer-lists" and about["config"] == "upstream-flag-order"
        state = json.loads(urllib.request.urlopen(url + "api/state/0", timeout=30).read())
        assert any(a["label"] == "enqueue(0)" for a in state["actions"])
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(url + "api/state/999999", timeout=30)
        assert bad.value.code == 404 and "no state 999999" in json.loads(bad.value.read())["error"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0


def test_a_taken_port_is_a_usage_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run([*CONQ, "explore", "consumer-lists", "--port", str(port)], capture_output=True, text=True,
                             timeout=120)
    assert res.returncode == 2 and f"--port {port}: cannot listen" in res.stderr
