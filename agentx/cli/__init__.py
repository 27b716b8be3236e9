"""The `agentx` command: thin; it parses, calls, and prints. This module assembles the root command
and holds its entry point; a module per group adds its commands: traces (`trace ...`), sim (`sim ...`),
capture (`capture ...`), bench (`bench`, `report`, `compare`, `probe cache`), demo (`demo`) and results (`db ...`,
`frontier`, `serve`, `sweep`). What the groups share is in agentx.cli.common."""

from __future__ import annotations

import sys

_PREVIOUS_HOOK = sys.excepthook


def _quiet_interrupt(kind, value, tb) -> None:
    """A Ctrl-C while the command loads (its imports take seconds on a busy machine) is one line."""
    if issubclass(kind, KeyboardInterrupt):
        print("interrupted (Ctrl-C)", file=sys.stderr)
    else:
        _PREVIOUS_HOOK(kind, value, tb)


sys.excepthook = _quiet_interrupt  # until the command has loaded (reset at the end of this module)

import typer  # noqa: E402
from rich.markup import escape

from agentx.cli import bench, capture, demo, sim, traces
from agentx.cli.common import PLAIN, Interrupted, err_console
from agentx.cli.results import register as register_results
from agentx.errors import AgentxError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help="agentx: LLM inference benchmark for agentic traffic.", **PLAIN)


def _version_option(value: bool) -> None:
    if value:
        from agentx.replay.folder import agentx_version

        typer.echo(f"agentx {agentx_version()}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version_option, is_eager=True,
                                       help="Print agentx's version and exit.")) -> None:
    """agentx: LLM inference benchmark for agentic traffic."""


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
    except Interrupted as exc:  # a command that stores keeps each step whole: it says what it kept
        _say_interrupted(str(exc))
    except KeyboardInterrupt:
        _say_interrupted()
    except SystemExit as exc:  # typer turns a Ctrl-C while it parses or calls into a silent exit 130
        if exc.code == 130:
            _say_interrupted()
        raise
    except AgentxError as exc:
        from agentx.userfiles import shown

        message = f"--{exc.setting.replace('_', '-')}: {exc.message}" if exc.setting else str(exc)
        err_console.print(f"[red]error:[/] {escape(shown(message))}", highlight=False, soft_wrap=True)
        sys.exit(2)


def _say_interrupted(line: str = "interrupted (Ctrl-C)") -> None:
    # plain print: the interrupt may have landed inside rich's console, whose buffer then never flushes
    print(line, file=sys.stderr, flush=True)
    sys.exit(130)


# The command tree. Help lists commands and groups each in the order they are added here.
app.add_typer(traces.trace_app, name="trace")
app.add_typer(sim.sim_app, name="sim")
app.add_typer(bench.probe_app, name="probe")
app.add_typer(capture.capture_app, name="capture")
register_results(app)  # frontier, serve, sweep and the db group
bench.register(app)  # bench, report, compare
app.command("demo", epilog=bench.EXIT_STATUS)(demo.demo_cmd)
if sys.excepthook is _quiet_interrupt:
    sys.excepthook = _PREVIOUS_HOOK
