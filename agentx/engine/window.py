"""Decode windows: runs of engine iterations computed together (for the virtual-time runner).

Between scheduling events the batch does not change: when every running sequence is decoding,
nothing can be admitted and no block is short, iteration j differs from iteration 0 only by the
context the decodes attend (each sequence grows by the tokens it kept). Its work is then a
function of three integers (batch size, summed context, drafts), so a window of k iterations
costs O(k) float operations instead of O(k x batch) Python objects, and the sequences' state
(tokens, blocks, finishes) is written once at its end.

A window stops before an iteration that would start at or after `until` (an arrival or a
sample), after the iteration in which the first sequence finishes, and before the free blocks
run out (growth that could preempt goes through `EngineCore.step`). The blocks sequences grow
into are taken in the order `step` takes them (iteration, then running order), so the cache
ends in the same state; token times equal the step-by-step core's exactly (same integer work,
same float operations in the same order).
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from agentx.engine.timing import Work


def decode_window(core, until: float, finished: list, itl: list) -> bool:
    """Run a window of >= 2 pure-decode iterations on `core`; False (nothing done) if none fits."""
    window = _window_state(core)
    if window is None:
        return False
    (batch, size, context, rem), limit = window
    logged = len(itl)
    cumulative, now = _iterations(core, until, batch, size, context, min(rem), limit, itl)
    if len(cumulative) < 2:
        del itl[logged:]
        return False
    core.version += 1
    start, overhead, transfer = core.now, core.roofline.overhead_s, core.roofline.transfer_s(0)
    for duration, _ in itl[logged:]:  # each iteration's power, as step() records it
        core.power.iteration(start, duration, duration - overhead - transfer)
        start += duration
    core.now = now
    _apply(core, cumulative, rem, finished)
    return True


def decode_finish_bound(core) -> float | None:
    """A time before which `core`, left alone (no arrivals), cannot finish a sequence, computed
    without running it; None when the batch is not pure decode. Until its first finish the batch
    stays the same and only its context grows, so no iteration is shorter than the next one; at
    least n of them end before a sequence can finish or the free blocks run out (each keeps at
    most ceil(AL) tokens). A margin of 1e-6 of the span covers the rounding of summing the
    durations one by one."""
    window = _window_state(core)
    if window is None:
        return None
    (batch, size, context, rem), limit = window
    n = min(min(rem), limit) // math.ceil(core.accept_len)
    duration = core.roofline.iteration_s(decode_work(batch, size, context))
    return core.now + duration * n * (1 - 1e-6)


def decode_work(batch: int, size: int, context: int) -> Work:
    """A pure-decode iteration's work: `batch` sequences computing `size` tokens each (1 + drafts)
    over `context` tokens in cache between them (the decode window's shortest iteration, its first)."""
    return Work(batch * size, size * context + batch * size * (size + 1) // 2, context, sequences=batch)


def prefill_window(core, until: float, finished: list, itl: list) -> bool:
    """Run iterations of a lone prefill on `core` together (>= 2, or >= 1 without hybrid
    attention); False (nothing done) if none fits.

    When one sequence runs and it is prefilling with more than a full budget of tokens left, each
    iteration computes exactly `max_num_batched_tokens` of its prompt and nothing else: no token is
    emitted, nothing can be admitted (no budget is left), and its work differs from the previous
    iteration's only by the context. Its blocks are taken and committed once at the end: the cache
    ends as after the same iterations one by one as long as no block runs short (the window stops
    before) and no commit finds its blocks cached by another sequence (none else runs; the window
    is not opened when the next one is cached already), so taking and registering commute. Not with
    an offload tier: its store path is clocked iteration by iteration (`tiers.py`).

    Without hybrid attention the blocks are not even taken at the window's end: the core owes them
    (`EngineCore.owed`) until anything reads or changes its cache (`settle`: the core's next
    step, an abort, a scrape, a router's or a transfer's look). Nothing else touches that cache in
    between, so one take and one registration of all the owed chunks leave it as the windows would,
    and a window of one iteration is worth running: the virtual runner's cores often may run only
    one iteration before another core's event (issue #42)."""
    from agentx.engine.kvcache import CHAINS

    if len(core.running) != 1 or core.kv.cpu_blocks:  # (a tier's store path is clocked per iteration)
        return False
    seq, kv, budget = core.running[0], core.kv, core.cfg.max_num_batched_tokens
    c, bs = seq.computed, core.cfg.block_size
    left = seq.context_len - c
    iterations = (left - 1) // budget  # those that leave more than nothing of the prompt to compute
    least = 2 if core.hybrid else 1  # (hybrid: its checkpoints are committed at the window's end)
    if iterations < least or type(seq.hashes) not in CHAINS:
        return False
    if core.owed is not None and core.owed[0] is not seq:
        settle(core)
    alloc = kv.seqs[seq]
    have, free = len(alloc.blocks), kv.free_blocks  # (their sum holds while blocks are owed)
    iterations = min(iterations, (((have + free) * bs - c) // budget))  # blocks for all of them
    if iterations < least or (c < seq.prompt_len and _next_block_cached(kv, seq.hashes, alloc)):
        return False
    roof, now, cumulative, durations = core.roofline, core.now, c, []
    pairs_own = budget * (budget + 1) // 2
    while len(durations) < iterations and now < until:
        duration = roof.iteration_s(Work(budget, budget * cumulative + pairs_own, cumulative, sequences=1))
        durations.append(duration)
        now += duration
        cumulative += budget
    if len(durations) < least:
        return False
    start, overhead, transfer = core.now, roof.overhead_s, roof.transfer_s(0)
    for duration in durations:  # each iteration's power, as step() records it
        core.power.iteration(start, duration, duration - overhead - transfer)
        start += duration
    core.now = now
    core.version += 1
    if core.owed is None:
        core.owed = (seq, c)
    seq.capacity = max(seq.capacity, -(-cumulative // bs) * bs)  # (what `grow` gives it)
    seq.computed = cumulative
    if core.hybrid:  # (its checkpoints: committed now)
        settle(core)
    return True


def settle(core) -> None:
    """Take and register the blocks of the lone prefill chunks run without them (`core.owed`): the
    cache as after those chunks one by one. Whoever reads or changes the cache calls this first."""
    if core.owed is None:
        return
    seq, before = core.owed
    core.owed = None
    core.kv.grow(seq, seq.computed)
    if before < seq.prompt_len:
        core.commit_prefill(seq, before)


def kv_usage(core) -> float:
    """The cache's usage as `settle` would leave it, without settling: the owed blocks are taken
    from the free ones (a scrape every modeled second need not take them chunk by chunk)."""
    kv = core.kv
    if core.owed is None:
        return kv.usage
    seq = core.owed[0]
    owed = seq.capacity // kv.block_size - len(kv.seqs[seq].blocks)
    return 1.0 - (kv.free_blocks - owed) / kv.num_blocks


def prefill_finish_bound(core) -> float | None:
    """A time before which `core`, left alone, cannot finish a sequence while one sequence runs and
    it prefills with more than a budget of tokens left (else None): until the iteration in which its
    prompt ends, each iteration gives it the whole budget, so nothing else computes or is admitted.
    A preemption (its blocks run short) only delays it: it heads the queue again, its prefix hits at
    most what it had computed (no block past it is cached, nobody else registers one). Those
    iterations each last at least one of a budget of tokens at no context."""
    from agentx.engine.kvcache import CHAINS

    if len(core.running) != 1 or core.kv.cpu_blocks:
        return None
    seq, budget = core.running[0], core.cfg.max_num_batched_tokens
    iterations = -(-(seq.context_len - seq.computed) // budget)  # the last one ends its prompt
    if iterations < 2 or type(seq.hashes) not in CHAINS:
        return None
    if seq.computed < seq.prompt_len and _next_block_cached(core.kv, seq.hashes, core.kv.seqs[seq]):
        return None
    roof = core.roofline
    shortest = roof.iteration_s(Work(budget, budget * (budget + 1) // 2, 0, sequences=1))
    return core.now + ((iterations - 1) * shortest + roof.overhead_s) * (1 - 1e-6)


def _next_block_cached(kv, hashes, alloc) -> bool:
    """Whether the first block the sequence has not registered is cached (by another sequence)."""
    k = alloc.known
    return k < len(hashes) and bool(kv._cached_prefix(hashes, k, alloc.blocks[k - 1] if k else -1))


def _window_state(core) -> tuple[tuple, int] | None:
    """(`_decode_state`, its emission limit), remembered until the core changes (`version`: a
    request queued or aborted, an iteration or window run; its clock; its cache's gains): the
    virtual runner's finish bound and the window that follows it read the same state."""
    key = (core.version, core.now, core.kv.gains)
    memo = core.window_memo
    if memo is not None and memo[0] == key:
        return memo[1]
    state = _decode_state(core)
    window = None if state is None else (state, _emission_limit(core, state[3]))
    core.window_memo = (key, window)
    return window


def _decode_state(core) -> tuple[int, int, int, list[int]] | None:
    """(batch, tokens each decode computes, summed context, tokens left per sequence) when every
    running sequence decodes and nothing can be admitted; else None."""
    running, cfg = core.running, core.cfg
    size = 1 + core.draft_tokens  # tokens each decode computes
    batch = len(running)
    if not batch or batch * size > cfg.max_num_batched_tokens:
        return None
    context, rem = 0, []
    for seq in running:
        c, out = seq.computed, len(seq.output)
        if c < seq.prompt_len or c != seq.prompt_len + out - 1:
            return None  # a prefill chunk (or a recompute after preemption) is in the batch
        context += c
        rem.append(seq.stop_len - out)
    if core.waiting and not core.admission_blocked(cfg.max_num_batched_tokens - batch * size):
        return None
    return batch, size, context, rem


def _emission_limit(core, rem: list[int]) -> int:
    """The most tokens each sequence may keep before the free blocks run out, up to the most a
    window can keep: it ends with the iteration in which the first sequence finishes, so it keeps
    at most min(rem) - 1 + ceil(AL) (a larger limit is never reached: `_iterations` and
    `decode_finish_bound` read the same from this one)."""
    bs, free = core.cfg.block_size, core.kv.free_blocks
    cap = min(rem) - 1 + math.ceil(core.accept_len)
    slack = np.fromiter([s.capacity - s.computed for s in core.running], np.int64, len(rem))
    left = np.fromiter(rem, np.int64, len(rem))

    def blocks(e: int) -> int:  # (integers in numpy: a binary search costs ~13 of these per window)
        over = np.minimum(left, e) - slack
        return int((-(-over[over > 0] // bs)).sum())

    top = min(max(rem), cap)
    if blocks(top) <= free:
        return top
    lo, hi = 0, top  # blocks(lo) <= free < blocks(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if blocks(mid) <= free else (lo, mid)
    return lo


def _iterations(core, until: float, batch: int, size: int, context: int, first_end: int, limit: int,
                itl: list) -> tuple[list[int], float]:
    """Time the window's iterations; return the tokens kept by the end of each, and its end."""
    roof, al, g = core.roofline, core.accept_len, core.spec_steps
    pairs_per_seq = size * (size + 1) // 2
    kept, cumulative, now = 0, [], core.now
    while now < until and kept < first_end:
        a = math.floor((g + 1) * al) - math.floor(g * al)
        if kept + a > limit:
            break
        duration = roof.iteration_s(Work(batch * size, size * context + batch * pairs_per_seq, context, sequences=batch))
        now += duration
        itl.append((duration, batch))
        kept += a
        context += batch * a  # the last iteration may keep less for a finishing sequence; it ends the window
        cumulative.append(kept)
        g += 1
    return cumulative, now


def _apply(core, cumulative: list[int], rem: list[int], finished: list) -> None:
    """Write the window's outcome: blocks (in step order), tokens and finishes."""
    kv, bs, running = core.kv, core.cfg.block_size, core.running
    kept_total = cumulative[-1]
    grows = []
    for i, seq in enumerate(running):
        kept = min(kept_total, rem[i])
        have, need = seq.capacity // bs, -(-(seq.computed + kept) // bs)
        for b in range(have, need):  # block b is first needed once the sequence keeps past it
            grows.append((bisect_right(cumulative, b * bs - seq.computed), i, b))
    grow_in_order(kv, running, grows, bs)
    done, tokens = keep_decoded(core, running, rem, kept_total)
    core.generation_tokens += tokens
    core.spec_steps += len(cumulative)
    for seq in done:
        core.free_finished(seq)
    if done:
        core.running = [s for s in running if s.finish_reason is None]
        finished.extend(done)


def keep_decoded(core, seqs: list, rem: list[int], kept_total: int) -> tuple[list, int]:
    """Each decoding sequence keeps min(kept_total, its remaining) tokens (its blocks already
    grown): (the sequences that finished, the tokens kept)."""
    bs, done, tokens = core.cfg.block_size, [], 0
    for i, seq in enumerate(seqs):
        kept = min(kept_total, rem[i])
        seq.capacity = len(core.kv.seqs[seq].blocks) * bs
        seq.computed += kept
        core._emit(seq, kept)
        tokens += kept
        if len(seq.output) >= seq.stop_len:
            seq.finish_reason = "length" if len(seq.output) >= seq.max_tokens else "stop"
            seq.finished_at = core.now
            done.append(seq)
    return done, tokens


def grow_in_order(kv, running: list, grows: list, bs: int) -> None:
    """Take the blocks `grows` lists as (iteration, running index, block), in that order: a run of
    them for one sequence in one take (the same blocks, in the same order, as one at a time)."""
    grows.sort()
    k, n = 0, len(grows)
    while k < n:
        i, b = grows[k][1], grows[k][2]
        k += 1
        while k < n and grows[k][1] == i:
            b = grows[k][2]
            k += 1
        kv.grow(running[i], (b + 1) * bs)
