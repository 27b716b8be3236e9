"""A seeded generator of WEKA-shaped agent sessions, calibrated to the published statistics of
the canonical 393-session AgentX corpus (see `tests/data/README.md`):

  median ISL 142k, median OSL 444, median tool gap 3.84 s with ~10 % over a minute, 44 % of
  sessions with subagents (median 4 per such session), median subagent wall time 2.27 min,
  ~99k requests in 393 sessions (~57 % main agent), contexts up to 1M.

How a session grows: the main agent starts from its tool + system prefix; every turn appends
the previous output plus a tool result (log-normal), so each request extends the last one's
hash blocks; now and then (7 %) the last block or two are rewritten (as real traces show);
when the context passes the session's compaction threshold it is reset to the prefix plus a
summary. Subagents come in parallel groups after a `tool_use` turn, with their own system
prefix shared by every subagent of that type in the session, and the parent waits for them.
All distributions are log-normal; the parameters below were fitted by running
`agentx trace stats` on the output (the calibration test checks the targets).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentx.traces.model import Request, Session, Stream, ids_array, make_session

BLOCK = 64
MAIN_MODEL = "claude-opus-4-5-20251101"
SUB_MODEL = "claude-haiku-4-5-20251001"


@dataclass(frozen=True)
class SynthConfig:
    main_turns_median: float = 85.0
    main_turns_sigma: float = 0.95
    tool_tokens: int = 12_000
    system_tokens: int = 3_000
    first_user_tokens_median: float = 1_500.0
    tool_result_median: float = 1_300.0
    tool_result_sigma: float = 1.5
    tool_result_max: int = 60_000
    osl_median: float = 630.0
    osl_sigma: float = 1.25
    osl_max: int = 32_000
    gap_median: float = 5.0
    gap_sigma: float = 2.6
    gap_max: float = 4 * 3600.0
    share_1m_sessions: float = 0.7  # sessions on a 1M-context model; the rest 200k
    compact_at_200k: int = 160_000
    compact_at_1m: int = 940_000
    summary_tokens: int = 30_000
    rewrite_tail_share: float = 0.07
    share_with_subagents: float = 0.41
    subagents_median: float = 4.0
    subagents_sigma: float = 1.35
    max_subagents: int = 60
    sub_turns_median: float = 22.0
    sub_turns_sigma: float = 0.8
    sub_prefix_tokens: int = 9_000
    sub_task_tokens_median: float = 1_200.0
    sub_tool_result_median: float = 3_500.0
    sub_osl_median: float = 260.0
    sub_gap_median: float = 2.8
    sub_gap_sigma: float = 0.9
    decode_tok_s: float = 70.0  # recorded api_time = ttft + osl / decode rate
    sub_decode_tok_s: float = 220.0
    # "own": a subagent starts from its type's system prefix (the calibrated corpus); "parent": from
    # the prompt of the request that spawned it, then its task (subagents that fork the context)
    subagent_context: str = "own"


class _Chain:
    """An append-only hash-id chain; requests get views of its buffer (shared memory)."""

    def __init__(self, ids: "_Ids", prefix_blocks: np.ndarray | None = None):
        self.ids = ids
        self.buf = np.empty(1024, dtype=np.uint32)
        self.n = 0
        if prefix_blocks is not None:
            self._append(prefix_blocks)

    def _append(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.buf):
            # views handed out keep the old buffer alive and unchanged
            self.buf = np.concatenate([self.buf[: self.n], np.empty(max(need, 2 * len(self.buf)), np.uint32)])
        self.buf[self.n : need] = values
        self.n = need

    def grow_to(self, blocks: int) -> None:
        if blocks > self.n:
            self._append(self.ids.fresh(blocks - self.n))

    def rewrite_tail(self, k: int) -> None:
        """Replace the last k blocks with new ids (a fresh buffer: older views stay intact)."""
        k = min(k, self.n)
        self.buf = self.buf.copy()
        self.n -= k

    def view(self, blocks: int) -> np.ndarray:
        return ids_array(self.buf[:blocks])


class _Ids:
    def __init__(self):
        self.next = 1

    def fresh(self, n: int) -> np.ndarray:
        out = np.arange(self.next, self.next + n, dtype=np.uint32)
        self.next += n
        return out


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> float:
    return float(median * np.exp(sigma * rng.standard_normal()))


def _turn_count(rng, median, sigma) -> int:
    return max(1, int(round(_lognormal(rng, median, sigma))))


class _SessionGen:
    def __init__(self, cfg: SynthConfig, rng: np.random.Generator, index: int):
        self.cfg, self.rng, self.index = cfg, rng, index
        self.ids = _Ids()
        self.limit = 1_000_000 if rng.random() < cfg.share_1m_sessions else 200_000
        self.compact_at = cfg.compact_at_1m if self.limit == 1_000_000 else cfg.compact_at_200k
        self.sub_prefixes: dict[str, np.ndarray] = {}

    def osl(self, median: float) -> int:
        return max(1, min(self.cfg.osl_max, int(_lognormal(self.rng, median, self.cfg.osl_sigma))))

    def gap(self, median: float, sigma: float) -> float:
        return round(min(self.cfg.gap_max, _lognormal(self.rng, median, sigma)), 3)

    def api_time(self, isl_new: int, osl: int, rate: float) -> float:
        ttft = 0.4 + max(0, isl_new) / 40_000.0
        return round(ttft + osl / rate * float(np.exp(0.25 * self.rng.standard_normal())), 2)

    def request(self, t, model, ctx, chain, osl, api, think, stop, input_types, output_types) -> Request:
        return Request(
            t=round(t, 3),
            model=model,
            isl=ctx,
            osl=osl,
            hash_ids=chain.view(ctx // BLOCK),
            type="s",
            ttft=None,
            think_time=think,
            api_time=api,
            stop=stop,
            input_types=input_types,
            output_types=output_types,
        )

    def main(self) -> Session:
        cfg, rng = self.cfg, self.rng
        prefix_tokens = cfg.tool_tokens + cfg.system_tokens
        prefix_ids = self.ids.fresh(prefix_tokens // BLOCK)
        chain = _Chain(self.ids, prefix_ids)
        turns = _turn_count(rng, cfg.main_turns_median, cfg.main_turns_sigma)
        group_sizes, spawn_turns = self.subagent_groups(turns)
        groups = iter(group_sizes)

        ctx = prefix_tokens + int(_lognormal(rng, cfg.first_user_tokens_median, 1.0))
        t, requests, subagents = 0.0, [], []
        think = 0.0
        for k in range(turns):
            if ctx > self.compact_at:
                chain = _Chain(self.ids, prefix_ids)
                ctx = prefix_tokens + int(cfg.summary_tokens * np.exp(0.4 * rng.standard_normal()))
            chain.grow_to(ctx // BLOCK)
            spawning = k in spawn_turns
            osl = self.osl(cfg.osl_median)
            api = self.api_time(ctx - (requests[-1].isl if requests else 0), osl, cfg.decode_tok_s)
            stop = "tool_use" if spawning or k < turns - 1 and rng.random() < 0.85 else "end_turn"
            req = self.request(t, MAIN_MODEL, ctx, chain, osl, api, think, stop,
                               ("text",) if k == 0 or stop == "end_turn" else ("tool_result",),
                               ("thinking", "text", "tool_use") if stop == "tool_use" else ("thinking", "text"))
            requests.append(req)
            end = t + api
            wait_until = end
            if spawning:
                size = next(groups, 0)
                forked = chain.view(ctx // BLOCK) if cfg.subagent_context == "parent" else None
                for j in range(size):
                    sub = self.subagent(end + 0.3 + 0.01 * j, j, forked)
                    subagents.append(sub)
                    wait_until = max(wait_until, sub.end)
            think = self.gap(cfg.gap_median, cfg.gap_sigma)
            t = wait_until + think
            # the next request carries this output and a tool result (or a user message)
            ctx += osl + int(min(cfg.tool_result_max, _lognormal(rng, cfg.tool_result_median, cfg.tool_result_sigma)))
            ctx = min(ctx, self.limit - 8_000)
            chain.grow_to(ctx // BLOCK)
            if rng.random() < cfg.rewrite_tail_share and chain.n > len(prefix_ids) + 2:
                chain.rewrite_tail(int(rng.integers(1, 3)))
        return make_session(
            requests,
            subagents,
            id=f"synth_{self.index:04d}",
            block_size=BLOCK,
            hash_id_scope="local",
            models=(MAIN_MODEL, SUB_MODEL) if subagents else (MAIN_MODEL,),
            tool_tokens=cfg.tool_tokens,
            system_tokens=cfg.system_tokens,
        )

    def subagent_groups(self, turns: int) -> tuple[list[int], set]:
        """The sizes of the session's subagent groups and the turns after which they are launched."""
        cfg, rng = self.cfg, self.rng
        n_subs = 0
        if rng.random() < cfg.share_with_subagents:
            n_subs = min(cfg.max_subagents, _turn_count(rng, cfg.subagents_median, cfg.subagents_sigma))
        group_sizes = []
        left = n_subs
        while left > 0:
            size = min(left, int(rng.choice([1, 1, 2, 2, 3, 4])))
            group_sizes.append(size)
            left -= size
        if not group_sizes:
            return group_sizes, set()
        slots = max(1, turns - 1)
        return group_sizes, set(rng.choice(np.arange(slots), size=min(len(group_sizes), slots), replace=False).tolist())

    def subagent(self, spawn: float, sibling: int, forked: np.ndarray | None = None) -> Stream:
        """A subagent; `forked`: the spawning request's hash ids, when it starts from them."""
        cfg, rng = self.cfg, self.rng
        kind = str(rng.choice(["Explore", "Explore", "general-purpose", "Plan"]))
        if forked is not None:
            prefix, prefix_tokens = forked, len(forked) * BLOCK
        else:
            if kind not in self.sub_prefixes:
                self.sub_prefixes[kind] = self.ids.fresh(cfg.sub_prefix_tokens // BLOCK)
            prefix, prefix_tokens = self.sub_prefixes[kind], cfg.sub_prefix_tokens
        chain = _Chain(self.ids, prefix)
        ctx = prefix_tokens + int(_lognormal(rng, cfg.sub_task_tokens_median, 0.6))
        turns = _turn_count(rng, cfg.sub_turns_median, cfg.sub_turns_sigma)
        t, think, requests, total = spawn, 0.0, [], 0
        for k in range(turns):
            if ctx > self.compact_at and requests:
                break
            chain.grow_to(ctx // BLOCK)
            osl = self.osl(cfg.sub_osl_median)
            api = self.api_time(ctx - (requests[-1].isl if requests else 0), osl, cfg.sub_decode_tok_s)
            last = k == turns - 1
            requests.append(self.request(t, SUB_MODEL, ctx, chain, osl, api, think,
                                         "end_turn" if last else "tool_use",
                                         ("text",) if k == 0 else ("tool_result",),
                                         ("text",) if last else ("text", "tool_use")))
            total += ctx + osl
            think = self.gap(cfg.sub_gap_median, cfg.sub_gap_sigma)
            t += api + think
            ctx += osl + int(min(cfg.tool_result_max, _lognormal(rng, cfg.sub_tool_result_median, 1.2)))
            ctx = min(ctx, self.limit - 8_000)
        return Stream(
            kind="subagent",
            requests=tuple(requests),
            spawn=round(spawn, 3),
            agent_id=f"agent_{sibling + 1:03d}",
            subagent_type=kind,
            status="completed",
            duration_ms=round((requests[-1].end - spawn) * 1000.0),
            total_tokens=total,
            tool_use_count=len(requests) - 1,
            models=(SUB_MODEL,),
            tool_tokens=cfg.sub_prefix_tokens - 1_000,
            system_tokens=1_000,
        )


def synth_session(cfg: SynthConfig, seed: int, index: int) -> Session:
    """Session `index` of the corpus for `seed`; independent of how many sessions are made."""
    rng = np.random.default_rng([seed, index])
    return _SessionGen(cfg, rng, index).main()


def synth_corpus(sessions: int, seed: int, cfg: SynthConfig | None = None):
    """Yield `sessions` synthetic sessions, one at a time (so a writer never holds them all)."""
    cfg = cfg or SynthConfig()
    for i in range(sessions):
        yield synth_session(cfg, seed, i)


def write_corpus(out: Path, sessions: int, seed: int, max_context: int | None = None,
                 subagent_context: str = "own") -> tuple[int, int]:
    """Write a synthetic corpus as one WEKA file per session (each capped at `max_context`
    tokens when given; subagents starting from their `own` prefix or their `parent`'s prompt);
    (sessions written, requests)."""
    from agentx.traces.variants import limit_context
    from agentx.traces.weka import write_weka

    out.mkdir(parents=True, exist_ok=True)
    written = requests = 0
    for session in synth_corpus(sessions, seed, SynthConfig(subagent_context=subagent_context)):
        if max_context is not None:
            session = limit_context(session, max_context)
            if session is None:
                continue
        write_weka([session], out / f"{session.id}.json")
        written += 1
        requests += session.n_requests
    return written, requests

