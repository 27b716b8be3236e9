"""Identity discovered from the simulated engine (a real server process)."""

import asyncio

from agentx import __version__
from agentx.engine.launch import sim_server
from agentx.metrics.identity import discover, merge


def test_the_sim_publishes_engine_version_block_size_and_context():
    with sim_server("--speed", "50", "--block-size", "32", "--max-model-len", "65536") as url:
        found = asyncio.run(discover(url))
    config, source = found.pop("sim_config")  # the whole config, for bench's twin (tests/virtual/test_twin.py)
    assert source == "/version" and config["deployment"]["engine"]["block_size"] == 32
    settings = "H200 x8 qwen3-235b-a22b bf16, block_size=32, max_model_len=65536"  # what differs from the defaults
    assert found == {"engine": ("agentx-sim", "/version"), "engine_version": (__version__, "/version"),
                     "block_size": (32, "/metrics"), "max_model_len": (65536, "/v1/models"),
                     "engine_settings": (settings, "/version"), "precision": ("bf16", "/version")}
    values, sources = merge({"engine": "my-sim", "block_size": None}, found)
    assert values == {"engine": "my-sim", "engine_version": __version__, "block_size": 32, "max_model_len": 65536,
                      "engine_settings": settings, "precision": "bf16"}
    assert sources == {"engine": "user", "engine_version": "server /version", "block_size": "server /metrics",
                       "max_model_len": "server /v1/models", "engine_settings": "server /version",
                       "precision": "server /version"}


def test_every_setting_that_changes_performance_is_in_the_sims_published_settings():
    """Faults, replicas, router, offload and speculative decoding each change what the sim
    publishes as its engine settings (a part of the deployment key)."""
    from agentx.engine.config import Deployment, EngineConfig, ServeConfig
    from agentx.engine.faults import FaultConfig
    from agentx.engine.serve.admin import deployment_settings

    def on(**engine) -> ServeConfig:
        return ServeConfig(deployment=Deployment(EngineConfig(**engine)))

    base = deployment_settings(ServeConfig())
    variants = {
        "faults": ServeConfig(faults=FaultConfig(rate=0.5, kinds=("corrupt",))),
        "replicas": ServeConfig(deployment=Deployment(replicas=2)),
        "router": ServeConfig(deployment=Deployment(replicas=2, router="prefix-aware")),
        "offload": on(cpu_offload_gb=200),
        "spec decode": on(spec_decode="mtp", draft_tokens=1),
        "batching": on(max_num_seqs=64),
    }
    published = {name: deployment_settings(cfg) for name, cfg in variants.items()}
    assert base == "H200 x8 qwen3-235b-a22b bf16" and base not in published.values()
    assert len(set(published.values())) == len(published)
    assert "faults=corrupt@0.5" in published["faults"] and "cpu_offload_gb=200" in published["offload"]


def test_a_server_that_publishes_nothing_gives_nothing(tmp_path):
    import sys

    from tests.realengine.llamacpp import free_port, server_process

    (tmp_path / "index.html").write_text("hello")
    port = free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    with server_process(cmd, f"http://127.0.0.1:{port}", startup_s=30, health="/") as base:
        assert asyncio.run(discover(base)) == {}
