"""Hardware and model presets (data in `presets.toml`, each number with its public source)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from functools import cache
from importlib.resources import files

from agentx.engine.profiles import engine_profile
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
    kv_transfer_bw: float = 0.0  # bytes/s per GPU between prefill and decode instances (disaggregated)
    tdp_w: float = 0.0  # board power limit; 0: unknown (the sim then publishes no power)
    idle_w: float = 0.0  # draw of an idle GPU with a model loaded

    @property
    def vendor(self) -> str:
        """amd or nvidia (the preset's name says): whose kernel libraries (CUTLASS / TensorRT-LLM or
        AITER / hipBLASLt) and graph launch path a deployment on it runs."""
        return "amd" if self.name.startswith("AMD") else "nvidia"


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
    window_layers: int = 0  # sliding-window layers (hybrid attention, engine/hybrid.py); 0: none
    sliding_window: int = 0  # tokens a sliding-window layer attends (and keeps KV for)
    fp4_scope: str = "all"  # what an FP4 checkpoint quantizes: "all" linear weights or only the "experts"
    # published speculative-decoding figures: method -> {draft_tokens, acceptance_length, source}
    spec_decode: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Drive:
    """An NVMe drive of the SSD KV tier (`engine/tiers.py`): datasheet sequential figures."""

    key: str
    name: str
    capacity_bytes: float
    read_bw: float  # bytes/s, sequential 128 KiB
    write_bw: float
    sources: dict


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


def ssd_drive(key: str) -> Drive:
    return _build(Drive, "ssd", key)


def gpu_cost(key: str) -> dict | None:
    """{"kw": kW all-in, and $/GPU-h per basis in COST_BASES} of a GPU kind; None if unknown."""
    return _table()["cost"].get(key)


@dataclass(frozen=True)
class Profile:
    """The timing constants of one deployment (engine x GPU x precision x model), each from its
    entry of presets.toml [timing.*], with where each came from."""

    key: str
    mfu: float
    mbu: float
    overhead_ms: float
    moe_efficiency: float  # routed-expert GEMMs relative to dense ones, in streaming (mbu) and FLOPs (mfu)
    kv_efficiency: float  # KV cache streaming by the attention kernels, relative to mbu, per attention kind
    roofline_norm: float  # compute and memory time combine as their p-norm (timing.overlap)
    collective_efficiency: float
    sources: dict


TIMING = ("mfu", "mbu", "overhead_ms", "moe_efficiency", "kv_efficiency", "roofline_norm")


def precision_class(precision: str, hardware_key: str) -> str:
    """fp8, bf16, fp4 (FP4 tensor cores) or fp4-weight-only (FP4 weights on a GPU without them)."""
    if precision in ("nvfp4", "mxfp4"):
        return "fp4" if hardware(hardware_key).fp4_flops else "fp4-weight-only"
    return precision


def timing_key(name: str, engine: str, hardware_key: str, precision: str, model_key: str, release: str = "") -> str:
    """The entry of constant `name` a deployment takes: MFU by precision class, MBU by GPU, the
    overhead by engine (release) and GPU vendor (each engine ships a ROCm build of its own), the MoE
    efficiency by GPU vendor and precision class (a kernel library's grouped GEMMs, not a model's:
    a model without rows takes its vendor's and format's), KV efficiency by attention kind.
    `release`: an engine release whose
    per-iteration overhead was fitted apart (vLLM 0.10, in calibration rows that ran it); TensorRT-LLM's
    own attention kernels stream the KV cache apart from the other engines' (trtllm-gqa: its
    profile's `kv_kernels`)."""
    if name == "mfu":
        return precision_class(precision, hardware_key)
    if name == "kv_efficiency":
        return engine_profile(engine).kv_efficiency_key(model(model_key).attention)  # gqa or mla
    if name == "overhead_ms":
        return engine_profile(engine).overhead_key(release, hardware(hardware_key).vendor)
    if name == "roofline_norm":
        return "all"  # one shape of the roofline's ridge for every deployment
    if name == "moe_efficiency":  # the vendor's grouped-GEMM kernels for the number format
        m = model(model_key)
        return f"{hardware(hardware_key).vendor}-{precision_class(precision, hardware_key)}" if m.experts else "dense"
    return hardware_key  # mbu


def profile(engine: str, hardware_key: str, precision: str, model_key: str, release: str = "") -> Profile:
    engine_profile(engine)  # an unknown engine: its error, before any entry is looked up
    table = _table()["timing"]
    values, sources = {}, {}
    for name in TIMING:
        key = timing_key(name, engine, hardware_key, precision, model_key, release)
        if name == "kv_efficiency" and key not in table[name]:  # no row of its own kernels for this attention kind
            key = model(model_key).attention
        entry = table[name].get(key) or table[name]["default"]
        values[name], sources[name] = entry["value"], f"{key}: {entry['source']}" if key in table[name] else \
            f"{key} has no entry, default: {entry['source']}"
    collective = table["collective_efficiency"]
    sources["collective_efficiency"] = collective["source"]
    return Profile(key=f"{engine}.{hardware_key}.{precision}", collective_efficiency=collective["value"],
                   sources=sources, **values)


