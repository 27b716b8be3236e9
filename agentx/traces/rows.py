"""Shared reading for row-per-request JSONL formats (Mooncake, Bailian, agentic Mooncake, TraceLab, TRIE,
rollouts)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, TypeVar

import msgspec
import numpy as np

from agentx.errors import TraceError
from agentx.traces.model import Request, Session, ids_array, make_session, request_problem, time_problem
from agentx.traces.source import decode, trace_lines

T = TypeVar("T")


def decode_rows(path: str | Path, row_type: type[T], data: bytes | None = None) -> Iterator[tuple[int, T]]:
    """(line number, decoded row) for every non-blank line of the file, read line by line (or of
    its `data`, already read with `read_trace_bytes`); errors name file, line and field."""
    decoder = msgspec.json.Decoder(row_type)
    lines = trace_lines(path) if data is None else ((n, line) for n, line in enumerate(data.splitlines(), 1)
                                                     if line.strip())
    for n, line in lines:
        yield n, decode(decoder, line, str(path), f"line {n}")


def read_rows(path: str | Path, row_type: type[T], block_size: int) -> Iterator[tuple[int, T]]:
    """`decode_rows` of rows with `input_length` and `hash_ids` (the partial last block has an
    id too), each request checked against the trace model's bounds."""
    for n, row in decode_rows(path, row_type):
        check_request(path, f"line {n}", "input_length", row.input_length, len(row.hash_ids), block_size, True)
        yield n, row


def check_request(path: str | Path, record: str, isl_field: str, isl: int, n_ids: int, block_size: int,
                  partial_block_ids: bool) -> None:
    """The model's `request_problem` as a TraceError naming the reader's own field."""
    problem = request_problem(isl, n_ids, block_size, partial_block_ids)
    if problem:
        raise TraceError(str(path), f"{record} {isl_field if problem[0] == 'in' else problem[0]}", problem[1])


def check_time(path: str | Path, record: str, t: float) -> None:
    """The model's `time_problem` (a time the reader summed) as a TraceError."""
    problem = time_problem(t)
    if problem:
        raise TraceError(str(path), record, problem)


def row_ids(values: list[int]) -> np.ndarray:
    return ids_array(np.array(values, dtype=np.uint64)) if values else ids_array([])


def encode_rows(rows: list[dict]) -> bytes:
    encoder = msgspec.json.Encoder()
    return b"".join(encoder.encode(r) + b"\n" for r in rows)


def row_session(requests: list[Request], id: str, block_size: int, start: float) -> Session:
    """A session of a row format: global hash ids whose last partial block has an id too."""
    return make_session(
        requests, [], id=id, block_size=block_size, hash_id_scope="global", start=start, partial_block_ids=True
    )
