"""Interchange: an AIPerf artifact set (made by AIPerf 0.13.0 itself against the sim, checked in
under data/aiperf) imports as a point; a point exports as InferenceX's flat AgentX row."""

import json
import shutil
from pathlib import Path

import pytest

from agentx.errors import AgentxError
from agentx.results.aiperf import import_aiperf
from agentx.results.db import connect
from agentx.results.frontier import frontier, load_points
from agentx.results.importer import import_paths
from agentx.results.inferencex import export_row, inferencex_row
from agentx.results.query import Filters

AIPERF = Path(__file__).parent / "data" / "aiperf"


def aiperf_summary() -> dict:
    return json.loads((AIPERF / "profile_export_aiperf.json").read_text())


def test_aiperf_artifacts_import_as_a_point(db_url):
    engine = connect(db_url)
    done = import_aiperf(engine, AIPERF, {"hardware": "H200", "gpus": 8, "engine": "agentx-sim"})
    assert done.new and not import_aiperf(engine, AIPERF, {"hardware": "H200", "gpus": 8, "engine": "agentx-sim"}).new
    row = export_row(engine, done.point_id)
    ref = aiperf_summary()
    for stat, key in (("median", "p50"), ("p75", "p75"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"),
                      ("mean", "avg"), ("std", "std")):
        assert row[f"{stat}_ttft"] * 1000 == pytest.approx(ref["time_to_first_token"][key], rel=1e-9), stat
        assert row[f"{stat}_e2el"] * 1000 == pytest.approx(ref["request_latency"][key], rel=1e-9), stat
    # agentx's throughput window is AIPerf's benchmark_duration (first start .. last end)
    duration = ref["benchmark_duration"]["avg"]
    assert row["output_tput"] == pytest.approx(ref["total_osl"]["avg"] / duration, rel=1e-6)
    assert row["input_tput"] == pytest.approx(ref["total_isl"]["avg"] / duration, rel=1e-6)
    assert row["tput_per_gpu"] == pytest.approx((ref["total_isl"]["avg"] + ref["total_osl"]["avg"]) / duration / 8,
                                                 rel=1e-6)
    assert row["profiled_requests"] == ref["request_count"]["avg"] and row["error_requests"] == 0
    assert row["theoretical_cache_hit_rate"] == pytest.approx(ref["theoretical_prefix_cache_hit"]["avg"] / 100)
    assert row["server_gpu_cache_hit_rate"] == pytest.approx(ref["overall_usage_prompt_cache_read_pct"]["avg"] / 100)
    assert row["model"] == ref["input_config"]["models"]["items"][0]["name"] and row["conc"] == 4


def test_aiperf_and_agentx_points_of_one_deployment_are_a_curve_per_workload(tmp_path, sweep_dir):
    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    import_paths(engine, [sweep_dir])
    import_aiperf(engine, AIPERF, {"hardware": "H200", "gpus": 8, "engine": "agentx-sim vllm profile (virtual time)"})
    rows = load_points(engine, Filters(hardware="H200"), "p90_ttft", "tput_per_gpu")
    assert sorted({r["source"] for r in rows}) == ["agentx", "aiperf"]
    # same model, hardware and engine, but AIPerf's dataset is not the bundled traces: a curve each
    curves = frontier(rows, "p90_ttft", "tput_per_gpu", spread_limit=0)
    assert len(curves) == 2 and len({c.key["workload"] for c in curves}) == 2
    for curve in curves:
        assert curve.key["engine"] == "agentx-sim vllm profile (virtual time)"
        shown = curve.rows + curve.invalid  # (the AIPerf point is NOT VALID: off its curve, listed apart)
        assert len({r["source"] for r in shown}) == 1 and all(r["workload"] == curve.key["workload"] for r in shown)


def test_bad_aiperf_folders(tmp_path):
    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    with pytest.raises(AgentxError, match="no profile_export.jsonl"):
        import_aiperf(engine, tmp_path, {})
    bad = tmp_path / "bad"
    shutil.copytree(AIPERF, bad)
    lines = (bad / "profile_export.jsonl").read_text().splitlines()
    lines[2] = '{"metadata": {}}'
    (bad / "profile_export.jsonl").write_text("\n".join(lines))
    with pytest.raises(AgentxError, match=r"profile_export.jsonl: line 3: field metadata.request_start_ns: missing"):
        import_aiperf(engine, bad, {})


def test_inferencex_row_of_an_agentx_point(tmp_path, sweep_dir):
    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    point = import_paths(engine, [sweep_dir / "c2"])[0].point_id
    row = export_row(engine, point)
    result = json.loads((sweep_dir / "c2" / "result.json").read_text())
    rm = result["request_metrics"]
    assert row["hw"] == "H200" and row["conc"] == 2 and row["framework"] == "agentx-sim vllm profile (virtual time)" and row["num_gpus"] == 8
    assert row["median_ttft"] == rm["ttft_s"]["p50"] and row["p90_intvty"] == rm["interactivity_tok_s"]["p90"]
    assert row["median_tpot"] == rm["itl_s"]["p50"] and "median_itl" not in row  # no per-chunk gaps kept
    assert row["p90_e2e_norm_intvty"] == rm["e2e_normalized_interactivity_tok_s"]["p90"]
    assert row["tput_per_gpu"] == rm["throughput"]["total_tok_s_per_gpu"]
    power = result["power"]  # measured (bench --power on the sim's DCGM series)
    assert row["power_valid"] is True and row["power_source"] == power["source"]
    assert row["avg_power_w"] == power["avg_w"] and row["joules_per_output_token"] == power["joules_per_output_token"]
    assert row["tok_s_per_mw"] == power["total_tok_s_per_mw"]
    unmeasured = inferencex_row({**result, "power": {"valid": False, "source": None}}, {})
    assert unmeasured["power_valid"] is False and "avg_power_w" not in unmeasured
    with pytest.raises(AgentxError, match="point 99: not in the results database"):
        export_row(engine, 99)


def _edited_aiperf(tmp_path, name: str, edit) -> Path:
    folder = tmp_path / name
    shutil.copytree(AIPERF, folder)
    path = folder / "server_metrics_export.json"
    export = json.loads(path.read_text())
    edit(export["metrics"])
    path.write_text(json.dumps(export))
    return folder


@pytest.mark.parametrize("edit", [
    lambda m: m["vllm:kv_cache_usage_perc"].update(series=[]),  # the gauge with no series
    lambda m: [s["stats"].clear() for s in m["vllm:kv_cache_usage_perc"]["series"]],  # series without their stats
], ids=["no-series", "no-stats"])
def test_aiperf_kv_usage_the_export_does_not_give_stays_absent(tmp_path, edit):
    """Issue #46: the import stored a KV usage of 0.0 the file never gave."""
    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    done = import_aiperf(engine, _edited_aiperf(tmp_path, "a", edit), {"hardware": "H200", "gpus": 8})
    with engine.connect() as conn:
        stored, result = conn.exec_driver_sql("SELECT kv_usage_mean, result FROM points WHERE id = ?",
                                              (done.point_id,)).one()
    server = json.loads(result)["server_metrics"]
    assert stored is None and "kv_usage_mean" not in server and "kv_usage_max" not in server
    assert "kv_usage" in server["missing"]
    assert export_row(engine, done.point_id)["gpu_kv_cache_usage_pct"] is None
    full = import_aiperf(connect(f"sqlite:///{tmp_path / 'full.db'}"), AIPERF, {"hardware": "H200", "gpus": 8})
    with connect(f"sqlite:///{tmp_path / 'full.db'}").connect() as conn:  # the untouched export gives it
        assert conn.exec_driver_sql("SELECT kv_usage_mean FROM points WHERE id = ?",
                                    (full.point_id,)).scalar() == pytest.approx(0.00018840448351914007)


def test_a_start_time_that_is_no_date_is_one_line_naming_file_and_field(tmp_path, sweep_dir):
    import subprocess
    import sys

    bad = tmp_path / "aiperf"
    shutil.copytree(AIPERF, bad)
    summary = aiperf_summary()
    (bad / "profile_export_aiperf.json").write_text(json.dumps({**summary, "start_time": "2026-13-45T99:99:99"}))
    run = tmp_path / "c2"
    shutil.copytree(sweep_dir / "c2", run)
    result = json.loads((run / "result.json").read_text())
    result["provenance"]["start_time"] = "2026-13-45T99:99:99"
    (run / "result.json").write_text(json.dumps(result))
    for args, file, field in ((("db", "import-aiperf", bad), bad / "profile_export_aiperf.json", "start_time"),
                              (("db", "import", run), run / "result.json", "provenance.start_time")):
        res = subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, args), "--db", str(tmp_path / "r.db")],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert res.stderr.startswith(f"error: {file}: field {field}: not an ISO 8601 date and time "
                                     f"('2026-13-45T99:99:99'"), res.stderr
    assert not (tmp_path / "r.db").exists() or "points" not in str(
        subprocess.run([sys.executable, "-m", "agentx.cli", "db", "points", "--db", str(tmp_path / "r.db")],
                       capture_output=True, text=True, timeout=120).stdout.splitlines()[1:])
