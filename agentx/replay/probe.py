"""Cache-correctness probe (`agentx probe cache`, `bench --probe-cache N`; SPEC §2).

A prefix cache must not change what a model computes: with greedy decoding, a prompt answered
cold and answered again once its prefix is cached must give the same tokens. Each probe takes a
request of the traces, renders its prompt with a cache-bust marker of its own (so nothing before
it can be reused), sends it cold, optionally sends other traffic to push its blocks out of the
GPU tier, then sends it again (warm) and compares the two answers. Requests go one at a time:
this checks correctness, not speed.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import asdict, dataclass

import aiohttp
import msgspec

from agentx.common import key64
from agentx.content.tokens import ContentConfig, PromptBuilder
from agentx.traces.model import Request, Session

ANSWER_TOKENS = 16  # greedy tokens compared per probe


@dataclass(frozen=True)
class ProbeConfig:
    url: str
    model: str
    probes: int = 8
    seed: int = 0
    content: ContentConfig = ContentConfig()
    max_tokens: int = ANSWER_TOKENS
    max_isl: int | None = None  # leave out longer prompts (the server's context, minus the answer)
    flush_tokens: int = 0  # other traffic between cold and warm (0: warm right after cold)
    timeout_s: float = 600.0
    headers: tuple[tuple[str, str], ...] = ()  # the target's credentials (--api-key, --header)


@dataclass
class Probe:
    session: str
    request: int  # index of the request in its session (file order)
    isl: int
    tier: str  # "gpu": warm right after cold; "flushed": after `flush_tokens` of other traffic
    prefix: int | None = None  # prompt tokens the warm answer reports cached (None: not reported)
    match: bool | None = None  # None: a request failed
    first_difference: int | None = None  # position of the first differing output token (or char)
    cold: str | None = None  # the answers, kept when they differ
    warm: str | None = None
    error: str | None = None


def pick(sessions: list[Session], n: int, seed: int, prompts: PromptBuilder,
         max_isl: int | None) -> list[tuple[Session, int, Request]]:
    """`n` requests with at least two hash blocks (a prefix worth caching), seeded, spread over
    the sessions."""
    pool = [(s, i, r) for s in sessions for i, r in enumerate(s.requests())
            if len(r.hash_ids) >= 2 and (max_isl is None or prompts.isl(s, r) <= max_isl)]
    rng = random.Random(key64("probe", seed))
    return rng.sample(pool, min(n, len(pool)))


def _answer(body: dict) -> tuple[list | str, int | None]:
    """(output token ids where the server returns them, else the text; cached prompt tokens)."""
    choice = body["choices"][0]
    out = choice.get("token_ids") or choice.get("text") or ""
    details = (body.get("usage") or {}).get("prompt_tokens_details") or {}
    return out, details.get("cached_tokens")


class _Sender:
    def __init__(self, cfg: ProbeConfig, session: aiohttp.ClientSession):
        self.cfg, self.session = cfg, session
        self.url = cfg.url.rstrip("/") + "/v1/completions"

    async def send(self, prompt: list[int], max_tokens: int) -> tuple[list | str, int | None]:
        body = {"model": self.cfg.model, "prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens,
                "ignore_eos": True, "temperature": 0.0, "stream": False}
        async with self.session.post(self.url, data=msgspec.json.encode(body),
                                     headers={"Content-Type": "application/json"}) as r:
            text = await r.read()
            if r.status != 200:
                raise ProbeFailed(f"HTTP {r.status}: {text[:200].decode(errors='replace')}")
        try:
            return _answer(msgspec.json.decode(text))
        except (msgspec.DecodeError, KeyError, IndexError, TypeError) as e:
            raise ProbeFailed(f"not a completions answer ({e}): {text[:200].decode(errors='replace')}") from None


class ProbeFailed(Exception):
    pass


async def _probe_one(sender: _Sender, prompts: PromptBuilder, nonce: str, k: int, session: Session, index: int,
                     req: Request) -> Probe:
    cfg = sender.cfg
    marker = key64("probe marker", nonce, k)
    prompt = prompts.prompt(session, req, key64("probe tail", nonce, k), marker).tolist()
    probe = Probe(session.id, index, len(prompt), "flushed" if cfg.flush_tokens else "gpu")
    try:
        cold, _ = await sender.send(prompt, cfg.max_tokens)
        flushed, j = 0, 0
        while flushed < cfg.flush_tokens:  # unrelated prompts (own markers) as long as this one
            other = prompts.prompt(session, req, key64("probe flush", nonce, k, j), key64("probe flush", nonce, k, j))
            await sender.send(other.tolist(), 1)
            flushed, j = flushed + len(other), j + 1
        warm, probe.prefix = await sender.send(prompt, cfg.max_tokens)
    except (ProbeFailed, aiohttp.ClientError, asyncio.TimeoutError) as e:
        probe.error = str(e) or type(e).__name__
        return probe
    probe.match = cold == warm
    if not probe.match:
        probe.first_difference = next((i for i, (a, b) in enumerate(zip(cold, warm)) if a != b),
                                      min(len(cold), len(warm)))
        probe.cold, probe.warm = str(cold)[:200], str(warm)[:200]
    return probe


async def probe_cache(cfg: ProbeConfig, sessions: list[Session], progress=None) -> dict:
    """Run the probes; the result's `mismatches` counts warm answers that differ from cold ones.
    `progress(done, total)`, when given, follows each probe."""
    prompts = PromptBuilder(cfg.content)
    chosen = pick(sessions, cfg.probes, cfg.seed, prompts, cfg.max_isl)
    nonce = uuid.uuid4().hex  # markers differ across probe runs: nothing is cached before the cold send
    timeout = aiohttp.ClientTimeout(total=cfg.timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, headers=dict(cfg.headers)) as session:
        sender = _Sender(cfg, session)
        probes = []
        for k, (s, i, r) in enumerate(chosen):
            probes.append(await _probe_one(sender, prompts, nonce, k, s, i, r))
            if progress:
                progress(len(probes), len(chosen))
    return {
        "probes": len(probes), "mismatches": sum(1 for p in probes if p.match is False),
        "errors": sum(1 for p in probes if p.error), "answer_tokens": cfg.max_tokens,
        "flush_tokens": cfg.flush_tokens, "items": [asdict(p) for p in probes],
    }
