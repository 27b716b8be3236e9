"""Virtual time: what a run costs without HTTP or waiting, and against the same run over HTTP.

0. Rack scale (issues #29, #42): the cost is per modeled event, not per lane or token. Three
   rows, each `agentx sim bench` in a process of its own pinned to one core: the fixed-sequence
   baseline `--scenario 1k1k` at 1,024 lanes (`--max-num-seqs 1024`, 8 x H200, Qwen3-235B-A22B)
   for 300 modeled s (bound: 30 CPU s, 1 GB), and one modeled hour of profiling at 2,048 and at
   4,096 lanes (two NVL72 racks' worth of agents) of the 393-session corpus (256k) on a 72-GPU
   deployment, 9 replicas of 8 x GB200 behind a session-affinity router (bounds: 60 CPU s and
   2 GB; 120 CPU s and 3 GB). Wall s is the whole command; CPU s (user + system) and peak RSS
   the whole process's, read with `os.wait4` as it exits (traces loaded, warmup, run folder and
   summary included); load average beside each row (the machine may be shared: CPU s is the
   figure a busy machine does not inflate).

1. `agentx sim bench` on the synthetic 393-session AgentX-shaped corpus (256k variant), the
   default 8 x H200 deployment, `--lanes` lanes (default 384) for `--duration` modeled seconds
   of profiling (default 3600) after the usual warmup: wall time, CPU time, peak memory, and
   the modeled time it covered (warmup included), in a process of its own pinned to one core.
2. The ratio against HTTP: the same settings at a point small enough to run over HTTP here
   (`--http-lanes`, `--http-duration`; `agentx bench` against `agentx sim serve --speed S`, both
   processes of their own): wall time both ways. The HTTP path cannot run faster than its
   speed-up allows, so for the large point its wall time is at least modeled time / speed,
   printed as a bound.

    python benchmarks/virtual_time.py [--lanes 384] [--duration 3600] [--corpus DIR] [--rack-only] [--rows 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cores import pin
from corpora import synthetic_393

SPEED = 10.0  # of the HTTP comparison's simulated server
RACK_393 = ["--traces", "{corpus}", "--max-context", "256k", "--hardware", "GB200", "--gpus", "8", "--replicas", "9",
            "--router", "session-affinity", "--duration", "3600"]


@dataclass
class Cost:
    """What one agentx command cost its process, measured from outside it: wall s of the
    command, CPU s (user + system) and peak RSS of the whole process (`os.wait4`: the traces
    loaded, warmup, run folder and summary included), the host's 1-minute load average (the mean
    of its values at start and end)."""

    wall: float
    cpu: float
    rss_mb: float
    load: float


def run(cmd: list[str], core: int | None = None) -> Cost:
    """Run an agentx command in a process of its own; what it cost."""
    load, t = os.getloadavg()[0], time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "agentx.cli", *cmd], stdout=subprocess.DEVNULL, stderr=err)
        if core is not None:
            pin(proc.pid, core)
        _, status, usage = os.wait4(proc.pid, 0)  # (not proc.wait: this reaps the child with its rusage)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"agentx {' '.join(cmd[:2])} failed: {err.read()[-2000:].decode(errors='replace')}")
    return Cost(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,  # (KiB on Linux)
                (load + os.getloadavg()[0]) / 2)


def virtual(corpus: Path, out: Path, lanes: int, duration: float) -> dict:
    return sim_bench(out, ["--traces", str(corpus), "--max-context", "256k", "--concurrency", str(lanes),
                           "--duration", str(duration)])


def sim_bench(out: Path, argv: list[str]) -> dict:
    """`agentx sim bench ARGV --out OUT` on core 0: what the process cost, the loop's own CPU s
    (run.json), the modeled s it covered and its requests."""
    cost = run(["sim", "bench", *argv, "--out", str(out)], core=0)
    info, result = json.loads((out / "run.json").read_text()), json.loads((out / "result.json").read_text())
    return {"cost": cost, "loop_cpu": info["client"]["cpu_s"], "modeled": info["client"]["modeled_s"],
            "requests": result["requests"]["total"]}


RACK_ROWS = [  # (name, sim bench arguments, CPU s bound, peak RSS MB bound)
    ("1k1k, 1,024 lanes x 300 s, 8 x H200", ["--scenario", "1k1k", "--concurrency", "1024", "--max-num-seqs", "1024",
                                            "--duration", "300"], 30, 1024),
    ("393 sessions (256k), 2,048 lanes x 3,600 s, 9 x (8 x GB200)", [*RACK_393, "--concurrency", "2048"], 60, 2048),
    ("393 sessions (256k), 4,096 lanes x 3,600 s, 9 x (8 x GB200)", [*RACK_393, "--concurrency", "4096"], 120, 3072),
]


HOST_LOOP = "import time\nt = time.process_time()\ns = 0\nfor i in range(10_000_000):\n    s += i\nprint(time.process_time() - t)"


def host_reference() -> float:
    """CPU s of a fixed pure-Python loop (10M additions) on core 0: how fast this host runs Python,
    printed beside the table, since CPU s bounds hold on one host and not on one three times slower."""
    proc = subprocess.Popen([sys.executable, "-c", HOST_LOOP], stdout=subprocess.PIPE, text=True)
    pin(proc.pid, 0)
    return float(proc.communicate()[0])


def rack_rows(corpus: Path, tmp: Path, rows: list[int]) -> None:
    print("0. rack scale: agentx sim bench, one core each (whole-process CPU s and peak RSS)")
    print(f"host reference: a 10M-iteration pure-Python loop takes {host_reference():.2f} CPU s on this core "
          f"(CPU s scale with it across hosts)")
    print(f"{'run':<60} {'wall s':>7} {'CPU s':>7} {'loop CPU s':>10} {'peak RSS MB':>11} {'modeled s':>10} "
          f"{'requests':>9} {'load':>5}  bound (CPU s, MB): met")
    for i in rows:
        name, argv, cpu_bound, mb_bound = RACK_ROWS[i]
        row = sim_bench(tmp / f"rack{i}", [a.replace("{corpus}", str(corpus)) for a in argv])
        cost = row["cost"]
        met = cost.cpu <= cpu_bound and cost.rss_mb <= mb_bound
        print(f"{name:<60} {cost.wall:>7.1f} {cost.cpu:>7.1f} {row['loop_cpu']:>10.1f} {cost.rss_mb:>11,.0f} "
              f"{row['modeled']:>10,.0f} {row['requests']:>9,} {cost.load:>5.1f}  {cpu_bound}, {mb_bound}: "
              f"{'yes' if met else 'NO'}", flush=True)
    print(f"(CPU s: user + system of the whole process, traces loaded, warmup, run folder and summary included; "
          f"loop CPU s: the event loop's alone (run.json); peak RSS: the process's (os.wait4); modeled s: warmup "
          f"included; load: the 1-minute load average, {os.cpu_count()} cores)\n")


def http(corpus: Path, out: Path, lanes: int, duration: float) -> Cost:
    from agentx.engine.launch import sim_server

    with sim_server("--speed", str(SPEED)) as url:
        return run(["bench", "--url", url, "--traces", str(corpus), "--max-context", "256k", "--concurrency",
                    str(lanes), "--duration", str(duration), "--clock-scale", str(SPEED), "--out", str(out)])


def rows_arg(text: str) -> list[int]:
    rows = [int(r) for r in text.split(",")]
    if any(not 0 <= r < len(RACK_ROWS) for r in rows):
        raise argparse.ArgumentTypeError(f"rows are 0..{len(RACK_ROWS) - 1}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lanes", type=int, default=384)
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--http-lanes", type=int, default=16)
    ap.add_argument("--http-duration", type=float, default=300.0)
    ap.add_argument("--corpus", type=Path, help="a synthetic corpus folder (made with agentx trace synth if absent)")
    ap.add_argument("--rack-only", action="store_true", help="only the rack-scale rows (0)")
    ap.add_argument("--rows", type=rows_arg, default=list(range(len(RACK_ROWS))),
                    help="which rack-scale rows, by index (default: all): 0,1")
    args = ap.parse_args()
    pin(os.getpid(), 0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = args.corpus
        if corpus is None:
            corpus = synthetic_393(tmp)
        rack_rows(corpus, tmp, args.rows)
        if args.rack_only:
            return
        print(f"1. agentx sim bench: 393-session synthetic corpus (256k), 8 x H200, {args.lanes} lanes, "
              f"{args.duration:g} s profiling (one core)")
        big = virtual(corpus, tmp / "big", args.lanes, args.duration)
        cost = big["cost"]
        print(f"{'wall s':>8} {'CPU s':>8} {'loop CPU s':>10} {'peak RSS MB':>12} {'modeled s':>10} {'requests':>9} "
              f"{'HTTP at x' + format(SPEED, 'g') + ' >= s':>18} {'ratio >=':>9} {'load':>5}")
        bound = big["modeled"] / SPEED
        print(f"{cost.wall:>8.1f} {cost.cpu:>8.1f} {big['loop_cpu']:>10.1f} {cost.rss_mb:>12,.0f} "
              f"{big['modeled']:>10,.0f} {big['requests']:>9,} {bound:>18,.0f} {bound / cost.wall:>9,.0f} "
              f"{cost.load:>5.1f}")
        print(f"(wall s, CPU s and peak RSS: the whole command's process; loop CPU s: the replay loop, after the "
              f"traces are loaded; load: the 1-minute load average, {os.cpu_count()} cores)")
        print(f"\n2. the same settings over HTTP (agentx bench against agentx sim serve --speed {SPEED:g}): "
              f"{args.http_lanes} lanes, {args.http_duration:g} s")
        small = virtual(corpus, tmp / "small-virtual", args.http_lanes, args.http_duration)
        wall, small_wall = http(corpus, tmp / "small-http", args.http_lanes, args.http_duration).wall, small["cost"].wall
        print(f"{'virtual wall s':>15} {'HTTP wall s':>12} {'ratio':>7} {'modeled s':>10} {'requests':>9}")
        print(f"{small_wall:>15.1f} {wall:>12.1f} {wall / small_wall:>7.0f} {small['modeled']:>10,.0f} "
              f"{small['requests']:>9,}")


if __name__ == "__main__":
    main()
