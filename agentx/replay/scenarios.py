"""Fixed-length scenarios as the published synthetic benchmarks run them, as sessions the replayer
runs like any trace: per lane, back-to-back requests of random, never-shared tokens.

A scenario is ISL:OSL (`8192:1024`; the names 1k1k, 8k1k and 1k8k are aliases) with a range
ratio R: each request draws its input and its output length uniformly from [R x L, L], as vLLM's
benchmark_serving random dataset (`--random-range-ratio`) draws them and InferenceX runs it (R =
0.8). The aliases default to R = 0.8 because they name InferenceX's published scenarios; an explicit
ISL:OSL defaults to R = 1 (fixed lengths, as trtllm-bench and MLPerf's synthetic sets use).

Offline (`offline=N`): N single-request sessions, all queued at time 0; the engine batches them
within its limits and throughput is over the makespan (what `trtllm-bench throughput` and MLPerf
Offline measure).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from agentx.errors import AgentxError
from agentx.traces.model import Request, Session, Stream, ids_array

SCENARIOS = {"1k1k": (1024, 1024), "8k1k": (8192, 1024), "1k8k": (1024, 8192)}
ALIAS_RANGE_RATIO = 0.8  # InferenceX's --random-range-ratio for its published scenarios
BLOCK = 64
MAX_LEN = 10_000_000


@dataclass(frozen=True)
class Scenario:
    isl: int
    osl: int
    range_ratio: float = 1.0
    offline: int = 0  # N requests at time 0 (0: closed-loop lanes)

    @property
    def name(self) -> str:
        text = f"{self.isl}:{self.osl}"
        if self.range_ratio < 1:
            text += f" r{self.range_ratio:g}"
        return text + (f" offline {self.offline}" if self.offline else "")


def parse_scenario(text: str, range_ratio: float | None = None, offline: int = 0) -> Scenario:
    """`1k1k` / `8k1k` / `1k8k` or ISL:OSL (positive token counts), checked at the boundary."""
    text = text.strip()
    if text in SCENARIOS:
        isl, osl = SCENARIOS[text]
        default = ALIAS_RANGE_RATIO
    else:
        match = re.fullmatch(r"(\d+):(\d+)", text)
        if not match:
            raise AgentxError(f"want ISL:OSL (e.g. 8192:1024) or one of {', '.join(SCENARIOS)}, got {text!r}",
                              "scenario")
        isl, osl = int(match[1]), int(match[2])
        default = 1.0
    if not (1 <= isl <= MAX_LEN and 1 <= osl <= MAX_LEN):
        raise AgentxError(f"lengths must be in [1, {MAX_LEN:,}], got {text!r}", "scenario")
    ratio = default if range_ratio is None else range_ratio
    if not 0 < ratio <= 1:
        raise AgentxError(f"must be in (0, 1], got {ratio:g}", "range-ratio")
    if offline < 0:
        raise AgentxError(f"must be >= 0, got {offline}", "offline")
    return Scenario(isl, osl, ratio, offline)


def _lengths(rng, nominal: int, ratio: float, n: int) -> np.ndarray:
    low = max(1, int(nominal * ratio))
    return rng.integers(low, nominal + 1, size=n) if low < nominal else np.full(n, nominal)


def scenario_sessions(scenario: Scenario | str, lanes: int, requests_per_session: int = 10_000,
                      seed: int = 0) -> list[Session]:
    """Sessions of the scenario: `lanes` of back-to-back requests, or its offline requests."""
    sc = parse_scenario(scenario) if isinstance(scenario, str) else scenario
    if sc.offline:
        lanes, requests_per_session = sc.offline, 1
    rng = np.random.default_rng(seed)
    sessions, base = [], 0
    for lane in range(lanes):
        isls = _lengths(rng, sc.isl, sc.range_ratio, requests_per_session)
        osls = _lengths(rng, sc.osl, sc.range_ratio, requests_per_session)
        blocks = np.maximum(1, isls // BLOCK)  # whole blocks; the renderer draws the tail beyond them
        ends = np.cumsum(blocks)
        ids = ids_array(np.arange(base, base + int(ends[-1]), dtype=np.uint64))  # views of one array per lane
        starts = ends - blocks
        reqs = [Request(t=0.0, model="", isl=isl, osl=osl, hash_ids=ids[a:b])
                for isl, osl, a, b in zip(isls.tolist(), osls.tolist(), starts.tolist(), ends.tolist())]
        base += int(ends[-1])
        sessions.append(Session(id=f"{sc.isl}-{sc.osl}-{lane}", block_size=BLOCK, hash_id_scope="global",
                                streams=(Stream("main", tuple(reqs)),)))
    return sessions
