"""Qwen-Bailian JSONL: `chat_id`, `parent_chat_id` (-1 for a first turn), `timestamp` (s),
`input_length`, `output_length`, `type`, `turn`, `hash_ids` (16-token blocks, the partial
last block included). A session is a chain of chats linked by `parent_chat_id`."""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentx.errors import TraceError
from agentx.traces.blocks import Reblocker
from agentx.traces.model import Count, HashId, Name, RecordId, Request, Seconds, Session, Tokens
from agentx.traces.rows import encode_rows, read_rows, row_ids, row_session

BLOCK_SIZE = 16


class Row(msgspec.Struct):
    chat_id: RecordId
    timestamp: Seconds
    input_length: Tokens
    output_length: Tokens
    parent_chat_id: RecordId = -1
    type: Name = "text"
    turn: Count = 1
    hash_ids: list[HashId] = []


def read_bailian(path: str | Path, warn=None) -> list[Session]:
    rows = {}
    for n, row in read_rows(path, Row, BLOCK_SIZE):
        if row.chat_id in rows:
            raise TraceError(str(path), f"line {n} chat_id", f"duplicate chat_id {row.chat_id}")
        rows[row.chat_id] = (n, row)
    sessions_rows: dict[int, list[Row]] = {}
    root_of: dict[int, int] = {}  # chat id -> its session's root: each chain is walked once (linear)
    for chat_id, (n, row) in rows.items():
        cur, walked = row, {}  # a dict: ordered, and a constant-time cycle check
        while cur.chat_id not in root_of:
            if cur.parent_chat_id == -1 or cur.parent_chat_id not in rows:
                root_of[cur.chat_id] = cur.chat_id
                break
            walked[cur.chat_id] = None
            cur = rows[cur.parent_chat_id][1]
            if cur.chat_id in walked:
                raise TraceError(str(path), f"line {n} parent_chat_id", "parent_chat_id forms a cycle")
        root = root_of[cur.chat_id]
        for c in walked:
            root_of[c] = root
        sessions_rows.setdefault(root, []).append(row)
    sessions = []
    for root_id, chat in sessions_rows.items():
        chat.sort(key=lambda r: (r.timestamp, r.turn))
        start = chat[0].timestamp
        requests = [
            Request(
                t=round(r.timestamp - start, 6),
                model="",
                isl=r.input_length,
                osl=r.output_length,
                hash_ids=row_ids(r.hash_ids),
                input_types=(r.type,),
            )
            for r in chat
        ]
        sessions.append(row_session(requests, str(root_id), BLOCK_SIZE, start))
    sessions.sort(key=lambda s: s.start)
    return sessions


def write_bailian(sessions: list[Session], path: str | Path) -> None:
    """Write rows; a numeric session id stays its first chat's `chat_id`, so ids round-trip."""
    roots = {s.id: int(s.id) for s in sessions if s.id.isdigit()}
    next_id = max(roots.values(), default=-1) + 1
    rows = []
    reblock = Reblocker(BLOCK_SIZE, partial_block_ids=True)
    for s in sessions:
        ids = reblock.session(s)
        parent = -1
        for turn, r in enumerate(sorted(s.requests(), key=lambda r: r.t), 1):
            if turn == 1 and s.id in roots:
                chat_id = roots[s.id]
            else:
                chat_id, next_id = next_id, next_id + 1
            rows.append(
                {
                    "chat_id": chat_id,
                    "parent_chat_id": parent,
                    "timestamp": round(s.start + r.t, 6),
                    "input_length": r.isl,
                    "output_length": r.osl,
                    "type": (r.input_types or ("text",))[0],
                    "turn": turn,
                    "hash_ids": ids[id(r)],
                }
            )
            parent = chat_id
    rows.sort(key=lambda row: row["timestamp"])
    Path(path).write_bytes(encode_rows(rows))
