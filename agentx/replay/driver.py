"""The real-time driver: runs a replay plan against a server with asyncio and agentx's own HTTP
client (`client.py`), writing a record per request, the scraped server metrics, and the run's result point.

With `clock_scale X` (a simulated engine running X times faster than the hardware it models)
the run's clock runs X times faster: trace delays shrink by X in wall time, and every time in
the records (latencies, windows, throughput) is in the modeled deployment's seconds.

A run folder holds `run.json` (settings at start; client health and `finished` at the end),
`records.jsonl` (+ `records.parquet`), `server_metrics.jsonl`, `trees.jsonl` and `result.json`.
Lanes share nothing but the plan's phase barriers, so they can be sharded across processes.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections import deque
import math
import os
import platform
import resource
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import aiohttp

from agentx.content.tokens import DEFAULT_TOKEN_RANGE, ContentConfig, PromptBuilder, key64, shared_prefix
from agentx.content.wire import BodyBuilder, ChatText, TokensText, chat_segments, load_decoder
from agentx.errors import AgentxError
from agentx.metrics.scrape import Scraper, read_series
from agentx.metrics.summary import summarize
from agentx.replay.client import Client, Exchange
from agentx.replay.plan import DONE, PROFILE, Dispatch, PlanConfig, ReplayPlan
from agentx.replay.records import Record, RecordWriter, read_records, write_parquet
from agentx.serving import run_async
from agentx.traces.graph import build_graph
from agentx.traces.load import gc_paused


@dataclass
class BenchSettings:
    url: str
    concurrency: int
    duration: float
    out: str
    model: str | None = None
    wire: str = "tokens"
    seed: int = 0
    gpus: int | None = None
    hardware: str | None = None
    engine: str | None = None
    dataset: str | None = None
    variant: str | None = None
    warmup: bool = True
    warmup_requests_per_lane: int = 10
    idle_cap: float = 300.0
    system_idle_cap: float = 10.0
    grace: float = 60.0
    request_timeout: float = 600.0
    token_range: tuple[int, int] = DEFAULT_TOKEN_RANGE
    token_scale: int = 1
    tokenizer: str | None = None
    server_metrics: str | None = ""  # "" -> the target's /metrics; None -> no scraping
    keep_chunks: bool = False
    cost_basis: str = "neocloud"
    scenario: str | None = None
    clock_scale: float = 1.0  # the target runs this much faster than what it models (sim --speed)
    mode: str = "lanes"  # or "schedule" (open loop at recorded session start times)
    time_scale: float = 1.0  # schedule mode: recorded start times are divided by this
    warmup_seconds: float = 0.0  # schedule mode: the schedule's first seconds count as warmup


# Event-loop timers fire up to ~1.5 ms off (libuv and epoll count whole milliseconds): the driver
# wakes this much early and spins (yielding to I/O) until a request is due.
TIMER_SLACK_S = 0.002
# While the loop would wait, the driver prepares the bodies of the requests due within AHEAD_S, one
# per loop turn and not within AHEAD_GUARD_S of a due time (a render can take milliseconds), so a
# due request is only written; bodies held ahead own at most AHEAD_BYTES.
AHEAD_S = 1.0
AHEAD_GUARD_S = 0.005
AHEAD_BYTES = 256 << 20
# Profiling starts this long (wall) after the warmup drains: time to prepare every lane's first body.
LEAD_S = 0.5


def _held(body) -> int:
    """Memory a body built ahead holds (a view of a stream's buffer holds none of its own)."""
    return 0 if isinstance(body, memoryview) else len(body)


def discover_model(url: str) -> str:
    async def get():
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
            async with s.get(url.rstrip("/") + "/v1/models") as r:
                return await r.json()

    try:
        return asyncio.run(get())["data"][0]["id"]
    except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, IndexError, ValueError) as e:
        raise AgentxError(f"{url}/v1/models: cannot discover the model name ({e}); pass --model") from None


