"""The simulated engine core: sequences, a vLLM-like continuous-batching scheduler, and the
timing model, with no I/O and no clock of its own.

`EngineCore.step()` forms one iteration the way vLLM v1's scheduler does by default:
- running sequences first (decodes and unfinished prefill chunks, in admission order), then
  waiting ones FCFS, all within `max_num_batched_tokens` (chunked prefill) and `max_num_seqs`,
  none before its arrival (a server loop catching up runs iterations whose start is past);
- a sequence whose next token needs a block that cannot be had preempts the most recently
  admitted running sequence (recompute: its blocks are freed, it returns to the head of the
  queue and later re-prefills prompt plus output, prefix cache hits included); no new
  sequence is admitted in an iteration that preempted;
- a request whose prompt plus `max_tokens` exceeds the context limit is refused up front.
An engine whose profile admits `Admission.NO_EVICT` (TensorRT-LLM's default capacity scheduler
policy, GUARANTEED_NO_EVICT; engine/profiles/) admits a request only when the KV blocks it needs
to finish (prompt plus `max_tokens`), beside those the running requests still need to finish, are
free, so nothing is ever preempted (vLLM, SGLang and ATOM admit on the prompt's blocks and preempt).
The step returns the iteration's modeled duration; the caller owns the clock (`now` only
accumulates the durations it is told about) and delivers the emitted tokens.
"""

from __future__ import annotations

import math
import random
from collections import deque
from itertools import repeat
from dataclasses import dataclass, field

from agentx.engine.config import EngineConfig
from agentx.engine.profiles import engine_profile
from agentx.engine.hints import Hints
from agentx.engine.hybrid import window_state
from agentx.engine.kvcache import KVCache, block_hashes
from agentx.engine.output import CORRUPTION, NATURAL_MEDIAN, NATURAL_SIGMA, output_token, prompt_digest
from agentx.engine.power import PowerModel
from agentx.engine.prefetch import Prefetcher
from agentx.engine.tiers import build_tiers
from agentx.engine.timing import Roofline, Work
from agentx.engine.mixed import mixed_window
from agentx.engine.window import decode_window, prefill_window, settle
from agentx.errors import AgentxError

@dataclass(eq=False)
class Sequence:
    id: str
    prompt: list[int]  # empty for a sequence known only by its length and block hashes
    max_tokens: int
    stop_len: int  # output length at which the answer ends (<= max_tokens)
    hashes: list[int] = field(default_factory=list)  # full-block hashes of the prompt
    output: list[int] = field(default_factory=list)
    computed: int = 0  # tokens (prompt, then output) whose KV is in cache
    capacity: int = 0  # tokens its KV blocks can hold
    arrival: float = 0.0  # modeled time
    cached_tokens: int = -1  # prompt tokens found in the cache at first admission
    scheduled_at: float | None = None  # modeled start of the first iteration that ran it
    first_token_at: float | None = None
    finish_reason: str | None = None  # "stop", "length" or "abort"
    preemptions: int = 0
    corrupt: bool = False  # fault: prefix-cache hits read corrupted KV (the output differs from cold)
    digest: int = 0  # of the prompt as the model sees it: the output is a function of it
    reasoning: int = 0  # leading output tokens the server streams as reasoning (chat)
    answer: object = None  # an eval problem's answer the server writes first (output.EvalAnswer); the core never reads it
    waiter: object = None  # the server's wake-up handle; the core never touches it
    delivered: int = 0  # output tokens whose iteration has ended in the caller's clock (server-owned)
    finished_at: float | None = None  # modeled end of the iteration that produced its last token
    prompt_len: int = -1  # default: len(prompt)
    replica: int = 0  # the core a router sent it to (engine/replicas.py)
    hints: Hints | None = None  # the harness hints it came with (engine/hints.py)
    due: list[float] = field(default_factory=list)  # modeled time each output token was due (server-owned)
    jumped: float = 0.0  # modeled seconds the server's schedule skipped (restarts) while it was in flight
    jumped_first: float = 0.0  # of them, before its first token
    # disaggregated prefill / decode (engine/disagg.py): the prefill stage's facts while the
    # request moves to its decode worker, and whether its prompt's KV came over the link there
    # (then its admission is no prefix-cache lookup: transferred KV is no hit)
    stage: object = None
    transferred: bool = False

    def __post_init__(self):
        if self.prompt_len < 0:
            self.prompt_len = len(self.prompt)

    @property
    def context_len(self) -> int:
        return self.prompt_len + len(self.output)


