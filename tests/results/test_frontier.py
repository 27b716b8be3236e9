"""Frontiers: Pareto sets against a brute-force definition, the canonical-winner policy, the
monotone interpolation, and `agentx frontier` on real points."""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentx.errors import AgentxError
from agentx.results.frontier import CANONICAL, X_METRICS, Curve, at_x, frontier, interpolate, pareto

finite = st.floats(min_value=0.01, max_value=1000, allow_nan=False)


def point(i, **metrics):
    return {"id": i, "model": "m", "hardware": "H200", "engine": "e", **metrics}


def dominated(r, rows, x, y):
    sign = X_METRICS[x]
    return any(o[y] >= r[y] and sign * o[x] >= sign * r[x] and (o[y] > r[y] or o[x] != r[x]) for o in rows)


@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=30), st.sampled_from(sorted(X_METRICS)))
@settings(max_examples=200, deadline=None)
def test_pareto_is_the_non_dominated_set(values, x):
    rows = [point(i, **{x: a, "tput_per_gpu": b}) for i, (a, b) in enumerate(values)]
    on = pareto(rows, x, "tput_per_gpu")
    ids = {r["id"] for r in on}
    assert all(not dominated(r, rows, x, "tput_per_gpu") for r in on)
    # every non-dominated point is there, or an equal twin of it is
    for r in rows:
        if not dominated(r, rows, x, "tput_per_gpu"):
            assert any(o[x] == r[x] and o["tput_per_gpu"] == r["tput_per_gpu"] for o in on if o["id"] in ids)
    ys = [r["tput_per_gpu"] for r in on]
    assert ys == sorted(ys)  # from the best x to the worst, y only grows


@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=30))
@settings(max_examples=100, deadline=None)
def test_joules_per_token_frontier_minimizes_y(values):
    """J per token is lower-is-better: the frontier of y is the frontier of -y turned back."""
    x, y = "p90_e2e_norm_intvty", "joules_per_output_token"
    rows = [point(i, **{x: a, y: b, "neg": -b}) for i, (a, b) in enumerate(values)]
    on = pareto(rows, x, y)
    assert [(r[x], r[y]) for r in on] == [(r[x], -r["neg"]) for r in pareto(rows, x, "neg")]
    ys = [r[y] for r in on]
    assert ys == sorted(ys, reverse=True)  # from the best x to the worst, J per token only falls


def test_other_views_keep_only_canonical_winners():
    rows = [point(1, p90_e2e_norm_intvty=50, p90_ttft=0.5, tput_per_gpu=100),
            point(2, p90_e2e_norm_intvty=20, p90_ttft=2.0, tput_per_gpu=300),
            # best TTFT but dominated on the canonical view (less throughput and less interactivity than 1)
            point(3, p90_e2e_norm_intvty=40, p90_ttft=0.1, tput_per_gpu=90)]
    (canonical,) = frontier(rows, *CANONICAL)
    assert [r["id"] for r in canonical.points] == [1, 2]
    assert [r["id"] for r in pareto(rows, "p90_ttft", "tput_per_gpu")] == [3, 1, 2]
    (ttft,) = frontier(rows, "p90_ttft", "tput_per_gpu")
    assert [r["id"] for r in ttft.points] == [1, 2]


def test_curves_per_deployment_and_overall():
    rows = [point(1, p90_e2e_norm_intvty=50, tput_per_gpu=100), point(2, p90_e2e_norm_intvty=20, tput_per_gpu=300),
            {**point(3, p90_e2e_norm_intvty=40, tput_per_gpu=400), "hardware": "B200"}]
    curves = frontier(rows, *CANONICAL)
    assert [(c.key["hardware"], [r["id"] for r in c.points]) for c in curves] == [("B200", [3]), ("H200", [1, 2])]
    (overall,) = frontier(rows, *CANONICAL, per_curve=False)
    assert [r["id"] for r in overall.points] == [1, 3]
    with pytest.raises(AgentxError, match="x: unknown metric 'p91'"):
        frontier(rows, "p91", "tput_per_gpu")


