"""How the sim delivers an iteration's tokens (engine/serve/loop.py): never before they are due on
its own clock, and first tokens first, then answers that end, then the rest."""

import asyncio
from types import SimpleNamespace

import uvloop

from agentx.engine.serve.loop import TIMER_GRAIN_S, _delivery_rank, _wait_until, clock


def test_the_engine_never_wakes_before_a_due_time_on_either_loop():
    """uvloop's timers fire up to a millisecond early, asyncio's late: `_wait_until` returns at or
    after the due time on both (an order of events, no bound on how late)."""

    async def go() -> list[float]:
        early = []
        for delay in (0.0, 0.0003, TIMER_GRAIN_S / 2, 0.0025, 0.004, 0.0071):
            for _ in range(5):
                due = clock() + delay
                await _wait_until(due)
                early.append(due - clock())
        return early

    for run in (asyncio.run, uvloop.run):
        assert max(run(go())) <= 0


def test_first_tokens_go_first_then_ends_then_the_rest():
    def seq(name: str, delivered: int, finished: bool):
        return SimpleNamespace(name=name, delivered=delivered, finish_reason="stop" if finished else None)

    emitted = [seq("decode", 5, False), seq("end", 9, True), seq("first", 0, False), seq("decode2", 2, False),
               seq("first-and-end", 0, True)]
    order = [s.name for s in sorted(emitted, key=_delivery_rank)]
    assert order == ["first", "first-and-end", "end", "decode", "decode2"]  # (stable within a rank)
