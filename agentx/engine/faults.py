"""Fault injection for reliability tests: which request fails, and how (seeded)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from agentx.errors import AgentxError
from agentx.options import check_bounds, option

# http500: answer 500 at once; disconnect: drop the connection mid-answer; stall: stop emitting
# for stall_s after the first token; malformed: one broken SSE frame (a truncated JSON body when
# not streaming); overflow: refuse with the context-length 400. These are drawn by default.
KINDS = ("http500", "disconnect", "stall", "malformed", "overflow")
# corrupt: silent, only when asked for: the answer is complete, but the request's prefix-cache
# hits read corrupted KV blocks, so its output differs from what the same prompt gives cold.
# wrong: silent, only when asked for: the answer is complete and well-formed but not the clean
# model's (a precision, quantization or sampling regression): with `sim serve --answers eval`, an
# eval problem's final number is off.
ALL_KINDS = KINDS + ("corrupt", "wrong")


@dataclass(frozen=True)
class FaultConfig:
    rate: float = option(0.0, "Probability that a request gets a fault.", min=0, max=1, flag="--fault-rate")
    kinds: tuple[str, ...] = option(KINDS, cli=False)  # drawn uniformly (the CLI's --fault-kinds A,B)
    stall_s: float = option(5.0, "Length of a stall fault.", min=0, flag="--fault-stall-s")
    seed: int = option(0, cli=False)  # the engine's

    def __post_init__(self):
        check_bounds(self)
        unknown = [k for k in self.kinds if k not in ALL_KINDS]
        if unknown or not self.kinds:
            raise AgentxError(f"unknown fault kind(s) {unknown or self.kinds}; known: {', '.join(ALL_KINDS)}")

    def fault_for(self, index: int) -> str | None:
        """The fault of the `index`-th request the server accepted (0-based), or None."""
        if self.rate <= 0:
            return None
        rng = random.Random(self.seed * 1_000_003 + index)
        if rng.random() >= self.rate:
            return None
        return self.kinds[rng.randrange(len(self.kinds))]
