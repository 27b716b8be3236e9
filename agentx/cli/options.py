"""CLI flags derived from the config dataclasses' declarations (`agentx/options.py`): a command
decorated `@config_options(EngineConfig, PlanConfig, ...)` gains one flag per declared field
(its default, help, bounds and choices as declared) and receives, for each of its parameters typed
as one of those configs, that config built from the flags (`build_config`: a field typed as
another of them is that one, built likewise); a parameter typed as a settings Struct (a file's
settings, `settings_struct`) receives the flags it names. A field several configs declare
(`seed`) is one flag.

    @sim_app.command("serve")
    @config_options(EngineConfig, Deployment, ServeConfig, FaultConfig, skip=("overhead_s",))
    def sim_serve_cmd(host: str = typer.Option(...), config: ServeConfig = None):
        ...  # config.deployment.engine: the EngineConfig of the flags

Adding a setting to a command is adding a field to its config."""

from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import MISSING
from enum import Enum
from typing import Optional

import typer

import msgspec

from agentx.options import build_config, declared_in


def _choices_enum(name: str, choices) -> type[Enum]:
    if isinstance(choices, type) and issubclass(choices, Enum):
        return choices
    return Enum(name, {v: v for v in choices}, type=str)


def _parameter(cfg_type, f, kind, default, help_text: str | None) -> inspect.Parameter:
    meta = f.metadata["option"]
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
    field's help or default for this command. Each parameter of the command typed as one of the
    configs (or as a settings Struct) receives it, built from the flags' values (choices as their
    plain string values); a parameter `options` receives those values as {name: value}. The first
    config declaring a name gives its flag."""
    help, defaults = help or {}, defaults or {}
    types = tuple(item[0] if isinstance(item, tuple) else item for item in configs)

    def wrap(command):
        sig = inspect.signature(command, eval_str=True)
        built = {p.name: p.annotation for p in sig.parameters.values() if _is_config(p.annotation, types)}
        flat = "options" in sig.parameters  # (the flat {name: value} form, still taken)
        own = [p for p in sig.parameters.values() if p.name not in built and p.name != "options"]
        added = _flags(configs, {p.name for p in own}, skip, help, defaults)
        names = [p.name for p in added]

        @functools.wraps(command)
        def run(**kwargs):
            values = {name: _plain(kwargs.pop(name)) for name in names}
            typed = {name: build_config(kind, values, types) for name, kind in built.items()}
            return command(**kwargs, **typed, **({"options": values} if flat else {}))

        run.__signature__ = sig.replace(parameters=own + added)
        return run

    return wrap


def _is_config(kind, types) -> bool:
    return kind in types or (isinstance(kind, type) and issubclass(kind, msgspec.Struct))


def _flags(configs, taken: set[str], skip, help: dict, defaults: dict) -> list[inspect.Parameter]:
    """The flags of the configs' declared fields not `taken` by the command's own parameters."""
    added: list[inspect.Parameter] = []
    for cfg_type, f, kind in declared_in(configs):
        if f.name in taken or f.name in skip or not f.metadata["option"]["cli"]:
            continue
        default = defaults.get(f.name, f.default if f.default is not MISSING else ...)
        added.append(_parameter(cfg_type, f, kind, default, help.get(f.name)))
        taken.add(f.name)
    return added


def _plain(value):
    return value.value if isinstance(value, Enum) else value


def given(ctx, names) -> set[str]:
    """Which of these parameters the command line gave (`ctx`: the command's typer.Context), not
    their defaults: a flag given wins over a settings file, a default does not."""
    return {n for n in names if getattr(ctx.get_parameter_source(n), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")}
