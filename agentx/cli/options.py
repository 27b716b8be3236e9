"""CLI flags derived from the config dataclasses' declarations (`agentx/options.py`): a command
decorated `@config_options(EngineConfig, PlanConfig, ...)` gains one flag per declared field
(its default, help, bounds and choices as declared) and receives them all as one dict, `options`,
keyed by field name; a field several configs declare (`seed`) is one flag.

    @sim_app.command("serve")
    @config_options(EngineConfig, skip=("overhead_s",), help={"gpus": "GPUs in the TP group."})
    def sim_serve_cmd(host: str = typer.Option(...), options: dict = None):
        engine = EngineConfig(**pick(EngineConfig, options))

Adding a setting to a command is adding a field to its config."""

from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import MISSING
from enum import Enum
from typing import Optional

import typer

from agentx.options import declared, pick  # noqa: F401  (pick: the commands')


def _choices_enum(name: str, choices) -> type[Enum]:
    if isinstance(choices, type) and issubclass(choices, Enum):
        return choices
    return Enum(name, {v: v for v in choices}, type=str)


def _parameter(cfg_type, f, hints: dict, default, help_text: str | None) -> inspect.Parameter:
    meta = f.metadata["option"]
    kind = hints[f.name]
    optional = type(None) in typing.get_args(kind)
    base = next((a for a in typing.get_args(kind) if a is not type(None)), kind) if optional else kind
    if meta["choices"] is not None:
        base = _choices_enum(f.name.title().replace("_", ""), meta["choices"])
    flag = meta["flag"] or "--" + f.name.replace("_", "-")
    if base is bool and not meta["flag"]:
        flag = f"{flag}/--no-{flag[2:]}" if default else flag
    extra = {k: meta[k] for k in ("min", "max") if meta[k] is not None and base in (int, float)}
    if meta["metavar"]:
        extra["metavar"] = meta["metavar"]
    opt = typer.Option(default, flag, help=help_text if help_text is not None else meta["help"], **extra)
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=opt,
                             annotation=Optional[base] if optional or default is None else base)


def config_options(*configs, skip: tuple[str, ...] = (), help: dict[str, str] | None = None,
                   defaults: dict | None = None):
    """Add the declared fields of `configs` as flags to a command: of a config type all its fields,
    of a pair (type, names) those fields only; less `skip`. `help` and `defaults` override a
    field's help or default for this command. The command's `options` parameter receives
    {field name: value} (choices as their plain string values); the first config declaring a
    name gives its flag."""
    help, defaults = help or {}, defaults or {}

    def wrap(command):
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "options"]
        taken = {p.name for p in own}
        added: list[inspect.Parameter] = []
        for item in configs:
            cfg_type, only = item if isinstance(item, tuple) else (item, None)
            hints = typing.get_type_hints(cfg_type)
            for f in declared(cfg_type):
                if f.name in taken or f.name in skip or (only is not None and f.name not in only):
                    continue
                if not f.metadata["option"]["cli"]:
                    continue
                default = defaults.get(f.name, f.default if f.default is not MISSING else ...)
                added.append(_parameter(cfg_type, f, hints, default, help.get(f.name)))
                taken.add(f.name)
        names = [p.name for p in added]

        @functools.wraps(command)
        def run(**kwargs):
            options = {name: _plain(kwargs.pop(name)) for name in names}
            return command(**kwargs, options=options)

        run.__signature__ = sig.replace(parameters=own + added)
        return run

    return wrap


def _plain(value):
    return value.value if isinstance(value, Enum) else value


def given(ctx, names) -> set[str]:
    """Which of these parameters the command line gave (`ctx`: the command's typer.Context), not
    their defaults: a flag given wins over a settings file, a default does not."""
    return {n for n in names if getattr(ctx.get_parameter_source(n), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")}
