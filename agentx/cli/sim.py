"""`agentx sim ...`: serve the simulated engine, replay on it in virtual time, plan capacity."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentx.cli.common import (OPT_CONCURRENCY, OPT_FMT, OPT_MAX_CONTEXT, OPT_MORE_TRACES, OPT_OFFLINE,
                               OPT_RANGE_RATIO, OPT_SCENARIO, OPT_SLO, OPT_TRACES, PLAIN, SEED_HELP, Format, _corpus,
                               _value, _warn, console)
from agentx.cli.bench import _concurrencies, _default_out, _sweep, parse_speed
from agentx.cli.options import config_options, given
from agentx.cli.results import DB_HELP
from agentx.engine.config import Deployment, EngineConfig, ServeConfig
from agentx.engine.faults import KINDS, FaultConfig
from agentx.errors import AgentxError
from agentx.virtual.settings import SIM_BENCH, SIM_BENCH_SKIPS, SimBenchSettings, sim_bench_config

sim_app = typer.Typer(help="The simulated inference engine.", **PLAIN)


@sim_app.command("serve")
@config_options(EngineConfig, Deployment, ServeConfig, FaultConfig, skip=("overhead_s", "speed"),
                help={"replicas": "Engine replicas (each --gpus GPUs) behind one endpoint."})
def sim_serve_cmd(
    speed: str = typer.Option("1", "--speed", help="Run the modeled hardware this many times faster, or `auto`: "
                              "probe this host (its timer, then 20 s of the bundled traces at --auto-lanes lanes at "
                              "speed 1) and take the fastest speed at which a run can be valid here (printed)."),
    auto_lanes: int = typer.Option(24, "--auto-lanes", min=1, max=4096, help="With --speed auto: the probe's lanes "
                                   "(the load you will run)."),
    overhead_ms: Optional[float] = typer.Option(None, "--overhead-ms", min=0, help="Fixed cost of one iteration "
                                                "(default: the engine profile's)."),
    fault_kinds: str = typer.Option(",".join(KINDS), "--fault-kinds",
                                    help="Drawn uniformly; 'corrupt' (silent KV corruption of cache hits) only when named."),
    config: ServeConfig = None,
):
    """Serve a simulated deployment over the OpenAI API (default: 8 x H200, Qwen3-235B-A22B)."""
    from dataclasses import replace

    from agentx.engine.serve.app import serve

    engine = replace(config.deployment.engine, overhead_s=None if overhead_ms is None else overhead_ms / 1000)
    faults = replace(config.faults, kinds=tuple(k.strip() for k in fault_kinds.split(",") if k.strip()))
    serve(replace(config, deployment=replace(config.deployment, engine=engine), faults=faults,
                  speed=_speed(speed, auto_lanes)))


def _speed(text: str, lanes: int) -> float:
    """--speed: a positive number, or `auto` (agentx/replay/speed.py: probed, then printed)."""
    import sys

    value = parse_speed(text)
    if value is not None:
        return value
    from agentx.replay.speed import auto_speed, serve_flags

    choice = auto_speed(_corpus([]).sessions(lanes), lanes, serve_flags(sys.argv[3:]))
    console.print(choice.line() + ("" if choice.valid else f"; serving at the slowest, {choice.speed:g}"),
                  highlight=False)
    return choice.speed


@sim_app.command("bench")
@config_options(*SIM_BENCH, skip=SIM_BENCH_SKIPS,
                help={"duration": "Profiling window in (modeled) seconds.",
                      "seed": SEED_HELP[:-1] + ", and of the engine."})
def sim_bench_cmd(
    ctx: typer.Context,
    traces: list[Path] = OPT_TRACES,
    more_traces: list[Path] = OPT_MORE_TRACES,
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    scenario: Optional[str] = OPT_SCENARIO,
    range_ratio: Optional[float] = OPT_RANGE_RATIO,
    offline: int = OPT_OFFLINE,
    concurrency: str = OPT_CONCURRENCY,
    slo: list[str] = OPT_SLO,
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default runs/sim-bench-TIMESTAMP)."),
    settings_file: Optional[Path] = typer.Option(None, "--settings", help="A YAML mapping of these settings by "
                                                 "name (duration: 600, engine: trtllm, scenario: 8k1k, ...; a "
                                                 "`sim plan` file's top keys): over the defaults, under the flags "
                                                 "given beside it."),
    settings: SimBenchSettings = None,
):
    """Replay traces on the simulated engine in modeled time: no HTTP, no waiting (bench's run folder)."""
    from msgspec.structs import replace

    from agentx.metrics.goodput import parse_slo
    from agentx.virtual.runner import sim_bench
    from agentx.virtual.settings import read_settings_file, settings_given

    settings = replace(settings, format=_value(fmt), max_context=max_context, scenario=scenario,
                       range_ratio=range_ratio, offline=offline)
    if settings_file:  # the declared defaults, then the file, then the flags given
        named = given(ctx, settings.__struct_fields__) | ({"format"} if given(ctx, ["fmt"]) else set())
        settings = replace(settings, **{k: v for k, v in read_settings_file(settings_file).items() if k not in named})
    run = sim_bench_config(settings_given(settings), _concurrencies(concurrency), (*(traces or []), *(more_traces or [])),
                           parse_slo(slo), warn=_warn)
    sessions = run.corpus.sessions(max(run.levels), warn=_warn, per_arrival=run.settings.plan.request_rate is not None)
    _sweep(run.settings, sessions, list(run.levels), out or _default_out("sim-bench"), "sim bench (virtual time)",
           lambda s, sess, command, tick: sim_bench(s, sess, run.deployment, command, tick))


@sim_app.command("plan")
@config_options(*SIM_BENCH, skip=SIM_BENCH_SKIPS + ("concurrency",),
                help={"seed": SEED_HELP[:-1] + ", and of the engine."})
def sim_plan_cmd(
    ctx: typer.Context,
    plan_file: Path = typer.Argument(..., help="PLAN.yaml: traces, SLO and grid (see agentx/virtual/capacity.py)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder of the points' runs (default runs/plan-TIMESTAMP)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the points on this Ray cluster (e.g. auto or HOST:PORT)."),
    workers: int = typer.Option(0, "--workers", min=0, help="Local processes (0: one per core)."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    settings: SimBenchSettings = None,
):
    """Capacity plan: a grid of virtual runs; per configuration the largest concurrency meeting the SLO.
    Every point is stored in the results database (a sweep per configuration), like `agentx sweep`'s.
    A setting flag given here wins over the plan's top key of that name (not over a grid axis)."""
    from agentx.report.html import write_report
    from agentx.results.db import connect
    from agentx.virtual.capacity import load_plan, run_plan
    from agentx.virtual.answer_table import plan_table
    from agentx.virtual.plan_points import store_plan
    from agentx.virtual.settings import settings_given

    named = given(ctx, settings.__struct_fields__)  # the declared defaults, then PLAN.yaml, then the flags given
    plan = load_plan(plan_file, {k: v for k, v in settings_given(settings).items() if k in named})
    database = connect(db, lambda m: typer.echo(m, err=True))  # a bad URL fails before any run
    folder = out or _default_out("plan")
    answers = run_plan(plan, folder, ray, workers or None)
    console.print(plan_table(plan, answers))
    stored = store_plan(database, plan, folder, say=lambda m: console.print(m, highlight=False))
    ids = [i for per in stored.values() for i in per]
    console.print(f"every point: {folder}/<configuration>/c<N>; the answer: {folder}/plan.json; results database: "
                  f"{len(ids)} points ({database.url.render_as_string(hide_password=True)})", highlight=False)
    console.print(f"HTML report: {write_report(folder)}", highlight=False)


@sim_app.command("calibrate")
def sim_calibrate_cmd(
    rows: Optional[str] = typer.Option(None, "--rows", help="Only rows whose id contains one of these (comma list)."),
    shares: str = typer.Option("in-sample,group,held-out", "--shares", help="Which shares to score (comma list): "
                               "in-sample (the fit rows, shipped constants), group (the fit rows, refitted without "
                               "their hardware x engine), held-out (the held-out third, shipped constants)."),
    workers: int = typer.Option(1, "--workers", min=1, help="Rows run in parallel processes."),
    prompts_per_lane: int = typer.Option(10, "--prompts-per-lane", min=1, max=100,
                                         help="Profiled prompts per lane (InferenceX: 10 x concurrency)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder of the rows' runs (default runs/calibrate-TIMESTAMP)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the report as JSON here."),
    html_out: Optional[Path] = typer.Option(None, "--html", help="Write the report as an HTML page here."),
):
    """Run the published points of the calibration table in virtual time: predicted / published per
    row, and per share (in sample, leave one hardware x engine group out, held out; MoE rows apart)
    the rows within +-15 % tok/s per GPU, +-20 % ITL p50, both, and +-50 % TTFT p50."""
    import json

    from agentx.report.calibration import headline, page, tables
    from agentx.virtual.calibrate import SHARES, as_json, calibrate

    only = [k.strip() for k in rows.split(",") if k.strip()] if rows else None
    chosen = tuple(k.strip() for k in shares.split(",") if k.strip())
    if not chosen or any(k not in SHARES for k in chosen):
        raise AgentxError(f"--shares {shares!r}: a comma list of {', '.join(SHARES)}", "shares")
    outcomes, skipped = calibrate(out or _default_out("calibrate"), only, chosen, workers, prompts_per_lane)
    if not outcomes:
        raise AgentxError(f"no modeled row of the shares {shares!r} matches {rows!r}", "rows")
    report = as_json(outcomes, skipped)
    from rich.console import Console

    wide = Console(width=max(console.width, 210))  # the row table is wide: keep one line per row
    for table in tables(report, outcomes):
        wide.print(table)
    console.print(headline(report) + (f"\nlisted, not modeled: {', '.join(s.id for s in skipped)}" if skipped else ""),
                  highlight=False)
    if json_out:
        json_out.write_text(json.dumps(report, indent=1))
    if html_out:
        html_out.write_text(page(report, outcomes))


@sim_app.command("presets")
def sim_presets_cmd(key: Optional[str] = typer.Argument(None, help="A hardware or model preset: every number of "
                                                       "it with its source.")):
    """List the hardware and model presets and the timing constants, with their sources."""
    from agentx.engine.presets import preset_tables, source_table

    for table in [source_table(key)] if key else preset_tables():
        console.print(table)
    console.print("sources: agentx/engine/presets.toml" + ("" if key else " (agentx sim presets KEY: one preset's, "
                                                            "field by field)"))
