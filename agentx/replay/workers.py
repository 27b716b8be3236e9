"""Client workers: the lanes' requests sent from other processes (`bench --workers N`) or hosts
(`bench --ray ADDRESS`, `ray_workers.py`), the plan, the records file, the scrapes and the
profiling window kept by the driver (SPEC section 2, "Workers").

The driver runs the one seeded plan; lane L's requests go to worker L mod N, so a stream's
requests (and its rendering state) stay on one worker. A worker has its own event loop, HTTP
client and renderer; it renders a request's body (ahead, when the driver says what is coming),
sends it, and streams the record back as the answer ends. Before the run's clock starts every
worker has connected (the start barrier) and the driver has measured each worker's clock offset
(the ping with the shortest round trip, NTP-style), so a worker's record times are on the
driver's clock. The link is TCP with length-prefixed msgpack frames, opened by the worker to the
driver with a per-run token.
"""

from __future__ import annotations

import asyncio
import gc
import os
import secrets
import socket
import struct
import time
from dataclasses import dataclass

import msgspec

from agentx.common import gc_paused, peak_rss_mb
from agentx.errors import AgentxError
from agentx.records import Record
from agentx.replay.http.client import Client
from agentx.replay.plan import Dispatch
from agentx.replay.render import Renderer
from agentx.replay.run import RunSkeleton, make_record
from agentx.replay.http.sender import HttpSender
from agentx.replay.session_ids import SessionIdentity
from agentx.replay.settings import BenchSettings
from agentx.traces.graph import build_graph

CONNECT_TIMEOUT_S = 120.0  # for every worker to start, load the sessions and connect
CLOSE_MARGIN_S = 10.0  # beyond the grace, for the workers' last records to arrive
PINGS = 8  # clock-offset pings per worker
_HEADER = struct.Struct("!I")
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode
_encode_record = msgspec.msgpack.Encoder().encode
_decode_record = msgspec.msgpack.Decoder(Record).decode


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs: the run's settings and sessions (it builds the same graphs), the run
    id (bodies and session ids depend on it), where the driver listens and the run's token."""

    settings: BenchSettings
    sessions: list
    run_id: str
    host: str
    port: int
    token: str
    index: int


class Link:
    """One framed msgpack connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    def send(self, message: list) -> None:
        data = _encode(message)
        self.writer.write(_HEADER.pack(len(data)) + data)

    async def recv(self) -> list:
        (n,) = _HEADER.unpack(await self.reader.readexactly(_HEADER.size))
        return _decode(await self.reader.readexactly(n))

    def close(self) -> None:
        self.writer.close()


def dispatch_message(kind: str, d: Dispatch, graph_index: int) -> list:
    return [kind, d.key[0], d.key[1], d.lane, d.replay, graph_index, d.phase, d.marker, d.planned]


def dispatch_of(message: list, graphs: list) -> Dispatch:
    _, uid, node, lane, replay, gi, phase, marker, planned = message
    return Dispatch((uid, node), lane, uid, replay, graphs[gi], node, phase, marker, planned)


# ------------------------------------------------------------------------------------ worker side


class _WorkerRun:
    """A worker's share of the run: what `HttpSender` asks of a run (renderer, session identity,
    settings, the clock and its origin on this host's clock)."""

    def __init__(self, spec: WorkerSpec):
        self.s, self.run_id = spec.settings, spec.run_id
        target = spec.settings.target
        self.render = Renderer(spec.run_id, spec.settings.content, target.model, target.wire, target.tokenizer)
        self.identity = SessionIdentity(target.session_headers, spec.run_id)
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()  # from the run's start (set again then): the run's CPU, not the setup's
        self.scale = target.clock_scale

    def clock(self) -> float:
        return (time.perf_counter() - self.t0) * self.scale

    def record(self, d: Dispatch, *args, **answer) -> Record:
        return make_record(self.run_id, d, *args, **answer)

    hints_of = RunSkeleton.hints_of  # (it asks only the settings and the renderer, which a worker has)


def run_worker(spec: WorkerSpec) -> dict:
    """A worker's whole life (a process's target, or a Ray actor's method): its statistics."""
    from agentx.serving import run_async

    return run_async(_serve(spec))


async def _serve(spec: WorkerSpec) -> dict:
    with gc_paused():
        graphs = [build_graph(s) for s in spec.sessions]
    gc.collect()
    gc.freeze()  # the graphs live for the whole run (as in the driver)
    run = _WorkerRun(spec)
    target = spec.settings.target
    link = Link(*await asyncio.open_connection(spec.host, spec.port))
    link.send(["hello", spec.token, spec.index, socket.gethostname(), os.getpid()])
    async with Client(target.url, target.request_timeout, target.keep_chunks) as client:
        sender = HttpSender(run, client)
        served = await _Served(link, run, sender, graphs).serve()
    stats = {"host": socket.gethostname(), "pid": os.getpid(), "records": served,
             "cpu_s": time.process_time() - run.cpu0, "peak_rss_mb": peak_rss_mb()}
    link.send(["closed", stats])
    await link.writer.drain()
    link.close()
    return stats


