import pytest

from agentx.traces.stats import session_hit_tokens, trace_stats
from agentx.traces.weka import read_weka
from tests.conftest import WEKA, WEKA_FILES


def _naive_hit(session):
    seen, hits, total = set(), 0, 0
    for r in sorted(session.requests(), key=lambda r: r.t):
        ids = r.hash_ids.tolist()
        isl = session.replay_isl(r)
        hits += min(isl, sum(1 for i in ids if i in seen) * session.block_size)
        total += isl
        seen.update(ids)
    return hits, total


def test_hit_rate_equals_a_plain_set_computation(weka_file):
    session = read_weka(weka_file)[0]
    assert session_hit_tokens(session) == _naive_hit(session)


def test_trace_0291_stats():
    stats = trace_stats(read_weka(WEKA / "trace_0291.json"))
    assert stats.sessions == 1 and stats.requests == 32
    assert stats.streams == {"main": 1, "subagent": 2, "background": 0, "aux": 0}
    assert stats.sessions_with_subagents == 1 and stats.subagents_per_session.p50 == 2
    assert sorted([stats.subagent_wall_time.p50]) == pytest.approx([(46.656 + 79.184) / 2])
    assert stats.isl.max == 101_059
    assert 0.85 < stats.theoretical_hit_rate < 0.95


def test_trace_0295_stats():
    stats = trace_stats(read_weka(WEKA / "trace_0295.json"))
    assert stats.streams["background"] == 4 and stats.streams["subagent"] == 4
    assert stats.subagents_per_session.p50 == 8
    assert stats.requests == 416


def test_corpus_stats_are_totals_of_the_files():
    sessions = [read_weka(f)[0] for f in WEKA_FILES]
    stats = trace_stats(sessions)
    assert stats.requests == sum(s.n_requests for s in sessions)
    assert stats.isl.n == stats.osl.n == stats.requests
    assert stats.isl.p50 <= stats.isl.p90 <= stats.isl.p95 <= stats.isl.p99 <= stats.isl.max


def test_subagent_requests_and_side_by_side_columns():
    from rich.console import Console

    from agentx.traces.report import compare_table
    from agentx.traces.stats import by_provider

    one = read_weka(WEKA / "trace_0291.json")
    stats = trace_stats(one)
    assert stats.subagent_requests == sum(len(s.requests) for s in one[0].walk() if s.kind == "subagent") > 0
    all_files = trace_stats([read_weka(f)[0] for f in WEKA_FILES])
    console = Console(width=200, record=True)
    console.print(compare_table([("0291", stats), ("all", all_files)]))
    text = console.export_text()
    assert "0291" in text and "all" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("requests in subagents"))
    assert f"{stats.subagent_requests / stats.requests:.1%}" in row
    hit = next(line for line in text.splitlines() if "theoretical hit rate" in line)
    assert f"{all_files.theoretical_hit_rate:.1%}" in hit
    assert list(by_provider(one)) == ["unknown"]


def test_corpora_split_by_provider(tmp_path):
    import json

    from agentx.traces.load import load_sessions
    from agentx.traces.stats import corpora_stats
    from tests.traces.test_agentic_formats import TRACELAB_ROWS

    path = tmp_path / "rounds.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in TRACELAB_ROWS))
    rounds, weka = load_sessions([path]), [read_weka(WEKA / "trace_0291.json")[0]]
    labels = [(label, s.requests) for label, s in corpora_stats([("tl", rounds), ("weka", weka)], True)]
    assert labels == [("tl: claude", 3), ("tl: codex", 1), ("weka: unknown", 32)]
    assert [label for label, _ in corpora_stats([("tl", rounds)])] == ["tl"]
