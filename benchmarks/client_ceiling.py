"""The replayer client's own ceiling, against a server that streams instantly.

1. Streaming: an instant server (one token per SSE frame, frames written as fast as aiohttp
   can) pinned to one core, agentx's client (`agentx.replay.http.client.Client`) pinned to the other;
   at concurrency 64 and 256, every lane sends back-to-back requests, flat out (1,000 tokens
   each, the server writing as fast as it can: the client's ceiling) and paced so that all
   streams together offer 35k tok/s (200 tokens each). Prints streamed tokens/s, client CPU,
   tokens/s per client core, and the client's self-induced TTFT (the server answers at once, so
   TTFT is what the client and the loopback add; each lane's first request, which also opens
   its connection, is left out). Target (issue #4): >= 35k tok/s per core, TTFT p50 < 5 ms. (AIPerf 0.13 on one core:
   ~8.6k tok/s, median self-induced TTFT 1.6 s at concurrency 64 on this kind of machine.)
2. Replay: `agentx bench` (a process of its own) replays a synthetic 393-session AgentX-shaped
   corpus at 512 lanes against the instant server, streaming flat out and paced at 100 tok/s
   per stream (a fast GPU deployment); prints the client's peak RSS (target <= 2 GB) and
   dispatch lateness p50/p99 (target p99 <= 2 ms) over the profiling window.
3. The agentic shape (issue #29): `agentx bench --workers W` (W = 1, 2 and one per core) replays
   the bundled traces and the synthetic corpus (256k) against the instant server, back to back
   (`--idle-cap 0 --system-idle-cap 0`: no tool-call gaps, the client flat out), and prints total
   (input + output) tok/s and requests/s over the window, and per client core: tokens and
   requests per CPU second of the client (the driver's and every worker's CPU during the run).
   A deployment serving X total tok/s of this traffic needs X / (tok/s per client core) client
   cores. AIPerf beside it where it is installed (`--aiperf PATH`, else `aiperf` on PATH; never a
   dependency of agentx): its Mooncake-trace input replays the requests the `--workers 1` run
   sent (at most `--aiperf-rows`, evenly spaced), same concurrency and window, its process tree's CPU
   over its profiling window (benchmarks/aiperf_replay.py says how, and why its tokenizer is a
   local Hub-cache entry).

    python benchmarks/client_ceiling.py [--seconds 15] [--replay-seconds 60] [--corpus DIR] [--only-agentic]
                                        [--aiperf /tmp/aiperf-venv/bin/aiperf] [--aiperf-rows 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from aiperf_replay import find_aiperf, run_aiperf, write_rows
from cores import pin
from corpora import synthetic_393
from agentx.serving import run_async  # uvloop where available, as `agentx bench` runs

MAX_TOKENS = re.compile(rb'"max_tokens":\s*(\d+)')
FRAME = b'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}]}\n\n'


async def instant_server(port: int, stream_pace: float = 0.0) -> None:
    """`stream_pace` > 0 paces every stream at that many tokens/s (unless a request asks
    otherwise with X-Pace)."""
    from aiohttp import web

    async def completions(request: web.Request):
        body = await request.read()
        m = MAX_TOKENS.search(body[:400]) or MAX_TOKENS.search(body[-400:])  # agentx's first, AIPerf's last
        n = int(m.group(1)) if m else 16
        pace = float(request.headers.get("X-Pace", stream_pace))  # tokens/s for this stream; 0: flat out
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        batch = 16 if pace else 32
        t = time.perf_counter()
        for i in range(0, n, batch):
            await resp.write(FRAME * min(batch, n - i))
            if pace:
                t += batch / pace
                await asyncio.sleep(max(0.0, t - time.perf_counter()))
        usage = {"choices": [], "usage": {"prompt_tokens": None, "completion_tokens": n}}
        await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        return resp

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "instant", "object": "model"}]})

    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


def start_server(stream_pace: float = 0.0) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--stream-pace", str(stream_pace)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    pin(proc.pid, 0)
    return proc, f"http://127.0.0.1:{port}"


async def streaming(url: str, concurrency: int, seconds: float, total_rate: float = 0.0, server_pid: int = 0) -> dict:
    """Lanes of back-to-back 1,000-token streams; `total_rate` > 0 paces the server so that all
    streams together offer that many tokens/s (0: the server streams flat out)."""
    from agentx.replay.http.client import Client

    n = 200 if total_rate else 1000  # paced: short answers, so every lane sends many requests
    body = b'{"model":"instant","max_tokens":%d,"stream":true,"prompt":[1,2,3]}' % n
    ttfts, tokens, errors = [], 0, 0
    headers = {"X-Pace": str(total_rate / concurrency)} if total_rate else {}
    deadline = time.perf_counter() + seconds

    async with Client(url, 60) as client:
        async def lane():
            nonlocal tokens, errors
            first = True
            while time.perf_counter() < deadline:
                r = await client.send("/v1/completions", body, headers)
                if r.error:
                    errors += 1
                    continue
                tokens += r.chunks
                if not first:  # a lane's first request also pays for opening its connection
                    ttfts.append(r.first - r.start)
                first = False

        server = psutil.Process(server_pid)
        scpu0 = sum(server.cpu_times()[:2])
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        server_cpu = sum(server.cpu_times()[:2]) - scpu0
    t = np.array(ttfts) * 1000
    return {"concurrency": concurrency, "offered": total_rate, "tokens": tokens, "wall": wall, "cpu": cpu, "tok_s": tokens / wall,
            "tok_s_per_core": tokens / cpu, "ttft_p50": float(np.percentile(t, 50)),
            "ttft_p99": float(np.percentile(t, 99)), "errors": errors, "server_cpu_pct": 100 * server_cpu / wall}


def replay(url: str, corpus: Path, lanes: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--model", "instant", "--traces", str(corpus),
               "--concurrency", str(lanes), "--duration", str(seconds), "--warmup-requests-per-lane", "2",
               "--server-metrics", "none", "--out", str(out), "--grace", "30"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        pin(proc.pid, 1)
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"bench failed: {err[-2000:]}")
        run, result = json.loads((out / "run.json").read_text()), json.loads((out / "result.json").read_text())
    late = result["client_health"]["dispatch_lateness_ms"]
    return {"lanes": lanes, "requests": result["requests"]["total"], "rss_mb": run["client"]["peak_rss_mb"],
            "late_p50": late["p50"], "late_p99": late["p99"], "cpu": run["client"]["cpu_percent"]}


def agentic(url: str, traces: list[str], lanes: int, seconds: float, workers: int) -> dict:
    """One `agentx bench --workers W` run, back to back, against the instant server."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--model", "instant", *traces,
               "--concurrency", str(lanes), "--duration", str(seconds), "--warmup-requests-per-lane", "1",
               "--idle-cap", "0", "--system-idle-cap", "0", "--server-metrics", "none", "--workers", str(workers),
               "--out", str(out), "--grace", "30", "--allow-invalid"]
        load = os.getloadavg()[0]
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"bench failed: {proc.stderr[-2000:]}")
        run, result = json.loads((out / "run.json").read_text()), json.loads((out / "result.json").read_text())
        tokens = requests = 0
        sent = []  # (session, input, output) of every request, in the order sent: AIPerf's request set
        for r in sorted((json.loads(line) for line in (out / "records.jsonl").read_bytes().splitlines()),
                        key=lambda r: r["start"]):
            sent.append((r["session"], r["isl_planned"], r["osl_planned"]))
            if not r.get("error"):
                tokens += r["isl_planned"] + (r.get("osl") or 0)
                requests += 1
    client = run["client"]
    cpu = client["cpu_s"] + sum(w.get("cpu_s", 0.0) for w in client.get("workers", []))
    tp = result["request_metrics"]["throughput"]
    return {"workers": workers, "tok_s": tp["total_tok_s"], "req_s": tp["requests_per_s"], "cpu": cpu,
            "tok_per_cpu_s": tokens / cpu, "req_per_cpu_s": requests / cpu, "errors": sum(result["requests"]["errors"].values()),
            "load": (load + os.getloadavg()[0]) / 2, "isl_mean": tokens / max(1, requests), "sent": sent}


