"""Segments in the WEKA format (SPEC §1): round trip, bounds, and their per-kind reuse."""

import json

import pytest

from agentx.capture.segments import tool_class
from agentx.errors import TraceError
from agentx.traces.segment_stats import segment_shares
from agentx.traces.weka import read_weka, write_weka

_TOOLS = [["tools", 64], ["system", 64]]


def _doc(*requests) -> dict:
    return {"id": "s", "block_size": 64, "requests": list(requests)}


def _req(t, ids, segments, out=10):
    return {"t": t, "type": "n", "model": "m", "in": len(ids) * 64, "out": out, "hash_ids": ids,
            "segments": segments}


def test_round_trip_and_reuse_by_kind(tmp_path):
    first = _req(0.0, [1, 2, 3], _TOOLS + [["user", 64]])
    second = _req(5.0, [1, 2, 3, 4, 5], _TOOLS + [["user", 64], ["tool_call", 64, "read"], ["tool_result", 64, "read"]])
    third = _req(9.0, [1, 2, 3, 4, 5, 6], _TOOLS + [["user", 64], ["tool_call", 64, "read"],
                                                    ["tool_result", 64, "read"], ["tool_result", 64, "shell"]])
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_doc(first, second, third)))
    (session,) = read_weka(path)
    again = tmp_path / "again.json"
    write_weka([session], again)
    assert read_weka(again)[0].main.requests == session.main.requests
    assert json.loads(again.read_text())["requests"][1]["segments"] == second["segments"]
    shares = {k.kind: k for k in segment_shares([session])}
    assert shares["tools"].tokens == 3 * 64 and shares["tools"].new == 64 and shares["tools"].reused == 64
    assert shares["tool_result:read"].new == 64 and shares["tool_result:read"].reused == 64
    assert shares["tool_result:shell"].new == 64 and shares["tool_result:shell"].never_reused == 64
    assert list(shares) == ["system", "tools", "user", "tool_call:read", "tool_result:read", "tool_result:shell"]


def test_files_without_segments_have_no_kind_table(tmp_path):
    path = tmp_path / "s.json"
    doc = _doc(_req(0.0, [1], None))
    del doc["requests"][0]["segments"]
    path.write_text(json.dumps(doc))
    (session,) = read_weka(path)
    assert session.main.requests[0].segments is None and segment_shares([session]) == ()


@pytest.mark.parametrize("segments, expected", [
    ([["user", 10]], "segments cover 10 tokens, `in` is 64"),
    ([["prose", 64]], "Invalid enum value 'prose'"),
    ([["tool_call", 64, "teleport"]], "Invalid enum value 'teleport'"),
    ([["user", -1]], "Expected `int` >= 0"),
])
def test_bad_segments_are_one_line_naming_the_field(tmp_path, segments, expected):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_doc(_req(0.0, [1], segments))))
    with pytest.raises(TraceError) as err:
        read_weka(path)
    assert expected in str(err.value) and "segments" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name, cls", [("Read", "read"), ("Grep", "search"), ("Glob", "search"), ("Edit", "edit"),
                                       ("apply_patch", "edit"), ("Bash", "shell"), ("exec_command", "shell"),
                                       ("WebFetch", "web"), ("WebSearch", "web"), ("Task", None), (None, None)])
def test_tool_classes(name, cls):
    assert tool_class(name) == cls
