"""Paged KV cache with prefix caching and an optional CPU DRAM tier (clock-agnostic).

Modelled on vLLM's block manager and Dynamo's mocker:
- the GPU tier has `num_blocks` blocks of `block_size` tokens; a *full* block is identified by
  a chained hash of its tokens and its parent's hash, so equal prefixes share blocks;
- blocks carry refcounts; a block nobody references stays cached on an LRU list of free
  blocks and is evicted (its hash forgotten) only when a fresh block is needed; a block in
  use is never evicted;
- the CPU tier (`cpu_blocks > 0`) receives every computed full block (write-through) and has
  its own LRU; a prefix that misses on the GPU continues its lookup there, and the hit blocks
  are loaded into fresh GPU blocks (the caller costs the transfer). The tiers under HBM (DRAM,
  and an SSD under it) and the store path that writes them are `tiers.py`'s.

The GPU's cached hashes are prefix-closed: a cached block's parent is cached. Whoever holds a
block holds its parents, and a freed sequence's tail enters the LRU before its head, so a parent
is never evicted before its children; a block computed while another sequence cached the same
content is swapped for the cached copy at commit (its own is freed), so no child is registered
below a parent its holder does not hold, and a hash is only registered while it is not cached.
Counters follow vLLM's: queries and hits in tokens, for the GPU tier and the external tier.

The index is one of runs, not of blocks: the blocks a sequence registers at consecutive
positions form a run (its hashes and blocks, packed arrays), found by its first hash; a later commit
of the same sequence extends it. A block belongs to the run that last registered it (`run_of`,
-1 once evicted), at `offset`. Hashes are chained, so a prompt's cached prefix is found by a
walk: from its first hash's run, as far as that run agrees with the prompt and still owns its
blocks (a binary search: both hold for a prefix of the run), then from the run starting at the
next hash, and so on. That is complete: a cached block's parent is owned by the same run unless
the block starts one. Registering costs no dict insertion per block (27 million blocks in the
393-session benchmark, ~300 ns each in a hash index, mostly cache misses), and eviction only
clears `run_of`; runs that lost blocks are trimmed in bulk when the runs hold 4 entries per block.

Cost: a request's blocks are taken, registered and freed in bulk, never one Python step per
block: refcounts and the LRU of free cached blocks are numpy arrays (the blocks one sequence
frees enter the LRU as one run and leave it in slices). The free list is the blocks without
content (taken first), then the cached ones, least recently used first: the order a per-block
LRU list would have.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from agentx.engine.eviction import EvictionName, eviction_policy
from agentx.engine.tiers import Tiers

class Chain(list):
    """Block hashes that chain (each covers its parent's, as `block_hashes` and the virtual
    runner's `EngineBlocks` make them): a hash can repeat in one only by a 64-bit collision, which
    the cache already takes for equal content, so `commit` need not look for repeats in it (a set
    over every committed block's hash cost ~1.5 s of the 393-session benchmark). Any other list
    is checked, and a repeated hash handled as the per-block reference handles it."""


class PackedChain(array):
    """A Chain of unsigned 64-bit hashes packed 8 bytes each (`EngineBlocks`' for the virtual
    runner: at rack scale ~18 million hashes are in flight, 40 bytes each as a list of ints)."""

    def __new__(cls, values=()):
        return super().__new__(cls, "Q", values)


CHAINS = (Chain, PackedChain)


def block_hashes(token_ids, block_size: int) -> Chain:
    """Chained hashes of the full blocks of a token sequence: block i's is
    hash((block i - 1's, the tuple of its tokens)), 0 before the first."""
    out, parent = Chain(), 0
    for block in zip(*[iter(token_ids)] * block_size):  # the full blocks as tuples (no slice copies)
        parent = hash((parent, block))
        out.append(parent)
    return out


@dataclass
class Counters:
    gpu_queries: int = 0  # prompt tokens looked up
    gpu_hits: int = 0  # prompt tokens found in GPU blocks
    external_queries: int = 0  # tokens looked up in the CPU tier (GPU misses)
    external_hits: int = 0  # tokens loaded from the CPU tier
    ssd_hits: int = 0  # of them, tokens only the SSD tier under DRAM held (`tiers.py`)
    offload_blocks: int = 0  # blocks written to the CPU tier
    load_blocks: int = 0  # blocks loaded back from it
    evictions: int = 0  # GPU blocks whose cached content was dropped


@dataclass
class Allocation:
    """Blocks held by one sequence, and what its prompt found in the cache."""

    blocks: array = field(default_factory=lambda: array("q"))  # block ids, packed (see `_ids`)
    gpu_hit_blocks: int = 0
    cpu_hit_blocks: int = 0
    ssd_hit_blocks: int = 0  # of them, read off the SSD tier
    committed: int = 0  # leading blocks already passed to `commit`
    known: int = 0  # leading blocks whose content is known (registered)


class KVCache:
    def __init__(self, num_blocks: int, block_size: int = 16, cpu_blocks: int = 0,
                 eviction: str = EvictionName.LRU, tiers: Tiers | None = None):
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.tiers = tiers if tiers is not None else Tiers(cpu_blocks)  # DRAM and SSD under HBM (`tiers.py`)
        self.num_blocks, self.block_size, self.cpu_blocks = num_blocks, block_size, self.tiers.dram.capacity
        self.ref = np.zeros(num_blocks, dtype=np.int32)  # holders per block (numpy: bulk updates)
        # the index of runs (see the module docstring): run id -> (hashes, blocks), first hash -> run id
        self.runs: dict[int, tuple[list[int], list[int]]] = {}
        self.starts: dict[int, int] = {}
        self.run_of = np.full(num_blocks, -1, dtype=np.int64)  # the run owning each block's content, or -1
        self.offset = np.zeros(num_blocks, dtype=np.int64)  # the block's position in that run
        self.next_run = 0
        self.entries = 0  # run entries, stale ones included
        self.entries_limit = 4 * num_blocks  # more than this: trim the runs
        # the free list: blocks without content (taken first, from the end), then cached ones
        self.empty = array("q", range(num_blocks - 1, -1, -1))
        self.free_cached = eviction_policy(eviction, num_blocks, block_size)  # the free cached blocks (`eviction.py`)
        self.seqs: dict[object, Allocation] = {}
        self.counters = Counters()
        # changes that may let an allocation fit that did not (blocks freed, content cached): taking
        # blocks (`grow`) only loses free blocks and cached content, which never does (`EngineCore.admission_blocked`)
        self.gains = 0

    # ------------------------------------------------------------------ queries

    @property
    def cpu(self) -> OrderedDict[int, None]:
        """The hashes held in DRAM, LRU first."""
        return self.tiers.dram.blocks

    @property
    def free_blocks(self) -> int:
        return len(self.empty) + len(self.free_cached)

    @property
    def free(self) -> list[int]:
        """The free blocks in the order they are taken (for inspection; O(blocks))."""
        return list(self.empty[::-1]) + list(self.free_cached)

    @property
    def cached(self) -> dict[int, int]:
        """{hash: GPU block} of the cached blocks (for inspection; O(entries))."""
        run_of = self.run_of
        return {h: b for rid, (hashes, blocks) in self.runs.items() for h, b in zip(hashes, blocks)
                if run_of[b] == rid}

    @property
    def usage(self) -> float:
        """Fraction of GPU blocks referenced by running sequences (vLLM's kv_cache_usage_perc)."""
        return 1.0 - self.free_blocks / self.num_blocks

    def match(self, hashes: list[int]) -> tuple[int, int]:
        """(GPU prefix hit blocks, CPU hit blocks continuing it), without side effects."""
        hit, c = self._match_blocks(hashes)
        return len(hit), c

    def _match_blocks(self, hashes: list[int]) -> tuple[list[int], int]:
        """(the GPU blocks of the cached prefix, CPU hit blocks continuing it)."""
        hit = self._cached_prefix(hashes, 0, -1)
        if not self.tiers.dram.blocks:
            return hit, 0
        return hit, self.tiers.match(hashes, len(hit))

    def _cached_prefix(self, hashes: list[int], start: int, prev: int) -> list[int]:
        """The GPU blocks caching `hashes[start:]`'s leading hashes, up to the first miss;
        `prev`: the block caching `hashes[start - 1]` (-1 when start is 0)."""
        runs, starts, q, n = self.runs, self.starts, start, len(hashes)
        out = array("q")
        rid, k = (int(self.run_of[prev]), int(self.offset[prev]) + 1) if prev >= 0 else (-1, 0)
        fresh = False  # whether run `rid` starts at q (else it owns the block before q)
        while q < n:
            if rid >= 0:
                m = self._agree(rid, k, hashes, q)
                if fresh and not m:
                    break
                out += runs[rid][1][k : k + m]
                q += m
                if q == n:
                    break
            rid, k, fresh = starts.get(hashes[q], -1), 0, True  # where the run stops, one may start
            if rid < 0:
                break
        return out

    def _agree(self, rid: int, k: int, hashes: list[int], q: int) -> int:
        """How many entries of run `rid` from `k` equal `hashes[q:]` and still own their block
        (both hold for a prefix: binary search)."""
        run_hashes, blocks = self.runs[rid]
        run_of = self.run_of
        lo, hi = 0, min(len(run_hashes) - k, len(hashes) - q)
        while lo < hi:  # the answer is in [lo, hi]
            mid = (lo + hi + 1) // 2
            if run_hashes[k + mid - 1] == hashes[q + mid - 1] and run_of[blocks[k + mid - 1]] == rid:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _block_of(self, h: int) -> int:
        """The GPU block caching `h` at any position, or -1: a scan of the runs, only for a
        prompt with a repeated hash (not a chain; see `commit`)."""
        run_of = self.run_of
        for rid, (hashes, blocks) in self.runs.items():
            for h2, b in zip(hashes, blocks):
                if h2 == h and run_of[b] == rid:
                    return b
        return -1

    # --------------------------------------------------------------- lifecycle

    def allocate(self, seq, hashes: list[int], num_tokens: int, prompt_tokens: int = 0,
                 count: bool = True) -> Allocation | None:
        """Hold blocks for the first `num_tokens` of a prompt whose cacheable full blocks hash
        to `hashes`; counters count `prompt_tokens` (default `num_tokens`) as looked up, unless
        `count` is False (KV that arrived from a prefill worker: no lookup, SPEC §6).

        Returns None (and changes nothing) when not enough blocks can be freed.
        """
        prompt_tokens = prompt_tokens or num_tokens
        need = -(-num_tokens // self.block_size)
        blocks, c = self._match_blocks(hashes)
        del blocks[need:]
        g = len(blocks)
        c = min(c, need - g)
        if not self._fits(blocks, need):
            return None
        fresh, ssd = self._hold(blocks, hashes, c, need - g)
        alloc = Allocation(blocks + fresh, g, c, ssd, known=g + c)
        self.seqs[seq] = alloc
        if not count:
            return alloc
        self.counters.gpu_queries += prompt_tokens
        self.counters.gpu_hits += min(prompt_tokens, g * self.block_size)
        if self.cpu_blocks:
            self.counters.external_queries += max(0, prompt_tokens - g * self.block_size)
            self.counters.external_hits += c * self.block_size
            self.counters.ssd_hits += ssd * self.block_size
            self.counters.load_blocks += c
        return alloc

    def prefetch(self, key, hashes: list[int]) -> int:
        """Load the DRAM (or SSD) blocks that continue `hashes`' GPU-cached prefix into fresh GPU blocks,
        their content registered, held by `key` (a pseudo-sequence: `free_seq(key)` lets them go)
        until the caller's modeled copy has landed; the blocks loaded (0: none in DRAM, or not room
        for all of them: a copy that does not fit is not started).
        Counted as loads, not as prefix queries (`prefetch.py`)."""
        blocks, c = self._match_blocks(hashes)
        g = len(blocks)
        if not c or not self._fits(blocks, g + c):
            return 0
        fresh, ssd = self._hold(blocks, hashes, c, c)  # (the SSD-only ones read into DRAM on the way)
        self.counters.load_blocks += c
        self.seqs[key] = Allocation(blocks + fresh, 0, c, ssd, committed=g + c, known=g + c)
        return c

    def can_allocate(self, hashes: list[int], num_tokens: int) -> bool:
        """Whether `allocate(_, hashes, num_tokens)` would succeed (no side effects)."""
        need = -(-num_tokens // self.block_size)
        return self._fits(self._cached_prefix(hashes, 0, -1)[:need], need)

    def _fits(self, hit: list[int], need: int) -> bool:
        """Enough free blocks for `need` blocks besides the GPU hits `hit` (which leave the free
        list when unused)."""
        free, g = self.free_blocks, len(hit)
        if need - g > free:
            return False
        return need - g <= free - int(np.count_nonzero(self.ref[_ids(hit)] == 0))

    def grow(self, seq, num_tokens: int) -> bool:
        """Make room for `num_tokens` in total; False when no block can be had."""
        alloc = self.seqs[seq]
        missing = -(-num_tokens // self.block_size) - len(alloc.blocks)
        if missing <= 0:
            return True
        alloc.blocks += self._take(min(missing, self.free_blocks))
        return len(alloc.blocks) * self.block_size >= num_tokens

    def commit(self, seq, hashes: list[int], end: int | None = None) -> None:
        """Register the computed full blocks of a sequence, `hashes[:end]` (prefix-cacheable
        from now on), writing them through to the CPU tier."""
        alloc = self.seqs[seq]
        blocks = alloc.blocks
        self.gains += 1
        start = alloc.known  # from here on: no content yet
        end = min(len(hashes), len(blocks), len(hashes) if end is None else end)
        if end > start:
            new, own = hashes[start:end], blocks[start:end]
            prev = blocks[start - 1] if start else -1
            if type(hashes) in CHAINS or len(set(new)) == len(new):
                # cached meanwhile by another sequence: a prefix of `new` (cached hashes are prefix-closed)
                cached_in = self._cached_prefix(new, 0, prev)
                shared = len(cached_in)
                if shared:
                    self._swap(alloc, start, own[:shared], cached_in)
                    prev = cached_in[-1]
                if shared < len(new):
                    self._register(prev, new[shared:], own[shared:])
            else:  # a hash twice in the prompt (not a chain): block by block, the later copy swapped for the first
                cached_in = []
                for h, b in zip(new, own):
                    other = self._block_of(h)
                    if other < 0:
                        self._register(-1, [h], [b])
                    cached_in.append(b if other < 0 else other)
                self._swap(alloc, start, own, cached_in)
            alloc.known = end
        if self.cpu_blocks and end > alloc.committed:  # written through (the store path: `tiers.py`)
            found = alloc.gpu_hit_blocks + alloc.cpu_hit_blocks - alloc.committed
            self.counters.offload_blocks += self.tiers.store(hashes[alloc.committed : end], max(0, found))
        alloc.committed = max(alloc.committed, end)

    def free_seq(self, seq, hints=None, now: float = 0.0) -> None:
        """Release a sequence's blocks; cached ones stay reusable until evicted, in the order of
        the eviction policy, which reads the hints of the request (None: none)."""
        alloc = self.seqs.pop(seq)
        blocks, known = alloc.blocks, alloc.known
        self.gains += 1
        if not blocks:
            return
        held = _ids(blocks)[::-1]  # the tail is least likely reused: LRU first
        self.ref[held] -= 1
        zero = self.ref[held] == 0
        cut = len(blocks) - known  # the blocks without content (taken first) come before the cut
        self.empty.frombytes(held[:cut][zero[:cut]].tobytes())
        positions = np.arange(len(blocks) - 1 - cut, -1, -1) if hints is not None else None
        self.free_cached.append(held[cut:][zero[cut:]], hints, positions[zero[cut:]] if positions is not None else None,
                                now)

    # ---------------------------------------------------------------- internals

    def _hold(self, blocks, hashes: list[int], c: int, new: int) -> tuple[array, int]:
        """Hold the GPU hit `blocks` (the cached prefix of `hashes`), take `new` fresh blocks and load
        into the first `c` of them the DRAM (or SSD) blocks that continue the prefix, their content
        registered; (the fresh blocks, how many of the loaded ones were read off the SSD)."""
        g = len(blocks)
        if g:
            hit = _ids(blocks)
            self.free_cached.remove(hit[self.ref[hit] == 0])  # cached but unused: leave the free list
            self.ref[hit] += 1  # (a sequence holds a block once)
        fresh = self._take(new)
        ssd = 0
        if c:  # loaded from DRAM (or the SSD under it): their content is known
            loaded = hashes[g : g + c]
            self._register(blocks[-1] if g else -1, loaded, fresh[:c])
            ssd = self.tiers.load(loaded)
        self.gains += 1  # content cached: a prompt may now hit more of it
        return fresh, ssd

    def _take(self, n: int) -> array:
        """`n` blocks from the front of the free list (evicting cached content), held."""
        empty, ref = self.empty, self.ref
        k = min(n, len(empty))
        if k == 1:  # (a decode crossing a block boundary: scalars, not numpy's per-call cost)
            out = array("q", (empty.pop(),))
            ref[out[0]] = 1
        else:
            out = empty[len(empty) - k :][::-1]
            del empty[len(empty) - k :]
            if out:
                ref[_ids(out)] = 1
        if n > k:  # evict the least recently used cached blocks
            victims = self.free_cached.pop(n - k)
            self.counters.evictions += n - k
            if n - k == 1:
                victim = int(victims[0])
                self.run_of[victim] = -1
                ref[victim] = 1
                out.append(victim)
            else:
                self.run_of[victims] = -1  # their run entries go stale
                ref[victims] = 1
                out.frombytes(victims.astype(np.int64, copy=False).tobytes())
        return out

    def _register(self, prev: int, hashes: list[int], blocks: list[int]) -> None:
        """Blocks now cache these (distinct, uncached) hashes, which follow the block `prev`
        (-1: none): the run that ends with `prev` is extended, else a run starts."""
        rid = int(self.run_of[prev]) if prev >= 0 else -1
        if rid >= 0 and int(self.offset[prev]) == len(self.runs[rid][0]) - 1:
            run_hashes, run_blocks = self.runs[rid]
            k = len(run_hashes)
            run_hashes.extend(hashes)
            run_blocks.extend(blocks)
        else:
            rid, k = self.next_run, 0
            self.next_run += 1
            # a PackedChain's hashes stay packed (its slices are arrays of unsigned ints); a list's
            # (Python's signed hash() values, the HTTP server's) stay a list
            self.runs[rid] = (array("Q", hashes) if isinstance(hashes, array) else list(hashes), array("q", blocks))
            self.starts[hashes[0]] = rid  # (a run that started with it before owns no block now)
        at = _ids(blocks)
        self.run_of[at] = rid
        self.offset[at] = np.arange(k, k + len(at))
        self.entries += len(at)
        if self.entries > self.entries_limit:
            self._trim()

    def _trim(self) -> None:
        """Cut each run to the entries that still own their block (a prefix), and drop the
        runs left empty."""
        for rid, (hashes, blocks) in list(self.runs.items()):
            live = self._agree(rid, 0, hashes, 0)
            if not live:
                del self.runs[rid]
                if self.starts.get(hashes[0]) == rid:
                    del self.starts[hashes[0]]
            del hashes[live:], blocks[live:]
        self.entries = sum(len(hashes) for hashes, _ in self.runs.values())

    def _swap(self, alloc: Allocation, start: int, own: list[int], cached_in: list[int]) -> None:
        """Blocks whose content another sequence cached meanwhile (or this one, earlier in the
        prompt): the sequence holds the cached copy and its own block is freed."""
        for i, (block, other) in enumerate(zip(own, cached_in), start):
            if block != other:
                if self.ref[other] == 0:
                    self.free_cached.remove([other])
                self.ref[other] += 1
                alloc.blocks[i] = other
                self.ref[block] = 0
                self.empty.append(block)


def _ids(blocks) -> np.ndarray:
    """Block ids as an int64 array: a copy of an `array("q")` (a buffer copy, where numpy would
    read an array's items one by one), or of a list."""
    if type(blocks) is array:
        return np.frombuffer(blocks, np.int64).copy()
    return np.array(blocks, dtype=np.int64)
