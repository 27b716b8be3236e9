"""TraceLab, agentic Mooncake, Mooncake delta, TRIE and rollout traces: files in the documented
shapes, written here, read into the model, converted where the format can hold it, and hostile
variants rejected with one line naming file, record and field."""

import json
from collections import Counter

import numpy as np
import pytest

from agentx.errors import AgentxError, TraceError
from agentx.traces.graph import build_graph
from agentx.traces.load import detect_format, load_sessions, write_sessions
from agentx.traces.prefix import IdCounter, PrefixChain
from agentx.traces.stats import session_hit_tokens
from agentx.traces.tracelab import tracelab_losses
from tests.conftest import WEKA


def _jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _edges(session):
    return sorted((e.src, e.dst, e.kind, round(e.delay, 6)) for e in build_graph(session).edges)


# --- hash ids from prefix lengths --------------------------------------------------------------

def test_prefix_chain_keeps_exactly_the_recorded_prefix_blocks():
    chain = PrefixChain(64, IdCounter())
    a = chain.next(640, 0)  # 10 fresh blocks
    b = chain.next(1000, 640)  # keeps all 10, adds 5
    c = chain.next(900, 130)  # a compaction: keeps 2 blocks, the rest is new
    d = chain.next(1000, 5000)  # a prefix longer than the previous prompt keeps what there was
    assert a.tolist() == list(range(1, 11))
    assert b[:10].tolist() == a.tolist() and b[10:].tolist() == list(range(11, 16))
    assert c[:2].tolist() == a[:2].tolist() and not set(c[2:].tolist()) & set(b.tolist())
    assert d[:len(c)].tolist() == c.tolist() and len(d) == 15
    assert np.shares_memory(a, b)  # extending requests share one buffer
    assert a.tolist() == list(range(1, 11)) and b[:10].tolist() == a.tolist()  # the cut did not touch them


# --- TraceLab ----------------------------------------------------------------------------------

def _round(sid, k, total, prefix, out, start, end, provider="claude", tools=()):
    return {"session_id": sid, "round_index": k, "provider": provider, "model": "m-" + provider,
            "input_tokens_total": total, "prefix_tokens": prefix, "newly_append_tokens": total - prefix,
            "output_tokens": out, "reasoning_output_tokens": None,
            "timing_events": [{"event_type": "user_message" if k == 0 else "tool_result", "timestamp": start},
                              {"event_type": "tool_call", "timestamp": end}],
            "tools": [{"tool_name": "Bash", "tool_wall_latency_ms": ms, "tool_internal_latency_ms": None}
                      for ms in tools]}


TRACELAB_ROWS = [
    _round("cc-1", 0, 6400, 0, 100, "2026-06-01T10:00:00Z", "2026-06-01T10:00:04Z", tools=[1500]),
    _round("cx-1", 0, 3000, 0, 80, "2026-06-01T10:00:02Z", "2026-06-01T10:00:03Z", "codex"),
    _round("cc-1", 1, 9000, 6400, 50, "2026-06-01T10:00:06Z", "2026-06-01T10:00:07.5Z"),
    _round("cc-1", 2, 4000, 1000, 60, "2026-06-01T10:00:09Z", "2026-06-01T10:00:10Z"),  # compacted
]


def test_tracelab_rounds_keep_provider_timing_and_prefix_reuse(tmp_path):
    path = _jsonl(tmp_path / "rounds.jsonl", TRACELAB_ROWS)
    assert detect_format(path) == "tracelab"
    cc, cx = load_sessions([path])
    assert (cc.id, cc.provider, cx.provider) == ("cc-1", "claude", "codex")
    assert cx.start - cc.start == 2.0
    r0, r1, r2 = cc.main.requests
    assert [(r.t, r.isl, r.osl, r.api_time) for r in cc.main.requests] == [
        (0.0, 6400, 100, 4.0), (6.0, 9000, 50, 1.5), (9.0, 4000, 60, 1.0)]
    assert r1.input_types == ("tool_result",) and r0.output_types == ("tool_use",)
    # reuse is exactly the recorded prefix, in whole 64-token blocks
    assert len(r1.hash_ids) == 9000 // 64 and r1.hash_ids[:100].tolist() == r0.hash_ids.tolist()
    assert r2.hash_ids[:15].tolist() == r0.hash_ids[:15].tolist() and r2.hash_ids[15] != r1.hash_ids[15]
    hits, total = session_hit_tokens(cc)
    assert hits == (100 + 15) * 64 and total == 6400 + 9000 + 4000
    assert _edges(cc) == [(-1, 0, "start", 0.0), (0, 1, "chain", 2.0), (1, 2, "chain", 1.5)]


