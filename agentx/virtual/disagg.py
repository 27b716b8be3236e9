"""Disaggregated prefill / decode in virtual time: the prefill workers compute each prompt and its
first token, the prompt's KV crosses to a decode worker at the link's modeled cost, and the decode
worker produces the remaining tokens (Dynamo / llm-d / SGLang PD as InferenceX runs them).

- A router in front sends a request to the least-loaded prefill worker (running + waiting), and
  its KV to the least-loaded decode worker.
- The transfer takes the prompt's KV bytes per GPU over the GPU's KV-transfer link (presets
  `kv_transfer_bw`: InfiniBand NICs on HGX-class GPUs, NVLink inside an NVL72 rack) x the
  collective efficiency; the GPUs of the prefill instance send their shards in parallel.
- The decode worker receives the blocks (registered in its prefix cache, then taken by the
  sequence, which computes only the prompt's last token again as every engine does for a hit);
  its prefix-cache counters count the transferred prompt as looked up and hit.
- TTFT is the prefill worker's first token; the record's end is the decode worker's last token.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from agentx.engine.replicas import Replicas


@dataclass
class Handoff:
    """A request between its prefill and its decode stage."""

    at: float  # when its KV has arrived at the decode side
    prefill: object  # the prefill-stage sequence (its first token time)
    osl: int


class Disagg:
    def __init__(self, cores: Replicas, prefill: int, link_bw: float):
        self.cores, self.prefill, self.link_bw = cores, prefill, link_bw
        self.pending: list = []  # heap of (arrival of the KV, order, Handoff)
        self.order = itertools.count()
        self.decode_of: dict = {}  # decode-stage sequence -> its prefill-stage sequence

    def prefill_core(self) -> int:
        return self._least_loaded(range(self.prefill))

    def decode_core(self) -> int:
        return self._least_loaded(range(self.prefill, len(self.cores.cores)))

    def _least_loaded(self, indices) -> int:
        cores = self.cores.cores
        return min(indices, key=lambda i: (len(cores[i].running) + len(cores[i].waiting), i))

    def transfer_s(self, core_index: int, tokens: int) -> float:
        roof = self.cores.cores[core_index].roofline
        return tokens * roof.kv_bytes_per_token / (self.link_bw * roof.collective_eff)

    def hand_off(self, seq, now: float, osl: int) -> None:
        at = now + self.transfer_s(seq.replica, seq.prompt_len)
        heapq.heappush(self.pending, (at, next(self.order), Handoff(at, seq, osl)))

    def next_time(self) -> float | None:
        return self.pending[0][0] if self.pending else None

    def receive(self, core_index: int, seq, hashes) -> None:
        """The prompt's blocks written into the decode worker's cache (as a finished prefill
        leaves them: cached, reusable), ready for the decode-stage sequence to take."""
        kv = self.cores.cores[core_index].kv
        phantom = ("kv-transfer", id(seq))
        if kv.allocate(phantom, hashes, seq.prompt_len) is not None:
            kv.commit(phantom, hashes)
            kv.free_seq(phantom)
