"""`agentx sim bench` as a user runs it: a sweep of virtual runs that `agentx report` reads."""

import json

import pytest

from tests.test_cli import agentx


def test_sim_bench_writes_runs_that_report_summarises(tmp_path):
    out = tmp_path / "runs"
    res = agentx("sim", "bench", "--concurrency", "1,3", "--duration", "60", "--replicas", "2", "--router",
                 "session-affinity", "--out", out)
    assert res.returncode == 0, res.stderr
    assert "sim bench (virtual time): concurrency 3" in " ".join(res.stdout.split())
    for n in (1, 3):
        folder = out / f"c{n}"
        for name in ("run.json", "records.jsonl", "records.parquet", "trees.jsonl", "server_metrics.jsonl"):
            assert (folder / name).exists(), name
        result = json.loads((folder / "result.json").read_text())
        identity = result["identity"]
        assert identity["engine"] == "agentx-sim vllm profile (virtual time)" and identity["gpus"] == 16
        assert identity["simulated"]["replicas"] == 2 and identity["simulated"]["model"] == "qwen3-235b-a22b"
        assert identity["router"] == "session-affinity" and identity["concurrency"] == n
        assert result["validity"]["valid"] and result["requests"]["succeeded"] > 0
        assert result["server_metrics"]["engine"] == "vllm" and result["server_metrics"]["scrapes"] >= 30
        series = [json.loads(line) for line in (folder / "server_metrics.jsonl").read_text().splitlines()]
        assert [row["t"] for row in series] == [float(t) for t in range(len(series))]  # one per modeled second
        assert any('replica="1"' in key for key in series[-1]["samples"])
        # the modeled GPUs' power (DCGM's names) over exactly the window: the first profiling
        # dispatch to the last profiling end, 16 H200s between idle and TDP
        power = result["power"]
        assert power["valid"] and power["gpus"] == 16 and power["method"] == "counter" and power["window"] == "exact"
        assert 16 * 77.71 < power["avg_w"] < 16 * 700 and power["peak_w"] <= 16 * 700 + 1e-6
        tp = result["request_metrics"]["throughput"]
        assert power["joules_per_output_token"] == pytest.approx(power["avg_w"] / tp["output_tok_s"])
        assert abs(power["window_s"] - tp["window_s"]) < 1e-6 * tp["window_s"]  # the same window
        again = agentx("report", folder)
        assert again.returncode == 0 and "valid" in again.stdout
    bad = agentx("sim", "bench", "--router", "random", "--out", tmp_path / "x")
    assert bad.returncode == 2 and "unknown router" in bad.stderr


def test_a_settings_file_sits_over_the_defaults_and_under_the_flags_given(tmp_path):
    settings = tmp_path / "s.yaml"
    settings.write_text("engine: trtllm\nduration: 30\nscenario: 1k1k\nprecision: fp8\nwindow_retention: off\n")
    out = tmp_path / "run"
    res = agentx("sim", "bench", "--settings", settings, "--duration", "20", "--concurrency", "2", "--out", out)
    assert res.returncode == 0, res.stderr
    run = json.loads((out / "run.json").read_text())["settings"]
    assert run["duration"] == 20.0 and run["scenario"] == "1024:1024 r0.8"  # the flag given; the file's
    assert run["engine"] == "agentx-sim trtllm profile (virtual time)" and run["precision"] == "fp8"
    settings.write_text("engine: trtllm\ngrid: {concurrency: [1]}\n")
    bad = agentx("sim", "bench", "--settings", settings, "--out", tmp_path / "x")
    assert bad.returncode == 2 and f"{settings}: grid: unknown key" in " ".join(bad.stderr.split())
    assert not (tmp_path / "x").exists()
