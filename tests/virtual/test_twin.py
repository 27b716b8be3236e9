"""bench's virtual twin (SPEC section 3, `twin_ttft` / `twin_itl`; `agentx/virtual/twin.py`).

A bench run against `agentx sim serve` replays its plan in virtual time on the deployment the sim
published on `/version`: the twin's figures are exactly those of a virtual run with the same
settings and the twin's client delay (both are virtual time), and what the client cannot rebuild exactly (faults, another
config layout, an unknown or out-of-bounds field) is listed as not checked with its reason. No
test here bounds wall-clock figures: the HTTP run may be NOT VALID for host timing (the twin's
rules among them) on a loaded host."""

import asyncio
import copy
import json

import pytest

from agentx.data import sample_traces
from agentx.engine.config import Deployment, EngineConfig, ServeConfig, published_config
from agentx.engine.faults import FaultConfig
from agentx.engine.launch import sim_server
from agentx.metrics.identity import discover
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.load import load_sessions
from agentx.virtual.runner import sim_bench
from agentx.virtual.twin import CLIENT_REACTION_S, NotTwinnable, blocker, decode_config, paired_ttft, virtual_twin
from tests.conftest import failed_rules, valid_but_for_host_timing
from tests.metrics.test_validity import rec

SPEED = 4.0
COMMON = dict(concurrency=4, duration=20.0, seed=0, warmup_requests_per_lane=2)
SIM = "agentx-sim"


def identity(config) -> dict:
    """run.json's `server_identity` as bench's discovery writes it."""
    return {"engine": [SIM, "/version"], "sim_config": [config, "/version"]}


def published(**changes) -> dict:
    return json.loads(json.dumps(published_config(ServeConfig(**changes))))  # as it crosses the wire


def reason(config) -> str:
    with pytest.raises(NotTwinnable) as e:
        decode_config(config)
    return str(e.value)


def test_the_published_config_decodes_to_the_same_deployment():
    dep = Deployment(EngineConfig(hardware="H100", gpus=4, model="llama-3.1-70b", cpu_offload_gb=100, ssd_drives=2,
                                  spec_decode="mtp", draft_tokens=2, overhead_s=0.004), replicas=2, router="prefix-aware")
    got, faults = decode_config(published(deployment=dep))
    assert got == dep and faults == FaultConfig()


def test_what_the_client_cannot_rebuild_is_named_in_one_line():
    good = published()
    cases = {
        "version": ({**good, "version": 2}, "has version 2; this client reads version 1"),
        "unknown top": ({**good, "scheduler": {}}, "does not know: config.scheduler"),
        "unknown engine field": (_with(good, ("deployment", "engine", "chunked_prefill"), True),
                                 "does not know: config.deployment.engine.chunked_prefill"),
        "wrong type": (_with(good, ("deployment", "engine", "gpus"), "8"), "Expected `int`, got `str` - at `$.engine.gpus`"),
        "bound": (_with(good, ("deployment", "replicas"), 0), "config.deployment: replicas: must be >= 1, got 0"),
        "huge": (_with(good, ("deployment", "engine", "max_num_seqs"), 10**30), "config.deployment.engine.max_num_seqs"),
        "long text": (_with(good, ("deployment", "engine", "hardware"), "H" * 500), "is 500 characters long"),
        "missing part": ({"version": 1, "deployment": good["deployment"]}, "lacks config.faults"),
        "not an object": ([1, 2], "is a list, not an object"),
        "absent": (None, "published no config on /version"),
    }
    for name, (config, expected) in cases.items():
        got = reason(config)
        assert expected in got and "\n" not in got, (name, got)


