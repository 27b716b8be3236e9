import pytest

from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore
from agentx.errors import AgentxError


def core(**kw) -> EngineCore:
    return EngineCore(EngineConfig(**kw))


def run(c: EngineCore, limit: int = 100_000) -> list:
    steps = []
    while (step := c.step()) is not None:
        steps.append(step)
        assert len(steps) < limit
    return steps


def prompt(n: int, start: int = 1000) -> list[int]:
    return list(range(start, start + n))


def test_repeated_prompt_hits_the_cache_and_costs_less():
    c = core()
    a = c.new_sequence("a", prompt(20_000), 4, ignore_eos=True)
    c.add(a)
    run(c)
    first_ttft = a.first_token_at - a.arrival
    b = c.new_sequence("b", prompt(20_000), 4, ignore_eos=True)
    c.add(b, now=c.now)
    run(c)
    assert a.cached_tokens == 0
    assert b.cached_tokens == 19_984  # every full block but the one holding the last token
    assert b.first_token_at - b.arrival < first_ttft / 10
    assert c.kv.counters.gpu_hits == 19_984
    assert c.sources.local_cache_hit == 19_984 and c.sources.local_compute == 20_000 + 16


def test_shared_prefix_hits_only_the_shared_blocks():
    c = core()
    c.add(c.new_sequence("a", prompt(1_000), 2, ignore_eos=True))
    run(c)
    other = prompt(500) + prompt(500, start=90_000)  # diverges at token 500 (inside block 31)
    b = c.new_sequence("b", other, 2, ignore_eos=True)
    c.add(b)
    run(c)
    assert b.cached_tokens == 496  # 31 full blocks


def test_chunked_prefill_respects_the_token_budget_and_decodes_go_first():
    c = core(max_num_batched_tokens=2048)
    short = c.new_sequence("short", prompt(100), 50, ignore_eos=True)
    c.add(short)
    c.step()  # prefill of the short one, first token
    long = c.new_sequence("long", prompt(10_000, start=50_000), 5, ignore_eos=True)
    c.add(long)
    steps = []
    while long.first_token_at is None:
        steps.append(c.step())
    assert all(s.new_tokens <= 2048 for s in steps)
    assert len(steps) == 5  # 10,000 prompt tokens in chunks of <= 2047 beside one decode
    assert all(short in s.emitted for s in steps)  # the decode was never starved
    run(c)
    assert len(short.output) == 50 and len(long.output) == 5


def test_max_num_seqs_caps_the_batch():
    c = core(max_num_seqs=4)
    seqs = [c.new_sequence(str(i), prompt(64, start=i * 1000), 20, ignore_eos=True) for i in range(10)]
    for s in seqs:
        c.add(s)
    steps = run(c)
    assert max(s.batch_size for s in steps) == 4
    assert all(len(s.output) == 20 and s.finish_reason == "length" for s in seqs)


def test_preemption_recomputes_and_everything_finishes():
    c = core(num_gpu_blocks_override=64, max_model_len=1024)  # 1,024 tokens of KV in all
    seqs = [c.new_sequence(str(i), prompt(200, start=i * 1000), 300, ignore_eos=True) for i in range(4)]
    for s in seqs:
        c.add(s)
    run(c)
    assert c.preemptions > 0
    assert all(len(s.output) == 300 for s in seqs)
    assert c.kv.free_blocks == 64  # nothing leaked


def test_requests_that_can_never_fit_get_vllms_message():
    c = core(max_model_len=4096)
    msg = c.context_error(4000, 200)
    assert msg.startswith("This model's maximum context length is 4096 tokens. However, you requested 4200 tokens")
    assert c.context_error(4000, 96) is None


def test_natural_answer_length_is_deterministic_and_bounded():
    c, c2, other_seed = core(seed=3), core(seed=3), core(seed=4)
    lengths = [c.new_sequence("x", prompt(300, start=i * 977), 10_000).stop_len for i in range(200)]
    assert lengths == [c2.new_sequence("x", prompt(300, start=i * 977), 10_000).stop_len for i in range(200)]
    assert lengths != [other_seed.new_sequence("x", prompt(300, start=i * 977), 10_000).stop_len for i in range(200)]
    assert 200 < sorted(lengths)[100] < 900  # median near the corpus's 441
    assert all(c.new_sequence("x", prompt(50, start=i), 30, min_tokens=20).stop_len in range(20, 31)
               for i in range(50))


