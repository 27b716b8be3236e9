"""What the command groups of `agentx` share: the consoles, the choices of options the stages
declare, the options `bench` and `sim bench` both take, and the corpus a command's flags name."""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import Optional, get_args

import typer
from rich.console import Console
from rich.markup import escape

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


def _load(paths: list[Path], fmt: Optional[Format], max_context: Optional[str]):
    return _corpus(paths, fmt=fmt, max_context=max_context).sessions(warn=_warn)


def declared_help(cfg_type, name: str) -> str:
    """The help a config declares for one of its settings (agentx/options.py)."""
    return next(f.metadata["option"]["help"] for f in fields(cfg_type) if f.name == name)


FORMAT_HELP = declared_help(Corpus, "format")
MAX_CONTEXT_HELP = declared_help(Corpus, "max_context")

# options `bench` and `sim bench` share
OPT_TRACES = typer.Option(None, "--traces", help="Trace files or folders, several after one flag (a shell glob) "
                          "or the flag repeated (default: the bundled real traces).")
OPT_MORE_TRACES = typer.Argument(None, metavar="TRACES", help="More trace files or folders: what a shell glob after "
                                 "--traces expands to (`--traces runs/*.jsonl`).")
OPT_FMT = typer.Option(None, "--format", metavar="FORMAT", help=FORMAT_HELP)
OPT_MAX_CONTEXT = typer.Option(None, "--max-context", help=MAX_CONTEXT_HELP)
OPT_SCENARIO = typer.Option(None, "--scenario", help=declared_help(Corpus, "scenario"))
OPT_RANGE_RATIO = typer.Option(None, "--range-ratio", help=declared_help(Corpus, "range_ratio"))
OPT_OFFLINE = typer.Option(0, "--offline", min=0, help=declared_help(Corpus, "offline"))
OPT_CONCURRENCY = typer.Option(str(PlanConfig.concurrency), "--concurrency", help="Lanes; a list (1,4,16) runs a sweep.")
OPT_SLO = typer.Option(None, "--slo", help="Goodput's objectives in ms, vLLM bench's form: 'ttft:2000 tpot:50 e2el:60000' "
                       "(any of them; the flag may repeat).")
SEED_HELP = ("Seed of the plan (session order, warmup start points, arrivals) and of the content (token ids): "
             "the same seed replays the same requests.")


# `sim serve` and `capture proxy`
REQUEST_TIMEOUT_HELP = "Seconds a client has to send a request's head and body (and an idle connection stays)."
