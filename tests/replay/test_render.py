"""The renderer (`render.py`) on its own: the bodies of a real plan's dispatches (the bundled WEKA
traces), prepared ahead or when due, the theoretical cache, and a finished tree's state dropped."""

import json
from dataclasses import replace

import pytest

from agentx.content.tokens import ContentConfig
from agentx.replay.plan import PlanConfig, ReplayPlan
from agentx.replay.render import Renderer
from agentx.traces.graph import build_graph
from agentx.traces.load import load_sessions
from tests.conftest import WEKA


@pytest.fixture(scope="module")
def graphs():
    return [build_graph(s) for s in load_sessions([WEKA], None)]


def dispatches(graphs, n: int) -> list:
    """The first `n` dispatches of a plan without warmup, each answered at once (so streams go on)."""
    plan = ReplayPlan(graphs, PlanConfig(concurrency=2, duration=10_000, seed=5, warmup=False))
    out, now = [], 0.0
    plan.start(now)
    while len(out) < n:
        due = plan.due(now)
        for d in due:
            out.append(d)
            plan.ended(d.key, now + 1.0)
        nt = plan.next_time(now)
        assert due or nt is not None
        now = nt if nt is not None else now + 1.0
    return out[:n]


def renderer() -> Renderer:
    return Renderer("run-r", ContentConfig(seed=1), "m", "tokens", None)


def sent(render: Renderer, d) -> tuple:
    """Render a dispatch as the driver sends it: (body, ISL, OSL, theoretical cached)."""
    body, isl, osl, k = render.prepared(d)
    body = bytes(body)  # (a view of the stream's buffer, rewritten by its next request)
    return body, isl, osl, render.theoretical_cached(d, isl, k)


def test_bodies_are_the_completions_the_trace_asks_for(graphs):
    render = renderer()
    for d in dispatches(graphs, 12):
        body, isl, osl, theo = sent(render, d)
        doc = json.loads(body)
        assert doc["model"] == "m" and doc["stream"] is True
        assert len(doc["prompt"]) == isl and doc["max_tokens"] == osl == render.prompts.osl(d.request)
        assert 0 <= theo <= isl


def test_a_body_prepared_ahead_is_the_one_rendered_when_due(graphs):
    ds = dispatches(graphs, 8)
    ahead, now = renderer(), renderer()
    for d in ds:
        assert ahead.prepare_ahead([d]) and not ahead.prepare_ahead([d])  # once per dispatch
        assert ahead.ahead_bytes >= 0
        assert sent(ahead, d) == sent(now, d)
    assert ahead.ahead == {} and ahead.ahead_bytes == 0


def test_a_phase_that_changed_since_it_was_prepared_renders_it_again(graphs):
    d = dispatches(graphs, 1)[0]
    render = renderer()
    render.prepare_ahead([replace(d, phase="warmup")])  # a warmup request answers one token
    body, isl, osl, _ = sent(render, d)
    assert osl == render.prompts.osl(d.request) > 1 and json.loads(body)["max_tokens"] == osl


def test_the_theoretical_cache_counts_blocks_the_tree_sent_before_and_forgets_finished_trees(graphs):
    render = renderer()
    ds = dispatches(graphs, 40)
    by_stream: dict = {}
    later = 0
    for d in ds:
        shared = render.shared_with_last(d)  # with the stream's last request (0: its first)
        body, isl, osl, theo = sent(render, d)
        stream = (d.tree, d.graph.nodes[d.node].stream)
        assert (shared > 0) <= (stream in by_stream)
        if shared:  # at least the prefix it shares with its stream's last request was sent
            later += 1
            assert min(isl, shared * render.prompts.block_tokens(d.session)) <= theo <= isl
        by_stream[stream] = d
    assert later >= 5
    tree = ds[0].tree
    assert tree in render.seen
    render.forget(tree, len(ds[0].graph.streams))
    assert tree not in render.seen and not any(t == tree for t, _ in render.last_ids)


def test_forgetting_a_tree_drops_the_bodies_prepared_for_it(graphs):
    render = renderer()
    ds = dispatches(graphs, 12)
    while render.prepare_ahead(ds):
        pass
    trees = {d.tree for d in ds}
    assert len(trees) > 1 and len(render.ahead) == len(ds)
    gone = ds[0].tree
    render.forget(gone, len(ds[0].graph.streams))
    assert {k[0] for k in render.ahead} == trees - {gone} and render.ahead_bytes >= 0
