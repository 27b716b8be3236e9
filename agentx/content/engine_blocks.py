"""An engine's block hashes of a rendered prompt, computed from its hash ids, never its tokens.

The virtual-time runner hands the engine core a prompt as its length and the chained hashes of
its full `block_size`-token blocks. Two blocks have equal tokens exactly when they are made of
the same pieces: runs of a hash block's tokens (its content key `id ^ scope key` and the run's
offsets, as `PromptBuilder.prompt` draws them), runs of the request's unshared tail, and the
tree's cache-bust marker over the leading tokens. Hashing the pieces chained over the prefix
gives the hashes the engine would compute from the tokens, up to which values they take: the
same blocks are equal, the same blocks differ.

A stream's requests extend each other, so a request reuses the hashes of the blocks that lie
within the hash blocks it shares with its stream's last request, and hashes only the rest.
"""

from __future__ import annotations

from agentx.content.tokens import MARKER_TOKENS, PromptBuilder

_TAIL, _MARKER = -1, -2  # tags of a piece of a request's own tail (never shared), of the marker


class EngineBlocks:
    def __init__(self, prompts: PromptBuilder, block_size: int):
        self.prompts, self.block_size = prompts, block_size

    def hashes(self, session, request, request_key: int, marker: int, prev: list[int] | None = None,
               shared_ids: int = 0) -> list[int]:
        """Chained hashes of the full blocks of the request's prompt; `prev`: its stream's last
        request's, of which the blocks inside its first `shared_ids` hash blocks are reused."""
        p, bs = self.prompts, self.block_size
        isl, width = p.isl(session, request), p.block_tokens(session)
        ids = request.hash_ids
        n_ids = min(len(ids), -(-isl // width))
        full = isl // bs
        reuse = min(len(prev), shared_ids * width // bs, full) if prev else 0
        out = prev[:reuse] if reuse else []
        parent = out[-1] if out else 0
        scope = int(p.scope_key(session))
        id_end = n_ids * width
        for j in range(reuse, full):
            lo, hi = j * bs, (j + 1) * bs
            pieces = []
            if lo < MARKER_TOKENS:
                pieces.append((_MARKER, marker, lo, min(hi, MARKER_TOKENS)))
                lo = min(hi, MARKER_TOKENS)
            while lo < hi:
                chunk, off = divmod(lo, width)
                end = min(hi, (chunk + 1) * width)
                if lo < id_end:
                    pieces.append((int(ids[chunk]) ^ scope, off, end - lo))
                else:  # the tail: keyed by the request, by chunk of `width` tokens past the ids
                    q = lo - id_end
                    end = min(hi, lo + width - q % width)
                    pieces.append((_TAIL, request_key + q // width, q % width, end - lo))
                lo = end
            parent = hash((parent, tuple(pieces)))
            out.append(parent)
        return out
