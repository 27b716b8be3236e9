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
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import msgspec

from agentx.errors import AgentxError


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    text: str | None = None
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _Details | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
CONTEXT_WORDS = (b"context length", b"context_length", b"maximum context", b"exceeds the available context",
                 b"context size")
EVENTS_PER_TURN = 128  # payload pieces framed plus SSE events parsed per loop turn, all connections
ERROR_BODY_BYTES = 1 << 16  # kept of a non-200 answer
FIRST_WRITE = 16 << 10  # body bytes written with the head
WRITE_PIECE = 64 << 10  # then a piece at a time per connection,
WRITE_TURN = 256 << 10  # at most this much per loop turn over all connections


@dataclass
class Result:
    start: float  # perf_counter seconds
    first: float | None = None  # first chunk carrying output
    end: float | None = None  # last output chunk (or the failure)
    chunks: int = 0  # chunks that carried output
    chunk_times: list[float] = field(default_factory=list)  # kept only when asked
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    status: int = 0
    error: str | None = None
    detail: str | None = None


@dataclass
class Exchange:
    """A request begun on the client, until `Client.finish()` returns its result."""

    path: str
    body: object  # bytes or a view
    headers: dict[str, str]
    res: Result
    conn: _Connection | None = None
    done: asyncio.Future | None = None


class Client:
    def __init__(self, base_url: str, timeout_s: float = 600.0, keep_chunks: bool = False):
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise AgentxError(f"--url {base_url}: want http://host[:port][/prefix] or https://...")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if url.scheme == "https" else None
        self.prefix = url.path.rstrip("/")
        default_port = self.port == (443 if url.scheme == "https" else 80)
        self.host_header = url.netloc.rpartition("@")[2] if not default_port else self.host
        self.timeout = timeout_s
        self.keep_chunks = keep_chunks
        self.idle: list[_Connection] = []
        self.open: set[_Connection] = set()
        self.writing: deque[_Connection] = deque()  # connections with body bytes left to write
        self.parsing: deque[_Connection] = deque()  # connections with events left to parse
        self.events_left = EVENTS_PER_TURN  # in this loop turn
        self.turn_pending = False

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        for conn in list(self.open):
            conn.transport.abort()
        self.idle.clear()

    def begin(self, path: str, body, headers: dict[str, str]) -> Exchange:
        """Start a request now (its start time): on a pooled connection its head and the first
        part of its body are written before this returns. `finish()` waits for the answer."""
        ex = Exchange(path, body, headers, Result(start=time.perf_counter()))
        conn = self._idle()
        if conn is not None:
            self._start(conn, ex)
        return ex

    async def finish(self, ex: Exchange) -> Result:
        """The answer to a begun request; a connection the server had already closed (a stale
        keep-alive, seen before any response byte) is retried once on a fresh one, keeping the
        first start."""
        res = await self._complete(ex)
        if res.error == "disconnect" and res.status == 0 and res.detail == _STALE:
            res = await self._complete(Exchange(ex.path, ex.body, ex.headers, Result(start=res.start)))
        return res

    async def send(self, path: str, body, headers: dict[str, str]) -> Result:
        return await self.finish(self.begin(path, body, headers))

    def _start(self, conn: _Connection, ex: Exchange) -> None:
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
                self._start(await asyncio.wait_for(self._connect(loop), max(0.0, left)), ex)
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

    def _idle(self) -> _Connection | None:
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                return conn
        return None

    async def _connect(self, loop) -> _Connection:
        _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port, ssl=self.ssl)
        self.open.add(conn)
        return conn

    def _want_write(self, conn: _Connection) -> None:
        if not self.writing:
            asyncio.get_running_loop().call_soon(self._write_turn)
        self.writing.append(conn)

    def _write_turn(self) -> None:
        """Write the rest of big bodies, a piece per connection in turn, WRITE_TURN bytes per
        loop turn at most: copying megabytes into sockets at once holds the loop for
        milliseconds (tens on a VM, where the kernel's first touches of pages are slow), which
        due requests should not wait for. A connection whose socket has not taken what it was
        given leaves the round until it has (`resume_writing`), so nothing piles up in user
        space for the event loop to copy in one go."""
        budget = WRITE_TURN
        for _ in range(len(self.writing)):
            if budget <= 0:
                break
            conn = self.writing.popleft()
            if conn.body is None or conn.closed or conn.blocked:
                continue
            budget -= conn.write_piece()
            if conn.body is not None and not conn.blocked:
                self.writing.append(conn)
        if self.writing:
            asyncio.get_running_loop().call_soon(self._write_turn)

    def _parse_turn(self) -> None:
        """A new loop turn: a new share of work, first for the connections left waiting.
        Many sockets can be readable in one turn; framing and parsing all they bring there
        would hold the loop for milliseconds at hundreds of streams (and the due requests
        with it)."""
        self.turn_pending = False
        self.events_left = EVENTS_PER_TURN
        while self.parsing and self.events_left > 0:
            conn = self.parsing.popleft()
            if conn.res is not None:
                conn._work()

    def _event(self, event: bytes, now: float, res: Result) -> bool:
        """Handle one SSE event; True at [DONE]."""
        if event.startswith(b"data: ") and b"\n" not in event:  # the usual one-line event
            payloads = (event[6:],)
        else:  # comments, event names and retry hints are skipped
            payloads = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
        for payload in payloads:
            if payload == b"[DONE]":
                return True
            try:
                chunk = _decode_chunk(payload)
            except (msgspec.DecodeError, msgspec.ValidationError):
                if res.error is None:
                    res.error, res.detail = "malformed", payload[:200].decode(errors="replace")
                continue
            for c in chunk.choices:
                text = c.text if c.text is not None else (c.delta.content if c.delta else None)
                if text:
                    if res.first is None:
                        res.first = now
                    res.end = now
                    res.chunks += 1
                    if self.keep_chunks:
                        res.chunk_times.append(now)
                if c.finish_reason:
                    res.finish_reason = c.finish_reason
            if chunk.usage is not None:
                u = chunk.usage
                res.prompt_tokens, res.completion_tokens = u.prompt_tokens, u.completion_tokens
                if u.prompt_tokens_details is not None:
                    res.cached_tokens = u.prompt_tokens_details.cached_tokens
        return False


