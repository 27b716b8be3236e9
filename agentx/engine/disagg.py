"""Disaggregated prefill / decode (SPEC section 6): prefill workers compute each prompt and its
first token, the prompt's KV crosses to a decode worker at the link's modeled cost, and the decode
worker produces the remaining tokens (Dynamo / llm-d / SGLang PD as InferenceX runs them). One
implementation for `sim serve` (engine/serve/) and `sim bench` (virtual/runner.py): both hand
`Workers` the sequences their cores finish and the KV arrivals when their time comes.

- A request is one Sequence throughout. On its prefill worker it stops after its first token (its
  stop length is 1 there); `prefilled()` then takes it back from the finished ones and the KV
  leaves. When the KV has arrived (`arrive()`), the sequence joins a decode worker's queue, its
  prompt's blocks registered in that worker's cache; it takes them there (recomputing only the
  tokens past the last full block and its first token) and produces the rest. Its answer is the
  same as on one engine: output tokens are a function of the prompt and the position.
- The router in front sends a prompt to the least-loaded prefill worker (running + waiting,
  lowest index on ties); the decode worker is picked by the deployment's `--router` among the
  decode workers when the first token is out.
- `--prefill-route tool` (issue #30, the tool-traffic route): only low-reuse, tool-result-heavy
  prompts (`tool_traffic()`, read from the harness hints) go to the prefill workers; the rest
  prefill and decode on the decode workers (mixed workers), routed by `--router`.
- The transfer takes the KV bytes per GPU of the prompt's tokens the decode worker does not hold
  (its cached prefix of the prompt is not sent again, as vLLM's NIXL connector pulls only the
  blocks past the decode side's local hit) over the GPU's KV-transfer link (presets
  `kv_transfer_bw`) x the collective efficiency; the GPUs of the prefill instance send their
  shards in parallel.
- Accounting: prefix-cache counters count the prefill side's lookups only (where the prompt is
  computed); a decode worker counts the tokens it receives as transferred KV (`received`),
  never as a lookup or a hit.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from agentx.engine.config import Deployment
from agentx.engine.core import EngineCore, Sequence
from agentx.engine.window import settle
from agentx.engine.replicas import Replicas
from agentx.engine.routing import RouterName, router

# the tool-traffic route (SPEC section 6): a prompt prefills remotely when its new part (past the
# stable prefix the harness names) is at least MIN_NEW_TOKENS, at least TOOL_SHARE of that new part
# is tool results, and the stable prefix is at most MAX_PREFIX_SHARE of the prompt (little to reuse)
MIN_NEW_TOKENS, TOOL_SHARE, MAX_PREFIX_SHARE = 1024, 0.5, 0.5


def tool_traffic(seq: Sequence) -> bool:
    """Whether a prompt is low-reuse, tool-result-heavy traffic (from its harness hints; False without)."""
    h = seq.hints
    if h is None or not h.tool_result_tokens:
        return False
    new = seq.prompt_len - h.prefix_tokens
    return (new >= MIN_NEW_TOKENS and h.tool_result_tokens >= TOOL_SHARE * new
            and h.prefix_tokens <= MAX_PREFIX_SHARE * seq.prompt_len)


@dataclass
class Stage:
    """A request's prefill stage, kept on its sequence while it moves to its decode worker."""

    stop_len: int  # the answer's length (the prefill stage stops at its first token)
    arrival: float  # the request's arrival (the sequence's own becomes the KV's arrival on the decode side)
    prefill: int  # the prefill worker
    session: str | None = None  # the session id it was routed with (the decode worker's router reads it)
    sent_at: float | None = None  # when the KV left (the first token's time)
    decode: int = -1  # the decode worker
    moved: int = 0  # prompt tokens whose KV crossed (those the decode worker did not hold)
    transfer_s: float = 0.0


