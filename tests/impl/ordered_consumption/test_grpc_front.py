"""The gRPC face of the broker (issue 19), RPC by RPC, through the stubs the upstream client ships.

Each test talks to ``GrpcFront`` with ``rocketmq.grpc_protocol``'s own ``MessagingServiceStub`` (the
protobufs the real client sends), so what is checked is the translation: routes, sends, receives,
receipt handles, settles, settings, assignment, transport answers.  The real client end to end is
tested in ``tests/conformance/ordered_consumption/upstream``.  The autouse ``no_thread_left`` fixture of this
folder proves ``stop()`` leaves no thread behind.
"""

from __future__ import annotations

import threading

import grpc
import pytest

pytest.importorskip("rocketmq.grpc_protocol")

from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub  # noqa: E402

from conq.impl.ordered_consumption import Broker, FaultPlan, MessageType, RetryPolicy  # noqa: E402
from conq.impl.ordered_consumption.grpc_front import GrpcFront  # noqa: E402

MD = (("x-mq-client-id", "client-1"),)


@pytest.fixture
def face():
    broker = Broker().start()
    broker.create_topic("T", 2)
    broker.create_topic("F", 3, message_type=MessageType.FIFO)
    broker.create_consumer_group("G", max_attempts=3, retry_policy=RetryPolicy(3, durations=(0.0, 2.0)))
    broker.create_consumer_group("GF", fifo=True, max_attempts=2)
    front = GrpcFront(broker).start()
    channel = grpc.insecure_channel(front.endpoint)
    try:
        yield broker, front, MessagingServiceStub(channel)
    finally:
        channel.close()
        front.stop()
        broker.stop()


def _send(stub, topic, body, mid, group=None, mtype=pb.NORMAL):
    m = pb.Message(topic=pb.Resource(name=topic), body=body.encode())
    m.system_properties.message_id = mid
    m.system_properties.message_type = mtype
    if group:
        m.system_properties.message_group = group
    return stub.SendMessage(spb.SendMessageRequest(messages=[m]), metadata=MD, timeout=5)


def _receive(stub, group, topic, qid, batch=8, invisible_s=30):
    req = spb.ReceiveMessageRequest(group=pb.Resource(name=group),
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=qid),
                                    batch_size=batch)
    req.invisible_duration.seconds = invisible_s
    res = list(stub.ReceiveMessage(req, metadata=MD, timeout=5))
    status = next(r.status for r in res if r.HasField("status"))
    return status, [r.message for r in res if r.HasField("message")]


def test_route_points_every_queue_at_the_face(face):
    broker, front, stub = face
    res = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="F")), metadata=MD, timeout=5)
    assert res.status.code == pb.OK
    assert [q.id for q in res.message_queues] == [0, 1, 2]
    for q in res.message_queues:
        assert q.permission == pb.READ_WRITE and list(q.accept_message_types) == [pb.FIFO]
        assert q.broker.id == 0  # the client keeps master queues only
        assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [("127.0.0.1", front.port)]
    missing = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="nope")), metadata=MD, timeout=5)
    assert missing.status.code == pb.TOPIC_NOT_FOUND


def test_send_receive_ack_round_trip_keeps_the_client_message_id(face):
    broker, front, stub = face
    ids = [f"ID-{i}" for i in range(4)]
    for i, mid in enumerate(ids):
        res = _send(stub, "T", f"b{i}", mid)
        assert res.status.code == pb.OK and res.entries[0].message_id == mid
    got = []
    for qid in (0, 1):  # round-robin: two per queue
        status, msgs = _receive(stub, "G", "T", qid)
        assert status.code == pb.OK and len(msgs) == 2
        got += msgs
    assert sorted(m.system_properties.message_id for m in got) == ids
    assert {m.system_properties.delivery_attempt for m in got} == {1}
    for m in got:
        res = stub.AckMessage(spb.AckMessageRequest(
            group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
            entries=[spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                         receipt_handle=m.system_properties.receipt_handle)]), metadata=MD, timeout=5)
        assert res.status.code == pb.OK
    assert broker.group_stats("G", "T")["acked"] == 4
    # acking again with the same handle: the message is settled, the handle invalid
    again = stub.AckMessage(spb.AckMessageRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
        entries=[spb.AckMessageEntry(message_id=got[0].system_properties.message_id,
                                     receipt_handle=got[0].system_properties.receipt_handle)]), metadata=MD, timeout=5)
    assert again.status.code == pb.INVALID_RECEIPT_HANDLE
    # an empty queue answers MESSAGE_NOT_FOUND (no long poll asked)
    status, msgs = _receive(stub, "G", "T", 0)
    assert status.code == pb.MESSAGE_NOT_FOUND and msgs == []


