import pytest

from agentx.traces.graph import START, build_graph, topological_order
from agentx.traces.model import Request, make_session, ids_array, Stream
from agentx.traces.weka import read_weka
from tests.conftest import WEKA


def _edges(graph, kind):
    return [e for e in graph.edges if e.kind == kind]


def test_trace_0291_siblings_share_spawn_and_join():
    graph = build_graph(read_weka(WEKA / "trace_0291.json")[0])
    spawns, joins = _edges(graph, "spawn"), _edges(graph, "join")
    assert len(spawns) == 2 and len(joins) == 2
    spawner = {graph.nodes[e.src].request.t for e in spawns}
    assert spawner == {1085.0}
    assert graph.nodes[spawns[0].src].request.end == pytest.approx(1100.64)
    for e in spawns:
        assert graph.nodes[e.dst].request.t == pytest.approx(1101.36, abs=0.02)
        assert e.delay == pytest.approx(graph.nodes[e.dst].request.t - 1100.64, abs=1e-6)
    assert {graph.nodes[e.dst].request.t for e in joins} == {1209.0}
    ends = sorted(1209.0 - e.delay for e in joins)
    assert ends == pytest.approx([1148.013, 1180.553])


def test_trace_0295_background_subagents_never_join():
    graph = build_graph(read_weka(WEKA / "trace_0295.json")[0])
    background = {i for i, s in enumerate(graph.streams) if s.kind == "background"}
    assert len(background) == 4
    for e in _edges(graph, "join"):
        assert graph.nodes[e.src].stream not in background
    spawned = {graph.nodes[e.dst].stream for e in _edges(graph, "spawn")}
    assert background <= spawned
    assert len(_edges(graph, "join")) == 4  # the four completed subagents


def test_every_real_graph_is_a_dag_with_one_start(weka_file):
    session = read_weka(weka_file)[0]
    graph = build_graph(session)
    order = topological_order(graph)
    assert len(order) == session.n_requests
    assert all(e.delay >= 0 for e in graph.edges)
    for node in graph.nodes:  # every node is reachable: it has an in-edge
        assert graph.in_edges[node.index]
    # main chain edges reproduce the recorded gaps
    main = graph.streams[0].requests
    chain = [e for e in graph.edges if e.kind == "chain" and graph.nodes[e.src].stream == 0]
    for e in chain:
        a, b = graph.nodes[e.src].request, graph.nodes[e.dst].request
        if a.api_time is not None:
            expected = max(0.0, b.t - a.t - a.api_time)
        else:  # some real requests lack api_time (and a few think_time too)
            expected = b.think_time if b.think_time is not None else b.t - a.t
        assert e.delay == pytest.approx(expected)
    assert len(chain) == len(main) - 1


def _req(t, ids, api=1.0, **kw):
    return Request(t=t, model="m", isl=len(ids) * 64, osl=10, hash_ids=ids_array(ids), api_time=api, **kw)


def test_aux_chain_is_split_off_and_branches_from_the_last_finished_main_request():
    title = _req(0.2, [900], api=0.3)  # a tiny title call at the very start
    main = [_req(0.0, [1, 2, 3, 4]), _req(5.0, [1, 2, 3, 4, 5, 6]), _req(12.0, [1, 2, 3, 4, 5, 6, 7, 8])]
    summary = _req(9.0, [700, 701], api=0.5)
    oneoff = _req(10.0, [], api=0.1)
    session = make_session(main + [title, summary, oneoff], [], id="s", block_size=64, hash_id_scope="local")
    assert [len(s.requests) for s in session.streams] == [3, 1, 1, 1]
    assert [s.kind for s in session.streams] == ["main", "aux", "aux", "aux"]
    graph = build_graph(session)
    branch = {graph.nodes[e.dst].request.t: e for e in graph.edges if e.kind in ("branch", "start")}
    assert branch[0.2].src == START and branch[0.2].delay == pytest.approx(0.2)  # main[0] still running
    assert graph.nodes[branch[9.0].src].request.t == 5.0 and branch[9.0].delay == pytest.approx(3.0)
    assert graph.nodes[branch[10.0].src].request.t == 5.0
    assert not any(e.kind == "join" for e in graph.edges)


def test_main_is_the_chain_with_most_blocks_not_the_first():
    helper = [_req(float(i), [50, 51]) for i in range(5)]  # more, smaller requests
    agent = [_req(0.5, [1] + list(range(2, 40))), _req(20.0, [1] + list(range(2, 60)))]
    session = make_session(helper + agent, [], id="s", block_size=64, hash_id_scope="local")
    assert session.main.requests == tuple(agent)


def test_subagent_before_any_parent_request_hangs_from_start():
    sub = Stream(kind="subagent", requests=(_req(2.0, [9]),), spawn=2.0, duration_ms=1000)
    session = make_session([_req(5.0, [1])], [sub], id="s", block_size=64, hash_id_scope="local")
    graph = build_graph(session)
    start_edges = {graph.nodes[e.dst].request.t: e.delay for e in graph.roots}
    assert start_edges == {5.0: 5.0, 2.0: 2.0}
    join = [e for e in graph.edges if e.kind == "join"]
    assert len(join) == 1 and join[0].delay == pytest.approx(2.0)  # 5.0 - end 3.0
