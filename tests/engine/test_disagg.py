"""Disaggregated prefill / decode (SPEC section 6, engine/disagg.py): one request moving from a
prefill worker to a decode worker, its accounting, the tool-traffic route, and `sim serve` with
prefill and decode workers driven by `agentx bench` on real traces (its per-worker metrics, a
normal run folder, and agreement with `sim bench` of the same deployment in virtual time)."""

import json
import math
import subprocess
import sys

import pytest

from agentx.engine.config import Deployment, EngineConfig
from agentx.engine.disagg import MIN_NEW_TOKENS, Workers
from agentx.engine.hints import Hints
from agentx.engine.launch import sim_server
from agentx.engine.replicas import Replicas
from agentx.records import read_records
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.capacity import load_plan, run_plan
from agentx.virtual.runner import sim_bench
from tests.conftest import WEKA, valid_but_for_host_timing

ENGINE = dict(hardware="H200", gpus=1, model="llama-3.1-70b", precision="fp8")
FLAGS = [x for k, v in ENGINE.items() for x in (f"--{k}", str(v))]


def run(cores, seq, now=0.0):
    """Run a request arriving at `now` to its end on `cores` (Replicas or Workers), KV transfers included."""
    for core in cores.cores:
        core.now = max(core.now, now)  # (idle: an engine starts its next iteration when work arrives)
    cores.add(seq, now, "s")
    while seq.finish_reason is None:
        for core in cores.cores:
            for done in core.advance(math.inf) if not core.idle else []:
                if isinstance(cores, Workers):
                    cores.prefilled(done)
        if isinstance(cores, Workers) and cores.pending:
            at = cores.next_time()
            for core in cores.cores:
                core.now = max(core.now, at) if core.idle else core.now
            cores.arrive(at)
    return seq


def test_a_request_answers_as_on_one_engine_and_its_transferred_kv_is_no_hit():
    e = EngineConfig(**ENGINE)
    workers, one = Workers(Deployment(e, prefill=1, decode=1)), Replicas(e)
    prompt = list(range(1000, 3000))
    a = run(workers, workers.new_sequence("a", prompt, 20, ignore_eos=True))
    b = run(one, one.new_sequence("b", prompt, 20, ignore_eos=True))
    assert a.output == b.output and a.finish_reason == b.finish_reason == "length"
    assert a.stage.prefill == 0 and a.replica == 1 and a.transferred
    link = workers.transfer(0, 2000)
    assert link > 0 and a.stage.transfer_s == pytest.approx(link)
    assert a.finished_at > b.finished_at + link * 0.5  # the transfer is on the request's path
    prefill, decode = (c.kv.counters for c in workers.cores)
    assert prefill.gpu_queries == 2000 and decode.gpu_queries == decode.gpu_hits == 0
    assert workers.received == [0, 2000] and workers.cores[1].sources.local_cache_hit == 0
    # the second turn of the session hits on the prefill worker (a prefill-side hit); only the 500 tokens
    # the decode worker does not hold cross the link
    c = run(workers, workers.new_sequence("c", prompt + list(range(5000, 5500)), 8, ignore_eos=True), a.finished_at)
    assert c.cached_tokens == 2000 and workers.cores[0].kv.counters.gpu_hits == 2000  # the first prompt, whole blocks
    assert workers.cores[1].kv.counters.gpu_queries == 0 and workers.received[1] == 2000 + 500
    assert c.stage.moved == 500 and c.stage.transfer_s == pytest.approx(workers.transfer(0, 500))


def test_the_tool_route_sends_only_low_reuse_tool_results_to_the_prefill_workers():
    w = Workers(Deployment(EngineConfig(**ENGINE), prefill=1, decode=2, prefill_route="tool",
                           router="session-affinity"))

    def routed(n, **hints):
        seq = w.new_sequence(f"r{n}", list(range(n * 10_000, n * 10_000 + 6000)), 4, ignore_eos=True)
        seq.hints = Hints(**hints) if hints else None
        w.add(seq, 0.0, "s")
        return seq

    assert routed(1, tool_result_tokens=5000).replica == 0  # new 6000, tool results 5000: remote prefill
    assert routed(2).replica >= 1  # no hints: prefills where it decodes
    assert routed(3, tool_result_tokens=2000).replica >= 1  # tool results under half of what is new
    assert routed(4, prefix_tokens=4000, tool_result_tokens=2000).replica >= 1  # mostly a known prefix
    assert routed(5, prefix_tokens=6000 - MIN_NEW_TOKENS + 1, tool_result_tokens=1000).replica >= 1
    local = [s for c in w.cores[1:] for s in c.waiting]
    assert all(s.stage is None for s in local) and len(local) == 4