class _Served:
    """A worker's message loop: pings, the start, requests to send, bodies to prepare ahead,
    finished trees, and the close (in-flight answers get the grace, then are cancelled)."""

    def __init__(self, link: Link, run: _WorkerRun, sender, graphs: list):
        self.link, self.run, self.sender, self.graphs = link, run, sender, graphs
        self.tasks: set[asyncio.Task] = set()
        self.hints: dict = {}  # dispatch key -> Dispatch the driver says is coming
        self.hinted = asyncio.Event()
        self.records = 0

    async def serve(self) -> int:
        ahead = asyncio.create_task(self._ahead())
        try:
            while True:
                msg = await self.link.recv()
                kind = msg[0]
                if kind == "ping":
                    self.link.send(["pong", msg[1], time.perf_counter()])
                elif kind == "start":
                    self.run.t0 = msg[1]  # the driver's origin, on this host's clock
                    self.run.cpu0 = time.process_time()
                elif kind == "send":
                    self._send(dispatch_of(msg, self.graphs))
                elif kind == "ahead":
                    d = dispatch_of(msg, self.graphs)
                    self.hints[d.key] = d
                    self.hinted.set()
                elif kind == "forget":
                    self.run.render.forget(msg[1], msg[2])
                    self.run.identity.forget(msg[1], msg[2])
                elif kind == "close":
                    await self._drain(msg[1])
                    return self.records
        finally:
            ahead.cancel()

    def _send(self, d: Dispatch) -> None:
        self.hints.pop(d.key, None)
        try:
            sent = self.sender.begin(d)
        except Exception as e:  # recorded by `answer`
            sent = e
        task = asyncio.get_running_loop().create_task(self._one(d, sent))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _one(self, d: Dispatch, sent) -> None:
        rec = await self.sender.answer(d, sent)
        sent = None
        self.records += 1
        self.link.send(["rec", _encode_record(rec)])

    async def _ahead(self) -> None:
        """Prepare what the driver said is coming, a body per loop turn."""
        while True:
            await self.hinted.wait()
            self.hinted.clear()
            while self.hints:
                key = next(iter(self.hints))
                d = self.hints.pop(key)
                if self.sender.ahead(lambda: [d]):
                    await asyncio.sleep(0)

    async def _drain(self, grace: float) -> None:
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)


# ------------------------------------------------------------------------------------ driver side


@dataclass
class _Worker:
    link: Link
    host: str = ""
    pid: int = 0
    offset_s: float = 0.0  # worker clock - driver clock
    rtt_s: float = 0.0
    stats: dict | None = None


class WorkerPool:
    """The driver's side: the listener, the workers' links, the clock offsets, the answers
    awaited (by dispatch key) and the workers' statistics. `launcher` starts the workers
    (`LocalLauncher`, or `RayLauncher` in `ray_workers.py`)."""

    def __init__(self, run, launcher):
        self.run, self.launcher = run, launcher
        self.count = launcher.count
        self.workers: list[_Worker | None] = [None] * self.count
        self.pending: dict[tuple, tuple[asyncio.Future, _Worker]] = {}  # dispatch key -> (answer, its worker)
        self.graph_index = {id(g): i for i, g in enumerate(run.plan.graphs)}
        self.readers: list[asyncio.Task] = []
        self.closed = asyncio.Event()

    async def start(self) -> None:
        """Start the workers and wait until every one has connected (the start barrier); measure
        each one's clock offset."""
        token = secrets.token_hex(16)
        connected = asyncio.Event()
        server = await asyncio.start_server(lambda r, w: self._hello(Link(r, w), token, connected),
                                            self.launcher.host, 0)
        port = server.sockets[0].getsockname()[1]
        run = self.run
        self.launcher.launch([WorkerSpec(run.s, run.sessions, run.run_id, self.launcher.host, port, token, i)
                              for i in range(self.count)])
        try:
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            while not connected.is_set():
                failed = self.launcher.failed()
                if failed:
                    raise AgentxError(f"a client worker did not start: {failed}", "workers")
                if time.monotonic() > deadline:
                    raise AgentxError(f"the client workers did not connect within {CONNECT_TIMEOUT_S:g} s", "workers")
                await asyncio.sleep(0.05)
        finally:
            server.close()
        for w in self.workers:
            await self._measure_offset(w)
        self.readers = [asyncio.create_task(self._read(i, w)) for i, w in enumerate(self.workers)]

    async def _hello(self, link: Link, token: str, connected: asyncio.Event) -> None:
        try:
            msg = await asyncio.wait_for(link.recv(), 10.0)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, msgspec.DecodeError):
            link.close()
            return
        if msg[0] != "hello" or msg[1] != token or not 0 <= msg[2] < self.count or self.workers[msg[2]]:
            link.close()  # not one of this run's workers
            return
        self.workers[msg[2]] = _Worker(link, msg[3], msg[4])
        if all(self.workers):
            connected.set()

    async def _measure_offset(self, w: _Worker) -> None:
        best = None
        for _ in range(PINGS):
            w.link.send(["ping", time.perf_counter()])
            _, sent, theirs = await w.link.recv()
            back = time.perf_counter()
            if best is None or back - sent < best[0]:
                best = (back - sent, theirs - (sent + back) / 2)
        w.rtt_s, w.offset_s = best

    def start_clock(self, t0: float) -> None:
        """The run's clock starts at driver time t0: each worker's origin on its own clock."""
        for w in self.workers:
            w.link.send(["start", t0 + w.offset_s])

    def worker_of(self, lane: int) -> _Worker:
        return self.workers[lane % self.count]

    async def _read(self, index: int, w: _Worker) -> None:
        """A worker's records (each resolves its dispatch's future), then its statistics."""
        try:
            while True:
                msg = await w.link.recv()
                if msg[0] == "rec":
                    rec = _decode_record(msg[1])
                    fut, _ = self.pending.pop((rec.tree, rec.node), (None, None))
                    if fut is not None and not fut.done():
                        fut.set_result(rec)
                elif msg[0] == "closed":
                    w.stats = msg[1]
                    return
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            error = ConnectionError(f"client worker {index} on {w.host} (pid {w.pid}) went away: {type(e).__name__}")
            for key, (fut, owner) in list(self.pending.items()):
                if owner is w:
                    del self.pending[key]
                    if not fut.done():
                        fut.set_exception(error)

    def closing(self, grace: float) -> None:
        for w in self.workers:
            try:
                w.link.send(["close", grace])
            except (ConnectionError, OSError, RuntimeError):
                pass  # a worker that went away: its answers failed already

    async def close(self) -> list[dict]:
        """Wait for every worker's statistics; stop them; the per-worker rows of run.json."""
        await asyncio.wait(self.readers, timeout=CLOSE_MARGIN_S)
        for task in self.readers:
            task.cancel()
        for w in self.workers:
            w.link.close()
        self.launcher.stop()
        return [{"worker": i, "host": w.host, "pid": w.pid, "clock_offset_s": w.offset_s, "clock_rtt_s": w.rtt_s,
                 **(w.stats or {"stats": "missing: the worker went away"})} for i, w in enumerate(self.workers)]


