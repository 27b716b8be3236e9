"""`agentx trace ...`: inspect, generate and convert agent traces."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from agentx.cli.common import (OPT_FMT, OPT_MAX_CONTEXT, PLAIN, Basis, Format, WriteFormat, _choices, _count, _load,
                               _max_context, console)

SubagentContext = _choices("SubagentContext", ("own", "parent"))

HitRule = _choices("HitRule", ("agentx", "source"))
trace_app = typer.Typer(help="Inspect, generate and convert agent traces.", **PLAIN)

@trace_app.command("stats")
def trace_stats_cmd(
    paths: list[Path] = typer.Argument(None, help="Trace files or folders, each a corpus (several: side by side); "
                                       "the bundled real traces when omitted."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    fmt: Optional[Format] = OPT_FMT,
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    by_provider: bool = typer.Option(False, "--by-provider", help="A column per agent (claude, codex, ...) of each corpus."),
    hit_rule: HitRule = typer.Option("agentx", "--hit-rule", help="agentx (the theoretical hit within each session "
                                     "tree, and across the corpus for global ids) or source: also each source's own "
                                     "rule (TRIE, TraceLab, Mooncake), with its definition."),
):
    """Counts, distributions and the theoretical prefix-cache hit rate of a corpus, or of several side by side."""
    import msgspec

    from agentx.traces.stats_tables import compare_table, segments_table, stats_table
    from agentx.traces.stats import corpora_stats, trace_stats

    if len(paths or []) <= 1 and not by_provider:
        stats = trace_stats(_load(paths, fmt, max_context))
        if json_out:
            sys.stdout.write(msgspec.json.format(msgspec.json.encode(stats)).decode() + "\n")
        else:
            source = ", ".join(map(str, paths)) if paths else "bundled real WEKA traces (agentx/data/weka)"
            console.print(stats_table(stats, source, hit_rule.value == "source"))
            if (kinds := segments_table(stats)) is not None:
                console.print(kinds)
        return
    corpora = [(str(p), _load([p], fmt, max_context)) for p in paths] if paths else [("bundled", _load([], fmt, max_context))]
    columns = corpora_stats(corpora, by_provider)
    if json_out:
        doc = [{"source": name, "stats": stats} for name, stats in columns]
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc)).decode() + "\n")
    else:
        console.print(compare_table(columns, hit_rule.value == "source"))


@trace_app.command("synth")
def trace_synth_cmd(
    out: Path = typer.Option(..., "--out", help="Folder for the WEKA files (one per session)."),
    sessions: int = typer.Option(393, "--sessions", min=1, help="Number of sessions."),
    seed: int = typer.Option(1, "--seed", help="Seed; the same seed gives the same corpus."),
    max_context: Optional[str] = OPT_MAX_CONTEXT,
    subagent_context: SubagentContext = typer.Option(
        "own", "--subagent-context", help="A subagent starts from its type's own prefix (own: the calibrated "
        "corpus) or from the prompt of the request that spawned it (parent: context-forking subagents)."),
):
    """Generate a synthetic corpus calibrated to the published AgentX statistics."""
    from agentx.traces.synth import write_corpus

    written, requests = write_corpus(out, sessions, seed, _max_context(max_context), subagent_context.value)
    console.print(f"wrote {_count(written, 'session')}, {_count(requests, 'request')} to {out}")


def flat_losses(sessions: list, to: str) -> list[str]:
    """What a flat format (Mooncake's rows, Bailian's chat chains) loses: every subagent's stream.
    Their requests are kept, in time order in their session's rows, not their tree (the parent's
    wait for them, their parallel lanes)."""
    subs = [st for s in sessions for st in s.walk() if st.kind in ("subagent", "background")]
    if not subs:
        return []
    requests = sum(len(st.requests) for st in subs)
    held = sum(1 for s in sessions if any(st.kind in ("subagent", "background") for st in s.walk()))
    return [f"{len(subs):,} subagent streams of {held:,} sessions ({requests:,} requests): written as rows of "
            f"their session in time order; {to} has no session tree, so replay runs them in one chain, "
            "without the parent's wait or their parallel lanes"]


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
    if to.value in ("mooncake", "bailian"):
        for line in flat_losses(sessions, to.value):
            console.print(f"  not kept: {line}", highlight=False)
    if to.value == "tracelab":
        from agentx.traces.tracelab import tracelab_losses

        for line in tracelab_losses(sessions, out.suffix == ".csv"):
            console.print(f"  not kept: {line}", highlight=False)
