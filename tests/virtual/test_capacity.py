"""`agentx sim plan`: the SLO answer from a small grid, locally and on a local Ray instance."""

import json

import pytest

from agentx.errors import AgentxError
from agentx.virtual.capacity import load_plan, run_plan

PLAN = """
duration: 40
agreement: 0  # 40 s of 1 and 3 lanes: a tree or three; the SLO answer is what this asks (SPEC 3, spread)
warmup_requests_per_lane: 2
slo: {p90_e2e_normalized_interactivity: 30, p90_ttft_s: 2}
grid:
  concurrency: [1, 3]
  hardware: [H200]
  spec_decode: [none, {method: eagle3, draft_tokens: 3, acceptance_length: 2.4}]
"""


@pytest.fixture()
def plan(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN)
    return load_plan(path)


def test_plan_answers_the_slo_question_locally_and_on_ray_with_identical_points(plan, tmp_path):
    local = run_plan(plan, tmp_path / "local", workers=2)
    assert [a["config"] for a in local] == ["8xH200_mem0.9_cpu0_r1-round-robin",
                                             "8xH200_mem0.9_cpu0_r1-round-robin_eagle3-k3-al2.4"]
    for a in local:
        assert [p["concurrency"] for p in a["curve"]] == [1, 3]
        ok = [p["concurrency"] for p in a["curve"] if p["valid"] and p["p90_norm"] >= 30 and p["p90_ttft"] <= 2]
        assert a["max_concurrency"] == (max(ok) if ok else None)
        assert (tmp_path / "local" / a["config"] / "c3" / "result.json").exists()
    plain, spec = local
    assert spec["curve"][0]["p90_norm"] > 1.5 * plain["curve"][0]["p90_norm"]  # what speculation buys at 1 lane
    pytest.importorskip("ray")
    on_ray = run_plan(plan, tmp_path / "ray", ray_address="local")
    assert [a["curve"] for a in on_ray] == [a["curve"] for a in local]
    assert json.loads((tmp_path / "ray" / "plan.json").read_text())["answers"][0]["curve"] == local[0]["curve"]


def test_bad_plans_name_the_problem(tmp_path):
    path = tmp_path / "p.yaml"
    for text, problem in (("grid: {concurrency: []}", "grid.concurrency"),
                          ("grid: {concurrency: [1], colour: [red]}", "unknown keys colour"),
                          ("grid: {concurrency: [1], hardware: [H9000]}", "unknown hardware preset"),
                          ("grid: {concurrency: [1], router: [random]}", "unknown router")):
        path.write_text(text)
        with pytest.raises(AgentxError, match=problem):
            load_plan(path)
