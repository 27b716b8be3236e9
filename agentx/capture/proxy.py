"""`agentx capture proxy`: a transparent recording proxy for agent traffic.

Point an agent's base URL at the proxy. Every request goes to `--upstream` unchanged and every
response comes back byte for byte, streamed as it arrives (one write per upstream chunk, no
parsing on the way). Requests to the Anthropic Messages API and OpenAI's Chat Completions and
Completions APIs are also recorded in the store (`store.py`): timing, status, the request body
and the reassembled answer, with the session, subagent and request ids found in headers and
body metadata. Parsing, scrubbing and writing happen on the store's thread, after the bytes.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import re
import time
import zlib
from dataclasses import dataclass, field
from functools import partial

import aiohttp
from aiohttp import web

from agentx.capture.answers import reassemble
from agentx.capture.privacy import Privacy
from agentx.capture.recordings import StoreWriter
from agentx.errors import AgentxError
from agentx.serving import json_errors, read_body, serve_app

# Claude Code sends X-Claude-Code-Session-Id, Codex `session_id` / `conversation_id`.
SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "session-id", "conversation_id", "x-session-id",
                   "x-session-affinity")
AGENT_HEADERS = ("x-claude-code-agent-id", "x-agent-id")
REQUEST_HEADERS = ("x-request-id", "x-client-request-id", "x-correlation-id")
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "host", "content-length"}
_USER_ID_SESSION = re.compile(r"session_([0-9a-fA-F-]{8,})")


def api_of(method: str, path: str) -> str | None:
    """The recorded API a request path belongs to, or None (passed through unrecorded)."""
    if method != "POST":
        return None
    if path.endswith("/messages"):
        return "messages"
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/completions"):
        return "completions"
    return None


@dataclass(frozen=True)
class Identity:
    """Where the session, subagent and request ids come from (first header found wins)."""

    session_headers: tuple[str, ...] = SESSION_HEADERS
    agent_headers: tuple[str, ...] = AGENT_HEADERS
    request_headers: tuple[str, ...] = REQUEST_HEADERS

    def ids(self, headers: dict[str, str], body: dict | None) -> tuple[str | None, str | None, str | None]:
        def first(names):
            return next((headers[n.lower()] for n in names if n.lower() in headers), None)

        session = first(self.session_headers)
        if session is None and body:
            # Claude Code's metadata.user_id ends in `_session_<uuid>`; Codex sets prompt_cache_key
            metadata = body.get("metadata")
            match = _USER_ID_SESSION.search(str(metadata.get("user_id") or "")) if isinstance(metadata, dict) else None
            key = body.get("prompt_cache_key")
            session = match.group(1) if match else key if isinstance(key, str) else None
        return session, first(self.agent_headers), first(self.request_headers)


@dataclass(frozen=True)
class ProxyConfig:
    upstream: str
    store: str
    host: str = "127.0.0.1"
    port: int = 8080  # 0: any free port (printed at start)
    identity: Identity = field(default_factory=Identity)
    privacy: Privacy = field(default_factory=Privacy)
    connect_timeout_s: float = 30.0
    request_timeout_s: float = 30.0  # a request's head and body must arrive within this; idle connections close after it

    def __post_init__(self):
        if not re.match(r"https?://[^/]+", self.upstream):
            raise AgentxError(f"want http(s)://host[:port][/prefix], got {self.upstream!r}", "upstream")
        if self.request_timeout_s <= 0:
            raise AgentxError(f"must be > 0, got {self.request_timeout_s}", "request_timeout_s")


def _error_response(request: web.Request, status: int, message: str, kind: str) -> web.Response:
    """The proxy's own errors as JSON: Anthropic's shape on a Messages path, OpenAI's elsewhere."""
    if api_of(request.method, request.path) == "messages":
        body = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status)


def _forward_headers(headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}


def _decoded(body: bytes, encoding: str | None) -> bytes:
    try:
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error):
        return b""
    return body


