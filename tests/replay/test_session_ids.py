"""Session identity presets: what each sends, per stream."""

import json

import pytest

from agentx.errors import AgentxError
from agentx.replay.session_ids import PRESETS, PresetName, StreamTurn, llmd_cookie, preset, stream_session_ids, with_body_field
from agentx.traces.graph import build_graph
from agentx.traces.weka import read_weka
from tests.conftest import WEKA


def test_every_stream_is_its_own_session_linked_to_its_parent():
    graph = build_graph(read_weka(WEKA / "trace_0295.json")[0])
    ids, parents = stream_session_ids("run-7", graph.parents)
    assert len(set(ids)) == len(graph.streams) and ids[0] == "run-7" and parents[0] is None
    for k, kind in enumerate(s.kind for s in graph.streams):
        if kind in ("subagent", "background"):
            assert parents[k] == ids[graph.parents[k]]
        elif kind == "aux":
            assert parents[k] == ids[0]


def test_preset_fields():
    first = StreamTurn("t.2", "t", first=True, last=False)
    last = StreamTurn("t.2", "t", first=False, last=True, cookie="c29tZS1wb2Q=")
    main = StreamTurn("t", None, first=True, last=False)
    assert preset("plain").headers(first) == {"X-Session-ID": "t.2", "X-Parent-Session-ID": "t"}
    assert preset("plain").headers(main) == {"X-Session-ID": "t"}
    assert preset("dynamo").headers(last) == {
        "X-Session-ID": "t.2", "X-Parent-Session-ID": "t", "X-Dynamo-Session-ID": "t.2",
        "X-Dynamo-Parent-Session-ID": "t", "X-Dynamo-Session-Final": "true"}
    assert preset("sglang").headers(first)["X-SMG-Routing-Key"] == "t.2"
    assert preset("llm-d").headers(last)["Cookie"] == "llm-d-session=c29tZS1wb2Q="
    assert "Cookie" not in preset("llm-d").headers(first)
    body = b'{"model":"m","prompt":[1,2]}'
    opened = json.loads(with_body_field(body, preset("dynamo").body_field(first)))
    assert opened == {"nvext": {"session_control": {"session_id": "t.2", "timeout": 300, "action": "open"}},
                      "model": "m", "prompt": [1, 2]}
    closed = json.loads(with_body_field(memoryview(body), preset("dynamo").body_field(last)))
    assert closed["nvext"]["session_control"]["action"] == "close"
    assert with_body_field(body, preset(PresetName.SGLANG).body_field(first)) is body
    assert llmd_cookie("other=1\nllm-d-session=YWJj; Path=/; HttpOnly") == "YWJj"
    assert llmd_cookie(None) is None
    assert preset("llm-d").keeps_cookie and not preset("dynamo").keeps_cookie and len(PRESETS) == 4
    with pytest.raises(AgentxError, match="session_headers: want one of plain"):
        preset("nginx")