_STALE = "connection closed before the response"
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _IDLE = range(8)


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time: the response's framing (length,
    chunked, until close) is undone here and its payload goes to the SSE parser (status 200)
    or into the error text."""

    def __init__(self, client: Client):
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.state = _IDLE
        self.res: Result | None = None
        self.done: asyncio.Future | None = None
        self.body: memoryview | None = None  # while some of it is left to write
        self.blocked = False  # the socket has not taken all that was written

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=0)  # pause_writing as soon as anything is held

    def pause_writing(self) -> None:
        self.blocked = True

    def resume_writing(self) -> None:
        self.blocked = False
        if self.body is not None:
            self.client._want_write(self)

    def begin(self, head: bytes, body, res: Result, done: asyncio.Future) -> None:
        self.res, self.done = res, done
        self.state, self.buf, self.left, self.keep_alive, self.sent = _HEAD, b"", 0, True, False
        self.sse, self.sse_pos, self.got_done, self.ended = b"", 0, False, False
        self.pieces: list[bytes] = []  # payload not yet added to `sse` (joined once per read)
        self.error_text, self.paused, self.cr, self.held_at = b"", False, False, res.start
        body = memoryview(body)  # (slices without copies)
        self.transport.writelines((head, body[:FIRST_WRITE]))
        self.body, self.pos = body, FIRST_WRITE
        if self.pos >= len(body):
            self.body, self.sent = None, True
        elif not self.blocked:
            self.client._want_write(self)

    def write_piece(self) -> int:
        piece = self.body[self.pos: self.pos + WRITE_PIECE]
        self.transport.write(piece)
        self.pos += len(piece)
        if self.pos >= len(self.body):
            self.body, self.sent = None, True
        return len(piece)

    # ---------------------------------------------------------------- framing

    def data_received(self, data: bytes) -> None:
        if self.res is None or self.state == _IDLE:
            self.transport.abort()  # bytes nobody asked for
            return
        self.buf = self.buf + data if self.buf else data
        self.held_at = time.perf_counter()  # the time of every event in these bytes
        self._work()

    def _work(self) -> None:
        """Undo the framing of the bytes held and parse their events, as far as this loop
        turn's share allows; what is left waits for a later turn with reading paused."""
        client = self.client
        if not client.turn_pending:
            client.turn_pending = True
            asyncio.get_running_loop().call_soon(client._parse_turn)
        try:
            self._frame()
        except ValueError as e:
            self._fail("malformed", f"not an HTTP/1.1 response: {e}")
            self.transport.abort()
            return
        if self.res is None:
            return
        if not self._events(self.held_at):
            if not self.paused and not self.closed:
                self.paused = True
                self.transport.pause_reading()
            client.parsing.append(self)
        elif self.paused:
            self.paused = False
            if not self.closed:
                self.transport.resume_reading()

    def _frame(self) -> None:
        """Turn the bytes held into payload pieces (a unit of the turn's share each)."""
        buf, i, client = self.buf, 0, self.client
        try:
            while i < len(buf) and client.events_left > 0:
                if self.state == _HEAD:
                    cut = buf.find(b"\r\n\r\n", i)
                    if cut < 0:
                        break
                    self._head(buf[i:cut])
                    i = cut + 4
                elif self.state in (_LENGTH, _CHUNK_DATA):  # `left` bytes of payload to come
                    take = buf[i: i + self.left]
                    self.left -= len(take)
                    i += len(take)
                    self._payload(take)
                    client.events_left -= 1
                    if self.left == 0 and self.state == _LENGTH:
                        self._ended()
                    elif self.left == 0:
                        self.state = _CHUNK_END
                elif self.state in (_CHUNK_SIZE, _TRAILER):  # a line to come
                    cut = buf.find(b"\r\n", i)
                    if cut < 0:
                        break
                    line, i = buf[i:cut], cut + 2
                    if self.state == _CHUNK_SIZE:
                        self.left = int(line.split(b";")[0], 16)
                        self.state = _CHUNK_DATA if self.left else _TRAILER
                    elif not line:  # the empty line after the last chunk (and any trailers)
                        self._ended()
                elif self.state == _CHUNK_END:
                    if len(buf) - i < 2:
                        break
                    i += 2
                    self.state = _CHUNK_SIZE
                elif self.state == _UNTIL_CLOSE:
                    self._payload(buf[i:] if i else buf)
                    i = len(buf)
                else:  # bytes after the response: not a connection to reuse
                    self.keep_alive = False
                    self.transport.close()
                    i = len(buf)
        finally:
            self.buf = buf[i:] if i else buf

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ValueError(repr(lines[0][:80]))
        status = int(parts[1])
        if 100 <= status < 200:
            return  # an interim answer: the real one follows
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip().lower()
        self.res.status = status
        self.keep_alive = parts[0] == b"HTTP/1.1" and fields.get(b"connection") != b"close"
        if b"chunked" in fields.get(b"transfer-encoding", b""):
            self.state = _CHUNK_SIZE
        elif b"content-length" in fields:
            self.left = int(fields[b"content-length"])
            self.state = _LENGTH
            if self.left == 0:
                self._ended()
        elif status in (204, 304):
            self._ended()
        else:
            self.state, self.keep_alive = _UNTIL_CLOSE, False

    # ---------------------------------------------------------------- payload

    def _payload(self, data: bytes) -> None:
        if self.res.status != 200:
            if len(self.error_text) < ERROR_BODY_BYTES:
                self.error_text += data[: ERROR_BODY_BYTES - len(self.error_text)]
            return
        if self.cr:  # a CR held back from the last piece
            data, self.cr = b"\r" + data, False
        if b"\r" in data:  # CRLF line ends (allowed in SSE): one parser for both
            if data.endswith(b"\r"):  # its LF may be in the next piece
                data, self.cr = data[:-1], True
            data = data.replace(b"\r\n", b"\n")
        self.pieces.append(data)

    def _events(self, now: float) -> bool:
        """Parse the complete SSE events held while this turn's share lasts; True when all
        the bytes held are done with (the response is finished if it ended)."""
        if self.pieces:
            rest = self.sse[self.sse_pos:] if self.sse_pos < len(self.sse) else b""
            self.sse, self.sse_pos, self.pieces = rest + b"".join(self.pieces), 0, []
        sse, pos, client, res = self.sse, self.sse_pos, self.client, self.res
        while True:
            cut = sse.find(b"\n\n", pos)
            if cut < 0:
                break
            if client.events_left <= 0:
                self.sse_pos = pos
                return False
            client.events_left -= 1
            if client._event(sse[pos:cut], now, res):
                self.got_done = True
            pos = cut + 2
        self.sse, self.sse_pos = sse[pos:], 0
        if self.buf and client.events_left <= 0:
            return False  # framing stopped for the share
        if self.ended:
            self._finish()
        elif self.closed:
            self._lost()
        return True

    # ---------------------------------------------------------------- the end

    def _ended(self) -> None:
        """The response's last byte arrived: it is finished once its events are parsed."""
        self.state = _IDLE
        self.ended = True

    def _finish(self) -> None:
        res = self.res
        if res.status != 200:
            text = self.error_text
            overflow = res.status == 400 and any(w in text.lower() for w in CONTEXT_WORDS)
            res.error = res.error or ("context_overflow" if overflow else f"http_{res.status // 100}xx")
            res.detail = text[:300].decode(errors="replace")
            res.end = time.perf_counter()
        elif not self.got_done and res.error is None:
            res.error, res.detail = "disconnect", "stream ended without [DONE]"
        self._release()

    def _fail(self, error: str, detail: str) -> None:
        if self.res is not None:
            if self.res.error is None:
                self.res.error, self.res.detail = error, detail
            self.keep_alive = False
            self._release()

    def _release(self) -> None:
        done, self.res, self.done, self.body = self.done, None, None, None
        self.state, self.sse, self.buf = _IDLE, b"", b""
        if self.keep_alive and self.sent and not self.closed:
            self.client.idle.append(self)
        elif not self.closed:
            self.transport.close()
        if done is not None and not done.done():
            done.set_result(None)

    def time_out(self) -> None:
        self._fail("timeout", f"no complete answer within {self.client.timeout:g} s")
        self.transport.abort()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.client.open.discard(self)
        if self.res is None:
            return
        self.lost = str(exc) if exc else "connection closed mid-response"
        if self.state == _UNTIL_CLOSE:  # the end of a response framed by closing
            self.ended = True
        if not self.paused:  # (a paused one is waiting for its turn: the rest happens there)
            self._work()

    def _lost(self) -> None:
        """The connection closed, and all it brought is parsed, without the response's end."""
        if self.res.status == 0 and self.state == _HEAD and not self.buf:
            self._fail("disconnect", _STALE)
        else:
            self._fail("disconnect", self.lost)
