"""Which free cached KV block the cache evicts when it needs a fresh one: an eviction policy
holds the blocks that hold cached content and that nobody references (`kvcache.py`), in the
order it gives them up. LRU (vLLM's rule) is the first; the policies that read harness hints
(`hints.py`, SPEC §6 "KV policies") sit beside it with the same methods:

- `append(blocks, hints, positions, now)`: blocks freed, in the order given (a sequence's tail
  first), with the hints of the request that freed them (None: none), each block's position in
  it, and the modeled time;
- `remove(blocks)`: blocks taken back out (a prefix hit on a free cached block);
- `pop(n)`: the `n` blocks to evict now (n <= len), removed;
- `len()` and iteration: the blocks held, in eviction order.
"""

from __future__ import annotations

import heapq
from collections import deque
from enum import StrEnum

import numpy as np

from agentx.errors import AgentxError


class EvictionName(StrEnum):
    LRU = "lru"
    RETAIN = "retain"
    DEMOTE = "demote"
    PREFETCH = "prefetch"


RETAIN_HORIZON_S = 300.0  # an oracle gap up to this long is worth holding blocks through
PIN_SHARE = 0.5  # at most this share of the GPU blocks are held back from eviction


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

    def append(self, blocks: np.ndarray, hints=None, positions=None, now: float = 0.0) -> None:
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
        if n == 1:
            return self._pop_one()
        taken, stamp = [], self.stamp
        run = self.runs[0]
        blocks, pos, st = run
        if pos + n <= len(blocks):  # (the common case: one run holds them, all still free)
            window = blocks[pos : pos + n]
            if (stamp[window] == st).all():
                run[1] = pos + n
                self.entries -= n
                if pos + n == len(blocks):
                    self.runs.popleft()
                stamp[window] = -1
                self.count -= n
                return window
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

    def _pop_one(self) -> np.ndarray:
        """`pop(1)` with scalars (a decode's next block: numpy's per-call cost would dominate)."""
        stamp, runs = self.stamp, self.runs
        while True:
            run = runs[0]
            blocks, pos, st = run
            block = int(blocks[pos])
            run[1] = pos + 1
            self.entries -= 1
            if pos + 1 == len(blocks):
                runs.popleft()
            if stamp[block] == st:
                stamp[block] = -1
                self.count -= 1
                return blocks[pos : pos + 1]

    def _compact(self) -> None:
        """One run of the live entries, in order."""
        blocks = [run_blocks[pos:][self.stamp[run_blocks[pos:]] == st] for run_blocks, pos, st in self.runs]
        self.runs.clear()
        self.entries = self.count = 0
        self.append(np.concatenate(blocks))


