"""A new user's first hour (issue #28), in virtual time and on files: a request rate, a sweep
folder's table and report, two runs compared, incomplete run folders skipped, --version, help on
every option, list options, progress lines in a log."""

import csv
import json
import shutil
import subprocess
import sys

import pytest

from agentx.replay.plan import PlanConfig, ReplayPlan
from agentx.traces.graph import build_graph
from agentx.traces.load import load_sessions
from tests.conftest import WEKA


def agentx(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """`sim bench --concurrency 2,4` in virtual time: a sweep folder of two runs."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    res = agentx("sim", "bench", "--traces", WEKA / "trace_0291.json", "--concurrency", "2,4", "--duration", "120",
                 "--warmup-requests-per-lane", "1", "--out", out)
    assert res.returncode == 0, res.stderr
    assert "virtual time " in res.stdout  # the progress line, in a log too
    return out


def test_request_rate_constant_in_virtual_time(tmp_path):
    out = tmp_path / "rate"
    res = agentx("sim", "bench", "--scenario", "1k1k", "--request-rate", "4", "--arrival", "constant", "--duration",
                 "30", "--slo", "ttft:1000", "--out", out)
    assert res.returncode == 0, res.stderr
    records = [r for r in csv.DictReader(open(out / "records.csv")) if r["phase"] == "profile"]
    starts = sorted(float(r["planned"]) for r in records)
    assert len(starts) == 120 and all(abs(b - a - 0.25) < 1e-9 for a, b in zip(starts, starts[1:]))
    result = json.loads((out / "result.json").read_text())
    assert result["identity"]["request_rate"] == 4 and result["identity"]["arrival"] == "constant"
    assert result["identity"]["concurrency"] is None
    good = result["request_metrics"]["goodput"]
    assert good["met"] == sum(float(r["ttft"]) <= 1.0 for r in records) and good["of"] == 120
    assert "request rate 4/s (constant)" in res.stdout
    assert agentx("sim", "bench", "--request-rate", "4", "--concurrency", "2,4").returncode == 2


def test_poisson_arrivals_are_seeded_and_have_the_rate():
    graphs = [build_graph(s) for s in load_sessions([WEKA])]

    def starts(seed):
        plan = ReplayPlan(graphs, PlanConfig(concurrency=1, duration=2000.0, seed=seed, mode="schedule",
                                             request_rate=2.0, warmup=False))
        plan.start(0.0)
        return sorted(t.origin for t in plan.trees.values())

    a, b = starts(0), starts(1)
    assert a == starts(0) and a != b
    gaps = [y - x for x, y in zip(a, a[1:])]
    assert len(a) == pytest.approx(4000, rel=0.05) and sum(gaps) / len(gaps) == pytest.approx(0.5, rel=0.05)
    # exponential gaps: their spread is their mean (a constant rate has none)
    mean = sum(gaps) / len(gaps)
    assert (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5 == pytest.approx(mean, rel=0.1)


def test_report_and_compare_on_a_sweep(sweep, tmp_path):
    res = agentx("report", sweep)  # a sweep folder: the sweep's table
    assert res.returncode == 0, res.stderr
    assert "c2" in res.stdout and "c4" in res.stdout and not (sweep / "report.html").exists()
    # agentx sweep's layout (DEPLOYMENT/cN), an incomplete run among them
    nested = tmp_path / "recipe"
    for dep in ("sim-a", "sim-b"):
        shutil.copytree(sweep, nested / dep)
    failed = json.loads((nested / "sim-b" / "c4" / "run.json").read_text())
    (nested / "sim-b" / "c4" / "run.json").write_text(json.dumps({**failed, "status": "failed", "error": "boom"}))
    res = agentx("report", nested, "--html")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert all(name in text for name in ("sim-a/c2", "sim-a/c4", "sim-b/c2")) and "sim-b/c4" not in text
    assert (nested / "report.html").exists() and (nested / "sweep.csv").read_text().count("\n") == 4
    res = agentx("compare", sweep / "c2", sweep / "c4")
    assert res.returncode == 0, res.stderr
    a, b = (json.loads((sweep / c / "result.json").read_text()) for c in ("c2", "c4"))
    ta, tb = (r["request_metrics"]["ttft_s"]["p50"] * 1000 for r in (a, b))
    row = next(line for line in res.stdout.splitlines() if "TTFT p50 ms" in line)
    assert f"{ta:,.1f}" in row and f"{tb:,.1f}" in row and f"{(tb - ta) / ta * 100:+.1f}%" in row


def test_db_import_skips_incomplete_runs_with_a_note(sweep, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(sweep / "c2", runs / "ok")
    shutil.copytree(sweep / "c4", runs / "failed")
    info = json.loads((runs / "failed" / "run.json").read_text())
    (runs / "failed" / "run.json").write_text(json.dumps({**info, "status": "failed", "error": "no tokenizer"}))
    shutil.copytree(sweep / "c4", runs / "killed")
    (runs / "killed" / "result.json").unlink()
    res = agentx("db", "import", runs / "ok", runs / "failed", runs / "killed", "--db", tmp_path / "r.db")
    assert res.returncode == 2 and res.stderr.splitlines()[-1] == (
        "error: imported 1 (1 new, 0 already stored), skipped 2: 2 incomplete"), res.stderr
    assert "stored as point 1" in res.stdout
    notes = [line for line in res.stderr.splitlines() if line.startswith("skipped")]
    assert notes == [f"skipped {runs / 'failed'}: incomplete, the run failed (no tokenizer); nothing to store",
                     f"skipped {runs / 'killed'}: incomplete, no result.json (a killed run?): "
                     f"`agentx report {runs / 'killed'}` writes it"]


def test_version_and_help_on_every_option():
    import typer.main

    from agentx.cli import app
    from agentx.replay.folder import agentx_version

    res = agentx("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"agentx {agentx_version()}"

    def options(command, path=()):
        for name, sub in (getattr(command, "commands", None) or {}).items():
            yield from options(sub, (*path, name))
        for p in command.params:
            if p.param_type_name == "option":
                yield " ".join(path), p.opts[0], p.help

    missing = [(cmd, opt) for cmd, opt, text in options(typer.main.get_command(app)) if not text]
    assert missing == []


def test_options_that_take_lists(tmp_path):
    from agentx.cli import expand_lists

    assert expand_lists(["capture", "import", "--claude", "a", "b", "--codex", "c", "--out", "o"]) == [
        "capture", "import", "--claude", "a", "--claude", "b", "--codex", "c", "--out", "o"]
    assert expand_lists(["bench", "--traces", "a", "b"]) == ["bench", "--traces", "a", "b"]
    from tests.capture.agentlogs_files import claude_store
    from tests.capture.tokenizer import train_tokenizer

    expect = [claude_store(tmp_path / d)["sessions"] for d in ("one", "two")]
    tok = train_tokenizer(tmp_path / "tok.json")
    res = agentx("capture", "import", "--claude", tmp_path / "one", tmp_path / "two", "--tokenizer", tok,
                 "--out", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert len(list((tmp_path / "out" / "traces").iterdir())) == sum(expect)


def test_capture_export_of_nothing_says_so(tmp_path):
    from agentx.capture.export import ExportReport, report_lines

    report = ExportReport()
    report.dropped["over_max_context"] = 3
    assert "  dropped over_max_context 3" in report_lines(report)  # (was `over_max_context3`)


def test_a_late_look_still_sends_what_fell_due_in_the_window():
    """A busy client that looks only after the window closed still sends the arrivals due in it
    (late, as their dispatch lateness will say), and nothing due at or after its end."""
    from agentx.replay.scenarios import scenario_sessions

    graphs = [build_graph(s) for s in scenario_sessions("1k1k", 64, 1)]
    plan = ReplayPlan(graphs, PlanConfig(concurrency=1, duration=10.0, mode="schedule", request_rate=2.0,
                                         arrival="constant", warmup=False))
    plan.start(0.0)
    early, late = plan.due(3.0), plan.due(12.0)
    assert [d.planned for d in early + late] == [k * 0.5 for k in range(20)] and plan.phase == "done"