@dataclass
class PromptSources:
    """Prompt tokens by where their KV came from (vLLM's prompt_tokens_by_source)."""

    local_compute: int = 0
    local_cache_hit: int = 0
    external_kv_transfer: int = 0


@dataclass
class Step:
    duration: float  # modeled seconds
    emitted: list[Sequence]  # sequences that produced tokens (one; up to K + 1 with speculative decoding)
    finished: list[Sequence]
    batch_size: int
    new_tokens: int  # tokens computed (prefill chunks and decodes)
    decodes: int  # sequences that were decoding (their ITL is `duration`)


class EngineCore:
    def __init__(self, cfg: EngineConfig):
        self.cfg = cfg
        self.roofline = Roofline(cfg)
        bs = cfg.block_size
        # hybrid attention: the window layers' share of the KV memory (None: not modeled)
        self.hybrid, pool = window_state(cfg, self.roofline, max(1, self.roofline.kv_capacity_tokens // bs))
        self.kv = KVCache(
            num_blocks=pool,
            block_size=bs,
            eviction=cfg.kv_policy,
            tiers=build_tiers(cfg, self.roofline),
        )
        # --kv-policy prefetch with a DRAM tier: copies to HBM ahead of the requests (prefetch.py)
        self.prefetcher = Prefetcher(self.kv, self.roofline) if cfg.kv_policy == "prefetch" and self.kv.cpu_blocks else None
        self.max_model_len = cfg.max_model_len or self.roofline.model.max_context
        if self.kv.num_blocks * bs < self.max_model_len:  # vLLM refuses to start too
            raise AgentxError(
                f"the KV cache holds {self.kv.num_blocks * bs:,} tokens, fewer than the maximum model length "
                f"{self.max_model_len:,}; lower --max-model-len or add GPUs or memory"
            )
        self.vocab = self.roofline.model.vocab
        self.waiting: deque[Sequence] = deque()
        # the fewest tokens any waiting sequence has left (constant while it waits; None: to count), and
        self._waiting_left, self._waiting_fewest = 0, 0  # how many have that few (recounted after the last)
        self.running: list[Sequence] = []
        self.now = 0.0
        self.sources = PromptSources()
        self.generation_tokens = 0
        self.preemptions = 0
        self.draft_tokens = cfg.draft_tokens if cfg.spec_decode else 0
        self.accept_len = self.roofline.acceptance_length
        self.spec_steps = 0  # iterations that decoded (the acceptance pattern's clock)
        self.power = PowerModel(self.roofline.hw.idle_w, self.roofline.hw.tdp_w)  # per GPU of the group
        self._blocked = None  # (head of the queue, budget, the cache's gains) last found blocked
        self.version = 0  # changes whenever a request is queued or aborted or an iteration runs
        self.window_memo = self.owed = None  # window.py's: decode state at a version; prefill chunks owing blocks (settle)
        # e.g. TensorRT-LLM's GUARANTEED_NO_EVICT: admit only what can finish without evicting anything
        self.no_evict = engine_profile(cfg.engine).no_evict

    # ------------------------------------------------------------------ requests

    def context_error(self, prompt_len: int, max_tokens: int) -> str | None:
        """vLLM's message for a request that can never fit, or None."""
        if prompt_len + max_tokens <= self.max_model_len:
            return None
        return (
            f"This model's maximum context length is {self.max_model_len} tokens. However, you "
            f"requested {prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} "
            "in the completion). Please reduce the length of the messages or completion."
        )

    def new_sequence(self, seq_id: str, prompt: list[int], max_tokens: int | None, min_tokens: int = 0,
                     ignore_eos: bool = False, corrupt: bool = False) -> Sequence:
        if max_tokens is None:
            max_tokens = max(1, self.max_model_len - len(prompt))
        hashes = block_hashes(prompt, self.cfg.block_size)
        if ignore_eos:
            stop = max_tokens
        else:
            rng = random.Random(hash((self.cfg.seed, len(prompt), hashes[-1] if hashes else tuple(prompt))))
            stop = min(max_tokens, max(min_tokens, 1, round(rng.lognormvariate(0, NATURAL_SIGMA) * NATURAL_MEDIAN)))
        return Sequence(seq_id, prompt, max_tokens, stop, hashes=hashes, arrival=self.now, corrupt=corrupt,
                        digest=prompt_digest(prompt, hashes, self.cfg.block_size))

    def blocks_sequence(self, seq_id: str, prompt_len: int, hashes: list[int], max_tokens: int) -> Sequence:
        """A sequence known by its length and full-block hashes (no tokens), answering exactly
        `max_tokens` tokens (as with `ignore_eos`): the virtual-time runner's requests."""
        return Sequence(seq_id, [], max_tokens, max_tokens, hashes=hashes, arrival=self.now, prompt_len=prompt_len)

    def add(self, seq: Sequence, now: float | None = None) -> None:
        """Queue a sequence that arrived at `now` (the caller's clock; default: the core's)."""
        seq.arrival = self.now if now is None else now
        self.version += 1
        self.waiting.append(seq)
        self._waited(seq)

    def abort(self, seq: Sequence) -> None:
        if seq.finish_reason:
            return
        settle(self)
        seq.finish_reason = "abort"
        self.version += 1
        if seq in self.waiting:
            self.waiting.remove(seq)
            self._waiting_left = None
        else:
            self.running.remove(seq)
            self.kv.free_seq(seq)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    # --------------------------------------------------------------- iteration

    def step(self) -> Step | None:
        if self.idle:
            return None
        settle(self)
        self.version += 1
        work, scheduled = Work(), []
        self.kv.tiers.clock(self.now)
        budget = self.cfg.max_num_batched_tokens
        if self.prefetcher:
            self.prefetcher.land(self.now)
        preempted = self._schedule_running(work, scheduled, budget)
        budget -= work.new_tokens
        ssd_s = 0.0 if preempted else self._admit_waiting(work, scheduled, budget)
        duration = self.roofline.iteration_s(work)
        if duration:  # busy: the roofline time, without the fixed overhead and host-link and SSD waits
            duration += ssd_s
            busy = duration - self.roofline.overhead_s - self.roofline.transfer_s(work.loaded_tokens) - ssd_s
            self.power.iteration(self.now, duration, busy)
        self.now += duration
        self.kv.tiers.clock(self.now)  # the chunks' blocks are written through from here
        emitted, finished, decodes, tokens = [], [], 0, 0
        for seq, n, decode in scheduled:
            before, prompt_len = seq.computed, seq.prompt_len
            seq.computed = before + n
            out = seq.output
            if decode:  # n tokens kept: the last one's KV and n - 1 accepted drafts, plus n new tokens
                decodes += 1
                emit = n
            else:
                if before < prompt_len:  # prefill progressed: its full blocks become cacheable
                    self.commit_prefill(seq, before)
                emit = 1 if seq.computed == prompt_len + len(out) else 0
            if emit:
                self._emit(seq, emit)
                tokens += emit
                if seq.first_token_at is None:
                    seq.first_token_at = self.now
                emitted.append(seq)
                if len(out) >= seq.stop_len:
                    seq.finish_reason = "length" if len(out) >= seq.max_tokens else "stop"
                    seq.finished_at = self.now
                    finished.append(seq)
        self.generation_tokens += tokens
        if decodes:
            self.spec_steps += 1
        if finished:
            for seq in finished:
                self.free_finished(seq)
            self.running = [s for s in self.running if s.finish_reason is None]
        return Step(duration, emitted, finished, len(scheduled), work.new_tokens, decodes)

    def commit_prefill(self, seq: Sequence, before: int) -> None:
        """A prefill advanced from `before` computed tokens: its full blocks become cacheable, and
        the window checkpoints it passed are retained (hybrid attention, `hybrid.py`)."""
        end = min(seq.computed, seq.prompt_len) // self.cfg.block_size
        self.kv.commit(seq, seq.hashes, end)
        if self.hybrid:
            self.hybrid.computed(seq.hashes, before // self.cfg.block_size, min(end, len(seq.hashes)),
                                 seq.computed >= seq.prompt_len)

    def free_finished(self, seq: Sequence) -> None:
        """A finished sequence's blocks go to the free list, in its hints' order; a prefetch its
        hints announce starts (`prefetch.py`)."""
        self.kv.free_seq(seq, seq.hints, self.now)
        if self.prefetcher:
            self.prefetcher.finished(seq, self.now)

    def advance(self, until: float, itl: list | None = None) -> list[Sequence]:
        """Run the iterations that start before `until` (modeled time), up to the first one in
        which sequences finish (the caller may add requests before the next); return those
        sequences. Runs of pure-decode iterations, of a lone sequence's prefill chunks, and of decodes
        beside one prefill's chunks are computed together (`window.py`, `mixed.py`), with the same token
        times as `step()`. Each iteration with decodes appends (duration, decodes) to `itl` when given."""
        finished: list[Sequence] = []
        log = itl if itl is not None else []
        while (self.running or self.waiting) and self.now < until and not finished:
            if any(window(self, until, finished, log) for window in (decode_window, prefill_window, mixed_window)):
                continue
            step = self.step()
            finished.extend(step.finished)
            if step.decodes:
                log.append((step.duration, step.decodes))
        return finished

    def finish_bound(self) -> float:
        """A time before which no sequence of this core can finish: every iteration lasts at
        least the fixed overhead and emits at most ceil(AL) tokens per sequence."""
        per_step = math.ceil(self.accept_len)
        if self._waiting_left is None:
            lefts = [s.stop_len - len(s.output) for s in self.waiting]
            self._waiting_left = min(lefts, default=0)
            self._waiting_fewest = lefts.count(self._waiting_left)
        left = min((s.stop_len - len(s.output) for s in self.running), default=0)
        if self.waiting:
            left = min(left, self._waiting_left) if self.running else self._waiting_left
        return self.now + self.roofline.overhead_s * max(1, -(-left // per_step))

    def accepted(self) -> int:
        """Tokens each decoding sequence emits this iteration: AL on average, the same pattern
        for all (the integer steps of g x AL over the engine's decode iterations g)."""
        g, al = self.spec_steps, self.accept_len
        return math.floor((g + 1) * al) - math.floor(g * al)

    def _emit(self, seq: Sequence, n: int) -> None:
        """The next `n` output tokens: a function of the prompt (its digest) and the position. A
        sequence known only by its length and block hashes (`blocks_sequence`) has no token content:
        its tokens are counted, not drawn (zeros)."""
        out = seq.output
        if not seq.prompt and seq.prompt_len:
            out.extend(repeat(0, n))
            return
        digest, vocab = seq.digest, self.vocab
        out.extend([output_token(digest, i, vocab) for i in range(len(out), len(out) + n)])

    def _schedule_running(self, work: Work, scheduled: list, budget: int) -> bool:
        """Give running sequences their next tokens; True if anything was preempted."""
        preemptions, running, i = self.preemptions, self.running, 0
        new = pairs = reads = 0
        cost, accepted = 1 + self.draft_tokens, self.accepted()
        while i < len(running) and budget > 0:
            seq = running[i]
            c = seq.computed
            n = seq.prompt_len + len(seq.output) - c
            decode = n == 1 and c >= seq.prompt_len
            if decode:  # verify the drafts: `cost` tokens computed, `n` kept
                if cost > budget:
                    break
                n, size = min(accepted, seq.stop_len - len(seq.output)), cost
            else:
                n = size = min(n, budget)
            if c + n > seq.capacity and not self._make_room(seq, c + n):
                break
            scheduled.append((seq, n, decode))
            new += size
            pairs += size * c + size * (size + 1) // 2
            reads += c
            budget -= size
            i += 1
        work.new_tokens += new
        work.attn_pairs += pairs
        work.kv_read_tokens += reads
        work.sequences += i  # the sequences scheduled
        return self.preemptions > preemptions

    def _make_room(self, seq: Sequence, tokens: int) -> bool:
        """Grow `seq` to `tokens`, preempting from the back; False if `seq` itself was preempted."""
        while not self.kv.grow(seq, tokens):
            victim = self.running.pop()
            self._preempt(victim)
            if victim is seq:
                return False
        seq.capacity = len(self.kv.seqs[seq].blocks) * self.cfg.block_size
        return True

    def _admit_waiting(self, work: Work, scheduled: list, budget: int) -> float:
        """Admit what fits; returns the seconds of SSD reads the admitted prompts' hits need."""
        bs, ssd_s = self.cfg.block_size, 0.0
        outstanding = self.outstanding_blocks() if self.no_evict and self.waiting else 0
        while self.waiting and budget > 0 and len(self.running) < self.cfg.max_num_seqs:
            seq = self.waiting[0]
            if seq.arrival > self.now:  # arrived after this iteration's start (a server loop catching up)
                break
            total, cacheable, g, c, n = self._admission(seq, budget)
            if self.no_evict and self.final_blocks(seq) - g + outstanding > self.kv.free_blocks:
                return ssd_s
            hit = (g + c) * bs
            alloc = self.kv.allocate(seq, cacheable, hit + n, prompt_tokens=total, count=not seq.transferred)
            if alloc is None:
                return ssd_s
            ssd_s += self.kv.tiers.read_s(alloc.ssd_hit_blocks)
            seq.capacity = len(alloc.blocks) * bs
            if self.no_evict:
                outstanding += max(0, self.final_blocks(seq) - len(alloc.blocks))
            if self.prefetcher:  # a hit on blocks still in flight: the first iteration waits for them
                wait = self.prefetcher.wait(alloc.blocks[: alloc.gpu_hit_blocks], self.now)
                work.loaded_tokens += math.ceil(wait / self.roofline.transfer_s(1)) if wait else 0
            self.waiting.popleft()
            if seq.stop_len - len(seq.output) == self._waiting_left:
                self._waiting_fewest -= 1
                if not self._waiting_fewest:
                    self._waiting_left = None  # (it was the last with the fewest)
            self.running.append(seq)
            seq.computed = hit
            if seq.cached_tokens < 0:  # first admission (not a resume after preemption)
                if self.hybrid:
                    self.hybrid.admitted(g + c, bs)
                seq.cached_tokens = hit
                seq.scheduled_at = self.now
                if seq.corrupt and hit:
                    seq.digest ^= CORRUPTION
                self.sources.local_cache_hit += g * bs
                self.sources.external_kv_transfer += c * bs
                self.sources.local_compute += total - hit
            work.loaded_tokens += c * bs
            scheduled.append((seq, n, False))
            work.add(seq.computed, n)
            budget -= n
        return ssd_s

    def final_blocks(self, seq: Sequence) -> int:
        """KV blocks `seq` holds when it finishes at `max_tokens` (what GUARANTEED_NO_EVICT reserves)."""
        return -(-(seq.prompt_len + seq.max_tokens) // self.cfg.block_size)

    def outstanding_blocks(self) -> int:
        """Blocks the running sequences still need to finish at their `max_tokens`."""
        bs = self.cfg.block_size
        return sum(max(0, self.final_blocks(s) - s.capacity // bs) for s in self.running)

    def _admission(self, seq: Sequence, budget: int) -> tuple:
        """(context tokens, cacheable hashes, GPU hit blocks, CPU hit blocks, tokens to compute)."""
        bs, total = self.cfg.block_size, seq.context_len
        cacheable = seq.hashes[: (total - 1) // bs]  # at least one token is always computed
        g, c = self.kv.match(cacheable)
        if self.hybrid:  # a hit resumes only where the window layers' KV is held
            cacheable = cacheable[: self.hybrid.usable(cacheable, g + c)]
            g, c = min(g, len(cacheable)), max(0, len(cacheable) - g)
        return total, cacheable, g, c, min(total - (g + c) * bs, budget)

    def admission_blocked(self, budget: int) -> bool:
        """True when the head of the queue cannot be admitted with `budget` tokens left; it stays
        so while the cache only loses free blocks (fewer free blocks never admit more)."""
        if not self.waiting or budget <= 0 or len(self.running) >= self.cfg.max_num_seqs:
            return True
        key = (self.waiting[0], budget, self.kv.gains)
        if key == self._blocked:  # nothing since that could have unblocked it (a decode window's growth)
            return True
        _, cacheable, g, c, n = self._admission(self.waiting[0], budget)
        fits = not self.no_evict or (self.final_blocks(self.waiting[0]) - g + self.outstanding_blocks()
                                     <= self.kv.free_blocks)
        if fits and self.kv.can_allocate(cacheable, (g + c) * self.cfg.block_size + n):
            return False
        self._blocked = key
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.kv.free_seq(seq)
        seq.computed = seq.capacity = 0
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)
        self._waited(seq)

    def _waited(self, seq: Sequence) -> None:
        """`seq` joined the waiting queue: the fewest tokens left there, kept up to date."""
        left = seq.stop_len - len(seq.output)
        if len(self.waiting) == 1 or (self._waiting_left is not None and left < self._waiting_left):
            self._waiting_left, self._waiting_fewest = left, 1
        elif left == self._waiting_left:
            self._waiting_fewest += 1
