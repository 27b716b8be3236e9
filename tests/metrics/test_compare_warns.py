"""`agentx compare A B` warns when the two runs replay different workloads or goodput SLOs (the
table alone read as an engine difference), and says nothing when only the deployment differs."""

import subprocess
import sys

CLI = [sys.executable, "-m", "agentx.cli"]


def _sim(out, *args: str) -> None:
    res = subprocess.run([*CLI, "sim", "bench", "--concurrency", "2", "--duration", "60", "--out", str(out), *args],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode in (0, 3), res.stderr  # 3: NOT VALID (a short run), not what this tests


def _compare(a, b) -> str:
    res = subprocess.run([*CLI, "compare", str(a), str(b)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stderr


def test_compare_warns_on_workload_and_slo(tmp_path):
    _sim(tmp_path / "weka")
    _sim(tmp_path / "sglang", "--engine", "sglang")
    _sim(tmp_path / "scenario", "--scenario", "1k1k", "--slo", "ttft:2000")
    assert "differ" not in _compare(tmp_path / "weka", tmp_path / "sglang")
    warned = _compare(tmp_path / "weka", tmp_path / "scenario")
    assert "dataset: bundled WEKA sample vs" in warned and "scenario: None vs" in warned
    assert "SLO: none vs" in warned and "ttft" in warned
