"""Token share and reuse per segment kind (`agentx trace stats`, SPEC §1 "Segments").

Which of a prompt's tokens are new and which of those any later request of the session sends
again, told apart by segment kind: how much of what is never reused is tool output. A token's
block decides: a block is new in the first request (by start time) whose hash ids hold it, and
reused when a later request of the same session tree holds it too. Tokens past the hash blocks
(the partial last block) are new and not reused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentx.traces.model import SEGMENT_KINDS, Request, Session


@dataclass(frozen=True)
class KindShare:
    kind: str  # a segment kind, or `kind:class` for a tool kind with a known tool class
    tokens: int  # input tokens of this kind over every request (what the engine is sent)
    new: int  # of them, tokens first sent in their request
    reused: int  # of the new ones, tokens some later request of the session sends again

    @property
    def never_reused(self) -> int:
        return self.new - self.reused


def _first_and_count(ids: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct id of a session: its first request's index and how many requests hold it."""
    flat = np.concatenate(ids).astype(np.uint64)
    owner = np.repeat(np.arange(len(ids), dtype=np.uint64), [len(a) for a in ids])
    pairs = np.unique(np.stack([flat, owner], axis=1), axis=0)  # one row per (id, request)
    uniq, start, n = np.unique(pairs[:, 0], return_index=True, return_counts=True)
    return uniq, pairs[start, 1].astype(np.int64), n


def _cumulative(flags: np.ndarray, block: int, tail: bool):
    """F(x): flagged tokens in [0, x) when block j covers [j*block, (j+1)*block) and tokens past the
    blocks are flagged `tail`."""
    cum = np.concatenate([[0], np.cumsum(flags.astype(np.int64))]) * block
    n = len(flags)

    def f(x: int) -> int:
        j = x // block
        if j >= n:
            return int(cum[n]) + (x - n * block) * int(tail)
        return int(cum[j]) + (x % block) * int(flags[j])

    return f


def _add(totals: dict[str, list[int]], session: Session, req: Request, new: np.ndarray, reused: np.ndarray) -> None:
    f_new = _cumulative(new, session.block_size, True)
    f_reused = _cumulative(reused, session.block_size, False)
    pos = 0
    for seg in req.segments or ():
        key = f"{seg.kind}:{seg.tool}" if seg.tool else seg.kind
        end = pos + seg.tokens
        row = totals.setdefault(key, [0, 0, 0])
        row[0] += seg.tokens
        row[1] += f_new(end) - f_new(pos)
        row[2] += f_reused(end) - f_reused(pos)
        pos = end


def segment_shares(sessions: list[Session]) -> tuple[KindShare, ...]:
    """Per kind (and tool class), over the requests that carry segments; () when none do."""
    totals: dict[str, list[int]] = {}
    for s in sessions:
        reqs = sorted((r for r in s.requests() if r.segments), key=lambda r: r.t)
        if not reqs:
            continue
        ids = [np.asarray(r.hash_ids) for r in reqs]
        uniq, first, count = _first_and_count(ids) if sum(map(len, ids)) else (None, None, None)
        for i, (r, a) in enumerate(zip(reqs, ids)):
            if len(a):
                at = np.searchsorted(uniq, a.astype(np.uint64))
                new = first[at] == i
                reused = new & (count[at] > 1)
            else:
                new = reused = np.zeros(0, dtype=bool)
            _add(totals, s, r, new, reused)
    order = {k: i for i, k in enumerate(SEGMENT_KINDS)}
    keys = sorted(totals, key=lambda k: (order.get(k.split(":")[0], 99), k))
    return tuple(KindShare(k, *totals[k]) for k in keys)
