"""Fault injection for reliability tests: which request fails, and how (seeded)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from agentx.errors import AgentxError

# http500: answer 500 at once; disconnect: drop the connection mid-answer; stall: stop emitting
# for stall_s after the first token; malformed: one broken SSE frame (a truncated JSON body when
# not streaming); overflow: refuse with the context-length 400.
KINDS = ("http500", "disconnect", "stall", "malformed", "overflow")


@dataclass(frozen=True)
class FaultConfig:
    rate: float = 0.0  # probability that a request gets a fault
    kinds: tuple[str, ...] = KINDS  # drawn uniformly
    stall_s: float = 5.0
    seed: int = 0

    def __post_init__(self):
        if not 0 <= self.rate <= 1:
            raise AgentxError(f"fault rate must be in [0, 1], got {self.rate}")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise AgentxError(f"unknown fault kind(s) {unknown or self.kinds}; known: {', '.join(KINDS)}")

    def fault_for(self, index: int) -> str | None:
        """The fault of the `index`-th request the server accepted (0-based), or None."""
        if self.rate <= 0:
            return None
        rng = random.Random(self.seed * 1_000_003 + index)
        if rng.random() >= self.rate:
            return None
        return self.kinds[rng.randrange(len(self.kinds))]
