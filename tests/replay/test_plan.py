"""The replay plan driven by a fake clock on the real WEKA traces."""

import heapq
import math

import pytest

from agentx.replay.plan import PlanConfig, ReplayPlan
from agentx.traces.graph import build_graph
from agentx.traces.load import load_sessions
from tests.conftest import WEKA


@pytest.fixture(scope="module")
def graphs():
    return [build_graph(s) for s in load_sessions([WEKA], None)]


def latency(d) -> float:
    return 0.5 + d.request.osl * 0.002 if d.phase == "profile" else 0.3


def drive(graphs, cfg: PlanConfig, watch=None):
    """Run a plan against a fake server; returns (plan, dispatches as (time, d), ends by key).
    `watch(plan, now)` is called after each step's dispatches."""
    plan = ReplayPlan(graphs, cfg)
    now, events, log, ends = 0.0, [], [], {}
    plan.start(now)
    while True:
        for d in plan.due(now):
            assert d.key not in ends and all(d.key != x.key for _, x in log[-500:])
            log.append((now, d))
            heapq.heappush(events, (now + latency(d), d.key))
        if watch:
            watch(plan, now)
        nt = plan.next_time(now)
        if events and (nt is None or events[0][0] <= nt):
            now, key = heapq.heappop(events)
            ends[key] = now
            plan.ended(key, now)
        elif nt is not None:
            assert nt >= now - 1e-9
            now = nt
        else:
            return plan, log, ends


EXACT = dict(idle_cap=math.inf, system_idle_cap=math.inf)


def test_same_seed_same_plan_and_other_seed_differs(graphs):
    a = drive(graphs, PlanConfig(concurrency=6, duration=900, seed=3))[1]
    b = drive(graphs, PlanConfig(concurrency=6, duration=900, seed=3))[1]
    c = drive(graphs, PlanConfig(concurrency=6, duration=900, seed=4))[1]
    sig = lambda log: [(round(t, 9), d.key, d.phase, d.graph.session.id, d.marker) for t, d in log]
    assert sig(a) == sig(b)
    assert sig(a) != sig(c)


def test_delays_are_end_to_start_and_joins_wait_for_every_subagent(graphs):
    plan, log, ends = drive(graphs, PlanConfig(concurrency=8, duration=3_000, seed=1, **EXACT))
    checked_joins = 0
    for t, d in log:
        if d.phase != "profile":
            continue
        for e in d.graph.in_edges[d.node]:
            if e.src < 0:
                continue
            end = ends[(d.tree, e.src)]
            assert t >= end - 1e-9, "dispatched before a predecessor ended"
            if end > plan.profile_start:  # both inside profiling: the delay is kept exactly
                assert t >= end + e.delay - 1e-6
            checked_joins += e.kind == "join"
        # dispatched at the latest of its in-edges' ready times, not later
        srcs = [ends[(d.tree, e.src)] + e.delay for e in d.graph.in_edges[d.node]
                if e.src >= 0 and ends[(d.tree, e.src)] > plan.profile_start]
        if srcs and len(srcs) == len(d.graph.in_edges[d.node]):
            assert t == pytest.approx(max(srcs), abs=1e-6)
    assert checked_joins > 0


def test_background_subagents_never_block(graphs):
    target = [g for g in graphs if g.session.id == "trace_0295"]
    plan, log, ends = drive(target, PlanConfig(concurrency=1, duration=30_000, seed=0, warmup=False, **EXACT))
    bg = {i for i, n in enumerate(target[0].nodes) if target[0].kind(i) == "background"}
    assert bg
    main_times = [t for t, d in log if d.graph.kind(d.node) == "main" and d.tree == log[0][1].tree]
    bg_ends = [ends[(log[0][1].tree, n)] for n in bg if (log[0][1].tree, n) in ends]
    # the main chain went on while background work was still running
    assert any(t < max(bg_ends) for t in main_times[1:])
    for e in target[0].edges:
        assert not (e.src in bg and e.kind == "join")


def test_warmup_is_separate_and_bounded(graphs):
    cfg = PlanConfig(concurrency=10, duration=600, seed=2, warmup_requests_per_lane=5)
    plan, log, ends = drive(graphs, cfg)
    warm = [(t, d) for t, d in log if d.phase == "warmup"]
    prof = [(t, d) for t, d in log if d.phase == "profile"]
    assert warm and prof
    assert max(ends[d.key] for _, d in warm) <= plan.profile_start  # warmup drains first
    assert min(t for t, _ in prof) >= plan.profile_start
    assert max(t for t, _ in prof) < plan.profile_end
    for lane in range(10):
        tree = plan.trees[lane]  # initial trees have uids 0..9
        assert 0.25 <= tree.t_star / tree.graph.session.duration <= 0.75
        stage2 = [d for _, d in warm if d.tree == lane and d.node not in tree.primers]
        assert len(stage2) <= 5
        assert all(tree.graph.nodes[p].request.t < tree.t_star for p in tree.primers)


