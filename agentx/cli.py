"""The `agentx` command: thin; it parses, calls, and prints."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Optional, get_args

import typer
from rich.console import Console
from rich.markup import escape

from agentx.content.wire import WIRE_MODES
from agentx.engine.presets import COST_BASES
from agentx.errors import AgentxError
from agentx.replay.identity import PRESETS as SESSION_PRESETS
from agentx.replay.plan import MODES
from agentx.replay.scenarios import SCENARIOS
from agentx.results.cli import register as register_results
from agentx.traces.load import FORMATS, WRITE_FORMATS
from agentx.traces.model import HashScope
from agentx.traces.weka import TimeBasis

# Help pages in click's plain layout (rich_markup_mode=None): it wraps at any width instead of
# cutting option names, and reads no markup into help texts like `http(s)://host[/prefix]`.
PLAIN = {"no_args_is_help": True, "rich_markup_mode": None}
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help="agentx: LLM inference benchmark for agentic traffic.", **PLAIN)
trace_app = typer.Typer(help="Inspect, generate and convert agent traces.", **PLAIN)
app.add_typer(trace_app, name="trace")
sim_app = typer.Typer(help="The simulated inference engine.", **PLAIN)
app.add_typer(sim_app, name="sim")
probe_app = typer.Typer(help="Correctness probes of a serving engine.", **PLAIN)
app.add_typer(probe_app, name="probe")
capture_app = typer.Typer(help="Record agent traffic and export it as anonymized traces.", **PLAIN)
app.add_typer(capture_app, name="capture")
register_results(app)

console = Console()
console.width = max(console.width, 112)  # tables of figures read badly when folded
err_console = Console(stderr=True)


def _choices(name: str, values) -> type[Enum]:
    """The allowed values of an option, declared by the stage that takes them, as an Enum
    (typer checks and lists them)."""
    return Enum(name, {v: v for v in values}, type=str)


Format = _choices("Format", FORMATS)
WriteFormat = _choices("WriteFormat", WRITE_FORMATS)
Basis = _choices("Basis", get_args(TimeBasis))
Scope = _choices("Scope", get_args(HashScope))
Wire = _choices("Wire", WIRE_MODES)
CostBasis = _choices("CostBasis", COST_BASES)
Mode = _choices("Mode", MODES)
SessionHeaders = _choices("SessionHeaders", SESSION_PRESETS)
Scenario = _choices("Scenario", SCENARIOS)


def _value(choice: Enum | None):
    return None if choice is None else choice.value


def _warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _count(n: int, noun: str) -> str:
    """`1 session`, `2 sessions`."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _max_context(text: Optional[str]) -> Optional[int]:
    from agentx.traces.variants import parse_tokens

    return parse_tokens(text) if text else None


def _load(paths: list[Path], fmt: Optional[Format], max_context: Optional[str]):
    from agentx.data import sample_traces
    from agentx.traces.load import load_sessions
    from agentx.traces.variants import limit_corpus

    sessions = load_sessions(paths or [sample_traces()], _value(fmt), warn=_warn)
    return limit_corpus(sessions, _max_context(max_context))


def _of_provider(sessions: list, provider: str) -> list:
    from agentx.traces.stats import by_provider

    groups = by_provider(sessions)
    if provider not in groups:
        raise AgentxError(f"no session of {provider!r} in the traces (they have: {', '.join(groups)})", "provider")
    return groups[provider]


FORMAT_HELP = (f"Input format: {', '.join(FORMATS)}; detected from the content when omitted "
               "(mooncake-delta must be named).")
MAX_CONTEXT_HELP = "Drop every request with ISL + OSL over this many tokens (e.g. 256k): the 256k variant."

# options `bench` and `sim bench` share
OPT_TRACES = typer.Option(None, "--traces", help="Trace files or folders, several after one flag (a shell glob) "
                          "or the flag repeated (default: the bundled real traces).")
OPT_MORE_TRACES = typer.Argument(None, metavar="TRACES", help="More trace files or folders: what a shell glob after "
                                 "--traces expands to (`--traces runs/*.jsonl`).")
