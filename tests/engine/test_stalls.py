"""The sim's own event-loop stalls (issue #24, SPEC section 6 "Loop stalls"): a deliberately
blocked loop is recorded (metric and truth-log line, with its phase), a normal short run records
none of the sim's own, and the engine's wait for a body being read sees a body queued before the
wait began (the lost wake-up that held the demo's engine 0.2-1 s)."""

import asyncio
import json
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentx.engine.config import ServeConfig
from agentx.engine.launch import sim_server
from agentx.engine.metrics import exposition
from agentx.engine.serve.app import SimServer
from agentx.engine.stalls import STALL_S, LoopWatch

BLOCK_S = 0.3  # a deliberate block, 6x the stall threshold


def stall_samples(text: str) -> dict:
    return {s.name + "".join(f"[{v}]" for k, v in s.labels.items() if k == "phase"): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples if s.name.startswith("agentx_sim:loop")}


def test_a_deliberately_blocked_phase_is_a_stall():
    lines = []
    watch = LoopWatch(log=lines.append)
    watch.start()
    try:
        mark = watch.mark()
        time.sleep(BLOCK_S)
        watch.end(mark, "parse", lambda: {"prompt_tokens": 120_000})
    finally:
        watch.stop()
    assert watch.count == 1 and watch.by_phase == {"parse": 1} and watch.max_s >= BLOCK_S
    assert sum(watch.hist.counts) == 1 and watch.hist.sum >= BLOCK_S
    (record,) = [line["stall"] for line in lines]
    assert record["phase"] == "parse" and record["prompt_tokens"] == 120_000 and record["wall_s"] >= BLOCK_S
    assert 0 <= record["cpu_s"] < record["wall_s"]  # asleep: the CPU was not ours
    assert {"majflt", "inblock", "oublock", "nvcsw", "nivcsw"} <= set(record)


def test_a_phase_under_the_threshold_is_not_a_stall():
    watch = LoopWatch(threshold=3600.0, log=pytest.fail)
    mark = watch.mark()
    time.sleep(0.01)
    watch.end(mark, "parse", pytest.fail)  # (info is made only for a stall)
    assert watch.count == 0 and watch.max_s == 0 and sum(watch.hist.counts) == 0


async def blocked_server(server: SimServer, port: int, block_s: float) -> bytes:
    """One streamed request served in-process, the whole loop blocked `block_s` mid-answer; the
    server's /metrics text."""
    async with aiohttp.ClientSession() as http:
        body = {"prompt": list(range(1000, 3000)), "max_tokens": 300, "ignore_eos": True, "stream": True}

        async def answer():
            async with http.post(f"http://127.0.0.1:{port}/v1/completions", json=body) as resp:
                assert resp.status == 200
                await resp.read()

        task = asyncio.create_task(answer())
        await asyncio.sleep(0.3)
        time.sleep(block_s)  # the whole loop held: no timer, no socket, no engine step
        await task
    return exposition(server.core, server.stats, server.model_name)


@pytest.mark.anyio
async def test_the_server_records_a_blocked_loop(sim_in_process, tmp_path):
    server, port = sim_in_process
    text = await blocked_server(server, port, BLOCK_S)
    # the block was no phase of the server's: the engine's timed sleep woke that late
    assert server.watch.by_phase.get("wakeup", 0) >= 1 and server.watch.max_s >= BLOCK_S - 0.1
    m = stall_samples(text.decode())
    assert m["agentx_sim:loop_stall_seconds_count"] == server.watch.count >= 1
    assert m["agentx_sim:loop_stall_max_seconds"] == pytest.approx(server.watch.max_s)
    assert m["agentx_sim:loop_stalls_total[wakeup]"] == server.watch.by_phase["wakeup"]
    lines = [json.loads(line) for line in (tmp_path / "truth.jsonl").read_text().splitlines()]
    stalls = [line["stall"] for line in lines if "stall" in line]
    assert len(stalls) == server.watch.count and any(s["phase"] == "wakeup" and s["wall_s"] >= BLOCK_S - 0.1
                                                     for s in stalls)
    assert all({"running", "waiting", "longest_prompt"} <= set(s["engine"]) for s in stalls)
    (request,) = [line for line in lines if "stall" not in line]  # the request's own line is unchanged
    assert request["prompt_tokens"] == 2000 and request["completion_tokens"] == 300


def test_a_normal_short_run_has_the_metric_and_no_stall_of_its_own(tmp_path):
    """The series are there from the start; a short run logs no stall of the sim's own work. A
    stall the host caused (the process off the CPU: little CPU in it) may show on a busy machine,
    so only those are allowed."""
    log = tmp_path / "truth.jsonl"
    with sim_server("--speed", "20", "--truth-log", str(log)) as base:
        async def run():
            async with aiohttp.ClientSession() as s:
                for i in range(5):
                    body = {"prompt": list(range(100 * i, 100 * i + 2000)), "max_tokens": 20, "stream": True}
                    async with s.post(base + "/v1/completions", json=body) as r:
                        assert r.status == 200
                        await r.read()
                async with s.get(base + "/metrics") as r:
                    return await r.text()

        m = stall_samples(asyncio.run(run()))
    assert {"agentx_sim:loop_stall_seconds_count", "agentx_sim:loop_stall_seconds_sum",
            "agentx_sim:loop_stall_max_seconds"} <= set(m)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    stalls = [line["stall"] for line in lines if "stall" in line]
    assert len(lines) - len(stalls) == 5
    assert not [s for s in stalls if s["cpu_s"] >= max(STALL_S, s["wall_s"] / 2)]  # none of the sim's own work
    if not stalls:
        assert m["agentx_sim:loop_stall_seconds_count"] == 0 == m["agentx_sim:loop_stall_max_seconds"]


def test_the_engine_does_not_wait_for_a_body_queued_before_its_wait_began():
    """The lost wake-up (issue #24): the engine held an iteration for a body still being read,
    and the body was queued while the engine delivered its last tokens, before the wait; the wait
    cleared that signal and slept until another request came or the order wait (1 s) ran out."""
    async def scenario():
        server = SimServer(ServeConfig())
        loop = asyncio.get_running_loop()
        head = loop.time()
        turn = asyncio.Event()
        server.engine.reading[turn] = head  # being read when the engine held its iteration
        start = head + 0.001
        assert server.engine._read_before(start, loop.time()) == head
        del server.engine.reading[turn]  # then queued (the handler's `finally`) before the wait began
        server.engine.queued.set()
        waiting = server.engine._wait_read(start)
        with pytest.raises(StopIteration):
            waiting.send(None)  # returns without suspending: nothing is left to wait for

        server.engine.reading[turn] = head  # still being read when the wait begins: it waits ...
        task = asyncio.create_task(server.engine._wait_read(start))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done()
        del server.engine.reading[turn]  # ... until it is queued
        server.engine.queued.set()
        await asyncio.wait_for(task, 30)
        later = asyncio.Event()
        server.engine.reading[later] = start + 0.01  # a head after the iteration's start holds nothing
        with pytest.raises(StopIteration):
            server.engine._wait_read(start).send(None)

    asyncio.run(scenario())
