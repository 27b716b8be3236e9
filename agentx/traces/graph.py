"""The session graph: every request is a node, dispatched when all its in-edges are satisfied.

An edge `p -> n` with delay `d` is satisfied once `now >= end(p) + d` (end-to-start; SPEC §1).
`START` is the session-start node: an edge from it is satisfied `d` seconds after the session
(or its replay) begins. Edge kinds:
- `chain`: consecutive requests of one stream (the recorded think/tool gap);
- `spawn`: the parent request a subagent was launched after -> the subagent's first request;
- `join`: a completed subagent's last request -> the parent's next request;
- `branch`: the main request an aux chain follows -> the aux chain's first request;
- `start`: START -> anything with no earlier request to hang from.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Literal

from agentx.traces.model import Request, Session, Stream, StreamKind

START = -1
EdgeKind = Literal["chain", "spawn", "join", "branch", "start"]


@dataclass(frozen=True, slots=True)
class Node:
    index: int
    request: Request
    stream: int  # index into SessionGraph.streams
    position: int  # index of the request within its stream


@dataclass(frozen=True, slots=True)
class Edge:
    src: int  # a node index, or START
    dst: int
    delay: float
    kind: EdgeKind


@dataclass(frozen=True, slots=True)
class SessionGraph:
    session: Session
    streams: tuple[Stream, ...]  # depth first: main, its subagents..., then aux streams
    parents: tuple[int, ...]  # parent stream index per stream (-1 for main and aux)
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    in_edges: tuple[tuple[Edge, ...], ...]
    out_edges: tuple[tuple[Edge, ...], ...]

    def kind(self, node: int) -> StreamKind:
        return self.streams[self.nodes[node].stream].kind

    @property
    def roots(self) -> tuple[Edge, ...]:
        """Edges from the session-start node."""
        return tuple(e for e in self.edges if e.src == START)


def chain_gap(prev: Request, nxt: Request) -> float:
    """Recorded gap between consecutive requests of a stream (SPEC §1).

    `t(next) - (t(prev) + api_time(prev))`; with no api_time, next's think_time; with neither,
    the start-to-start difference.
    """
    if prev.api_time is not None:
        return max(0.0, nxt.t - prev.end)
    if nxt.think_time is not None:
        return nxt.think_time
    return max(0.0, nxt.t - prev.t)


class _Builder:
    def __init__(self, session: Session):
        self.session = session
        self.streams: list[Stream] = []
        self.parents: list[int] = []
        self.first: list[int] = []  # first node index per stream
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []

    def add_stream(self, stream: Stream, parent: int) -> int:
        index = len(self.streams)
        self.streams.append(stream)
        self.parents.append(parent)
        self.first.append(len(self.nodes))
        for pos, req in enumerate(stream.requests):
            self.nodes.append(Node(len(self.nodes), req, index, pos))
        for pos in range(1, len(stream.requests)):
            a = self.first[index] + pos - 1
            self.edges.append(Edge(a, a + 1, chain_gap(stream.requests[pos - 1], stream.requests[pos]), "chain"))
        for child in stream.children:
            self.add_subagent(child, index)
        return index

    def add_subagent(self, sub: Stream, parent: int) -> None:
        index = self.add_stream(sub, parent)
        if not sub.requests:
            return
        parent_stream = self.streams[parent]
        starts = [r.t for r in parent_stream.requests]
        k = bisect.bisect_right(starts, sub.spawn) - 1  # last parent request started by the spawn
        first = self.first[index]
        if k >= 0:
            spawner = parent_stream.requests[k]
            self.edges.append(Edge(self.first[parent] + k, first, max(0.0, sub.spawn - spawner.end), "spawn"))
        else:
            self.edges.append(Edge(START, first, sub.spawn, "start"))
        if sub.kind == "background" or k + 1 >= len(parent_stream.requests):
            return  # nothing waits for it
        joiner = parent_stream.requests[k + 1]
        last = first + len(sub.requests) - 1
        self.edges.append(Edge(last, self.first[parent] + k + 1, max(0.0, joiner.t - sub.end), "join"))

    def add_aux(self, aux: Stream, main: int) -> None:
        index = self.add_stream(aux, -1)
        if not aux.requests:
            return
        t0 = aux.requests[0].t
        main_reqs = self.streams[main].requests
        # the most recent main request that had ended by the aux call's start
        best = -1
        for k, req in enumerate(main_reqs):
            if req.t > t0:
                break
            if req.end <= t0 and (best < 0 or req.end >= main_reqs[best].end):
                best = k
        first = self.first[index]
        if best >= 0:
            self.edges.append(Edge(self.first[main] + best, first, t0 - main_reqs[best].end, "branch"))
        else:
            self.edges.append(Edge(START, first, t0, "start"))

    def build(self) -> SessionGraph:
        main, *aux = self.session.streams
        m = self.add_stream(main, -1)
        if main.requests:
            self.edges.append(Edge(START, self.first[m], main.requests[0].t, "start"))
        for stream in aux:
            self.add_aux(stream, m)
        n = len(self.nodes)
        ins: list[list[Edge]] = [[] for _ in range(n)]
        outs: list[list[Edge]] = [[] for _ in range(n)]
        for e in self.edges:
            ins[e.dst].append(e)
            if e.src != START:
                outs[e.src].append(e)
        return SessionGraph(
            session=self.session,
            streams=tuple(self.streams),
            parents=tuple(self.parents),
            nodes=tuple(self.nodes),
            edges=tuple(self.edges),
            in_edges=tuple(map(tuple, ins)),
            out_edges=tuple(map(tuple, outs)),
        )


def build_graph(session: Session) -> SessionGraph:
    """The request graph of one session (SPEC §1)."""
    return _Builder(session).build()


def topological_order(graph: SessionGraph) -> list[int]:
    """Node indices in an order where every node follows its in-edge sources; raises on a cycle."""
    pending = [len(e) for e in graph.in_edges]
    for e in graph.roots:
        pending[e.dst] -= 1
    ready = [i for i, p in enumerate(pending) if p == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for e in graph.out_edges[node]:
            pending[e.dst] -= 1
            if pending[e.dst] == 0:
                ready.append(e.dst)
    if len(order) != len(graph.nodes):
        raise ValueError(f"session {graph.session.id}: request graph has a cycle")
    return order
