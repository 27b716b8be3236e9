"""Harness hints (SPEC §2): what `bench --hints` sends, checked on what a real `agentx sim serve`
received (its truth log), and what the sim's KV policies do with them in virtual time."""

import json

import pytest

from agentx.engine.launch import sim_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.hints import HEADERS
from agentx.replay.settings import BenchSettings
from agentx.traces.graph import build_graph, chain_gap
from agentx.traces.weka import read_weka
from tests.conftest import WEKA

SPEED = 50


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    truth = tmp_path_factory.mktemp("sim") / "truth.jsonl"
    with sim_server("--speed", str(SPEED), "--truth-log", str(truth), "--kv-policy", "retain") as url:
        yield url, truth


def _replay(url, truth, tmp_path, level: str, preset: str = "plain"):
    session = read_weka(WEKA / "trace_0291.json")[0]  # main + 2 subagents
    # idle caps compress the recorded gaps: one whole replay of the tree (~25-235 modeled s) and the
    # head of the next fit the window
    bench(BenchSettings.build(url=url, concurrency=1, duration=300, out=str(tmp_path / level), clock_scale=SPEED,
                              warmup=False, grace=5, idle_cap=5, system_idle_cap=1, hints=level,
                              session_headers=preset), [session])
    records = {(r.tree, r.node): r for r in read_records(tmp_path / level)}
    run_id = next(iter(records.values())).run
    sent = [line for line in map(json.loads, truth.read_text().splitlines())
            if (line.get("correlation_id") or "").startswith(run_id + "-")]
    assert len(sent) == len(records) >= 10 and all(r.error is None for r in records.values())
    return build_graph(session), sent


@pytest.mark.parametrize("level", ["harness", "oracle"])
def test_truth_log_shows_the_hints_of_every_request(sim, tmp_path, level):
    url, truth = sim
    graph, sent = _replay(url, truth, tmp_path, level)
    forks = 0
    for line in sent:
        node = graph.nodes[int(line["correlation_id"].rsplit("-", 1)[1])]
        stream = graph.streams[node.stream].requests
        hints, last = line["hints"], node.position == len(stream) - 1
        assert hints["session_id"] == line["session_id"] and hints.get("parent_session_id") == line["parent_session_id"]
        assert hints["turn"] == node.position
        assert hints.get("session_end", False) == last
        assert ("tool_call" in hints) == (node.request.stop == "tool_use")
        assert hints.get("tool_call") in (None, "other")  # the bundled traces have no segments
        children = [e for e in graph.out_edges[node.index] if e.kind == "spawn"]
        assert hints.get("fork", 0) == len(children)
        forks += hints.get("fork", 0)
        if node.position:
            assert 0 < hints["prefix_tokens"] <= line["prompt_tokens"]
        if level == "oracle" and not last:
            assert hints["next_gap_s"] == pytest.approx(chain_gap(node.request, stream[node.position + 1]), abs=1e-6)
            # the tree's next use of the prompt's head is no later than its own stream's next request
            assert hints["next_use"] and hints["next_use"][-1][1] <= hints["next_gap_s"] + 1e-6
        else:
            assert "next_gap_s" not in hints
        assert ("osl" in hints) == (level == "oracle")
        assert ("next_use" in hints) == (level == "oracle")
        assert line["hint_headers"] == {HEADERS[k]: (str(v).lower() if isinstance(v, bool) else
                                                     ",".join(f"{t}:{g:g}" for t, g in v) if isinstance(v, list)
                                                     else str(v))
                                        for k, v in hints.items() if k in HEADERS}
    assert forks >= 2  # the two subagents of trace_0291, each time the tree is replayed


def test_dynamo_preset_carries_agent_hints(sim, tmp_path):
    """With --session-headers dynamo the body's nvext gains Dynamo's agent_hints beside session_control."""
    from agentx.replay.session_ids import Dynamo, StreamTurn

    member = Dynamo().body_field(StreamTurn("s", None, True, False), {"tool_call": "read", "osl": 12})
    assert json.loads(b"{" + member + b"}") == {"nvext": {"session_control": {"session_id": "s", "timeout": 300,
                                                                            "action": "open"},
                                                        "agent_hints": {"speculative_prefill": True, "osl": 12}}}
    url, truth = sim
    _, sent = _replay(url, truth, tmp_path, "harness", "dynamo")
    assert all(line["router_session"]["X-Dynamo-Session-ID"] == line["hints"]["session_id"] for line in sent)


def test_bad_hints_are_refused(sim):
    import urllib.error
    import urllib.request

    url, _ = sim
    for hints, field in (({"tool_call": "teleport"}, b"agentx_hints.tool_call"),
                         ({"next_use": [[128, -1.0]]}, b"agentx_hints.next_use"),
                         ({"next_use": [[128, 1.0]] * 65}, b"agentx_hints.next_use"),
                         ({"next_use": [[128]]}, b"agentx_hints.next_use")):
        body = json.dumps({"prompt": [1, 2, 3], "max_tokens": 2, "agentx_hints": hints}).encode()
        request = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=30)
        assert err.value.code == 400 and field in err.value.read()
