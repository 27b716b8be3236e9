"""A sim server whose loop is held off the CPU (a busy host) catches up with its modeled
schedule: the stall delays delivery, not the modeled token times (SPEC section 6, "Time")."""

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from agentx.engine.config import ServeConfig
from agentx.engine.server import SimServer

PROMPT = list(range(1000, 3000))
SPEED, STALL_AT_S, STALL_S = 2.0, 0.3, 0.4


async def modeled_times(stall_s: float) -> tuple[float, float]:
    """(TTFT, E2E) in modeled seconds of one streamed request, the loop blocked `stall_s` mid-answer."""
    server = SimServer(ServeConfig(speed=SPEED))
    made = []
    new_sequence = server.core.new_sequence
    server.core.new_sequence = lambda *a, **kw: made.append(new_sequence(*a, **kw)) or made[-1]
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        async with aiohttp.ClientSession() as http:
            body = {"prompt": PROMPT, "max_tokens": 300, "ignore_eos": True, "stream": True}

            async def answer():
                async with http.post(f"http://127.0.0.1:{port}/v1/completions", json=body) as resp:
                    assert resp.status == 200
                    await resp.read()

            task = asyncio.create_task(answer())
            await asyncio.sleep(STALL_AT_S)
            time.sleep(stall_s)  # the whole loop held: no timer, no socket, no engine step
            await task
    finally:
        await runner.cleanup()
    (seq,) = made
    return seq.first_token_at - seq.arrival, seq.finished_at - seq.arrival


def test_a_stalled_loop_keeps_the_modeled_schedule():
    on_time = asyncio.run(modeled_times(0.0))
    stalled = asyncio.run(modeled_times(STALL_S))  # mid-decode: 0.8 modeled seconds of the host's time
    assert on_time[1] / SPEED > STALL_AT_S + STALL_S  # the answer outlasts the stall
    assert stalled == pytest.approx(on_time, abs=1e-9)  # (the same iterations from a different arrival time)
