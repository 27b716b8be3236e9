"""Derived facts of a corpus (`agentx trace stats`, SPEC §1)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from agentx.common import percentiles
from agentx.traces.graph import chain_gap
from agentx.traces.hashids import by_memory
from agentx.traces.model import EMPTY_IDS, Session
from agentx.traces.segment_stats import KindShare, segment_shares

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Distribution:
    """Percentiles (linear interpolation) and a log-normal fit of the positive values."""

    n: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    lognormal_median: float  # exp(mu) of ln(values > 0)
    lognormal_sigma: float

    @staticmethod
    def of(values) -> "Distribution":
        v = np.asarray(values, dtype=np.float64)
        p = percentiles(v, PERCENTILES)
        if p is None:
            nan = math.nan
            return Distribution(0, nan, nan, nan, nan, nan, nan, nan, nan)
        pos = np.log(v[v > 0])
        mu = float(pos.mean()) if pos.size else math.nan
        sigma = float(pos.std()) if pos.size else math.nan
        return Distribution(
            n=int(v.size),
            mean=float(v.mean()),
            p50=float(p[0]),
            p90=float(p[1]),
            p95=float(p[2]),
            p99=float(p[3]),
            max=float(v.max()),
            lognormal_median=math.exp(mu) if pos.size else math.nan,
            lognormal_sigma=sigma,
        )

    def share_over(self, values, threshold: float) -> float:
        v = np.asarray(values, dtype=np.float64)
        return float((v > threshold).mean()) if v.size else math.nan


# Hit rates by the sources' own rules (`trace stats --hit-rule source`, SPEC §1), beside agentx's
# (token-weighted, infinite cache, blocks seen earlier in the same session tree).
SOURCE_RULES = {
    "global": "Mooncake (FAST'25) and other global-id formats: blocks seen earlier anywhere in the corpus "
              "(by arrival), token-weighted, capped at each ISL",
    "trie": "TRIE: eligible tokens (turn k > 0: the previous prompt and its answer) over all prompt tokens",
    "tracelab": "TraceLab: recorded prefix tokens over input tokens, every round (round 0's cached prefix too)",
}


@dataclass(frozen=True)
class TraceStats:
    sessions: int
    requests: int
    streams: dict[str, int]
    isl: Distribution
    osl: Distribution
    gap: Distribution  # recorded think/tool gaps between consecutive requests of a stream
    gap_share_over_60s: float
    sessions_with_subagents: int
    subagent_requests: int  # requests of subagent and background streams
    subagents_per_session: Distribution  # over sessions with at least one subagent
    subagent_wall_time: Distribution  # seconds
    theoretical_hit_rate: float  # token-weighted, infinite cache, within each session tree
    billed_count_requests: int  # `in` smaller than the hash blocks cover
    duration: Distribution  # recorded session wall time, seconds
    corpus_hit_rate: float | None = None  # global ids only: blocks seen earlier anywhere in the corpus
    source_hit_rate: float | None = None  # by the source's own rule (SOURCE_RULES), where it has one
    source_hit_rule: str | None = None  # that rule's key in SOURCE_RULES
    segments: tuple[KindShare, ...] = ()  # per segment kind, where the trace has segments


def session_hit_tokens(session: Session) -> tuple[int, int]:
    """(prefix-cache hit tokens, ISL tokens) with an infinite cache over the session tree.

    A request's hit is the tokens of its hash blocks already seen earlier (by start time) in
    the same session, capped at its ISL.
    """
    reqs = sorted(session.requests(), key=lambda r: r.t)
    if not reqs:
        return 0, 0
    # A stream's requests are views of one buffer (`hashids.id_memory`), each extending the last:
    # the leading ids of a piece of memory looked at once need not be looked at again, so the
    # work is the unique blocks, not the sum of the contexts.
    arrays = [r.hash_ids for r in reqs]
    memory, longest = by_memory(arrays)
    top = max((int(a.max()) for a in longest.values() if len(a)), default=0)
    remap = None
    if top >= 1 << 26:  # huge global ids: compact them before using a bitmap
        flat = np.concatenate(arrays)
        uniq, inverse = np.unique(flat, return_inverse=True)
        remap, top = inverse, len(uniq) - 1
    seen = np.zeros(top + 1, dtype=bool)
    marked: dict[tuple, int] = {}  # memory -> its leading ids marked seen
    hits = total = offset = 0
    for r, ids, mem in zip(reqs, arrays, memory):
        n = len(ids)
        before = marked.get(mem, 0)
        done = min(before, n)
        if remap is not None:
            ids = remap[offset : offset + n]
            offset += n
        isl = session.replay_isl(r)
        if n:
            rest = ids[done:]
            hits += min(isl, (done + int(np.count_nonzero(seen[rest]))) * session.block_size)
            seen[rest] = True
            marked[mem] = max(before, n)
        total += isl
    return hits, total


@dataclass
class TraceValues:
    """The values `trace_stats` summarizes: per request, per gap, and per session (in corpus order)."""

    isl: list[int] = field(default_factory=list)
    osl: list[int] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    sub_walls: list[float] = field(default_factory=list)
    streams: dict[str, int] = field(default_factory=lambda: {"main": 0, "subagent": 0, "background": 0, "aux": 0})
    billed: int = 0
    sub_requests: int = 0
    session_ids: list[str] = field(default_factory=list)
    session_requests: list[int] = field(default_factory=list)
    session_subagents: list[int] = field(default_factory=list)  # subagent and background streams (0 included)
    session_hits: list[int] = field(default_factory=list)  # theoretical hit tokens (`session_hit_tokens`)
    session_isl: list[int] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    corpus_hits: tuple[int, int] | None = None  # (hit, ISL tokens) across sessions (global ids only)
    source_hits: dict[str, list[int]] = field(default_factory=dict)  # rule -> [hit, ISL tokens]


def corpus_hit_tokens(sessions: list[Session]) -> tuple[int, int] | None:
    """(hit tokens, ISL tokens) with an infinite cache shared by the whole corpus, requests in
    arrival order (session start + t): how Mooncake defines reuse, its ids being global. None
    unless every session's ids are global (per-session ids mean nothing across sessions)."""
    if not sessions or any(s.hash_id_scope != "global" for s in sessions):
        return None
    reqs = sorted(((s.start + r.t, k, s, r) for k, s in enumerate(sessions) for r in s.requests()),
                  key=lambda e: (e[0], e[1]))
    arrays = [r.hash_ids for *_, r in reqs]
    memory, longest = by_memory(arrays)  # (as in session_hit_tokens: each stored id looked at once)
    uniq = np.unique(np.concatenate([EMPTY_IDS, *longest.values()]))
    seen = np.zeros(len(uniq), dtype=bool)
    marked: dict[tuple, int] = {}
    hits = total = 0
    for (_, _, s, r), ids, mem in zip(reqs, arrays, memory):
        before = marked.get(mem, 0)
        done = min(before, len(ids))
        rest = np.searchsorted(uniq, ids[done:])
        isl = s.replay_isl(r)
        hits += min(isl, (done + int(np.count_nonzero(seen[rest]))) * s.block_size)
        seen[rest] = True
        marked[mem] = max(before, len(ids))
        total += isl
    return hits, total


