"""Done-when of issue #31: `agentx bench --power dcgm:URL` against `agentx sim serve` prints
J/token and measured tok/s per MW that equal the sim's modeled energy over the window.

The truth is the sim's own energy model, logged in its truth log as each request arrived and
ended (`energy_j`: all GPUs, modeled joules). Over the throughput window (first profiled start
to last profiled end) the modeled energy is E(last end) - E(first arrival); divided by the
window it is the true average draw, and true J per output token = that draw / the output tok/s.
bench's figures come another way: DCGM samples scraped from /metrics every second, the energy
counter's increase between the reads that bound the profiling window, per GPU and summed."""

import json
import subprocess
import sys

import pytest

from agentx.engine.launch import sim_server
from agentx.records import read_records
from tests.conftest import WEKA, ran_but_for_host_timing

SPEED = 20


def run_bench(*args):
    return subprocess.run([sys.executable, "-m", "agentx.cli", "bench", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_bench_power_dcgm_matches_the_sims_modeled_energy(tmp_path):
    truth_log, out = tmp_path / "truth.jsonl", tmp_path / "run"
    with sim_server("--speed", str(SPEED), "--truth-log", str(truth_log)) as url:
        res = run_bench("--url", url, "--traces", WEKA, "--concurrency", 4, "--duration", 120, "--out", out,
                        "--clock-scale", SPEED, "--gpus", 8, "--hardware", "H200", "--grace", 20,
                        "--warmup-requests-per-lane", 2, "--power", f"dcgm:{url}/metrics")
    # at speed 20 a loaded host may make the run NOT VALID for host timing only; energy is modeled either way
    assert ran_but_for_host_timing(res.returncode, out), res.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    p, tp = result["power"], result["request_metrics"]["throughput"]
    assert p["valid"], p["reasons"]
    assert p["source"] == f"dcgm:{url}/metrics" and p["gpus"] == 8 and p["method"] == "counter"
    assert tp["power_valid"] is True

    records = [r for r in read_records(out) if r.phase == "profile" and r.error is None]
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    mine = {f"{run_id}-{r.tree}-{r.node}" for r in records}
    truth = [json.loads(line) for line in truth_log.read_text().splitlines()]
    truth = [t for t in truth if t.get("correlation_id") in mine]  # (not a stall's line)
    assert len(truth) == len(records) and all("energy_j" in t for t in truth)
    window = max(r.end for r in records) - min(r.start for r in records)  # modeled seconds
    energy = max(t["energy_j"]["end"] for t in truth) - min(t["energy_j"]["arrival"] for t in truth)
    true_w = energy / window
    assert 8 * 77.71 < true_w < 8 * 700  # between idle and TDP of 8 H200s
    true_j_per_out = true_w / tp["output_tok_s"]
    true_tok_s_per_mw = tp["total_tok_s"] * 1e6 / true_w
    assert p["joules_per_output_token"] == pytest.approx(true_j_per_out, rel=0.01)
    assert p["total_tok_s_per_mw"] == pytest.approx(true_tok_s_per_mw, rel=0.01)
    assert p["avg_w"] == pytest.approx(true_w, rel=0.01)

    # what bench printed is these figures
    printed = " ".join(res.stdout.split())  # (rich wraps long lines)
    assert f"{p['joules_per_output_token']:,.3f} J per output token" in printed
    assert (f"{p['output_tok_s_per_mw']:,.0f} output and {p['total_tok_s_per_mw']:,.0f} total tok/s per MW "
            "(measured: the GPUs' own draw") in printed
    # the samples are in the run folder, one a second plus the window's two bounds
    lines = (out / "power.jsonl").read_text().splitlines()
    phases = [json.loads(line)["phase"] for line in lines]
    assert phases.count("open") == 1 and phases.count("close") == 1 and phases.count("profile") >= 4
