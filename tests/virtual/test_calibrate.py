"""The calibration table, the scenarios as published runs define them, the parallelism and FP4
arithmetic, and `agentx sim calibrate` on a few rows (real virtual-time runs)."""

import hashlib
import json
import math
from dataclasses import replace

import pytest

from agentx.engine.calibration import held_out_id, implied_gpus, load_table, row_engine, tp_choice
from agentx.engine.profiles import engine_profile
from agentx.engine.config import EngineConfig
from agentx.engine.fit import held_out, predict
from agentx.engine.timing import Roofline
from agentx.errors import AgentxError
from agentx.replay.scenarios import parse_scenario, scenario_sessions
from tests.test_cli import agentx


def test_the_table_covers_what_the_issue_asks_and_every_row_names_its_source():
    """>= 60 scored rows over >= 5 GPUs, >= 3 engines, dense and MoE; a held-out third chosen by the
    row id alone (the rule, not a list: no row can be moved in or out after seeing a fit)."""
    table = load_table()
    modeled = [r for r in table.row if r.modeled]
    assert len(modeled) >= 60
    assert len({r.hardware for r in modeled}) >= 5 and len({r.engine for r in modeled}) >= 3
    assert any(r.moe for r in modeled) and any(not r.moe for r in modeled)
    held = [r for r in modeled if r.held_out]
    assert 0.25 < len(held) / len(modeled) < 0.42 and held_out_id("x") == held_out_id("x")
    assert all(r.held_out == (int(hashlib.sha256(r.id.encode()).hexdigest(), 16) % 3 == 0) for r in modeled)
    for r in table.row:
        src = table.sources[r.source]
        assert src.repo.startswith("SemiAnalysisAI/") and len(src.commit) == 40
        assert r.modeled or r.why_not


def test_deployments_come_from_the_recipe_and_the_published_figures_agree_with_it():
    """Each row runs the smallest swept TP whose weights fit (never one read off its own figures);
    as a check of the copied figures, Little's law on the published TTFT, TPOT, throughput and
    concurrency lands within 10 % of one of the swept TPs for every row."""
    for r in load_table().row:
        if not r.modeled:
            continue
        implied = implied_gpus(r)
        assert min(abs(implied / tp - 1) for tp in r.tp_candidates) < 0.1, r.id
        cfg = row_engine(r)
        assert cfg.gpus in r.tp_candidates and tp_choice(r) == sorted(r.tp_candidates)
        for smaller in (tp for tp in r.tp_candidates if tp < cfg.gpus):  # its weights leave no KV cache
            with pytest.raises(AgentxError, match="leaves no KV cache"):
                Roofline(replace(cfg, gpus=smaller))
        assert cfg.parallelism == ("tep" if r.ep > 1 or cfg.gpus in r.ep_tps else "tp") or r.attention_dp
        # the recipe's cap, else the engine's own (its profile), which never binds at the row's concurrency
        own = engine_profile(r.engine).batch_defaults(Roofline(cfg).hw.hbm_bytes)[0]
        assert cfg.max_num_seqs == (r.max_num_seqs or own) and (r.max_num_seqs or own >= r.concurrency)


def test_leave_one_out_never_fits_a_row_on_itself():
    rows = [r for r in load_table().row if r.modeled][:12]
    held = held_out(rows)
    assert held, "some rows share every key with another row"
    for row_id, (constants, fitted_on) in held.items():
        assert row_id not in fitted_on and len(fitted_on) == len(rows) - 1
        assert 0 < constants["mfu"] <= 1 and 0 < constants["mbu"] <= 1


def test_leave_one_group_out_never_fits_a_row_on_its_hardware_and_engine():
    rows = [r for r in load_table().row if r.modeled and not r.held_out][:16]  # a few groups: quick
    by_id = {r.id: r for r in rows}
    held = held_out(rows, group=True)
    assert set(held) == {r.id for r in rows}
    for row_id, (constants, fitted_on) in held.items():
        assert all(by_id[o].group != by_id[row_id].group for o in fitted_on) and fitted_on
        assert 0 < constants["mbu"] <= 1 and 0 < constants["kv_efficiency"] <= 1