def test_profiling_starts_a_lead_after_the_warmup_drains(graphs):
    cfg = PlanConfig(concurrency=6, duration=600, seed=2, warmup_requests_per_lane=3, system_idle_cap=1, lead=5)
    plan, log, ends = drive(graphs, cfg)
    last_warm_end = max(ends[d.key] for _, d in log if d.phase == "warmup")
    assert plan.profile_start == pytest.approx(last_warm_end + 5)  # the idle cap does not shorten it
    assert min(t for t, d in log if d.phase == "profile") >= plan.profile_start


def test_the_next_tree_of_a_lane_is_known_before_its_tree_drains(graphs):
    announced = {}  # dispatch key -> the first time upcoming() listed it

    def watch(plan, now):
        for d in plan.upcoming(now, 1.0):
            announced.setdefault(d.key, (now, d))

    plan, log, ends = drive(graphs, PlanConfig(concurrency=3, duration=20_000, seed=1), watch)
    refills = [(t, d) for t, d in log if d.tree >= 3 and t > plan.profile_start  # lanes refilled while profiling
               and any(e.dst == d.node and e.delay <= 1.0 for e in d.graph.roots)]  # their first requests
    assert len(refills) > 5
    for t, d in refills:
        first, listed = announced[d.key]
        assert first < t and listed.marker == d.marker and listed.session is d.session  # known before
        assert listed.planned == math.inf and d.planned == pytest.approx(t)  # its due time was not


def test_markers_same_within_a_tree_and_different_across_replays_and_runs(graphs):
    _, log, _ = drive(graphs, PlanConfig(concurrency=4, duration=20_000, seed=1, run_id="a"))
    by_tree = {}
    for _, d in log:
        by_tree.setdefault(d.tree, set()).add(d.marker)
    assert all(len(m) == 1 for m in by_tree.values())
    markers = [m.pop() for m in by_tree.values()]
    assert len(set(markers)) == len(markers) > 4  # lanes replayed several trees
    _, other, _ = drive(graphs, PlanConfig(concurrency=4, duration=20_000, seed=1, run_id="b"))
    assert not {d.marker for _, d in other} & set(markers)


def test_idle_caps_shorten_gaps(graphs):
    cfg = PlanConfig(concurrency=3, duration=4_000, seed=5, idle_cap=20, system_idle_cap=5, warmup=False)
    plan, log, ends = drive(graphs, cfg)
    # per tree: when nothing of the tree is in flight, its next request comes within the cap
    for tree in {d.tree for _, d in log}:
        events = sorted([(t, 1) for t, d in log if d.tree == tree]
                        + [(ends[d.key], -1) for _, d in log if d.tree == tree and d.key in ends])
        inflight, idle_from = 0, None
        for t, delta in events:
            if delta == 1 and inflight == 0 and idle_from is not None:
                assert t - idle_from <= 20 + 1e-6
            inflight += delta
            idle_from = t if inflight == 0 else None
    uncapped = drive(graphs, PlanConfig(concurrency=3, duration=4_000, seed=5, warmup=False, **EXACT))[1]
    assert len(log) > len(uncapped)  # the caps let more of the traces fit the window


def test_lanes_refill_with_new_trees_inside_the_window(graphs):
    plan, log, _ = drive(graphs, PlanConfig(concurrency=2, duration=30_000, seed=1))
    whole = [t for t in plan.finished_trees if t.started_in_profile]
    assert whole
    for t in whole:
        assert t.open_nodes == 0 and t.first_start >= plan.profile_start


def test_schedule_mode_starts_sessions_at_recorded_times():
    from tests.conftest import MOONCAKE

    graphs = [build_graph(s) for s in load_sessions([MOONCAKE], None)[:60]]
    cfg = PlanConfig(concurrency=1, duration=100_000, mode="schedule", time_scale=2.0, warmup_seconds=5.0)
    plan, log, ends = drive(graphs, cfg)
    first = min(g.session.start for g in graphs)
    starts = {}
    for t, d in log:
        starts.setdefault(d.tree, (t, d))
    assert len(starts) == len(graphs)  # one tree per session, no refill
    for t, d in starts.values():  # each session's first request at its recorded start / time scale
        want = (d.graph.session.start - first) / 2.0 + d.graph.nodes[d.node].request.t
        assert t == pytest.approx(want, abs=1e-6)
    assert all((d.phase == "warmup") == (t < 5.0) for t, d in log)
    assert any(d.phase == "warmup" for _, d in log) and any(d.phase == "profile" for _, d in log)
