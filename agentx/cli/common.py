"""What the command groups of `agentx` share: the consoles, the choices of options the stages
declare, the options `bench` and `sim bench` both take, and the corpus a command's flags name."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional, get_args

import typer
from rich.console import Console
from rich.markup import escape

from agentx.errors import AgentxError
from agentx.replay.corpus import Corpus
from agentx.replay.plan import PlanConfig
from agentx.traces.load import FORMATS, WRITE_FORMATS
from agentx.traces.model import HashScope
from agentx.traces.weka import TimeBasis

# Help pages in click's plain layout (rich_markup_mode=None): it wraps at any width instead of
# cutting option names, and reads no markup into help texts like `http(s)://host[/prefix]`.
PLAIN = {"no_args_is_help": True, "rich_markup_mode": None}

console = Console()
console.width = max(console.width, 112)  # tables of figures read badly when folded
err_console = Console(stderr=True)


class Interrupted(Exception):
    """A Ctrl-C that a command caught to say what it kept: main() prints the line and exits 130."""


def _choices(name: str, values) -> type[Enum]:
    """The allowed values of an option, declared by the stage that takes them, as an Enum
    (typer checks and lists them)."""
    return Enum(name, {v: v for v in values}, type=str)


Format = _choices("Format", FORMATS)
WriteFormat = _choices("WriteFormat", WRITE_FORMATS)
Basis = _choices("Basis", get_args(TimeBasis))
Scope = _choices("Scope", get_args(HashScope))


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


def _corpus(traces: list[Path] | None, more_traces: list[Path] | None = None, fmt: Optional[Format] = None,
            max_context: Optional[str] = None, scenario: Optional[str] = None,
            provider: Optional[str] = None, range_ratio: Optional[float] = None, offline: int = 0) -> Corpus:
    """The corpus of a command's --traces (and the paths after them), --format, --max-context,
    --scenario (with --range-ratio, --offline) and --provider."""
    return Corpus(tuple([*(traces or []), *(more_traces or [])]), _value(fmt), max_context, provider, scenario,
                  range_ratio=range_ratio, offline=offline)


# offline scenarios: every request is profiled, however long the makespan; each session once
OFFLINE_WINDOW_S = 1e7


def _offline(corpus: Corpus, options: dict) -> list[int] | None:
    """With --offline N: the one level (N lanes) and the plan options it implies, set in `options`."""
    sc = corpus.parsed()
    if not sc or not sc.offline:
        return None
    options.update(warmup=False, reuse_sessions=False, duration=max(options.get("duration", 0), OFFLINE_WINDOW_S))
    return [sc.offline]


def _load(paths: list[Path], fmt: Optional[Format], max_context: Optional[str]):
    return _corpus(paths, fmt=fmt, max_context=max_context).sessions(warn=_warn)


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
OPT_SCENARIO = typer.Option(None, "--scenario", help="Fixed-length baseline instead of traces: ISL:OSL "
                            "(e.g. 5000:500) or 1k1k, 8k1k, 1k8k.")
OPT_RANGE_RATIO = typer.Option(None, "--range-ratio", help="Scenario lengths uniform in [R x L, L] (default: 0.8 "
                               "for the named scenarios, as InferenceX runs them; 1 for ISL:OSL).")
OPT_OFFLINE = typer.Option(0, "--offline", min=0, help="Scenario offline: N requests queued at t = 0, throughput "
                           "over the makespan (sets --concurrency N, no warmup).")
OPT_CONCURRENCY = typer.Option(str(PlanConfig.concurrency), "--concurrency", help="Lanes; a list (1,4,16) runs a sweep.")
OPT_SLO = typer.Option(None, "--slo", help="Goodput's objectives in ms, vLLM bench's form: 'ttft:2000 tpot:50 e2el:60000' "
                       "(any of them; the flag may repeat).")
SEED_HELP = ("Seed of the plan (session order, warmup start points, arrivals) and of the content (token ids): "
             "the same seed replays the same requests.")


def _open_loop(options: dict, levels: list[int]) -> bool:
    """Whether the plan is an open loop (schedule mode, or --request-rate, which implies it);
    an open loop has no lanes, so a --concurrency list is refused."""
    rate = options.get("request_rate") is not None
    if rate:
        options["mode"] = "schedule"
    schedule = options["mode"] == "schedule"
    if schedule and len(levels) > 1:
        raise AgentxError("an open loop at a request rate has no lanes to sweep" if rate else
                          "schedule mode replays at the recorded start times: it has no lanes to sweep", "concurrency")
    return schedule


# `sim serve` and `capture proxy`
REQUEST_TIMEOUT_HELP = "Seconds a client has to send a request's head and body (and an idle connection stays)."
