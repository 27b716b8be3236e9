import pytest

from agentx.errors import AgentxError
from agentx.traces.synth import synth_session, SynthConfig
from agentx.traces.variants import limit_context, parse_tokens
from agentx.traces.weka import read_weka
from tests.conftest import WEKA


def test_parse_tokens():
    assert parse_tokens("256k") == 256_000 and parse_tokens("1m") == 1_000_000 and parse_tokens("990000") == 990_000
    with pytest.raises(AgentxError):
        parse_tokens("lots")


def test_256k_variant_drops_only_long_requests_and_keeps_times():
    session = next(s for s in (synth_session(SynthConfig(), 1, i) for i in range(40)) if s.main.children and max(s.replay_isl(r) for r in s.requests()) > 400_000)
    capped = limit_context(session, 256_000)
    kept = list(capped.requests())
    assert kept and all(capped.replay_isl(r) + r.osl <= 256_000 for r in kept)
    dropped = [r for r in session.requests() if session.replay_isl(r) + r.osl > 256_000]
    assert len(kept) + len(dropped) == session.n_requests
    assert {r.t for r in kept} <= {r.t for r in session.requests()}


def test_subagent_goes_only_when_all_its_requests_go():
    session = read_weka(WEKA / "trace_0291.json")[0]
    sub_max = max(r.isl + r.osl for r in session.main.children[0].requests)
    capped = limit_context(session, sub_max - 1)
    assert len(capped.main.children) == 2  # some subagent requests survive
    tiny = limit_context(session, 20_000)
    assert len(tiny.main.requests) == 3  # the 17.9k, 18.8k and 19.1k turns
    assert [len(c.requests) for c in tiny.main.children] == [1, 1]  # each subagent's 11.3k first turn
    assert limit_context(session, 11_000) is None
