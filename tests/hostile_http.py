"""Hostile HTTP requests, shared by the tests of the simulated engine and of the capture proxy
in front of it (issue #12): malformed JSON, wrong types at every field, invalid UTF-8, lone
surrogates, a 10 MB prompt, unknown paths, a body shorter than its Content-Length, half-sent
requests and 200 concurrent connections. Raw sockets where a client library would refuse to
send the bytes."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from urllib.parse import urlsplit

import aiohttp

SECRET = "sk-hostile-SECRET-3f9a"  # sent in headers and bodies; must never be stored
WRONG_VALUES = [None, -1, 1e300, "x", [], {}, True, [[["deep"]]]]


def valid_bodies(model: str) -> dict[str, dict]:
    """One small valid body per API path (2 tokens, so the happy cases are quick)."""
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    return {
        "/v1/completions": {"model": model, "prompt": "hello there", "max_tokens": 2, "stream": False,
                            "temperature": 0.5},
        "/v1/chat/completions": {"model": model, "max_tokens": 2, "stream": True, "tools": tools,
                                 "tool_choice": "auto", "stream_options": {"include_usage": True},
                                 "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        "/v1/messages": {"model": model, "max_tokens": 2, "system": [{"type": "text", "text": "be brief"}],
                         "tools": [{"name": "read", "input_schema": {"type": "object"}}],
                         "tool_choice": {"type": "auto"},
                         "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
    }


def wrong_type_cases(model: str) -> list[tuple[str, bytes]]:
    """Every top-level field of every valid body replaced by each wrong value, and each removed."""
    cases = []
    for path, body in valid_bodies(model).items():
        for key in body:
            for value in WRONG_VALUES + ["<removed>"]:
                changed = {k: v for k, v in body.items() if k != key}
                if value != "<removed>":
                    changed[key] = value
                cases.append((path, json.dumps(changed).encode()))
        nested = json.loads(json.dumps(body))  # the first content part's text, wrong
        if "messages" in nested:
            for value in WRONG_VALUES:
                nested["messages"][0]["content"][0]["text"] = value
                cases.append((path, json.dumps(nested).encode()))
    return cases


def byte_cases(model: str) -> list[tuple[str, bytes]]:
    m = json.dumps(model).encode()
    return [
        ("/v1/completions", b'{"model": ' + m + b', "prompt": "abc", "max_tokens": '),  # truncated JSON
        ("/v1/completions", b"{,}"),
        ("/v1/completions", b"not json at all"),
        ("/v1/completions", b""),
        ("/v1/completions", b'{"model": ' + m + b', "prompt": "caf\xc3 \xff\xfe", "max_tokens": 2}'),  # bad UTF-8
        ("/v1/completions", b'{"model": ' + m + b', "prompt": "\xed\xa0\x80", "max_tokens": 2}'),  # raw surrogate
        ("/v1/completions", b'{"model": ' + m + b', "prompt": "a\\ud800b", "max_tokens": 2}'),  # lone surrogate
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\\udfff"}], "max_tokens": 2}'),
        ("/v1/messages", b'{"messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 2}'),
        ("/v1/completions", b'{"prompt": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"),
        ("/v1/completions", b'{"model": ' + m + b', "prompt": "x", "max_tokens": 2, "n": 3}'),
        ("/v1/completions", b'{"model": ' + m + b', "prompt": "x", "max_tokens": 2, "temperature": -1}'),
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, '
                                 b'"tools": [{"type": "function", "function": {"name": "a"}}], '
                                 b'"tool_choice": {"type": "function", "function": {"name": "missing"}}}'),
        ("/v1/messages", b'{"messages": [{"role": "user", "content": [{"type": "hologram"}]}], "max_tokens": 2}'),
        ("/v1/completions", json.dumps({"model": model, "prompt": "word " * 2_000_000, "max_tokens": 2}).encode()),
        ("/v1/completions", json.dumps({"model": model, "prompt": list(range(1_500_000)), "max_tokens": 2}).encode()),
        ("/v1/nope", b"{}"),
        ("/nope", b""),
        ("/v1/messages/extra", b"{}"),
    ]


def check_answer(status: int, body: bytes, path: str) -> None:
    """No 5xx; an error is a JSON body in the API's shape."""
    assert status < 500, (status, path, body[:300])
    if status < 400:
        return
    doc = json.loads(body)
    if path.startswith("/v1/messages"):
        assert doc["type"] == "error" and doc["error"]["message"], doc
    else:
        assert doc["error"]["message"] and doc["error"]["code"] == status, doc


async def send_all(url: str, cases: list[tuple[str, bytes]], headers: dict | None = None) -> list[int]:
    """POST every case (four at a time, keep-alive) and check each answer; the statuses."""
    statuses = []
    limit = asyncio.Semaphore(4)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
        async def one(path, body):
            async with limit, http.post(url + path, data=body, headers={"Content-Type": "application/json",
                                                                        **(headers or {})}) as resp:
                data = await resp.read()
                check_answer(resp.status, data, path)
                statuses.append(resp.status)

        await asyncio.gather(*(one(path, body) for path, body in cases))
    return statuses


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


def read_response(sock: socket.socket, timeout_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed (seconds)."""
    sock.settimeout(timeout_s)
    start, data = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data, time.monotonic() - start


def short_body(url: str, path: str = "/v1/completions") -> bytes:
    """A body shorter than its Content-Length, then the client's side closed: the answer (none
    when the server dropped the request)."""
    sock = socket.create_connection(address(url))
    body = b'{"prompt": "abc", "max_tokens": 2}'
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body) + 50}\r\n\r\n".encode() + body)
    sock.shutdown(socket.SHUT_WR)
    data, _ = read_response(sock, 30)
    sock.close()
    return data


HALF_SENT = {
    "nothing": b"",
    "head unfinished": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: applic",
    "body never comes": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n"
                        b'{"prompt": "abc", "api_key": "' + SECRET.encode() + b'"',
}


def open_half_sent(url: str) -> list[tuple[str, socket.socket]]:
    """Connections that stop mid-request (or before one), held open by the client."""
    out = []
    for name, data in HALF_SENT.items():
        sock = socket.create_connection(address(url))
        sock.sendall(data)
        out.append((name, sock))
    return out


def split_response(data: bytes) -> tuple[int, bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def concurrent_streams(url: str, model: str, n: int = 200) -> int:
    """`n` streamed completions at once, each on its own connection; how many completed."""
    body = {"model": model, "prompt": "stream me", "max_tokens": 8, "ignore_eos": True, "stream": True}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=120)) as http:
        async def one():
            async with http.post(url + "/v1/completions", json=body) as resp:
                text = await resp.text()
                return resp.status == 200 and text.rstrip().endswith("data: [DONE]")

        return sum(await asyncio.gather(*(one() for _ in range(n))))


def disconnect_mid_stream(url: str, model: str) -> None:
    """Start a long streamed answer, read its first bytes, and hang up."""
    sock = socket.create_connection(address(url))
    body = json.dumps({"model": model, "prompt": "long one", "max_tokens": 2000, "ignore_eos": True,
                       "stream": True}).encode()
    sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    sock.settimeout(30)
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    sock.close()
