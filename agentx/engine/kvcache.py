"""Paged KV cache with prefix caching and an optional CPU DRAM tier (clock-agnostic).

Modelled on vLLM's block manager and Dynamo's mocker:
- the GPU tier has `num_blocks` blocks of `block_size` tokens; a *full* block is identified by
  a chained hash of its tokens and its parent's hash, so equal prefixes share blocks;
- blocks carry refcounts; a block nobody references stays cached on an LRU list of free
  blocks and is evicted (its hash forgotten) only when a fresh block is needed; a block in
  use is never evicted;
- the CPU tier (`cpu_blocks > 0`) receives every computed full block (write-through) and has
  its own LRU; a prefix that misses on the GPU continues its lookup there, and the hit blocks
  are loaded into fresh GPU blocks (the caller costs the transfer).

The GPU's cached hashes are prefix-closed: a cached block's parent is cached. Whoever holds a
block holds its parents, and a freed sequence's tail enters the LRU before its head, so a parent
is never evicted before its children; a block computed while another sequence cached the same
content is swapped for the cached copy at commit (its own is freed), so no child is registered
below a parent its holder does not hold. The GPU lookup is therefore a binary search over the
prompt's hashes (O(log n) lookups, not one per block).
Counters follow vLLM's: queries and hits in tokens, for the GPU tier and the external tier.

Cost: a request's blocks are taken, registered and freed in bulk, never one Python step per
block: refcounts and the LRU of free cached blocks are numpy arrays (the blocks one sequence
frees enter the LRU as one run and leave it in slices), the hash index is updated by C-level
dict calls over the new blocks only. Eviction does not touch the index: an entry counts while
its block's `owner` is still its hash, and stale entries are dropped in bulk when they
outnumber the blocks 4 to 1 (a dict deletion per evicted block cost ~350 ns, mostly cache
misses, as much as registering it). The free list is the blocks without content (taken first),
then the cached ones, least recently used first: the order a per-block LRU list would have.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from itertools import islice, takewhile

import numpy as np


def block_hashes(token_ids, block_size: int) -> list[int]:
    """Chained hashes of the full blocks of a token sequence."""
    out, parent = [], 0
    for i in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[i : i + block_size])))
        out.append(parent)
    return out


@dataclass
class Counters:
    gpu_queries: int = 0  # prompt tokens looked up
    gpu_hits: int = 0  # prompt tokens found in GPU blocks
    external_queries: int = 0  # tokens looked up in the CPU tier (GPU misses)
    external_hits: int = 0  # tokens loaded from the CPU tier
    offload_blocks: int = 0  # blocks written to the CPU tier
    load_blocks: int = 0  # blocks loaded back from it
    evictions: int = 0  # GPU blocks whose cached content was dropped


class FreeCached:
    """The free blocks that hold cached content, least recently used first, as runs: the blocks
    one sequence freed together enter as one run and are evicted in slices, with numpy. A block
    leaving from the middle (a prefix hit) is only marked; its run's entry goes stale."""

    def __init__(self, num_blocks: int):
        self.runs: deque[list] = deque()  # [blocks (array), first unread position, stamp]
        self.stamp = np.full(num_blocks, -1, dtype=np.int64)  # the run a free cached block is in, or -1
        self.count = 0  # live entries
        self.entries = 0  # entries of all runs from their first unread position, stale ones included
        self.next_stamp = 0
        self.limit = 2 * num_blocks  # more entries than this: drop the stale ones

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        for blocks, pos, st in self.runs:
            rest = blocks[pos:]
            yield from rest[self.stamp[rest] == st].tolist()

    def append(self, blocks: np.ndarray) -> None:
        """Blocks become the most recently used, in this order."""
        if not len(blocks):
            return
        self.stamp[blocks] = self.next_stamp
        self.runs.append([blocks, 0, self.next_stamp])
        self.next_stamp += 1
        self.count += len(blocks)
        self.entries += len(blocks)
        if self.entries > self.limit:
            self._compact()

    def remove(self, blocks) -> None:
        """Blocks taken out of the free list (they are held again)."""
        self.stamp[blocks] = -1
        self.count -= len(blocks)

    def pop(self, n: int) -> np.ndarray:
        """The `n` (<= len) least recently used blocks, removed."""
        taken, stamp = [], self.stamp
        while n:
            run = self.runs[0]
            blocks, pos, st = run
            window = blocks[pos : pos + n]
            live = stamp[window] == st
            taken.append(window if live.all() else window[live])
            n -= len(taken[-1])
            run[1] = pos + len(window)
            self.entries -= len(window)
            if run[1] == len(blocks):
                self.runs.popleft()
        out = np.concatenate(taken)
        stamp[out] = -1
        self.count -= len(out)
        return out

    def _compact(self) -> None:
        """One run of the live entries, in order."""
        blocks = [run_blocks[pos:][self.stamp[run_blocks[pos:]] == st] for run_blocks, pos, st in self.runs]
        self.runs.clear()
        self.entries = self.count = 0
        self.append(np.concatenate(blocks))


