"""Where the host error of `agentx bench` against `agentx sim serve` comes from (issue #24):
runs `agentx sim serve --speed S` (a subprocess, with a truth log) and `agentx bench --clock-scale
S` in this process, with the client's begin, answer and plan stamped, then splits each request's
TTFT error (measured minus modeled, modeled ms) into wall ms:

  send -> head     the client's start (Result.start) to the sim's head arrival (truth `arrival`)
  sim lag          the sim's first-token lag (due -> written, `first_token_lag_s` / S)
  written -> read  the sim's first write (truth `first_token`) to the client's read (Result.first)

and measures the client reaction the twin models (CLIENT_REACTION_S): a request's modeled end at
the sim to its successor's modeled arrival there, less the plan's delay between them (wall ms),
split into the sim's end -> the client hearing of it (`Plan.ended`) and the planned send -> the
sim's head. Both clocks are the host's (time.time() and CLOCK_MONOTONIC), so the split is only
meaningful on one machine. Prints p10 / p50 / p90 tables and the load average.

    python benchmarks/http_split.py [--speed 5] [--concurrency 8] [--duration 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from agentx.replay import plan as plan_mod
from agentx.replay.http import sender as sender_mod
from agentx.traces.graph import START


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wall_offset() -> float:
    """time.time() minus time.perf_counter(), the median of a few reads."""
    return statistics.median(time.time() - time.perf_counter() for _ in range(101))


class Stamps:
    """The client's stamps, keyed by the dispatch key (tree uid, node)."""

    def __init__(self):
        # a key is dispatched once per phase that replays its tree (warmup, profile): lists, in order
        self.begun: list = []  # (key, correlation id, planned run clock, in-edge sources, phase)
        self.ended: dict = {}  # key -> [(perf_counter, run clock)] when the plan heard of an end
        # body built ahead or not -> each HttpSender.begin's own time, ms (the build if not ahead, the first write)
        self.begin_ms: dict = {True: [], False: []}

    def install(self) -> None:
        stamps = self
        begin, ended = sender_mod.HttpSender.begin, plan_mod.ReplayPlan.ended

        def patched_begin(self, d):
            edges = [(e.src, e.delay) for e in d.graph.in_edges[d.node] if e.src != START]
            t = time.perf_counter()
            ahead = d.key in self.run.render.ahead
            sent = begin(self, d)
            stamps.begin_ms[ahead].append((time.perf_counter() - t) * 1000)
            cid = f"{self.run.run_id}-{d.tree}-{d.node}"
            stamps.begun.append((d.key, cid, d.planned, edges, d.phase, sent[0].res))
            return sent

        def patched_ended(self, key, now):
            stamps.ended.setdefault(key, []).append((time.perf_counter(), now))
            return ended(self, key, now)

        sender_mod.HttpSender.begin = patched_begin
        plan_mod.ReplayPlan.ended = patched_ended


