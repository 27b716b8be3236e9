"""`agentx bench`, `report`, `compare` and `probe cache`: replay against a server and summarize,
and the sweep and exit-status helpers `sim bench` shares."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from agentx.cli.common import (OPT_CONCURRENCY, OPT_FMT, OPT_MAX_CONTEXT, OPT_MORE_TRACES, OPT_OFFLINE,
                               OPT_RANGE_RATIO, OPT_SCENARIO, OPT_SLO, OPT_TRACES, PLAIN, SEED_HELP, Format, _corpus,
                               _load, _warn, console, err_console)
from agentx.cli.options import config_options
from agentx.metrics.confidence import ANSWER_SPREAD_LIMIT
from agentx.content.tokens import DEFAULT_TOKEN_RANGE, ContentConfig
from agentx.errors import AgentxError
from agentx.replay.plan import PlanConfig
from agentx.replay.settings import Labels, TargetConfig, offline_levels, open_loop

OPT_TOKEN_RANGE = typer.Option("{}:{}".format(*DEFAULT_TOKEN_RANGE), "--token-range",
                               help="Token ids to draw content from, LO:HI.")

probe_app = typer.Typer(help="Correctness probes of a serving engine.", **PLAIN)

def _concurrencies(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise AgentxError(f"--concurrency: want N or N,N,... (positive), got {text!r}")
    return values


def _print_result(result: dict, title: str, folder: Path) -> None:
    from agentx.metrics.tables import result_lines, result_table

    console.print(result_table(result, title))
    for line in result_lines(result):
        console.print(line, highlight=False)
    console.print(f"results: {folder}/result.json (records: {folder}/records.jsonl)", highlight=False)


def _bench_with_twin(settings, sessions, command: str, on_tick) -> dict:
    """A bench run with its virtual twin (SPEC section 3, `twin`) where the target is agentx-sim."""
    from agentx.replay.driver import bench
    from agentx.virtual.twin import virtual_twin

    return bench(settings, sessions, command, on_tick, twin=virtual_twin)


def _sweep(settings, sessions, concurrencies: list[int], out: Path, label: str, run=None) -> list[dict]:
    from agentx.replay.folder import command_line
    from agentx.replay.concurrency_sweep import sweep

    def level(plan) -> str:  # schedule mode has no lanes: its concurrency is whatever the schedule makes it
        if plan.request_rate is not None:
            return f"request rate {plan.request_rate:g}/s ({plan.arrival})"
        return f"schedule mode, time scale {plan.time_scale:g}" if plan.mode == "schedule" else \
            f"concurrency {plan.concurrency}"

    @contextmanager
    def progress(s):
        console.print(f"[bold]{label}: {level(s.plan)}, {s.plan.duration:g} s profiling[/] -> {escape(str(s.out))}",
                      highlight=False)
        with (_progress() if run is None else _virtual_progress()) as tick:
            yield tick

    def done(n: int, folder: Path, result: dict) -> None:
        _print_result(result, level(settings.replace(concurrency=n).plan), folder)

    results = sweep(settings, sessions, concurrencies, out, command_line(), progress, done, run or _bench_with_twin)
    if len(results) > 1:
        _print_sweep_table(results)
    return [result for _, result in results]


def _print_sweep_table(results: list[tuple]) -> None:
    """The sweep's table, then each NOT VALID run's verdict line (the table names its rules)."""
    from agentx.metrics.tables import sweep_table
    from agentx.metrics.verdict import verdict

    console.print(sweep_table(results))
    for name, r in results:
        if (r.get("validity") or {}).get("valid") is False:
            label = f"c{name}" if isinstance(name, int) else name
            console.print(f"{label}: {verdict(r)}", highlight=False, markup=False)


INVALID_EXIT = 3
ALLOW_INVALID_HELP = f"Exit 0 on a run printed NOT VALID (default: exit status {INVALID_EXIT})."
EXIT_STATUS = (f"Exit status: 0 valid; 2 bad input or settings (one line on stderr); {INVALID_EXIT} the run "
               "is NOT VALID (too many failed or overflowed requests, no success, or killed), unless "
               "--allow-invalid.")


def _exit_if_invalid(results: list[dict], allow_invalid: bool) -> None:
    """A run printed NOT VALID fails the command (scripts and CI see it), unless allowed."""
    invalid = sum(1 for r in results if not r["validity"]["valid"])
    if invalid and not allow_invalid:
        runs = f"{invalid} of {len(results)} runs" if len(results) > 1 else "the run"
        err_console.print(f"[red]not valid:[/] {runs} (exit status {INVALID_EXIT}; --allow-invalid exits 0)",
                          highlight=False)
        raise typer.Exit(INVALID_EXIT)


@contextmanager
def _progress():
    """A live line (a line every 15 s in a log): phase, lanes busy, requests done, live TTFT p50
    and output tok/s."""
    from agentx.cli.progress import progress_line

    def line(snap: dict) -> str:
        left = snap["profile_left"]
        ttft = snap["ttft_p50"]
        return (f"{snap['phase']}" + (f" ({left:,.0f} s left)" if left is not None and snap["phase"] == "profile" else "")
                + f"  lanes busy {snap['lanes_busy']}/{snap['lanes']}  in flight {snap['inflight']}"
                + f"  done: warmup {snap['warmup']:,}, profile {snap['profile']:,}, errors {snap['errors']:,}"
                + (f"  TTFT p50 {ttft * 1000:,.0f} ms" if ttft is not None else "")
                + (f"  {snap['output_tok_s']:,.0f} output tok/s" if snap["output_tok_s"] else ""))

    with progress_line(console) as update:
        yield lambda snap: update(line(snap))


@contextmanager
def _virtual_progress():
    """A virtual run's line: modeled seconds, phase, requests ended."""
    from agentx.cli.progress import progress_line

    def line(snap: dict) -> str:
        left = snap["profile_left"]
        return (f"virtual time {snap['modeled_s']:,.0f} s: {snap['phase']}"
                + (f" ({left:,.0f} modeled s left)" if left is not None and snap["phase"] == "profile" else "")
                + f", {snap['requests']:,} requests ended")

    with progress_line(console) as update:
        yield lambda snap: update(line(snap))


