"""Shared reading for row-per-request JSONL formats (Mooncake, Qwen-Bailian)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, TypeVar

import msgspec
import numpy as np

from agentx.errors import TraceError
from agentx.traces.model import Request, Session, ids_array, make_session

T = TypeVar("T")


def read_rows(path: str | Path, row_type: type[T]) -> Iterator[tuple[int, T]]:
    """(line number, decoded row) for every non-blank line; errors name file, line and field."""
    path = Path(path)
    data = path.read_bytes()
    if not data or data.isspace():
        raise TraceError(str(path), "", "empty file")
    decoder = msgspec.json.Decoder(row_type)
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, decoder.decode(line)
        except msgspec.ValidationError as exc:
            text = str(exc)
            message, _, field = text.rpartition(" - at `")
            field = field.rstrip("`").replace("$.", "", 1).replace("$", "", 1)
            raise TraceError(str(path), f"line {n} {field}".strip(), message or text) from None
        except msgspec.DecodeError as exc:
            raise TraceError(str(path), f"line {n}", f"invalid JSON: {exc}") from None


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
