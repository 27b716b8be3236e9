"""The wire format of a streamed answer, apart from its transport (`client.py`): what one
server-sent event means for a request's `Result`. One parser per API style; today the OpenAI
completions / chat completions chunk (text, or delta content and reasoning, finish reason, usage)."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec


@dataclass
class Result:
    start: float  # perf_counter seconds
    first: float | None = None  # first chunk carrying output
    finished: float | None = None  # the chunk that carried the finish reason
    end: float | None = None  # last output chunk (or the failure)
    chunks: int = 0  # chunks that carried output (reasoning or content)
    reasoning_chunks: int = 0  # of them, reasoning
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens, where given
    chunk_times: list[float] = field(default_factory=list)  # kept only when asked
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    status: int = 0
    error: str | None = None
    detail: str | None = None
    set_cookie: str | None = None  # the response's Set-Cookie lines (a session-affinity gateway's)
    modeled: SimTimings | None = None  # agentx-sim's modeled timings of this request (its `agentx_sim` object)


def first_token_at(res: Result) -> float | None:
    """When the first token was seen: the first chunk carrying text; for an answer whose tokens all
    printed nothing (the usage counts them, no chunk carries text: a lone byte of a multi-byte
    character, which servers hold back), the chunk that carried its finish reason."""
    if res.first is None and res.error is None and res.completion_tokens and res.finished is not None:
        return res.finished
    return res.first


# Words of a 400 answer that mean the prompt overflowed the context (vLLM, SGLang, llama.cpp).
CONTEXT_WORDS = (b"context length", b"context_length", b"maximum context", b"exceeds the available context",
                 b"context size")


def names_context_overflow(error_text: bytes) -> bool:
    text = error_text.lower()
    return any(w in text for w in CONTEXT_WORDS)


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None  # reasoning models' thinking (vLLM, SGLang, DeepSeek)
    reasoning: str | None = None  # vLLM's newer name for it


class _Choice(msgspec.Struct):
    text: str | None = None
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct):
    cached_tokens: int | None = None


class _OutputDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _OutputDetails | None = None


class SimTimings(msgspec.Struct):
    """agentx-sim's `agentx_sim` extension object (modeled seconds; SPEC section 6)."""

    speed: float | None = None
    ttft_s: float | None = None
    e2el_s: float | None = None
    first_token_lag_s: float | None = None
    last_token_lag_s: float | None = None
    preemptions: int | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    agentx_sim: SimTimings | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode


def openai_event(event: bytes, now: float, res: Result, keep_chunks: bool) -> bool:
    """Apply one SSE event of an OpenAI stream that arrived at `now` to `res`; True at [DONE]."""
    if event.startswith(b"data: ") and b"\n" not in event:  # the usual one-line event
        payloads = (event[6:],)
    else:  # comments, event names and retry hints are skipped
        payloads = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
    for payload in payloads:
        if payload == b"[DONE]":
            return True
        try:
            chunk = _decode_chunk(payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            if res.error is None:
                res.error, res.detail = "malformed", payload[:200].decode(errors="replace")
            continue
        for c in chunk.choices:
            text, delta = c.text, c.delta
            if text is None and delta is not None:
                text = delta.content
                thinking = delta.reasoning_content or delta.reasoning
                if thinking:  # the first token of either kind is the first token (TTFT)
                    res.reasoning_chunks += 1
                    text = text or thinking
            if text:
                if res.first is None:
                    res.first = now
                res.end = now
                res.chunks += 1
                if keep_chunks:
                    res.chunk_times.append(now)
            if c.finish_reason:
                res.finish_reason = c.finish_reason
                if res.finished is None:
                    res.finished = now
        if chunk.agentx_sim is not None:
            res.modeled = chunk.agentx_sim
        if chunk.usage is not None:
            u = chunk.usage
            res.prompt_tokens, res.completion_tokens = u.prompt_tokens, u.completion_tokens
            if u.prompt_tokens_details is not None:
                res.cached_tokens = u.prompt_tokens_details.cached_tokens
            if u.completion_tokens_details is not None:
                res.reasoning_tokens = u.completion_tokens_details.reasoning_tokens
    return False
