"""`agentx capture ...`: record agent traffic and export it as anonymized traces."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from agentx.cli.common import OPT_MAX_CONTEXT, PLAIN, REQUEST_TIMEOUT_HELP, Scope, _count, _max_context, console, \
    err_console
from agentx.errors import AgentxError

capture_app = typer.Typer(help="Record agent traffic and export it as anonymized traces.", **PLAIN)

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
    _wrote(report, out)


def _wrote(report, out: Path) -> None:
    """What an export wrote; how to replay it only when it wrote a session."""
    line = f"wrote {_count(len(report.files), 'trace file')} to {out / 'traces'} and the report to {out / 'export_report.json'}"
    if report.files:
        line += f"; replay them with: agentx bench --traces {out / 'traces'}"
    else:
        line += " (no session was left to export: see what was dropped above)"
    console.print(line, highlight=False, soft_wrap=True)


@capture_app.command("import")
def capture_import_cmd(
    claude: list[Path] = typer.Option([], "--claude", help="Claude Code stores (e.g. ~/.claude/projects) or session files, several after one flag."),
    codex: list[Path] = typer.Option([], "--codex", help="Codex stores (e.g. ~/.codex/sessions) or rollout files, several after one flag."),
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
    _wrote(report, out)
    if report.skipped_files:
        for line in report.skipped_files:
            err_console.print(f"skipped {line}", highlight=False, markup=False, soft_wrap=True)
        raise AgentxError(f"exported {_count(report.sessions, 'session')}, skipped "
                          f"{_count(len(report.skipped_files), 'path')} of the stores (listed above; in "
                          f"export_report.json as skipped_files)")
