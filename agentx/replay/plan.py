"""The replay plan: a pure, seeded state machine of lanes of session trees (SPEC §2).

No sockets and no clock: the driver asks `due(now)` for what to send, `next_time()` for when
to ask again, and reports `ended(key, now)`. Given the same traces, settings, seed and
completion order it makes the same decisions, so tests drive it with a fake clock.

Phases: warmup stage 1 (primers: per initial lane, the last request before the lane's start
point t* of every stream live at t*, all at once), warmup stage 2 (each lane advances
`warmup_requests_per_lane` more requests in graph order, no delays), then profiling for every
lane at the same instant P, for `duration` seconds. Warmup requests use max_tokens = 1. With
`drain`, the load goes on after the window (phase `drain`: requests sent as in profiling, not
profiled) until every profiled request has ended, so each was answered under the window's load.

Times are kept in plan coordinates (real time + the system idle cap's accumulated shift).
A node is ready when all its in-edges are satisfied; its dispatch time is the maximum
over its in-edges of `end(src) + delay`. Contributions known before P are kept relative to P
(`rel`): an edge from a request that ended during warmup counts its delay from P, and an edge
from a request skipped before t* (or from the session start) counts its recorded time minus t*.
Once profiling runs, contributions are absolute (`abs`). A per-tree idle cap pulls a tree's
timers to at most `idle_cap` after the moment it has nothing in flight; a system idle cap
shifts every timer when nothing anywhere is in flight. A tree's own node bookkeeping is in `tree.py`.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass
from enum import StrEnum

from agentx.common import key64
from agentx.options import check_bounds, option
from agentx.replay.tree import ENDED, FLIGHT, PENDING, READY, Tree
from agentx.traces.graph import SessionGraph

WARMUP1, WARMUP2, PROFILE, DRAIN, DONE = "warmup1", "warmup2", "profile", "drain", "done"
SENDING = (PROFILE, DRAIN)  # the phases that send at due times


class PlanMode(StrEnum):
    """How sessions are started: a closed loop per lane, or an open loop at recorded starts."""

    LANES = "lanes"
    SCHEDULE = "schedule"

    @property
    def rules(self) -> ModeRules:
        return _RULES[self]


@dataclass(frozen=True)
class ModeRules:
    """What a plan mode changes in the state machine."""

    refills_lanes: bool  # a drained tree's lane takes the next session (closed loop); else no lanes refill
    warmup_in_window: bool  # the warmup is the schedule's first `warmup_seconds`, sent in the profile phase


_RULES = {PlanMode.LANES: ModeRules(refills_lanes=True, warmup_in_window=False),
          PlanMode.SCHEDULE: ModeRules(refills_lanes=False, warmup_in_window=True)}
MODES = tuple(PlanMode)
ARRIVALS = ("poisson", "constant")  # --request-rate: exponential gaps (vLLM bench's default) or even ones


@dataclass(frozen=True)
class PlanConfig:
    """The replay plan's settings (`option`: each declared once, with its flag's help and bounds)."""

    concurrency: int = option(8, "Lanes.", min=1, cli=False)  # (the CLI takes a list: a sweep)
    duration: float = option(3600.0, "Profiling window in seconds.", gt=0)
    seed: int = option(0, "Seed of the plan and the content.")
    run_id: str = option("run", cli=False)  # set per run
    warmup: bool = option(True, "Warm every lane up before profiling (--no-warmup: every lane starts at t = 0).")
    warmup_requests_per_lane: int = option(10, "Warmup requests each lane sends before profiling.", min=0)
    idle_cap: float = option(300.0, "Longest gap a session tree waits with nothing in flight.", min=0)
    system_idle_cap: float = option(10.0, "Longest gap with nothing in flight anywhere.", min=0)
    mode: str = option(PlanMode.LANES.value, "lanes (closed loop) or schedule (open loop at recorded start times).",
                       choices=PlanMode)
    time_scale: float = option(1.0, "Schedule mode: divide recorded session start times by this.", gt=0)
    warmup_seconds: float = option(0.0, "Schedule mode: this prefix counts as warmup.", min=0)
    request_rate: float | None = option(None, "Open loop: session trees start at R per second (a scenario: "
                                        "requests per second) instead of lanes; see --arrival.", gt=0)
    arrival: str = option("poisson", "How --request-rate spaces starts: poisson (seeded exponential gaps, vLLM "
                          "bench's default) or constant (1/R apart).", choices=ARRIVALS)
    lead: float = option(0.0, min=0, cli=False)  # between the warmup's drain (or the start) and profiling: the
    # client renders ahead (set per run, `replay/run.py` LEAD_S)
    # lanes mode: a lane whose tree drains takes another session (drawn again once all were used);
    # False: each session is replayed once and a lane stops when none is left (offline scenarios,
    # and a fixed number of prompts per lane as benchmark_serving sends)
    reuse_sessions: bool = option(True, cli=False)
    drain: bool = option(False, "After the window, keep the load on (requests not profiled) until every profiled "
                         "request has ended: no profiled request is cancelled or answered under a falling load "
                         "(SPEC 3, \"Settled: drain\").")

    def __post_init__(self):
        check_bounds(self)


@dataclass(frozen=True)
class Dispatch:
    """One request to send now."""

    key: tuple[int, int]  # (tree uid, node)
    lane: int
    tree: int
    replay: int  # how many trees this lane ran before this one
    graph: SessionGraph
    node: int
    phase: str  # "warmup", "profile" or "drain"
    marker: int  # the tree's cache-bust marker
    planned: float  # when the plan wanted it sent (dispatch lateness = actual - planned)

    @property
    def request(self):
        return self.graph.nodes[self.node].request

    @property
    def session(self):
        return self.graph.session


class ReplayPlan:
    def __init__(self, graphs: list[SessionGraph], cfg: PlanConfig):
        if not graphs:
            raise ValueError("no sessions to replay")
        self.cfg, self.graphs = cfg, graphs
        self.rules = PlanMode(cfg.mode).rules
        self.rng = random.Random(key64("plan", cfg.seed))
        self.order: list[int] = []
        self.trees: dict[int, Tree] = {}
        self.lanes: list[Tree | None] = [None] * cfg.concurrency
        self.replays = [0] * cfg.concurrency
        self.heap: list[tuple[float, int, int]] = []  # (time, tree uid, node); stale entries skipped
        self.phase = WARMUP1
        self.profile_start = math.inf
        self.shift = 0.0  # system idle cap: timers move earlier by this much
        self.lead_end = math.inf  # the lead (config) ends here: the idle cap does not shorten it
        self.inflight = 0
        self.profiled_inflight: set[tuple[int, int]] = set()  # keys of profile-phase requests in flight
        self.finished_trees: list[Tree] = []  # trees that drained, for session metrics
        # lane -> the tree it takes when its tree drains: drawn when the draining tree's last
        # request is sent, so that the new tree's first requests can be prepared ahead
        self.next_trees: dict[int, Tree] = {}
        self._uid = 0
        self._handed = 0  # sessions drawn so far (reuse_sessions=False: at most one each)
        self._out: list[Dispatch] = []
        self.on_schedule = None  # called with (tree, node, t) as a node is set due at plan time t (virtual/lags.py)

    # ----------------------------------------------------------------- public

    def start(self, now: float) -> None:
        if not self.rules.refills_lanes:
            self._start_schedule(now)
            return
        for lane in range(self.cfg.concurrency):
            tree = self._new_tree(lane)
            if tree is None:
                continue  # fewer sessions than lanes, each replayed once
            if self.cfg.warmup:
                rng = random.Random(key64("t*", self.cfg.seed, lane))
                tree.t_star = rng.uniform(0.25, 0.75) * tree.graph.session.duration
            self._init_tree(tree)
        if self.cfg.warmup:
            for tree in self.lanes:
                if tree is not None:
                    self._send_primers(tree, now)
            if self.inflight == 0:
                self._begin_warmup2(now)
        else:
            self._begin_profile(now)

    def _start_schedule(self, now: float) -> None:
        """Open loop: a tree per session, its recorded t = 0 at its recorded start / time_scale;
        no lanes refill. What starts in the first `warmup_seconds` is recorded as warmup."""
        self.phase = PROFILE
        now = self.lead_end = now + self.cfg.lead
        self.profile_start = now + self.cfg.warmup_seconds
        self.lanes = []
        for i, (graph, start) in enumerate(self._starts()):
            tree = Tree(self._uid, i, 0, graph, key64("marker", self.cfg.run_id, i, 0, graph.session.id))
            tree.origin = now + start
            tree.started_in_profile = tree.origin >= self.profile_start
            self._uid += 1
            self.trees[tree.uid] = tree
            self.lanes.append(tree)
            self._init_tree(tree)

    def _starts(self) -> list[tuple[SessionGraph, float]]:
        """(graph, start after the lead) per tree of the schedule: the recorded session starts
        over the time scale, or with a request rate R arrivals over warmup and window, spaced
        1/R apart or by seeded exponential gaps of mean 1/R (a Poisson process), each taking
        the next session of the seeded order (sessions repeat as needed, each replay with its
        own cache-bust marker)."""
        cfg = self.cfg
        if cfg.request_rate is None:
            first = min(g.session.start for g in self.graphs)
            return [(g, (g.session.start - first) / cfg.time_scale) for g in self.graphs]
        rng, horizon = random.Random(key64("arrivals", cfg.seed)), cfg.warmup_seconds + cfg.duration
        out, t = [], 0.0
        while t < horizon:
            out.append((self.graphs[self._next_session()], t))
            t += rng.expovariate(cfg.request_rate) if cfg.arrival == "poisson" else 1.0 / cfg.request_rate
        return out

    @property
    def profile_end(self) -> float:
        return self.profile_start + self.cfg.duration

    def due(self, now: float) -> list[Dispatch]:
        """Requests to send at `now` (each exactly once)."""
        if self.phase == PROFILE and self.rules.warmup_in_window and self.profile_start > now:
            self._pop_due(now)  # the schedule's warmup prefix
        elif self.phase == PROFILE:
            if now >= self.profile_end:  # a late look (a busy client) still sends what fell due in the window
                self._pop_due(self.profile_end, inclusive=False)
                self.phase = DRAIN if self.cfg.drain and self.profiled_inflight else DONE
                if self.phase == DRAIN:
                    self._pop_due(now)
            else:
                self._pop_due(now)
        elif self.phase == DRAIN:
            self._pop_due(now)
        out, self._out = self._out, []
        return out

    def next_time(self, now: float) -> float | None:
        """When `due` may next return something (None: only a completion can change that)."""
        if self.phase not in SENDING:
            return None
        while self.heap and not self.live(self.heap[0]):
            heapq.heappop(self.heap)
        if not self.heap:
            return None
        t = self.heap[0][0] - self.shift
        idle_from = max(now, self.lead_end)
        if self.inflight == 0 and t - idle_from > self.cfg.system_idle_cap:
            self.shift += t - idle_from - self.cfg.system_idle_cap
            t = idle_from + self.cfg.system_idle_cap
        return t if t < self.profile_end or self.phase == DRAIN else None

    def upcoming(self, now: float, horizon: float) -> list[Dispatch]:
        """The requests due by `now + horizon`, in order, as `due()` will hand them out unless
        something changes first, then the first requests of the trees lanes take next (due when
        their lanes drain, `planned` unknown): to prepare their bodies ahead. Changes nothing."""
        if self.phase != PROFILE:
            return []
        until = now + horizon + self.shift
        out = []
        for t, uid, node in sorted(e for e in self.heap if e[0] <= until):
            if self.live((t, uid, node)):
                out.append(self._as_dispatch(self.trees[uid], node, t - self.shift))
        for tree in self.next_trees.values():
            for e in tree.graph.roots:
                if e.delay <= horizon and len(tree.graph.in_edges[e.dst]) == 1:
                    out.append(self._as_dispatch(tree, e.dst, math.inf))
        return out

    def ended(self, key: tuple[int, int], now: float) -> None:
        """Request `key` finished (successfully or not) at `now`."""
        tree = self.trees[key[0]]
        node = key[1]
        tree.state[node] = ENDED
        tree.inflight -= 1
        tree.open_nodes -= 1
        tree.last_end = now
        self.inflight -= 1
        self.profiled_inflight.discard(key)
        warm = self.phase in (WARMUP1, WARMUP2)
        for edge in tree.graph.out_edges[node]:
            if warm:
                tree.rel[edge.dst] = max(tree.rel[edge.dst], edge.delay)
            else:
                tree.abs[edge.dst] = max(tree.abs[edge.dst], now + self.shift + edge.delay)
            self._satisfy(tree, edge.dst, now)
        if self.phase == WARMUP1 and self.inflight == 0:
            self._begin_warmup2(now)
        elif self.phase == WARMUP2:
            self._warm_advance(tree, now)
            if self.inflight == 0:
                self._begin_profile(now)
        elif self.phase in SENDING:
            if tree.open_nodes == 0:
                self._drained(tree, now)
            elif tree.inflight == 0:
                self._cap_idle(tree, now)
            if self.phase == DRAIN and not self.profiled_inflight:
                self.phase = DONE  # the window's last profiled request has ended

    @property
    def warming(self) -> bool:
        return self.phase in (WARMUP1, WARMUP2)

    # ---------------------------------------------------------------- trees

    def _next_session(self) -> int | None:
        if not self.cfg.reuse_sessions and self._handed >= len(self.graphs):
            return None
        self._handed += 1
        if not self.order:
            self.order = list(range(len(self.graphs)))
            self.rng.shuffle(self.order)
            self.order.reverse()
        return self.order.pop()

    def _new_tree(self, lane: int) -> Tree | None:
        tree = self.next_trees.pop(lane, None) or self._draw_tree(lane)
        self.lanes[lane] = tree
        return tree

    def _draw_tree(self, lane: int) -> Tree | None:
        index = self._next_session()
        if index is None:
            return None
        graph = self.graphs[index]
        replay = self.replays[lane]
        self.replays[lane] += 1
        marker = key64("marker", self.cfg.run_id, lane, replay, graph.session.id)
        tree = Tree(self._uid, lane, replay, graph, marker)
        self._uid += 1
        self.trees[tree.uid] = tree
        return tree

    def _init_tree(self, tree: Tree) -> None:
        tree.lay_out()
        for i in range(len(tree.graph.nodes)):
            if tree.state[i] == PENDING and tree.remaining[i] == 0:
                self._make_ready(tree, i, None)

    def _satisfy(self, tree: Tree, node: int, now: float) -> None:
        tree.remaining[node] -= 1
        if tree.remaining[node] == 0 and tree.state[node] == PENDING:
            self._make_ready(tree, node, now)

    def _make_ready(self, tree: Tree, node: int, now: float | None) -> None:
        tree.state[node] = READY
        if self.phase in (WARMUP1, WARMUP2) and tree.origin is None:
            heapq.heappush(tree.warm_ready, (tree.graph.nodes[node].request.t, node))
            return
        t = tree.ready_time(node, self.profile_start)
        if now is not None and tree.inflight == 0:
            t = min(t, now + self.cfg.idle_cap + self.shift)
        self._schedule(tree, node, t)

    def _schedule(self, tree: Tree, node: int, t: float) -> None:
        tree.due_at[node] = t
        heapq.heappush(self.heap, (t, tree.uid, node))
        if self.on_schedule is not None:
            self.on_schedule(tree, node, t)

    def live(self, entry) -> bool:
        """Whether a (plan time, tree uid, node) heap entry is still to be sent then (virtual/lags.py reads it too)."""
        t, uid, node = entry
        tree = self.trees[uid]
        return tree.state[node] == READY and tree.due_at.get(node) == t and self.lanes[tree.lane] is tree

    def _cap_idle(self, tree: Tree, now: float) -> None:
        cap = now + self.cfg.idle_cap + self.shift
        for node, t in list(tree.due_at.items()):
            if t > cap and tree.state[node] == READY:
                self._schedule(tree, node, cap)

    def _drained(self, tree: Tree, now: float) -> None:
        self.finished_trees.append(tree)
        if not self.rules.refills_lanes:
            return
        new = self._new_tree(tree.lane)
        if new is None:
            return  # no session left for this lane
        new.origin = now + self.shift
        new.started_in_profile = True
        self._init_tree(new)
        self._cap_idle(new, now)

    # ---------------------------------------------------------------- phases

    def _dispatch(self, tree: Tree, node: int, phase: str | None, planned: float) -> None:
        tree.state[node] = FLIGHT
        tree.due_at.pop(node, None)
        tree.inflight += 1
        self.inflight += 1
        if (self.phase in SENDING and self.rules.refills_lanes and tree.inflight == tree.open_nodes
                and self.lanes[tree.lane] is tree and tree.lane not in self.next_trees):
            upcoming = self._draw_tree(tree.lane)  # this tree drains next
            if upcoming is not None:
                self.next_trees[tree.lane] = upcoming
        if tree.first_start is None:
            tree.first_start = planned
        d = self._as_dispatch(tree, node, planned, phase)
        if d.phase == PROFILE:
            self.profiled_inflight.add(d.key)
        self._out.append(d)

    def _as_dispatch(self, tree: Tree, node: int, planned: float, phase: str | None = None) -> Dispatch:
        phase = phase or (DRAIN if self.phase == DRAIN else "profile" if planned >= self.profile_start else "warmup")
        return Dispatch((tree.uid, node), tree.lane, tree.uid, tree.replay, tree.graph, node, phase, tree.marker,
                        planned)

    def _send_primers(self, tree: Tree, now: float) -> None:
        for node in sorted(tree.primers, key=lambda i: tree.graph.nodes[i].request.t):
            if tree.state[node] == READY:
                tree.warm_ready = [(t, n) for t, n in tree.warm_ready if n != node]
                heapq.heapify(tree.warm_ready)
            self._dispatch(tree, node, "warmup", now)

    def _begin_warmup2(self, now: float) -> None:
        self.phase = WARMUP2
        for tree in self.lanes:
            if tree is not None:
                self._warm_advance(tree, now)
        if self.inflight == 0:
            self._begin_profile(now)

    def _warm_advance(self, tree: Tree, now: float) -> None:
        while tree.warm_ready and tree.warm_sent < self.cfg.warmup_requests_per_lane:
            _, node = heapq.heappop(tree.warm_ready)
            if tree.state[node] == READY:
                tree.warm_sent += 1
                self._dispatch(tree, node, "warmup", now)

    def _begin_profile(self, now: float) -> None:
        self.phase = PROFILE
        now = self.lead_end = now + self.cfg.lead  # (nothing is due before the profiling start)
        self.profile_start = now
        for lane, tree in enumerate(self.lanes):
            if tree is None:
                continue
            if tree.open_nodes == 0:  # drained during warmup: the lane starts a fresh tree
                self._drained(tree, now)
                continue
            tree.origin = now - tree.t_star
            while tree.warm_ready:
                _, node = heapq.heappop(tree.warm_ready)
                self._schedule(tree, node, tree.ready_time(node, now))
            self._cap_idle(tree, now)

    def _pop_due(self, now: float, inclusive: bool = True) -> None:
        while self.heap and (self.heap[0][0] - self.shift <= now if inclusive else self.heap[0][0] - self.shift < now):
            entry = heapq.heappop(self.heap)
            if self.live(entry):
                tree = self.trees[entry[1]]
                planned = entry[0] - self.shift
                self._dispatch(tree, entry[2], None, planned)
