"""Frontiers: Pareto sets against a brute-force definition, the canonical-winner policy, the
monotone interpolation, and `agentx frontier` on real points."""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentx.errors import AgentxError
from agentx.results.frontier import CANONICAL, X_METRICS, Curve, frontier, interpolate, pareto

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


def test_frontier_command_on_real_points(tmp_path, sweep_dir):
    db = str(tmp_path / "r.db")
    run = lambda *a: subprocess.run([sys.executable, "-m", "agentx.cli", *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=120)
    assert run("db", "import", str(sweep_dir), "--db", db).returncode == 0
    res = run("frontier", "--db", db, "--at", "1")
    assert res.returncode == 0, res.stderr
    assert "H200 / agentx-sim: tput_per_gpu against p90_e2e_norm_intvty" in res.stdout
    assert "tput_per_gpu at p90_e2e_norm_intvty = 1" in res.stdout
    joules = run("frontier", "--db", db, "--y", "joules_per_output_token")  # measured (bench --power)
    assert joules.returncode == 0 and "joules_per_output_token against p90_e2e_norm_intvty" in joules.stdout
    bad = run("frontier", "--db", db, "--y", "watts")
    assert bad.returncode == 2 and "y: unknown metric 'watts'" in bad.stderr