def timing_entries() -> list[tuple[str, str, float, str]]:
    """(constant, key, value, source) of every entry of presets.toml [timing]."""
    table = _table()["timing"]
    out = [(name, key, e["value"], e["source"]) for name in TIMING for key, e in table[name].items()]
    c = table["collective_efficiency"]
    return out + [("collective_efficiency", "all", c["value"], c["source"])]


def hardware_names() -> list[str]:
    return list(_table()["hardware"])


def model_names() -> list[str]:
    return list(_table()["model"])


def preset_tables() -> list:
    """Rich tables of the hardware and model presets with their key figures."""
    from rich.table import Table

    hw = Table("hardware", "name", "BF16 TFLOP/s", "FP8 TFLOP/s", "FP4 TFLOP/s", "HBM GB", "HBM TB/s",
               "host link GB/s", "scale-up GB/s", "TDP / idle W", title="Hardware presets (per GPU, dense, per direction)")
    for key in hardware_names():
        h = hardware(key)
        hw.add_row(key, h.name, f"{h.bf16_flops / 1e12:,.0f}", f"{h.fp8_flops / 1e12:,.0f}",
                   f"{h.fp4_flops / 1e12:,.0f}" if h.fp4_flops else "-", f"{h.hbm_bytes / 1e9:.0f}",
                   f"{h.hbm_bw / 1e12:.2f}", f"{h.host_link_bw / 1e9:.0f}", f"{h.scale_up_bw / 1e9:.0f}",
                   f"{h.tdp_w:,.0f} / {h.idle_w:,.0f}" if h.tdp_w else "-")
    models = Table("model", "name", "attention", "layers (full KV)", "routed experts", "params total / active",
                   "max context", "vocab", title="Model presets")
    for key in model_names():
        m = model(key)
        models.add_row(key, m.name, m.attention, f"{m.layers} ({m.kv_layers or m.layers})",
                       f"{m.experts_per_token} of {m.experts}" if m.experts else "-",
                       f"{m.params_total / 1e9:.1f}B / {m.params_active / 1e9:.1f}B", f"{m.max_context:,}", f"{m.vocab:,}")
    profiles = Table("constant", "key", "value", "source", title="Timing constants (a deployment takes MFU by "
                     "precision class, MBU by GPU, overhead by engine x vendor, MoE efficiency by vendor x precision, KV "
                     "efficiency by attention kind, TensorRT-LLM's apart)")
    for name, key, value, source in timing_entries():
        profiles.add_row(name, key, f"{value:g}", source)
    drives = Table("ssd drive", "name", "TB", "read GB/s", "write GB/s", title="SSD tier drives (--ssd-drive; "
                   "a tier of --ssd-drives N has N times each figure)")
    for key in _table()["ssd"]:
        d = ssd_drive(key)
        drives.add_row(key, d.name, f"{d.capacity_bytes / 1e12:.2f}", f"{d.read_bw / 1e9:.1f}", f"{d.write_bw / 1e9:.1f}")
    return [hw, models, engine_table(), profiles, drives]


def engine_table():
    """A Rich table of each engine's own batch caps (what `--max-num-seqs` / `--max-num-batched-tokens`
    0 take), with their source."""
    from rich.table import Table

    from agentx.engine.profiles import PROFILES

    table = Table("engine", "admission", "max_num_seqs", "max_num_batched_tokens", "source",
                  title="Engines' own batch defaults (--engine; 0 in --max-num-seqs / --max-num-batched-tokens)")
    for p in PROFILES.values():
        small = p.batch_defaults(0)
        split = f" (under {p.large_gib:g} GiB: {small[0]:,} / {small[1]:,})" if small != p.batch_defaults(1e15) else ""
        table.add_row(p.name, p.admission.value, f"{p.max_num_seqs:,}", f"{p.max_num_batched_tokens:,}{split}",
                      p.defaults_source)
    return table


def source_table(key: str):
    """A Rich table of one hardware or model preset: every field with its value and source, then
    the preset's notes (sources that name no field: sizing, approximations)."""
    from rich.table import Table

    table = _table()
    section = next((name for name in ("hardware", "model", "ssd") if key in table[name]), None)
    if section is None:
        known = hardware_names() + model_names() + list(table["ssd"])
        raise AgentxError(f"unknown preset {key!r}; known: {', '.join(known)}")
    entry = table[section][key]
    sources = entry.get("sources", {})
    out = Table("field", "value", "source", title=f"{section} preset {key}: {entry['name']}")
    for name, value in entry.items():
        if name not in ("name", "sources") and not isinstance(value, dict):
            text = f"{value:g}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)
            out.add_row(name, text, sources.get(name, "-"))
    for name, note in sources.items():
        if name not in entry:
            out.add_row(name, "", note)
    return out
