"""The broker behind a real server: newline-delimited JSON over TCP on 127.0.0.1
(``impl/ordered_consumption/server.py``), the client transport ``TcpChannel`` that the producer and
the consumers take in place of the in-process channel, the ``broker_server`` fixture, and
``conq broker serve``.

Every verdict is a count or a state; waits are safety caps that fail loudly (``wait_until``).  The
autouse ``no_thread_left`` fixture proves that starting and stopping leaves no thread behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conq.cli import app
from conq.impl.ordered_consumption import (
    Cancel,
    Code,
    ConsumeResult,
    FaultPlan,
    Message,
    MessageQueue,
    MessageType,
    Permission,
    Producer,
    PushConsumer,
    ReceivedMessage,
    RetryPolicy,
    RpcError,
    SendError,
    SimpleConsumer,
    Transport,
)
from conq.impl.ordered_consumption.server import BrokerServer, ServedBroker, TcpChannel, decode, encode

OK, FAIL = ConsumeResult.SUCCESS, ConsumeResult.FAILURE


# ============================================================================ end to end
@pytest.mark.parametrize("fifo", [True, False], ids=["fifo", "standard"])
def test_producer_and_push_consumer_end_to_end_over_tcp(broker_server_factory, wait_until, fifo):
    groups, per_group, max_attempts = 8, 25, 3
    lock = threading.Lock()
    settled: dict[bytes, str] = {}
    starts: list[bytes] = []
    consumed = defaultdict(int)
    violations: list[str] = []

    def observe(event, group, message_id, attempt, body):  # inside the broker's critical section
        if event in ("acked", "dlq-client", "dlq-server"):
            with lock:
                if body in settled:
                    violations.append(f"{body!r} settled twice")
                settled[body] = event

    served = broker_server_factory(observer=observe)
    served.broker.create_topic("T", 4, message_type=MessageType.FIFO if fifo else MessageType.NORMAL)
    served.broker.create_consumer_group("G", fifo=fifo, retry_policy=RetryPolicy.immediate(max_attempts),
                                        receive_batch_size=8)
    always_fail = {b"g3:7", b"g5:0"}

    def listener(m):
        g, seq = m.body.split(b":")
        with lock:
            starts.append(m.body)
            consumed[m.body] += 1
            if fifo:  # per-group order: every earlier message of the group already settled
                missing = [i for i in range(int(seq)) if g + b":%d" % i not in settled]
                if missing:
                    violations.append(f"{m.body!r} started before {missing[0]} was settled")
        if m.body in always_fail or (int(seq) % 4 == 1 and m.delivery_attempt == 1):
            return FAIL
        return OK

    producer = Producer(served.channel(), client_id="p")
    for seq in range(per_group):
        for g in range(groups):
            producer.send(Message("T", b"g%d:%d" % (g, seq), group=f"g{g}" if fifo else None))
    consumer = PushConsumer(served.channel(), "G", "T", listener, client_id="c", consumption_threads=4,
                            long_polling_timeout=30.0, invisible_duration=60.0, receive_retry_delay=0.0,
                            settle_retry_delay=0.0).start()
    try:
        wait_until(lambda: len(settled) == groups * per_group, "every message settled")
    finally:
        consumer.shutdown()
    stats = served.broker.group_stats("G")
    assert stats["unsettled"] == 0 and violations == []
    dead = {b for b, e in settled.items() if e != "acked"}
    assert dead == always_fail  # dead-lettered exactly those that always fail
    assert {e for b, e in settled.items() if b in always_fail} == {"dlq-client" if fifo else "dlq-server"}
    assert max(consumed.values()) == max_attempts and all(consumed[b] == max_attempts for b in always_fail)
    assert sum(consumed.values()) == len(starts) > groups * per_group  # the failures were re-consumed
    # every request crossed the wire: the server counted what the clients sent
    rpcs = served.server.requests
    assert rpcs["send_message"] == groups * per_group
    assert rpcs["ack_message"] == stats["acked"] == groups * per_group - len(always_fail)
    assert (rpcs["forward_to_dlq"] if fifo else rpcs["change_invisible_duration"]) > 0
    assert rpcs["receive_message"] > 0 and served.server.connections == 2


def test_simple_consumer_over_tcp_one_request_per_call(broker_server, wait_until):
    served = broker_server
    served.broker.create_topic("S", 2)
    served.broker.create_consumer_group("SG", max_attempts=2)
    ch = served.channel()
    sent = [Producer(ch).send(Message("S", b"m%d" % i)) for i in range(4)]
    sc = SimpleConsumer(ch, "SG", "S").start()
    got = sc.receive(8, 30.0) + sc.receive(8, 30.0)  # round-robin over the two queues
    assert sorted(m.message_id for m in got) == sorted(r.message_id for r in sent)
    renewed = sc.change_invisible_duration(got[0], 60.0)
    assert renewed.receipt_handle != got[0].receipt_handle
    with pytest.raises(RpcError) as info:
        sc.ack(got[0])  # the old handle is invalid now: the broker's answer crosses the wire as is
    assert info.value.code is Code.INVALID_RECEIPT_HANDLE and not info.value.retriable
    for m in [renewed, *got[1:]]:
        sc.ack(m)
    assert served.broker.group_stats("SG")["acked"] == 4
    assert ch.requests["receive_message"] == 2 and ch.requests["ack_message"] == 5
    assert ch.requests["change_invisible_duration"] == 1
    sc.close()


# ============================================================================ answers and errors
def test_status_codes_and_the_servers_backoff_cross_the_wire(broker_server):
    served = broker_server
    served.broker.create_topic("T", 1, send_rate=1e-9, send_burst=1.0)  # one token, then throttled
    ch = served.channel()
    with pytest.raises(RpcError) as info:
        ch.query_route("no-such-topic")
    assert info.value.code is Code.TOPIC_NOT_FOUND
    (mq,) = ch.query_route("T")
    assert mq == MessageQueue("T", 0, "broker-0", Permission.READ_WRITE, frozenset({MessageType.NORMAL}))
    ch.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
    with pytest.raises(RpcError) as info:
        ch.send_message(mq, Message("T", b"y"), MessageType.NORMAL)
    assert info.value.throttled and info.value.backoff > 0
    with pytest.raises(RpcError) as info:
        ch.ack_message("G", "T", None, "not-a-handle")
    assert info.value.code is Code.INVALID_RECEIPT_HANDLE


def test_malformed_and_unknown_requests_are_bad_requests(broker_server):
    served = broker_server
    served.broker.create_topic("T", 2)
    with socket.create_connection(served.address, timeout=30) as sock:
        f = sock.makefile("rwb")
        for line in (b"not json", b'{"id": 1, "rpc": "shutdown_the_world"}',
                     b'{"id": 2, "rpc": "query_route", "args": [{"$": "Popen", "f": {"args": "ls"}}]}',
                     b'{"id": 3, "rpc": "query_route", "args": ["T", "extra"]}'):
            f.write(line + b"\n")
        f.flush()
        answers = [json.loads(f.readline()) for _ in range(4)]
        # only the protocol's own types are ever built from the wire
        assert sorted((a["id"] is None, a["error"]["code"]) for a in answers) == \
            [(False, "BAD_REQUEST")] * 3 + [(True, "BAD_REQUEST")]
        f.write(b'{"id": 4, "rpc": "query_route", "args": ["T"]}\n')  # the connection survived
        f.flush()
        assert decode(json.loads(f.readline())["result"]) == served.broker.query_route("T")
    with pytest.raises(ValueError, match="unknown type"):
        decode({"$": "Popen", "f": {}})
    with pytest.raises(TypeError):
        encode(object())


def test_administration_is_off_unless_asked_for(broker_server):
    with BrokerServer(broker_server.broker) as server, TcpChannel(server.address) as ch:
        with pytest.raises(RpcError) as info:
            ch.admin("create_topic", "T", 1)
        assert info.value.code is Code.FORBIDDEN and "--admin" in info.value.message
        assert server.requests["create_topic"] == 0 and server.refused["rpc"] == 1


def test_server_side_fault_injection(broker_server_factory):
    served = broker_server_factory(faults=FaultPlan(1, {"send_message": {"unavailable": 1.0}}))
    served.broker.create_topic("T", 2)
    ch = served.channel()
    with pytest.raises(SendError) as info:
        Producer(ch, max_attempts=3).send(Message("T", b"x"))
    assert info.value.attempts == 3 and info.value.cause.code is Transport.UNAVAILABLE
    assert served.server.target.answers[("send_message", "unavailable")] == 3


# ============================================================================ cancellation, stop
def test_a_cancelled_long_poll_returns_nothing_and_ends_at_the_server(broker_server, wait_until):
    served = broker_server
    (mq,) = served.broker.create_topic("T", 1)
    served.broker.create_consumer_group("G")
    ch = served.channel()
    cancel = Cancel("poll")
    box = {}
    t = threading.Thread(target=lambda: box.update(got=ch.receive_message("G", mq, 4, 30.0, 3600.0, cancel)))
    t.start()
    wait_until(lambda: served.server.requests["receive_message"] == 1, "the long poll reached the server")
    cancel.cancel()
    t.join(30)
    assert not t.is_alive() and box["got"] == []
    # a message sent afterwards was not taken by the cancelled poll
    served.broker.send_message(mq, Message("T", b"x"), MessageType.NORMAL)
    assert served.broker.group_stats("G")["ready"] == 1
    assert ch.receive_message("G", mq, 4, 30.0, 0.0, Cancel("already")) != []  # fresh token: taken


def test_stopping_the_server_fails_calls_in_flight_unavailable_and_leaves_nothing_running(
        broker_server_factory, wait_until):
    served = broker_server_factory()
    (mq,) = served.broker.create_topic("T", 1)
    served.broker.create_consumer_group("G")
    ch = served.channel()
    box = {}

    def poll():
        try:
            ch.receive_message("G", mq, 4, 30.0, 3600.0)
        except RpcError as e:
            box["error"] = e

    t = threading.Thread(target=poll)
    t.start()
    wait_until(lambda: served.server.requests["receive_message"] == 1, "the long poll reached the server")
    served.server.stop()
    t.join(30)
    assert not t.is_alive() and box["error"].code is Transport.UNAVAILABLE and box["error"].retriable
    with pytest.raises(RpcError) as info:
        ch.query_route("T")  # reconnecting fails: nobody listens
    assert info.value.code is Transport.UNAVAILABLE


def test_a_served_broker_starts_on_an_ephemeral_loopback_port_and_stops_leaving_nothing_behind():
    before = set(threading.enumerate())
    served = ServedBroker()
    host, port = served.address
    assert host == "127.0.0.1" and port > 0
    ch = served.channel()
    ch.admin("create_topic", "T", 1)
    assert len(ch.query_route("T")) == 1
    running = {t.name for t in set(threading.enumerate()) - before}
    assert any(n.startswith("oc-server-io") for n in running) and any(n.startswith("oc-tcp-reader") for n in running)
    served.close()
    assert set(threading.enumerate()) <= before  # joined, not merely told to stop
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=30).close()


# ============================================================================ codec
_text = st.text(max_size=8)
_mq = st.builds(MessageQueue, _text, st.integers(0, 64), _text, st.sampled_from(Permission),
                st.frozensets(st.sampled_from(MessageType)))


@settings(max_examples=40)  # a count, not a time budget
@given(st.builds(ReceivedMessage, _text, _text, st.binary(max_size=16), _mq, st.integers(0, 2**40),
                 st.integers(0, 20), _text, st.none() | _text, st.tuples(_text), st.none() | _text,
                 st.tuples(st.tuples(_text, _text))))
def test_wire_codec_round_trips_protocol_values(m):
    assert decode(encode(m)) == m
    assert decode(encode([m, (m.queue,), {"k": m.body}])) == [m, (m.queue,), {"k": m.body}]


# ============================================================================ conq broker serve
runner = CliRunner()


@pytest.mark.parametrize("args, needle", [
    (["--port", "70000"], "--port"),
    (["--host", "0.0.0.0"], "loopback"),
    (["--faults", "send_message:exploded=0.5"], "exploded"),
    (["--faults", "nonsense"], "--faults"),
    (["--topic", "T:many"], "--topic"),
    (["--group", "G:sometimes"], "--group"),
])
def test_broker_serve_bad_flags_exit_2(args, needle):
    res = runner.invoke(app, ["broker", "serve", *args])
    assert res.exit_code == 2 and needle in res.output, res.output


@pytest.mark.parametrize("admin", [True, False], ids=["admin", "no-admin"])
def test_broker_serve_prints_its_address_serves_and_stops_on_sigterm(admin):
    proc = subprocess.Popen(
        [sys.executable, "-m", "conq", "broker", "serve", "--port", "0", "--seed", "3", "--topic", "T:2:fifo",
         "--group", "G:fifo:3", *(["--admin"] if admin else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
        address = line.split()[-1]
        with TcpChannel(address) as ch:
            route = ch.query_route("T")
            assert len(route) == 2 and ch.query_settings("G").fifo
            receipt = Producer(ch).send(Message("T", b"x", group="g"))
            if admin:
                assert ch.admin("message_state", "G", receipt.message_id)["state"] == "ready"
            else:
                with pytest.raises(RpcError) as info:  # administration is off unless --admin
                    ch.admin("message_state", "G", receipt.message_id)
                assert info.value.code is Code.FORBIDDEN and "--admin" in info.value.message
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopped" in err


_DYING_SELECTOR = """
import selectors, sys, types
from conq.impl.ordered_consumption import server

