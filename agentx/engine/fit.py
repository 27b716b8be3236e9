"""Fitting the engine timing constants on the calibration table (closed-form steady state).

The constants are factored so that each is shared by many rows (each row's steady state pins
only one number, its iteration time, so per-row constants would fit anything and predict nothing):

- MFU per precision class (fp8; fp4 on FP4 tensor cores; fp4 weight-only elsewhere): GEMM
  efficiency is a property of the kernels of a number format;
- MBU per GPU kind: how much of the datasheet HBM bandwidth streams in practice;
- the per-iteration overhead per engine and GPU vendor (scheduler, launches, sampling, collective
  latency; the ROCm builds apart), and apart for an engine release whose rows show it (vLLM 0.10);
- the MoE efficiency per GPU vendor and precision class (routed-expert grouped GEMMs, of few
  tokens per expert, stream their weights and run their FLOPs below the dense GEMMs' rates: a
  property of the vendor's kernel library for the format, so a model without rows takes it);
- the KV efficiency per attention kind (gqa, mla: how well the attention kernels stream the
  paged KV cache, relative to MBU), TensorRT-LLM's kernels apart from the others'.

They minimize the squared log error of throughput per GPU and TPOT of `steady_state` over the
rows plus a log-normal prior per entry (`PRIORS`, each with its source; coordinate descent over
grids). `held_out` refits everything without each row in turn
(leave one out; or without its whole hardware x engine group): what `agentx sim calibrate`
reports, so that no row is predicted from its own figures. `tools/fit_profiles.py` prints the
constants fitted on every row (shipped in presets.toml). The steady state's batch and work (two
iteration kinds, decode-only and mixed) do not depend on the constants, so each row is reduced
once to its roofline terms per kind.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentx.engine import presets
from agentx.engine.calibration import Row, row_engine
from agentx.engine.steady import Steady, steady_mix, steady_state
from agentx.engine.timing import Roofline, overlap

GRIDS = {"mfu": np.arange(0.05, 0.951, 0.05), "mbu": np.arange(0.30, 1.001, 0.05),
         "overhead_ms": np.array([0.5, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40], dtype=float),
         "moe_efficiency": np.arange(0.20, 1.001, 0.05), "kv_efficiency": np.arange(0.10, 1.001, 0.05),
         "roofline_norm": np.array([1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0])}
SWEEPS = 6


@dataclass(frozen=True)
class Prior:
    """Where a constant should sit before any calibration row is seen: a log-normal prior (the fit
    adds ((ln v - ln value) / sigma)^2 per entry to the rows' (ln error / SIGMA_ROW)^2, so an entry
    with few rows stays near its prior and none runs to a grid edge unless its rows insist)."""

    value: float
    sigma: float  # of ln v
    source: str


PRIORS = {
    "mfu": Prior(0.6, 0.35, "dense GEMMs of large batches reach 60-70 % of the dense tensor peak (NVIDIA H100 / "
                 "B200 cuBLAS FP8 and AMD MI300X hipBLASLt FP8 GEMM benchmarks as InferenceX-era engines ship them); "
                 "a whole iteration with attention, norms and activations below that"),
    "mbu": Prior(0.8, 0.2, "streaming kernels reach about 80 % of the datasheet HBM bandwidth (STREAM-like copy "
                 "measurements: ~3.0 of 3.35 TB/s on H100 SXM, ~4.0-4.3 of 5.3 TB/s on MI300X)"),
    "overhead_ms": Prior(5.0, 0.8, "per-iteration CPU work of a Python scheduler (scheduling, input preparation, "
                         "sampling, detokenization) with CUDA / HIP graphs: a few ms per step in vLLM V1's and "
                         "SGLang's own profiles; wide (x / 2.2 at one sigma)"),
    "moe_efficiency": Prior(0.7, 0.35, "grouped GEMMs over few tokens per expert run below dense GEMMs (TensorRT-LLM "
                            "tech blog 24, 'MoE as dense GEMM'; 60-80 % at decode batch sizes)"),
    "kv_efficiency": Prior(0.7, 0.4, "paged attention kernels stream the KV cache below a GEMM's weight streaming "
                           "(FlashInfer / FlashAttention decode kernels: 60-85 % of HBM bandwidth at long contexts)"),
    "roofline_norm": Prior(2.5, 0.4, "compute and memory of one kernel overlap only in part near the ridge point "
                           "(a p-norm between the sum, p = 1, and the max, p -> infinity)"),
}
START = {n: p.value for n, p in PRIORS.items()}


# the scatter of a row's log error the model leaves (about twice the +-15 % band: chosen over 0.08 and
# 0.15 for the better leave-one-group-out and held-out shares): the rows' squared log errors
# are divided by its square, so a prior one sigma off weighs as much as one row 30 % off
SIGMA_ROW = 0.3


def prior_penalty(name: str, value: float) -> float:
    p = PRIORS[name]
    return float((np.log(value / p.value) / p.sigma) ** 2) * SIGMA_ROW ** 2


def key_of(name: str, row: Row) -> str:
    """Which entry of constant `name` a row uses (presets.toml [timing.NAME])."""
    return presets.timing_key(name, row.engine, row.hardware, row.precision, row.model, row.engine_release)


@dataclass
class PhaseTerms:
    """One kind of iteration at unit efficiencies: time = max((compute + compute_experts / moe) /
    mfu, (dense + experts / moe + kv / kv_efficiency) / mbu) + collectives + overhead."""

    share: float
    compute: float
    compute_experts: float
    dense: float
    experts: float
    kv: float
    collective: float

    def step(self, c: dict) -> float:
        memory = (self.dense + self.experts / c["moe_efficiency"] + self.kv / c["kv_efficiency"]) / c["mbu"]
        compute = (self.compute + self.compute_experts / c["moe_efficiency"]) / c["mfu"]
        return overlap(compute, memory, c["roofline_norm"]) + self.collective + c["overhead_ms"] / 1000


@dataclass
class Terms:
    """A row's steady state: the mean iteration over its kinds; throughput per GPU = k / it."""

    phases: list[PhaseTerms]
    k: float
    tok_s: float
    tpot: float | None

    @property
    def experts(self) -> float:
        return sum(p.experts for p in self.phases)

    def step(self, c: dict) -> float:
        return sum(p.share * p.step(c) for p in self.phases)

    def loss(self, c: dict) -> float:
        step = self.step(c)
        return float(np.log(self.k / step / self.tok_s) ** 2 + (np.log(step / self.tpot) ** 2 if self.tpot else 0))


