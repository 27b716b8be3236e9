"""Hardware and model presets (data in `presets.toml`, each number with its public source)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from functools import cache
from importlib.resources import files

from agentx.errors import AgentxError


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


def hardware_names() -> list[str]:
    return list(_table()["hardware"])


def model_names() -> list[str]:
    return list(_table()["model"])
