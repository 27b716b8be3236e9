"""What the simulator models of one serving engine: the shape every engine's file fills in."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Admission(StrEnum):
    """When the scheduler admits a waiting request (engine/core.py)."""

    # on the prompt's blocks; a running request short of a block preempts the latest admitted
    # (recompute): vLLM, SGLang, ATOM
    PREEMPT = "preempt"
    # TensorRT-LLM's default capacity scheduler policy, GUARANTEED_NO_EVICT: only when the blocks
    # of its whole answer (prompt plus max_tokens) are free beside those the running requests
    # still need to finish, so nothing is ever preempted
    NO_EVICT = "guaranteed-no-evict"


@dataclass(frozen=True)
class EngineProfile:
    """One engine, as `--engine` names it. Its fitted timing constants (per-iteration overhead,
    KV streaming efficiency) are entries of presets.toml [timing.*] under the keys below; an
    engine without an entry of its own takes the entry `default`."""

    name: str  # --engine, the key of its overhead in presets.toml [timing.overhead_ms]
    title: str  # as the engine's project names it
    admission: Admission
    # the prefix of its entries in presets.toml [timing.kv_efficiency] when its own attention
    # kernels were fitted apart (TensorRT-LLM's: `trtllm-gqa`); "": the attention kind's shared entry
    kv_kernels: str = ""
    # the engine's own batch caps, as its server ships them (what a deployment runs with unless
    # --max-num-seqs / --max-num-batched-tokens say otherwise): the most running sequences, and the
    # step token budget on a GPU below / at or above `large_gib` GiB of memory (its source in `defaults_source`)
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    large_gib: float = 0.0  # 0: one budget whatever the memory
    small_seqs: int = 0  # the sequence cap below large_gib (0: max_num_seqs)
    small_tokens: int = 0  # the token budget below large_gib (0: max_num_batched_tokens)
    defaults_source: str = ""
    # releases whose per-iteration overhead was fitted apart (`--engine-version`, presets.toml
    # [timing.overhead_ms] `name-release-vendor`), from calibration rows that ran their images
    releases: tuple[str, ...] = ()

    def batch_defaults(self, memory_bytes: float) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) as the engine sets them on a GPU of this memory."""
        if self.large_gib and memory_bytes < self.large_gib * 2**30:
            return self.small_seqs or self.max_num_seqs, self.small_tokens or self.max_num_batched_tokens
        return self.max_num_seqs, self.max_num_batched_tokens

    @property
    def no_evict(self) -> bool:
        return self.admission is Admission.NO_EVICT

    def overhead_key(self, release: str = "", vendor: str = "") -> str:
        """Its entry of presets.toml [timing.overhead_ms]: `name[-release]-vendor` (a release fitted
        apart; the GPU vendor's build of the engine: ROCm images are builds of their own)."""
        return "-".join(p for p in (self.name, release, vendor) if p)

    def kv_efficiency_key(self, attention: str) -> str:
        """Its entry of presets.toml [timing.kv_efficiency] for an attention kind (gqa, mla)."""
        return f"{self.kv_kernels}-{attention}" if self.kv_kernels else attention
