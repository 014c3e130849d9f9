"""A network face for the broker core: newline-delimited JSON over TCP, and the client transport.

What it is
----------
The broker core (``broker.Broker``) knows nothing about transports (issue 14: "keep its core
independent of the transport: a later step may put the real RocketMQ 5 gRPC API in front of it").
This module is one such front, small and dependency-free, so that the thin client can talk to a
broker that runs in another thread or another process (``conq broker serve``):

* ``BrokerServer(broker, port=0)`` listens on the loopback interface (port 0: an ephemeral port;
  ``address`` is the bound one) and answers every RPC of the messaging API (``faults.RPCS``) by
  calling the same method of the broker -- or of an ``InProcessChannel`` over it when a
  ``FaultPlan`` is given, so the seeded fault injection works server side too -- plus, unless
  ``admin=False``, the broker's administration and observation calls (``ADMIN``: create a topic or
  a consumer group, pin an assignment, group statistics, ...).
* ``TcpChannel(address)`` is the client side: it has exactly the methods of ``InProcessChannel``
  (and of ``Broker``) that the producer, the push consumer and the simple consumer call, so any of
  them takes it in place of the in-process channel.  ``admin(name, ...)`` calls ``ADMIN``.

Wire format (one JSON object per line, UTF-8)
---------------------------------------------
* request  ``{"id": N, "rpc": NAME, "args": [...], "kwargs": {...}}``
* cancel   ``{"cancel": N}``: the client cancelled request N (a long poll of a process queue that was
  dropped, a consumer shutting down); the server cancels the broker call's token, and the broker
  answers ``[]`` if it had not handed anything out yet -- the in-process semantics.
* answer   ``{"id": N, "result": VALUE}`` or ``{"id": N, "error": {"code": NAME, "transport": BOOL,
  "message": TEXT, "backoff": SECONDS-or-null}}``: an ``RpcError`` crosses the wire with its status
  code (``protocol.Code`` name, or ``protocol.Transport`` name) and the back-off the server chose.

Values are JSON with tagged objects for the protocol's types (``encode`` / ``decode``): a dataclass
of ``protocol`` (or ``broker.DeadLetter``) is ``{"$": TYPE, "f": {...}}``, an enum ``{"$e": TYPE,
"v": NAME}``, bytes ``{"$b": BASE64}``, a tuple ``{"$t": [...]}``, a frozenset ``{"$s": [...]}``, a
dict ``{"$d": [[k, v], ...]}``.  Only the types listed in ``_TYPES`` / ``_ENUMS`` are ever built
from the wire; anything else is a ``BAD_REQUEST``.  Requests are multiplexed: one connection per
``TcpChannel`` carries any number of concurrent calls (long polls and acks at once), answered
out of order by id.

A lost connection fails every call in flight with transport ``UNAVAILABLE`` (retriable: the
client's own retry rules apply, as with a gRPC channel), and the next call reconnects.  A call
whose answer does not come within ``request_timeout`` real seconds (plus the long-polling timeout
for a receive) fails with ``REQUEST_TIMEOUT`` and is cancelled at the server.

Concurrency argument
--------------------
Server: one I/O thread (a ``selectors`` loop over the listening socket, every connection and a
wake-up socket pair) reads lines.  A request that never waits in the broker (everything but
``receive_message``) is answered on the I/O thread itself; a receive, which may long-poll, goes to
a worker of a growing pool (a worker is started only when none is idle, so a long poll never holds
up an ack; the pool never shrinks, and its size is the largest number of receives in flight at
once).  ``_lock`` protects the connection
table, the pool's idle count and thread list, and the stopping flag.  Each connection has a send
lock (answers are written whole by the thread that computed them; sockets stay blocking, and the
I/O thread only reads after the selector said a socket is readable) and a table of the requests in
flight with their cancel tokens, under ``_lock``.  No lock is held while calling the broker.
``stop()`` wakes the I/O thread, which closes the listening socket, shuts every connection down and
cancels every call in flight; then the workers are told to exit and every thread is joined.

Client: one reader thread per connection delivers answers to the waiting callers (a slot per call,
each with its own condition); callers write whole lines under the send lock.  ``_lock`` protects the
connection, the pending table and the id counter; a caller waits on its slot's condition (also
registered with its ``Cancel`` token, so a cancellation wakes it: it then sends the cancel line and
keeps waiting for the answer, which comes promptly).  ``close()`` shuts the socket down and joins
the reader.  Lock order: slot condition -> ``Cancel`` internals (leaves); ``_lock`` and the send lock
are never held together with a slot's condition.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import queue
import selectors
import socket
import threading
import time
from collections import Counter
from enum import Enum
from typing import Any

from conq.impl.ordered_consumption.broker import Broker, DeadLetter
from conq.impl.ordered_consumption.clock import Cancel
from conq.impl.ordered_consumption.faults import RPCS, FaultPlan, InProcessChannel
from conq.impl.ordered_consumption.protocol import (
    Code,
    ConsumeResult,
    GroupSettings,
    Message,
    MessageQueue,
    MessageType,
    Permission,
    ReceivedMessage,
    RetryPolicy,
    RpcError,
    SendReceipt,
    Transport,
)

__all__ = ["ADMIN", "BrokerServer", "ServedBroker", "TcpChannel", "decode", "encode"]

#: broker calls beyond the messaging API that the server also answers (unless admin=False)
ADMIN = ("create_topic", "create_consumer_group", "pin_assignment", "expire_now", "group_stats", "unsettled",
         "dead_letters", "message_state")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
#: the RPCs that may wait in the broker (a long poll): answered by a worker, never by the I/O thread
_BLOCKING = frozenset({"receive_message"})

_TYPES = {c.__name__: c for c in (MessageQueue, Message, SendReceipt, ReceivedMessage, GroupSettings, RetryPolicy,
                                   DeadLetter)}
_ENUMS = {c.__name__: c for c in (Permission, MessageType, Code, Transport, ConsumeResult)}
_MAX_LINE = 16 * 1024 * 1024


# ====================================================================== codec
def encode(obj: Any) -> Any:
    """A JSON-able form of a protocol value (see the module docstring)."""
    if isinstance(obj, Enum):  # before int: Code is an IntEnum
        return {"$e": type(obj).__name__, "v": obj.name}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, tuple):
        return {"$t": [encode(x) for x in obj]}
    if isinstance(obj, (set, frozenset)):
        return {"$s": [encode(x) for x in obj]}
    if isinstance(obj, list):
        return [encode(x) for x in obj]
    if isinstance(obj, dict):
        return {"$d": [[encode(k), encode(v)] for k, v in obj.items()]}
    if dataclasses.is_dataclass(obj) and type(obj).__name__ in _TYPES:
        return {"$": type(obj).__name__, "f": {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    raise TypeError(f"cannot send a {type(obj).__name__} over the wire")


def decode(obj: Any) -> Any:
    """The inverse of ``encode``; ValueError on anything it would not have produced."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [decode(x) for x in obj]
    if not isinstance(obj, dict) or len(obj) not in (1, 2):
        raise ValueError(f"not a wire value: {obj!r:.80}")
    if "$e" in obj:
        enum = _ENUMS.get(obj["$e"])
        if enum is None or obj.get("v") not in enum.__members__:
            raise ValueError(f"unknown enum value {obj!r:.80}")
        return enum[obj["v"]]
    if "$b" in obj:
        return base64.b64decode(obj["$b"], validate=True)
    if "$t" in obj:
        return tuple(decode(x) for x in _list(obj["$t"]))
    if "$s" in obj:
        return frozenset(decode(x) for x in _list(obj["$s"]))
    if "$d" in obj:
        return {decode(k): decode(v) for k, v in _list(obj["$d"])}
    if "$" in obj:
        cls = _TYPES.get(obj["$"])
        fields = obj.get("f")
        if cls is None or not isinstance(fields, dict):
            raise ValueError(f"unknown type {obj.get('$')!r:.80}")
        names = {f.name for f in dataclasses.fields(cls)}
        if not set(fields) <= names:
            raise ValueError(f"{cls.__name__} has no field(s) {sorted(set(fields) - names)}")
        return cls(**{k: decode(v) for k, v in fields.items()})
    raise ValueError(f"not a wire value: {obj!r:.80}")


