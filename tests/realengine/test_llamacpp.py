"""A real engine in CI: llama.cpp's server (xllamacpp wheel) with a tiny local model."""

import pytest
from tokenizers import Tokenizer

from agentx.content.tokens import ContentConfig, PromptBuilder
from agentx.content.wire import chat_segments
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.traces.graph import build_graph
from agentx.traces.load import load_sessions
from tests.conftest import WEKA

xllamacpp = pytest.importorskip("xllamacpp")

from tests.realengine.llamacpp import llamacpp_server  # noqa: E402
from tests.realengine.tiny_model import write_model  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def server(model):
    with llamacpp_server(model, ctx=32768, slots=4) as url:
        yield url


@pytest.fixture(scope="module")
def sessions():
    return load_sessions([WEKA], None)


def run(url, out, sessions, **kw):
    s = BenchSettings.build(url=url, concurrency=2, duration=25, out=str(out), token_scale=64, token_range=(300, 8000),
                            warmup_requests_per_lane=1, idle_cap=2, system_idle_cap=1, grace=60, request_timeout=120, **kw)
    return bench(s, sessions)


@pytest.fixture(scope="module")
def probed(model, sessions, tmp_path_factory):
    """One tokens-mode bench with `--probe-cache 2` against a server of micro-batches of one token
    (so the probe's cold and warm answers are bitwise comparable), and `--eval arith:4` after it:
    (its result, its folder). The tokens-mode, probe and eval tests all read this run."""
    out = tmp_path_factory.mktemp("probed")
    with llamacpp_server(model, ctx=32768, slots=4, ubatch=1) as url:
        return run(url, out, sessions, probe_cache=2, evals="arith:4", eval_reference=0.9), out


def test_tokens_mode_against_llamacpp(probed):
    result, out = probed
    prof = [r for r in read_records(out) if r.phase == "profile"]
    assert prof and all(r.error is None for r in prof), [r.detail for r in prof if r.error][:3]
    assert all(r.isl == r.isl_planned and r.osl == r.osl_planned for r in prof)  # token-exact
    assert any(r.cached for r in prof)  # llama.cpp reuses the slot's prefix
    sm = result["server_metrics"]
    assert sm["engine"] == "llama.cpp" and sm["scrapes"] >= 3
    assert 0 < sm["prefix_hit_rate"] <= 1 and "running_mean" in sm
    rm = result["request_metrics"]
    assert rm["ttft_s"]["n"] == len(prof) and rm["throughput"]["output_tok_s"] > 0
    assert rm["cache"]["measured_hit_rate"] > 0.3


def test_chat_mode_against_llamacpp(server, model, sessions, tmp_path):
    result = run(server, tmp_path / "chat", sessions, wire="chat", tokenizer=str(model.parent / "tokenizer.json"))
    prof = [r for r in read_records(tmp_path / "chat") if r.phase == "profile"]
    assert prof and all(r.error is None for r in prof), [r.detail for r in prof if r.error][:3]
    assert all(r.osl == r.osl_planned for r in prof)
    # The server counts the ChatML template's tokens (<|im_start|>role, <|im_end|>, per message,
    # and the generation prompt) on top of the content; re-tokenizing the decoded random token
    # ids with byte-level BPE adds a little more (13-29 tokens per request when measured).
    tok = Tokenizer.from_file(str(model.parent / "tokenizer.json"))
    n = lambda text: len(tok.encode(text, add_special_tokens=False).ids)  # noqa: E731
    prompts = PromptBuilder(ContentConfig(token_scale=64, token_range=(300, 8000)))
    graphs = {s.id: build_graph(s) for s in sessions}
    for r in prof:
        graph = graphs[r.session]
        session = graph.session
        node = graph.nodes[r.node]
        history = [(prompts.isl(session, q), prompts.osl(q)) for q in graph.streams[node.stream].requests[: node.position]]
        segments = chat_segments(r.isl_planned, prompts.system_tokens(session), history)
        template = sum(n(f"<|im_start|>{m.role}\n") + n("<|im_end|>\n") for m in segments) + n("<|im_start|>assistant\n")
        assert template <= r.isl - r.isl_planned <= template + 0.25 * r.isl_planned, (r.isl, r.isl_planned, template)
    drift = [r.isl - r.isl_planned for r in prof]
    assert result["request_metrics"]["isl_drift_tokens_mean"] == pytest.approx(sum(drift) / len(drift))
    assert result["server_metrics"]["engine"] == "llama.cpp"


def test_identity_of_llamacpp(server):
    import asyncio

    from agentx.metrics.identity import discover

    found = asyncio.run(discover(server))
    assert found["engine"] == ("llama.cpp", "/props") and found["engine_version"][0]  # its build info
    assert found["block_size"][0] == 1 and found["max_model_len"] == (8192, "/props")  # 32768 over 4 slots


def test_bench_with_cache_probe_prints_identity_efficiency_and_no_mismatch(probed):
    from agentx.metrics.tables import result_lines

    result, _ = probed
    lines = "\n".join(result_lines(result))
    ident = result["identity"]
    assert ident["engine"] == "llama.cpp" and ident["engine_version"] and ident["block_size"] == 1
    assert ident["sources"]["engine"] == "server /props" and lines.startswith("engine: llama.cpp ")
    cache = result["request_metrics"]["cache"]
    assert cache["engine_block_size"] == 1 and cache["cache_efficiency_source"] == "usage"
    assert cache["cache_efficiency"] == pytest.approx(1.0, abs=0.001), lines  # nothing evicted at 2 lanes
    assert "cache efficiency: 1.00" in lines
    probes = result["cache_probe"]
    assert probes["before"]["mismatches"] == probes["after"]["mismatches"] == 0
    assert probes["before"]["probes"] == probes["after"]["probes"] == 2
    assert probes["before"]["errors"] == probes["after"]["errors"] == 0, probes
    items = probes["before"]["items"] + probes["after"]["items"]
    assert all(p["prefix"] == p["isl"] - 1 for p in items), items  # llama.cpp reuses all but the last token
    assert "cache probe: 0 mismatches in 2 probes (before the run)" in lines
    assert result["server_metrics"]["window"] == "exact"


def test_bench_eval_against_llamacpp_stores_accuracy_and_the_random_model_fails_it(probed):
    """`--eval` on a real server (the mechanism): four problems sent to llama.cpp after the run,
    each answered (random weights: no right number), scored, stored in result.json and printed;
    against a 90 % reference the point is NOT VALID for accuracy."""
    import json

    from agentx.data.evals import problems
    from agentx.metrics.tables import result_lines

    result, out = probed
    acc = result["accuracy"]
    assert (acc["eval"], acc["n"], acc["errors"], acc["reference"], acc["reference_source"]) == ("arith", 4, 0, 0.9,
                                                                                                  "user")
    assert acc["correct"] == 0 and acc["accuracy"] == 0 and acc["interval"][1] < 0.85
    assert [w["id"] for w in acc["wrong"]] == [p.id for p in problems("arith")[:4]]
    assert all(w["answer"] and w["error"] is None for w in acc["wrong"])  # the model's own text came back
    rule = next(r for r in result["validity"]["rules"] if r["rule"] == "accuracy")
    assert not rule["ok"] and not result["validity"]["valid"]
    assert json.loads((out / "result.json").read_text())["accuracy"] == acc
    assert "accuracy: arith 0/4 = 0.0% (95 % interval 0%-49%); reference 90% (user)" in result_lines(result)