def test_tracelab_rounds_without_timestamps_follow_the_tool_waits(tmp_path):
    rows = [dict(r, timing_events=[]) for r in TRACELAB_ROWS if r["session_id"] == "cc-1"]
    (s,) = load_sessions([_jsonl(tmp_path / "untimed.jsonl", rows)])
    assert [(r.t, r.think_time) for r in s.main.requests] == [(0.0, None), (1.5, 1.5), (1.5, 0.0)]


CSV = """id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len
s7,640,10,2500.000000,0,1200.000000,0
s7,400,20,2500.000000,1,0.000000,640
s3,100,5,0.000000,0,0.000000,0
"""


def test_tracelab_csv_golden_and_round_trip(tmp_path):
    path = tmp_path / "coding_trace.csv"
    path.write_text(CSV)
    assert detect_format(path) == "tracelab"
    s3, s7 = load_sessions([tmp_path])
    assert (s7.id, s7.start, s3.start) == ("s7", 2.5, 0.0)
    a, b = s7.main.requests
    assert (a.isl, b.isl, b.t, b.think_time) == (640, 1040, 1.2, 1.2)
    assert b.hash_ids[:10].tolist() == a.hash_ids.tolist() and len(b.hash_ids) == 16
    write_sessions([s3, s7], tmp_path / "out" / "again.csv", "tracelab")
    lines = (tmp_path / "out" / "again.csv").read_text().splitlines()
    assert sorted(lines[1:]) == sorted(CSV.splitlines()[1:])


@pytest.mark.parametrize("rows, where", [
    ([dict(TRACELAB_ROWS[0], prefix_tokens=7000)], "line 1 prefix_tokens"),
    ([dict(TRACELAB_ROWS[0], output_tokens=-1)], "line 1 output_tokens"),
    ([{k: v for k, v in TRACELAB_ROWS[0].items() if k != "session_id"}], "line 1"),
    ([TRACELAB_ROWS[0], dict(TRACELAB_ROWS[2], timing_events=[{"event_type": "text", "timestamp": "noon"}])],
     "line 2 timing_events[0].timestamp"),
])
def test_tracelab_hostile_rows(tmp_path, rows, where):
    path = _jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TraceError) as err:
        load_sessions([path], "tracelab")
    assert str(err.value).startswith(f"{path}: {where}")


@pytest.mark.parametrize("text, where", [
    ("id,input_len,output_len\ns,1,2\n", r"line 1: missing column\(s\) round_idx, tool_wait_after_ms, prefix_len"),
    (CSV.replace("s7,400,20", "s7,-4,20"), "line 3 input_len"),
    (CSV.replace("2500.000000,1", "soon,1"), "line 3 arrival_time"),
])
def test_tracelab_hostile_csv(tmp_path, text, where):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TraceError, match=rf"^{path}: {where}"):
        load_sessions([path])


# --- agentic Mooncake ---------------------------------------------------------------------------

AGENTIC_ROWS = [
    {"request_id": "a0", "session_id": "s", "timestamp": 1000, "input_length": 1024, "output_length": 10,
     "hash_ids": [1, 2], "prefix_reset": True, "branches": ["c0", "b0"]},
    {"request_id": "c0", "session_id": "s", "input_length": 600, "output_length": 5, "hash_ids": [7, 8],
     "wait_for": ["a0"], "delay": 100, "prefix_reset": True},
    {"request_id": "c1", "session_id": "s", "input_length": 1100, "output_length": 5, "hash_ids": [7, 8, 9],
     "wait_for": ["c0"], "tool_wait_ms": 400},
    {"request_id": "b0", "session_id": "s", "input_length": 300, "output_length": 5, "hash_ids": [20],
     "wait_for": ["a0"], "delay_ms": 20, "prefix_reset": True},
    {"request_id": "a1", "session_id": "s", "input_length": 1600, "output_length": 10, "hash_ids": [1, 2, 3, 4],
     "wait_for": ["a0", "c1"], "delay": 50},
]


def test_agentic_mooncake_dependencies_become_the_session_graph(tmp_path):
    path = _jsonl(tmp_path / "agentic.jsonl", AGENTIC_ROWS)
    assert detect_format(path) == "agentic-mooncake"
    (s,) = load_sessions([path])
    assert [(st.kind, [r.t for r in st.requests]) for st in s.walk()] == [
        ("main", [0.0, 0.55]), ("background", [0.02]), ("subagent", [0.1, 0.5])]
    assert s.start == 1.0 and s.block_size == 512
    kinds = Counter(e.kind for e in build_graph(s).edges)
    assert kinds == {"chain": 2, "spawn": 2, "join": 1, "start": 1}
    join = next(e for e in build_graph(s).edges if e.kind == "join")
    assert join.delay == pytest.approx(0.05)


