"""What the client's connections share (`client.py`, `connection.py`): the pool of idle and open
connections, and the work each event-loop turn may do over all of them (payload pieces framed plus
SSE events parsed, body bytes written), with the queues of connections waiting for a later turn.

A connection asks for its share through these methods; the client owns one `Turns` and hands it to
every connection it opens, so neither edits the other's state."""

from __future__ import annotations

import asyncio
from collections import deque

EVENTS_PER_TURN = 128  # payload pieces framed plus SSE events parsed per loop turn, all connections
WRITE_TURN = 256 << 10  # body bytes written per loop turn over all connections (after FIRST_WRITE)


class Turns:
    """The connections' pool and their shares of each loop turn. A connection is anything with
    `closed`, `res`, `body`, `blocked`, `write_piece()` and `work()` (connection.Connection)."""

    def __init__(self, on_event, keep_chunks: bool, timeout_s: float):
        self.on_event = on_event  # the wire format: one SSE event -> the result (`stream.py`)
        self.keep_chunks = keep_chunks
        self.timeout = timeout_s
        self.idle: list = []  # keep-alive connections with no request
        self.open: set = set()
        self.writing: deque = deque()  # connections with body bytes left to write
        self.parsing: deque = deque()  # connections with events left to parse
        self.events_left = EVENTS_PER_TURN  # in this loop turn
        self.turn_pending = False

    # ------------------------------------------------------------------ pool

    def opened(self, conn) -> None:
        self.open.add(conn)

    def lost(self, conn) -> None:
        self.open.discard(conn)

    def reusable(self, conn) -> None:
        self.idle.append(conn)

    def abort_all(self) -> None:
        for conn in list(self.open):
            conn.transport.abort()
        self.idle.clear()

    def take_idle(self):
        """A pooled connection still open, or None."""
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                return conn
        return None

    # ------------------------------------------------------------------ reading

    def reading(self) -> None:
        """A connection is about to frame and parse: make sure the next loop turn brings a new share."""
        if not self.turn_pending:
            self.turn_pending = True
            asyncio.get_running_loop().call_soon(self.parse_turn)

    def wait_turn(self, conn) -> None:
        """`conn` has events left once this turn's share is spent."""
        self.parsing.append(conn)

    def parse_turn(self) -> None:
        """A new loop turn: a new share of work, first for the connections left waiting.
        Many sockets can be readable in one turn; framing and parsing all they bring there
        would hold the loop for milliseconds at hundreds of streams (and the due requests
        with it)."""
        self.turn_pending = False
        self.events_left = EVENTS_PER_TURN
        while self.parsing and self.events_left > 0:
            conn = self.parsing.popleft()
            if conn.res is not None:
                conn.work()

    # ------------------------------------------------------------------ writing

    def want_write(self, conn) -> None:
        if not self.writing:
            asyncio.get_running_loop().call_soon(self.write_turn)
        self.writing.append(conn)

    def write_turn(self) -> None:
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
            asyncio.get_running_loop().call_soon(self.write_turn)
