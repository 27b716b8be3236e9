"""A lean streaming HTTP/1.1 client: requests written straight to pooled keep-alive
connections, responses framed and parsed from raw bytes as they arrive (SSE events keep the
time their bytes arrived; a share of work per loop turn over all connections), no task per
request or per chunk.

Why not aiohttp here (the rest of agentx uses it): its request path costs ~200 us of Python per
request, so a burst of 150 due requests (a spawn fan-out, every lane resuming at the profile
start) left the last one 30 ms late; this client starts one in ~40 us.

Every failure becomes a categorized result, never an exception: `http_4xx`/`http_5xx`,
`context_overflow` (a 400 whose message names the context length), `connect`, `disconnect`
(the connection closed early, or the stream ended without its terminating event), `timeout`,
`malformed` (an SSE event that is not JSON, or a response that is not HTTP), `cancelled`.

This module begins and finishes requests; `turns.py` is the pool and the share of work per loop
turn that the connections take, `connection.py` one connection (writing, HTTP/1.1 framing),
`stream.py` the wire format (what an SSE event means, per API style).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from agentx.errors import AgentxError
from agentx.replay.http.connection import STALE, Connection
from agentx.replay.http.stream import Result, openai_event
from agentx.replay.http.turns import Turns

ORDER_WAIT_S = 1.0  # a request on a new connection waits at most this long for earlier ones' heads


@dataclass
class Exchange:
    """A request begun on the client, until `Client.finish()` returns its result."""

    path: str
    body: object  # bytes or a view
    headers: dict[str, str]
    res: Result
    conn: Connection | None = None
    done: asyncio.Future | None = None
    ahead: asyncio.Event | None = None  # set once the request begun before it on a new connection has written its head
    written: asyncio.Event | None = None  # set once this one has (or has failed)


class Client:
    def __init__(self, base_url: str, timeout_s: float = 600.0, keep_chunks: bool = False, on_event=openai_event):
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise AgentxError(f"want http://host[:port][/prefix] or https://..., got {base_url!r}", "url")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if url.scheme == "https" else None
        self.prefix = url.path.rstrip("/")
        default_port = self.port == (443 if url.scheme == "https" else 80)
        self.host_header = url.netloc.rpartition("@")[2] if not default_port else self.host
        self.timeout = timeout_s
        self.turns = Turns(on_event, keep_chunks, timeout_s)  # shared with every connection it opens
        self.last_connecting = asyncio.Event()  # `written` of the last request begun without a pooled connection
        self.last_connecting.set()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.turns.abort_all()

    def begin(self, path: str, body, headers: dict[str, str]) -> Exchange:
        """Start a request now (its start time): on a pooled connection its head and the first
        part of its body are written before this returns. `finish()` waits for the answer."""
        ex = Exchange(path, body, headers, Result(start=time.perf_counter()))
        conn = self.turns.take_idle()
        if conn is not None:
            self._start(conn, ex)
        else:  # new connections complete in any order: heads go out in the order requests began
            ex.ahead, ex.written = self.last_connecting, asyncio.Event()
            self.last_connecting = ex.written
        return ex

    async def finish(self, ex: Exchange) -> Result:
        """The answer to a begun request; a connection the server had already closed (a stale
        keep-alive, seen before any response byte) is retried once on a fresh one, keeping the
        first start."""
        res = await self._complete(ex)
        if res.error == "disconnect" and res.status == 0 and res.detail == STALE:
            res = await self._complete(Exchange(ex.path, ex.body, ex.headers, Result(start=res.start)))
        return res

    async def send(self, path: str, body, headers: dict[str, str]) -> Result:
        return await self.finish(self.begin(path, body, headers))

    def _start(self, conn: Connection, ex: Exchange) -> None:
        ex.conn, ex.done = conn, asyncio.get_running_loop().create_future()
        extra = "".join(f"{k}: {v}\r\n" for k, v in ex.headers.items())
        head = (f"POST {self.prefix}{ex.path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(ex.body)}\r\n{extra}\r\n").encode()
        conn.begin(head, ex.body, ex.res, ex.done)

    async def _complete(self, ex: Exchange) -> Result:
        res = ex.res
        loop = asyncio.get_running_loop()
        try:
            if ex.conn is None:
                left = res.start + self.timeout - time.perf_counter()
                try:
                    conn = await asyncio.wait_for(self._connect(loop), max(0.0, left))
                    if ex.ahead is not None:
                        with contextlib.suppress(TimeoutError):  # a slow connect holds back no one for long
                            async with asyncio.timeout(ORDER_WAIT_S):
                                await ex.ahead.wait()
                    self._start(conn, ex)
                finally:
                    if ex.written is not None:
                        ex.written.set()
            timer = loop.call_later(max(0.0, res.start + self.timeout - time.perf_counter()), ex.conn.time_out)
            try:
                await ex.done
            finally:
                timer.cancel()
        except asyncio.TimeoutError:
            res.error = "timeout"
        except asyncio.CancelledError:
            res.error = "cancelled"
            res.end = time.perf_counter()
            if ex.conn is not None:
                ex.conn.transport.abort()
            raise
        except (OSError, ssl.SSLError) as e:
            res.error, res.detail = "connect", f"{self.host}:{self.port}: {e}"
        if res.end is None:
            res.end = time.perf_counter()
        return res

    async def _connect(self, loop) -> Connection:
        _, conn = await loop.create_connection(lambda: Connection(self.turns), self.host, self.port, ssl=self.ssl)
        self.turns.opened(conn)
        return conn
