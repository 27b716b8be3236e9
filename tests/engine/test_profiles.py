"""Engine profiles: one object per engine, and no module of the simulator compares engine names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentx.engine import presets
from agentx.engine.config import EngineConfig
from agentx.engine.profiles import ENGINES, PROFILES, Admission, EngineName, engine_profile
from agentx.errors import AgentxError

ROOT = Path(__file__).resolve().parents[2] / "agentx"


def test_every_engine_name_has_its_profile_and_is_a_choice_of_engine():
    assert [p.name for p in PROFILES.values()] == [e.value for e in EngineName] == list(ENGINES)
    assert EngineConfig().engine == ENGINES[0]
    for name in ENGINES:
        assert EngineConfig(engine=name).engine == name
    with pytest.raises(AgentxError, match="engine: want one of vllm, sglang, trtllm, atom"):
        EngineConfig(engine="tgi")
    with pytest.raises(AgentxError, match="unknown engine 'tgi'"):
        engine_profile("tgi")


def test_the_profiles_carry_admission_and_the_keys_of_their_constants():
    trt = engine_profile("trtllm")
    assert trt.admission is Admission.NO_EVICT and trt.no_evict
    assert [e for e in ENGINES if engine_profile(e).no_evict] == ["trtllm"]
    assert trt.kv_efficiency_key("gqa") == "trtllm-gqa" and engine_profile("vllm").kv_efficiency_key("gqa") == "gqa"
    assert engine_profile("vllm").overhead_key("0.10") == "vllm-0.10"
    assert engine_profile("vllm").overhead_key("0.10", "amd") == "vllm-0.10-amd"
    # each engine's fitted overhead is the entry its profile names for the GPU's vendor (the default
    # entry where that build has no calibration row: TensorRT-LLM on AMD)
    table = presets._table()["timing"]["overhead_ms"]
    assert "vllm-nvidia" in table and "vllm-amd" in table and "trtllm-amd" not in table
    for name in ENGINES:
        for gpu in ("H200", "MI300X"):
            key = engine_profile(name).overhead_key("", presets.hardware(gpu).vendor)
            want = (table.get(key) or table["default"])["value"]
            assert presets.profile(name, gpu, "fp8", "llama-3.1-70b").overhead_ms == want


def _engine_name_compares(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            consts = [c for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant)]
            if any(c.value in ENGINES for c in consts if isinstance(c.value, str)):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    return found


def test_no_module_of_the_simulator_compares_engine_names():
    """Engine behaviour lives in engine/profiles/: a `cfg.engine == "trtllm"` elsewhere is a
    profile field that was not made."""
    files = [p for d in ("engine", "virtual") for p in sorted((ROOT / d).rglob("*.py")) if "profiles" not in p.parts]
    assert len(files) > 30
    assert [hit for p in files for hit in _engine_name_compares(p)] == []


@pytest.mark.parametrize("engine, hardware, seqs, tokens", [
    ("vllm", "H100", 1024, 8192),  # vLLM's API server on a GPU of >= 70 GiB (arg_utils.get_batch_defaults)
    ("vllm", "B200", 1024, 8192),
    ("sglang", "H200", 2048, 8192),  # --chunked-prefill-size 8,192 under 160 GiB (server_args.py)
    ("sglang", "B200", 2048, 16384),  # ... 16,384 at or above
    ("sglang", "MI300X", 2048, 16384),
    ("trtllm", "B200", 2048, 8192),  # BuildConfig's max_batch_size / max_num_tokens
    ("atom", "MI355X", 512, 16384),  # ATOM's EngineArgs
])
def test_each_engine_runs_with_its_own_batch_defaults_unless_told(engine, hardware, seqs, tokens):
    from agentx.virtual.settings import sim_bench_config

    cfg = EngineConfig(engine=engine, hardware=hardware)
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (seqs, tokens)
    assert engine_profile(engine).defaults_source  # each cited
    told = EngineConfig(engine=engine, hardware=hardware, max_num_seqs=64, max_num_batched_tokens=4096)
    assert (told.max_num_seqs, told.max_num_batched_tokens) == (64, 4096)
    run = sim_bench_config({"engine": engine, "hardware": hardware, "model": "llama-3.1-70b", "precision": "fp8"}, [1])
    assert (run.deployment.engine.max_num_seqs, run.deployment.engine.max_num_batched_tokens) == (seqs, tokens)


def test_an_engines_own_defaults_are_not_a_changed_setting():
    from agentx.engine.config import changed_settings

    assert changed_settings(EngineConfig(engine="sglang", hardware="B200")) == ["engine=sglang"]
    assert "max_num_batched_tokens=8192" in changed_settings(EngineConfig(engine="sglang", hardware="B200",
                                                                          max_num_batched_tokens=8192))
