"""Closed-form steady state of the roofline engine under a fixed-length closed-loop load.

What the simulated engine converges to when C clients each send back-to-back requests of ISL
input and OSL output tokens (no prefix sharing), used to fit the engine profiles against published
points without running the event loop thousands of times (`tools/fit_profiles.py`); the
calibration report itself runs the real simulator (`agentx sim calibrate`).

- Batch: B = min(C, max_num_seqs, KV capacity / mean context), mean context ISL + OSL / 2;
  with an engine that admits a request only with the blocks of its whole answer free
  (TensorRT-LLM's default capacity scheduler, GUARANTEED_NO_EVICT), KV capacity / (ISL + OSL).
- Prompts arrive as requests finish, B / OSL per decode step, and the scheduler prefills each in
  the next iteration beside the B decodes (chunks of the budget max_num_batched_tokens - B when a
  prompt is longer). So iterations are of two kinds, as in the event loop: decode-only ones
  (memory-bound: weights and KV streamed for B tokens) and mixed ones (B decodes plus a chunk of
  c = min(budget, ISL x max(1, B / OSL)) prompt tokens, usually compute-bound), a share
  f = B ISL / (OSL c) of them mixed. Averaging the prompt tokens over every iteration instead
  (one kind) misses that an iteration costs the larger of its compute and memory time: it
  underestimates the mixed iterations' compute and overestimates the MoE experts the decode-only
  iterations touch.
- TPOT = the mean iteration time; throughput = B (ISL + OSL) / (OSL x mean iteration) per
  instance, times the share of the prompts' demand the budget serves (f capped at 1).
- TTFT = the closed-loop queue wait (C - B) / B x OSL iterations, plus the mixed iterations of
  one prompt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentx.engine.profiles import engine_profile
from agentx.engine.timing import Roofline, Work


@dataclass(frozen=True)
class Steady:
    batch: float
    iteration_s: float
    tok_s_per_gpu: float
    ttft_s: float


@dataclass(frozen=True)
class Phase:
    """One kind of iteration and its share of all iterations."""

    share: float
    work: Work


@dataclass(frozen=True)
class Mix:
    batch: float
    chunk: float  # prompt tokens of a mixed iteration
    served: float  # share of the prompts' demand served (below 1 when the budget binds)
    phases: tuple[Phase, ...]
    k: float  # throughput per GPU = k / mean iteration time


def steady_mix(roof: Roofline, isl: float, osl: float, concurrency: int) -> Mix:
    cfg = roof.cfg
    context = isl + osl / 2
    held = isl + osl if engine_profile(cfg.engine).no_evict else context  # (GUARANTEED_NO_EVICT reserves the whole answer)
    batch = max(1.0, min(concurrency, cfg.max_num_seqs, roof.kv_capacity_tokens / held))
    budget = max(1.0, cfg.max_num_batched_tokens - batch)
    demand = batch * isl / osl  # prompt tokens per decode step
    chunk = min(budget, isl * max(1.0, batch / osl))
    mixed = min(1.0, demand / chunk)
    served = mixed * chunk / demand
    pieces = math.ceil(isl / budget)  # chunks of one prompt; a chunk reads the prompt's earlier ones
    prefix = (pieces - 1) / 2 * budget if pieces > 1 else 0.0
    decode = Work(new_tokens=round(batch), attn_pairs=round(batch * context), kv_read_tokens=round(batch * context),
                  sequences=round(batch))
    both = Work(new_tokens=round(batch + chunk), attn_pairs=round(batch * context + chunk * isl / 2),
                kv_read_tokens=round(batch * context + prefix * max(1.0, chunk / isl)),
                sequences=round(batch) + 1)
    phases = tuple(p for p in (Phase(1 - mixed, decode), Phase(mixed, both)) if p.share > 0)
    return Mix(batch, chunk, served, phases, batch * (isl + osl) / osl * served / cfg.gpus)


def steady_state(roof: Roofline, isl: float, osl: float, concurrency: int) -> Steady:
    mix = steady_mix(roof, isl, osl, concurrency)
    step = sum(p.share * roof.iteration_s(p.work) for p in mix.phases)
    wait = max(0.0, concurrency - mix.batch) / mix.batch * osl * step / mix.served
    prompt = math.ceil(isl / mix.chunk) * roof.iteration_s(mix.phases[-1].work)
    return Steady(mix.batch, step, mix.k / step, wait + prompt)
