"""`agentx serve`'s HTTP server: uvicorn held to bounds a hostile or slow client cannot stretch.

- A request's head and body must arrive within `request_timeout_s` of the connection opening (or
  of the previous response): uvicorn has no such deadline (a half-sent head was held open
  indefinitely), so its h11 protocol gets one here. The deadline bounds reading a request, never
  writing its answer: once the request is whole (h11's DONE, or MUST_CLOSE for `Connection: close`
  and HTTP/1.0 clients) it is off. An idle keep-alive connection closes after 5 s.
- Memory stays bounded: route handlers run on at most `workers` threads (anyio's default is 40:
  each thread reserves its stack and a malloc arena, 2 GB of address space at 40), the database
  pool holds as many connections, pyarrow's thread pools as many threads, and glibc keeps at most
  two malloc arenas. Requests beyond that
  wait in line; connections beyond `max_connections` get 503, and one address holds at most
  `max_per_client` of them (its half-open connections cannot lock other clients out).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

M_ARENA_MAX = -8  # glibc's mallopt parameter
_RECEIVING = (h11.IDLE, h11.SEND_BODY)  # the client's states while a request is still being read


@dataclass(frozen=True)
class ServeLimits:
    request_timeout_s: float = 20.0
    workers: int = 8  # threads that run route handlers; also the database pool's size
    max_connections: int = 1000
    max_per_client: int = 256  # connections from one address: one client cannot take every slot
    max_upload_bytes: int = 1 << 30


_BUSY_BODY = b'{"detail":"too many connections from this address: retry later"}'
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


def timed_protocol(timeout_s: float, max_per_client: int = 256) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline on receiving each request whole, and at most
    `max_per_client` open connections from one address (beyond: a 503 and the connection closed
    before anything of it is read, so the slots of uvicorn's `limit_concurrency` stay for others)."""
    open_by_client: dict[str, int] = {}

    class TimedH11(H11Protocol):
        _deadline = None
        _counted = None  # the client address this connection is counted under

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            host = self.client[0] if self.client else ""
            if open_by_client.get(host, 0) >= max_per_client:
                transport.write(BUSY)
                transport.close()
                return
            open_by_client[host] = open_by_client.get(host, 0) + 1
            self._counted = host
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state not in _RECEIVING:  # the request is whole
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state in _RECEIVING:
                self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            if self._counted is not None:
                left = open_by_client.pop(self._counted) - 1
                if left:
                    open_by_client[self._counted] = left
                self._counted = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self.conn.their_state in _RECEIVING and not self.transport.is_closing():
                self.transport.close()

    return TimedH11


def limit_malloc_arenas(n: int = 2) -> None:
    """At most `n` glibc malloc arenas (each thread would otherwise reserve a 64 MB one)."""
    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).mallopt(M_ARENA_MAX, n)
        except (OSError, AttributeError):  # not glibc
            pass


def limit_arrow_threads(n: int) -> None:
    """pyarrow's CPU and I/O pools (one thread per core by default) at most `n` threads each: a
    flamegraph reads a run's records.parquet."""
    import pyarrow

    pyarrow.set_cpu_count(min(n, pyarrow.cpu_count()))
    pyarrow.set_io_thread_count(min(n, pyarrow.io_thread_count()))


def serve(app, host: str, port: int, limits: ServeLimits, sock=None) -> None:
    """Run `app` (made with `create_app(..., workers=limits.workers)`) until SIGINT / SIGTERM, on
    `sock` when given (bound already: a busy port was one line before anything was printed)."""
    import uvicorn

    limit_malloc_arenas()
    limit_arrow_threads(limits.workers)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", http=timed_protocol(limits.request_timeout_s, limits.max_per_client),
                            timeout_keep_alive=5, limit_concurrency=limits.max_connections, backlog=2048,
                            h11_max_incomplete_event_size=64 * 1024, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock] if sock is not None else None)