def test_rows_take_their_engine_releases_overhead_and_trtllms_kv_entry():
    """vLLM 0.10 rows fit and run with their release's overhead, later vLLM rows with the engine's;
    TensorRT-LLM's GQA rows take its own KV entry, and an attention kind it has no row for (MLA)
    falls back to the other engines' entry."""
    from agentx.engine import presets
    from agentx.engine.fit import key_of

    rows = {r.id: r for r in load_table().row}
    old, new, trt = rows["l70-1k1k-h100-fp8-vllm"], rows["gptoss-1k1k-h100-fp4-vllm"], rows["l70-1k1k-h200-fp8-trt"]
    assert old.engine_release == "0.10" and new.engine_release == ""
    assert key_of("overhead_ms", old) == "vllm-0.10-nvidia" and key_of("overhead_ms", new) == "vllm-nvidia"
    assert key_of("kv_efficiency", trt) == "trtllm-gqa" and key_of("kv_efficiency", new) == "gqa"
    release = presets.profile("vllm", "H100", "fp8", "llama-3.1-70b", "0.10")
    current = presets.profile("vllm", "H100", "fp8", "llama-3.1-70b")
    assert row_engine(old).engine_version == "0.10" and row_engine(new).engine_version == ""
    assert Roofline(row_engine(old)).overhead_s == pytest.approx(release.overhead_ms / 1000) != current.overhead_ms / 1000
    assert row_engine(new).overhead_s is None  # the engine's profile: current.overhead_ms
    trt_mla = presets.profile("trtllm", "H200", "fp8", "deepseek-r1")
    assert trt_mla.kv_efficiency == presets.profile("sglang", "H200", "fp8", "deepseek-r1").kv_efficiency
    assert trt_mla.sources["kv_efficiency"].startswith("mla: ")
    assert presets.profile("trtllm", "H200", "fp8", "llama-3.1-70b").sources["kv_efficiency"].startswith("trtllm-gqa: ")


def test_rows_run_with_their_launch_scripts_settings():
    """The recipe's token budget and KV precision reach the engine; TensorRT-LLM's
    free_gpu_memory_fraction is a share of the memory the weights leave."""
    rows = {r.id: r for r in load_table().row}
    trt = rows["l70-8k1k-h200-fp8-trt"]
    cfg = row_engine(trt)
    assert cfg.max_num_batched_tokens == 16384 and cfg.kv_cache_dtype == "fp8"
    whole = Roofline(EngineConfig(hardware="H200", gpus=1, model="llama-3.1-70b", precision="fp8",
                                  gpu_memory_utilization=1.0))
    assert Roofline(cfg).kv_capacity_tokens == pytest.approx(whole.kv_capacity_tokens * trt.kv_free_fraction, rel=1e-3)
    sglang = row_engine(rows["dsr1-8k1k-mi300x-fp8-sglang"])
    assert sglang.max_num_batched_tokens == 131072 and sglang.gpu_memory_utilization == 0.8
    bf16_kv = row_engine(rows["gptoss-8k1k-h100-fp4-vllm"])
    assert bf16_kv.kv_cache_dtype == "bf16"
    assert Roofline(bf16_kv).kv_bytes_per_token == 2 * Roofline(replace(bf16_kv, kv_cache_dtype="auto")).kv_bytes_per_token


def test_the_closed_form_the_fit_uses_agrees_with_the_event_loop(tmp_path):
    """The steady state (two iteration kinds) predicts what `sim calibrate` runs within 10 %:
    the constants are fitted on a faithful proxy of the simulator."""
    from agentx.virtual.calibrate import run_row

    rows = {r.id: r for r in load_table().row}
    for row_id in ("l70-8k1k-h100-fp8-vllm", "gptoss-1k1k-mi300x-fp4-vllm"):
        row = rows[row_id]
        c = fit_constants(row)
        steady = predict(Roofline(row_engine(row)), row, c)
        outcome = run_row(row, c, [], str(tmp_path / row_id), prompts_per_lane=4)
        assert outcome.itl_ms == pytest.approx(steady.iteration_s * 1000, rel=0.1), row_id
        assert outcome.tok_s_per_gpu == pytest.approx(steady.tok_s_per_gpu, rel=0.1), row_id


def fit_constants(row):
    from agentx.engine.fit import constants, fit, term_table

    rows = [r for r in load_table().row if r.modeled]
    return constants(fit(rows, term_table(rows)), row)


