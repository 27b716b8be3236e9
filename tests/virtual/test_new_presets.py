"""The Llama-3.1-405B and Llama 4 model presets and GB300 / MI325X power: they load, their
architecture reaches the roofline as the preset says, and a short `sim bench` runs on each
(real virtual-time runs)."""

import io
import json

import pytest
from rich.console import Console

from agentx.engine import presets
from agentx.engine.config import EngineConfig
from agentx.engine.timing import Roofline
from agentx.errors import AgentxError
from tests.test_cli import agentx


def test_llama4_keeps_full_kv_only_on_its_global_layers():
    """Chunked-attention layers keep at most one 8k chunk: only the NoPE (global) layers, one in
    four, count per token; routed experts are what the total adds over the active path."""
    for key, experts in (("llama-4-scout", 16), ("llama-4-maverick", 128)):
        m = presets.model(key)
        assert (m.layers, m.kv_layers, m.experts, m.experts_per_token) == (48, 12, experts, 1)
        roof = Roofline(EngineConfig(hardware="H200", gpus=8, model=key, precision="fp8"))
        assert roof.kv_bytes_per_token == m.kv_layers * 1 * m.head_dim * 2 * 1  # one KV head per GPU at TP8, fp8
        assert roof.expert_params == pytest.approx((m.params_total - m.params_active) / (1 - 1 / experts))
        assert roof.kv_capacity_tokens > 1_000_000
    assert "approximation" in presets.model("llama-4-maverick").sources


def test_llama_405b_fits_eight_h100_in_fp8_only():
    with pytest.raises(AgentxError, match="leaves no KV cache"):
        Roofline(EngineConfig(hardware="H100", gpus=8, model="llama-3.1-405b", precision="bf16"))
    roof = Roofline(EngineConfig(hardware="H100", gpus=8, model="llama-3.1-405b", precision="fp8"))
    assert roof.kv_bytes_per_token == 126 * 1 * 128 * 2 * 1
    assert roof.weight_bytes == pytest.approx(405.85e9)


@pytest.mark.parametrize("hardware, gpus, model, precision, more", [
    ("GB300", 8, "llama-4-maverick", "nvfp4", ()),
    # Scout's 10M context does not fit one GPU's KV: served as vLLM is, with a shorter max length
    ("MI325X", 1, "llama-4-scout", "fp8", ("--max-model-len", "131072")),
    ("H200", 8, "llama-3.1-405b", "fp8", ()),
])
def test_a_short_sim_bench_runs_on_each_new_preset(tmp_path, hardware, gpus, model, precision, more):
    res = agentx("sim", "bench", "--scenario", "1000:100", "--concurrency", "2", "--duration", "10",
                 "--hardware", hardware, "--gpus", str(gpus), "--model", model, "--precision", precision,
                 *more, "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["requests"]["succeeded"] == result["requests"]["profiled"] > 0
    power, hw = result["power"], presets.hardware(hardware)
    assert power["valid"] and power["gpus"] == gpus
    for g in power["per_gpu"]:  # each modeled GPU draws between its idle figure and its TDP
        assert hw.idle_w <= g["avg_w"] <= g["peak_w"] <= hw.tdp_w


def test_sim_presets_shows_one_preset_with_its_sources():
    res = agentx("sim", "presets", "llama-4-scout")
    assert res.returncode == 0, res.stderr
    assert "27aa76b887ca4015fd017774c9537b8754033438" in res.stdout and "10,485,760" in res.stdout
    assert {"llama-3.1-405b", "llama-4-scout", "llama-4-maverick"} <= set(presets.model_names())
    for key, tdp, idle in (("GB300", "1,400", "194.5"), ("MI325X", "1,000", "138.9")):
        console = Console(width=300, record=True, file=io.StringIO())
        console.print(presets.source_table(key))
        rows = {line.split("│")[1].strip(): line for line in console.export_text().splitlines() if line.count("│") > 2}
        assert tdp in rows["tdp_w"] and idle in rows["idle_w"] and "B200" in rows["idle_w"], key
    bad = agentx("sim", "presets", "H900")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "unknown preset 'H900'" in bad.stderr