def phase_terms(roof: Roofline, share: float, work) -> PhaseTerms:
    roof.mfu = roof.mbu = roof.moe_eff = roof.kv_eff = 1.0
    compute, memory = roof.compute_s(work), roof.memory_s(work)
    weights = roof.weight_bytes_per_gpu(work.new_tokens)
    roof.moe_eff = 0.5
    experts = (roof.weight_bytes_per_gpu(work.new_tokens) - weights) / roof.hw.hbm_bw  # experts / 0.5 - experts
    compute_experts = roof.compute_s(work) - compute
    kv = roof.kv_bytes(work) / roof.hw.hbm_bw
    return PhaseTerms(share, compute - compute_experts, compute_experts, memory - experts - kv, experts, kv, roof.collective_s(work.new_tokens))


def terms(row: Row) -> Terms:
    roof = Roofline(row_engine(row))
    mean = (1 + row.range_ratio) / 2
    mix = steady_mix(roof, row.isl * mean, row.osl * mean, row.concurrency)
    return Terms([phase_terms(roof, p.share, p.work) for p in mix.phases], mix.k, row.tok_s_per_gpu,
                 row.tpot_ms_p50 / 1000 if row.tpot_ms_p50 else None)


def fit(rows: list[Row], table: dict[str, Terms]) -> dict[str, dict[str, float]]:
    """{constant: {key: value}} over the rows' keys."""
    values = {n: {key_of(n, r): START[n] for r in rows} for n in GRIDS}
    dense_models = {key_of("moe_efficiency", r) for r in rows if not table[r.id].experts}
    for model in dense_models:
        values["moe_efficiency"][model] = 1.0  # no experts: the constant is unused
    for _ in range(SWEEPS):
        for name, grid in GRIDS.items():
            for key in values[name]:
                members = [r for r in rows if key_of(name, r) == key]
                if name == "moe_efficiency" and key in dense_models:
                    continue
                best = None
                for v in grid:
                    values[name][key] = float(v)
                    total = prior_penalty(name, float(v)) + sum(table[r.id].loss(constants(values, r)) for r in members)
                    if best is None or total < best[0]:
                        best = (total, float(v))
                values[name][key] = round(best[1], 2)
    return values


def constants(values: dict, row: Row) -> dict:
    """A row's constants; a key no fitted row had takes the median of that constant's fitted keys
    (what presets.toml's `default` entries are)."""
    return {n: values[n].get(key_of(n, row), float(np.median(list(values[n].values())))) for n in GRIDS}


def term_table(rows: list[Row]) -> dict[str, Terms]:
    return {r.id: terms(r) for r in rows}


def held_out(rows: list[Row], group: bool = False,
             targets: list[Row] | None = None) -> dict[str, tuple[dict, list[str]]]:
    """Per row (of `targets`, default all): its constants fitted on `rows` without it, and the ids
    of the rows they were fitted on. Leave one out by default; `group`: without every row of its
    hardware x engine (how a GPU or engine pairing with no published point of its own would be
    predicted)."""
    table, out, fits = term_table(rows), {}, {}
    for r in rows if targets is None else targets:
        others = tuple(o.id for o in rows if (o.group != r.group if group else o.id != r.id))
        if others not in fits:
            fits[others] = fit([o for o in rows if o.id in others], table)
        out[r.id] = (constants(fits[others], r), list(others))
    return out


def predict(roof: Roofline, row: Row, c: dict) -> Steady:
    roof.mfu, roof.mbu, roof.overhead_s = c["mfu"], c["mbu"], c["overhead_ms"] / 1000
    roof.moe_eff, roof.kv_eff, roof.norm = c["moe_efficiency"], c["kv_efficiency"], c["roofline_norm"]
    mean = (1 + row.range_ratio) / 2
    return steady_state(roof, row.isl * mean, row.osl * mean, row.concurrency)
