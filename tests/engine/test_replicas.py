"""Replicas behind a router: each rule, and `sim serve --replicas` with per-replica metrics."""

import asyncio
import math

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from agentx.engine.config import EngineConfig
from agentx.engine.launch import sim_server
from agentx.engine.replicas import Replicas


def prompt(n: int, start: int = 1000) -> list[int]:
    return list(range(start, start + n))


def drain(core):
    while not core.idle:
        core.advance(math.inf)


def send(r: Replicas, sid: str, p: list[int], session=None, max_tokens=8):
    seq = r.new_sequence(sid, p, max_tokens, ignore_eos=True)
    r.add(seq, 0.0, session)
    return seq


def test_round_robin_and_least_loaded():
    rr = Replicas(EngineConfig(), 3, "round-robin")
    assert [send(rr, str(i), prompt(100, i * 1000)).replica for i in range(6)] == [0, 1, 2, 0, 1, 2]
    ll = Replicas(EngineConfig(), 3, "least-loaded")
    first = [send(ll, str(i), prompt(100, i * 1000)).replica for i in range(3)]
    assert first == [0, 1, 2]
    drain(ll.cores[1])  # replica 1 drains: the next request goes there
    assert send(ll, "x", prompt(100, 77_000)).replica == 1


def test_session_affinity_keeps_a_session_on_one_replica_and_its_cache():
    r = Replicas(EngineConfig(), 4, "session-affinity")
    turns = [send(r, f"t{i}", prompt(2_000 + 500 * i), session="s-1") for i in range(4)]
    assert len({t.replica for t in turns}) == 1
    core = r.cores[turns[0].replica]
    drain(core)
    again = send(r, "again", prompt(4_000), session="s-1")
    drain(core)
    assert again.cached_tokens == 3_488  # the full blocks of the longest earlier turn (3,500 tokens)
    assert len({send(r, f"o{i}", prompt(10), session=f"s{i}").replica for i in range(40)}) == 4


def test_prefix_aware_follows_the_cache_within_the_load_bound():
    r = Replicas(EngineConfig(), 2, "prefix-aware")
    a = send(r, "a", prompt(8_000))
    assert a.replica == 0
    drain(r.cores[0])
    b = send(r, "b", prompt(9_000))  # same prefix: replica 0 although replica 1 is as idle
    assert b.replica == 0
    drain(r.cores[0])
    assert b.cached_tokens == 8_000
    # load replica 0 beyond the bound (min 0 + max(2, 0)): the cached prefix no longer wins
    busy = [send(r, f"busy{i}", prompt(8_000), max_tokens=500) for i in range(3)]
    assert [x.replica for x in busy] == [0, 0, 0]  # loads 0 vs 0, 1 vs 0, 2 vs 0: within the bound
    spill = send(r, "spill", prompt(8_000))
    assert spill.replica == 1  # load 3 > 0 + 2


def test_sim_serve_replicas_label_their_metrics_and_share_the_work():
    async def run(base):
        async with aiohttp.ClientSession() as s:
            for i in range(6):
                body = {"prompt": prompt(300, i * 1000), "max_tokens": 4, "ignore_eos": True}
                async with s.post(base + "/v1/completions", json=body,
                                  headers={"X-Session-ID": f"s{i}"}) as resp:
                    assert resp.status == 200
            async with s.get(base + "/metrics") as resp:
                return await resp.text()

    with sim_server("--speed", "50", "--replicas", "3", "--router", "round-robin") as base:
        text = asyncio.run(run(base))
    per_replica, success = {}, 0
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            if sample.name == "vllm:prompt_tokens_total":
                per_replica[sample.labels["replica"]] = sample.value
            if sample.name == "vllm:request_success_total":
                success += sample.value
    assert per_replica == {"0": 600.0, "1": 600.0, "2": 600.0}  # two requests of 300 tokens each
    assert success == 6


def test_samples_equal_a_parsed_scrape():
    from agentx.engine.metrics import ServerStats, exposition, samples
    from agentx.metrics.scrape import parse_samples
    from agentx.metrics.server import label_value

    r = Replicas(EngineConfig(), 2, "least-loaded")
    for i in range(4):
        send(r, str(i), prompt(500, i * 1000))
    for core in r.cores:
        drain(core)
    stats = ServerStats()
    stats.ttft.observe(0.3)
    for target in (r, r.cores[0]):
        scraped = parse_samples(exposition(target, stats, "m", now=30.0).decode())
        dcgm = {k: v for k, v in scraped.items() if k.startswith("DCGM_")}  # power: power.jsonl's, not samples'
        assert samples(target, stats, "m") == {k: v for k, v in scraped.items() if k not in dcgm}
        # the modeled GPUs' power under DCGM's names: 8 GPUs per replica, numbered across replicas
        gpus = {label_value(k, "gpu") for k in dcgm}
        assert gpus == {str(i) for i in range(8 * len(getattr(target, "cores", [target])))}
        busy = dcgm['DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID="GPU-agentx-sim-0000",device="nvidia0",gpu="0",'
                    'modelName="NVIDIA H200 SXM 141GB"}']
        assert 30 * 77.71 * 1000 < busy < 30 * 700 * 1000  # mJ after 30 modeled seconds: idle < drawn < TDP