def test_agentic_mooncake_round_trips_the_real_weka_graphs(tmp_path):
    sessions = load_sessions([WEKA])
    write_sessions(sessions, tmp_path / "dag.jsonl", "agentic-mooncake")
    again = load_sessions([tmp_path / "dag.jsonl"])
    assert len(again) == len(sessions)
    by_id = {s.id: s for s in again}
    for s in sessions:
        back = by_id[s.id]
        assert [st.kind for st in back.walk()] == [st.kind for st in s.walk()]
        assert [e[:3] for e in _edges(back)] == [e[:3] for e in _edges(s)]
        assert [r.isl for r in back.requests()] == [r.isl for r in s.requests()]


@pytest.mark.parametrize("change, where", [
    (lambda rows: rows[4].update(wait_for=["zz"]), "line 5 wait_for: unknown request_id 'zz'"),
    (lambda rows: rows[0].update(wait_for=["a1"]), "line .* wait_for: dependencies form a cycle"),
    (lambda rows: rows[2].update(request_id="c0"), "line 3 request_id: duplicate"),
    (lambda rows: rows[1].update(input_length=-5), "line 2 input_length"),
])
def test_agentic_mooncake_hostile(tmp_path, change, where):
    rows = json.loads(json.dumps(AGENTIC_ROWS))
    change(rows)
    path = _jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TraceError, match=rf"^{path}: {where}"):
        load_sessions([path])


def test_mooncake_delta_accumulates_each_sessions_prompt(tmp_path):
    rows = [{"session_id": "d", "timestamp": 0, "input_length": 1024, "output_length": 9, "hash_ids": [1, 2]},
            {"session_id": "d", "timestamp": 3000, "input_length": 700, "output_length": 9, "hash_ids": [3, 4]},
            {"session_id": "e", "timestamp": 1000, "input_length": 10, "output_length": 1, "hash_ids": [9]}]
    path = _jsonl(tmp_path / "delta.jsonl", rows)
    assert detect_format(path) == "mooncake"  # same keys: the format has to be named
    d, e = load_sessions([path], "mooncake-delta")
    assert [(r.t, r.isl, r.hash_ids.tolist()) for r in d.requests()] == [(0.0, 1024, [1, 2]), (3.0, 1724, [1, 2, 3, 4])]
    assert e.start == 1.0
    bad = _jsonl(tmp_path / "bad.jsonl", [dict(rows[0], hash_ids=[1, -2])])
    with pytest.raises(TraceError, match=rf"^{bad}: line 1 hash_ids\[1\]"):
        load_sessions([bad], "mooncake-delta")
    # each row is within the bounds, the prompt they add up to is not
    over = _jsonl(tmp_path / "over.jsonl", [dict(rows[0], input_length=6_000_000, hash_ids=[]),
                                            dict(rows[1], input_length=6_000_000, hash_ids=[])])
    with pytest.raises(TraceError, match=rf"^{over}: line 2 input_length: 12,000,000 input tokens, over the bound"):
        load_sessions([over], "mooncake-delta")


def test_mooncake_delta_keeps_each_turns_segments(tmp_path):
    rows = [{"session_id": "d", "timestamp": 0, "input_length": 1024, "output_length": 9, "hash_ids": [1, 2],
             "segments": [["system", 900], ["user", 124]]},
            {"session_id": "d", "timestamp": 3000, "input_length": 700, "output_length": 9, "hash_ids": [3, 4],
             "segments": [["user", 100], ["tool_result", 600, "read"]]},
            {"session_id": "e", "timestamp": 1000, "input_length": 10, "output_length": 1, "hash_ids": [9]}]
    path = _jsonl(tmp_path / "delta.jsonl", rows)
    d, e = load_sessions([path], "mooncake-delta")
    first, second = d.requests()
    assert [(g.kind, g.tokens, g.tool) for g in first.segments] == [("system", 900, None), ("user", 124, None)]
    # the turns' parts in order, the two user runs joined
    assert [(g.kind, g.tokens, g.tool) for g in second.segments] == [
        ("system", 900, None), ("user", 224, None), ("tool_result", 600, "read")]
    assert sum(g.tokens for g in second.segments) == second.isl
    assert next(e.requests()).segments is None  # its row has none
    short = _jsonl(tmp_path / "short.jsonl", [dict(rows[0], segments=[["system", 1000]])])
    with pytest.raises(TraceError, match=rf"^{short}: line 1 segments: segments cover 1,000 tokens, input_length is 1,024"):
        load_sessions([short], "mooncake-delta")