def _list(x: Any) -> list:
    if not isinstance(x, list):
        raise ValueError(f"expected a list, got {x!r:.80}")
    return x


def _error_doc(e: RpcError) -> dict:
    return {"code": e.code.name, "transport": isinstance(e.code, Transport), "message": e.message,
            "backoff": e.backoff}


def _error_of(doc: dict) -> RpcError:
    try:
        code = (Transport if doc.get("transport") else Code)[doc["code"]]
    except (KeyError, TypeError):
        return RpcError(Code.INTERNAL_ERROR, f"unknown status {doc!r:.80}")
    return RpcError(code, doc.get("message") or "", backoff=doc.get("backoff"))


def _line(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


# ====================================================================== server
class _Conn:
    __slots__ = ("buf", "closed", "inflight", "send_lock", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.send_lock = threading.Lock()
        self.inflight: dict[Any, Cancel] = {}  # request id -> its cancel token (under the server's _lock)
        self.closed = False

    def send(self, doc: dict) -> None:
        data = _line(doc)
        with self.send_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                pass  # the client went away; its calls fail on its side


class BrokerServer:
    """See the module docstring."""

    def __init__(self, broker: Broker, *, host: str = "127.0.0.1", port: int = 0, faults: FaultPlan | None = None,
                 admin: bool = True, name: str = "oc-server") -> None:
        if host not in LOOPBACK:
            raise ValueError(f"the broker server listens on the loopback interface only ({', '.join(LOOPBACK)})")
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} is not in 0..65535")
        self.broker = broker
        #: what requests are applied to: the broker, or a fault-injecting channel over it
        self.target: Any = InProcessChannel(broker, faults) if faults is not None else broker
        self.admin = admin
        self.name = name
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, _Conn] = {}
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0
        self._stopping = False
        self._started = False
        self._sel: selectors.BaseSelector | None = None
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._io: threading.Thread | None = None
        self.address: tuple[str, int] | None = None
        self.requests: Counter = Counter()
        self.connections = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> BrokerServer:
        with self._lock:
            if self._started:
                raise RuntimeError("already started")
            self._started = True
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        lst = socket.socket(family, socket.SOCK_STREAM)
        try:
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lst.bind((self._host, self._port))
            lst.listen(128)
        except OSError:
            lst.close()
            raise
        self._listener = lst
        self.address = lst.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._sel.register(lst, selectors.EVENT_READ, "accept")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._io = threading.Thread(target=self._io_loop, name=f"{self.name}-io")
        self._io.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop listening, close every connection, cancel every call in flight, join every thread."""
        with self._lock:
            if not self._started or self._stopping:
                return
            self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._io.join(timeout)
        with self._lock:  # the I/O thread is the only one that starts workers, and it has ended
            workers = list(self._workers)
        for _ in workers:
            self._tasks.put(None)
        stuck = [t.name for t in [self._io, *workers] if (t.join(timeout), t.is_alive())[1]]
        self._wake_w.close()
        self._wake_r.close()
        if stuck:
            raise RuntimeError(f"threads still running after {timeout}s: {stuck}")

    @property
    def url(self) -> str:
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def __enter__(self) -> BrokerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ I/O thread
    def _io_loop(self) -> None:
        sel = self._sel
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        break
                for key, _ in sel.select():
                    if key.data == "wake":
                        self._wake_r.recv(64)
                    elif key.data == "accept":
                        self._accept()
                    else:
                        self._read(key.data)
        finally:
            self._shutdown_io()

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except OSError:
            return
        sock.setblocking(True)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(sock)
        with self._lock:
            self._conns[sock] = conn
            self.connections += 1
        self._sel.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.buf += data
        while True:
            i = conn.buf.find(b"\n")
            if i < 0:
                if len(conn.buf) > _MAX_LINE:
                    self._drop(conn)
                return
            raw = bytes(conn.buf[:i])
            del conn.buf[: i + 1]
            if raw.strip():
                self._request(conn, raw)

    def _request(self, conn: _Conn, raw: bytes) -> None:
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as e:
            conn.send({"id": None, "error": _error_doc(RpcError(Code.BAD_REQUEST, f"malformed request: {e}"))})
            return
        if "cancel" in doc:
            with self._lock:
                token = conn.inflight.get(doc["cancel"])
            if token is not None:
                token.cancel()
            return
        rid = doc.get("id")
        token = Cancel(f"request {rid}")
        blocking = doc.get("rpc") in _BLOCKING
        with self._lock:
            conn.inflight[rid] = token
            start_worker = blocking and self._idle == 0
            if blocking and not start_worker:
                self._idle -= 1
            if start_worker:
                t = threading.Thread(target=self._work, name=f"{self.name}-worker-{len(self._workers)}")
                self._workers.append(t)
        if not blocking:  # never waits in the broker: answered here, one thread hand-off less
            self._answer(conn, rid, doc, token)
            return
        self._tasks.put((conn, rid, doc, token))
        if start_worker:
            t.start()

    def _drop(self, conn: _Conn) -> None:
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        with self._lock:
            self._conns.pop(conn.sock, None)
            conn.closed = True
            tokens = list(conn.inflight.values())
            last = not conn.inflight
        try:  # first: no answer computed from now on reaches the client (calls in flight fail UNAVAILABLE)
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        for t in tokens:
            t.cancel()  # the client is gone, or the server stops: its long polls end
        if last:
            conn.sock.close()  # otherwise the last worker to answer closes it

    def _shutdown_io(self) -> None:
        with self._lock:
            conns = list(self._conns.values())
        for c in conns:
            self._drop(c)
        self._sel.unregister(self._listener)
        self._listener.close()
        self._sel.close()

    # ------------------------------------------------------------------ workers
    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            self._answer(*task)
            with self._lock:
                self._idle += 1

    def _answer(self, conn: _Conn, rid: Any, doc: dict, token: Cancel) -> None:
        try:
            answer = {"id": rid, "result": encode(self._apply(doc, token))}
        except RpcError as e:
            answer = {"id": rid, "error": _error_doc(e)}
        except (ValueError, TypeError, KeyError) as e:  # undecodable or wrong arguments
            answer = {"id": rid, "error": _error_doc(RpcError(Code.BAD_REQUEST, f"{type(e).__name__}: {e}"))}
        except Exception as e:  # noqa: BLE001 - a bug in the server must not kill its thread
            answer = {"id": rid, "error": _error_doc(RpcError(Code.INTERNAL_SERVER_ERROR, repr(e)))}
        conn.send(answer)
        with self._lock:
            conn.inflight.pop(rid, None)
            close = conn.closed and not conn.inflight
        if close:
            conn.sock.close()

    def _apply(self, doc: dict, token: Cancel) -> Any:
        rpc = doc.get("rpc")
        args = decode(doc.get("args") or [])
        kwargs = decode({"$d": [[k, v] for k, v in (doc.get("kwargs") or {}).items()]})
        if not isinstance(args, list):
            raise ValueError("args is a list")
        if rpc in RPCS:
            with self._lock:
                self.requests[rpc] += 1
            if rpc == "receive_message":
                kwargs.pop("cancel", None)
                args = args[:5]
                kwargs["cancel"] = token  # the client cancels by request id
            return getattr(self.target, rpc)(*args, **kwargs)
        if self.admin and rpc in ADMIN:
            with self._lock:
                self.requests[rpc] += 1
            return getattr(self.broker, rpc)(*args, **kwargs)
        raise RpcError(Code.BAD_REQUEST, f"unknown RPC {rpc!r}")


# ====================================================================== client
class _ClientConn:
    __slots__ = ("dead", "reader", "send_lock", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.send_lock = threading.Lock()
        self.dead = False
        self.reader: threading.Thread | None = None


class _Slot:
    """One call waiting for its answer."""

    __slots__ = ("answer", "cond", "conn", "done")

    def __init__(self, conn: _ClientConn) -> None:
        self.conn = conn
        self.cond = threading.Condition(threading.Lock())
        self.done = False
        self.answer: dict | None = None


class TcpChannel:
    """The thin client's transport to a ``BrokerServer``; see the module docstring."""

    def __init__(self, address: tuple[str, int] | str, *, connect_timeout: float = 5.0,
                 request_timeout: float = 30.0, name: str = "oc-tcp") -> None:
        if isinstance(address, str):
            host, _, port = address.rpartition(":")
            address = (host.strip("[]"), int(port))
        self.address = (address[0], int(address[1]))
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.name = name
        self._lock = threading.Lock()
        self._conn: _ClientConn | None = None
        self._pending: dict[int, _Slot] = {}
        self._next = 0
        self._closed = False
        self._readers: list[threading.Thread] = []
        self.requests: Counter = Counter()

    # ------------------------------------------------------------------ connection
    def _connection(self) -> _ClientConn:
        with self._lock:
            if self._closed:
                raise RpcError(Transport.UNAVAILABLE, "channel closed")
            if self._conn is not None and not self._conn.dead:
                return self._conn
        try:
            sock = socket.create_connection(self.address, timeout=self.connect_timeout)
        except OSError as e:
            raise RpcError(Transport.UNAVAILABLE, f"cannot connect to {self.address}: {e}") from None
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _ClientConn(sock)
        with self._lock:
            if self._closed or (self._conn is not None and not self._conn.dead):
                other = self._conn
                sock.close()
                if self._closed:
                    raise RpcError(Transport.UNAVAILABLE, "channel closed")
                return other
            self._conn = conn
            conn.reader = threading.Thread(target=self._read, args=(conn,), name=f"{self.name}-reader")
            self._readers.append(conn.reader)
        conn.reader.start()
        return conn

    def _read(self, conn: _ClientConn) -> None:
        f = conn.sock.makefile("rb")
        try:
            for raw in f:
                try:
                    doc = json.loads(raw)
                except ValueError:
                    continue
                with self._lock:
                    slot = self._pending.pop(doc.get("id"), None)
                if slot is not None:
                    with slot.cond:
                        slot.answer, slot.done = doc, True
                        slot.cond.notify_all()
        except OSError:
            pass
        finally:
            f.close()
            with self._lock:
                conn.dead = True
                mine = self._conn is conn
                if mine:
                    self._conn = None
                # every call in flight on this connection fails (retriable: the client's rules apply)
                lost = [(i, s) for i, s in self._pending.items() if s.conn is conn]
                for i, _ in lost:
                    del self._pending[i]
            for _, s in lost:
                with s.cond:
                    s.answer = {"error": {"code": "UNAVAILABLE", "transport": True, "message": "connection lost"}}
                    s.done = True
                    s.cond.notify_all()
            try:
                conn.sock.close()
            except OSError:
                pass

    def close(self) -> None:
        """Close the connection (calls in flight fail UNAVAILABLE) and join the reader thread."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            readers = list(self._readers)
        if conn is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in readers:
            t.join(30)

    def __enter__(self) -> TcpChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ calls
    def call(self, rpc: str, *args: Any, cancel: Cancel | None = None, wait: float = 0.0, **kwargs: Any) -> Any:
        """One request; its answer, or its ``RpcError``.  ``wait``: extra seconds the server may take
        (a long poll)."""
        if cancel is not None and cancel.cancelled:
            return []  # a cancelled receive takes nothing (and costs no request)
        conn = self._connection()
        slot = _Slot(conn)
        with self._lock:
            self._next += 1
            rid = self._next
            self.requests[rpc] += 1
            if conn.dead:
                raise RpcError(Transport.UNAVAILABLE, "connection lost")
            self._pending[rid] = slot
        data = _line({"id": rid, "rpc": rpc, "args": [encode(a) for a in args],
                      "kwargs": {k: encode(v) for k, v in kwargs.items()}})
        try:
            with conn.send_lock:
                conn.sock.sendall(data)
        except OSError as e:
            with self._lock:
                self._pending.pop(rid, None)
            raise RpcError(Transport.UNAVAILABLE, f"{rpc}: {e}") from None
        deadline = time.monotonic() + self.request_timeout + max(0.0, wait)
        cancel_sent = False
        with slot.cond:
            while not slot.done:
                if cancel is not None and cancel.cancelled and not cancel_sent:
                    cancel_sent = True
                    slot.cond.release()
                    try:
                        self._send_cancel(conn, rid)
                    finally:
                        slot.cond.acquire()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                watched = False
                if cancel is not None and not cancel_sent:
                    if cancel._watch(slot.cond):
                        continue  # cancelled meanwhile: send the cancel line first
                    watched = True
                try:
                    slot.cond.wait(left)
                finally:
                    if watched:
                        cancel._unwatch(slot.cond)
            answer = slot.answer if slot.done else None
        if answer is None:
            with self._lock:
                self._pending.pop(rid, None)
            self._send_cancel(conn, rid)
            raise RpcError(Code.REQUEST_TIMEOUT, f"{rpc}: no answer within {self.request_timeout + wait:g}s")
        if "error" in answer:
            raise _error_of(answer["error"])
        try:
            return decode(answer.get("result"))
        except ValueError as e:
            raise RpcError(Code.INTERNAL_ERROR, f"{rpc}: undecodable answer: {e}") from None

    def _send_cancel(self, conn: _ClientConn, rid: int) -> None:
        try:
            with conn.send_lock:
                conn.sock.sendall(_line({"cancel": rid}))
        except OSError:
            pass

    def admin(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """One of ``ADMIN`` (the server must allow administration)."""
        if name not in ADMIN:
            raise ValueError(f"{name!r} is not an administration call ({', '.join(ADMIN)})")
        return self.call(name, *args, **kwargs)

    # ------------------------------------------------------------------ the channel interface
    def query_route(self, topic: str) -> tuple[MessageQueue, ...]:
        return self.call("query_route", topic)

    def send_message(self, queue: MessageQueue, message: Message, message_type: MessageType,
                     transaction_id: str | None = None) -> SendReceipt:
        return self.call("send_message", queue, message, message_type, transaction_id)

    def end_transaction(self, topic: str, message_id: str, transaction_id: str, commit: bool) -> None:
        return self.call("end_transaction", topic, message_id, transaction_id, commit)

    def heartbeat(self, group: str, client_id: str) -> None:
        return self.call("heartbeat", group, client_id)

    def unregister(self, group: str, client_id: str) -> None:
        return self.call("unregister", group, client_id)

    def query_settings(self, group: str) -> GroupSettings:
        return self.call("query_settings", group)

    def query_assignment(self, topic: str, group: str, client_id: str) -> tuple[MessageQueue, ...]:
        return self.call("query_assignment", topic, group, client_id)

    def receive_message(self, group: str, queue: MessageQueue, batch_size: int, invisible_duration: float,
                        long_polling_timeout: float = 0.0, cancel: Cancel | None = None) -> list[ReceivedMessage]:
        return self.call("receive_message", group, queue, batch_size, invisible_duration, long_polling_timeout,
                         cancel=cancel, wait=long_polling_timeout)

    def ack_message(self, group: str, topic: str, message_id: str | None, receipt_handle: str) -> None:
        return self.call("ack_message", group, topic, message_id, receipt_handle)

    def change_invisible_duration(self, group: str, topic: str, message_id: str | None, receipt_handle: str,
                                  invisible_duration: float) -> str:
        return self.call("change_invisible_duration", group, topic, message_id, receipt_handle, invisible_duration)

    def forward_to_dlq(self, group: str, topic: str, message_id: str | None, receipt_handle: str,
                       delivery_attempt: int = 0, max_delivery_attempts: int = 0) -> None:
        return self.call("forward_to_dlq", group, topic, message_id, receipt_handle, delivery_attempt,
                         max_delivery_attempts)



# ====================================================================== a served broker in one object
class ServedBroker:
    """A started broker behind a started ``BrokerServer`` on an ephemeral loopback port, and the
    ``TcpChannel`` objects handed out by ``channel()``; ``close()`` stops all of it and joins every
    thread (the ``broker_server`` test fixture; usable by any driver that wants a real server)."""

    def __init__(self, faults: FaultPlan | None = None, *, admin: bool = True, **broker_kw: Any) -> None:
        self.broker = Broker(**broker_kw).start()
        try:
            self.server = BrokerServer(self.broker, faults=faults, admin=admin).start()
        except BaseException:
            self.broker.stop()
            raise
        self.address = self.server.address
        self._channels: list[TcpChannel] = []

    def channel(self, **kw: Any) -> TcpChannel:
        ch = TcpChannel(self.address, **kw)
        self._channels.append(ch)
        return ch

    def close(self) -> None:
        for ch in self._channels:
            ch.close()
        self.server.stop()
        self.broker.stop()

    def __enter__(self) -> ServedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

# ====================================================================== `conq broker serve`
def parse_faults(spec: str | None, seed: int) -> FaultPlan | None:
    """``none`` (or empty), ``default`` (every answer kind at a few percent, the stress's plan), or
    ``RPC:KIND=P[,KIND=P...][;RPC:...]`` (``*`` for every RPC); ValueError names what is wrong."""
    if spec is None or spec.strip() in ("", "none"):
        return None
    if spec.strip() == "default":
        from conq.impl.ordered_consumption.faults import default_fault_plan

        return default_fault_plan(seed, 3)
    rates: dict[str, dict[str, float]] = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        rpc, colon, kinds = part.partition(":")
        if not colon or not rpc.strip():
            raise ValueError(f"{part!r}: expected RPC:KIND=P[,KIND=P...], 'default' or 'none'")
        for item in kinds.split(","):
            kind, eq, p = item.partition("=")
            try:
                prob = float(p)
            except ValueError:
                raise ValueError(f"{item.strip()!r} in {part!r}: expected KIND=PROBABILITY") from None
            if not eq or not kind.strip():
                raise ValueError(f"{item.strip()!r} in {part!r}: expected KIND=PROBABILITY")
            rates.setdefault(rpc.strip(), {})[kind.strip()] = prob
    plan = FaultPlan(seed, rates)
    for rpc in RPCS:
        plan.table(rpc)  # probabilities that add up to more than 1
    return plan


def parse_topic(spec: str) -> tuple[str, int, MessageType]:
    """``NAME[:QUEUES[:TYPE]]``, TYPE one of normal, fifo, delay, transaction (default 4 normal queues)."""
    name, *rest = spec.split(":")
    if not name or len(rest) > 2:
        raise ValueError(f"{spec!r}: expected NAME[:QUEUES[:TYPE]]")
    queues = 4
    if rest:
        if not rest[0].isdigit() or int(rest[0]) < 1:
            raise ValueError(f"{spec!r}: QUEUES must be a positive integer, got {rest[0]!r}")
        queues = int(rest[0])
    mtype = MessageType.NORMAL
    if len(rest) == 2:
        try:
            mtype = MessageType(rest[1])
        except ValueError:
            raise ValueError(f"{spec!r}: TYPE must be one of {', '.join(t.value for t in MessageType)}") from None
    return name, queues, mtype


def parse_group(spec: str) -> tuple[str, bool, int | None]:
    """``NAME[:MODE[:MAX_ATTEMPTS]]``, MODE fifo or standard (default standard, 16 attempts)."""
    name, *rest = spec.split(":")
    if not name or len(rest) > 2:
        raise ValueError(f"{spec!r}: expected NAME[:fifo|standard[:MAX_ATTEMPTS]]")
    if rest and rest[0] not in ("fifo", "standard"):
        raise ValueError(f"{spec!r}: MODE must be fifo or standard, got {rest[0]!r}")
    attempts = None
    if len(rest) == 2:
        if not rest[1].isdigit() or int(rest[1]) < 1:
            raise ValueError(f"{spec!r}: MAX_ATTEMPTS must be a positive integer, got {rest[1]!r}")
        attempts = int(rest[1])
    return name, bool(rest) and rest[0] == "fifo", attempts
