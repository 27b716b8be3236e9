import io
import json

import pytest
from rich.console import Console

from agentx.traces.model import MAX_SECONDS, MAX_TOKENS
from agentx.traces.mooncake import read_mooncake
from agentx.traces.stats_tables import stats_table
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

    from agentx.traces.stats_tables import compare_table
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
def _render(stats, width: int = 80) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(stats_table(stats, "corpus"))
    return console.export_text()


def test_the_table_never_cuts_the_largest_values_at_80_columns(tmp_path):
    """Values at the trace model's bounds fit the table at 80 columns; nothing prints as nan."""
    requests = [{"t": t, "in": MAX_TOKENS, "out": MAX_TOKENS, "hash_ids": [], "api_time": 1.0}
                for t in (0.0, MAX_SECONDS - 10)]
    requests.append({"t": MAX_SECONDS - 5, "type": "subagent", "duration_ms": 1000.0,
                     "requests": [{"t": 0.0, "in": 1, "out": 0}]})
    path = tmp_path / "extreme.json"
    path.write_text(json.dumps({"requests": requests}))
    text = _render(trace_stats(read_weka(path)))
    assert "…" not in text and "nan" not in text
    assert "10.0M" in text and "317.1y" in text


def test_a_corpus_without_gaps_prints_n_a_not_nan(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 600, "output_length": 0, "hash_ids": [1, 2]}\n')
    text = _render(trace_stats(read_mooncake(path)))
    assert "gaps over 60 s n/a" in " ".join(text.split()) and "nan" not in text
