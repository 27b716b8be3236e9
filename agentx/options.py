"""Settings declared once: a config dataclass's field carries its default, its bounds and its help
(`option(...)`, dataclass field metadata). The config checks the bounds in `__post_init__`
(`check_bounds`), the CLI derives its flags from the same fields (`agentx/cli/options.py`), and a
file (a sweep recipe's `bench:`, a capacity plan) reads the same names through `settings_struct`
and `read_settings`, with one error format naming the file and the key; a new setting is a new
field. Layers: the declared defaults, then the file, then the flags.

    @dataclass(frozen=True)
    class PlanConfig:
        idle_cap: float = option(300.0, "Longest gap a session tree waits with nothing in flight.", min=0)

        def __post_init__(self):
            check_bounds(self)
"""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, Field, field, fields
from typing import Annotated, Literal, Union

import msgspec

from agentx.errors import AgentxError


def option(default=MISSING, help: str = "", *, min: float | None = None, max: float | None = None,
           gt: float | None = None, choices=None, flag: str | None = None, metavar: str | None = None,
           cli: bool = True) -> Field:
    """A config field: its default, help, bounds (`min` <= value <= `max`, value > `gt`), allowed
    values (`choices`: an Enum or a tuple of strings), and its flag (default: `--field-name`;
    `cli=False`: no flag, a setting the program sets)."""
    meta = {"help": help, "min": min, "max": max, "gt": gt, "choices": choices, "flag": flag, "metavar": metavar,
            "cli": cli}
    return field(default=default, metadata={"option": meta})


def declared(cfg_type) -> list[Field]:
    """The fields of a config that are options (declared with `option`)."""
    return [f for f in fields(cfg_type) if "option" in f.metadata]


def pick(cfg_type, options: dict) -> dict:
    """The options that are fields of `cfg_type`."""
    names = {f.name for f in fields(cfg_type)}
    return {k: v for k, v in options.items() if k in names}


def build_config(cfg_type, values: dict, parts=()):
    """A config of `cfg_type` from flat settings by name (`values`; the rest take their declared
    defaults): a field whose type is another config of `parts` is that config, built likewise
    (a Deployment's `engine`: the EngineConfig). A msgspec Struct (a file's settings, see
    `settings_struct`) takes the values it names, unchecked (the flags were checked already)."""
    if isinstance(cfg_type, type) and issubclass(cfg_type, msgspec.Struct):
        return cfg_type(**{k: v for k, v in values.items() if k in cfg_type.__struct_fields__})
    hints = typing.get_type_hints(cfg_type)
    nested = {f.name: build_config(hints[f.name], values, parts) for f in fields(cfg_type)
              if "option" not in f.metadata and hints[f.name] in parts}
    return cfg_type(**{f.name: values[f.name] for f in declared(cfg_type) if f.name in values}, **nested)


def check_bounds(cfg) -> None:
    """Every declared bound and choice of `cfg`'s fields (an error names the setting)."""
    for f in declared(cfg):
        meta, value = f.metadata["option"], getattr(cfg, f.name)
        if value is None or isinstance(value, bool):
            continue
        name = meta["flag"][2:].replace("-", "_") if meta["flag"] else f.name  # (the CLI words it as the flag)
        if meta["choices"] is not None and value not in tuple(meta["choices"]):
            known = ", ".join(str(c) for c in meta["choices"])
            raise AgentxError(f"want one of {known}, got {value!r}", name)
        if meta["gt"] is not None and not value > meta["gt"]:
            raise AgentxError(f"must be > {meta['gt']:g}, got {value:g}", name)
        if meta["min"] is not None and value < meta["min"]:
            raise AgentxError(f"must be >= {meta['min']:g}, got {value:g}", name)
        if meta["max"] is not None and value > meta["max"]:
            raise AgentxError(f"must be <= {meta['max']:g}, got {value:g}", name)


def declared_in(parts):
    """(config type, field, its type hint) of each declared field of `parts`: config types, or
    (type, names) pairs, which take only those names."""
    for item in parts:
        cfg_type, only = item if isinstance(item, tuple) else (item, None)
        hints = typing.get_type_hints(cfg_type)
        for f in declared(cfg_type):
            if only is None or f.name in only:
                yield cfg_type, f, hints[f.name]


def settings_struct(name: str, parts, skip=(), listed: bool = False) -> type[msgspec.Struct]:
    """The Struct a file's mapping of settings decodes into: the declared fields of `parts` (config
    types, or (type, names) pairs; the first to declare a name gives it) less `skip`, each optional
    (unset: not given), typed as declared: choices as their values, numbers finite and bounded,
    text bounded. `listed`: each a list of such values (a plan's grid)."""
    found: dict[str, object] = {}
    for _, f, hint in declared_in(parts):
        if f.name in found or f.name in skip:
            continue
        choices = f.metadata["option"]["choices"]
        kind = Literal[tuple(str(c) for c in choices)] if choices is not None else bounded(hint)
        found[f.name] = list[kind] if listed else kind
    return msgspec.defstruct(name, [(k, Union[v, msgspec.UnsetType], msgspec.UNSET) for k, v in found.items()],
                             forbid_unknown_fields=True)


def read_settings(data, struct: type[msgspec.Struct], where: str, prefix: str = "") -> dict:
    """The settings given in `data` (a file's mapping), typed by `struct`; bad input is one line:
    `where: prefix.key: problem`."""
    try:
        typed = msgspec.convert(data, struct)
    except msgspec.ValidationError as e:
        line = error_key(e, prefix)
        name = line.removeprefix(prefix).split(":")[0].split("[")[0]
        if "Invalid enum value" in line and name in struct.__struct_fields__:  # the choices, listed
            line += f" (want one of {', '.join(_choices_of(typing.get_type_hints(struct)[name]))})"
        raise AgentxError(f"{where}: {line}") from None
    return {k: v for k, v in msgspec.structs.asdict(typed).items() if v is not msgspec.UNSET}


def _choices_of(hint) -> list[str]:
    """The values of the Literal inside a field's type."""
    if typing.get_origin(hint) is Literal:
        return [str(a) for a in typing.get_args(hint)]
    return [c for a in typing.get_args(hint) for c in _choices_of(a)]


def bounded(hint):
    """A setting's type as a file's bounded one: finite numbers within [0, 10^7], text of at most
    4096 characters."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return Union[tuple(bounded(a) for a in args)]
    if origin is tuple:
        return tuple[tuple(bounded(a) for a in args)]
    if hint is float:
        return Annotated[float, msgspec.Meta(ge=0, le=1e7)]
    if hint is int:
        return Annotated[int, msgspec.Meta(ge=0, le=10**7)]
    if hint is str:
        return Annotated[str, msgspec.Meta(max_length=4096, pattern=r"^[^\x00]*$")]
    return hint


def error_key(e: msgspec.ValidationError, prefix: str = "") -> str:
    """`key.path: problem` from msgspec's `problem - at `$.key.path``, in the file's words."""
    message, _, at = str(e).rpartition(" - at `")
    if not message:
        message, at = str(e), "$"
    key = (prefix.rstrip(".") + at.rstrip("`").removeprefix("$")).removeprefix(".")
    if message.startswith("Object missing required field `"):
        return f"{key + '.' if key else ''}{message.split('`')[1]}: missing"
    if message.startswith("Object contains unknown field `"):
        return f"{key + '.' if key else ''}{message.split('`')[1]}: unknown key"
    return f"{key}: {message}" if key else message
