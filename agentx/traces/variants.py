"""Corpus variants: the context-capped 256k variant of SPEC §1."""

from __future__ import annotations

import dataclasses
import re

from agentx.errors import AgentxError
from agentx.traces.model import Session, Stream


def parse_tokens(text: str) -> int:
    """'256k' -> 256000, '1m' -> 1000000, '990000' -> 990000 (decimal k and m)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not m:
        raise AgentxError(f"expected a token count like 256k or 1m, got {text!r}", "max_context")
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def _limit_stream(session: Session, stream: Stream, max_tokens: int) -> Stream | None:
    requests = tuple(r for r in stream.requests if session.replay_isl(r) + r.osl <= max_tokens)
    children = tuple(c for c in (_limit_stream(session, c, max_tokens) for c in stream.children) if c)
    if not requests and not children and stream.kind != "main":
        return None
    return dataclasses.replace(stream, requests=requests, children=children)


def limit_context(session: Session, max_tokens: int) -> Session | None:
    """Drop every request with ISL + OSL over `max_tokens`, keeping the surviving timeline.

    A subagent or aux stream goes only when all of its requests (and descendants) went; a
    session with nothing left is dropped (None).
    """
    streams = [_limit_stream(session, s, max_tokens) for s in session.streams]
    main, aux = streams[0], [s for s in streams[1:] if s is not None]
    if not main.requests and not main.children and not aux:
        return None
    return dataclasses.replace(session, streams=(main, *aux))


def limit_corpus(sessions: list[Session], max_tokens: int | None) -> list[Session]:
    if max_tokens is None:
        return sessions
    return [s for s in (limit_context(x, max_tokens) for x in sessions) if s is not None]