def _pcts(values: list[float]) -> str:
    if not values:
        return f"{'-':>8} {'-':>8} {'-':>8} {0:>5}"
    p10, p50, p90 = np.percentile(values, [10, 50, 90])
    return f"{p10:8.2f} {p50:8.2f} {p90:8.2f} {len(values):>5}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup-requests-per-lane", type=int, default=2)
    args = ap.parse_args()
    speed = args.speed
    tmp = Path(tempfile.mkdtemp(prefix="http-split-"))
    port = _free_port()
    truth_path = tmp / "truth.jsonl"
    load0 = os.getloadavg()
    server = subprocess.Popen([sys.executable, "-m", "agentx.cli", "sim", "serve", "--port", str(port), "--speed",
                               str(speed), "--truth-log", str(truth_path)], stdout=subprocess.DEVNULL)
    stamps = Stamps()
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        stamps.install()
        from agentx.cli import app, expand_lists
        offset = _wall_offset()
        argv = ["bench", "--url", f"http://127.0.0.1:{port}", "--clock-scale", str(speed), "--concurrency",
                str(args.concurrency), "--duration", str(args.duration), "--seed", str(args.seed),
                "--warmup-requests-per-lane", str(args.warmup_requests_per_lane), "--out", str(tmp / "run"),
                "--allow-invalid"]
        try:
            app(args=expand_lists(argv), standalone_mode=False)
        except SystemExit:
            pass
    finally:
        server.terminate()
        server.wait()
    load1 = os.getloadavg()
    truth: dict = {}  # correlation id -> [truth record], in arrival order (as the client began them)
    for line in truth_path.read_text().splitlines():
        r = json.loads(line)
        if r.get("correlation_id") and r.get("modeled"):
            truth.setdefault(r["correlation_id"], []).append(r)
    for rows in truth.values():
        rows.sort(key=lambda r: r["arrival"])
    seen: dict = {}
    begun = []  # (key, planned, edges, phase, Result, truth record)
    for key, cid, planned, edges, phase, res in stamps.begun:
        i = seen[cid] = seen.get(cid, -1) + 1
        if i < len(truth.get(cid, ())):
            begun.append((key, planned, edges, phase, res, truth[cid][i]))
    # the sim's clock origin on the wall clock: arrival (time.time()) minus modeled arrival / S
    sim_t0 = statistics.median(r["arrival"] - r["modeled"]["arrival_s"] / speed
                               for rows in truth.values() for r in rows)

    def model_end_wall(t: dict) -> float:
        m = t["modeled"]
        return sim_t0 + (m["arrival_s"] + m["e2el_s"] + m["schedule_skipped_s"]) / speed

    err, send_head, lag, read, rest = [], [], [], [], []
    react, end_heard, planned_head, heard_begin, begin_head = [], [], [], [], []
    end_written, written_read, read_heard = [], [], []
    pt_res = {id(t): res for _, _, _, _, res, t in begun}
    ends: dict = {}  # key -> the truth records of its requests that ended, in order
    for key, planned, edges, phase, res, t in begun:
        if res.end is not None:
            ends[key] = ends.get(key, []) + [t]
    for key, planned, edges, phase, res, t in begun:
        if res.error or res.first is None or t["modeled"]["ttft_s"] is None:
            continue
        m = t["modeled"]
        if phase == "profile":
            measured = (res.first - res.start) * speed
            err.append((measured - m["ttft_s"]) * 1000)
            sh = (t["arrival"] - (res.start + offset)) * 1000
            lg = m["first_token_lag_s"] / speed * 1000
            rd = ((res.first + offset) - t["first_token"]) * 1000
            send_head.append(sh)
            lag.append(lg)
            read.append(rd)
            rest.append(err[-1] / speed - sh - lg - rd)
        # the reaction: the latest-ended predecessor, and the delay the plan put after its end (the
        # trace's, capped by the idle caps; run clock)
        if phase != "profile" or planned == float("inf"):
            continue
        # (heard perf, heard run clock, arrival, the end's truth record): each source's last end before this start
        preds = []
        for src, _ in edges:
            heard_list = [h for h in stamps.ended.get((key[0], src), []) if h[0] <= res.start]
            rows = [r for r in ends.get((key[0], src), []) if r["arrival"] <= t["arrival"]]
            if heard_list and rows:
                preds.append((*heard_list[-1], rows[-1]["arrival"], rows[-1]))
        if not preds:
            continue
        heard, heard_clock, _, pt = max(preds, key=lambda p: p[0])
        delay = planned - heard_clock
        if pt["modeled"]["e2el_s"] is None:
            continue
        end = model_end_wall(pt)
        head = t["arrival"]
        # on the sim's own clock, as the twin counts it: the successor's modeled arrival after the end
        react.append((m["arrival_s"] - (end - sim_t0) * speed - delay) / speed * 1000)
        end_heard.append((heard + offset - end) * 1000)
        planned_head.append((head - (heard + offset)) * 1000 - delay / speed * 1000)
        pres = pt_res[id(pt)]
        end_written.append((pt["last_token"] - end) * 1000)
        written_read.append(((pres.end + offset) - pt["last_token"]) * 1000)
        read_heard.append((heard - pres.end) * 1000)
        heard_begin.append((res.start - heard) * 1000 - delay / speed * 1000)
        begin_head.append((head - (res.start + offset)) * 1000)
    print(f"load average before {' '.join(f'{x:.2f}' for x in load0)}, after {' '.join(f'{x:.2f}' for x in load1)}")
    print(f"speed {speed:g}, c{args.concurrency}, {args.duration:g} s, seed {args.seed}; TTFT of profiled requests")
    print(f"{'wall ms':<44} {'p10':>8} {'p50':>8} {'p90':>8} {'n':>5}")
    print(f"{'TTFT host error / S (measured - modeled)':<44} {_pcts([e / speed for e in err])}")
    print(f"{'  send -> sim head':<44} {_pcts(send_head)}")
    print(f"{'  sim lag (due -> written)':<44} {_pcts(lag)}")
    print(f"{'  written -> client read':<44} {_pcts(read)}")
    print(f"{'  rest (clock reads, rounding)':<44} {_pcts(rest)}")
    print(f"{'client begin, body built ahead':<44} {_pcts(stamps.begin_ms[True])}")
    print(f"{'client begin, body built then':<44} {_pcts(stamps.begin_ms[False])}")
    print(f"{'reaction: modeled end -> successor head':<44} {_pcts(react)}")
    print(f"{'  modeled end -> plan hears of it':<44} {_pcts(end_heard)}")
    print(f"{'    modeled end -> sim wrote the last chunk':<44} {_pcts(end_written)}")
    print(f"{'    sim wrote it -> client read it':<44} {_pcts(written_read)}")
    print(f"{'    client read it -> plan hears':<44} {_pcts(read_heard)}")
    print(f"{'  planned send -> sim head':<44} {_pcts(planned_head)}")
    print(f"{'    planned send -> client begin':<44} {_pcts(heard_begin)}")
    print(f"{'    client begin -> sim head':<44} {_pcts(begin_head)}")
    print(f"run folder and truth log: {tmp}")


if __name__ == "__main__":
    main()
