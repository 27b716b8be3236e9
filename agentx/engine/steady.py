"""Closed-form steady state of the roofline engine under a fixed-length closed-loop load.

What the simulated engine converges to when C clients each send back-to-back requests of ISL
input and OSL output tokens (no prefix sharing), used to fit the engine profiles against published
points without running the event loop thousands of times (`tools/fit_profiles.py`); the
calibration report itself runs the real simulator (`agentx sim calibrate`).

- Batch: B = min(C, max_num_seqs, KV capacity / mean context), mean context ISL + OSL / 2.
- Each iteration decodes B tokens and prefills B x ISL / OSL (every finished request is replaced
  by a new prompt: in steady state ISL prompt tokens enter per OSL decode steps), capped by the
  token budget max_num_batched_tokens - B.
- TPOT = the iteration time; throughput = B (ISL + OSL) / (OSL x iteration) per instance.
- TTFT = the closed-loop queue wait (C - B) / B x OSL iterations, plus the prefill iterations of
  one prompt at the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentx.engine.timing import Roofline, Work


@dataclass(frozen=True)
class Steady:
    batch: float
    iteration_s: float
    tok_s_per_gpu: float
    ttft_s: float


def _batch(roof: Roofline, isl: float, osl: float, concurrency: int) -> tuple[float, float, float]:
    """Decoding batch, prompt tokens per iteration, and the share of the prompts' demand served."""
    cfg = roof.cfg
    batch = max(1.0, min(concurrency, cfg.max_num_seqs, roof.kv_capacity_tokens / (isl + osl / 2)))
    budget = max(1.0, cfg.max_num_batched_tokens - batch)
    prefill = min(batch * isl / osl, budget)
    return batch, prefill, min(1.0, prefill / (batch * isl / osl))


def steady_work(roof: Roofline, isl: float, osl: float, concurrency: int) -> tuple[Work, float]:
    """One steady iteration's work, and k with throughput per GPU = k / iteration time."""
    batch, prefill, share = _batch(roof, isl, osl, concurrency)
    context = isl + osl / 2
    work = Work(new_tokens=round(batch + prefill), attn_pairs=round(batch * context + prefill * isl / 2),
                kv_read_tokens=round(batch * context + prefill * isl / 2))
    return work, batch * (isl + osl) / osl * share / roof.cfg.gpus


def steady_state(roof: Roofline, isl: float, osl: float, concurrency: int) -> Steady:
    batch, prefill, share = _batch(roof, isl, osl, concurrency)
    work, k = steady_work(roof, isl, osl, concurrency)
    step = roof.iteration_s(work)
    budget = max(1.0, roof.cfg.max_num_batched_tokens - batch)
    wait = max(0.0, concurrency - batch) / batch * osl * step / share
    ttft = wait + math.ceil(isl / budget) * step
    return Steady(batch, step, k / step, ttft)

