"""Settings declared once: a config dataclass's field carries its default, its bounds and its help
(`option(...)`, dataclass field metadata). The config checks the bounds in `__post_init__`
(`check_bounds`), and the CLI derives its flags from the same fields (`agentx/cli/options.py`), as
recipes and plans read the same names; a new setting is a new field.

    @dataclass(frozen=True)
    class PlanConfig:
        idle_cap: float = option(300.0, "Longest gap a session tree waits with nothing in flight.", min=0)

        def __post_init__(self):
            check_bounds(self)
"""

from __future__ import annotations

from dataclasses import MISSING, Field, field, fields

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
