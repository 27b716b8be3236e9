"""`bench --workers N` against the simulated engine (a real server process): the same plan, the
same profiled requests and the same definitions as one process, the records from every worker on
the driver's clock."""

import asyncio
import gc
import json
import os
import time

import pytest

from agentx.engine.launch import sim_server
from agentx.errors import AgentxError
from agentx.records import read_records
from agentx.replay import workers
from agentx.replay.driver import bench
from agentx.replay.run import RunSkeleton
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import MOONCAKE, WEKA

SPEED = 50


@pytest.fixture(scope="module")
def sim():
    with sim_server("--speed", str(SPEED)) as url:
        yield url


def _settings(url, out, **kw) -> BenchSettings:
    base = dict(url=url, concurrency=4, duration=60, out=str(out), clock_scale=SPEED, warmup_requests_per_lane=2,
                grace=10)
    return BenchSettings.build(**{**base, **kw})


def _planned(records):
    """What the plan and the renderer decided of each request, not what timing made of it."""
    return {(r.session, r.node, r.stream, r.phase, r.isl_planned, r.osl_planned, r.theo_cached) for r in records}


def test_two_workers_send_the_same_profiled_requests_as_one(sim, tmp_path):
    """Schedule mode on single-request sessions: which requests fall into the window is fixed by
    their recorded start times, so the sets must be equal, request by request."""
    sessions = load_sessions([MOONCAKE], None)[:40]
    runs = {}
    for n in (1, 2):
        out = tmp_path / f"w{n}"
        result = bench(_settings(sim, out, mode="schedule", warmup=False, warmup_seconds=2.0, duration=20,
                                 workers=str(n)), sessions)
        runs[n] = (result, read_records(out), json.loads((out / "run.json").read_text()))
    (one, rec1, info1), (two, rec2, info2) = runs[1], runs[2]
    profiled = [r for r in rec2 if r.phase == "profile"]
    assert profiled and _planned(profiled) == _planned(r for r in rec1 if r.phase == "profile")
    assert _planned(rec2) == _planned(rec1)
    assert all(r.error is None and r.isl == r.isl_planned for r in rec2)
    assert one["requests"]["profiled"] == two["requests"]["profiled"] == len(profiled)
    assert _keys(one) == _keys(two)  # the same result, metric by metric
    settings1, settings2 = info1["settings"], info2["settings"]
    assert {k for k in settings1 if settings1[k] != settings2[k]} == {"workers", "out"}
    workers = info2["client"]["workers"]
    assert [w["worker"] for w in workers] == [0, 1] and "workers" not in info1["client"]
    assert sum(w["records"] for w in workers) == len(rec2) and all(w["records"] > 0 for w in workers)
    assert all(abs(w["clock_offset_s"]) < 0.05 and w["clock_rtt_s"] > 0 for w in workers)  # one host, one clock


def test_lanes_of_multi_turn_sessions_on_two_workers(sim, tmp_path):
    """Closed loop on the real sessions: every lane's streams on its worker (L mod 2), bodies
    rendered there agree with the plan, and the records' times are on the driver's clock."""
    sessions = load_sessions([WEKA], None)
    out1, out2 = tmp_path / "one", tmp_path / "two"
    bench(_settings(sim, out1, workers="1"), sessions)
    result = bench(_settings(sim, out2, workers="2"), sessions)
    records = read_records(out2)
    # (not `validity`: its sim-lag and host-error rules depend on how loaded the test host is)
    assert result["requests"]["profiled"] > 0 and not result["requests"]["errors"]
    assert all(r.error is None and r.isl == r.isl_planned for r in records)
    first = {(r.lane, r.session) for r in records if r.replay == 0}  # each lane's first tree: seeded
    assert first == {(r.lane, r.session) for r in read_records(out1) if r.replay == 0}
    info = json.loads((out2 / "run.json").read_text())
    by_worker = [w["records"] for w in info["client"]["workers"]]
    assert by_worker == [sum(r.lane % 2 == i for r in records) for i in (0, 1)]
    wall = info["client"]["wall_s"] * SPEED
    assert all(0 <= r.start <= r.end <= wall for r in records)


def test_worker_count_is_checked():
    with pytest.raises(AgentxError, match="workers"):
        BenchSettings.build(url="http://x", workers="0")
    assert BenchSettings.build(url="http://x", workers="auto").target.worker_count() is None


def _keys(d, prefix=""):
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, prefix + k + ".")
    return out


# ---------------------------------------------------------------------------------------------
# workers.py driven directly: the driver's pool and sender, and the workers' real message loop
# (`_serve`) as tasks of the test's event loop instead of processes, against an in-process sim.


class _InProcess:
    """A launcher whose workers are `workers._serve` tasks of this loop (the worker code as a
    process runs it, without the spawn); `strangers` connect first and say `hello` wrongly."""

    host = "127.0.0.1"

    def __init__(self, count: int, strangers: tuple = ()):
        self.count, self.strangers = count, strangers
        self.tasks: list[asyncio.Task] = []
        self.refused: list[bytes] = []

    def launch(self, specs) -> None:
        self.tasks = [asyncio.ensure_future(self._stranger(specs[0], hello)) for hello in self.strangers]
        self.tasks += [asyncio.ensure_future(workers._serve(spec)) for spec in specs]

    async def _stranger(self, spec, hello) -> None:
        reader, writer = await asyncio.open_connection(spec.host, spec.port)
        link = workers.Link(reader, writer)
        link.send(hello(spec))
        self.refused.append(await reader.read())  # b"": the pool closed the link without a word
        writer.close()

    def failed(self) -> str | None:
        broken = [t for t in self.tasks if t.done() and t.exception() is not None]
        return repr(broken[0].exception()) if broken else None

    def stop(self) -> None:
        pass


