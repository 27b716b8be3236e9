"""Hybrid attention: sliding-window layers beside full-attention layers (SPEC §6 "Hybrid
attention"), and which window-layer KV outlives its request (`--window-retention`).

A full-attention layer keeps KV for every token: that is the block pool of `kvcache.py`. A
sliding-window layer attends only the last `sliding_window` tokens and keeps KV only for them
(vLLM's hybrid KV cache manager frees a window layer's blocks as they slide out of the window).
Resuming a prompt after a cached prefix of b blocks needs both: the full layers' KV of the b
blocks, and the window layers' KV of the window ending at block b (the "window state" at b; vLLM's
sliding-window prefix hit needs those blocks cached too). A full-attention hit without window
state at its boundary is not usable: the hit falls back to the last boundary that has one.

What retention keeps (`Retention`):
- `off`: the window layers are not modeled (every full-attention hit is usable; the presets'
  figures before hybrid attention was modeled);
- `none`: no window state outlives the request that computed it (a per-request ring of the last
  window), so a later request's hit collapses to what needs no window state: nothing;
- `sparse`: window state is retained at checkpoints, every `checkpoint_blocks` blocks of a
  prefill and at the end of each prompt (where the stream's next turn resumes), in an LRU store
  of its own; a hit resumes at the last retained checkpoint at or below the full-attention hit.

Memory: a window state is `ceil(window / block)` blocks of the window layers' KV. The KV memory
the full layers had alone is split: every running sequence's ring of window blocks (`max_num_seqs`
of them) is reserved first; with `sparse`, the checkpoint store gets the share a fully
checkpointed prefix needs (w x r window blocks per `checkpoint_blocks` full blocks, r the window
layers' KV bytes over the full layers'), the full-attention pool the rest.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

from agentx.errors import AgentxError


class Retention(StrEnum):
    OFF = "off"
    NONE = "none"
    SPARSE = "sparse"


@dataclass
class WindowCounters:
    full_hit_tokens: int = 0  # prompt tokens the full-attention layers held at admission
    usable_hit_tokens: int = 0  # of them, usable (window state at the boundary)
    checkpoints: int = 0  # window states written to the store
    checkpoint_evictions: int = 0  # dropped from it (LRU)


class WindowState:
    """The window states retained at block boundaries (keyed by the chained hash of the boundary's
    last block, which names the whole prefix), LRU first."""

    def __init__(self, retention: str, window_blocks: int, every: int, capacity: int):
        self.retention, self.window_blocks, self.every, self.capacity = retention, window_blocks, every, capacity
        self.states: OrderedDict[int, None] = OrderedDict()
        self.counters = WindowCounters()
        self.last: tuple[int, int | None] = (0, None)  # the last `usable` query: (full hit, boundary hash)

    def usable(self, hashes: list[int], hit: int) -> int:
        """The longest prefix of the `hit` blocks (cached in the full layers) that can be resumed:
        the last boundary at or below `hit` with window state (0: none)."""
        states = self.states
        self.last = (hit, None)
        if not states or not hit:
            return 0
        for b in range(hit, 0, -1):
            if hashes[b - 1] in states:
                self.last = (hit, hashes[b - 1])
                return b
        return 0

    def admitted(self, usable: int, block_size: int) -> None:
        """The sequence last queried (`usable`) was admitted with `usable` blocks of hit: its
        checkpoint becomes the most recently used."""
        hit, h = self.last
        self.counters.full_hit_tokens += hit * block_size
        self.counters.usable_hit_tokens += usable * block_size
        if h is not None:
            self.states.move_to_end(h)

    def computed(self, hashes: list[int], start: int, end: int, final: bool) -> None:
        """A prefill computed blocks [start, end) of `hashes`: the checkpoints it passed (every
        `every` blocks), and its end when the prompt is done (`final`), are retained."""
        if self.retention != Retention.SPARSE or end <= start:
            return
        first = (start // self.every + 1) * self.every
        points = list(range(first, end + 1, self.every))
        if final and (not points or points[-1] != end):
            points.append(end)
        for b in points:
            self._keep(hashes[b - 1])

    def _keep(self, h: int) -> None:
        states = self.states
        if h in states:
            states.move_to_end(h)
            return
        if self.capacity <= 0:
            return
        states[h] = None
        self.counters.checkpoints += 1
        if len(states) > self.capacity:
            states.popitem(last=False)
            self.counters.checkpoint_evictions += 1


def window_state(cfg, roofline, pool_blocks: int) -> tuple[WindowState | None, int]:
    """(the window state of a deployment, or None when not modeled; the full-attention pool's
    blocks) from the `pool_blocks` the full layers would have alone."""
    m = roofline.model
    if cfg.window_retention == Retention.OFF:
        return None, pool_blocks
    if not m.window_layers or not m.sliding_window:
        raise AgentxError(f"{m.key} has no sliding-window layers; --window-retention {cfg.window_retention} "
                          "needs a hybrid-attention model (e.g. gpt-oss-120b)", "window_retention")
    bs = cfg.block_size
    w = math.ceil(m.sliding_window / bs)
    ratio = m.window_layers / (m.kv_layers or m.layers)  # window-layer KV bytes per full-layer KV byte
    rings = math.ceil(cfg.max_num_seqs * (w + 1) * ratio)  # a running sequence's window (+ the block it fills)
    rest = pool_blocks - rings
    if rest <= 0:
        raise AgentxError(f"the KV cache ({pool_blocks:,} blocks) cannot hold {cfg.max_num_seqs} sequences' "
                          "sliding windows; lower --max-num-seqs", "max_num_seqs")
    capacity, full = 0, rest
    if cfg.window_retention == Retention.SPARSE:
        state_blocks = w * ratio  # one window state, in full-layer block equivalents
        share = state_blocks / (cfg.checkpoint_blocks + state_blocks)
        capacity = int(rest * share / state_blocks)
        full = rest - math.ceil(capacity * state_blocks)
    return WindowState(cfg.window_retention, w, cfg.checkpoint_blocks, capacity), full
