"""Settings declared once (`agentx/options.py`) and the flags derived from them (`cli/options.py`)."""

from dataclasses import dataclass
from enum import StrEnum

import pytest
import typer
from typer.testing import CliRunner

from agentx.cli.options import config_options
from agentx.errors import AgentxError
from agentx.options import check_bounds, declared, option, pick


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class First:
    size: int = option(4, "How big.", min=1)
    rate: float = option(0.5, "How often.", gt=0, max=1)
    color: str = option("red", "Which color.", choices=Color)
    loud: bool = option(True, "Shout.")
    seed: int = option(0, "Seed of the first.")
    hidden: str = option("x", cli=False)

    def __post_init__(self):
        check_bounds(self)


@dataclass(frozen=True)
class Second:
    seed: int = option(0, "Seed of the second.")
    limit: float | None = option(None, "Stop here.", min=0, flag="--stop-at")

    def __post_init__(self):
        check_bounds(self)


def app_of(seen: list) -> typer.Typer:
    app = typer.Typer(rich_markup_mode=None)

    @app.command()
    @config_options(First, (Second, ("seed", "limit")), help={"seed": "Seed of both."})
    def run(name: str = typer.Option("n", "--name"), options: dict = None):
        seen.append((name, First(**pick(First, options)), Second(**pick(Second, options))))

    return app


def test_a_command_takes_one_flag_per_declared_field_with_its_default_help_and_bounds():
    seen: list = []
    runner = CliRunner()
    res = runner.invoke(app_of(seen), ["--size", "9", "--color", "blue", "--no-loud", "--seed", "3", "--stop-at", "2.5"])
    assert res.exit_code == 0, res.output
    name, first, second = seen[-1]
    assert name == "n" and first == First(size=9, color="blue", loud=False, seed=3)
    assert second == Second(seed=3, limit=2.5)  # one --seed for both configs
    assert type(first.color) is str  # choices arrive as their plain values
    help_text = runner.invoke(app_of(seen), ["--help"], terminal_width=200).output
    for text in ("How big.", "--loud", "--no-loud", "Seed of both.", "--stop-at", "x>=1", "red|blue"):
        assert text in help_text, text
    assert "--hidden" not in help_text
    assert runner.invoke(app_of(seen), ["--size", "0"]).exit_code == 2  # the declared min, checked by the flag
    bad = runner.invoke(app_of(seen), ["--rate", "0"])  # gt: checked by the config
    assert isinstance(bad.exception, AgentxError) and bad.exception.setting == "rate"


@dataclass(frozen=True)
class Outer:
    first: First = First()
    label: str = option("l", "A label.")

    def __post_init__(self):
        check_bounds(self)


def test_a_command_receives_the_typed_configs_it_declares():
    """A parameter typed as one of the configs gets it built from the flags, a config inside a
    config too; a settings Struct gets the flags it names; errors are the configs' own."""
    from agentx.options import settings_struct

    Settings = settings_struct("settings", (First, Second))
    seen: list = []
    app = typer.Typer(rich_markup_mode=None)

    @app.command()
    @config_options(First, (Second, ("seed", "limit")), Outer)
    def run(name: str = typer.Option("n", "--name"), outer: Outer = None, second: Second = None,
            settings: Settings = None):
        seen.append((name, outer, second, settings))

    runner = CliRunner()
    res = runner.invoke(app, ["--size", "9", "--color", "blue", "--seed", "3", "--stop-at", "2.5", "--label", "x"])
    assert res.exit_code == 0, res.output
    name, outer, second, settings = seen[-1]
    assert outer == Outer(First(size=9, color="blue", seed=3), label="x") and type(outer.first.color) is str
    assert second == Second(seed=3, limit=2.5)
    assert (settings.size, settings.color, settings.limit, settings.seed) == (9, "blue", 2.5, 3)
    assert "--outer" not in runner.invoke(app, ["--help"], terminal_width=200).output
    bad = runner.invoke(app, ["--rate", "0"])  # gt: checked by the config built
    assert isinstance(bad.exception, AgentxError) and bad.exception.setting == "rate"


def test_configs_check_their_declared_bounds_and_name_the_setting():
    cases = [(dict(size=0), "size", "must be >= 1"), (dict(rate=0.0), "rate", "must be > 0"),
             (dict(rate=1.5), "rate", "must be <= 1"), (dict(color="green"), "color", "want one of red, blue")]
    for kwargs, setting, message in cases:
        with pytest.raises(AgentxError, match=message) as e:
            First(**kwargs)
        assert e.value.setting == setting
    with pytest.raises(AgentxError) as e:
        Second(limit=-1.0)
    assert e.value.setting == "stop_at"  # as its flag is named
    assert [f.name for f in declared(First)] == ["size", "rate", "color", "loud", "seed", "hidden"]


def test_bench_sim_serve_and_sim_bench_flags_are_the_configs_declarations():
    """Each config field a command takes appears once as a flag, with the declared help."""
    import typer.main

    from agentx.cli import app
    from agentx.engine.config import Deployment, EngineConfig, ServeConfig
    from agentx.replay.plan import PlanConfig
    from agentx.replay.settings import Labels, TargetConfig

    root = typer.main.get_command(app)
    commands = {"bench": root.commands["bench"], "sim serve": root.commands["sim"].commands["serve"],
                "sim bench": root.commands["sim"].commands["bench"]}
    expected = {"bench": (TargetConfig, PlanConfig, Labels), "sim serve": (EngineConfig, Deployment, ServeConfig),
                "sim bench": (Deployment,)}
    for name, command in commands.items():
        flags = {o: p for p in command.params if p.param_type_name == "option" for o in p.opts}
        for cfg in expected[name]:
            for f in declared(cfg):
                meta = f.metadata["option"]
                if not meta["cli"] or f.name in ("overhead_s",):
                    continue
                flag = meta["flag"] or "--" + f.name.replace("_", "-")
                assert flag in flags, (name, flag)
                if f.name not in ("seed", "duration", "replicas", "gpus", "model", "hardware", "speed"):  # (help per command)
                    assert flags[flag].help == meta["help"], (name, flag)
