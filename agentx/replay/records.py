"""One record per request, appended as each request ends (crash-safe), Parquet after the run.

`records.jsonl` is written unbuffered, a line per request: a run killed with SIGKILL loses only
what was in flight. It stays the source of truth (`agentx report` reads it, also from a killed
run); a finished run adds `records.parquet` for fast loading in analysis tools. Times are
seconds from the run's start.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentx.errors import AgentxError


class Record(msgspec.Struct, omit_defaults=True):
    run: str
    lane: int
    tree: int  # tree uid within the run
    replay: int  # the lane's replay count
    session: str
    stream: int
    stream_kind: str
    node: int
    phase: str  # warmup | profile
    planned: float  # when the plan wanted it sent
    start: float
    end: float
    isl_planned: int
    osl_planned: int
    theo_cached: int  # prompt tokens an infinite prefix cache would hold (same tree, sent before)
    ttft: float | None = None  # seconds from start to the first output chunk
    isl: int | None = None  # server-reported prompt tokens
    osl: int | None = None  # server-reported completion tokens, else chunks counted
    cached: int | None = None  # server-reported cached prompt tokens (None: not reported)
    chunks: int = 0
    finish_reason: str | None = None
    status: int = 0
    error: str | None = None
    detail: str | None = None
    chunk_times: list[float] | None = None  # seconds from start, only with --keep-chunks


_encode = msgspec.json.Encoder().encode


class RecordWriter:
    def __init__(self, folder: Path):
        self.path = folder / "records.jsonl"
        self.file = open(self.path, "ab", buffering=0)

    def write(self, record: Record) -> None:
        self.file.write(_encode(record) + b"\n")

    def close(self) -> None:
        self.file.close()


def read_records(folder: Path) -> list[Record]:
    """All records of a run folder (a torn last line of a killed run is skipped)."""
    path = folder / "records.jsonl"
    if not path.exists():
        raise AgentxError(f"{folder}: no records.jsonl (not a run folder?)")
    decoder = msgspec.json.Decoder(Record)
    out = []
    lines = path.read_bytes().split(b"\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(decoder.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            if i == len(lines) or (i == len(lines) - 1 and not lines[-1]):
                break  # the line being written when the run was killed
            raise AgentxError(f"{path}: line {i}: {e}") from None
    return out


def write_parquet(records: list[Record], folder: Path) -> Path:
    """records.parquet beside the JSONL."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({f: [getattr(r, f) for r in records] for f in Record.__struct_fields__})
    path = folder / "records.parquet"
    pq.write_table(table, path)
    return path
