"""Mixed windows: runs of iterations in which every running sequence decodes but the last one,
which prefills a chunk of its prompt with the rest of the budget (for the virtual-time runner,
issue #42).

That is the common shape of a busy engine between admissions: continuous batching admits a
request with whatever budget the decodes leave, and its prompt then takes that rest of the budget
each iteration until it is computed. Nothing is admitted meanwhile (no budget is left) and the
batch does not change, so iteration j's work is a function of integers: the decodes' summed
context (as in a decode window, `window.py`) and the chunk's own context, `c + j x chunk`. The
window stops before the iteration that would complete the prompt (it emits the first token and
leaves budget to admit), after the first iteration in which a decode finishes, before an
iteration that starts at or after `until`, and before the free blocks run short (no growth may
preempt). The blocks are taken in step order (iteration, then running order, the prefill last);
the prompt's blocks are registered at the end: nobody else registers any (decodes register
nothing) and none of them is cached (the window is not opened when the next one is), so taking
and registering commute, as in a prefill window. Token times, blocks, counters and power equal
the step-by-step core's (same integer work, same float operations in the same order;
tests/engine/test_window.py).
"""

from __future__ import annotations

import math
import weakref
from bisect import bisect_right

from agentx.engine.timing import Work
from agentx.engine.window import grow_in_order, keep_decoded


def mixed_window(core, until: float, finished: list, itl: list) -> bool:
    """Run >= 2 mixed iterations on `core` together; False (nothing done) if none fits."""
    state = mixed_state(core)
    if state is None:
        return False
    batch, size, context, rem, chunk, most = state
    seq = core.running[-1]
    logged = len(itl)
    cumulative, durations = _iterations(core, until, batch, size, context, min(rem), seq.computed, chunk, most)
    k = _fitting(core, cumulative, rem, seq, chunk)
    if k < 2:
        return False
    del cumulative[k:], durations[k:]
    now, start = core.now, core.now
    overhead, transfer = core.roofline.overhead_s, core.roofline.transfer_s(0)
    for duration in durations:  # each iteration's power, as step() records it
        core.power.iteration(start, duration, duration - overhead - transfer)
        start += duration
        now += duration
        itl.append((duration, batch))
    assert len(itl) == logged + k
    core.version += 1
    core.now = now
    _apply(core, cumulative, rem, chunk, finished)
    return True


def mixed_state(core) -> tuple | None:
    """(decodes, tokens each computes, their summed context, tokens left per decode, the chunk,
    the most iterations the prefill may run without completing its prompt), or None; remembered
    while the core is unchanged (its version, clock and cache's gains: the runner's finish bound
    and the window that follows it read the same state)."""
    key = (core.version, core.now, core.kv.gains)
    memo = _MEMO.get(core)
    if memo is not None and memo[0] == key:
        return memo[1]
    state = _mixed_state(core)
    _MEMO[core] = (key, state)
    return state


_MEMO: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # core -> (key, mixed_state)


def _mixed_state(core) -> tuple | None:
    from agentx.engine.kvcache import CHAINS
    from agentx.engine.window import _next_block_cached

    running, cfg, kv = core.running, core.cfg, core.kv
    if len(running) < 2 or core.hybrid or kv.cpu_blocks or core.owed is not None:
        return None
    size, batch = 1 + core.draft_tokens, len(running) - 1
    chunk = cfg.max_num_batched_tokens - batch * size
    seq = running[-1]
    if chunk <= 0 or seq.output or seq.computed >= seq.prompt_len or type(seq.hashes) not in CHAINS:
        return None
    most = (seq.prompt_len - seq.computed - 1) // chunk  # iterations that leave some of the prompt
    if most < 2:
        return None
    context, rem = 0, []
    for s in running[:-1]:
        c, out = s.computed, len(s.output)
        if c < s.prompt_len or c != s.prompt_len + out - 1:
            return None
        context += c
        rem.append(s.stop_len - out)
    if _next_block_cached(kv, seq.hashes, kv.seqs[seq]):
        return None
    return batch, size, context, rem, chunk, most


