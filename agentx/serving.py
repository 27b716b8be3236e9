"""Run asyncio on uvloop where it exists, and serve an aiohttp app until SIGINT or SIGTERM (the
sim and the capture proxy)."""

from __future__ import annotations

import asyncio
import signal
from typing import Callable

from aiohttp import web

try:
    import uvloop
except ImportError:  # not built for Windows (a platform-conditional dependency)
    uvloop = None


def run_async(coro):
    """Run a coroutine to completion on uvloop where available, else on asyncio's loop."""
    return uvloop.run(coro) if uvloop else asyncio.run(coro)


async def _serve(app: web.Application, host: str, port: int, banner: Callable[[int], str]) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    print(banner(site._server.sockets[0].getsockname()[1]), flush=True)  # the port, when 0 was asked
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def serve_app(app: web.Application, host: str, port: int, banner: Callable[[int], str]) -> None:
    """Serve `app`; `banner(port)` is printed once listening (launchers wait for "listening on")."""
    run_async(_serve(app, host, port, banner))
