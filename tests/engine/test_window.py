"""Decode windows (EngineCore.advance) against the step-by-step core: same times, same state."""

import math
import random

import pytest

from agentx.engine.config import EngineConfig
from agentx.engine.core import EngineCore


def workload(seed: int, n: int, shared: int = 3_000, rate: float = 2.0):
    """Arrivals of prompts sharing a prefix (as agent turns do), with varied answer lengths."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        p = list(range(shared)) + [100_000 + i * 10_000 + k for k in range(rng.randint(10, 4_000))]
        out.append((t, str(i), p, rng.randint(1, 600), rng.random() < 0.5))
    return out


def drive(cfg: EngineConfig, arrivals, windows: bool):
    core, steps = EngineCore(cfg), [0]
    step = core.step

    def counted():
        steps[0] += 1
        return step()

    core.step = counted
    seqs, i, itl = [], 0, []
    while i < len(arrivals) or not core.idle:
        while i < len(arrivals) and arrivals[i][0] <= core.now:
            t, sid, prompt, max_tokens, eos = arrivals[i]
            seq = core.new_sequence(sid, prompt, max_tokens, ignore_eos=eos)
            core.add(seq, t)
            seqs.append(seq)
            i += 1
        if core.idle:
            core.now = arrivals[i][0]
            continue
        until = arrivals[i][0] if i < len(arrivals) else math.inf
        if windows:
            core.advance(until, itl)
        else:
            s = core.step()
            if s.decodes:
                itl.append((s.duration, s.decodes))
    return core, seqs, itl, steps[0]


CASES = [
    dict(),  # 8 x H200, plenty of KV: windows end at arrivals and finishes
    dict(num_gpu_blocks_override=2_100, max_model_len=32_768, max_num_seqs=12),  # KV-bound: preemptions
    dict(max_num_seqs=4),  # queue blocked by max_num_seqs
    dict(model="deepseek-v3", precision="fp8", hardware="B200", spec_decode="mtp", draft_tokens=1),  # AL 1.85 (preset)
    dict(spec_decode="eagle3", draft_tokens=3, acceptance_length=2.6, num_gpu_blocks_override=3_000,
         max_model_len=32_768),
    dict(pp=2),  # PP2 x TP4: an iteration's micro-batches follow its sequences
]


def assert_same_run(a, b, seqs_a, seqs_b, itl_a, itl_b) -> None:
    """Two engines driven alike (drive) ended in the same times, tokens, cache and power state."""
    for x, y in zip(seqs_a, seqs_b):
        assert (x.first_token_at, x.finished_at, x.output, x.cached_tokens, x.preemptions, x.finish_reason) == \
               (y.first_token_at, y.finished_at, y.output, y.cached_tokens, y.preemptions, y.finish_reason)
    assert itl_a == itl_b and a.now == b.now
    assert (a.kv.counters, a.kv.cached, list(a.kv.free), a.kv.ref.tolist()) == \
        (b.kv.counters, b.kv.cached, list(b.kv.free), b.kv.ref.tolist())
    assert a.power.recent == b.power.recent and a.power.folded == b.power.folded


@pytest.mark.parametrize("kw", CASES)
def test_windows_give_the_step_by_step_times_and_state(kw):
    cfg = EngineConfig(**kw)
    arrivals = workload(seed=len(kw), n=60, rate=50.0 if "num_gpu_blocks_override" in kw else 2.0)
    a, seqs_a, itl_a, steps_a = drive(cfg, arrivals, windows=False)
    b, seqs_b, itl_b, steps_b = drive(cfg, arrivals, windows=True)
    for x, y in zip(seqs_a, seqs_b):
        assert (x.first_token_at, x.finished_at, x.output, x.cached_tokens, x.preemptions, x.finish_reason) == \
               (y.first_token_at, y.finished_at, y.output, y.cached_tokens, y.preemptions, y.finish_reason)
    assert itl_a == itl_b and a.now == b.now
    assert (a.kv.counters, a.kv.cached, list(a.kv.free), a.kv.ref.tolist()) == \
        (b.kv.counters, b.kv.cached, list(b.kv.free), b.kv.ref.tolist())
    assert (a.generation_tokens, a.preemptions, a.spec_steps) == (b.generation_tokens, b.preemptions, b.spec_steps)
    assert steps_b < steps_a / 3  # most decode iterations were computed in windows
    if "num_gpu_blocks_override" in kw and "spec_decode" not in kw:
        assert a.preemptions > 0


def test_speculative_decoding_keeps_the_acceptance_length_on_average_and_costs_the_drafts():
    plain = EngineCore(EngineConfig())
    spec = EngineCore(EngineConfig(spec_decode="eagle3", draft_tokens=3, acceptance_length=2.5))
    for core in (plain, spec):
        for i in range(8):
            core.add(core.new_sequence(str(i), list(range(i * 5000, i * 5000 + 2000)), 1001, ignore_eos=True))
        while not core.idle:
            core.advance(math.inf)
    assert plain.generation_tokens == spec.generation_tokens == 8 * 1001
    # 1,000 tokens after the first: 2.5 per decode step (one more step while the prefill is chunked)
    assert plain.spec_steps == pytest.approx(1000, abs=1)
    assert spec.spec_steps == pytest.approx(1000 / 2.5, abs=1)
    one = plain.roofline.iteration_s
    from agentx.engine.timing import Work
    assert one(Work(8 * 4, 8 * (4 * 2000) + 8 * 10, 8 * 2000)) > one(Work(8, 8 * 2000 + 8, 8 * 2000))
    assert spec.now < plain.now  # fewer, slightly dearer steps


def test_published_acceptance_length_is_required_or_given():
    from agentx.errors import AgentxError
    assert EngineCore(EngineConfig(model="deepseek-v3", precision="fp8", hardware="B200", spec_decode="mtp", draft_tokens=1)).accept_len == 1.85
    with pytest.raises(AgentxError, match="no published acceptance length"):
        EngineCore(EngineConfig(spec_decode="eagle3", draft_tokens=3))
    with pytest.raises(AgentxError, match="acceptance_length must be"):
        EngineConfig(spec_decode="eagle3", draft_tokens=3, acceptance_length=4.5)


def test_the_finish_bound_is_none_during_a_prefill_and_never_after_the_first_finish():
    """`decode_finish_bound` on its own: no bound while a prompt is being computed; once the batch
    only decodes, a bound above now that the step-by-step core's first finish does not precede."""
    from agentx.engine.window import decode_finish_bound

    core = EngineCore(EngineConfig(max_num_batched_tokens=2048))
    for i, n in enumerate((40, 90, 300)):
        core.add(core.new_sequence(str(i), list(range(i * 10_000, i * 10_000 + 5_000)), n, ignore_eos=True), 0.0)
    core.step()  # the first chunk of the first prompt
    assert decode_finish_bound(core) is None
    while decode_finish_bound(core) is None:
        core.step()
    bound, start = decode_finish_bound(core), core.now
    assert bound > start
    while not (done := core.step()).finished:
        pass
    assert min(s.finished_at for s in done.finished) >= bound


