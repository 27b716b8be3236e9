"""`bench --eval NAME[:N]`: a bundled accuracy eval against the run's endpoint, after the run,
with the same model and credentials (SPEC section 3, "Accuracy"). Each problem is one greedy
completion (`/v1/completions`, temperature 0, a text prompt: base and chat models alike), scored
by exact match on the final number (`agentx/data/evals.py`). The result goes to run.json
(`accuracy`) for the summary's `accuracy` rule: the upper end of the accuracy's 95 % interval
(Wilson) against the model's reference, given by `--eval-reference` or published by the server
(`/version` `eval_reference`: agentx-sim's with `--answers eval`)."""

from __future__ import annotations

import asyncio
import math

import aiohttp

from agentx.data.evals import Problem, correct, parse_spec, problems, prompt
from agentx.replay.endpoint import base_url

MAX_TOKENS = 256  # room for the worked answer a real model writes before its final number
CONCURRENCY = 8
Z95 = 1.959964
KEPT_WRONG = 5  # wrong answers kept in the result, for a reader to see what came back


def wilson(correct_n: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share `correct_n` / `n`."""
    if n == 0:
        return 0.0, 1.0
    p, z2 = correct_n / n, Z95 * Z95
    centre, half = p + z2 / (2 * n), Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - half) / (1 + z2 / n)), min(1.0, (centre + half) / (1 + z2 / n))


async def _one(session: aiohttp.ClientSession, url: str, model: str, problem: Problem) -> tuple[str | None, str | None]:
    """(the answer's text, the error) of one problem."""
    body = {"model": model, "prompt": prompt(problem), "max_tokens": MAX_TOKENS, "temperature": 0.0,
            "stop": ["\n\nQuestion:"]}
    try:
        async with session.post(url + "/v1/completions", json=body) as r:
            if r.status != 200:
                return None, f"HTTP {r.status}"
            data = await r.json(content_type=None)
        return str(((data.get("choices") or [{}])[0]).get("text") or ""), None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError) as e:
        return None, type(e).__name__


async def _reference(session: aiohttp.ClientSession, url: str, name: str) -> float | None:
    """The server's published reference accuracy on eval `name` (agentx-sim's /version), if any."""
    try:
        async with session.get(url + "/version") as r:
            data = await r.json(content_type=None) if r.status == 200 else {}
        value = (data.get("eval_reference") or {}).get(name)
        return float(value) if isinstance(value, (int, float)) and 0 <= value <= 1 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError):
        return None


async def run_eval(url: str, model: str, spec: str, reference: float | None = None, headers: tuple = (),
                   timeout_s: float = 600.0) -> dict:
    """Run eval `spec` (`NAME[:N]`) against the server at `url`: the accuracy figure of run.json."""
    name, n = parse_spec(spec)
    todo = problems(name)[:n]
    base, gate = base_url(url), asyncio.Semaphore(CONCURRENCY)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s), headers=dict(headers)) as s:
        async def one(p: Problem):
            async with gate:
                return await _one(s, base, model, p)

        answers = await asyncio.gather(*(one(p) for p in todo))
        source = "user" if reference is not None else None
        if reference is None:
            reference = await _reference(s, base, name)
            source = "server /version" if reference is not None else None
    right = [text is not None and correct(p, text) for p, (text, _) in zip(todo, answers)]
    lo, hi = wilson(sum(right), n)
    wrong = [{"id": p.id, "expected": p.answer, "answer": (text or "")[-200:], "error": err}
             for p, (text, err), ok in zip(todo, answers, right) if not ok][:KEPT_WRONG]
    return {"eval": name, "n": n, "correct": sum(right), "accuracy": sum(right) / n, "interval": [lo, hi],
            "errors": sum(1 for _, err in answers if err), "reference": reference, "reference_source": source,
            "wrong": wrong}


async def eval_target(t) -> dict:
    """`--eval` of a run's TargetConfig `t`: its endpoint, model, credentials and timeout."""
    return await run_eval(t.url, t.model, t.evals, t.eval_reference, t.headers, t.request_timeout)
