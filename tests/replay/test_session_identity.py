"""Each stream of a replayed tree is its own session, linked to its parent, in every
`--session-headers` preset: checked on what the simulated engine received (its truth log)."""

import json

import pytest

from agentx.engine.launch import sim_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.session_ids import PRESETS, SessionIdentity
from agentx.replay.settings import BenchSettings
from agentx.traces.graph import build_graph
from agentx.traces.weka import read_weka
from tests.conftest import WEKA
from tests.replay.test_client import run, sse

SPEED = 50


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    truth = tmp_path_factory.mktemp("sim") / "truth.jsonl"
    with sim_server("--speed", str(SPEED), "--truth-log", str(truth)) as url:
        yield url, truth


@pytest.mark.parametrize("preset", PRESETS)
def test_distinct_session_per_stream_with_parent_links(sim, tmp_path, preset):
    url, truth = sim
    session = read_weka(WEKA / "trace_0291.json")[0]  # main + 2 subagents
    graph = build_graph(session)
    # idle caps compress the recorded gaps so that a whole tree fits the short window (one whole
    # replay, ~25-235 modeled s, and the head of the next)
    bench(BenchSettings.build(url=url, concurrency=1, duration=300, out=str(tmp_path / "run"), clock_scale=SPEED,
                              warmup=False, grace=5, idle_cap=5, system_idle_cap=1, session_headers=preset), [session])
    assert json.loads((tmp_path / "run" / "result.json").read_text())["identity"]["session_headers"] == preset
    records = {(r.tree, r.node): r for r in read_records(tmp_path / "run")}
    run_id = next(iter(records.values())).run
    sent = [line for line in map(json.loads, truth.read_text().splitlines())
            if (line.get("correlation_id") or "").startswith(run_id + "-")]
    assert len(sent) == len(records) >= 10 and all(r.error is None for r in records.values())
    by_stream: dict = {}
    for line in sent:
        run_id, tree, node = line["correlation_id"].rsplit("-", 2)
        rec = records[(int(tree), int(node))]
        by_stream.setdefault((rec.tree, rec.stream), set()).add((line["session_id"], line["parent_session_id"]))
        routed = line["router_session"]
        if preset == "dynamo":
            assert routed["X-Dynamo-Session-ID"] == line["session_id"]
            assert routed.get("X-Dynamo-Parent-Session-ID") == line["parent_session_id"]
            last = graph.nodes[int(node)].position == len(graph.streams[rec.stream].requests) - 1
            assert ("X-Dynamo-Session-Final" in routed) == last
        elif preset == "sglang":
            assert routed == {"X-SMG-Routing-Key": line["session_id"]}
        else:
            assert routed == {}  # plain sends the pair only; llm-d adds a cookie once a gateway sets one
    assert all(len(ids) == 1 for ids in by_stream.values())  # one id per stream
    ids = {key: next(iter(v)) for key, v in by_stream.items()}
    assert len({sid for sid, _ in ids.values()}) == len(ids)  # distinct across streams
    for (tree, stream), (sid, parent) in ids.items():
        if graph.parents[stream] < 0:
            assert stream == 0 and parent is None
        else:
            assert parent == ids[(tree, graph.parents[stream])][0]
    assert {graph.streams[s].kind for _, s in ids} == {"main", "subagent"}


def test_llmd_cookie_is_echoed_per_stream():
    body = b'{"model":"m","prompt":[1,2,3],"max_tokens":4,"stream":true}'
    answer = sse(2)
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nSet-Cookie: llm-d-session=UG9kLUEx; Path=/; "
            b"HttpOnly\r\nContent-Length: %d\r\n\r\n" % len(answer))
    (res,), _ = run([head + answer], [body])
    assert res.error is None and "llm-d-session=UG9kLUEx" in res.set_cookie  # case kept
    graph = build_graph(read_weka(WEKA / "trace_0291.json")[0])
    identity = SessionIdentity("llm-d", "r")
    sub = next(n for n in graph.nodes if n.stream == 1 and n.position == 0)
    assert identity.turn(7, graph, 0).cookie is None
    identity.answered(7, 0, res.set_cookie)
    assert identity.turn(7, graph, 1).cookie == "UG9kLUEx"
    assert identity.turn(7, graph, sub.index).cookie is None  # a subagent is a new session
    identity.forget(7, len(graph.streams))
    assert identity.turn(7, graph, 1).cookie is None