# --- TRIE and rollouts -------------------------------------------------------------------------

def test_trie_sessions_are_synthesized_turn_by_turn(tmp_path):
    row = {"num_turns": 2, "input_prompt_length": 4096, "assistant_response_length": [128, 96],
           "tool_call_output_length": [512, 256], "tool_call_latency": [1.4, 0.8],
           "final_assistant_response_length": 64}
    path = _jsonl(tmp_path / "trie.jsonl", [row, dict(row, num_turns=0, assistant_response_length=[],
                                                          tool_call_output_length=[], tool_call_latency=[])])
    assert detect_format(path) == "trie"
    s, single = load_sessions([path])
    reqs = s.main.requests
    assert [(r.isl, r.osl, r.t, r.think_time) for r in reqs] == [
        (4096, 128, 0.0, None), (4736, 96, 1.4, 1.4), (5088, 64, 2.2, 0.8)]
    assert reqs[1].hash_ids[:64].tolist() == reqs[0].hash_ids.tolist()
    assert reqs[2].hash_ids[:74].tolist() == reqs[1].hash_ids.tolist()
    assert single.n_requests == 1
    bad = _jsonl(tmp_path / "bad.jsonl", [dict(row, tool_call_latency=[1.0])])
    with pytest.raises(TraceError, match=rf"^{bad}: line 1 tool_call_latency: has 1 values, num_turns is 2"):
        load_sessions([bad])


def test_rollout_streams_of_a_group_share_the_prompt(tmp_path):
    rows = [{"group": 0, "stream": 0, "prompt_len": 1000, "out_lens": [50, 60], "obs_lens": [200]},
            {"group": 0, "stream": 1, "prompt_len": 1000, "out_lens": [70], "obs_lens": []},
            {"group": 1, "stream": 0, "prompt_len": 1000, "out_lens": [10], "obs_lens": []}]
    path = _jsonl(tmp_path / "rollouts.jsonl", rows)
    assert detect_format(path) == "rollout"
    a, b, c = load_sessions([path])
    assert [s.id for s in (a, b, c)] == ["0:0", "0:1", "1:0"]
    assert [(r.isl, r.osl) for r in a.requests()] == [(1000, 50), (1250, 60)]
    a0, a1 = a.main.requests
    assert a0.hash_ids.tolist() == b.main.requests[0].hash_ids.tolist()  # the group's prompt
    assert not set(a0.hash_ids.tolist()) & set(c.main.requests[0].hash_ids.tolist())  # other group
    assert a1.hash_ids[:15].tolist() == a0.hash_ids.tolist()
    bad = _jsonl(tmp_path / "bad.jsonl", [dict(rows[0], obs_lens=[1, 2, 3])])
    with pytest.raises(TraceError, match=rf"^{bad}: line 1 obs_lens"):
        load_sessions([bad])


def test_read_only_formats_refuse_to_be_written(tmp_path):
    sessions = load_sessions([WEKA])[:1]
    with pytest.raises(AgentxError, match="trie is read-only"):
        write_sessions(sessions, tmp_path / "x.jsonl", "trie")


def test_unknown_rows_name_every_format(tmp_path):
    path = _jsonl(tmp_path / "other.jsonl", [{"prompt": "hi"}])
    with pytest.raises(TraceError, match="TraceLab, TRIE or rollout"):
        load_sessions([path])


def test_agentic_mooncake_second_continuation_without_branches_is_a_subagent(tmp_path):
    rows = [{"request_id": "a0", "session_id": "s", "timestamp": 0, "input_length": 600, "output_length": 1},
            {"request_id": "a1", "session_id": "s", "input_length": 1200, "output_length": 1, "wait_for": ["a0"]},
            {"request_id": "c0", "session_id": "s", "input_length": 100, "output_length": 1, "wait_for": ["a0"],
             "delay": 10}]
    (s,) = load_sessions([_jsonl(tmp_path / "nobranch.jsonl", rows)])
    assert [(st.kind, st.spawn, len(st.requests)) for st in s.walk()] == [("main", 0.0, 2), ("background", 0.01, 1)]


