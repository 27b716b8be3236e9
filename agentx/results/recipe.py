"""Sweep recipes (YAML): deployments, each with one target (a running server's `url`, a `command`
that starts one, or `sim` options of the simulated engine) and the labels of its points, plus the
dataset and the matrix of points (concurrency list, duration, seed). SPEC §8 has the format."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import msgspec

from agentx.errors import AgentxError

Scalar = str | int | float | bool


class Labels(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    model: str | None = None
    hardware: str | None = None
    gpus: int | None = None
    engine: str | None = None
    engine_version: str | None = None
    precision: str | None = None
    parallelism: str | None = None
    spec_decoding: str | None = None
    kv_offload: str | None = None
    router: str | None = None
    engine_settings: str | None = None  # what else sets the deployment apart (e.g. gpu_memory_utilization=0.9)


class Deployment(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: str
    labels: Labels = msgspec.field(default_factory=Labels)
    url: str | None = None  # with `command`: where it listens ({port} is the port agentx chose)
    command: str | None = None  # a shell command; {port} is replaced by a free loopback port
    sim: dict[str, Scalar] | None = None  # flags of `agentx sim serve` (speed, hardware, gpus, ...)
    health_timeout: float = 120.0
    clock_scale: float | None = None  # default: the sim's speed for `sim`, else 1

    @property
    def kind(self) -> str:
        return "url" if self.command is None and self.sim is None else "command" if self.sim is None else "sim"


class Dataset(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    traces: list[str] | None = None  # files or folders (relative to the recipe); default: the bundled sample
    scenario: str | None = None  # 1k1k, 8k1k or 1k8k instead of traces
    max_context: str | None = None


class Recipe(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: str
    deployments: list[Deployment]
    concurrency: list[int]
    duration: float
    dataset: Dataset = msgspec.field(default_factory=Dataset)
    seed: int = 0
    bench: dict[str, Scalar | list[int]] = {}  # other `agentx bench` settings: warmup_requests_per_lane, grace, ...


# settings a recipe sets through its own keys, not through `bench:`
_OWN = {"url", "concurrency", "duration", "out", "seed", "gpus", "hardware", "engine", "model", "dataset",
        "variant", "scenario", "clock_scale"}


def load_recipe(path: Path) -> Recipe:
    import yaml

    if not path.is_file():
        raise AgentxError(f"{path}: no such recipe file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise AgentxError(f"{path}: not YAML ({str(e).splitlines()[0]})") from None
    try:
        recipe = msgspec.convert(data, Recipe)
    except msgspec.ValidationError as e:
        raise AgentxError(f"{path}: {e}") from None
    _check(recipe, path)
    return recipe


def _check(recipe: Recipe, path: Path) -> None:
    from agentx.replay.settings import BenchSettings

    if not recipe.deployments:
        raise AgentxError(f"{path}: deployments: want at least one")
    if not recipe.concurrency or min(recipe.concurrency) < 1:
        raise AgentxError(f"{path}: concurrency: want a list of positive integers")
    if recipe.duration <= 0:
        raise AgentxError(f"{path}: duration: want > 0")
    names = [d.name for d in recipe.deployments]
    for i, d in enumerate(recipe.deployments):
        where = f"{path}: deployments[{i}] ({d.name})"
        if not d.name or "/" in d.name or d.name.startswith("."):
            raise AgentxError(f"{where}: name: want a plain folder name")
        if d.name in names[:i]:
            raise AgentxError(f"{where}: name: used twice")
        targets = [k for k in ("command", "sim") if getattr(d, k) is not None]
        if len(targets) > 1:
            raise AgentxError(f"{where}: want one target of url, command or sim, got {' and '.join(targets)}")
        if not targets and d.url is None:
            raise AgentxError(f"{where}: want a target: url, command or sim")
        if d.sim is not None and d.url is not None:
            raise AgentxError(f"{where}: url: not with sim (agentx chooses its address)")
    allowed = set(BenchSettings.build(url="", concurrency=1, duration=1.0).flat()) - _OWN
    for key in recipe.bench:
        if key not in allowed:
            raise AgentxError(f"{path}: bench.{key}: unknown setting (want one of {', '.join(sorted(allowed))})")


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(msgspec.to_builtins(obj), sort_keys=True).encode()).hexdigest()


def recipe_fingerprint(recipe: Recipe) -> str:
    return _digest(recipe)


def point_fingerprint(recipe: Recipe, deployment: Deployment, concurrency: int) -> str:
    """What makes a point the same point: its deployment, dataset, duration, seed, settings, concurrency."""
    return _digest({"deployment": deployment, "dataset": recipe.dataset, "duration": recipe.duration,
                    "seed": recipe.seed, "bench": recipe.bench, "concurrency": concurrency})
