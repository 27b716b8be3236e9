"""Sweep recipes (YAML): deployments, each with one target (a running server's `url`, a `command`
that starts one, or `sim` options of the simulated engine) and the labels of its points, plus the
dataset and the matrix of points (concurrency list, duration, seed). SPEC §8 has the format.

A recipe is decoded into these bounded Structs, its `bench:` settings typed like the `agentx
bench` options they set (from the stage configs' own field types), before anything runs or is
written: an error names the recipe's key (`deployments[0].name`, `bench.grace`), never a flag.
Names that become folders are plain (letters, digits, `._-`, at most 100, no leading dot).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated

import msgspec

from agentx.errors import AgentxError
from agentx.options import error_key, read_settings, settings_struct
from agentx.userfiles import read_bounded, shown

MAX_RECIPE = 1 << 20
MAX_NESTING = 64
MAX_LANES = 100_000
MAX_DURATION = 1e6  # s of profiling per point (11.6 days)
PlainName = Annotated[str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")]


def _text(n: int):
    return Annotated[str, msgspec.Meta(max_length=n, pattern=r"^[^\x00]*$")]


Number = Annotated[float, msgspec.Meta(ge=-1e12, le=1e12)]
Whole = Annotated[int, msgspec.Meta(ge=-(10**12), le=10**12)]
Scalar = _text(1000) | bool | Whole | Number


class Labels(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    model: _text(200) | None = None
    hardware: _text(100) | None = None
    gpus: Annotated[int, msgspec.Meta(ge=1, le=100_000)] | None = None
    engine: _text(100) | None = None
    engine_version: _text(100) | None = None
    precision: _text(50) | None = None
    parallelism: _text(100) | None = None
    spec_decoding: _text(100) | None = None
    kv_offload: _text(100) | None = None
    router: _text(100) | None = None
    engine_settings: _text(300) | None = None  # what else sets the deployment apart (e.g. gpu_memory_utilization=0.9)


SimFlag = Annotated[str, msgspec.Meta(max_length=50, pattern=r"^[a-z][a-z0-9_]*$")]


class Deployment(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: PlainName
    labels: Labels = msgspec.field(default_factory=Labels)
    url: Annotated[str, msgspec.Meta(max_length=2048, pattern=r"^https?://[^\s\x00]+$")] | None = None
    command: _text(10_000) | None = None  # a shell command; {port} is replaced by a free loopback port
    sim: Annotated[dict[SimFlag, Scalar], msgspec.Meta(max_length=100)] | None = None  # `agentx sim serve` flags
    health_timeout: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 120.0
    clock_scale: Annotated[float, msgspec.Meta(gt=0, le=10_000)] | None = None  # default: the sim's speed, else 1

    @property
    def kind(self) -> str:
        return "url" if self.command is None and self.sim is None else "command" if self.sim is None else "sim"


class Dataset(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    traces: Annotated[list[_text(4096)], msgspec.Meta(max_length=10_000)] | None = None  # relative to the recipe
    scenario: _text(20) | None = None  # 1k1k, 8k1k or 1k8k instead of traces
    max_context: _text(20) | None = None


class Recipe(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: PlainName
    deployments: Annotated[list[Deployment], msgspec.Meta(min_length=1, max_length=1000)]
    concurrency: Annotated[list[Annotated[int, msgspec.Meta(ge=1, le=MAX_LANES)]], msgspec.Meta(min_length=1,
                                                                                               max_length=100)]
    duration: Annotated[float, msgspec.Meta(gt=0, le=MAX_DURATION)]
    dataset: Dataset = msgspec.field(default_factory=Dataset)
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] = 0
    bench: dict[_text(100), Scalar | list[Whole]] = {}  # other `agentx bench` settings: warmup_requests_per_lane, ...


# settings a recipe sets through its own keys, not through `bench:`
_OWN = {"url", "concurrency", "duration", "out", "seed", "gpus", "hardware", "engine", "model", "dataset",
        "variant", "scenario", "clock_scale", "run_id", "lead"}


def load_recipe(path: Path) -> Recipe:
    data = _yaml(path, read_bounded(path, MAX_RECIPE))
    try:
        recipe = msgspec.convert(data, Recipe)
    except msgspec.ValidationError as e:
        raise AgentxError(f"{shown(path)}: {error_key(e)}") from None
    _check(recipe, path)
    return recipe


def _yaml(path: Path, data: bytes):
    import yaml

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AgentxError(f"{shown(path)}: not UTF-8 text (byte {e.start}): a recipe is YAML") from None
    if "\x00" in text:
        raise AgentxError(f"{shown(path)}: a NUL character (not YAML text)")
    if _flow_depth(text) > MAX_NESTING:  # PyYAML takes minutes on 100k nested brackets
        raise AgentxError(f"{shown(path)}: YAML nested too deeply (over {MAX_NESTING} levels of [ or {{)")
    try:  # aliases would let a small file expand into a huge document (and checking it, exponential time)
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise AgentxError(f"{shown(path)}: YAML aliases (*name) are not allowed in a recipe")
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AgentxError(f"{shown(path)}: not YAML ({str(e).splitlines()[0]})") from None
    except RecursionError:
        raise AgentxError(f"{shown(path)}: YAML nested too deeply") from None
    try:  # YAML's "\ud800" escapes make strings that are not Unicode text (lone surrogates)
        json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        raise AgentxError(f"{shown(path)}: a string with a lone surrogate (not Unicode text)") from None
    except (TypeError, ValueError):
        pass  # not JSON-like: the Structs say what is wrong
    return data


def _flow_depth(text: str) -> int:
    """The deepest nesting of [ and { outside quoted strings (comments count: an overestimate)."""
    import re

    import numpy as np

    bare = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', "", text).encode("utf-8", "replace")
    codes = np.frombuffer(bare, dtype=np.uint8)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int32) - np.isin(codes, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def bench_type() -> type:
    """The Struct of a recipe's `bench:` mapping, from the bench stages' config fields."""
    from agentx.content.tokens import ContentConfig
    from agentx.replay.plan import PlanConfig
    from agentx.replay.settings import Labels as BenchLabels, TargetConfig

    return settings_struct("bench", (TargetConfig, PlanConfig, ContentConfig, BenchLabels), skip=_OWN)


def bench_options(recipe: Recipe, path: Path) -> dict:
    """The recipe's `bench:` settings, typed and bounded like the `agentx bench` options."""
    options = read_settings(recipe.bench, bench_type(), shown(path), "bench.")
    low, high = options.get("token_range", (0, 1))
    if not low < high:
        raise AgentxError(f"{shown(path)}: bench.token_range: want [LO, HI] with LO < HI, got [{low}, {high}]")
    return options


def _check(recipe: Recipe, path: Path) -> None:
    from agentx.replay.scenarios import SCENARIOS
    from agentx.replay.settings import BenchSettings
    from agentx.traces.variants import parse_tokens

    names = [d.name for d in recipe.deployments]
    for i, d in enumerate(recipe.deployments):
        where = f"{shown(path)}: deployments[{i}] ({d.name})"
        if d.name in names[:i]:
            raise AgentxError(f"{where}: name: used twice")
        targets = [k for k in ("command", "sim") if getattr(d, k) is not None]
        if len(targets) > 1:
            raise AgentxError(f"{where}: want one target of url, command or sim, got {' and '.join(targets)}")
        if not targets and d.url is None:
            raise AgentxError(f"{where}: want a target: url, command or sim")
        if d.sim is not None and d.url is not None:
            raise AgentxError(f"{where}: url: not with sim (agentx chooses its address)")
        if d.command is not None and "{port}" not in d.command and (d.url is None or "{port}" in d.url):
            raise AgentxError(f"{where}: command: want {{port}} in it (the free port agentx chose for the server), "
                              "or a url where it listens")
        for key, kind in (("gpus", int), ("speed", (int, float)), ("hardware", str)):
            value = (d.sim or {}).get(key)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)
                                      or (kind is not str and not 0 < value <= 1e5)):
                raise AgentxError(f"{where}: sim.{key}: want {'a name' if kind is str else 'a number in (0, 1e5]'}, "
                                  f"got {value!r}")
    ds = recipe.dataset
    if ds.scenario is not None and ds.scenario not in SCENARIOS:
        raise AgentxError(f"{shown(path)}: dataset.scenario: want one of {', '.join(SCENARIOS)}, got {ds.scenario!r}")
    if ds.max_context is not None:
        try:
            parse_tokens(ds.max_context)
        except AgentxError as e:
            raise AgentxError(f"{shown(path)}: dataset.max_context: {e.message}") from None
    options = bench_options(recipe, path)
    try:
        BenchSettings.build(url="http://127.0.0.1:1", concurrency=1, duration=1.0, **options)
    except AgentxError as e:
        raise AgentxError(f"{shown(path)}: bench.{e.setting or ''}: {e.message}") from None


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(msgspec.to_builtins(obj), sort_keys=True).encode()).hexdigest()


def recipe_fingerprint(recipe: Recipe) -> str:
    return _digest(recipe)


def point_fingerprint(recipe: Recipe, deployment: Deployment, concurrency: int) -> str:
    """What makes a point the same point: its deployment, dataset, duration, seed, settings, concurrency."""
    return _digest({"deployment": deployment, "dataset": recipe.dataset, "duration": recipe.duration,
                    "seed": recipe.seed, "bench": recipe.bench, "concurrency": concurrency})
