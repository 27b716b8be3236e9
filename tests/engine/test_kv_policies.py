"""The KV policies that read harness hints (engine/eviction.py, SPEC §6 "KV policies"): which
free cached blocks each gives up first, on a real KVCache, and what they buy in virtual time."""

import json

import numpy as np
import pytest

from agentx.engine.eviction import PIN_SHARE, EvictionName, eviction_policy
from agentx.engine.hints import Hints
from agentx.engine.kvcache import KVCache, block_hashes
from agentx.errors import AgentxError

BS = 4


def _cache(policy: str, blocks: int = 12) -> KVCache:
    return KVCache(blocks, BS, eviction=policy)


def _run(kv: KVCache, name: str, tokens: list[int], hints=None) -> list[int]:
    """Allocate, compute and free a prompt; its hashes."""
    hashes = block_hashes(tokens, BS)
    assert kv.allocate(name, hashes, len(tokens)) is not None
    kv.commit(name, hashes)
    kv.free_seq(name, hints)
    return hashes


def _survivors(policy: str, first_hints, second_hints) -> tuple[int, int]:
    """Two 4-block prompts freed (the first earlier), then a 4-block one that evicts one of them:
    (blocks of the first still cached, blocks of the second still cached)."""
    kv = _cache(policy, blocks=8)
    a = _run(kv, "a", list(range(16)), first_hints)
    b = _run(kv, "b", list(range(100, 116)), second_hints)
    _run(kv, "c", list(range(200, 216)))
    return kv.match(a)[0], kv.match(b)[0]


TOOL = Hints(session_id="s", tool_call="read")
END = Hints(session_id="s", session_end=True)


def test_lru_evicts_the_older_prompt():
    assert _survivors("lru", TOOL, None) == (0, 4)


def test_retain_keeps_a_prefix_through_its_tool_call():
    assert _survivors("retain", TOOL, None) == (4, 0)
    assert _survivors("retain", Hints(session_id="s", next_gap_s=10.0), None) == (4, 0)  # oracle: back soon
    assert _survivors("retain", Hints(session_id="s", tool_call="read", next_gap_s=9999.0), None) == (4, 0)
    assert _survivors("retain", None, None) == (0, 4)  # no hints: LRU


def test_retain_with_the_oracle_gives_up_the_prefix_needed_last():
    soon, late = Hints(session_id="s", next_gap_s=10.0), Hints(session_id="t", next_gap_s=1000.0)
    assert _survivors("retain", soon, late) == (4, 0)
    assert _survivors("retain", late, soon) == (0, 4)


def test_demote_gives_up_an_ended_session_first():
    assert _survivors("demote", None, END) == (4, 0)
    assert _survivors("demote", None, Hints(session_id="s", next_gap_s=9999.0)) == (4, 0)  # oracle: back late
    assert _survivors("demote", None, TOOL) == (0, 4)  # otherwise LRU


def test_prefetch_keeps_the_prefix_subagents_share():
    fork = Hints(session_id="s", fork=2, fork_shared_tokens=8)  # the first 2 blocks
    kv = _cache("prefetch", blocks=8)
    a = _run(kv, "a", list(range(16)), fork)
    _run(kv, "b", list(range(100, 116)))
    _run(kv, "c", list(range(200, 216)))
    assert kv.match(a)[0] == 2  # the shared head stayed, the rest of the parent went first


def test_pins_are_bounded():
    policy = eviction_policy("retain", 10)
    policy.append(np.arange(8), TOOL, np.arange(8))
    assert len(policy.kept) == int(PIN_SHARE * 10) and len(policy) == 8
    assert sorted(policy.pop(3).tolist()) == [0, 1, 2]  # the longest kept went back to the normal order
    policy.remove([7])
    assert 7 not in list(policy) and len(policy) == 4


def test_unknown_policy_is_an_error():
    with pytest.raises(AgentxError, match="unknown KV policy 'mru'"):
        eviction_policy("mru", 4)
    assert [p.value for p in EvictionName] == ["lru", "retain", "demote", "prefetch"]


def test_virtual_time_policies_change_the_hit_rate(tmp_path):
    """On the bundled traces under memory pressure, retain with harness hints finds more of the
    prompts cached than LRU (deterministic: virtual time); without hints it is LRU exactly."""
    from agentx.engine.config import Deployment, EngineConfig
    from agentx.replay.corpus import Corpus
    from agentx.replay.settings import BenchSettings
    from agentx.virtual.runner import sim_bench

    corpus = Corpus(())
    sessions = corpus.sessions()
    hit = {}
    for policy, hints in (("lru", "none"), ("retain", "none"), ("retain", "harness")):
        out = tmp_path / f"{policy}-{hints}"
        settings = BenchSettings.build(out=str(out), url="virtual", concurrency=8, duration=300, hints=hints,
                                       **corpus.labels)
        sim = Deployment(EngineConfig(gpu_memory_utilization=0.55, kv_policy=policy))
        sim_bench(settings, sessions, sim)
        hit[(policy, hints)] = json.loads((out / "result.json").read_text())["request_metrics"]["cache"]["measured_hit_rate"]
    assert hit[("retain", "none")] == hit[("lru", "none")]
    assert hit[("retain", "harness")] > hit[("lru", "none")]