def _default_out(prefix: str) -> Path:
    from datetime import datetime

    return Path("runs") / f"{prefix}-{datetime.now():%Y%m%d-%H%M%S}"


URL_HELP = next(f.metadata["option"]["help"] for f in fields(TargetConfig) if f.name == "url")
OPT_API_KEY = typer.Option(None, "--api-key", help="Sent as 'Authorization: Bearer KEY' (default: OPENAI_API_KEY "
                           "when set); never written to the run folder.")
OPT_HEADER = typer.Option(None, "--header", "-H", help="An extra header on every request, 'Name: value' (repeat "
                          "the flag); values never written to the run folder.")


@config_options(TargetConfig, PlanConfig, ContentConfig, Labels,
                help={"seed": SEED_HELP, "duration": "Profiling window in seconds."})
def bench_cmd(
    traces: list[Path] = OPT_TRACES,
    more_traces: list[Path] = OPT_MORE_TRACES,
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    scenario: Optional[str] = OPT_SCENARIO,
    range_ratio: Optional[float] = OPT_RANGE_RATIO,
    offline: int = OPT_OFFLINE,
    provider: Optional[str] = typer.Option(None, "--provider", help="Replay only the sessions of this agent "
                                           "(claude, codex: as TraceLab and capture import name them)."),
    concurrency: str = OPT_CONCURRENCY,
    token_range: str = OPT_TOKEN_RANGE,
    api_key: Optional[str] = OPT_API_KEY,
    header: list[str] = OPT_HEADER,
    slo: list[str] = OPT_SLO,
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default runs/bench-TIMESTAMP)."),
    html: bool = typer.Option(False, "--html", help="Also write report.html in the run (or sweep) folder."),
    allow_invalid: bool = typer.Option(False, "--allow-invalid", help=ALLOW_INVALID_HELP),
    options: dict = None,
):
    """Replay agentic traces (or a fixed scenario) against a server and summarize the run."""
    from agentx.content.tokens import parse_token_range
    from agentx.metrics.goodput import parse_slo
    from agentx.replay.endpoint import auth_headers, base_url
    from agentx.replay.settings import BenchSettings

    corpus = _corpus(traces, more_traces, fmt, max_context, scenario, provider, range_ratio, offline)
    levels = offline_levels(corpus, options) or _concurrencies(concurrency)
    schedule = open_loop(options, levels)
    settings = BenchSettings.build(**{**options, "concurrency": levels[0], "token_range": parse_token_range(token_range),
                                      "server_metrics": None if options["server_metrics"] == "none" else options["server_metrics"],
                                      "warmup": options["warmup"] and not schedule, "url": base_url(options["url"]),
                                      "headers": auth_headers(api_key, header), "slo": parse_slo(slo)},
                                   **corpus.labels)
    sessions = corpus.sessions(max(levels), warn=_warn, per_arrival=options.get("request_rate") is not None)
    out = out or _default_out("bench")
    results = _sweep(settings, sessions, levels, out, "bench")
    if html:
        from agentx.report.html import write_report

        console.print(f"HTML report: {write_report(out)}", highlight=False)
    _exit_if_invalid(results, allow_invalid)