def trace_values(sessions: list[Session]) -> TraceValues:
    v = TraceValues()
    v.corpus_hits = corpus_hit_tokens(sessions)
    for s in sessions:
        n_subs, first = 0, len(v.isl)
        for stream in s.walk():
            v.streams[stream.kind] += 1
            reqs = stream.requests
            for r in reqs:
                v.isl.append(s.replay_isl(r))
                v.osl.append(r.osl)
                v.billed += r.isl < s.hash_coverage(r)
            v.gaps.extend(chain_gap(a, b) for a, b in zip(reqs, reqs[1:]))
            if stream.kind in ("subagent", "background"):
                n_subs += 1
                v.sub_requests += len(reqs)
                if reqs:
                    v.sub_walls.append(stream.end - stream.spawn)
        h, t = session_hit_tokens(s)
        v.session_ids.append(s.id)
        v.session_requests.append(len(v.isl) - first)
        v.session_subagents.append(n_subs)
        v.session_hits.append(h)
        v.session_isl.append(t)
        v.durations.append(s.duration)
        if s.source_hit is not None:
            rule, hit, isl = s.source_hit
            acc = v.source_hits.setdefault(rule, [0, 0])
            acc[0], acc[1] = acc[0] + hit, acc[1] + isl
    return v


def trace_stats(sessions: list[Session]) -> TraceStats:
    return replace(stats_of(trace_values(sessions)), segments=segment_shares(sessions))


def stats_of(v: TraceValues) -> TraceStats:
    sub_counts = [n for n in v.session_subagents if n]
    hits, total = sum(v.session_hits), sum(v.session_isl)
    gap_dist = Distribution.of(v.gaps)
    corpus = v.corpus_hits[0] / v.corpus_hits[1] if v.corpus_hits and v.corpus_hits[1] else None
    rule = source = None
    if len(v.source_hits) == 1:  # one source's rule (a mixed corpus has no single one)
        rule, (hit, isl) = next(iter(v.source_hits.items()))
        source = hit / isl if isl else None
    elif not v.source_hits and corpus is not None:
        rule, source = "global", corpus
    return TraceStats(
        sessions=len(v.session_ids),
        requests=len(v.isl),
        streams=v.streams,
        isl=Distribution.of(v.isl),
        osl=Distribution.of(v.osl),
        gap=gap_dist,
        gap_share_over_60s=gap_dist.share_over(v.gaps, 60.0),
        sessions_with_subagents=len(sub_counts),
        subagent_requests=v.sub_requests,
        subagents_per_session=Distribution.of(sub_counts),
        subagent_wall_time=Distribution.of(v.sub_walls),
        theoretical_hit_rate=hits / total if total else math.nan,
        billed_count_requests=v.billed,
        duration=Distribution.of(v.durations),
        corpus_hit_rate=corpus,
        source_hit_rate=source,
        source_hit_rule=rule,
    )


def by_provider(sessions: list[Session]) -> dict[str, list[Session]]:
    """Sessions grouped by the agent that produced them (`unknown` where the format does not say)."""
    groups: dict[str, list[Session]] = {}
    for s in sessions:
        groups.setdefault(s.provider or "unknown", []).append(s)
    return dict(sorted(groups.items()))


def corpora_stats(corpora: list[tuple[str, list[Session]]], split_providers: bool = False) -> list[tuple[str, TraceStats]]:
    """(label, stats) per corpus, or per corpus and provider (`NAME: PROVIDER`) when split."""
    out = []
    for name, sessions in corpora:
        groups = by_provider(sessions) if split_providers else {"": sessions}
        out += [(f"{name}: {p}" if p else name, trace_stats(group)) for p, group in groups.items()]
    return out
