"""`agentx report --html` and `agentx demo` as a user runs them (a real subprocess)."""

from pathlib import Path

from tests.conftest import ran_but_for_host_timing
from tests.test_cli import agentx


def test_report_html_of_a_sweep_and_of_a_run(sweep):
    res = agentx("report", sweep, "--html")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == f"HTML report: {sweep / 'report.html'}"
    assert (sweep / "sweep.csv").read_text().count("\n") == 3
    res = agentx("report", sweep / "c2", "--html")
    assert res.returncode == 0, res.stderr
    assert "TTFT ms" in res.stdout and f"HTML report: {sweep / 'c2' / 'report.html'}" in res.stdout


def test_report_html_of_a_folder_without_runs_is_one_line(tmp_path):
    res = agentx("report", tmp_path, "--html")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "neither a run folder" in res.stderr


def test_demo_writes_the_report_and_prints_its_path(tmp_path):
    out = tmp_path / "demo"
    res = agentx("demo", "--concurrency", "2", "--duration", "60", "--speed", "50", "--out", out)
    assert ran_but_for_host_timing(res.returncode, out), res.stderr  # at speed 50 the host's work shows
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith("HTML report: ")
    path = Path(line.removeprefix("HTML report: "))
    assert path == out / "report.html" and "Plotly" in path.read_text()
    printed = " ".join(res.stdout.split())
    assert "power (dcgm:http://127.0.0.1:" in printed and "J per output token" in printed  # the sim's modeled power
