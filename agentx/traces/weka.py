"""WEKA trace format: one JSON session object per file, or JSONL with one per line.

Reads both subagent timestamp bases, detected per file (SPEC §1):
- relative: inner `t` counts from the subagent's start; a completed entry's `t` is its end
  (spawn = `t - duration_ms/1000`), an `async_launched` entry's `t` is its launch;
- absolute: inner `t` lies at or after the entry's `t`, which is the spawn (first child start).
Writes the absolute basis by default (the AgentX corpus build), the relative one on request.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import msgspec

from agentx.errors import TraceError
from agentx.traces.hashids import ChainIdParser, IdWriter
from agentx.traces.model import (
    MAX_DEPTH, BlockSize, Count, Millis, Name, Request, Seconds, Segments, Session, Stream, Tokens, make_session,
    request_problem,
)
from agentx.traces.source import decode, read_trace_bytes

TimeBasis = Literal["absolute", "relative"]
_EPS = 1e-6


class Entry(msgspec.Struct, omit_defaults=True):
    """One item of a `requests` list: a request (`type` n/s) or a subagent (`type` subagent)."""

    t: Seconds
    type: str = "n"
    model: Name | None = None
    in_: Tokens | None = msgspec.field(default=None, name="in")
    out: Tokens | None = None
    hash_ids: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"[]"))
    input_types: list[str] | None = None
    output_types: list[str] | None = None
    segments: Segments | None = None  # agentx's extension (SPEC §1): other readers ignore it
    stop: str | None = None
    api_time: Seconds | None = None
    think_time: Seconds | None = None
    ttft: Seconds | None = None
    # subagent entries
    agent_id: Name | None = None
    subagent_type: Name | None = None
    duration_ms: Millis | None = None
    total_tokens: Count | None = None
    tool_use_count: Count | None = None
    status: str | None = None
    models: list[Name] | None = None
    tool_tokens: Tokens | None = None
    system_tokens: Tokens | None = None
    requests: list["Entry"] | None = None


class SessionFile(msgspec.Struct):
    requests: list[Entry]
    id: Name | None = None
    models: list[Name] = []
    block_size: BlockSize = 64
    hash_id_scope: Literal["local", "global"] = "local"
    tool_tokens: Tokens | None = None
    system_tokens: Tokens | None = None
    provider: Name | None = None  # agentx's addition: the agent that produced it (claude, codex)


_decoder = msgspec.json.Decoder(SessionFile)


class _Reader:
    """Turns one decoded session object into the model; collects warnings."""

    def __init__(self, file: str, record: str, block_size: int = 64):
        self.file, self.record, self.block_size = file, record, block_size

    def where(self, path: str) -> str:
        return f"{self.record} {path}".strip() if self.record else path

    def session(self, doc: SessionFile, default_id: str) -> Session:
        basis = self._basis(doc.requests, "requests")
        top, subagents = self._items(doc.requests, "requests", offset=0.0, basis=basis)
        return make_session(
            top,
            subagents,
            id=doc.id or default_id,
            block_size=doc.block_size,
            hash_id_scope=doc.hash_id_scope,
            models=tuple(doc.models),
            tool_tokens=doc.tool_tokens,
            system_tokens=doc.system_tokens,
            start=0.0,
            partial_block_ids=False,
            provider=doc.provider,
        )

    def _basis(self, entries: list[Entry], path: str) -> TimeBasis:
        """Detect the subagent timestamp basis from every subagent entry, nested ones too."""
        votes: dict[str, str] = {}

        def visit(entries: list[Entry], path: str, depth: int = 0) -> None:
            for i, e in enumerate(entries):
                if e.type != "subagent":
                    continue
                where = f"{path}[{i}]"
                if depth >= MAX_DEPTH:
                    raise TraceError(self.file, self.where(where), f"subagents nested over {MAX_DEPTH} deep")
                inner = [c.t for c in e.requests or []]
                if inner and e.t > _EPS:  # an entry at t = 0 fits both bases
                    votes.setdefault("absolute" if min(inner) >= e.t - _EPS else "relative", where)
                visit(e.requests or [], f"{where}.requests", depth + 1)

        visit(entries, path)
        if len(votes) > 1:
            raise TraceError(
                self.file,
                self.where(votes["relative"]),
                "t: subagent timestamps mix relative and absolute bases in one file",
            )
        return "relative" if "relative" in votes else "absolute"

    def _items(self, entries: list[Entry], path: str, offset: float, basis: TimeBasis):
        """Requests and subagent streams of one `requests` list, in absolute time."""
        parser = ChainIdParser(self.file)
        pending: list[tuple[Entry, int, str]] = []
        subagents: list[Stream] = []
        for i, e in enumerate(entries):
            where = f"{path}[{i}]"
            if e.type == "subagent":
                subagents.append(self._subagent(e, where, offset, basis))
            elif e.type in ("n", "s"):
                for name in ("in_", "out"):
                    if getattr(e, name) is None:
                        raise TraceError(
                            self.file,
                            self.where(where),
                            f"missing required field `{name.rstrip('_')}`",
                        )
                pending.append((e, parser.add(e.hash_ids, self.where(f"{where}.hash_ids")), where))
            else:
                raise TraceError(
                    self.file, self.where(f"{where}.type"), f"unknown type {e.type!r} (want n, s or subagent)"
                )
        ids = parser.finish()
        for e, slot, where in pending:
            problem = request_problem(e.in_, len(ids[slot]), self.block_size, False)
            if problem:
                raise TraceError(self.file, self.where(f"{where}.{problem[0]}"), problem[1])
            if e.segments is not None and sum(g.tokens for g in e.segments) != e.in_:
                raise TraceError(self.file, self.where(f"{where}.segments"),
                                 f"segments cover {sum(g.tokens for g in e.segments):,} tokens, `in` is {e.in_:,}")
        requests = [self._request(e, ids[slot], offset) for e, slot, _ in pending]
        return requests, subagents

    def _request(self, e: Entry, hash_ids, offset: float) -> Request:
        return Request(
            t=round(offset + e.t, 6) if offset else e.t,
            model=e.model or "",
            isl=e.in_,
            osl=e.out,
            hash_ids=hash_ids,
            type=e.type,
            ttft=e.ttft,
            think_time=e.think_time,
            api_time=e.api_time,
            stop=e.stop,
            input_types=tuple(e.input_types) if e.input_types is not None else None,
            output_types=tuple(e.output_types) if e.output_types is not None else None,
            segments=tuple(e.segments) if e.segments is not None else None,
        )

    def _subagent(self, e: Entry, where: str, offset: float, basis: TimeBasis) -> Stream:
        background = e.status == "async_launched"
        if basis == "absolute":
            spawn, inner_offset = e.t, 0.0
        else:
            if background or e.duration_ms is None:
                spawn = round(offset + e.t, 6)
                if not background and e.requests:
                    last = max(c.t + (c.api_time or 0.0) for c in e.requests)
                    spawn = round(offset + max(0.0, e.t - last), 6)
            else:
                spawn = round(offset + e.t - e.duration_ms / 1000.0, 6)
                if spawn < -_EPS:
                    raise TraceError(
                        self.file, self.where(f"{where}.duration_ms"), "subagent would start before the session"
                    )
            inner_offset = spawn
        requests, children = self._items(e.requests or [], f"{where}.requests", inner_offset, basis)
        requests.sort(key=lambda r: r.t)
        return Stream(
            kind="background" if background else "subagent",
            requests=tuple(requests),
            spawn=spawn,
            children=tuple(sorted(children, key=lambda s: s.spawn)),
            agent_id=e.agent_id,
            subagent_type=e.subagent_type,
            status=e.status,
            duration_ms=e.duration_ms,
            total_tokens=e.total_tokens,
            tool_use_count=e.tool_use_count,
            models=tuple(e.models) if e.models is not None else None,
            tool_tokens=e.tool_tokens,
            system_tokens=e.system_tokens,
        )


def read_weka(path: str | Path, warn=None) -> list[Session]:
    """Read a WEKA file (one object, or JSONL). `warn(message)` receives per-file warnings."""
    path = Path(path)
    file = str(path)
    data = read_trace_bytes(path)
    stem = path.name.split(".")[0]
    docs: list[tuple[bytes, str, str]] = []
    if data[_NON_SPACE.search(data).start()] == ord("{") and _is_single_object(data):
        docs.append((data, "", stem))
    else:
        for n, line in enumerate(data.splitlines(), 1):
            if line.strip():
                docs.append((line, f"line {n}", f"{stem}-{n}"))
    sessions, mismatched = [], 0
    for text, record, default_id in docs:
        doc = decode(_decoder, text, file, record)
        session = _Reader(file, record, doc.block_size).session(doc, default_id)
        mismatched += sum(1 for r in session.requests() if r.isl < session.hash_coverage(r))
        sessions.append(session)
    if mismatched and warn:
        warn(
            f"{file}: {mismatched} request(s) have `in` smaller than their hash blocks cover "
            "(billed-count variant); replayed ISL is the hash coverage"
        )
    return sessions


_NON_SPACE = re.compile(rb"\S")


def _is_single_object(data: bytes) -> bool:
    """True unless the first non-blank line is a whole object followed by another (JSONL).

    Looks only near the line break, so a 100 MB file is never copied to decide.
    """
    first = _NON_SPACE.search(data)
    end = data.find(b"\n", first.start() if first else 0)
    if end < 0:
        return True
    line_end = data[max(0, end - 64) : end].rstrip()
    following = _NON_SPACE.search(data, end)
    return not (line_end.endswith(b"}") and following is not None and data[following.start()] == ord("{"))


# ---------------------------------------------------------------- writing


def _request_dict(r: Request, offset: float, ids: IdWriter) -> dict:
    d: dict = {"t": round(r.t - offset, 6), "type": r.type, "model": r.model, "in": r.isl, "out": r.osl}
    d["hash_ids"] = ids(r.hash_ids)
    for name in ("input_types", "output_types"):
        value = getattr(r, name)
        if value is not None:
            d[name] = list(value)
    for name in ("stop", "api_time", "think_time", "ttft"):
        value = getattr(r, name)
        if value is not None:
            d[name] = value
    if r.segments is not None:
        d["segments"] = [[g.kind, g.tokens, g.tool] if g.tool else [g.kind, g.tokens] for g in r.segments]
    return d


def _subagent_dict(s: Stream, basis: TimeBasis, ids: IdWriter) -> dict:
    # relative basis: a completed entry's `t` is its end
    t = s.spawn if basis == "absolute" or s.kind == "background" else s.end
    offset = 0.0 if basis == "absolute" else s.spawn
    d: dict = {"t": round(t, 6), "type": "subagent"}
    for name in ("agent_id", "subagent_type", "duration_ms", "total_tokens", "tool_use_count", "status"):
        d[name] = getattr(s, name)
    for name in ("models", "tool_tokens", "system_tokens"):
        value = getattr(s, name)
        if value is not None:
            d[name] = list(value) if name == "models" else value
    d["requests"] = _entries(list(s.requests), list(s.children), offset, basis, ids)
    return d


def _entries(requests: list[Request], children: list[Stream], offset: float, basis, ids) -> list[dict]:
    """Requests and subagent entries interleaved in time (a subagent at its spawn)."""
    items = [(r.t, 0, i, r) for i, r in enumerate(requests)]
    items += [(s.spawn, 1, i, s) for i, s in enumerate(children)]
    items.sort(key=lambda x: x[:3])
    out = []
    for _, kind, _, item in items:
        out.append(_request_dict(item, offset, ids) if kind == 0 else _subagent_dict(item, basis, ids))
    return out


def session_to_weka(session: Session, basis: TimeBasis = "absolute") -> bytes:
    """Encode one session as a WEKA JSON object (no trailing newline)."""
    ids = IdWriter()
    top = [r for s in session.streams for r in s.requests]
    children = [c for s in session.streams for c in s.children]
    doc = {
        "id": session.id,
        "models": list(session.models),
        "block_size": session.block_size,
        "hash_id_scope": session.hash_id_scope,
        "tool_tokens": session.tool_tokens,
        "system_tokens": session.system_tokens,
        "requests": _entries(top, children, 0.0, basis, ids),
    }
    if session.provider:
        doc["provider"] = session.provider
    return msgspec.json.encode(doc)


def write_weka(sessions: list[Session], path: str | Path, basis: TimeBasis = "absolute") -> None:
    """Write one session as a JSON object, or several as JSONL."""
    path = Path(path)
    with path.open("wb") as f:
        if len(sessions) == 1:
            f.write(session_to_weka(sessions[0], basis))
            f.write(b"\n")
        else:
            for s in sessions:
                f.write(session_to_weka(s, basis))
                f.write(b"\n")