def test_sim_serve_with_prefill_and_decode_workers_under_bench(tmp_path):
    """`sim serve --prefill 1 --decode 2` driven by `agentx bench` on two real sessions: every
    request served, per-worker-group metrics (prefill-side hits, decode-side transfers), a normal
    run folder; `sim bench` of the same deployment agrees on the hit rate and the transfers."""
    traces = [str(WEKA / "trace_0291.json"), str(WEKA / "trace_0010.json")]
    common = ["--concurrency", "2", "--duration", "60", "--warmup-requests-per-lane", "1", "--hints", "harness"]
    truth = tmp_path / "truth.jsonl"
    dep = ["--prefill", "1", "--decode", "2", "--router", "session-affinity"]
    with sim_server("--speed", "20", *FLAGS, *dep, "--truth-log", str(truth)) as url:
        res = subprocess.run([sys.executable, "-m", "agentx.cli", "bench", "--url", url, "--traces", *traces, *common,
                              "--clock-scale", "20", "--out", str(tmp_path / "http")], capture_output=True, text=True)
    assert res.returncode in (0, 3), res.stderr
    http = json.loads((tmp_path / "http" / "result.json").read_text())
    assert valid_but_for_host_timing(http), http["validity"]["reasons"]
    records = [r for r in read_records(tmp_path / "http") if r.phase == "profile"]
    assert records and all(r.error is None for r in records) and http["requests"]["succeeded"] == len(records)
    settings = http["identity"]["engine_settings"]
    assert "prefill=1 decode=2" in settings and "prefill_route=all" in settings
    workers = http["server_metrics"]["workers"]
    prefill, decode = workers["prefill"], workers["decode"]
    assert prefill["prefix_hits"] > 0.5 * prefill["prefix_queries"] > 0  # the sessions' reuse, on the prefill side
    assert decode["prefix_queries"] == decode["prefix_hits"] == 0 == decode["prompt_tokens"]
    assert decode["kv_transfer_tokens"] > 0 and decode["kv_transfer_s"] > 0 and decode["generation_tokens"] > 0
    assert http["server_metrics"]["prefix_hit_rate"] == pytest.approx(prefill["prefix_hit_rate"])
    lines = [x for x in map(json.loads, truth.read_text().splitlines()) if "stall" not in x]  # (a host stall's line)
    assert any(x["hints"].get("tool_result_tokens", 0) > 0 for x in lines)  # the hint the tool route reads
    handed = [x["modeled"] for x in lines if x["completion_tokens"] > 1]
    assert handed and all(m["prefill_worker"] == 0 and m["replica"] in (1, 2) and m["kv_transfer_s"] > 0
                          for m in handed)
    for name in ("run.json", "records.jsonl", "server_metrics.jsonl", "trees.jsonl"):
        assert (tmp_path / "http" / name).is_file()
    virtual = sim_bench(BenchSettings.build(url="virtual", out=str(tmp_path / "virtual"), concurrency=2, duration=60,
                                            warmup_requests_per_lane=1, hints="harness", dataset=",".join(traces)),
                        load_sessions(traces), Deployment(EngineConfig(**ENGINE), prefill=1, decode=2,
                                                          router="session-affinity"))
    assert virtual["identity"]["parallelism"] == "TP1 prefill + 2 x TP1 decode" and virtual["identity"]["gpus"] == 3
    v, h = virtual["request_metrics"]["cache"], http["request_metrics"]["cache"]
    assert v["measured_hit_rate"] == pytest.approx(h["measured_hit_rate"], abs=0.03)
    vd = virtual["server_metrics"]["workers"]["decode"]
    assert vd["prefix_queries"] == 0 and vd["kv_transfer_tokens"] > 0