def mixed_finish_bound(core) -> float | None:
    """A time before which `core`, left alone, cannot finish a sequence while it is in a mixed
    window's shape (else None): until then the batch stays the same and its contexts only grow, so
    no iteration is shorter than the next one. A decode with r tokens left needs at least
    r / ceil(AL) iterations; the prefill, and whatever is admitted after it (no budget is left
    before), at least the iterations its prompt takes; a preemption (blocks short) comes no earlier
    than the first iteration whose growth may not fit, and admits nothing in it. Arrivals wait for
    budget like the queue. A margin of 1e-6 of the span covers summing the durations one by one."""
    state = mixed_state(core)
    if state is None:
        return None
    batch, size, context, rem, chunk, most = state
    seq, most_kept = core.running[-1], math.ceil(core.accept_len)
    n = min(min(rem) // most_kept, most + 1)
    n = min(n, _fitting(core, [k * most_kept for k in range(1, n + 1)], rem, seq, chunk) + 1)
    pairs = size * context + batch * (size * (size + 1) // 2) + chunk * seq.computed + chunk * (chunk + 1) // 2
    work = Work(batch * size + chunk, pairs, context + seq.computed, sequences=batch + 1)
    duration = core.roofline.iteration_s(work)
    return core.now + duration * n * (1 - 1e-6)


def _iterations(core, until: float, batch: int, size: int, context: int, first_end: int, prefilled: int,
                chunk: int, most: int) -> tuple[list[int], list[float]]:
    """The decodes' tokens kept by the end of each iteration, and each iteration's duration."""
    roof, al, g = core.roofline, core.accept_len, core.spec_steps
    pairs_per_seq, pairs_chunk = size * (size + 1) // 2, chunk * (chunk + 1) // 2
    kept, cumulative, durations, now = 0, [], [], core.now
    while now < until and kept < first_end and len(durations) < most:
        a = math.floor((g + 1) * al) - math.floor(g * al)
        work = Work(batch * size + chunk, size * context + batch * pairs_per_seq + chunk * prefilled + pairs_chunk,
                    context + prefilled, sequences=batch + 1)
        duration = roof.iteration_s(work)
        now += duration
        durations.append(duration)
        kept += a
        context += batch * a  # (the last iteration may keep less for a finishing decode: it ends the window)
        prefilled += chunk
        cumulative.append(kept)
        g += 1
    return cumulative, durations


def _needed(core, cumulative: list[int], rem: list[int], seq, chunk: int, k: int) -> int:
    """Fresh blocks the first k iterations take."""
    bs, kept = core.cfg.block_size, cumulative[k - 1]
    need = max(0, -(-(seq.computed + k * chunk) // bs) - seq.capacity // bs)
    for s, r in zip(core.running, rem):
        need += max(0, -(-(s.computed + min(kept, r)) // bs) - s.capacity // bs)
    return need


def _fitting(core, cumulative: list[int], rem: list[int], seq, chunk: int) -> int:
    """The most of the iterations whose blocks are free (growth never runs short)."""
    free, k = core.kv.free_blocks, len(cumulative)
    if k < 1 or _needed(core, cumulative, rem, seq, chunk, k) <= free:
        return k
    lo, hi = 0, k  # needed(lo) <= free < needed(hi); needed(0) = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _needed(core, cumulative, rem, seq, chunk, mid) <= free else (lo, mid)
    return lo


def _apply(core, cumulative: list[int], rem: list[int], chunk: int, finished: list) -> None:
    """Write the window's outcome: blocks (in step order), tokens, the prompt's blocks registered,
    finishes."""
    kv, bs, running = core.kv, core.cfg.block_size, core.running
    kept_total, k = cumulative[-1], len(cumulative)
    seq, last = running[-1], len(running) - 1
    grows = []
    for i, s in enumerate(running[:-1]):
        kept = min(kept_total, rem[i])
        for b in range(s.capacity // bs, -(-(s.computed + kept) // bs)):  # first needed once it keeps past b
            grows.append((bisect_right(cumulative, b * bs - s.computed), i, b))
    before = seq.computed
    start, end = seq.capacity // bs, -(-(before + k * chunk) // bs)
    for j in range(k):  # block b is first needed in iteration (b x bs - before) // chunk: per iteration only
        # its last such block (`grow_in_order` takes a run of one sequence's blocks in one take)
        lo, hi = max(start, -(-(before + j * chunk) // bs)), min(end, -(-(before + (j + 1) * chunk) // bs))
        if hi > lo:
            grows.append((j, last, hi - 1))
    grow_in_order(kv, running, grows, bs)
    done, tokens = keep_decoded(core, running[:-1], rem, kept_total)
    seq.capacity = len(kv.seqs[seq].blocks) * bs
    seq.computed = before + k * chunk
    core.commit_prefill(seq, before)
    core.generation_tokens += tokens
    core.spec_steps += k
    for s in done:
        core.free_finished(s)
    if done:
        core.running = [s for s in running if s.finish_reason is None]
        finished.extend(done)
