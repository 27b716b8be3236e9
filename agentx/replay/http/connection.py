"""One keep-alive HTTP/1.1 connection of the client (`client.py`) as an asyncio protocol: writes
a request's head and body, undoes the response's framing (length, chunked, until close) and
hands complete SSE events to the client's wire format (`stream.py`), within the share of work
per loop turn that all the client's connections take from one `Turns` (`turns.py`)."""

from __future__ import annotations

import asyncio
import time
from agentx.replay.http.stream import Result, names_context_overflow
from agentx.replay.http.turns import Turns

ERROR_BODY_BYTES = 1 << 16  # kept of a non-200 answer
FIRST_WRITE = 16 << 10  # body bytes written with the head
WRITE_PIECE = 64 << 10  # then a piece at a time per connection (the client's write turn)
STALE = "connection closed before the response"
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _IDLE = range(8)


class Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time: the response's framing (length,
    chunked, until close) is undone here and its payload goes to the SSE parser (status 200)
    or into the error text."""

    def __init__(self, turns: Turns):
        self.turns = turns
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
            self.turns.want_write(self)

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
            self.turns.want_write(self)

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
        self.work()

    def work(self) -> None:
        """Undo the framing of the bytes held and parse their events, as far as this loop
        turn's share allows; what is left waits for a later turn with reading paused."""
        turns = self.turns
        turns.reading()
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
            turns.wait_turn(self)
        elif self.paused:
            self.paused = False
            if not self.closed:
                self.transport.resume_reading()

    def _frame(self) -> None:
        """Turn the bytes held into payload pieces (a unit of the turn's share each)."""
        buf, i, turns = self.buf, 0, self.turns
        try:
            while i < len(buf) and turns.events_left > 0:
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
                    turns.events_left -= 1
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
        fields, cookies = {}, []
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"set-cookie":  # kept as sent: cookie values are case-sensitive
                cookies.append(value.strip().decode("latin-1"))
            fields[name] = value.strip().lower()
        self.res.status = status
        self.res.set_cookie = "\n".join(cookies) or None
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
        sse, pos, turns, res = self.sse, self.sse_pos, self.turns, self.res
        while True:
            cut = sse.find(b"\n\n", pos)
            if cut < 0:
                break
            if turns.events_left <= 0:
                self.sse_pos = pos
                return False
            turns.events_left -= 1
            if turns.on_event(sse[pos:cut], now, res, turns.keep_chunks):
                self.got_done = True
            pos = cut + 2
        self.sse, self.sse_pos = sse[pos:], 0
        if self.buf and turns.events_left <= 0:
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
            overflow = res.status == 400 and names_context_overflow(text)
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
            self.turns.reusable(self)
        elif not self.closed:
            self.transport.close()
        if done is not None and not done.done():
            done.set_result(None)

    def time_out(self) -> None:
        self._fail("timeout", f"no complete answer within {self.turns.timeout:g} s")
        self.transport.abort()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.turns.lost(self)
        if self.res is None:
            return
        self.lost = str(exc) if exc else "connection closed mid-response"
        if self.state == _UNTIL_CLOSE:  # the end of a response framed by closing
            self.ended = True
        if not self.paused:  # (a paused one is waiting for its turn: the rest happens there)
            self.work()

    def _lost(self) -> None:
        """The connection closed, and all it brought is parsed, without the response's end."""
        if self.res.status == 0 and self.state == _HEAD and not self.buf:
            self._fail("disconnect", STALE)
        else:
            self._fail("disconnect", self.lost)