def agentic_table(url: str, corpus: Path, lanes: int, seconds: float, aiperf: str | None = None,
                  aiperf_rows: int = 1000) -> None:
    cores = len(os.sched_getaffinity(0))
    counts = sorted({1, 2, cores})
    exe = find_aiperf(aiperf)
    print(f"3. the agentic shape: agentx bench --workers W against the instant server, {lanes} lanes back to back, "
          f"{seconds:g} s window ({cores} cores here, the server on one of them)")
    print(f"{'traces':<26} {'client':>9} {'total tok/s':>12} {'req/s':>7} {'client CPU s':>12} {'tok/s per core':>15} "
          f"{'req/s per core':>14} {'mean tokens/req':>15} {'errors':>6} {'load':>5}")
    bundled = Path(__import__("agentx").__file__).parent / "data" / "weka"
    for name, traces, source in (("bundled (14 real)", [], [str(bundled)]),
                                 ("synthetic 393 (256k)", ["--traces", str(corpus), "--max-context", "256k"],
                                  [str(corpus), "--max-context", "256k"])):
        sent = []
        for w in counts:
            r = agentic(url, traces, lanes, seconds, w)
            sent = sent or r["sent"]
            _agentic_row(name, f"agentx W{w}", r)
        if exe:
            _agentic_row(name, "AIPerf", _aiperf(exe, url, source, sent, lanes, seconds, aiperf_rows))
    print(f"AIPerf: {exe} (its Mooncake-trace input: the requests agentx sent with --workers 1, at most "
          f"{aiperf_rows:,} rows, drawn in a seeded shuffle)" if exe else
          "AIPerf: not found (pass --aiperf PATH, e.g. /tmp/aiperf-venv/bin/aiperf after pip install "
          "aiperf==0.13.0 in a venv of its own), so no AIPerf rows")
    print()


