"""A sim server whose loop is held off the CPU (a busy host) catches up with its modeled
schedule: the stall delays delivery, not the modeled token times (SPEC section 6, "Time")."""

import asyncio
import time

import aiohttp
import pytest

from tests.engine.conftest import IN_PROCESS_SPEED as SPEED

STALL_AT_S, STALL_S = 0.3, 0.4


async def modeled_times(server, port: int, prompt: list[int], stall_s: float) -> tuple[float, float]:
    """(TTFT, E2E) in modeled seconds of one streamed request, the loop blocked `stall_s` mid-answer."""
    made = []
    new_sequence = server.core.new_sequence
    server.core.new_sequence = lambda *a, **kw: made.append(new_sequence(*a, **kw)) or made[-1]
    try:
        async with aiohttp.ClientSession() as http:
            body = {"prompt": prompt, "max_tokens": 600, "ignore_eos": True, "stream": True}

            async def answer():
                async with http.post(f"http://127.0.0.1:{port}/v1/completions", json=body) as resp:
                    assert resp.status == 200
                    await resp.read()

            task = asyncio.create_task(answer())
            await asyncio.sleep(STALL_AT_S)
            time.sleep(stall_s)  # the whole loop held: no timer, no socket, no engine step
            await task
    finally:
        server.core.new_sequence = new_sequence
    (seq,) = made
    return seq.first_token_at - seq.arrival, seq.finished_at - seq.arrival


@pytest.mark.anyio
async def test_a_stalled_loop_keeps_the_modeled_schedule(sim_in_process):
    """One server, two requests one after the other, of the same length and no shared prefix (the
    second finds nothing of the first's in the cache, so both run the same iterations on an idle
    engine); the second is stalled."""
    server, port = sim_in_process
    on_time = await modeled_times(server, port, list(range(1000, 3000)), 0.0)
    stalled = await modeled_times(server, port, list(range(5000, 7000)), STALL_S)  # mid-decode: 0.8 modeled seconds
    assert on_time[1] / SPEED > STALL_AT_S + STALL_S  # the answer outlasts the stall
    assert stalled == pytest.approx(on_time, abs=1e-9)  # (the same iterations from a different arrival time)
