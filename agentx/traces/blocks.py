"""Re-expressing hash ids in another block size and id space, for format conversion.

Hash ids are chained prefix hashes: an id names its block *and* everything before it. So a
coarser block can take the id of the last fine block inside it, and a finer block can be
derived as `id * k + j`; both keep exactly the recorded prefix sharing. Ids of `local`
sessions are shifted into disjoint ranges when written to a global-scope format, so sessions
never falsely share blocks; a partial tail block with no recorded id gets a fresh unique id.
"""

from __future__ import annotations

import numpy as np

from agentx.errors import TraceError
from agentx.traces.model import Request, Session

FRESH_BASE = 1 << 48  # fresh tail ids live far above any recorded id


class Reblocker:
    def __init__(self, block_size: int, partial_block_ids: bool):
        self.block_size, self.partial = block_size, partial_block_ids
        self.base = 0  # next free id range for local-scope sessions
        self.fresh = FRESH_BASE

    def session(self, session: Session) -> dict[int, list[int]]:
        """New id lists keyed by `id(request)`."""
        src, dst = session.block_size, self.block_size
        if src % dst and dst % src:
            raise TraceError(session.source or "(traces)", f"session {session.id} block_size",
                             f"{src}-token blocks cannot be converted to {dst}-token blocks (neither divides the other)")
        shift = 0
        if session.hash_id_scope == "local":
            top = max((int(r.hash_ids.max()) for r in session.requests() if len(r.hash_ids)), default=-1)
            shift, self.base = self.base, self.base + top + 1
        return {id(r): self._request(session, r, shift) for r in session.requests()}

    def _request(self, session: Session, r: Request, shift: int) -> list[int]:
        src, dst = session.block_size, self.block_size
        ids = r.hash_ids.astype(np.int64) + shift
        tail = None  # the id of a recorded partial last block
        if session.partial_block_ids and len(ids) and r.isl % src:
            tail, ids = int(ids[-1]), ids[:-1]
        if dst >= src:
            k = dst // src
            out = ids[k - 1 :: k][: len(ids) // k].tolist()
            leftover = ids[len(out) * k :].tolist() + ([tail] if tail is not None else [])
        else:
            k = src // dst
            out = (ids[:, None] * k + np.arange(k)).ravel().tolist()
            leftover = []
            if tail is not None:
                n = (r.isl % src) // dst
                out += [tail * k + j for j in range(n)]
                leftover = [tail * k + n] if (r.isl % src) % dst else []
        if self.partial:  # this format ids every block up to the partial last one
            extra = -(-r.isl // dst) - len(out)
            if extra > 0 and leftover:
                out.append(leftover[-1])  # unique: ids are position-specific
                extra -= 1
            for _ in range(max(0, extra)):  # tokens no recorded id covers: never shared
                out.append(self.fresh)
                self.fresh += 1
        return out
