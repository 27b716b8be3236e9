import json

import pytest

from agentx.errors import TraceError
from agentx.traces.bailian import read_bailian, write_bailian
from agentx.traces.graph import build_graph
from agentx.traces.load import detect_format, load_sessions, write_sessions
from agentx.traces.mooncake import read_mooncake, write_mooncake
from tests.conftest import MOONCAKE


def test_mooncake_real_file_loads_and_round_trips(tmp_path):
    sessions = read_mooncake(MOONCAKE)
    rows = [json.loads(line) for line in MOONCAKE.read_text().splitlines()]
    assert len(sessions) == len(rows) == 400
    s, row = sessions[0], rows[0]
    assert s.block_size == 512 and s.hash_id_scope == "global" and s.partial_block_ids
    assert next(s.requests()).hash_ids.tolist() == row["hash_ids"]
    assert sessions[3].start == pytest.approx(rows[3]["timestamp"] / 1000)
    # partial last block included: the coverage never exceeds `in`
    assert all(s.replay_isl(r) == r.isl for s in sessions for r in s.requests())
    out = tmp_path / MOONCAKE.name
    write_mooncake(sessions, out)
    assert read_mooncake(out) == sessions


def test_mooncake_session_id_groups_rows(tmp_path):
    path = tmp_path / "grouped.jsonl"
    rows = [
        {"timestamp": 1000, "input_length": 600, "output_length": 5, "hash_ids": [1, 2], "session_id": "a"},
        {"timestamp": 4000, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3], "session_id": "a"},
        {"timestamp": 2000, "input_length": 10, "output_length": 5, "hash_ids": [8]},
    ]
    path.write_text("\n".join(map(json.dumps, rows)))
    sessions = read_mooncake(path)
    assert [s.n_requests for s in sessions] == [2, 1]
    assert [r.t for r in sessions[0].requests()] == [0.0, 3.0]
    assert len(build_graph(sessions[0]).edges) == 2


BAILIAN_ROWS = [
    # two chats: 10 -> 11 -> 12 (multi-turn) and 20 (single turn); 16-token blocks
    {"chat_id": 10, "parent_chat_id": -1, "timestamp": 5.0, "input_length": 40, "output_length": 8, "type": "text", "turn": 1, "hash_ids": [100, 101, 102]},
    {"chat_id": 20, "parent_chat_id": -1, "timestamp": 6.5, "input_length": 17, "output_length": 3, "type": "image", "turn": 1, "hash_ids": [300, 301]},
    {"chat_id": 11, "parent_chat_id": 10, "timestamp": 9.0, "input_length": 70, "output_length": 9, "type": "text", "turn": 2, "hash_ids": [100, 101, 102, 103, 104]},
    {"chat_id": 12, "parent_chat_id": 11, "timestamp": 20.0, "input_length": 99, "output_length": 4, "type": "text", "turn": 3, "hash_ids": [100, 101, 102, 103, 104, 105, 106]},
]


def test_bailian_chats_become_sessions_and_round_trip(tmp_path):
    path = tmp_path / "bailian.jsonl"
    path.write_text("\n".join(map(json.dumps, BAILIAN_ROWS)))
    assert detect_format(path) == "bailian"
    sessions = read_bailian(path)
    assert [(s.id, s.n_requests, s.start) for s in sessions] == [("10", 3, 5.0), ("20", 1, 6.5)]
    assert [r.t for r in sessions[0].requests()] == [0.0, 4.0, 15.0]
    assert sessions[0].block_size == 16
    graph = build_graph(sessions[0])
    assert [e.kind for e in graph.edges].count("chain") == 2
    out = tmp_path / "again.jsonl"
    write_bailian(sessions, out)
    assert read_bailian(out) == sessions


def test_converting_real_weka_to_every_format_keeps_requests_and_reuse(tmp_path):
    from agentx.traces.stats import trace_stats
    from tests.conftest import WEKA

    sessions = load_sessions([WEKA / "trace_0291.json", WEKA / "trace_0026.json"])
    hit = trace_stats(sessions).theoretical_hit_rate
    for fmt, block, tolerance in (("mooncake", 512, 0.03), ("bailian", 16, 0.001)):
        out = tmp_path / f"x.{fmt}.jsonl"
        write_sessions(sessions, out, fmt)
        again = load_sessions([out])
        got = sorted((r.isl, r.osl) for s in again for r in s.requests())
        assert got == sorted((r.isl, r.osl) for s in sessions for r in s.requests())
        for s in again:
            assert s.block_size == block
            assert all(len(r.hash_ids) == -(-r.isl // block) for r in s.requests())
        # the two sessions' ids stay disjoint in the global id space
        first = {int(i) for s in again[:1] for r in s.requests() for i in r.hash_ids}
        assert not first & {int(i) for s in again[1:] for r in s.requests() for i in r.hash_ids}
        merged = [s for s in again]
        if fmt == "bailian":
            assert trace_stats(merged).theoretical_hit_rate == pytest.approx(hit, abs=tolerance)


@pytest.mark.parametrize(
    "line,expected",
    [
        ('{"timestamp": 0, "input_length": -3, "output_length": 1}', "line 1 input_length"),
        ('{"timestamp": 0, "output_length": 1}', "line 1"),
        ('{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [1, "x"]}', "line 1 hash_ids[1]"),
        ('{"timestamp": 0, "input_length": 3, "output_len', "line 1: invalid JSON"),
    ],
)
def test_mooncake_bad_rows(tmp_path, line, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 3, "output_length": 1}\n'.replace("0,", "0,") * 0 + line)
    with pytest.raises(TraceError) as info:
        read_mooncake(path)
    assert expected in str(info.value) and str(path) in str(info.value)
