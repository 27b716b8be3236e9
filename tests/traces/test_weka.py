import json

import numpy as np
import pytest

from agentx.errors import TraceError
from agentx.traces.load import load_sessions
from agentx.traces.weka import read_weka, write_weka
from tests.conftest import WEKA


def test_every_real_file_loads_and_round_trips_in_both_bases(weka_file, tmp_path):
    session = read_weka(weka_file)[0]
    raw = json.loads(weka_file.read_text())
    assert session.id == raw["id"]
    assert session.n_requests == _count_requests(raw["requests"])
    for basis in ("absolute", "relative"):
        out = tmp_path / f"{basis}.json"
        write_weka([session], out, basis)
        assert read_weka(out)[0] == session


def _count_requests(entries):
    return sum(_count_requests(e["requests"]) if e["type"] == "subagent" else 1 for e in entries)


def test_hash_ids_equal_the_file_and_share_memory():
    raw = json.loads((WEKA / "trace_0295.json").read_text())
    session = read_weka(WEKA / "trace_0295.json")[0]
    top = [e for e in raw["requests"] if e["type"] != "subagent"]
    by_t = {(r.t, r.isl): r for r in session.requests()}
    for entry in top:
        assert by_t[(entry["t"], entry["in"])].hash_ids.tolist() == entry["hash_ids"]
    main = session.main.requests
    shared = sum(1 for a, b in zip(main, main[1:]) if np.shares_memory(a.hash_ids, b.hash_ids))
    assert shared > 0.8 * (len(main) - 1)
    assert not main[0].hash_ids.flags.writeable


def test_relative_subagent_times_become_absolute():
    session = read_weka(WEKA / "trace_0291.json")[0]
    a, b = session.main.children
    assert a.spawn == pytest.approx(1148.013 - 46.656)
    assert a.requests[0].t == pytest.approx(1101.357)
    assert b.spawn == pytest.approx(1180.553 - 79.184)
    assert a.end == pytest.approx(1148.013)


def test_absolute_basis_file_is_detected(tmp_path):
    """The AgentX corpus build: absolute inner t, entry t = first child start, no optional fields."""
    raw = json.loads((WEKA / "trace_0291.json").read_text())
    for e in raw["requests"]:
        for r in [e] + e.get("requests", []):
            for key in ("input_types", "output_types", "stop"):
                r.pop(key, None)
        if e["type"] == "subagent":
            spawn = e["t"] - e["duration_ms"] / 1000
            for r in e["requests"]:
                r["t"] = round(r["t"] + spawn, 3)
            e["t"] = e["requests"][0]["t"]
    path = tmp_path / "abs.json"
    path.write_text(json.dumps(raw))
    absolute = read_weka(path)[0]
    relative = read_weka(WEKA / "trace_0291.json")[0]
    for x, y in zip(absolute.walk(), relative.walk()):
        assert x.spawn == pytest.approx(y.spawn, abs=1e-3)
        assert [r.t for r in x.requests] == pytest.approx([r.t for r in y.requests], abs=1e-3)
    assert next(absolute.requests()).stop is None


def test_async_launched_subagents_are_background():
    session = read_weka(WEKA / "trace_0295.json")[0]
    kinds = [c.kind for c in session.main.children]
    assert kinds.count("background") == 4
    assert kinds.count("subagent") == 4
    bg = [c for c in session.main.children if c.kind == "background"]
    assert bg[0].spawn == pytest.approx(8783.325)  # launch time; inner t relative to it
    assert bg[0].requests[0].t == pytest.approx(8783.325)


def test_streamed_requests_keep_ttft():
    ttfts = [r.ttft for f in WEKA.glob("*.json") for r in read_weka(f)[0].requests() if r.type == "s"]
    assert ttfts and any(t is not None for t in ttfts)


def test_jsonl_of_several_sessions(tmp_path):
    sessions = load_sessions([WEKA / "trace_0291.json", WEKA / "trace_0026.json"])
    path = tmp_path / "two.jsonl"
    write_weka(sessions, path)
    assert len(path.read_text().splitlines()) == 2
    assert read_weka(path) == sessions


def test_global_scope_billed_counts_load_and_warn_once(tmp_path):
    raw = json.loads((WEKA / "trace_0026.json").read_text())
    raw["hash_id_scope"] = "global"
    for r in raw["requests"]:
        r["in"] = 0  # billed-count variants can even say 0
    path = tmp_path / "billed.json"
    path.write_text(json.dumps(raw))
    warnings = []
    session = read_weka(path, warn=warnings.append)[0]
    assert len(warnings) == 1 and "billed" in warnings[0]
    r = next(session.requests())
    assert session.replay_isl(r) == len(r.hash_ids) * 64


def test_missing_optional_fields_and_unknown_extras(tmp_path):
    path = tmp_path / "min.json"
    path.write_text(json.dumps({"requests": [{"t": 0, "in": 100, "out": 5, "shiny": 1}, {"t": 3, "in": 200, "out": 7}]}))
    session = read_weka(path)[0]
    assert session.id == "min" and session.n_requests == 2 and session.block_size == 64


BAD = [
    ('{"requests": [{"t": 0, "in": "many", "out": 1}]}', "requests[0].in"),
    ('{"requests": [{"t": 0, "out": 1}]}', "missing required field `in`"),
    ('{"requests": [{"t": 0, "in": -5, "out": 1}]}', "requests[0].in"),
    ('{"requests": [{"t": -1, "in": 5, "out": 1}]}', "requests[0].t"),
    ('{"requests": [{"t": 0, "in": 5, "out": 1, "hash_ids": [1, 2.5]}]}', "requests[0].hash_ids"),
    ('{"requests": [{"t": 0, "in": 5, "out": 1, "hash_ids": [1, "a"]}]}', "requests[0].hash_ids"),
    ('{"requests": [{"t": 0, "in": 5, "out": 1, "type": "zzz"}]}', "requests[0].type"),
    ('{"requests": [{"t": 0, "in": 5, "out": 1', "invalid JSON"),
    ("", "empty file"),
    ('{"block_size": 0, "requests": []}', "block_size"),
]


@pytest.mark.parametrize("text,expected", BAD)
def test_bad_input_is_one_clear_line(tmp_path, text, expected):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        read_weka(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message and expected in message


def test_pretty_printed_object_and_jsonl_with_blank_lines(tmp_path):
    raw = json.loads((WEKA / "trace_0026.json").read_text())
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(raw, indent=2))
    assert read_weka(pretty) == read_weka(WEKA / "trace_0026.json")
    lines = tmp_path / "blank.jsonl"
    lines.write_text("\n\n" + json.dumps(raw) + "\n\n" + json.dumps(raw) + "\n")
    assert len(read_weka(lines)) == 2
