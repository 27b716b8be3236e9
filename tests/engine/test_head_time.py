"""`serving.head_time`: where `serve_app` serves a request, when its connection read the request's
head (the sim's modeled arrival, issue #24), stamped afresh for each request of a keep-alive
connection and never after its handler runs."""

import asyncio
import time

import aiohttp
from aiohttp import web

from agentx.serving import _HeadTimedSite, bind_socket, head_time


def test_each_request_of_a_keep_alive_connection_gets_its_own_head_time():
    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"head": head_time(request), "handler": time.perf_counter()})

    async def go() -> list[dict]:
        app = web.Application()
        app.router.add_post("/x", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = bind_socket("127.0.0.1", 0)
        site = _HeadTimedSite(runner, sock)
        await site.start()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/x"
        out = []
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as s:
                for size in (10, 300_000, 10):  # a big body arrives in many reads after its head
                    sent = time.perf_counter()
                    async with s.post(url, data=b"x" * size) as r:
                        out.append({**await r.json(), "sent": sent})
        finally:
            await runner.cleanup()
        return out

    answers = asyncio.run(go())
    for a in answers:
        assert a["sent"] <= a["head"] <= a["handler"]
    assert answers[0]["handler"] < answers[1]["head"] and answers[1]["handler"] < answers[2]["head"]
