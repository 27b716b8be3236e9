"""Dynamo's agentic Mooncake (a request DAG) and Mooncake delta (per-turn prompt segments).

Agentic Mooncake rows: Mooncake's `timestamp` (ms), `input_length`, `output_length`,
`hash_ids` (512-token blocks, partial last block included), plus `request_id`, `session_id`,
`wait_for` (request ids that must complete first), `delay` (ms, alias `delay_ms`),
`tool_wait_ms`, `branches` (the first requests of the streams this request spawned) and
`prefix_reset` (true on a stream's first request). A row with dependencies starts `delay +
tool_wait_ms` after the last of them completes.

Streams are rebuilt from the dependencies (SPEC §1): a request named in a `branches` list opens
a subagent of the brancher's stream; a request with no dependencies (or `prefix_reset` and no
brancher) opens a top-level stream (main or aux: the one with the most hash blocks is main);
any other request continues the stream of the dependency
highest in the tree (its other dependencies are joins of finished subagents); a second request
continuing the same request opens a subagent too.

Mooncake delta rows have Mooncake's shape with a `session_id`; each row's `input_length` and
`hash_ids` are only what that turn appended to the session's prompt, so request k's prompt is
the concatenation of rows 1..k. Its content looks like plain Mooncake: name it with
`--format mooncake-delta`. A row may carry `segments` (agentx's extension, SPEC §1): its turn's
part by kind; when every row of a session has them, request k's segments are rows 1..k's, in
order (adjacent runs of one kind and tool joined).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np

from agentx.errors import TraceError
from agentx.traces.blocks import Reblocker
from agentx.traces.graph import build_graph
from agentx.traces.model import (
    MAX_DEPTH, HashId, Millis, Name, RecordId, Request, Segment, Segments, Session, Stream, Tokens, ids_array,
)
from agentx.traces.mooncake import Row as MooncakeRow
from agentx.traces.rows import (
    check_request, check_time, decode_rows, encode_rows, read_rows, row_ids, row_session,
)

BLOCK_SIZE = 512


class AgenticRow(msgspec.Struct):
    request_id: Name
    input_length: Tokens
    output_length: Tokens
    hash_ids: list[HashId] = []
    session_id: Name | RecordId | None = None
    timestamp: Millis | None = None
    delay: Millis | None = None
    delay_ms: Millis | None = None
    tool_wait_ms: Millis | None = None
    wait_for: list[Name] = []
    branches: list[Name] = []
    prefix_reset: bool | None = None
    model: Name = ""


class _Node:
    def __init__(self, n: int, row: AgenticRow):
        self.n, self.row = n, row
        self.t = 0.0
        self.stream: list = []  # the request list of its stream
        self.depth = 0
        self.request: Request | None = None


def read_agentic(path: str | Path, warn=None) -> list[Session]:
    path = Path(path)
    groups: dict[object, dict[str, _Node]] = {}
    for n, row in read_rows(path, AgenticRow, BLOCK_SIZE):
        nodes = groups.setdefault(row.session_id, {})
        if row.request_id in nodes:
            raise TraceError(str(path), f"line {n} request_id", f"duplicate request_id {row.request_id!r}")
        nodes[row.request_id] = _Node(n, row)
    sessions = [_agentic_session(path, sid, nodes) for sid, nodes in groups.items()]
    sessions.sort(key=lambda s: (s.start, s.id))
    return sessions


def _order(path: Path, nodes: dict[str, _Node]) -> list[_Node]:
    """Nodes with every dependency before its dependents; unknown ids and cycles are errors."""
    order, state = [], {}
    for node in sorted(nodes.values(), key=lambda x: x.n):
        stack = [(node, 0)]
        while stack:
            cur, i = stack.pop()
            if i == 0:
                if state.get(cur.row.request_id) == 2:
                    continue
                state[cur.row.request_id] = 1
            deps = cur.row.wait_for
            if i < len(deps):
                stack.append((cur, i + 1))
                dep = nodes.get(deps[i])
                if dep is None:
                    raise TraceError(str(path), f"line {cur.n} wait_for", f"unknown request_id {deps[i]!r}")
                if state.get(deps[i]) == 1:
                    raise TraceError(str(path), f"line {cur.n} wait_for", "dependencies form a cycle")
                if state.get(deps[i]) != 2:
                    stack.append((dep, 0))
            else:
                state[cur.row.request_id] = 2
                order.append(cur)
    return order


def _agentic_session(path: Path, sid, nodes: dict[str, _Node]) -> Session:
    brancher = {child: node for node in nodes.values() for child in node.row.branches}
    stamped = [x.row.timestamp for x in nodes.values() if x.row.timestamp is not None and not x.row.wait_for]
    t0 = min(stamped, default=0.0) / 1000.0
    top: list[list[Request]] = []
    subs: dict[int, tuple[list[Request], _Node]] = {}  # id(stream list) -> (list, spawner node)
    last: dict[int, str] = {}  # id(stream list) -> its last request's id
    for node in _order(path, nodes):
        row, deps = node.row, [nodes[d] for d in node.row.wait_for]
        gap = ((row.delay if row.delay is not None else row.delay_ms or 0.0) + (row.tool_wait_ms or 0.0)) / 1000.0
        after = max((d.t for d in deps), default=None)
        if row.timestamp is not None and (not deps or row.timestamp / 1000.0 - t0 >= after):
            node.t = row.timestamp / 1000.0 - t0
        else:
            node.t = (after or 0.0) + gap
            check_time(path, f"line {node.n} delay", node.t)  # waits summed along a chain
        parent = brancher.get(row.request_id)
        pred = min(deps, key=lambda d: (d.depth, -d.t)) if deps else None
        if parent is None and pred is not None and pred.stream[-1] is not pred.request:
            parent = pred  # a second request continuing one request: a spawn without `branches`
        if parent is not None and (parent in deps or not deps):
            node.stream, node.depth = [], parent.depth + 1
            if node.depth > MAX_DEPTH:
                raise TraceError(str(path), f"line {node.n} request_id",
                                 f"subagents nested over {MAX_DEPTH} deep (the trace model's bound)")
            subs[id(node.stream)] = (node.stream, parent)
        elif not deps:
            node.stream = []
            top.append(node.stream)
        else:
            node.stream, node.depth = pred.stream, pred.depth
        node.request = Request(
            t=round(node.t, 6), model=row.model, isl=row.input_length, osl=row.output_length,
            hash_ids=row_ids(row.hash_ids), think_time=round(gap, 6) if deps else None)
        node.stream.append(node.request)
        last[id(node.stream)] = row.request_id
    awaited = {d for node in nodes.values() for d in node.row.wait_for}
    joined = {key for key, rid in last.items() if rid in awaited}
    return _tree(sid, path, top, subs, joined, t0)


def _tree(sid, path: Path, top, subs, joined: set[int], t0: float) -> Session:
    """Nest each subagent stream below the stream that spawned it (a background one when nothing
    waits for its last request). Of the top-level streams the one with the most hash blocks is
    main (then the earliest), the others are aux chains (SPEC §1's tie-break)."""

    def build(reqs: list[Request], kind: str) -> Stream:
        kids = (build(r, "subagent" if id(r) in joined else "background")
                for r, spawner in subs.values() if spawner.stream is reqs)
        status = {"subagent": "completed", "background": "async_launched"}.get(kind)  # as WEKA marks them
        return Stream(kind=kind, requests=tuple(reqs), spawn=reqs[0].t, status=status,
                      children=tuple(sorted(kids, key=lambda s: s.spawn)))

    if not top:
        raise TraceError(str(path), f"session {sid}", "no request without dependencies to start from")
    top = sorted(top, key=lambda reqs: (-sum(len(r.hash_ids) for r in reqs), reqs[0].t))
    streams = [build(reqs, "main" if k == 0 else "aux") for k, reqs in enumerate(top)]
    main, aux = streams[0], sorted(streams[1:], key=lambda s: s.spawn)
    return Session(id=str(sid) if sid is not None else Path(path).name.split(".")[0], block_size=BLOCK_SIZE,
                   hash_id_scope="global", streams=(main, *aux), start=t0, partial_block_ids=True,
                   models=tuple(sorted({r.model for reqs in top for r in reqs if r.model})))


def write_agentic(sessions: list[Session], path: str | Path) -> None:
    """One row per request; `wait_for` from the session graph's edges (chain, spawn, join, branch),
    `delay` the largest in-edge delay in ms (Dynamo waits once, after the last dependency)."""
    rows = []
    reblock = Reblocker(BLOCK_SIZE, partial_block_ids=True)
    for s in sessions:
        ids = reblock.session(s)
        graph = build_graph(s)
        rid = [f"{s.id}:{i}" for i in range(len(graph.nodes))]
        spawned: dict[int, list[str]] = {}
        for e in graph.edges:
            if e.kind in ("spawn", "branch"):
                spawned.setdefault(e.src, []).append(rid[e.dst])
        for node in graph.nodes:
            r, ins = node.request, [e for e in graph.in_edges[node.index] if e.src >= 0]
            row = {"request_id": rid[node.index], "session_id": s.id, "timestamp": round((s.start + r.t) * 1000.0, 3),
                   "input_length": r.isl, "output_length": r.osl, "hash_ids": ids[id(r)]}
            if ins:
                row["wait_for"] = [rid[e.src] for e in ins]
                row["delay"] = round(max(e.delay for e in ins) * 1000.0, 3)
            if node.index in spawned:
                row["branches"] = spawned[node.index]
            if node.position == 0:
                row["prefix_reset"] = True
            if r.model:
                row["model"] = r.model
            rows.append(row)
    Path(path).write_bytes(encode_rows(rows))


class DeltaRow(MooncakeRow):
    segments: Segments | None = None  # the turn's part by kind (agentx's extension, SPEC §1)


def _joined(segments: list[Segment]) -> tuple[Segment, ...]:
    """Segments in order, adjacent runs of one kind and tool as one."""
    out: list[Segment] = []
    for g in segments:
        if out and (out[-1].kind, out[-1].tool) == (g.kind, g.tool):
            out[-1] = Segment(g.kind, out[-1].tokens + g.tokens, g.tool)
        else:
            out.append(g)
    return tuple(out)


def _turn_segments(path, rows: list) -> list[tuple[Segment, ...] | None]:
    """Each request's segments (the rows' so far), or None for all when a row has none."""
    if any(r.segments is None for _, r in rows):
        return [None] * len(rows)
    out, so_far = [], []
    for n, r in rows:
        if sum(g.tokens for g in r.segments) != r.input_length:
            raise TraceError(str(path), f"line {n} segments",
                             f"segments cover {sum(g.tokens for g in r.segments):,} tokens, "
                             f"input_length is {r.input_length:,}")
        so_far = list(_joined(so_far + r.segments))
        out.append(tuple(so_far))
    return out


def read_mooncake_delta(path: str | Path, warn=None) -> list[Session]:
    stem = Path(path).name.split(".")[0]
    groups: dict[object, list[tuple[int, DeltaRow]]] = {}
    for n, row in decode_rows(path, DeltaRow):
        groups.setdefault(row.session_id if row.session_id is not None else f"{stem}-{n}", []).append((n, row))
    sessions = []
    for sid, rows in groups.items():
        rows.sort(key=lambda nr: nr[1].timestamp)
        start = rows[0][1].timestamp / 1000.0
        # every prompt is a prefix of the next: one buffer, a view per request
        ids = ids_array(np.concatenate([np.asarray(r.hash_ids, dtype=np.uint64) for _, r in rows]))
        isl = n_ids = 0
        requests = []
        segments = _turn_segments(path, rows)
        for (n, r), segs in zip(rows, segments):  # the bounds hold for the whole prompt, not the turn's part
            isl, n_ids = isl + r.input_length, n_ids + len(r.hash_ids)
            check_request(path, f"line {n}", "input_length", isl, n_ids, BLOCK_SIZE, True)
            requests.append(Request(t=round(r.timestamp / 1000.0 - start, 6), model=r.model, isl=isl,
                                    osl=r.output_length, hash_ids=ids[:n_ids], segments=segs))
        sessions.append(row_session(requests, str(sid), BLOCK_SIZE, start))
    sessions.sort(key=lambda s: (s.start, s.id))
    return sessions
