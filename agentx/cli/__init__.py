"""The `agentx` command: thin; it parses, calls, and prints. This module holds the root command,
its entry point and what the command groups share; a module per group adds its commands:
traces (`trace ...`), sim (`sim ...`), capture (`capture ...`), bench (`bench`, `report`, `demo`,
`probe cache`) and agentx.results.cli (`db ...`, `frontier`, `serve`, `sweep`)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional, get_args

import typer
from rich.console import Console
from rich.markup import escape

from agentx.content.wire import WIRE_MODES
from agentx.engine.presets import COST_BASES
from agentx.errors import AgentxError
from agentx.replay.session_ids import PRESETS as SESSION_PRESETS
from agentx.replay.plan import ARRIVALS, MODES
from agentx.replay.scenarios import SCENARIOS
from agentx.traces.load import FORMATS, WRITE_FORMATS
from agentx.traces.model import HashScope
from agentx.traces.weka import TimeBasis

# Help pages in click's plain layout (rich_markup_mode=None): it wraps at any width instead of
# cutting option names, and reads no markup into help texts like `http(s)://host[/prefix]`.
PLAIN = {"no_args_is_help": True, "rich_markup_mode": None}
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help="agentx: LLM inference benchmark for agentic traffic.", **PLAIN)

console = Console()
console.width = max(console.width, 112)  # tables of figures read badly when folded
err_console = Console(stderr=True)


def _version_option(value: bool) -> None:
    if value:
        from agentx.replay.folder import agentx_version

        typer.echo(f"agentx {agentx_version()}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version_option, is_eager=True,
                                       help="Print agentx's version and exit.")) -> None:
    """agentx: LLM inference benchmark for agentic traffic."""


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
Arrival = _choices("Arrival", ARRIVALS)


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


def _rate_settings(request_rate: Optional[float], arrival, levels: list[int]) -> dict:
    """The plan settings of --request-rate: an open loop (schedule mode) at that rate, no lanes."""
    if request_rate is None:
        return {}
    if request_rate <= 0:
        raise AgentxError("must be > 0", "request_rate")
    if len(levels) > 1:
        raise AgentxError("an open loop at a request rate has no lanes to sweep", "concurrency")
    return {"request_rate": request_rate, "arrival": _value(arrival)}


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
OPT_WARMUP_REQUESTS_PER_LANE = typer.Option(10, "--warmup-requests-per-lane", min=0, help="Warmup stage 2: requests "
                                            "each lane sends at max_tokens = 1, after its primers (SPEC 2).")
OPT_SEED = typer.Option(0, "--seed", help="Seed of the plan (session order, warmup start points, arrivals) and of "
                        "the content (token ids): the same seed replays the same requests.")
OPT_REQUEST_RATE = typer.Option(None, "--request-rate", min=0.0, help="Open loop: session trees start at R per second "
                                "(a scenario: requests per second), instead of lanes; see --arrival.")
OPT_ARRIVAL = typer.Option("poisson", "--arrival", help="How --request-rate spaces starts: poisson (seeded "
                           "exponential gaps, vLLM bench's default) or constant (1/R apart).")
OPT_SLO = typer.Option(None, "--slo", help="Goodput's objectives in ms, vLLM bench's form: 'ttft:2000 tpot:50 e2el:60000' "
                       "(any of them; the flag may repeat).")
OPT_NO_WARMUP = typer.Option(False, "--no-warmup", help="Start every lane at t = 0 without warmup.")
OPT_IDLE_CAP = typer.Option(300.0, "--idle-cap", help="Longest gap a session tree waits with nothing in flight.")
OPT_SYSTEM_IDLE_CAP = typer.Option(10.0, "--system-idle-cap", help="Longest gap with nothing in flight anywhere.")
OPT_GRACE = typer.Option(60.0, "--grace", help="Seconds in-flight requests may finish after the window.")

# `sim serve` and `capture proxy`
REQUEST_TIMEOUT_HELP = "Seconds a client has to send a request's head and body (and an idle connection stays)."


# Options that take several values after one flag (`capture import --claude A B --codex C`), per
# command: click takes one value per flag, so the values are given a flag each before parsing.
LIST_OPTIONS = {("capture", "import"): ("--claude", "--codex")}


def expand_lists(args: list[str]) -> list[str]:
    """`--claude A B --codex C` -> `--claude A --claude B --codex C` for LIST_OPTIONS' commands."""
    options = next((opts for cmd, opts in LIST_OPTIONS.items() if tuple(args[:len(cmd)]) == cmd), ())
    out, flag = [], None
    for arg in args:
        if arg.startswith("-"):
            flag = arg if arg in options else None
        elif flag is not None and out[-1] != flag:
            out.append(flag)
        out.append(arg)
    return out


def main() -> None:
    """Entry point: user errors become one line on stderr and exit status 2."""
    try:
        app(args=expand_lists(sys.argv[1:]))  # click itself reports usage errors (exit 2)
    except AgentxError as exc:
        message = f"--{exc.setting.replace('_', '-')}: {exc.message}" if exc.setting else str(exc)
        err_console.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        sys.exit(2)


# The command tree. Help lists commands and groups each in the order they are added here.
from agentx.cli import bench, capture, sim, traces  # noqa: E402  (they use the helpers above)
from agentx.results.cli import register as register_results  # noqa: E402

app.add_typer(traces.trace_app, name="trace")
app.add_typer(sim.sim_app, name="sim")
app.add_typer(bench.probe_app, name="probe")
app.add_typer(capture.capture_app, name="capture")
register_results(app)  # frontier, serve, sweep and the db group
bench.register(app)  # bench, report, demo
