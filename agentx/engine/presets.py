"""Hardware and model presets (data in `presets.toml`, each number with its public source)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from functools import cache
from importlib.resources import files

from agentx.errors import AgentxError


COST_BASES = ("hyperscaler", "neocloud", "rental_3y")  # the prices of a GPU in `[cost]`


@dataclass(frozen=True)
class Hardware:
    key: str
    name: str
    bf16_flops: float  # dense peak, per GPU
    fp8_flops: float
    hbm_bytes: float
    hbm_bw: float  # bytes/s
    host_link_bw: float  # bytes/s per direction, GPU <-> host DRAM
    host_dram_bytes: float  # per GPU
    sources: dict
    fp4_flops: float = 0.0  # dense FP4 (NVFP4 / MXFP4); 0: no FP4 tensor cores
    scale_up_bw: float = 0.0  # bytes/s per direction per GPU over NVLink / Infinity Fabric


@dataclass(frozen=True)
class Model:
    key: str
    name: str
    attention: str  # "gqa" or "mla"
    layers: int
    hidden: int
    heads: int
    head_dim: int
    params_total: float
    params_active: float
    max_context: int
    vocab: int
    sources: dict
    kv_heads: int = 0  # gqa
    kv_lora_rank: int = 0  # mla
    qk_rope_head_dim: int = 0  # mla
    experts: int = 0  # MoE: routed experts, 0 for dense
    experts_per_token: int = 0
    kv_layers: int = 0  # layers that keep KV for the whole context (0: all; sliding-window layers excluded)
    fp4_scope: str = "all"  # what an FP4 checkpoint quantizes: "all" linear weights or only the "experts"
    # published speculative-decoding figures: method -> {draft_tokens, acceptance_length, source}
    spec_decode: dict = field(default_factory=dict)


@cache
def _table() -> dict:
    return tomllib.loads(files("agentx.engine").joinpath("presets.toml").read_text())


def _build(cls, section: str, key: str):
    table = _table()[section]
    if key not in table:
        raise AgentxError(f"unknown {section} preset {key!r}; known: {', '.join(sorted(table))}")
    known = {f.name for f in fields(cls)}
    return cls(key=key, **{k: v for k, v in table[key].items() if k in known})


def hardware(key: str) -> Hardware:
    return _build(Hardware, "hardware", key)


def model(key: str) -> Model:
    return _build(Model, "model", key)


def gpu_cost(key: str) -> dict | None:
    """{"kw": kW all-in, and $/GPU-h per basis in COST_BASES} of a GPU kind; None if unknown."""
    return _table()["cost"].get(key)


@dataclass(frozen=True)
class Profile:
    """Timing constants of one engine on one GPU kind (and precision), with where they come from."""

    key: str
    mfu: float
    mbu: float
    overhead_ms: float
    collective_efficiency: float
    source: str
    collective_source: str


ENGINES = ("vllm", "sglang", "trtllm", "atom")


def profile(engine: str, hardware_key: str, precision: str) -> Profile:
    """The most specific of `engine.hardware.precision`, `engine.hardware`, `engine`."""
    if engine not in ENGINES:
        raise AgentxError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    table = _table()["profile"]
    base = table[engine]
    for key in (f"{engine}.{hardware_key}.{precision}", f"{engine}.{hardware_key}", engine):
        if key in table:
            merged = {**{k: v for k, v in base.items() if not isinstance(v, dict)}, **table[key]}
            return Profile(key=key, **{f.name: merged[f.name] for f in fields(Profile) if f.name != "key"})
    raise AssertionError("unreachable")


def profile_keys() -> list[str]:
    return [k for k in _table()["profile"]]


def hardware_names() -> list[str]:
    return list(_table()["hardware"])


def model_names() -> list[str]:
    return list(_table()["model"])


def preset_tables() -> list:
    """Rich tables of the hardware and model presets with their key figures."""
    from rich.table import Table

    hw = Table("hardware", "name", "BF16 TFLOP/s", "FP8 TFLOP/s", "FP4 TFLOP/s", "HBM GB", "HBM TB/s",
               "host link GB/s", "scale-up GB/s", title="Hardware presets (per GPU, dense, per direction)")
    for key in hardware_names():
        h = hardware(key)
        hw.add_row(key, h.name, f"{h.bf16_flops / 1e12:,.0f}", f"{h.fp8_flops / 1e12:,.0f}",
                   f"{h.fp4_flops / 1e12:,.0f}" if h.fp4_flops else "-", f"{h.hbm_bytes / 1e9:.0f}",
                   f"{h.hbm_bw / 1e12:.2f}", f"{h.host_link_bw / 1e9:.0f}", f"{h.scale_up_bw / 1e9:.0f}")
    models = Table("model", "name", "attention", "layers", "params total / active", "max context", "vocab",
                   title="Model presets")
    for key in model_names():
        m = model(key)
        models.add_row(key, m.name, m.attention, str(m.layers), f"{m.params_total / 1e9:.1f}B / {m.params_active / 1e9:.1f}B",
                       f"{m.max_context:,}", f"{m.vocab:,}")
    profiles = Table("profile", "MFU", "MBU", "overhead ms", "collective eff.", "source",
                     title="Engine timing profiles (engine[.hardware[.precision]])")
    for key in profile_keys():
        engine, _, rest = key.partition(".")
        hw_key, _, precision = rest.partition(".")
        p = profile(engine, hw_key, precision)
        profiles.add_row(key, f"{p.mfu:g}", f"{p.mbu:g}", f"{p.overhead_ms:g}", f"{p.collective_efficiency:g}",
                         p.source + ("" if rest else f"; collectives: {p.collective_source}"))
    return [hw, models, profiles]
