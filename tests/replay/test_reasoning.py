"""Reasoning streams: TTFT at the first token of either kind, OSL counting both, reasoning tokens
apart (the simulated engine streaming a share of each answer as reasoning, both wire modes)."""

import pytest

from agentx.engine.launch import sim_server
from agentx.records import read_records
from agentx.replay.driver import bench
from agentx.replay.settings import BenchSettings
from agentx.replay.http.stream import Result, openai_event
from agentx.traces.load import load_sessions
from tests.conftest import WEKA

SPEED = 50


@pytest.fixture(scope="module")
def sim():
    with sim_server("--speed", str(SPEED), "--reasoning-share", "0.25", "--reasoning-field", "reasoning") as url:
        yield url


def run(url, out, wire):
    s = BenchSettings.build(url=url, concurrency=2, duration=120, out=str(out), clock_scale=SPEED, wire=wire,
                            warmup_requests_per_lane=2, grace=30, keep_chunks=True)
    return bench(s, load_sessions([WEKA], None)), [r for r in read_records(out) if r.phase == "profile"]


def test_chat_ttft_is_the_first_reasoning_token(sim, tmp_path):
    result, prof = run(sim, tmp_path / "chat", "chat")
    assert prof and all(r.error is None for r in prof)
    for r in prof:
        assert r.osl == r.osl_planned == r.chunks  # usage counts both kinds, and so do the chunks
        assert r.reasoning == round(0.25 * r.osl_planned)
        assert r.ttft == pytest.approx(r.chunk_times[0])  # the first chunk, a reasoning one
        if r.reasoning and r.reasoning < r.osl:  # content only follows the reasoning
            assert r.chunk_times[r.reasoning] >= r.ttft
    rt = result["request_metrics"]["reasoning_tokens"]
    assert rt["n"] == sum(1 for r in prof if r.reasoning) and rt["mean"] > 0


def test_tokens_mode_has_no_reasoning_channel(sim, tmp_path):
    result, prof = run(sim, tmp_path / "tokens", "tokens")
    assert prof and all(r.error is None and r.reasoning is None and r.osl == r.osl_planned for r in prof)
    assert result["request_metrics"]["reasoning_tokens"] is None


def test_reasoning_fields_and_usage_details_of_the_wire_format():
    res = Result(start=0.0)
    events = [b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
              b'data: {"choices":[{"index":0,"delta":{"reasoning_content":" hm"}}]}',
              b'data: {"choices":[{"index":0,"delta":{"reasoning":" so"}}]}',
              b'data: {"choices":[{"index":0,"delta":{"content":" yes"}}]}',
              b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,'
              b'"completion_tokens_details":{"reasoning_tokens":2}}}']
    for t, e in enumerate(events):
        assert not openai_event(e, float(t), res, keep_chunks=True)
    assert res.first == 1.0 and res.end == 3.0 and res.chunks == 3 and res.reasoning_chunks == 2
    assert res.reasoning_tokens == 2 and res.completion_tokens == 3 and res.chunk_times == [1.0, 2.0, 3.0]
