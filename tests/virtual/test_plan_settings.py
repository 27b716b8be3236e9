"""A capacity plan reads `sim bench`'s settings through their declarations: every setting is a key
(at the top or as a grid axis), typed and bounded as declared, and a point is the run `sim bench`
builds from the same settings given as flags."""

from __future__ import annotations

from dataclasses import MISSING

import msgspec
import pytest

from agentx.errors import AgentxError
from agentx.virtual.capacity import config_name, load_plan, point
from agentx.virtual.settings import sim_bench_config, sim_bench_struct

GRID_ONLY = {"concurrency"}  # (the grid's levels; `--concurrency` at the CLI)


def _defaults() -> dict:
    """Each setting a file may give, with its declared default (where it has a value)."""
    from agentx.virtual.settings import SIM_BENCH
    from agentx.options import declared

    out = {}
    names = set(sim_bench_struct().__struct_fields__)
    for item in SIM_BENCH:
        cfg = item[0] if isinstance(item, tuple) else item
        for f in declared(cfg):
            if f.name in names and f.name not in out and f.default is not MISSING and f.default is not None:
                out[f.name] = f.default
    return out


def test_every_sim_bench_setting_is_a_plan_key_and_a_grid_key(tmp_path):
    defaults = _defaults()
    assert {"offline", "scenario", "range_ratio", "max_num_seqs", "engine", "drain", "hints"} <= set(
        sim_bench_struct().__struct_fields__)
    assert len(defaults) > 40
    path = tmp_path / "p.yaml"
    for key, value in defaults.items():
        value = value.value if hasattr(value, "value") else value
        for text in (f"{key}: {msgspec.json.encode(value).decode()}\ngrid: {{concurrency: [1]}}",
                     f"grid: {{concurrency: [1], {key}: [{msgspec.json.encode(value).decode()}]}}"):
            path.write_text(text)
            plan = load_plan(path)  # (and every point checked: the deployment builds)
            assert len(plan.configs) == 1, key


def test_a_grid_of_scenarios_offline_and_batch_caps_is_one_configuration_each(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("duration: 30\nengine: trtllm\ngrid:\n  concurrency: [2]\n  scenario: [1k1k, '512:64']\n"
                    "  range_ratio: [1]\n  max_num_seqs: [64, 128]\n")
    plan = load_plan(path)
    names = [config_name(c) for c in plan.configs]
    assert len(set(names)) == 4 and all("_trtllm-tp_" in n and "scenario-" in n for n in names)
    run = point(plan, plan.configs[-1], 2)
    assert run.deployment.engine.engine == "trtllm" and run.deployment.engine.max_num_seqs == 128
    assert run.corpus.scenario == "512:64" and run.corpus.range_ratio == 1 and run.settings.plan.duration == 30


@pytest.mark.parametrize("text, problem", [
    ("offline: -1\ngrid: {concurrency: [1]}", r"p.yaml: offline: Expected `int` >= 0"),
    ("grid: {concurrency: [1], max_num_seqs: [many]}", r"p.yaml: grid.max_num_seqs\[0\]: Expected `int`, got `str`"),
    ("grid: {concurrency: [1], engine: [tgi]}", r"p.yaml: grid.engine\[0\]: Invalid enum value 'tgi' \(want one of vllm, sglang, trtllm, atom\)"),
    ("grid: {concurrency: [1], offline: []}", r"p.yaml: grid.offline must be a non-empty list"),
    ("engine: trtllm\ngrid: {concurrency: [1], engine: [vllm]}", r"grid.engine: also set at the plan's top"),
    ("range_ratio: 0.5\ngrid: {concurrency: [1]}", r"p.yaml: .*scenario"),  # needs a scenario
    ("grid: {concurrency: [1], gpus: [0]}", r"p.yaml: gpus: must be >= 1"),
])
def test_bad_settings_are_one_line_naming_the_file_and_the_key(tmp_path, text, problem):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(AgentxError, match=problem):
        load_plan(path)


def test_a_plan_point_is_the_run_sim_bench_builds_from_the_same_flags(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("duration: 50\nseed: 4\nscenario: 8k1k\ngrid: {concurrency: [3], hardware: [B200], "
                    "kv_memory: [0.8], engine: [sglang], drain: [true]}\n")
    plan = load_plan(path)
    from_plan = point(plan, plan.configs[0], 3)
    flags = {"duration": 50.0, "seed": 4, "scenario": "8k1k", "hardware": "B200", "gpu_memory_utilization": 0.8,
             "engine": "sglang", "drain": True}
    from_flags = sim_bench_config(flags, [3])
    assert from_plan.deployment == from_flags.deployment and from_plan.corpus == from_flags.corpus
    assert from_plan.settings.flat() == from_flags.settings.flat()


def test_flags_given_to_sim_plan_win_over_the_plans_top_keys_not_over_its_grid(tmp_path, monkeypatch):
    """Three layers, as `sim bench --settings`: the declared defaults, then PLAN.yaml, then the
    flags given on the command line (a flag left at its default does not override the file)."""
    from typer.testing import CliRunner

    import agentx.virtual.capacity as capacity
    from agentx.cli import app

    path = tmp_path / "p.yaml"
    path.write_text("duration: 30\nengine: trtllm\nmax_num_seqs: 64\ngrid:\n  concurrency: [2]\n  gpus: [4, 8]\n")
    plan = load_plan(path, {"duration": 50.0, "max_num_seqs": 32})
    run = point(plan, plan.configs[0], 2)
    assert run.settings.plan.duration == 50.0 and run.deployment.engine.engine == "trtllm"  # (the file's)
    assert run.deployment.engine.max_num_seqs == 32
    assert sorted(c["gpus"] for c in plan.configs) == [4, 8]
    with pytest.raises(AgentxError, match="^--gpus: .*grid varies gpus: give it in one place"):
        load_plan(path, {"gpus": 2})  # a grid axis is the grid's
    seen = []

    def stop(plan_file, flags=None):
        seen.append(flags)
        raise AgentxError("stopped here")

    monkeypatch.setattr(capacity, "load_plan", stop)
    CliRunner().invoke(app, ["sim", "plan", str(path), "--duration", "45", "--engine", "sglang"])
    assert seen == [{"duration": 45.0, "engine": "sglang"}]  # (max_num_seqs, seed, ...: at their defaults, not given)


def test_pipeline_stages_are_a_grid_axis_and_flow_into_the_deployment(tmp_path):
    """`pp` (sim bench --pp) is a grid key: each value its own configuration, named so, and the point
    is the run `sim bench --gpus 8 --pp 2` builds; its label reads PP2 x TP4."""
    path = tmp_path / "p.yaml"
    path.write_text("model: llama-3.1-70b\nprecision: fp8\ngrid: {concurrency: [4], gpus: [8], pp: [1, 2]}\n")
    plan = load_plan(path)
    assert [c["pp"] for c in plan.configs] == [1, 2]
    assert [config_name(c).split("_")[-1] for c in plan.configs] == ["pp-1", "pp-2"]
    run = point(plan, plan.configs[1], 4)
    assert run.deployment.engine.pp == 2 and run.deployment.label() == "PP2 x TP4"
    flags = sim_bench_config({"model": "llama-3.1-70b", "precision": "fp8", "gpus": 8, "pp": 2}, [4])
    assert flags.deployment == run.deployment
    path.write_text("grid: {concurrency: [1], gpus: [8], pp: [3]}\n")
    with pytest.raises(AgentxError, match="p.yaml: .*does not split into --pp 3"):
        load_plan(path)