class Dying(selectors.DefaultSelector):
    turns = 0

    def select(self, timeout=None):
        Dying.turns += 1
        if Dying.turns > 1:  # the first turn serves the connection that wakes it; the next one fails
            raise OSError("injected: the selector failed")
        return super().select(timeout)

server.selectors = types.SimpleNamespace(**{k: getattr(selectors, k) for k in dir(selectors) if k.isupper()},
                                         BaseSelector=selectors.BaseSelector, DefaultSelector=Dying)
from conq.cli import app
sys.argv = ["conq", "broker", "serve", "--json"]
app()
"""


def test_broker_serve_exits_3_with_the_reason_when_its_loop_dies():
    # issue 33: the loop died, the listener closed, and the process went on "serving" until SIGTERM, exit 0
    proc = subprocess.Popen([sys.executable, "-c", _DYING_SELECTOR], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stderr.readline()  # under --json the address goes to stderr
        assert "listening on 127.0.0.1:" in line, line
        socket.create_connection(("127.0.0.1", int(line.split(":")[-1])), timeout=30).close()
        out, err = proc.communicate(timeout=60)  # a safety cap: the command ends by itself
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    doc = json.loads(out)
    assert proc.returncode == 3 and doc["exit_code"] == 3 and doc["error"]["kind"] == "internal", (out, err)
    assert "I/O loop died" in doc["error"]["message"] and "injected" in doc["error"]["message"]
