"""Mooncake JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (512-token
blocks, the partial last block included). One request per session unless rows carry a
`session_id`, which groups them (SPEC §1)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentx.traces.blocks import Reblocker
from agentx.traces.model import HashId, Millis, Name, RecordId, Request, Session, Tokens
from agentx.traces.rows import encode_rows, read_rows, row_ids, row_session

BLOCK_SIZE = 512


class Row(msgspec.Struct):
    timestamp: Millis
    input_length: Tokens
    output_length: Tokens
    hash_ids: list[HashId] = []
    session_id: Name | RecordId | None = None
    model: Name = ""


def read_mooncake(path: str | Path, warn=None) -> list[Session]:
    stem = Path(path).name.split(".")[0]
    groups: dict[object, list[tuple[int, Row]]] = {}
    for n, row in read_rows(path, Row, BLOCK_SIZE):
        key = ("s", row.session_id) if row.session_id is not None else ("l", n)
        groups.setdefault(key, []).append((n, row))
    sessions = []
    for key, rows in groups.items():
        start = min(r.timestamp for _, r in rows) / 1000.0
        requests = [
            Request(
                t=round(r.timestamp / 1000.0 - start, 6),
                model=r.model,
                isl=r.input_length,
                osl=r.output_length,
                hash_ids=row_ids(r.hash_ids),
            )
            for _, r in rows
        ]
        sid = str(key[1]) if key[0] == "s" else f"{stem}-{key[1]}"
        sessions.append(row_session(requests, sid, BLOCK_SIZE, start))
    sessions.sort(key=lambda s: s.start)
    return sessions


def write_mooncake(sessions: list[Session], path: str | Path) -> None:
    rows = []
    reblock = Reblocker(BLOCK_SIZE, partial_block_ids=True)
    for s in sessions:
        ids = reblock.session(s)
        grouped = s.n_requests > 1
        for r in s.requests():
            row = {
                "timestamp": round((s.start + r.t) * 1000.0, 3),
                "input_length": r.isl,
                "output_length": r.osl,
                "hash_ids": ids[id(r)],
            }
            if grouped:
                row["session_id"] = s.id
            if r.model:
                row["model"] = r.model
            rows.append(row)
    rows.sort(key=lambda row: row["timestamp"])
    Path(path).write_bytes(encode_rows(rows))
