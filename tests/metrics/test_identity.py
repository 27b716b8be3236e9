"""Identity discovered from the simulated engine (a real server process)."""

import asyncio

from agentx import __version__
from agentx.engine.launch import sim_server
from agentx.metrics.identity import discover, merge


def test_the_sim_publishes_engine_version_block_size_and_context():
    with sim_server("--speed", "50", "--block-size", "32", "--max-model-len", "65536") as url:
        found = asyncio.run(discover(url))
    assert found == {"engine": ("agentx-sim", "/version"), "engine_version": (__version__, "/version"),
                     "block_size": (32, "/metrics"), "max_model_len": (65536, "/v1/models"),
                     "precision": ("bf16", "/version")}
    values, sources = merge({"engine": "my-sim", "block_size": None}, found)
    assert values == {"engine": "my-sim", "engine_version": __version__, "block_size": 32, "max_model_len": 65536,
                      "precision": "bf16"}
    assert sources == {"engine": "user", "engine_version": "server /version", "block_size": "server /metrics",
                       "max_model_len": "server /v1/models", "precision": "server /version"}


def test_a_server_that_publishes_nothing_gives_nothing(tmp_path):
    import sys

    from tests.realengine.llamacpp import free_port, server_process

    (tmp_path / "index.html").write_text("hello")
    port = free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    with server_process(cmd, f"http://127.0.0.1:{port}", startup_s=30, health="/") as base:
        assert asyncio.run(discover(base)) == {}
