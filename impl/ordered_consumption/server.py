# One file: the server survives any client only through its I/O loop, bounds and catch-all together (one loop, every request, every limit); split, the argument is lost.
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
  ``FaultPlan`` is given, so the seeded fault injection works server side too -- plus, with
  ``admin=True`` (``conq broker serve --admin``), the broker's administration and observation calls
  (``ADMIN``: create a topic or a consumer group, pin an assignment, group statistics, ...), which
  are refused ``FORBIDDEN`` otherwise.
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
  Each request is answered exactly once.

What a client cannot do to the server (issue 33: a server survives any client)
------------------------------------------------------------------------------
* A request the server cannot apply is answered ``BAD_REQUEST`` whose message starts with the field
  that is wrong (``request``, ``id``, ``rpc``, ``args[2]``, ``kwargs.topic``, ``args[1].body``, ...):
  not JSON, nested deeper than any protocol value (``_MAX_DEPTH``), a number JSON cannot carry, an id
  that is not an integer or a string, an unknown RPC, arguments that do not bind to the broker's
  method or have the wrong type (checked against the broker's own annotations).  Every request runs
  under a catch-all: a bug of the server's answers ``INTERNAL_SERVER_ERROR`` and the server serves on.
  A request whose id cannot be read, and a second request under the id of one still in flight, are
  answered under id ``null`` (so every id gets exactly one answer).
* Writes never block the I/O thread: sockets are non-blocking and each connection has an output
  queue; a client whose queued answers pass ``Limits.max_output`` (it does not read them) is
  disconnected, and so is one whose line passes ``max_line`` or whose bytes would take the server's
  total past ``max_buffered``.  Each disconnection is logged with its reason, sent as a last answer
  (id ``null``) when the wire is between lines, and counted in ``disconnects``.
* Long polls run on a bounded pool (``max_long_polls`` workers): one more receive is answered
  ``TOO_MANY_REQUESTS`` with a back-off, which the thin client obeys.  Administration calls are
  bounded in size (queues per topic, topics, groups, pinned clients, names); the broker bounds the
  messages it stores (``Broker(max_messages=..., max_stored_bytes=...)``).
* The I/O loop is the server: if it ever dies, ``failure`` says why and ``done`` is set, so its owner
  (``conq broker serve``) ends with an error instead of serving nobody.

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
wake-up socket pair) reads lines, writes queued output when a socket is writable, accepts and
closes connections; only it touches the selector.  A request that never waits in the broker
(everything but ``receive_message``) is answered on the I/O thread itself; a receive, which may
long-poll, goes to a worker of a bounded pool (a worker is started only when none is idle, so a long
poll never holds up an ack).  ``_lock`` protects the connection table, the pool's idle count and
thread list, the buffered-bytes total, the requests for the I/O thread (connections to watch for
writability, connections to close), the counters and the stopping flag; each connection's table of
requests in flight with their cancel tokens is under it too.  Each connection's ``lock`` protects its
output queue and the socket's life: any thread appends an answer and, if the queue was empty, tries
one non-blocking send first; the rest is written by the I/O thread; the I/O thread closes a socket
under that lock, so no thread ever writes to a closed (or reused) descriptor.  Other threads ask the
I/O thread for something (watch a socket, close a connection) through the sets under ``_lock`` and a
byte on the wake-up pair.  Lock order: a connection's ``lock`` -> ``_lock``; no lock is held while
calling the broker.  ``stop()`` wakes the I/O thread, which closes the listening socket, closes every
connection and cancels every call in flight; then the workers are told to exit and every thread is
joined.

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
import functools
import inspect
import json
import logging
import math
import queue
import re
import selectors
import socket
import threading
import time
import types
import typing
from collections import Counter, deque
from dataclasses import dataclass
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

__all__ = ["ADMIN", "BrokerServer", "Limits", "ServedBroker", "TcpChannel", "decode", "encode"]

