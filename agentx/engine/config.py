"""Settings of one simulated deployment, each declared once (`option`: default, help, bounds); the
CLI's flags for `sim serve` and `sim bench` and the capacity plan's grid read these declarations."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from agentx.engine.faults import FaultConfig
from agentx.engine.profiles import DEFAULT, EngineName, engine_profile
from agentx.errors import AgentxError
from agentx.engine.eviction import EvictionName
from agentx.engine.hybrid import Retention
from agentx.options import check_bounds, option

PRECISIONS = ("bf16", "fp8", "nvfp4", "mxfp4", "fp4")
PARALLELISMS = ("tp", "tep", "dep")
KV_DTYPES = ("auto", "bf16", "fp8")


def fp4_format(hardware_key: str) -> str:
    """What `--precision fp4` (InferenceX's name) means on a GPU: NVFP4 on NVIDIA FP4 tensor cores,
    MXFP4 on AMD (MI355X's FP4) and as weight-only FP4 on GPUs without FP4 tensor cores."""
    from agentx.engine import presets

    hw = presets.hardware(hardware_key)
    return "nvfp4" if hw.vendor == "nvidia" and hw.fp4_flops else "mxfp4"


def engine_batch_defaults(engine: str, hardware_key: str) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) as `engine`'s server sets them on this GPU (its profile)."""
    from agentx.engine import presets

    return engine_profile(engine).batch_defaults(presets.hardware(hardware_key).hbm_bytes)


@dataclass(frozen=True)
class EngineConfig:
    hardware: str = option("H200", "Hardware preset (see `agentx sim presets`).")
    model: str = option("qwen3-235b-a22b", "Model preset (see `agentx sim presets`).")
    gpus: int = option(8, "GPUs of one model instance (its TP / TEP / DEP group).", min=1)
    precision: str = option("bf16", "bf16, fp8, nvfp4 or mxfp4 (weights and matmuls; FP4 runs with an FP8 KV "
                            "cache; nvfp4 needs FP4 tensor cores); fp4, the name published tables use, is nvfp4 on "
                            "an NVIDIA GPU with FP4 tensor cores (Blackwell), mxfp4 elsewhere.", choices=PRECISIONS)
    engine: str = option(DEFAULT.name, "Engine modeled: its scheduler's admission and its calibrated timing "
                         "constants (engine/profiles/, `agentx sim presets`).", choices=EngineName)
    engine_version: str = option("", "An engine release whose per-iteration overhead was fitted apart (its "
                                 "profile's releases: vllm 0.10, the 0.10.1 / 0.10.2 images); empty: the engine's "
                                 "current entry.")
    parallelism: str = option("tp", "How --gpus split a model instance: tp, tep (TP attention + EP experts) or "
                              "dep (attention data-parallel + EP experts, e.g. DEP8).", choices=PARALLELISMS)
    pp: int = option(1, "Pipeline-parallel stages the instance's --gpus are split into: each stage holds its "
                     "share of the layers on gpus / pp GPUs split by --parallelism (PP2 x TP4: --gpus 8 --pp 2); "
                     "the batch runs as up to pp micro-batches in flight (SPEC section 6).", min=1)
    kv_cache_dtype: str = option("auto", "KV cache precision: auto (BF16 beside bf16 weights, FP8 beside fp8 and FP4 "
                                 "weights), bf16 or fp8 (vLLM's --kv-cache-dtype).", choices=KV_DTYPES)
    gpu_memory_utilization: float = option(0.9, "Share of GPU memory the engine may use.", gt=0, max=1)
    block_size: int = option(16, "Tokens per KV block.", min=1)
    cpu_offload_gb: float = option(0.0, "Host DRAM for KV blocks, per replica.", min=0)
    kv_policy: str = option("lru", "Which free cached KV blocks go first: lru, or a policy reading harness hints "
                            "(bench --hints): retain, demote, prefetch (SPEC section 6).", choices=EvictionName)
    window_retention: str = option("off", "Hybrid-attention models (sliding-window layers): which window-layer KV "
                                   "outlives its request: off (not modeled), none, or sparse (checkpoints every "
                                   "--checkpoint-blocks blocks and at each prompt's end; SPEC section 6).",
                                   choices=Retention)
    checkpoint_blocks: int = option(64, "With --window-retention sparse: blocks between retained window checkpoints.",
                                    min=1)
    ssd_drives: int = option(0, "NVMe drives of each replica's SSD KV tier under DRAM (0: none; a DGX H100 / H200 / "
                             "B200 node has 8 data drives); needs --cpu-offload-gb.", min=0)
    ssd_drive: str = option("micron-9550-pro", "The SSD tier's drive preset: capacity, read and write bandwidth "
                            "(`agentx sim presets`).")
    store_rules: bool = option(True, "The KV store path's rules (vLLM's AgentX work): only each turn's new blocks "
                               "written, one copy per block per tier, no write repeated while in flight (SPEC 6).")
    max_num_seqs: int = option(0, "Most sequences in a batch (0: the engine's own default on this GPU, "
                               "`agentx sim presets`).", min=0)
    max_num_batched_tokens: int = option(0, "Most tokens in one iteration (0: the engine's own default on this "
                                         "GPU).", min=0)
    max_model_len: int = option(0, "0: the model's maximum context.", min=0)
    num_gpu_blocks_override: int = option(0, "This many KV blocks instead of the memory arithmetic.", min=0)
    # timing model (see agentx/engine/timing.py); 0 / None: the engine profile's (presets.toml [timing])
    mfu: float = option(0.0, "Model FLOP utilization of the matmuls (0: the engine profile's).", min=0, max=1)
    mbu: float = option(0.0, "Memory bandwidth utilization (0: the engine profile's).", min=0, max=1)
    overhead_s: float | None = option(None, "Fixed cost of one iteration: scheduling, launches, collective "
                                      "latency (default: the engine profile's).", min=0)
    moe_efficiency: float = option(0.0, "Routed-expert GEMMs relative to the dense ones, in weight "
                                   "streaming (MBU) and FLOPs (MFU) (0: the profile's).", min=0, max=1)
    kv_efficiency: float = option(0.0, "KV cache streaming by attention relative to MBU (0: the profile's).", min=0,
                                  max=1)
    roofline_norm: float = option(0.0, "An iteration's compute and memory times combine as their p-norm, this p "
                                  "(0: the profile's; large: the larger of the two).", min=0, max=100)
    host_link_efficiency: float = option(0.5, "Achieved / peak host-link bandwidth for KV block copies.",
                                         gt=0, max=1)
    host_links: int = option(1, "Host links a KV transfer is striped over.", min=1)
    # speculative decoding: each decode step verifies `draft_tokens` drafts and keeps
    # `acceptance_length` tokens on average (0: the model preset's published figure)
    spec_decode: str = option("", "Speculative decoding method (mtp, eagle3, ...); empty: off.")
    draft_tokens: int = option(0, "Draft tokens verified per decode step.", min=0)
    acceptance_length: float = option(0.0, "Tokens kept per decode step on average (0: the preset's).", min=0)
    seed: int = option(0, "Seed of answer lengths and faults.")

    def __post_init__(self):
        check_bounds(self)
        if self.precision == "fp4":  # the published name: the FP4 format this GPU runs
            object.__setattr__(self, "precision", fp4_format(self.hardware))
        own = engine_batch_defaults(self.engine, self.hardware)
        if not self.max_num_seqs:
            object.__setattr__(self, "max_num_seqs", own[0])
        if not self.max_num_batched_tokens:
            object.__setattr__(self, "max_num_batched_tokens", own[1])
        releases = engine_profile(self.engine).releases
        if self.engine_version and self.engine_version not in releases:
            raise AgentxError(f"--engine-version {self.engine_version!r}: {self.engine} has "
                              + (f"releases fitted apart: {', '.join(releases)}" if releases else "no release fitted apart"),
                              "engine_version")
        checks = [  # what ties fields together (the bounds of each are declared above)
            (not self.spec_decode or self.draft_tokens >= 1, "spec_decode needs draft_tokens >= 1"),
            (self.acceptance_length == 0 or 1 <= self.acceptance_length <= self.draft_tokens + 1,
             "acceptance_length must be in [1, draft_tokens + 1]"),
            (self.gpus % self.pp == 0, f"--gpus {self.gpus} does not split into --pp {self.pp} equal stages"),
            (not self.ssd_drives or self.cpu_offload_gb > 0, "an SSD tier sits under DRAM: ssd_drives needs "
             "cpu_offload_gb > 0"),
        ]
        for ok, problem in checks:
            if not ok:
                raise AgentxError(f"engine config: {problem}")


@dataclass(frozen=True)
class Deployment:
    """One engine configuration, replicated behind a router (what `sim serve` serves and `sim bench`
    simulates)."""

    engine: EngineConfig = field(default_factory=EngineConfig)
    replicas: int = option(1, "Engine replicas (each --gpus GPUs) behind a router.", min=1)
    router: str = option("round-robin", "round-robin, least-loaded, session-affinity or prefix-aware (SPEC section 6).")
    # disaggregated prefill / decode (engine/disagg.py): prefill workers of `engine`, decode workers
    # of `engine` with the decode_* settings, instead of replicas
    prefill: int = option(0, "Disaggregated: prefill workers (each --gpus, --parallelism); needs --decode.", min=0)
    decode: int = option(0, "Disaggregated: decode workers.", min=0)
    decode_gpus: int = option(0, "GPUs of a decode worker (0: --gpus).", min=0)
    decode_parallelism: str = option("", "A decode worker's parallelism: tp, tep or dep (default: --parallelism).")
    prefill_route: str = option("all", "Disaggregated: which prompts prefill on the prefill workers: all, or tool "
                                "(only low-reuse, tool-result-heavy ones, read from harness hints; the rest prefill "
                                "where they decode). SPEC section 6.", choices=("all", "tool"))

    def __post_init__(self):
        check_bounds(self)
        if bool(self.prefill) != bool(self.decode):
            raise AgentxError("--prefill and --decode go together", "prefill")
        if self.decode_parallelism not in ("",) + PARALLELISMS:
            raise AgentxError(f"want one of {', '.join(PARALLELISMS)}, got {self.decode_parallelism!r}",
                              "decode_parallelism")
        if self.prefill_route != "all" and not self.prefill:
            raise AgentxError("--prefill-route needs --prefill and --decode", "prefill_route")
        if self.prefill and self.replicas != 1:
            raise AgentxError("a disaggregated deployment has prefill and decode workers, not replicas", "replicas")

    def decode_engine(self) -> EngineConfig:
        return replace(self.engine, gpus=self.decode_gpus or self.engine.gpus,
                       parallelism=self.decode_parallelism or self.engine.parallelism)

    def label(self) -> str:
        """TP8, 2 x DEP8, 2 x DEP8 prefill + DEP16 decode: as InferenceX and the AgentX article name them."""
        if not self.prefill:
            return parallelism_label(self.engine, self.replicas)
        route = "" if self.prefill_route == "all" else f" ({self.prefill_route} route)"
        return (f"{parallelism_label(self.engine, self.prefill)} prefill + "
                f"{parallelism_label(self.decode_engine(), self.decode)} decode{route}")

    def disaggregation(self) -> str:
        """The disaggregation's settings in words (the deployment key's `engine_settings`)."""
        d = self.decode_engine()
        return (f"prefill={self.prefill} decode={self.decode} decode_gpus={d.gpus} "
                f"decode_parallelism={d.parallelism} prefill_route={self.prefill_route} router={self.router}")

    def gpus(self) -> int:
        if not self.prefill:
            return self.engine.gpus * self.replicas
        return self.engine.gpus * self.prefill + self.decode_engine().gpus * self.decode


# EngineConfig fields that a deployment's other labels name (SPEC section 8, "The deployment key"):
# hardware, model, GPUs, precision, parallelism, the KV offload tiers (`kv_offload`), speculative
# decoding (`spec_decoding`); and the seed, which is the draw (answer lengths, faults), not the
# deployment: runs of other seeds are the same deployment's other samples (the spread, SPEC 3).
LABELLED = ("hardware", "model", "gpus", "precision", "parallelism", "pp", "cpu_offload_gb", "ssd_drives", "ssd_drive",
            "spec_decode", "draft_tokens", "acceptance_length", "seed")


def changed_settings(e: EngineConfig, skip: tuple[str, ...] = ()) -> list[str]:
    """`name=value` of each engine setting that differs from its default, less LABELLED and `skip`:
    what else sets a deployment apart (the deployment key's `engine_settings`)."""
    default = replace(EngineConfig(), **dict(zip(("max_num_seqs", "max_num_batched_tokens"),
                                                 engine_batch_defaults(e.engine, e.hardware))))
    return [f"{f.name}={getattr(e, f.name)}" for f in fields(e)
            if f.name not in LABELLED + skip and getattr(e, f.name) != getattr(default, f.name)]


def parallelism_label(e: EngineConfig, instances: int = 1) -> str:
    """TP8, DEP8, PP2 x TP4 (two pipeline stages of TP4), 2 x (PP2 x TP4)."""
    one = f"{e.parallelism.upper()}{e.gpus // e.pp}"
    if e.pp > 1:
        one = f"PP{e.pp} x {one}"
    return one if instances == 1 else (f"{instances} x ({one})" if e.pp > 1 else f"{instances} x {one}")


REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(frozen=True)
class ServeConfig:
    deployment: Deployment = field(default_factory=Deployment)
    host: str = option("127.0.0.1", "Address to listen on.")
    port: int = option(8000, "0 picks a free port (printed at start).", min=0)
    speed: float = option(1.0, "Run the modeled hardware this many times faster.", gt=0)
    served_model_name: str = option("", "Default: the preset's model name.")
    faults: FaultConfig = field(default_factory=FaultConfig)
    truth_log: str | None = option(None, "JSONL of true per-request times.")
    reasoning_share: float = option(0.0, "Chat answers stream this share as reasoning first.", min=0, max=1)
    reasoning_field: str = option("reasoning_content", "reasoning_content or reasoning (vLLM's newer name).")
    answers: str = option("tokens", "What the model answers: tokens (its modeled words, a function of the prompt) "
                          "or eval (also each bundled eval problem answered right, `bench --eval`; SPEC 6).",
                          choices=("tokens", "eval"))
    request_timeout_s: float = option(30.0, "Seconds a client has to send a request's head and body (and an idle "
                                      "connection stays).", gt=0)

    def __post_init__(self):
        check_bounds(self)
        if self.reasoning_field not in REASONING_FIELDS:
            raise AgentxError(f"reasoning field must be one of {', '.join(REASONING_FIELDS)}, got {self.reasoning_field!r}")


# The layout of `published_config`: a client that reads another version does not guess at it.
PUBLISHED_CONFIG_VERSION = 1


def published_config(cfg: ServeConfig) -> dict:
    """Every setting of a served sim that changes its modeled timing, as plain JSON (`/version`'s
    `config`): the deployment with its engine config, and the faults. A client rebuilds the same
    `Deployment` from it to replay its plan in virtual time (bench's twin, SPEC section 3). Left out:
    what only changes wall time or the wire (`speed`, host, port, timeouts, the served name, the
    truth log, reasoning in chat answers)."""
    return {"version": PUBLISHED_CONFIG_VERSION, "deployment": asdict(cfg.deployment), "faults": asdict(cfg.faults)}
