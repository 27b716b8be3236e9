"""The real-time driver: the dispatch loop that runs a replay plan against a server with asyncio
and agentx's own HTTP client (`http/`); bodies come from the renderer (`render.py`), records,
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
import os
import signal
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

import aiohttp

from agentx.common import peak_rss_mb
from agentx.errors import AgentxError
from agentx.metrics.hints import RefusalWatch
from agentx.metrics.identity import discover
from agentx.metrics.scrape import Scraper
from agentx.power.sampler import PowerSampler
from agentx.power.sources import find_source, make_source
from agentx.records import Record, RecordWriter
from agentx.replay.http.client import Client
from agentx.replay.folder import report
from agentx.replay.session_ids import SessionIdentity
from agentx.replay.plan import DONE, DRAIN, PROFILE, Dispatch
from agentx.replay.probe import ANSWER_TOKENS, ProbeConfig, probe_cache
from agentx.replay.run import RunSkeleton
from agentx.replay.settings import BenchSettings
from agentx.replay.http.sender import HttpSender
from agentx.replay.workers import LocalLauncher, RemoteSender, WorkerPool
from agentx.serving import run_async

# `bench` is the entry point; its settings (settings.py) and `report` (folder.py) are named here too
__all__ = ["BenchSettings", "Dispatcher", "Run", "bench", "discover_model", "report"]

# Event-loop timers fire up to ~1.5 ms off (libuv and epoll count whole milliseconds): the driver
# wakes this much early and spins (yielding to I/O) until a request is due.
TIMER_SLACK_S = 0.002
# While the loop would wait, the driver prepares the bodies of the requests due within AHEAD_S, one
# per loop turn and not within AHEAD_GUARD_S of a due time (a render can take milliseconds), so a
# due request is only written (`render.py` bounds the bytes held ahead).
AHEAD_S = 1.0
AHEAD_GUARD_S = 0.005


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


@dataclass
class Opened:
    """What `Run.open` set up for the loop and `Run.close` takes down."""

    sender: object  # HttpSender (this process's client) or workers.RemoteSender
    writer: RecordWriter
    probe: ProbeConfig | None
    scraper: Scraper | None = None
    scrape_task: asyncio.Task | None = None
    sampler: PowerSampler | None = None  # `--power`'s reads
    sample_task: asyncio.Task | None = None
    ticker: asyncio.Task | None = None
    window: list = field(default_factory=list)  # the scrape and the power read that open the window
    cpu0: float = 0.0
    waited0: float | None = None


class Run(RunSkeleton):
    """One (settings, sessions) replay into one folder, in three steps around a `Dispatcher`:
    `open` (server identity, cache probe, clock, files, scraper, client), the dispatcher's loop,
    `close` (in-flight requests up to the grace, the closing scrape, the folder finished)."""

    def __init__(self, settings: BenchSettings, sessions: list, command: str = ""):
        super().__init__(settings, sessions, command)
        self.identity = SessionIdentity(settings.target.session_headers, self.run_id)
        self.done = {"warmup": 0, "profile": 0, "drain": 0, "errors": 0}
        self.refusals = RefusalWatch(settings.target.model)
        self.recent: deque = deque(maxlen=500)  # (end, ttft, output tokens) of profile records
        self.clock = lambda: 0.0
        self.t0 = 0.0

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

    def count(self, rec: Record) -> None:
        self.refusals.see(rec)
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
            opened = await self.open(on_tick)
            dispatcher = Dispatcher(self, opened.sender, opened.writer, lambda: self._window_opens(opened))
            await dispatcher.loop()
            await self.close(opened, dispatcher)
        finally:
            gc.unfreeze()  # a sweep runs again in this process: let this run's objects be collected

    async def open(self, on_tick=None) -> Opened:
        """Everything before the first request: what the server says it is and the cache probe
        (before the run's clock starts), the clock, the records and trees files, the scraper,
        the client."""
        target = self.s.target
        found = await discover(target.url, headers=target.headers)
        self.folder.info["server_identity"] = {k: list(v) for k, v in found.items()}
        probe = self._probe_config(found)
        power = await self._power_source()
        if probe:
            self.folder.info["cache_probe"] = {"before": await probe_cache(probe, self.sessions)}
        pool = await self._start_workers()  # before the clock: every worker is ready (the start barrier)
        self.folder.write_info()
        t0, scale = time.perf_counter(), target.clock_scale
        self.t0 = t0
        self.clock = lambda: (time.perf_counter() - t0) * scale  # noqa: E731
        opened = Opened(None, RecordWriter(self.folder.path), probe)
        self.folder.open_trees()
        if target.server_metrics is not None:
            url = target.server_metrics or target.url.rstrip("/") + "/metrics"
            opened.scraper = await Scraper(url, self.folder.path / "server_metrics.jsonl", self.clock,
                                           self._phase, headers=target.headers).__aenter__()
            opened.scrape_task = asyncio.create_task(opened.scraper.run())
        if power is not None:
            opened.sampler = PowerSampler(power, self.folder.path / "power.jsonl", self.clock, self._phase).__enter__()
            opened.sample_task = asyncio.create_task(opened.sampler.run())
        opened.cpu0, opened.waited0 = time.process_time(), _runqueue_wait_s()
        if pool is None:
            client = await Client(target.url, target.request_timeout, target.keep_chunks).__aenter__()
            opened.sender = HttpSender(self, client)
        else:
            pool.start_clock(t0)
            opened.sender = RemoteSender(pool)
        opened.ticker = asyncio.create_task(self._tick(on_tick)) if on_tick else None
        return opened

    async def close(self, opened: Opened, dispatcher: Dispatcher) -> None:
        """Everything after the loop: in-flight answers awaited up to the grace, the closing
        scrape (once the window's last request has ended), the probe again, the folder finished
        with the client's health."""
        clock, scale, plan = self.clock, self.s.target.clock_scale, self.plan
        profile_wall = (clock() - plan.profile_start) / scale if plan.profile_start < math.inf else 0
        cpu, cpu_wall = time.process_time() - opened.cpu0, clock() / scale
        waited = _runqueue_wait_s()
        # drained: what is in flight now was sent after the window (phase `drain`), cancelled at once
        await dispatcher.drain(0.0 if plan.cfg.drain else self.s.target.grace)
        workers = await opened.sender.close()
        await asyncio.gather(*opened.window)  # the window closes when its last request has ended
        await asyncio.gather(*[part.scrape_once("close") if part is opened.scraper else part.sample_once("close")
                               for part in (opened.scraper, opened.sampler) if part is not None])
        if opened.probe:
            self.folder.info["cache_probe"]["after"] = await probe_cache(opened.probe, self.sessions)
        for task in (opened.scrape_task, opened.sample_task, opened.ticker):
            if task:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if opened.scraper is not None:
            await opened.scraper.__aexit__(None, None, None)
        if opened.sampler is not None:
            opened.sampler.__exit__(None, None, None)
            await opened.sampler.source.close()
        opened.writer.close()
        waited0 = opened.waited0
        if self.refusals.stop:
            self.folder.info["stopped"] = self.refusals.stop
        self.folder.finish({
            "cpu_percent": 100.0 * cpu / cpu_wall if cpu_wall else None,  # until the window closed
            "cpu_s": cpu,
            "runqueue_wait_percent": 100.0 * (waited - waited0) / cpu_wall if cpu_wall and waited is not None else None,
            "peak_rss_mb": peak_rss_mb(),
            "wall_s": clock() / scale, "profile_wall_s": profile_wall,
            **({"workers": workers} if workers else {}),
        })

    async def _start_workers(self) -> WorkerPool | None:
        """With --workers N > 1 or --ray: the worker processes (or actors), every one connected
        and its clock offset measured; None: this process sends the requests itself."""
        target = self.s.target
        count = target.worker_count()
        if target.ray:
            from agentx.replay.ray_workers import RayLauncher

            launcher = RayLauncher(target.ray, count)
        elif count == 1:
            return None
        else:
            launcher = LocalLauncher(count or len(os.sched_getaffinity(0)))
        pool = WorkerPool(self, launcher)
        try:
            await pool.start()
        except BaseException:
            launcher.stop()
            raise
        self.folder.info["client_workers"] = {"count": pool.count, "where": "ray" if target.ray else "local",
                                              "lanes": "lane L -> worker L mod count"}
        return pool

    def _window_opens(self, opened: Opened) -> None:
        """Scrape as the window opens: at once when nothing is in flight (the warmup has drained;
        nothing is sent before the profiling start), else at the start itself. Power is read at
        the start itself: energy accrues while nothing is sent."""
        plan = self.plan
        if (opened.scraper is None and opened.sampler is None) or opened.window or plan.phase not in (PROFILE, DRAIN, DONE):
            return
        start = max(0.0, (plan.profile_start - self.clock()) / self.s.target.clock_scale)
        loop = asyncio.get_running_loop()
        if opened.scraper is not None:
            wait = 0.0 if plan.inflight == 0 else start
            opened.window.append(loop.create_task(_after(wait, opened.scraper.scrape_once("open"))))
        if opened.sampler is not None:
            opened.window.append(loop.create_task(_after(start, opened.sampler.sample_once("open"))))

    async def _power_source(self):
        """The telemetry source of `--power` (None: off, or `auto` found none), named in run.json."""
        target = self.s.target
        if target.power == "none":
            return None
        if target.power == "auto":
            metrics = target.server_metrics or target.url.rstrip("/") + "/metrics"
            source, tried = await find_source(None if target.server_metrics is None else metrics)
            self.folder.info["power_auto"] = {"found": source.name if source else None, "tried": tried}
        else:
            source = make_source(target.power)
        self.folder.info["power_source"] = source.name if source else None
        return source

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
        return self.phase_at(self.clock())

    def forget_finished(self) -> list:
        """Write the rows of trees that finished since the last call and drop their state; the
        trees."""
        trees = list(self.finished_trees())
        for tree in trees:
            self.identity.forget(tree.uid, len(tree.graph.streams))
        return trees


class Dispatcher:
    """The real-time loop: hands the plan's due requests to a sender (each written at once, its
    answer awaited by a task of its own), records each answer and tells the plan, lets the sender
    prepare bodies ahead while it would wait, and sleeps until the next due time or completion.
    The sender is this process's HTTP client (`HttpSender`) or worker processes
    (`replay/workers.py`): the plan, the records and the window stay here either way."""

    def __init__(self, run: Run, sender, writer: RecordWriter, window_opens):
        self.run, self.plan, self.sender, self.writer = run, run.plan, sender, writer
        self.window_opens = window_opens  # called once the plan may have reached the window
        self.scale = run.s.target.clock_scale
        self.tasks: set[asyncio.Task] = set()
        self.wake = asyncio.Event()

    async def loop(self) -> None:
        """From the plan's start until it is done (or nothing is left to send or wait for)."""
        plan, clock, scale, wake = self.plan, self.run.clock, self.scale, self.wake
        loop = asyncio.get_running_loop()
        plan.start(clock())
        self.window_opens()
        while True:
            if self.run.refusals.stop:  # a wrong --model, URL or credentials: one hint, not thousands of refusals
                break
            self.launch(clock())
            if plan.phase == DONE:
                break
            nt = plan.next_time(clock())
            if nt is None and plan.inflight == 0:
                break
            deadline = math.inf if nt is None else nt  # run clock; the window's end counts too
            if plan.phase == PROFILE:
                deadline = min(deadline, plan.profile_end)
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

    async def drain(self, grace: float) -> None:
        """After the loop: answers in flight get `grace` seconds, then are cancelled (recorded so)."""
        self.sender.closing(grace)
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=grace + self.sender.close_margin_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def launch(self, now: float) -> None:
        """Send what is due: each request is written here, its answer awaited by a task."""
        loop = asyncio.get_running_loop()
        for d in self.plan.due(now):
            try:
                sent = self.sender.begin(d)
            except Exception as e:  # a bug must not stall the plan: record it and go on
                sent = e
            task = loop.create_task(self._one(d, sent))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _one(self, d: Dispatch, sent) -> None:
        rec = await self.sender.answer(d, sent)
        sent = None  # the body: its stream's next request may reuse the buffer
        # the agent can act once the response is complete (its last bytes may come after the last
        # token): that, not the record's `end`, starts the end-to-start delays. What this end made
        # due goes out now, before the record is written (the client's reaction, SPEC section 10)
        self.plan.ended(d.key, self.run.clock())
        self.window_opens()
        if self.plan.phase != DONE:
            self.launch(self.run.clock())
        self.writer.write(rec)
        self.run.count(rec)
        for tree in self.run.forget_finished():
            self.sender.forget(tree)
        self.wake.set()

    def _render_ahead(self, now: float) -> bool:
        """Let the sender prepare the next request due within AHEAD_S; False when there is none
        to prepare here (or the bodies held ahead are too big already)."""
        return self.sender.ahead(lambda: self.plan.upcoming(now, AHEAD_S * self.scale))


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


@contextmanager
def sigterm_exits():
    """SIGTERM as SystemExit(143) while the run goes (Python's default ends the process at once, and
    run.json kept "status": "running"): the run folder records it as interrupted."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def bench(settings: BenchSettings, sessions: list, command: str = "", on_tick=None, twin=None) -> dict:
    """Replay `sessions` against the target; write the run folder; return the result point.
    `on_tick(snapshot)` receives live figures twice a second (a progress display). `twin`: the
    virtual-twin check, `twin(settings, sessions, server_identity, folder) -> dict | None`
    (`agentx.virtual.twin.virtual_twin`, a layer above this one: the CLI passes it in)."""
    if settings.target.model is None:
        settings = settings.replace(model=discover_model(settings.target.url, settings.target.headers))
    run = Run(settings, sessions, command)
    try:
        with sigterm_exits():
            run_async(run.execute(on_tick))
    except BaseException as e:  # KeyboardInterrupt and SIGTERM too: the folder says the run did not complete
        run.folder.fail(e)
        raise
    if twin is not None:
        _twin(run, settings, sessions, twin)
    if settings.target.evals:  # the bundled eval after the run, into run.json (SPEC section 3, "Accuracy")
        from agentx.replay.evals import eval_target

        run.folder.info["accuracy"] = run_async(eval_target(settings.target))
        run.folder.write_info()
    return report(run.folder.path)


def _twin(run: Run, settings: BenchSettings, sessions: list, twin) -> None:
    """Against agentx-sim: the same plan in virtual time on the deployment the sim published,
    into run.json (`twin`), for the validity rules `twin_ttft` and `twin_itl` (SPEC section 3)."""
    found = twin(settings, sessions, run.folder.info.get("server_identity") or {}, run.folder.path)
    if found is not None:
        run.folder.info["twin"] = found
        run.folder.write_info()
