import random

import pytest

from agentx.engine.kvcache import KVCache, block_hashes

from .kvcache_reference import ReferenceKVCache

BS = 4


def prompt(*blocks, tail=()):
    """Token ids made of whole 4-token blocks named by small ints, plus a partial tail."""
    return [b * 100 + i for b in blocks for i in range(BS)] + list(tail)


def run(cache, seq, tokens):
    """Admit, 'compute', and release a request, as the scheduler will."""
    hashes = block_hashes(tokens, BS)
    alloc = cache.allocate(seq, hashes, len(tokens))
    assert alloc is not None
    cache.commit(seq, hashes)
    cache.free_seq(seq)
    return alloc


def test_repeated_prompt_hits_every_full_block():
    cache = KVCache(num_blocks=16, block_size=BS)
    first = run(cache, "a", prompt(1, 2, 3, tail=[7]))
    assert first.gpu_hit_blocks == 0
    again = run(cache, "b", prompt(1, 2, 3, tail=[7]))
    assert again.gpu_hit_blocks == 3
    assert cache.counters.gpu_queries == 26 and cache.counters.gpu_hits == 12


def test_shared_prefix_hits_only_the_shared_blocks():
    cache = KVCache(num_blocks=16, block_size=BS)
    run(cache, "a", prompt(1, 2, 3))
    assert run(cache, "b", prompt(1, 2, 9, 3)).gpu_hit_blocks == 2
    # same block content at another position is a different block (chained hash)
    assert run(cache, "c", prompt(2, 3)).gpu_hit_blocks == 0


def test_eviction_is_lru_and_never_touches_blocks_in_use():
    cache = KVCache(num_blocks=6, block_size=BS)
    run(cache, "old", prompt(1, 2))
    run(cache, "new", prompt(3, 4))
    held = block_hashes(prompt(5), BS)
    assert cache.allocate("running", held, 4) is not None  # 1 block in use
    cache.commit("running", held)
    # needs 4 fresh blocks: 1 never-cached free + evicts "old" (LRU) first, then one of "new"
    alloc = cache.allocate("big", block_hashes(prompt(7, 8, 9, 10), BS), 16)
    assert alloc is not None
    assert cache.match(block_hashes(prompt(1, 2), BS))[0] == 0  # old evicted
    assert cache.match(block_hashes(prompt(3), BS))[0] == 1  # new's first block survives
    assert cache.match(held)[0] == 1  # in use: never evicted
    assert cache.allocate("too-big", block_hashes(prompt(11, 12, 13), BS), 12) is None
    assert cache.match(held)[0] == 1


def test_failed_allocation_changes_nothing():
    cache = KVCache(num_blocks=2, block_size=BS)
    run(cache, "a", prompt(1, 2))
    before = (list(cache.free), dict(cache.cached), cache.counters.gpu_queries)
    assert cache.allocate("b", block_hashes(prompt(1, 2, 3), BS), 12) is None
    assert before == (list(cache.free), dict(cache.cached), cache.counters.gpu_queries)


def test_cpu_tier_turns_an_evicted_prefix_into_an_external_hit():
    cache = KVCache(num_blocks=4, block_size=BS, cpu_blocks=64)
    run(cache, "a", prompt(1, 2, 3))
    run(cache, "flood", prompt(4, 5, 6, 7))  # evicts a's blocks from the GPU
    assert cache.match(block_hashes(prompt(1, 2, 3), BS)) == (0, 3)
    back = run(cache, "b", prompt(1, 2, 3))
    assert (back.gpu_hit_blocks, back.cpu_hit_blocks) == (0, 3)
    c = cache.counters
    assert c.external_hits == 12 and c.load_blocks == 3 and c.offload_blocks == 7
    assert run(cache, "c", prompt(1, 2, 3)).gpu_hit_blocks == 3  # loaded blocks are GPU-cached


def test_cpu_tier_is_lru_bounded():
    cache = KVCache(num_blocks=8, block_size=BS, cpu_blocks=2)
    run(cache, "a", prompt(1, 2, 3))
    assert len(cache.cpu) == 2
    assert cache.match(block_hashes(prompt(1, 2, 3), BS)) == (3, 0)


def test_usage_and_grow():
    cache = KVCache(num_blocks=4, block_size=BS)
    assert cache.allocate("a", [], 3) is not None
    assert cache.usage == 0.25
    assert cache.grow("a", 9) and cache.usage == 0.75
    assert cache.grow("a", 16) and not cache.grow("a", 17)
    cache.free_seq("a")
    assert cache.usage == 0.0


