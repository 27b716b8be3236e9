"""The cache-correctness probe against the simulated engine (a real server process)."""

import asyncio
import json
import subprocess
import sys

import pytest

from agentx.engine.launch import sim_server
from agentx.metrics.tables import probe_line
from agentx.replay.probe import ProbeConfig, probe_cache
from agentx.traces.load import load_sessions
from tests.conftest import WEKA
from tests.engine.test_server import MODEL, metrics


@pytest.fixture(scope="module")
def sessions():
    return load_sessions([WEKA], None)


def probe(url, sessions, **kw):
    return asyncio.run(probe_cache(ProbeConfig(url=url, model=MODEL, probes=4, **kw), sessions))


def test_a_correct_cache_gives_no_mismatch(sessions):
    with sim_server("--speed", "50") as url:
        result = probe(url, sessions)
    assert result["probes"] == 4 and result["errors"] == 0 and result["mismatches"] == 0
    for p in result["items"]:  # every warm answer really read its prefix from the cache
        assert p["match"] and p["tier"] == "gpu" and p["isl"] - 16 <= p["prefix"] < p["isl"]
    assert probe_line(result) == "cache probe: 0 mismatches in 4 probes"


def test_corrupted_cache_blocks_are_detected(sessions, tmp_path):
    with sim_server("--speed", "50", "--fault-rate", "1", "--fault-kinds", "corrupt") as url:
        result = probe(url, sessions)
        out = tmp_path / "probe.json"
        cli = subprocess.run([sys.executable, "-m", "agentx.cli", "probe", "cache", "--url", url, "--probes", "2",
                              "--traces", str(WEKA), "--json", str(out)], capture_output=True, text=True)
    assert result["mismatches"] == 4 and result["errors"] == 0
    bad = result["items"][0]
    assert bad["match"] is False and bad["prefix"] > 0 and bad["cold"] != bad["warm"]
    line = probe_line(result)
    assert line.startswith("cache probe: 4 mismatches in 4 probes; first: session ") and "tier gpu" in line
    assert cli.returncode == 1 and "2 mismatches in 2 probes" in cli.stdout  # the model was discovered
    assert json.loads(out.read_text())["mismatches"] == 2


def test_flushed_prefix_falls_back_to_the_cpu_tier_and_still_matches(sessions):
    # a GPU tier of 32,768 tokens: the flush traffic evicts the probe's blocks, the CPU tier keeps them
    with sim_server("--speed", "50", "--num-gpu-blocks-override", "2048", "--max-model-len", "32768",
                    "--cpu-offload-gb", "400") as url:
        result = probe(url, sessions, max_isl=20_000, flush_tokens=40_000)
        m = metrics(url)
    assert result["mismatches"] == 0 and result["errors"] == 0
    assert all(p["tier"] == "flushed" and p["prefix"] > 0 for p in result["items"])
    # the warm answers' prefixes came back from the CPU tier
    assert m["vllm:external_prefix_cache_hits_total"] >= sum(p["prefix"] for p in result["items"]) * 0.9
