"""How fast the simulated engine streams, and how closely its token timing follows the model.

1. Throughput: the server pinned to one core (the client on the other), many concurrent
   streams, the modeled hardware sped up so far that the server is CPU-bound; prints output
   tokens per second received by the clients and per CPU-second of the server.
   Target (issue #3): >= 100k tok/s, so the sim never bottlenecks a client under test.
2. Accuracy: at --speed 1, concurrent streams all sent at once; the same requests are replayed
   through an in-process EngineCore to get the modeled token times; prints the error of the
   emitted inter-token gaps and of the TTFT (from the server's arrival time, read from its truth
   log) against the modeled ones.

    python benchmarks/sim_stream.py [--streams 256] [--tokens 1000] [--accuracy-streams 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np
import psutil

from cores import pin
from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore
from agentx.engine.launch import sim_server


TOKEN_MARK = b'"finish_reason":null'


async def stream(session: aiohttp.ClientSession, url: str, prompt: list[int], max_tokens: int, i: int) -> list[float]:
    """Send time and arrival time of every token event (Unix time), counted from raw SSE bytes."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
    times, t0, tail = [], time.time(), b""
    async with session.post(url + "/v1/completions", json=body, headers={"X-Correlation-ID": str(i)}) as r:
        assert r.status == 200, await r.text()
        async for chunk in r.content.iter_any():
            now = time.time()
            buf = tail + chunk
            times.extend([now] * buf.count(TOKEN_MARK))
            tail = buf[1 - len(TOKEN_MARK):]
    return [t0] + times


async def run_streams(url: str, prompts: list[list[int]], max_tokens: int) -> list[list[float]]:
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as s:
        return await asyncio.gather(*(stream(s, url, p, max_tokens, i) for i, p in enumerate(prompts)))


def distinct_prompt(i: int, n: int) -> list[int]:
    """Token ids in the vocabulary of every preset; prompts of different i share no block."""
    return [(i * 7919 + j) % 120_000 for j in range(n)]


def server_pid() -> int:
    me = psutil.Process()
    return next(c.pid for c in me.children() if "sim" in " ".join(c.cmdline()))


def throughput(streams: int, tokens: int) -> None:
    prompts = [distinct_prompt(i, 1000) for i in range(streams)]
    with sim_server("--speed", "10000", "--max-num-seqs", str(streams)) as url:
        pid = server_pid()
        pin(pid, 0)
        pin(os.getpid(), 1)
        proc = psutil.Process(pid)
        asyncio.run(run_streams(url, prompts[:4], 4))  # warm up
        cpu0, t0 = sum(proc.cpu_times()[:2]), time.time()
        results = asyncio.run(run_streams(url, prompts, tokens))
        wall, cpu = time.time() - t0, sum(proc.cpu_times()[:2]) - cpu0
    total = sum(len(r) - 1 for r in results)
    assert total == streams * tokens, f"lost tokens: {total} of {streams * tokens}"
    print(f"throughput: {streams} concurrent streams x {tokens} tokens, server pinned to one core")
    print(f"{'tokens':>10} {'wall s':>8} {'server CPU s':>13} {'tok/s':>10} {'tok per CPU-s':>14}")
    print(f"{total:>10,} {wall:>8.2f} {cpu:>13.2f} {total / wall:>10,.0f} {total / cpu:>14,.0f}")
    print(f"target >= 100,000 tok/s: {'met' if total / wall >= 100_000 else 'NOT met'}\n")


def modeled_times(prompts: list[list[int]], max_tokens: int, sent: list[float]) -> list[list[float]]:
    """Token times of the same requests in virtual time, each arriving when the client sent it
    (an arrival during an iteration joins the next one, as in the server)."""
    core = EngineCore(EngineConfig())
    seqs = [core.new_sequence(str(i), p, max_tokens, ignore_eos=True) for i, p in enumerate(prompts)]
    pending = sorted(zip(sent, range(len(seqs))))
    times = {s.id: [t] for t, s in zip(sent, seqs)}
    while pending or not core.idle:
        if core.idle:
            core.now = max(core.now, pending[0][0])
        while pending and pending[0][0] <= core.now:
            core.add(seqs[pending.pop(0)[1]], core.now)
        for s in core.step().emitted:
            times[s.id].append(core.now)
    return [times[s.id] for s in seqs]


def accuracy(streams: int, tokens: int) -> None:
    prompts = [distinct_prompt(i, 4000) for i in range(streams)]
    with tempfile.TemporaryDirectory() as tmp:
        truth = Path(tmp) / "truth.jsonl"
        with sim_server("--speed", "1", "--truth-log", str(truth)) as url:
            asyncio.run(run_streams(url, [distinct_prompt(streams, 4000)], 2))  # warm up, other tokens
            measured = asyncio.run(run_streams(url, prompts, tokens))
        arrival = {r["correlation_id"]: r["arrival"] for r in map(json.loads, truth.read_text().splitlines())
                   if "stall" not in r}
    # measure from the server's arrival time, so the client's own send overhead does not count
    for i, m in enumerate(measured):
        m[0] = arrival[str(i)]
    first = min(m[0] for m in measured)
    modeled = modeled_times(prompts, tokens, [m[0] - first for m in measured])
    gap_err, ttft_err, itl_meas, itl_model = [], [], [], []
    for got, want in zip(measured, modeled):
        g, w = np.diff(got), np.diff(want)
        ttft_err.append(g[0] - w[0])
        gap_err.extend(g[2:] - w[2:])  # after the first tokens every stream is in the same batch
        itl_meas.extend(g[2:])
        itl_model.extend(w[2:])
    gap_err, ttft_err = np.abs(gap_err) * 1e3, np.array(ttft_err) * 1e3
    print(f"accuracy: {streams} concurrent streams x {tokens} tokens, 4,000-token prompts, speed 1")
    print(f"{'what':<34} {'modeled':>10} {'emitted':>10} {'|err| p50':>10} {'|err| p95':>10}")
    print(f"{'inter-token gap, ms (mean)':<34} {np.mean(itl_model) * 1e3:>10.2f} {np.mean(itl_meas) * 1e3:>10.2f} "
          f"{np.percentile(gap_err, 50):>10.2f} {np.percentile(gap_err, 95):>10.2f}")
    ttft_model = np.mean([w[1] for w in modeled]) * 1e3
    ttft_meas = np.mean([g[1] - g[0] for g in measured]) * 1e3
    print(f"{'TTFT, ms (mean)':<34} {ttft_model:>10.2f} {ttft_meas:>10.2f} "
          f"{np.percentile(np.abs(ttft_err), 50):>10.2f} {np.percentile(np.abs(ttft_err), 95):>10.2f}")
    total_model = np.mean([w[-1] for w in modeled])
    total_meas = np.mean([g[-1] - g[0] for g in measured])
    print(f"stream duration: modeled {total_model:.3f} s, emitted {total_meas:.3f} s "
          f"({(total_meas / total_model - 1) * 100:+.1f}%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--accuracy-streams", type=int, default=16)
    ap.add_argument("--accuracy-tokens", type=int, default=300)
    args = ap.parse_args()
    throughput(args.streams, args.tokens)
    accuracy(args.accuracy_streams, args.accuracy_tokens)


if __name__ == "__main__":
    main()
