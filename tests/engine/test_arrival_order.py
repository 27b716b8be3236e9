"""The sim queues requests in the order their heads arrived, not the order their bodies finish
(a real server process, raw sockets to control what arrives when)."""

import json
import socket
import time

import pytest

from agentx.engine.launch import sim_server
from tests.hostile_http import address, read_response, split_response


def head(body: bytes) -> bytes:
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()


def completion(tokens: int, start: int) -> bytes:
    return json.dumps({"prompt": list(range(start, start + tokens)), "max_tokens": 2, "ignore_eos": True}).encode()


def answer_id(sock: socket.socket) -> str:
    data, _ = read_response(sock, 30)
    status, body = split_response(data)
    assert status == 200, body
    return json.loads(body)["id"]


def test_a_body_that_finishes_first_does_not_overtake_an_earlier_head():
    with sim_server("--speed", "100") as url:
        long_body, short_body = completion(3000, 1000), completion(10, 90_000)
        first, second = socket.create_connection(address(url)), socket.create_connection(address(url))
        first.sendall(head(long_body) + long_body[:100])  # its head, then the body held back
        time.sleep(0.02)
        second.sendall(head(short_body) + short_body)  # arrives later, complete at once
        time.sleep(0.02)
        first.sendall(long_body[100:])
        assert (answer_id(first), answer_id(second)) == ("cmpl-0", "cmpl-1")
        first.close(), second.close()


def test_a_stalled_body_holds_back_the_next_request_only_briefly():
    """The later request is answered while the stalled one is still open: it waited the order
    wait (1 s), not for the stalled body (the request timeout, 600 s here, never reached: the
    stalled connection is still open afterwards). No wall-clock bound of its own."""
    with sim_server("--speed", "100", "--request-timeout-s", "600") as url:
        body = completion(10, 1000)
        stalled, other = socket.create_connection(address(url)), socket.create_connection(address(url))
        stalled.sendall(head(body) + body[:5])  # the rest never comes
        time.sleep(0.02)
        other.sendall(head(body) + body)
        assert answer_id(other) == "cmpl-0"
        stalled.setblocking(False)
        with pytest.raises(BlockingIOError):  # still open, nothing sent: no answer and no close yet
            stalled.recv(1)
        stalled.close(), other.close()
