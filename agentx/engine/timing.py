"""Roofline timing model of one engine iteration (pure arithmetic, no clock).

Per iteration, per GPU of the tensor-parallel group (everything is split evenly over it):

    duration = (compute^p + memory^p)^(1/p) + collectives + overhead + host_load

- p = roofline_norm (one constant for every deployment, fitted on the calibration table: 2.5):
  far from the ridge point the larger of compute and memory binds, as in the plain roofline
  (p -> infinity); near it both count, since kernels whose loads and math are both substantial
  overlap them only in part (at equal compute and memory times, 2^(1/2.5) = 1.32 x either). The
  iterations this moves are decodes of batches big enough to approach the ridge (a dense 70B
  model's 64-128 decodes on one GPU) and short prefills beside many decodes.
- compute = FLOPs / (peak dense FLOP/s of the precision x MFU), with
  FLOPs = 2 x active params x new tokens + attention FLOPs; the routed experts' share of the
  active params counts 1 / moe_efficiency times (grouped GEMMs over small per-expert shapes, with
  the tokens' permutation and the weighted combine, run below the dense GEMMs' rate: TensorRT-LLM
  tech blog 24, "MoE as Dense GEMM"; the same constant as their weight streaming below). A
  checkpoint that quantizes only its experts to FP4 (gpt-oss: attention, router and embeddings in
  BF16, quantization_config.modules_to_not_convert) runs its dense matmuls at the BF16 rate, the
  experts at the FP4 one. Attention costs, per (query token,
  attended context token) pair and layer, 4 x heads x head_dim for GQA (QK^T and AV) and
  2 x heads x (2 x kv_lora_rank + qk_rope_head_dim) for MLA with absorbed projections. A prefill
  chunk of n new tokens after c computed ones attends n x c + n(n+1)/2 pairs; a decode token
  attends its whole context.
- memory = bytes / (HBM bandwidth x MBU): weights read once per iteration (for MoE, the dense
  part plus the routed experts the batch's tokens touch: 1 - (1 - k/E)^tokens of them, counted
  1 / moe_efficiency times) plus the KV cache read (every context token of every scheduled
  sequence) and written, counted 1 / kv_efficiency times (paged attention kernels stream the
  cache less well than GEMMs stream weights; MLA's absorbed decode, 128 heads over one latent,
  least: the profile's value per attention kind).
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

Pipeline parallelism (`pp` stages of gpus / pp GPUs, ceil(layers / pp) layers each): an iteration
is pp stage times of one of min(pp, sequences) micro-batches plus the hops between stages
(`pipeline_s`); a stage's per-GPU work is the whole model's over pp x tp GPUs.

KV layout per GPU: GQA shards KV heads over TP (replicated when there are fewer KV heads than
GPUs, as vLLM does); MLA's latent is replicated on every rank. KV capacity per GPU is
HBM x gpu_memory_utilization - weights / GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentx.engine import presets
from agentx.engine.config import EngineConfig, parallelism_label
from agentx.errors import AgentxError


@dataclass
class Work:
    """What one iteration does, summed over its sequences."""

    new_tokens: int = 0  # tokens computed (prefill chunks and decodes)
    attn_pairs: int = 0  # (query token, context token) pairs attended
    kv_read_tokens: int = 0  # context tokens whose KV is read
    loaded_tokens: int = 0  # tokens whose KV comes from the CPU tier
    sequences: int = 0  # sequences scheduled (a pipeline splits them into up to pp micro-batches; 0: one)

    def add(self, computed: int, n: int) -> None:
        """A sequence with `computed` tokens in cache computing `n` more."""
        self.sequences += 1
        self.new_tokens += n
        self.attn_pairs += n * computed + n * (n + 1) // 2
        self.kv_read_tokens += computed

    def part(self, m: int) -> "Work":
        """One of `m` equal micro-batches of this work (rounded up)."""
        return Work(-(-self.new_tokens // m), -(-self.attn_pairs // m), -(-self.kv_read_tokens // m), 0,
                    -(-self.sequences // m))


# bytes per weight of each precision (FP4 formats with their block scales: NVFP4 one FP8 scale per
# 16 values = 4.5 bits, MXFP4 one E8M0 scale per 32 values = 4.25 bits; OCP MX and NVIDIA NVFP4
# specifications) and of the KV cache it runs with by default (--kv-cache-dtype auto: FP8 KV beside
# FP8 and FP4 weights, as InferenceX's FP4 recipes configure it: kv_cache_config.dtype fp8)
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5625, "mxfp4": 0.53125}
KV_BYTES = {"bf16": 2, "fp8": 1, "nvfp4": 1, "mxfp4": 1}
ACTIVATION_BYTES = 2  # BF16 activations on the wire (all-reduce, all-to-all)


def overlap(compute: float, memory: float, norm: float) -> float:
    """An iteration's busy time from its compute and memory times: their `norm`-norm, which is the
    larger of the two far from the ridge point and more than it near there (kernels whose loads
    and math are both substantial overlap them only in part)."""
    high, low = max(compute, memory), min(compute, memory)
    return high * (1 + (low / high) ** norm) ** (1 / norm) if low else high


class Roofline:
    def __init__(self, cfg: EngineConfig):
        hw, m = presets.hardware(cfg.hardware), presets.model(cfg.model)
        self.cfg, self.hw, self.model = cfg, hw, m
        self.profile = presets.profile(cfg.engine, hw.key, cfg.precision, m.key, cfg.engine_version)
        self.mfu = cfg.mfu or self.profile.mfu
        self.mbu = cfg.mbu or self.profile.mbu
        self.overhead_s = cfg.overhead_s if cfg.overhead_s is not None else self.profile.overhead_ms / 1000
        self.collective_eff = self.profile.collective_efficiency
        self.moe_eff = cfg.moe_efficiency or self.profile.moe_efficiency
        self.kv_eff = cfg.kv_efficiency or self.profile.kv_efficiency
        self.norm = cfg.roofline_norm or self.profile.roofline_norm
        if self.norm < 1:
            raise AgentxError(f"roofline_norm {self.norm:g} is below 1: the busy time would exceed compute plus memory")
        g, dep = cfg.gpus, cfg.parallelism == "dep"
        if cfg.pp > m.layers:
            raise AgentxError(f"--pp {cfg.pp}: {m.name} has {m.layers} layers to split into stages", "pp")
        self.tp = g // cfg.pp  # GPUs of one pipeline stage
        self.stage_layers = -(-m.layers // cfg.pp)  # the largest stage's layers: it paces the pipeline
        share = self.stage_layers / m.layers
        self.shard = self.tp / share  # what one GPU's share of the whole model's work is divided by (g at pp 1)
        self.dtype_bytes = KV_BYTES[cfg.precision if cfg.kv_cache_dtype == "auto" else cfg.kv_cache_dtype]
        self.peak_flops, self.attn_flops = self._peaks(hw, cfg.precision)
        # dense matmuls of an experts-only FP4 checkpoint: BF16 weights, BF16 GEMMs
        self.dense_flops = hw.bf16_flops if m.fp4_scope == "experts" and cfg.precision in ("nvfp4", "mxfp4") \
            else self.peak_flops
        kv_layers = m.kv_layers or m.layers
        if m.attention == "mla":
            full = kv_layers * share * (m.kv_lora_rank + m.qk_rope_head_dim) * self.dtype_bytes
            self.kv_bytes_per_token = full / self.tp if dep else full  # MLA's latent: on every TP rank
            self.attn_flops_per_pair = 2 * m.heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim) * m.layers
        else:
            full = kv_layers * share * m.kv_heads * m.head_dim * 2 * self.dtype_bytes
            heads_per_gpu = max(1.0, m.kv_heads / self.tp)  # replicated below one head per GPU
            self.kv_bytes_per_token = full / self.tp if dep else full / m.kv_heads * heads_per_gpu
            self.attn_flops_per_pair = 4 * m.heads * m.head_dim * kv_layers
        # kv_bytes_per_token is per GPU (of the largest stage) and token (with attention DP: averaged over the ranks)
        self._split_weights(m, cfg.precision)
        self.stage_share = share
        weights_per_gpu = (self.dense_bytes * share + self.expert_bytes / self.shard) if dep \
            else self.weight_bytes / self.shard
        free = hw.hbm_bytes * cfg.gpu_memory_utilization - weights_per_gpu
        if free <= 0:
            raise AgentxError(
                f"{m.name} in {cfg.precision} needs {weights_per_gpu / 1e9:.0f} GB per GPU for weights; "
                f"{cfg.gpus} x {hw.key} at utilization {cfg.gpu_memory_utilization} leaves no KV cache"
            )
        self.kv_capacity_tokens = int(free // self.kv_bytes_per_token)
        if cfg.num_gpu_blocks_override:
            self.kv_capacity_tokens = cfg.num_gpu_blocks_override * cfg.block_size
        self.cpu_capacity_tokens = int(cfg.cpu_offload_gb * 1e9 // (self.kv_bytes_per_token * g))
        if cfg.cpu_offload_gb * 1e9 > hw.host_dram_bytes * g:
            raise AgentxError(
                f"cpu_offload_gb {cfg.cpu_offload_gb} exceeds the host DRAM of {g} x {hw.key} "
                f"({hw.host_dram_bytes * g / 1e9:.0f} GB)"
            )
        self.host_bw = hw.host_link_bw * cfg.host_link_efficiency * cfg.host_links
        self.acceptance_length = self._acceptance_length()

    @staticmethod
    def _peaks(hw, precision: str) -> tuple[float, float]:
        """Peak FLOP/s of the matmuls and of attention (which runs at the KV cache's precision)."""
        if precision == "bf16":
            return hw.bf16_flops, hw.bf16_flops
        if precision == "fp8":
            return hw.fp8_flops, hw.fp8_flops
        if hw.fp4_flops:
            return hw.fp4_flops, hw.fp8_flops
        if precision == "nvfp4":
            raise AgentxError(f"{hw.key} has no FP4 tensor cores: NVFP4 needs Blackwell (use mxfp4 for "
                              f"weight-only FP4, or fp8)")
        return hw.bf16_flops, hw.fp8_flops  # MXFP4 weights dequantized to BF16 matmuls

    def _split_weights(self, m, precision: str) -> None:
        """Whole-model weight bytes, dense part and routed experts apart (MoE)."""
        wb = WEIGHT_BYTES[precision]
        dense_wb = 2.0 if m.fp4_scope == "experts" and precision in ("nvfp4", "mxfp4") else wb
        if m.experts:
            k_over_e = m.experts_per_token / m.experts
            self.expert_params = (m.params_total - m.params_active) / (1 - k_over_e)
            self.dense_params = m.params_total - self.expert_params
            self.k_over_e = k_over_e
        else:
            self.expert_params, self.dense_params, self.k_over_e = 0.0, m.params_total, 1.0
        self.dense_bytes, self.expert_bytes = self.dense_params * dense_wb, self.expert_params * wb
        self.weight_bytes = self.dense_bytes + self.expert_bytes

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

    def weight_bytes_per_gpu(self, tokens: int) -> float:
        """Weight bytes one GPU reads in an iteration of `tokens` new tokens (for MoE, the dense part
        plus the routed experts the tokens touch: 1 - (1 - k/E)^tokens of them, counted 1 /
        moe_efficiency times: expert GEMMs of a few tokens each stream their weights less well; their
        FLOPs count the same way in compute_s)."""
        g = self.shard
        touched = 1.0 - (1.0 - self.k_over_e) ** tokens if self.model.experts else 1.0
        experts = self.expert_bytes * touched / g / self.moe_eff
        if self.cfg.parallelism == "dep":  # every rank its own replica of the dense part (of its stage)
            return self.dense_bytes * self.stage_share + experts
        return self.dense_bytes / g + experts

    def compute_s(self, work: Work) -> float:
        g = self.shard
        experts = self.expert_params * self.k_over_e if self.model.experts else 0.0  # active routed
        dense = self.model.params_active - experts
        matmul = 2 * (dense / self.dense_flops + experts / self.moe_eff / self.peak_flops) * work.new_tokens / (g * self.mfu)
        return matmul + self.attn_flops_per_pair * work.attn_pairs / (g * self.attn_flops * self.mfu)

    def kv_bytes(self, work: Work) -> float:
        """KV bytes one GPU reads and writes in an iteration."""
        return (work.kv_read_tokens + work.new_tokens) * self.kv_bytes_per_token

    def memory_s(self, work: Work) -> float:
        per_gpu = self.weight_bytes_per_gpu(work.new_tokens) + self.kv_bytes(work) / self.kv_eff
        return per_gpu / (self.hw.hbm_bw * self.mbu)

    def collective_s(self, tokens: int) -> float:
        """Bandwidth time of the iteration's collectives over the scale-up link (their latency is in
        the profile's per-iteration overhead): TP: two all-reduces per layer of every token's hidden
        state (ring: 2 (g-1)/g of it crosses each link); TEP: one all-reduce (attention) plus the MoE
        all-to-all; DEP: the all-to-all only (dispatch and combine of k expert copies per token)."""
        g, m = self.tp, self.model
        if g == 1 or not tokens or not self.hw.scale_up_bw:
            return 0.0
        hidden = tokens * m.hidden * ACTIVATION_BYTES / g  # this GPU's share of the batch
        ring = 2 * (g - 1) / g * hidden * g  # an all-reduce moves the whole batch's hidden state
        a2a = 2 * m.experts_per_token * hidden * (g - 1) / g if m.experts else 0.0
        per_layer = {"tp": 2 * ring, "tep": ring + a2a, "dep": a2a or 2 * ring}[self.cfg.parallelism]
        return self.stage_layers * per_layer / (self.hw.scale_up_bw * self.collective_eff)

    def transfer_s(self, tokens: int) -> float:
        """Moving `tokens` tokens of KV (all TP shards) between HBM and host DRAM."""
        return tokens * self.kv_bytes_per_token * self.cfg.gpus / self.host_bw

    def busy_s(self, work: Work) -> float:
        """One stage's time for `work` (the whole model's at pp 1): roofline plus collectives."""
        return overlap(self.compute_s(work), self.memory_s(work), self.norm) + self.collective_s(work.new_tokens)

    def pipeline_s(self, work: Work) -> float:
        """An iteration through pp stages: the batch split into m = min(pp, sequences) micro-batches in
        flight (vLLM keeps pp batches in flight: vllm/config/vllm.py `max_concurrent_batches`), each
        crossing every stage and the pp - 1 hops between them, so it ends after pp stage times of one
        micro-batch. With m < pp (one long prompt, a small batch) the stages idle (pp - m) / pp of it:
        the pipeline bubble; the per-GPU work of a stage is the whole model's over pp x tp GPUs."""
        m = max(1, min(self.cfg.pp, work.sequences))
        part = work.part(m)
        hop = part.new_tokens * self.model.hidden * ACTIVATION_BYTES / self.tp  # each TP rank sends its slice
        link = self.hw.scale_up_bw * self.collective_eff if self.hw.scale_up_bw else self.hw.host_link_bw
        return self.cfg.pp * self.busy_s(part) + (self.cfg.pp - 1) * hop / link

    def iteration_s(self, work: Work) -> float:
        if not work.new_tokens:
            return 0.0
        busy = self.busy_s(work) if self.cfg.pp == 1 else self.pipeline_s(work)
        return busy + self.overhead_s + self.transfer_s(work.loaded_tokens)

    def describe(self) -> str:
        return (
            f"{self.cfg.gpus} x {self.hw.name} {parallelism_label(self.cfg)}, {self.model.name} "
            f"({self.cfg.precision}), {self.cfg.engine} profile {self.profile.key}; "
            f"KV cache {self.kv_capacity_tokens:,} tokens"
            + (f", CPU tier {self.cpu_capacity_tokens:,} tokens" if self.cpu_capacity_tokens else "")
            + (f"; speculative decoding {self.cfg.spec_decode}, {self.cfg.draft_tokens} drafts, acceptance "
               f"length {self.acceptance_length:g}" if self.cfg.spec_decode else "")
        )
