"""The simulated engine core: sequences, a vLLM-like continuous-batching scheduler, and the
timing model, with no I/O and no clock of its own.

`EngineCore.step()` forms one iteration the way vLLM v1's scheduler does by default:
- running sequences first (decodes and unfinished prefill chunks, in admission order), then
  waiting ones FCFS, all within `max_num_batched_tokens` (chunked prefill) and `max_num_seqs`;
- a sequence whose next token needs a block that cannot be had preempts the most recently
  admitted running sequence (recompute: its blocks are freed, it returns to the head of the
  queue and later re-prefills prompt plus output, prefix cache hits included); no new
  sequence is admitted in an iteration that preempted;
- a request whose prompt plus `max_tokens` exceeds the context limit is refused up front.
The step returns the iteration's modeled duration; the caller owns the clock (`now` only
accumulates the durations it is told about) and delivers the emitted tokens.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from agentx.engine.config import EngineConfig
from agentx.engine.kvcache import KVCache, block_hashes
from agentx.engine.timing import Roofline, Work
from agentx.errors import AgentxError

# Without ignore_eos the simulated model ends its answer at a length drawn per prompt from a
# log-normal fitted to the AgentX corpus's output lengths (median 441 tokens, sigma 1.32).
NATURAL_MEDIAN, NATURAL_SIGMA = 441, 1.32
CORRUPTION = 0x5A5A_5A5A  # what a corrupted cached block changes in the digest its reader sees


def prompt_digest(prompt: list[int], hashes: list[int], block_size: int) -> int:
    """A deterministic digest of a whole prompt (its last full block's chained hash and the rest)."""
    return hash((hashes[-1] if hashes else 0, tuple(prompt[len(hashes) * block_size:])))


def output_token(digest: int, position: int, vocab: int) -> int:
    """The simulated model's greedy answer: token `position` is a function of the prompt only."""
    return hash((digest, position)) % vocab


@dataclass(eq=False)
class Sequence:
    id: str
    prompt: list[int]
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
    waiter: object = None  # the server's wake-up handle; the core never touches it
    delivered: int = 0  # output tokens whose iteration has ended in the caller's clock (server-owned)

    def __post_init__(self):
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
    emitted: list[Sequence]  # sequences that produced one token this iteration
    finished: list[Sequence]
    batch_size: int
    new_tokens: int  # tokens computed (prefill chunks and decodes)
    decodes: int  # sequences that were decoding (their ITL is `duration`)


class EngineCore:
    def __init__(self, cfg: EngineConfig):
        self.cfg = cfg
        self.roofline = Roofline(cfg)
        bs = cfg.block_size
        self.kv = KVCache(
            num_blocks=max(1, self.roofline.kv_capacity_tokens // bs),
            block_size=bs,
            cpu_blocks=self.roofline.cpu_capacity_tokens // bs,
        )
        self.max_model_len = cfg.max_model_len or self.roofline.model.max_context
        if self.kv.num_blocks * bs < self.max_model_len:  # vLLM refuses to start too
            raise AgentxError(
                f"the KV cache holds {self.kv.num_blocks * bs:,} tokens, fewer than the maximum model length "
                f"{self.max_model_len:,}; lower --max-model-len or add GPUs or memory"
            )
        self.vocab = self.roofline.model.vocab
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.now = 0.0
        self.sources = PromptSources()
        self.generation_tokens = 0
        self.preemptions = 0

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

    def add(self, seq: Sequence, now: float | None = None) -> None:
        """Queue a sequence that arrived at `now` (the caller's clock; default: the core's)."""
        seq.arrival = self.now if now is None else now
        self.waiting.append(seq)

    def abort(self, seq: Sequence) -> None:
        if seq.finish_reason:
            return
        seq.finish_reason = "abort"
        if seq in self.waiting:
            self.waiting.remove(seq)
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
        work, scheduled = Work(), []
        budget = self.cfg.max_num_batched_tokens
        preempted = self._schedule_running(work, scheduled, budget)
        budget -= work.new_tokens
        if not preempted:
            self._admit_waiting(work, scheduled, budget)
        duration = self.roofline.iteration_s(work)
        self.now += duration
        emitted, finished, decodes = [], [], 0
        bs, vocab = self.cfg.block_size, self.vocab
        for seq, n in scheduled:
            before, prompt_len = seq.computed, seq.prompt_len
            seq.computed = before + n
            if before < prompt_len:  # prefill progressed: its full blocks become cacheable
                self.kv.commit(seq, seq.hashes[: min(seq.computed, prompt_len) // bs])
            elif n == 1:
                decodes += 1
            out = seq.output
            if seq.computed == prompt_len + len(out):
                out.append(output_token(seq.digest, len(out), vocab))
                if seq.first_token_at is None:
                    seq.first_token_at = self.now
                emitted.append(seq)
                if len(out) >= seq.stop_len:
                    seq.finish_reason = "length" if len(out) >= seq.max_tokens else "stop"
                    finished.append(seq)
        self.generation_tokens += len(emitted)
        if finished:
            for seq in finished:
                self.kv.free_seq(seq)
            self.running = [s for s in self.running if s.finish_reason is None]
        return Step(duration, emitted, finished, len(scheduled), work.new_tokens, decodes)

    def _schedule_running(self, work: Work, scheduled: list, budget: int) -> bool:
        """Give running sequences their next tokens; True if anything was preempted."""
        preemptions, running, i = self.preemptions, self.running, 0
        new = pairs = reads = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            c = seq.computed
            n = seq.prompt_len + len(seq.output) - c
            if n > budget:
                n = budget
            if c + n > seq.capacity and not self._make_room(seq, c + n):
                break
            scheduled.append((seq, n))
            new += n
            pairs += n * c + n * (n + 1) // 2
            reads += c
            budget -= n
            i += 1
        work.new_tokens += new
        work.attn_pairs += pairs
        work.kv_read_tokens += reads
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

    def _admit_waiting(self, work: Work, scheduled: list, budget: int) -> None:
        bs = self.cfg.block_size
        while self.waiting and budget > 0 and len(self.running) < self.cfg.max_num_seqs:
            seq = self.waiting[0]
            total = seq.context_len
            cacheable = seq.hashes[: (total - 1) // bs]  # at least one token is always computed
            g, c = self.kv.match(cacheable)
            hit = (g + c) * bs
            n = min(total - hit, budget)
            alloc = self.kv.allocate(seq, cacheable, hit + n, prompt_tokens=total)
            if alloc is None:
                return
            seq.capacity = len(alloc.blocks) * bs
            self.waiting.popleft()
            self.running.append(seq)
            seq.computed = hit
            if seq.cached_tokens < 0:  # first admission (not a resume after preemption)
                seq.cached_tokens = hit
                seq.scheduled_at = self.now
                if seq.corrupt and hit:
                    seq.digest ^= CORRUPTION
                self.sources.local_cache_hit += g * bs
                self.sources.external_kv_transfer += c * bs
                self.sources.local_compute += total - hit
            work.loaded_tokens += c * bs
            scheduled.append((seq, n))
            work.add(seq.computed, n)
            budget -= n

    def _preempt(self, seq: Sequence) -> None:
        self.kv.free_seq(seq)
        seq.computed = seq.capacity = 0
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)