class Workers:
    """Prefill workers (cores 0 .. P-1) and decode workers (P ..) behind one router; quacks like
    `Replicas` where the server, the runner and the metrics need one."""

    def __init__(self, dep: Deployment):
        from agentx.engine import presets

        prefill = Replicas(dep.engine, dep.prefill, RouterName.LEAST_LOADED)
        decode = Replicas(dep.decode_engine(), dep.decode, dep.router)
        self.prefill, self.route = dep.prefill, dep.prefill_route
        self.cores: list[EngineCore] = prefill.cores + decode.cores
        self.roles = ["prefill"] * dep.prefill + ["decode"] * dep.decode
        self.router = dep.router
        self.rule, self.least = router(dep.router), router(RouterName.LEAST_LOADED)
        first = prefill.cores[0]
        self.cfg, self.roofline, self.vocab = first.cfg, first.roofline, first.vocab
        self.max_model_len = min(first.max_model_len, decode.max_model_len)
        self.link_bw = presets.hardware(dep.engine.hardware).kv_transfer_bw
        self.pending: list = []  # heap of (when the KV arrives, order, sequence)
        self.order = itertools.count()
        self.sent = 0  # requests routed (round-robin's count)
        self.received = [0] * len(self.cores)  # prompt tokens whose KV a decode worker received
        self.transfer_s = [0.0] * len(self.cores)  # link seconds of those transfers, per decode worker

    def context_error(self, prompt_len: int, max_tokens: int) -> str | None:
        core = min(self.cores, key=lambda c: c.max_model_len)
        return core.context_error(prompt_len, max_tokens)

    def new_sequence(self, *args, **kwargs) -> Sequence:
        return self.cores[0].new_sequence(*args, **kwargs)

    def add(self, seq: Sequence, now: float | None = None, session: str | None = None) -> EngineCore:
        """Route and queue a new request: to a prefill worker, or (tool route, not tool traffic)
        to the decode worker that will also prefill it."""
        if self.route == "tool" and not tool_traffic(seq):
            i = self._decode_worker(seq, session)
        else:
            i = self.least.pick(self.cores[: self.prefill], seq, session, self.sent)
            arrival = self.cores[i].now if now is None else now
            seq.stage = Stage(seq.stop_len, arrival, i, session)
            seq.stop_len = min(seq.stop_len, 1)
        self.sent += 1
        seq.replica = i
        core = self.cores[i]
        core.add(seq, now)
        return core

    def _decode_worker(self, seq: Sequence, session: str | None) -> int:
        decode = self.cores[self.prefill:]
        return self.prefill + (0 if len(decode) == 1 else self.rule.pick(decode, seq, session, self.sent))

    def prefilled(self, seq: Sequence) -> bool:
        """A sequence a core finished: True when it was a prefill stage with more to answer, its
        KV now on its way (it is no longer finished); False when the request has ended."""
        stage = seq.stage
        if stage is None or stage.sent_at is not None or stage.stop_len <= 1 or seq.finish_reason == "abort":
            return False
        stage.sent_at = seq.finished_at
        stage.decode = self._decode_worker(seq, stage.session)
        settle(self.cores[stage.decode])
        held = self.cores[stage.decode].kv.match(seq.hashes)[0] * self.cfg.block_size
        stage.moved = max(0, seq.prompt_len - held)
        stage.transfer_s = self.transfer(seq.replica, stage.moved)
        seq.stop_len, seq.finish_reason, seq.finished_at = stage.stop_len, None, None
        heapq.heappush(self.pending, (stage.sent_at + stage.transfer_s, next(self.order), seq))
        return True

    def transfer(self, core_index: int, tokens: int) -> float:
        """Seconds the KV of `tokens` prompt tokens takes from a prefill worker to a decode worker."""
        roof = self.cores[core_index].roofline
        return tokens * roof.kv_bytes_per_token / (self.link_bw * roof.collective_eff)

    def next_time(self) -> float | None:
        return self.pending[0][0] if self.pending else None

    def arrive(self, until: float) -> list[int]:
        """The KV transfers that have arrived by `until`: each sequence joins its decode worker
        (its prompt's blocks in that worker's cache); returns the workers' indices."""
        touched = []
        while self.pending and self.pending[0][0] <= until:
            at, _, seq = heapq.heappop(self.pending)
            i = seq.stage.decode
            self._receive(i, seq)
            seq.replica, seq.transferred = i, True
            self.cores[i].add(seq, at)
            touched.append(i)
        return touched

    def _receive(self, i: int, seq: Sequence) -> None:
        """The prompt's blocks written into the decode worker's cache (as a finished prefill
        leaves them: cached, reusable), ready for the sequence to take; not a lookup."""
        settle(self.cores[i])
        kv = self.cores[i].kv
        phantom = ("kv-transfer", id(seq))
        if kv.allocate(phantom, seq.hashes, seq.prompt_len, count=False) is not None:
            kv.commit(phantom, seq.hashes)
            kv.free_seq(phantom)
        self.received[i] += seq.stage.moved
        self.transfer_s[i] += seq.stage.transfer_s

    def arrival_of(self, seq: Sequence) -> float:
        """The request's arrival (its prefill stage's when it was disaggregated)."""
        return seq.stage.arrival if seq.stage is not None else seq.arrival

    def series(self, i: int, labels: dict) -> list[tuple]:
        """(kind, name, doc, labels, value) of worker i's KV transfers (engine/metrics.py)."""
        if self.roles[i] != "decode":
            return []
        return [("counter", "agentx_sim:kv_transfer_tokens", "Prompt tokens whose KV this decode worker received "
                 "from a prefill worker (not prefix-cache hits; what it held already is not sent).", labels,
                 self.received[i]),
                ("counter", "agentx_sim:kv_transfer_seconds", "Modeled link seconds of those transfers.", labels,
                 self.transfer_s[i])]

    def abort(self, seq: Sequence) -> None:
        if any(s is seq for _, _, s in self.pending):
            self.pending = [p for p in self.pending if p[2] is not seq]
            heapq.heapify(self.pending)
            seq.finish_reason = "abort"
            return
        self.cores[seq.replica].abort(seq)


def workers(dep: Deployment):
    """The engine cores of a deployment: replicas behind a router, or prefill and decode workers."""
    if dep.prefill:
        return Workers(dep)
    return Replicas(dep.engine, dep.replicas, dep.router)


def answer_len(seq: Sequence) -> int:
    """The length the answer stops at (a prefill stage stops at 1 on its prefill worker)."""
    return seq.stage.stop_len if seq.stage is not None else seq.stop_len