class CaptureProxy:
    def __init__(self, cfg: ProxyConfig):
        self.cfg = cfg
        self.upstream = cfg.upstream.rstrip("/")
        self.store: StoreWriter | None = None
        self.session: aiohttp.ClientSession | None = None

    async def _start(self, app) -> None:
        self.store = StoreWriter(self.cfg.store)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.cfg.connect_timeout_s),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"))

    async def _stop(self, app) -> None:
        await self.session.close()
        self.store.close()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30, middlewares=[json_errors(_error_response)])
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await read_body(request, self.cfg.request_timeout_s)  # nothing is recorded before it is whole
        start = time.time()
        api = api_of(request.method, request.path)
        row = None
        if api:
            row = self.store.begin(partial(self._row, api, request.path, request.query_string,
                                           dict(request.headers), body, start))
        try:
            upstream = await self.session.request(request.method, self.upstream + request.path_qs, data=body,
                                                  headers=_forward_headers(request.headers),
                                                  allow_redirects=False)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            message = f"agentx capture: upstream {self.upstream} unreachable: {e}"
            if row:
                await self._finish(row, api, {"end": time.time(), "error": "upstream_unreachable"})
            return _error_response(request, 502, message, "upstream_unreachable")
        async with upstream:
            return await self._relay(request, upstream, api, row)

    async def _relay(self, request, upstream, api, row) -> web.StreamResponse:
        resp = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                  headers=_forward_headers(upstream.headers))
        if "Content-Length" in upstream.headers:
            resp.content_length = int(upstream.headers["Content-Length"])
        parts, times, size, first_byte, error = [], [], 0, None, None
        try:
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                now = time.time()
                first_byte = first_byte or now
                parts.append(chunk)
                times.append((size, now))
                size += len(chunk)
                await resp.write(chunk)
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, asyncio.TimeoutError) as e:
            # a write to a client that left raises ClientConnectionResetError, a ConnectionResetError too
            error = "client_disconnected" if isinstance(e, ConnectionResetError) else "upstream_disconnected"
        except ConnectionResetError:
            error = "client_disconnected"
        except asyncio.CancelledError:  # the server is shutting down: record, then go
            await asyncio.shield(self._record(row, api, upstream, first_byte, "client_disconnected", parts, times))
            raise
        await self._record(row, api, upstream, first_byte, error, parts, times)
        if error:  # cut the client's stream as upstream cut ours (or the client already left)
            if request.transport:
                request.transport.close()
            return resp
        await resp.write_eof()
        return resp

    async def _record(self, row, api, upstream, first_byte, error, parts, times) -> None:
        if row:
            encoding = upstream.headers.get("Content-Encoding")
            streamed = upstream.headers.get("Content-Type", "").startswith("text/event-stream")
            fields = {"first_byte": first_byte, "end": time.time(), "status": upstream.status, "error": error}
            await self._finish(row, api, fields, parts, times, streamed, encoding, dict(upstream.headers))

    async def _finish(self, row, api, fields, parts=(), times=(), streamed=False, encoding=None, headers=None):
        """Complete the row; a store failure is reported, never passed to the agent."""
        try:
            await self.store.finish(row, partial(self._completion, api, fields, parts, times, streamed,
                                                 encoding, headers))
        except Exception as e:  # noqa: BLE001 - the agent's answer matters more than the record
            print(f"agentx capture: could not record a request: {e}", flush=True)

    # ----------------------------------------------------- on the store's thread

    def _row(self, api, path, query, headers, body, start) -> dict:
        privacy = self.cfg.privacy
        stored, obj = privacy.body(body)
        kept = privacy.headers(headers)
        session, agent, request_id = self.cfg.identity.ids({k.lower(): v for k, v in headers.items()}, obj)
        query = privacy.query(query)
        return {"api": api, "path": path + (f"?{query}" if query else ""), "session_id": session,
                "agent_id": agent, "request_id": request_id, "start": start,
                "stream": bool(obj and obj.get("stream")), "request_headers": json.dumps(kept),
                "request_body": stored}

    def _completion(self, api, fields, parts, times, streamed, encoding, headers) -> dict:
        raw = b"".join(parts)
        out = dict(fields)
        if headers is not None:
            answer = reassemble(api, _decoded(raw, encoding), streamed)
            if answer.first_token_offset is not None and not encoding:
                out["first_token"] = next(t for start, t in reversed(times) if start <= answer.first_token_offset)
            out.update(stream=streamed, response_headers=json.dumps(self.cfg.privacy.headers(headers)),
                       response=answer.to_json(), response_bytes=len(raw),
                       response_sha256=hashlib.sha256(raw).hexdigest())
        return out


def run_proxy(cfg: ProxyConfig) -> None:
    """Serve until SIGINT or SIGTERM."""
    proxy = CaptureProxy(cfg)
    serve_app(proxy.app(), cfg.host, cfg.port, lambda port: f"agentx capture: listening on http://{cfg.host}:{port} "
              f"-> {proxy.upstream}, recording to {cfg.store}", idle_timeout_s=cfg.request_timeout_s)
