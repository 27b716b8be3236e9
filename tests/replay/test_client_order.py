"""Requests begun at the same instant on new connections are written in the order they began,
whatever order their connections complete in: a burst reaches the server in the plan's order
(under load uvloop's connects completed out of order: 3 of 10 bursts of 16 lanes, issue #16)."""

import asyncio
import itertools

from agentx.replay.http.client import Client
from tests.replay.test_client import OK, scripted, sse

BURST = 8


def test_a_burst_on_new_connections_is_written_in_the_order_it_began(monkeypatch):
    written = []
    start, connect = Client._start, Client._connect

    def recording_start(self, conn, ex):
        written.append(int(ex.headers["X-N"]))
        start(self, conn, ex)

    calls = itertools.count()

    async def reversed_connect(self, loop):  # the last one begun connects first
        await asyncio.sleep(0.005 * (BURST - next(calls)))
        return await connect(self, loop)

    monkeypatch.setattr(Client, "_start", recording_start)
    monkeypatch.setattr(Client, "_connect", reversed_connect)
    seen: list = []

    async def go():
        server, url = await scripted([OK + b"Content-Length: %d\r\n\r\n" % len(sse(2)) + sse(2)], seen)
        async with server, Client(url) as client:
            exchanges = [client.begin("/v1/completions", b"{}", {"X-N": str(i)}) for i in range(BURST)]
            results = await asyncio.gather(*(client.finish(ex) for ex in exchanges))
        assert all(r.error is None for r in results)

    asyncio.run(go())
    assert written == list(range(BURST))
