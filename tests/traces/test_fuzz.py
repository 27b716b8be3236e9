"""Corrupted real traces give a clean TraceError or a valid model, never another exception."""

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from agentx.errors import TraceError
from agentx.traces.graph import build_graph, topological_order
from agentx.traces.load import load_file
from agentx.traces.stats import trace_stats
from tests.conftest import MOONCAKE, WEKA

SMALL = [WEKA / "trace_0026.json", WEKA / "trace_0277.json", WEKA / "trace_0291.json"]
TEXTS = {p: p.read_bytes() for p in SMALL}
MOONCAKE_HEAD = b"\n".join(MOONCAKE.read_bytes().splitlines()[:20])

values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=5), st.lists(st.integers(-3, 2**40), max_size=4), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
KEYS = ["t", "in", "out", "hash_ids", "type", "api_time", "think_time", "duration_ms", "status", "requests",
        "block_size", "hash_id_scope", "ttft", "agent_id", "models", "input_types"]


def _check(path, fmt):
    try:
        sessions = load_file(path, fmt)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    for s in sessions:
        assert len(topological_order(build_graph(s))) == s.n_requests
    trace_stats(sessions)


def _nodes(doc):
    """Every dict in the document: the session and each entry."""
    out, stack = [], [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.append(node)
            stack.extend(node.get("requests", []) if isinstance(node.get("requests"), list) else [])
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SMALL), st.data())
def test_field_corruption(tmp_path_factory, source, data):
    doc = json.loads(TEXTS[source])
    nodes = _nodes(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        node = nodes[data.draw(st.integers(0, len(nodes) - 1))]
        key = data.draw(st.sampled_from(KEYS))
        if data.draw(st.booleans()):
            node[key] = data.draw(values)
        else:
            node.pop(key, None)
    path = tmp_path_factory.mktemp("fuzz") / "corrupt.json"
    path.write_text(json.dumps(doc))
    _check(path, "weka")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SMALL + ["mooncake"]), st.data())
def test_byte_corruption(tmp_path_factory, source, data):
    text = bytearray(MOONCAKE_HEAD if source == "mooncake" else TEXTS[source])
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["truncate", "flip", "delete", "insert"]))
        i = data.draw(st.integers(0, max(0, len(text) - 1)))
        if op == "truncate":
            del text[i:]
        elif op == "flip" and text:
            text[i] = data.draw(st.sampled_from(b'0123456789-.,[]{}":ae \n'))
        elif op == "delete":
            del text[i : i + data.draw(st.integers(1, 50))]
        else:
            text[i:i] = data.draw(st.sampled_from([b"-1", b"null", b'"x"', b"1e400", b",", b"]"]))
    path = tmp_path_factory.mktemp("fuzz") / ("corrupt.jsonl" if source == "mooncake" else "corrupt.json")
    path.write_bytes(bytes(text))
    _check(path, "mooncake" if source == "mooncake" else "weka")
