"""One client connection (`connection.py`) and the turn share it takes (`turns.py`), driven
directly: bytes handed to the protocol as a socket would, a transport that records what is
written. (The client against a real scripted server is test_client.py.)"""

import asyncio
import json

from agentx.replay.http.connection import FIRST_WRITE, STALE, WRITE_PIECE, Connection
from agentx.replay.http.stream import Result, openai_event
from agentx.replay.http.turns import EVENTS_PER_TURN, WRITE_TURN, Turns


class Transport:
    """What the protocol calls on its socket, recorded."""

    def __init__(self):
        self.written, self.reading, self.closed, self.aborted = [], True, False, False

    def set_write_buffer_limits(self, high=None):
        pass

    def writelines(self, parts):
        self.written.extend(bytes(p) for p in parts)

    def write(self, data):
        self.written.append(bytes(data))

    def pause_reading(self):
        self.reading = False

    def resume_reading(self):
        self.reading = True

    def close(self):
        self.closed = True

    def abort(self):
        self.aborted = True


def event(text: str, finish=None) -> bytes:
    return b"data: " + json.dumps({"choices": [{"text": text, "finish_reason": finish}]}).encode() + b"\n\n"


def stream(n: int) -> bytes:
    return b"".join(event(f" t{i}") for i in range(n)) + event("", "stop") + b"data: [DONE]\n\n"


async def turns_settle():
    for _ in range(50):  # let every scheduled turn run
        await asyncio.sleep(0)


def opened(body: bytes = b"{}"):
    turns = Turns(openai_event, keep_chunks=False, timeout_s=5.0)
    conn, transport = Connection(turns), Transport()
    conn.connection_made(transport)
    turns.opened(conn)
    res, done = Result(start=0.0), asyncio.get_running_loop().create_future()
    conn.begin(b"POST / HTTP/1.1\r\n\r\n", body, res, done)
    return turns, conn, transport, res, done


def test_a_chunked_stream_split_anywhere_gives_every_event_and_the_connection_back():
    async def main():
        payload = stream(5)
        wire = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=B\r\n\r\n"
                + b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload))
        turns, conn, transport, res, done = opened()
        for i in range(0, len(wire), 3):  # three bytes per read: heads, sizes and events all cut
            conn.data_received(wire[i:i + 3])
            await asyncio.sleep(0)
        await asyncio.wait_for(done, 5)
        assert res.status == 200 and res.error is None and res.chunks == 5 and res.finish_reason == "stop"
        assert res.set_cookie == "a=B"  # as sent: cookie values are case-sensitive
        assert turns.take_idle() is conn and not transport.closed  # kept alive for the next request

    asyncio.run(main())


def test_one_turn_parses_at_most_its_share_and_the_rest_follows_in_later_turns():
    async def main():
        n = 3 * EVENTS_PER_TURN
        payload = stream(n)
        turns, conn, transport, res, done = opened()
        conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
        assert turns.events_left <= 0 and not transport.reading  # the share is spent: reading paused
        assert res.chunks < n and not done.done()
        await asyncio.wait_for(done, 5)
        assert res.chunks == n and transport.reading and res.error is None

    asyncio.run(main())


def test_a_big_body_is_written_a_piece_at_a_time_within_each_turns_budget():
    async def main():
        body = bytes(range(256)) * (3 * WRITE_TURN // 256)
        turns, conn, transport, res, done = opened(body)
        assert b"".join(transport.written[1:]) == body[:FIRST_WRITE]  # the head and the first part at once
        sizes = []
        while conn.body is not None:
            before = sum(map(len, transport.written))
            await asyncio.sleep(0)
            sizes.append(sum(map(len, transport.written)) - before)
        assert b"".join(transport.written[1:]) == body and conn.sent
        assert max(sizes) <= max(WRITE_TURN, WRITE_PIECE) and all(s % WRITE_PIECE == 0 for s in sizes[:-1])

    asyncio.run(main())


def test_failures_of_one_connection():
    async def main():
        _, conn, transport, res, done = opened()  # closed before any byte of the answer: a stale keep-alive
        conn.connection_lost(None)
        await asyncio.wait_for(done, 5)
        assert (res.error, res.detail) == ("disconnect", STALE)

        _, conn, transport, res, done = opened()
        conn.data_received(b"SMTP ready\r\n\r\n")
        await asyncio.wait_for(done, 5)
        assert res.error == "malformed" and transport.aborted

        _, conn, transport, res, done = opened()
        text = b'{"error": "This model\'s maximum context length is 8192 tokens"}'
        conn.data_received(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text))
        await asyncio.wait_for(done, 5)
        assert res.error == "context_overflow" and res.status == 400 and "maximum context" in res.detail

        turns, conn, transport, res, done = opened()
        conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n" + event(" a"))
        conn.connection_lost(ConnectionResetError("reset"))
        await asyncio.wait_for(done, 5)
        assert (res.error, res.detail) == ("disconnect", "reset") and turns.take_idle() is None

        _, conn, transport, res, done = opened()
        conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await asyncio.wait_for(done, 5)
        assert res.error == "disconnect" and "[DONE]" in res.detail  # a 200 without its terminating event

    asyncio.run(main())


def test_bytes_nobody_asked_for_end_the_connection():
    async def main():
        turns, conn, transport, res, done = opened()
        payload = stream(1)
        conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
        await asyncio.wait_for(done, 5)
        assert turns.take_idle() is conn
        conn.data_received(b"HTTP/1.1 200 OK\r\n\r\n")  # between requests
        assert transport.aborted

    asyncio.run(main())
