"""The calibration table (`calibration.toml`): published points, decoded into typed rows, and the
simulated deployment each row maps to."""

from __future__ import annotations

import hashlib
from dataclasses import replace
import tomllib
from functools import cache
from importlib.resources import files
from typing import Annotated

import msgspec

from agentx.engine.config import PRECISIONS, EngineConfig
from agentx.engine import presets
from agentx.engine.profiles import ENGINES
from agentx.errors import AgentxError

TABLE = "agentx/engine/calibration.toml"
Positive = Annotated[float, msgspec.Meta(gt=0, le=1e9)]
Count = Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]
Short = Annotated[str, msgspec.Meta(max_length=200)]


class Source(msgspec.Struct, forbid_unknown_fields=True):
    repo: Short
    path: Short
    commit: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{40}$")]


class Row(msgspec.Struct, forbid_unknown_fields=True):
    id: Short
    source: Short
    hardware: Short
    engine: Short
    engine_image: Short
    model: Short
    precision: Short
    isl: Count
    osl: Count
    concurrency: Count
    tok_s_per_gpu: Positive
    date: Short
    tp_candidates: list[Count]
    parallelism_source: Short
    # the candidates of tp_candidates that run with expert parallelism (EP = TP), as the recipe's
    # search space lists them (`ep` below: every candidate)
    ep_tps: list[Count] = []
    # the recipe's batch cap (vLLM --max-num-seqs, SGLang --max-running-requests); None: the script
    # leaves it unset and the engine's own limit does not bind at the row's concurrency
    ttft_ms_p50: Positive | None = None
    tpot_ms_p50: Positive | None = None
    range_ratio: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.8
    max_num_seqs: Count | None = None
    ep: int = 0
    attention_dp: bool = False
    modeled: bool = True
    # the release whose per-iteration overhead the row fits apart (presets.timing_key): "0.10" for
    # the vLLM 0.10.1 / 0.10.2 images; "" for the engine's current entry
    engine_release: Annotated[str, msgspec.Meta(pattern="^(|0\\.10)$")] = ""
    why_not: Short = ""
    # the engine settings of the run's launch script (`recipe`, in `recipe_source`: InferenceX's
    # benchmarks/ at the last commit of the row's date):
    # the step token budget, the KV cache precision, and the memory given to weights + KV
    # (vLLM's --gpu-memory-utilization, SGLang's --mem-fraction-static: a share of all HBM) or to
    # KV alone (TensorRT-LLM's free_gpu_memory_fraction: a share of what the weights leave)
    recipe_source: Short = ""
    recipe: Short = ""
    max_num_batched_tokens: Count = 8192
    kv_cache_dtype: Annotated[str, msgspec.Meta(pattern="^(auto|bf16|fp8)$")] = "auto"
    gpu_memory_utilization: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.9
    kv_free_fraction: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None

    @property
    def group(self) -> str:
        return f"{self.hardware} x {self.engine}"

    @property
    def scenario(self) -> str:
        return f"{self.isl}:{self.osl}"

    @property
    def moe(self) -> bool:
        return bool(presets.model(self.model).experts)

    @property
    def held_out(self) -> bool:
        """In the held-out third (HELD_OUT_RULE): never fitted on, scored with the shipped constants."""
        return held_out_id(self.id)


# The held-out third, chosen by the row id alone before any fitting (calibration.toml's header):
HELD_OUT_RULE = "sha256(row id) as a hexadecimal integer, modulo 3, is 0"


def held_out_id(row_id: str) -> bool:
    return int(hashlib.sha256(row_id.encode()).hexdigest(), 16) % 3 == 0


class Table(msgspec.Struct):
    sources: dict[str, Source]
    row: list[Row]


