"""Fault injection against the broker's two network faces (issue 33: a server survives any client).

Each test plays a hostile client on 127.0.0.1 (malformed and oversized requests, a client that never
reads its answers, more long polls than the pool has threads, administration without the right, ...)
and then checks that the server answered it as documented and still serves a well-behaved client.
Verdicts are counts and events (answers, refusals and disconnections counted by the server); every
wait is a safety cap that fails loudly, never a measure.  The sizes are small on purpose: the bounds
are set low (``Limits``) so that hitting them costs a few hundred kilobytes, not the defaults' tens
of megabytes."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from conq.impl.ordered_consumption import Broker, Code, Message, MessageType, RpcError
from conq.impl.ordered_consumption.server import BrokerServer, Limits, ServedBroker, TcpChannel, decode, encode

CAP = 30.0  # seconds: a safety cap for a socket read, only ever reached by a hang


def _connect(served, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connecting: the window the client advertises stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(CAP)
    sock.connect(served.address)
    return sock


def _answers(f, n: int) -> list[dict]:
    return [json.loads(f.readline()) for _ in range(n)]


def _route(ch: TcpChannel, topic: str = "T") -> int:
    return len(ch.query_route(topic))


# ============================================================================ finding 1: one line, one answer
_MQ = encode(Message("T", b"x")), {"$": "MessageQueue", "f": {"topic": "T", "queue_id": "0"}}
HOSTILE = [  # (line, id of the answer, the field its message starts with)
    (b'{"id":1,"rpc":[]}', 1, "rpc"),
    (b'{"id":[1],"rpc":"query_route","args":["t"]}', None, "id"),
    (b'{"cancel":{}}', None, "cancel"),
    (b"[" * 200_000 + b"]" * 200_000, None, "request"),
    (b'{"id":2,"rpc":"query_route","kwargs":[]}', 2, "kwargs"),
    (b'{"id":3,"rpc":"query_route","args":"T"}', 3, "args"),
    (b'{"id":4,"rpc":"query_route","args":[NaN]}', None, "request"),
    (b'{"id":5,"rpc":"query_route","args":[1e999]}', None, "request"),
    (b'{"id":6,"rpc":"query_route","args":["T"],"sudo":true}', None, "request"),
    (b'{"id":7,"rpc":"query_route","args":[' + b"[" * 100 + b"]" * 100 + b"]}", 7, "args[0]"),
    (b'{"id":8,"rpc":"send_message","args":[' + json.dumps(_MQ[1]).encode() + b"," + json.dumps(_MQ[0]).encode()
     + b',{"$e":"MessageType","v":"NORMAL"}]}', 8, "args[0].queue_id"),
    (b'{"id":9,"rpc":"receive_message","args":["G",{"$":"MessageQueue","f":{"topic":"T","queue_id":0}},"x",1]}', 9,
     "args[2]"),
    (b'{"id":10,"rpc":"query_route","args":["T"],"kwargs":{"topic":"T"}}', 10, "args"),
    (b'{"id":11,"rpc":"query_route","args":[{"$b":7}]}', 11, "args[0]"),
    (b'{"id":12,"rpc":"create_topic","args":["X",1]}', 12, "rpc"),  # administration is off
    (b"\xff\xfe not utf-8", None, "request"),
]


def test_every_hostile_line_is_answered_naming_the_field_and_the_server_serves_on(wait_until):
    with ServedBroker(admin=False) as served:
        served.broker.create_topic("T", 2)
        with _connect(served) as sock, TcpChannel(served.address) as other:
            f = sock.makefile("rwb")
            for line, _, _ in HOSTILE:
                f.write(line + b"\n")
            f.write(b'{"id":99,"rpc":"query_route","args":["T"]}\n')  # the same connection still works
            f.flush()
            got = _answers(f, len(HOSTILE) + 1)
            assert _route(other) == 2  # and so do the others
        for (line, rid, field), answer in zip(HOSTILE, got):
            assert answer["id"] == rid, (line[:60], answer)
            assert answer["error"]["message"].split(":", 1)[0].startswith(field), (line[:60], answer)
            assert answer["error"]["code"] == ("FORBIDDEN" if b"create_topic" in line else "BAD_REQUEST")
        assert got[-1]["id"] == 99 and len(decode(got[-1]["result"])) == 2
        assert sum(served.server.refused.values()) == len(HOSTILE)
        assert served.server.failure is None and not served.server.done.is_set()


def test_a_server_whose_loop_dies_says_why_and_stops_listening():
    broker = Broker().start()
    server = BrokerServer(broker).start()
    try:
        def boom(*_a, **_k):
            raise OSError("injected: the selector failed")

        server._sel.select = boom  # the next turn of the loop fails
        socket.create_connection(server.address, timeout=CAP).close()  # wake the loop
        assert server.wait(CAP), "the I/O loop did not end"
        assert isinstance(server.failure, OSError) and "injected" in str(server.failure)
        with pytest.raises(OSError):
            socket.create_connection(server.address, timeout=CAP).close()  # nobody listens any more
    finally:
        server.stop()
        broker.stop()


# ============================================================================ finding 2: a client that never reads
def _flood(sock: socket.socket, n: int, topic: str = "W") -> None:
    line = json.dumps({"rpc": "query_route", "args": [topic]})
    try:
        sock.sendall(b"".join(b'{"id":%d,%s\n' % (i, line[1:].encode()) for i in range(n)))
    except OSError:
        pass  # disconnected meanwhile: what the test expects of the small bound


def test_a_client_that_never_reads_does_not_hold_up_the_others(wait_until):
    # 1,000 answers of a 64-queue route are about 11 MB: more than loopback's socket buffers hold, so
    # the server must queue them; the bound is above that, so the client stays connected
    with ServedBroker(admin=False, limits=Limits(max_output=32 << 20)) as served:
        served.broker.create_topic("W", 64)
        with _connect(served, rcvbuf=4096) as sleeper, TcpChannel(served.address, request_timeout=CAP) as other:
            _flood(sleeper, 1000)
            wait_until(lambda: served.server.requests["query_route"] == 1000, "every request of the sleeper read")
            assert _route(other, "W") == 64  # answered while the sleeper's answers wait
            assert served.server.disconnects == {} and served.server.requests["query_route"] == 1001


def test_a_client_over_its_output_bound_is_disconnected_with_the_reason(wait_until, caplog):
    with ServedBroker(admin=False, limits=Limits(max_output=64 << 10)) as served:
        served.broker.create_topic("W", 64)
        with _connect(served, rcvbuf=4096) as sleeper, TcpChannel(served.address, request_timeout=CAP) as other:
            _flood(sleeper, 2000)
            wait_until(lambda: served.server.disconnects["output"] == 1, "the sleeper disconnected")
            assert _route(other, "W") == 64
        assert any("does not read them" in r.getMessage() for r in caplog.records)
        assert served.server.disconnects == {"output": 1}


# ============================================================================ finding 3: bounds and rights
def test_administration_has_size_bounds():
    limits = Limits(max_topics=2, max_queues=8)
    with ServedBroker(admin=True, limits=limits) as served, served.channel() as ch:
        with pytest.raises(RpcError) as info:
            ch.admin("create_topic", "big", 200_000)
        assert info.value.code is Code.BAD_REQUEST and info.value.message.startswith("queues:")
        with pytest.raises(RpcError) as info:
            ch.admin("create_topic", "x" * 300, 1)
        assert info.value.message.startswith("name:")
        ch.admin("create_topic", "A", 8)
        ch.admin("create_topic", "B", 1)
        with pytest.raises(RpcError) as info:
            ch.admin("create_topic", "C", 1)
        assert info.value.code is Code.FORBIDDEN and info.value.message.startswith("topics:")
        with pytest.raises(RpcError) as info:
            ch.query_route("big")
        assert info.value.code is Code.TOPIC_NOT_FOUND  # nothing of the refused calls was built
        assert served.server.refused == {"queues": 1, "name": 1, "topics": 1}


def test_buffered_bytes_and_line_length_are_bounded(wait_until):
    limits = Limits(max_line=256 << 10, max_buffered=512 << 10)
    with ServedBroker(admin=False, limits=limits) as served:
        served.broker.create_topic("T", 1)
        socks = [_connect(served) for _ in range(3)]
        try:
            for s in socks:  # unfinished lines, each under the line bound: the third passes the total
                try:
                    s.sendall(b'{"id":1,"rpc":"query_route","args":["' + b"x" * (200 << 10))
                except OSError:
                    pass
            wait_until(lambda: served.server.disconnects["buffered"] == 1, "one client disconnected")
            assert served.server.buffered <= limits.max_buffered
        finally:
            for s in socks:
                s.close()
        wait_until(lambda: served.server.buffered == 0, "the clients' buffers released")
        with _connect(served) as long_line:
            try:
                long_line.sendall(b"y" * (300 << 10))
            except OSError:
                pass
            wait_until(lambda: served.server.disconnects["line"] == 1, "the long line's client disconnected")
        with TcpChannel(served.address, request_timeout=CAP) as other:
            assert _route(other) == 1
        assert served.server.disconnects == {"buffered": 1, "line": 1}


def test_long_polls_are_bounded_and_do_not_hold_up_other_requests(wait_until):
    with ServedBroker(admin=False, limits=Limits(max_long_polls=4)) as served:
        (mq,) = served.broker.create_topic("T", 1)
        served.broker.create_consumer_group("G")
        ch = served.channel(request_timeout=CAP)
        outcomes: list = []
        lock = threading.Lock()

        def poll():
            try:
                r = ch.receive_message("G", mq, 1, 30.0, 3600.0)
            except RpcError as e:
                r = e
            with lock:
                outcomes.append(r)

        threads = [threading.Thread(target=poll) for _ in range(10)]
        for t in threads:
            t.start()
        wait_until(lambda: len(outcomes) == 6, "six polls refused")
        refused = [o for o in outcomes if isinstance(o, RpcError)]
        assert len(refused) == 6 and all(e.code is Code.TOO_MANY_REQUESTS and e.backoff > 0 for e in refused)
        assert served.server.workers == 4 and served.server.refused["rpc"] == 6
        with served.channel(request_timeout=CAP) as other:
            assert _route(other) == 1  # answered while four long polls wait
        served.broker.send_message(mq, Message("T", b"x"), MessageType.NORMAL)  # one poll takes it
        wait_until(lambda: len(outcomes) == 7, "one poll answered")
        ch.close()  # the three others end with the connection
        for t in threads:
            t.join(CAP)
        assert sum(isinstance(o, list) and len(o) == 1 for o in outcomes) == 1
        assert served.server.workers == 4


def test_stored_messages_are_bounded(broker_server_factory):
    served = broker_server_factory(max_messages=3)
    (mq,) = served.broker.create_topic("T", 1)
    ch = served.channel()
    for i in range(3):
        ch.send_message(mq, Message("T", b"%d" % i), MessageType.NORMAL)
    with pytest.raises(RpcError) as info:
        ch.send_message(mq, Message("T", b"3"), MessageType.NORMAL)
    assert info.value.code is Code.INTERNAL_SERVER_ERROR and "store full" in info.value.message


def test_a_duplicate_request_id_is_refused_and_every_id_answered_once(wait_until):
    with ServedBroker(admin=False) as served:
        served.broker.create_topic("T", 1)
        served.broker.create_consumer_group("G")
        poll = json.dumps({"id": 5, "rpc": "receive_message", "args": [
            "G", encode(served.broker.query_route("T")[0]), 1, 30.0, 3600.0]}).encode() + b"\n"
        with _connect(served) as sock:
            f = sock.makefile("rwb")
            f.write(poll + poll)
            f.flush()
            refusal = json.loads(f.readline())
            assert refusal["id"] is None and refusal["error"]["message"].startswith("id: 5 ")
            f.write(b'{"cancel":5}\n{"id":6,"rpc":"query_route","args":["T"]}\n')
            f.flush()
            answers = _answers(f, 2)
        assert sorted(a["id"] for a in answers) == [5, 6]
        assert next(a for a in answers if a["id"] == 5)["result"] == []  # the cancelled poll, once
        assert served.server.requests["receive_message"] == 1 and served.server.refused["id"] == 1


# ============================================================================ the gRPC face
grpc = pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub  # noqa: E402

from conq.impl.ordered_consumption.grpc_front import GrpcFront  # noqa: E402


@pytest.fixture
def front_factory():
    made = []

    def make(**kw):
        broker = Broker().start()
        broker.create_topic("T", 1)
        broker.create_consumer_group("G")
        front = GrpcFront(broker, **kw).start()
        channel = grpc.insecure_channel(front.endpoint)
        made.append((broker, front, channel))
        return front, MessagingServiceStub(channel)

    yield make
    for broker, front, channel in made:
        channel.close()
        front.stop()
        broker.stop()


def test_grpc_an_ack_of_nothing_and_an_unknown_message_type_are_bad_requests(front_factory):
    front, stub = front_factory()
    res = stub.AckMessage(spb.AckMessageRequest(group=pb.Resource(name="G"), topic=pb.Resource(name="T")), timeout=CAP)
    assert res.status.code == Code.BAD_REQUEST and res.status.message.startswith("entries:")
    m = pb.Message(topic=pb.Resource(name="T"), body=b"x")
    m.system_properties.message_id = "M"
    m.system_properties.message_type = 99
    res = stub.SendMessage(spb.SendMessageRequest(messages=[m]), timeout=CAP)
    assert res.status.code == Code.BAD_REQUEST and "message_type" in res.status.message
    assert stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")), timeout=CAP).status.code == Code.OK


def test_grpc_long_polls_are_bounded_and_do_not_hold_up_query_route(front_factory, wait_until):
    front, stub = front_factory(max_workers=8, max_long_polling=3600.0)
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="G"), batch_size=1,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=0))
    req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 3600
    codes: list = []
    lock = threading.Lock()

    def poll():
        try:
            res = list(stub.ReceiveMessage(req, timeout=120))
            code = next(r.status.code for r in res if r.HasField("status"))
        except grpc.RpcError as e:
            code = e.code()
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=poll) for _ in range(8)]  # as many as the pool has workers
    for t in threads:
        t.start()
    try:
        wait_until(lambda: front.long_polls == 4 and len(codes) == 4, "four polls in flight, four refused")
        assert codes == [Code.TOO_MANY_REQUESTS] * 4 and front.refused["long-polls"] == 4
        res = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")), timeout=CAP)
        assert res.status.code == Code.OK and front.long_polls == 4  # answered while the polls wait
    finally:
        front.stop()  # cancels the polls in flight
        for t in threads:
            t.join(CAP)
