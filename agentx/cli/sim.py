"""`agentx sim ...`: serve the simulated engine, replay on it in virtual time, plan capacity."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentx.cli import (OPT_ARRIVAL, OPT_CONCURRENCY, OPT_FMT, OPT_GRACE, OPT_IDLE_CAP, OPT_MAX_CONTEXT,
                        OPT_MORE_TRACES, OPT_NO_WARMUP, OPT_REQUEST_RATE, OPT_SCENARIO, OPT_SLO, OPT_SYSTEM_IDLE_CAP,
                        OPT_TRACES, OPT_WARMUP_REQUESTS_PER_LANE, PLAIN, REQUEST_TIMEOUT_HELP, Arrival, CostBasis,
                        Format, Scenario, _load, _rate_settings, _value, console)
from agentx.cli.bench import _concurrencies, _default_out, _sweep
from agentx.errors import AgentxError
from agentx.results.cli import DB_HELP

sim_app = typer.Typer(help="The simulated inference engine.", **PLAIN)

@sim_app.command("serve")
def sim_serve_cmd(
    hardware: str = typer.Option("H200", "--hardware", help="Hardware preset (see `agentx sim presets`)."),
    gpus: int = typer.Option(8, "--gpus", min=1, help="GPUs in the tensor-parallel group."),
    model: str = typer.Option("qwen3-235b-a22b", "--model", help="Model preset (see `agentx sim presets`)."),
    precision: str = typer.Option("bf16", "--precision", help="bf16 or fp8 (weights, matmuls, KV cache)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, "--port", min=0, help="0 picks a free port (printed at start)."),
    speed: float = typer.Option(1.0, "--speed", help="Run the modeled hardware this many times faster."),
    served_model_name: str = typer.Option("", "--served-model-name", help="Default: the preset's model name."),
    block_size: int = typer.Option(16, "--block-size", min=1, help="KV cache block in tokens (vLLM's default 16)."),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization", help="Share of GPU memory for "
                                                 "weights, activations and KV cache (vLLM's flag)."),
    cpu_offload_gb: float = typer.Option(0.0, "--cpu-offload-gb", help="Host DRAM for KV blocks, per replica."),
    max_num_seqs: int = typer.Option(256, "--max-num-seqs", min=1, help="Most sequences in a batch (vLLM's flag)."),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens", min=1,
                                               help="Most tokens an iteration schedules (vLLM's chunked-prefill budget)."),
    max_model_len: int = typer.Option(0, "--max-model-len", min=0, help="0: the model's maximum context."),
    num_gpu_blocks_override: int = typer.Option(0, "--num-gpu-blocks-override", min=0,
                                                help="This many KV blocks instead of the memory arithmetic."),
    mfu: float = typer.Option(0.3, "--mfu", help="Model FLOP utilization of prefill."),
    mbu: float = typer.Option(0.7, "--mbu", help="Memory bandwidth utilization of decode."),
    overhead_ms: float = typer.Option(5.0, "--overhead-ms", help="Fixed cost of one iteration."),
    host_links: int = typer.Option(1, "--host-links", min=1, help="Host links a KV transfer is striped over."),
    seed: int = typer.Option(0, "--seed", help="Seed of answer lengths and faults."),
    fault_rate: float = typer.Option(0.0, "--fault-rate", help="Probability that a request gets a fault."),
    fault_kinds: str = typer.Option("http500,disconnect,stall,malformed,overflow", "--fault-kinds",
                                    help="Drawn uniformly; 'corrupt' (silent KV corruption of cache hits) only when named."),
    fault_stall_s: float = typer.Option(5.0, "--fault-stall-s", help="Length of a stall fault."),
    truth_log: Optional[Path] = typer.Option(None, "--truth-log", help="JSONL of true per-request times."),
    reasoning_share: float = typer.Option(0.0, "--reasoning-share", help="Chat answers stream this share as reasoning first."),
    reasoning_field: str = typer.Option("reasoning_content", "--reasoning-field", help="reasoning_content or reasoning."),
    request_timeout_s: float = typer.Option(30.0, "--request-timeout-s", help=REQUEST_TIMEOUT_HELP),
    replicas: int = typer.Option(1, "--replicas", min=1, help="Engine replicas (each --gpus GPUs) behind one endpoint."),
    router: str = typer.Option("round-robin", "--router", help="round-robin, least-loaded, session-affinity or "
                               "prefix-aware (SPEC section 6)."),
    spec_decode: str = typer.Option("", "--spec-decode", help="Speculative decoding method (mtp, eagle3, ...)."),
    draft_tokens: int = typer.Option(0, "--draft-tokens", min=0, help="Draft tokens verified per decode step."),
    acceptance_length: float = typer.Option(0.0, "--acceptance-length",
                                            help="Tokens kept per decode step on average (0: the preset's)."),
):
    """Serve a simulated deployment over the OpenAI API (default: 8 x H200, Qwen3-235B-A22B)."""
    from agentx.engine.config import EngineConfig
    from agentx.engine.faults import FaultConfig
    from agentx.engine.server import ServeConfig, serve

    engine = EngineConfig(
        hardware=hardware, model=model, gpus=gpus, precision=precision, gpu_memory_utilization=gpu_memory_utilization,
        block_size=block_size, cpu_offload_gb=cpu_offload_gb, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
        num_gpu_blocks_override=num_gpu_blocks_override, mfu=mfu, mbu=mbu,
        overhead_s=overhead_ms / 1000, host_links=host_links, seed=seed, spec_decode=spec_decode,
        draft_tokens=draft_tokens, acceptance_length=acceptance_length,
    )
    faults = FaultConfig(rate=fault_rate, kinds=tuple(k.strip() for k in fault_kinds.split(",") if k.strip()),
                         stall_s=fault_stall_s, seed=seed)
    serve(ServeConfig(engine=engine, host=host, port=port, speed=speed, served_model_name=served_model_name,
                      faults=faults, truth_log=str(truth_log) if truth_log else None, replicas=replicas,
                      router=router, reasoning_share=reasoning_share, reasoning_field=reasoning_field,
                      request_timeout_s=request_timeout_s))


@sim_app.command("bench")
def sim_bench_cmd(
    traces: list[Path] = OPT_TRACES,
    more_traces: list[Path] = OPT_MORE_TRACES,
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    scenario: Optional[Scenario] = OPT_SCENARIO,
    concurrency: str = OPT_CONCURRENCY,
    duration: float = typer.Option(3600.0, "--duration", help="Profiling window in (modeled) seconds."),
    seed: int = typer.Option(0, "--seed", help="Seed of the plan (session order, warmup start points, arrivals), "
                             "the content and the engine."),
    request_rate: Optional[float] = OPT_REQUEST_RATE,
    arrival: Arrival = OPT_ARRIVAL,
    slo: list[str] = OPT_SLO,
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default runs/sim-bench-TIMESTAMP)."),
    warmup_requests_per_lane: int = OPT_WARMUP_REQUESTS_PER_LANE,
    no_warmup: bool = OPT_NO_WARMUP,
    idle_cap: float = OPT_IDLE_CAP,
    system_idle_cap: float = OPT_SYSTEM_IDLE_CAP,
    grace: float = OPT_GRACE,
    token_scale: int = typer.Option(1, "--token-scale", min=1, help="Render each hash block as block/K tokens."),
    cost_basis: CostBasis = typer.Option("neocloud", "--cost-basis", help="Which price of the GPU counts."),
    hardware: str = typer.Option("H200", "--hardware", help="Hardware preset (see `agentx sim presets`)."),
    gpus: int = typer.Option(8, "--gpus", min=1, help="GPUs in each replica's tensor-parallel group."),
    model: str = typer.Option("qwen3-235b-a22b", "--model", help="Model preset (see `agentx sim presets`)."),
    precision: str = typer.Option("bf16", "--precision", help="bf16 or fp8 (weights, matmuls, KV cache)."),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization", help="Share of GPU memory for "
                                                 "weights, activations and KV cache (vLLM's flag)."),
    cpu_offload_gb: float = typer.Option(0.0, "--cpu-offload-gb", help="Host DRAM for KV blocks, per replica."),
    max_num_seqs: int = typer.Option(256, "--max-num-seqs", min=1, help="Most sequences in a batch (vLLM's flag)."),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens", min=1,
                                               help="Most tokens an iteration schedules (vLLM's chunked-prefill budget)."),
    max_model_len: int = typer.Option(0, "--max-model-len", min=0, help="0: the model's maximum context."),
    replicas: int = typer.Option(1, "--replicas", min=1, help="Engine replicas (each --gpus GPUs) behind a router."),
    router: str = typer.Option("round-robin", "--router", help="round-robin, least-loaded, session-affinity or prefix-aware."),
    spec_decode: str = typer.Option("", "--spec-decode", help="Speculative decoding method (mtp, eagle3, ...)."),
    draft_tokens: int = typer.Option(0, "--draft-tokens", min=0, help="Draft tokens verified per decode step."),
    acceptance_length: float = typer.Option(0.0, "--acceptance-length", help="Tokens kept per step (0: the preset's)."),
):
    """Replay traces on the simulated engine in modeled time: no HTTP, no waiting (bench's run folder)."""
    from agentx.engine.config import EngineConfig
    from agentx.replay.scenarios import scenario_sessions
    from agentx.replay.settings import BenchSettings
    from agentx.virtual.runner import SimDeployment, sim_bench

    from agentx.metrics.goodput import parse_slo

    levels = _concurrencies(concurrency)
    traces = [*(traces or []), *(more_traces or [])]
    rate = _rate_settings(request_rate, arrival, levels)
    if duration <= 0:
        raise AgentxError("must be > 0", "duration")
    engine = EngineConfig(
        hardware=hardware, model=model, gpus=gpus, precision=precision, gpu_memory_utilization=gpu_memory_utilization,
        cpu_offload_gb=cpu_offload_gb, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len, seed=seed, spec_decode=spec_decode, draft_tokens=draft_tokens,
        acceptance_length=acceptance_length)
    sim = SimDeployment(engine, replicas, router)
    settings = BenchSettings.build(
        url="virtual", concurrency=levels[0], duration=duration, seed=seed, warmup=not no_warmup and not rate,
        slo=parse_slo(slo), **rate, mode="schedule" if rate else "lanes",
        warmup_requests_per_lane=warmup_requests_per_lane, idle_cap=idle_cap, system_idle_cap=system_idle_cap,
        grace=grace, token_scale=token_scale, cost_basis=cost_basis.value, scenario=_value(scenario),
        dataset=_value(scenario) or (", ".join(map(str, traces)) if traces else "bundled WEKA sample"),
        variant=max_context)
    if scenario:  # at a request rate, one request per session: each arrival is one request
        sessions = scenario_sessions(scenario.value, 1024, 1) if rate else scenario_sessions(scenario.value, max(levels))
    else:
        sessions = _load(traces, fmt, max_context)
    _sweep(settings, sessions, levels, out or _default_out("sim-bench"), "sim bench (virtual time)",
           lambda s, sess, command, tick: sim_bench(s, sess, sim, command, tick))


@sim_app.command("plan")
def sim_plan_cmd(
    plan_file: Path = typer.Argument(..., help="PLAN.yaml: traces, SLO and grid (see agentx/virtual/capacity.py)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder of the points' runs (default runs/plan-TIMESTAMP)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the points on this Ray cluster (e.g. auto or HOST:PORT)."),
    workers: int = typer.Option(0, "--workers", min=0, help="Local processes (0: one per core)."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
):
    """Capacity plan: a grid of virtual runs; per configuration the largest concurrency meeting the SLO.
    Every point is stored in the results database (a sweep per configuration), like `agentx sweep`'s."""
    from agentx.report.html import write_report
    from agentx.results.db import connect
    from agentx.virtual.capacity import load_plan, run_plan
    from agentx.virtual.report import plan_table
    from agentx.virtual.store import store_plan

    plan = load_plan(plan_file)
    database = connect(db, lambda m: typer.echo(m, err=True))  # a bad URL fails before any run
    folder = out or _default_out("plan")
    answers = run_plan(plan, folder, ray, workers or None)
    console.print(plan_table(plan, answers))
    stored = store_plan(database, plan, folder, say=lambda m: console.print(m, highlight=False))
    ids = [i for per in stored.values() for i in per]
    console.print(f"every point: {folder}/<configuration>/c<N>; the answer: {folder}/plan.json; results database: "
                  f"{len(ids)} points ({database.url.render_as_string(hide_password=True)})", highlight=False)
    console.print(f"HTML report: {write_report(folder)}", highlight=False)


@sim_app.command("presets")
def sim_presets_cmd():
    """List the hardware and model presets with their key figures."""
    from agentx.engine.presets import preset_tables

    for table in preset_tables():
        console.print(table)
    console.print("sources: agentx/engine/presets.toml")
