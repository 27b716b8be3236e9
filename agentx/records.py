"""One record per request, appended as each request ends (crash-safe), Parquet after the run;
and the one reader of a run folder's JSON-lines files (records, trees, scraped metrics).

`records.jsonl` is written unbuffered, a line per request: a run killed with SIGKILL loses only
what was in flight. It stays the source of truth (`agentx report` reads it, also from a killed
run); a finished run adds `records.parquet` for fast loading in analysis tools. Times are
seconds from the run's start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    chunks: int = 0  # chunks that carried output (reasoning or content)
    reasoning: int | None = None  # reasoning tokens of the answer (usage details, else chunks; None: none seen)
    finish_reason: str | None = None
    status: int = 0
    error: str | None = None
    detail: str | None = None
    chunk_times: list[float] | None = None  # seconds from start, only with --keep-chunks
    # agentx-sim only (its `agentx_sim` object): what the engine modeled, in modeled seconds
    modeled_ttft: float | None = None
    modeled_e2el: float | None = None
    sim_first_lag: float | None = None  # the sim wrote the first token this late (modeled s)
    sim_last_lag: float | None = None  # and the last one

    @property
    def output_tokens(self) -> int:
        """OSL: the server's count, else the output chunks counted (SPEC section 3)."""
        return self.osl if self.osl is not None else self.chunks

    @property
    def itl(self) -> float | None:
        """Inter-token latency (E2E - TTFT) / (OSL - 1); None without a TTFT or below 2 tokens."""
        osl = self.output_tokens
        return (self.end - self.start - self.ttft) / (osl - 1) if self.ttft is not None and osl >= 2 else None


_encode = msgspec.json.Encoder().encode


class RecordWriter:
    def __init__(self, folder: Path):
        self.path = folder / "records.jsonl"
        self.file = open(self.path, "ab", buffering=0)

    def write(self, record: Record) -> None:
        self.file.write(_encode(record) + b"\n")

    def close(self) -> None:
        self.file.close()


def read_jsonl(path: Path, type=Any) -> list:
    """Every line of a JSON-lines file a run appends to, decoded as `type`. The last line of a
    killed run may be torn: it is skipped; a bad line anywhere else is an error."""
    return [value for _, value in iter_jsonl(path, type)]


def iter_jsonl(path: Path, type=Any):
    """(byte offset, value) of each line of `read_jsonl`, one line in memory at a time (a run
    folder's series holds hundreds of MB; the reports keep only the rows they read)."""
    decoder = msgspec.json.Decoder(type)
    offset = 0
    with open(path, "rb") as f:
        for i, line in enumerate(f):
            at, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                value = decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                if not f.read(1):
                    return  # the line being written when the run was killed
                raise AgentxError(f"{path}: line {i + 1}: {e}") from None
            yield at, value


class Head(msgspec.Struct):
    """A series row's time and phase, the rest of it skipped unread (server_metrics.jsonl,
    power.jsonl: the reports keep only some rows of an hour's hundreds of MB)."""

    t: float
    phase: str


def read_line(path: Path, offset: int, type=Any):
    """The line of a JSON-lines file at a byte offset (from `iter_jsonl`), decoded as `type`."""
    with open(path, "rb") as f:
        f.seek(offset)
        return msgspec.json.decode(f.readline(), type=type)


def read_records(folder: Path) -> list[Record]:
    """All records of a run folder (a torn last line of a killed run is skipped)."""
    path = folder / "records.jsonl"
    if not path.exists():
        raise AgentxError(f"{folder}: no records.jsonl (not a run folder?)")
    return read_jsonl(path, Record)


CSV_FIELDS = tuple(f for f in Record.__struct_fields__ if f != "chunk_times") + ("e2el_s", "itl_s")


def write_csv(records: list[Record], folder: Path) -> Path:
    """records.csv: a row per request (every field but chunk times, plus E2E latency and the
    inter-token latency (E2E - TTFT) / (OSL - 1)), for spreadsheets and pandas."""
    import csv

    path = folder / "records.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(CSV_FIELDS)
        for r in records:
            row = [getattr(r, k) for k in CSV_FIELDS[:-2]] + [r.end - r.start, r.itl]
            out.writerow(["" if v is None else v for v in row])
    return path


def write_parquet(records: list[Record], folder: Path) -> Path:
    """records.parquet beside the JSONL."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({f: [getattr(r, f) for r in records] for f in Record.__struct_fields__})
    path = folder / "records.parquet"
    pq.write_table(table, path)
    return path
