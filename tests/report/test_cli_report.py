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


def _row(stdout: str, label: str) -> list[str]:
    """The cells of the printed row that starts with `label` (figures right of the label)."""
    line = next(x for x in stdout.splitlines() if x.startswith(label + " ") or x.startswith(label + "  "))
    return line[len(label):].split()


def test_demo_prints_the_frontier_then_one_point_over_http_with_one_verdict_line(tmp_path):
    """A small demo as a user runs it (SPEC section 10, "The demo"): the virtual-time frontier's rows
    are the figures of its run folders, every column is named as in SPEC section 8 with its unit,
    the point over HTTP is printed beside its virtual twin, one verdict line, what to do next, and
    report.html over both parts."""
    import json

    from agentx.cli.demo import FRONTIER_COLUMNS, POINT_COLUMNS

    out = tmp_path / "demo"
    res = agentx("demo", "--frontier", "2,4", "--frontier-duration", "60", "--concurrency", "2", "--duration", "30",
                 "--speed", "50", "--out", out)
    assert ran_but_for_host_timing(res.returncode, out), res.stderr  # at speed 50 the host's work shows
    spec = (Path(__file__).resolve().parents[2] / "docs" / "SPEC.md").read_text()
    section8 = spec[spec.index("## 8. Results database"):spec.index("## 9. ")]
    for name, unit, *_ in FRONTIER_COLUMNS + POINT_COLUMNS:  # each column: its SPEC name, then its unit below
        q, _, rest = name.partition("_")  # section 8 writes `p50|p90_ttft` for p50_ttft and p90_ttft
        assert name in section8 or (q in ("p50", "p90") and f"p50|p90_{rest}" in section8), name
        assert unit in ("ms", "tok/s", "%")
    lines = res.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("lanes "))
    assert lines[head].split() == ["lanes", *(c[0] for c in FRONTIER_COLUMNS), "valid"]
    assert lines[head + 1].split() == [c[1] for c in FRONTIER_COLUMNS]
    for n in (2, 4):  # the printed figures are the run folders' (generated, never typed)
        result = json.loads((out / "virtual" / f"c{n}" / "result.json").read_text())
        cells = _row(res.stdout, f"c{n}")
        assert cells[0] == f"{result['request_metrics']['ttft_s']['p50'] * 1000:,.1f}" and cells[-1] == "yes"
    assert any(x.startswith("  frontier (tput_per_gpu against p90_e2e_norm_intvty") for x in lines)
    run = json.loads((out / "http" / "c2" / "result.json").read_text())
    measured, twin = _row(res.stdout, "c2 over HTTP (measured)"), _row(res.stdout, "c2 virtual twin (no host load moves these)")
    assert measured[0] == f"{run['request_metrics']['ttft_s']['p50'] * 1000:,.1f}"
    assert twin[0] == f"{run['twin']['ttft_p50_s'] * 1000:,.1f}" and len(twin) == len(POINT_COLUMNS)
    verdicts = [x for x in lines if x.startswith("c2 over HTTP: ")]
    assert len(verdicts) == 1 and verdicts[0].split(": ", 1)[1].startswith(("valid", "NOT VALID: "))
    assert (verdicts[0] == "c2 over HTTP: valid") == run["validity"]["valid"]
    assert run["power"]["avg_w"] > 0  # the sim's modeled GPU power, read as from DCGM
    assert lines[-4] == "next:" and "agentx bench --url" in lines[-3]
    report = next(x for x in lines if x.startswith("HTML report"))
    path = Path(report.split(": ", 1)[1])
    assert path == out / "report.html" and "Plotly" in path.read_text()


def test_demo_refuses_a_bad_speed_in_one_line_before_running_anything(tmp_path):
    res = agentx("demo", "--speed", "fast", "--out", tmp_path / "demo")
    assert res.returncode == 2 and res.stderr.strip() == "error: --speed: want a positive number or auto, got 'fast'"
    assert not (tmp_path / "demo").exists()