def test_sim_plan_grids_over_disaggregation(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("duration: 20\nwarmup_requests_per_lane: 1\nmodel: llama-3.1-70b\nprecision: fp8\n"
                    "scenario: '2000:40'\ngrid:\n  concurrency: [2]\n  gpus: [1]\n  prefill: [0, 1]\n"
                    "  decode: [1, 2]\n  prefill_route: [all]\n")
    plan = load_plan(path)
    names = [a["config"] for a in run_plan(plan, tmp_path / "out", workers=1)]
    assert names == ["1xH200_mem0.9_cpu0_r1-round-robin", "1xH200_mem0.9_cpu0_r1-round-robin_pd1x1-1x1tp-all",
                     "1xH200_mem0.9_cpu0_r1-round-robin_pd1x1-2x1tp-all"]  # no disaggregation: one point, not two
    from agentx.results.points import deployment_key, deployment_labels

    identities = [json.loads((tmp_path / "out" / n / "c2" / "result.json").read_text())["identity"] for n in names]
    assert len({deployment_key(deployment_labels(i)) for i in identities}) == 3  # the frontier keeps them apart
    result = json.loads((tmp_path / "out" / names[2] / "c2" / "result.json").read_text())
    assert result["identity"]["parallelism"] == "TP1 prefill + 2 x TP1 decode" and result["identity"]["gpus"] == 3
    assert "prefill=1 decode=2" in result["identity"]["engine_settings"]
    assert result["requests"]["succeeded"] > 0


def test_tool_result_tokens_count_the_tool_results_past_the_stable_prefix():
    from agentx.replay.hints import _tool_result_tokens
    from agentx.traces.model import Request, Segment

    segments = (Segment("system", 1000), Segment("user", 500), Segment("tool_result", 3000), Segment("assistant", 200),
                Segment("tool_result", 800))
    req = Request(0.0, "m", 5500, 10, segments=segments)
    assert _tool_result_tokens(req, 0) == 3800
    assert _tool_result_tokens(req, 2500) == 2000 + 800  # the first tool result spans 1500..4500
    assert _tool_result_tokens(Request(0.0, "m", 5000, 10, input_types=("tool_result",)), 1000) == 4000
    assert _tool_result_tokens(Request(0.0, "m", 5000, 10, input_types=("tool_result", "text")), 1000) == 0


def test_the_tool_route_in_virtual_time_on_real_traces(tmp_path):
    """With harness hints, some of the bundled sessions' prompts are tool traffic: they prefill on the
    prefill worker and their KV crosses; the rest prefill on the mixed workers; nothing is lost."""
    traces = [str(WEKA / "trace_0291.json"), str(WEKA / "trace_0010.json"), str(WEKA / "trace_0043.json")]
    result = sim_bench(BenchSettings.build(url="virtual", out=str(tmp_path / "tool"), concurrency=3, duration=120,
                                           warmup_requests_per_lane=1, hints="harness", dataset=",".join(traces)),
                       load_sessions(traces), Deployment(EngineConfig(**ENGINE), prefill=1, decode=2,
                                                         router="session-affinity", prefill_route="tool"))
    assert result["identity"]["parallelism"] == "TP1 prefill + 2 x TP1 decode (tool route)"
    assert "prefill_route=tool" in result["identity"]["engine_settings"]
    records = [r for r in read_records(tmp_path / "tool") if r.phase == "profile"]
    assert len(records) >= 10 and all(r.error in (None, "cancelled") for r in records)  # (cancelled: at the grace's end)
    prefill, decode = (result["server_metrics"]["workers"][g] for g in ("prefill", "decode"))
    assert 0 < prefill["prompt_tokens"] < 0.5 * decode["prompt_tokens"]  # few prompts are tool traffic
    assert 0 < decode["kv_transfer_tokens"] <= prefill["prompt_tokens"]  # (what a mixed worker held stays)


def test_bad_disaggregation_settings_name_the_problem(tmp_path):
    from agentx.errors import AgentxError

    for grid, problem in (("prefill: [1]\n  prefill_route: [sideways]", "prefill_route"),
                          ("prefill: [1]\n  decode_parallelism: [pp]", "decode_parallelism")):
        path = tmp_path / "plan.yaml"
        path.write_text(f"grid:\n  concurrency: [1]\n  {grid}\n")
        with pytest.raises(AgentxError) as e:
            load_plan(path)
        assert problem in str(e.value) + str(getattr(e.value, "setting", ""))
    with pytest.raises(AgentxError, match="--prefill-route needs --prefill"):
        Deployment(prefill_route="tool")
