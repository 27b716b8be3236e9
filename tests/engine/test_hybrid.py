"""Hybrid attention (engine/hybrid.py, SPEC §6 "Hybrid attention"): a prefix hit resumes only
where the sliding-window layers' KV is held; exact hit accounting on hand-built prompts."""

import pytest

from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore
from agentx.engine.hybrid import Retention, WindowState
from agentx.errors import AgentxError

BS = 16  # gpt-oss-120b's window of 128 tokens is 8 blocks


def core(retention: str, **kw) -> EngineCore:
    return EngineCore(EngineConfig(hardware="H200", gpus=1, model="gpt-oss-120b", precision="mxfp4",
                                   window_retention=retention, checkpoint_blocks=4, max_model_len=8192, **kw))


def serve(c: EngineCore, name: str, tokens: list[int]) -> int:
    """Run one prompt to its one answer token; the prompt tokens it found cached."""
    seq = c.new_sequence(name, tokens, 1, ignore_eos=True)
    c.add(seq, now=c.now)
    while c.step() is not None:
        pass
    return seq.cached_tokens


def prompts():
    a = list(range(40 * BS))  # 40 blocks
    diverging = a[: 38 * BS] + list(range(10**6, 10**6 + 12 * BS))  # shares 38 blocks with a
    extending = a + list(range(2 * 10**6, 2 * 10**6 + 10 * BS))  # a, then 10 more blocks
    return a, diverging, extending


@pytest.mark.parametrize("retention, diverging_hit, extending_hit", [
    (Retention.OFF, 38 * BS, 40 * BS),  # the full layers' hit, as without a window model
    (Retention.NONE, 0, 0),  # no window state outlives its request: the hit collapses
    (Retention.SPARSE, 36 * BS, 40 * BS),  # back to the last checkpoint (every 4 blocks; a's end)
])
def test_a_hit_resumes_where_the_window_state_is_held(retention, diverging_hit, extending_hit):
    c = core(retention)
    a, diverging, extending = prompts()
    assert serve(c, "a", a) == 0
    assert serve(c, "b", diverging) == diverging_hit
    assert serve(c, "c", extending) == extending_hit
    if retention != Retention.OFF:
        counters = c.hybrid.counters
        assert counters.full_hit_tokens == (38 + 40) * BS  # the full layers held the same either way
        assert counters.usable_hit_tokens == diverging_hit + extending_hit


def test_sparse_checkpoints_are_every_k_blocks_and_each_prompt_end():
    c = core(Retention.SPARSE)
    a, diverging, _ = prompts()
    serve(c, "a", a)
    # a: blocks 4, 8, ..., 40 (its end is a multiple of 4)
    assert c.hybrid.counters.checkpoints == 10
    serve(c, "b", diverging)  # 50 blocks, 49 cacheable: new checkpoints at 40 (its own), 44, 48 and its end 50
    assert c.hybrid.counters.checkpoints == 10 + 4


def test_a_long_lone_prefill_keeps_every_checkpoint():
    """A prompt of several token budgets, alone (its chunks computed together, engine/window.py):
    a checkpoint every K blocks and one at its end, as chunk by chunk."""
    c = EngineCore(EngineConfig(hardware="H200", gpus=1, model="gpt-oss-120b", precision="mxfp4",
                                window_retention="sparse", checkpoint_blocks=4, max_model_len=65536))
    prompt = list(range(2501 * BS))  # 40,016 tokens: 5 budgets of 8,192
    seq = c.new_sequence("long", prompt, 1, ignore_eos=True)
    c.add(seq)
    while c.running or c.waiting:
        c.advance(float("inf"))  # (the windows run in advance, not in step)
    assert seq.cached_tokens == 0
    assert c.hybrid.counters.checkpoints == 2501 // 4 + 1  # every 4th block, and the end (2,501)
    assert serve(c, "again", prompt[: 1001 * BS] + [7] * BS) == 1000 * BS  # resumes at the checkpoint at 1,000


def test_checkpoints_cost_kv_memory():
    off, none, sparse = (core(r) for r in (Retention.OFF, Retention.NONE, Retention.SPARSE))
    rings = off.cfg.max_num_seqs * (128 // BS + 1)  # one window per running sequence (+ the block it fills)
    assert none.kv.num_blocks == off.kv.num_blocks - rings
    w = 128 // BS
    assert sparse.hybrid.capacity == int((off.kv.num_blocks - rings) * w / (4 + w) / w)
    assert sparse.kv.num_blocks == off.kv.num_blocks - rings - sparse.hybrid.capacity * w


def test_the_store_forgets_its_least_recently_used_checkpoint():
    store = WindowState(Retention.SPARSE, window_blocks=8, every=4, capacity=3)
    hashes = list(range(100, 116))
    store.computed(hashes, 0, 16, final=True)  # checkpoints at 4, 8, 12, 16: the one at 4 is dropped
    assert (store.counters.checkpoints, store.counters.checkpoint_evictions) == (4, 1)
    assert store.usable(hashes, 7) == 0 and store.usable(hashes, 11) == 8 and store.usable(hashes, 16) == 16
    assert store.usable(hashes, 11) == 8
    store.admitted(8, BS)  # and admitted: the checkpoint at 8 is now the most recent
    store.computed(list(range(200, 204)), 0, 4, final=True)  # a new one pushes out the one at 12
    assert store.usable(hashes, 15) == 8 and store.usable(hashes, 16) == 16


def test_a_model_without_window_layers_refuses_retention():
    with pytest.raises(AgentxError, match="no sliding-window layers"):
        EngineCore(EngineConfig(window_retention="sparse"))


def test_sim_bench_shows_the_collapse_and_the_recovery(tmp_path):
    """`sim bench` on the bundled traces (gpt-oss-120b on one H200): without window retention no
    prompt resumes from the cache; sparse checkpoints recover about the hit rate of the model
    whose window is not modeled."""
    import json

    from agentx.engine.config import Deployment
    from agentx.replay.corpus import Corpus
    from agentx.replay.settings import BenchSettings
    from agentx.virtual.runner import sim_bench

    corpus = Corpus(())
    hit = {}
    for retention in Retention:
        out = tmp_path / retention
        settings = BenchSettings.build(out=str(out), url="virtual", concurrency=4, duration=120, **corpus.labels)
        engine = EngineConfig(hardware="H200", gpus=1, model="gpt-oss-120b", precision="mxfp4",
                              window_retention=retention)
        sim_bench(settings, corpus.sessions(4), Deployment(engine))
        hit[retention] = json.loads((out / "result.json").read_text())["request_metrics"]["cache"]["measured_hit_rate"]
    assert hit[Retention.NONE] == 0.0
    assert hit[Retention.OFF] > 0.5
    assert hit[Retention.OFF] - 0.03 <= hit[Retention.SPARSE] <= hit[Retention.OFF]