def test_monotone_interpolation():
    x, y = CANONICAL
    curve = Curve({}, [point(i, **{x: a, y: b}) for i, (a, b) in enumerate([(10, 900), (20, 500), (40, 100), (80, 5)])])
    assert interpolate(curve, x, y, 10) == pytest.approx(900) and interpolate(curve, x, y, 80) == pytest.approx(5)
    grid = [10 + i * 0.5 for i in range(141)]
    values = [interpolate(curve, x, y, v) for v in grid]
    assert all(a >= b for a, b in zip(values, values[1:]))  # no overshoot between knots
    assert all(v >= 0 for v in values)
    assert interpolate(curve, x, y, 9.9) is None and interpolate(curve, x, y, 81) is None
    assert interpolate(Curve({}, []), x, y, 10) is None


def test_invalid_points_are_never_on_a_curve_nor_winners():
    x, y = CANONICAL
    rows = [point(1, valid=True, concurrency=4, **{x: 50.0, y: 100.0}),
            point(2, valid=False, reasons=["the cache probe found 3 answers that differ warm from cold"],
                  concurrency=4, **{x: 60.0, y: 500.0}),  # would dominate point 1
            point(3, valid=None, concurrency=8, **{x: 20.0, y: 300.0})]  # unknown (an import): kept
    (curve,) = frontier(rows, x, y)
    assert [r["id"] for r in curve.points] == [1, 3] and [r["id"] for r in curve.invalid] == [2]
    (ttft_view,) = frontier([{**r, "p90_ttft": 1.0} for r in rows], "p90_ttft", y)
    assert 2 not in {r["id"] for r in ttft_view.points}  # not a canonical winner either


def test_y_at_x_stays_within_one_deployment_and_names_it():
    """Two deployments (1 and 2 replicas): "at x" interpolates only along one of them, answers
    with a measured point that meets x where no interpolation reaches, and names the winner."""
    x, y = CANONICAL
    one = [point(10 + i, deployment_id=1, gpus=8, parallelism="TP8", concurrency=c, **{x: a, y: b})
           for i, (c, a, b) in enumerate([(4, 80.0, 100.0), (16, 45.0, 300.0), (32, 30.0, 400.0)])]
    two = [point(20 + i, deployment_id=2, gpus=16, parallelism="2 x TP8", concurrency=c, **{x: a, y: b})
           for i, (c, a, b) in enumerate([(8, 90.0, 150.0), (32, 20.0, 450.0)])]
    (curve,) = frontier(one + two, x, y)
    mid = at_x(curve, x, y, 60.0)  # both interpolate; deployment 2 gives more
    assert mid["interpolated"] and mid["deployment_id"] == 2 and mid["concurrency"] == [32, 8]
    assert "16 GPUs" in mid["configuration"] and "2 x TP8" in mid["configuration"]
    exact = at_x(curve, x, y, 45.0)  # deployment 1's c16 meets it exactly (300); deployment 2 interpolates higher
    assert exact["deployment_id"] == 2 and exact["interpolated"] and exact["value"] > 300.0
    low = at_x(curve, x, y, 10.0)  # every point meets x = 10: the best measured y, no interpolation
    assert not low["interpolated"] and low["value"] == 450.0 and low["concurrency"] == [32]
    assert at_x(curve, x, y, 95.0) is None  # no point reaches it
    only_one = frontier(one, x, y)[0]
    assert at_x(only_one, x, y, 45.0) == {"value": 300.0, "interpolated": False, "point_ids": [11],
                                          "concurrency": [16], "deployment_id": 1, "configuration": "8 GPUs, TP8"}


