"""A lean streaming HTTP client: SSE parsed from raw bytes, times taken as bytes arrive.

Every failure becomes a categorized result, never an exception: `http_4xx`/`http_5xx`,
`context_overflow` (a 400 whose message names the context length), `connect`, `disconnect`
(the stream ended without its terminating event), `timeout`, `malformed` (an SSE event that is
not JSON), `cancelled`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp
import msgspec


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


class Client:
    def __init__(self, base_url: str, timeout_s: float = 600.0, keep_chunks: bool = False):
        self.base = base_url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.keep_chunks = keep_chunks
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self):
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=None, enable_cleanup_closed=True)
        self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout, auto_decompress=False)
        return self

    async def __aexit__(self, *exc):
        await self.session.close()

    async def send(self, path: str, body: bytes, headers: dict[str, str]) -> Result:
        """One request; a connection the server had already closed (a stale keep-alive, seen
        before any response byte) is retried once on a fresh one, keeping the first start."""
        res = await self._attempt(path, body, headers, time.perf_counter())
        if res.error == "disconnect" and res.status == 0:
            res = await self._attempt(path, body, headers, res.start)
        return res

    async def _attempt(self, path: str, body: bytes, headers: dict[str, str], start: float) -> Result:
        res = Result(start=start)
        try:
            await self._send(path, body, headers, res)
        except asyncio.TimeoutError:
            res.error = "timeout"
        except asyncio.CancelledError:
            res.error = "cancelled"
            res.end = time.perf_counter()
            raise
        except aiohttp.ClientConnectorError as e:
            res.error, res.detail = "connect", str(e)
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
                ConnectionError) as e:
            res.error, res.detail = "disconnect", str(e) or type(e).__name__
        except aiohttp.ClientError as e:
            res.error, res.detail = "client", str(e) or type(e).__name__
        finally:
            if res.end is None:
                res.end = time.perf_counter()
        return res

    async def _send(self, path: str, body: bytes, headers: dict[str, str], res: Result) -> None:
        hdrs = {"Content-Type": "application/json", **headers}
        async with self.session.post(self.base + path, data=body, headers=hdrs) as resp:
            res.status = resp.status
            if resp.status != 200:
                text = await resp.read()
                res.end = time.perf_counter()
                overflow = resp.status == 400 and any(w in text.lower() for w in CONTEXT_WORDS)
                res.error = "context_overflow" if overflow else f"http_{resp.status // 100}xx"
                res.detail = text[:300].decode(errors="replace")
                return
            buf, done = b"", False
            async for data in resp.content.iter_any():
                now = time.perf_counter()
                buf = buf + data if buf else data
                pos, handled = 0, 0
                while True:  # walk the events by offset: no copy of the rest per event
                    cut = buf.find(b"\n\n", pos)
                    if cut < 0:
                        break
                    if self._event(buf[pos:cut], now, res):
                        done = True
                    pos = cut + 2
                    handled += 1
                    if handled % 64 == 0:  # a big chunk must not hold up due dispatches
                        await asyncio.sleep(0)
                buf = buf[pos:] if pos else buf
            if not done and res.error is None:
                res.error = "disconnect"
                res.detail = "stream ended without [DONE]"

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
