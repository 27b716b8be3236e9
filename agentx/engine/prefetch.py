"""Prefetch (`--kv-policy prefetch` with a DRAM tier, SPEC §6 "KV policies"): KV brought from
host DRAM to HBM ahead of the requests that need it, as a modeled copy on the host link.

Triggers, from the harness hints a finished request carried:
- a subagent fork (`fork`, `fork_shared_tokens`): the prompt prefix the children share with the
  forking request;
- a subagent's end (`session_end` with a `parent_session_id`): the parent's last prompt, which
  the parent's next turn (after the join) extends.
The blocks of that prefix that are in DRAM and not in HBM are loaded into fresh HBM blocks
(`KVCache.prefetch`), held until the copy lands and then freed into the policy's kept order
(the children's or the parent's prefix stays resident until used). Copies queue on the host
link one after the other, at the roofline's host-link bandwidth, block by block; a transfer
already in flight (or landed) is not repeated (its blocks are cached). A request whose prefix
hit covers blocks not landed yet waits for the rest: its first iteration also takes the time
until its last such block lands (the iteration waits on the link, as a DRAM hit's load does).
Blocks only on the SSD tier are read into DRAM first (the SSD's read time, before the copy).
The prefetches' link queue is their own: a synchronous DRAM load, and the store path's writes
(`tiers.py`), do not queue behind a prefetch (not modeled).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

import numpy as np

from agentx.engine.hints import Hints


@dataclass
class PrefetchCounters:
    fork_blocks: int = 0  # blocks loaded on a fork
    join_blocks: int = 0  # blocks loaded on a subagent's end (for its parent)
    waited_s: float = 0.0  # modeled seconds requests' first iterations waited for blocks in flight


class Prefetcher:
    def __init__(self, kv, roofline):
        self.kv, self.block_size = kv, kv.block_size
        self.block_s = roofline.transfer_s(kv.block_size)  # one block over the host link
        self.lands_at = np.zeros(kv.num_blocks)  # when a prefetched block's copy lands (0: not one)
        self.link_free = 0.0  # the host link is busy with prefetches until then
        self.inflight: list = []  # heap of (last block lands, key)
        self.last: dict[str, list[int]] = {}  # session id -> hashes of its last finished prompt
        self.keys = itertools.count()
        self.counters = PrefetchCounters()

    def finished(self, seq, now: float) -> None:
        """A sequence finished (its blocks are free now): prefetch what its hints announce."""
        h = seq.hints
        if h is None:
            return
        if h.fork and h.fork_shared_tokens:
            self.counters.fork_blocks += self._start(seq.hashes[: h.fork_shared_tokens // self.block_size], now)
        if h.session_end and h.parent_session_id is not None and h.parent_session_id in self.last:
            self.counters.join_blocks += self._start(self.last[h.parent_session_id], now)
        if h.session_id is not None:
            if h.session_end:
                self.last.pop(h.session_id, None)
            else:
                self.last[h.session_id] = seq.hashes

    def _start(self, hashes: list[int], now: float) -> int:
        key = ("prefetch", next(self.keys))
        loaded = self.kv.prefetch(key, hashes)
        if not loaded:
            return 0
        alloc = self.kv.seqs[key]
        blocks = np.asarray(alloc.blocks[-loaded:], dtype=np.int64)
        begin = max(now, self.link_free) + self.kv.tiers.read_s(alloc.ssd_hit_blocks)  # SSD-only ones: read first
        lands = begin + self.block_s * np.arange(1, loaded + 1)
        self.lands_at[blocks] = lands
        self.link_free = float(lands[-1])
        heapq.heappush(self.inflight, (self.link_free, key))
        return loaded

    def land(self, now: float) -> None:
        """Copies landed by `now`: their blocks join the free cached blocks, kept (the policy's
        fork placement: the whole prefix)."""
        while self.inflight and self.inflight[0][0] <= now:
            _, key = heapq.heappop(self.inflight)
            alloc = self.kv.seqs[key]
            self.lands_at[np.asarray(alloc.blocks, dtype=np.int64)] = 0.0
            keep = Hints(fork=1, fork_shared_tokens=len(alloc.blocks) * self.block_size)
            self.kv.free_seq(key, keep, now)

    def wait(self, hit_blocks: list[int], now: float) -> float:
        """Seconds a request whose prefix hit holds these blocks waits for copies in flight."""
        if not self.inflight or not hit_blocks:
            return 0.0
        waited = max(0.0, float(self.lands_at[np.asarray(hit_blocks, dtype=np.int64)].max()) - now)
        self.counters.waited_s += waited
        return waited
