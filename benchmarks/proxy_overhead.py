"""The TTFT the recording proxy adds (issue #5: at most a millisecond or two).

A simulated engine runs 1000x faster than the hardware it models, so its own TTFT is short and
steady; `agentx capture proxy` records in front of it. The same streaming chat requests go
directly to the engine and through the proxy, alternating, at concurrency 1 and 64; the client
takes TTFT as the time from sending to the first content byte. Prints TTFT p50/p99 both ways and
the difference, the proxy's CPU time per proxied request, and checks that the store recorded
every proxied request. On a 2-core machine the engine, the proxy and the client share the cores,
so at concurrency 64 (back-to-back requests, hundreds per second) the added TTFT is mostly the
three processes queueing for CPU; the CPU per request is the proxy's own cost.

    python benchmarks/proxy_overhead.py [--requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import urllib.request
import json
from pathlib import Path

import aiohttp
import numpy as np
import psutil

from agentx.capture.recordings import read_rows
from agentx.engine.launch import agentx_server, sim_server


async def _ttft(http: aiohttp.ClientSession, url: str, body: dict) -> float:
    t0 = time.perf_counter()
    async with http.post(url + "/v1/chat/completions", json=body) as resp:
        first = None
        async for chunk in resp.content.iter_any():
            if first is None and b'"content":" ' in chunk:
                first = time.perf_counter()
        return first - t0


async def _measure(direct: str, proxied: str, model: str, concurrency: int, n: int) -> dict[str, list[float]]:
    out = {"direct": [], "proxy": []}
    body = {"model": model, "max_tokens": 32, "ignore_eos": True, "stream": True,
            "messages": [{"role": "user", "content": "benchmark " * 500}]}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        async def lane(i):
            for k in range(n // concurrency):
                which = "direct" if (i + k) % 2 else "proxy"
                out[which].append(await _ttft(http, direct if which == "direct" else proxied, body))

        await asyncio.gather(*(lane(i) for i in range(concurrency)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=400)
    args = ap.parse_args()
    store = Path(tempfile.mkdtemp()) / "overhead.db"
    with sim_server("--speed", "1000") as sim:
        with urllib.request.urlopen(sim + "/v1/models") as resp:
            model = json.load(resp)["data"][0]["id"]
        with agentx_server("capture", "proxy", "--upstream", sim, "--listen", "127.0.0.1:0", "--store", str(store)) as px:
            proxy = next(p for p in psutil.Process().children() if "capture" in p.cmdline())
            asyncio.run(_measure(sim, px, model, 4, 40))  # warm connections and caches
            results, cpu = {}, {}
            for c in (1, 8, 64):
                before = sum(proxy.cpu_times()[:2])
                results[c] = asyncio.run(_measure(sim, px, model, c, args.requests))
                cpu[c] = (sum(proxy.cpu_times()[:2]) - before) / len(results[c]["proxy"])
    print(f"{'concurrency':>11} {'requests':>9} {'direct p50 ms':>14} {'proxy p50 ms':>13} {'added p50 ms':>13} "
          f"{'direct p99 ms':>14} {'proxy p99 ms':>13} {'proxy CPU ms/req':>17}")
    for c, r in results.items():
        d, p = np.array(r["direct"]) * 1000, np.array(r["proxy"]) * 1000
        print(f"{c:>11} {len(d) + len(p):>9} {np.median(d):>14.2f} {np.median(p):>13.2f} "
              f"{np.median(p) - np.median(d):>13.2f} {np.percentile(d, 99):>14.2f} {np.percentile(p, 99):>13.2f} "
              f"{cpu[c] * 1000:>17.2f}")
    rows = list(read_rows(store))
    proxied = sum(len(r["proxy"]) for r in results.values()) + 20
    ok = sum(1 for r in rows if r.status == 200 and r.error is None)
    print(f"recorded {ok} of {proxied} proxied requests")


if __name__ == "__main__":
    main()
