"""The per-block KV cache agentx shipped before extents (one Python step per block), kept as the
reference the randomized equivalence test compares `agentx.engine.kvcache.KVCache` against:
same block ids, hits, evictions, counters and free-list order for the same operations."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from agentx.engine.kvcache import Counters
from agentx.engine.tiers import Tiers


@dataclass
class Allocation:
    """Blocks held by one sequence, and what its prompt found in the cache."""

    blocks: list[int] = field(default_factory=list)
    gpu_hit_blocks: int = 0
    cpu_hit_blocks: int = 0
    ssd_hit_blocks: int = 0  # (no SSD tier here)
    committed: int = 0  # leading blocks already passed to `commit`


class ReferenceKVCache:
    def __init__(self, num_blocks: int, block_size: int = 16, cpu_blocks: int = 0):
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks, self.block_size, self.cpu_blocks = num_blocks, block_size, cpu_blocks
        self.ref = np.zeros(num_blocks, dtype=np.int32)  # holders per block (numpy: bulk updates)
        self.block_hash: list[int | None] = [None] * num_blocks
        self.cached: dict[int, int] = {}  # hash -> GPU block
        self.free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))  # LRU first
        self.cpu: OrderedDict[int, None] = OrderedDict()  # hashes held in DRAM, LRU first
        self.tiers = Tiers()  # what the engine core clocks and asks for SSD reads (no tier: no-ops)
        self.seqs: dict[object, Allocation] = {}
        self.counters = Counters()

    # ------------------------------------------------------------------ queries

    @property
    def free_blocks(self) -> int:
        return len(self.free)

    @property
    def usage(self) -> float:
        """Fraction of GPU blocks referenced by running sequences (vLLM's kv_cache_usage_perc)."""
        return 1.0 - len(self.free) / self.num_blocks

    def match(self, hashes: list[int]) -> tuple[int, int]:
        """(GPU prefix hit blocks, CPU hit blocks continuing it), without side effects."""
        cached, lo, hi = self.cached, 0, len(hashes)
        while lo < hi:  # the first miss (cached hashes are prefix-closed)
            mid = (lo + hi) // 2
            if hashes[mid] in cached:
                lo = mid + 1
            else:
                hi = mid
        g, c = lo, 0
        while g + c < len(hashes) and hashes[g + c] in self.cpu:
            c += 1
        return g, c

    # --------------------------------------------------------------- lifecycle

    def allocate(self, seq, hashes: list[int], num_tokens: int, prompt_tokens: int = 0,
                 count: bool = True) -> Allocation | None:
        """Hold blocks for the first `num_tokens` of a prompt whose cacheable full blocks hash
        to `hashes`; counters count `prompt_tokens` (default `num_tokens`) as looked up unless
        `count` is False.

        Returns None (and changes nothing) when not enough blocks can be freed.
        """
        prompt_tokens = prompt_tokens or num_tokens
        need = -(-num_tokens // self.block_size)
        g, c = self.match(hashes)
        g = min(g, need)
        c = min(c, need - g)
        if not self._fits(hashes, g, need):
            return None
        alloc = Allocation(blocks=list(map(self.cached.__getitem__, hashes[:g])), gpu_hit_blocks=g,
                           cpu_hit_blocks=c)
        if g:
            hit = np.array(alloc.blocks)
            for block in hit[self.ref[hit] == 0].tolist():  # cached but unused: leave the free list
                del self.free[block]
            self.ref[hit] += 1  # (a sequence holds a block once)
        fresh = self._take(need - g)
        for i in range(c):  # loaded from DRAM: their content is known
            self._register(fresh[i], hashes[g + i])
            self.cpu.move_to_end(hashes[g + i])
        alloc.blocks += fresh
        self.seqs[seq] = alloc
        if not count:
            return alloc
        self.counters.gpu_queries += prompt_tokens
        self.counters.gpu_hits += min(prompt_tokens, g * self.block_size)
        if self.cpu_blocks:
            self.counters.external_queries += max(0, prompt_tokens - g * self.block_size)
            self.counters.external_hits += c * self.block_size
            self.counters.load_blocks += c
        self.seqs[seq] = alloc
        return alloc

    def can_allocate(self, hashes: list[int], num_tokens: int) -> bool:
        """Whether `allocate(_, hashes, num_tokens)` would succeed (no side effects)."""
        need = -(-num_tokens // self.block_size)
        return self._fits(hashes, min(self.match(hashes)[0], need), need)

    def _fits(self, hashes: list[int], g: int, need: int) -> bool:
        """Enough free blocks for `need` blocks of which the first `g` are GPU hits."""
        if need - g > len(self.free):
            return False
        hit = np.fromiter(map(self.cached.__getitem__, hashes[:g]), dtype=np.int64, count=g)
        return need - g <= len(self.free) - int(np.count_nonzero(self.ref[hit] == 0))

    def grow(self, seq, num_tokens: int) -> bool:
        """Make room for `num_tokens` in total; False when no block can be had."""
        alloc = self.seqs[seq]
        missing = -(-num_tokens // self.block_size) - len(alloc.blocks)
        if missing <= 0:
            return True
        alloc.blocks += self._take(min(missing, len(self.free)))
        return len(alloc.blocks) * self.block_size >= num_tokens

    def commit(self, seq, hashes: list[int], end: int | None = None) -> None:
        """Register the computed full blocks of a sequence, `hashes[:end]` (prefix-cacheable
        from now on), writing them through to the CPU tier."""
        hashes = hashes[:end]
        alloc = self.seqs[seq]
        blocks = alloc.blocks
        block_hash, cached = self.block_hash, self.cached
        for i in range(alloc.committed, min(len(hashes), len(blocks))):
            block, h = blocks[i], hashes[i]
            if block_hash[block] is None:
                other = cached.get(h)
                if other is None:
                    block_hash[block] = h
                    cached[h] = block
                else:  # computed twice at once: hold the cached copy, free this one
                    if self.ref[other] == 0:
                        del self.free[other]
                    self.ref[other] += 1
                    blocks[i] = other
                    self.ref[block] = 0
                    self.free[block] = None
                    self.free.move_to_end(block, last=False)
        if self.cpu_blocks:  # the store path (SPEC 6): the chunk's held blocks touched, its new absent ones written
            chunk = hashes[alloc.committed : min(len(hashes), len(blocks))]
            new_from = alloc.gpu_hit_blocks + alloc.cpu_hit_blocks - alloc.committed
            for h in chunk:
                if h in self.cpu:
                    self.cpu.move_to_end(h)
            for i, h in enumerate(chunk):
                if i >= new_from and h not in self.cpu:
                    self.cpu[h] = None
                    self.counters.offload_blocks += 1
            while len(self.cpu) > self.cpu_blocks:
                self.cpu.popitem(last=False)
        alloc.committed = max(alloc.committed, min(len(hashes), len(blocks)))

    def free_seq(self, seq, hints=None, now=0.0) -> None:  # LRU reads no hints
        """Release a sequence's blocks; cached ones stay reusable until evicted (LRU)."""
        blocks = np.array(self.seqs.pop(seq).blocks[::-1])  # the tail is least likely reused: evict it first
        if not len(blocks):
            return
        self.ref[blocks] -= 1
        block_hash, free = self.block_hash, self.free
        empty = []
        for block in blocks[self.ref[blocks] == 0].tolist():
            if block_hash[block] is None:
                empty.append(block)
            else:
                free[block] = None  # LRU: newest last
        for block in empty:  # no content: taken first
            free[block] = None
            free.move_to_end(block, last=False)

    # ---------------------------------------------------------------- internals

    def _register(self, block: int, h: int) -> None:
        self.block_hash[block] = h
        self.cached[h] = block

    def _take(self, n: int) -> list[int]:
        """`n` blocks from the LRU end of the free list (evicting their cached content), held."""
        pop, block_hash, cached = self.free.popitem, self.block_hash, self.cached
        out, evicted = [], 0
        for _ in range(n):
            block = pop(last=False)[0]
            h = block_hash[block]
            if h is not None:
                del cached[h]
                block_hash[block] = None
                evicted += 1
            out.append(block)
        self.ref[out] = 1
        self.counters.evictions += evicted
        return out
