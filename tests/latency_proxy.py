"""A TCP proxy on 127.0.0.1 that puts a server "in another zone": every byte is delayed by a fixed time each
way, and a new connection costs one round trip more (its handshake), so that requests made one after another
show up as they would against a real object store 5-50 ms away. Loopback alone hides them.

    with latency_proxy.running("127.0.0.1", rgw.port, delay_s=0.010) as proxy:
        endpoint = f"http://127.0.0.1:{proxy.port}"   # 20 ms round trip

Each direction of a connection is a reader thread that stamps what it reads and a writer thread that sends it
once its time has come, so throughput is kept (a window of bytes in flight), only latency is added. Used by the
tests (tests/test_s3_latency.py) and the benchmark (benchmarks/s3.py --delay-ms).

``proxy.seen`` lists every HTTP request that went through (:class:`Seen`: when, method, path, query, headers,
whether it opened its connection), as the server got it, whichever library made it; :func:`operations` names
them as S3 operations.
``proxy.cut_when = lambda seen: ...``: the first request it holds true of never reaches the server; the proxy
closes there (every connection, and its port), as a store that stops answering at that very question.
``proxy.freeze_when = lambda seen: ...``: from the first request it holds true of, nothing more is sent on either
way, but connections are still accepted: a store frozen (``kill -STOP``) at that very question, whose TCP
connections stay open while nothing answers. ``proxy.thaw()`` sends on what it held, as the store resumed.
``proxy.before = lambda seen: ...``: called with each request as it comes in, before the server gets it (a
test's own request to the server in between, as another client's landing just then).
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple
from urllib.parse import parse_qs, unquote


class Seen(NamedTuple):
    """One request as the proxy saw it come in."""

    when: float  # time.monotonic()
    method: str
    path: str
    query: str
    headers: dict[str, str]  # names in lower case
    opened: bool = False  # the first request of its connection: it came a round trip (the handshake) late


class LatencyProxy:
    def __init__(self, host: str, port: int, delay_s: float):
        self.target, self.delay_s = (host, port), delay_s
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.seen: list[Seen] = []
        self.cut_when: Callable[[Seen], bool] | None = None  # the request at which the server goes away
        self.before: Callable[[Seen], None] | None = None  # called with each request before it is sent on
        self.freeze_when: Callable[[Seen], bool] | None = None  # the request at which the server freezes
        self.frozen_at: float | None = None  # time.monotonic() of that request
        self._thawed = threading.Event()
        self._thawed.set()
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="latency-proxy", daemon=True)

    def start(self) -> LatencyProxy:
        self._thread.start()
        return self

    def thaw(self) -> None:
        """Send on what a freeze held, and everything after it."""
        self._thawed.set()

    def close(self) -> None:
        self._stop.set()
        self._thawed.set()  # held bytes go nowhere: their sockets are closed below
        with contextlib.suppress(OSError):
            self.server.close()
        for s in list(self._socks):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # the peer sees the end now, even with a thread of ours in recv
            with contextlib.suppress(OSError):
                s.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        time.sleep(2 * self.delay_s)  # the handshake's round trip
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socks.append(s)
        if self._stop.is_set():  # closed meanwhile (a cut): this connection goes nowhere
            for s in (client, upstream):
                s.close()
            return
        for src, dst in ((client, upstream), (upstream, client)):
            pending: queue.Queue = queue.Queue()
            seen = _Requests(self.seen) if src is client else None
            threading.Thread(target=self._read, args=(src, pending, seen), daemon=True).start()
            threading.Thread(target=self._write, args=(dst, pending), daemon=True).start()

    def _read(self, src: socket.socket, pending: queue.Queue, seen: _Requests | None) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if seen is not None:
                new = seen.feed(data)
                for request in new if self.before is not None else ():
                    self.before(request)
                if self.cut_when is not None and any(self.cut_when(request) for request in new):
                    self.close()  # this request is not sent on: the server is gone from here on
                    return
                if self.freeze_when is not None and any(self.freeze_when(request) for request in new):
                    self.freeze_when, self.frozen_at = None, time.monotonic()
                    self._thawed.clear()  # this request and every byte after it are held until thaw()
            if self._stop.is_set():
                return
            pending.put((time.monotonic() + self.delay_s, data))
            if not data:
                return

    def _write(self, dst: socket.socket, pending: queue.Queue) -> None:
        while True:
            due, data = pending.get()
            self._thawed.wait()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            try:
                dst.sendall(data)
            except OSError:
                return


class _Requests:
    """The requests of one connection's client side, read from its bytes: each request's line and headers, its
    body skipped by its Content-Length."""

    def __init__(self, seen: list):
        self.seen, self.buffer, self.body_left, self.opened = seen, b"", 0, True

    def feed(self, data: bytes) -> list[Seen]:
        """The requests whose line and headers ``data`` completes (each also appended to ``seen``)."""
        self.buffer += data
        new: list[Seen] = []
        while True:
            if self.body_left:
                taken = min(self.body_left, len(self.buffer))
                self.buffer, self.body_left = self.buffer[taken:], self.body_left - taken
                if self.body_left:
                    return new
            head, found, rest = self.buffer.partition(b"\r\n\r\n")
            if not found:
                return new
            line, *headers = head.decode("latin-1").split("\r\n")
            method, target, _ = line.split(" ", 2)
            path, _, query = target.partition("?")
            named = {name.strip().lower(): value.strip() for name, _, value in (h.partition(":") for h in headers)}
            new.append(Seen(time.monotonic(), method, path, query, named, self.opened))
            self.opened = False
            self.seen.append(new[-1])
            self.buffer, self.body_left = rest, int(named.get("content-length", 0))


@contextlib.contextmanager
def running(host: str, port: int, delay_s: float) -> Iterator[LatencyProxy]:
    """A proxy to ``host:port`` on a free port of 127.0.0.1, delaying each direction by ``delay_s``."""
    proxy = LatencyProxy(host, port, delay_s).start()
    try:
        yield proxy
    finally:
        proxy.close()


def operations(seen: list[Seen], bucket: str) -> list[tuple[str, str, Seen]]:
    """(S3 operation, its key, or its prefix for a listing, the request) of each request ``seen`` to ``bucket``
    (path-style), as the server got it."""
    named = []
    for request in seen:
        key = unquote(request.path).removeprefix(f"/{bucket}")
        if key and not key.startswith("/"):
            continue  # another bucket's
        key, asked = key.removeprefix("/"), parse_qs(request.query)
        if request.method == "GET" and "list-type" in asked:
            named.append(("ListObjectsV2", asked.get("prefix", [""])[0], request))
        else:
            verb = {"GET": "Get", "HEAD": "Head", "PUT": "Put", "DELETE": "Delete"}.get(request.method, request.method)
            named.append((verb + ("Object" if key else "Bucket"), key, request))
    return named
