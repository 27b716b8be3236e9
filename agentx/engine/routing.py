"""The rules that pick the replica a request goes to (SPEC section 6), one small object each:
`pick(cores, seq, session, sent)` returns a core's index, without side effects on the cores.

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
from enum import StrEnum

from agentx.engine.core import EngineCore, Sequence
from agentx.engine.window import settle
from agentx.errors import AgentxError

SLACK_REQUESTS, SLACK_FRACTION = 2, 0.25


class RouterName(StrEnum):
    ROUND_ROBIN = "round-robin"
    LEAST_LOADED = "least-loaded"
    SESSION_AFFINITY = "session-affinity"
    PREFIX_AWARE = "prefix-aware"


def _loads(cores: list[EngineCore]) -> list[int]:
    return [len(c.running) + len(c.waiting) for c in cores]


def _least(loads: list[int]) -> int:
    return min(range(len(loads)), key=loads.__getitem__)


class RoundRobin:
    def pick(self, cores: list[EngineCore], seq: Sequence, session: str | None, sent: int) -> int:
        return sent % len(cores)


class LeastLoaded:
    def pick(self, cores: list[EngineCore], seq: Sequence, session: str | None, sent: int) -> int:
        return _least(_loads(cores))


class SessionAffinity:
    def pick(self, cores: list[EngineCore], seq: Sequence, session: str | None, sent: int) -> int:
        if session:
            return zlib.crc32(session.encode()) % len(cores)
        return _least(_loads(cores))


class PrefixAware:
    def pick(self, cores: list[EngineCore], seq: Sequence, session: str | None, sent: int) -> int:
        loads = _loads(cores)
        least = _least(loads)
        bound = loads[least] + max(SLACK_REQUESTS, SLACK_FRACTION * loads[least])
        cacheable = seq.hashes[: (seq.prompt_len - 1) // cores[0].cfg.block_size]
        best, best_key = least, None
        for i, core in enumerate(cores):
            if loads[i] > bound:
                continue
            settle(core)  # (its cache as read)
            key = (sum(core.kv.match(cacheable)), -loads[i], -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        return best


ROUTERS = {RouterName.ROUND_ROBIN: RoundRobin, RouterName.LEAST_LOADED: LeastLoaded,
           RouterName.SESSION_AFFINITY: SessionAffinity, RouterName.PREFIX_AWARE: PrefixAware}


def router(name: str):
    """The router object of a name (a RouterName or its value)."""
    try:
        return ROUTERS[RouterName(name)]()
    except ValueError:
        raise AgentxError(f"unknown router {name!r}; known: {', '.join(RouterName)}") from None
