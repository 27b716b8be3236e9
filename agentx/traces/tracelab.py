"""TraceLab (UW SyFI) coding-agent traces: normalized round rows (JSONL) and the multi-round CSV.

Round rows (one LLM call each): `session_id`, `round_index`, `provider` (claude / codex),
`model`, `input_tokens_total`, `prefix_tokens` (served from the provider's prompt cache),
`newly_append_tokens`, `output_tokens`, `reasoning_output_tokens`, `timing_events[]`
(`event_type`, ISO `timestamp`) and `tools[]` (`tool_wall_latency_ms`, ...).
CSV: `id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len`, where
`input_len` is the newly appended part and `arrival_time` (ms) the session's synthetic arrival.

Neither carries block hashes: ids are synthesized from the prefix lengths (`prefix.py`), 64-token
blocks, one id space per session. Each session is one main stream (SPEC §1).
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from agentx.errors import TraceError
from agentx.traces.graph import chain_gap
from agentx.traces.model import Count, Millis, Name, Request, Session, Stream, Tokens
from agentx.traces.prefix import IdCounter, PrefixChain
from agentx.traces.rows import check_request, check_time, decode_rows, encode_rows
from agentx.traces.source import convert, read_trace_bytes

BLOCK_SIZE = 64
CSV_FIELDS = ("id", "input_len", "output_len", "arrival_time", "round_idx", "tool_wait_after_ms", "prefix_len")
# TraceLab's replayer reads `session_id` (or `id`), and `arrival_time` when present (else 0 ms)
CSV_ALIASES = {"session_id": "id"}
CSV_DEFAULTS = {"arrival_time": "0"}
SUBAGENT_SEP = "/subagents/"  # TraceLab's session id of a Claude Code subagent: PARENT/subagents/AGENT
_INPUT_EVENTS = {"user_message": "text", "tool_result": "tool_result"}
_OUTPUT_EVENTS = {"reasoning": "thinking", "text": "text", "tool_call": "tool_use", "usage_report": None}


class Event(msgspec.Struct):
    event_type: Name = ""
    timestamp: Name | None = None


class Tool(msgspec.Struct):
    tool_wall_latency_ms: Millis | None = None


class Round(msgspec.Struct):
    session_id: Name
    input_tokens_total: Tokens
    output_tokens: Tokens
    round_index: Count | None = None
    provider: Name | None = None
    model: Name | None = None
    prefix_tokens: Tokens = 0
    timing_events: list[Event] = []
    tools: list[Tool] = []


class CsvRow(msgspec.Struct):
    """One CSV line, its cells held to the trace model's bounds as JSON numbers are."""

    id: Name
    input_len: Tokens
    output_len: Tokens
    arrival_time: Millis
    round_idx: Count
    tool_wait_after_ms: Millis
    prefix_len: Tokens


def read_tracelab(path: str | Path, warn=None) -> list[Session]:
    path = Path(path)
    data = read_trace_bytes(path)
    return _read_csv(path, data) if is_tracelab_csv(data) else _read_rounds(path, data)


def is_tracelab_csv(data: bytes) -> bool:
    """A TraceLab multi-round CSV: a header whose first column names the session (`id`, or
    `session_id` as TraceLab's replayer writes it) and that names one of the round columns
    (the reader says which others are missing; `arrival_time` may be absent)."""
    header = data.removeprefix(b"\xef\xbb\xbf").lstrip()[:1024].split(b"\n", 1)[0]
    names = [CSV_ALIASES.get(c.strip(), c.strip()) for c in header.decode(errors="replace").split(",")]
    return names[0] == "id" and bool(set(names[1:]) & set(CSV_FIELDS))


def _stamp(text: str | None, path: Path, record: str) -> float | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError):
        raise TraceError(str(path), record, f"not an ISO time: {text!r}") from None


