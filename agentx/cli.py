"""The `agentx` command: thin; it parses, calls, and prints."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from agentx.errors import AgentxError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, help="agentx: LLM inference benchmark for agentic traffic.")
trace_app = typer.Typer(no_args_is_help=True, help="Inspect, generate and convert agent traces.")
app.add_typer(trace_app, name="trace")

console = Console()
console.width = max(console.width, 112)  # tables of figures read badly when folded
err_console = Console(stderr=True)


def _warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)


def _max_context(text: Optional[str]) -> Optional[int]:
    from agentx.traces.variants import parse_tokens

    return parse_tokens(text) if text else None


def _load(paths: list[Path], fmt: Optional[str], max_context: Optional[str]):
    from agentx.data import sample_traces
    from agentx.traces.load import FORMATS, load_sessions
    from agentx.traces.variants import limit_corpus

    if fmt is not None and fmt not in FORMATS:
        raise AgentxError(f"--format: unknown format {fmt!r} (want {', '.join(FORMATS)})")
    sessions = load_sessions(paths or [sample_traces()], fmt, warn=_warn)
    return limit_corpus(sessions, _max_context(max_context))


FORMAT_HELP = "Input format (weka, mooncake, bailian); detected from the content when omitted."
MAX_CONTEXT_HELP = "Drop every request with ISL + OSL over this many tokens (e.g. 256k): the 256k variant."


@trace_app.command("stats")
def trace_stats_cmd(
    paths: list[Path] = typer.Argument(None, help="Trace files or folders; the bundled real traces when omitted."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
    max_context: Optional[str] = typer.Option(None, "--max-context", help=MAX_CONTEXT_HELP),
):
    """Counts, distributions and the theoretical prefix-cache hit rate of a corpus."""
    import msgspec

    from agentx.traces.report import stats_table
    from agentx.traces.stats import trace_stats

    stats = trace_stats(_load(paths, fmt, max_context))
    if json_out:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(stats)).decode() + "\n")
    else:
        source = ", ".join(map(str, paths)) if paths else "bundled real WEKA traces (agentx/data/weka)"
        console.print(stats_table(stats, source))


@trace_app.command("synth")
def trace_synth_cmd(
    out: Path = typer.Option(..., "--out", help="Folder for the WEKA files (one per session)."),
    sessions: int = typer.Option(393, "--sessions", min=1, help="Number of sessions."),
    seed: int = typer.Option(1, "--seed", help="Seed; the same seed gives the same corpus."),
    max_context: Optional[str] = typer.Option(None, "--max-context", help=MAX_CONTEXT_HELP),
):
    """Generate a synthetic corpus calibrated to the published AgentX statistics."""
    from agentx.traces.synth import synth_corpus
    from agentx.traces.variants import limit_context
    from agentx.traces.weka import write_weka

    limit = _max_context(max_context)
    out.mkdir(parents=True, exist_ok=True)
    written = requests = 0
    for session in synth_corpus(sessions, seed):
        if limit is not None:
            session = limit_context(session, limit)
            if session is None:
                continue
        write_weka([session], out / f"{session.id}.json")
        written += 1
        requests += session.n_requests
    console.print(f"wrote {written} sessions, {requests:,} requests to {out}")


@trace_app.command("convert")
def trace_convert_cmd(
    paths: list[Path] = typer.Argument(..., help="Trace files or folders."),
    to: str = typer.Option(..., "--to", help="Output format: weka, mooncake or bailian."),
    out: Path = typer.Option(..., "--out", help="Output file (JSONL), or a folder for one WEKA file per session."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
    max_context: Optional[str] = typer.Option(None, "--max-context", help=MAX_CONTEXT_HELP),
    time_basis: str = typer.Option("absolute", "--time-basis", help="WEKA subagent times: absolute or relative."),
):
    """Convert traces between formats (and optionally apply the context cap)."""
    from agentx.traces.load import FORMATS, write_sessions

    if to not in FORMATS:
        raise AgentxError(f"--to: unknown format {to!r} (want {', '.join(FORMATS)})")
    if time_basis not in ("absolute", "relative"):
        raise AgentxError(f"--time-basis: want absolute or relative, got {time_basis!r}")
    sessions = _load(paths, fmt, max_context)
    options = {"basis": time_basis} if to == "weka" else {}
    write_sessions(sessions, out, to, **options)
    console.print(f"wrote {len(sessions)} sessions ({sum(s.n_requests for s in sessions):,} requests) to {out}")


def main() -> None:
    """Entry point: user errors become one line on stderr and exit status 2."""
    try:
        app()  # click itself reports usage errors (exit 2)
    except AgentxError as exc:
        err_console.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