def test_weka_to_tracelab_rounds_and_back(tmp_path):
    sessions = load_sessions([WEKA / "trace_0291.json"])
    write_sessions(sessions, tmp_path / "rounds.jsonl", "tracelab")
    (back,) = load_sessions([tmp_path / "rounds.jsonl"])
    (s,) = sessions
    # subagents are rounds of `ID/subagents/agent-K` sessions (TraceLab's naming) and read back as
    # the main stream's subagents, at their recorded times from the session's start
    streams = list(s.walk())
    assert [st.kind for st in back.walk()] == ["main"] + ["subagent"] * (len(streams) - 1)
    assert [c.agent_id for c in back.main.children] == [f"agent-{k}" for k in range(1, len(streams))]
    origin = s.main.requests[0].t
    for stream, got_stream in zip(streams, back.walk()):
        got = got_stream.requests
        assert [(r.isl, r.osl, r.model) for r in got] == [(s.replay_isl(r), r.osl, r.model) for r in stream.requests]
        assert [r.t for r in got] == pytest.approx([r.t - origin for r in stream.requests], abs=1e-6)
        assert [r.api_time for r in got] == pytest.approx([r.api_time for r in stream.requests], abs=1e-6)
    write_sessions(sessions, tmp_path / "trace.csv", "tracelab")
    assert detect_format(tmp_path / "trace.csv") == "tracelab"
    flat = load_sessions([tmp_path / "trace.csv"])  # the CSV has no tree: a session per stream
    assert sorted(x.id for x in flat) == sorted([s.id] + [f"{s.id}/subagents/agent-{k}" for k in range(1, len(streams))])
    assert tracelab_losses(sessions, csv_file=True) == [
        f"{len(streams) - 1} subagent streams written as sessions of their own (ID/subagents/agent-K) at their "
        "spawn time: the CSV has no session tree, so the parent no longer waits for them"]
    assert tracelab_losses(sessions, csv_file=False) == []


def test_cli_stats_side_by_side_and_by_provider(tmp_path):
    import subprocess
    import sys

    rounds = _jsonl(tmp_path / "rounds.jsonl", TRACELAB_ROWS)

    def agentx(*args):
        return subprocess.run([sys.executable, "-m", "agentx.cli", *map(str, args)], capture_output=True, text=True,
                              timeout=300)

    res = agentx("trace", "stats", WEKA / "trace_0291.json", rounds, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [(c["source"], c["stats"]["requests"]) for c in doc] == [(str(WEKA / "trace_0291.json"), 32), (str(rounds), 4)]
    res = agentx("trace", "stats", rounds, "--by-provider")
    assert res.returncode == 0 and "claude" in res.stdout and "codex" in res.stdout
    assert "requests in subagents" in res.stdout
    res = agentx("trace", "convert", WEKA / "trace_0291.json", "--to", "trie", "--out", tmp_path / "x.jsonl")
    assert res.returncode == 2 and "'trie' is not one of" in res.stderr
    res = agentx("trace", "stats", tmp_path / "nope.csv")
    assert res.returncode == 2 and "no such file or folder" in res.stderr


def test_each_format_converts_to_weka_and_back(tmp_path):
    files = {
        "tracelab": _jsonl(tmp_path / "rounds.jsonl", TRACELAB_ROWS),
        "agentic-mooncake": _jsonl(tmp_path / "agentic.jsonl", AGENTIC_ROWS),
        "trie": _jsonl(tmp_path / "trie.jsonl", [{
            "num_turns": 1, "input_prompt_length": 700, "assistant_response_length": [40],
            "tool_call_output_length": [90], "tool_call_latency": [0.5], "final_assistant_response_length": 9}]),
        "rollout": _jsonl(tmp_path / "rollout.jsonl", [{"group": 1, "prompt_len": 300, "out_lens": [5, 6],
                                                         "obs_lens": [70]}]),
    }
    for fmt, path in files.items():
        sessions = load_sessions([path], fmt)
        write_sessions(sessions, tmp_path / fmt, "weka")
        back = {s.id: s for s in load_sessions([tmp_path / fmt], "weka")}
        for s in sessions:
            b = back[s.id]
            assert [st.kind for st in b.walk()] == [st.kind for st in s.walk()], fmt
            assert [e[:3] for e in _edges(b)] == [e[:3] for e in _edges(s)], fmt
            assert [(r.t, r.isl, r.osl, r.hash_ids.tolist()) for r in b.requests()] == \
                [(r.t, r.isl, r.osl, r.hash_ids.tolist()) for r in s.requests()], fmt
            assert b.provider == s.provider
