import math
from dataclasses import fields

import pytest

from agentx.engine import presets
from agentx.engine.config import EngineConfig
from agentx.engine.timing import Roofline, Work, overlap
from agentx.errors import AgentxError

NUMERIC_HW = [f.name for f in fields(presets.Hardware) if f.type == "float"]


def test_presets_cover_the_required_hardware_and_model_kinds():
    assert {"H100", "H200", "B200", "B300", "GB200", "MI300X", "MI355X"} <= set(presets.hardware_names())
    models = [presets.model(k) for k in presets.model_names()]
    kinds = {(m.attention, bool(m.experts)) for m in models}
    assert {("gqa", False), ("gqa", True), ("mla", True)} <= kinds
    assert all(m.vocab >= 32_000 for m in models)


def test_every_preset_number_names_its_source():
    for key in presets.hardware_names():
        hw = presets.hardware(key)
        for name in NUMERIC_HW:
            # 0: no FP4 tensor cores, or power unknown (no capture: the sim publishes no power), sourced as such
            assert getattr(hw, name) > 0 or name == "fp4_flops" or (
                name in ("tdp_w", "idle_w") and hw.sources.get(name, "").startswith("unknown")), (key, name)
            assert len(hw.sources.get(name, "")) > 20, (key, name)
    for key in presets.model_names():
        m = presets.model(key)
        numbers = [f.name for f in fields(m) if f.type in ("int", "float") and getattr(m, f.name)]
        assert {"layers", "hidden", "heads", "params_total", "params_active", "max_context", "vocab"} <= set(numbers)
        for name in numbers:
            assert len(m.sources.get(name, "")) > 10, (key, name)


def test_unknown_preset_is_a_one_line_error():
    with pytest.raises(AgentxError, match="unknown hardware preset 'H900'; known: B200"):
        presets.hardware("H900")


def test_offload_beats_recompute_as_in_the_seed_arithmetic():
    """32k-token prefix, 70B dense on 8 x H200 at the seed's MFU 0.3: reload ~0.32 s from DRAM vs
    ~2.5 s of matmuls and attention plus ~0.5 s of TP8 all-reduces to recompute."""
    roof = Roofline(EngineConfig(hardware="H200", gpus=8, model="llama-3.1-70b", mfu=0.3))
    reload = roof.transfer_s(32_768)
    work = Work()
    work.add(0, 32_768)
    recompute = roof.iteration_s(work)
    assert reload == pytest.approx(0.32, rel=0.2)
    assert recompute - roof.collective_s(32_768) == pytest.approx(2.5, rel=0.2)
    assert roof.collective_s(32_768) == pytest.approx(0.48, rel=0.1)
    assert recompute / reload > 6


