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
    tdp_w: float = 0.0  # board power limit; 0: unknown (the sim then publishes no power)
    idle_w: float = 0.0  # draw of an idle GPU with a model loaded


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


def hardware_names() -> list[str]:
    return list(_table()["hardware"])


def model_names() -> list[str]:
    return list(_table()["model"])


def preset_tables() -> list:
    """Rich tables of the hardware and model presets with their key figures."""
    from rich.table import Table

    hw = Table("hardware", "name", "BF16 TFLOP/s", "FP8 TFLOP/s", "HBM GB", "HBM TB/s", "host link GB/s",
               title="Hardware presets (per GPU, dense)")
    for key in hardware_names():
        h = hardware(key)
        hw.add_row(key, h.name, f"{h.bf16_flops / 1e12:,.0f}", f"{h.fp8_flops / 1e12:,.0f}", f"{h.hbm_bytes / 1e9:.0f}",
                   f"{h.hbm_bw / 1e12:.2f}", f"{h.host_link_bw / 1e9:.0f}")
    models = Table("model", "name", "attention", "layers", "params total / active", "max context", "vocab",
                   title="Model presets")
    for key in model_names():
        m = model(key)
        models.add_row(key, m.name, m.attention, str(m.layers), f"{m.params_total / 1e9:.1f}B / {m.params_active / 1e9:.1f}B",
                       f"{m.max_context:,}", f"{m.vocab:,}")
    return [hw, models]