def test_scenarios_parse_as_published_runs_name_them():
    assert parse_scenario("8k1k") == parse_scenario("8192:1024", 0.8)
    assert parse_scenario("5000:500").range_ratio == 1.0
    assert parse_scenario("1k1k", 1.0).name == "1024:1024"
    for bad, ratio in (("8k", None), ("0:5", None), ("1k1k", 0.0), ("1k1k", 1.5)):
        with pytest.raises(AgentxError):
            parse_scenario(bad, ratio)
    lanes = scenario_sessions(parse_scenario("1000:100", 0.5), 3, requests_per_session=200, seed=1)
    lengths = [(q.isl, q.osl) for s in lanes for q in s.streams[0].requests]
    assert all(500 <= i <= 1000 and 50 <= o <= 100 for i, o in lengths)
    assert len({i for i, _ in lengths}) > 50  # drawn, not fixed
    blocks = [int(b) for s in lanes for q in s.streams[0].requests for b in q.hash_ids]
    assert len(blocks) == len(set(blocks))  # never shared
    offline = scenario_sessions(parse_scenario("5000:500", offline=40), lanes=1)
    assert len(offline) == 40 and all(len(s.streams[0].requests) == 1 for s in offline)


def test_fp4_is_the_published_name_and_an_engine_version_selects_its_overhead():
    """--precision fp4 (InferenceX's tables) resolves per GPU; --engine-version picks the release's
    fitted overhead; a release the engine's profile does not list is refused."""
    from agentx.engine import presets

    assert EngineConfig(hardware="B200", gpus=1, model="llama-3.1-70b", precision="fp4").precision == "nvfp4"
    assert EngineConfig(hardware="MI355X", gpus=1, model="llama-3.1-70b", precision="fp4").precision == "mxfp4"
    assert EngineConfig(hardware="H100", gpus=2, model="gpt-oss-120b", precision="fp4").precision == "mxfp4"
    table = presets._table()["timing"]["overhead_ms"]
    base = dict(hardware="H100", gpus=2, model="llama-3.1-70b", precision="fp8", engine="vllm")
    old, new = Roofline(EngineConfig(**base, engine_version="0.10")), Roofline(EngineConfig(**base))
    assert old.overhead_s == pytest.approx(table["vllm-0.10-nvidia"]["value"] / 1000)
    assert new.overhead_s == pytest.approx(table["vllm-nvidia"]["value"] / 1000) != old.overhead_s
    with pytest.raises(AgentxError, match="no release fitted apart"):
        EngineConfig(engine="sglang", engine_version="0.10")


def test_fp4_and_attention_dp_arithmetic():
    with pytest.raises(AgentxError, match="no FP4 tensor cores"):
        Roofline(EngineConfig(hardware="H200", gpus=1, model="llama-3.1-70b", precision="nvfp4"))
    weight_only = Roofline(EngineConfig(hardware="H100", gpus=2, model="gpt-oss-120b", precision="mxfp4"))
    assert weight_only.peak_flops == weight_only.hw.bf16_flops  # MXFP4 weights, BF16 matmuls
    # gpt-oss: experts in MXFP4 (4.25 bits), attention and embeddings in BF16
    assert weight_only.weight_bytes == pytest.approx(weight_only.expert_params * 0.53125
                                                     + weight_only.dense_params * 2)
    native = Roofline(EngineConfig(hardware="B200", gpus=1, model="llama-3.1-70b", precision="nvfp4"))
    assert native.peak_flops == 9e15 and native.weight_bytes == pytest.approx(70.6e9 * 0.5625)
    tp8 = Roofline(EngineConfig(hardware="GB200", gpus=8, model="deepseek-r1", precision="nvfp4"))
    dep8 = Roofline(EngineConfig(hardware="GB200", gpus=8, model="deepseek-r1", precision="nvfp4",
                                 parallelism="dep"))
    assert dep8.kv_bytes_per_token == pytest.approx(tp8.kv_bytes_per_token / 8)  # MLA latent not replicated
    assert dep8.collective_s(512) < tp8.collective_s(512)  # all-to-all only, no per-layer all-reduces
    assert math.isclose(tp8.collective_s(1), 0) is False


