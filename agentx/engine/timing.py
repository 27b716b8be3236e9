"""Roofline timing model of one engine iteration (pure arithmetic, no clock).

Per iteration, per GPU of the tensor-parallel group (everything is split evenly over it):

    duration = max(compute, memory) + overhead + host_load

- compute = FLOPs / (peak dense FLOP/s of the precision x MFU), with
  FLOPs = 2 x active params x new tokens + attention FLOPs. Attention costs, per (query token,
  attended context token) pair and layer, 4 x heads x head_dim for GQA (QK^T and AV) and
  2 x heads x (2 x kv_lora_rank + qk_rope_head_dim) for MLA with absorbed projections. A prefill
  chunk of n new tokens after c computed ones attends n x c + n(n+1)/2 pairs; a decode token
  attends its whole context.
- memory = bytes / (HBM bandwidth x MBU): weights read once per iteration (for MoE, the dense
  part plus the routed experts the batch's tokens touch: 1 - (1 - k/E)^tokens of them) plus
  the KV cache read (every context token of every scheduled sequence) and written.
- Prefill of prefix-cached tokens costs nothing. Tokens loaded from the CPU tier cost their KV
  bytes over the host link: bytes / (host link bandwidth x efficiency x host_links). With the
  default host_links = 1 the whole prefix's KV (all TP shards) crosses one link, the
  conservative reading (shards share PCIe switch uplinks and the host memory bus); set it to
  the GPU count for fully parallel per-rank copies.
- Write-through offload to the CPU tier overlaps compute (vLLM copies asynchronously): it is
  counted in bytes and link time, not added to the iteration.
- Speculative decoding: a decoding sequence verifies K drafts, so it costs K + 1 new tokens
  (each attending its context) in FLOPs, expert reads and KV writes; the drafter's own cost
  (one MTP / EAGLE layer) is not modeled. The core decides how many tokens are kept.

KV layout per GPU: GQA shards KV heads over TP (replicated when there are fewer KV heads than
GPUs, as vLLM does); MLA's latent is replicated on every rank. KV capacity per GPU is
HBM x gpu_memory_utilization - weights / GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentx.engine import presets
from agentx.engine.config import EngineConfig
from agentx.errors import AgentxError


@dataclass
class Work:
    """What one iteration does, summed over its sequences."""

    new_tokens: int = 0  # tokens computed (prefill chunks and decodes)
    attn_pairs: int = 0  # (query token, context token) pairs attended
    kv_read_tokens: int = 0  # context tokens whose KV is read
    loaded_tokens: int = 0  # tokens whose KV comes from the CPU tier

    def add(self, computed: int, n: int) -> None:
        """A sequence with `computed` tokens in cache computing `n` more."""
        self.new_tokens += n
        self.attn_pairs += n * computed + n * (n + 1) // 2
        self.kv_read_tokens += computed


class Roofline:
    def __init__(self, cfg: EngineConfig):
        hw, m = presets.hardware(cfg.hardware), presets.model(cfg.model)
        self.cfg, self.hw, self.model = cfg, hw, m
        tp = cfg.gpus
        self.dtype_bytes = 2 if cfg.precision == "bf16" else 1
        self.peak_flops = hw.bf16_flops if cfg.precision == "bf16" else hw.fp8_flops
        if m.attention == "mla":
            self.kv_bytes_per_token = m.layers * (m.kv_lora_rank + m.qk_rope_head_dim) * self.dtype_bytes
            self.attn_flops_per_pair = 2 * m.heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim) * m.layers
        else:
            heads_per_gpu = max(1.0, m.kv_heads / tp)  # replicated below one head per GPU
            self.kv_bytes_per_token = int(m.layers * heads_per_gpu * m.head_dim * 2 * self.dtype_bytes)
            self.attn_flops_per_pair = 4 * m.heads * m.head_dim * m.layers
        # kv_bytes_per_token is per GPU and token
        self.weight_bytes = m.params_total * self.dtype_bytes
        if m.experts:
            k_over_e = m.experts_per_token / m.experts
            self.expert_params = (m.params_total - m.params_active) / (1 - k_over_e)
            self.dense_params = m.params_total - self.expert_params
            self.k_over_e = k_over_e
        weights_per_gpu = self.weight_bytes / tp
        free = hw.hbm_bytes * cfg.gpu_memory_utilization - weights_per_gpu
        if free <= 0:
            raise AgentxError(
                f"{m.name} in {cfg.precision} needs {weights_per_gpu / 1e9:.0f} GB per GPU for weights; "
                f"{cfg.gpus} x {hw.key} at utilization {cfg.gpu_memory_utilization} leaves no KV cache"
            )
        self.kv_capacity_tokens = int(free // self.kv_bytes_per_token)
        if cfg.num_gpu_blocks_override:
            self.kv_capacity_tokens = cfg.num_gpu_blocks_override * cfg.block_size
        self.cpu_capacity_tokens = int(cfg.cpu_offload_gb * 1e9 // (self.kv_bytes_per_token * tp))
        if cfg.cpu_offload_gb * 1e9 > hw.host_dram_bytes * tp:
            raise AgentxError(
                f"cpu_offload_gb {cfg.cpu_offload_gb} exceeds the host DRAM of {tp} x {hw.key} "
                f"({hw.host_dram_bytes * tp / 1e9:.0f} GB)"
            )
        self.host_bw = hw.host_link_bw * cfg.host_link_efficiency * cfg.host_links
        self.acceptance_length = self._acceptance_length()

    def _acceptance_length(self) -> float:
        """Tokens a decode step keeps on average: 1 without speculation; else the configured
        figure, or the model preset's published one for the same method and draft length."""
        cfg = self.cfg
        if not cfg.spec_decode:
            return 1.0
        if cfg.acceptance_length:
            return cfg.acceptance_length
        published = self.model.spec_decode.get(cfg.spec_decode)
        if not published or published["draft_tokens"] != cfg.draft_tokens:
            known = ", ".join(f"{k} with {v['draft_tokens']} draft tokens" for k, v in self.model.spec_decode.items())
            raise AgentxError(
                f"no published acceptance length for {self.model.key} with {cfg.spec_decode} and "
                f"{cfg.draft_tokens} draft tokens (presets have: {known or 'none'}); give --acceptance-length"
            )
        return published["acceptance_length"]

    def weight_bytes_read(self, tokens: int) -> float:
        """Weight bytes one iteration reads, whole model."""
        if not self.model.experts:
            return self.weight_bytes
        touched = 1.0 - (1.0 - self.k_over_e) ** tokens
        return (self.dense_params + self.expert_params * touched) * self.dtype_bytes

    def compute_s(self, work: Work) -> float:
        flops = 2 * self.model.params_active * work.new_tokens + self.attn_flops_per_pair * work.attn_pairs
        return flops / (self.cfg.gpus * self.peak_flops * self.cfg.mfu)

    def memory_s(self, work: Work) -> float:
        per_gpu = self.weight_bytes_read(work.new_tokens) / self.cfg.gpus
        per_gpu += (work.kv_read_tokens + work.new_tokens) * self.kv_bytes_per_token
        return per_gpu / (self.hw.hbm_bw * self.cfg.mbu)

    def transfer_s(self, tokens: int) -> float:
        """Moving `tokens` tokens of KV (all TP shards) between HBM and host DRAM."""
        return tokens * self.kv_bytes_per_token * self.cfg.gpus / self.host_bw

    def iteration_s(self, work: Work) -> float:
        if not work.new_tokens:
            return 0.0
        busy = max(self.compute_s(work), self.memory_s(work))
        return busy + self.cfg.overhead_s + self.transfer_s(work.loaded_tokens)

    def describe(self) -> str:
        return (
            f"{self.cfg.gpus} x {self.hw.name}, {self.model.name} ({self.cfg.precision}); "
            f"KV cache {self.kv_capacity_tokens:,} tokens"
            + (f", CPU tier {self.cpu_capacity_tokens:,} tokens" if self.cpu_capacity_tokens else "")
            + (f"; speculative decoding {self.cfg.spec_decode}, {self.cfg.draft_tokens} drafts, acceptance "
               f"length {self.acceptance_length:g}" if self.cfg.spec_decode else "")
        )