#: broker calls beyond the messaging API that the server also answers (unless admin=False)
ADMIN = ("create_topic", "create_consumer_group", "pin_assignment", "expire_now", "group_stats", "unsettled",
         "dead_letters", "message_state")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
#: the RPCs that may wait in the broker (a long poll): answered by a worker, never by the I/O thread
_BLOCKING = frozenset({"receive_message"})

_TYPES = {c.__name__: c for c in (MessageQueue, Message, SendReceipt, ReceivedMessage, GroupSettings, RetryPolicy,
                                   DeadLetter)}
_ENUMS = {c.__name__: c for c in (Permission, MessageType, Code, Transport, ConsumeResult)}
#: a wire value nests at most this deep (a protocol value: 4 levels)
_MAX_DEPTH = 32


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


class _WireError(ValueError):
    """A value the wire codec will not build; ``path`` names where in the request it is."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def decode(obj: Any, path: str = "value", depth: int = 0) -> Any:
    """The inverse of ``encode``; ValueError (naming where: ``path``) on anything it would not have
    produced, including a value nested deeper than any protocol value is."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if depth >= _MAX_DEPTH:
        raise _WireError(path, f"nested deeper than {_MAX_DEPTH} levels")
    if isinstance(obj, list):
        return [decode(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(obj)]
    if not isinstance(obj, dict) or len(obj) not in (1, 2):
        raise _WireError(path, f"not a wire value: {obj!r:.80}")
    try:
        return _decode_tagged(obj, path, depth)
    except _WireError:
        raise
    except (TypeError, ValueError) as e:  # a malformed tagged value: a wrong type inside it
        raise _WireError(path, f"{type(e).__name__}: {e}") from None


def _decode_tagged(obj: dict, path: str, depth: int) -> Any:
    if "$e" in obj:
        enum = _ENUMS.get(obj["$e"])
        if enum is None or obj.get("v") not in enum.__members__:
            raise _WireError(path, f"unknown enum value {obj!r:.80}")
        return enum[obj["v"]]
    if "$b" in obj:
        return base64.b64decode(obj["$b"], validate=True)
    if "$t" in obj:
        return tuple(decode(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(_list(obj["$t"], path)))
    if "$s" in obj:
        return frozenset(decode(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(_list(obj["$s"], path)))
    if "$d" in obj:
        out = {}
        for i, kv in enumerate(_list(obj["$d"], path)):
            if not isinstance(kv, list) or len(kv) != 2:
                raise _WireError(f"{path}[{i}]", "a dict entry is a [key, value] pair")
            out[decode(kv[0], f"{path}[{i}]", depth + 1)] = decode(kv[1], f"{path}[{i}]", depth + 1)
        return out
    if "$" in obj:
        cls = _TYPES.get(obj["$"])
        fields = obj.get("f")
        if cls is None or not isinstance(fields, dict):
            raise _WireError(path, f"unknown type {obj.get('$')!r:.80}")
        hints = _hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        if not set(fields) <= names:
            raise _WireError(path, f"{cls.__name__} has no field(s) {sorted(set(fields) - names)}")
        values = {k: decode(v, f"{path}.{k}", depth + 1) for k, v in fields.items()}
        for k, v in values.items():
            if not _fits(v, hints[k]):
                raise _WireError(f"{path}.{k}", f"{cls.__name__}.{k}: expected {_hint_name(hints[k])}, "
                                                f"got {type(v).__name__}")
        return cls(**values)
    raise _WireError(path, f"not a wire value: {obj!r:.80}")


def _list(x: Any, path: str = "value") -> list:
    if not isinstance(x, list):
        raise _WireError(path, f"expected a list, got {x!r:.80}")
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
@dataclass(frozen=True)
class Limits:
    """What any one client may cost the server (issue 33: a server survives any client).  Each bound,
    when hit, is answered with an error that names it; none of them is ever reached by the thin
    client's own traffic at the sizes the tests and the main job use."""

    #: one request line (a 4 MiB message body, base64-encoded, fits)
    max_line: int = 8 << 20
    #: answers queued for one connection whose client does not read them: over it, disconnected
    max_output: int = 8 << 20
    #: input and output bytes buffered over all connections: the connection that would pass it is
    #: disconnected
    max_buffered: int = 128 << 20
    #: open connections: one more is answered with the reason and closed
    max_connections: int = 1024
    #: worker threads, i.e. receives (long polls) in flight at once: one more is answered
    #: TOO_MANY_REQUESTS with ``long_poll_backoff`` (the thin client's throttling rules apply)
    max_long_polls: int = 64
    long_poll_backoff: float = 0.5
    #: administration: topics and consumer groups created over the wire, queues per topic, pinned
    #: clients, length of a name
    max_topics: int = 256
    max_queues: int = 256
    max_groups: int = 256
    max_pins: int = 4096
    max_name: int = 255


class _Refused(Exception):
    """A request refused before it reached the broker; ``field`` names what was wrong with it."""

    def __init__(self, field: str, message: str, *, code: Code = Code.BAD_REQUEST, backoff: float | None = None,
                 echo: bool = True) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.code = code
        self.backoff = backoff
        self.echo = echo  # answer under the request's id (False: under id null, e.g. a duplicate id)


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number the protocol accepts")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def _fits(value: Any, hint: Any) -> bool:
    """Whether a decoded wire value has the type a broker method (or protocol field) declares."""
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if origin is not None:
        hint = origin
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(hint, type) and isinstance(value, hint)


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


@functools.lru_cache(maxsize=None)
def _hints(fn: Any) -> dict[str, Any]:
    return typing.get_type_hints(fn)


@functools.lru_cache(maxsize=None)
def _signature(rpc: str) -> tuple[inspect.Signature, dict[str, Any]]:
    """The broker's own declaration of an RPC: what a request's arguments are checked against."""
    fn = getattr(Broker, rpc)
    sig = inspect.signature(fn)
    return sig.replace(parameters=list(sig.parameters.values())[1:]), _hints(fn)


class _Conn:
    __slots__ = ("buf", "closed", "closing", "inflight", "lock", "mid_line", "out", "out_bytes", "peer", "scanned",
                 "sock", "writing")

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self.buf = bytearray()  # the I/O thread's: input not yet split into lines
        self.scanned = 0  # how much of buf is known to hold no newline
        self.inflight: dict[Any, Cancel] = {}  # request id -> its cancel token (under the server's _lock)
        # under lock: the output queue and the socket's life
        self.lock = threading.Lock()
        self.out: deque[memoryview] = deque()
        self.out_bytes = 0
        self.mid_line = False  # part of a line is on the wire: nothing else may be written before the rest
        self.writing = False  # the I/O thread is (or was asked to be) watching the socket for writability
        self.closing: str | None = None  # why the server is disconnecting this client
        self.closed = False


class BrokerServer:
    """See the module docstring."""

    def __init__(self, broker: Broker, *, host: str = "127.0.0.1", port: int = 0, faults: FaultPlan | None = None,
                 admin: bool = False, limits: Limits = Limits(), name: str = "oc-server") -> None:
        if host not in LOOPBACK:
            raise ValueError(f"the broker server listens on the loopback interface only ({', '.join(LOOPBACK)})")
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} is not in 0..65535")
        self.broker = broker
        #: what requests are applied to: the broker, or a fault-injecting channel over it
        self.target: Any = InProcessChannel(broker, faults) if faults is not None else broker
        self.admin = admin
        self.limits = limits
        self.name = name
        self.log = logging.getLogger(f"conq.broker.server.{name}")
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, _Conn] = {}
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0
        self._buffered = 0  # input + output bytes held for all connections (under _lock)
        self._wants: set[_Conn] = set()  # connections with output for the I/O thread to watch (under _lock)
        self._to_close: set[_Conn] = set()  # connections other threads disconnected (under _lock)
        self._created: Counter = Counter()  # topics, groups created over the wire (under _lock)
        self._pinned: set[tuple[str, str]] = set()
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
        #: requests refused before reaching the broker, by the field or bound named in the answer
        self.refused: Counter = Counter()
        #: clients the server disconnected, by reason ("output", "buffered", "line", "connections", "internal")
        self.disconnects: Counter = Counter()
        #: set when the I/O loop has ended, for whatever reason; ``failure`` says why if it died
        self.done = threading.Event()
        self.failure: BaseException | None = None

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
            lst.setblocking(False)
        except OSError:
            lst.close()
            raise
        self._listener = lst
        self.address = lst.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
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
        self._wake()
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

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the I/O loop has ended (``stop()``, or it died: then ``failure`` says why)."""
        return self.done.wait(timeout)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def buffered(self) -> int:
        """Input and output bytes the server holds for its clients now (at most ``limits.max_buffered``)."""
        with self._lock:
            return self._buffered

    @property
    def workers(self) -> int:
        """Worker threads started so far (at most ``limits.max_long_polls``)."""
        with self._lock:
            return len(self._workers)

    def __enter__(self) -> BrokerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending, or the server is gone

    # ------------------------------------------------------------------ I/O thread
    def _io_loop(self) -> None:
        sel = self._sel
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        break
                for key, mask in sel.select():
                    conn = key.data
                    if conn == "wake":
                        self._woken()
                    elif conn == "accept":
                        self._accept()
                    elif not conn.closed:
                        try:
                            if mask & selectors.EVENT_WRITE:
                                self._flush(conn)
                            if mask & selectors.EVENT_READ and not conn.closed:
                                self._read(conn)
                        except Exception as e:  # noqa: BLE001 - one client's fault ends that client only
                            self.log.exception("%s: internal error, disconnected", conn.peer)
                            self._disconnect(conn, "internal", f"internal error: {e!r:.200}")
                            self._close(conn)
        except BaseException as e:  # the loop died: every client is disconnected and the owner is told
            self.failure = e
            self.log.critical("the I/O loop died: %r", e, exc_info=True)
        finally:
            try:
                self._shutdown_io()
            finally:
                self.done.set()

    def _woken(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        with self._lock:
            wants, self._wants = self._wants, set()
            doomed, self._to_close = self._to_close, set()
        for conn in doomed:
            self._close(conn)
        for conn in wants:
            if not conn.closed:
                self._sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def _accept(self) -> None:
        try:
            sock, peer = self._listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(sock, f"{peer[0]}:{peer[1]}")
        with self._lock:
            full = len(self._conns) >= self.limits.max_connections
            if not full:
                self._conns[sock] = conn
                self.connections += 1
        if full:
            self._disconnect(conn, "connections",
                             f"the server has {self.limits.max_connections} connections open (its bound)")
            conn.closed = True
            sock.close()
            return
        self._sel.register(sock, selectors.EVENT_READ, conn)

    def _reserve(self, n: int) -> bool:
        with self._lock:
            if self._buffered + n > self.limits.max_buffered:
                return False
            self._buffered += n
            return True

    def _release(self, n: int) -> None:
        if n:
            with self._lock:
                self._buffered -= n

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        if not self._reserve(len(data)):
            self._disconnect(conn, "buffered", f"the server holds {self.limits.max_buffered} bytes of unanswered "
                                               "input and queued output for its clients (its bound)")
            self._close(conn)
            return
        conn.buf += data
        while True:
            i = conn.buf.find(b"\n", conn.scanned)
            if i < 0:
                conn.scanned = len(conn.buf)
                if len(conn.buf) > self.limits.max_line:
                    self._disconnect(conn, "line", f"a request line is longer than {self.limits.max_line} bytes "
                                                   "(the server's bound)")
                    self._close(conn)
                return
            raw = bytes(conn.buf[:i])
            del conn.buf[: i + 1]
            conn.scanned = 0
            self._release(i + 1)
            if raw.strip():
                self._request(conn, raw)
            if conn.closed or conn.closing:
                return

    def _close(self, conn: _Conn) -> None:
        """I/O thread: forget the connection, close its socket, cancel its calls in flight."""
        if conn.closed:
            return
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        with self._lock:
            self._conns.pop(conn.sock, None)
            self._wants.discard(conn)
            tokens = list(conn.inflight.values())
        with conn.lock:  # a worker answering now sees ``closed`` and writes nothing
            conn.closed = True
            held = conn.out_bytes + len(conn.buf)
            conn.out.clear()
            conn.out_bytes = 0
            conn.buf = bytearray()
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.sock.close()
        self._release(held)
        for t in tokens:
            t.cancel()  # the client is gone, or the server stops: its long polls end

    def _disconnect(self, conn: _Conn, kind: str, reason: str) -> None:
        """Any thread: end a client the server will not serve any more, with the reason logged and, when
        the wire is between lines, sent as a last answer (id null).  The I/O thread closes it."""
        with conn.lock:
            if conn.closing or conn.closed:
                return
            conn.closing = reason
            dropped = conn.out_bytes
            conn.out.clear()
            conn.out_bytes = 0
            if not conn.mid_line:
                try:  # best effort, never blocking: the client may not be reading at all
                    conn.sock.send(_line({"id": None, "error": {"code": Code.BAD_REQUEST.name, "transport": False,
                                                                 "message": f"disconnected: {reason}",
                                                                 "backoff": None}}))
                except OSError:
                    pass
        self._release(dropped)
        with self._lock:
            self.disconnects[kind] += 1
            if threading.current_thread() is not self._io:
                self._to_close.add(conn)
        self.log.warning("%s disconnected: %s", conn.peer, reason)
        if threading.current_thread() is not self._io:
            self._wake()

    def _shutdown_io(self) -> None:
        with self._lock:
            conns = list(self._conns.values())
        for c in conns:
            self._close(c)
        self._sel.unregister(self._listener)
        self._listener.close()
        self._sel.close()

    # ------------------------------------------------------------------ output (any thread, never blocking)
    def _send(self, conn: _Conn, doc: dict) -> None:
        data = memoryview(_line(doc))
        over: str | None = None
        watch = False
        with conn.lock:
            if conn.closed or conn.closing:
                return
            if not conn.out:
                try:
                    n = conn.sock.send(data)
                except (BlockingIOError, InterruptedError):
                    n = 0
                except OSError:
                    return  # the client went away: the I/O thread sees it
                data = data[n:]
                conn.mid_line = bool(data) and n > 0
            if data:
                if conn.out_bytes + len(data) > self.limits.max_output:
                    over = "output"
                elif not self._reserve(len(data)):
                    over = "buffered"
                else:
                    conn.out.append(data)
                    conn.out_bytes += len(data)
                    watch, conn.writing = not conn.writing, True
        if over == "output":
            self._disconnect(conn, "output", f"more than {self.limits.max_output} bytes of answers wait for this "
                                             "client, which does not read them (the server's bound)")
        elif over == "buffered":
            self._disconnect(conn, "buffered", f"the server holds {self.limits.max_buffered} bytes of unanswered "
                                               "input and queued output for its clients (its bound)")
        elif watch:
            if threading.current_thread() is self._io:
                self._sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            else:
                with self._lock:
                    self._wants.add(conn)
                self._wake()

    def _flush(self, conn: _Conn) -> None:
        """I/O thread: write what the socket takes of the connection's output queue."""
        sent, done, gone = 0, False, False
        with conn.lock:
            if conn.closed:
                return
            while conn.out:
                chunk = conn.out[0]
                try:
                    n = conn.sock.send(chunk)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    gone = True
                    break
                sent += n
                if n < len(chunk):
                    conn.out[0] = chunk[n:]
                    conn.mid_line = True
                    break
                conn.out.popleft()
                conn.mid_line = False
            conn.out_bytes -= sent
            if not conn.out:
                done, conn.writing = True, False
        self._release(sent)
        if gone:
            self._close(conn)
        elif done:
            self._sel.modify(conn.sock, selectors.EVENT_READ, conn)

    # ------------------------------------------------------------------ requests
    def _request(self, conn: _Conn, raw: bytes) -> None:
        """One request line, under a catch-all: whatever the line holds, the client gets an answer
        (or nothing, for a cancel) and the server serves on."""
        rid = None
        try:
            doc = self._parse(raw)
            if "cancel" in doc:
                self._cancel(conn, doc)
                return
            rid = self._id(doc)
            rpc = self._rpc(doc)
            args, kwargs = self._arguments(doc, rpc)
            self._dispatch(conn, rid, rpc, args, kwargs)
        except _Refused as r:
            with self._lock:
                self.refused[re.split(r"[.\[]", r.field, maxsplit=1)[0]] += 1
            self._send(conn, {"id": rid if r.echo else None,
                              "error": _error_doc(RpcError(r.code, str(r), backoff=r.backoff))})
        except Exception as e:  # noqa: BLE001 - a bug of the server's: this request fails, the server serves on
            self.log.exception("%s: request %r failed", conn.peer, rid)
            self._send(conn, {"id": rid, "error": _error_doc(RpcError(Code.INTERNAL_SERVER_ERROR, f"{e!r:.200}"))})

    @staticmethod
    def _parse(raw: bytes) -> dict:
        try:
            doc = json.loads(raw, parse_constant=_parse_constant, parse_float=_parse_float)
        except RecursionError:
            raise _Refused("request", "nested too deeply to be a request") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise _Refused("request", f"not JSON: {e}") from None
        if not isinstance(doc, dict):
            raise _Refused("request", f"a request is a JSON object, got {type(doc).__name__}")
        unknown = set(doc) - {"id", "rpc", "args", "kwargs", "cancel"}
        if unknown:
            raise _Refused("request", f"unknown field {sorted(unknown)[0][:40]!r} (a request has id, rpc, args, "
                                      "kwargs; a cancellation has cancel)")
        return doc

    def _cancel(self, conn: _Conn, doc: dict) -> None:
        rid = doc["cancel"]
        if isinstance(rid, bool) or not isinstance(rid, (int, str)):
            raise _Refused("cancel", f"expected a request id (an integer or a string), got {type(rid).__name__}",
                           echo=False)
        with self._lock:
            token = conn.inflight.get(rid)
        if token is not None:
            token.cancel()

    @staticmethod
    def _id(doc: dict) -> Any:
        rid = doc.get("id")
        if isinstance(rid, bool) or not isinstance(rid, (int, str)):
            raise _Refused("id", f"expected an integer or a string, got {json.dumps(rid)[:40]}", echo=False)
        return rid

    def _rpc(self, doc: dict) -> str:
        rpc = doc.get("rpc")
        if not isinstance(rpc, str):
            raise _Refused("rpc", f"expected the name of an RPC, got {json.dumps(rpc)[:40]}")
        if rpc in ADMIN and not self.admin:
            raise _Refused("rpc", f"{rpc!r} is an administration call and administration is off "
                                  "(conq broker serve --admin)", code=Code.FORBIDDEN)
        if rpc not in RPCS and rpc not in ADMIN:
            raise _Refused("rpc", f"unknown RPC {rpc[:80]!r}")
        return rpc

    def _arguments(self, doc: dict, rpc: str) -> tuple[list, dict]:
        raw_args, raw_kwargs = doc.get("args", []), doc.get("kwargs", {})
        if not isinstance(raw_args, list):
            raise _Refused("args", f"expected a list, got {type(raw_args).__name__}")
        if not isinstance(raw_kwargs, dict):
            raise _Refused("kwargs", f"expected an object, got {type(raw_kwargs).__name__}")
        try:
            args = [decode(a, f"args[{i}]") for i, a in enumerate(raw_args)]
            kwargs = {k: decode(v, f"kwargs.{k}") for k, v in raw_kwargs.items()}
        except _WireError as e:
            raise _Refused(e.path, e.reason) from None
        kwargs.pop("cancel", None)  # a cancel token is the server's, tied to the request id
        if rpc == "receive_message":
            args = args[:5]
        sig, hints = _signature(rpc)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise _Refused("args", f"{rpc}: {e}") from None
        names = list(sig.parameters)
        for pname, value in bound.arguments.items():
            hint = hints.get(pname)
            if hint is not None and not _fits(value, hint):
                where = f"args[{names.index(pname)}]" if names.index(pname) < len(args) else f"kwargs.{pname}"
                raise _Refused(where, f"{rpc} {pname}: expected {_hint_name(hint)}, got {type(value).__name__}")
        if rpc in ADMIN:
            self._admin_bounds(rpc, bound.arguments)
        return args, kwargs

    def _admin_bounds(self, rpc: str, a: dict) -> None:
        """Size bounds of the administration calls (the broker itself takes any size)."""
        lim = self.limits

        def name(field: str) -> None:
            if not 1 <= len(a[field]) <= lim.max_name:
                raise _Refused(field, f"{rpc}: a name is 1 to {lim.max_name} characters")

        def count(kind: str, bound: int) -> None:
            with self._lock:
                if self._created[kind] >= bound:
                    raise _Refused(kind, f"{rpc}: the server has created its bound of {bound} {kind} over the wire",
                                   code=Code.FORBIDDEN)

        if rpc == "create_topic":
            name("name")
            n = a.get("queues", 4)
            if not 1 <= n <= lim.max_queues:
                raise _Refused("queues", f"create_topic: {n} queues; a topic has 1 to {lim.max_queues} "
                                         "(the server's bound)")
            for per_queue in ("accept_types", "permissions"):
                if a.get(per_queue) is not None and len(a[per_queue]) != n:
                    raise _Refused(per_queue, f"create_topic: one entry per queue ({n}), got {len(a[per_queue])}")
            for i, acc in enumerate(a.get("accept_types") or ()):
                if not isinstance(acc, (list, tuple, frozenset)) or not all(isinstance(t, MessageType) for t in acc):
                    raise _Refused(f"accept_types[{i}]", "create_topic: a set of MessageType values")
            if not all(isinstance(p, Permission) for p in a.get("permissions") or ()):
                raise _Refused("permissions", "create_topic: one Permission value per queue")
            brokers = a.get("brokers", ("broker-0",))
            if not 1 <= len(brokers) <= n or not all(isinstance(b, str) and 0 < len(b) <= lim.max_name
                                                     for b in brokers):
                raise _Refused("brokers", f"create_topic: 1 to {n} broker names")
            for rate in ("send_rate", "send_burst"):
                if a.get(rate) is not None and not a[rate] > 0:
                    raise _Refused(rate, "create_topic: a positive number")
            count("topics", lim.max_topics)
        elif rpc == "create_consumer_group":
            name("name")
            if a.get("max_attempts") is not None and not 1 <= a["max_attempts"] <= 1000:
                raise _Refused("max_attempts", "create_consumer_group: 1 to 1000")
            if not 1 <= a.get("receive_batch_size", 32) <= 1024:
                raise _Refused("receive_batch_size", "create_consumer_group: 1 to 1024")
            policy = a.get("retry_policy")
            if policy is not None and not (1 <= policy.max_attempts <= 1000 and len(policy.durations) <= 64):
                raise _Refused("retry_policy", "create_consumer_group: 1 to 1000 attempts, at most 64 durations")
            count("groups", lim.max_groups)
        elif rpc == "pin_assignment":
            name("client_id")
            queues = a.get("queues")
            if queues is not None and (len(queues) > lim.max_queues
                                       or not all(isinstance(q, MessageQueue) for q in queues)):
                raise _Refused("queues", f"pin_assignment: at most {lim.max_queues} MessageQueue values")
            with self._lock:
                if (a["group"], a["client_id"]) not in self._pinned and len(self._pinned) >= lim.max_pins:
                    raise _Refused("client_id", f"pin_assignment: the server has pinned its bound of "
                                                f"{lim.max_pins} clients", code=Code.FORBIDDEN)

    def _dispatch(self, conn: _Conn, rid: Any, rpc: str, args: list, kwargs: dict) -> None:
        token = Cancel(f"request {rid}")
        blocking = rpc in _BLOCKING
        start: threading.Thread | None = None
        with self._lock:
            if rid in conn.inflight:
                raise _Refused("id", f"{json.dumps(rid)[:40]} is the id of a request in flight on this connection",
                               echo=False)
            if blocking:
                if self._idle:
                    self._idle -= 1
                elif len(self._workers) < self.limits.max_long_polls:
                    start = threading.Thread(target=self._work, name=f"{self.name}-worker-{len(self._workers)}")
                    self._workers.append(start)
                else:
                    raise _Refused("rpc", f"{self.limits.max_long_polls} receives are in flight (the server's bound)",
                                   code=Code.TOO_MANY_REQUESTS, backoff=self.limits.long_poll_backoff)
            conn.inflight[rid] = token
            self.requests[rpc] += 1
            if blocking:
                self._tasks.put((conn, rid, rpc, args, kwargs, token))
        if not blocking:  # never waits in the broker: answered here, one thread hand-off less
            self._answer(conn, rid, rpc, args, kwargs, token)
        elif start is not None:
            start.start()

    # ------------------------------------------------------------------ workers
    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                self._answer(*task)
            except Exception:  # noqa: BLE001 - _answer answers everything; a worker outlives any request
                self.log.exception("a worker's request failed")
            with self._lock:
                self._idle += 1

    def _answer(self, conn: _Conn, rid: Any, rpc: str, args: list, kwargs: dict, token: Cancel) -> None:
        try:
            if rpc == "receive_message":
                kwargs["cancel"] = token  # the client cancels by request id
            target = self.target if rpc in RPCS else self.broker
            answer = {"id": rid, "result": encode(getattr(target, rpc)(*args, **kwargs))}
            if rpc in ADMIN:
                self._credit(rpc, args, kwargs)
        except RpcError as e:
            answer = {"id": rid, "error": _error_doc(e)}
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:  # arguments the broker refused
            answer = {"id": rid, "error": _error_doc(RpcError(Code.BAD_REQUEST, f"args: {rpc}: {e}"))}
        except Exception as e:  # noqa: BLE001 - a bug in the server must not kill its thread
            self.log.exception("%s: %s failed", conn.peer, rpc)
            answer = {"id": rid, "error": _error_doc(RpcError(Code.INTERNAL_SERVER_ERROR, f"{e!r:.200}"))}
        try:
            self._send(conn, answer)
        finally:  # in flight until answered: a duplicate of its id is refused until then
            with self._lock:
                conn.inflight.pop(rid, None)

    def _credit(self, rpc: str, args: list, kwargs: dict) -> None:
        """Count what an administration call created (the bounds of ``_admin_bounds``)."""
        a = _signature(rpc)[0].bind(*args, **kwargs).arguments
        with self._lock:
            if rpc == "create_topic":
                self._created["topics"] += 1
            elif rpc == "create_consumer_group":
                self._created["groups"] += 1
            elif rpc == "pin_assignment":
                self._pinned.add((a["group"], a["client_id"]))


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
                except (ValueError, RecursionError):
                    continue
                rid = doc.get("id") if isinstance(doc, dict) else None
                if not isinstance(rid, int):
                    continue  # a refusal under id null (the server logged it too), or not an answer
                with self._lock:
                    slot = self._pending.pop(rid, None)
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

    def __init__(self, faults: FaultPlan | None = None, *, admin: bool = True, limits: Limits = Limits(),
                 **broker_kw: Any) -> None:
        self.broker = Broker(**broker_kw).start()
        try:
            self.server = BrokerServer(self.broker, faults=faults, admin=admin, limits=limits).start()
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