@cache
def load_table() -> Table:
    """The shipped table, checked: every row's source known, engine / precision / hardware valid."""
    raw = tomllib.loads(files("agentx.engine").joinpath("calibration.toml").read_text())
    try:
        table = msgspec.convert(raw, Table)
    except msgspec.ValidationError as e:
        raise AgentxError(f"{TABLE}: {e}") from None
    for i, row in enumerate(table.row):
        where = f"{TABLE}: row {i + 1} ({row.id})"
        for field, value, known in (("source", row.source, table.sources), ("parallelism_source",
                                    row.parallelism_source, table.sources), ("engine", row.engine, ENGINES),
                                    ("precision", row.precision, PRECISIONS),
                                    ("hardware", row.hardware, presets.hardware_names()),
                                    ("model", row.model, presets.model_names())):
            if value not in known:
                raise AgentxError(f"{where}: {field} {value!r} unknown")
        if row.recipe and row.recipe_source not in table.sources:
            raise AgentxError(f"{where}: recipe_source {row.recipe_source!r} unknown")
        if row.modeled and not row.tp_candidates:
            raise AgentxError(f"{where}: tp_candidates: a modeled row needs at least one")
    return table


def parallelism(row: Row, tp: int) -> str:
    return "dep" if row.attention_dp else ("tep" if row.ep > 1 or tp in row.ep_tps else "tp")


def implied_gpus(row: Row) -> float | None:
    """The GPU count the published figures imply (Little's law; no model involved): requests
    spend TTFT waiting or prefilling and OSL x TPOT decoding, so C x OSL TPOT / (TTFT + OSL TPOT)
    of the C clients decode at once, each emitting 1 / TPOT tokens; total throughput is that times
    (ISL + OSL) / OSL, and the page divides it by the GPU count."""
    if not (row.ttft_ms_p50 and row.tpot_ms_p50):
        return None
    mean = (1 + row.range_ratio) / 2
    isl, osl, tpot, ttft = row.isl * mean, row.osl * mean, row.tpot_ms_p50 / 1000, row.ttft_ms_p50 / 1000
    decoding = row.concurrency * osl * tpot / (ttft + osl * tpot)
    return decoding * (isl + osl) / osl / tpot / row.tok_s_per_gpu


def tp_choice(row: Row) -> list[int]:
    """TP candidates in the order tried: from the smallest (the recipe's sweep; the page publishes the
    configuration of highest throughput per GPU, which at a fixed concurrency is the fewest GPUs
    whose weights and batch fit). Never chosen from the row's published figures."""
    return sorted(row.tp_candidates)


def row_engine(row: Row, **timing) -> EngineConfig:
    """The deployment a row runs on: the TP of `tp_choice` (the first whose weights fit), the
    recipe's batch cap where it sets one (`max_num_seqs`), else the engine's own (its profile:
    vLLM 1,024, SGLang 2,048, TensorRT-LLM 2,048, ATOM 512, none binding at the rows'
    concurrency), and the recipe's token budget, KV precision and memory split."""
    from agentx.engine.timing import Roofline

    problems = []
    for tp in tp_choice(row):
        cfg = EngineConfig(hardware=row.hardware, model=row.model, gpus=tp, precision=row.precision,
                           engine=row.engine, engine_version=row.engine_release, parallelism=parallelism(row, tp),
                           max_num_seqs=row.max_num_seqs or 0,
                           max_num_batched_tokens=row.max_num_batched_tokens, kv_cache_dtype=row.kv_cache_dtype,
                           gpu_memory_utilization=1.0 if row.kv_free_fraction else row.gpu_memory_utilization,
                           **timing)
        try:
            roof = Roofline(cfg)
        except AgentxError as e:
            problems.append(str(e))
            continue
        if row.kv_free_fraction:  # KV gets this share of the memory the weights leave
            blocks = int(roof.kv_capacity_tokens * row.kv_free_fraction) // cfg.block_size
            cfg = replace(cfg, num_gpu_blocks_override=blocks)
        return cfg
    raise AgentxError(f"{TABLE}: {row.id}: no TP candidate fits ({'; '.join(problems)})")