def test_y_at_x_of_a_lower_is_better_y_is_the_least():
    """J or $ per token at x: the cheapest point meeting x answers, not the dearest."""
    x, y = "p90_e2e_norm_intvty", "usd_per_m_tok_neocloud"
    rows = [point(i, deployment_id=1, concurrency=c, valid=True, tput_per_gpu=t, p90_e2e_norm_intvty=a, **{y: b})
            for i, (c, a, b, t) in enumerate([(4, 80.0, 3.0, 100.0), (16, 45.0, 1.0, 300.0), (32, 30.0, 0.8, 400.0)])]
    (curve,) = frontier(rows, x, y)
    low = at_x(curve, x, y, 20.0)  # every point meets it: the least $ per M tokens
    assert low["value"] == 0.8 and low["concurrency"] == [32] and not low["interpolated"]
    assert at_x(curve, x, y, 45.0)["value"] == 1.0


def test_frontier_command_on_real_points(tmp_path, sweep_dir):
    db = str(tmp_path / "r.db")
    run = lambda *a: subprocess.run([sys.executable, "-m", "agentx.cli", *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=120)
    assert run("db", "import", str(sweep_dir), "--db", db).returncode == 0
    res = run("frontier", "--db", db, "--at", "1")
    assert res.returncode == 0, res.stderr
    printed = " ".join(res.stdout.split())  # (rich wraps long lines)
    assert "H200 / agentx-sim vllm profile (virtual time) / " in printed and "/ bf16 / " in printed  # the curve's key
    assert ": tput_per_gpu against p90_e2e_norm_intvty" in printed
    assert "tput_per_gpu at p90_e2e_norm_intvty = 1" in printed
    joules = run("frontier", "--db", db, "--y", "joules_per_output_token")  # measured (bench --power)
    assert joules.returncode == 0 and "joules_per_output_token against p90_e2e_norm_intvty" in " ".join(joules.stdout.split())
    bad = run("frontier", "--db", db, "--y", "watts")
    assert bad.returncode == 2 and "y: unknown metric 'watts'" in bad.stderr


def test_low_sample_points_are_marked_on_the_dashboards_rows(tmp_path, sweep_dir):
    """SPEC §3: `low sample` (fewer than 30 successful profiled requests) is shown on the dashboard:
    each stored point's row carries it, as its run's result.json says."""
    import json

    from agentx.results.db import connect
    from agentx.results.frontier import load_points
    from agentx.results.query import Filters

    db = tmp_path / "r.db"
    res = subprocess.run([sys.executable, "-m", "agentx.cli", "db", "import", str(sweep_dir), "--db", str(db)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = {r["concurrency"]: r for r in load_points(connect(f"sqlite:///{db}"), Filters(), *CANONICAL)}
    for c in (2, 6):
        validity = json.loads((sweep_dir / f"c{c}" / "result.json").read_text())["validity"]
        assert rows[c]["low_sample"] is validity["low_sample"]
        assert rows[c]["requests_ok"] == validity["sample"]


def test_a_175_percent_wide_p50_is_not_an_answer():
    """Issue #43: a point whose TTFT p50 interval is 175 % wide (40 session trees) is kept off the
    curve and "y at x" by default (SPEC 3, "Settled: confidence"), listed apart with the trees it
    would need; a narrow point answers; a bound the user sets wider lets it answer."""
    x, y = CANONICAL
    narrow = {"trees": 40, "ttft_s": {"p50": {"width_rel": 0.3}, "p90": {"width_rel": 0.2}}}
    wide = {"trees": 40, "ttft_s": {"p50": {"width_rel": 1.75}, "p90": {"width_rel": 0.2}}}
    rows = [point(1, deployment_id=1, concurrency=8, spread=narrow, **{x: 50.0, y: 100.0}),
            point(2, deployment_id=1, concurrency=16, spread=wide, **{x: 60.0, y: 500.0})]  # would dominate 1
    (curve,) = frontier(rows, x, y)
    assert [r["id"] for r in curve.points] == [1] and [r["id"] for r in curve.low_confidence] == [2]
    why = curve.low_confidence[0]["confidence"]
    assert why["low"] and why["figure"] == "TTFT p50" and why["need_trees"] == 490  # 40 x (1.75 / 0.5)^2
    assert "175% wide" in why["text"] and "490 session trees" in why["text"]
    assert at_x(curve, x, y, 55.0) is None  # only the wide point reaches x = 55: no answer
    assert at_x(curve, x, y, 40.0)["point_ids"] == [1]
    (lax,) = frontier(rows, x, y, spread_limit=2.0)
    assert [r["id"] for r in lax.points] == [2] and at_x(lax, x, y, 55.0)["point_ids"] == [2]
    few = [point(3, spread={"trees": 9, "ttft_s": {"p50": {"width_rel": 0.1}}}, **{x: 1.0, y: 1.0})]
    assert frontier(few, x, y)[0].low_confidence[0]["confidence"]["need_trees"] == 10  # under 10 trees: low


def test_a_scenario_point_never_joins_an_agentic_trace_curve(tmp_path):
    """Issue #43: one deployment run on the bundled traces and on a 2000:200 scenario (virtual time):
    two curves, one per workload, per deployment and over all deployments; the scenario's 0.2 s p90
    TTFT never answers "tok/s per GPU at p90 TTFT <= 1 s" for the traces, and the CLI names each workload."""
    from agentx.results.db import connect
    from agentx.results.frontier import load_points
    from agentx.results.importer import import_paths
    from agentx.results.query import Filters

    run = lambda *a: subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, a)], capture_output=True,  # noqa: E731
                                    text=True, timeout=300)
    for args in (("--scenario", "2000:200", "--duration", "300"), ("--duration", "900", "--drain")):
        res = run("sim", "bench", *args, "--concurrency", "64", "--out", tmp_path / args[1].replace(":", "x"),
                  "--agreement", "0")
        assert res.returncode == 0, res.stderr
    engine = connect(f"sqlite:///{tmp_path / 'r.db'}")
    import_paths(engine, [tmp_path / "2000x200", tmp_path / "900"])
    rows = load_points(engine, Filters(), "p90_ttft", "tput_per_gpu")
    assert len(rows) == 2 and len({r["deployment_id"] for r in rows}) == 1  # one deployment, two workloads
    for per_curve in (True, False):
        curves = {c.key["workload"]: c for c in frontier(rows, "p90_ttft", "tput_per_gpu", per_curve=per_curve)}
        assert sorted(curves) == ["2000:200", "bundled WEKA sample"]
        for name, curve in curves.items():
            assert [r["workload"] for r in curve.points] == [name]
        scenario, traces = curves["2000:200"].points[0], curves["bundled WEKA sample"].points[0]
        assert scenario["p90_ttft"] < 1.0 < traces["p90_ttft"]
        assert at_x(curves["bundled WEKA sample"], "p90_ttft", "tput_per_gpu", 1.0) is None
        assert at_x(curves["2000:200"], "p90_ttft", "tput_per_gpu", 1.0)["point_ids"] == [scenario["id"]]
    res = run("frontier", "--db", tmp_path / "r.db", "--x", "p90_ttft", "--at", "1")
    printed = " ".join(res.stdout.split())
    assert res.returncode == 0 and "workload 2000:200" in printed and "workload bundled WEKA sample" in printed
    assert printed.count("tput_per_gpu at p90_ttft = 1") == 2, printed


def test_a_spread_limit_near_zero_still_answers_with_the_trees_it_needs():
    """A limit of 1e-178 (schemathesis found it on /api/v1/frontier) squared the width over the limit
    past a float: now the trees it would need are bounded, and the point is low confidence."""
    from agentx.metrics.confidence import confidence

    c = confidence({"trees": 40, "ttft_s": {"p50": {"width_rel": 0.3}, "p90": {"width_rel": 0.2}}}, 4.39e-178)
    assert c["low"] and c["need_trees"] >= 40 * 10**12 and "session trees would narrow it" in c["text"]
