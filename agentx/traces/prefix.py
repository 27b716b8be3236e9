"""Hash ids synthesized from prefix lengths (SPEC §1, "Hash ids from prefix lengths").

Several formats record, per request, only how many leading tokens it shares with the request
before it in its chain (TraceLab's `prefix_tokens` / `prefix_len`), or imply it (TRIE turns and
rollout streams append to the previous prompt). `PrefixChain` turns that into block ids that
reproduce exactly the recorded reuse: request k keeps the first `prefix // block_size` blocks of
request k-1's ids (never more than k-1 had) and gets fresh ids for the rest of its full blocks.
A prefix shorter than the previous prompt (a compaction, a rewritten history, an expired
provider cache) therefore keeps only the blocks before the cut; everything after it is new.

Requests that extend their predecessor share one growing buffer (views), as WEKA loading does.
"""

from __future__ import annotations

import numpy as np

from agentx.traces.model import EMPTY_IDS, ids_array


class IdCounter:
    """Fresh ids of one id space (a session, or a group of sessions that share blocks)."""

    def __init__(self, first: int = 1):
        self.next = first
        self.dtype = np.uint64 if first >= 1 << 31 else np.uint32

    def take(self, n: int) -> np.ndarray:
        out = np.arange(self.next, self.next + n, dtype=self.dtype)
        self.next += n
        return out


class PrefixChain:
    """Block ids of one chain of requests, from each request's ISL and reused prefix."""

    def __init__(self, block_size: int, counter: IdCounter, start: np.ndarray = EMPTY_IDS):
        self.block, self.counter = block_size, counter
        self._buf = np.array(start, dtype=counter.dtype)
        self._n = len(start)  # the previous request's ids are self._buf[:self._n]

    def next(self, isl: int, prefix: int) -> np.ndarray:
        """Ids of the next request: `isl` tokens of which the first `prefix` repeat the previous one's."""
        want = isl // self.block
        keep = min(prefix // self.block, self._n, want)
        if keep < self._n:  # the context was cut: later views must not see the overwritten tail
            self._buf = self._buf[:keep].copy()
        if want > len(self._buf):
            grown = np.empty(2 * max(want, len(self._buf)), dtype=self._buf.dtype)
            grown[:keep] = self._buf[:keep]
            self._buf = grown
        self._buf[keep:want] = self.counter.take(want - keep)
        self._n = want
        return ids_array(self._buf[:want], self._buf.dtype) if want else EMPTY_IDS


def append_chain(block_size: int, counter: IdCounter, start: np.ndarray, isls: list[int]) -> list[np.ndarray]:
    """Ids of a chain whose every prompt extends the previous one in full (TRIE turns, rollouts)."""
    chain = PrefixChain(block_size, counter, start)
    out, prev = [], len(start) * block_size
    for isl in isls:
        out.append(chain.next(isl, prev))
        prev = isl
    return out
