"""Calibration of `agentx trace synth` against the published AgentX corpus statistics."""

import numpy as np
import pytest

from agentx.traces.graph import build_graph, topological_order
from agentx.traces.stats import trace_stats
from agentx.traces.synth import synth_corpus, synth_session, SynthConfig
from agentx.traces.weka import read_weka, write_weka


@pytest.fixture(scope="module")
def corpus():
    return list(synth_corpus(393, seed=1))


@pytest.fixture(scope="module")
def stats(corpus):
    return trace_stats(corpus)


# (published target, relative tolerance) — from tests/data/README.md
def test_calibrated_to_published_agentx_statistics(stats):
    assert stats.sessions == 393
    assert stats.requests == pytest.approx(98_827, rel=0.10)
    assert stats.isl.p50 == pytest.approx(142_000, rel=0.10)
    assert stats.osl.p50 == pytest.approx(444, rel=0.10)
    assert stats.gap.p50 == pytest.approx(3.84, rel=0.15)
    assert stats.gap_share_over_60s == pytest.approx(0.10, abs=0.03)
    assert stats.sessions_with_subagents / stats.sessions == pytest.approx(0.445, abs=0.07)
    assert stats.subagents_per_session.p50 == pytest.approx(4, abs=1)
    assert stats.subagent_wall_time.p50 == pytest.approx(2.27 * 60, rel=0.15)
    assert 0.95 <= stats.theoretical_hit_rate <= 0.995  # published ideal hit rate 0.983
    assert 900_000 <= stats.isl.max <= 1_000_000  # contexts up to 1M


def test_main_agent_share_and_growth(corpus):
    main = sum(len(s.main.requests) for s in corpus)
    total = sum(s.n_requests for s in corpus)
    assert main / total == pytest.approx(56_798 / 98_827, abs=0.07)
    # each turn extends the last one's blocks, except compactions and rare tail rewrites
    extends = resets = 0
    for s in corpus[:50]:
        reqs = s.main.requests
        for a, b in zip(reqs, reqs[1:]):
            n = len(a.hash_ids)
            if np.array_equal(b.hash_ids[:n], a.hash_ids):
                extends += 1
            elif len(b.hash_ids) < n:
                resets += 1
    assert extends > 0.85 * sum(len(s.main.requests) - 1 for s in corpus[:50])
    assert resets > 0


def test_same_seed_same_corpus_and_files_load(tmp_path):
    a, b = synth_session(SynthConfig(), 7, 3), synth_session(SynthConfig(), 7, 3)
    assert a == b and a != synth_session(SynthConfig(), 8, 3)
    write_weka([a], tmp_path / "s.json", "relative")
    again = read_weka(tmp_path / "s.json")[0]
    assert again == a
    assert len(topological_order(build_graph(again))) == a.n_requests
    for r in again.requests():
        assert len(r.hash_ids) == r.isl // 64


def test_subagents_can_fork_their_parents_context():
    """`--subagent-context parent`: a subagent's first prompt starts with the prompt of the request
    that spawned it, so the fork hint's shared tokens are that whole prompt."""
    from agentx.common import shared_prefix
    from agentx.replay.hints import request_hints
    from agentx.traces.graph import build_graph
    from agentx.traces.synth import SynthConfig, synth_corpus

    forks = 0
    for session in synth_corpus(12, 1, SynthConfig(subagent_context="parent")):
        graph = build_graph(session)
        for e in graph.edges:
            if e.kind != "spawn":
                continue
            parent, child = graph.nodes[e.src].request, graph.nodes[e.dst].request
            assert shared_prefix(parent.hash_ids, child.hash_ids) == len(parent.hash_ids)
            hints = request_hints("harness", graph, e.src, "s", None, 0, 64, 1)
            assert hints["fork_shared_tokens"] == len(parent.hash_ids) * 64
            forks += 1
    assert forks >= 3
