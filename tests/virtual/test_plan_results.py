"""`agentx sim plan` as a user runs it: every point in the results database (a deployment per
configuration, a sweep per configuration) that `agentx frontier` lists, and the plan's HTML report
whose charts draw the points of plan.json (figure JSON here, Chromium in the browser test)."""

import json
import re

import pytest
from sqlalchemy import func, select

from fastapi.testclient import TestClient

from agentx.report.pages import add_pages
from agentx.results.api import create_app
from agentx.results.db import connect
from agentx.results.schema import deployments, point_blobs, points, sweeps
from tests.report.browser import assert_every_graph_has_points, chromium_page
from tests.test_cli import agentx

PLAN = """
duration: 40
agreement: 0  # 40 s of a few lanes: a few trees; these points ask no agreement (SPEC 3, spread)
warmup_requests_per_lane: 2
slo: {p90_e2e_normalized_interactivity: 30, p90_ttft_s: 2}
grid:
  concurrency: [1, 3, 8]
  replicas: [1, 2]
"""
CONFIGS = ["8xH200_mem0.9_cpu0_r1-round-robin", "8xH200_mem0.9_cpu0_r2-round-robin"]
SIM_SETTINGS = "profile=vllm.H200.bf16, gpu_memory_utilization=0.9, max_num_seqs=1024, max_num_batched_tokens=8192"  # vLLM's own on H200


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """The plan run once by the CLI into a SQLite database: (plan folder, database URL, stdout)."""
    base = tmp_path_factory.mktemp("plan")
    (base / "plan.yaml").write_text(PLAN)
    db = f"sqlite:///{base / 'results.db'}"
    res = agentx("sim", "plan", base / "plan.yaml", "--out", base / "out", "--db", db, "--workers", "2")
    assert res.returncode == 0, res.stderr
    return base / "out", db, " ".join(res.stdout.split())


def _rows(db: str):
    with connect(db).connect() as conn:
        return conn.execute(select(points, deployments.c.parallelism, deployments.c.router, deployments.c.gpus,
                                   deployments.c.engine_settings, sweeps.c.name.label("sweep"))
                            .join(deployments, points.c.deployment_id == deployments.c.id)
                            .join(sweeps, points.c.sweep_id == sweeps.c.id).order_by(points.c.id)).all()


def test_every_point_is_stored_as_a_simulated_point_of_its_configuration(planned, tmp_path):
    out, db, stdout = planned
    assert "results database: 6 points" in stdout and f"HTML report: {out / 'report.html'}" in stdout
    plan = json.loads((out / "plan.json").read_text())
    rows = _rows(db)
    assert len(rows) == 6 and all(r.status == "ok" and r.simulated and r.valid for r in rows)
    by_config = {name: [r for r in rows if r.sweep.endswith(name)] for name in CONFIGS}
    for name, layout, gpus, router in ((CONFIGS[0], "TP8", 8, None), (CONFIGS[1], "2 x TP8", 16, "round-robin")):
        stored = by_config[name]
        assert [r.concurrency for r in stored] == [1, 3, 8]
        assert {(r.parallelism, r.gpus, r.router, r.engine_settings) for r in stored} == {
            (layout, gpus, router, SIM_SETTINGS)}
        curve = next(a for a in plan["answers"] if a["config"] == name)["curve"]
        for r, p in zip(stored, curve):  # the database's columns are the answer's figures
            assert r.tput_per_gpu == pytest.approx(p["tok_s_per_gpu"]) and r.p90_ttft == pytest.approx(p["p90_ttft"])
            assert r.p90_e2e_norm_intvty == pytest.approx(p["p90_norm"])
            assert r.run_dir == str((out / name / f"c{p['concurrency']}").resolve())
    assert len({r.deployment_id for r in rows}) == 2  # a deployment per configuration
    with connect(db).connect() as conn:
        assert conn.execute(select(sweeps.c.status)).scalars().all() == ["finished", "finished"]

    # 40 s of 1 to 8 lanes: under 10 session trees or a TTFT p50 interval over 100 % wide, so by
    # default (SPEC 3, "Settled: confidence") no point is on a frontier: each is listed apart
    low = agentx("frontier", "--db", db)
    assert low.returncode == 0, low.stderr
    apart = re.findall(r"low confidence, no answer: point (\d+)", low.stdout)
    assert sorted(map(int, apart)) == [r.id for r in rows], low.stdout
    assert "session trees would narrow it to the limit" in " ".join(low.stdout.split())
    listed = agentx("frontier", "--db", db, "--spread-limit", "0")  # no bound: the frontier as drawn before
    assert listed.returncode == 0, listed.stderr
    layout = {r.id: (r.concurrency, r.parallelism) for r in rows}
    shown = re.findall(r"^\s*(\d+)\s*\S\s*(\d+)\s*\S.*?\S\s*((?:2 x )?TP8)\s*\S", listed.stdout, re.M)
    assert len(shown) >= 2 and all(layout[int(i)] == (int(c), par) for i, c, par in shown), listed.stdout

    # `agentx serve`'s frontier page draws every stored point (a marker per engine, SPEC section 9)
    engine = connect(db)
    app = create_app(engine, writable=False)
    add_pages(app, engine)
    page = TestClient(app).get("/").text
    links = json.loads(re.search(r'"links":(\{[^}]*\})', page).group(1))
    assert sorted(map(int, links)) == [r.id for r in rows]

    # the same plan again (another folder): its points replace the earlier ones, with the same figures
    (tmp_path / "plan.yaml").write_text(PLAN)
    again = agentx("sim", "plan", tmp_path / "plan.yaml", "--out", tmp_path / "again", "--db", db, "--workers", "2")
    assert again.returncode == 0, again.stderr
    latest = _rows(db)
    assert len(latest) == 6 and not {r.id for r in latest} & {r.id for r in rows}
    assert all(r.run_dir.startswith(str((tmp_path / "again").resolve())) for r in latest)
    assert [(r.sweep_id, r.concurrency, r.tput_per_gpu, r.p90_ttft) for r in latest] == \
        [(r.sweep_id, r.concurrency, r.tput_per_gpu, r.p90_ttft) for r in rows]
    with connect(db).connect() as conn:
        assert conn.execute(select(func.count()).select_from(point_blobs)).scalar() == 6 * 4  # no orphans


