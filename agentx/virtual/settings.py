"""`sim bench`'s settings: which stage declares each (`SIM_BENCH`), and the typed run they build
(`sim_bench_config`), the same from the command's flags (`agentx sim bench`) as from a capacity
plan's keys and grid (`agentx sim plan`), whose every point is a `sim bench` run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agentx.content.tokens import ContentConfig
from agentx.engine.config import Deployment, EngineConfig
from agentx.errors import AgentxError
from agentx.options import pick, read_settings, settings_struct
from agentx.replay.corpus import Corpus
from agentx.replay.plan import PlanConfig
from agentx.replay.settings import BenchSettings, Labels, TargetConfig, offline_levels, open_loop

# what `sim bench` leaves to `sim serve` (the timing model's tuning) and to bench (schedule mode)
SIM_BENCH_SKIPS = ("block_size", "num_gpu_blocks_override", "mfu", "mbu", "overhead_s", "moe_efficiency",
                   "kv_efficiency", "roofline_norm", "host_link_efficiency", "host_links", "mode", "time_scale",
                   "warmup_seconds")
CORPUS_SETTINGS = ("format", "max_context", "scenario", "range_ratio", "offline")
# the configs whose declared settings `sim bench` takes (of a pair, those names only)
SIM_BENCH = (EngineConfig, Deployment, PlanConfig, ContentConfig, (TargetConfig, ("grace", "hints")),
             (Labels, ("cost_basis", "agreement")), (Corpus, CORPUS_SETTINGS))


def sim_bench_struct(listed: bool = False):
    """The Struct a file's `sim bench` settings decode into (`listed`: a plan's grid, lists of them)."""
    return settings_struct("grid" if listed else "settings", SIM_BENCH, skip=SIM_BENCH_SKIPS + ("concurrency",),
                           listed=listed)


MAX_SETTINGS_FILE = 1 << 20


def read_settings_file(path: Path) -> dict:
    """A YAML mapping of `sim bench` settings by name (`sim bench --settings`; a plan's top keys),
    typed as declared; bad input is one line naming the file and the key."""
    import yaml

    from agentx.userfiles import read_bounded

    try:
        data = yaml.safe_load(read_bounded(Path(path), MAX_SETTINGS_FILE).decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise AgentxError(f"{path}: not a YAML mapping ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise AgentxError(f"{path}: want a YAML mapping of settings by name (duration: 600, engine: trtllm, ...)")
    return read_settings(yaml_off(data), sim_bench_struct(), str(path))


def yaml_off(settings: dict) -> dict:
    """YAML reads a bare `off` as false: window_retention's `off` (alone or in a grid's list)."""
    value = settings.get("window_retention")
    if value is False or (isinstance(value, list) and False in value):
        fix = (lambda v: "off" if v is False else v)  # noqa: E731
        settings = {**settings, "window_retention": [fix(v) for v in value] if isinstance(value, list) else "off"}
    return settings


@dataclass(frozen=True)
class SimBench:
    """One `sim bench` run, typed: the deployment simulated, how it is replayed, on which sessions,
    at which concurrency levels."""

    deployment: Deployment
    settings: BenchSettings
    corpus: Corpus
    levels: tuple[int, ...]


def sim_bench_config(values: dict, levels: list[int], traces: tuple = (), slo: tuple = (),
                     warn: Callable[[str], None] | None = None, base: Path | None = None) -> SimBench:
    """The run of flat settings (`values`: any of SIM_BENCH's, by name; the rest take their declared
    defaults), the trace paths (none: the bundled sample), the goodput objectives."""
    values = dict(values)
    corpus = Corpus(tuple(traces), base=base, **pick(Corpus, {k: values.pop(k) for k in CORPUS_SETTINGS if k in values}))
    levels = offline_levels(corpus, values) or list(levels)
    engine = pick(EngineConfig, values)
    deployment = {k: v for k, v in pick(Deployment, values).items() if k != "engine"}  # (its `engine`: the config)
    sim = Deployment(EngineConfig(**engine), **deployment)
    if warn and sim.prefill_route == "tool" and values.get("hints", TargetConfig.hints) == "none":
        warn("--prefill-route tool reads the harness hints and --hints none sends none: every prompt prefills "
             "on the decode workers (add --hints harness)")
    bench = {"mode": "lanes", **{k: v for k, v in values.items() if k not in engine and k not in deployment}}
    schedule = open_loop(bench, levels)  # --request-rate: an open loop
    settings = BenchSettings.build(url="virtual", concurrency=levels[0], seed=values.get("seed", PlanConfig.seed),
                                   **{**bench, "warmup": bench.get("warmup", PlanConfig.warmup) and not schedule,
                                      "slo": tuple(slo)}, **corpus.labels)
    return SimBench(sim, settings, corpus, tuple(levels))
