"""The KV tiers under HBM and the store path's rules (agentx/engine/tiers.py; SPEC §6 "Offload
tiers and the store path"): exact block and byte counts on small hand-built request sequences."""

from __future__ import annotations

import pytest

from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore
from agentx.engine.kvcache import KVCache, block_hashes
from agentx.engine.metrics import engine_series
from agentx.engine.tiers import Tiers
from agentx.errors import AgentxError

BS = 4


def prompt(*ids: int) -> list[int]:
    """Full blocks of distinct tokens: block i holds 4 copies of id i."""
    return [i for i in ids for _ in range(BS)]


def timed(rules: bool = True, dram: int = 100, ssd: int = 1000) -> Tiers:
    """1 ms per block over the host link, 2 ms per block written to the SSD, 0.5 ms read."""
    return Tiers(dram, ssd, host_s_per_block=0.001, ssd_write_s_per_block=0.002, ssd_read_s_per_block=0.0005,
                 rules=rules)


def two_turns(cache: KVCache) -> None:
    """Sessions a and b send the same 3-block prompt at once (neither hits: both compute it), then
    a's next turn adds 2 blocks to it (3 HBM hits, 2 blocks computed)."""
    first = block_hashes(prompt(1, 2, 3), BS)
    for seq in ("a", "b"):
        assert cache.allocate(seq, first, 3 * BS).gpu_hit_blocks == 0
    cache.commit("a", first)
    cache.commit("b", first)  # a's write of these blocks is in flight (1 ms each)
    cache.free_seq("a")
    cache.free_seq("b")
    cache.tiers.clock(1.0)  # every write has ended
    second = block_hashes(prompt(1, 2, 3, 4, 5), BS)
    assert cache.allocate("a2", second, 5 * BS).gpu_hit_blocks == 3
    cache.commit("a2", second)
    cache.free_seq("a2")


def test_the_store_path_rules_write_each_block_once_per_tier():
    cache = KVCache(64, BS, tiers=timed())
    two_turns(cache)
    dram, ssd = cache.tiers.dram.counters, cache.tiers.ssd.counters
    assert dram.written_blocks == ssd.written_blocks == 5  # a's 3, then only the new turn's 2
    assert cache.counters.offload_blocks == 5
    # b's copy was in flight to both tiers; the second turn's 3 HBM hits are not new
    assert dram.skipped == ssd.skipped == {"not_new": 3, "stored": 0, "in_flight": 3}
    assert dram.write_s == pytest.approx(0.005) and ssd.write_s == pytest.approx(0.010)


def test_without_the_rules_every_prompt_is_written_whole_at_each_turn():
    cache = KVCache(64, BS, tiers=timed(rules=False))
    two_turns(cache)
    dram, ssd = cache.tiers.dram.counters, cache.tiers.ssd.counters
    assert dram.written_blocks == ssd.written_blocks == 3 + 3 + 5
    assert dram.skipped == ssd.skipped == {"not_new": 0, "stored": 0, "in_flight": 0}
    assert len(cache.tiers.dram) == len(cache.tiers.ssd) == 5  # rewrites keep one copy
    assert dram.write_s == pytest.approx(0.011) and ssd.write_s == pytest.approx(0.022)


def test_a_block_the_tier_holds_is_not_written_again():
    """DRAM of 2 blocks keeps the last two of a 3-block prompt; HBM loses all three (a request
    without content takes every block), so the prompt is computed again: its first block is
    written, the two DRAM holds are not ('stored')."""
    cache = KVCache(4, BS, tiers=Tiers(2))
    p = block_hashes(prompt(1, 2, 3), BS)
    cache.allocate("a", p, 3 * BS)
    cache.commit("a", p)
    cache.free_seq("a")
    assert list(cache.cpu) == p[1:]
    cache.allocate("flood", [], 4 * BS)  # evicts p's blocks from HBM
    cache.free_seq("flood")
    assert cache.match(p) == (0, 0)  # DRAM lacks p's first block: the lookup stops there
    cache.allocate("b", p, 3 * BS)
    cache.commit("b", p)
    c = cache.tiers.dram.counters
    assert c.written_blocks == 4 and c.skipped == {"not_new": 0, "stored": 2, "in_flight": 0}


def test_a_write_in_flight_is_no_hit_and_writes_queue_on_the_link():
    tiers = timed(dram=10, ssd=0)
    tiers.clock(0.0)
    tiers.store([11, 12], 0)  # 0 - 2 ms
    tiers.store([13], 0)  # queued: 2 - 3 ms
    assert tiers.match([11, 12, 13], 0) == 0
    tiers.clock(0.002)
    assert tiers.match([11, 12, 13], 0) == 2
    tiers.clock(0.003)
    assert tiers.match([11, 12, 13], 0) == 3
    assert tiers.dram.link_free_at == pytest.approx(0.003)