def _with(config: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(config)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def test_what_virtual_time_does_not_replay_blocks_the_twin():
    lanes = BenchSettings.build(url="http://127.0.0.1:1", **COMMON)
    assert blocker(lanes, Deployment(), FaultConfig()) is None
    assert "injects faults (rate 0.1)" in blocker(lanes, Deployment(), FaultConfig(rate=0.1))
    assert "--wire chat" in blocker(lanes.replace(wire="chat"), Deployment(), FaultConfig())
    assert "session-affinity" in blocker(lanes, Deployment(replicas=2, router="session-affinity"), FaultConfig())
    assert blocker(lanes, Deployment(replicas=1, router="session-affinity"), FaultConfig()) is None  # routes nothing
    assert virtual_twin(lanes, [], {"engine": ["vllm", "/version"]}) is None  # no twin to speak of
    not_checked = virtual_twin(lanes, [], identity(published(faults=FaultConfig(rate=0.1))))
    assert not_checked["checked"] is False and "injects faults" in not_checked["reason"]


def test_a_preset_or_router_this_client_lacks_is_not_checked():
    lanes = BenchSettings.build(url="http://127.0.0.1:1", **COMMON)
    hardware = _with(published(), ("deployment", "engine", "hardware"), "H999")  # (its engine's own batch caps
    twin = virtual_twin(lanes, [], identity(hardware))  # are read off the preset as the config decodes)
    assert not twin["checked"] and twin["reason"].startswith(
        "the sim's published config.deployment: unknown hardware preset 'H999'")
    router = _with(_with(published(), ("deployment", "router"), "magic"), ("deployment", "replicas"), 2)
    assert virtual_twin(lanes, [], identity(router))["reason"].startswith("the twin could not run: unknown router 'magic'")


def test_a_mismatching_published_config_is_reported_as_not_checked(tmp_path):
    """A real sim's /version, as bench discovers it, with a field this client does not know (a
    newer sim): the twin is not checked, its reason naming the field; the real one decodes."""
    with sim_server("--speed", "50", "--max-num-seqs", "64") as url:
        found = asyncio.run(discover(url))
    server_identity = {k: list(v) for k, v in found.items()}
    config = server_identity["sim_config"][0]
    assert decode_config(config)[0] == Deployment(EngineConfig(max_num_seqs=64))
    newer = identity(_with(config, ("deployment", "engine", "prefill_chunking"), "dynamic"))
    twin = virtual_twin(BenchSettings.build(url=url, **COMMON), [], newer)
    assert twin == {"checked": False, "reason": "the sim's published config has a field this client does not know: "
                                                "config.deployment.engine.prefill_chunking"}


def test_a_bench_run_against_the_sim_stores_its_twin_equal_to_sim_bench(tmp_path):
    sessions = load_sessions([sample_traces()])
    with sim_server("--speed", str(SPEED)) as url:
        http = bench(BenchSettings.build(url=url, out=str(tmp_path / "http"), clock_scale=SPEED, **COMMON), sessions,
                     twin=virtual_twin)
    # the twin's plan hears of each end CLIENT_REACTION_S (wall) late, as an HTTP client does
    delay = CLIENT_REACTION_S * SPEED
    virtual = sim_bench(BenchSettings.build(url="virtual", out=str(tmp_path / "virtual"), **COMMON), sessions,
                        Deployment(), client_delay_s=delay)
    twin, rm = http["twin"], virtual["request_metrics"]
    assert twin["client_delay_s"] == delay
    assert twin["checked"] and twin["succeeded"] == virtual["requests"]["succeeded"] > 0
    # exact: the twin and sim bench are the same plan on the same engine in virtual time
    assert (twin["ttft_p50_s"], twin["ttft_p90_s"], twin["itl_p50_s"]) == (
        rm["ttft_s"]["p50"], rm["ttft_s"]["p90"], rm["itl_s"]["p50"])
    # and the figures `agentx demo` prints beside the run (SPEC section 8's p90_e2e_norm_intvty, tput_per_gpu)
    assert twin["e2e_norm_intvty_p90"] == rm["e2e_normalized_interactivity_tok_s"]["p90"] > 0
    assert twin["tput_per_gpu"] == rm["throughput"]["total_tok_s_per_gpu"] > 0
    rules = {r["rule"]: r for r in http["validity"]["rules"]}
    assert rules["twin_ttft"]["figure"] is not None and rules["twin_itl"]["figure"] is not None
    # the rules compare the requests both windows hold
    paired = twin["paired_ttft_s"]
    assert rules["twin_ttft"]["figure"] == max(abs(paired[k]) for k in ("ttft_p50_rel", "ttft_p90_rel"))
    assert rules["twin_itl"]["figure"] == abs(paired["itl_p50_rel"])
    assert rules["twin_window"]["figure"] == (paired["unpaired_run"] + paired["unpaired_twin"]) / (
        paired["n"] + paired["unpaired_run"] + paired["unpaired_twin"])
    assert json.loads((tmp_path / "http" / "run.json").read_text())["twin"]["checked"]
    assert not (tmp_path / "http" / "twin").exists()  # the twin's folder was a temporary one
    # request by request: every successful profiled request of the run pairs with the twin's
    ok = [json.loads(line) for line in (tmp_path / "http" / "records.jsonl").read_text().splitlines()]
    ok = [r for r in ok if r["phase"] == "profile" and "error" not in r and r.get("ttft") is not None]
    assert paired["n"] == len(ok) > 0 and paired["max_abs"] >= paired["p90_abs"] >= abs(paired["p50"]) >= 0
    assert valid_but_for_host_timing(http), failed_rules(http)


def test_a_schedule_mode_run_has_its_twin_too(tmp_path):
    """Open loop at the recorded session starts (schedule mode): the same plan in virtual time."""
    sessions = load_sessions([sample_traces()])
    plan = dict(mode="schedule", time_scale=50.0, warmup=False, duration=10.0, seed=0)
    with sim_server("--speed", str(SPEED)) as url:
        http = bench(BenchSettings.build(url=url, out=str(tmp_path / "http"), clock_scale=SPEED, **plan), sessions,
                     twin=virtual_twin)
    virtual = sim_bench(BenchSettings.build(url="virtual", out=str(tmp_path / "virtual"), **plan), sessions,
                        Deployment(), client_delay_s=CLIENT_REACTION_S * SPEED)
    twin, rm = http["twin"], virtual["request_metrics"]
    assert twin["checked"] and twin["succeeded"] == virtual["requests"]["succeeded"] > 0
    assert (twin["ttft_p50_s"], twin["ttft_p90_s"]) == (rm["ttft_s"]["p50"], rm["ttft_s"]["p90"])
    assert valid_but_for_host_timing(http), failed_rules(http)


def test_a_sim_with_faults_has_its_twin_listed_as_not_checked(tmp_path):
    """Faults are drawn by the order requests reach the sim: virtual time does not replay them.
    (A rate this small draws none in this run, so the run itself is clean.)"""
    sessions = load_sessions([sample_traces()])
    with sim_server("--speed", str(SPEED), "--fault-rate", "1e-9") as url:
        http = bench(BenchSettings.build(url=url, out=str(tmp_path / "http"), clock_scale=SPEED,
                                         **{**COMMON, "duration": 5.0}), sessions, twin=virtual_twin)
    rules = {r["rule"]: r for r in http["validity"]["rules"]}
    for name in ("twin_ttft", "twin_itl"):
        assert rules[name]["ok"] and rules[name]["figure"] is None
        assert rules[name]["reason"].startswith("not checked: the sim injects faults (rate 1e-09)")
    assert valid_but_for_host_timing(http), failed_rules(http)


def test_paired_ttft_matches_requests_by_tree_session_stream_and_node():
    twin = [rec(i, ttft=1.0) for i in range(10)]  # ITL (3.0 - 1.0) / 20 = 100 ms
    run = [rec(i, ttft=1.0 + 0.01 * i) for i in range(10)]  # request i 10 i ms later than its twin (ITL 100 - i / 2 ms)
    run.append(rec(99, ttft=5.0))  # no twin: left out
    run.append(rec(3, ttft=9.0, error="http 500"))  # failed: left out (its tree 3 pairs the ok one only once)
    run[0].phase = "warmup"  # not profiled: left out
    got = paired_ttft(run, twin)
    assert got["n"] == 9
    assert got["p50"] == pytest.approx(0.05)  # median of 10..90 ms
    assert got["max_abs"] == pytest.approx(0.09) and got["p90_abs"] == pytest.approx(0.082)
    assert (got["unpaired_run"], got["unpaired_twin"]) == (1, 1)  # tree 99 of the run; tree 0 of the twin
    assert got["ttft_p50_rel"] == pytest.approx(0.05) and got["ttft_p90_rel"] == pytest.approx(0.082)
    assert got["itl_p50_rel"] == pytest.approx(-0.025)  # ITL p50 97.5 ms (requests 1..9) against 100 ms
    assert paired_ttft([rec(50)], twin) is None