def _read_rounds(path: Path, data: bytes) -> list[Session]:
    groups: dict[str, list[tuple[int, Round]]] = {}
    for n, row in decode_rows(path, Round, data):
        check_request(path, f"line {n}", "input_tokens_total", row.input_tokens_total, 0, BLOCK_SIZE, False)
        if row.prefix_tokens > row.input_tokens_total:
            raise TraceError(str(path), f"line {n} prefix_tokens",
                             f"{row.prefix_tokens} is more than input_tokens_total {row.input_tokens_total}")
        groups.setdefault(row.session_id, []).append((n, row))
    sessions = {}
    for sid, rows in groups.items():
        rows.sort(key=lambda nr: (nr[1].round_index if nr[1].round_index is not None else nr[0], nr[0]))
        sessions[sid] = _rounds_session(path, sid, rows)
    return sorted(_with_subagents(sessions), key=lambda s: (s.start, s.id))


def _with_subagents(sessions: dict[str, Session]) -> list[Session]:
    """TraceLab names a Claude Code subagent's rounds `PARENT/subagents/AGENT`: where PARENT is in
    the file, the subagent is a subagent stream of its main stream, spawned at its first round."""
    children: dict[str, list[tuple[Stream, tuple]]] = {}
    for sid, sub in list(sessions.items()):
        parent_id, sep, agent = sid.partition(SUBAGENT_SEP)
        parent = sessions.get(parent_id)
        if not sep or parent is None or not sub.main.requests:
            continue
        shift = sub.start - parent.start
        requests = tuple(replace(r, t=round(r.t + shift, 6)) for r in sub.main.requests)
        stream = Stream(kind="subagent", requests=requests, spawn=requests[0].t, agent_id=agent)
        children.setdefault(parent_id, []).append((stream, sub.source_hit))
        del sessions[sid]
    out = []
    for sid, session in sessions.items():
        subs = children.get(sid)
        if subs:
            main = replace(session.main, children=tuple(sorted((c for c, _ in subs), key=lambda c: c.spawn)))
            rule, hit, isl = session.source_hit  # the subagents' recorded prefixes count for the tree
            hit, isl = hit + sum(h[1] for _, h in subs), isl + sum(h[2] for _, h in subs)
            session = replace(session, streams=(main, *session.streams[1:]), source_hit=(rule, hit, isl))
        out.append(session)
    return out


def _round_times(path: Path, n: int, row: Round) -> tuple[float | None, float | None, tuple, tuple]:
    """(start, end, input types, output types) from the round's timing events."""
    start = end = first = None
    inputs, outputs = set(), set()
    for i, ev in enumerate(row.timing_events):
        t = _stamp(ev.timestamp, path, f"line {n} timing_events[{i}].timestamp")
        if ev.event_type in _INPUT_EVENTS:
            inputs.add(_INPUT_EVENTS[ev.event_type])
            start = t if t is not None else start
        elif ev.event_type in _OUTPUT_EVENTS:
            if _OUTPUT_EVENTS[ev.event_type]:
                outputs.add(_OUTPUT_EVENTS[ev.event_type])
            end = t if t is not None else end
        if first is None and t is not None:
            first = t
    return (start if start is not None else first), end, tuple(sorted(inputs)), tuple(sorted(outputs))


def _rounds_session(path: Path, sid: str, rows: list[tuple[int, Round]]) -> Session:
    chain = PrefixChain(BLOCK_SIZE, IdCounter())
    timed = [(n, row, *_round_times(path, n, row)) for n, row in rows]
    t0 = min((start for _, _, start, *_ in timed if start is not None), default=0.0)
    requests, clock, gap = [], 0.0, 0.0
    for n, row, start, end, inputs, outputs in timed:
        t = clock + gap if start is None else max(start - t0, clock)  # untimed: after the last tool wait
        api = round(end - t0 - t, 6) if start is not None and end is not None and end - t0 >= t else None
        check_time(path, f"line {n} {'timing_events' if start is not None else 'tools'}", t + (api or 0.0))
        requests.append(Request(
            t=round(t, 6), model=row.model or "", isl=row.input_tokens_total, osl=row.output_tokens,
            hash_ids=chain.next(row.input_tokens_total, row.prefix_tokens),
            think_time=round(gap, 6) if start is None and requests else None, api_time=api,
            input_types=inputs or None, output_types=outputs or None))
        clock = round(t, 6)
        gap = sum(tool.tool_wall_latency_ms or 0.0 for tool in row.tools) / 1000.0
    providers = {row.provider for _, row in rows if row.provider}
    recorded = sum(row.prefix_tokens for _, row in rows)
    return _session(sid, requests, t0, providers.pop() if len(providers) == 1 else None, recorded)


