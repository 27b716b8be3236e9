"""Several replicas advance in decode windows, each up to the next event any of them can cause,
and give exactly what advancing one iteration at a time gives (records, trees, metric series)."""

import heapq
import json

import pytest

from agentx.data import sample_traces
from agentx.engine.config import EngineConfig
from agentx.engine.routing import RouterName as ROUTERS
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.engine.config import Deployment
from agentx.virtual.runner import VirtualRun


class StepByStep(VirtualRun):
    """The reference: one iteration (`EngineCore.step`) per loop turn, other replicas' finishes
    bounded only by the iteration overhead, and every finish bounding every core, warmup included
    (no `virtual/reach.py`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reach = None

    @staticmethod
    def _finish_bound(core) -> float:
        return core.finish_bound()

    def _advance(self, core, until: float) -> None:
        self.turns += 1
        step = core.step()
        if step.decodes:
            self.itl[self.replicas.cores.index(core)].append((step.duration, step.decodes))
        for seq in step.finished:
            heapq.heappush(self.done, (seq.finished_at, seq.replica, next(self.order), seq))


def run(cls, out, replicas: int, router: str, engine: EngineConfig = EngineConfig(), idle_cap: float = 0.0,
        concurrency: int = 6, duration: float = 40.0) -> tuple[dict, dict]:
    # by default no idle time between a tree's requests: a finish's next request arrives at once, so
    # a replica that ran past another's finish would show
    settings = BenchSettings.build(url="virtual", out=str(out), concurrency=concurrency, duration=duration, seed=3,
                                   idle_cap=idle_cap)
    r = cls(settings, load_sessions([sample_traces()]), Deployment(engine, replicas, router))
    r.execute()
    files = {name: (out / name).read_text().replace(r.run_id, "RUN")
             for name in ("records.jsonl", "trees.jsonl", "server_metrics.jsonl")}
    return files, json.loads((out / "run.json").read_text())["client"]


SPEC_DECODE = EngineConfig(spec_decode="mtp", draft_tokens=3, acceptance_length=2.4)


@pytest.mark.parametrize("replicas, router, engine",
                         [(n, router, EngineConfig()) for n in (2, 4) for router in ROUTERS]
                         + [(3, "least-loaded", SPEC_DECODE)])
def test_windows_across_replicas_equal_step_by_step(tmp_path, replicas, router, engine):
    fast, fast_client = run(VirtualRun, tmp_path / "fast", replicas, router, engine)
    ref, ref_client = run(StepByStep, tmp_path / "ref", replicas, router, engine)
    records = [json.loads(line) for line in fast["records.jsonl"].splitlines()]
    assert len(records) > 50 and sum(not r.get("error") for r in records) > 50
    assert len({r["tree"] for r in records}) > replicas  # several sessions spread over the replicas
    for name in fast:
        assert fast[name] == ref[name], name
    assert fast_client["decode_iterations"] == ref_client["decode_iterations"]
    assert fast_client["advance_turns"] * 5 < ref_client["advance_turns"]  # windows: far fewer loop turns


class NoLags(VirtualRun):
    """Every core stops at every dispatch and at every finish (bound) while profiling (no `lags.py`)."""

    def _until(self, first, busy, known, events, timers):
        if self.reach and not self.plan.warming:
            return min([events] + [self._bound(c) for c in busy if c is not first])
        return super()._until(first, busy, known, events, timers)


@pytest.mark.parametrize("pp", [1, 2])
def test_lags_let_cores_run_past_events_that_cannot_reach_them_in_time(tmp_path, pp):
    """Session affinity with the traces' own delays (idle cap 300 s): a core runs past other cores'
    dispatches and finishes until the work they send could reach it (`virtual/lags.py`), with the
    same records, trees and series as one iteration at a time, in fewer turns than without; under
    pipeline parallelism too (a decode iteration's time there depends on its micro-batches)."""
    args = (4, "session-affinity", EngineConfig(pp=pp), 300.0, 32, 120.0)
    fast, fast_client = run(VirtualRun, tmp_path / "fast", *args)
    ref, _ = run(StepByStep, tmp_path / "ref", *args)
    plain, plain_client = run(NoLags, tmp_path / "plain", *args)
    records = [json.loads(line) for line in fast["records.jsonl"].splitlines()]
    assert sum(r["phase"] == "profile" and not r.get("error") for r in records) > 30
    for name in fast:
        assert fast[name] == ref[name] == plain[name], name
    assert fast_client["advance_turns"] < plain_client["advance_turns"]
