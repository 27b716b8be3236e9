"""Shared reading for row-per-request JSONL formats (Mooncake, Qwen-Bailian)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, TypeVar

import msgspec
import numpy as np

from agentx.errors import TraceError
from agentx.traces.model import Request, Session, ids_array, make_session, request_problem
from agentx.traces.source import decode, read_trace_bytes

T = TypeVar("T")


def read_rows(path: str | Path, row_type: type[T], block_size: int) -> Iterator[tuple[int, T]]:
    """(line number, decoded row) for every non-blank line; errors name file, line and field.

    Rows have `input_length` and `hash_ids` (the partial last block has an id too), checked
    against the trace model's bounds here."""
    data = read_trace_bytes(path)
    decoder = msgspec.json.Decoder(row_type)
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        row = decode(decoder, line, str(path), f"line {n}")
        problem = request_problem(row.input_length, len(row.hash_ids), block_size, True)
        if problem:
            field = "input_length" if problem[0] == "in" else problem[0]
            raise TraceError(str(path), f"line {n} {field}", problem[1])
        yield n, row


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
