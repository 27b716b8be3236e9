"""Run asyncio on uvloop where it exists, and serve an aiohttp app until SIGINT or SIGTERM (the
sim and the capture proxy)."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import sys
import time
from typing import Callable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from agentx.errors import AgentxError

try:
    import uvloop
except ImportError:  # not built for Windows (a platform-conditional dependency)
    uvloop = None


def run_async(coro):
    """Run a coroutine to completion on uvloop where available, else on asyncio's loop."""
    return uvloop.run(coro) if uvloop else asyncio.run(coro)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port; a port in use (or a host that is not this machine's)
    is one line naming the setting, not a traceback from deep in the server."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise AgentxError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(1024)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise AgentxError(f"cannot listen on {host}:{port}: the port is in use (another server listens "
                              "there); choose another, or 0 for a free one") from None
        raise AgentxError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.setblocking(False)
    return sock


def log_line(message: str) -> None:
    """One line on stderr: what a server says about a client (never a traceback)."""
    print(f"agentx: {message}", file=sys.stderr, flush=True)


class _OneLine(logging.Handler):
    """aiohttp's own error logs (a malformed request, a client gone mid-response) as one line."""

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        log_line(record.getMessage() + (f": {type(exc).__name__}: {exc}" if exc else ""))


def _one_line_logs() -> None:
    for name in ("aiohttp.server", "aiohttp.web", "aiohttp.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [_OneLine()]
        logger.propagate = False


def json_errors(error_response: Callable[[web.Request, int, str, str], web.Response]):
    """A middleware making every error a JSON body (`error_response(request, status, message,
    kind)` shapes it): unknown paths and methods, oversized and half-sent bodies, and (a bug,
    never bad input) an unexpected exception, which is one log line and a 500."""

    @web.middleware
    async def middleware(request: web.Request, handler):
        try:
            return await handler(request)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            kind = type(e).__name__.removeprefix("HTTP") + "Error"
            response = error_response(request, e.status, f"{e.reason}: {request.method} {request.path}", kind)
            if e.status == 408:  # send it and close at once: no lingering read of a body that is not coming
                response.force_close()
                await response.prepare(request)
                await response.write_eof()
                request.transport.close()
            return response
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as e:  # noqa: BLE001 - the client gets a JSON 500, the log one line
            log_line(f"internal error on {request.method} {request.path}: {type(e).__name__}: {e}")
            return error_response(request, 500, "internal server error", "InternalServerError")

    return middleware


async def read_body(request: web.Request, timeout_s: float) -> bytes:
    """The whole body within `timeout_s`, else 408 (the connection is closed); a body the client
    ended before its Content-Length is a 400."""
    try:
        async with asyncio.timeout(timeout_s):  # no task of its own: cheap on the hot path
            return await request.read()
    except TimeoutError:
        log_line(f"{request.method} {request.path}: body not received within {timeout_s:g} s, connection closed")
        raise web.HTTPRequestTimeout() from None
    except web.HTTPException:
        raise
    except (ConnectionError, ValueError) as e:  # aiohttp's payload errors
        raise web.HTTPBadRequest(reason=f"Incomplete request body ({type(e).__name__})") from None


class _HeadTimedHandler(RequestHandler):
    """aiohttp's protocol for one connection, noting when each request's head was read
    (`head_at`, time.perf_counter()): the read that completed it, before aiohttp's own hops to
    the handler (parse, its task, the request object: 0.3-0.7 ms on the 2-core VM, issue #24)."""

    __slots__ = ("head_at",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head_at: float | None = None

    def data_received(self, data: bytes) -> None:
        now, count = time.perf_counter(), self._request_count
        super().data_received(data)
        if self._request_count != count:  # these bytes completed a request's head
            self.head_at = now


class _HeadTimedSite(web.SockSite):
    """web.SockSite with `_HeadTimedHandler` connections (aiohttp pinned: its Server's arguments)."""

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _HeadTimedHandler(server, loop=server._loop, **server._kwargs), sock=self._sock,
            backlog=self._backlog)


def head_time(request: web.Request) -> float | None:
    """When the request's head was read (time.perf_counter()), where `serve_app` serves it."""
    return getattr(request.protocol, "head_at", None)


async def _serve(app: web.Application, sock: socket.socket, banner: Callable[[int], str], idle_timeout_s: float) -> None:
    _one_line_logs()
    # keepalive_timeout also closes a connection that never completes a request's head
    runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=idle_timeout_s)
    await runner.setup()
    site = _HeadTimedSite(runner, sock)
    await site.start()
    print(banner(sock.getsockname()[1]), flush=True)  # the port, when 0 was asked
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def serve_app(app: web.Application, host: str, port: int, banner: Callable[[int], str],
              idle_timeout_s: float = 30.0) -> None:
    """Serve `app`; `banner(port)` is printed once listening (launchers wait for "listening on").
    A connection idle for `idle_timeout_s`, or that has not completed a request's head within it
    since it opened or since its last response, is closed."""
    run_async(_serve(app, bind_socket(host, port), banner, idle_timeout_s))
