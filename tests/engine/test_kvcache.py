from agentx.engine.kvcache import KVCache, block_hashes

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
