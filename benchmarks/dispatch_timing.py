"""Dispatch lateness at 6 lanes against the simulated engine, where due times keep falling while
other lanes' requests are in flight (issue #13: against vLLM such requests left 400-500 ms late,
at the next completion). Three runs: no server-metrics scraping, the sim's own /metrics (~15 KB
a second), and a 480 KB exposition (the sim's for 32 engines, the size of a deployment with many
engines and histograms). Prints, over the profiling requests whose due time fell inside another
lane's request, lateness p50 / p99 / max (wall ms), the client's CPU and the share of the window
its loop's thread waited for a CPU (a shared host shows there). Target: p99 under 5 ms.

    python benchmarks/dispatch_timing.py [--duration 600] [--speed 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentx.data import sample_traces  # noqa: E402
from agentx.engine.launch import sim_server  # noqa: E402
from agentx.records import read_records  # noqa: E402
from agentx.replay.driver import bench  # noqa: E402
from agentx.replay.settings import BenchSettings  # noqa: E402
from agentx.traces.load import load_sessions  # noqa: E402
from tests.realengine.llamacpp import free_port, server_process  # noqa: E402


def run(url: str, out: Path, speed: float, duration: float, metrics: str | None) -> tuple:
    s = BenchSettings.build(url=url, concurrency=6, duration=duration, out=str(out), clock_scale=speed,
                            warmup_requests_per_lane=2, grace=10, server_metrics=metrics)
    result = bench(s, load_sessions([sample_traces()], None))
    prof = [r for r in read_records(out) if r.phase == "profile"]
    crossed = [r for r in prof if any(o.start < r.planned < o.end for o in prof if o.lane != r.lane)]
    late = sorted((r.start - r.planned) * 1000 / speed for r in crossed)
    health = result["client_health"]
    return (len(crossed), late[len(late) // 2], late[int(0.99 * len(late))], late[-1], health["cpu_percent"],
            health["runqueue_wait_percent"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=600.0, help="modeled seconds of profiling per run")
    ap.add_argument("--speed", type=float, default=20.0)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sim_server("--speed", str(args.speed)) as url:
        with urllib.request.urlopen(url + "/metrics") as r:
            one = r.read().decode()
        folder = Path(tmp) / "big"
        folder.mkdir()
        (folder / "metrics").write_text("".join(one.replace('engine="0"', f'engine="{i}"') for i in range(32)))
        port = free_port()
        cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(folder)]
        with server_process(cmd, f"http://127.0.0.1:{port}", startup_s=30, health="/metrics") as big:
            for label, metrics in (("no scraping", None), ("sim /metrics, 15 KB", ""),
                                   ("480 KB exposition", big + "/metrics")):
                rows.append((label, *run(url, Path(tmp) / label.replace(" ", "_"), args.speed, args.duration,
                                          metrics)))
    print(f"{'scraping':>22} {'crossed':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'client CPU':>11} "
          f"{'run-queue wait':>15}")
    for label, n, p50, p99, worst, cpu, waited in rows:
        print(f"{label:>22} {n:>8} {p50:>8.2f} {p99:>8.2f} {worst:>8.2f} {cpu:>10.1f}% "
              f"{'-' if waited is None else f'{waited:.1f}%':>15}")
    print("target: p99 under 5 ms")


if __name__ == "__main__":
    main()
