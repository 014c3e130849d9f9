"""The face's auto-renew, as the RocketMQ proxy does it (``grpc_front.py``, "Auto-renew").

The broker runs on a ``ManualClock`` and the renewal scan is called by hand (``renew_due``; the
renewal thread's period is an hour, so it never scans on its own): every verdict is a state of the
broker or a count, never a duration.  The upstream client sends ``auto_renew = true`` and no invisible
time on a push consumer's receive and never renews itself, so the renewal, if any, is the server's.
"""

from __future__ import annotations

import grpc
import pytest

pytest.importorskip("rocketmq.grpc_protocol")

from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub  # noqa: E402

from conq.impl.ordered_consumption import Broker, RetryPolicy  # noqa: E402
from conq.impl.ordered_consumption.clock import ManualClock  # noqa: E402
from conq.impl.ordered_consumption.grpc_front import GrpcFront  # noqa: E402

MD = (("x-mq-client-id", "client-1"),)


@pytest.fixture
def renewing():
    clock = ManualClock()
    broker = Broker(clock=clock).start()
    broker.create_topic("T", 1)
    broker.create_consumer_group("G", retry_policy=RetryPolicy(3, durations=(7.0,)))
    front = GrpcFront(broker, renew=True, renew_period=3600.0, auto_renew_invisible=4.0, renew_ahead=1.0,
                      renew_max=20.0).start()
    channel = grpc.insecure_channel(front.endpoint)
    stub = MessagingServiceStub(channel)
    try:
        for i in range(2):
            m = pb.Message(topic=pb.Resource(name="T"), body=f"b{i}".encode())
            m.system_properties.message_id = f"ID-{i}"
            m.system_properties.message_type = pb.NORMAL
            assert stub.SendMessage(spb.SendMessageRequest(messages=[m]), metadata=MD, timeout=5).status.code == pb.OK
        yield clock, broker, front, stub
    finally:
        channel.close()
        front.stop()
        broker.stop()


def _auto_renew_receive(stub):
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="G"),
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=0),
                                    batch_size=8, auto_renew=True)
    res = list(stub.ReceiveMessage(req, metadata=MD, timeout=5))
    return [r.message for r in res if r.HasField("message")]


def _ack(stub, m):
    req = spb.AckMessageRequest(group=pb.Resource(name="G"), topic=pb.Resource(name="T"),
                                entries=[spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                                            receipt_handle=m.system_properties.receipt_handle)])
    return stub.AckMessage(req, metadata=MD, timeout=5).entries[0].status.code


def _state(broker, m):
    core_id = m.system_properties.receipt_handle.split("|")[0]
    return broker.message_state("G", core_id)


def test_a_held_delivery_is_renewed_and_settled_with_the_handle_the_client_was_given(renewing):
    clock, broker, front, stub = renewing
    a, b = _auto_renew_receive(stub)
    assert front.renew_due() == 0  # 4 s left, renewed only within the last 1 s
    for _ in range(5):  # 5 x 3.5 s = 17.5 s held, far beyond the 4 s invisible time
        clock.advance(3.5)
        assert front.renew_due() == 2
        assert _state(broker, a)["state"] == "invisible" and _state(broker, a)["attempt"] == 1
    # the client acks with its original handle; the face settles with the latest one
    assert _ack(stub, a) == pb.OK
    assert _state(broker, a)["state"] == "acked"
    # renew_max (20 s since the receive): the proxy stops renewing and hands b back with the retry
    # policy's delay (7 s), after which it is delivered again with attempt 2
    clock.advance(3.5)
    assert front.renew_due() == 0 and front.renewal_counts["stopped"] == 1
    assert _ack(stub, b) == pb.INVALID_RECEIPT_HANDLE  # its delivery was handed back
    clock.advance(7.0)
    again = _auto_renew_receive(stub)
    assert [m.system_properties.delivery_attempt for m in again] == [2]
    assert front.renewal_counts == {"renewed": 10, "refused": 0, "stopped": 1, "cleared": 0}


def test_without_renew_the_invisible_time_runs_out_mid_consumption():
    clock = ManualClock()
    broker = Broker(clock=clock).start()
    broker.create_topic("T", 1)
    broker.create_consumer_group("G")
    front = GrpcFront(broker, auto_renew_invisible=4.0).start()
    channel = grpc.insecure_channel(front.endpoint)
    try:
        stub = MessagingServiceStub(channel)
        m = pb.Message(topic=pb.Resource(name="T"), body=b"x")
        m.system_properties.message_id = "ID-0"
        m.system_properties.message_type = pb.NORMAL
        stub.SendMessage(spb.SendMessageRequest(messages=[m]), metadata=MD, timeout=5)
        (got,) = _auto_renew_receive(stub)
        assert front.renew_due() == 0
        clock.advance(4.5)
        assert _ack(stub, got) == pb.INVALID_RECEIPT_HANDLE
        assert _state(broker, got)["state"] == "ready"
    finally:
        channel.close()
        front.stop()
        broker.stop()


def test_a_terminating_client_gets_its_held_messages_back_soon(renewing):
    clock, broker, front, stub = renewing
    a, b = _auto_renew_receive(stub)
    assert _ack(stub, a) == pb.OK
    req = spb.NotifyClientTerminationRequest(group=pb.Resource(name="G"))
    assert stub.NotifyClientTermination(req, metadata=MD, timeout=5).status.code == pb.OK
    assert front.renewal_counts["cleared"] == 1
    clock.advance(1.0)  # invisible_when_clear
    assert _state(broker, b)["state"] == "ready"