def test_a_window_that_does_not_fit_two_iterations_changes_nothing():
    from agentx.engine.window import decode_window

    core = EngineCore(EngineConfig())
    seq = core.new_sequence("a", list(range(3_000)), 500, ignore_eos=True)
    core.add(seq, 0.0)
    while seq.computed < seq.prompt_len:
        core.step()
    now, out = core.now, len(seq.output)
    finished, itl = [], []
    assert not decode_window(core, now + 1e-9, finished, itl)  # the next iteration would start at or after `until`
    assert (core.now, len(seq.output), finished, itl) == (now, out, [], [])
    assert decode_window(core, now + 10.0, finished, itl) and core.now > now and len(seq.output) > out + 1


@pytest.mark.parametrize("kw", [dict(max_num_batched_tokens=512),
                                dict(max_num_batched_tokens=512, num_gpu_blocks_override=700, max_model_len=8_192),
                                dict(max_num_batched_tokens=512, pp=4)])
def test_prefill_windows_give_the_step_by_step_times_and_state(kw, monkeypatch):
    """A lone sequence's prefill chunks computed together (engine/window.prefill_window), the cache
    short of blocks in the second case: the same times and state as one iteration at a time."""
    import agentx.engine.core as core_module

    windows, run = [0], core_module.prefill_window

    def counted(*args):
        done = run(*args)
        windows[0] += done
        return done

    monkeypatch.setattr(core_module, "prefill_window", counted)
    cfg = EngineConfig(**kw)
    arrivals = workload(seed=11, n=20, rate=0.1)
    a, seqs_a, itl_a, _ = drive(cfg, arrivals, windows=False)
    b, seqs_b, itl_b, _ = drive(cfg, arrivals, windows=True)
    assert_same_run(a, b, seqs_a, seqs_b, itl_a, itl_b)
    assert windows[0] >= 5  # prefills were windowed