@probe_app.command("cache")
def probe_cache_cmd(
    url: str = typer.Option(..., "--url", help=URL_HELP + " Probes use /v1/completions with token ids."),
    api_key: Optional[str] = OPT_API_KEY,
    header: list[str] = OPT_HEADER,
    model: Optional[str] = typer.Option(None, "--model", help="Model name; discovered from /v1/models when omitted."),
    traces: list[Path] = typer.Option(None, "--traces", help="Trace files or folders (default: the bundled real traces)."),
    probes: int = typer.Option(8, "--probes", min=1, help="Trace requests to probe."),
    seed: int = typer.Option(0, "--seed", help="Seed of the probes' choice and of their token ids."),
    token_range: str = OPT_TOKEN_RANGE,
    token_scale: int = typer.Option(1, "--token-scale", min=1, help="Render each hash block as block/K tokens."),
    max_isl: Optional[int] = typer.Option(None, "--max-isl", help="Probe only prompts up to this many tokens."),
    flush_tokens: int = typer.Option(0, "--flush-tokens", min=0, help="Other traffic between cold and warm."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the full result here."),
):
    """Greedy answers of trace prompts, cold and then warm (prefix cached): they must match."""
    import asyncio
    import json

    from agentx.cli.progress import progress_line
    from agentx.content.tokens import ContentConfig, parse_token_range
    from agentx.metrics.tables import probe_line
    from agentx.replay.driver import discover_model
    from agentx.replay.endpoint import auth_headers, base_url
    from agentx.replay.probe import ProbeConfig, probe_cache

    url, headers = base_url(url), auth_headers(api_key, header)
    content = ContentConfig(seed, parse_token_range(token_range), token_scale)
    cfg = ProbeConfig(url=url, model=model or discover_model(url, headers), probes=probes, seed=seed, content=content,
                      max_isl=max_isl, flush_tokens=flush_tokens, headers=headers)
    sessions = _load(traces or [], None, None)
    with progress_line(console) as update:
        update(f"cache probe: 0 of {probes} probes (each: a cold and a warm greedy answer)")
        result = asyncio.run(probe_cache(cfg, sessions, lambda k, n: update(f"cache probe: {k} of {n} probes done")))
    if json_out:
        json_out.write_text(json.dumps(result, indent=1))
    console.print(probe_line(result), highlight=False)
    if result["mismatches"]:
        raise typer.Exit(1)


def print_sweep(folder: Path, html: bool = True, spread_limit: float = ANSWER_SPREAD_LIMIT) -> list[dict]:
    """The table of a sweep folder's complete runs (`bench --concurrency A,B` or `agentx sweep`:
    one row per run, by deployment), and its report.html; returns the runs' results."""
    import json

    from agentx.report.html import write_report
    from agentx.report.rundata import sweep_folders

    runs = sweep_folders(folder)
    results = [(str(run.relative_to(folder)), json.loads((run / "result.json").read_text())) for run in runs]
    _print_sweep_table(results)
    if html:
        console.print(f"HTML report: {write_report(folder, spread_limit=spread_limit)}", highlight=False)
    return [r for _, r in results]


def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run folder written by `agentx bench`, or a sweep folder "
                                   "(`bench --concurrency A,B`, `agentx sweep`, `sim plan`)."),
    html: bool = typer.Option(False, "--html", help="Also write report.html (a sweep folder: frontier, table, sweep.csv)."),
    allow_invalid: bool = typer.Option(False, "--allow-invalid", help=ALLOW_INVALID_HELP),
    spread_limit: float = typer.Option(ANSWER_SPREAD_LIMIT, "--spread-limit", min=0, max=100, help="With --html, of a sweep: the "
                                       "widest 95 % interval of TTFT p50 / p90 (a share of the figure) a point may "
                                       "have to be on the frontier; wider: grey, with the sessions it would need "
                                       "(SPEC 3, \"Settled: confidence\"). 0: no bound."),
):
    """Rebuild a run's summary from its records (also for a run that was killed); of a sweep
    folder, the sweep's table."""
    from agentx.replay.folder import report
    from agentx.report.html import write_report
    from agentx.report.capacity import is_plan_folder
    from agentx.report.rundata import is_run_folder

    if not is_run_folder(run_dir):
        if is_plan_folder(run_dir):
            console.print(f"HTML report: {write_report(run_dir)}", highlight=False)
            return
        _exit_if_invalid(print_sweep(run_dir, html, spread_limit), allow_invalid)
        return
    result = report(run_dir)
    _print_result(result, str(run_dir), run_dir)
    if html:
        console.print(f"HTML report: {write_report(run_dir)}", highlight=False)
    _exit_if_invalid([result], allow_invalid)


