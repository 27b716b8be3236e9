"""Reading a trace file's bytes and decoding its JSON: every failure is one TraceError line.

Shared by every reader, so each handles the same hostile inputs the same way: an unreadable
or empty file, UTF-16 text, a UTF-8 byte-order mark (skipped), malformed JSON, values of the
wrong type or outside the trace model's bounds, and nesting too deep for the decoder.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentx.errors import TraceError

_BOM = b"\xef\xbb\xbf"


def read_trace_bytes(path: str | Path) -> bytes:
    """The file's bytes without a UTF-8 byte-order mark; empty, unreadable and UTF-16 files raise."""
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(file, "", f"cannot read: {exc.strerror or exc}") from None
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(data) > 1 and (data[0] == 0 or data[1] == 0)):
        raise TraceError(file, "", "UTF-16 (or binary) text: trace files must be UTF-8 JSON")
    if not data or data.isspace():
        raise TraceError(file, "", "empty file")
    return data


def decode(decoder: msgspec.json.Decoder, data: bytes, file: str, record: str):
    """Decode one JSON document; errors name the file, the record and the field."""
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, file, record) from None
    except msgspec.DecodeError as exc:
        raise TraceError(file, record, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise TraceError(file, record, "JSON nested too deeply") from None


def convert(cells: dict[str, str | None], row_type: type, file: str, record: str):
    """A text record (a CSV row) as `row_type`, numbers parsed from their text and held to the
    same bounds as JSON; errors name the file, the record and the column, and quote the cell."""
    try:
        return msgspec.convert(cells, row_type, strict=False)
    except msgspec.ValidationError as exc:
        error = _invalid(exc, file, record)
        column = error.record.rpartition(" ")[2]
        if column in cells:
            cell = "missing cell" if cells[column] is None else f"cell {cells[column]!r}"
            error = TraceError(file, error.record, f"{cell}: {error.problem}")
        raise error from None


def _invalid(exc: msgspec.ValidationError, file: str, record: str) -> TraceError:
    message, _, path = str(exc).rpartition(" - at `")
    field = path.rstrip("`").replace("$.", "", 1).replace("$", "", 1) if message else ""
    return TraceError(file, f"{record} {field}".strip(), message or str(exc))
