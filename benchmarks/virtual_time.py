"""Virtual time: what a run costs without HTTP or waiting, and against the same run over HTTP.

0. Rack scale (issue #29): the cost is per modeled event, not per lane or token. Two rows, each
   `agentx sim bench` in a process of its own pinned to one core: the fixed-sequence baseline
   `--scenario 1k1k` at 1,024 lanes (`--max-num-seqs 1024`, 8 x H200, Qwen3-235B-A22B) for 300
   modeled s (bound: 30 s, 1 GB), and one modeled hour of profiling at 2,048 lanes of the
   393-session corpus (256k) on a 72-GPU deployment, 9 replicas of 8 x GB200 behind a
   session-affinity router (bound: 60 s, 2 GB). Wall s is the whole command; CPU s the process's
   (traces loaded, warmup, report); peak RSS the process's; load average beside each row (the
   machine may be shared: CPU s is the figure a busy machine does not inflate).

1. `agentx sim bench` on the synthetic 393-session AgentX-shaped corpus (256k variant), the
   default 8 x H200 deployment, `--lanes` lanes (default 384) for `--duration` modeled seconds
   of profiling (default 3600) after the usual warmup: wall time, CPU time, peak memory, and
   the modeled time it covered (warmup included), in a process of its own pinned to one core.
2. The ratio against HTTP: the same settings at a point small enough to run over HTTP here
   (`--http-lanes`, `--http-duration`; `agentx bench` against `agentx sim serve --speed S`, both
   processes of their own): wall time both ways. The HTTP path cannot run faster than its
   speed-up allows, so for the large point its wall time is at least modeled time / speed,
   printed as a bound.

    python benchmarks/virtual_time.py [--lanes 384] [--duration 3600] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cores import pin
from corpora import synthetic_393

SPEED = 10.0  # of the HTTP comparison's simulated server


def run(cmd: list[str], core: int | None = None) -> float:
    """Run an agentx command (a process of its own); its wall time."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "agentx.cli", *cmd], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    if core is not None:
        pin(proc.pid, core)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"agentx {' '.join(cmd[:2])} failed: {err[-2000:]}")
    return time.perf_counter() - t


def virtual(corpus: Path, out: Path, lanes: int, duration: float) -> dict:
    wall = run(["sim", "bench", "--traces", str(corpus), "--max-context", "256k", "--concurrency", str(lanes),
                "--duration", str(duration), "--out", str(out)], core=0)
    info, result = json.loads((out / "run.json").read_text()), json.loads((out / "result.json").read_text())
    client = info["client"]
    return {"wall": wall, "cpu": client["cpu_s"], "rss": client["peak_rss_mb"], "modeled": client["modeled_s"],
            "requests": result["requests"]["total"], "result": result}