OPT_FMT = typer.Option(None, "--format", metavar="FORMAT", help=FORMAT_HELP)
OPT_MAX_CONTEXT = typer.Option(None, "--max-context", help=MAX_CONTEXT_HELP)
OPT_SCENARIO = typer.Option(None, "--scenario", help="Fixed-sequence baseline instead of traces.")
OPT_CONCURRENCY = typer.Option("8", "--concurrency", help="Lanes; a list (1,4,16) runs a sweep.")
OPT_WARMUP_REQUESTS_PER_LANE = typer.Option(10, "--warmup-requests-per-lane", min=0)
OPT_NO_WARMUP = typer.Option(False, "--no-warmup", help="Start every lane at t = 0 without warmup.")
OPT_IDLE_CAP = typer.Option(300.0, "--idle-cap", help="Longest gap a session tree waits with nothing in flight.")
OPT_SYSTEM_IDLE_CAP = typer.Option(10.0, "--system-idle-cap", help="Longest gap with nothing in flight anywhere.")
OPT_GRACE = typer.Option(60.0, "--grace", help="Seconds in-flight requests may finish after the window.")


@trace_app.command("stats")
def trace_stats_cmd(
    paths: list[Path] = typer.Argument(None, help="Trace files or folders, each a corpus (several: side by side); "
                                       "the bundled real traces when omitted."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    by_provider: bool = typer.Option(False, "--by-provider", help="A column per agent (claude, codex, ...) of each corpus."),
):
    """Counts, distributions and the theoretical prefix-cache hit rate of a corpus, or of several side by side."""
    import msgspec

    from agentx.traces.report import compare_table, stats_table
    from agentx.traces.stats import corpora_stats, trace_stats

    if len(paths or []) <= 1 and not by_provider:
        stats = trace_stats(_load(paths, fmt, max_context))
        if json_out:
            sys.stdout.write(msgspec.json.format(msgspec.json.encode(stats)).decode() + "\n")
        else:
            source = ", ".join(map(str, paths)) if paths else "bundled real WEKA traces (agentx/data/weka)"
            console.print(stats_table(stats, source))
        return
    corpora = [(str(p), _load([p], fmt, max_context)) for p in paths] if paths else [("bundled", _load([], fmt, max_context))]
    columns = corpora_stats(corpora, by_provider)
    if json_out:
        doc = [{"source": name, "stats": stats} for name, stats in columns]
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc)).decode() + "\n")
    else:
        console.print(compare_table(columns))


@trace_app.command("synth")
def trace_synth_cmd(
    out: Path = typer.Option(..., "--out", help="Folder for the WEKA files (one per session)."),
    sessions: int = typer.Option(393, "--sessions", min=1, help="Number of sessions."),
    seed: int = typer.Option(1, "--seed", help="Seed; the same seed gives the same corpus."),
    max_context: Optional[str] = OPT_MAX_CONTEXT,
):
    """Generate a synthetic corpus calibrated to the published AgentX statistics."""
    from agentx.traces.synth import write_corpus

    written, requests = write_corpus(out, sessions, seed, _max_context(max_context))
    console.print(f"wrote {_count(written, 'session')}, {_count(requests, 'request')} to {out}")


@trace_app.command("convert")
def trace_convert_cmd(
    paths: list[Path] = typer.Argument(..., help="Trace files or folders."),
    to: WriteFormat = typer.Option(..., "--to", help="Output format."),
    out: Path = typer.Option(..., "--out", help="Output file (JSONL), or a folder for one WEKA file per session."),
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    time_basis: Basis = typer.Option("absolute", "--time-basis", help="WEKA subagent times."),
):
    """Convert traces between formats (and optionally apply the context cap)."""
    from agentx.traces.load import write_sessions

    sessions = _load(paths, fmt, max_context)
    options = {"basis": time_basis.value} if to.value == "weka" else {}
    write_sessions(sessions, out, to.value, **options)
    requests = sum(s.n_requests for s in sessions)
    console.print(f"wrote {_count(len(sessions), 'session')} ({_count(requests, 'request')}) to {out}")


REQUEST_TIMEOUT_HELP = "Seconds a client has to send a request's head and body (and an idle connection stays)."