def test_an_ssd_hit_is_read_into_dram_and_loaded():
    """DRAM (2 blocks) drops a prompt's first block, the SSD keeps all three: after HBM loses
    them, the lookup finds one block on the SSD and two in DRAM; the SSD's is promoted into DRAM
    (which drops its least recent block) at 0.5 ms per block of SSD read."""
    cache = KVCache(4, BS, tiers=timed(dram=2, ssd=100))
    p = block_hashes(prompt(1, 2, 3), BS)
    cache.allocate("a", p, 3 * BS)
    cache.commit("a", p)
    cache.free_seq("a")
    cache.allocate("flood", [], 4 * BS)
    cache.free_seq("flood")
    cache.tiers.clock(1.0)
    assert cache.match(p) == (0, 3)
    alloc = cache.allocate("b", p, 3 * BS)
    assert (alloc.gpu_hit_blocks, alloc.cpu_hit_blocks, alloc.ssd_hit_blocks) == (0, 3, 1)
    assert cache.tiers.read_s(alloc.ssd_hit_blocks) == pytest.approx(0.0005)
    assert list(cache.cpu) == [p[2], p[0]]  # p[1] touched first, then p[0] promoted: p[1] dropped
    c = cache.counters
    assert (c.external_hits, c.ssd_hits, c.load_blocks) == (3 * BS, BS, 3)
    assert cache.tiers.ssd.counters.read_blocks == 1
    cache.commit("b", p)  # all three were found: nothing is written
    assert cache.tiers.dram.counters.written_blocks == 3 and cache.tiers.ssd.counters.written_blocks == 3


def test_the_engine_publishes_bytes_written_and_hits_by_tier():
    core = EngineCore(EngineConfig(model="llama-3.1-8b", hardware="H100", gpus=1, cpu_offload_gb=1, ssd_drives=2,
                                   num_gpu_blocks_override=600, max_model_len=8192))
    assert core.kv.tiers.ssd.capacity == int(2 * 7.68e12 // (16 * core.roofline.kv_bytes_per_token))
    block = BS * core.roofline.kv_bytes_per_token  # a 4-token block's bytes (one GPU)
    core.kv = KVCache(64, BS, tiers=Tiers(100, 1000, host_s_per_block=block / core.roofline.host_bw,
                                          ssd_write_s_per_block=block / (2 * 10e9), ssd_read_s_per_block=block / 28e9))
    two_turns(core.kv)
    rows = {(name, tuple(sorted((k, v) for k, v in labels.items() if k not in ("engine", "model_name")))): value
            for _, name, _, labels, value in engine_series(core, {"engine": "0", "model_name": "m"})}
    assert rows["vllm:kv_offload_total_bytes", (("transfer_type", "GPU_to_CPU"),)] == 5 * block
    assert rows["vllm:kv_offload_total_bytes", (("transfer_type", "CPU_to_SSD"),)] == 5 * block
    assert rows["vllm:kv_offload_total_time", (("transfer_type", "CPU_to_SSD"),)] == pytest.approx(
        5 * block / (2 * 10e9))  # two drives of 10 GB/s each
    assert rows["agentx_sim:kv_store_skipped_bytes", (("rule", "in_flight"), ("tier", "SSD"))] == 3 * block
    assert rows["agentx_sim:kv_store_skipped_bytes", (("rule", "not_new"), ("tier", "DRAM"))] == 3 * block
    assert rows["agentx_sim:prefix_cache_hits_by_tier", (("tier", "HBM"),)] == 3 * BS
    assert rows["agentx_sim:prefix_cache_hits_by_tier", (("tier", "SSD"),)] == 0
    assert rows["agentx_sim:kv_store_rules", ()] == 1


def test_an_ssd_tier_needs_dram_above_it():
    with pytest.raises(AgentxError, match="ssd_drives needs cpu_offload_gb"):
        EngineConfig(ssd_drives=8)


def test_an_ssd_hit_costs_its_read_in_the_admitting_iteration():
    """Two engines, the second with SSD reads made free: a prompt HBM and DRAM lost but the SSD
    kept takes exactly its SSD blocks' read time longer to its first token on the first."""
    firsts = []
    for free_reads in (False, True):
        core = EngineCore(EngineConfig(model="llama-3.1-8b", hardware="H100", gpus=1, cpu_offload_gb=0.05,
                                       ssd_drives=1, num_gpu_blocks_override=600, max_model_len=8192))
        if free_reads:
            core.kv.tiers.ssd.read_s_per_block = 0.0
        for i, base in enumerate((0, 100_000, 0)):  # A, a flood that evicts A from HBM and DRAM, A again
            core.now += 1.0  # every write has ended
            seq = core.new_sequence(str(i), list(range(base, base + 8 * 1024)), 1, ignore_eos=True)
            core.add(seq)
            while core.step():
                pass
        firsts.append((seq.first_token_at - seq.arrival, core.kv.counters.ssd_hits))
    (slow, ssd_hits), (fast, same) = firsts
    assert ssd_hits == same > 0
    per_block = 16 * core.roofline.kv_bytes_per_token / 14e9  # a 16-token block off one 14 GB/s drive
    assert slow - fast == pytest.approx(ssd_hits // 16 * per_block, rel=1e-9)