def linear_gpu_match(cache, hashes):
    g, cached = 0, cache.cached  # (a property that builds the dict)
    while g < len(hashes) and hashes[g] in cached:
        g += 1
    return g


def test_run_walk_lookup_equals_a_block_walk_under_churn():
    """Concurrent identical prefixes (computed twice at once), eviction and preemption keep the
    cached hashes prefix-closed, so the lookup over runs finds what a block-by-block walk finds."""
    import random

    from agentx.engine.config import EngineConfig
    from agentx.engine.core import EngineCore

    rng = random.Random(5)
    core = EngineCore(EngineConfig(num_gpu_blocks_override=700, max_model_len=8_192, max_num_seqs=16,
                                   max_num_batched_tokens=1_024))
    roots = [list(range(r * 100_000, r * 100_000 + 4_000)) for r in range(4)]
    probes = []
    for i in range(400):
        root = rng.choice(roots)
        p = root[: rng.randint(16, 4_000)] + [7_000_000 + i * 1_000 + k for k in range(rng.randint(0, 600))]
        seq = core.new_sequence(str(i), p, rng.randint(1, 40), ignore_eos=True)
        core.add(seq)
        probes.append(seq.hashes)
        if rng.random() < 0.3:
            for _ in range(rng.randint(1, 30)):
                core.step()
        for h in rng.sample(probes, min(20, len(probes))):
            assert core.kv.match(h)[0] == linear_gpu_match(core.kv, h)
    while core.step():
        pass
    assert core.kv.counters.evictions > 0 and core.preemptions > 0  # (and ~250 swaps at commit)
    assert core.kv.free_blocks == core.kv.num_blocks
    for h in probes:
        assert core.kv.match(h)[0] == linear_gpu_match(core.kv, h)


def test_a_block_computed_twice_at_once_is_swapped_for_the_cached_copy():
    cache = KVCache(num_blocks=8, block_size=BS)
    hashes = block_hashes(prompt(1, 2), BS)
    assert cache.allocate("x", hashes, 8) and cache.allocate("y", hashes, 8)  # both miss: 4 blocks held
    cache.commit("x", hashes)
    cache.commit("y", hashes)  # y's copies are freed, y holds x's blocks
    assert cache.seqs["y"].blocks == cache.seqs["x"].blocks and cache.free_blocks == 6
    cache.free_seq("x")
    cache.free_seq("y")
    assert cache.free_blocks == 8 and cache.match(hashes)[0] == 2


def random_ops(seed: int, n: int = 3_000):
    """A random mix of the scheduler's calls on prompts sharing prefixes (some computed twice at
    once), with partial commits, growth, failed allocations and frees."""
    rng = random.Random(seed)
    roots = [prompt(*range(r * 1_000, r * 1_000 + 30)) for r in range(5)]
    ops, live, made = [], [], 0
    for _ in range(n):
        r = rng.random()
        if r < 0.3 or not live:
            root = rng.choice(roots)
            tail = [9_000_000 + made * 100 + k for k in range(rng.randint(0, 20 * BS))]
            tokens = root[: rng.randint(1, len(root))] + tail
            hashes = block_hashes(tokens, BS)
            ops.append(("allocate", made, hashes, rng.randint(1, len(tokens) + 1), rng.choice([0, len(tokens)])))
            live.append((made, hashes))
            made += 1
        elif r < 0.55:
            seq, hashes = rng.choice(live)
            end = rng.randint(0, len(hashes))
            ops.append(("commit", seq, hashes[:end]) if rng.random() < 0.5 else ("commit", seq, hashes, end))
        elif r < 0.65:
            seq, hashes = rng.choice(live)
            ops.append(("grow", seq, rng.randint(1, 80 * BS)))
        else:
            seq, _ = live.pop(rng.randrange(len(live)))
            ops.append(("free", seq))
    return ops


def state(cache):
    return (cache.counters, cache.cached, list(cache.free), cache.ref.tolist(), list(cache.cpu),
            {s: (list(a.blocks), a.gpu_hit_blocks, a.cpu_hit_blocks, a.committed) for s, a in cache.seqs.items()})


