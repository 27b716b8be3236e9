"""Speed of the results database (issue #14 targets): importing a 100k-request run (records,
series, timelines, conversations) under 10 s; the frontier over 1,000 points and the detail of
a 100k-request point under 100 ms each, from SQLite, through the API (in-process ASGI client).

The 100k-request run is synthetic but has a real run folder's files and shapes: 256 lanes of
sessions with subagent streams over an hour, 2 % errors, one `/metrics` scrape a second with the
vLLM names the sim exposes; its result.json comes from agentx's own summary.

    python benchmarks/results.py [--requests 100000] [--points 1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import msgspec
import numpy as np
from fastapi.testclient import TestClient

from agentx.metrics.summary import summarize
from agentx.records import Record, write_parquet
from agentx.results.api import create_app
from agentx.results.db import connect
from agentx.results.frontier import CANONICAL, frontier, load_points
from agentx.results.importer import import_run
from agentx.results.query import Filters
from agentx.results.points import insert_point, point_row

LANES = 256


def synth_run(folder: Path, n: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    isl = rng.lognormal(10.2, 0.6, n).astype(int) + 1000
    osl = rng.lognormal(5.5, 0.8, n).astype(int) + 2
    ttft = rng.lognormal(-0.5, 0.7, n)
    e2el = ttft + osl * rng.uniform(0.01, 0.03, n)
    lane = np.arange(n) % LANES
    clock = np.zeros(LANES)
    records = []
    for i in range(n):
        start = clock[lane[i]] + rng.exponential(2.0)
        clock[lane[i]] = start + e2el[i]
        tree = int(i // (LANES * 40)) * LANES + int(lane[i])
        stream = int(rng.integers(0, 3)) if rng.random() < 0.2 else 0
        error = "http_5xx" if rng.random() < 0.02 else None
        records.append(Record(
            run="bench", lane=int(lane[i]), tree=tree, replay=0, session=f"trace_{tree % 400:04d}", stream=stream,
            stream_kind="main" if stream == 0 else "subagent", node=i // LANES % 40, phase="warmup" if i < 2 * LANES
            else "profile", planned=float(start - 0.001), start=float(start), end=float(start + e2el[i]), isl_planned=int(isl[i]),
            osl_planned=int(osl[i]), theo_cached=int(isl[i] * 0.9), ttft=None if error else float(ttft[i]),
            isl=int(isl[i]), osl=None if error else int(osl[i]), cached=int(isl[i] * 0.85), chunks=int(osl[i]),
            error=error, status=500 if error else 200))
    with open(folder / "records.jsonl", "wb") as f:
        for r in records:
            f.write(msgspec.json.encode(r) + b"\n")
    write_parquet(records, folder)
    horizon = max(r.end for r in records)
    labels = 'engine="0",model_name="m"'
    scrapes = []
    for t in range(int(horizon) + 1):
        samples = {f"vllm:num_requests_running{{{labels}}}": float(rng.integers(100, 256)),
                   f"vllm:num_requests_waiting{{{labels}}}": float(rng.integers(0, 20)),
                   f"vllm:kv_cache_usage_perc{{{labels}}}": float(rng.uniform(0.5, 0.9)),
                   f"vllm:prefix_cache_queries_total{{{labels}}}": t * 9e5, f"vllm:prefix_cache_hits_total{{{labels}}}": t * 8e5,
                   f"vllm:prompt_tokens_total{{{labels}}}": t * 9e5, f"vllm:generation_tokens_total{{{labels}}}": t * 9e3}
        for source, share in (("local_compute", 1e5), ("local_cache_hit", 8e5), ("external_kv_transfer", 0.0)):
            samples[f'vllm:prompt_tokens_by_source_total{{{labels},source="{source}"}}'] = t * share
        scrapes.append({"t": float(t), "phase": "warmup" if t < 60 else "profile", "samples": samples})
    (folder / "server_metrics.jsonl").write_bytes(b"".join(msgspec.json.encode(s) + b"\n" for s in scrapes))
    info = {"run_id": f"bench-{n}", "start_time": "2026-11-30T00:00:00+00:00", "finished": True,
            "settings": {"concurrency": LANES, "gpus": 8, "hardware": "H200", "engine": "vllm", "model": "m",
                         "dataset": "synthetic", "duration": horizon, "clock_scale": 1.0}}
    (folder / "run.json").write_text(json.dumps(info))
    (folder / "result.json").write_text(json.dumps(summarize(records, info, scrapes, [])))


def fill_points(engine, count: int, seed: int = 2) -> None:
    rng = np.random.default_rng(seed)
    with engine.begin() as conn:
        for i in range(count):
            conc = int(2 ** rng.integers(0, 10))
            tput = float(rng.uniform(100, 5000) * np.log2(conc + 1))
            result = {"identity": {"hardware": ["H100", "H200", "B200", "MI355X"][i % 4], "gpus": 8,
                                   "engine": ["vllm", "sglang"][i // 4 % 2], "model": f"model-{i // 8 % 5}",
                                   "concurrency": conc},
                      "requests": {"profiled": 100, "succeeded": 100},
                      "request_metrics": {"throughput": {"total_tok_s_per_gpu": tput, "output_tok_s_per_gpu": tput / 30},
                                          "e2e_normalized_interactivity_tok_s": {"p50": 2e4 / tput, "p90": 1e4 / tput},
                                          "interactivity_tok_s": {"p50": 3e4 / tput, "p90": 2e4 / tput},
                                          "ttft_s": {"p50": tput / 5e3, "p90": tput / 2e3}}}
            labels = {k: result["identity"][k] for k in ("hardware", "gpus", "engine", "model")}
            insert_point(conn, labels, point_row(result, f"fill-{i}", "agentx"), {})


def best_ms(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--points", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        synth_run(tmp / "run", args.requests)
        jsonl_only = tmp / "jsonl"
        jsonl_only.mkdir()
        for name in ("run.json", "records.jsonl", "server_metrics.jsonl", "result.json"):
            (jsonl_only / name).write_bytes((tmp / "run" / name).read_bytes())
        info = json.loads((jsonl_only / "run.json").read_text())
        info["run_id"] += "-jsonl"
        (jsonl_only / "run.json").write_text(json.dumps(info))
        engine = connect(f"sqlite:///{tmp / 'results.db'}")
        rows = []
        for label, folder in (("records.parquet", tmp / "run"), ("records.jsonl only", jsonl_only)):
            t0 = time.perf_counter()
            point = import_run(engine, folder).point_id
            rows.append((f"import {args.requests:,}-request run ({label})", (time.perf_counter() - t0) * 1000, 10_000))
        fill_points(engine, args.points)
        client = TestClient(create_app(engine))
        gz = {"Accept-Encoding": "gzip"}
        n_points = len(load_points(engine, Filters(), *CANONICAL))
        rows.append((f"frontier, {n_points:,} points, canonical (in process)",
                     best_ms(lambda: frontier(load_points(engine, Filters(), *CANONICAL), *CANONICAL)), 100))
        rows.append((f"GET /frontier, {n_points:,} points, canonical",
                     best_ms(lambda: client.get("/api/v1/frontier", headers=gz)), 100))
        rows.append((f"GET /frontier, {n_points:,} points, x=p90_ttft y=tok_per_usd_neocloud",
                     best_ms(lambda: client.get("/api/v1/frontier?x=p90_ttft&y=tok_per_usd_neocloud", headers=gz)), 100))
        rows.append((f"GET /points/{{id}} ({args.requests:,}-request point detail)",
                     best_ms(lambda: client.get(f"/api/v1/points/{point}", headers=gz)), 100))
        timeline = client.get(f"/api/v1/points/{point}/timeline", headers=gz)
        rows.append((f"GET /points/{{id}}/timeline ({timeline.num_bytes_downloaded / 1e6:.1f} MB gzip)",
                     best_ms(lambda: client.get(f"/api/v1/points/{point}/timeline", headers=gz)), None))
    print(f"{'operation':<62} {'ms':>9} {'target ms':>10}")
    for name, ms, target in rows:
        print(f"{name:<62} {ms:>9.1f} {target if target else '-':>10}" + ("" if not target or ms < target else "  MISSED"))


if __name__ == "__main__":
    main()
