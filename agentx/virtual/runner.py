"""`agentx sim bench`: the replay plan and the simulated engine joined in modeled time.

A discrete-event loop: no sockets, no sleeping, no tokens. Requests are the plan's dispatches,
handed to the engine cores as their length and block hashes (`content/engine_blocks.py`); the
cores advance in modeled time (`EngineCore.advance`, decode windows included) and their finished
sequences become the records `agentx bench` would have written, with modeled times. The run
folder is the same as bench's (run.json, records.jsonl, trees.jsonl, server_metrics.jsonl as a
1 s series on the modeled clock, result.json), so `agentx report` reads it like any other.

Order of events (SPEC section 10): a request arriving at t joins its core's first iteration that
starts at or after t. The loop only lets a core start an iteration once every event before it is
known: plan dispatches (their times are known), sample ticks, and other cores' finishes (a
request that a finish makes due may be routed to any core). Between arrivals a core's future is
its own: when its batch only decodes, its next finish is bounded from below by its iteration
time without running it (`engine/window.decode_finish_bound`), so each core advances in decode
windows up to about the next known arrival or the earliest finish of any core, instead of one
iteration at a time. The core furthest behind always moves next.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import json
import math
import time

from agentx import __version__
from agentx.common import key64, peak_rss_mb
from agentx.content.engine_blocks import EngineBlocks
from agentx.engine.hints import Hints
from agentx.engine.config import Deployment, EngineConfig, changed_settings
from agentx.engine.metrics import ServerStats, gpu_power, samples
from agentx.engine.disagg import Workers, workers
from agentx.engine.timing import Roofline
from agentx.engine.mixed import mixed_finish_bound
from agentx.engine.window import decode_finish_bound, prefill_finish_bound
from agentx.power.readings import GpuReading
from agentx.power.sampler import PowerSample, sample_line
from agentx.records import Record, RecordWriter
from agentx.replay.folder import report
from agentx.replay.plan import DONE, DRAIN, PROFILE, WARMUP1, Dispatch
from agentx.replay.run import RunSkeleton
from agentx.replay.session_ids import stream_session_id, stream_session_ids
from agentx.replay.settings import BenchSettings
from agentx.virtual.lags import Lags
from agentx.virtual.reach import Reach, warming

TICK_S = 0.5  # wall seconds between progress snapshots


def engine_settings(e: EngineConfig, sim: Deployment | None = None) -> str:
    """The sim's settings that set a deployment apart beside its labels (SPEC §8 `engine_settings`):
    its timing profile and batching, then every other setting that differs from its default."""
    parts = [f"{sim.disaggregation()}"] if sim is not None and sim.prefill else []
    parts += [f"profile={Roofline(e).profile.key}", f"gpu_memory_utilization={e.gpu_memory_utilization:g}",
              f"max_num_seqs={e.max_num_seqs}",
              f"max_num_batched_tokens={e.max_num_batched_tokens}"]
    return ", ".join(parts + changed_settings(e, ("engine", "gpu_memory_utilization", "max_num_seqs",
                                                  "max_num_batched_tokens")))


def kv_offload_label(e: EngineConfig) -> str | None:
    """`100 GB CPU`, `100 GB CPU + 8 x micron-9550-pro SSD` (the tiers under HBM), or None."""
    if not e.cpu_offload_gb:
        return None
    return f"{e.cpu_offload_gb:g} GB CPU" + (f" + {e.ssd_drives} x {e.ssd_drive} SSD" if e.ssd_drives else "")


def simulated_labels(sim: Deployment, roof: Roofline | None = None) -> dict:
    """The identity labels of a virtual run of `sim` (run.json's settings beside bench's)."""
    e = sim.engine
    roof = roof or Roofline(e)
    return {
        "engine": f"agentx-sim {e.engine} profile (virtual time)", "engine_version": __version__,  # (sim serve's too)
        "hardware": e.hardware, "gpus": sim.gpus(),
        "precision": e.precision, "kv_offload": kv_offload_label(e),
        "router": sim.router if sim.replicas > 1 or sim.prefill else None, "url": None,
        "parallelism": sim.label(),
        "engine_settings": engine_settings(e, sim),
        "spec_decoding": f"{e.spec_decode} K={e.draft_tokens} AL={roof.acceptance_length:g}" if e.spec_decode else None,
        "simulated": {"hardware": e.hardware, "model": e.model, "gpus_per_replica": e.gpus,
                      "replicas": sim.replicas, "router": sim.router, "deployment": roof.describe()},
    }


class VirtualRun(RunSkeleton):
    """One virtual replay of `sessions` into the run folder `settings.out`. `client_delay_s`: the
    plan hears of each request's end this many modeled seconds after it (0: at once, as `sim
    bench`; bench's twin models what an HTTP client cannot avoid, `virtual/twin.py`)."""

    def __init__(self, settings: BenchSettings, sessions: list, sim: Deployment, command: str = "",
                 client_delay_s: float = 0.0):
        self.client_delay_s = client_delay_s
        self.replicas = workers(sim)
        self.disagg = self.replicas if isinstance(self.replicas, Workers) else None
        # while warming up: which cores a finish can reach (`reach.py`; None: any)
        self.reach = Reach(self.replicas) if Reach.applies(self.replicas, self.disagg is not None) else None
        roof = self.replicas.roofline
        settings = settings.replace(model=settings.target.model or roof.model.name, wire="tokens",
                                    clock_scale=1.0, server_metrics=None)
        self.sim = sim
        e = sim.engine
        simulated = simulated_labels(sim, roof)
        super().__init__(settings, sessions, command, simulated, tokenizer=None)  # no text: block hashes only
        self.blocks = EngineBlocks(self.render.prompts, e.block_size)
        # while profiling, with `reach`: how soon another core's events can reach a core (`lags.py`)
        self.lags = Lags(self.plan, self.replicas, client_delay_s) if self.reach else None
        self.hashes: dict = {}  # (tree, stream) -> block hashes of the stream's last request
        self.inflight: dict = {}  # sequence -> (dispatch, ISL, OSL, theoretical cached)
        self.stats = ServerStats()
        self.itl: list = [[] for _ in self.replicas.cores]  # per core: (duration, decodes) since the last sample
        self.done: list = []  # heap of (finish time, replica, order, sequence) not handled yet
        self.order = itertools.count()
        self.records = self.series = None
        self.turns = 0  # loop turns that advanced a core (the cost the windows save)
        self.time = 0.0  # the loop's clock: every event before it has been handled
        # per core, its finish bound while its state is unchanged (a bound is a function of its own
        # core's state only): dropped when it advances or a request reaches it, so a turn computes
        # one bound, not one per core
        self.bounds: dict = {}
        self.ended = 0  # requests ended (the progress line)
        self.on_tick, self.next_tick = None, 0.0  # progress: called with snapshot() every TICK_S of wall time
        self.power = None  # power.jsonl: the modeled GPUs' DCGM readings (none without power figures)
        self.window_open, self.last_profile_end = False, None
        self.t0 = self.cpu0 = 0.0  # the run's wall and CPU clocks at open()

    # ------------------------------------------------------------------ the loop

    def execute(self) -> None:
        """Run the plan: open, loop, close (the real run's shape, replay/driver.py)."""
        # the traces, graphs and plan live for the whole run: out of the cyclic collector's sight
        gc.collect()
        gc.freeze()
        try:
            self.open()
            self.loop()
            self.close()
        finally:
            gc.unfreeze()

    def open(self) -> None:
        """Everything before the first request: the run's CPU and wall clocks, the records, trees,
        server-metrics and power files, the plan's start at modeled time 0."""
        folder = self.folder.path
        self.t0, self.cpu0 = time.perf_counter(), time.process_time()
        self.records = RecordWriter(folder)
        self.folder.open_trees()
        self.series = open(folder / "server_metrics.jsonl", "ab", buffering=0)
        if self.replicas.cores[0].power.known:
            self.power = open(folder / "power.jsonl", "ab", buffering=0)
            self.folder.info["power_source"] = POWER_SOURCE
        self.plan.start(0.0)

    def loop(self) -> None:
        """The events in modeled time, the earliest first (requests due, finishes, KV handoffs,
        samples, the window's end) between the busy cores' advances, until nothing is left."""
        plan, tick = self.plan, 0.0
        while True:
            for d in plan.due(self.time):
                self._submit(d)
            drain_end = plan.profile_end + self.s.target.request_timeout  # as long as HTTP would wait
            if plan.phase == DONE or (plan.phase == DRAIN and self.time >= drain_end):
                break
            nt = plan.next_time(self.time)
            busy = [c for c in self.replicas.cores if not c.idle]
            handoff = self.disagg.next_time() if self.disagg else None  # a KV transfer's arrival
            if nt is None and not busy and not self.done and handoff is None:
                break  # nothing left to happen (no engine holds work, no timer or transfer is set)
            timers = min(tick, plan.profile_end if plan.phase == PROFILE else drain_end if plan.phase == DRAIN else math.inf,
                         math.inf if handoff is None else handoff)
            known = min(math.inf if nt is None else nt, timers)
            events = min(known, self.done[0][0] if self.done else math.inf)
            first = min(busy, key=lambda c: c.now) if busy else None
            if first is None or events <= first.now:
                self.time = max(self.time, events)
                if self.done and self.done[0][0] <= self.time:
                    self._finish(heapq.heappop(self.done)[-1])
                elif handoff is not None and handoff <= self.time:
                    self._decode()
                elif self.time >= tick:
                    self._sample(tick)
                    tick += 1.0
                    if self.on_tick and time.perf_counter() >= self.next_tick:
                        self.next_tick = time.perf_counter() + TICK_S
                        self.on_tick(self.snapshot())
                continue
            self._advance(first, self._until(first, busy, known, events, timers))

    def close(self) -> None:
        """Everything after the loop: what is in flight drained or cancelled, the window's closing
        power read, the files closed, the folder finished with the run's costs."""
        plan = self.plan
        # drained: what is in flight was sent after the window (or outlived the request timeout): cancelled now
        self._drain(self.time if plan.cfg.drain else plan.profile_end + self.s.target.grace)
        if self.last_profile_end is not None:
            self._power_read(self.last_profile_end, "close")  # the window closes as its last request ends
        self.records.close()
        self.series.close()
        if self.power:
            self.power.close()
        self.folder.finish({"wall_s": time.perf_counter() - self.t0, "cpu_s": time.process_time() - self.cpu0,
                            "peak_rss_mb": peak_rss_mb(),
                            "modeled_s": self.time, "advance_turns": self.turns,
                            "decode_iterations": sum(c.spec_steps for c in self.replicas.cores)})

    def _advance(self, core, until: float) -> None:
        """Run `core` up to `until`; its finished sequences wait in `done` for their time (finishes
        at the same time are handled in replica order, whichever core ran first)."""
        finished = core.advance(max(until, core.now + 1e-9), self.itl[self.replicas.cores.index(core)])
        self.bounds.pop(core, None)
        self.turns += 1
        for seq in finished:
            heapq.heappush(self.done, (seq.finished_at, seq.replica, next(self.order), seq))

    def _until(self, first, busy: list, known: float, events: float, timers: float) -> float:
        """How far `first` may run: to the next event (`known`: plan, sample, window's end; or a
        finish) or another core's finish bound, whichever is first; while the plan warms up, only
        the finishes and bounds of requests whose trees reach `first` count (`reach.py`); after, with
        `reach`, only its own dispatches, and others' events as soon as they can reach it (`lags.py`;
        `timers`: sample, window's end)."""
        stage = warming(self.plan) if self.reach else None
        if stage is None and self.reach:
            lags, cores = self.lags, self.replicas.cores
            return min([timers, lags.next_due(cores.index(first)), lags.next_reach(), lags.finished(self.done)]
                       + [lags.core_bound(c, cores.index(c), self._bound(c)) for c in busy if c is not first])
        if stage is None:
            return min([events] + [self._bound(c) for c in busy if c is not first])
        if stage == WARMUP1:
            return known  # (a finish sends nothing before stage 2)
        reach, bit = self.reach, 1 << self.replicas.cores.index(first)
        masks = reach.masks
        done = min((t for t, _, _, seq in self.done if masks.get(seq, reach.full) & bit), default=math.inf)
        return min([known, done] + [self._bound(c) for c in busy if c is not first and reach.held_by(c) & bit])

    def _bound(self, core) -> float:
        bound = self.bounds.get(core)
        if bound is None:
            bound = self.bounds[core] = self._finish_bound(core)
        return bound

    @staticmethod
    def _finish_bound(core) -> float:
        """A time before which `core` cannot finish a sequence unless a request reaches it first:
        from its decode window's iteration time when its batch only decodes, from its prefill's
        chunks when one sequence runs and prefills, from a mixed window's shape (`engine/mixed.py`),
        else from the iteration overhead (`EngineCore.finish_bound()`)."""
        return max(decode_finish_bound(core) or 0.0, prefill_finish_bound(core) or 0.0, mixed_finish_bound(core) or 0.0,
                   core.finish_bound())

    def _drain(self, deadline: float) -> None:
        """After the window: let requests in flight finish (up to the grace), cancel the rest."""
        while True:
            busy = [c for c in self.replicas.cores if not c.idle and c.now < deadline]
            event = self._stage_event() if self.disagg else math.inf
            first = min(busy, key=lambda c: c.now) if busy else None
            if event < deadline and (first is None or event <= first.now):
                self._next_stage(event)
                continue
            if first is None:
                break
            others = [self._bound(c) for c in busy if c is not first]
            self._advance(first, min([deadline, event] + others))
        while self.done:
            self._finish(heapq.heappop(self.done)[-1])
        for seq in list(self.inflight):  # (a request whose KV is still in flight too)
            self.replicas.abort(seq)
            self.bounds.clear()
            d, isl, osl, theo = self.inflight.pop(seq)
            self.records.write(self.record(d, isl, osl, theo, self._arrival(seq), deadline, status=200,
                                           error="cancelled"))

    # ------------------------------------------------------------- requests

    def _submit(self, d: Dispatch) -> None:
        """Hand a dispatch to the engine at the loop's time (or record its refusal)."""
        now, prompts = self.time, self.render.prompts
        if d.phase == "profile" and not self.window_open:
            self.window_open = True
            self._power_read(now, "open")  # the profiling start itself, as bench's sampler reads it
        session, req = d.session, d.request
        stream = (d.tree, d.graph.nodes[d.node].stream)
        isl = prompts.isl(session, req)
        osl = 1 if d.phase == "warmup" else prompts.osl(req)  # (a drain request loads as a profiled one)
        k = self.render.shared_with_last(d)
        theo = self.render.theoretical_cached(d, isl, k)
        problem = self.replicas.context_error(isl, osl)
        if problem:
            rec = self.record(d, isl, osl, theo, now, now, error="context_overflow", status=400, detail=problem[:300])
            self._ended(d, rec, now)
            return
        tail_key = key64("tail", self.run_id, d.tree, d.node)
        hashes = self.blocks.hashes(session, req, tail_key, d.marker, self.hashes.get(stream), k)
        self.hashes[stream] = hashes
        seq = self.replicas.cores[0].blocks_sequence(f"{d.tree}-{d.node}", isl, hashes, osl)
        ids, parents = stream_session_ids(str(d.tree), d.graph.parents)
        hints = self.hints_of(d, ids[stream[1]], parents[stream[1]], k, osl)
        seq.hints = Hints(**hints) if hints else None
        self._wake(now)
        # the stream's session id as bench sends it (`TREE`, `TREE.k`) less bench's random run id
        self.bounds.pop(self.replicas.add(seq, now, stream_session_id(str(d.tree), stream[1])), None)
        self.inflight[seq] = (d, isl, osl, theo)
        if self.reach:
            self.reach.submitted(seq, d.tree, len(d.graph.streams))
            self.lags.submitted(seq, d.tree, d.node)

    def _wake(self, now: float) -> None:
        for core in self.replicas.cores:
            if core.idle and core.now < now:
                core.now = now  # an idle engine starts its next iteration when work arrives
                self.bounds.pop(core, None)

    def _stage_event(self) -> float:
        """Disaggregated, in the grace: the next finish or KV arrival (a prefill stage finishing
        hands its KV off; an arrival before the deadline still decodes)."""
        handoff = self.disagg.next_time()
        return min(self.done[0][0] if self.done else math.inf, math.inf if handoff is None else handoff)

    def _next_stage(self, at: float) -> None:
        self.time = max(self.time, at)
        if self.done and self.done[0][0] <= at:
            self._finish(heapq.heappop(self.done)[-1])
        else:
            self._decode()

    def _decode(self) -> None:
        """KV transfers have reached the decode side: their sequences join the decode workers."""
        self.bounds.clear()
        self._wake(self.time)
        self.disagg.arrive(self.time)

    def _arrival(self, seq) -> float:
        return self.disagg.arrival_of(seq) if self.disagg else seq.arrival

    def _finish(self, seq) -> None:
        """A finished sequence at its time: its record, and the plan told (the loop then sends
        what that made due at this time; the cores' states are as they were: their bounds hold); a
        prefill stage's KV leaves for its decode worker (no core's state changes)."""
        if self.disagg and self.disagg.prefilled(seq):
            return
        d, isl, osl, theo = self.inflight.pop(seq)
        if self.reach:
            self.reach.ended(seq)
            self.lags.ended(seq)
        arrival = self._arrival(seq)
        produced = len(seq.output)
        rec = self.record(d, isl, osl, theo, arrival, seq.finished_at, ttft=seq.first_token_at - arrival,
                          isl=isl, osl=produced, cached=seq.cached_tokens, chunks=produced,
                          finish_reason=seq.finish_reason, status=200)
        s = self.stats
        s.success[seq.finish_reason] = s.success.get(seq.finish_reason, 0) + 1
        s.ttft.observe(rec.ttft)
        s.e2e.observe(rec.end - rec.start)
        s.queue.observe(max(0.0, seq.scheduled_at - arrival))
        self._ended(d, rec, seq.finished_at)

    def snapshot(self) -> dict:
        """Where the virtual run is, for a progress line."""
        plan = self.plan
        return {"phase": plan.phase.rstrip("12"), "modeled_s": self.time, "requests": self.ended,
                "profile_left": max(0.0, plan.profile_end - self.time) if plan.profile_start < math.inf else None}

    def _ended(self, d: Dispatch, rec: Record, at: float) -> None:
        self.ended += 1
        self.records.write(rec)
        if rec.phase == "profile" and rec.error is None:
            self.last_profile_end = max(self.last_profile_end or rec.end, rec.end)
            for core in self.replicas.cores:  # the window's closing read may come at this time
                core.power.hold = self.last_profile_end
        self.plan.ended(d.key, at + self.client_delay_s)
        for tree in self.finished_trees():  # their rows written; their block hashes dropped
            for stream in range(len(tree.graph.streams)):
                self.hashes.pop((tree.uid, stream), None)

    # ------------------------------------------------------------- metrics

    def _sample(self, t: float) -> None:
        """The engines' /metrics at modeled time t, as the scraper writes them."""
        for itl in self.itl:  # in replica order: the histogram's float sum is the same whatever core ran first
            for duration, decodes in itl:
                self.stats.itl.observe(duration, decodes)
            itl.clear()
        phase = self.phase_at(t)
        self.series.write(_series_line(t, phase, samples(self.replicas, self.stats, self.s.target.model)))
        self._power_read(t, phase)

    def _power_read(self, t: float, phase: str) -> None:
        """What `bench --power dcgm:URL` reads from the sim at modeled time t (every tick, and
        the window's bounds)."""
        if not self.power:
            return
        # DCGM's power and energy series (mJ, as DCGM publishes it)
        reads = [GpuReading(gpu, watts, mj / 1000) for gpu, watts, mj in gpu_power(self.replicas, t)]
        self.power.write(sample_line(PowerSample(t, phase, reads)))


POWER_SOURCE = "dcgm (the simulated engine's modeled power, virtual time)"
_KEY_TEXT: dict[str, str] = {}  # sample name -> its JSON text and separator (the same names every second)


def _series_line(t: float, phase: str, values: dict[str, float]) -> bytes:
    """`json.dumps({"t": t, "phase": phase, "samples": values})` and a newline, byte for byte,
    with each sample name encoded once per run instead of once per modeled second."""
    keys = _KEY_TEXT
    parts = []
    for name, value in values.items():
        key = keys.get(name) or keys.setdefault(name, json.dumps(name) + ": ")
        parts.append(key + (repr(value) if math.isfinite(value) else json.dumps(value)))
    return f'{{"t": {json.dumps(t)}, "phase": {json.dumps(phase)}, "samples": {{{", ".join(parts)}}}}}\n'.encode()


def sim_bench(settings: BenchSettings, sessions: list, sim: Deployment, command: str = "", on_tick=None,
              client_delay_s: float = 0.0) -> dict:
    """Replay `sessions` on the simulated deployment in modeled time; write the run folder;
    return the result point. `on_tick(snapshot())` follows the run (a progress line)."""
    run = VirtualRun(settings, sessions, sim, command, client_delay_s)
    run.on_tick = on_tick
    try:
        run.execute()
    except BaseException as e:
        run.folder.fail(e)
        raise
    return report(run.folder.path)