@dataclass
class Allocation:
    """Blocks held by one sequence, and what its prompt found in the cache."""

    blocks: list[int] = field(default_factory=list)
    gpu_hit_blocks: int = 0
    cpu_hit_blocks: int = 0
    committed: int = 0  # leading blocks already passed to `commit`
    known: int = 0  # leading blocks whose content is known (registered)


class KVCache:
    def __init__(self, num_blocks: int, block_size: int = 16, cpu_blocks: int = 0):
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks, self.block_size, self.cpu_blocks = num_blocks, block_size, cpu_blocks
        self.ref = np.zeros(num_blocks, dtype=np.int32)  # holders per block (numpy: bulk updates)
        # hash -> GPU block, stale entries included: an entry counts only while its block still
        # holds that hash (`owner`); evicting a block just clears its owner (no dict operation)
        self.index: dict[int, int] = {}
        self.owner = np.empty(num_blocks, dtype=object)  # the hash each block holds, or None
        self.index_limit = 4 * num_blocks + 1024  # more entries than this: drop the stale ones
        # the free list: blocks without content (taken first, from the end), then cached ones
        self.empty: list[int] = list(range(num_blocks - 1, -1, -1))
        self.lru = FreeCached(num_blocks)
        self.cpu: OrderedDict[int, None] = OrderedDict()  # hashes held in DRAM, LRU first
        self.seqs: dict[object, Allocation] = {}
        self.counters = Counters()

    # ------------------------------------------------------------------ queries

    @property
    def free_blocks(self) -> int:
        return len(self.empty) + len(self.lru)

    @property
    def free(self) -> list[int]:
        """The free blocks in the order they are taken (for inspection; O(blocks))."""
        return self.empty[::-1] + list(self.lru)

    @property
    def cached(self) -> dict[int, int]:
        """{hash: GPU block} of the cached blocks (for inspection; O(entries))."""
        owner = self.owner
        return {h: b for h, b in self.index.items() if owner[b] == h}

    def _gpu_prefix(self, hashes: list[int]) -> int:
        """How many leading hashes are cached on the GPU: the first miss, found by binary search
        (cached hashes are prefix-closed)."""
        block_of, lo, hi = self._block_of, 0, len(hashes)
        while lo < hi:
            mid = (lo + hi) // 2
            if block_of(hashes[mid]) >= 0:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _block_of(self, h: int) -> int:
        """The GPU block caching hash `h`, or -1."""
        b = self.index.get(h)
        return b if b is not None and self.owner[b] == h else -1

    @property
    def usage(self) -> float:
        """Fraction of GPU blocks referenced by running sequences (vLLM's kv_cache_usage_perc)."""
        return 1.0 - self.free_blocks / self.num_blocks

    def match(self, hashes: list[int]) -> tuple[int, int]:
        """(GPU prefix hit blocks, CPU hit blocks continuing it), without side effects."""
        lo = self._gpu_prefix(hashes)
        if not self.cpu:
            return lo, 0
        return lo, sum(1 for _ in takewhile(self.cpu.__contains__, islice(hashes, lo, None)))

    # --------------------------------------------------------------- lifecycle

    def allocate(self, seq, hashes: list[int], num_tokens: int, prompt_tokens: int = 0) -> Allocation | None:
        """Hold blocks for the first `num_tokens` of a prompt whose cacheable full blocks hash
        to `hashes`; counters count `prompt_tokens` (default `num_tokens`) as looked up.

        Returns None (and changes nothing) when not enough blocks can be freed.
        """
        prompt_tokens = prompt_tokens or num_tokens
        need = -(-num_tokens // self.block_size)
        g, c = self.match(hashes)
        g = min(g, need)
        c = min(c, need - g)
        if not self._fits(hashes, g, need):
            return None
        blocks = list(map(self.index.__getitem__, islice(hashes, g)))  # (cached: their entries hold)
        if g:
            hit = np.array(blocks)
            self.lru.remove(hit[self.ref[hit] == 0])  # cached but unused: leave the free list
            self.ref[hit] += 1  # (a sequence holds a block once)
        fresh = self._take(need - g)
        if c:  # loaded from DRAM: their content is known
            loaded = hashes[g : g + c]
            self._register(loaded, fresh[:c])
            deque(map(self.cpu.move_to_end, loaded), maxlen=0)
        alloc = Allocation(blocks + fresh, g, c, known=g + c)
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
        free = self.free_blocks
        if need - g > free:
            return False
        hit = np.fromiter(map(self.index.__getitem__, islice(hashes, g)), dtype=np.int64, count=g)
        return need - g <= free - int(np.count_nonzero(self.ref[hit] == 0))

    def grow(self, seq, num_tokens: int) -> bool:
        """Make room for `num_tokens` in total; False when no block can be had."""
        alloc = self.seqs[seq]
        missing = -(-num_tokens // self.block_size) - len(alloc.blocks)
        if missing <= 0:
            return True
        alloc.blocks += self._take(min(missing, self.free_blocks))
        return len(alloc.blocks) * self.block_size >= num_tokens

    def commit(self, seq, hashes: list[int]) -> None:
        """Register the computed full blocks of a sequence (prefix-cacheable from now on),
        writing them through to the CPU tier."""
        alloc = self.seqs[seq]
        start, end = alloc.known, min(len(hashes), len(alloc.blocks))  # from `start` on: no content yet
        if end > start:
            new, own = hashes[start:end], alloc.blocks[start:end]
            if len(set(new)) == len(new):
                # cached meanwhile by another sequence: a prefix of `new` (cached hashes are prefix-closed)
                shared = self._gpu_prefix(new)
                if shared:
                    self._swap(alloc, start, own[:shared], list(map(self.index.__getitem__, new[:shared])))
                self._register(new[shared:], own[shared:])
            else:  # a hash twice in the prompt: block by block, the later copy swapped for the first
                cached_in = []
                for h, b in zip(new, own):
                    other = self._block_of(h)
                    if other < 0:
                        self._register([h], [b])
                    cached_in.append(b if other < 0 else other)
                self._swap(alloc, start, own, cached_in)
            alloc.known = end
        if self.cpu_blocks and end > alloc.committed:
            self._offload(hashes[alloc.committed : end])
        alloc.committed = max(alloc.committed, end)

    def free_seq(self, seq) -> None:
        """Release a sequence's blocks; cached ones stay reusable until evicted (LRU)."""
        alloc = self.seqs.pop(seq)
        blocks, known = alloc.blocks, alloc.known
        if not blocks:
            return
        held = np.array(blocks)[::-1]  # the tail is least likely reused: it enters the LRU first
        self.ref[held] -= 1
        zero = self.ref[held] == 0
        cut = len(blocks) - known  # the blocks without content (taken first) come before the cut
        self.empty += held[:cut][zero[:cut]].tolist()
        self.lru.append(held[cut:][zero[cut:]])

    # ---------------------------------------------------------------- internals

    def _take(self, n: int) -> list[int]:
        """`n` blocks from the front of the free list (evicting cached content), held."""
        empty = self.empty
        k = min(n, len(empty))
        out = empty[len(empty) - k :][::-1]
        del empty[len(empty) - k :]
        if out:
            self.ref[out] = 1
        if n > k:  # evict the least recently used cached blocks
            victims = self.lru.pop(n - k)
            self.owner[victims] = None  # their index entries go stale
            self.counters.evictions += n - k
            self.ref[victims] = 1
            out += victims.tolist()
        return out

    def _register(self, hashes: list[int], blocks: list[int]) -> None:
        """Blocks now cache these (distinct, uncached) hashes."""
        if not hashes:
            return
        self.index.update(zip(hashes, blocks))
        self.owner[np.array(blocks, dtype=np.int64)] = hashes
        if len(self.index) > self.index_limit:
            live = np.flatnonzero(self.owner != None)  # noqa: E711 (elementwise)
            self.index = dict(zip(self.owner[live].tolist(), live.tolist()))

    def _swap(self, alloc: Allocation, start: int, own: list[int], cached_in: list[int]) -> None:
        """Blocks whose content another sequence cached meanwhile (or this one, earlier in the
        prompt): the sequence holds the cached copy and its own block is freed."""
        for i, (block, other) in enumerate(zip(own, cached_in), start):
            if block != other:
                if self.ref[other] == 0:
                    self.lru.remove([other])
                self.ref[other] += 1
                alloc.blocks[i] = other
                self.ref[block] = 0
                self.empty.append(block)

    def _offload(self, hashes: list[int]) -> None:
        """Write blocks through to the CPU tier (LRU-bounded)."""
        cpu, before = self.cpu, len(self.cpu)
        if before + len(hashes) <= self.cpu_blocks:  # nothing to drop: in bulk
            cpu.update(dict.fromkeys(hashes))
            self.counters.offload_blocks += len(cpu) - before
            return
        for h in hashes:
            if h not in cpu:
                cpu[h] = None
                self.counters.offload_blocks += 1
                if len(cpu) > self.cpu_blocks:
                    cpu.popitem(last=False)