def rack(corpus: Path, out: Path, name: str, argv: list[str]) -> dict:
    """One rack-scale row: the whole process's wall, CPU and peak RSS."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    wall = run(["sim", "bench", *argv, "--out", str(out)], core=0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    info = json.loads((out / "run.json").read_text())
    result = json.loads((out / "result.json").read_text())
    return {"name": name, "wall": wall, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "loop_cpu": info["client"]["cpu_s"], "rss": info["client"]["peak_rss_mb"],
            "modeled": info["client"]["modeled_s"], "requests": result["requests"]["total"],
            "load": (load + os.getloadavg()[0]) / 2}


RACK_ROWS = [  # (name, sim bench arguments, wall bound s, memory bound MB)
    ("1k1k, 1,024 lanes x 300 s, 8 x H200", ["--scenario", "1k1k", "--concurrency", "1024", "--max-num-seqs", "1024",
                                            "--duration", "300"], 30, 1024),
    ("393 sessions (256k), 2,048 lanes x 3,600 s, 9 x (8 x GB200)",
     ["--traces", "{corpus}", "--max-context", "256k", "--hardware", "GB200", "--gpus", "8", "--replicas", "9",
      "--router", "session-affinity", "--concurrency", "2048", "--duration", "3600"], 60, 2048),
]


def rack_rows(corpus: Path, tmp: Path) -> None:
    print("0. rack scale: agentx sim bench, one core each")
    print(f"{'run':<58} {'wall s':>7} {'CPU s':>7} {'loop CPU s':>10} {'peak RSS MB':>11} {'modeled s':>10} "
          f"{'requests':>9} {'load':>5}  bound (s, MB): met")
    for i, (name, argv, wall_bound, mb_bound) in enumerate(RACK_ROWS):
        row = rack(corpus, tmp / f"rack{i}", name, [a.replace("{corpus}", str(corpus)) for a in argv])
        met = row["cpu"] <= wall_bound and row["rss"] <= mb_bound
        print(f"{name:<58} {row['wall']:>7.1f} {row['cpu']:>7.1f} {row['loop_cpu']:>10.1f} {row['rss']:>11,.0f} "
              f"{row['modeled']:>10,.0f} {row['requests']:>9,} {row['load']:>5.1f}  {wall_bound}, {mb_bound}: "
              f"{'yes' if met else 'NO'} (CPU s{' = wall s' if row['wall'] <= wall_bound else '; wall inflated by load'})")
    print(f"(modeled s: warmup included; {os.cpu_count()} cores)\n")


def http(corpus: Path, out: Path, lanes: int, duration: float) -> float:
    from agentx.engine.launch import sim_server

    with sim_server("--speed", str(SPEED)) as url:
        return run(["bench", "--url", url, "--traces", str(corpus), "--max-context", "256k", "--concurrency",
                    str(lanes), "--duration", str(duration), "--clock-scale", str(SPEED), "--out", str(out)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lanes", type=int, default=384)
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--http-lanes", type=int, default=16)
    ap.add_argument("--http-duration", type=float, default=300.0)
    ap.add_argument("--corpus", type=Path, help="a synthetic corpus folder (made with agentx trace synth if absent)")
    ap.add_argument("--rack-only", action="store_true", help="only the rack-scale rows (0)")
    args = ap.parse_args()
    pin(os.getpid(), 0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = args.corpus
        if corpus is None:
            corpus = synthetic_393(tmp)
        rack_rows(corpus, tmp)
        if args.rack_only:
            return
        print(f"1. agentx sim bench: 393-session synthetic corpus (256k), 8 x H200, {args.lanes} lanes, "
              f"{args.duration:g} s profiling (one core)")
        load = os.getloadavg()[0]
        big = virtual(corpus, tmp / "big", args.lanes, args.duration)
        print(f"{'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} {'modeled s':>10} {'requests':>9} "
              f"{'HTTP at x' + format(SPEED, 'g') + ' >= s':>18} {'ratio >=':>9}")
        bound = big["modeled"] / SPEED
        print(f"{big['wall']:>8.1f} {big['cpu']:>8.1f} {big['rss']:>12,.0f} {big['modeled']:>10,.0f} "
              f"{big['requests']:>9,} {bound:>18,.0f} {bound / big['wall']:>9,.0f}")
        print(f"(CPU s: the replay loop, after the traces are loaded; wall s: the whole command. Load average "
              f"{load:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores)")
        print(f"\n2. the same settings over HTTP (agentx bench against agentx sim serve --speed {SPEED:g}): "
              f"{args.http_lanes} lanes, {args.http_duration:g} s")
        small = virtual(corpus, tmp / "small-virtual", args.http_lanes, args.http_duration)
        wall = http(corpus, tmp / "small-http", args.http_lanes, args.http_duration)
        print(f"{'virtual wall s':>15} {'HTTP wall s':>12} {'ratio':>7} {'modeled s':>10} {'requests':>9}")
        print(f"{small['wall']:>15.1f} {wall:>12.1f} {wall / small['wall']:>7.0f} {small['modeled']:>10,.0f} "
              f"{small['requests']:>9,}")


if __name__ == "__main__":
    main()