@sim_app.command("serve")
def sim_serve_cmd(
    hardware: str = typer.Option("H200", "--hardware", help="Hardware preset (see `agentx sim presets`)."),
    gpus: int = typer.Option(8, "--gpus", min=1, help="GPUs in the tensor-parallel group."),
    model: str = typer.Option("qwen3-235b-a22b", "--model", help="Model preset (see `agentx sim presets`)."),
    precision: str = typer.Option("bf16", "--precision", help="bf16 or fp8 (weights, matmuls, KV cache)."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port", min=0, help="0 picks a free port (printed at start)."),
    speed: float = typer.Option(1.0, "--speed", help="Run the modeled hardware this many times faster."),
    served_model_name: str = typer.Option("", "--served-model-name", help="Default: the preset's model name."),
    block_size: int = typer.Option(16, "--block-size", min=1),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization"),
    cpu_offload_gb: float = typer.Option(0.0, "--cpu-offload-gb", help="Host DRAM for KV blocks, per replica."),
    max_num_seqs: int = typer.Option(256, "--max-num-seqs", min=1),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens", min=1),
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
    seed: int = typer.Option(0, "--seed", help="Seed of the plan, the content and the engine."),
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
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization"),
    cpu_offload_gb: float = typer.Option(0.0, "--cpu-offload-gb", help="Host DRAM for KV blocks, per replica."),
    max_num_seqs: int = typer.Option(256, "--max-num-seqs", min=1),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens", min=1),
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

    levels = _concurrencies(concurrency)
    traces = [*(traces or []), *(more_traces or [])]
    if duration <= 0:
        raise AgentxError("must be > 0", "duration")
    engine = EngineConfig(
        hardware=hardware, model=model, gpus=gpus, precision=precision, gpu_memory_utilization=gpu_memory_utilization,
        cpu_offload_gb=cpu_offload_gb, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len, seed=seed, spec_decode=spec_decode, draft_tokens=draft_tokens,
        acceptance_length=acceptance_length)
    sim = SimDeployment(engine, replicas, router)
    settings = BenchSettings.build(
        url="virtual", concurrency=levels[0], duration=duration, seed=seed, warmup=not no_warmup,
        warmup_requests_per_lane=warmup_requests_per_lane, idle_cap=idle_cap, system_idle_cap=system_idle_cap,
        grace=grace, token_scale=token_scale, cost_basis=cost_basis.value, scenario=_value(scenario),
        dataset=_value(scenario) or (", ".join(map(str, traces)) if traces else "bundled WEKA sample"),
        variant=max_context)
    sessions = scenario_sessions(scenario.value, max(levels)) if scenario else _load(traces, fmt, max_context)
    _sweep(settings, sessions, levels, out or _default_out("sim-bench"), "sim bench (virtual time)",
           lambda s, sess, command, tick: sim_bench(s, sess, sim, command))


@sim_app.command("plan")
def sim_plan_cmd(
    plan_file: Path = typer.Argument(..., help="PLAN.yaml: traces, SLO and grid (see agentx/virtual/capacity.py)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder of the points' runs (default runs/plan-TIMESTAMP)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the points on this Ray cluster (e.g. auto or HOST:PORT)."),
    workers: int = typer.Option(0, "--workers", min=0, help="Local processes (0: one per core)."),
):
    """Capacity plan: a grid of virtual runs; per configuration the largest concurrency meeting the SLO."""
    from agentx.virtual.capacity import load_plan, run_plan
    from agentx.virtual.report import plan_table

    plan = load_plan(plan_file)
    folder = out or _default_out("plan")
    answers = run_plan(plan, folder, ray, workers or None)
    console.print(plan_table(plan, answers))
    console.print(f"every point: {folder}/<configuration>/c<N>; the answer: {folder}/plan.json", highlight=False)


@capture_app.command("proxy")
def capture_proxy_cmd(
    upstream: str = typer.Option(..., "--upstream", help="The real API: http(s)://host[:port][/prefix]."),
    listen: str = typer.Option("127.0.0.1:8080", "--listen", help="HOST:PORT to listen on (port 0: any free)."),
    store: Path = typer.Option(Path("capture.db"), "--store", help="The SQLite recording store."),
    session_header: list[str] = typer.Option([], "--session-header", help="Header with the session id (repeat; "
                                             "replaces the defaults Claude Code and Codex send)."),
    agent_header: list[str] = typer.Option([], "--agent-header", help="Header with the subagent id (repeat)."),
    request_header: list[str] = typer.Option([], "--request-header", help="Header with the request id (repeat)."),
    deny_header: list[str] = typer.Option([], "--deny-header", help="Also drop headers matching this pattern."),
    deny_field: list[str] = typer.Option([], "--deny-field", help="Also drop JSON body fields matching this."),
    request_timeout_s: float = typer.Option(30.0, "--request-timeout-s", help=REQUEST_TIMEOUT_HELP),
):
    """Record agent traffic: a transparent proxy for the Anthropic Messages and OpenAI APIs."""
    from agentx.capture.privacy import DENY_FIELDS, DENY_HEADERS, Privacy
    from agentx.capture.proxy import Identity, ProxyConfig, run_proxy

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise AgentxError(f"--listen: want HOST:PORT, got {listen!r}")
    defaults = Identity()
    identity = Identity(tuple(session_header) or defaults.session_headers,
                        tuple(agent_header) or defaults.agent_headers,
                        tuple(request_header) or defaults.request_headers)
    privacy = Privacy(DENY_HEADERS + tuple(deny_header), DENY_FIELDS + tuple(deny_field))
    run_proxy(ProxyConfig(upstream=upstream, store=str(store), host=host, port=int(port), identity=identity,
                          privacy=privacy, request_timeout_s=request_timeout_s))


@capture_app.command("export")
def capture_export_cmd(
    store: Path = typer.Option(..., "--store", help="The SQLite recording store."),
    tokenizer: Path = typer.Option(..., "--tokenizer", help="A local tokenizer.json (Hugging Face tokenizers)."),
    out: Path = typer.Option(..., "--out", help="Folder for traces/ (WEKA files) and export_report.json."),
    block_size: int = typer.Option(64, "--block-size", help="Tokens per hash block."),
    scope: Scope = typer.Option("local", "--scope", help="Hash ids per session (local) or across the export (global)."),
    classifier_max_tokens: int = typer.Option(64, "--classifier-max-tokens",
                                              help="Drop requests without tools and max_tokens <= this."),
    max_context: Optional[str] = OPT_MAX_CONTEXT,
):
    """Anonymize recordings into WEKA traces: content becomes chained 64-token block hashes."""
    from agentx.capture.export import ExportConfig, export, report_lines

    report = export(ExportConfig(store=str(store), tokenizer=str(tokenizer), out=str(out), block_size=block_size,
                                 scope=scope.value, classifier_max_tokens=classifier_max_tokens,
                                 max_context=_max_context(max_context)))
    for line in report_lines(report):
        console.print(line, highlight=False)
    console.print(f"wrote {_count(len(report.files), 'trace file')} to {out / 'traces'} and the report to "
                  f"{out / 'export_report.json'}; replay them with: agentx bench --traces {out / 'traces'}",
                  highlight=False, soft_wrap=True)


@capture_app.command("import")
def capture_import_cmd(
    claude: list[Path] = typer.Option([], "--claude", help="A Claude Code store (e.g. ~/.claude/projects) or session file."),
    codex: list[Path] = typer.Option([], "--codex", help="A Codex store (e.g. ~/.codex/sessions) or rollout file."),
    tokenizer: Path = typer.Option(..., "--tokenizer", help="A local tokenizer.json (Hugging Face tokenizers)."),
    out: Path = typer.Option(..., "--out", help="Folder for traces/ (WEKA files) and export_report.json."),
    block_size: int = typer.Option(64, "--block-size", help="Tokens per hash block."),
    scope: Scope = typer.Option("local", "--scope", help="Hash ids per session (local) or across the export (global)."),
    max_context: Optional[str] = OPT_MAX_CONTEXT,
):
    """Anonymize local agent session logs (Claude Code, Codex) into WEKA traces, as `capture export` does."""
    from agentx.capture.agentlogs import import_logs
    from agentx.capture.export import ExportConfig, report_lines

    if not claude and not codex:
        raise AgentxError("capture import: name at least one --claude or --codex store")
    report = import_logs(ExportConfig(store="", tokenizer=str(tokenizer), out=str(out), block_size=block_size,
                                      scope=scope.value, max_context=_max_context(max_context)), claude, codex)
    for line in report_lines(report):
        console.print(line, highlight=False)
    console.print(f"wrote {len(report.files)} trace files to {out / 'traces'}", highlight=False, soft_wrap=True)


@sim_app.command("presets")
def sim_presets_cmd():
    """List the hardware and model presets with their key figures."""
    from agentx.engine.presets import preset_tables

    for table in preset_tables():
        console.print(table)
    console.print("sources: agentx/engine/presets.toml")


def _concurrencies(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise AgentxError(f"--concurrency: want N or N,N,... (positive), got {text!r}")
    return values


def _print_result(result: dict, title: str, folder: Path) -> None:
    from agentx.metrics.report import result_lines, result_table

    console.print(result_table(result, title))
    for line in result_lines(result):
        console.print(line, highlight=False)
    console.print(f"results: {folder}/result.json (records: {folder}/records.jsonl)", highlight=False)


def _sweep(settings, sessions, concurrencies: list[int], out: Path, label: str, run=None) -> list[dict]:
    from agentx.metrics.report import sweep_table
    from agentx.replay.folder import command_line
    from agentx.replay.sweep import sweep

    def level(plan) -> str:  # schedule mode has no lanes: its concurrency is whatever the schedule makes it
        return f"schedule mode, time scale {plan.time_scale:g}" if plan.mode == "schedule" else \
            f"concurrency {plan.concurrency}"

    @contextmanager
    def progress(s):
        console.print(f"[bold]{label}: {level(s.plan)}, {s.plan.duration:g} s profiling[/] -> {escape(str(s.out))}",
                      highlight=False)
        if run is not None:  # a virtual run has no live display
            yield None
            return
        with _progress() as tick:
            yield tick

    def done(n: int, folder: Path, result: dict) -> None:
        _print_result(result, level(settings.replace(concurrency=n).plan), folder)

    results = sweep(settings, sessions, concurrencies, out, command_line(), progress, done, **({"run": run} if run else {}))
    if len(results) > 1:
        console.print(sweep_table(results))
    return [result for _, result in results]


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
    """A live line: phase, lanes busy, requests done, live TTFT p50 and output tok/s."""
    from rich.live import Live

    def line(snap: dict) -> str:
        left = snap["profile_left"]
        ttft = snap["ttft_p50"]
        return (f"[bold]{snap['phase']}[/]" + (f" ({left:,.0f} s left)" if left is not None and snap["phase"] == "profile" else "")
                + f"  lanes busy {snap['lanes_busy']}/{snap['lanes']}  in flight {snap['inflight']}"
                + f"  done: warmup {snap['warmup']:,}, profile {snap['profile']:,}, errors {snap['errors']:,}"
                + (f"  TTFT p50 {ttft * 1000:,.0f} ms" if ttft is not None else "")
                + (f"  {snap['output_tok_s']:,.0f} output tok/s" if snap["output_tok_s"] else ""))

    with Live("starting", console=console, refresh_per_second=4, transient=True) as live:
        yield lambda snap: live.update(line(snap))


def _default_out(prefix: str) -> Path:
    from datetime import datetime

    return Path("runs") / f"{prefix}-{datetime.now():%Y%m%d-%H%M%S}"


@app.command("bench", epilog=EXIT_STATUS)
def bench_cmd(
    url: str = typer.Option(..., "--url", help="Base URL of an OpenAI-compatible server."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name; discovered from /v1/models when omitted."),
    traces: list[Path] = OPT_TRACES,
    more_traces: list[Path] = OPT_MORE_TRACES,
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    scenario: Optional[Scenario] = OPT_SCENARIO,
    concurrency: str = OPT_CONCURRENCY,
    duration: float = typer.Option(3600.0, "--duration", help="Profiling window in seconds."),
    wire: Wire = typer.Option("tokens", "--wire", help="tokens (/v1/completions, token ids) or chat (/v1/chat/completions)."),
    seed: int = typer.Option(0, "--seed"),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="GPUs of the deployment (per-GPU, cost and power figures)."),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="GPU kind for cost and power (H100, H200, B200, ...)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Engine label for the result (e.g. vllm-0.11)."),
    engine_block_size: Optional[int] = typer.Option(None, "--engine-block-size", min=1,
                                                    help="The engine's KV block (default: what the server publishes)."),
    probe_cache: int = typer.Option(0, "--probe-cache", min=0, help="Cache-correctness probes before and after the run."),
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default runs/bench-TIMESTAMP)."),
    warmup_requests_per_lane: int = OPT_WARMUP_REQUESTS_PER_LANE,
    no_warmup: bool = OPT_NO_WARMUP,
    idle_cap: float = OPT_IDLE_CAP,
    system_idle_cap: float = OPT_SYSTEM_IDLE_CAP,
    grace: float = OPT_GRACE,
    request_timeout: float = typer.Option(600.0, "--request-timeout"),
    token_range: str = typer.Option("1000:30000", "--token-range", help="Token ids to draw content from, LO:HI."),
    token_scale: int = typer.Option(1, "--token-scale", min=1, help="Render each hash block as block/K tokens (tiny models)."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="tokenizer.json for --wire chat (default: the sim's)."),
    server_metrics: str = typer.Option("", "--server-metrics", help="Prometheus URL (default: the target's /metrics; 'none': off)."),
    keep_chunks: bool = typer.Option(False, "--keep-chunks", help="Keep every chunk's arrival time in the records."),
    cost_basis: CostBasis = typer.Option("neocloud", "--cost-basis", help="Which price of the GPU counts."),
    mode: Mode = typer.Option("lanes", "--mode", help="lanes (closed loop) or schedule (open loop at recorded start times)."),
    session_headers: SessionHeaders = typer.Option("plain", "--session-headers", help="How each stream's session id "
                                                   "and its parent's are sent: plain, dynamo, sglang or llm-d (SPEC 2)."),
    provider: Optional[str] = typer.Option(None, "--provider", help="Replay only the sessions of this agent "
                                           "(claude, codex: as TraceLab and capture import name them)."),
    time_scale: float = typer.Option(1.0, "--time-scale", help="Schedule mode: divide recorded session start times by this."),
    warmup_seconds: float = typer.Option(0.0, "--warmup-seconds", help="Schedule mode: this prefix counts as warmup."),
    clock_scale: float = typer.Option(1.0, "--clock-scale", help="Target runs X times faster than it models "
                                      "(agentx sim --speed X): delays shrink, times are reported modeled."),
    allow_invalid: bool = typer.Option(False, "--allow-invalid", help=ALLOW_INVALID_HELP),
):
    """Replay agentic traces (or a fixed scenario) against a server and summarize the run."""
    from agentx.content.tokens import parse_token_range
    from agentx.replay.scenarios import scenario_sessions
    from agentx.replay.settings import BenchSettings

    levels = _concurrencies(concurrency)
    traces = [*(traces or []), *(more_traces or [])]
    if mode.value == "schedule" and len(levels) > 1:
        raise AgentxError("schedule mode replays at the recorded start times: it has no lanes to sweep",
                          "concurrency")
    if duration <= 0 or clock_scale <= 0 or time_scale <= 0 or warmup_seconds < 0:
        raise AgentxError("--duration, --clock-scale and --time-scale must be > 0, --warmup-seconds >= 0")
    settings = BenchSettings.build(
        url=url, concurrency=levels[0], duration=duration, model=model, wire=wire.value, seed=seed, gpus=gpus,
        hardware=hardware, engine=engine, engine_block_size=engine_block_size, probe_cache=probe_cache,
        warmup_requests_per_lane=warmup_requests_per_lane,
        idle_cap=idle_cap, system_idle_cap=system_idle_cap, grace=grace, request_timeout=request_timeout,
        token_range=parse_token_range(token_range), token_scale=token_scale, tokenizer=tokenizer,
        server_metrics=None if server_metrics == "none" else server_metrics, keep_chunks=keep_chunks,
        cost_basis=cost_basis.value, scenario=_value(scenario), clock_scale=clock_scale, mode=mode.value,
        session_headers=session_headers.value,
        time_scale=time_scale, warmup_seconds=warmup_seconds, warmup=not no_warmup and mode.value == "lanes",
        dataset=_value(scenario) or (", ".join(map(str, traces)) if traces else "bundled WEKA sample")
        + (f" ({provider})" if provider and not scenario else ""),
        variant=max_context)
    if scenario:
        sessions = scenario_sessions(scenario.value, max(levels))
    else:
        sessions = _load(traces, fmt, max_context)
        if provider:
            sessions = _of_provider(sessions, provider)
    _exit_if_invalid(_sweep(settings, sessions, levels, out or _default_out("bench"), "bench"), allow_invalid)


@probe_app.command("cache")
def probe_cache_cmd(
    url: str = typer.Option(..., "--url", help="Base URL of an OpenAI-compatible server (/v1/completions with token ids)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name; discovered from /v1/models when omitted."),
    traces: list[Path] = typer.Option(None, "--traces", help="Trace files or folders (default: the bundled real traces)."),
    probes: int = typer.Option(8, "--probes", min=1, help="Trace requests to probe."),
    seed: int = typer.Option(0, "--seed"),
    token_range: str = typer.Option("1000:30000", "--token-range", help="Token ids to draw content from, LO:HI."),
    token_scale: int = typer.Option(1, "--token-scale", min=1, help="Render each hash block as block/K tokens."),
    max_isl: Optional[int] = typer.Option(None, "--max-isl", help="Probe only prompts up to this many tokens."),
    flush_tokens: int = typer.Option(0, "--flush-tokens", min=0, help="Other traffic between cold and warm."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the full result here."),
):
    """Greedy answers of trace prompts, cold and then warm (prefix cached): they must match."""
    import asyncio
    import json

    from agentx.content.tokens import ContentConfig, parse_token_range
    from agentx.metrics.report import probe_line
    from agentx.replay.driver import discover_model
    from agentx.replay.probe import ProbeConfig, probe_cache

    content = ContentConfig(seed, parse_token_range(token_range), token_scale)
    cfg = ProbeConfig(url=url, model=model or discover_model(url), probes=probes, seed=seed, content=content,
                      max_isl=max_isl, flush_tokens=flush_tokens)
    result = asyncio.run(probe_cache(cfg, _load(traces or [], None, None)))
    if json_out:
        json_out.write_text(json.dumps(result, indent=1))
    console.print(probe_line(result), highlight=False)
    if result["mismatches"]:
        raise typer.Exit(1)


@app.command("report", epilog=EXIT_STATUS)
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run folder written by `agentx bench` (with --html also a sweep folder)."),
    html: bool = typer.Option(False, "--html", help="Also write report.html (a sweep folder: frontier, table, sweep.csv)."),
    allow_invalid: bool = typer.Option(False, "--allow-invalid", help=ALLOW_INVALID_HELP),
):
    """Rebuild a run's summary from its records (also for a run that was killed)."""
    from agentx.replay.folder import report
    from agentx.report.html import write_report
    from agentx.report.rundata import is_run_folder

    result = report(run_dir) if not html or is_run_folder(run_dir) else None
    if result is not None:
        _print_result(result, str(run_dir), run_dir)
    if html:
        console.print(f"HTML report: {write_report(run_dir)}", highlight=False)
    if result is not None:
        _exit_if_invalid([result], allow_invalid)


@app.command("demo", epilog=EXIT_STATUS)
def demo_cmd(
    concurrency: str = typer.Option("2,8,32", "--concurrency", help="Lanes per run of the sweep."),
    duration: float = typer.Option(600.0, "--duration", help="Profiling seconds per run (modeled time)."),
    speed: float = typer.Option(20.0, "--speed", help="How much faster than the modeled hardware the sim runs "
                                "(the replay clock follows, so figures are the modeled deployment's)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default runs/demo-TIMESTAMP)."),
    allow_invalid: bool = typer.Option(False, "--allow-invalid", help=ALLOW_INVALID_HELP),
):
    """The embedded default: the simulated engine (8 x H200, Qwen3-235B-A22B) on a loopback port,
    the bundled real traces replayed at a few concurrencies, a summary per run and a sweep."""
    from agentx.engine.launch import sim_server
    from agentx.replay.settings import BenchSettings
    from agentx.report.html import write_report

    levels = _concurrencies(concurrency)
    sessions = _load([], None, None)
    out = out or _default_out("demo")
    out.mkdir(parents=True, exist_ok=True)
    console.print(f"agentx demo: simulated 8 x H200 serving Qwen3-235B-A22B (BF16), run {speed:g}x faster than "
                  f"real time with the replay clock scaled to match (all figures are modeled time); "
                  f"{len(sessions)} bundled real Claude Code sessions; concurrency {concurrency}", highlight=False)
    with sim_server("--speed", str(speed), "--truth-log", str(out / "sim_truth.jsonl")) as url:
        settings = BenchSettings.build(url=url, concurrency=levels[0], duration=duration, gpus=8, hardware="H200",
                                       engine="agentx-sim", dataset="bundled WEKA sample", clock_scale=speed,
                                       grace=30.0)
        results = _sweep(settings, sessions, levels, out, "demo")
    first = out / f"c{levels[0]}" if len(levels) > 1 else out
    console.print(f"all results under {out}/ (`agentx report {first}` rebuilds a summary)", highlight=False)
    console.print(f"HTML report: {write_report(out)}", highlight=False)
    _exit_if_invalid(results, allow_invalid)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit status 2."""
    try:
        app()  # click itself reports usage errors (exit 2)
    except AgentxError as exc:
        message = f"--{exc.setting.replace('_', '-')}: {exc.message}" if exc.setting else str(exc)
        err_console.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
