"""Which free cached KV block the cache evicts when it needs a fresh one: an eviction policy
holds the blocks that hold cached content and that nobody references (`kvcache.py`), in the
order it gives them up. LRU (vLLM's rule) is the first; a retention policy that reads hints
(keep a session's prefix while its next turn is expected) sits beside it with the same methods:

- `append(blocks)`: blocks freed, in the order given (a sequence's tail first);
- `remove(blocks)`: blocks taken back out (a prefix hit on a free cached block);
- `pop(n)`: the `n` blocks to evict now (n <= len), removed;
- `len()` and iteration: the blocks held, in eviction order.
"""

from __future__ import annotations

from collections import deque
from enum import StrEnum

import numpy as np

from agentx.errors import AgentxError


class EvictionName(StrEnum):
    LRU = "lru"


class LRU:
    """Least recently used first, as runs: the blocks one sequence freed together enter as one
    run and are evicted in slices, with numpy. A block leaving from the middle (a prefix hit) is
    only marked; its run's entry goes stale."""

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


def eviction_policy(name: str, num_blocks: int) -> LRU:
    """The eviction policy of a name, for a cache of `num_blocks` blocks."""
    try:
        name = EvictionName(name)
    except ValueError:
        raise AgentxError(f"unknown eviction policy {name!r}; known: {', '.join(EvictionName)}") from None
    return LRU(num_blocks)  # (the only one so far)