class RemoteSender:
    """`Dispatcher`'s sender when workers send the requests: a dispatch goes to its lane's
    worker, its answer is the record the worker streams back; what the plan says is coming goes
    to the workers to prepare ahead."""

    close_margin_s = CLOSE_MARGIN_S

    def __init__(self, pool: WorkerPool):
        self.pool, self.run = pool, pool.run
        self.hinted: set = set()

    def begin(self, d: Dispatch) -> asyncio.Future:
        w = self.pool.worker_of(d.lane)
        if w.stats is not None or w.link.writer.is_closing():
            raise ConnectionError(f"client worker on {w.host} (pid {w.pid}) went away")
        fut = asyncio.get_running_loop().create_future()
        self.pool.pending[d.key] = (fut, w)
        self.hinted.discard(d.key)
        w.link.send(dispatch_message("send", d, self.pool.graph_index[id(d.graph)]))
        return fut

    async def answer(self, d: Dispatch, fut) -> Record:
        try:
            if isinstance(fut, Exception):
                raise fut
            return await fut
        except asyncio.CancelledError:
            now = self.run.clock()
            return self.run.record(d, 0, 0, 0, now, now, error="cancelled")
        except Exception as e:  # the worker went away: recorded, the run goes on
            now = self.run.clock()
            return self.run.record(d, 0, 0, 0, now, now, error="client", detail=f"{type(e).__name__}: {e}"[:300])

    def ahead(self, upcoming) -> bool:
        """Tell each worker what its lanes send next (once per dispatch); nothing to do here."""
        for d in upcoming():
            if d.key not in self.hinted:
                self.hinted.add(d.key)
                self.pool.worker_of(d.lane).link.send(dispatch_message("ahead", d, self.pool.graph_index[id(d.graph)]))
        return False

    def forget(self, tree) -> None:
        self.pool.worker_of(tree.lane).link.send(["forget", tree.uid, len(tree.graph.streams)])

    def closing(self, grace: float) -> None:
        self.pool.closing(grace)

    async def close(self) -> list[dict]:
        return await self.pool.close()


class LocalLauncher:
    """Workers as processes of this host (spawned: a fresh interpreter each, no state shared)."""

    host = "127.0.0.1"

    def __init__(self, count: int):
        self.count = count
        self.procs: list = []

    def launch(self, specs: list[WorkerSpec]) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        for spec in specs:
            proc = ctx.Process(target=run_worker, args=(spec,), daemon=True, name=f"agentx-worker-{spec.index}")
            proc.start()
            self.procs.append(proc)

    def failed(self) -> str | None:
        dead = [p for p in self.procs if p.exitcode is not None]
        return f"{dead[0].name} exited with status {dead[0].exitcode}" if dead else None

    def stop(self) -> None:
        for proc in self.procs:
            proc.join(5.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(5.0)
