"""The classic fixed-sequence scenarios (1k1k, 8k1k, 1k8k) as sessions the replayer runs like
any trace: per lane, back-to-back requests of fixed ISL/OSL with random, never-shared tokens.

A session holds `requests_per_session` requests; a lane that drains it takes the next (the closed
loop refills lanes), and every replay of a session has its own cache-bust marker, so no prompt
shares a block with another however long the run. What a scenario costs to build is per lane,
not per request the run may send (10,000 requests per lane held 1,024 lanes in 7.8 GB)."""

from __future__ import annotations

import numpy as np

from agentx.errors import AgentxError
from agentx.traces.model import Request, Session, Stream, ids_array

SCENARIOS = {"1k1k": (1024, 1024), "8k1k": (8192, 1024), "1k8k": (1024, 8192)}
BLOCK = 64


def scenario_sessions(name: str, lanes: int, requests_per_session: int = 32) -> list[Session]:
    if name not in SCENARIOS:
        raise AgentxError(f"want one of {', '.join(SCENARIOS)}, got {name!r}", "scenario")
    isl, osl = SCENARIOS[name]
    blocks = isl // BLOCK
    sessions = []
    for lane in range(lanes):
        base = lane * requests_per_session * blocks
        ids = ids_array(np.arange(base, base + requests_per_session * blocks))
        reqs = tuple(Request(t=0.0, model="", isl=isl, osl=osl, hash_ids=ids[k * blocks:(k + 1) * blocks])
                     for k in range(requests_per_session))
        sessions.append(Session(id=f"{name}-{lane}", block_size=BLOCK, hash_id_scope="global",
                                streams=(Stream("main", reqs),)))
    return sessions