class _Tiered:
    """Three LRU orders evicted one after the other: `first` (blocks demoted: evicted before any
    other), `normal`, and `kept` (held back: evicted only when nothing else is left, and at most
    PIN_SHARE of the cache; past that the longest kept go back to the normal order). A policy says
    which blocks of a freed request go where (`place`)."""

    def __init__(self, num_blocks: int):
        self.first, self.normal, self.kept = LRU(num_blocks), LRU(num_blocks), LRU(num_blocks)
        self.pin_limit = int(PIN_SHARE * num_blocks)
        self.order = (self.first, self.normal, self.kept)

    def __len__(self) -> int:
        return len(self.first) + len(self.normal) + len(self.kept)

    def __iter__(self):
        for q in self.order:
            yield from q

    def place(self, hints, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mask of the blocks to demote, mask of the blocks to keep) of one freed request."""
        none = np.zeros(len(positions), dtype=bool)
        return none, none

    def append(self, blocks: np.ndarray, hints=None, positions=None, now: float = 0.0) -> None:
        if not len(blocks):
            return
        if hints is None or positions is None:
            self.normal.append(blocks)
            return
        demote, keep = self.place(hints, positions)
        self.first.append(blocks[demote])
        self.normal.append(blocks[~(demote | keep)])
        self.kept.append(blocks[keep])
        over = len(self.kept) - self.pin_limit
        if over > 0:
            self.normal.append(self.kept.pop(over))

    def remove(self, blocks) -> None:
        blocks = np.asarray(blocks, dtype=np.int64)
        for q in self.order:
            mine = blocks[q.stamp[blocks] >= 0]
            if len(mine):
                q.remove(mine)

    def pop(self, n: int) -> np.ndarray:
        out = []
        for q in self.order:
            k = min(n, len(q))
            if k:
                out.append(q.pop(k))
                n -= k
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class Retain(_Tiered):
    """Keep a session's prefix while its tool call runs: the blocks of a request whose answer calls
    a tool (`tool_call`) are kept. With the oracle's `next_use` (else its `next_gap_s`) the policy
    knows when each freed block is used next anywhere in its session tree (else: the freed prefix,
    by its own stream): those blocks are given up after all others, the one needed last first
    (Belady's rule), unbounded: an order, not a pin; with `next_use`, blocks the tree never uses
    again go first."""

    def __init__(self, num_blocks: int, block_size: int = 16):
        super().__init__(num_blocks)
        self.block_size = block_size
        self.timed: list = []  # heap of (-next use, entry id, blocks)
        self.entry = np.full(num_blocks, -1, dtype=np.int64)  # the timed entry a block is in, or -1
        self.n_timed = 0
        self.next_entry = 0

    def __len__(self) -> int:
        return super().__len__() + self.n_timed

    def __iter__(self):
        yield from self.first
        yield from self.normal
        for _, eid, blocks in sorted(self.timed):
            yield from blocks[self.entry[blocks] == eid].tolist()
        yield from self.kept

    def place(self, hints, positions):
        none = np.zeros(len(positions), dtype=bool)
        return none, ~none if hints.tool_call is not None else none

    def append(self, blocks, hints=None, positions=None, now: float = 0.0) -> None:
        if hints is not None and hints.next_use is not None and positions is not None and len(blocks):
            self._next_use(blocks, positions, hints.next_use, now)
            return
        if hints is None or hints.next_gap_s is None or not len(blocks):
            super().append(blocks, hints, positions)
            return
        self._timed(blocks, now + hints.next_gap_s)

    def _timed(self, blocks: np.ndarray, at: float) -> None:
        eid = self.next_entry
        self.next_entry += 1
        self.entry[blocks] = eid
        self.n_timed += len(blocks)
        heapq.heappush(self.timed, (-at, eid, blocks))

    def _next_use(self, blocks: np.ndarray, positions: np.ndarray, steps, now: float) -> None:
        """The oracle's tree-wide next use (`Hints.next_use`): each block is held until the time
        its prefix is next used anywhere in the session tree (Belady: the one needed last goes
        first); a block the tree never uses again is evicted before any other."""
        ends = (positions + 1) * self.block_size  # the tokens up to a block's end
        gap = np.full(len(blocks), np.inf)
        for upto, g in steps:  # a block's next use: the soonest step covering it (any order)
            covered = ends <= upto
            gap[covered] = np.minimum(gap[covered], g)
        self.first.append(blocks[np.isinf(gap)])
        for g in np.unique(gap[~np.isinf(gap)]):
            self._timed(blocks[gap == g], now + float(g))

    def remove(self, blocks) -> None:
        blocks = np.asarray(blocks, dtype=np.int64)
        timed = self.entry[blocks] >= 0
        self.entry[blocks[timed]] = -1
        self.n_timed -= int(timed.sum())
        super().remove(blocks[~timed])

    def pop(self, n: int) -> np.ndarray:
        out = []
        for q in (self.first, self.normal):
            k = min(n, len(q))
            if k:
                out.append(q.pop(k))
                n -= k
        while n and self.timed:
            _, eid, blocks = self.timed[0]
            live = blocks[self.entry[blocks] == eid]
            take, rest = live[:n], live[n:]
            self.entry[take] = -1
            self.n_timed -= len(take)
            n -= len(take)
            out.append(take)
            if len(rest):
                self.timed[0] = (self.timed[0][0], eid, rest)
            else:
                heapq.heappop(self.timed)
        if n:
            out.append(self.kept.pop(n))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class Demote(_Tiered):
    """On session end, its blocks are evicted first (to the DRAM tier where there is one: it holds
    them already, written through); with the oracle, also those of a stream that comes back only
    after more than RETAIN_HORIZON_S. A session ends with its top stream (no parent): a subagent's
    or an aux chain's end is not one, its prefix is often its siblings' or its parent's."""

    def place(self, hints, positions):
        none = np.zeros(len(positions), dtype=bool)
        ended = hints.session_end and hints.parent_session_id is None
        late = hints.next_gap_s is not None and hints.next_gap_s > RETAIN_HORIZON_S
        return (~none if ended or late else none), none


class Prefetch(_Tiered):
    """On a subagent fork, the prompt prefix the children share with the forking request is kept
    resident until they come (a prefix already in HBM needs no fetch; one only in DRAM is loaded
    on the first child's hit, as any DRAM hit)."""

    def __init__(self, num_blocks: int, block_size: int = 16):
        super().__init__(num_blocks)
        self.block_size = block_size

    def place(self, hints, positions):
        none = np.zeros(len(positions), dtype=bool)
        if not hints.fork or not hints.fork_shared_tokens:
            return none, none
        return none, positions < hints.fork_shared_tokens // self.block_size


_POLICIES = {EvictionName.LRU: LRU, EvictionName.RETAIN: Retain, EvictionName.DEMOTE: Demote,
             EvictionName.PREFETCH: Prefetch}


def eviction_policy(name: str, num_blocks: int, block_size: int = 16):
    """The eviction policy of a name, for a cache of `num_blocks` blocks of `block_size` tokens."""
    try:
        name = EvictionName(name)
    except ValueError:
        raise AgentxError(f"unknown KV policy {name!r}; known: {', '.join(EvictionName)}", "kv_policy") from None
    if name in (EvictionName.PREFETCH, EvictionName.RETAIN):
        return _POLICIES[name](num_blocks, block_size)
    return _POLICIES[name](num_blocks)