def test_kv_capacity_is_hbm_share_minus_weights():
    cfg = EngineConfig(hardware="H200", gpus=8, model="llama-3.1-70b", gpu_memory_utilization=0.9)
    roof = Roofline(cfg)
    per_token = 80 * 1 * 128 * 2 * 2  # layers x KV heads per GPU x head dim x (K, V) x bf16
    free = 143_771 * 2**20 * 0.9 - 70.6e9 * 2 / 8  # the H200's memory as nvidia-smi reads it
    assert roof.kv_bytes_per_token == per_token
    assert roof.kv_capacity_tokens == int(free // per_token)
    # MLA keeps one latent per token and replicates it on every rank
    mla = Roofline(EngineConfig(model="deepseek-v3", precision="fp8"))
    assert mla.kv_bytes_per_token == 61 * (512 + 64)


def test_weights_that_do_not_fit_are_refused():
    with pytest.raises(AgentxError, match="leaves no KV cache"):
        Roofline(EngineConfig(hardware="H100", gpus=1, model="llama-3.1-70b"))


def test_time_grows_with_uncached_tokens_and_decode_is_memory_bound():
    roof = Roofline(EngineConfig())
    times = []
    for n in (1_000, 4_000, 16_000):
        w = Work()
        w.add(0, n)
        times.append(roof.iteration_s(w))
    assert times[0] < times[1] < times[2]
    w = Work()
    w.add(0, 16_000)
    assert roof.compute_s(w) > roof.memory_s(w)  # prefill: compute bound
    d = Work()
    d.add(2_000, 1)
    assert roof.memory_s(d) > roof.compute_s(d)  # decode: memory bound
    # batching a dense model's decodes is nearly free until the KV reads dominate (a MoE model's
    # decodes touch more experts as the batch grows: 8 decodes of the default Qwen3-235B-A22B read
    # about 6 x the expert weights of one)
    dense = Roofline(EngineConfig(model="llama-3.1-70b"))
    d8 = Work()
    for _ in range(8):
        d8.add(2_000, 1)
    assert dense.iteration_s(d8) < 1.2 * dense.iteration_s(d)
    assert roof.weight_bytes_per_gpu(8) > 4 * roof.weight_bytes_per_gpu(1)
    assert math.isclose(roof.iteration_s(Work()), 0.0)


def test_compute_and_memory_combine_as_their_norm():
    """Far from the ridge point the larger time binds; at it, both count (kernels overlap their
    loads and math only in part); norm 1 adds them, a large norm takes the larger."""
    assert overlap(1.0, 0.01, 2.5) == pytest.approx(1.0, rel=1e-4)
    assert overlap(1.0, 1.0, 2.5) == pytest.approx(2 ** 0.4)
    assert overlap(1.0, 1.0, 1.0) == 2.0
    assert overlap(0.3, 0.0, 2.5) == 0.3
    w = Work()
    for _ in range(64):  # a decode batch near the ridge of the dense 70B model on one H200
        w.add(1_500, 1)
    cfg = dict(model="llama-3.1-70b", hardware="H200", gpus=1, precision="fp8")
    base = Roofline(EngineConfig(**cfg))
    c, m, overhead = base.compute_s(w), base.memory_s(w), base.overhead_s
    at = {p: Roofline(EngineConfig(**cfg, roofline_norm=p)).iteration_s(w) for p in (1.0, 2.5, 100.0)}
    assert at[1.0] == pytest.approx(c + m + overhead)
    assert at[100.0] == pytest.approx(max(c, m) + overhead, rel=1e-2)
    assert at[100.0] < at[2.5] < at[1.0]
    with pytest.raises(AgentxError, match="roofline_norm 0.5 is below 1"):
        Roofline(EngineConfig(roofline_norm=0.5))


def test_cpu_loads_add_their_transfer_time():
    roof = Roofline(EngineConfig(cpu_offload_gb=100))
    w = Work()
    w.add(32_000, 1)
    base = roof.iteration_s(w)
    w.loaded_tokens = 32_000
    assert roof.iteration_s(w) == pytest.approx(base + roof.transfer_s(32_000))
    assert roof.cpu_capacity_tokens == int(100e9 // (roof.kv_bytes_per_token * 8))
    with pytest.raises(AgentxError, match="exceeds the host DRAM"):
        Roofline(EngineConfig(cpu_offload_gb=1e6))


def test_routed_expert_flops_count_one_over_moe_efficiency():
    """The active routed experts' FLOPs run at moe_efficiency of the dense GEMMs' rate; a dense
    model's compute does not depend on it."""
    kw = dict(hardware="H200", gpus=8, model="gpt-oss-120b", precision="mxfp4", mfu=0.4)
    full, half = Roofline(EngineConfig(**kw, moe_efficiency=1.0)), Roofline(EngineConfig(**kw, moe_efficiency=0.5))
    w = Work(new_tokens=4096)
    experts = full.expert_params * full.k_over_e  # active routed params
    extra = 2 * experts * 4096 / (8 * full.peak_flops * 0.4)  # their FLOPs once more at efficiency 0.5
    assert half.compute_s(w) == pytest.approx(full.compute_s(w) + extra)
    assert experts == pytest.approx(full.model.params_active - full.dense_params)
    dense = dict(hardware="H200", gpus=8, model="llama-3.1-70b", mfu=0.4)
    assert Roofline(EngineConfig(**dense, moe_efficiency=0.5)).compute_s(w) == \
        Roofline(EngineConfig(**dense, moe_efficiency=1.0)).compute_s(w)


def test_experts_only_fp4_checkpoint_runs_its_dense_matmuls_at_the_bf16_rate():
    """gpt-oss keeps attention, router and embeddings in BF16: on B200 their FLOPs run at the BF16
    peak (2.25 PFLOPS), the routed experts' at the FP4 one (9 PFLOPS); a checkpoint quantized
    throughout (Llama FP4) runs all its matmuls at the FP4 rate."""
    w = Work(new_tokens=8192)
    oss = Roofline(EngineConfig(hardware="B200", gpus=1, model="gpt-oss-120b", precision="nvfp4", mfu=0.5,
                                moe_efficiency=1.0))
    dense, experts = oss.dense_params, oss.expert_params * oss.k_over_e
    assert oss.compute_s(w) == pytest.approx(2 * 8192 * (dense / 2.25e15 + experts / 9e15) / 0.5)
    llama = Roofline(EngineConfig(hardware="B200", gpus=1, model="llama-3.1-70b", precision="nvfp4", mfu=0.5))
    assert llama.compute_s(w) == pytest.approx(2 * 8192 * llama.model.params_active / (9e15 * 0.5))
    hopper = Roofline(EngineConfig(hardware="H200", gpus=1, model="gpt-oss-120b", precision="mxfp4", mfu=0.5))
    assert hopper.dense_flops == hopper.peak_flops == presets.hardware("H200").bf16_flops  # weight-only FP4


def _decodes(n: int, context: int) -> Work:
    work = Work()
    for _ in range(n):
        work.add(context, 1)
    return work


def _prompts(n: int, tokens: int) -> Work:
    work = Work()
    for _ in range(n):
        work.add(0, tokens)
    return work


def test_pipeline_stages_differ_from_tp8_in_the_physically_expected_directions():
    """PP2 x TP4 against TP8 on the same 8 GPUs: every GPU holds an eighth of the weights either way,
    but a token crosses both stages one after the other, each stage's all-reduces span 4 GPUs and
    half the layers, and one sequence cannot be split into micro-batches (the bubble)."""
    tp8 = Roofline(EngineConfig(hardware="H200", gpus=8, model="llama-3.1-70b", precision="fp8"))
    pp2 = Roofline(EngineConfig(hardware="H200", gpus=8, pp=2, model="llama-3.1-70b", precision="fp8"))
    assert "PP2 x TP4" in pp2.describe() and "TP8" in tp8.describe()
    assert (pp2.tp, pp2.stage_layers) == (4, 40)
    assert pp2.kv_capacity_tokens == tp8.kv_capacity_tokens  # 8 KV heads: one per GPU either way
    # a stage's all-reduces: 4 GPUs, 40 layers
    assert pp2.collective_s(4096) < tp8.collective_s(4096) / 2
    # memory-bound decode: each of the two micro-batches reads its stage's weights, one stage after the other
    decode = _decodes(64, 2000)
    assert pp2.iteration_s(decode) > tp8.iteration_s(decode)
    assert pp2.iteration_s(_decodes(1, 2000)) > 1.5 * tp8.iteration_s(_decodes(1, 2000)) - tp8.overhead_s
    # one long prompt: one micro-batch, so only one stage works at a time (the bubble) ...
    lone = _prompts(1, 8192)
    assert pp2.iteration_s(lone) > tp8.iteration_s(lone)
    compute = pp2.compute_s(lone)  # (the whole model's FLOPs over 8 GPUs: TP8's)
    assert compute == pytest.approx(tp8.compute_s(lone))
    assert pp2.pipeline_s(lone) >= 2 * compute
    # ... two prompts fill it: the same FLOPs as TP8 on all 8 GPUs, with smaller all-reduces
    two = _prompts(2, 4096)
    assert pp2.iteration_s(two) < tp8.iteration_s(two)
    assert pp2.pipeline_s(two) < pp2.pipeline_s(_prompts(1, 8192))


def test_pipeline_stages_hold_their_layers_kv_so_mla_gains_capacity():
    """MLA's latent is replicated on every TP rank: two stages of half the layers each hold about
    half the KV per token per GPU (61 layers: the larger stage has 31), so about twice the tokens."""
    tp8 = Roofline(EngineConfig(hardware="H200", gpus=8, model="deepseek-r1", precision="fp8"))
    pp2 = Roofline(EngineConfig(hardware="H200", gpus=8, pp=2, model="deepseek-r1", precision="fp8"))
    assert pp2.kv_bytes_per_token == pytest.approx(tp8.kv_bytes_per_token * 31 / 61)
    assert 1.8 < pp2.kv_capacity_tokens / tp8.kv_capacity_tokens < 2.0


def test_pipeline_stages_must_split_the_gpus_and_the_layers():
    with pytest.raises(AgentxError, match="does not split into --pp 3"):
        EngineConfig(gpus=8, pp=3)
    with pytest.raises(AgentxError, match="layers to split"):
        Roofline(EngineConfig(hardware="H200", gpus=128, pp=128, model="llama-3.1-70b", precision="fp8"))
