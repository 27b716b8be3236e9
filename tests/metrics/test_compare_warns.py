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


def test_a_sweep_prints_why_its_points_are_not_valid(tmp_path):
    """`sim bench --concurrency 1,2` of a too-short run (a synthetic corpus's long first turns: no
    request ends in 30 s): the table says "no", a line per point says why."""
    subprocess.run([*CLI, "trace", "synth", "--out", str(tmp_path / "synth"), "--sessions", "6"], check=True,
                   capture_output=True, timeout=120)
    res = subprocess.run([*CLI, "sim", "bench", "--traces", str(tmp_path / "synth"), "--concurrency", "1,2",
                          "--duration", "30", "--out", str(tmp_path / "s")], capture_output=True, text=True, timeout=300)
    lines = [line for line in res.stdout.splitlines() if line.startswith("c") and "NOT VALID:" in line]
    assert [line.split(":")[0] for line in lines] == ["c1", "c2"], res.stdout
    assert all(len(line.split("NOT VALID: ")[1]) > 10 for line in lines)
