"""The KV tiers over HTTP: `bench` against a real `agentx sim serve` with DRAM and an SSD tier;
the tier series on /metrics and in the result's server metrics (SPEC §3, §6)."""

import json
import urllib.request

from agentx.engine.launch import sim_server
from agentx.metrics.scrape import parse_samples
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.weka import read_weka
from tests.conftest import WEKA

SPEED = 50


def test_bench_shows_bytes_written_and_hits_by_tier_on_metrics(tmp_path):
    session = read_weka(WEKA / "trace_0291.json")[0]  # main + 2 subagents
    with sim_server("--speed", str(SPEED), "--gpu-memory-utilization", "0.55", "--cpu-offload-gb", "20",
                    "--ssd-drives", "8", "--kv-policy", "retain") as url:
        bench(BenchSettings.build(url=url, concurrency=2, duration=300, out=str(tmp_path / "run"), clock_scale=SPEED,
                                  warmup=False, grace=5, idle_cap=5, system_idle_cap=1, hints="harness"),
              [session])
        text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    samples = parse_samples(text)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["requests"]["succeeded"] >= 10
    sm = result["server_metrics"]

    def value(name: str, **labels) -> float:
        keys = [k for k in samples if k.split("{")[0] == name and all(f'{a}="{b}"' in k for a, b in labels.items())]
        assert len(keys) == 1, (name, labels, keys)
        return samples[keys[0]]

    dram = value("vllm:kv_offload_total_bytes_total", transfer_type="GPU_to_CPU")
    ssd = value("vllm:kv_offload_total_bytes_total", transfer_type="CPU_to_SSD")
    assert dram > 0 and ssd == dram  # write-through: the SSD (61 TB) writes what DRAM does
    assert value("agentx_sim:kv_store_skipped_bytes_total", tier="DRAM", rule="not_new") > 0  # later turns' prefixes
    assert value("agentx_sim:kv_store_rules") == 1
    hits = {t: value("agentx_sim:prefix_cache_hits_by_tier_total", tier=t) for t in ("HBM", "DRAM", "SSD")}
    assert hits["HBM"] == value("vllm:prefix_cache_hits_total")
    assert hits["DRAM"] + hits["SSD"] == value("vllm:external_prefix_cache_hits_total")
    # the result's window is within the server's life: its figures are at most the final counters
    assert 0 < sm["kv_written_bytes"]["DRAM"] <= dram and sm["kv_written_bytes"]["SSD"] <= ssd
    assert 0 < sm["kv_write_bytes_per_s"]["DRAM"] and 0 < sm["kv_write_link_busy"]["DRAM"] < 1
    last = json.loads((tmp_path / "run" / "server_metrics.jsonl").read_text().splitlines()[-1])["samples"]
    assert any(k.startswith("agentx_sim:prefix_cache_hits_by_tier_total{") for k in last)
    by_tier = sm["hit_rate_by_tier"]
    assert set(by_tier) == {"HBM", "DRAM", "SSD"}
    assert by_tier["HBM"] == sm["prefix_hit_rate"]