@pytest.mark.parametrize("kw", [dict(max_num_batched_tokens=512),
                                dict(max_num_batched_tokens=512, num_gpu_blocks_override=900, max_model_len=8_192),
                                dict(max_num_batched_tokens=640, spec_decode="eagle3", draft_tokens=3,
                                     acceptance_length=2.6),
                                dict(max_num_batched_tokens=512, pp=2)])
def test_mixed_windows_give_the_step_by_step_times_and_state(kw, monkeypatch):
    """Decodes beside one prefill's chunks computed together (engine/mixed.mixed_window), the
    cache short of blocks in the second case, speculative decoding in the third: the same times
    and state as one iteration at a time."""
    import agentx.engine.core as core_module

    windows, run = [0], core_module.mixed_window

    def counted(*args):
        done = run(*args)
        windows[0] += done
        return done

    monkeypatch.setattr(core_module, "mixed_window", counted)
    cfg = EngineConfig(**kw)
    arrivals = workload(seed=5, n=40, rate=4.0)
    a, seqs_a, itl_a, steps_a = drive(cfg, arrivals, windows=False)
    b, seqs_b, itl_b, steps_b = drive(cfg, arrivals, windows=True)
    assert_same_run(a, b, seqs_a, seqs_b, itl_a, itl_b)
    assert (a.generation_tokens, a.preemptions, a.spec_steps) == (b.generation_tokens, b.preemptions, b.spec_steps)
    assert windows[0] >= 5  # decodes beside prefill chunks were windowed


@pytest.mark.parametrize("kw", [dict(max_num_batched_tokens=512),
                                dict(max_num_batched_tokens=512, num_gpu_blocks_override=900, max_model_len=8_192)])
def test_the_mixed_finish_bound_comes_before_every_finish(kw):
    """Whenever a core has the mixed shape, no sequence finishes before `mixed_finish_bound`
    unless a request arrives first (step by step, with arrivals)."""
    from agentx.engine.mixed import mixed_finish_bound

    core, arrivals, i, checked, bound = EngineCore(EngineConfig(**kw)), workload(seed=7, n=40, rate=4.0), 0, 0, None
    while i < len(arrivals) or not core.idle:
        while i < len(arrivals) and arrivals[i][0] <= core.now:
            t, sid, prompt, max_tokens, eos = arrivals[i]
            core.add(core.new_sequence(sid, prompt, max_tokens, ignore_eos=eos), t)
            i += 1
            bound = None  # (a bound holds until a request arrives)
        if core.idle:
            core.now = arrivals[i][0]
            continue
        if bound is None:
            bound = mixed_finish_bound(core)
            checked += bound is not None and bound > core.now
        step = core.step()
        if step.finished:
            assert bound is None or min(s.finished_at for s in step.finished) >= bound
            bound = None
    assert checked >= 5
