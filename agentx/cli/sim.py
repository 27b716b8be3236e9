"""`agentx sim ...`: serve the simulated engine, replay on it in virtual time, plan capacity."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentx.cli import (OPT_CONCURRENCY, OPT_FMT, OPT_MAX_CONTEXT, OPT_MORE_TRACES, OPT_SCENARIO, OPT_SLO, OPT_TRACES,
                        PLAIN, SEED_HELP, Format, Scenario, _corpus, _open_loop, _warn, console)
from agentx.cli.bench import _concurrencies, _default_out, _sweep
from agentx.cli.options import config_options, pick
from agentx.cli.results import DB_HELP
from agentx.content.tokens import ContentConfig
from agentx.engine.config import Deployment, EngineConfig, ServeConfig
from agentx.engine.faults import KINDS, FaultConfig
from agentx.replay.plan import PlanConfig
from agentx.replay.settings import Labels, TargetConfig

sim_app = typer.Typer(help="The simulated inference engine.", **PLAIN)

@sim_app.command("serve")
@config_options(EngineConfig, Deployment, ServeConfig, FaultConfig, skip=("overhead_s",),
                help={"replicas": "Engine replicas (each --gpus GPUs) behind one endpoint."})
def sim_serve_cmd(
    overhead_ms: float = typer.Option(EngineConfig.overhead_s * 1000, "--overhead-ms", min=0,
                                      help="Fixed cost of one iteration."),
    fault_kinds: str = typer.Option(",".join(KINDS), "--fault-kinds",
                                    help="Drawn uniformly; 'corrupt' (silent KV corruption of cache hits) only when named."),
    options: dict = None,
):
    """Serve a simulated deployment over the OpenAI API (default: 8 x H200, Qwen3-235B-A22B)."""
    from agentx.engine.server import serve

    engine = EngineConfig(**pick(EngineConfig, options), overhead_s=overhead_ms / 1000)
    faults = FaultConfig(**pick(FaultConfig, options), kinds=tuple(k.strip() for k in fault_kinds.split(",") if k.strip()))
    serve(ServeConfig(**{**pick(ServeConfig, options), "deployment": Deployment(engine, **pick(Deployment, options)),
                         "faults": faults}))


# what `sim bench` leaves to `sim serve` (the timing model's tuning) and to bench (schedule mode)
SIM_BENCH_SKIPS = ("block_size", "num_gpu_blocks_override", "mfu", "mbu", "overhead_s", "host_link_efficiency",
                   "host_links", "mode", "time_scale", "warmup_seconds")


@sim_app.command("bench")
@config_options(EngineConfig, Deployment, PlanConfig, ContentConfig, (TargetConfig, ("grace",)), (Labels, ("cost_basis",)),
                skip=SIM_BENCH_SKIPS,
                help={"duration": "Profiling window in (modeled) seconds.",
                      "seed": SEED_HELP[:-1] + ", and of the engine."})
def sim_bench_cmd(
    traces: list[Path] = OPT_TRACES,
    more_traces: list[Path] = OPT_MORE_TRACES,
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    scenario: Optional[Scenario] = OPT_SCENARIO,
    concurrency: str = OPT_CONCURRENCY,
    slo: list[str] = OPT_SLO,
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default runs/sim-bench-TIMESTAMP)."),
    options: dict = None,
):
    """Replay traces on the simulated engine in modeled time: no HTTP, no waiting (bench's run folder)."""
    from agentx.metrics.goodput import parse_slo
    from agentx.replay.settings import BenchSettings
    from agentx.virtual.runner import sim_bench

    levels = _concurrencies(concurrency)
    corpus = _corpus(traces, more_traces, fmt, max_context, scenario)
    engine, deployment = pick(EngineConfig, options), pick(Deployment, options)
    sim = Deployment(EngineConfig(**engine), **deployment)
    bench = {k: v for k, v in options.items() if k not in engine and k not in deployment}
    bench["mode"] = "lanes"
    schedule = _open_loop(bench, levels)  # --request-rate: an open loop
    settings = BenchSettings.build(url="virtual", concurrency=levels[0], seed=options["seed"],
                                   **{**bench, "warmup": bench["warmup"] and not schedule, "slo": parse_slo(slo)},
                                   **corpus.labels)
    sessions = corpus.sessions(max(levels), warn=_warn, per_arrival=bench.get("request_rate") is not None)
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
    from agentx.virtual.answer_table import plan_table
    from agentx.virtual.plan_points import store_plan

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
