"""Raw recordings: one SQLite database in WAL mode, one row per proxied API request.

A row is inserted when the request arrives and completed when its response ends; the
completion is committed before the proxy closes the response to the agent, so a crash loses
nothing already answered (an interrupted request keeps its row with `status` NULL). All
writes go through one thread with its own connection, in arrival order, so the proxy's event
loop never waits on the disk while bytes are flowing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from agentx.errors import AgentxError

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    api TEXT NOT NULL,           -- messages | chat | completions
    path TEXT NOT NULL,
    session_id TEXT,
    agent_id TEXT,
    request_id TEXT,
    start REAL NOT NULL,         -- wall clock, unix seconds
    first_byte REAL,             -- first response byte from upstream
    first_token REAL,            -- first content event (streamed responses)
    end REAL,
    status INTEGER,              -- HTTP status; NULL while in flight or when none came
    error TEXT,                  -- upstream_unreachable, upstream_disconnected, client_disconnected
    stream INTEGER NOT NULL,
    request_headers TEXT NOT NULL,   -- JSON, secrets dropped
    request_body BLOB NOT NULL,      -- JSON, secret fields dropped
    response_headers TEXT,
    response TEXT,               -- JSON: the reassembled answer (text, tool calls, usage, stop)
    response_bytes INTEGER,
    response_sha256 TEXT
);
CREATE INDEX IF NOT EXISTS requests_session ON requests (session_id, start);
"""

COLUMNS = ("id", "api", "path", "session_id", "agent_id", "request_id", "start", "first_byte", "first_token",
           "end", "status", "error", "stream", "request_headers", "request_body", "response_headers", "response",
           "response_bytes", "response_sha256")


@dataclass(frozen=True, slots=True)
class Row:
    id: int
    api: str
    path: str
    session_id: str | None
    agent_id: str | None
    request_id: str | None
    start: float
    first_byte: float | None
    first_token: float | None
    end: float | None
    status: int | None
    error: str | None
    stream: bool
    request_headers: str
    request_body: bytes
    response_headers: str | None
    response: str | None
    response_bytes: int | None
    response_sha256: str | None


def connect(path: str | Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a process crash loses no commit
        db.execute("PRAGMA busy_timeout=10000")
        db.executescript(SCHEMA)
    except sqlite3.Error as e:
        raise AgentxError(f"{path}: cannot open the capture store: {e}") from None
    return db


class StoreWriter:
    """Asynchronous writes to the store from an event loop, in order, on one thread."""

    def __init__(self, path: str | Path):
        self.path = path
        self._db = connect(path)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentx-store")

    def begin(self, make_row: Callable[[], dict]) -> Future:
        """Queue the row of an arriving request; `make_row` runs on the writer thread (parsing and
        scrubbing happen there, off the event loop). The future gives the row id."""

        def insert():
            fields = make_row()
            sql = f"INSERT INTO requests ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))})"
            return self._db.execute(sql, tuple(fields.values())).lastrowid

        return self._pool.submit(insert)

    async def finish(self, row: Future, make_fields: Callable[[], dict]) -> None:
        """Complete a row begun earlier (the same thread ran its insert first); returns once committed."""

        def update():
            fields = make_fields()
            sql = f"UPDATE requests SET {', '.join(f'{k} = ?' for k in fields)} WHERE id = ?"
            self._db.execute(sql, (*fields.values(), row.result()))

        await asyncio.get_running_loop().run_in_executor(self._pool, update)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._db.close()


def read_rows(path: str | Path, ids: list[int] | None = None) -> Iterator[Row]:
    """Recorded requests in arrival order: all of them, or those with the given row ids."""
    if not Path(path).is_file():
        raise AgentxError(f"{path}: no such capture store")
    db = connect(path)
    select = f"SELECT {', '.join(COLUMNS)} FROM requests"
    try:
        if ids is None:
            rows = db.execute(select + " ORDER BY start, id")
        else:
            rows = []
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                rows += db.execute(f"{select} WHERE id IN ({', '.join('?' * len(chunk))})", chunk).fetchall()
            rows.sort(key=lambda values: (values[6], values[0]))
        for values in rows:
            values = list(values)
            values[12] = bool(values[12])
            yield Row(*values)
    finally:
        db.close()
