"""An engine's block hashes of a rendered prompt, computed from its hash ids, never its tokens.

The virtual-time runner hands the engine core a prompt as its length and the chained hashes of
its full `block_size`-token blocks. Two blocks have equal tokens exactly when they are made of
the same pieces: runs of a hash block's tokens (its content key `id ^ scope key` and the run's
offsets, as `PromptBuilder.prompt` draws them), runs of the request's unshared tail, and the
tree's cache-bust marker over the leading tokens. A block's content value mixes its pieces; the
chain is polynomial, H_j = P x H_(j-1) + c_j (mod 2^64), so it is computed for a whole prompt
with numpy (`H_t = P^(t+1) H_prev + P^t x cumsum(c_i P^-i)`), and equal prefixes hash equal,
different ones differ (up to 64-bit collisions).

A stream's requests extend each other, so a request reuses the hashes of the blocks that lie
within the hash blocks it shares with its stream's last request, and hashes only the rest.
"""

from __future__ import annotations

import numpy as np

from agentx.content.tokens import MARKER_TOKENS, PromptBuilder, mix64
from agentx.engine.kvcache import PackedChain

_ID, _TAIL, _MARKER = 1, 2, 3  # tags of a piece: a hash block's tokens, the request's tail, the marker
_M = (1 << 64) - 1
_P = 0x9E3779B97F4A7C15  # odd, so invertible mod 2^64
_P_INV = pow(_P, -1, 1 << 64)


def _mix(x: int) -> int:
    """`mix64` on one Python int (bit for bit the same)."""
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _M
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _M
    return x ^ (x >> 31)


def _piece(tag: int, key: int, offset: int, length: int) -> int:
    return _mix((key & _M) ^ _mix(offset + (length << 24) + (tag << 48)))


class EngineBlocks:
    def __init__(self, prompts: PromptBuilder, block_size: int):
        self.prompts, self.block_size = prompts, block_size
        self._powers = (np.ones(1, np.uint64), np.ones(1, np.uint64))  # P^t, P^-t

    def hashes(self, session, request, request_key: int, marker: int, prev: list[int] | None = None,
               shared_ids: int = 0) -> PackedChain:
        """Chained hashes of the full blocks of the request's prompt; `prev`: its stream's last
        request's, of which the blocks inside its first `shared_ids` hash blocks are reused."""
        p, bs = self.prompts, self.block_size
        isl, width = p.isl(session, request), p.block_tokens(session)
        full = isl // bs
        reuse = min(len(prev), shared_ids * width // bs, full) if prev else 0
        out = PackedChain(prev[:reuse] if reuse else ())
        if full > reuse:
            content = self._contents(session, request, request_key, marker, reuse, full, isl, width)
            out.frombytes(self._chain(out[-1] if out else 0, content).tobytes())
        return out

    def _contents(self, session, request, request_key: int, marker: int, first: int, end: int, isl: int,
                  width: int) -> np.ndarray:
        """Content values of blocks first..end-1."""
        bs, ids = self.block_size, request.hash_ids
        id_end = min(len(ids), -(-isl // width)) * width
        scope = int(self.prompts.scope_key(session))
        values = np.zeros(end - first, np.uint64)
        if width % bs == 0:  # blocks inside one hash block, past the marker: vectorized
            lo = max(first, -(-MARKER_TOKENS // bs))
            hi = max(lo, min(end, id_end // bs))
            if hi > lo:
                starts = np.arange(lo, hi, dtype=np.int64) * bs
                keys = ids[starts // width].astype(np.uint64) ^ np.uint64(scope)
                tags = (starts % width).astype(np.uint64) + np.uint64((bs << 24) + (_ID << 48))
                values[lo - first: hi - first] = mix64(keys ^ mix64(tags))
            for j in [*range(first, lo), *range(hi, end)]:
                values[j - first] = self._content(j, ids, id_end, scope, marker, request_key, width)
            return values
        for j in range(first, end):
            values[j - first] = self._content(j, ids, id_end, scope, marker, request_key, width)
        return values

    def _content(self, j: int, ids, id_end: int, scope: int, marker: int, request_key: int, width: int) -> int:
        """One block's content value from its pieces (any alignment)."""
        bs = self.block_size
        lo, hi = j * bs, (j + 1) * bs
        pieces = []
        if lo < MARKER_TOKENS:
            pieces.append(_piece(_MARKER, marker, lo, min(hi, MARKER_TOKENS) - lo))
            lo = min(hi, MARKER_TOKENS)
        while lo < hi:
            chunk, off = divmod(lo, width)
            if lo < id_end:
                end = min(hi, (chunk + 1) * width)
                pieces.append(_piece(_ID, int(ids[chunk]) ^ scope, off, end - lo))
            else:  # the tail: keyed by the request, by chunk of `width` tokens past the ids
                q = lo - id_end
                end = min(hi, lo + width - q % width)
                pieces.append(_piece(_TAIL, request_key + q // width, q % width, end - lo))
            lo = end
        value = pieces[0]
        for piece in pieces[1:]:
            value = _mix(value ^ ((piece * _P) & _M))
        return value

    def _chain(self, parent: int, content: np.ndarray) -> np.ndarray:
        """H_t = P^(t+1) parent + sum_(i<=t) content_i P^(t-i), mod 2^64."""
        n = len(content)
        up, down = self._powers_to(n + 1)
        with np.errstate(over="ignore"):
            sums = np.cumsum(content * down[:n], dtype=np.uint64)
            return up[1: n + 1] * np.uint64(parent) + up[:n] * sums

    def _powers_to(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        up, down = self._powers
        if len(up) < n:
            size = max(n, 2 * len(up))
            with np.errstate(over="ignore"):
                up = np.cumprod(np.full(size, _P, np.uint64), dtype=np.uint64)
                down = np.cumprod(np.full(size, _P_INV, np.uint64), dtype=np.uint64)
            one = np.ones(1, np.uint64)
            up, down = np.concatenate([one, up[:-1]]), np.concatenate([one, down[:-1]])
            self._powers = (up, down)
        return up, down
