"""Replicas behind a router: N engine cores (data parallel, one KV cache each) and the rule that
picks the core a request goes to. Used by the HTTP server and by the virtual-time runner.

Routers (SPEC section 6):
- round-robin: the n-th request goes to replica n mod N;
- least-loaded: the replica with the fewest sequences (running + waiting), lowest index on ties;
- session-affinity: a stable hash (CRC-32) of the session id picks the replica, so a session's
  turns always meet their own prefix; requests without a session go least-loaded;
- prefix-aware: among the replicas whose load is within `slack` of the least loaded one
  (load <= min + max(SLACK_REQUESTS, SLACK_FRACTION x min)), the one whose cache (GPU, then CPU
  tier) holds the longest prefix of the prompt; ties go to the less loaded, then lower index.
  This is SGLang's cache-aware router rule (longest prefix unless the load is imbalanced) applied
  per request as a bound on the candidates, rather than llm-d's / Dynamo's weighted cost of
  prefix overlap and load: a bound keeps a worst case (no replica takes more than `slack` more
  than the least loaded) while a weight can let a hot prefix pile load onto one replica.
"""

from __future__ import annotations

import zlib

from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore, Sequence
from agentx.errors import AgentxError

ROUTERS = ("round-robin", "least-loaded", "session-affinity", "prefix-aware")
SLACK_REQUESTS, SLACK_FRACTION = 2, 0.25


class Replicas:
    """N engine cores and a router; quacks like one core where the server needs one."""

    def __init__(self, cfg: EngineConfig, count: int = 1, router: str = "round-robin"):
        if count < 1:
            raise AgentxError(f"replicas must be >= 1, got {count}")
        if router not in ROUTERS:
            raise AgentxError(f"unknown router {router!r}; known: {', '.join(ROUTERS)}")
        self.cores = [EngineCore(cfg) for _ in range(count)]
        self.router = router
        self._next = 0
        first = self.cores[0]
        self.cfg, self.roofline, self.vocab, self.max_model_len = first.cfg, first.roofline, first.vocab, first.max_model_len

    def context_error(self, prompt_len: int, max_tokens: int) -> str | None:
        return self.cores[0].context_error(prompt_len, max_tokens)

    def new_sequence(self, *args, **kwargs) -> Sequence:
        return self.cores[0].new_sequence(*args, **kwargs)  # the same on every replica

    def route(self, seq: Sequence, session: str | None = None) -> int:
        """The replica this sequence goes to (the router's rule; no side effects on the cores)."""
        n = len(self.cores)
        if n == 1:
            return 0
        if self.router == "round-robin":
            return self._next % n
        loads = [len(c.running) + len(c.waiting) for c in self.cores]
        if self.router == "session-affinity" and session:
            return zlib.crc32(session.encode()) % n
        least = min(range(n), key=loads.__getitem__)
        if self.router != "prefix-aware":
            return least
        bound = loads[least] + max(SLACK_REQUESTS, SLACK_FRACTION * loads[least])
        cacheable = seq.hashes[: (seq.prompt_len - 1) // self.cfg.block_size]
        best, best_key = least, None
        for i, core in enumerate(self.cores):
            if loads[i] > bound:
                continue
            key = (sum(core.kv.match(cacheable)), -loads[i], -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        return best

    def add(self, seq: Sequence, now: float | None = None, session: str | None = None) -> EngineCore:
        """Route and queue a sequence; returns the core it went to."""
        i = self.route(seq, session)
        self._next += 1
        seq.replica = i
        core = self.cores[i]
        core.add(seq, now)
        return core

    def abort(self, seq: Sequence) -> None:
        self.cores[seq.replica].abort(seq)