def _figures(html: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S).group(1))


def test_the_report_draws_the_plans_curves_slo_and_answer(planned):
    out, _, _ = planned
    plan = json.loads((out / "plan.json").read_text())
    html = (out / "report.html").read_text()
    assert "<script src=" not in html and "Plotly" in html  # self-contained
    figures = _figures(html)
    kinds = ("throughput", "interactivity", "ttft", "cache")
    assert set(figures) == {"frontier"} | {f"c{i}-{k}" for i in range(2) for k in kinds}
    for i, answer in enumerate(plan["answers"]):
        assert answer["config"] in html
        curve = answer["curve"]
        levels = [p["concurrency"] for p in curve]
        tput = figures[f"c{i}-throughput"]["data"][0]
        assert tput["x"] == levels and tput["y"] == [p["tok_s_per_gpu"] for p in curve]
        for kind, key, threshold in (("interactivity", "p90_norm", 30), ("ttft", "p90_ttft", 2)):
            data = {t["name"]: t for t in figures[f"c{i}-{kind}"]["data"]}
            line = next(t for n, t in data.items() if n.startswith("SLO"))
            assert line["y"] == [threshold, threshold]
            assert next(t for n, t in data.items() if n not in (line["name"],) and not n.startswith("answer"))["y"] == \
                [p[key] for p in curve]
            marker = [t for n, t in data.items() if n.startswith("answer")]
            best = answer["max_concurrency"]
            assert (marker[0]["x"] == [best]) if best else not marker
        cache = {t["name"]: t for t in figures[f"c{i}-cache"]["data"]}
        assert cache["measured hit rate %"]["y"] == pytest.approx([p["hit_rate"] * 100 for p in curve])
        assert f"{answer['kv_capacity_tokens']:,} tokens" in figures[f"c{i}-cache"]["layout"]["title"]["text"]
    frontier = {t["name"]: t for t in figures["frontier"]["data"]}
    for answer in plan["answers"]:
        assert frontier[answer["config"]]["text"] == [f"c{p['concurrency']}" for p in answer["curve"]]
    best = frontier["frontier over every configuration"]
    assert best["x"] == sorted(best["x"]) and len(best["x"]) >= 2


def test_the_plan_report_in_chromium(planned, tmp_path):
    out, _, _ = planned
    with chromium_page() as page:
        page.page.goto((out / "report.html").as_uri())
        page.page.wait_for_function("document.body.dataset.drawn === 'yes'")
        assert_every_graph_has_points(page, {"frontier"} | {f"c{i}-{k}" for i in range(2)
                                                            for k in ("throughput", "interactivity", "ttft", "cache")})
        for g in page.graphs():  # every trace draws (an empty one would be a chart with a missing curve)
            assert all(n > 0 for n in g["points"]), g
        assert page.errors == []
        page.page.screenshot(path=tmp_path / "plan.png", full_page=True)


def test_a_bad_plan_json_is_named(tmp_path):
    (tmp_path / "plan.json").write_text('{"slo": {}}')
    res = agentx("report", tmp_path, "--html")
    assert res.returncode == 2 and "plan.json: field 'answers' missing" in " ".join(res.stderr.split())