def test_abort_frees_blocks():
    c = core()
    s = c.new_sequence("a", prompt(5_000), 1_000, ignore_eos=True)
    c.add(s)
    c.step()
    c.abort(s)
    assert s.finish_reason == "abort" and c.idle and c.kv.free_blocks == c.kv.num_blocks


def test_cpu_tier_turns_an_evicted_prefix_into_a_transfer():
    c = core(model="llama-3.1-70b", num_gpu_blocks_override=2_100, max_model_len=32_768, cpu_offload_gb=200)
    first = c.new_sequence("a", prompt(32_768 - 8), 1, ignore_eos=True)
    c.add(first)
    compute_steps = run(c)
    # evict it from the GPU with another 32k prompt
    c.add(c.new_sequence("b", prompt(32_768 - 8, start=500_000), 1, ignore_eos=True))
    run(c)
    again = c.new_sequence("c", prompt(32_768 - 8), 1, ignore_eos=True)
    c.add(again)
    reload_steps = run(c)
    assert c.kv.counters.external_hits > 30_000 and again.cached_tokens > 30_000
    recompute_s = sum(s.duration for s in compute_steps)
    reload_s = sum(s.duration for s in reload_steps)
    transfer = c.roofline.transfer_s(c.kv.counters.external_hits)
    assert reload_s == pytest.approx(transfer, rel=0.1)
    assert recompute_s > 5 * reload_s


def test_kv_smaller_than_the_context_limit_is_refused():
    with pytest.raises(AgentxError, match="fewer than the maximum model length"):
        core(num_gpu_blocks_override=10)


def test_a_request_joins_no_iteration_that_started_before_it_arrived():
    """A server loop catching up computes iterations whose modeled start is past: a request that
    arrived after that start waits for the next iteration, as it would have on time."""
    c = core()
    a = c.new_sequence("a", prompt(100), 500, ignore_eos=True)  # decodes for longer than the test looks
    c.add(a, now=0.0)
    c.step()  # a's prefill
    late = c.new_sequence("late", prompt(100, start=5000), 4, ignore_eos=True)
    c.add(late, now=c.now + 0.05)  # arrives ahead of the core's clock
    steps = 0
    while c.now < late.arrival:
        c.step()
        steps += 1
        assert late.scheduled_at is None and steps < 100
    c.step()
    assert late.arrival <= late.scheduled_at < late.arrival + 0.1 and a.finish_reason is None


def test_trtllm_admits_only_what_can_finish_without_eviction():
    """TensorRT-LLM's GUARANTEED_NO_EVICT: 4 requests of 200 + 300 tokens need 32 blocks each at
    completion (block size 16); 64 blocks hold two such reservations, so two run at a time and
    nothing is preempted, where vLLM admits all four on their prompts' blocks and preempts."""
    vllm = core(num_gpu_blocks_override=64, max_model_len=1024)
    trt = core(num_gpu_blocks_override=64, max_model_len=1024, engine="trtllm")
    assert trt.final_blocks(trt.new_sequence("x", prompt(200), 300, ignore_eos=True)) == 32
    for c in (vllm, trt):
        seqs = [c.new_sequence(str(i), prompt(200, start=i * 1000), 300, ignore_eos=True) for i in range(4)]
        for s in seqs:
            c.add(s)
        first = c.step()
        assert first.batch_size == (4 if c is vllm else 2)
        if c is trt:
            assert trt.outstanding_blocks() == 2 * (32 - 13)  # 13 blocks hold 201 tokens
            assert trt.admission_blocked(trt.cfg.max_num_batched_tokens)
        run(c)
        assert all(len(s.output) == 300 for s in seqs)
        assert c.kv.free_blocks == 64
    assert vllm.preemptions > 0 and trt.preemptions == 0