def _session(sid: str, requests: list[Request], start: float, provider: str | None, recorded: int) -> Session:
    """`recorded`: the prefix tokens the rows record as cached (TraceLab's hit rule counts them all,
    round 0's too: a provider cache warm from other sessions)."""
    main = Stream(kind="main", requests=tuple(requests), spawn=requests[0].t if requests else 0.0)
    models = tuple(sorted({r.model for r in requests if r.model}))
    return Session(id=sid, block_size=BLOCK_SIZE, hash_id_scope="local", streams=(main,), models=models,
                   start=start, provider=provider, source_hit=("tracelab", recorded, sum(r.isl for r in requests)))


def _csv_rows(path: Path, data: bytes):
    """(line number, CsvRow) of every data line; errors name the file, the line and the column."""
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise TraceError(str(path), "", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        names = [CSV_ALIASES.get(c, c) for c in reader.fieldnames or ()]
        missing = [c for c in CSV_FIELDS if c not in names and c not in CSV_DEFAULTS]
        if missing:
            raise TraceError(str(path), "line 1", f"missing column(s) {', '.join(missing)}")
        reader.fieldnames = names
        for cells in reader:
            n = reader.line_num
            if None in cells:
                raise TraceError(str(path), f"line {n}", f"more cells than the {len(reader.fieldnames)} columns")
            cells = {**CSV_DEFAULTS, **cells}
            yield n, convert({c: cells[c] for c in CSV_FIELDS}, CsvRow, str(path), f"line {n}")
    except csv.Error as exc:
        raise TraceError(str(path), f"line {reader.line_num}", f"bad CSV: {exc}") from None


def _read_csv(path: Path, data: bytes) -> list[Session]:
    groups: dict[str, list[tuple[int, CsvRow]]] = {}
    for n, row in _csv_rows(path, data):
        check_request(path, f"line {n}", "input_len", row.input_len + row.prefix_len, 0, BLOCK_SIZE, False)
        groups.setdefault(row.id, []).append((n, row))
    if not groups:
        raise TraceError(str(path), "", "no rows")
    sessions = []
    for sid, rows in groups.items():
        rows.sort(key=lambda nr: (nr[1].round_idx, nr[0]))
        chain = PrefixChain(BLOCK_SIZE, IdCounter())
        requests, t, gap = [], 0.0, None
        for n, v in rows:
            isl = v.input_len + v.prefix_len
            requests.append(Request(t=round(t, 6), model="", isl=isl, osl=v.output_len,
                                    hash_ids=chain.next(isl, v.prefix_len), think_time=gap))
            gap = round(v.tool_wait_after_ms / 1000.0, 6)
            t += gap
            check_time(path, f"line {n} tool_wait_after_ms", t)  # waits summed along the session
        sessions.append(_session(sid, requests, rows[0][1].arrival_time / 1000.0, None,
                                 sum(v.prefix_len for _, v in rows)))
    sessions.sort(key=lambda s: (s.start, s.id))
    return sessions


def stream_ids(session: Session) -> list[tuple[str, object]]:
    """(TraceLab session id, stream) of each stream of a session: the main stream keeps the id, a
    subagent (at any depth) is `ID/subagents/agent-K` as TraceLab names Claude Code's, an aux
    chain `ID:K`."""
    out = []
    for k, stream in enumerate(session.walk()):
        if k == 0:
            out.append((session.id, stream))
        elif stream.kind in ("subagent", "background"):
            out.append((f"{session.id}{SUBAGENT_SEP}agent-{k}", stream))
        else:
            out.append((f"{session.id}:{k}", stream))
    return out


def tracelab_losses(sessions: list[Session], csv_file: bool) -> list[str]:
    """What writing these sessions as TraceLab loses, one line each (`trace convert` prints them)."""
    subs = [st for s in sessions for st in s.walk() if st.kind in ("subagent", "background")]
    nested = sum(1 for s in sessions for st in s.walk() for c in st.children if st.kind != "main")
    aux = sum(1 for s in sessions for st in s.streams[1:])
    out = []
    if subs and csv_file:
        out.append(f"{len(subs):,} subagent streams written as sessions of their own (ID{SUBAGENT_SEP}agent-K) at "
                   "their spawn time: the CSV has no session tree, so the parent no longer waits for them")
    elif nested:
        out.append(f"{nested:,} nested subagents hang below the main agent (TraceLab names one level of subagents)")
    background = sum(1 for st in subs if st.kind == "background")
    if background and not csv_file:
        out.append(f"{background:,} background subagent(s) read back as subagents the parent waits for")
    if aux:
        out.append(f"{aux:,} aux chain(s) written as sessions of their own (ID:K)")
    return out


def _rounds_of(sessions: list[Session]):
    """(session id, session, request, position, prefix tokens, replay ISL, gap after, stream
    origin on the corpus timeline) of every request of every stream (ids by `stream_ids`).
    The prefix is the blocks shared with the stream's previous request."""
    for s in sessions:
        for sid, stream in stream_ids(s):
            reqs = stream.requests
            for i, r in enumerate(reqs):
                prefix = 0
                if i:
                    prev = reqs[i - 1].hash_ids
                    m = min(len(prev), len(r.hash_ids))
                    diff = (prev[:m] != r.hash_ids[:m]).nonzero()[0]
                    prefix = int(diff[0] if len(diff) else m) * s.block_size
                gap = 0.0 if i + 1 == len(reqs) else chain_gap(r, reqs[i + 1])
                origin = s.start + reqs[0].t
                yield sid, s, r, i, prefix, s.replay_isl(r), gap, origin


def write_tracelab(sessions: list[Session], path: str | Path) -> None:
    """A `.csv` path gets the multi-round CSV, anything else round rows (JSONL)."""
    (write_tracelab_csv if Path(path).suffix == ".csv" else write_tracelab_rounds)(sessions, path)


def write_tracelab_csv(sessions: list[Session], path: str | Path) -> None:
    with Path(path).open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(CSV_FIELDS)
        for sid, s, r, i, prefix, isl, gap, origin in _rounds_of(sessions):
            out.writerow([sid, isl - prefix, r.osl, f"{origin * 1000:.6f}", i, f"{gap * 1000:.6f}", prefix])


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def write_tracelab_rounds(sessions: list[Session], path: str | Path) -> None:
    """Round rows: the request's start as its input event, its recorded end (when known) as its
    output events, the gap after it as one tool's wall latency."""
    rows = []
    for sid, s, r, i, prefix, isl, gap, _ in _rounds_of(sessions):
        inputs = [e for e, kind in _INPUT_EVENTS.items() if kind in (r.input_types or ())] or ["user_message"]
        events = [{"event_type": e, "timestamp": _iso(s.start + r.t)} for e in inputs[:1]]
        if r.api_time is not None:
            outputs = [e for e, kind in _OUTPUT_EVENTS.items() if kind and kind in (r.output_types or ())] or ["text"]
            events += [{"event_type": e, "timestamp": _iso(s.start + r.end)} for e in outputs]
        row = {"session_id": sid, "round_index": i, "provider": s.provider, "model": r.model or None,
               "input_tokens_total": isl, "prefix_tokens": prefix, "newly_append_tokens": isl - prefix,
               "output_tokens": r.osl, "timing_events": events,
               "tools": [{"tool_wall_latency_ms": round(gap * 1000.0, 3)}] if gap else []}
        rows.append(row)
    Path(path).write_bytes(encode_rows(rows))