@pytest.mark.parametrize("num_blocks,cpu_blocks", [(40, 0), (120, 0), (60, 90), (200, 30)])
def test_the_cache_equals_the_per_block_reference(num_blocks, cpu_blocks):
    """Block ids, hits, evictions, counters, free-list order and usage after every call match
    the per-block implementation agentx used before (tests/engine/kvcache_reference.py)."""
    new, ref = KVCache(num_blocks, BS, cpu_blocks), ReferenceKVCache(num_blocks, BS, cpu_blocks)
    held, results, swaps = set(), [], 0
    for op, seq, *args in random_ops(num_blocks + cpu_blocks):
        if op == "allocate":
            hashes, tokens, prompt_tokens = args
            assert new.match(hashes) == ref.match(hashes)
            assert new.can_allocate(hashes, tokens) == ref.can_allocate(hashes, tokens)
            a, b = new.allocate(seq, hashes, tokens, prompt_tokens), ref.allocate(seq, hashes, tokens, prompt_tokens)
            assert (a is None) == (b is None)
            if a:
                held.add(seq)
                results.append((a.gpu_hit_blocks, a.cpu_hit_blocks))
                assert (list(a.blocks), a.gpu_hit_blocks, a.cpu_hit_blocks) == (b.blocks, b.gpu_hit_blocks,
                                                                             b.cpu_hit_blocks)
        elif seq not in held:
            continue
        elif op == "commit":
            before = list(new.seqs[seq].blocks)
            new.commit(seq, *args)
            ref.commit(seq, *args)
            swaps += list(new.seqs[seq].blocks) != before
        elif op == "grow":
            assert new.grow(seq, args[0]) == ref.grow(seq, args[0])
        else:
            held.discard(seq)
            new.free_seq(seq)
            ref.free_seq(seq)
        assert new.usage == ref.usage and new.free_blocks == ref.free_blocks
        assert state(new) == state(ref)
    c = new.counters
    assert c.evictions > 1_000 and sum(g for g, _ in results) > 1_000 and swaps > 0  # the cases were exercised
    if cpu_blocks:
        assert c.load_blocks > 0 and c.offload_blocks > 0


@pytest.mark.parametrize("kw", [dict(num_gpu_blocks_override=700, max_model_len=8_192, max_num_seqs=16,
                                     max_num_batched_tokens=1_024),
                                dict(num_gpu_blocks_override=700, max_model_len=8_192, max_num_seqs=16,
                                     max_num_batched_tokens=1_024, cpu_offload_gb=10.0)])
def test_the_engine_runs_the_same_on_the_reference_cache(kw):
    """The scheduler over both caches (shared prefixes, preemption, swaps at commit): same times,
    hits and counters."""
    from agentx.engine.config import EngineConfig
    from agentx.engine.core import EngineCore

    runs = []
    for cache in (KVCache, ReferenceKVCache):
        rng = random.Random(7)
        core = EngineCore(EngineConfig(**kw))
        core.kv = cache(core.kv.num_blocks, core.kv.block_size, core.kv.cpu_blocks)
        roots = [list(range(r * 100_000, r * 100_000 + 4_000)) for r in range(4)]
        seqs = []
        for i in range(300):
            root = rng.choice(roots)
            p = root[: rng.randint(16, 4_000)] + [7_000_000 + i * 1_000 + k for k in range(rng.randint(0, 600))]
            seqs.append(core.new_sequence(str(i), p, rng.randint(1, 40), ignore_eos=True))
            core.add(seqs[-1])
            for _ in range(rng.randint(0, 20)):
                core.step()
        while core.step():
            pass
        runs.append(([(s.cached_tokens, s.first_token_at, s.finished_at, s.preemptions) for s in seqs],
                     core.now, core.kv.counters, core.kv.cached, list(core.kv.free)))
    assert runs[0] == runs[1]
    counters = runs[0][2]
    assert counters.evictions > 0 and counters.gpu_hits > 0
    if "cpu_offload_gb" in kw:
        assert counters.external_hits > 0
    else:
        assert sum(p for *_, p in runs[0][0]) > 0  # preemptions


def test_a_hash_twice_in_one_prompt_is_handled_as_the_reference_does():
    caches = KVCache(10, BS), ReferenceKVCache(10, BS)
    for cache in caches:
        cache.allocate("a", [], 16)
        cache.commit("a", [1, 2, 1])  # the third block is swapped for the first's
    assert state(caches[0]) == state(caches[1])
    for cache in caches:
        cache.free_seq("a")
    assert state(caches[0]) == state(caches[1])


def test_block_hashes_are_the_chained_hash_of_each_full_block():
    """Its definition, for any length and block size (the server computes it per prompt; issue
    #24 made it cheaper, not different)."""
    rng = random.Random(3)
    for n in (0, 1, 3, 4, 5, 16, 17, 100, 1000):
        tokens = [rng.randrange(200_000) for _ in range(n)]
        for bs in (1, 4, 16):
            expected, parent = [], 0
            for i in range(0, n - bs + 1, bs):
                parent = hash((parent, tuple(tokens[i : i + bs])))
                expected.append(parent)
            assert block_hashes(tokens, bs) == expected