def test_fifo_send_goes_to_the_group_queue_and_the_gate_holds(face):
    broker, front, stub = face
    for i in range(3):
        assert _send(stub, "F", f"a{i}", f"A{i}", group="ga", mtype=pb.FIFO).status.code == pb.OK
    queues = set()
    for qid in (0, 1, 2):
        status, msgs = _receive(stub, "GF", "F", qid)
        queues |= {m.system_properties.queue_id for m in msgs}
        if msgs:
            # the gate: only the group's head, although three are stored
            assert [m.body for m in msgs] == [b"a0"]
            assert msgs[0].system_properties.message_group == "ga"
    assert len(queues) == 1  # one message group, one queue
    # a FIFO message without a group is refused by the broker core
    assert _send(stub, "F", "x", "X", mtype=pb.FIFO).entries[0].status.code == pb.ILLEGAL_MESSAGE_GROUP
    # a type the topic does not accept
    assert _send(stub, "T", "x", "Y", group="g", mtype=pb.FIFO).status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_change_invisible_gives_a_new_handle_and_dlq_settles(face):
    broker, front, stub = face
    _send(stub, "T", "b", "M1")
    msgs = []
    for qid in (0, 1):
        msgs += _receive(stub, "G", "T", qid)[1]
    (m,) = msgs
    old = m.system_properties.receipt_handle
    req = spb.ChangeInvisibleDurationRequest(group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                                             receipt_handle=old, message_id="M1")
    req.invisible_duration.seconds = 0
    res = stub.ChangeInvisibleDuration(req, metadata=MD, timeout=5)
    assert res.status.code == pb.OK and res.receipt_handle and res.receipt_handle != old
    # invisible time 0: delivered again at once, attempt 2, under a third handle
    again = _receive(stub, "G", "T", m.system_properties.queue_id)[1]
    assert [x.system_properties.delivery_attempt for x in again] == [2]
    stale = stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name="T"), receipt_handle=res.receipt_handle,
        message_id="M1"), metadata=MD, timeout=5)
    assert stale.status.code == pb.INVALID_RECEIPT_HANDLE
    ok = stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
        receipt_handle=again[0].system_properties.receipt_handle, message_id="M1", delivery_attempt=2,
        max_delivery_attempts=3), metadata=MD, timeout=5)
    assert ok.status.code == pb.OK
    assert [(d.body, d.by) for d in broker.dead_letters("G", "T")] == [(b"b", "client")]
    # the client's quirk of sending an empty handle (after a failed change-invisible) is answered plainly
    empty = stub.AckMessage(spb.AckMessageRequest(group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                                                  entries=[spb.AckMessageEntry(message_id="M1", receipt_handle="")]),
                            metadata=MD, timeout=5)
    assert empty.status.code == pb.INVALID_RECEIPT_HANDLE


def test_telemetry_answers_the_group_settings_and_registers_the_consumer(face):
    broker, front, stub = face
    s = pb.Settings(client_type=pb.PUSH_CONSUMER)
    s.subscription.group.name = "G"
    answers = list(stub.Telemetry(iter([spb.TelemetryCommand(settings=s)]), metadata=MD, timeout=5))
    assert len(answers) == 1 and answers[0].status.code == pb.OK
    got = answers[0].settings
    assert got.subscription.fifo is False and got.subscription.long_polling_timeout.seconds == front.long_polling
    assert got.backoff_policy.max_attempts == 3
    assert [d.seconds for d in got.backoff_policy.customized_backoff.next] == [0, 2]
    # registered: an exclusive assignment now gives this client the readable queues
    res = stub.QueryAssignment(spb.QueryAssignmentRequest(topic=pb.Resource(name="T"), group=pb.Resource(name="G")),
                               metadata=MD, timeout=5)
    assert res.status.code == pb.OK and sorted(a.message_queue.id for a in res.assignments) == [0, 1]
    fifo = pb.Settings(client_type=pb.PUSH_CONSUMER)
    fifo.subscription.group.name = "GF"
    (ans,) = list(stub.Telemetry(iter([spb.TelemetryCommand(settings=fifo)]), metadata=MD, timeout=5))
    assert ans.settings.subscription.fifo is True and ans.settings.backoff_policy.max_attempts == 2
    stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(group=pb.Resource(name="G")), metadata=MD,
                                 timeout=5)
    res = stub.QueryAssignment(spb.QueryAssignmentRequest(topic=pb.Resource(name="T"), group=pb.Resource(name="G")),
                               metadata=MD, timeout=5)
    assert list(res.assignments) == []  # unregistered: nothing assigned


def test_transport_answers_and_long_poll_cancelled_by_stop():
    broker = Broker().start()
    broker.create_topic("T", 1)
    broker.create_consumer_group("G")
    plan = FaultPlan(seed=1, rates={"query_route": {"unavailable": 1.0}, "send_message": {"timeout": 1.0}})
    front = GrpcFront(broker, plan=plan).start()
    channel = grpc.insecure_channel(front.endpoint)
    stub = MessagingServiceStub(channel)
    try:
        with pytest.raises(grpc.RpcError) as e:
            stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")), metadata=MD, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.RpcError) as e:
            _send(stub, "T", "b", "M")
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert front.channel.answers[("send_message", "timeout")] == 1
        # a long poll in progress is released by stop() (its call is cancelled)
        req = spb.ReceiveMessageRequest(group=pb.Resource(name="G"),
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=0), batch_size=1)
        req.invisible_duration.seconds = 10
        req.long_polling_timeout.seconds = 60
        box = {}

        def poll():
            try:
                box["res"] = list(stub.ReceiveMessage(req, metadata=MD, timeout=30))
            except grpc.RpcError as err:
                box["code"] = err.code()

        t = threading.Thread(target=poll)
        t.start()
        deadline = threading.Event()
        while not front.channel.requests["receive_message"]:
            deadline.wait(0.005)
        front.stop()
        t.join(30)
        assert not t.is_alive(), "the long poll outlived stop()"
        assert box.get("code") in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    finally:
        channel.close()
        front.stop()
        broker.stop()


def test_stopped_broker_is_unavailable_and_the_face_restarts_cleanly():
    broker = Broker()
    broker.create_topic("T", 1)
    with GrpcFront(broker) as front:
        with grpc.insecure_channel(front.endpoint) as ch:
            with pytest.raises(grpc.RpcError) as e:
                MessagingServiceStub(ch).QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")), timeout=5)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE  # the broker was never started
    assert front.port is not None
    with pytest.raises(ValueError):
        GrpcFront(broker, host="0.0.0.0")