def parse_speed(text: str) -> float | None:
    """--speed: a positive number, or None for `auto` (a bad value: one line, exit status 2)."""
    if text.strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise AgentxError(f"--speed: want a positive number or auto, got {text!r}")
    return value


def compare_cmd(
    run_a: Path = typer.Argument(..., help="A run folder (the baseline)."),
    run_b: Path = typer.Argument(..., help="A run folder compared with it."),
):
    """Two runs side by side: each headline metric of A and B, B - A and the change in per cent."""
    import json

    from agentx.metrics.compare import compare_table, workload_differences
    from agentx.replay.folder import report
    from agentx.report.rundata import is_run_folder

    results, settings = [], []
    for folder in (run_a, run_b):
        if not is_run_folder(folder):
            raise AgentxError(f"{folder}: not a run folder (no run.json); a sweep's runs are its cN folders")
        path = folder / "result.json"
        results.append(json.loads(path.read_text()) if path.exists() else report(folder))  # a killed run: rebuilt
        try:
            settings.append(json.loads((folder / "run.json").read_text()).get("settings") or {})
        except (OSError, ValueError, AttributeError):
            settings.append({})
    console.print(compare_table(*results, str(run_a), str(run_b)))
    for line in workload_differences(tuple(results), tuple(settings)):
        _warn(f"the runs differ beyond the deployment: {line}")


def register(app: typer.Typer) -> None:
    app.command("bench", epilog=EXIT_STATUS)(bench_cmd)
    app.command("report", epilog=EXIT_STATUS)(report_cmd)
    app.command("compare")(compare_cmd)
