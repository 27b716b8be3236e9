"""The real-time driver: the dispatch loop that runs a replay plan against a server with asyncio
and agentx's own HTTP client (`client.py`); bodies come from the renderer (`render.py`), records,
trees, the scraped server metrics and the result point go to the run folder (`folder.py`).

With `clock_scale X` (a simulated engine running X times faster than the hardware it models)
the run's clock runs X times faster: trace delays shrink by X in wall time, and every time in
the records (latencies, windows, throughput) is in the modeled deployment's seconds.
Lanes share nothing but the plan's phase barriers, so they can be sharded across processes.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
import uuid
from collections import deque
from dataclasses import replace
from pathlib import Path

import aiohttp

from agentx.common import gc_paused, peak_rss_mb
from agentx.errors import AgentxError
from agentx.metrics.identity import discover
from agentx.metrics.scrape import Scraper
from agentx.records import Record, RecordWriter
from agentx.replay.client import Client, Exchange
from agentx.replay.folder import RunFolder, report
from agentx.replay.session_ids import SessionIdentity, session_body_field, session_headers, with_body_field
from agentx.replay.plan import DONE, PROFILE, Dispatch, ReplayPlan
from agentx.replay.probe import ANSWER_TOKENS, ProbeConfig, probe_cache
from agentx.replay.render import Renderer
from agentx.replay.settings import BenchSettings
from agentx.serving import run_async
from agentx.traces.digest import write_digest
from agentx.traces.graph import build_graph

# `bench` is the entry point; its settings (settings.py) and `report` (folder.py) are named here too
__all__ = ["BenchSettings", "Run", "bench", "discover_model", "report"]

# Event-loop timers fire up to ~1.5 ms off (libuv and epoll count whole milliseconds): the driver
# wakes this much early and spins (yielding to I/O) until a request is due.
TIMER_SLACK_S = 0.002
# While the loop would wait, the driver prepares the bodies of the requests due within AHEAD_S, one
# per loop turn and not within AHEAD_GUARD_S of a due time (a render can take milliseconds), so a
# due request is only written (`render.py` bounds the bytes held ahead).
AHEAD_S = 1.0
AHEAD_GUARD_S = 0.005
# Profiling starts this long (wall) after the warmup drains: time to prepare every lane's first body.
LEAD_S = 0.5


def discover_model(url: str, headers: tuple = ()) -> str:
    async def get():
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30), headers=dict(headers)) as s:
            async with s.get(url.rstrip("/") + "/v1/models") as r:
                if r.status in (401, 403):
                    raise AgentxError(f"{url}/v1/models answered HTTP {r.status}: the server wants credentials "
                                      "(--api-key, OPENAI_API_KEY or --header)", "api_key")
                r.raise_for_status()
                return await r.json(content_type=None)

    try:
        return asyncio.run(get())["data"][0]["id"]
    except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, IndexError, TypeError, ValueError) as e:
        raise AgentxError(f"cannot discover the model name from {url}/v1/models ({e}); name it", "model") from None


class Run:
    """One (settings, sessions) replay into one folder."""

    def __init__(self, settings: BenchSettings, sessions: list, command: str = ""):
        self.s, target = settings, settings.target
        self.run_id = uuid.uuid4().hex[:12]
        self.sessions = sessions
        with gc_paused():
            graphs = [build_graph(s) for s in sessions]
        self.plan = ReplayPlan(graphs, replace(settings.plan, run_id=self.run_id, lead=LEAD_S * target.clock_scale))
        # (the tokenizer is read before the folder is made: a bad one leaves no folder behind)
        self.render = Renderer(self.run_id, settings.content, target.model, target.wire, target.tokenizer)
        self.folder = RunFolder(Path(settings.out), self.run_id,
                                {**settings.flat(), "model": target.model, "sessions": len(sessions)}, command)
        write_digest(self.folder.path, sessions, graphs)  # the dataset's trace stats (SPEC §8)
        self.identity = SessionIdentity(target.session_headers, self.run_id)
        self.trees_written = 0
        self.done = {"warmup": 0, "profile": 0, "errors": 0}
        self.recent: deque = deque(maxlen=500)  # (end, ttft, output tokens) of profile records
        self.clock = lambda: 0.0

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
        target = self.s.target
        found = await discover(target.url, headers=target.headers)  # (before the run's clock starts, as is the probe)
        self.folder.info["server_identity"] = {k: list(v) for k, v in found.items()}
        probe = self._probe_config(found)
        if probe:
            self.folder.info["cache_probe"] = {"before": await probe_cache(probe, self.sessions)}
        self.folder.write_info()
        t0, scale = time.perf_counter(), target.clock_scale
        self.t0 = t0
        clock = lambda: (time.perf_counter() - t0) * scale  # noqa: E731
        self.clock = clock
        writer = RecordWriter(self.folder.path)
        self.folder.open_trees()
        scraper = scrape_task = None
        if target.server_metrics is not None:
            url = target.server_metrics or target.url.rstrip("/") + "/metrics"
            scraper = await Scraper(url, self.folder.path / "server_metrics.jsonl", clock, self._phase,
                                    headers=target.headers).__aenter__()
            scrape_task = asyncio.create_task(scraper.run())
        wake = asyncio.Event()
        tasks: set[asyncio.Task] = set()
        window: list[asyncio.Task] = []  # the scrape that opens the window
        cpu0, waited0 = time.process_time(), _runqueue_wait_s()
        async with Client(target.url, target.request_timeout, target.keep_chunks) as client:

            def window_opens() -> None:
                """Scrape as the window opens: at once when nothing is in flight (the warmup has
                drained; nothing is sent before the profiling start), else at the start itself."""
                if scraper is None or window or self.plan.phase not in (PROFILE, DONE):
                    return
                wait = 0.0 if self.plan.inflight == 0 else max(0.0, (self.plan.profile_start - clock()) / scale)
                window.append(loop.create_task(_after(wait, scraper.scrape_once("open"))))

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
                window_opens()
                self._finished_trees()
                if self.plan.phase != DONE:
                    launch(clock())  # what this completion made due goes out now, not a loop hop later
                wake.set()

            ticker = loop.create_task(self._tick(on_tick)) if on_tick else None
            self.plan.start(clock())
            window_opens()
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
            waited = _runqueue_wait_s()
            if tasks:
                _, pending = await asyncio.wait(set(tasks), timeout=target.grace)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        if scraper is not None:  # the window closes when its last request has ended
            await asyncio.gather(*window)
            await scraper.scrape_once("close")
        if probe:
            self.folder.info["cache_probe"]["after"] = await probe_cache(probe, self.sessions)
        for task in (scrape_task, ticker):
            if task:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if scraper is not None:
            await scraper.__aexit__(None, None, None)
        writer.close()
        self.folder.finish({
            "cpu_percent": 100.0 * cpu / cpu_wall if cpu_wall else None,  # until the window closed
            "runqueue_wait_percent": 100.0 * (waited - waited0) / cpu_wall if cpu_wall and waited is not None else None,
            "peak_rss_mb": peak_rss_mb(),
            "wall_s": clock() / scale, "profile_wall_s": profile_wall,
        })

    def _probe_config(self, found: dict) -> ProbeConfig | None:
        """The cache probe of `--probe-cache N` (prompts that fit the published context)."""
        target = self.s.target
        if not target.probe_cache:
            return None
        limit = found.get("max_model_len", (None,))[0]
        return ProbeConfig(url=target.url, model=target.model, probes=target.probe_cache, seed=self.s.content.seed,
                           content=self.s.content, max_isl=limit - ANSWER_TOKENS if limit else None,
                           timeout_s=target.request_timeout, headers=target.headers)

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
        if self.render.ahead_full():
            return False
        return self.render.prepare_ahead(self.plan.upcoming(now, AHEAD_S * self.s.target.clock_scale))

    def _begin(self, client: Client, d: Dispatch) -> tuple[Exchange, int, int, int]:
        """Start the request of a dispatch: (exchange, ISL, OSL, theoretical cached)."""
        body, isl, osl, k = self.render.prepared(d)
        theo = self.render.theoretical_cached(d, isl, k)
        turn = self.identity.turn(d.tree, d.graph, d.node)
        headers = {**dict(self.s.target.headers), **session_headers(self.identity.preset, turn)}
        headers["X-Correlation-ID"] = f"{self.run_id}-{d.tree}-{d.node}"
        body = with_body_field(body, session_body_field(self.identity.preset, turn))
        return client.begin(self.render.bodies.path, body, headers), isl, osl, theo

    async def _record(self, client: Client, d: Dispatch, ex: Exchange, isl: int, osl: int, theo: int) -> Record:
        base, scale = self.t0, self.s.target.clock_scale
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
        self.identity.answered(d.tree, node.stream, res.set_cookie)
        rec.ttft = (res.first - res.start) * scale if res.first is not None else None
        rec.isl, rec.osl, rec.cached = res.prompt_tokens, res.completion_tokens, res.cached_tokens
        if rec.osl is None and res.error is None:
            rec.osl = res.chunks
        rec.chunks, rec.finish_reason, rec.status = res.chunks, res.finish_reason, res.status
        if res.reasoning_tokens is not None or res.reasoning_chunks:
            rec.reasoning = res.reasoning_tokens if res.reasoning_tokens is not None else res.reasoning_chunks
        rec.error, rec.detail = res.error, res.detail
        if res.error is None and res.first is None:
            rec.error = "empty"  # a 200 with no output at all
        if self.s.target.keep_chunks:
            rec.chunk_times = [(t - res.start) * scale for t in res.chunk_times]
        return rec

    def _failed(self, d: Dispatch, detail: str) -> Record:
        node = d.graph.nodes[d.node]
        now = self.clock()
        return Record(run=self.run_id, lane=d.lane, tree=d.tree, replay=d.replay, session=d.session.id,
                      stream=node.stream, stream_kind=d.graph.kind(d.node), node=d.node, phase=d.phase,
                      planned=d.planned, start=now, end=now, isl_planned=0, osl_planned=0, theo_cached=0,
                      error="client", detail=detail[:300])

    def _finished_trees(self) -> None:
        """Write the rows of trees that finished since the last call and drop their state."""
        done = self.plan.finished_trees
        while self.trees_written < len(done):
            tree = done[self.trees_written]
            self.trees_written += 1
            self.render.forget(tree.uid, len(tree.graph.streams))
            self.identity.forget(tree.uid, len(tree.graph.streams))
            self.folder.write_tree(tree, self.plan.profile_end)


def _runqueue_wait_s() -> float | None:
    """Seconds the loop's thread has waited for a CPU while runnable (Linux schedstat; None
    elsewhere): a client late with CPU to spare was either held in its loop or kept off a CPU."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


async def _after(seconds: float, coro):
    await asyncio.sleep(seconds)
    return await coro


def bench(settings: BenchSettings, sessions: list, command: str = "", on_tick=None) -> dict:
    """Replay `sessions` against the target; write the run folder; return the result point.
    `on_tick(snapshot)` receives live figures twice a second (a progress display)."""
    if settings.target.model is None:
        settings = settings.replace(model=discover_model(settings.target.url, settings.target.headers))
    run = Run(settings, sessions, command)
    try:
        run_async(run.execute(on_tick))
    except BaseException as e:  # KeyboardInterrupt too: the folder says the run did not complete
        run.folder.fail(e)
        raise
    return report(run.folder.path)
