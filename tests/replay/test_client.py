"""The replayer's HTTP/1.1 client against a scripted server on 127.0.0.1: each response framing
real engines use, and each failure the client must categorize."""

import asyncio
import json

import pytest

from agentx.errors import AgentxError
from agentx.replay.http.client import Client
from agentx.replay.http.stream import first_token_at


def sse(n: int, crlf: bool = False) -> bytes:
    end = b"\r\n\r\n" if crlf else b"\n\n"
    events = [b"data: " + json.dumps({"choices": [{"text": f" t{i}", "finish_reason": None}]}).encode() + end
              for i in range(n)]
    usage = {"choices": [{"text": "", "finish_reason": "length"}],
             "usage": {"prompt_tokens": 7, "completion_tokens": n, "prompt_tokens_details": {"cached_tokens": 3}}}
    return b"".join(events) + b"data: " + json.dumps(usage).encode() + end + b"data: [DONE]" + end


def chunked(payload: bytes, size: int) -> bytes:
    parts = [b"%x;ext=1\r\n%s\r\n" % (len(payload[i:i + size]), payload[i:i + size])
             for i in range(0, len(payload), size)]
    return b"".join(parts) + b"0\r\n\r\n"


OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


async def scripted(answers: list, seen: list):
    """A server answering the n-th request with answers[n]: bytes (written in pieces of at most
    7 bytes when it starts with b'SLOW'), 'close' (close without answering) or 'hang'."""
    count = 0

    async def handle(reader, writer):
        nonlocal count
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                body = await reader.readexactly(length)
                seen.append((head, body))
                answer = answers[min(count, len(answers) - 1)]
                count += 1
                if answer == "close":
                    break
                if answer == "hang":
                    await asyncio.sleep(30)
                if answer.startswith(b"SLOW"):
                    for i in range(4, len(answer), 7):
                        writer.write(answer[i:i + 7])
                        await writer.drain()
                        await asyncio.sleep(0)
                else:
                    writer.write(answer)
                    await writer.drain()
                if b"Connection: close" in answer or b"HTTP/1.0" in answer[:12]:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def run(answers: list, bodies: list, timeout: float = 10.0):
    seen: list = []

    async def go():
        server, url = await scripted(answers, seen)
        async with server:
            async with Client(url + "/prefix", timeout) as client:
                out = []
                for body in bodies:
                    out.append(await client.send("/v1/completions", body, {"X-Session-ID": "s1"}))
                return out

    return asyncio.run(go()), seen


def test_framings_all_give_the_same_stream():
    length = sse(5, crlf=True)
    split = length.rindex(b"[DONE]") + 7  # a chunk ending between the CR and LF after [DONE]
    answers = [
        OK + b"Content-Length: %d\r\n\r\n" % len(length) + length,  # length-framed, CRLF events
        OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(sse(5), 11),  # chunked, with extensions
        OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(length, split),  # a CRLF cut in two
        b"SLOW" + OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(sse(5, crlf=True), 50),  # 7 bytes at a time
        b"HTTP/1.1 100 Continue\r\n\r\n" + OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(sse(5), 64),
        b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + sse(5),  # delimited by closing
    ]
    results, seen = run(answers, [b'{"prompt":[1,2,3]}'] * len(answers))
    for r in results:
        assert r.error is None and r.status == 200, (r.error, r.detail)
        assert (r.chunks, r.prompt_tokens, r.completion_tokens, r.cached_tokens) == (5, 7, 5, 3)
        assert r.finish_reason == "length" and r.start <= r.first <= r.end
    head, body = seen[0]
    assert head.startswith(b"POST /prefix/v1/completions HTTP/1.1\r\n") and b"X-Session-ID: s1\r\n" in head
    assert body == b'{"prompt":[1,2,3]}'


def test_a_big_body_arrives_whole_and_many_events_in_one_read_are_all_counted():
    body = b'{"prompt":[' + b"12345," * 400_000 + b"1]}"  # 2.4 MB: written over two loop turns
    many = sse(1000)  # one write: parsed over several loop turns
    answer = OK + b"Content-Length: %d\r\n\r\n" % len(many) + many
    results, seen = run([answer], [memoryview(body), body[:100]])
    assert seen[0][1] == body and results[0].chunks == 1000 and results[0].error is None
    assert results[1].error is None  # the connection stayed usable


def test_a_whole_answer_followed_by_close_is_parsed_to_its_end():
    # ~3,500 chunks arrive with the close: parsed over many loop turns after the connection is gone
    answer = OK + b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(sse(1000), 40)
    results, _ = run([answer], [b"{}"])
    assert results[0].error is None and results[0].chunks == 1000 and results[0].completion_tokens == 1000


def test_failures_are_categorized():
    overflow = b'{"error":{"message":"This model\'s maximum context length is 8192 tokens"}}'
    answers = [
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(overflow) + overflow,
        b"HTTP/1.1 503 Unavailable\r\nContent-Length: 4\r\n\r\nbusy",
        OK + b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(sse(3), 40)[:-30],  # cut off
        OK + b"Content-Length: 30\r\n\r\ndata: {not json}\n\ndata: [DONE]\n\n",
        OK + b"Content-Length: 12\r\n\r\ndata: {}\n\n\n\n",  # no [DONE]
        b"SMTP ready\r\n\r\n",
        "hang",
    ]
    results, _ = run(answers + ["hang"], [b"{}"] * len(answers), timeout=1.0)
    got = [r.error for r in results]
    assert got == ["context_overflow", "http_5xx", "disconnect", "malformed", "disconnect", "malformed", "timeout"]
    assert results[0].status == 400 and "maximum context length" in results[0].detail
    assert results[1].detail == "busy"


def test_a_connection_the_server_closed_is_retried_once():
    ok = OK + b"Content-Length: %d\r\n\r\n" % len(sse(2)) + sse(2)
    results, seen = run([ok, "close", ok], [b"{}", b"{}"])  # the 2nd request meets a closed connection
    assert [r.error for r in results] == [None, None] and len(seen) == 3
    results, seen = run(["close"], [b"{}"])  # new connections, closed at once: retried once, then given up
    assert results[0].error == "disconnect" and len(seen) == 2


def test_nothing_listening_is_a_connect_error():
    async def go():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        async with Client(f"http://127.0.0.1:{port}", 5) as client:
            return await client.send("/v1/completions", b"{}", {})

    assert asyncio.run(go()).error == "connect"


def test_bad_base_url():
    with pytest.raises(AgentxError, match="http://host"):
        Client("ftp://x")


def test_an_answer_whose_tokens_print_nothing_is_a_token_seen_at_its_finish():
    """llama.cpp holds back a lone byte of a multi-byte character: a 1-token answer can stream no
    text at all while its usage counts the token. That is an answer, first seen at the chunk that
    carries its finish reason; a 200 whose usage counts no token is the `empty` failure."""
    def textless(tokens: int) -> bytes:
        role = {"choices": [{"delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        last = {"choices": [{"delta": {"content": ""}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": tokens}}
        events = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in (role, last))
        return OK + b"Content-Length: %d\r\n\r\n" % len(events + b"data: [DONE]\n\n") + events + b"data: [DONE]\n\n"

    results, _ = run([textless(1), textless(0)], [b"{}", b"{}"])
    one, none = results
    assert one.error is None and one.chunks == 0 and one.first is None and one.completion_tokens == 1
    assert first_token_at(one) == one.finished and one.start < one.finished <= one.end
    assert none.completion_tokens == 0 and first_token_at(none) is None  # the sender records `empty`
