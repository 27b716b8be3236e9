"""Replicas behind a router: N engine cores (data parallel, one KV cache each) and the rule that
picks the core a request goes to (`routing.py`, SPEC section 6). Used by the HTTP server and by
the virtual-time runner.
"""

from __future__ import annotations

from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore, Sequence
from agentx.engine.routing import RouterName, router
from agentx.errors import AgentxError


class Replicas:
    """N engine cores and a router; quacks like one core where the server needs one."""

    def __init__(self, cfg: EngineConfig, count: int = 1, name: str = RouterName.ROUND_ROBIN):
        if count < 1:
            raise AgentxError(f"replicas must be >= 1, got {count}")
        self.rule = router(name)  # (an unknown name is an error before any core is built)
        self.cores = [EngineCore(cfg) for _ in range(count)]
        self.router = name
        self._next = 0
        first = self.cores[0]
        self.cfg, self.roofline, self.vocab, self.max_model_len = first.cfg, first.roofline, first.vocab, first.max_model_len

    def context_error(self, prompt_len: int, max_tokens: int) -> str | None:
        return self.cores[0].context_error(prompt_len, max_tokens)

    def new_sequence(self, *args, **kwargs) -> Sequence:
        return self.cores[0].new_sequence(*args, **kwargs)  # the same on every replica

    def route(self, seq: Sequence, session: str | None = None) -> int:
        """The replica this sequence goes to (the router's rule; no side effects on the cores)."""
        if len(self.cores) == 1:
            return 0
        return self.rule.pick(self.cores, seq, session, self._next)

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