class Run:
    """One (settings, sessions) replay into one folder."""

    def __init__(self, settings: BenchSettings, sessions: list, command: str = ""):
        self.s = settings
        self.folder = Path(settings.out)
        self.folder.mkdir(parents=True, exist_ok=True)
        if (self.folder / "records.jsonl").exists():
            raise AgentxError(f"{self.folder}: already holds a run; choose another --out")
        self.run_id = uuid.uuid4().hex[:12]
        with gc_paused():
            graphs = [build_graph(s) for s in sessions]
        self.plan = ReplayPlan(graphs, PlanConfig(
            concurrency=settings.concurrency, duration=settings.duration, seed=settings.seed, run_id=self.run_id,
            warmup=settings.warmup, warmup_requests_per_lane=settings.warmup_requests_per_lane,
            idle_cap=settings.idle_cap, system_idle_cap=settings.system_idle_cap, mode=settings.mode,
            time_scale=settings.time_scale, warmup_seconds=settings.warmup_seconds,
            lead=LEAD_S * settings.clock_scale))
        self.prompts = PromptBuilder(ContentConfig(settings.seed, settings.token_range, settings.token_scale))
        decoder = load_decoder(settings.tokenizer) if settings.wire == "chat" else None
        self.bodies = BodyBuilder(settings.model, settings.wire, decoder)
        self.chat_text = ChatText(self.prompts, decoder) if decoder else None
        self.tokens_text = TokensText(self.prompts, self.bodies)
        self.ahead: dict = {}  # dispatch key -> (phase, `_prepare()`'s answer) before it was due
        self.ahead_bytes = 0  # of bodies in `ahead` (`_held`)
        self.seen: dict[int, set] = {}  # tree -> hash ids sent
        self.last_ids: dict = {}  # (tree, stream) -> hash ids of the stream's last request
        self.trees_written = 0
        self.done = {"warmup": 0, "profile": 0, "errors": 0}
        self.recent: deque = deque(maxlen=500)  # (end, ttft, output tokens) of profile records
        self.clock = lambda: 0.0
        self.info = {
            "run_id": self.run_id, "agentx_version": _version(), "command": command,
            "start_time": datetime.now(timezone.utc).isoformat(), "host": platform.node(),
            "settings": {**asdict(settings), "model": settings.model, "sessions": len(sessions)},
            "finished": False,
        }
        self._write_info()

    def _write_info(self) -> None:
        (self.folder / "run.json").write_text(json.dumps(self.info, indent=1, default=str))

    # ------------------------------------------------------------------ the loop

    def snapshot(self) -> dict:
        """Live figures for a progress display."""
        now, plan = self.clock(), self.plan
        window = [r for r in self.recent if r[0] >= now - 10.0]
        ttfts = sorted(r[1] for r in self.recent if r[1] is not None)
        span = min(10.0, max(1e-9, now - plan.profile_start)) if plan.profile_start < math.inf else 0
        return {
            "phase": self._phase(), "clock": now, "inflight": plan.inflight,
            "lanes_busy": sum(1 for t in plan.lanes if t is not None and t.inflight), "lanes": len(plan.lanes),
            "profile_left": max(0.0, plan.profile_end - now) if plan.profile_start < math.inf else None,
            **self.done, "ttft_p50": ttfts[len(ttfts) // 2] if ttfts else None,
            "output_tok_s": sum(r[2] for r in window) / span if span else None,
        }

    def _count(self, rec: Record) -> None:
        self.done[rec.phase] += 1
        if rec.error:
            self.done["errors"] += 1
        elif rec.phase == "profile":
            self.recent.append((rec.end, rec.ttft, rec.osl or 0))

    async def execute(self, on_tick=None) -> None:
        """Run the plan; `on_tick(snapshot)` is called twice a second when given."""
        # The traces, graphs and plan live for the whole run: keep them out of the cyclic
        # collector's sight, or every full collection walks them.
        gc.collect()
        gc.freeze()
        try:
            await self._execute(on_tick)
        finally:
            gc.unfreeze()  # a sweep runs again in this process: let this run's objects be collected

    async def _execute(self, on_tick) -> None:
        loop = asyncio.get_running_loop()
        t0, scale = time.perf_counter(), self.s.clock_scale
        self.t0 = t0
        clock = lambda: (time.perf_counter() - t0) * scale  # noqa: E731
        self.clock = clock
        writer = RecordWriter(self.folder)
        trees = open(self.folder / "trees.jsonl", "ab", buffering=0)
        scrape_task = None
        if self.s.server_metrics is not None:
            url = self.s.server_metrics or self.s.url.rstrip("/") + "/metrics"
            scraper = Scraper(url, self.folder / "server_metrics.jsonl", clock, self._phase)
            scrape_task = asyncio.create_task(scraper.run())
        wake = asyncio.Event()
        tasks: set[asyncio.Task] = set()
        cpu0 = time.process_time()
        async with Client(self.s.url, self.s.request_timeout, self.s.keep_chunks) as client:

            def launch(now: float) -> None:
                """Send what is due: each request is written here, its answer awaited by a task."""
                for d in self.plan.due(now):
                    try:
                        sent = self._begin(client, d)
                    except Exception as e:  # a bug must not stall the plan: record it and go on
                        sent = e
                    task = loop.create_task(one(d, sent))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)

            async def one(d: Dispatch, sent) -> None:
                try:
                    if isinstance(sent, Exception):
                        raise sent
                    rec = await self._record(client, d, *sent)
                except Exception as e:  # a bug must not stall the plan: record it and go on
                    rec = self._failed(d, f"{type(e).__name__}: {e}")
                sent = None  # the body: its stream's next request may reuse the buffer
                writer.write(rec)
                self._count(rec)
                # the agent can act once the response is complete (its last bytes may come after
                # the last token): that, not the record's `end`, starts the end-to-start delays
                self.plan.ended(d.key, clock())
                self._write_trees(trees)
                if self.plan.phase != DONE:
                    launch(clock())  # what this completion made due goes out now, not a loop hop later
                wake.set()

            ticker = loop.create_task(self._tick(on_tick)) if on_tick else None
            self.plan.start(clock())
            while True:
                now = clock()
                launch(now)
                if self.plan.phase == DONE:
                    break
                nt = self.plan.next_time(now)
                if nt is None and self.plan.inflight == 0:
                    break
                deadline = math.inf if nt is None else nt  # run clock; the window's end counts too
                if self.plan.phase == PROFILE:
                    deadline = min(deadline, self.plan.profile_end)
                if (deadline - clock()) / scale > AHEAD_GUARD_S and self._render_ahead(clock()):
                    await asyncio.sleep(0)  # a body per loop turn: answers are read in between
                    continue
                wall = (deadline - clock()) / scale
                if wall <= TIMER_SLACK_S:  # the last stretch before a due time: spin, letting I/O run
                    await asyncio.sleep(0)
                    wake.clear()
                    continue
                # a timer, early by the slack, that sets the same event a completion sets
                timer = None if wall == math.inf else loop.call_later(wall - TIMER_SLACK_S, wake.set)
                await wake.wait()
                wake.clear()
                if timer:
                    timer.cancel()
            profile_wall = (clock() - self.plan.profile_start) / scale if self.plan.profile_start < math.inf else 0
            cpu, cpu_wall = time.process_time() - cpu0, clock() / scale
            if tasks:
                _, pending = await asyncio.wait(set(tasks), timeout=self.s.grace)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        for task in (scrape_task, ticker):
            if task:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        writer.close()
        trees.close()
        wall = clock() / scale
        self.info["client"] = {
            "cpu_percent": 100.0 * cpu / cpu_wall if cpu_wall else None,  # until the window closed
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "wall_s": wall, "profile_wall_s": profile_wall,
        }
        self.info["finished"] = True
        self._write_info()

    async def _tick(self, on_tick) -> None:
        while True:
            on_tick(self.snapshot())
            await asyncio.sleep(0.5)

    def _phase(self) -> str:
        if self.plan.phase == PROFILE and self.clock() < self.plan.profile_start:
            return "warmup"  # the lead before profiling
        return {"warmup1": "warmup", "warmup2": "warmup"}.get(self.plan.phase, self.plan.phase)

    def _render_ahead(self, now: float) -> bool:
        """Prepare the next request due within AHEAD_S that is not prepared yet; False when there
        is none (or the bodies held ahead are too big already)."""
        if self.ahead_bytes > AHEAD_BYTES:
            return False
        for d in self.plan.upcoming(now, AHEAD_S * self.s.clock_scale):
            if d.key not in self.ahead:
                prepared = self._prepare(d)
                self.ahead[d.key] = (d.phase, prepared)
                self.ahead_bytes += _held(prepared[0])
                return True
        return False

    def _prepared(self, d: Dispatch) -> tuple:
        """`_prepare(d)`, done ahead or now."""
        ahead = self.ahead.pop(d.key, None)
        if ahead is not None:
            phase, prepared = ahead
            self.ahead_bytes -= _held(prepared[0])
            if phase == d.phase:
                return prepared
            del ahead, prepared  # (its stream's buffer is free again)
        return self._prepare(d)

    def _prepare(self, d: Dispatch) -> tuple:
        """(body, ISL, OSL, hash ids shared with its stream's last request) of a dispatch. Its
        stream's last request was sent before this one is due, so this can be done ahead."""
        body, isl, osl = self._body(d)
        last = self.last_ids.get((d.tree, d.graph.nodes[d.node].stream))
        return body, isl, osl, shared_prefix(last, d.request.hash_ids) if last is not None else 0

    def _body(self, d: Dispatch) -> tuple[bytes, int, int]:
        """(body, ISL, OSL) of a dispatch."""
        session, req = d.session, d.request
        node = d.graph.nodes[d.node]
        tail_key = key64("tail", self.run_id, d.tree, d.node)
        osl = self.prompts.osl(req) if d.phase == "profile" else 1
        if self.bodies.wire == "tokens":
            body, isl = self.tokens_text.body(session, req, tail_key, d.marker, osl, (d.tree, node.stream))
        else:
            isl = self.prompts.isl(session, req)
            system = round(((session.system_tokens or 0) + (session.tool_tokens or 0)) / self.s.token_scale)
            stream = d.graph.streams[node.stream]
            history = [(self.prompts.isl(session, r), self.prompts.osl(r)) for r in stream.requests[: node.position]]
            segments = chat_segments(isl, system, history)
            texts = self.chat_text.messages(session, req, tail_key, d.marker, segments)
            body = self.bodies.chat_body(segments, texts, osl)
        return body, isl, osl

    def _sent_blocks(self, d: Dispatch, k: int) -> int:
        """How many of the request's hash blocks this tree has sent before. The `k` its stream's
        last request also had were sent with it: only the rest are looked up."""
        ids = d.request.hash_ids
        self.last_ids[(d.tree, d.graph.nodes[d.node].stream)] = ids
        seen = self.seen.setdefault(d.tree, set())
        new = ids[k:].tolist()
        hits = k + sum(1 for i in new if i in seen)
        seen.update(new)
        return hits

    def _begin(self, client: Client, d: Dispatch) -> tuple[Exchange, int, int, int]:
        """Start the request of a dispatch: (exchange, ISL, OSL, theoretical cached)."""
        body, isl, osl, k = self._prepared(d)
        theo = min(isl, self._sent_blocks(d, k) * self.prompts.block_tokens(d.session))
        headers = {"X-Session-ID": f"{self.run_id}-{d.tree}", "X-Correlation-ID": f"{self.run_id}-{d.tree}-{d.node}"}
        return client.begin(self.bodies.path, body, headers), isl, osl, theo

    async def _record(self, client: Client, d: Dispatch, ex: Exchange, isl: int, osl: int, theo: int) -> Record:
        base, scale = self.t0, self.s.clock_scale
        node = d.graph.nodes[d.node]
        rec = Record(
            run=self.run_id, lane=d.lane, tree=d.tree, replay=d.replay, session=d.session.id, stream=node.stream,
            stream_kind=d.graph.kind(d.node), node=d.node, phase=d.phase, planned=d.planned,
            start=(ex.res.start - base) * scale, end=0.0, isl_planned=isl, osl_planned=osl, theo_cached=theo)
        try:
            res = await client.finish(ex)
        except asyncio.CancelledError:
            rec.end, rec.error = self.clock(), "cancelled"
            return rec
        rec.start, rec.end = (res.start - base) * scale, (res.end - base) * scale
        rec.ttft = (res.first - res.start) * scale if res.first is not None else None
        rec.isl, rec.osl, rec.cached = res.prompt_tokens, res.completion_tokens, res.cached_tokens
        if rec.osl is None and res.error is None:
            rec.osl = res.chunks
        rec.chunks, rec.finish_reason, rec.status = res.chunks, res.finish_reason, res.status
        rec.error, rec.detail = res.error, res.detail
        if res.error is None and res.first is None:
            rec.error = "empty"  # a 200 with no output at all
        if self.s.keep_chunks:
            rec.chunk_times = [(t - res.start) * scale for t in res.chunk_times]
        return rec

    def _failed(self, d: Dispatch, detail: str) -> Record:
        node = d.graph.nodes[d.node]
        now = self.clock()
        return Record(run=self.run_id, lane=d.lane, tree=d.tree, replay=d.replay, session=d.session.id,
                      stream=node.stream, stream_kind=d.graph.kind(d.node), node=d.node, phase=d.phase,
                      planned=d.planned, start=now, end=now, isl_planned=0, osl_planned=0, theo_cached=0,
                      error="client", detail=detail[:300])

    def _write_trees(self, f) -> None:
        done = self.plan.finished_trees
        while self.trees_written < len(done):
            tree = done[self.trees_written]
            self.trees_written += 1
            self.seen.pop(tree.uid, None)
            for stream in range(len(tree.graph.streams)):
                self.tokens_text.forget((tree.uid, stream))
                self.last_ids.pop((tree.uid, stream), None)
            first_t = min(n.request.t for n in tree.graph.nodes)
            row = {
                "tree": tree.uid, "lane": tree.lane, "session": tree.graph.session.id,
                "whole": tree.started_in_profile and tree.last_end is not None
                and tree.last_end <= self.plan.profile_end,
                "replay_wall_s": (tree.last_end or 0) - (tree.first_start or 0),
                "recorded_wall_s": tree.graph.session.duration - first_t,
            }
            f.write(json.dumps(row).encode() + b"\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentx")
    except PackageNotFoundError:
        return "dev"


def bench(settings: BenchSettings, sessions: list, command: str = "", on_tick=None) -> dict:
    """Replay `sessions` against the target; write the run folder; return the result point.
    `on_tick(snapshot)` receives live figures twice a second (a progress display)."""
    if settings.model is None:
        settings.model = discover_model(settings.url)
    run = Run(settings, sessions, command)
    run_async(run.execute(on_tick))
    records = read_records(run.folder)
    write_parquet(records, run.folder)
    return report(run.folder)


def report(folder: Path) -> dict:
    """Rebuild the result point from a run folder (also one whose run was killed)."""
    folder = Path(folder)
    info_path = folder / "run.json"
    if not info_path.exists():
        raise AgentxError(f"{folder}: no run.json (not a run folder?)")
    info = json.loads(info_path.read_text())
    records = read_records(folder)
    trees = []
    if (folder / "trees.jsonl").exists():
        for line in (folder / "trees.jsonl").read_text().splitlines():
            try:
                trees.append(json.loads(line))
            except ValueError:
                break
    result = summarize(records, info, read_series(folder / "server_metrics.jsonl"), trees)
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    return result


def command_line() -> str:
    return " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])