def test_sim_calibrate_scores_three_shares_for_a_few_rows(tmp_path):
    """A fit row is scored in sample and with its hardware x engine left out; a held-out row only
    with the shipped constants; MoE rows apart; TTFT scored where published."""
    fit_row, held_row = "gptoss-1k1k-h100-fp4-vllm", "dsr1-1k1k-mi300x-fp8-sglang"
    rows = {r.id: r for r in load_table().row}
    assert not rows[fit_row].held_out and rows[held_row].held_out
    res = agentx("sim", "calibrate", "--rows", f"{held_row},{fit_row}", "--out", tmp_path / "runs",
                 "--prompts-per-lane", "3", "--json", tmp_path / "cal.json", "--html", tmp_path / "cal.html")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "in-sample: 1 rows" in text and "group: 1 rows" in text and "held-out: 1 rows" in text
    report = json.loads((tmp_path / "cal.json").read_text())
    assert sorted((r["share"], r["id"]) for r in report["rows"]) == [("group", fit_row), ("held-out", held_row),
                                                                     ("in-sample", fit_row)]
    fitted = len([r for r in rows.values() if r.modeled and not r.held_out])
    for r in report["rows"]:
        assert r["tok_s_per_gpu"] > 0 and r["itl_ms"] > 0 and r["moe"]
        assert r["ratio"] == pytest.approx(r["tok_s_per_gpu"] / r["published_tok_s_per_gpu"])
        assert r["ttft_ratio"] == pytest.approx(r["ttft_ms"] / r["published_ttft_ms"])
        assert r["source"]["commit"] == "2d1d3d65df4d6cb7773de89d548becc15dafab44"
        fitted_on = f"fitted on the {fitted - sum(o.group == rows[fit_row].group for o in rows.values() if o.modeled and not o.held_out)}"
        assert (fitted_on in r["profile"]) if r["share"] == "group" else r["profile"].startswith("shipped constants")
    for share in ("in-sample", "group", "held-out"):
        block = report["summary"][share]
        assert block["total"]["rows"] == block["moe"]["rows"] == 1 and block["dense"]["rows"] == 0
        assert block["total"]["ttft_rows"] == 1
    assert held_row in (tmp_path / "cal.html").read_text()


def test_offline_scenario_runs_every_request_once(tmp_path):
    res = agentx("sim", "bench", "--scenario", "2000:200", "--offline", "60", "--hardware", "H200", "--gpus", "1",
                 "--model", "llama-3.1-70b", "--precision", "fp8", "--engine", "trtllm", "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "o" / "result.json").read_text())
    assert result["requests"]["succeeded"] == 60 and result["requests"]["warmup"] == 0
    assert result["identity"]["engine"] == "agentx-sim trtllm profile (virtual time)"


def test_disaggregated_prefill_decode_hands_the_kv_over(tmp_path):
    """1 prefill + 1 decode worker: every request's first token comes from the prefill worker, the
    rest after its KV crossed the link; the identity names the split."""
    from agentx.records import read_records

    res = agentx("sim", "bench", "--scenario", "2000:50", "--concurrency", "4", "--hardware", "H200", "--gpus", "1",
                 "--model", "llama-3.1-70b", "--precision", "fp8", "--prefill", "1", "--decode", "1",
                 "--duration", "20", "--warmup-requests-per-lane", "1", "--out", tmp_path / "d")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "d" / "result.json").read_text())
    assert result["identity"]["parallelism"] == "TP1 prefill + TP1 decode" and result["identity"]["gpus"] == 2
    roof = Roofline(EngineConfig(hardware="H200", gpus=1, model="llama-3.1-70b", precision="fp8"))
    per_token = roof.kv_bytes_per_token / (roof.hw.kv_transfer_bw * roof.collective_eff)
    profiled = [r for r in read_records(tmp_path / "d") if r.phase == "profile" and not r.error]
    assert profiled and all(r.isl == 2000 and r.osl == r.osl_planned == 50 for r in profiled)
    # after the first token: the KV transfer, then OSL - 1 decode steps of at least the overhead each
    assert all(r.end - r.start - r.ttft >= r.isl * per_token + (r.osl - 1) * roof.overhead_s for r in profiled)
    bad = agentx("sim", "bench", "--scenario", "1k1k", "--prefill", "1")
    assert bad.returncode == 2 and "--prefill and --decode go together" in bad.stderr


def test_the_closed_form_reserves_whole_answers_for_trtllm():
    """TensorRT-LLM's GUARANTEED_NO_EVICT holds the KV of prompt + answer from admission: a
    KV-bound batch is capacity / (ISL + OSL) there, capacity / (ISL + OSL / 2) elsewhere."""
    from agentx.engine.steady import steady_mix

    row = next(r for r in load_table().row if r.id == "l70-8k1k-b200-fp4-trt")
    trt = Roofline(row_engine(row))
    vllm = Roofline(replace(row_engine(row), engine="vllm"))
    assert trt.kv_capacity_tokens == vllm.kv_capacity_tokens
    assert steady_mix(trt, 8000, 1000, 512).batch == pytest.approx(trt.kv_capacity_tokens / 9000)
    assert steady_mix(vllm, 8000, 1000, 512).batch == pytest.approx(vllm.kv_capacity_tokens / 8500)