def _agentic_row(name: str, client: str, r: dict) -> None:
    if "error" in r:
        print(f"{name:<26} {client:>9} failed: {r['error'].splitlines()[-1] if r['error'] else ''}")
        return
    print(f"{name:<26} {client:>9} {r['tok_s']:>12,.0f} {r['req_s']:>7,.1f} {r['cpu']:>12.1f} "
          f"{r['tok_per_cpu_s']:>15,.0f} {r['req_per_cpu_s']:>14,.1f} {r['isl_mean']:>15,.0f} "
          f"{r['errors']:>6} {r['load']:>5.1f}")


def _aiperf(exe: str, url: str, source: list[str], sent: list, lanes: int, seconds: float, limit: int) -> dict:
    """AIPerf on the requests the agentx run sent (see aiperf_replay.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        mooncake = work / "export.jsonl"
        subprocess.run([sys.executable, "-m", "agentx.cli", "trace", "convert", *source, "--to", "mooncake",
                        "--out", str(mooncake)], check=True, stdout=subprocess.DEVNULL)
        rows, matched = write_rows(sent, mooncake, work / "rows.jsonl", limit)
        print(f"  AIPerf's request set: {rows:,} of the {len(sent):,} requests agentx sent, evenly spaced "
              f"({matched:,} with their trace's hash ids)", flush=True)
        return run_aiperf(exe, url, work / "rows.jsonl", work, lanes, seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--stream-pace", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--replay-seconds", type=float, default=60.0)
    ap.add_argument("--lanes", type=int, default=512)
    ap.add_argument("--corpus", type=Path, help="a synthetic corpus folder (made with agentx trace synth if absent)")
    ap.add_argument("--agentic-lanes", type=int, default=32)
    ap.add_argument("--agentic-seconds", type=float, default=20.0)
    ap.add_argument("--only-agentic", action="store_true", help="only the agentic-shape table (3)")
    ap.add_argument("--aiperf", help="an aiperf executable (AIPerf 0.13, a venv of its own) for section 3's "
                    "AIPerf rows (default: aiperf on PATH; absent: no AIPerf rows)")
    ap.add_argument("--aiperf-rows", type=int, default=1000, help="at most this many of agentx's requests for AIPerf")
    args = ap.parse_args()
    if args.serve:
        run_async(instant_server(args.serve, args.stream_pace))
        return
    server, url = start_server()
    try:
        if args.only_agentic:
            agentic_table(url, args.corpus or synthetic_393(Path(tempfile.mkdtemp())), args.agentic_lanes, args.agentic_seconds, args.aiperf,
                          args.aiperf_rows)
            return
        pin(os.getpid(), 1)
        print("1. streaming against an instant server (server on core 0, client on core 1)")
        print(f"{'concurrency':>11} {'offered tok/s':>14} {'tokens':>10} {'tok/s':>9} {'client CPU s':>13} "
              f"{'tok/s per core':>15} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'errors':>7} {'server CPU %':>13}")
        for c in (64, 256):
            for rate in (0, 35_000):
                r = run_async(streaming(url, c, args.seconds, rate, server.pid))
                print(f"{c:>11} {'flat out' if not rate else f'{rate:,}':>14} {r['tokens']:>10,} {r['tok_s']:>9,.0f} "
                      f"{r['cpu']:>13.2f} {r['tok_s_per_core']:>15,.0f} {r['ttft_p50']:>12.2f} {r['ttft_p99']:>12.2f} "
                      f"{r['errors']:>7} {r['server_cpu_pct']:>13.0f}")
        print("target: >= 35,000 tok/s per core, TTFT p50 < 5 ms (flat out: the client's ceiling, its TTFT is the "
              "backlog of a saturated loop;\n35,000 offered: the TTFT the client adds while it sustains that rate)\n")
        corpus = args.corpus
        tmp = None
        if corpus is None:
            tmp = tempfile.TemporaryDirectory()
            corpus = synthetic_393(Path(tmp.name))
        print(f"2. replay of a synthetic 393-session corpus, {args.lanes} lanes, {args.replay_seconds:g} s profiling")
        print(f"{'server streams':>22} {'requests':>9} {'peak RSS MB':>12} {'lateness p50 ms':>16} "
              f"{'lateness p99 ms':>16} {'client CPU %':>13}")
        for pace in (0.0, 100.0):
            paced, paced_url = (server, url) if not pace else start_server(pace)
            try:
                r = replay(paced_url, corpus, args.lanes, args.replay_seconds)
            finally:
                if pace:
                    paced.terminate()
                    paced.wait()
            label = "flat out" if not pace else f"{pace:g} tok/s per stream"
            print(f"{label:>22} {r['requests']:>9,} {r['rss_mb']:>12,.0f} {r['late_p50']:>16.2f} "
                  f"{r['late_p99']:>16.2f} {r['cpu']:>13.0f}")
        print("targets: peak RSS <= 2,048 MB, dispatch lateness p99 <= 2 ms\n")
        agentic_table(url, corpus, args.agentic_lanes, args.agentic_seconds, args.aiperf, args.aiperf_rows)
        if tmp:
            tmp.cleanup()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
