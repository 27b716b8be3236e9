"""A session tree of the replay plan (`plan.py`): one replay of one session graph in one lane,
with its nodes' states, the in-edges each still waits for, and the contributions to their
dispatch times (relative to the profiling start P, `rel`, or absolute, `abs`; SPEC §2)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from agentx.traces.graph import SessionGraph

# node states
PENDING, READY, FLIGHT, ENDED = 0, 1, 2, 3


@dataclass
class Tree:
    """One replay of one session graph in one lane."""

    uid: int
    lane: int
    replay: int
    graph: SessionGraph
    marker: int
    t_star: float = 0.0
    origin: float | None = None  # plan time of recorded t = 0 (None until profiling)
    remaining: list[int] = field(default_factory=list)
    state: list[int] = field(default_factory=list)
    rel: list[float] = field(default_factory=list)
    abs: list[float] = field(default_factory=list)
    due_at: dict[int, float] = field(default_factory=dict)  # READY nodes -> dispatch time
    warm_ready: list = field(default_factory=list)  # heap of (recorded t, node) in warmup 2
    warm_sent: int = 0
    primers: list[int] = field(default_factory=list)
    inflight: int = 0
    open_nodes: int = 0  # nodes not ENDED
    started_in_profile: bool = False
    first_start: float | None = None
    last_end: float | None = None

    def ready_time(self, node: int, profile_start: float) -> float:
        return max(self.abs[node], profile_start + self.rel[node])

    def lay_out(self) -> None:
        """Node bookkeeping; with t* > 0, requests before t* are skipped (taken as done), but for
        the primers. The plan then readies the nodes left PENDING with no in-edge to wait for."""
        g, n = self.graph, len(self.graph.nodes)
        self.remaining = [len(e) for e in g.in_edges]
        self.state = [PENDING] * n
        self.rel = [-math.inf] * n
        self.abs = [-math.inf] * n
        self.open_nodes = n
        skipped = [node.request.t < self.t_star for node in g.nodes] if self.t_star > 0 else [False] * n
        for e in g.roots:
            if self.origin is None:  # an initial lane's tree: placed relative to the profile start
                self.rel[e.dst] = max(self.rel[e.dst], e.delay - self.t_star)
            else:
                self.abs[e.dst] = max(self.abs[e.dst], self.origin + e.delay)
            self.remaining[e.dst] -= 1
        self._unskip_primers(skipped)
        for i in range(n):
            if skipped[i]:
                self.state[i] = ENDED
                self.open_nodes -= 1
                for e in g.out_edges[i]:
                    self.rel[e.dst] = max(self.rel[e.dst], g.nodes[i].request.end + e.delay - self.t_star)
                    self.remaining[e.dst] -= 1

    def _unskip_primers(self, skipped: list[bool]) -> None:
        """Un-skip, per stream live at t*, its last request before t*: those are the primers."""
        if self.t_star <= 0:
            return
        last: dict[int, int] = {}
        for node in self.graph.nodes:
            if skipped[node.index]:
                last[node.stream] = node.index
        for stream, node in last.items():
            if self.graph.streams[stream].end > self.t_star:
                skipped[node] = False
                self.primers.append(node)
