"""Public traces read against their sources' own definitions (issue #28): Mooncake's reuse across
the whole file (global ids), TraceLab's replay CSV variants and recorded prefixes, TRIE's eligible
tokens; each hit rate named by its rule."""

import csv
import json
import subprocess
import sys

import pytest

from agentx.traces.load import detect_format, load_sessions
from agentx.traces.stats import SOURCE_RULES, trace_stats
from tests.conftest import DATA, MOONCAKE

TRACELAB = DATA / "tracelab"  # uw-syfi/TraceLab replay/examples (Apache-2.0), byte-exact


def agentx(*args):
    return subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def mooncake_reuse(path) -> float:
    """Mooncake's rule from the raw rows: a block is reusable once any earlier request (by
    timestamp) had its id; token-weighted, at most the request's input length."""
    rows = sorted((json.loads(line) for line in open(path)), key=lambda r: r["timestamp"])
    seen, hit, total = set(), 0, 0
    for r in rows:
        hit += min(r["input_length"], 512 * sum(1 for i in r["hash_ids"] if i in seen))
        total += r["input_length"]
        seen.update(r["hash_ids"])
    return hit / total


@pytest.mark.parametrize("path", [MOONCAKE, DATA / "mooncake" / "synthetic_trace.jsonl"], ids=["head400", "full"])
def test_mooncake_corpus_hit_rate_beside_the_per_session_one(path):
    stats = trace_stats(load_sessions([path]))
    assert stats.theoretical_hit_rate == 0  # a row is a session: nothing repeats within one
    assert stats.corpus_hit_rate == pytest.approx(mooncake_reuse(path), abs=1e-12)
    assert stats.source_hit_rule == "global" and stats.source_hit_rate == stats.corpus_hit_rate


def test_the_full_synthetic_trace_gives_the_figure_of_the_issue():
    stats = trace_stats(load_sessions([DATA / "mooncake" / "synthetic_trace.jsonl"]))
    assert round(stats.corpus_hit_rate * 100, 2) == 65.12


def test_local_ids_have_no_corpus_rate():
    from agentx.data import sample_traces

    assert trace_stats(load_sessions([sample_traces()])).corpus_hit_rate is None


@pytest.mark.parametrize("name", ["multi_session_example", "session_workload_example", "multi_session_large"])
def test_tracelab_replay_csv_variants(name):
    path = TRACELAB / f"{name}.csv"
    assert detect_format(path) == "tracelab"
    sessions = load_sessions([path])
    rows = list(csv.DictReader(open(path)))
    assert sum(s.n_requests for s in sessions) == len(rows)
    assert sorted(s.id for s in sessions) == sorted({r["session_id"] for r in rows})
    for s in sessions:
        mine = sorted((r for r in rows if r["session_id"] == s.id), key=lambda r: int(r["round_idx"]))
        assert [r.isl for r in s.requests()] == [int(r["prefix_len"]) + int(r["input_len"]) for r in mine]
        assert s.start == float(mine[0].get("arrival_time", 0)) / 1000  # no arrival_time column: 0
    stats = trace_stats(sessions)
    recorded = sum(int(r["prefix_len"]) for r in rows) / sum(int(r["prefix_len"]) + int(r["input_len"]) for r in rows)
    assert stats.source_hit_rule == "tracelab" and stats.source_hit_rate == pytest.approx(recorded)


def test_tracelab_credits_round_0s_recorded_prefix():
    """session_workload_example's round 0 already has 12,461 cached tokens (a provider cache
    warm from other sessions): TraceLab counts them, agentx's per-session rule cannot."""
    stats = trace_stats(load_sessions([TRACELAB / "session_workload_example.csv"]))
    assert stats.source_hit_rate > stats.theoretical_hit_rate


def test_trie_eligible_tokens(tmp_path):
    """TRIE's README row: eligible tokens of turn k > 0 are the previous prompt and its answer."""
    row = {"num_turns": 2, "input_prompt_length": 32, "assistant_response_length": [16, 20],
           "tool_call_output_length": [8, 12], "tool_call_latency": [0.0, 0.0], "final_assistant_response_length": 64}
    path = tmp_path / "trie.jsonl"
    path.write_text(json.dumps(row) + "\n")
    stats = trace_stats(load_sessions([path]))
    prompts = [32, 32 + 16 + 8, 32 + 16 + 8 + 20 + 12]
    eligible = (32 + 16) + (prompts[1] + 20)
    assert stats.source_hit_rule == "trie" and stats.source_hit_rate == pytest.approx(eligible / sum(prompts))


def test_cli_names_each_rule():
    res = agentx("trace", "stats", TRACELAB / "session_workload_example.csv", "--hit-rule", "source")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "(agentx: within each session tree)" in text and SOURCE_RULES["tracelab"] in text
    res = agentx("trace", "stats", MOONCAKE)
    text = " ".join(res.stdout.split())
    assert f"0.0% (agentx: within each session tree), {mooncake_reuse(MOONCAKE):.1%} across the corpus (global ids)" in text
    res = agentx("trace", "stats", MOONCAKE, TRACELAB / "multi_session_example.csv", "--hit-rule", "source")
    assert res.returncode == 0 and "by the source's rule" in res.stdout and "tracelab" in res.stdout
