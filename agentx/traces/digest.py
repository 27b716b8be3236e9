"""A dataset's digest (SPEC §8 `datasets.summary`): the figures `agentx trace stats` prints and the
distributions the dataset explorer draws. A run writes it as `dataset.json` beside its records
(the replayed corpus, after the context and provider filters), so the results database can show
a dataset's statistics without the trace files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import msgspec
import numpy as np

from agentx.common import log_bins
from agentx.errors import AgentxError
from agentx.traces.graph import SessionGraph, build_graph
from agentx.traces.hashids import by_memory
from agentx.traces.model import MAX_COUNT, MAX_TOKENS, Name, Session
from agentx.traces.stats import TraceStats, stats_of, trace_values
from agentx.userfiles import read_bounded, shown

DIGEST_VERSION = 1
DIGEST_FILE = "dataset.json"


def log_histogram(values, bins: int = 40) -> dict | None:
    """Log-spaced histogram of the positive values (`edges`, `counts`, `n`); `zeros` counts the
    values <= 0 it leaves out."""
    binned = log_bins(values, bins)
    if binned is None:
        return None
    pos, edges, counts = binned
    return {"edges": [float(f"{e:.5g}") for e in edges.tolist()], "counts": counts.tolist(), "n": int(pos.size),
            "zeros": len(values) - int(pos.size)}


def prefix_order(graph: SessionGraph) -> dict:
    """The session's requests (graph nodes) sorted by their hash-id sequences: `rank` per node and
    `lcp`, the blocks each shares as a prefix with the next in that order. Two requests share
    min(lcp[rank a .. rank b - 1]) blocks, so the union of any requests' prefixes is the sum of
    their lengths minus what neighbours in rank order share (SPEC §9, in-flight unique tokens)."""
    ids = [node.request.hash_ids for node in graph.nodes]
    # big-endian bytes of one width sort as the id sequences do (a prefix first), in C; the
    # requests whose ids share memory (`id_memory`) are prefixes of the longest: one conversion
    width = ">u8" if any(a.dtype.itemsize > 4 for a in ids) else ">u4"
    size = np.dtype(width).itemsize
    memory, longest = by_memory(ids)
    text = {m: a.astype(width).tobytes() for m, a in longest.items()}
    keys = [text[m][: len(a) * size] for m, a in zip(memory, ids)]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    rank = [0] * len(keys)
    for r, i in enumerate(order):
        rank[i] = r
    lcp = []
    for a, b in zip(order, order[1:]):
        top = min(len(ids[a]), len(ids[b]))
        if top and memory[a] != memory[b]:
            differ = ids[a][:top] != ids[b][:top]
            first = int(differ.argmax())
            top = first if differ[first] else top
        lcp.append(top)
    return {"block_size": graph.session.block_size, "rank": rank, "lcp": lcp}


def dataset_digest(sessions: list[Session], graphs: list[SessionGraph] | None = None) -> dict:
    """`graphs`: the sessions' request graphs when built already (node order = records' `node`)."""
    v = trace_values(sessions)
    graphs = graphs or [build_graph(s) for s in sessions]
    return {
        "version": DIGEST_VERSION,
        "stats": msgspec.to_builtins(stats_of(v)),  # NaN (nothing to count) is written as null
        "isl": log_histogram(v.isl), "osl": log_histogram(v.osl), "gap_s": log_histogram(v.gaps),
        "sessions": {"id": v.session_ids, "requests": v.session_requests, "subagents": v.session_subagents,
                     "hit_tokens": v.session_hits, "isl_tokens": v.session_isl,
                     "duration_s": [round(d, 3) for d in v.durations]},
        "prefix": {s.id: prefix_order(g) for s, g in zip(sessions, graphs)},
        "conversations": {s.id: conversation_nodes(g) for s, g in zip(sessions, graphs)},
    }


def conversation_nodes(graph: SessionGraph) -> dict:
    """A whole conversation as the trace has it (the dataset explorer marks the replayed part):
    its streams' kinds and per request (graph node, the records' `node`) [stream, ISL, OSL]."""
    return {"streams": [str(s.kind) for s in graph.streams],
            "nodes": [[n.stream, int(n.request.isl), int(n.request.osl)] for n in graph.nodes]}


# TraceStats fields whose null means "not defined for this corpus" (kept None, not read as NaN)
_OPTIONAL = ("corpus_hit_rate", "source_hit_rate", "source_hit_rule")


def digest_stats(digest: dict) -> TraceStats:
    """The digest's `stats` back as `TraceStats` (null, written for NaN, reads as NaN)."""
    def nan(x):
        return {k: v if k in _OPTIONAL else nan(v) for k, v in x.items()} if isinstance(x, dict) else \
            math.nan if x is None else x

    return msgspec.convert(nan(digest["stats"]), TraceStats)


def write_digest(folder: Path, sessions: list[Session], graphs: list[SessionGraph] | None = None) -> None:
    (Path(folder) / DIGEST_FILE).write_bytes(msgspec.json.encode(dataset_digest(sessions, graphs)))


Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Figure = Annotated[float, msgspec.Meta(ge=-1e300, le=1e300)]


class _Histogram(msgspec.Struct):
    edges: list[Figure]
    counts: list[Count]
    n: Count
    zeros: Count = 0


class _Sessions(msgspec.Struct):
    id: list[Name]
    requests: list[Count] = []
    subagents: list[Count] = []
    hit_tokens: list[Count] = []
    isl_tokens: list[Count] = []
    duration_s: list[Figure] = []


class _Prefix(msgspec.Struct):
    block_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)]
    rank: list[Count]
    lcp: list[Count]


class _Digest(msgspec.Struct):
    """dataset.json as a run writes it; a user's copy is held to this before it is used."""
    version: int
    stats: dict
    sessions: _Sessions
    isl: _Histogram | None = None
    osl: _Histogram | None = None
    gap_s: _Histogram | None = None
    prefix: dict[Name, _Prefix] = {}


MAX_DIGEST_FILE = 256 << 20


def read_digest(folder: Path) -> dict | None:
    """The run folder's digest; None when it has none (older runs, AIPerf imports) or another version."""
    path = Path(folder) / DIGEST_FILE
    if not path.exists() and not path.is_symlink():
        return None
    data = read_bounded(path, MAX_DIGEST_FILE)
    try:
        digest = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
        raise AgentxError(f"{shown(path)}: not JSON ({e})") from None
    if not isinstance(digest, dict) or not isinstance(digest.get("stats"), dict):
        raise AgentxError(f"{shown(path)}: field 'stats' missing (not an agentx dataset digest)")
    if digest.get("version") != DIGEST_VERSION:
        return None
    try:
        msgspec.convert(digest, _Digest)
        digest_stats(digest)
    except (msgspec.ValidationError, TypeError) as e:
        raise AgentxError(f"{shown(path)}: {e}") from None
    return digest