async def _sim():
    from aiohttp import web

    from agentx.engine.config import ServeConfig
    from agentx.engine.serve.app import SimServer

    # (a worker that stops mid-request leaves its connection half-written: the sim drops it after 2 s)
    runner = web.AppRunner(SimServer(ServeConfig(speed=SPEED, request_timeout_s=2.0)).app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"


def _run(url, tmp_path, count: int):
    """A real run skeleton (plan, renderer, folder) with the driver's clock, its plan started."""
    run = RunSkeleton(_settings(url, tmp_path / "run", workers=str(count)), load_sessions([WEKA], None))
    t0 = time.perf_counter()
    run.clock = lambda: (time.perf_counter() - t0) * SPEED
    run.plan.start(0.0)
    return run, t0


def _in_process(scenario):
    """What `scenario()` returns, run on a fresh loop."""
    gc.disable()  # `_serve` freezes what the heap holds: the test process's, here
    try:
        return asyncio.run(scenario())
    finally:
        gc.unfreeze()
        gc.enable()


def test_dispatch_messages_carry_a_dispatch_whole(tmp_path):
    run = RunSkeleton(_settings("http://127.0.0.1:9", tmp_path), load_sessions([WEKA], None))
    run.plan.start(0.0)
    graphs = run.plan.graphs
    for d in run.plan.due(0.0):
        msg = workers.dispatch_message("send", d, graphs.index(d.graph))
        assert workers.dispatch_of(workers._decode(workers._encode(msg)), graphs) == d


def test_workers_answer_their_lanes_on_the_driver_clock(tmp_path):
    """Every dispatch goes to its lane's worker (L mod N), is sent there on the worker's own
    client and comes back as the record of that very dispatch, its times on the driver's clock;
    a stranger (a wrong token, an index out of range) is refused at the start barrier."""
    async def scenario():
        runner, url = await _sim()
        run, t0 = _run(url, tmp_path, 2)
        launcher = _InProcess(2, strangers=(lambda s: ["hello", "not-the-token", 0, "x", 1],
                                            lambda s: ["hello", s.token, 7, "x", 1]))
        pool = workers.WorkerPool(run, launcher)
        await pool.start()
        pool.start_clock(t0)
        sender = workers.RemoteSender(pool)
        dispatches = run.plan.due(0.0)
        assert {d.lane % 2 for d in dispatches} == {0, 1}
        sent = [(d, sender.begin(d)) for d in dispatches]
        assert {pool.pending[d.key][1] is pool.worker_of(d.lane) for d, _ in sent} == {True}
        records = [await sender.answer(d, fut) for d, fut in sent]
        now = run.clock()
        sender.closing(5.0)
        rows = await sender.close()
        await runner.cleanup()
        return dispatches, records, now, rows, launcher.refused

    dispatches, records, now, rows, refused = _in_process(scenario)
    assert refused == [b"", b""]
    assert [(r.tree, r.node, r.lane, r.phase) for r in records] == [(d.tree, d.node, d.lane, d.phase) for d in dispatches]
    assert all(r.error is None and r.isl == r.isl_planned and r.osl == r.osl_planned == 1 for r in records)  # warmup
    assert all(0 <= r.start < r.end <= now for r in records)
    assert [(w["worker"], w["pid"], w["records"]) for w in rows] == \
           [(i, os.getpid(), sum(d.lane % 2 == i for d in dispatches)) for i in (0, 1)]
    assert all(abs(w["clock_offset_s"]) < 0.05 for w in rows)  # one host, one clock


def test_a_worker_that_went_away_fails_its_answers_not_the_run(tmp_path):
    """A worker's link lost with an answer in flight: the answer becomes a `client` error record,
    and a later dispatch to that worker is refused at once (recorded the same way)."""
    async def main():
        runner, url = await _sim()
        run, t0 = _run(url, tmp_path, 2)
        launcher = _InProcess(2)
        pool = workers.WorkerPool(run, launcher)
        await pool.start()
        pool.start_clock(t0)
        sender = workers.RemoteSender(pool)
        d, later = [d for d in run.plan.due(0.0) if d.lane % 2 == 1][:2]
        fut = sender.begin(d)
        pool.worker_of(d.lane).link.writer.transport.abort()
        lost = await sender.answer(d, fut)
        try:
            refused = sender.begin(later)
        except ConnectionError as e:
            refused = e
        after = await sender.answer(later, refused)
        sender.closing(1.0)
        rows = await sender.close()
        ends = await asyncio.gather(*launcher.tasks, return_exceptions=True)
        await runner.cleanup()
        return lost, after, rows, ends

    lost, after, rows, ends = _in_process(main)
    assert isinstance(ends[1], asyncio.IncompleteReadError)  # the worker itself stops: its driver is gone
    assert ends[0]["records"] == 0 and ends[0]["pid"] == os.getpid()
    assert lost.error == after.error == "client"
    assert "went away" in lost.detail and "went away" in after.detail
    assert rows[1]["stats"].startswith("missing") and rows[0]["records"] == 0


def test_a_worker_that_does_not_start_stops_the_run(tmp_path):
    class Broken(_InProcess):
        def launch(self, specs):
            self.tasks = [asyncio.ensure_future(self._fail())]

        async def _fail(self):
            raise OSError("no such interpreter")

    async def main():
        run, _ = _run("http://127.0.0.1:9", tmp_path, 1)
        with pytest.raises(AgentxError, match="a client worker did not start: OSError"):
            await workers.WorkerPool(run, Broken(1)).start()

    asyncio.run(main())
