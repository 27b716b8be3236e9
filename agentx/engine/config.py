"""Settings of one simulated deployment (typed; the CLI maps its flags onto this)."""

from __future__ import annotations

from dataclasses import dataclass

from agentx.errors import AgentxError

PRECISIONS = ("bf16", "fp8", "nvfp4", "mxfp4")
PARALLELISMS = ("tp", "tep", "dep")


@dataclass(frozen=True)
class EngineConfig:
    hardware: str = "H200"
    model: str = "qwen3-235b-a22b"
    gpus: int = 8  # one model instance: its tensor- (or expert- / attention-data-) parallel group
    precision: str = "bf16"  # of weights and matmuls: bf16, fp8, nvfp4 or mxfp4 (KV: bf16 or fp8)
    engine: str = "vllm"  # whose timing profile (agentx/engine/presets.toml [profile.*]): vllm, sglang, trtllm, atom
    parallelism: str = "tp"  # tp | tep (TP attention, EP experts) | dep (attention data-parallel, EP experts)
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    cpu_offload_gb: float = 0.0  # host DRAM for KV blocks, whole deployment (0: no CPU tier)
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 0  # 0: the model's own maximum context
    num_gpu_blocks_override: int = 0  # as vLLM's flag: this many KV blocks instead of the memory math
    # timing model (see agentx/engine/timing.py); 0 / None: the engine profile's value
    mfu: float = 0.0  # model FLOP utilization of the matmuls
    mbu: float = 0.0  # memory bandwidth utilization
    overhead_s: float | None = None  # per iteration: scheduling, launches, collective latency
    moe_efficiency: float = 0.0  # expert-weight streaming relative to mbu
    host_link_efficiency: float = 0.5  # achieved / peak host-link bandwidth for KV block copies
    host_links: int = 1  # host links a KV transfer is striped over (1: one link, conservative)
    # speculative decoding: each decode step verifies `draft_tokens` drafts and keeps
    # `acceptance_length` tokens on average (0: the model preset's published figure)
    spec_decode: str = ""  # method (mtp, eagle3, ngram, ...); empty: off
    draft_tokens: int = 0
    acceptance_length: float = 0.0
    seed: int = 0  # natural answer lengths and faults

    def __post_init__(self):
        checks = [
            (self.gpus >= 1, "gpus must be >= 1"),
            (self.precision in PRECISIONS, f"precision must be one of {', '.join(PRECISIONS)}"),
            (self.parallelism in PARALLELISMS, f"parallelism must be one of {', '.join(PARALLELISMS)}"),
            (0 < self.gpu_memory_utilization <= 1, "gpu_memory_utilization must be in (0, 1]"),
            (self.block_size >= 1, "block_size must be >= 1"),
            (self.cpu_offload_gb >= 0, "cpu_offload_gb must be >= 0"),
            (self.max_num_seqs >= 1, "max_num_seqs must be >= 1"),
            (self.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1"),
            (self.max_model_len >= 0, "max_model_len must be >= 0"),
            (self.num_gpu_blocks_override >= 0, "num_gpu_blocks_override must be >= 0"),
            (0 <= self.mfu <= 1 and 0 <= self.mbu <= 1 and 0 <= self.moe_efficiency <= 1,
             "mfu, mbu and moe_efficiency must be in (0, 1] (0: the profile's)"),
            (0 < self.host_link_efficiency <= 1, "host_link_efficiency must be in (0, 1]"),
            (self.overhead_s is None or self.overhead_s >= 0, "overhead_s must be >= 0"),
            (self.host_links >= 1, "host_links must be >= 1"),
            (not self.spec_decode or self.draft_tokens >= 1, "spec_decode needs draft_tokens >= 1"),
            (self.acceptance_length == 0 or 1 <= self.acceptance_length <= self.draft_tokens + 1,
             "acceptance_length must be in [1, draft_tokens + 1]"),
        ]
        for ok, problem in checks:
            if not ok:
                raise AgentxError(f"engine config: {problem}")
